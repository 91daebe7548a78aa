//! The poll harness: polls, cancels and completes a task, and settles
//! what its end leaves to do (the remote delivery, the join handle's wake,
//! the result of a detached task), with the slab released whenever user
//! code runs.
//!
//! The harness owns the stage operations' order; the caller (the run loop)
//! owns the poll's context: [`PollScope`] is entered before the future runs
//! and left after it, so that the executor knows which task this thread
//! polls (for `yield_now`'s fast path and `task::id()`). The harness knows
//! no executor: it sees the slab, the task's bits and the scope.

use std::any::Any;
use std::cell::RefCell;
use std::task::Waker;

use super::id::{GroupId, TaskKey};
use super::raw::{Finish, PollCode, RawTask};
use super::schedule::Schedule;
use super::slab::{Deliver, TaskEntry, TaskSlab};
use super::state::{TransitionToIdle, TransitionToRunning};
use crate::boundary::{self, Payload};

/// The context of one poll, provided by the run loop: entered just before
/// the future is polled, left just after (also when the poll panicked:
/// the harness catches the panic inside the poll).
pub(crate) trait PollScope {
    /// `task` is about to be polled on this thread.
    fn enter(&self, task: RawTask);
    /// The poll returned; `true` if the task yielded through `yield_now`'s
    /// fast path during it.
    fn leave(&self) -> bool;
}

/// How a poll (or a cancellation) ended. One or two bytes, returned in a
/// register: the record of a task that ended goes to the caller's slot
/// ([`poll_task`]), so that the pending case, five polls in six of the
/// headline workload, neither builds nor matches a large enum (callgrind).
#[must_use = "a polled task that is still pending must be requeued, held or left waiting"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polled {
    /// The id is stale (the task ended): nothing was polled.
    Stale,
    /// The task is still pending; the [`Next`] says what the run loop does
    /// with it; the flag says whether its group is its own
    /// ([`GroupId::task`](crate::task::id::GroupId::task) of its index), so
    /// that a scheduler that needs the group (not `RunnableFifo`) is told
    /// it without a lookup ([`TaskSlab::group_of_id`] for a keyed one).
    Pending(Next, bool),
    /// The task ended; its record is in the caller's slot.
    Done,
}

/// What to do with a task whose poll returned `Pending`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Wait for a wake.
    Wait,
    /// Woken during its poll: push it to its scheduler now.
    Requeue,
    /// Yielded through `yield_now`: push it to its scheduler now, or, when
    /// the executor is nested in a host runtime, hold it until the host's
    /// next turn (the state already says SCHEDULED, so wakes in between
    /// are merged).
    Yield,
}

/// A task that ended; the caller finishes the job outside the slab borrow.
pub(crate) struct Done {
    pub(crate) queue: usize,
    pub(crate) group: GroupId,
    pub(crate) finish: Finish,
    /// It ended by `abort()`.
    pub(crate) cancelled: bool,
    /// Panics for the panic policy: the task's own payload when asked for
    /// (panic propagation), and those of the user code that ending the task
    /// ran (a delivery, the joiner's waker, the result's destructor). Rare,
    /// so boxed: one word in the common case's record.
    pub(crate) panics: Option<Box<Panics>>,
}

/// Panics kept for the panic policy ([`Done::panics`]).
#[derive(Default)]
pub(crate) struct Panics {
    /// The task's own panic, taken for `Propagate`.
    pub(crate) task: Option<Payload>,
    /// Panics of other user code, in the order they were caught.
    pub(crate) caught: Vec<Payload>,
}

/// Keeps `payload` in `panics` for the panic policy.
#[cold]
fn keep(panics: &mut Option<Box<Panics>>, payload: Payload) {
    panics.get_or_insert_with(Box::default).caught.push(payload);
}

