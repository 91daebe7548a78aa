#![forbid(unsafe_code)]
//! Calls into user code: the crate's one rule for panics.
//!
//! **Every call into user code is a panic boundary.** User code is every
//! future the executor polls or drops, every task output and panic payload
//! it drops, every waker it wakes, clones or drops that it did not make
//! (joiners, host runtimes, the wakers a `yield_now` defers), every method
//! of a custom [`Scheduler`](crate::sched::Scheduler), [`Clock::now_ns`](crate::clock::Clock::now_ns),
//! the stall detector's callback and, with the `tracing` feature, the
//! subscriber behind each span. The executor makes such a call only
//! through [`call`] (or a `catch_unwind` of its own in the task core,
//! which hands the payload back the same way), with no `RefCell` of its own
//! borrowed in a way the call could observe, and only where its own state
//! is whole whatever the call does. A panic that comes back goes to the
//! executor's [`PanicSink`], where the [`PanicPolicy`](crate::config::PanicPolicy)
//! decides:
//!
//! * a task's own poll or destructor: the task ends as panicked, and its
//!   join handle reads the payload (`Catch`), or the payload resumes out of
//!   the driver once the task is settled (`Propagate`: every task's panic,
//!   one per driver call, in the order the tasks ended; none is dropped
//!   for another panic that waits);
//! * anything else: the call's effect is replaced by a safe default (a
//!   clock read by the last reading, a scheduler `push` by the executor's
//!   own rescue list, a waker's wake by nothing), the payload is dropped and
//!   counted in [`ExecutorStats::caught_panics`](crate::stats::ExecutorStats::caught_panics)
//!   (`Catch`), or kept and resumed out of the driver (`Propagate`: the
//!   first one; later ones until then are dropped and counted).
//!
//! A custom scheduler whose method keeps panicking is *quarantined*: after
//! [`QUARANTINE_AFTER`](crate::sched::QUARANTINE_AFTER) panics in a row of
//! one of its methods (a normal return of that method resets its count),
//! it is never called again, and at the end of the driver's turn
//! ([`PanicSink::take_quarantine`]) the executor drops it (behind the
//! boundary) and ends every task of its queue with a panic `JoinError`
//! that names the quarantine. Those ends are not the tasks' own panics:
//! they never resume out of the driver. The scheduler's panics themselves
//! are handled as above.
//!
//! Payloads are dropped through [`drop_payload`]: a payload's own
//! destructor is user code too, and may panic.
//!
//! Nothing unwinds out of `block_on`, `run_until` or `run_until_stalled`
//! under `Catch` (apart from the driver's own main future, which is the
//! caller's), and nothing ever unwinds out of the executor's drop.
//!
//! The scheduler contract ([`Scheduler`](crate::sched::Scheduler)) is checked at
//! the same place: a violation is counted, and in debug builds it resumes
//! out of the driver as a panic naming the broken rule, whatever the policy.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::rc::Rc;

/// A panic payload.
pub(crate) type Payload = Box<dyn Any + Send>;

/// Runs user code `f`, catching a panic.
#[inline(always)]
pub(crate) fn call<R>(f: impl FnOnce() -> R) -> Result<R, Payload> {
    catch_unwind(AssertUnwindSafe(f))
}

/// Drops `value` (whose destructor is user code), catching a panic.
#[inline]
pub(crate) fn drop_caught<T>(value: T) -> Option<Payload> {
    call(move || drop(value)).err()
}

/// The message of a panic payload, if it is a string (`panic!`'s
/// payloads are a `&'static str` or a `String`).
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> Option<&str> {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
}

/// How many nested panics of payload destructors [`drop_payload`] follows
/// before it gives up on the last payload (and forgets it: a leak of one
/// box, after this many destructors panicked in a chain).
const PAYLOAD_DROP_DEPTH: usize = 16;

/// Drops a panic payload whose destructor may itself panic (with a payload
/// whose destructor may panic, and so on).
pub(crate) fn drop_payload(payload: Payload) {
    let mut next = payload;
    for _ in 0..PAYLOAD_DROP_DEPTH {
        match drop_caught(next) {
            None => return,
            Some(p) => next = p,
        }
    }
    std::mem::forget(next);
}

