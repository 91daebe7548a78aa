#![forbid(unsafe_code)]
//! The bounded remote submission path: [`BoundedRemoteSpawner`], a
//! [`RemoteSpawner`] with a capacity, whose `spawn` waits for room
//! ([`SpawnWait`]) and whose `try_spawn` reports a full spawner
//! ([`TrySpawnError::Full`], handing the future back).
//!
//! The capacity counts the tasks submitted through the spawner (and its
//! clones) that the executor has not polled yet: a permit is taken at
//! submission and given back at the task's first poll (or when the task is
//! dropped unpolled: aborted, refused, or the executor shut down). This
//! bounds spawn-to-first-poll: a remote task waits behind at most
//! `capacity - 1` others of the spawner, wherever they are (in the inbox or
//! already in a run queue). A bound on the inbox alone would not: the
//! executor takes the inbox in whole at every poll boundary, so a flood
//! would move into the run queue, unbounded, instead.
//!
//! The gate ([`Gate`]) is a semaphore: an atomic count, and a line of
//! waiting senders under a lock. Senders wait in line; once at least half the capacity is free, the oldest is woken, and
//! one woken sender that takes a permit wakes the next while half the room
//! is still free: a sender that floods the executor is woken once per
//! `capacity / 2` of its tasks, not once per task (each wake of a parked
//! thread is a system call on the executor's thread). While senders wait or
//! were woken, a new sender (or `try_spawn`) does not jump the line. No
//! waker is cloned, woken or dropped under the lock. A woken sender that is
//! dropped passes the wake on. The executor's shutdown drops every task that
//! holds a permit, so the room frees up, each waiting sender is woken in
//! turn, sees the shutdown and returns [`SpawnError::Shutdown`].

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll, Waker};

use pin_project_lite::pin_project;