/// Keeps the panic of `result`, if any, in `panics`.
#[inline(always)]
fn check(panics: &mut Option<Box<Panics>>, result: Result<(), Payload>) {
    if let Err(p) = result {
        keep(panics, p);
    }
}

impl Done {
    /// The record with the panics caught while the task ended added.
    #[cold]
    #[inline(never)]
    fn with(mut self, caught: Box<Panics>) -> Done {
        match &mut self.panics {
            Some(panics) => panics.caught.extend(caught.caught),
            None => self.panics = Some(caught),
        }
        self
    }
}

/// What completing a task leaves to do once the slab is released.
struct Completion {
    done: Done,
    /// The join handle's waker, to wake.
    join_waker: Option<Waker>,
    /// The removed entry.
    entry: TaskEntry,
    /// A join handle lives: the result stays in the cell for it.
    joined: bool,
    /// A remotely spawned task's delivery to its remote join handle.
    deliver: Option<Deliver>,
}

impl Completion {
    /// Delivers a remote task's result, lets go of the entry (dropping the
    /// result of a detached task) and wakes the joiner. Must run with the
    /// slab released: all may run user code, whose panics are caught into
    /// the record (the task's own record is complete by then: its end is
    /// counted whatever they do).
    #[inline(always)]
    fn settle(self) -> Done {
        // Taken apart first: moved as a whole, the record was built on the
        // stack and copied field by field (callgrind).
        let Completion {
            done,
            join_waker,
            entry,
            joined,
            deliver,
        } = self;
        // Kept apart from `done` (not written through a reference) so that
        // the record stays in registers (callgrind).
        let mut caught = None;
        if let Some(deliver) = deliver {
            let raw = entry.task.raw();
            check(&mut caught, boundary::call(move || deliver.deliver(raw)));
        }
        // Before the wake: the joiner may drop its handle in there, and then
        // finds the handle the cell's last owner.
        if joined {
            entry.release_keep_stage();
        } else if let Some(p) = entry.release() {
            keep(&mut caught, p);
        }
        if let Some(w) = join_waker {
            check(&mut caught, boundary::call(move || w.wake()));
        }
        match caught {
            None => done,
            Some(caught) => done.with(caught),
        }
    }
}

/// Marks `id` complete after its stage was finished; returns the
/// completion record.
///
/// `raw` is the cell of `id`, whose RUNNING bit the caller holds (so
/// its entry is still in the slab: no lookup).
#[inline(always)]
fn complete<S: Schedule>(
    slab: &mut TaskSlab<S>,
    id: TaskKey,
    raw: RawTask,
    finish: Finish,
    panic: Option<Box<dyn Any + Send>>,
    cancelled: bool,
) -> Completion {
    // SAFETY: `RawTask::header_unbound`'s `# Safety`: S1 (RUNNING lock):
    // RUNNING is set, so the entry (and the slab's reference to the cell,
    // I1) stays until `remove` below, after the last use.
    let header = unsafe { raw.header_unbound() };
    let joined = header.update_state(|st| st.transition_to_complete());
    let (queue, group) = (header.queue as usize, slab.group_of(header));
    // SAFETY: `RawTask::take_join_waker`'s `# Safety`: I6 (joiner's waker):
    // we are on the executor thread (the slab is `!Send`), the only one
    // that touches the joiner's waker; I1 (liveness): RUNNING is set (S1),
    // so the slab's reference keeps the cell alive.
    let join_waker = unsafe { raw.take_join_waker() };
    let deliver = slab.take_deliver(id.index() as usize);
    Completion {
        deliver,
        done: Done {
            queue,
            group,
            finish,
            cancelled,
            panics: panic.map(|p| {
                Box::new(Panics {
                    task: Some(p),
                    caught: Vec::new(),
                })
            }),
        },
        join_waker,
        entry: slab.remove(id),
        joined,
    }
}

