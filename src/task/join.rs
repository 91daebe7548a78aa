#![forbid(unsafe_code)]
//! [`JoinHandle`]: await a task's output, abort it, or detach by dropping;
//! [`AbortHandle`]: abort it from anywhere.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::task::id::{TaskId, TaskKey};
use crate::task::join_error::JoinError;
use crate::task::raw::{AbortRef, JoinCell};

/// An owned permission to await a task's output, as in tokio.
///
/// Awaiting it gives `Ok(output)`, or a [`JoinError`] if the task was
/// aborted, panicked, or was dropped when its executor shut down. Dropping
/// the handle **detaches** the task: it keeps running and its output is
/// dropped when it completes. To await many tasks in the order they finish,
/// put their handles in a [`JoinSet`](crate::task::JoinSet).
///
/// ```
/// use tourbillon::Builder;
///
/// let ex = Builder::new().queue("main", 1).build().unwrap();
/// ex.block_on(async {
///     let h = ex.spawn("main", async { 40 + 2 }).unwrap();
///     assert_eq!(h.await.unwrap(), 42);
///
///     let h = ex.spawn("main", std::future::pending::<()>()).unwrap();
///     h.abort();
///     assert!(h.await.unwrap_err().is_cancelled());
/// });
/// ```
#[must_use = "dropping a JoinHandle detaches the task: it keeps running; use `.abort()` to cancel it"]
pub struct JoinHandle<T> {
    /// The handle's hold on the task's cell, where the task leaves its
    /// result: one pointer, so that a handle is returned and stored in one
    /// register (two 32-bit halves and an `Rc` built on the stack and
    /// copied as one 16-byte value stalled store forwarding on every spawn;
    /// perf).
    cell: JoinCell<T>,
}

impl<T: 'static> JoinHandle<T> {
    pub(crate) fn new(cell: JoinCell<T>) -> Self {
        Self { cell }
    }

    /// Cancels the task. An idle or queued task is dropped at the executor's
    /// next poll boundary without being polled again; a task aborting itself
    /// (or aborted while being polled) is dropped when its poll returns. A
    /// task that completed first keeps its output: awaiting the handle then
    /// gives `Ok`. Aborting a finished task does nothing.
    pub fn abort(&self) {
        self.cell.abort();
    }

    /// A handle that aborts the task from any thread (tokio's
    /// `JoinHandle::abort_handle`); it does not await the output.
    ///
    /// ```
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new().queue("main", 1).build().unwrap();
    /// ex.block_on(async {
    ///     let h = ex.spawn("main", std::future::pending::<()>()).unwrap();
    ///     let abort = h.abort_handle();
    ///     std::thread::spawn(move || abort.abort()).join().unwrap();
    ///     assert!(h.await.unwrap_err().is_cancelled());
    /// });
    /// ```
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle {
            task: self.cell.abort_ref(),
        }
    }

    /// Whether the task has ended (completed, panicked or cancelled).
    pub fn is_finished(&self) -> bool {
        self.cell.state().is_complete()
    }

    /// The task's id, unique in the process.
    pub fn id(&self) -> TaskId {
        self.cell.id()
    }

    /// The task's key in its executor: what a
    /// [`Scheduler`](crate::sched::Scheduler) of its queue is given.
    pub fn key(&self) -> TaskKey {
        self.cell.key()
    }

    /// [`poll`](Future::poll) without tokio's budget: for a caller that
    /// takes the budget itself (`JoinSet`).
    #[inline]
    pub(crate) fn poll_unbudgeted(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, JoinError>> {
        self.cell.poll_result(cx.waker())
    }
}

impl<T: 'static> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// Polled again after it returned `Ready`, it returns
    /// `Ready(Err(JoinError::Cancelled))`: the output was already taken.
    ///
    /// With the `tokio` feature, a poll inside a tokio runtime spends
    /// tokio's cooperative budget as tokio's `JoinHandle` does: one unit
    /// when it returns `Ready`, and `Pending` (the waker woken at tokio's
    /// next turn) when the budget is spent, even if the task has finished.
    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        #[cfg(feature = "tokio")]
        let coop = std::task::ready!(crate::coop::join_unit(cx));
        let result = self.cell.poll_result(cx.waker());
        #[cfg(feature = "tokio")]
        if result.is_ready() {
            coop.made_progress();
        }
        result
    }
}

/// No field is structurally pinned (as tokio's `JoinHandle`).
impl<T> Unpin for JoinHandle<T> {}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.cell.id())
            .finish()
    }
}

/// Aborts a task from any thread, without awaiting its output: tokio's
/// `AbortHandle`, made by [`JoinHandle::abort_handle`].
///
/// `Send + Sync` and cheap to clone. On the executor's thread an abort
/// takes effect as [`JoinHandle::abort`]'s does; from another thread it
/// goes through the executor's inbox and takes effect at its next poll
/// boundary. Aborting a task that ended, or whose executor is gone, does
/// nothing. Dropping the handle does nothing to the task.
#[derive(Clone)]
pub struct AbortHandle {
    task: AbortRef,
}

impl AbortHandle {
    /// Cancels the task, as [`JoinHandle::abort`] does: an idle or queued
    /// task is dropped at the executor's next poll boundary without being
    /// polled again, a task being polled when its poll returns.
    pub fn abort(&self) {
        self.task.abort();
    }

    /// Whether the task has ended (completed, panicked or cancelled). On a
    /// thread other than the executor's the answer may lag behind: the
    /// task's state is written on the executor's thread.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// The task's id, unique in the process.
    pub fn id(&self) -> TaskId {
        self.task.id()
    }

    /// The task's key in its executor: what a
    /// [`Scheduler`](crate::sched::Scheduler) of its queue is given.
    pub fn key(&self) -> TaskKey {
        self.task.key()
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle")
            .field("id", &self.task.id())
            .finish()
    }
}