/// Where the executor sends the panics of user code and the broken rules
/// of a scheduler's contract; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct PanicSink {
    /// `PanicPolicy::Propagate`.
    propagate: bool,
    /// A panic of user code other than a task to resume out of the driver.
    held: RefCell<Option<Payload>>,
    /// Tasks' panics to resume out of the driver (`Propagate`), before
    /// `held`, one at a time.
    tasks: RefCell<VecDeque<Payload>>,
    /// `held` or `tasks` holds a panic, or `quarantine` is set (read after
    /// every task that ends: one load).
    waiting: Cell<bool>,
    /// A custom scheduler was quarantined and its queue waits for the
    /// driver to end its tasks.
    quarantine: Cell<bool>,
    /// Panics of user code caught and dropped.
    caught: Cell<u64>,
    /// Scheduler contract violations seen.
    violations: Cell<u64>,
}

impl PanicSink {
    pub(crate) fn new(propagate: bool) -> Self {
        Self {
            propagate,
            ..Self::default()
        }
    }

    /// Whether task panics resume out of the driver.
    pub(crate) fn propagates(&self) -> bool {
        self.propagate
    }

    /// A panic of user code, caught: kept for the driver under
    /// `Propagate` (the first one while none waits), else dropped and
    /// counted.
    pub(crate) fn report(&self, payload: Payload) {
        if self.propagate && self.held.borrow().is_none() {
            *self.held.borrow_mut() = Some(payload);
            self.waiting.set(true);
            return;
        }
        self.caught.set(self.caught.get() + 1);
        drop_payload(payload);
    }

    /// A task's panic, taken for `Propagate`: it waits to resume out of the
    /// driver, whatever else waits.
    pub(crate) fn report_task(&self, payload: Payload) {
        debug_assert!(self.propagate, "under Catch the join handle reads it");
        self.tasks.borrow_mut().push_back(payload);
        self.waiting.set(true);
    }

    /// [`report`](Self::report) of the panic of `result`, if any.
    #[inline]
    pub(crate) fn check<R>(&self, result: Result<R, Payload>) -> Option<R> {
        match result {
            Ok(r) => Some(r),
            Err(p) => {
                self.report(p);
                None
            }
        }
    }

    /// A broken rule of a scheduler's contract: counted; in debug builds
    /// it also resumes out of the driver as a panic with `message`.
    pub(crate) fn violation(&self, message: impl FnOnce() -> String) {
        self.violations.set(self.violations.get() + 1);
        if cfg!(debug_assertions) {
            let payload: Payload = Box::new(format!(
                "tourbillon: scheduler contract broken: {}",
                message()
            ));
            let old = self.held.borrow_mut().replace(payload);
            self.waiting.set(true);
            if let Some(old) = old {
                self.caught.set(self.caught.get() + 1);
                drop_payload(old);
            }
        }
    }

    /// A custom scheduler reached the quarantine: the driver settles it at
    /// the end of its turn ([`take_quarantine`](Self::take_quarantine)).
    pub(crate) fn quarantine(&self) {
        self.quarantine.set(true);
        self.waiting.set(true);
    }

    /// Whether a quarantine waits to be settled; clears the request.
    pub(crate) fn take_quarantine(&self) -> bool {
        let asked = self.quarantine.replace(false);
        if asked {
            self.waiting
                .set(self.held.borrow().is_some() || !self.tasks.borrow().is_empty());
        }
        asked
    }

    /// Takes the next waiting panic: the first task's, else the held one.
    fn take(&self) -> Option<Payload> {
        let task = self.tasks.borrow_mut().pop_front();
        let next = task.or_else(|| self.held.borrow_mut().take());
        self.waiting.set(
            self.held.borrow().is_some()
                || !self.tasks.borrow().is_empty()
                || self.quarantine.get(),
        );
        next
    }

