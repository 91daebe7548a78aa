#![forbid(unsafe_code)]
//! The pool's deadlines: one thread that sleeps until the earliest
//! registered instant and wakes its waker ([`Timer`]), and the future that
//! waits for an instant ([`Sleep`]). Submission timeouts use it; the
//! pool's executors keep their hosts' timers for their tasks.
//!
//! The thread starts with the first deadline and ends when the pool's
//! last handle is dropped.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Instant;

use crate::boundary;

/// The deadline thread's state, shared with the futures that wait.
#[derive(Default)]
pub(crate) struct Timer {
    state: Mutex<TimerState>,
    changed: Condvar,
}

#[derive(Default)]
struct TimerState {
    /// Deadlines, earliest first, under a sequence number that keeps equal
    /// instants apart.
    due: BTreeMap<(Instant, u64), ()>,
    /// The waker of each registered deadline.
    wakers: HashMap<u64, Waker>,
    next: u64,
    started: bool,
    closed: bool,
}

impl Timer {
    fn lock(&self) -> std::sync::MutexGuard<'_, TimerState> {
        // No critical section panics (moves and map operations).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers (or re-registers, under `id`) `waker` to be woken at `at`.
    fn register(self: &Arc<Self>, at: Instant, id: &mut Option<u64>, waker: &Waker) {
        let mut st = self.lock();
        if let Some(i) = *id {
            if let Some(w) = st.wakers.get_mut(&i) {
                if !w.will_wake(waker) {
                    *w = waker.clone();
                }
                return;
            }
        }
        let i = st.next;
        st.next += 1;
        st.due.insert((at, i), ());
        st.wakers.insert(i, waker.clone());
        *id = Some(i);
        let earliest = st.due.keys().next() == Some(&(at, i));
        if !st.started {
            st.started = true;
            let timer = self.clone();
            // If the thread cannot start, deadlines are seen when the
            // futures are polled for other reasons.
            let _ = thread::Builder::new()
                .name("tourbillon-pool-timer".into())
                .spawn(move || timer.run());
        } else if earliest {
            self.changed.notify_one();
        }
    }

    /// Forgets the deadline `id` (its future is done or dropped).
    fn cancel(&self, at: Instant, id: u64) {
        let waker = {
            let mut st = self.lock();
            st.due.remove(&(at, id));
            st.wakers.remove(&id)
        };
        drop(waker);
    }

    /// Stops the thread (the pool is gone).
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_one();
    }

    /// The thread: wakes each deadline's waker once it is due.
    fn run(&self) {
        let mut st = self.lock();
        loop {
            if st.closed {
                return;
            }
            let now = Instant::now();
            let mut ready = Vec::new();
            while let Some(&(at, i)) = st.due.keys().next() {
                if at > now {
                    break;
                }
                st.due.remove(&(at, i));
                if let Some(w) = st.wakers.remove(&i) {
                    ready.push(w);
                }
            }
            if !ready.is_empty() {
                drop(st);
                for w in ready {
                    // A waker's panic (or its payload's drop) must not end
                    // the timer thread.
                    if let Err(p) = boundary::call(|| w.wake()) {
                        boundary::drop_payload(p);
                    }
                }
                st = self.lock();
                continue;
            }
            st = match st.due.keys().next() {
                Some(&(at, _)) => {
                    let wait = at.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(st, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
                None => self
                    .changed
                    .wait(st)
                    .unwrap_or_else(PoisonError::into_inner),
            };
        }
    }
}

/// A future that completes at an instant (or at once, if it has passed).
pub(crate) struct Sleep {
    timer: Arc<Timer>,
    at: Instant,
    id: Option<u64>,
}

impl Sleep {
    pub(crate) fn new(timer: Arc<Timer>, at: Instant) -> Self {
        Sleep {
            timer,
            at,
            id: None,
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if Instant::now() >= this.at {
            if let Some(i) = this.id.take() {
                this.timer.cancel(this.at, i);
            }
            return Poll::Ready(());
        }
        this.timer.register(this.at, &mut this.id, cx.waker());
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(i) = self.id.take() {
            self.timer.cancel(self.at, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_passed_instant_is_ready_at_once_and_a_future_one_is_woken() {
        let timer = Arc::new(Timer::default());
        let mut now = Sleep::new(timer.clone(), Instant::now());
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(Pin::new(&mut now).poll(&mut cx), Poll::Ready(()));
        // A deadline ahead: the thread wakes it (the outcome does not
        // depend on how late the thread runs).
        let later = Sleep::new(timer.clone(), Instant::now() + Duration::from_millis(5));
        futures::executor::block_on(later);
        timer.close();
    }

    #[test]
    fn a_dropped_sleep_leaves_no_waker_behind() {
        let timer = Arc::new(Timer::default());
        let mut s = Sleep::new(timer.clone(), Instant::now() + Duration::from_secs(3600));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(Pin::new(&mut s).poll(&mut cx), Poll::Pending);
        assert_eq!(timer.lock().wakers.len(), 1);
        drop(s);
        assert!(timer.lock().wakers.is_empty());
        assert!(timer.lock().due.is_empty());
        timer.close();
    }
}
