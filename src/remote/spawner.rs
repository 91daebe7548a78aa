#![forbid(unsafe_code)]
//! Cross-thread entry: [`RemoteSpawner`] submits `Send` futures to an
//! executor's queues from any thread; [`RemoteJoinHandle`] awaits (or
//! aborts) such a task from any thread.
//!
//! A remote spawn is an op in the executor's inbox (the short-lock queue
//! that foreign wakes use, which unparks the executor): at a poll boundary
//! the executor takes it into its queue's line of the remote backlog, and
//! spawns the future when the queue's admission window is open
//! (`remote/backlog.rs`: up to 64 of the queue's remote tasks waiting
//! for their first poll, again once half of them are polled). The task is
//! then an ordinary task of its queue, but without a local join handle:
//! when it ends, its result goes to the remote handle's slot. The op, the slot and the executor's
//! delivery are one allocation ([`Shared`]), made by the spawning thread;
//! the executor moves the future out of it into the task, and attaches it
//! to the task as its delivery (`TaskSlab::set_deliver`, no allocation).
//! The last owner frees it: usually the handle, on the spawning side.
//!
//! Races, decided under the slot's lock:
//! * abort before the executor spawned the task: the spawn op sees the
//!   flag (an atomic copy, read without the lock) and drops the future
//!   unpolled (the handle reads `Cancelled`); an abort between that read
//!   and the spawn is seen when the id is published, and the executor
//!   aborts the task before its first poll;
//! * abort after the spawn: the id is known, an abort op follows the usual
//!   local path (dropped at the next boundary, or at the end of its poll);
//! * abort racing completion: whichever takes the lock first wins; a task
//!   that completed first keeps its output (`Ok`), as a local `abort` does.
//! * the executor shut down, or dropped the task unfinished: the delivery
//!   (or the spawn op) is dropped undelivered, and its drop resolves the
//!   handle to `Cancelled`.
//!
//! It owns the remote handles and the slot; the task itself is created by
//! the executor's spawn path (`Target::spawn_detached`) and runs as any other. The
//! bounded path (`remote/bounded.rs`) submits through [`submit`] too.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll, Waker};

use super::launch::Launch;
use super::op::{Remote, RemoteOp, RemoteSpawn};
use crate::error::{SpawnError, UnknownQueue};
use crate::queue::{KeyMap, QueueKey};
use crate::sync::{AtomicBool, Mutex, MutexGuard};
use crate::task::id::{TaskId, TaskKey};
use crate::task::join_error::JoinError;
use crate::task::slab::ResultSink;
use std::sync::atomic::Ordering;

/// What a remote task, its handle and the executor share: one allocation,
/// made by the spawning thread. `S` is what the executor needs to spawn
/// the task ([`Pending`]); the handle sees it erased ([`Slot`]).
pub(crate) struct Shared<T, S: ?Sized> {
    state: Mutex<SlotState<T>>,
    /// `abort()` was called: a copy of the state's flag that the executor
    /// reads before spawning without taking the lock (`started`, under the
    /// lock, catches an abort that comes after the read).
    pub(super) aborted: AtomicBool,
    pub(super) spawn: S,
}

/// The handle's view of a [`Shared`]: the result slot alone.
pub(crate) type Slot<T> = Shared<T, dyn Send + Sync>;

struct SlotState<T> {
    result: Option<Result<T, JoinError>>,
    /// The result was delivered (and maybe taken since).
    done: bool,
    /// The handle's waker.
    waker: Option<Waker>,
    /// The task's key, once the executor spawned it.
    id: Option<TaskKey>,
    /// The task's id, once the executor spawned it (a remote task that was
    /// never spawned gets one when its `JoinError` is made).
    task: Option<TaskId>,
    /// `abort()` was called.
    abort: bool,
}

/// A remote task the executor has not taken yet: its queue, its group and
/// what makes its future ([`Launch`]: the future, or a closure; taken out,
/// once, by the executor's thread).
pub(super) struct Pending<L> {
    pub(super) queue: usize,
    pub(super) group: Option<u64>,
    pub(super) future: Mutex<Option<L>>,
}

impl<T, S> Shared<T, S> {
    fn new(spawn: S) -> Self {
        Self {
            state: Mutex::new(SlotState {
                result: None,
                done: false,
                waker: None,
                id: None,
                task: None,
                abort: false,
            }),
            aborted: AtomicBool::new(false),
            spawn,
        }
    }
}

