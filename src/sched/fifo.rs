#![forbid(unsafe_code)]
//! `RunnableFifo`: tasks run in the order they became runnable: the
//! oldest id in a slot of its own, the others behind it on a `VecDeque`.

use std::cell::Cell;
use std::collections::VecDeque;

use super::scheduler::Scheduler;
use crate::task::id::{GroupId, TaskKey};

/// First in, first out by the time a task became runnable: the default
/// scheduler of every queue, and what tokio's `LocalSet` and most executors
/// do. A task woken during its own poll goes behind every task already
/// queued.
///
/// The oldest id sits in a slot of its own (`head`), the others behind it
/// on a `VecDeque` (`rest`): a queue that holds one task at a time (the
/// two sides of a ping-pong across queues, a task woken by I/O) takes its
/// push and its pop without a deque operation.
#[derive(Debug, Default, Clone)]
pub struct RunnableFifo {
    /// The oldest id; `None` only when the FIFO is empty (then `rest` is
    /// empty too).
    head: Option<TaskKey>,
    /// The ids behind `head`, oldest first.
    rest: VecDeque<TaskKey>,
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
        let Some(first) = buf.first() else {
            return 0;
        };
        let Some(head) = self.head.take() else {
            return 0;
        };
        first.set(head);
        // Behind the head: up to `buf.len() - 1` ids of the deque.
        let n = self.rest.len().min(buf.len() - 1);
        if n != 0 {
            let (a, b) = self.rest.as_slices();
            let buf = &buf[1..=n];
            let split = n.min(a.len());
            for (dst, src) in buf[..split].iter().zip(a) {
                dst.set(*src);
            }
            for (dst, src) in buf[split..].iter().zip(b) {
                dst.set(*src);
            }
            self.rest.drain(..n);
        }
        self.head = self.rest.pop_front();
        n + 1
    }

    /// Takes the oldest id when it is the only one (a ping-pong's queue
    /// at a queue switch): without a deque operation.
    #[inline(always)]
    pub(crate) fn take_lone(&mut self) -> Option<TaskKey> {
        if !self.rest.is_empty() {
            return None;
        }
        self.head.take()
    }

    /// Whether no task is queued.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        debug_assert!(self.head.is_some() || self.rest.is_empty());
        self.head.is_none()
    }

    /// Pushes `ids` behind the held ones, in order: one capacity check for
    /// the batch.
    #[inline]
    pub(crate) fn push_back_all(&mut self, ids: &[Cell<TaskKey>]) {
        let ids = match (self.head, ids.split_first()) {
            (None, Some((first, others))) => {
                self.head = Some(first.get());
                others
            }
            _ => ids,
        };
        self.rest.extend(ids.iter().map(Cell::get));
    }

    /// Puts `ids` back in front, in order: undoes a
    /// [`take_front`](Self::take_front) of ids that were not run.
    pub(crate) fn put_front(&mut self, ids: &[Cell<TaskKey>]) {
        let Some((first, others)) = ids.split_first() else {
            return;
        };
        self.rest.reserve(ids.len());
        if let Some(head) = self.head.replace(first.get()) {
            self.rest.push_front(head);
        }
        for id in others.iter().rev() {
            self.rest.push_front(id.get());
        }
    }
}

impl Scheduler for RunnableFifo {
    #[inline]
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        if self.head.is_none() {
            self.head = Some(task);
        } else {
            self.rest.push_back(task);
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<TaskKey> {
        let head = self.head.take()?;
        self.head = self.rest.pop_front();
        Some(head)
    }

    #[inline]
    fn len(&self) -> usize {
        usize::from(self.head.is_some()) + self.rest.len()
    }

    #[inline]
    fn is_empty(&self) -> bool {
        RunnableFifo::is_empty(self)
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

    /// Every operation, in a long pseudo-random sequence that keeps the
    /// FIFO near empty (where the head slot and the deque hand over), agrees
    /// with a `VecDeque` model: the order, `len`, `is_empty`.
    #[test]
    fn head_slot_agrees_with_a_deque_model() {
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        let mut model = std::collections::VecDeque::new();
        let buf: [Cell<TaskKey>; 5] = std::array::from_fn(|_| Cell::new(TaskKey::new(0, 0)));
        let mut next = 0u32;
        // A linear congruential generator: the same sequence every run.
        let mut seed = 0x2545_f491_u64;
        let mut roll = |n: u64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) % n
        };
        let mut seen = [0usize; 6];
        for _ in 0..20_000 {
            let op = roll(6) as usize;
            seen[op] += 1;
            match op {
                0 => {
                    f.push(TaskKey::new(next, 0), g);
                    model.push_back(next);
                    next += 1;
                }
                1 => assert_eq!(f.pop().map(|t| t.index()), model.pop_front()),
                2 => {
                    let expect = (model.len() == 1).then(|| model.pop_front()).flatten();
                    assert_eq!(f.take_lone().map(|t| t.index()), expect);
                }
                3 => {
                    let want = roll(buf.len() as u64 + 1) as usize;
                    let n = f.take_front(&buf[..want]);
                    assert_eq!(n, want.min(model.len()));
                    for slot in &buf[..n] {
                        assert_eq!(Some(slot.get().index()), model.pop_front());
                    }
                    // Back in front, a suffix of them, as an ended run does.
                    let keep = roll(n as u64 + 1) as usize;
                    f.put_front(&buf[keep..n]);
                    for slot in buf[keep..n].iter().rev() {
                        model.push_front(slot.get().index());
                    }
                }
                4 => {
                    let n = roll(buf.len() as u64 + 1) as usize;
                    for slot in &buf[..n] {
                        slot.set(TaskKey::new(next, 0));
                        model.push_back(next);
                        next += 1;
                    }
                    f.push_back_all(&buf[..n]);
                }
                _ => {
                    // Drain to empty now and then: the FIFO stays near its
                    // head slot.
                    if roll(8) == 0 {
                        drains_as(&mut f, std::mem::take(&mut model));
                    }
                }
            }
            assert_eq!(f.len(), model.len());
            assert_eq!(f.is_empty(), model.is_empty());
        }
        assert!(
            seen.iter().all(|&k| k > 2_000),
            "every operation ran: {seen:?}"
        );
        drains_as(&mut f, model);
    }
}
