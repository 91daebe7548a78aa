#![forbid(unsafe_code)]
//! The ids a run holds outside its queue's scheduler: the batch it takes
//! from the queue per borrow of the queues ([`Held`]), and the tasks it
//! requeues behind ([`Tail`](super::run_state::Tail)). The order of a FIFO
//! is fixed when a task is pushed, so taking [`HELD`] ids at once and
//! appending the yielded ones once per batch runs the tasks in exactly the
//! order of one pop and one push per poll, at a fraction of the cost.
//! A `Las` hands out level 0 (quantized keys) or the entries of its least
//! key (exact keys) in batches; other schedulers go through [`Held`] with
//! batches of one.
//!
//! It owns the movement of ids between the run and the scheduler (take,
//! put back, requeue, flush: `impl HeldIds`); the storage is in
//! [`RunState`](super::run_state::RunState)'s `held`, and when a run starts
//! or ends is the run loop's decision.

use std::cell::RefCell;

use super::core::Core;
use super::queues::Queues;
use super::run_state::{HeldIds, HeldState, HELD};
use crate::sched::{Front, QueueScheduler};
use crate::task::id::TaskKey;

/// The ids a run took from its queue's scheduler and has not polled yet
/// ([`QueueScheduler::take_next`](crate::sched::QueueScheduler::take_next)):
/// a batch from a `RunnableFifo` or a `Las`, one id from other schedulers. Those not
/// polled go back in front when the run ends, or when a panic unwinds
/// through the run loop.
///
/// The batch and its bounds live in the core's
/// [`HeldIds`](super::run_state::HeldIds), not here: the fields of a guard
/// that lives across the poll call are stored to and reloaded from the
/// stack at every poll, for the unwinding path (about 50 instructions per
/// headline task of six polls; callgrind).
#[must_use = "dropping `Held` at once puts its batch back: keep it for the run"]
pub(crate) struct Held<'a> {
    core: &'a Core,
    q: usize,
}

impl<'a> Held<'a> {
    pub(crate) fn new(core: &'a Core, q: usize) -> Self {
        core.run.held.pos.set(0);
        core.run.held.len.set(0);
        core.run.held.front_empty.set(false);
        core.run.held.open.set(HeldState::Open);
        core.run.held.queue.set(q);
        Self { core, q }
    }

    /// The run continues with the run of queue `q`, which a queue switch
    /// started in the same loop (`Core::switch_in_run`, which restarted
    /// the batch: [`HeldIds::restart`]).
    #[inline(always)]
    pub(crate) fn moved_to(&mut self, q: usize) {
        debug_assert_eq!(self.core.run.held.queue.get(), q);
        self.q = q;
    }

    /// The next task to poll, if the queue has one.
    #[must_use = "the id was taken from the scheduler: it must be polled or put back"]
    #[inline(always)]
    pub(crate) fn next(&mut self) -> Option<TaskKey> {
        let r = &self.core.run;
        let mut pos = r.held.pos.get();
        if pos == r.held.len.get() {
            let len = self.refill();
            r.held.len.set(len);
            pos = 0;
            if len == 0 {
                r.held.pos.set(0);
                return None;
            }
        }
        // `pos < len <= HELD`: the mask only spares a bounds check.
        let id = r.held.batch.0[pos % HELD].get();
        r.held.pos.set(pos + 1);
        Some(id)
    }

    /// Takes the next batch from the queue (after the run's requeued tasks,
    /// if any); returns its length. Notes when a `RunnableFifo`'s deque is
    /// left empty with the requeued tasks as the batch (`front_empty`).
    #[inline(always)]
    fn refill(&mut self) -> usize {
        let r = &self.core.run;
        let tail = &r.held.tail;
        if tail.len() == 1 && r.held.front_empty.get() {
            // One task of a `RunnableFifo` yielding in a loop (or woken
            // during its poll), nothing queued behind it: it is the next
            // batch (`refill_after_requeues`'s shortcut, without a borrow
            // of the queues).
            tail.len.set(0);
            r.held.batch.0[0].set(tail.ids.0[0].get());
            return 1;
        }
        if tail.len() != 0 {
            return self.refill_behind_tail();
        }
        let mut qs = self.core.queues.borrow_mut();
        match &mut qs.list[self.q].sched {
            QueueScheduler::Fifo(f) => f.take_front(&r.held.batch.0),
            QueueScheduler::Las(l) if l.batches() => l.take_front(&r.held.batch.0),
            QueueScheduler::Las(l) => {
                let n = l.take_front(&r.held.batch.0);
                if l.prefetches() {
                    r.held.open.set(HeldState::Overtakable);
                    self.prefetch(n);
                }
                n
            }
            QueueScheduler::Custom(_) => self.take_checked(&mut qs),
        }
    }