/// Polls task `id` once (or cancels it, if it was aborted while queued).
/// The slab is not borrowed while the future runs. A task that yielded
/// through `yield_now` comes back as [`Next::Yield`]. `second_site` picks
/// the call site of the poll ([`RawTask::poll`]). When the task ends, its
/// record goes to `done` and `Polled::Done` is returned; the record holds
/// the task's panic payload when `take_panic` asks for it, and the panics
/// of the user code that ending the task ran (wakers, destructors).
#[inline(always)]
pub(crate) fn poll_task<S: Schedule, P: PollScope>(
    slab: &RefCell<TaskSlab<S>>,
    id: TaskKey,
    take_panic: bool,
    second_site: bool,
    done: &mut Option<Done>,
    scope: &P,
) -> Polled {
    let (raw, cancelled) = {
        // Exclusive though it only reads: no other borrow is live here, and
        // a `RefMut`'s flag costs fewer instructions than a `Ref`'s count.
        let s = slab.borrow_mut();
        let Some(e) = s.get(id) else {
            return Polled::Stale;
        };
        // Read before the state is written: the compiler cannot tell that
        // the write leaves the entry alone, and would read it again.
        let raw = e.task.raw();
        let mut st = e.state();
        let t = st.transition_to_running();
        if t == TransitionToRunning::Stale {
            // Ended (a stale id a scheduler may keep after `forget`). The
            // built-in schedulers hand out only queued tasks; the ids of a
            // custom one are checked when it hands them out
            // (`TaskSlab::check_handout`).
            return Polled::Stale;
        }
        e.task.header().set_state(st);
        (raw, t == TransitionToRunning::Cancel)
    };
    if cancelled {
        // SAFETY: `RawTask::cancel`'s `# Safety`: S1 (RUNNING lock):
        // RUNNING is set, so the entry stays (I1) and nothing else touches
        // the stage (I2); the stage is Running (not COMPLETE); executor
        // thread (the slab is `!Send`).
        let finish = unsafe { raw.cancel() };
        return ended(slab, id, raw, finish, take_panic, true, done);
    }
    scope.enter(raw);
    // SAFETY: `RawTask::poll`'s `# Safety`: S1 (RUNNING lock): RUNNING is
    // set just above, so the entry stays (I1) and nothing else touches the
    // stage (I2); the stage is Running (the task was not COMPLETE);
    // executor thread (the slab is `!Send`).
    let code = unsafe { raw.poll(second_site) };
    let yielded = scope.leave();
    // The byte itself, not a `Poll` made of it: the two call sites'
    // results meet here, and the compiler re-checks a byte turned into an
    // enum there (nine instructions per poll; callgrind).
    if code != PollCode::PENDING {
        return ended(slab, id, raw, code.finish(), take_panic, false, done);
    }
    settle_pending(slab, id, raw, yielded, take_panic, done)
}

/// The end of [`poll_task`] for a task that ended (its poll returned
/// `Ready` or panicked, or it was cancelled): completes it and leaves its
/// record in `done`.
#[inline(always)]
fn ended<S: Schedule>(
    slab: &RefCell<TaskSlab<S>>,
    id: TaskKey,
    raw: RawTask,
    finish: Finish,
    take_panic: bool,
    cancelled: bool,
    done: &mut Option<Done>,
) -> Polled {
    *done = Some(finish_task(slab, id, raw, finish, take_panic, cancelled));
    Polled::Done
}

/// Completes task `id`, whose stage holds its result (RUNNING still set),
/// and settles what its end leaves to do; the task's panic payload is taken
/// for the record when `take_panic` asks for it.
#[inline(always)]
fn finish_task<S: Schedule>(
    slab: &RefCell<TaskSlab<S>>,
    id: TaskKey,
    raw: RawTask,
    finish: Finish,
    take_panic: bool,
    cancelled: bool,
) -> Done {
    let panic = match finish {
        // SAFETY: `RawTask::take_panic`'s `# Safety`: S1 (RUNNING lock):
        // RUNNING is still set, so the cell is alive (I1) and the stage ours
        // alone (I2); executor thread. The stage is Finished or Panicked.
        Finish::Panicked if take_panic => unsafe { raw.take_panic() },
        _ => None,
    };
    // Two statements: the slab's borrow must end before `settle` runs
    // user code (a temporary would live to the end of the expression).
    let c = complete(&mut slab.borrow_mut(), id, raw, finish, panic, cancelled);
    c.settle()
}

