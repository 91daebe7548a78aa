#![forbid(unsafe_code)]
//! The gate of the bounded remote submission path: a semaphore whose
//! permits are tasks submitted and not yet polled ([`Gate`]), the
//! [`Permit`] a task holds until its first poll, and [`Permitted`], the
//! task future that gives it back.
//!
//! The gate is an atomic count and a line of waiting senders under a
//! lock. Senders wait in line; once at least half the capacity is free,
//! the oldest is woken, and one woken sender that takes a permit wakes the
//! next while half the room is still free: a sender that floods the
//! executor is woken once per `capacity / 2` of its tasks, not once per
//! task (each wake of a parked thread is a system call on the executor's
//! thread). While senders wait or were woken, a new sender (or a
//! `try_spawn`) does not jump the line. No waker is cloned, woken or
//! dropped under the lock. A woken sender that is dropped passes the wake
//! on.

use std::collections::VecDeque;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll, Waker};

use pin_project_lite::pin_project;

use crate::boundary;
use crate::sync::{AtomicUsize, Mutex, MutexGuard};
use std::sync::atomic::Ordering;

/// The shared count of a bounded spawner and its clones.
///
/// The count of permits is an atomic word, so that a submission and a first
/// poll with nobody waiting each cost one atomic operation and no lock (the
/// spawning thread and the executor's thread would otherwise contend for
/// the lock on every task). The lock guards the line of waiting senders;
/// the word's top bit ([`WAITING`]) says the line is not empty.
/// Lost-wake-up freedom: a sender that will wait joins the line, then sets
/// the bit with one read-modify-write of the word, which also reads the
/// count: if half the room is free by then, it wakes the line itself. A
/// release lowers the count with one read-modify-write, which also reads
/// the bit: if it is set and half the room is free, it wakes the line.
/// Read-modify-writes of one word are totally ordered, so one of the two
/// sees the other.
///
/// The capacity asked for is kept as it was given (`capacity`, any
/// `usize`); the word counts permits below its [`WAITING`] bit, so the
/// permits it lets out are bounded by `limit`, the capacity but at most
/// `WAITING - 1` (`isize::MAX`). The two differ only for a capacity no
/// count can reach: each permit holds a clone of the gate's `Arc`, whose
/// count may not pass `isize::MAX`, and belongs to a live task allocation.
pub(crate) struct Gate {
    /// The capacity the spawner was made with.
    pub(super) capacity: usize,
    /// The most permits taken at once: `capacity`, at most `WAITING - 1`.
    limit: usize,
    /// Waiting senders are woken when `used` is at most this (half the
    /// limit): a sender that floods the executor is woken once per
    /// `capacity / 2` tasks, not once per task.
    low: usize,
    /// Permits taken by tasks not yet polled (or being submitted), and
    /// [`WAITING`] while senders are in line or woken for room (`waiters`
    /// and `notified` not both empty; changed under the lock).
    word: AtomicUsize,
    state: Mutex<GateState>,
}

/// The bit of [`Gate::word`] that says senders wait.
const WAITING: usize = 1 << (usize::BITS - 1);

#[derive(Default)]
struct GateState {
    /// Senders waiting for room, oldest first, under their tokens.
    waiters: VecDeque<(u64, Waker)>,
    /// Tokens of the senders woken for room and not yet back: each may take
    /// a permit when it is polled, ahead of new senders.
    notified: Vec<u64>,
    /// The next token to hand out.
    next: u64,
}

/// What [`Gate::poll_acquire`] found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Acquire {
    Acquired,
    Waiting,
}

/// One look at the gate under its lock: the outcome (`None`: a clone of
/// the waker is needed first), a waker to drop and one to wake once the
/// lock is released.
type Look = (Option<Acquire>, Option<Waker>, Option<Waker>);

