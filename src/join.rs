#![forbid(unsafe_code)]
//! `JoinHandle`: await a task's output, abort it, or detach by dropping.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::error::JoinError;
use crate::executor::core::Core;
use crate::task::id::TaskId;
use crate::task::slab::OutputId;

/// An owned permission to await a task's output, as in tokio.
///
/// Awaiting it gives `Ok(output)`, or a [`JoinError`] if the task was
/// aborted, panicked, or was dropped when its executor shut down. Dropping
/// the handle **detaches** the task: it keeps running and its output is
/// dropped when it completes.
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
    core: Rc<Core>,
    /// The task's id, the proof that its output is `T`; marked read once
    /// the result was read ([`OutputId::mark_read`]), so that `drop` skips
    /// the slab.
    id: OutputId<T>,
    _output: PhantomData<T>,
}

impl<T: 'static> JoinHandle<T> {
    pub(crate) fn new(core: Rc<Core>, id: OutputId<T>) -> Self {
        Self {
            core,
            id,
            _output: PhantomData,
        }
    }

    /// Cancels the task. An idle or queued task is dropped at the executor's
    /// next poll boundary without being polled again; a task aborting itself
    /// (or aborted while being polled) is dropped when its poll returns. A
    /// task that completed first keeps its output: awaiting the handle then
    /// gives `Ok`. Aborting a finished task does nothing.
    pub fn abort(&self) {
        // A handle that read the result has no task left to abort (and its
        // slot may hold another task by now).
        if !self.id.is_read() {
            self.core.abort(self.id());
        }
    }

    /// Whether the task has ended (completed, panicked or cancelled).
    pub fn is_finished(&self) -> bool {
        self.id.is_read() || self.core.tasks.borrow().is_finished(self.id())
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id.id()
    }
}

impl<T: 'static> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    /// Polled again after it returned `Ready`, it returns
    /// `Ready(Err(JoinError::Cancelled))`: the output was already taken.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let (poll, entry) = self.core.tasks.borrow_mut().join_poll(self.id, cx.waker());
        if let Some(entry) = entry {
            // The result was moved out: frees the cell.
            entry.release_consumed();
            let this = self.get_mut();
            this.id = this.id.mark_read();
        }
        poll
    }
}

/// No field is structurally pinned (as tokio's `JoinHandle`).
impl<T> Unpin for JoinHandle<T> {}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if self.id.is_read() {
            return;
        }
        let entry = match self.core.tasks.try_borrow_mut() {
            Ok(mut tasks) => tasks.join_drop(self.id.id()),
            Err(_) => None,
        };
        // Dropped outside the borrow: this drops an unread output.
        drop(entry);
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id.id())
            .finish()
    }
}