    /// Prefetches the slab entries and cells of the `n` ids taken from a
    /// `Las` with exact keys ([`Las::prefetches`](crate::sched::Las::prefetches)):
    /// its order visits the tasks in an order close to random, so without
    /// this each poll starts with two dependent cache misses (the task's
    /// slab entry, then its cell). Read by the batch, the slab entries'
    /// misses overlap, and the cells' prefetches do not wait.
    #[inline(never)]
    fn prefetch(&self, n: usize) {
        if n < 2 {
            return;
        }
        if let Ok(tasks) = self.core.tasks.try_borrow() {
            for id in &self.core.run.held.batch.0[..n] {
                tasks.prefetch(id.get());
            }
        }
    }

    /// [`refill`](Self::refill) while the run holds requeued tasks. Out of
    /// line: the poll loop of a batching `Las` compiles to about 4
    /// instructions more per poll with it inlined (callgrind).
    #[inline(never)]
    fn refill_behind_tail(&mut self) -> usize {
        let r = &self.core.run;
        let tail = &r.held.tail;
        let mut qs = self.core.queues.borrow_mut();
        if tail.len() == 1 && qs.list[self.q].sched.is_empty_fifo() {
            // The shortcut of `refill`, found by looking at the deque.
            tail.len.set(0);
            r.held.batch.0[0].set(tail.ids.0[0].get());
            r.held.front_empty.set(true);
            1
        } else {
            let len = r.held.refill_after_requeues(&mut qs, self.q);
            if let QueueScheduler::Las(l) = &qs.list[self.q].sched {
                // An exact `Las` requeues through the tail too.
                if l.prefetches() {
                    r.held.open.set(HeldState::Overtakable);
                    self.prefetch(len);
                }
            }
            self.checked_if_custom(&mut qs, len)
        }
    }

    /// `len` ids were taken: checked ([`checked`](Self::checked)) when the
    /// queue's scheduler is a custom one.
    #[inline(always)]
    fn checked_if_custom(&self, qs: &mut Queues, len: usize) -> usize {
        if qs.list[self.q].sched.is_custom() {
            self.checked(qs, len)
        } else {
            len
        }
    }

    /// The next id of a custom scheduler, checked
    /// ([`checked`](Self::checked)); returns 0 or 1.
    #[cold]
    #[inline(never)]
    fn take_checked(&self, qs: &mut Queues) -> usize {
        let len = qs.list[self.q].sched.take_next(&self.core.run.held.batch.0);
        self.checked(qs, len)
    }

    /// Checks the ids a custom scheduler hands out (one at a time): an id
    /// that was not the scheduler's to hand out is reported and not run,
    /// and the scheduler is asked for the next one. Returns how many ids
    /// the batch holds (0 or 1).
    #[cold]
    #[inline(never)]
    fn checked(&self, qs: &mut Queues, mut len: usize) -> usize {
        let batch = &self.core.run.held.batch.0;
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
    /// requeued ones ([`Tail`](super::run_state::Tail)) behind. Inlined
    /// where the run ends: a run that polled every id it took and requeued
    /// none (every run of a ping-pong across queues) only closes the batch,
    /// without a call (about 20 instructions per queue switch; callgrind).
    #[inline(always)]
    pub(crate) fn put_back(&mut self) {
        let r = &self.core.run;
        r.held.open.set(HeldState::Closed);
        if r.held.pos.get() != r.held.len.get() || r.held.tail.len() != 0 {
            self.put_back_ids();
        }
    }

    /// The ids of [`put_back`](Self::put_back), when there are some.
    #[inline(never)]
    fn put_back_ids(&mut self) {
        let r = &self.core.run;
        let (pos, len) = (r.held.pos.get(), r.held.len.get());
        // Not borrowed at the run's end; while unwinding, a panic here
        // would abort, so a borrow that fails (a bug) loses the ids rather
        // than the process.
        r.held.front_empty.set(false);
        if let Ok(mut qs) = self.core.queues.try_borrow_mut() {
            r.held.flush_tail(&mut qs);
            let ids = &r.held.batch.0[pos..len];
            match qs.list[self.q].sched.front() {
                Some(mut front) => front.put_front(ids),
                // Any other scheduler hands out one id at a time, which the
                // run polls before it asks again.
                None => debug_assert!(
                    ids.is_empty(),
                    "tourbillon bug: a batch of a queue without a front"
                ),
            }
        }
        r.held.pos.set(len);
    }
}

impl Drop for Held<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        self.put_back();
    }
}

