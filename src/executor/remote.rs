#![forbid(unsafe_code)]
//! Cross-thread entry: [`RemoteSpawner`] submits `Send` futures to an
//! executor's queues from any thread; [`RemoteJoinHandle`] awaits (or
//! aborts) such a task from any thread.
//!
//! A remote spawn is an op in the executor's inbox (the short-lock queue
//! that foreign wakes use, which unparks the executor): the executor spawns
//! the future at its next poll boundary. The task is then an ordinary task
//! of its queue, but without a local join handle: when it ends, its result
//! goes to the remote handle's slot. The op, the slot and the executor's
//! delivery are one allocation ([`Shared`]), made by the spawning thread;
//! the executor moves the future out of it into the task, and attaches it
//! to the task as its delivery (`TaskSlab::set_deliver`, no allocation).
//! The last owner frees it: usually the handle, on the spawning side.
//!
//! Races, decided under the slot's lock (one lock, which also holds the
//! future until the executor takes it):
//! * abort before the executor took the future: the spawn op sees the
//!   flag when it takes the future, and drops it unpolled (the handle
//!   reads `Cancelled`);
//! * abort after: the executor published the task's id when it took the
//!   future (the id the task gets, `TaskSlab::next_id`, known before it is
//!   stored), so the abort names it, and an abort op follows the usual
//!   local path (the op is queued after the executor took the spawn op,
//!   so it finds the task stored: dropped at the next boundary, or at the
//!   end of its poll);
//! * abort racing completion: whichever takes the lock first wins; a task
//!   that completed first keeps its output (`Ok`), as a local `abort` does.
//! * the executor shut down, or dropped the task unfinished: the delivery
//!   (or the spawn op) is dropped undelivered, and its drop resolves the
//!   handle to `Cancelled`.
//!
//! It owns the remote handles and the slot; the task itself is created by
//! the spawn path (`Core::spawn_detached`) and runs as any other. The
//! bounded path (`executor/bounded.rs`) submits through [`submit`] too.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll, Waker};

use super::core::Core;
use super::core::{Remote, RemoteOp};
use super::launch::Launch;
use super::spawning::Spawn;
use crate::boundary;
use crate::error::{SpawnError, UnknownQueue};
use crate::queue::{KeyMap, QueueKey};
use crate::sync::{Mutex, MutexGuard};
use crate::task::id::TaskId;
use crate::task::join_error::JoinError;
use crate::task::slab::ResultSink;

/// The id reported by a [`JoinError`] of a remote task that was never
/// spawned (the executor shut down before it took the task), and the
/// slot's id until the executor takes the future (a task's index is below
/// 2^31).
const NEVER_SPAWNED: TaskId = TaskId::new(u32::MAX, u32::MAX);

/// What a remote task, its handle and the executor share: one allocation,
/// made by the spawning thread. `S` is what the executor spawns the task
/// from ([`Pending`]), under the slot's lock with the rest; the handle
/// sees it erased ([`Slot`]).
pub(crate) struct Shared<T, S: ?Sized> {
    state: Mutex<SlotState<T, S>>,
}

/// The handle's view of a [`Shared`]: the result slot alone.
pub(crate) type Slot<T> = Shared<T, dyn Send>;

struct SlotState<T, S: ?Sized> {
    result: Option<Result<T, JoinError>>,
    /// The result was delivered (and maybe taken since).
    done: bool,
    /// The handle's waker.
    waker: Option<Waker>,
    /// The task, once the executor took the future ([`NEVER_SPAWNED`]
    /// before: no `Option`, which would make the allocation of a small
    /// future's task 144 bytes instead of 128).
    id: TaskId,
    /// `abort()` was called.
    abort: bool,
    /// The task's queue.
    queue: u32,
    /// The task's keyed group, if `keyed` (not an `Option`, for the same
    /// reason as `id`).
    group: u64,
    keyed: bool,
    /// What the executor spawns the task from (the last field: the
    /// handle's view erases it).
    spawn: S,
}

/// What makes a remote task's future, until the executor takes it out
/// (once, on its thread): a [`Launch`], the future or a closure.
type Pending<L> = Option<L>;

/// What [`Shared::start`] gives the executor.
enum Start<L> {
    /// Spawn the task from `launch` on `queue`, in `group`; its id is
    /// published.
    Spawn {
        launch: L,
        queue: usize,
        group: Option<u64>,
    },
    /// Aborted before it started, or the executor shuts down: drop the
    /// future unpolled, then cancel the slot.
    Drop(L),
    /// The future was taken already.
    Gone,
}

