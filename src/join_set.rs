#![forbid(unsafe_code)]
//! `JoinSet`: a collection of join handles, awaited in the order their
//! tasks finish.

use std::collections::VecDeque;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::Pin;
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
/// entry point: [`Spawner::spawn`](crate::Spawner::spawn), a
/// [`Spawner`](crate::Spawner), a [`TaskBuilder`](crate::task::TaskBuilder), ...).
/// [`join_next`](JoinSet::join_next) gives the result of the task that
/// finished first among those not yet joined, whatever the order they were
/// added in.
///
/// **Dropping the set aborts every task still in it**, as in tokio (use
/// [`detach_all`](JoinSet::detach_all) first to let them run on). A task
/// that finished before keeps its output, which is dropped with the set.
///
/// As tokio's, a set is built from futures with [`FromIterator`] and
/// [`Extend`] (each spawned as by [`spawn`](JoinSet::spawn)), and
/// [`join_all`](JoinSet::join_all) awaits all of its tasks. With the
/// `tokio` feature, joins spend tokio's cooperative budget as tokio's do
/// (one unit per joined task; see [`join_next`](JoinSet::join_next)).
///
/// ```
/// use tourbillon::task::{yield_now, JoinSet};
/// use tourbillon::Builder;
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
    pending: FuturesUnordered<Member<T>>,
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
        self.pending.push(Member(handle));
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
    /// The panic's location is the caller's (`#[track_caller]`).
    #[track_caller]
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
    ///
    /// With the `tokio` feature, inside a tokio runtime, each join spends
    /// one unit of tokio's cooperative budget, as tokio's `JoinSet` does: a
    /// loop over `join_next` in a task whose budget is spent gets `Pending`
    /// and runs on at tokio's next turn, even with tasks finished.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// Awaits every task of the set and returns their outputs, in the order
    /// the tasks finished (not the order they were added in), as tokio's
    /// `JoinSet::join_all`: [`join_next`](JoinSet::join_next) in a loop.
    ///
    /// # Panics
    /// If a task panicked, with its payload (resumed); if a task was
    /// aborted or dropped at shutdown, with the [`JoinError`]'s message.
    /// The tasks still in the set are then aborted (the set is dropped).
    ///
    /// ```
    /// use tourbillon::task::JoinSet;
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new().queue("q", 1).build().unwrap();
    /// let all = ex.block_on(async {
    ///     let set: JoinSet<u32> = (1..=3).map(|n| async move { n * 10 }).collect();
    ///     set.join_all().await
    /// });
    /// assert_eq!(all, [10, 20, 30]);
    /// ```
    pub async fn join_all(mut self) -> Vec<T> {
        let mut output = Vec::with_capacity(self.len());
        while let Some(res) = self.join_next().await {
            match res {
                Ok(t) => output.push(t),
                Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
                Err(err) => panic!("{err}"),
            }
        }
        output
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
    ///
    /// With the `tokio` feature, inside a tokio runtime: a call that returns
    /// `Ready(Some)` spends one unit of tokio's budget; a call that finds
    /// the budget spent returns `Pending` and has the waker of `cx` woken
    /// at tokio's next turn.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        if self.is_empty() {
            return Poll::Ready(None);
        }
        #[cfg(feature = "tokio")]
        let coop = std::task::ready!(crate::coop::join_unit(cx));
        let res = if let Some(res) = self.done.pop_front() {
            Poll::Ready(Some(res))
        } else {
            if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                self.waker = Some(cx.waker().clone());
            }
            self.pending.poll_next_unpin(cx)
        };
        #[cfg(feature = "tokio")]
        if res.is_ready() {
            coop.made_progress();
        }
        res
    }

    /// Aborts every task of the set (see [`JoinHandle::abort`]). The tasks
    /// stay in the set: join them to see them end, with a cancelled
    /// [`JoinError`], or with their output if they finished first.
    pub fn abort_all(&mut self) {
        for member in self.pending.iter() {
            member.0.abort();
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

/// Spawns each future as [`JoinSet::spawn`] does (onto the current task's
/// queue of the running executor), as tokio's `FromIterator` for its
/// `JoinSet`; without `Send` bounds.
///
/// # Panics
/// Outside a running tourbillon executor, as [`spawn`](crate::spawn).
impl<T: 'static, F> FromIterator<F> for JoinSet<T>
where
    F: Future<Output = T> + 'static,
{
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> Self {
        let mut set = Self::new();
        set.extend(iter);
        set
    }
}

/// Spawns each future as [`JoinSet::spawn`] does and adds it to the set, as
/// tokio's `Extend` for its `JoinSet`; without `Send` bounds.
///
/// # Panics
/// Outside a running tourbillon executor, as [`spawn`](crate::spawn).
impl<T: 'static, F> Extend<F> for JoinSet<T>
where
    F: Future<Output = T> + 'static,
{
    fn extend<I: IntoIterator<Item = F>>(&mut self, iter: I) {
        for future in iter {
            self.spawn(future);
        }
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

/// A handle in the set, polled without tokio's budget: the set takes one
/// unit per join itself ([`JoinSet::poll_join_next`]), and `insert` and
/// `try_join_next`, which cannot yield, take none (as tokio's).
struct Member<T>(JoinHandle<T>);

impl<T: 'static> Future for Member<T> {
    type Output = Result<T, JoinError>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_unbudgeted(cx)
    }
}
