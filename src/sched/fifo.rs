#![forbid(unsafe_code)]
//! `RunnableFifo`: tasks run in the order they became runnable, on a
//! `VecDeque` of task ids.

use std::cell::Cell;
use std::collections::VecDeque;

use super::scheduler::Scheduler;
use crate::task::id::{GroupId, TaskKey};

/// First in, first out by the time a task became runnable: the default
/// scheduler of every queue, and what tokio's `LocalSet` and most executors
/// do. A task woken during its own poll goes behind every task already
/// queued.
#[derive(Debug, Default, Clone)]
pub struct RunnableFifo {
    ids: VecDeque<TaskKey>,
}

impl RunnableFifo {
    /// An empty FIFO.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the oldest ids, up to `buf.len()`, into `buf` in order and
    /// returns how many. What a run pops next is fixed once pushed (pushes
    /// go behind), so the run loop takes a batch per borrow of the queues
    /// instead of one id (a borrow, a dispatch and a deque pop per poll).
    #[inline]
    pub(crate) fn take_front(&mut self, buf: &[Cell<TaskKey>]) -> usize {
        // No early return for 0 (an empty queue at a run's refill): the
        // loops and `drain(..0)` below do nothing, and the test would cost
        // every batch, a ping-pong's one-id batches included (4 instructions
        // per round trip; callgrind).
        let n = self.ids.len().min(buf.len());
        if n == 1 {
            // One runnable task (a ping-pong): no loops.
            if let Some(id) = self.ids.pop_front() {
                buf[0].set(id);
            }
            return 1;
        }
        let (a, b) = self.ids.as_slices();
        let first = n.min(a.len());
        for (dst, src) in buf[..first].iter().zip(a) {
            dst.set(*src);
        }
        for (dst, src) in buf[first..n].iter().zip(b) {
            dst.set(*src);
        }
        self.ids.drain(..n);
        n
    }

    /// Takes the oldest id when it is the only one (a ping-pong's queue
    /// at a queue switch): [`take_front`](Self::take_front)'s first case,
    /// inlined, without the deque's `pop_front` call.
    #[inline(always)]
    pub(crate) fn take_lone(&mut self) -> Option<TaskKey> {
        if self.ids.len() != 1 {
            return None;
        }
        let id = self.ids.front().copied();
        self.ids.clear();
        id
    }

    /// Whether no task is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Pushes `ids` behind the held ones, in order: one capacity check for
    /// the batch.
    #[inline]
    pub(crate) fn push_back_all(&mut self, ids: &[Cell<TaskKey>]) {
        self.ids.extend(ids.iter().map(Cell::get));
    }

    /// Puts `ids` back in front, in order: undoes a
    /// [`take_front`](Self::take_front) of ids that were not run.
    pub(crate) fn put_front(&mut self, ids: &[Cell<TaskKey>]) {
        self.ids.reserve(ids.len());
        for id in ids.iter().rev() {
            self.ids.push_front(id.get());
        }
    }
}

