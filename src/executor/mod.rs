#![forbid(unsafe_code)]
//! The executor layer: the local handles ([`Executor`], [`Spawner`],
//! `QueueHandle`, `TaskBuilder`) and everything that runs
//! tasks: the run loop, the EEVDF pick, the queues at run time, the
//! drivers. Below it, and imported one way: the task core (`crate::task`:
//! cells, wakers, join and abort handles), the schedulers (`crate::sched`), the queue
//! declarations (`crate::queue`), the clock (`crate::clock`), the
//! configuration (`crate::config`) and the statistics. Above it: the
//! builder, which assembles a `Core`, and the crate's re-exports.
//!
//! Each piece of state has one owner, and its methods live beside it
//! (`tests/layers.rs` checks that no two files import each other in a
//! circle):
//! * `queues`: the queues and their EEVDF entities (`Queues`: each queue's
//!   scheduler and counters, the EEVDF table of `crate::eevdf`, a queue's
//!   quarantine); `placement`: how a queue that became runnable is placed
//!   and when it preempts (`Queues::place_activations`);
//! * `run_state`: the local run state (`RunState`: the run in progress,
//!   the checkpoints, the turn's budget, why the run ends, the counts);
//!   `accounting`: its clock accounting (`RunState::checkpoint`);
//!   `batch`: the ids a run holds (`HeldIds`, `Held`);
//! * `observe`: the observer of polls (`Observer`: histograms, the stall
//!   detector, `tracing` spans);
//! * `core`: `Core`, the state the handles share (the task storage, the
//!   queues, the run state, the intake of remote work, the clock and the
//!   configuration) and what the handles ask of it (spawn, wake, abort,
//!   shares, stats, shutdown; `impl remote::Target`); `run_loop`: its
//!   other half, the turn (the pick, boundary work, quarantines,
//!   `should_yield`); `run`: one run of one queue (`Run`: what happens at
//!   a poll);
//! * `drive`: `block_on`, `run_until`, `run_until_stalled`;
//! * the handles: `task_builder`, `queue_handle`, and this file
//!   (`Executor`, `Spawner`, the free `spawn`).
//!
//! Where to change what: how a queue is picked, `crate::eevdf`
//! (`Eevdf::pick`) and `placement.rs`; how a remote spawn enters,
//! `crate::remote` (`intake.rs`, `backlog.rs`, `admission.rs`); what
//! happens at a poll, `run.rs` (and the task core's
//! `task::harness::poll_task`).
//!
//! `wake` (the executor's implementation of the task core's `Schedule`
//! sink: where wakes and aborts go) and `context` (the thread-local current
//! executor, and the `PollScope` the run loop gives the poll harness) are
//! the task core's ways into the executor. Remote work (`crate::remote`)
//! enters through `Core`'s `Target` implementation and `Intake::at_boundary`.
//!
//! The executor does not know any scheduler's internals (it calls a
//! queue's scheduler through `QueueScheduler`) nor a task's layout (it
//! goes through the task slab and raw-task API).

pub(crate) mod accounting;
pub(crate) mod batch;
pub(crate) mod context;
pub(crate) mod core;
pub(crate) mod drive;
pub(crate) mod observe;
pub(crate) mod placement;
pub(crate) mod queue_handle;
pub(crate) mod queues;
pub(crate) mod run;
pub(crate) mod run_loop;
pub(crate) mod run_state;
pub(crate) mod task_builder;
pub(crate) mod wake;

use std::fmt;
use std::future::Future;
use std::num::NonZeroUsize;
use std::rc::Rc;
use std::sync::Arc;

use self::core::Core;
use self::drive::{Drained, RunUntil};
use self::queue_handle::QueueHandle;
use self::task_builder::{spawn_local, TaskBuilder};
use crate::error::{SharesError, SpawnError, UnknownQueue};
use crate::queue::{KeyMap, QueueKey};
use crate::remote::bounded::BoundedRemoteSpawner;
use crate::remote::spawner::RemoteSpawner;
use crate::stats::{ExecutorStats, QueueStats};
use crate::task::join::JoinHandle;

