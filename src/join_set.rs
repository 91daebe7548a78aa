#![forbid(unsafe_code)]
//! `JoinSet`: a collection of join handles, awaited in the order their
//! tasks finish.

use std::collections::VecDeque;
use std::fmt;
use std::future::{poll_fn, Future};
use std::task::{Context, Poll, Waker};

use futures_util::stream::{FuturesUnordered, StreamExt};

use crate::error::SpawnError;
use crate::executor::queue_handle::QueueHandle;
use crate::task::join::{AbortHandle, JoinHandle};
use crate::task::join_error::JoinError;

/// A collection of tasks of one output type, awaited in the order they
/// finish, as tokio's `JoinSet`.
///
/// Tasks enter the set by [`spawn`](JoinSet::spawn) (onto the current
/// task's queue, as the free [`spawn`](crate::spawn)),
/// [`spawn_on`](JoinSet::spawn_on) (onto a chosen queue) or
/// [`insert`](JoinSet::insert) (the handle of a task spawned by any other
/// entry point: [`Executor::spawn`](crate::Executor::spawn), a
/// [`Spawner`](crate::Spawner), a [`TaskBuilder`](crate::TaskBuilder), ...).
/// [`join_next`](JoinSet::join_next) gives the result of the task that
/// finished first among those not yet joined, whatever the order they were
/// added in.
///
/// **Dropping the set aborts every task still in it**, as in tokio (use
/// [`detach_all`](JoinSet::detach_all) first to let them run on). A task
/// that finished before keeps its output, which is dropped with the set.
///
/// ```
/// use tourbillon::task::yield_now;
/// use tourbillon::{Builder, JoinSet};
///
/// let ex = Builder::new().queue("q", 1).build().unwrap();
/// let done = ex.block_on(async {
///     let mut set = JoinSet::new();
///     for n in [3, 1, 2] {
///         set.spawn(async move {
///             for _ in 0..n {
///                 yield_now().await;
///             }
///             n
///         });
///     }
///     let mut done = Vec::new();
///     while let Some(res) = set.join_next().await {
///         done.push(res.unwrap());
///     }
///     done
/// });
/// // The task with the fewest yields finished first.
/// assert_eq!(done, [1, 2, 3]);
/// ```
pub struct JoinSet<T: 'static> {
    /// The handles not yet seen finished; each is polled only after its
    /// task woke it, in the order of those wakes.
    pending: FuturesUnordered<JoinHandle<T>>,
    /// Results taken from `pending` outside `poll_join_next` (by `insert`),
    /// in the order the tasks finished.
    done: VecDeque<Result<T, JoinError>>,
    /// The waker of the latest `poll_join_next`, which `insert` polls with
    /// so that it stays the one woken.
    waker: Option<Waker>,
}

impl<T: 'static> JoinSet<T> {
    /// An empty set.
    pub fn new() -> Self {
        Self {
            pending: FuturesUnordered::new(),
            done: VecDeque::new(),
            waker: None,
        }
    }

    /// The number of tasks in the set: not yet joined, finished or not.
    pub fn len(&self) -> usize {
        self.pending.len() + self.done.len()
    }

    /// Whether the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty() && self.done.is_empty()
    }

    /// Adds the task of `handle` to the set, whichever entry point spawned
    /// it. The set watches it from now on: a task that finishes before
    /// another is joined before it. Returns a handle that aborts the task
    /// from any thread (as tokio's `JoinSet::spawn` returns).
    pub fn insert(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let abort = handle.abort_handle();
        self.pending.push(handle);
        // Poll the new handle at once, so that it registers for its task's
        // completion (and is joined in finish order), with the waker of the
        // latest `poll_join_next`: a caller waiting in `poll_join_next` stays
        // the one woken.
        let mut cx = Context::from_waker(self.waker.as_ref().unwrap_or(Waker::noop()));
        while let Poll::Ready(Some(res)) = self.pending.poll_next_unpin(&mut cx) {
            self.done.push_back(res);
        }
        abort
    }

    /// Spawns `future` onto the current task's queue of the running
    /// executor (onto the executor's default queue from the main future of
    /// `block_on` / `run_until`: see
    /// [`Builder::default_queue`](crate::Builder::default_queue)), as the
    /// free [`spawn`](crate::spawn), and
    /// adds it to the set; returns its [`AbortHandle`].
    ///
    /// # Panics
    /// Outside a running tourbillon executor, or after it shut down, as
    /// [`spawn`](crate::spawn); spawn with [`try_spawn`](crate::try_spawn)
    /// and [`insert`](JoinSet::insert) the handle for an error instead.
    pub fn spawn<F>(&mut self, future: F) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
    {
        self.insert(crate::executor::spawn(future))
    }

    /// Spawns `future` onto the queue of `queue` and adds it to the set;
    /// returns its [`AbortHandle`].
    ///
    /// # Errors
    /// [`SpawnError::Shutdown`] once the executor is dropped; the set is
    /// then unchanged.
    pub fn spawn_on<F>(&mut self, future: F, queue: &QueueHandle) -> Result<AbortHandle, SpawnError>
    where
        F: Future<Output = T> + 'static,
    {
        Ok(self.insert(queue.spawn(future)?))
    }

    /// Waits for one of the tasks of the set to finish and returns its
    /// result, removing it from the set: the task that finished first among
    /// those not yet joined. `None` when the set is empty.
    ///
    /// Cancel safe: dropping the future before it completes removes no task
    /// from the set.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// The result of a task of the set that has finished, removing it from
    /// the set, without waiting. `None` when no task has finished yet, or
    /// the set is empty.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        if let Some(res) = self.done.pop_front() {
            return Some(res);
        }
        let mut cx = Context::from_waker(self.waker.as_ref().unwrap_or(Waker::noop()));
        match self.pending.poll_next_unpin(&mut cx) {
            Poll::Ready(res) => res,
            Poll::Pending => None,
        }
    }

    /// Polls for one of the tasks of the set to finish: `Ready(Some)` with
    /// the result of the task that finished first among those not yet
    /// joined (removed from the set), `Ready(None)` when the set is empty,
    /// `Pending` otherwise. After `Pending`, the waker of `cx` is woken
    /// when a task of the set finishes; only the waker of the latest call
    /// is.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        if let Some(res) = self.done.pop_front() {
            return Poll::Ready(Some(res));
        }
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
        self.pending.poll_next_unpin(cx)
    }

    /// Aborts every task of the set (see [`JoinHandle::abort`]). The tasks
    /// stay in the set: join them to see them end, with a cancelled
    /// [`JoinError`], or with their output if they finished first.
    pub fn abort_all(&mut self) {
        for handle in self.pending.iter() {
            handle.abort();
        }
    }

    /// Removes every task from the set without aborting it: the tasks run
    /// on, and their outputs are dropped when they finish (as when a
    /// [`JoinHandle`] is dropped). Outputs of tasks that already finished
    /// are dropped now.
    pub fn detach_all(&mut self) {
        self.pending.clear();
        self.done.clear();
    }

    /// Aborts every task of the set and waits until all have ended; the set
    /// is then empty. The results, outputs of tasks that finished first
    /// included, are dropped.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }
}

impl<T: 'static> Default for JoinSet<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// Aborts every task still in the set.
impl<T: 'static> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
    }
}

impl<T: 'static> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}