impl Gate {
    pub(crate) fn new(capacity: NonZeroUsize) -> Self {
        let limit = capacity.get().min(WAITING - 1);
        Self {
            capacity: capacity.get(),
            limit,
            low: limit / 2,
            word: AtomicUsize::new(0),
            state: Mutex::new(GateState::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // No critical section below runs user code or panics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Permits taken now.
    fn used(&self) -> usize {
        self.word.load(Ordering::SeqCst) & !WAITING
    }

    /// Takes a permit if fewer than the limit are taken; with `new`, only
    /// if nobody waits either.
    fn take_permit(&self, new: bool) -> bool {
        let mut word = self.word.load(Ordering::SeqCst);
        loop {
            if (new && word & WAITING != 0) || word & !WAITING >= self.limit {
                return false;
            }
            match self.word.compare_exchange_weak(
                word,
                word + 1,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return true,
                Err(now) => word = now,
            }
        }
    }

    /// Takes a permit if there is room and nobody waits.
    pub(super) fn try_acquire(&self) -> bool {
        self.take_permit(true)
    }

    /// Sets or clears [`WAITING`] after the line changed, under the lock;
    /// returns the permits taken, as the same read-modify-write read them.
    fn mark_line(&self, st: &GateState) -> usize {
        let word = if st.waiters.is_empty() && st.notified.is_empty() {
            self.word.fetch_and(!WAITING, Ordering::SeqCst)
        } else {
            self.word.fetch_or(WAITING, Ordering::SeqCst)
        };
        word & !WAITING
    }

    /// Wakes the oldest waiting sender if at least half the room is free
    /// (`used` permits taken): returns its waker, to wake once the lock is
    /// released.
    fn notify_next(&self, st: &mut GateState, used: usize) -> Option<Waker> {
        if used > self.low {
            return None;
        }
        let (t, w) = st.waiters.pop_front()?;
        st.notified.push(t);
        Some(w)
    }

    /// A sender's poll: takes a permit if there is room for it (it was
    /// woken for room, or nobody waits), or (re)registers `waker` under
    /// `token`. Wakers are cloned, dropped and woken with no lock held.
    pub(super) fn poll_acquire(&self, token: &mut Option<u64>, waker: &Waker) -> Acquire {
        if token.is_none() && self.try_acquire() {
            return Acquire::Acquired;
        }
        let mut new = None;
        loop {
            let (outcome, old, next) = self.look(token, waker, &mut new);
            drop_quietly(old);
            if let Some(w) = next {
                wake_quietly(w);
            }
            match outcome {
                Some(outcome) => return outcome,
                None => new = Some(waker.clone()),
            }
        }
    }

    /// [`poll_acquire`](Self::poll_acquire) under the lock; `new` is a
    /// clone of `waker`, if made.
    fn look(&self, token: &mut Option<u64>, waker: &Waker, new: &mut Option<Waker>) -> Look {
        let mut st = self.lock();
        let Some(t) = *token else {
            if st.waiters.is_empty() && st.notified.is_empty() && self.take_permit(false) {
                return (Some(Acquire::Acquired), None, None);
            }
            let Some(w) = new.take() else {
                return (None, None, None);
            };
            let t = st.next;
            st.next += 1;
            st.waiters.push_back((t, w));
            *token = Some(t);
            // In line, then the bit set and the count read at once: a
            // release that did not see the bit is seen here.
            let used = self.mark_line(&st);
            return (
                Some(Acquire::Waiting),
                None,
                self.notify_next(&mut st, used),
            );
        };
        if let Some(i) = st.notified.iter().position(|&n| n == t) {
            if self.take_permit(false) {
                st.notified.swap_remove(i);
                *token = None;
                // More room than this sender takes: the next may come too.
                let used = self.mark_line(&st);
                return (
                    Some(Acquire::Acquired),
                    None,
                    self.notify_next(&mut st, used),
                );
            }
            // Full again (other senders came first): first in line.
            let Some(w) = new.take() else {
                return (None, None, None);
            };
            st.notified.swap_remove(i);
            st.waiters.push_front((t, w));
            let used = self.used();
            return (
                Some(Acquire::Waiting),
                None,
                self.notify_next(&mut st, used),
            );
        }
        match st.waiters.iter_mut().find(|(w, _)| *w == t) {
            Some(entry) if entry.1.will_wake(waker) => (Some(Acquire::Waiting), None, None),
            Some(entry) => match new.take() {
                Some(w) => (
                    Some(Acquire::Waiting),
                    Some(std::mem::replace(&mut entry.1, w)),
                    None,
                ),
                None => (None, None, None),
            },
            None => {
                // Neither waiting nor woken: cannot happen (a token leaves
                // both only here or in `cancel`); start over as a new
                // sender.
                *token = None;
                drop(st);
                self.look(token, waker, new)
            }
        }
    }

    /// A sender that waited under `token` goes away: it leaves the queue,
    /// or, if it was woken for room, passes the wake on.
    pub(super) fn cancel(&self, token: u64) {
        let (own, next) = {
            let mut st = self.lock();
            let found = if let Some(i) = st.waiters.iter().position(|(w, _)| *w == token) {
                (st.waiters.remove(i).map(|(_, w)| w), None)
            } else if let Some(i) = st.notified.iter().position(|&n| n == token) {
                st.notified.swap_remove(i);
                let used = self.used();
                (None, self.notify_next(&mut st, used))
            } else {
                (None, None)
            };
            self.mark_line(&st);
            found
        };
        drop_quietly(own);
        if let Some(w) = next {
            wake_quietly(w);
        }
    }

    /// Gives a permit back, and wakes the oldest waiting sender if half the
    /// room is free.
    fn release(&self) {
        let word = self.word.fetch_sub(1, Ordering::SeqCst);
        if word & WAITING == 0 || (word & !WAITING) - 1 > self.low {
            return;
        }
        let next = {
            let mut st = self.lock();
            let used = self.used();
            self.notify_next(&mut st, used)
        };
        if let Some(w) = next {
            wake_quietly(w);
        }
    }

    /// Room left now for a sender that does not wait: the capacity less
    /// the permits taken (never more than it).
    pub(super) fn available(&self) -> usize {
        let word = self.word.load(Ordering::SeqCst);
        if word & WAITING != 0 {
            return 0;
        }
        self.capacity.saturating_sub(word)
    }
}

/// Wakes a waiting sender's waker (user code) or drops one: on the
/// executor's thread a panic goes to its panic sink; elsewhere it resumes,
/// unless the thread is already unwinding (then it is dropped).
fn wake_quietly(w: Waker) {
    wake_quietly_with(move || w.wake());
}

/// Runs `f` (a waiting sender's waker's code), with [`wake_quietly`]'s
/// handling of its panic.
fn wake_quietly_with(f: impl FnOnce()) {
    let Err(p) = boundary::call(f) else {
        return;
    };
    if let Some(p) = boundary::report_here(p) {
        if std::thread::panicking() {
            boundary::drop_payload(p);
        } else {
            std::panic::resume_unwind(p);
        }
    }
}

/// Drops a waiting sender's waker (user code), as [`wake_quietly`] wakes one.
fn drop_quietly(w: Option<Waker>) {
    if let Some(w) = w {
        wake_quietly_with(move || drop(w));
    }
}

/// One unit of a gate's capacity: given back when dropped.
pub(super) struct Permit(pub(super) Arc<Gate>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.release();
    }
}

pin_project! {
    /// A bounded remote task's future: gives its permit back at its first
    /// poll (or when dropped unpolled).
    pub(super) struct Permitted<F> {
        #[pin]
        future: F,
        permit: Option<Permit>,
    }
}

impl<F> Permitted<F> {
    pub(super) fn new(future: F, permit: Permit) -> Self {
        Self {
            future,
            permit: Some(permit),
        }
    }
}

impl<F: Future> Future for Permitted<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        drop(this.permit.take());
        this.future.poll(cx)
    }
}