/// The movement of ids between the run and its queue's scheduler.
impl HeldIds {
    /// Pushes the run's requeued tasks ([`Tail`](super::run_state::Tail)) to
    /// their deque: before any other push to a queue, so that they keep
    /// their place.
    #[inline(always)]
    pub(crate) fn flush_tail(&self, qs: &mut Queues) {
        if self.tail.len() != 0 {
            self.flush_tail_now(qs);
        }
    }

    // Out of line: inlined into the run loop it costs more than the call
    // (about 17 instructions per headline task; callgrind).
    #[inline(never)]
    fn flush_tail_now(&self, qs: &mut Queues) {
        let tail = &self.tail;
        let n = tail.len.replace(0);
        self.front_empty.set(false);
        // The tail is pushed before a run ends (`Held::put_back`, also when
        // unwinding), so a run is in progress and the tasks are its
        // queue's.
        let q = self.queue.get();
        let ids = &tail.ids.0[..n];
        match qs.list[q].sched.front() {
            Some(mut front) => front.push_back_all(ids, &tail.ns.0[..n]),
            // The run loop requeues through the tail only on a queue with
            // a front (`requeue_tail`).
            None => debug_assert!(
                ids.is_empty(),
                "tourbillon bug: a tail on a queue without a front"
            ),
        }
    }

    /// The batch of a spent run (every id taken was polled, none
    /// requeued) becomes that of the run of queue `q`, whose scheduler is
    /// `sched`, which follows it in the same loop (a queue switch,
    /// `Core::switch_in_run`): as `Held::new`, with the first batch of a
    /// `RunnableFifo` taken at once, under the borrow of the queues that
    /// the switch holds (the batch `Held::next` would take first).
    #[inline(always)]
    pub(crate) fn restart(&self, sched: &mut QueueScheduler, q: usize) {
        debug_assert!(self.pos.get() == self.len.get() && self.tail.len() == 0);
        self.pos.set(0);
        self.front_empty.set(false);
        self.queue.set(q);
        // Overtakable again only if `Held::next` takes from an exact `Las`.
        self.open.set(HeldState::Open);
        let len = match sched {
            // One task (a ping-pong's), in the FIFO's head slot: taken
            // without `take_front`'s call.
            QueueScheduler::Fifo(f) => match f.take_lone() {
                Some(id) => {
                    self.batch.0[0].set(id);
                    1
                }
                None => f.take_front(&self.batch.0),
            },
            // Taken by `Held::next` (a `Las` may prefetch; a custom
            // scheduler's ids are checked).
            _ => 0,
        };
        self.len.set(len);
    }

