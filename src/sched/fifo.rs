#![forbid(unsafe_code)]
//! `RunnableFifo`: tasks run in the order they became runnable.

use std::collections::VecDeque;

use super::Scheduler;
use crate::task::id::{GroupId, TaskId};

/// First in, first out by the time a task became runnable: the default
/// scheduler of every queue, and what tokio's `LocalSet` and most executors
/// do. A task woken during its own poll goes behind every task already
/// queued.
#[derive(Debug, Default, Clone)]
pub struct RunnableFifo {
    queue: VecDeque<TaskId>,
}

impl RunnableFifo {
    /// An empty FIFO.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Scheduler for RunnableFifo {
    #[inline]
    fn push(&mut self, task: TaskId, _group: GroupId) {
        self.queue.push_back(task);
    }

    #[inline]
    fn pop(&mut self) -> Option<TaskId> {
        self.queue.pop_front()
    }

    #[inline]
    fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_push_order() {
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        for i in 0..5 {
            f.push(TaskId::new(i, 0), g);
        }
        assert_eq!(f.len(), 5);
        let order: Vec<u32> = std::iter::from_fn(|| f.pop()).map(|t| t.index()).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert!(f.is_empty());
    }
}