/// A single-threaded executor whose queues share the thread by weight.
///
/// Tasks are `!Send` futures spawned onto a queue by key. Between queues
/// the executor runs EEVDF: over any stretch of time in which several
/// queues have runnable tasks, queue `i` receives about
/// `shares(i) / sum(shares)` of the thread, within a bound of about two
/// slices plus one poll; a lone runnable queue gets all of it. Inside a
/// queue its [`Scheduler`](crate::sched::Scheduler) picks the task.
///
/// Drive it with [`block_on`](Executor::block_on) (standalone: parks the
/// thread when idle) or [`run_until`](Executor::run_until) (a future, to nest
/// it in tokio, smol or another runtime whose timers and sockets the tasks
/// then use). Dropping the executor drops every unfinished task once; their
/// join handles then resolve to `Cancelled` (the handle of a task that
/// completed still reads its output, as in tokio) and spawning fails with
/// [`SpawnError::Shutdown`].
///
/// ```
/// use tourbillon::task::yield_now;
/// use tourbillon::Builder;
///
/// #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
/// enum Q { Requests, Compaction }
///
/// let ex = Builder::new()
///     .queue(Q::Requests, 4)
///     .queue(Q::Compaction, 1)
///     .build()?;
/// let total = ex.block_on(async {
///     let bg = ex.spawn(Q::Compaction, async {
///         for _ in 0..10 { yield_now().await }
///         1
///     })?;
///     let fg = ex.spawn(Q::Requests, async { 41 })?;
///     Ok::<_, tourbillon::error::SpawnError>(fg.await.unwrap() + bg.await.unwrap())
/// })?;
/// assert_eq!(total, 42);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Executor<K: QueueKey> {
    /// The executor's own spawning handle (core + key map): `Executor`
    /// spawns through it, and `spawner()` clones it.
    spawner: Spawner<K>,
}

impl<K: QueueKey> Executor<K> {
    pub(crate) fn from_parts(core: Rc<Core>, keys: Arc<KeyMap<K>>) -> Self {
        Self {
            spawner: Spawner { core, keys },
        }
    }

    /// A `Send + Sync` handle that spawns `Send` futures onto this
    /// executor's queues from any thread (see [`RemoteSpawner`]).
    pub fn remote_spawner(&self) -> RemoteSpawner<K> {
        RemoteSpawner::new(
            self.spawner.core.intake.inbox.clone(),
            self.spawner.keys.clone(),
        )
    }

    /// A [`RemoteSpawner`] with a capacity (see [`BoundedRemoteSpawner`]):
    /// at most `capacity` tasks submitted through it and its clones wait
    /// for their first poll at any time; its `spawn` waits for room, its
    /// `try_spawn` reports a full spawner. Each call makes a spawner with a
    /// capacity of its own.
    pub fn bounded_remote_spawner(&self, capacity: NonZeroUsize) -> BoundedRemoteSpawner<K> {
        BoundedRemoteSpawner::new(self.remote_spawner(), capacity)
    }

    /// A handle to the queue `key`, to spawn without a key lookup.
    pub fn queue(&self, key: K) -> Result<QueueHandle, UnknownQueue> {
        let index = self.spawner.index(key)?;
        Ok(QueueHandle {
            core: self.spawner.core.clone(),
            index,
        })
    }

    /// A clonable handle that spawns by key, to move into tasks.
    pub fn spawner(&self) -> Spawner<K> {
        self.spawner.clone()
    }