/// Model checks of the gate's cross-thread waiting path (run with
/// `RUSTFLAGS="--cfg tourbillon_loom" cargo test --release --lib loom`).
#[cfg(all(test, tourbillon_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::thread;
    use std::task::Wake;

    /// A sender's waker that records that it was woken.
    struct Flag(loom::sync::Arc<AtomicBool>);
    impl Wake for Flag {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn sender() -> (loom::sync::Arc<AtomicBool>, Waker) {
        let woken = loom::sync::Arc::new(AtomicBool::new(false));
        let waker = Waker::from(std::sync::Arc::new(Flag(woken.clone())));
        (woken, waker)
    }

    fn gate(capacity: usize) -> loom::sync::Arc<Gate> {
        loom::sync::Arc::new(Gate::new(NonZeroUsize::new(capacity).unwrap()))
    }

    #[test]
    fn loom_two_cores_submitting_to_one_never_exceed_its_capacity() {
        // The cross-core queue of a pool core, shared by two submitting
        // cores: each takes a permit if it can, and the target core gives
        // it back at the task's first poll. Never more permits than the
        // capacity at once, and all given back in the end.
        loom::model(|| {
            let g = gate(1);
            let taken = loom::sync::Arc::new(AtomicUsize::new(0));
            let submit = |g: loom::sync::Arc<Gate>, taken: loom::sync::Arc<AtomicUsize>| {
                move || {
                    if g.try_acquire() {
                        assert_eq!(taken.fetch_add(1, Ordering::SeqCst), 0, "over capacity");
                        taken.fetch_sub(1, Ordering::SeqCst);
                        g.release();
                        true
                    } else {
                        false
                    }
                }
            };
            let a = thread::spawn(submit(g.clone(), taken.clone()));
            let b = thread::spawn(submit(g.clone(), taken.clone()));
            let (a, b) = (a.join().unwrap(), b.join().unwrap());
            assert!(a || b, "with room, one of two submissions gets in");
            assert_eq!(g.used(), 0);
        });
    }

    #[test]
    fn loom_release_racing_a_waiting_sender_is_never_lost() {
        // The executor gives the only permit back (a first poll) while a
        // sender finds the gate full and registers. No lost wake-up: the
        // sender takes the permit now, or it is woken, and then takes it.
        loom::model(|| {
            let g = gate(1);
            assert!(g.try_acquire());
            let g2 = g.clone();
            let exec = thread::spawn(move || g2.release());
            let (woken, waker) = sender();
            let mut token = None;
            let first = g.poll_acquire(&mut token, &waker);
            exec.join().unwrap();
            if first == Acquire::Waiting {
                assert!(
                    woken.load(Ordering::SeqCst),
                    "a waiting sender was not woken"
                );
                assert_eq!(g.poll_acquire(&mut token, &waker), Acquire::Acquired);
            }
            assert_eq!(g.word.load(Ordering::SeqCst), 1, "one permit, nobody waits");
        });
    }

    #[test]
    fn loom_two_releases_and_a_try_spawn_racing_a_waiting_sender() {
        // Capacity 2, both permits held. The executor gives both back while
        // another thread tries to take one without waiting and a sender
        // waits: whatever the interleaving, the sender is not left waiting
        // unwoken, and the count ends consistent.
        loom::model(|| {
            let g = gate(2);
            assert!(g.try_acquire() && g.try_acquire());
            let g2 = g.clone();
            let exec = thread::spawn(move || {
                g2.release();
                g2.release();
            });
            let g3 = g.clone();
            let other = thread::spawn(move || g3.try_acquire());
            let (woken, waker) = sender();
            let mut token = None;
            let mut got = g.poll_acquire(&mut token, &waker) == Acquire::Acquired;
            exec.join().unwrap();
            let took = other.join().unwrap();
            if !got {
                assert!(
                    woken.load(Ordering::SeqCst),
                    "a waiting sender was not woken"
                );
                got = g.poll_acquire(&mut token, &waker) == Acquire::Acquired;
            }
            assert!(got, "room was free and the woken sender found none");
            assert_eq!(g.word.load(Ordering::SeqCst), 1 + took as usize);
        });
    }

    #[test]
    fn loom_a_woken_sender_dropped_passes_the_wake_on() {
        // Two senders wait on a full gate of capacity 1; the executor gives
        // the permit back while the first sender is dropped. The second is
        // woken either way (by the release, or by the first passing its
        // wake on) and takes the permit.
        loom::model(|| {
            let g = gate(1);
            assert!(g.try_acquire());
            let (_, wa) = sender();
            let (b_woken, wb) = sender();
            let (mut ta, mut tb) = (None, None);
            assert_eq!(g.poll_acquire(&mut ta, &wa), Acquire::Waiting);
            assert_eq!(g.poll_acquire(&mut tb, &wb), Acquire::Waiting);
            let g2 = g.clone();
            let exec = thread::spawn(move || g2.release());
            let ta = ta.unwrap();
            let g3 = g.clone();
            let leaving = thread::spawn(move || g3.cancel(ta));
            exec.join().unwrap();
            leaving.join().unwrap();
            assert!(
                b_woken.load(Ordering::SeqCst),
                "the second sender was not woken"
            );
            assert_eq!(g.poll_acquire(&mut tb, &wb), Acquire::Acquired);
            assert_eq!(g.word.load(Ordering::SeqCst), 1, "one permit, nobody waits");
        });
    }
}