use super::context;
use super::core::Remote;
use super::remote::{self, RemoteJoinHandle, RemoteSpawner};
use crate::boundary;
use crate::error::{SpawnError, TrySpawnError, UnknownQueue};
use crate::queue::QueueKey;
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
pub(crate) struct Gate {
    capacity: usize,
    /// Waiting senders are woken when `used` is at most this (half the
    /// capacity): a sender that floods the executor is woken once per
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
enum Acquire {
    Acquired,
    Waiting,
}

/// One look at the gate under its lock: the outcome (`None`: a clone of
/// the waker is needed first), a waker to drop and one to wake once the
/// lock is released.
type Look = (Option<Acquire>, Option<Waker>, Option<Waker>);

impl Gate {
    pub(crate) fn new(capacity: NonZeroUsize) -> Self {
        Self {
            capacity: capacity.get().min(WAITING - 1),
            low: capacity.get().min(WAITING - 1) / 2,
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

    /// Takes a permit if fewer than the capacity are taken; with `new`, only
    /// if nobody waits either.
    fn take_permit(&self, new: bool) -> bool {
        let mut word = self.word.load(Ordering::SeqCst);
        loop {
            if (new && word & WAITING != 0) || word & !WAITING >= self.capacity {
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
    fn try_acquire(&self) -> bool {
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
    fn poll_acquire(&self, token: &mut Option<u64>, waker: &Waker) -> Acquire {
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
    fn cancel(&self, token: u64) {
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

    /// Room left now for a sender that does not wait.
    fn available(&self) -> usize {
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
    let p = context::with_current_ref(|core| match core {
        Some(core) => {
            core.panics.report(p);
            None
        }
        None => Some(p),
    });
    if let Some(p) = p {
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
struct Permit(Arc<Gate>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.release();
    }
}

pin_project! {
    /// A bounded remote task's future: gives its permit back at its first
    /// poll (or when dropped unpolled).
    struct Permitted<F> {
        #[pin]
        future: F,
        permit: Option<Permit>,
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

/// A [`RemoteSpawner`] with a capacity: at most `capacity` tasks submitted
/// through it (and its clones, which share the capacity) wait for their
/// first poll at any time. [`spawn`](Self::spawn) waits for room (without
/// spinning: a waiting sender is woken once the executor has first-polled
/// enough of the spawner's tasks to free half the capacity), [`try_spawn`](Self::try_spawn) reports a full spawner and hands
/// the future back, as tokio's `mpsc::Sender::send` and `try_send` do. A
/// thread that spawns faster than the executor runs is slowed down to the
/// executor's pace, and spawn-to-first-poll stays bounded (see the crate's
/// remote spawning notes in `README.md`).
///
/// Get one with
/// [`Executor::bounded_remote_spawner`](crate::Executor::bounded_remote_spawner).
/// It is `Send + Sync`, awaitable from any runtime or from
/// `futures::executor::block_on` on another thread. It does not keep the
/// executor alive: once the executor is dropped, waiting and new spawns
/// give [`SpawnError::Shutdown`]. Awaiting room from inside a task of the
/// same executor is fine (the task yields); blocking the executor's own
/// thread on it (a `block_on` inside one of its tasks) never finds room.
///
/// ```
/// use std::num::NonZeroUsize;
/// use tourbillon::{Builder, TrySpawnError};
///
/// let ex = Builder::new().queue("jobs", 1).build().unwrap();
/// let tx = ex.bounded_remote_spawner(NonZeroUsize::new(2).unwrap());
/// let producer = std::thread::spawn(move || {
///     futures::executor::block_on(async {
///         let mut handles = Vec::new();
///         for i in 0..10u32 {
///             // Waits while two tasks of `tx` are not yet polled.
///             handles.push(tx.spawn("jobs", async move { i * 2 }).await.unwrap());
///         }
///         handles
///     })
/// });
/// // The executor runs until the producer is done; its tasks free the room.
/// let handles = ex.block_on(async move {
///     loop {
///         if producer.is_finished() {
///             break producer.join().unwrap();
///         }
///         tourbillon::yield_now().await;
///     }
/// });
/// let sum: u32 = ex.block_on(async {
///     let mut sum = 0;
///     for h in handles {
///         sum += h.await.unwrap();
///     }
///     sum
/// });
/// assert_eq!(sum, 90);
///
/// // `try_spawn` never waits: a full spawner hands the future back.
/// let tx = ex.bounded_remote_spawner(NonZeroUsize::new(1).unwrap());
/// let first = tx.try_spawn("jobs", async { 1 }).unwrap();
/// match tx.try_spawn("jobs", async { 2 }) {
///     Err(TrySpawnError::Full(_future)) => {}
///     other => panic!("expected Full, got {other:?}"),
/// }
/// assert_eq!(ex.block_on(first).unwrap(), 1); // polled: room again
/// assert!(tx.try_spawn("jobs", async { 3 }).is_ok());
/// ```
pub struct BoundedRemoteSpawner<K: QueueKey> {
    inner: RemoteSpawner<K>,
    gate: Arc<Gate>,
}

impl<K: QueueKey> Clone for BoundedRemoteSpawner<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            gate: self.gate.clone(),
        }
    }
}

impl<K: QueueKey> BoundedRemoteSpawner<K> {
    pub(crate) fn new(inner: RemoteSpawner<K>, capacity: NonZeroUsize) -> Self {
        Self {
            inner,
            gate: Arc::new(Gate::new(capacity)),
        }
    }

    /// Spawns `future` onto the queue `key` once there is room: the
    /// returned future waits while `capacity` tasks of this spawner (and
    /// its clones) are not yet polled, then submits. A waiting sender is
    /// woken once half the capacity is free; waiting senders get room in
    /// the order they started waiting. Dropping the returned future
    /// drops `future` and gives up its place.
    ///
    /// # Errors
    /// [`SpawnError::UnknownQueue`] for a key the builder did not declare,
    /// [`SpawnError::Shutdown`] once the executor is dropped (also to a
    /// sender that was waiting). Either way `future` is dropped unpolled.
    pub fn spawn<F>(&self, key: K, future: F) -> SpawnWait<'_, F>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.wait(key, None, future)
    }

    /// [`spawn`](Self::spawn) in the group `group` (see
    /// [`Executor::spawn_in_group`](crate::Executor::spawn_in_group)).
    pub fn spawn_in_group<F>(&self, key: K, group: u64, future: F) -> SpawnWait<'_, F>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.wait(key, Some(group), future)
    }

    fn wait<F>(&self, key: K, group: Option<u64>, future: F) -> SpawnWait<'_, F> {
        SpawnWait {
            remote: &self.inner.remote,
            gate: &self.gate,
            queue: self.inner.queue_index(key),
            group,
            future: Some(future),
            token: None,
        }
    }

    /// Spawns `future` onto the queue `key` if there is room now, without
    /// waiting.
    ///
    /// # Errors
    /// [`TrySpawnError::Full`] when `capacity` tasks of this spawner are not
    /// yet polled (or senders wait for room),
    /// [`TrySpawnError::UnknownQueue`] for a key the builder did not
    /// declare, [`TrySpawnError::Shutdown`] once the executor is dropped.
    /// Each hands `future` back, unpolled
    /// ([`into_inner`](TrySpawnError::into_inner)).
    pub fn try_spawn<F>(
        &self,
        key: K,
        future: F,
    ) -> Result<RemoteJoinHandle<F::Output>, TrySpawnError<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_submit(key, None, future)
    }

    /// [`try_spawn`](Self::try_spawn) in the group `group`.
    pub fn try_spawn_in_group<F>(
        &self,
        key: K,
        group: u64,
        future: F,
    ) -> Result<RemoteJoinHandle<F::Output>, TrySpawnError<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.try_submit(key, Some(group), future)
    }

    fn try_submit<F>(
        &self,
        key: K,
        group: Option<u64>,
        future: F,
    ) -> Result<RemoteJoinHandle<F::Output>, TrySpawnError<F>>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let q = match self.inner.queue_index(key) {
            Ok(q) => q,
            Err(e) => return Err(TrySpawnError::UnknownQueue(e, future)),
        };
        if self.inner.remote.is_closed() {
            return Err(TrySpawnError::Shutdown(future));
        }
        if !self.gate.try_acquire() {
            return Err(TrySpawnError::Full(future));
        }
        submit(&self.inner.remote, &self.gate, q, group, future).map_err(TrySpawnError::Shutdown)
    }

    /// The room left now: how many tasks could be submitted without
    /// waiting (0 while senders wait), as tokio's `Sender::capacity`.
    pub fn capacity(&self) -> usize {
        self.gate.available()
    }

    /// The capacity it was made with, as tokio's `Sender::max_capacity`.
    pub fn max_capacity(&self) -> usize {
        self.gate.capacity
    }

    /// The unbounded [`RemoteSpawner`] of the same executor (its spawns
    /// do not count against this capacity).
    pub fn unbounded(&self) -> &RemoteSpawner<K> {
        &self.inner
    }
}

/// Submits `future` with a permit already taken from `gate`; hands the
/// future back (and the permit) if the executor is shut down.
fn submit<F>(
    remote: &Arc<Remote>,
    gate: &Arc<Gate>,
    q: usize,
    group: Option<u64>,
    future: F,
) -> Result<RemoteJoinHandle<F::Output>, F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let permitted = Permitted {
        future,
        permit: Some(Permit(gate.clone())),
    };
    remote::submit(remote, q, group, permitted).map_err(|p| {
        let Permitted { future, permit } = p;
        drop(permit);
        future
    })
}

impl<K: QueueKey> fmt::Debug for BoundedRemoteSpawner<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundedRemoteSpawner")
            .field("spawner", &self.inner)
            .field("max_capacity", &self.gate.capacity)
            .field("capacity", &self.gate.available())
            .finish()
    }
}

/// Future returned by [`BoundedRemoteSpawner::spawn`]: waits for room,
/// then submits the task, and resolves to its [`RemoteJoinHandle`].
#[must_use = "futures do nothing unless you `.await` or poll them: the task is not spawned until then"]
pub struct SpawnWait<'a, F> {
    remote: &'a Arc<Remote>,
    gate: &'a Arc<Gate>,
    queue: Result<usize, UnknownQueue>,
    group: Option<u64>,
    future: Option<F>,
    /// Its place among the waiting senders, while it waits.
    token: Option<u64>,
}

