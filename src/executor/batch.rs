#![forbid(unsafe_code)]
//! The run's batch and requeue tail, for a `RunnableFifo` queue: what a run
//! takes from its queue's deque per borrow of the queues ([`Held`]), and the
//! tasks it puts back behind ([`Tail`]). The order of a FIFO is fixed when a
//! task is pushed, so taking [`HELD`] ids at once and appending the yielded ones
//! once per batch runs the tasks in exactly the order of one pop and one
//! push per poll, at a fraction of the cost (PROFILING.md, "Applied in the
//! fourth session"). Other schedulers go through [`Held`] with batches of
//! one.

use std::cell::Cell;

use super::core::Core;
use super::queues::Queues;
use crate::task::id::TaskId;

/// Tasks of the running `RunnableFifo` queue that are runnable again after
/// their poll (a yield, or a wake during the poll), kept here rather than
/// pushed one by one (a borrow of the queues, a dispatch and a deque push per
/// poll; PROFILING.md, "Findings"). They belong behind every task already
/// queued, in order, so they are pushed to the deque before anything else
/// is pushed to a queue ([`Core::flush_tail`]), before the run takes its
/// next batch, and when the run ends or unwinds ([`Held`]).
/// They are tasks of the running queue (the run pushes them before it
/// ends), so the queue is not stored.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    ids: Batch,
    len: Cell<usize>,
}

/// Task ids in `Cell`s, written and read without a borrow.
#[derive(Debug)]
pub(crate) struct Batch([Cell<TaskId>; HELD]);

impl Default for Batch {
    fn default() -> Self {
        Self(std::array::from_fn(|_| Cell::new(TaskId::new(0, 0))))
    }
}

impl Tail {
    /// Tasks kept.
    pub(crate) fn len(&self) -> usize {
        self.len.get()
    }
}

/// How many ids a run takes from a `RunnableFifo` per borrow of the queues:
/// 64, so that a turn of the default 61 polls takes one batch (with 32 it
/// took two: 1,214 against 1,222 instructions per headline task, and 352
/// against 366 M cycles for a million of them, the minima of eight
/// alternations; PROFILING.md, "Applied in the seventh session").
const HELD: usize = 64;

/// The ids a run took from its queue's scheduler and has not polled yet
/// ([`QueueScheduler::take_next`](crate::sched::QueueScheduler::take_next)):
/// a batch from a `RunnableFifo`, one id from other schedulers. Those not
/// polled go back in front when the run ends, or when a panic unwinds
/// through the run loop.
///
/// The batch and its bounds live in the core's [`RunState`]
/// (`batch`, `batch_pos`, `batch_len`), not here: a guard whose fields
/// were the bounds had them stored and reloaded from the stack at every
/// poll, for the unwinding path (1,438 → 1,386 instructions per headline
/// task of six polls; callgrind).
///
/// [`RunState`]: super::run_loop::RunState
pub(crate) struct Held<'a> {
    core: &'a Core,
    q: usize,
}

impl<'a> Held<'a> {
    pub(crate) fn new(core: &'a Core, q: usize) -> Self {
        core.run.batch_pos.set(0);
        core.run.batch_len.set(0);
        Self { core, q }
    }

    /// The next task to poll, if the queue has one.
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<TaskId> {
        let r = &self.core.run;
        let mut pos = r.batch_pos.get();
        if pos == r.batch_len.get() {
            let mut qs = self.core.queues.borrow_mut();
            self.core.flush_tail(&mut qs);
            let mut len = qs.list[self.q].sched.take_next(&r.batch.0);
            if qs.list[self.q].sched.is_custom() {
                len = self.checked(&mut qs, len);
            }
            drop(qs);
            r.batch_len.set(len);
            pos = 0;
            if len == 0 {
                r.batch_pos.set(0);
                return None;
            }
        }
        // `pos < batch_len <= HELD`: the mask only spares a bounds check.
        let id = r.batch.0[pos % HELD].get();
        r.batch_pos.set(pos + 1);
        Some(id)
    }

    /// Checks the ids a custom scheduler hands out (one at a time): an id
    /// that was not the scheduler's to hand out is reported and not run,
    /// and the scheduler is asked for the next one. Returns how many ids
    /// the batch holds (0 or 1).
    #[cold]
    #[inline(never)]
    fn checked(&self, qs: &mut Queues, mut len: usize) -> usize {
        let batch = &self.core.run.batch.0;
        while len == 1 {
            let id = batch[0].get();
            let Some(why) = self.core.tasks.borrow().check_handout(id, self.q) else {
                break;
            };
            self.core.refused(qs, self.q, id, why);
            len = qs.list[self.q].sched.take_next(batch);
        }
        len
    }

    /// Puts the ids not polled back in front of the queue, and the
    /// requeued ones ([`Tail`]) behind.
    pub(crate) fn put_back(&mut self) {
        let r = &self.core.run;
        let (pos, len) = (r.batch_pos.get(), r.batch_len.get());
        if pos == len && r.tail.len() == 0 {
            return;
        }
        // Not borrowed at the run's end; while unwinding, a panic here
        // would abort, so a borrow that fails (a bug) loses the ids rather
        // than the process.
        if let Ok(mut qs) = self.core.queues.try_borrow_mut() {
            self.core.flush_tail(&mut qs);
            qs.list[self.q].sched.put_back(&r.batch.0[pos..len]);
        }
        r.batch_pos.set(len);
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.put_back();
    }
}

impl Core {
    /// Pushes the run's requeued tasks ([`Tail`]) to their deque: before any
    /// other push to a queue, so that they keep their place.
    #[inline(always)]
    pub(crate) fn flush_tail(&self, qs: &mut Queues) {
        if self.run.tail.len() != 0 {
            self.flush_tail_now(qs);
        }
    }

    // Out of line: inlined into the run loop it costs more than the call
    // (callgrind, the headline: 1,558 instead of 1,541 per task).
    #[inline(never)]
    fn flush_tail_now(&self, qs: &mut Queues) {
        let tail = &self.run.tail;
        let n = tail.len.replace(0);
        // The tail is pushed before a run ends (`Held::put_back`, also when
        // unwinding), so a run is in progress and the tasks are its queue's.
        let q = self
            .run
            .queue
            .get()
            .expect("tourbillon bug: requeued tasks outside a run");
        qs.list[q].sched.append(&tail.ids.0[..n]);
    }

    /// Requeues task `id` of the running `RunnableFifo` queue.
    #[inline(always)]
    pub(crate) fn requeue_fifo(&self, id: TaskId) {
        let tail = &self.run.tail;
        let mut n = tail.len.get();
        if n >= HELD {
            // Not reached: a poll per held task, and `Held` pushes the tail
            // before it takes a new batch (so it holds at most `HELD`).
            // Kept so that a change there cannot lose tasks.
            self.flush_tail(&mut self.queues.borrow_mut());
            n = 0;
        }
        tail.ids.0[n].set(id);
        tail.len.set(n + 1);
    }
}
