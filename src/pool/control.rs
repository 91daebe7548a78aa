#![forbid(unsafe_code)]
//! What the pool and one core's thread share to stop it: the phase the
//! pool asks for ([`Phase`]: run, drain, abort), which the core's main
//! future awaits ([`CoreControl::reached`]), and whether the core has
//! finished, which the shutting-down thread waits for, with a deadline
//! ([`CoreControl::wait_finished`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::PoisonError;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::boundary;
use crate::sync::{Condvar, Mutex, MutexGuard};

/// The phases of a core, in order; the pool only moves them forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    /// Accepting and running work.
    Run,
    /// Shutting down: let the tasks alive finish.
    Drain,
    /// The grace period is over: drop the tasks still alive.
    Abort,
}

#[derive(Debug)]
struct State {
    phase: Phase,
    /// The core's main future, waiting for the next phase.
    waker: Option<Waker>,
    /// The core's executor is gone (drained, aborted, or its thread
    /// panicked).
    finished: bool,
}

/// One core's stop signals.
#[derive(Debug)]
pub(crate) struct CoreControl {
    state: Mutex<State>,
    finished: Condvar,
}

impl Default for CoreControl {
    fn default() -> Self {
        CoreControl {
            state: Mutex::new(State {
                phase: Phase::Run,
                waker: None,
                finished: false,
            }),
            finished: Condvar::new(),
        }
    }
}

impl CoreControl {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No critical section panics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the core to `phase` (never back) and wakes its main future.
    pub(crate) fn advance(&self, phase: Phase) {
        let waker = {
            let mut st = self.lock();
            if st.phase >= phase {
                return;
            }
            st.phase = phase;
            st.waker.take()
        };
        if let Some(w) = waker {
            // The host's (or `block_on`'s) waker of the core's thread: user
            // code, as is its panic's payload.
            if let Err(p) = boundary::call(|| w.wake()) {
                boundary::drop_payload(p);
            }
        }
    }

    /// Polls for `phase` (or a later one), registering `cx`'s waker.
    pub(crate) fn poll_phase(&self, phase: Phase, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.lock();
        if st.phase >= phase {
            return Poll::Ready(());
        }
        match &st.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// A future that completes once the pool asks for `phase`.
    pub(crate) fn reached(&self, phase: Phase) -> Reached<'_> {
        Reached {
            control: self,
            phase,
        }
    }

    /// The core's thread is done with its executor.
    pub(crate) fn finish(&self) {
        self.lock().finished = true;
        self.finished.notify_all();
    }

    /// Waits until the core finished or `deadline` passed; `true` if it
    /// finished.
    pub(crate) fn wait_finished(&self, deadline: Instant) -> bool {
        let mut st = self.lock();
        while !st.finished {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self
                .finished
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }
}

/// Future returned by [`CoreControl::reached`].
pub(crate) struct Reached<'a> {
    control: &'a CoreControl,
    phase: Phase,
}

impl Future for Reached<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.control.poll_phase(self.phase, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn phases_only_move_forward_and_wake_the_waiter() {
        let c = CoreControl::default();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(c.poll_phase(Phase::Drain, &mut cx).is_pending());
        c.advance(Phase::Abort);
        c.advance(Phase::Drain);
        assert!(c.poll_phase(Phase::Drain, &mut cx).is_ready());
        assert!(c.poll_phase(Phase::Abort, &mut cx).is_ready());
    }

    #[test]
    fn waiting_for_a_finish_respects_the_deadline() {
        let c = CoreControl::default();
        assert!(!c.wait_finished(Instant::now()));
        c.finish();
        assert!(c.wait_finished(Instant::now() + Duration::from_secs(3600)));
    }
}

/// Model checks of a core's stop signals (run with
/// `RUSTFLAGS="--cfg tourbillon_loom" cargo test --release --lib loom`).
#[cfg(all(test, tourbillon_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::Arc;
    use loom::thread;
    use std::task::Wake;

    struct Flag(Arc<AtomicBool>);
    impl Wake for Flag {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn loom_a_phase_advanced_while_the_core_polls_is_never_missed() {
        // The pool advances the phase while the core's main future polls
        // for it: the poll sees the phase, or its waker is woken.
        loom::model(|| {
            let control = Arc::new(CoreControl::default());
            let c2 = control.clone();
            let pool = thread::spawn(move || c2.advance(Phase::Drain));
            let woken = Arc::new(AtomicBool::new(false));
            let waker = Waker::from(std::sync::Arc::new(Flag(woken.clone())));
            let mut cx = Context::from_waker(&waker);
            let polled = control.poll_phase(Phase::Drain, &mut cx);
            pool.join().unwrap();
            assert!(polled.is_ready() || woken.load(Ordering::SeqCst));
        });
    }

    #[test]
    fn loom_a_finish_racing_the_shutdown_wait_is_seen() {
        // The core finishes while the shutting-down thread waits for it.
        loom::model(|| {
            let control = Arc::new(CoreControl::default());
            let c2 = control.clone();
            let core = thread::spawn(move || c2.finish());
            let far = Instant::now() + std::time::Duration::from_secs(3600);
            assert!(control.wait_finished(far));
            core.join().unwrap();
        });
    }
}
