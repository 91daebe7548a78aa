#![forbid(unsafe_code)]
//! `RunnableFifo`: tasks run in the order they became runnable.
//!
//! A ring buffer of task ids whose capacity is a power of two, so that a
//! position wraps with a mask instead of a compare and a subtraction. Against
//! the `VecDeque` it replaced: 9 instructions fewer per task of the headline
//! workload (callgrind; PROFILING.md, "Findings", `a020341`).

use std::cell::Cell;

use super::Scheduler;
use crate::task::id::{GroupId, TaskId};

/// First in, first out by the time a task became runnable: the default
/// scheduler of every queue, and what tokio's `LocalSet` and most executors
/// do. A task woken during its own poll goes behind every task already
/// queued.
#[derive(Debug, Default, Clone)]
pub struct RunnableFifo {
    /// The ring; its length is zero or a power of two (its capacity).
    slots: Vec<TaskId>,
    /// Position of the oldest id (any value: taken modulo the capacity, so
    /// every sum with it wraps; `put_front` after a `grow` takes it below
    /// zero).
    head: usize,
    /// Number of ids held.
    len: usize,
}

impl RunnableFifo {
    /// An empty FIFO.
    pub fn new() -> Self {
        Self::default()
    }

    /// Doubles the ring (at least 16 slots) in place: the allocator may
    /// extend or remap the block instead of copying it, and only the ids
    /// that had wrapped around to the front move, behind the old end.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let cap = self.slots.len();
        let new_cap = (cap * 2).max(16);
        let start = if cap == 0 { 0 } else { self.head & (cap - 1) };
        self.slots.resize(new_cap, TaskId::new(0, 0));
        // The ids were at `start..cap`, then `0..wrapped`.
        let wrapped = (start + self.len).saturating_sub(cap);
        self.slots.copy_within(0..wrapped, cap);
        self.head = start;
    }

    /// Moves the oldest ids, up to `buf.len()`, into `buf` in order and
    /// returns how many. What a run pops next is fixed once pushed (pushes
    /// go behind), so the run loop takes a batch per borrow of the queues
    /// instead of one id (PROFILING.md, "Findings").
    #[inline]
    pub(crate) fn take_front(&mut self, buf: &[Cell<TaskId>]) -> usize {
        let n = self.len.min(buf.len());
        if n == 0 {
            return 0;
        }
        let cap = self.slots.len();
        let start = self.head & (cap - 1);
        if n == 1 {
            // One runnable task (a ping-pong): no loops.
            buf[0].set(self.slots[start]);
            self.head = self.head.wrapping_add(1);
            self.len -= 1;
            return 1;
        }
        let first = n.min(cap - start);
        let (a, b) = buf[..n].split_at(first);
        for (dst, src) in a.iter().zip(&self.slots[start..]) {
            dst.set(*src);
        }
        for (dst, src) in b.iter().zip(&self.slots) {
            dst.set(*src);
        }
        self.head = self.head.wrapping_add(n);
        self.len -= n;
        n
    }

    /// Pushes `ids` behind the held ones, in order: one capacity check for
    /// the batch.
    #[inline]
    pub(crate) fn push_back_all(&mut self, ids: &[Cell<TaskId>]) {
        while self.len + ids.len() > self.slots.len() {
            self.grow();
        }
        let cap = self.slots.len();
        let start = self.head.wrapping_add(self.len) & (cap - 1);
        let (a, b) = ids.split_at(ids.len().min(cap - start));
        for (dst, src) in self.slots[start..].iter_mut().zip(a) {
            *dst = src.get();
        }
        for (dst, src) in self.slots.iter_mut().zip(b) {
            *dst = src.get();
        }
        self.len += ids.len();
    }

    /// Puts `ids` back in front, in order: undoes a
    /// [`take_front`](Self::take_front) of ids that were not run.
    pub(crate) fn put_front(&mut self, ids: &[Cell<TaskId>]) {
        while self.len + ids.len() > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        self.head = self.head.wrapping_sub(ids.len());
        for (i, id) in ids.iter().enumerate() {
            self.slots[self.head.wrapping_add(i) & mask] = id.get();
        }
        self.len += ids.len();
    }
}