impl Scheduler for RunnableFifo {
    #[inline]
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        self.ids.push_back(task);
    }

    #[inline]
    fn pop(&mut self) -> Option<TaskKey> {
        self.ids.pop_front()
    }

    #[inline]
    fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops every id of `f`, checking each against `model` (indexes), and
    /// that both end empty.
    fn drains_as(f: &mut RunnableFifo, mut model: std::collections::VecDeque<u32>) {
        while let Some(t) = f.pop() {
            assert_eq!(Some(t.index()), model.pop_front());
        }
        assert!(model.is_empty());
    }

    #[test]
    fn pops_in_push_order() {
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        for i in 0..5 {
            f.push(TaskKey::new(i, 0), g);
        }
        assert_eq!(f.len(), 5);
        let order: Vec<u32> = std::iter::from_fn(|| f.pop()).map(|t| t.index()).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert!(f.is_empty());
    }

    #[test]
    fn keeps_order_across_wrap_and_growth() {
        // Interleave pushes and pops so that the deque wraps, then grow it
        // while wrapped: the order must survive both.
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        let mut model = std::collections::VecDeque::new();
        let mut next = 0u32;
        for round in 0..200u32 {
            for _ in 0..(round % 7 + 1) {
                f.push(TaskKey::new(next, 0), g);
                model.push_back(next);
                next += 1;
            }
            for _ in 0..(round % 5) {
                assert_eq!(f.pop().map(|t| t.index()), model.pop_front());
            }
            assert_eq!(f.len(), model.len());
        }
        drains_as(&mut f, model);
        assert_eq!(f.pop(), None);
    }

    #[test]
    fn take_front_and_put_front_keep_order_across_wrap() {
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        let mut model = std::collections::VecDeque::new();
        let mut next = 0u32;
        let buf: [Cell<TaskKey>; 7] = std::array::from_fn(|_| Cell::new(TaskKey::new(0, 0)));
        for round in 0..300u32 {
            for _ in 0..(round % 9 + 1) {
                f.push(TaskKey::new(next, 0), g);
                model.push_back(next);
                next += 1;
            }
            let n = f.take_front(&buf[..(round as usize % 7) + 1]);
            let taken: Vec<u32> = buf[..n].iter().map(|t| t.get().index()).collect();
            let expect: Vec<u32> = model.drain(..n).collect();
            assert_eq!(taken, expect);
            // Give back a suffix of what was taken, as an ended run does.
            let keep = round as usize % (n + 1);
            f.put_front(&buf[keep..n]);
            for t in buf[keep..n].iter().rev() {
                model.push_front(t.get().index());
            }
            assert_eq!(f.len(), model.len());
        }
        drains_as(&mut f, model);
    }

    /// `take_lone` takes the one queued id, wrapped around the deque's end
    /// or not, and nothing when the deque holds none or more than one.
    #[test]
    fn take_lone_takes_only_a_lone_id() {
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        assert_eq!(f.take_lone(), None);
        f.push(TaskKey::new(1, 0), g);
        f.push(TaskKey::new(2, 0), g);
        assert_eq!(f.take_lone(), None);
        assert_eq!(f.len(), 2);
        // The head goes round the buffer: the lone id below sits
        // wherever the pops left it.
        for i in 3..20 {
            assert_eq!(f.pop().map(|t| t.index()), Some(i - 2));
            f.push(TaskKey::new(i, 0), g);
        }
        assert_eq!(f.pop().map(|t| t.index()), Some(18));
        assert_eq!(f.take_lone().map(|t| t.index()), Some(19));
        assert!(f.is_empty());
        assert_eq!(f.take_lone(), None);
        f.push(TaskKey::new(20, 0), g);
        assert_eq!(f.take_lone().map(|t| t.index()), Some(20));
        assert!(f.is_empty());
    }

    /// A run gives back ids after the deque grew under it (its tasks woke
    /// others), in front of ids pushed since: the order survives the
    /// growth (a case the `api_ops` fuzz target reaches).
    #[test]
    fn put_front_after_growth_keeps_order() {
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        let buf: [Cell<TaskKey>; 4] = std::array::from_fn(|_| Cell::new(TaskKey::new(0, 0)));
        for i in 0..4 {
            f.push(TaskKey::new(i, 0), g);
        }
        assert_eq!(f.take_front(&buf), 4);
        // Polling the first held task woke 20 others: the deque grows.
        for i in 4..24 {
            f.push(TaskKey::new(i, 0), g);
        }
        // The run ends: the three unpolled ids go back in front.
        f.put_front(&buf[1..4]);
        f.push(TaskKey::new(24, 0), g);
        let order: Vec<u32> = std::iter::from_fn(|| f.pop()).map(|t| t.index()).collect();
        let expect: Vec<u32> = (1..25).collect();
        assert_eq!(order, expect);
        // The deque grows again, its ids wrapped around its end.
        for _ in 0..3 {
            assert_eq!(f.take_front(&buf[..1]), 0);
        }
        for i in 0..3 {
            f.push(TaskKey::new(i, 0), g);
        }
        assert_eq!(f.take_front(&buf[..3]), 3);
        f.push_back_all(&buf[..3]);
        f.put_front(&buf[..2]);
        for i in 3..40 {
            f.push(TaskKey::new(i, 0), g);
        }
        let order: Vec<u32> = std::iter::from_fn(|| f.pop()).map(|t| t.index()).collect();
        let mut expect = vec![0, 1, 0, 1, 2];
        expect.extend(3..40);
        assert_eq!(order, expect);
    }

    #[test]
    fn push_back_all_keeps_order_across_wrap_and_growth() {
        let mut f = RunnableFifo::new();
        let mut model = std::collections::VecDeque::new();
        let mut next = 0u32;
        let buf: [Cell<TaskKey>; 11] = std::array::from_fn(|_| Cell::new(TaskKey::new(0, 0)));
        for round in 0..300usize {
            // A batch of 1 to 11 ids behind the queued ones (wrapping the
            // deque, and growing it when it is full) ...
            let n = round % 11 + 1;
            for slot in &buf[..n] {
                slot.set(TaskKey::new(next, 0));
                model.push_back(next);
                next += 1;
            }
            f.push_back_all(&buf[..n]);
            // ... and fewer pops, so that the deque fills up over the rounds.
            for _ in 0..(round % 7) {
                assert_eq!(f.pop().map(|t| t.index()), model.pop_front());
            }
            assert_eq!(f.len(), model.len());
        }
        drains_as(&mut f, model);
    }
}