    /// Runs the executor on this thread until `future` completes, and
    /// returns its output. `future` (the *main future*) is not a task: it
    /// belongs to no queue and gets no shares; the driver polls it between
    /// turns of the tasks, whenever it is woken. The free
    /// [`spawn`](crate::spawn) called from it spawns onto the
    /// [default queue](crate::Builder::default_queue) (the first declared
    /// queue unless the builder names another). When no task is runnable
    /// the thread parks (no CPU) until a wake, from this thread or another.
    ///
    /// `block_on` has no reactor: it runs CPU-bound work and futures woken
    /// by tourbillon itself, other tasks or other threads (channels, join
    /// handles, [`yield_now`](fn@crate::task::yield_now)), but no timer or socket of
    /// any runtime. For those, nest the executor in the runtime that owns
    /// them with [`run_until`](Executor::run_until): tokio's or monoio's
    /// `rt.block_on(ex.run_until(fut))`, or async-io's
    /// `async_io::block_on(ex.run_until(fut))`. A tokio timer or
    /// socket used under `block_on` panics in tokio ("there is no reactor
    /// running"): in a task, its [`JoinError`](crate::task::JoinError) then
    /// carries a message that says to use `run_until` in a tokio runtime;
    /// in the main future, `block_on` panics with that message (a `String`
    /// payload that ends with tokio's own message). Any other panic of the
    /// main future resumes out of `block_on` unchanged.
    ///
    /// # Panics
    /// If called from inside one of this executor's tasks (a task cannot
    /// block the thread that runs it); when `future` itself panics; with
    /// [`PanicPolicy::Propagate`](crate::config::PanicPolicy::Propagate), when a task
    /// or other user code the executor calls panics; in debug builds, when
    /// a custom [`Scheduler`](crate::sched::Scheduler) breaks its contract.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        drive::block_on(&self.spawner.core, future)
    }

    /// A future that runs the executor's tasks while it is polled, until
    /// `future` completes: nest the executor in a host runtime (a tokio
    /// `current_thread` runtime or `LocalSet`, smol, ...). Every turn
    /// (61 polls or 200 us by default) it returns to the host so that the
    /// host's timers and sockets, which the tasks may use, make progress.
    /// As under [`block_on`](Executor::block_on), `future` belongs to no
    /// queue: each poll of `run_until` polls it (when the host polls
    /// `run_until`), then runs one turn of the tasks; the free
    /// [`spawn`](crate::spawn) called from it spawns onto the
    /// [default queue](crate::Builder::default_queue). If it panics with
    /// tokio's "no reactor" message (under a host that is not tokio), the
    /// panic is explained as under `block_on`.
    /// Several `run_until` futures of one executor may be pending in one
    /// host at once (tasks of one `LocalSet`, say): each is woken when the
    /// executor has work, and whichever the host polls first runs it.
    ///
    /// tokio's cooperative budget: tokio gives each poll of one of its
    /// tasks 128 units, which its channels, sockets, timers and join
    /// handles spend; once they are spent those return `Pending`, even when
    /// ready, until the host's next turn. All the tasks of one turn run
    /// inside one host poll of this future. Without the cargo feature
    /// `tokio` they spend that poll's budget together: in a turn of tasks
    /// that receive 4 ready messages each, the first 32 finish and the
    /// others are refused until a later host poll (`tests/coop.rs`). **A
    /// tokio user turns the feature on.** With it each task poll has a
    /// budget of its own, as on a tokio `LocalSet`: the budget the host
    /// poll has when it begins, less one unit (127 when this future is a
    /// tokio task's or `block_on`'s own future, as in the example below),
    /// whatever the wrapped future and the turn's other tasks spent; the
    /// wrapped future runs on that budget too, and the host's budget after
    /// the turn is what the future left. (A `LocalSet` gives 128: tokio's
    /// public API cannot give a budget, only take from the host poll's.) A
    /// host poll whose budget is already spent when it begins gives its
    /// tasks none. With the feature, join handles and `JoinSet` spend the
    /// budget as tokio's do. Without it, wrapping the future in
    /// `tokio::task::coop::unconstrained` lifts the throttling, but no
    /// tokio resource then ever makes a task yield.
    ///
    /// ```
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new().queue((), 1).build().unwrap();
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    /// let out = rt.block_on(ex.run_until(async {
    ///     let h = ex.spawn((), async {
    ///         tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    ///         7
    ///     }).unwrap();
    ///     h.await.unwrap()
    /// }));
    /// assert_eq!(out, 7);
    /// ```
    pub fn run_until<F: Future>(&self, future: F) -> RunUntil<'_, F> {
        RunUntil::new(&self.spawner.core, future)
    }

    /// Runs tasks until none is runnable, then returns the number of polls
    /// made (futures' `LocalPool::run_until_stalled`). Never parks.
    pub fn run_until_stalled(&self) -> u64 {
        drive::run_until_stalled(&self.spawner.core)
    }

    /// A future that completes once no task of the executor is alive
    /// (and no remote spawn waits to become one): awaiting all of its tasks,
    /// as `local.await` does for a tokio `LocalSet`. It drives nothing
    /// itself: drive it with the executor, as the main future of
    /// [`block_on`](Executor::block_on) or [`run_until`](Executor::run_until)
    /// (or part of it). Tasks spawned while it waits are waited for too.
    ///
    /// ```
    /// use std::cell::Cell;
    /// use std::rc::Rc;
    /// use tourbillon::task::yield_now;
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new().queue((), 1).build().unwrap();
    /// let done = Rc::new(Cell::new(0));
    /// for _ in 0..3 {
    ///     let done = done.clone();
    ///     drop(ex.spawn((), async move {
    ///         yield_now().await;
    ///         done.set(done.get() + 1);
    ///     }));
    /// }
    /// // tokio: `rt.block_on(local)`, or `local.await` inside a runtime:
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// rt.block_on(ex.run_until(ex.drained()));
    /// assert_eq!(done.get(), 3);
    /// // Standalone:
    /// ex.block_on(ex.drained());
    /// ```
    pub fn drained(&self) -> Drained<'_> {
        drive::Drained::new(&self.spawner.core)
    }

    /// Shuts the executor down now, as its drop does (the pool's cores,
    /// inside their host's context): drops every unfinished task and every
    /// remote spawn it accepted and has not made a task; returns how many,
    /// per queue in declaration order (empty if it was shut down already).
    pub(crate) fn shut_down(&self) -> Vec<u64> {
        self.spawner.core.shutdown()
    }

    /// A snapshot of the executor's counters and every queue's state.
    pub fn stats(&self) -> ExecutorStats {
        self.spawner.core.stats()
    }

    /// A snapshot of queue `key`.
    pub fn queue_stats(&self, key: K) -> Result<QueueStats, UnknownQueue> {
        Ok(self.spawner.core.queue_stats(self.spawner.index(key)?))
    }

    /// Takes the [timeline](crate::timeline) of the polls recorded since
    /// the executor was built or the timeline was last taken, and starts a
    /// new one (a buffer of the same size); `None` unless
    /// [`Builder::timeline`](crate::Builder::timeline) turned it on. The
    /// timeline's label is the name of the calling thread (the executor's).
    pub fn take_timeline(&self) -> Option<crate::timeline::Timeline> {
        crate::remote::target::Target::take_timeline(&*self.spawner.core)
    }

    /// The declared queue keys, in declaration order.
    pub fn queue_keys(&self) -> &[K] {
        self.spawner.keys.keys()
    }
}