impl<T, S> Shared<T, S> {
    /// A slot for a task of queue `queue` (an index), in `group` (a group
    /// of its own if `None`), to be spawned from `spawn`.
    fn new(queue: usize, group: Option<u64>, spawn: S) -> Self {
        Self {
            state: Mutex::new(SlotState {
                result: None,
                done: false,
                waker: None,
                id: NEVER_SPAWNED,
                abort: false,
                // Queue indexes fit a task header's 16 bits.
                queue: queue as u32,
                group: group.unwrap_or(0),
                keyed: group.is_some(),
                spawn,
            }),
        }
    }
}

impl<T, L> Shared<T, Pending<L>> {
    /// Executor side: takes the future out, with the slot's one lock of
    /// the spawn. Unless `abort()` came first or the executor shuts down
    /// (`shutdown`), publishes `id`, the id the task will get: an abort
    /// from then on names it.
    fn start(&self, shutdown: bool, id: TaskId) -> Start<L> {
        let mut st = self.lock();
        let Some(launch) = st.spawn.take() else {
            return Start::Gone;
        };
        if shutdown || st.abort {
            return Start::Drop(launch);
        }
        st.id = id;
        Start::Spawn {
            launch,
            queue: st.queue as usize,
            group: st.keyed.then_some(st.group),
        }
    }

    /// Takes the future out (a refused or dropped spawn op), once.
    fn take(&self) -> Option<L> {
        self.lock().spawn.take()
    }
}

impl<T, S: ?Sized> Shared<T, S> {
    fn lock(&self) -> MutexGuard<'_, SlotState<T, S>> {
        // No critical section below can panic (they move values and
        // compare flags); recover from poisoning anyway.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Handle side: records the abort; returns the id to send an abort op
    /// for, when the executor took the future. `None` when there is nothing
    /// to send: finished, aborted before, or not taken (then `start` sees
    /// the flag).
    fn request_abort(&self) -> Option<TaskId> {
        let mut st = self.lock();
        if st.done || st.abort {
            return None;
        }
        st.abort = true;
        (st.id != NEVER_SPAWNED).then_some(st.id)
    }

    /// Stores the result and wakes the handle, once. The caller lets go of
    /// its reference before the wake: if the handle is gone, that drops the
    /// result (user code), and a panic of its destructor must not unwind
    /// through the wake (user code too), nor the wake's through it (a panic
    /// while unwinding aborts the process).
    fn complete(self: Arc<Self>, result: Result<T, JoinError>) {
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
    fn cancel_slot(self: Arc<Self>) {
        let id = self.lock().id;
        self.complete(Err(JoinError::cancelled(id)));
    }
}

impl<T, S> ResultSink for Shared<T, S>
where
    T: Send + 'static,
    S: Send + 'static,
{
    type Output = T;

    fn send(self: Arc<Self>, result: Result<T, JoinError>) {
        self.complete(result);
    }

    fn cancel(self: Arc<Self>) {
        self.cancel_slot();
    }
}

/// A remote spawn as the executor runs it (type-erased [`Shared`]).
pub(crate) trait SpawnOp: Send + Sync {
    /// Spawns the task on the executor's thread, at a poll boundary.
    fn run(self: Arc<Self>, core: &Core);
    /// Drops the future unpolled: the handle reads `Cancelled`.
    fn cancel(self: Arc<Self>);
}

impl<L: Launch> SpawnOp for Shared<L::Output, Pending<L>> {
    fn run(self: Arc<Self>, core: &Core) {
        // The id `spawn_detached` gives the task: nothing is stored in the
        // slab in between (no user code runs before the insert).
        let next = core.tasks.borrow().next_id();
        let (launch, queue, group) = match self.start(core.shutdown.get(), next) {
            Start::Spawn {
                launch,
                queue,
                group,
            } => (launch, queue, group),
            Start::Drop(launch) => {
                // Aborted before it started, or the executor shuts down:
                // the future is dropped unpolled, then the handle reads
                // Cancelled. Two calls into user code (the future's
                // destructor, the wake of the handle's waker), each behind
                // a boundary of its own: a panic of the first must not
                // unwind through the second (a panic while unwinding aborts
                // the process).
                if let Some(p) = boundary::drop_caught(launch) {
                    core.panics.report(p);
                }
                self.cancel_slot();
                return;
            }
            Start::Gone => return,
        };
        let spawn = Spawn {
            queue,
            group,
            name: None,
            future: launch.launch(),
        };
        // Refused only after shutdown, which `start` checked: the executor
        // shuts down on its own thread, not in between.
        let Ok(oid) = core.spawn_detached(spawn) else {
            self.cancel_slot();
            return;
        };
        debug_assert_eq!(oid.id(), next, "the published id is the task's");
        core.tasks.borrow_mut().set_deliver(oid, self);
    }

