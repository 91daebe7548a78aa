#![forbid(unsafe_code)]
//! The executor's thread-safe half: wakes arriving while the executor is not
//! polling on its own thread (from other threads, or from a host runtime's
//! timers and I/O between two of our turns) go into a short-lock inbox, and
//! the host is woken: the `block_on` thread is unparked, or the host
//! runtime's waker of `run_until` is woken.
//!
//! Lost-wake-up freedom: a waker pushes the id, *then* raises `pending`,
//! *then* wakes the host; the executor registers its host waker, *then*
//! checks `pending` before it parks. Either the executor sees `pending`, or
//! the waker sees the registered host waker (and `Thread::unpark` before
//! `park` makes `park` return at once).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::Waker;

use crate::task::id::TaskId;

/// The part of an executor that wakers on any thread may reach.
#[derive(Debug, Default)]
pub(crate) struct Remote {
    ids: Mutex<Vec<TaskId>>,
    pending: AtomicBool,
    host: Mutex<Option<Waker>>,
    closed: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The critical sections below cannot panic, so poisoning is impossible;
    // recover anyway rather than propagate someone else's panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Remote {
    /// Queues a wake of `id`, deduplicated by the task's `notified` flag,
    /// and wakes the host.
    pub(crate) fn push(&self, id: TaskId, notified: &AtomicBool) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        if notified.swap(true, Ordering::AcqRel) {
            return; // already in the inbox, not yet drained
        }
        lock(&self.ids).push(id);
        self.pending.store(true, Ordering::Release);
        self.wake_host();
    }

    /// Wakes whatever drives the executor (thread unpark or host waker).
    pub(crate) fn wake_host(&self) {
        let host = lock(&self.host).clone();
        if let Some(w) = host {
            w.wake();
        }
    }

    /// Registers the waker of the current driver.
    pub(crate) fn set_host(&self, waker: &Waker) {
        let mut host = lock(&self.host);
        match &*host {
            Some(w) if w.will_wake(waker) => {}
            _ => *host = Some(waker.clone()),
        }
    }

    /// Whether wakes are waiting in the inbox.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Moves the queued ids into `out`.
    pub(crate) fn drain_into(&self, out: &mut Vec<TaskId>) {
        if self.pending.swap(false, Ordering::AcqRel) {
            out.append(&mut lock(&self.ids));
        }
    }

    /// The executor is gone: later wakes are dropped.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        lock(&self.ids).clear();
        *lock(&self.host) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn wakes_are_deduplicated_until_drained() {
        let r = Remote::default();
        let flag = AtomicBool::new(false);
        let id = TaskId::new(3, 1);
        r.push(id, &flag);
        r.push(id, &flag);
        let mut out = vec![];
        r.drain_into(&mut out);
        assert_eq!(out, vec![id]);
        assert!(!r.has_pending());
        flag.store(false, Ordering::Release);
        r.push(id, &flag);
        out.clear();
        r.drain_into(&mut out);
        assert_eq!(out, vec![id]);
    }

    #[test]
    fn closed_inbox_ignores_wakes() {
        let r = Arc::new(Remote::default());
        r.close();
        r.push(TaskId::new(0, 0), &AtomicBool::new(false));
        assert!(!r.has_pending());
    }
}
