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
//! The gate ([`Gate`]) is a fair semaphore under one lock: a permit given
//! back while senders wait goes straight to the oldest of them (it stays
//! counted as used), which is then woken; so a `try_spawn` never takes the
//! room a waiting sender was woken for. No waker is cloned, woken or dropped
//! under the lock. A sender that is dropped after it was handed a permit
//! hands it on. The executor's shutdown drops every task that holds a
//! permit, so each waiting sender is handed one in turn, sees the shutdown
//! and returns [`SpawnError::Shutdown`].

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
use crate::sync::{Mutex, MutexGuard};

/// The shared count of a bounded spawner and its clones.
pub(crate) struct Gate {
    capacity: usize,
    state: Mutex<GateState>,
}

#[derive(Default)]
struct GateState {
    /// Permits taken (by tasks not yet polled, and by waiting senders that
    /// were handed one and have not taken it yet).
    used: usize,
    /// Senders waiting for room, oldest first, under their tokens.
    waiters: VecDeque<(u64, Waker)>,
    /// Tokens of waiters handed a permit, not yet picked up.
    granted: Vec<u64>,
    /// The next token to hand out.
    next: u64,
}

/// What [`Gate::poll_acquire`] found.
#[derive(Debug, PartialEq, Eq)]
enum Acquire {
    Acquired,
    Waiting,
}

impl Gate {
    pub(crate) fn new(capacity: NonZeroUsize) -> Self {
        Self {
            capacity: capacity.get(),
            state: Mutex::new(GateState::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        // No critical section below runs user code or panics.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a permit if there is room and nobody waits.
    fn try_acquire(&self) -> bool {
        let mut st = self.lock();
        if st.used < self.capacity && st.waiters.is_empty() && st.granted.is_empty() {
            st.used += 1;
            true
        } else {
            false
        }
    }

    /// A sender's poll: picks up the permit it was handed, or takes one if
    /// there is room, or (re)registers `waker` under `token`. The waker is
    /// cloned, and a replaced one dropped, with no lock held.
    fn poll_acquire(&self, token: &mut Option<u64>, waker: &Waker) -> Acquire {
        let mut new = None;
        loop {
            let old = {
                let mut st = self.lock();
                match *token {
                    Some(t) => {
                        if let Some(i) = st.granted.iter().position(|&g| g == t) {
                            st.granted.swap_remove(i);
                            *token = None;
                            return Acquire::Acquired;
                        }
                        let Some(entry) = st.waiters.iter_mut().find(|(w, _)| *w == t) else {
                            // Not waiting and not granted: cannot happen
                            // (the gate forgets a token only when it is
                            // picked up); start over as a new sender.
                            *token = None;
                            continue;
                        };
                        if entry.1.will_wake(waker) {
                            return Acquire::Waiting;
                        }
                        match new.take() {
                            Some(w) => Some(std::mem::replace(&mut entry.1, w)),
                            None => None,
                        }
                    }
                    None => {
                        if st.used < self.capacity && st.waiters.is_empty() && st.granted.is_empty()
                        {
                            st.used += 1;
                            return Acquire::Acquired;
                        }
                        match new.take() {
                            Some(w) => {
                                let t = st.next;
                                st.next += 1;
                                st.waiters.push_back((t, w));
                                *token = Some(t);
                                return Acquire::Waiting;
                            }
                            None => None,
                        }
                    }
                }
            };
            match old {
                Some(old) => {
                    drop(old);
                    return Acquire::Waiting;
                }
                // Clone the waker outside the lock, then look again.
                None => new = Some(waker.clone()),
            }
        }
    }

    /// A sender that waited under `token` goes away: it leaves the queue,
    /// or hands on the permit it was handed.
    fn cancel(&self, token: u64) {
        let (own, next) = {
            let mut st = self.lock();
            if let Some(i) = st.waiters.iter().position(|(w, _)| *w == token) {
                (st.waiters.remove(i).map(|(_, w)| w), None)
            } else if let Some(i) = st.granted.iter().position(|&g| g == token) {
                st.granted.swap_remove(i);
                (None, Self::hand_on(&mut st))
            } else {
                (None, None)
            }
        };
        // Its own waker is dropped, the next sender's woken, with no lock
        // held.
        drop_quietly(own);
        if let Some(w) = next {
            wake_quietly(w);
        }
    }

    /// Gives a permit back: to the oldest waiting sender (whose waker is
    /// returned, to wake once the lock is released), or to the room.
    fn hand_on(st: &mut GateState) -> Option<Waker> {
        match st.waiters.pop_front() {
            Some((t, w)) => {
                st.granted.push(t);
                Some(w)
            }
            None => {
                st.used -= 1;
                None
            }
        }
    }

    fn release(&self) {
        let waker = Self::hand_on(&mut self.lock());
        if let Some(w) = waker {
            wake_quietly(w);
        }
    }

    /// Room left now.
    fn available(&self) -> usize {
        let st = self.lock();
        if st.waiters.is_empty() && st.granted.is_empty() {
            self.capacity - st.used
        } else {
            0
        }
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
/// spinning: the sender is woken when a task of the spawner is first
/// polled), [`try_spawn`](Self::try_spawn) reports a full spawner and hands
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
    /// its clones) are not yet polled, then submits. Waiting senders get
    /// room in the order they started waiting. Dropping the returned future
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