    /// Takes the next batch of FIFO queue `q` while the run holds requeued
    /// tasks ([`Tail`](super::run_state::Tail)); returns its length. When
    /// nothing was queued behind them (a push flushes the tail first, so the
    /// deque is empty), flushing them and taking a batch would move the
    /// same ids out and back: they are the next batch, in the same order
    /// (one task that yields in a loop takes this path at every poll).
    #[inline(always)]
    fn refill_after_requeues(&self, qs: &mut Queues, q: usize) -> usize {
        let held = self;
        let Some(mut front) = qs.list[q].sched.front() else {
            self.flush_tail_now(qs);
            return qs.list[q].sched.take_next(&held.batch.0);
        };
        if !front.is_empty() {
            self.flush_tail_now(qs);
            return qs.list[q].sched.take_next(&held.batch.0);
        }
        let mut n = held.tail.len.replace(0);
        match &mut front {
            Front::Las(las) => n = las.keep_level0(&held.tail.ids.0[..n], &held.tail.ns.0[..n]),
            // The requeued tasks become the batch: the deque stays empty.
            Front::Fifo(_) => held.front_empty.set(true),
        }
        if n == 1 {
            // One task yielding in a loop: no copy loop (which compiles to
            // a `memcpy` call).
            held.batch.0[0].set(held.tail.ids.0[0].get());
            return 1;
        }
        if n == 0 {
            // Every requeued task left level 0 of a `Las`.
            return qs.list[q].sched.take_next(&held.batch.0);
        }
        for (dst, src) in held.batch.0.iter().zip(&held.tail.ids.0[..n]) {
            dst.set(src.get());
        }
        n
    }

    /// After a push to queue `q`: if the run holds ids of `q` not polled
    /// yet and the push went ahead of them (a `Las` with exact keys hands
    /// out the entries of its least key, which a push of a smaller key
    /// overtakes: `Las::take_overtaken`), puts them back in front of the
    /// queue, so that the run's next id is the pushed task.
    #[inline(always)]
    pub(crate) fn yield_to_push(&self, qs: &mut Queues, q: usize) {
        if self.open.get() == HeldState::Overtakable
            && self.queue.get() == q
            && self.pos.get() != self.len.get()
        {
            self.put_back_if_overtaken(qs, q);
        }
    }

    #[inline(never)]
    fn put_back_if_overtaken(&self, qs: &mut Queues, q: usize) {
        let QueueScheduler::Las(las) = &mut qs.list[q].sched else {
            return;
        };
        if las.take_overtaken() {
            let (pos, len) = (self.pos.get(), self.len.get());
            las.put_front(&self.batch.0[pos..len]);
            self.len.set(pos);
        }
    }

    /// Puts woken task `id` of queue `q` at the end of the run's batch,
    /// if that is its place in FIFO order: the run holds a batch of `q`, a
    /// `RunnableFifo` with nothing queued behind the batch (no requeued
    /// task, an empty deque), and the batch has room. The running queue is
    /// tested first, so that a wake of another queue's task stops there.
    /// Returns whether it did; a ping-pong's next task is then polled
    /// without a look at the queue.
    #[inline(always)]
    pub(crate) fn join_batch(&self, qs: &Queues, q: usize, id: TaskKey) -> bool {
        let held = self;
        if held.open.get() == HeldState::Closed || held.queue.get() != q {
            return false;
        }
        let len = held.len.get();
        if len >= HELD || held.tail.len() != 0 || !qs.list[q].sched.is_empty_fifo() {
            return false;
        }
        held.batch.0[len].set(id);
        held.len.set(len + 1);
        true
    }

    /// Requeues task `id` of the running batching `Las` queue, whose last
    /// poll took `ns`, not yet charged to its own group: the charge and the
    /// choice of its level happen when the tail is pushed.
    #[inline(always)]
    pub(crate) fn requeue_tail_charged(&self, queues: &RefCell<Queues>, id: TaskKey, ns: u64) {
        let tail = &self.tail;
        if tail.len() >= HELD {
            // Not reached, as in `requeue_tail`.
            self.flush_tail(&mut queues.borrow_mut());
        }
        tail.ns.0[tail.len() % HELD].set(ns);
        self.requeue_tail(queues, id);
    }

    /// Requeues task `id` behind the front of the running queue (a
    /// `RunnableFifo`, or level 0 of a batching `Las`).
    #[inline(always)]
    pub(crate) fn requeue_tail(&self, queues: &RefCell<Queues>, id: TaskKey) {
        let tail = &self.tail;
        let mut n = tail.len.get();
        if n >= HELD {
            // Not reached: a poll per held task, and `Held` pushes the tail
            // before it takes a new batch (so it holds at most `HELD`).
            // Kept so that a change there cannot lose tasks.
            self.flush_tail(&mut queues.borrow_mut());
            n = 0;
        }
        tail.ids.0[n].set(id);
        tail.len.set(n + 1);
    }
}