/// The end of [`poll_task`] for a poll that returned `Pending`.
#[inline(always)]
fn settle_pending<S: Schedule>(
    slab: &RefCell<TaskSlab<S>>,
    id: TaskKey,
    raw: RawTask,
    yielded: bool,
    take_panic: bool,
    done: &mut Option<Done>,
) -> Polled {
    // SAFETY: `RawTask::header_unbound`'s `# Safety`: S1 (RUNNING lock):
    // RUNNING is still set, so the entry (and with it the slab's reference
    // to the cell, I1) stays for this block: the header is read without
    // borrowing the slab again.
    let header = unsafe { raw.header_unbound() };
    let mut st = header.state();
    let own_group = !st.is_keyed();
    let next = match st.transition_to_idle(yielded) {
        TransitionToIdle::Cancel => {
            // Aborted during its own poll: drop it now, unpolled.
            // SAFETY: `RawTask::cancel`'s `# Safety`: S1 (RUNNING lock):
            // RUNNING is still set, so the entry stays (I1) and nothing else
            // touches the stage (I2); the stage is Running (the poll
            // returned `Pending`); executor thread.
            let f = unsafe { raw.cancel() };
            return ended(slab, id, raw, f, take_panic, true, done);
        }
        TransitionToIdle::Wait => Next::Wait,
        TransitionToIdle::Requeue => Next::Requeue,
        TransitionToIdle::Yield => Next::Yield,
    };
    header.set_state(st);
    Polled::Pending(next, own_group)
}

/// Cancels an aborted task that is not running, at a poll boundary.
#[must_use = "the record of the cancelled task must be finished by the executor"]
pub(crate) fn cancel_idle<S: Schedule>(
    slab: &RefCell<TaskSlab<S>>,
    id: TaskKey,
    take_panic: bool,
) -> Option<Done> {
    let raw = {
        let s = slab.borrow();
        let e = s.get(id)?;
        let ok = e.update(|st| st.transition_to_cancelling());
        if !ok {
            return None;
        }
        e.task.raw()
    };
    // SAFETY: `RawTask::cancel`'s `# Safety`: S1 (RUNNING lock): RUNNING
    // is set (`transition_to_cancelling`), so the entry stays (I1) and
    // nothing else touches the stage (I2); the stage is Running (not
    // COMPLETE); executor thread.
    let finish = unsafe { raw.cancel() };
    // The destructor's panic is the task's: taken for `Propagate`, as in
    // `ended`.
    Some(finish_task(slab, id, raw, finish, take_panic, true))
}