/// An executor spawns as its [`Spawner`] does: `ex.spawn(key, fut)`,
/// `ex.spawn_in_group(..)`, `ex.task(key)` and `ex.set_shares(..)` are the
/// [`Spawner`]'s methods.
impl<K: QueueKey> std::ops::Deref for Executor<K> {
    type Target = Spawner<K>;

    fn deref(&self) -> &Spawner<K> {
        &self.spawner
    }
}

impl<K: QueueKey> Drop for Executor<K> {
    fn drop(&mut self) {
        self.spawner.core.shutdown();
    }
}

impl<K: QueueKey> fmt::Debug for Executor<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Executor")
            .field("queues", &self.spawner.keys.keys())
            .field("live_tasks", &self.spawner.core.tasks.borrow().len())
            .finish()
    }
}

/// A clonable, `!Send` handle that spawns onto any queue of an executor by
/// key; for tasks that spawn onto other queues. After the executor is
/// dropped, spawning gives [`SpawnError::Shutdown`].
pub struct Spawner<K: QueueKey> {
    core: Rc<Core>,
    keys: Arc<KeyMap<K>>,
}

impl<K: QueueKey> Clone for Spawner<K> {
    fn clone(&self) -> Self {
        Self {
            core: self.core.clone(),
            keys: self.keys.clone(),
        }
    }
}

impl<K: QueueKey> Spawner<K> {
    fn index(&self, key: K) -> Result<usize, UnknownQueue> {
        self.keys.get(&key).ok_or_else(|| UnknownQueue::new(&key))
    }

    /// Spawns `future` onto the queue `key`. Works before the executor runs,
    /// while it runs (from its tasks), and between runs.
    pub fn spawn<F>(&self, key: K, future: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        spawn_local(&self.core, self.index(key), None, None, future)
    }