// The task's future is moved, never pinned, by this future.
impl<F> Unpin for SpawnWait<'_, F> {}

impl<F> Future for SpawnWait<'_, F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = Result<RemoteJoinHandle<F::Output>, SpawnError>;

    /// # Panics
    /// When polled again after it returned `Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        assert!(
            this.future.is_some(),
            "SpawnWait polled after it returned Ready"
        );
        let q = match &this.queue {
            Ok(q) => *q,
            Err(e) => {
                let e = e.clone();
                this.future = None;
                return Poll::Ready(Err(e.into()));
            }
        };
        if this.remote.is_closed() {
            this.give_up();
            return Poll::Ready(Err(SpawnError::Shutdown));
        }
        if this.gate.poll_acquire(&mut this.token, cx.waker()) == Acquire::Waiting {
            return Poll::Pending;
        }
        let future = this.future.take().expect("checked above");
        Poll::Ready(
            submit(this.remote, this.gate, q, this.group, future).map_err(|_| SpawnError::Shutdown),
        )
    }
}

impl<F> SpawnWait<'_, F> {
    /// Leaves the waiting senders (handing on a permit it was handed) and
    /// drops the task's future.
    fn give_up(&mut self) {
        if let Some(t) = self.token.take() {
            self.gate.cancel(t);
        }
        self.future = None;
    }
}

impl<F> Drop for SpawnWait<'_, F> {
    fn drop(&mut self) {
        if let Some(t) = self.token.take() {
            self.gate.cancel(t);
        }
    }
}

impl<F> fmt::Debug for SpawnWait<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpawnWait")
            .field("waiting", &self.token.is_some())
            .field("done", &self.future.is_none())
            .finish()
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