/// Ends task `id`, which is neither complete nor running, at a poll
/// boundary without polling it: its future is dropped and its result is
/// `payload()`, a panic. A task aborted before ends cancelled instead, as
/// [`cancel_idle`] ends it (with its destructor's panic taken for the
/// record when `take_panic` asks for it). Returns the record, and the
/// panic of the future's destructor when the result is `payload()` (not
/// the task's own: the caller reports it as a panic of other user code);
/// `None` if the task is gone, complete or running.
#[must_use = "the record of the ended task must be finished by the executor"]
pub(crate) fn end_idle_with<S: Schedule>(
    slab: &RefCell<TaskSlab<S>>,
    id: TaskKey,
    take_panic: bool,
    payload: impl FnOnce() -> Payload,
) -> Option<(Done, Option<Payload>)> {
    let (raw, aborted) = {
        let s = slab.borrow();
        let e = s.get(id)?;
        let aborted = e.state().is_cancelled();
        if !e.update(|st| st.transition_to_ending()) {
            return None;
        }
        (e.task.raw(), aborted)
    };
    if aborted {
        // SAFETY: `RawTask::cancel`'s `# Safety`: S1 (RUNNING lock):
        // RUNNING is set (`transition_to_ending`), so the entry stays (I1)
        // and nothing else touches the stage (I2); the stage is Running
        // (not COMPLETE); executor thread.
        let finish = unsafe { raw.cancel() };
        return Some((finish_task(slab, id, raw, finish, take_panic, true), None));
    }
    // SAFETY: `RawTask::cancel_with`'s `# Safety`: S1 (RUNNING lock):
    // RUNNING is set (`transition_to_ending`), so the entry stays (I1) and
    // nothing else touches the stage (I2); the stage is Running (not
    // COMPLETE); executor thread. `payload()` runs before the call.
    let destructor = unsafe { raw.cancel_with(payload()) };
    let done = finish_task(slab, id, raw, Finish::Panicked, false, false);
    Some((done, destructor))
}

#[cfg(test)]
mod tests {
    //! The task core alone: cells, slab, harness, wakers and handles run
    //! with a sink that records what reaches it, and no executor.
    use super::*;
    use crate::task::id::TaskKey;
    use crate::task::raw::Header;
    use crate::task::state::TransitionToScheduled;
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    /// What reached the sink: wakes and aborts, by task id.
    #[derive(Default)]
    struct Recorder {
        wakes: Mutex<Vec<TaskKey>>,
        aborts: Mutex<Vec<TaskKey>>,
    }

    impl Schedule for Recorder {
        fn wake(&self, header: &Header) {
            self.wakes.lock().unwrap().push(header.key);
        }
        fn abort(&self, header: &Header) {
            self.aborts.lock().unwrap().push(header.key);
        }
    }

    /// A poll scope that records the task being polled.
    #[derive(Default)]
    struct Scope {
        polling: Cell<Option<TaskKey>>,
        yielded: Cell<bool>,
    }

    impl PollScope for Scope {
        fn enter(&self, task: RawTask) {
            // SAFETY: `RawTask::header_unbound`'s `# Safety`: S1 (RUNNING
            // lock): the harness enters a task it polls, whose RUNNING bit
            // keeps the slab's reference (I1) for this call.
            let id = unsafe { task.header_unbound() }.key;
            assert_eq!(self.polling.replace(Some(id)), None, "one poll at a time");
        }
        fn leave(&self) -> bool {
            assert!(self.polling.take().is_some());
            self.yielded.take()
        }
    }

    fn slab() -> (RefCell<TaskSlab<Recorder>>, Arc<Recorder>) {
        let sink = Arc::new(Recorder::default());
        (RefCell::new(TaskSlab::new(sink.clone())), sink)
    }