impl<T, S: ?Sized> Shared<T, S> {
    fn lock(&self) -> MutexGuard<'_, SlotState<T>> {
        // No critical section below can panic (they move values and
        // compare flags); recover from poisoning anyway.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Executor side, after spawning: publishes the id; `true` if `abort()`
    /// came first (it could not name the task: the executor aborts it, and
    /// the task is dropped unpolled).
    pub(super) fn started(&self, id: TaskKey, task: Option<TaskId>) -> bool {
        let mut st = self.lock();
        st.id = Some(id);
        st.task = task;
        st.abort
    }

    /// Handle side: records the abort; returns the id to send an abort op
    /// for, when the task was already started. `None` when there is nothing
    /// to send: finished, aborted before, or not started (then `started`
    /// sees the flag).
    fn request_abort(&self) -> Option<TaskKey> {
        let mut st = self.lock();
        if st.done || st.abort {
            return None;
        }
        st.abort = true;
        self.aborted.store(true, Ordering::Release);
        st.id
    }

    /// Stores the result and wakes the handle, once. The caller lets go of
    /// its reference before the wake: if the handle is gone, that drops the
    /// result (user code), and a panic of its destructor must not unwind
    /// through the wake (user code too), nor the wake's through it (a panic
    /// while unwinding aborts the process).
    pub(super) fn complete(self: Arc<Self>, result: Result<T, JoinError>) {
        let waker = {
            let mut st = self.lock();
            if st.done {
                return;
            }
            st.result = Some(result);
            st.done = true;
            st.waker.take()
        };
        drop(self);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The task will never deliver: the handle reads `Cancelled`.
    pub(super) fn cancel_slot(self: Arc<Self>) {
        let id = self.task_id();
        self.complete(Err(JoinError::cancelled(id)));
    }

    /// The task's id, or a new one for a task that was never spawned (the
    /// executor shut down before it took the task, or its queue is
    /// quarantined).
    pub(super) fn task_id(&self) -> TaskId {
        *self.lock().task.get_or_insert_with(TaskId::next)
    }
}

impl<T, S> ResultSink for Shared<T, S>
where
    T: Send + 'static,
    S: Send + Sync + 'static,
{
    type Output = T;

    fn send(self: Arc<Self>, result: Result<T, JoinError>) {
        self.complete(result);
    }

    fn cancel(self: Arc<Self>) {
        self.cancel_slot();
    }
}

/// Takes the launch out of a [`Pending`], once.
pub(super) fn take<L>(future: &Mutex<Option<L>>) -> Option<L> {
    future.lock().unwrap_or_else(PoisonError::into_inner).take()
}

/// A `Send + Sync` handle that spawns `Send` futures onto an executor's
/// queues from any thread (an accept loop, a thread pool, a foreign
/// runtime). The executor is woken (unparked, or its host runtime woken),
/// takes the spawn at a poll boundary and makes it a task of its queue,
/// in arrival order, until 64 remote tasks of that queue wait for their
/// first poll (and again, up to 64, once half of them are polled): from
/// then on it is an ordinary task of its queue. A flood of remote spawns
/// so costs the executor a bounded number of tasks per queue, and spawns
/// beyond them wait in the spawning thread's allocations
/// ([`QueueStats::remote_waiting`](crate::stats::QueueStats::remote_waiting)
/// counts them). Get one with
/// [`Executor::remote_spawner`](crate::Executor::remote_spawner). Clone it
/// freely; it does not keep the executor alive: after the executor is
/// dropped, spawning gives [`SpawnError::Shutdown`].
///
/// Its submissions are unbounded: a thread that spawns faster than the
/// executor runs builds a backlog. For a bounded submission path (an
/// awaitable spawn that waits for room, and a `try_spawn` that reports a
/// full queue), see [`BoundedRemoteSpawner`](crate::remote::BoundedRemoteSpawner).
///
/// ```
/// use tourbillon::Builder;
///
/// let ex = Builder::new().queue("requests", 1).build().unwrap();
/// let remote = ex.remote_spawner();
/// let from_thread = std::thread::spawn(move || {
///     let h = remote.spawn("requests", async { 6 * 7 }).unwrap();
///     h // a RemoteJoinHandle is Send: await it anywhere
/// })
/// .join()
/// .unwrap();
/// assert_eq!(ex.block_on(from_thread).unwrap(), 42);
/// ```
pub struct RemoteSpawner<K: QueueKey> {
    pub(crate) remote: Arc<Remote>,
    keys: Arc<KeyMap<K>>,
}

impl<K: QueueKey> Clone for RemoteSpawner<K> {
    fn clone(&self) -> Self {
        Self {
            remote: self.remote.clone(),
            keys: self.keys.clone(),
        }
    }
}

impl<K: QueueKey> RemoteSpawner<K> {
    pub(crate) fn new(remote: Arc<Remote>, keys: Arc<KeyMap<K>>) -> Self {
        Self { remote, keys }
    }

