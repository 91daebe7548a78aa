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
//! `capacity - 1` others of the spawner, wherever they are (in the inbox,
//! the executor's remote backlog, or already in a run queue). The
//! executor's admission window (`remote/backlog.rs`) bounds only how
//! many of them are tasks at once: without the gate a flood still waits,
//! unbounded, in the inbox and the backlog.
//!
//! The capacity is a semaphore (`remote/gate.rs`). The executor's
//! shutdown drops every task that holds a permit, so the room frees up,
//! each waiting sender is woken in turn, sees the shutdown and returns
//! [`SpawnError::Shutdown`].

use std::fmt;
use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::gate::{Acquire, Gate, Permit, Permitted};
use super::launch::Launch;
use super::op::Remote;
use super::spawner::{self, RemoteJoinHandle, RemoteSpawner};
use crate::error::try_spawn::TrySpawnError;
use crate::error::{SpawnError, UnknownQueue};
use crate::queue::QueueKey;

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
/// use tourbillon::remote::TrySpawnError;
/// use tourbillon::Builder;
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
///         tourbillon::task::yield_now().await;
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
        SpawnWait(self.wait(key, None, future))
    }

    /// [`spawn`](Self::spawn) in the group `group` (see
    /// [`Spawner::spawn_in_group`](crate::Spawner::spawn_in_group)).
    pub fn spawn_in_group<F>(&self, key: K, group: u64, future: F) -> SpawnWait<'_, F>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        SpawnWait(self.wait(key, Some(group), future))
    }

    /// [`spawn`](Self::spawn) of what `launch` makes (a future, or a
    /// closure that makes it on the executor's thread).
    pub(crate) fn wait<L>(&self, key: K, group: Option<u64>, future: L) -> Wait<'_, L> {
        Wait {
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

    /// [`try_spawn`](Self::try_spawn) of what `future` makes (a future,
    /// or a closure that makes it on the executor's thread).
    pub(crate) fn try_submit<L: Launch>(
        &self,
        key: K,
        group: Option<u64>,
        future: L,
    ) -> Result<RemoteJoinHandle<L::Output>, TrySpawnError<L>> {
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
    /// waiting (0 while senders wait), as tokio's `Sender::capacity`:
    /// [`max_capacity`](Self::max_capacity) less the tasks of this spawner
    /// (and its clones) not yet polled.
    pub fn capacity(&self) -> usize {
        self.gate.available()
    }

    /// The capacity it was made with, as tokio's `Sender::max_capacity`.
    /// Any capacity is kept as given, up to `usize::MAX`; one above
    /// `isize::MAX` is never filled, since fewer tasks than that can be
    /// alive at once (each is an allocation), so it bounds nothing.
    pub fn max_capacity(&self) -> usize {
        self.gate.capacity
    }

    /// The unbounded [`RemoteSpawner`] of the same executor (its spawns
    /// do not count against this capacity).
    pub fn unbounded(&self) -> &RemoteSpawner<K> {
        &self.inner
    }
}

/// A launch that carries a permit into its task's future, which gives it
/// back at its first poll.
struct WithPermit<L> {
    launch: L,
    permit: Permit,
}

impl<L: Launch> Launch for WithPermit<L> {
    type Output = L::Output;
    type Future = Permitted<L::Future>;

    fn launch(self) -> Self::Future {
        Permitted::new(self.launch.launch(), self.permit)
    }
}

/// Submits `launch` with a permit already taken from `gate`; hands it back
/// (and the permit) if the executor is shut down.
fn submit<L: Launch>(
    remote: &Arc<Remote>,
    gate: &Arc<Gate>,
    q: usize,
    group: Option<u64>,
    launch: L,
) -> Result<RemoteJoinHandle<L::Output>, L> {
    let with = WithPermit {
        launch,
        permit: Permit(gate.clone()),
    };
    spawner::submit(remote, q, group, with).map_err(|w| {
        let WithPermit { launch, permit } = w;
        drop(permit);
        launch
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
pub struct SpawnWait<'a, F>(Wait<'a, F>);

impl<F> Future for SpawnWait<'_, F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = Result<RemoteJoinHandle<F::Output>, SpawnError>;

    /// # Panics
    /// When polled again after it returned `Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.get_mut().0.poll_wait(cx)
    }
}

impl<F> fmt::Debug for SpawnWait<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A submission waiting for room: the state of [`SpawnWait`], and of the
/// pool's submissions, whose task may be a closure.
pub(crate) struct Wait<'a, L> {
    remote: &'a Arc<Remote>,
    gate: &'a Arc<Gate>,
    queue: Result<usize, UnknownQueue>,
    group: Option<u64>,
    future: Option<L>,
    /// Its place among the waiting senders, while it waits.
    token: Option<u64>,
}

// The task's future is moved, never pinned, by this future.
impl<L> Unpin for Wait<'_, L> {}

impl<L: Launch> Wait<'_, L> {
    /// Waits for room (registering `cx`'s waker), then submits.
    ///
    /// # Panics
    /// When polled again after it returned `Ready`.
    pub(crate) fn poll_wait(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<RemoteJoinHandle<L::Output>, SpawnError>> {
        assert!(
            self.future.is_some(),
            "SpawnWait polled after it returned Ready"
        );
        let q = match &self.queue {
            Ok(q) => *q,
            Err(e) => {
                let e = e.clone();
                self.future = None;
                return Poll::Ready(Err(e.into()));
            }
        };
        if self.remote.is_closed() {
            self.give_up();
            return Poll::Ready(Err(SpawnError::Shutdown));
        }
        if self.gate.poll_acquire(&mut self.token, cx.waker()) == Acquire::Waiting {
            return Poll::Pending;
        }
        let future = self.future.take().expect("checked above");
        Poll::Ready(
            submit(self.remote, self.gate, q, self.group, future).map_err(|_| SpawnError::Shutdown),
        )
    }
}

impl<L> Wait<'_, L> {
    /// Leaves the waiting senders (handing on a permit it was handed) and
    /// drops the task's future.
    pub(crate) fn give_up(&mut self) {
        if let Some(t) = self.token.take() {
            self.gate.cancel(t);
        }
        self.future = None;
    }
}

impl<L> Drop for Wait<'_, L> {
    fn drop(&mut self) {
        if let Some(t) = self.token.take() {
            self.gate.cancel(t);
        }
    }
}

impl<L> fmt::Debug for Wait<'_, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpawnWait")
            .field("waiting", &self.token.is_some())
            .field("done", &self.future.is_none())
            .finish()
    }
}