    /// A future that stores its waker in `slot` and waits for `ready`.
    fn parked(
        slot: Arc<Mutex<Option<std::task::Waker>>>,
        ready: Arc<Mutex<bool>>,
    ) -> impl std::future::Future<Output = u32> {
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            if *ready.lock().unwrap() {
                return Poll::Ready(5);
            }
            *slot.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        })
    }

    #[test]
    fn wakes_reach_the_sink_from_any_thread_and_the_cell_outlives_the_slab() {
        let (cell, sink) = slab();
        let slot = Arc::new(Mutex::new(None));
        let ready = Arc::new(Mutex::new(false));
        let (oid, _) = cell
            .borrow_mut()
            .insert(parked(slot.clone(), ready.clone()), 0, None);
        let id = oid.id();
        let (scope, mut done) = (Scope::default(), None);
        let polled = poll_task(&cell, id, false, false, &mut done, &scope);
        assert_eq!(polled, Polled::Pending(Next::Wait, true));
        let waker = slot
            .lock()
            .unwrap()
            .take()
            .expect("the future kept its waker");
        waker.wake_by_ref();
        let w2 = waker.clone();
        std::thread::spawn(move || w2.wake()).join().unwrap();
        assert_eq!(*sink.wakes.lock().unwrap(), vec![id, id]);
        // The executor's side of a wake: the slab makes it runnable once.
        assert!(cell.borrow_mut().wake(id).is_some());
        assert!(cell.borrow_mut().wake(id).is_none(), "queued already");
        // Dropped unfinished (shutdown) while a waker lives: the cell takes
        // a counted reference to the sink, given back with the last waker.
        let before = Arc::strong_count(&sink);
        drop(cell);
        assert_eq!(
            Arc::strong_count(&sink),
            before,
            "the cell holds the slab's"
        );
        waker.wake_by_ref();
        assert_eq!(
            sink.wakes.lock().unwrap().len(),
            3,
            "a late wake is harmless"
        );
        drop(waker);
        assert_eq!(Arc::strong_count(&sink), before - 1);
    }

    #[test]
    fn join_handle_reads_the_result_in_place_and_aborts_through_the_sink() {
        let (cell, sink) = slab();
        let (join, _) = cell.borrow_mut().insert_joined(async { 41 + 1 }, 0, None);
        let pending = cell
            .borrow_mut()
            .insert_joined(std::future::pending::<()>(), 0, None)
            .0;
        let noop = std::task::Waker::noop();
        assert!(join.poll_result(noop).is_pending());
        let (scope, mut done) = (Scope::default(), None);
        assert_eq!(
            poll_task(&cell, join.key(), false, true, &mut done, &scope),
            Polled::Done
        );
        assert!(done.take().unwrap().panics.is_none());
        assert!(matches!(join.poll_result(noop), Poll::Ready(Ok(42))));
        // Aborting a complete task does not reach the sink.
        join.abort();
        assert!(sink.aborts.lock().unwrap().is_empty());
        // A live one: the join handle marks it and tells the sink; an abort
        // reference does the same from another thread.
        pending.abort();
        let abort = pending.abort_ref();
        std::thread::spawn(move || abort.abort()).join().unwrap();
        assert_eq!(
            *sink.aborts.lock().unwrap(),
            vec![pending.key(), pending.key()]
        );
        assert!(
            cell.borrow_mut().abort(pending.key()),
            "idle: cancel at the boundary"
        );
        // The executor's side: cancelled at the next poll boundary.
        let d = cancel_idle(&cell, pending.key(), false).expect("cancelled");
        assert!(d.cancelled);
        match pending.poll_result(noop) {
            Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
            _ => panic!("a cancelled task reads Cancelled"),
        }
    }

    #[test]
    fn a_wake_during_the_poll_requeues_and_a_yield_is_reported() {
        let (cell, _sink) = slab();
        let mut n = 0;
        let (oid, _) = cell.borrow_mut().insert(
            std::future::poll_fn(move |_| {
                n += 1;
                if n == 3 {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }),
            0,
            None,
        );
        let id = oid.id();
        let (scope, mut done) = (Scope::default(), None);
        // Woken while RUNNING (what the executor's sink does for a wake on
        // its own thread): pushed after the poll.
        let polled = {
            struct WakeInPoll<'a>(&'a Scope, &'a RefCell<TaskSlab<Recorder>>);
            impl PollScope for WakeInPoll<'_> {
                fn enter(&self, task: RawTask) {
                    self.0.enter(task);
                    let id = self.0.polling.get().unwrap();
                    let st = self.1.borrow();
                    let e = st.get(id).unwrap();
                    assert_eq!(
                        e.update(|s| s.transition_to_scheduled()),
                        TransitionToScheduled::AfterPoll
                    );
                }
                fn leave(&self) -> bool {
                    self.0.leave()
                }
            }
            poll_task(
                &cell,
                id,
                false,
                false,
                &mut done,
                &WakeInPoll(&scope, &cell),
            )
        };
        assert_eq!(polled, Polled::Pending(Next::Requeue, true));
        let polled = {
            struct Yields<'a>(&'a Scope);
            impl PollScope for Yields<'_> {
                fn enter(&self, task: RawTask) {
                    self.0.enter(task);
                }
                fn leave(&self) -> bool {
                    self.0.leave();
                    true
                }
            }
            poll_task(&cell, id, false, false, &mut done, &Yields(&scope))
        };
        assert_eq!(polled, Polled::Pending(Next::Yield, true));
        assert_eq!(
            poll_task(&cell, id, false, false, &mut done, &scope),
            Polled::Done
        );
        assert_eq!(
            poll_task(&cell, id, false, false, &mut done, &scope),
            Polled::Stale
        );
    }

    #[test]
    fn generations_tell_reused_slots_apart() {
        let mut s = TaskSlab::new(Arc::new(Recorder::default()));
        let (a, _) = s.insert(async {}, 0, None);
        let a = a.id();
        // Complete it by hand through the harness.
        let cell = RefCell::new(s);
        let mut done = None;
        assert_eq!(
            poll_task(&cell, a, false, false, &mut done, &Scope::default()),
            Polled::Done
        );
        assert!(done.is_some());
        let mut s = cell.into_inner();
        assert!(s.get(a).is_none());
        let (b, _) = s.insert(async {}, 0, None);
        let b = b.id();
        assert_eq!(a.index(), b.index());
        assert_ne!(a, b);
        assert!(s.get(a).is_none());
        assert!(s.get(b).is_some());
        assert!(s.wake(a).is_none());
    }

    /// Both call sites of a poll ([`RawTask::poll`]) report `Pending`, an
    /// output and a panic alike.
    #[test]
    fn both_call_sites_report_pending_output_and_panic() {
        for second_site in [false, true] {
            let mut s = TaskSlab::new(Arc::new(Recorder::default()));
            let mut first = true;
            let pend_once = std::future::poll_fn(move |_| {
                if std::mem::take(&mut first) {
                    std::task::Poll::Pending
                } else {
                    std::task::Poll::Ready(7)
                }
            });
            let (a, _) = s.insert(pend_once, 0, None);
            let (b, _) = s.insert(async { panic!("boom") }, 0, None);
            let (a, b) = (a.id(), b.id());
            let cell = RefCell::new(s);
            let mut done = None;
            let polled = poll_task(&cell, a, true, second_site, &mut done, &Scope::default());
            assert_eq!(polled, Polled::Pending(Next::Wait, true));
            assert!(done.is_none());
            // Runnable again, as a wake would leave it.
            cell.borrow()
                .get(a)
                .unwrap()
                .update(|st| st.set_scheduled(true));
            let polled = poll_task(&cell, a, true, second_site, &mut done, &Scope::default());
            assert_eq!(polled, Polled::Done);
            let d = done.take().unwrap();
            assert_eq!(d.finish, Finish::Output);
            assert!(d.panics.is_none());
            let polled = poll_task(&cell, b, true, second_site, &mut done, &Scope::default());
            assert_eq!(polled, Polled::Done);
            let d = done.take().unwrap();
            assert_eq!(d.finish, Finish::Panicked);
            let payload = d.panics.expect("the payload, asked for").task.unwrap();
            assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
        }
    }

    /// The run loop's scope: marks the task being polled on this thread
    /// (`task::current`), which the wakers' credit relies on.
    struct Current;

    impl PollScope for Current {
        fn enter(&self, task: RawTask) {
            crate::task::current::enter(task.header_addr());
        }
        fn leave(&self) -> bool {
            crate::task::current::leave()
        }
    }

    #[test]
    fn a_waker_given_up_during_a_poll_leaves_its_reference_for_the_next_clone() {
        let (cell, sink) = slab();
        let slot = Arc::new(Mutex::new(None));
        let ready = Arc::new(Mutex::new(false));
        let a = cell
            .borrow_mut()
            .insert(parked(slot.clone(), ready.clone()), 0, None)
            .0
            .id();
        // B gives up A's waker during its polls: woken (consumed), then
        // dropped.
        let taken = slot.clone();
        let consume = Rc::new(Cell::new(true));
        let b_consume = consume.clone();
        let b = cell
            .borrow_mut()
            .insert(
                std::future::poll_fn(move |_: &mut Context<'_>| {
                    let w = taken.lock().unwrap().take().expect("A's waker");
                    if b_consume.get() {
                        w.wake();
                    } else {
                        drop(w);
                    }
                    Poll::<()>::Pending
                }),
                0,
                None,
            )
            .0
            .id();
        let header_of = |w: &std::task::Waker| -> &'static Header {
            // SAFETY: `header_ref`'s `# Safety`: `w` is a task waker (its
            // data a header's address, I5), and I1 (liveness): the caller
            // keeps a clone of `w`, which owns a reference, alive for as
            // long as it reads the header.
            unsafe { crate::task::raw::header_ref(w.data()) }
        };
        let mut done = None;
        let poll = |id, done: &mut Option<Done>| poll_task(&cell, id, false, false, done, &Current);
        assert_eq!(poll(a, &mut done), Polled::Pending(Next::Wait, true));
        // A kept clone, outside any poll: counted (the slab's, the slot's,
        // this one).
        let kept = slot.lock().unwrap().clone().unwrap();
        let h = header_of(&kept);
        assert_eq!(h.ref_count(), 3);
        assert_eq!(poll(b, &mut done), Polled::Pending(Next::Wait, true));
        assert_eq!(
            *sink.wakes.lock().unwrap(),
            vec![a],
            "the wake went through"
        );
        assert!(
            h.state().has_credit(),
            "the consumed waker's reference stays"
        );
        assert_eq!(h.ref_count(), 3);
        assert!(cell.borrow_mut().wake(a).is_some());
        assert_eq!(poll(a, &mut done), Polled::Pending(Next::Wait, true));
        assert!(!h.state().has_credit(), "the clone took it back");
        assert_eq!(h.ref_count(), 3);
        // Dropped rather than woken: the same.
        consume.set(false);
        assert_eq!(poll(b, &mut done), Polled::Pending(Next::Wait, true));
        assert!(h.state().has_credit());
        assert_eq!(h.ref_count(), 3);
        // A clone outside a poll, or on another thread, counts as before.
        let other = kept.clone();
        assert_eq!(h.ref_count(), 4);
        std::thread::spawn(move || drop(other.clone()))
            .join()
            .unwrap();
        assert_eq!(h.ref_count(), 3, "the thread's clone and the original");
        assert!(h.state().has_credit());
        // A completes with the credit outstanding: the slab gives it back
        // with its own reference, and the kept clone holds the cell alone
        // (with a counted reference to the sink, given back with it).
        *ready.lock().unwrap() = true;
        assert!(cell.borrow_mut().wake(a).is_some());
        let sinks = Arc::strong_count(&sink);
        assert_eq!(poll(a, &mut done), Polled::Done);
        assert_eq!(h.ref_count(), 1);
        assert!(!h.state().has_credit());
        assert_eq!(Arc::strong_count(&sink), sinks + 1);
        // A complete task keeps no credit: a drop during a poll releases.
        slot.lock().unwrap().replace(kept.clone());
        assert_eq!(h.ref_count(), 2);
        assert_eq!(poll(b, &mut done), Polled::Pending(Next::Wait, true));
        assert_eq!(h.ref_count(), 1);
        drop(kept);
        assert_eq!(Arc::strong_count(&sink), sinks, "the cell was freed");
    }
}