    /// Spawns `future` onto the queue `key`, from any thread.
    ///
    /// # Errors
    /// [`SpawnError::UnknownQueue`] for a key the builder did not declare,
    /// [`SpawnError::Shutdown`] once the executor is dropped.
    pub fn spawn<F>(&self, key: K, future: F) -> Result<RemoteJoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let q = self.queue_index(key)?;
        submit(&self.remote, q, None, future).map_err(|_| SpawnError::Shutdown)
    }

    /// Spawns `future` onto the queue `key` in the group `group` (see
    /// [`Spawner::spawn_in_group`](crate::Spawner::spawn_in_group)).
    pub fn spawn_in_group<F>(
        &self,
        key: K,
        group: u64,
        future: F,
    ) -> Result<RemoteJoinHandle<F::Output>, SpawnError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let q = self.queue_index(key)?;
        submit(&self.remote, q, Some(group), future).map_err(|_| SpawnError::Shutdown)
    }

    /// The index of the queue `key`.
    pub(crate) fn queue_index(&self, key: K) -> Result<usize, UnknownQueue> {
        self.keys.get(&key).ok_or_else(|| UnknownQueue::new(&key))
    }
}

/// Queues the spawn of the task `launch` makes onto queue `q` of the
/// executor behind `remote`: one allocation, shared by the op and the
/// handle. Gives `launch` back if the executor is shut down.
pub(crate) fn submit<L: Launch>(
    remote: &Arc<Remote>,
    q: usize,
    group: Option<u64>,
    launch: L,
) -> Result<RemoteJoinHandle<L::Output>, L> {
    let shared = Arc::new(Shared::new(Pending {
        queue: q,
        group,
        future: Mutex::new(Some(launch)),
    }));
    let slot: Arc<Slot<L::Output>> = shared.clone();
    let op = RemoteOp::Spawn(RemoteSpawn::new(shared.clone()));
    match remote.push_op(op) {
        Ok(()) => Ok(RemoteJoinHandle {
            slot,
            remote: remote.clone(),
        }),
        Err(op) => {
            // Refused: nothing ran; take the future back (the op's drop
            // then finds none to drop).
            let future = take(&shared.spawn.future);
            drop(op);
            Err(future.expect("a refused spawn op still holds its future"))
        }
    }
}

impl<K: QueueKey> fmt::Debug for RemoteSpawner<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteSpawner")
            .field("queues", &self.keys.keys())
            .finish()
    }
}

/// The handle of a task spawned by a [`RemoteSpawner`]: `Send`, awaitable
/// from any thread or runtime (`Result<T, JoinError>`, as
/// [`JoinHandle`](crate::task::JoinHandle)), abortable from any thread; dropping it
/// detaches the task.
///
/// With [`PanicPolicy::Propagate`](crate::config::PanicPolicy::Propagate) the panic
/// payload unwinds out of the executor's driver, and the handle reads a
/// [`JoinError`] that is a panic with a placeholder payload.
#[must_use = "dropping a RemoteJoinHandle detaches the task: it keeps running; use `.abort()` to cancel it"]
pub struct RemoteJoinHandle<T> {
    slot: Arc<Slot<T>>,
    remote: Arc<Remote>,
}

impl<T> RemoteJoinHandle<T> {
    /// Cancels the task, from any thread: a task the executor has not
    /// started yet is dropped unpolled; an idle or queued task is dropped at
    /// the executor's next poll boundary; a running one when its poll
    /// returns. A task that completed first keeps its output (`Ok`).
    pub fn abort(&self) {
        if let Some(id) = self.slot.request_abort() {
            // Refused only after shutdown, when the task is gone anyway.
            let _ = self.remote.push_op(RemoteOp::Abort(id));
        }
    }