impl Scheduler for RunnableFifo {
    #[inline]
    fn push(&mut self, task: TaskId, _group: GroupId) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        self.slots[self.head.wrapping_add(self.len) & mask] = task;
        self.len += 1;
    }

    #[inline]
    fn pop(&mut self) -> Option<TaskId> {
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let task = self.slots[self.head & mask];
        self.head = self.head.wrapping_add(1);
        self.len -= 1;
        Some(task)
    }

    #[inline]
    fn len(&self) -> usize {
        self.len
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
            f.push(TaskId::new(i, 0), g);
        }
        assert_eq!(f.len(), 5);
        let order: Vec<u32> = std::iter::from_fn(|| f.pop()).map(|t| t.index()).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert!(f.is_empty());
    }

    #[test]
    fn keeps_order_across_wrap_and_growth() {
        // Interleave pushes and pops so that the ring wraps, then grow it
        // while wrapped: the order must survive both.
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        let mut model = std::collections::VecDeque::new();
        let mut next = 0u32;
        for round in 0..200u32 {
            for _ in 0..(round % 7 + 1) {
                f.push(TaskId::new(next, 0), g);
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
        let buf: [Cell<TaskId>; 7] = std::array::from_fn(|_| Cell::new(TaskId::new(0, 0)));
        for round in 0..300u32 {
            for _ in 0..(round % 9 + 1) {
                f.push(TaskId::new(next, 0), g);
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

    /// A run gives back ids after the ring grew under it (its tasks woke
    /// others): `head` goes below zero and wraps, which every position
    /// computed from it must survive (found by the `api_ops` fuzz target:
    /// an overflowing `head + len` in `push`).
    #[test]
    fn put_front_after_growth_wraps_head_below_zero() {
        let mut f = RunnableFifo::new();
        let g = GroupId::task(0);
        let buf: [Cell<TaskId>; 4] = std::array::from_fn(|_| Cell::new(TaskId::new(0, 0)));
        for i in 0..4 {
            f.push(TaskId::new(i, 0), g);
        }
        assert_eq!(f.take_front(&buf), 4);
        // Polling the first held task woke 20 others: the ring grows and
        // `head` starts again at 0.
        for i in 4..24 {
            f.push(TaskId::new(i, 0), g);
        }
        // The run ends: the three unpolled ids go back in front.
        f.put_front(&buf[1..4]);
        f.push(TaskId::new(24, 0), g);
        let order: Vec<u32> = std::iter::from_fn(|| f.pop()).map(|t| t.index()).collect();
        let expect: Vec<u32> = (1..25).collect();
        assert_eq!(order, expect);
        // The ring grows again with `head` wrapped.
        for _ in 0..3 {
            assert_eq!(f.take_front(&buf[..1]), 0);
        }
        for i in 0..3 {
            f.push(TaskId::new(i, 0), g);
        }
        assert_eq!(f.take_front(&buf[..3]), 3);
        f.push_back_all(&buf[..3]);
        f.put_front(&buf[..2]);
        for i in 3..40 {
            f.push(TaskId::new(i, 0), g);
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
        let buf: [Cell<TaskId>; 11] = std::array::from_fn(|_| Cell::new(TaskId::new(0, 0)));
        for round in 0..300usize {
            // A batch of 1 to 11 ids behind the queued ones (wrapping the
            // ring, and growing it when it is full) ...
            let n = round % 11 + 1;
            for slot in &buf[..n] {
                slot.set(TaskId::new(next, 0));
                model.push_back(next);
                next += 1;
            }
            f.push_back_all(&buf[..n]);
            // ... and fewer pops, so that the ring fills up over the rounds.
            for _ in 0..(round % 7) {
                assert_eq!(f.pop().map(|t| t.index()), model.pop_front());
            }
            assert_eq!(f.len(), model.len());
        }
        drains_as(&mut f, model);
    }
}