    /// A [`TaskBuilder`] to spawn onto the queue `key` with a name or a
    /// group (an unknown key is reported by its `spawn`).
    pub fn task(&self, key: K) -> TaskBuilder<'_> {
        TaskBuilder::new(&self.core, self.index(key))
    }

    /// Changes the shares (weight) of the queue `key` at run time, from
    /// inside a task or from outside. The queue keeps what it is owed or
    /// owes (its lag) and its relative deadline, scaled to the new weight
    /// (EEVDF's reweight, as Linux's `reweight_entity`): CPU time splits by
    /// the new weights from this instant on, with no burst and no loss.
    ///
    /// ```
    /// use tourbillon::error::SharesError;
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new().queue("fg", 8).queue("bg", 1).build().unwrap();
    /// ex.set_shares("bg", 4).unwrap();
    /// assert_eq!(ex.queue_stats("bg").unwrap().shares, 4);
    /// assert!(matches!(ex.set_shares("bg", 0), Err(SharesError::ZeroShares { .. })));
    /// assert!(matches!(ex.set_shares("nope", 1), Err(SharesError::UnknownQueue(_))));
    /// ```
    pub fn set_shares(&self, key: K, shares: u32) -> Result<(), SharesError> {
        let q = self.index(key)?;
        self.core.set_shares(q, shares)
    }

    /// Spawns `future` onto the queue `key` in the group `group`: a user key
    /// such as a connection, tenant or request id. The tasks of a group share
    /// one account of attained service, which schedulers such as
    /// [`Las`](crate::sched::Las) order by (a task spawned with [`spawn`](Self::spawn)
    /// is a group of its own). The group exists while it has live tasks.
    ///
    /// ```
    /// use tourbillon::sched::Las;
    /// use tourbillon::{Builder, QueueSpec};
    ///
    /// let ex = Builder::new()
    ///     .queue_with("requests", QueueSpec::new(1).scheduler(Las::new()))
    ///     .build()
    ///     .unwrap();
    /// let connection = 17;
    /// let a = ex.spawn_in_group("requests", connection, async { 1 }).unwrap();
    /// let b = ex.spawn_in_group("requests", connection, async { 2 }).unwrap();
    /// ex.block_on(async { assert_eq!(a.await.unwrap() + b.await.unwrap(), 3) });
    /// ```
    pub fn spawn_in_group<F>(
        &self,
        key: K,
        group: u64,
        future: F,
    ) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        spawn_local(&self.core, self.index(key), Some(group), None, future)
    }
}

impl<K: QueueKey> fmt::Debug for Spawner<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawner")
            .field("queues", &self.keys.keys())
            .finish()
    }
}

/// Spawns `future` onto the current task's queue of the running executor,
/// like tokio's `spawn_local`. Called from the main future of `block_on` /
/// `run_until`, which belongs to no queue, it spawns onto the executor's
/// default queue: the first declared one, or the one named by
/// [`Builder::default_queue`](crate::Builder::default_queue).
///
/// # Panics
/// Outside a running tourbillon executor, after it shut down, or when the
/// current queue is quarantined
/// ([`SpawnError::Quarantined`]); use [`try_spawn`] for an error instead.
/// The panic's location is the caller's (`#[track_caller]`, as tokio's
/// `spawn_local`).
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    match try_spawn(future) {
        Ok(h) => h,
        Err(e) => panic!("tourbillon::spawn: {e}"),
    }
}

/// [`spawn`], returning [`SpawnError::NoExecutor`] outside an executor.
pub fn try_spawn<F>(future: F) -> Result<JoinHandle<F::Output>, SpawnError>
where
    F: Future + 'static,
    F::Output: 'static,
{
    context::with_current(move |core| match core {
        Some(core) => spawn_local(core, Ok(current_queue(core)), None, None, future),
        None => Err(SpawnError::NoExecutor),
    })
}

/// The queue the free [`spawn`] spawns onto: the current task's, or the
/// executor's default queue (`Builder::default_queue`) from the main future
/// of `block_on` / `run_until`.
#[inline(always)]
fn current_queue(core: &Core) -> usize {
    core.run
        .current
        .queue
        .get()
        .unwrap_or(core.cfg.default_queue)
}