    /// Whether the task has ended (its result is waiting or was taken).
    pub fn is_finished(&self) -> bool {
        self.slot.lock().done
    }
}

impl<T> Future for RemoteJoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// With the `tokio` feature, a poll inside a tokio runtime spends
    /// tokio's cooperative budget as tokio's `JoinHandle` does: one unit
    /// when it returns `Ready`, and `Pending` (the waker woken at tokio's
    /// next turn) when the budget is spent.
    ///
    /// # Panics
    /// When polled again after it returned `Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        #[cfg(feature = "tokio")]
        let coop = std::task::ready!(crate::coop::join_unit(cx));
        let mut st = self.slot.lock();
        if let Some(result) = st.result.take() {
            #[cfg(feature = "tokio")]
            coop.made_progress();
            return Poll::Ready(result);
        }
        assert!(!st.done, "RemoteJoinHandle polled after it returned Ready");
        match &st.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> fmt::Debug for RemoteJoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.slot.lock();
        f.debug_struct("RemoteJoinHandle")
            .field("id", &st.task)
            .field("finished", &st.done)
            .finish()
    }
}

/// A spawn op for `future` onto queue 0, as a `RemoteSpawner` sends it,
/// for the models of the inbox and the task core.
#[cfg(all(test, tourbillon_loom))]
pub(crate) fn spawn_op<F>(future: F) -> RemoteOp
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    RemoteOp::Spawn(RemoteSpawn::new(Arc::new(Shared::new(Pending {
        queue: 0,
        group: None,
        future: Mutex::new(Some(future)),
    }))))
}

/// Model checks of the remote slot (run with
/// `RUSTFLAGS="--cfg tourbillon_loom" cargo test --release --lib loom`).
#[cfg(all(test, tourbillon_loom))]
mod loom_tests {
    use super::*;
    use loom::thread;

    fn slot() -> Arc<Shared<u32, ()>> {
        Arc::new(Shared::new(()))
    }

    #[test]
    fn loom_abort_racing_start_reaches_the_task_once() {
        // The executor starts a remote task (checks the abort flag, spawns,
        // publishes the id) while another thread aborts it. Whatever the
        // interleaving, the abort takes effect by exactly one path: the
        // start is skipped, the executor aborts right after publishing, or
        // the aborting thread sends an abort op naming the started task.
        loom::model(|| {
            let slot = slot();
            let s2 = slot.clone();
            let aborter = thread::spawn(move || s2.request_abort());
            let id = TaskKey::new(4, 2);
            let (skipped, direct) = if slot.aborted.load(Ordering::Acquire) {
                (true, false)
            } else {
                (false, slot.started(id, None))
            };
            let op = aborter.join().unwrap();
            let paths = skipped as u8 + direct as u8 + op.is_some() as u8;
            assert_eq!(paths, 1, "skipped {skipped}, direct {direct}, op {op:?}");
            if let Some(sent) = op {
                assert_eq!(sent, id);
            }
        });
    }

    #[test]
    fn loom_abort_racing_completion_delivers_one_result() {
        // The task completes (its result delivered) while another thread
        // aborts it and the handle is polled: the handle reads exactly one
        // result, the output (a task that completed is not cancelled by a
        // later abort, and the abort op, if any, finds it finished).
        loom::model(|| {
            let slot = slot();
            assert!(!slot.started(TaskKey::new(1, 0), None));
            let s2 = slot.clone();
            let aborter = thread::spawn(move || s2.request_abort());
            slot.clone().complete(Ok(7));
            let _ = aborter.join().unwrap();
            let mut st = slot.lock();
            assert!(st.done);
            assert_eq!(st.result.take().map(|r| r.ok()), Some(Some(7)));
        });
    }

    #[test]
    fn loom_drop_racing_abort_cancels_once() {
        // The executor drops a remote task unfinished (shutdown) while the
        // handle aborts it: the handle reads Cancelled, once.
        loom::model(|| {
            let slot = slot();
            let s2 = slot.clone();
            let aborter = thread::spawn(move || {
                let _ = s2.request_abort();
            });
            slot.clone().cancel_slot();
            aborter.join().unwrap();
            let mut st = slot.lock();
            assert!(st.done);
            assert!(st.result.take().unwrap().unwrap_err().is_cancelled());
            assert!(st.result.is_none());
        });
    }
}