    /// Whether a panic waits to resume out of the driver, or a quarantine
    /// to be settled.
    #[inline]
    pub(crate) fn holds(&self) -> bool {
        self.waiting.get()
    }

    /// Resumes one waiting panic, if any: the first task's, else the held
    /// one (the drivers call it where no state of the executor is left
    /// half-done).
    #[inline]
    pub(crate) fn rethrow(&self) {
        if self.waiting.get() {
            if let Some(p) = self.take() {
                resume_unwind(p);
            }
        }
    }

    /// Drops every waiting panic (shutdown: nothing may unwind out of a
    /// drop).
    pub(crate) fn discard(&self) {
        while let Some(p) = self.take() {
            self.caught.set(self.caught.get() + 1);
            drop_payload(p);
        }
    }

    /// Panics of user code caught and dropped so far.
    pub(crate) fn caught(&self) -> u64 {
        self.caught.get()
    }

    /// Scheduler contract violations so far.
    pub(crate) fn violations(&self) -> u64 {
        self.violations.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct PanicsOnDrop(u32);
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            if self.0 > 0 {
                std::panic::panic_any(PanicsOnDrop(self.0 - 1));
            }
        }
    }

    #[test]
    fn payload_chains_are_dropped_without_unwinding() {
        drop_payload(Box::new(PanicsOnDrop(3)));
    }

    #[test]
    fn catch_counts_and_propagate_keeps_the_first() {
        let sink = PanicSink::new(false);
        sink.report(Box::new(1));
        assert_eq!(sink.caught(), 1);
        assert!(!sink.holds());

        let sink = PanicSink::new(true);
        sink.report(Box::new(1u8));
        sink.report(Box::new(2u8));
        assert_eq!(sink.caught(), 1);
        let p = call(|| sink.rethrow()).unwrap_err();
        assert_eq!(p.downcast_ref::<u8>(), Some(&1));
        assert!(!sink.holds());
    }

    #[test]
    fn propagate_resumes_every_task_panic_once() {
        let sink = PanicSink::new(true);
        sink.report(Box::new(1u8));
        sink.report_task(Box::new(2u8));
        sink.report_task(Box::new(3u8));
        sink.report(Box::new(4u8));
        assert_eq!(sink.caught(), 1, "the second non-task panic");
        for want in [2u8, 3, 1] {
            let p = call(|| sink.rethrow()).unwrap_err();
            assert_eq!(p.downcast_ref::<u8>(), Some(&want));
        }
        assert!(!sink.holds());
        sink.rethrow();
        sink.report_task(Box::new(5u8));
        sink.report(Box::new(6u8));
        sink.discard();
        assert_eq!(sink.caught(), 3);
        assert!(!sink.holds());
    }
}

thread_local! {
    /// The panic sink of the executor that drives this thread, if any.
    static DRIVING: RefCell<Option<Rc<PanicSink>>> = const { RefCell::new(None) };
}

/// Makes `sink` the panic sink of the executor driving this thread until
/// the guard drops (which restores the previous one, also on unwind).
pub(crate) fn enter_sink(sink: &Rc<PanicSink>) -> SinkGuard {
    let prev = DRIVING.with(|d| d.replace(Some(sink.clone())));
    SinkGuard { prev }
}

/// Restores the previous driving executor's sink on drop.
pub(crate) struct SinkGuard {
    prev: Option<Rc<PanicSink>>,
}

impl Drop for SinkGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        let _ = DRIVING.try_with(|d| *d.borrow_mut() = prev);
    }
}

/// Reports `payload` to the sink of the executor driving this thread
/// ([`PanicSink::report`]); gives it back when no executor drives this
/// thread (or during thread teardown).
pub(crate) fn report_here(payload: Payload) -> Option<Payload> {
    let mut payload = Some(payload);
    let _ = DRIVING.try_with(|d| {
        if let Some(sink) = d.try_borrow().ok().as_deref().and_then(Option::as_ref) {
            if let Some(p) = payload.take() {
                sink.report(p);
            }
        }
    });
    payload
}