    fn cancel(self: Arc<Self>) {
        drop(self.take());
        self.cancel_slot();
    }
}

/// A spawn op in the inbox. Dropped without running (refused at
/// submission, or left in the inbox of an executor that closed without
/// running it), it drops its future and its handle reads `Cancelled`.
pub(crate) struct RemoteSpawn(Option<Arc<dyn SpawnOp>>);

impl RemoteSpawn {
    /// Runs the spawn on the executor's thread.
    pub(crate) fn run(mut self, core: &Core) {
        if let Some(op) = self.0.take() {
            op.run(core);
        }
    }
}

impl Drop for RemoteSpawn {
    fn drop(&mut self) {
        if let Some(op) = self.0.take() {
            op.cancel();
        }
    }
}

/// A `Send + Sync` handle that spawns `Send` futures onto an executor's
/// queues from any thread (an accept loop, a thread pool, a foreign
/// runtime). The executor is woken (unparked, or its host runtime woken) and
/// spawns the task at its next poll boundary; from then on it is an
/// ordinary task of its queue. Get one with
/// [`Executor::remote_spawner`](crate::Executor::remote_spawner). Clone it
/// freely; it does not keep the executor alive: after the executor is
/// dropped, spawning gives [`SpawnError::Shutdown`].
///
/// Its submissions are unbounded: a thread that spawns faster than the
/// executor runs builds a backlog. For a bounded submission path (an
/// awaitable spawn that waits for room, and a `try_spawn` that reports a
/// full queue), see [`BoundedRemoteSpawner`](crate::BoundedRemoteSpawner).
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
    /// [`Executor::spawn_in_group`](crate::Executor::spawn_in_group)).
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
    let shared = Arc::new(Shared::new(q, group, Some(launch)));
    let slot: Arc<Slot<L::Output>> = shared.clone();
    let op = RemoteOp::Spawn(RemoteSpawn(Some(shared.clone())));
    match remote.push_op(op) {
        Ok(()) => Ok(RemoteJoinHandle {
            slot,
            remote: remote.clone(),
        }),
        Err(op) => {
            // Refused: nothing ran; take the future back (the op's drop
            // then finds none to drop).
            let future = shared.take();
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
/// [`JoinHandle`](crate::JoinHandle)), abortable from any thread; dropping it
/// detaches the task.
///
/// With [`PanicPolicy::Propagate`](crate::PanicPolicy::Propagate) the panic
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

    /// # Panics
    /// When polled again after it returned `Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut st = self.slot.lock();
        if let Some(result) = st.result.take() {
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
            .field("id", &(st.id != NEVER_SPAWNED).then_some(st.id))
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
    RemoteOp::Spawn(RemoteSpawn(Some(Arc::new(Shared::new(
        0,
        None,
        Some(future),
    )))))
}

/// Model checks of the remote slot (run with
/// `RUSTFLAGS="--cfg tourbillon_loom" cargo test --release --lib loom`).
#[cfg(all(test, tourbillon_loom))]
mod loom_tests {
    use super::*;
    use loom::thread;

    /// A slot whose pending "future" is a unit.
    fn slot() -> Arc<Shared<u32, Pending<()>>> {
        Arc::new(Shared::new(0, None, Some(())))
    }

    #[test]
    fn loom_abort_racing_start_reaches_the_task_once() {
        // The executor starts a remote task (takes the future, checks the
        // abort flag, publishes the id) while another thread aborts it.
        // Whatever the interleaving, the abort takes effect by exactly one
        // path: the start is skipped, or the aborting thread sends an abort
        // op naming the started task.
        loom::model(|| {
            let slot = slot();
            let s2 = slot.clone();
            let aborter = thread::spawn(move || s2.request_abort());
            let id = TaskId::new(4, 2);
            let skipped = match slot.start(false, id) {
                Start::Drop(()) => true,
                Start::Spawn { .. } => false,
                Start::Gone => panic!("the future was there"),
            };
            let op = aborter.join().unwrap();
            let paths = skipped as u8 + op.is_some() as u8;
            assert_eq!(paths, 1, "skipped {skipped}, op {op:?}");
            if let Some(sent) = op {
                assert_eq!(sent, id);
            }
            assert!(matches!(slot.start(false, id), Start::Gone));
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
            assert!(matches!(
                slot.start(false, TaskId::new(1, 0)),
                Start::Spawn { .. }
            ));
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
