#![forbid(unsafe_code)]
//! Thread-per-core: a [`Pool`] of executors, one per core, each on its
//! own thread (pinned to a CPU, or not), each with the queues its
//! declaration gives it (the same on every core, or chosen by the core's
//! index), each driven by the host its builder chose (standalone, tokio,
//! async-io).
//! Work moves between cores as `Send` closures that build their futures
//! on the target core, so the futures themselves may hold `Rc`s and
//! thread-local state: [`PoolHandle::spawn_on`] (the task's handle),
//! [`PoolHandle::submit_to`] (its output, as Seastar's `submit_to`),
//! [`PoolHandle::spawn`] (a core chosen round-robin or least-loaded). Each core's
//! cross-core queue is bounded: the awaitable forms wait for room, the
//! `try_` forms report a full queue, and a submission can carry a timeout.
//!
//! Two kinds of handle reach the cores. A [`Pool`] owns them: it and its
//! clones keep the cores running, until [`Pool::shutdown`] or until every
//! one of them is dropped (then the cores drop their tasks and end). A
//! [`PoolHandle`] ([`Pool::handle`]) submits and controls as a `Pool`
//! does (a `Pool` derefs to one) but keeps nothing alive, as tokio's
//! `runtime::Handle` does not keep its `Runtime`: the pool's own tasks
//! should capture a `PoolHandle`, since a task that holds a `Pool` keeps
//! every core running until someone calls `shutdown`.
//!
//! Below it is the single executor: each core's cross-core queue is its
//! executor's bounded remote spawner (the inbox, which coalesces the
//! wakes of the executor's thread), and each core's tasks are ordinary
//! tasks of its queues, scheduled by its EEVDF and its schedulers; the pool
//! adds no scheduling of its own. Its files: `options` (placement, host,
//! distribution, the executor declaration, the core limit), `builder`
//! (settings, start), `core_thread` (a core's thread: pinning, host,
//! phases), `control` (the
//! stop signals a core and the pool share), `submit` (the submission
//! futures), `timer` (submission deadlines), `stats`, `shutdown` (the
//! report) and `error`.
//!
//! ```
//! use std::rc::Rc;
//! use std::cell::RefCell;
//! use std::time::Duration;
//! use tourbillon::pool::{Placement, Pool};
//!
//! let pool = Pool::builder()
//!     .cores(2)
//!     .placement(Placement::Unpinned)
//!     .executor(|_core| tourbillon::Builder::new().queue("fg", 8).queue("bg", 1))
//!     .build()
//!     .unwrap();
//! let sum = futures::executor::block_on(async {
//!     let mut sum = 0;
//!     for core in 0..pool.cores() {
//!         // The closure is Send; the future it builds on the core need not be.
//!         sum += pool
//!             .submit_to(core, "fg", move || {
//!                 let local = Rc::new(RefCell::new(core * 10));
//!                 async move { *local.borrow() + 1 }
//!             })
//!             .await
//!             .unwrap();
//!     }
//!     sum
//! });
//! assert_eq!(sum, 1 + 11);
//! let report = pool.shutdown(Duration::from_secs(1)).unwrap();
//! assert!(report.is_clean());
//! ```

mod builder;
mod control;
mod core_thread;
mod error;
mod options;
mod shutdown;
mod stats;
mod submit;
mod timer;

pub use builder::PoolBuilder;
pub use core_thread::current_core;
pub use error::{ControlError, PoolBuildError, ShutdownError, SubmitError, TrySubmitError};
pub use options::{Distribution, Host, Placement, MAX_CORES};
pub use shutdown::{CoreReport, ShutdownReport};
pub use stats::PoolStats;
pub use submit::{PoolSpawn, Submit};

use std::fmt;
use std::future::Future;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use control::{CoreControl, Phase};
use core_thread::{CoreLink, StartedCore};
use submit::{Job, LoadGuard, Tracked};
use timer::Timer;

use crate::boundary;
use crate::error::try_spawn::TrySpawnError;
use crate::queue::QueueKey;
use crate::remote::bounded::BoundedRemoteSpawner;
use crate::remote::launch::Make;
use crate::remote::op::{ExecutorTarget, RemoteOp};
use crate::remote::spawner::RemoteJoinHandle;
use crate::stats::ExecutorStats;
use crate::timeline::Timeline;

/// The owner of a pool of executors, one per core: see the
/// [module](self) docs. A `Send + Sync` handle; clones share the pool,
/// and **each keeps its cores alive**: the cores run until
/// [`shutdown`](Self::shutdown), or until every `Pool` clone is dropped
/// (then the cores drop their tasks and end, unjoined).
///
/// Submission and control ([`spawn_on`](PoolHandle::spawn_on),
/// [`submit_to`](PoolHandle::submit_to), [`stats`](PoolHandle::stats)...)
/// are [`PoolHandle`]'s methods, which a `Pool` derefs to. Tasks, and
/// anything else that should not keep the pool running, hold a
/// [`PoolHandle`] ([`handle`](Self::handle)): a task that holds a `Pool`
/// clone keeps every core running until someone calls `shutdown`.
///
/// Core `i` runs on a thread named `tb-core-{i}` (`tb-core-0`,
/// `tb-core-1`, ...): Linux keeps the first 15 bytes of a thread's name
/// (`comm`, what `perf report --sort comm`, `top -H`, `ps -L` and
/// `/proc/<pid>/task/<tid>/comm` show), and `tb-core-` leaves room for any
/// core index below [`MAX_CORES`] in them, so each core's samples and CPU
/// time can be told apart by name (a longer prefix such as
/// `tourbillon-core-` would be cut to the same 15 bytes on every core).
pub struct Pool<K: QueueKey> {
    handle: PoolHandle<K>,
    owner: Arc<Owner<K>>,
}

impl<K: QueueKey> Clone for Pool<K> {
    fn clone(&self) -> Self {
        Pool {
            handle: self.handle.clone(),
            owner: self.owner.clone(),
        }
    }
}

impl<K: QueueKey> Deref for Pool<K> {
    type Target = PoolHandle<K>;

    fn deref(&self) -> &PoolHandle<K> {
        &self.handle
    }
}

/// A handle to a pool's cores that does not keep them alive, as tokio's
/// `runtime::Handle` does not keep its `Runtime`: submits work to the
/// cores and controls them, from any thread and from the tasks of any
/// core. Get one with [`Pool::handle`]; a [`Pool`] derefs to its own.
/// `Send + Sync`; clones are cheap and share the pool.
///
/// Only [`Pool`] and its clones keep the cores running. Once the pool shuts
/// down, or every `Pool` is dropped, its submissions get
/// [`SubmitError::Shutdown`] ([`TrySubmitError::Shutdown`]) and its control
/// calls [`ControlError::Shutdown`]. It cannot shut the pool down.
///
/// ```
/// use std::time::Duration;
/// use tourbillon::pool::{Placement, Pool};
///
/// let pool = Pool::builder()
///     .cores(2)
///     .placement(Placement::Unpinned)
///     .executor(|_| tourbillon::Builder::new().queue("q", 1))
///     .build()
///     .unwrap();
/// // A task forwards work to the other core through a handle it holds.
/// let handle = pool.handle();
/// let out = futures::executor::block_on(pool.submit_to(0, "q", move || async move {
///     handle.submit_to(1, "q", || async { 7 }).await.unwrap() * 6
/// }));
/// assert_eq!(out.unwrap(), 42);
/// let handle = pool.handle();
/// drop(pool); // the cores end: the handle kept none alive
/// let refused = futures::executor::block_on(handle.submit_to(0, "q", || async {}));
/// assert!(matches!(refused, Err(tourbillon::pool::SubmitError::Shutdown)));
/// ```
pub struct PoolHandle<K: QueueKey> {
    inner: Arc<Inner<K>>,
}

impl<K: QueueKey> Clone for PoolHandle<K> {
    fn clone(&self) -> Self {
        PoolHandle {
            inner: self.inner.clone(),
        }
    }
}

/// What every handle shares: the cores' entries and the submission state.
struct Inner<K: QueueKey> {
    /// The pool's number, which its cores' threads know.
    id: u64,
    cores: Vec<CoreEntry<K>>,
    accepting: AtomicBool,
    next: AtomicUsize,
    distribution: Distribution,
    timer: Arc<Timer>,
}

/// What the owners ([`Pool`] and its clones) share: the cores' threads,
/// until the shutdown joins them. Dropped with the last owner, it stops
/// the cores.
struct Owner<K: QueueKey> {
    inner: Arc<Inner<K>>,
    threads: Mutex<Vec<JoinHandle<CoreReport>>>,
}

/// A submission ready to go: its core and what it carries.
type Ready<'a, K, C> = (&'a CoreEntry<K>, Job<C>);

/// What the pool keeps of one core.
struct CoreEntry<K: QueueKey> {
    spawner: BoundedRemoteSpawner<K>,
    control: Arc<CoreControl>,
    /// Tasks submitted through the pool and not ended.
    load: Arc<AtomicUsize>,
    cpu: Option<usize>,
}

impl<K: QueueKey> Drop for Owner<K> {
    fn drop(&mut self) {
        let threads = self
            .threads
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if !threads.is_empty() {
            // Never shut down: the handles left accept no work, and the
            // cores drop their tasks and end.
            self.inner.accepting.store(false, Ordering::Release);
            for c in &self.inner.cores {
                c.control.advance(Phase::Abort);
            }
        }
    }
}

impl<K: QueueKey> Drop for Inner<K> {
    fn drop(&mut self) {
        self.timer.close();
    }
}

impl<K> Pool<K>
where
    K: QueueKey + Send + Sync,
{
    pub(crate) fn start(
        id: u64,
        links: Vec<CoreLink<K>>,
        started: Vec<StartedCore>,
        distribution: Distribution,
    ) -> Self {
        let mut threads = Vec::with_capacity(started.len());
        let cores = links
            .into_iter()
            .zip(started)
            .map(|(link, s)| {
                threads.push(s.thread);
                CoreEntry {
                    spawner: link.spawner,
                    control: s.control,
                    load: Arc::new(AtomicUsize::new(0)),
                    cpu: s.cpu,
                }
            })
            .collect();
        let inner = Arc::new(Inner {
            id,
            cores,
            accepting: AtomicBool::new(true),
            next: AtomicUsize::new(0),
            distribution,
            timer: Arc::new(Timer::default()),
        });
        Pool {
            handle: PoolHandle {
                inner: inner.clone(),
            },
            owner: Arc::new(Owner {
                inner,
                threads: Mutex::new(threads),
            }),
        }
    }

    /// A [`PoolHandle`] of this pool: it submits and controls as the pool
    /// does, but does not keep the cores alive. Give it (not a `Pool`
    /// clone) to the pool's own tasks.
    pub fn handle(&self) -> PoolHandle<K> {
        self.handle.clone()
    }

    /// Shuts the pool down and joins its threads: the pool accepts no new
    /// work (submissions get [`SubmitError::Shutdown`]); each core lets
    /// its tasks alive finish, for up to `grace`; then the tasks still alive
    /// are dropped (their handles read `Cancelled`). The report says, per
    /// core, whether it drained, what was cancelled, and any panic that
    /// ended it. Blocks the calling thread.
    ///
    /// # Errors
    /// [`ShutdownError::OnPoolCore`] on a thread of this pool (it cannot
    /// join itself), [`ShutdownError::AlreadyShutDown`] after a shutdown
    /// (through this `Pool` or a clone).
    pub fn shutdown(&self, grace: Duration) -> Result<ShutdownReport, ShutdownError> {
        if core_thread::current().is_some_and(|(pool, _)| pool == self.inner.id) {
            return Err(ShutdownError::OnPoolCore);
        }
        let threads = std::mem::take(
            &mut *self
                .owner
                .threads
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if threads.is_empty() {
            return Err(ShutdownError::AlreadyShutDown);
        }
        self.inner.accepting.store(false, Ordering::Release);
        for c in &self.inner.cores {
            c.control.advance(Phase::Drain);
        }
        let now = Instant::now();
        let deadline = now
            .checked_add(grace)
            .unwrap_or(now + Duration::from_secs(86_400));
        for c in &self.inner.cores {
            if !c.control.wait_finished(deadline) {
                c.control.advance(Phase::Abort);
            }
        }
        let cores = threads
            .into_iter()
            .enumerate()
            .map(|(i, t)| match t.join() {
                Ok(report) => report,
                Err(p) => {
                    let report = CoreReport::panicked(i, self.inner.cores[i].cpu, &*p);
                    boundary::drop_payload(p);
                    report
                }
            })
            .collect();
        Ok(ShutdownReport { cores })
    }
}

impl<K> PoolHandle<K>
where
    K: QueueKey + Send + Sync,
{
    /// The number of cores.
    pub fn cores(&self) -> usize {
        self.inner.cores.len()
    }

    /// The CPU core `core` is pinned to (`None`: unpinned, or no such
    /// core).
    pub fn cpu(&self, core: usize) -> Option<usize> {
        self.inner.cores.get(core).and_then(|c| c.cpu)
    }

    /// Tasks submitted through the pool to `core` and not yet ended (what
    /// [`Distribution::LeastLoaded`] compares); `None` for no such core.
    pub fn load(&self, core: usize) -> Option<usize> {
        self.inner
            .cores
            .get(core)
            .map(|c| c.load.load(Ordering::Relaxed))
    }

    fn entry(&self, core: usize) -> Result<&CoreEntry<K>, SubmitError> {
        self.inner.cores.get(core).ok_or(SubmitError::UnknownCore {
            core,
            cores: self.cores(),
        })
    }

    /// Spawns, on core `core`'s queue `key`, the task that `make` builds
    /// there: `make` is `Send` and runs on the core (at the task's first
    /// poll, as part of it); the future it returns need not be `Send`.
    /// Waits while the core's cross-core queue is full. Resolves to the
    /// task's [`RemoteJoinHandle`] (`Send`, awaitable on any thread,
    /// abortable).
    ///
    /// # Errors
    /// [`SubmitError::UnknownCore`], [`SubmitError::UnknownQueue`],
    /// [`SubmitError::Shutdown`] (the pool is shutting down, or the core
    /// ended), [`SubmitError::Timeout`] with
    /// [`timeout`](PoolSpawn::timeout). Each drops `make`, never run.
    pub fn spawn_on<C, Fut>(&self, core: usize, key: K, make: C) -> PoolSpawn<'_, C>
    where
        C: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        let timer = &self.inner.timer;
        match self.job(core, make) {
            Ok((entry, job)) => PoolSpawn::waiting(entry.spawner.wait(key, None, job), timer),
            Err((e, _make)) => PoolSpawn::failed(e, timer),
        }
    }

    /// [`spawn_on`](Self::spawn_on) without waiting.
    ///
    /// # Errors
    /// [`TrySubmitError::Full`] when the core's cross-core queue is full;
    /// the others as [`spawn_on`](Self::spawn_on)'s. Each hands `make`
    /// back, never run.
    pub fn try_spawn_on<C, Fut>(
        &self,
        core: usize,
        key: K,
        make: C,
    ) -> Result<RemoteJoinHandle<Fut::Output>, TrySubmitError<C>>
    where
        C: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        let (entry, job) = self.job(core, make).map_err(|(e, make)| match e {
            SubmitError::UnknownCore { core, cores } => {
                TrySubmitError::UnknownCore { core, cores, make }
            }
            _ => TrySubmitError::Shutdown(make),
        })?;
        entry
            .spawner
            .try_submit(key, None, job)
            .map_err(|e| match e {
                TrySpawnError::Full(j) => TrySubmitError::Full(j.launch.0),
                TrySpawnError::UnknownQueue(q, j) => TrySubmitError::UnknownQueue(q, j.launch.0),
                e => TrySubmitError::Shutdown(e.into_inner().launch.0),
            })
    }

    /// What a submission of `make` to core `core` carries, counted in the
    /// core's load; `make` back with the reason if the core is unknown or
    /// the pool accepts no work.
    fn job<C>(&self, core: usize, make: C) -> Result<Ready<'_, K, C>, (SubmitError, C)> {
        let entry = match self.entry(core) {
            Ok(e) => e,
            Err(e) => return Err((e, make)),
        };
        if !self.inner.accepting.load(Ordering::Acquire) {
            return Err((SubmitError::Shutdown, make));
        }
        let job = Tracked {
            launch: Make(make),
            guard: LoadGuard::new(&entry.load),
        };
        Ok((entry, job))
    }

    /// The core [`spawn`](Self::spawn) would use now.
    fn pick(&self) -> usize {
        let cores = &self.inner.cores;
        match self.inner.distribution {
            Distribution::RoundRobin => {
                self.inner.next.fetch_add(1, Ordering::Relaxed) % cores.len()
            }
            Distribution::LeastLoaded => (0..cores.len())
                .min_by_key(|&i| cores[i].load.load(Ordering::Relaxed))
                .unwrap_or(0),
        }
    }

    /// [`spawn_on`](Self::spawn_on) a core chosen by the pool's
    /// [`Distribution`].
    pub fn spawn<C, Fut>(&self, key: K, make: C) -> PoolSpawn<'_, C>
    where
        C: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        self.spawn_on(self.pick(), key, make)
    }

    /// [`try_spawn_on`](Self::try_spawn_on) a core chosen by the pool's
    /// [`Distribution`].
    pub fn try_spawn<C, Fut>(
        &self,
        key: K,
        make: C,
    ) -> Result<RemoteJoinHandle<Fut::Output>, TrySubmitError<C>>
    where
        C: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        self.try_spawn_on(self.pick(), key, make)
    }

    /// Runs the future that `make` builds on core `core`'s queue `key` and
    /// resolves to its output, as Seastar's `submit_to`: waits for room,
    /// then for the task. The returned future is `Send`; await it on any
    /// thread or in a task of any core (a task of another core waits
    /// without blocking its thread).
    ///
    /// # Errors
    /// As [`spawn_on`](Self::spawn_on)'s, and [`SubmitError::Join`] when
    /// the task panicked or was cancelled; [`SubmitError::Timeout`] with
    /// [`timeout`](Submit::timeout) (a running task is then aborted).
    pub fn submit_to<C, Fut>(&self, core: usize, key: K, make: C) -> Submit<'_, C, Fut::Output>
    where
        C: FnOnce() -> Fut + Send + 'static,
        Fut: Future + 'static,
        Fut::Output: Send + 'static,
    {
        Submit::new(self.spawn_on(core, key, make))
    }

    /// Runs `f` on core `core`'s thread at its next poll boundary, outside
    /// any task; resolves to its result.
    fn call<R, F>(&self, core: usize, f: F) -> impl Future<Output = Result<R, ControlError>> + Send
    where
        R: Send + 'static,
        F: FnOnce(&ExecutorTarget) -> R + Send + 'static,
    {
        let sent = self
            .entry(core)
            .map_err(ControlError::from)
            .and_then(|entry| {
                let (tx, rx) = futures_channel::oneshot::channel();
                let op = RemoteOp::Call(Box::new(move |c: &ExecutorTarget| {
                    let _ = tx.send(f(c));
                }));
                entry
                    .spawner
                    .unbounded()
                    .remote
                    .push_op(op)
                    .map(|()| rx)
                    .map_err(|_| ControlError::Shutdown)
            });
        async move {
            match sent {
                Ok(rx) => rx.await.map_err(|_| ControlError::Shutdown),
                Err(e) => Err(e),
            }
        }
    }

    /// Changes the shares of queue `key` on core `core` (see
    /// [`Spawner::set_shares`](crate::Spawner::set_shares)); applied on
    /// the core at its next poll boundary.
    ///
    /// # Errors
    /// [`ControlError::UnknownCore`], [`ControlError::Shutdown`] (the core
    /// ended), [`ControlError::Shares`] (zero shares, or an unknown key).
    pub async fn set_shares(&self, core: usize, key: K, shares: u32) -> Result<(), ControlError> {
        let q = self
            .entry(core)?
            .spawner
            .unbounded()
            .queue_index(key)
            .map_err(|e| ControlError::Shares(e.into()))?;
        self.call(core, move |c| c.set_shares(q, shares))
            .await?
            .map_err(ControlError::Shares)
    }

    /// [`set_shares`](Self::set_shares) on every core.
    ///
    /// # Errors
    /// The first core's error, after every core was asked.
    pub async fn set_shares_all(&self, key: K, shares: u32) -> Result<(), ControlError> {
        let mut first = Ok(());
        for core in 0..self.cores() {
            let r = self.set_shares(core, key, shares).await;
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// The statistics of every core, each taken on its thread at its next
    /// poll boundary; [`PoolStats::merged`] sums them, queue by queue name.
    pub async fn stats(&self) -> PoolStats {
        let mut cores = Vec::with_capacity(self.cores());
        for core in 0..self.cores() {
            let s: Result<ExecutorStats, _> = self.call(core, |c| c.stats()).await;
            cores.push(s.ok());
        }
        PoolStats { cores }
    }

    /// Takes every core's [timeline](crate::timeline) (on its thread, at
    /// its next poll boundary), in core order: `None` for a core whose
    /// executor has no timeline
    /// ([`Builder::timeline`](crate::Builder::timeline)) or that ended.
    /// Each is labelled with its core's thread name (`tb-core-0`, `tb-core-1`, ...);
    /// [`timeline::write_chrome_json`](crate::timeline::write_chrome_json)
    /// writes them into one trace, a process per core on one time axis.
    ///
    /// ```
    /// use tourbillon::pool::{Placement, Pool};
    ///
    /// let pool = Pool::builder()
    ///     .cores(2)
    ///     .placement(Placement::Unpinned)
    ///     .executor(|_core| tourbillon::Builder::new().queue("q", 1).timeline(1_000))
    ///     .build()
    ///     .unwrap();
    /// futures::executor::block_on(async {
    ///     for core in 0..2 {
    ///         pool.submit_to(core, "q", || async {}).await.unwrap();
    ///     }
    ///     let timelines: Vec<_> = pool.timelines().await.into_iter().flatten().collect();
    ///     assert_eq!(timelines.len(), 2);
    ///     assert_eq!(timelines[1].label(), "tb-core-1");
    ///     let mut json = Vec::new();
    ///     tourbillon::timeline::write_chrome_json(&timelines, &mut json).unwrap();
    /// });
    /// ```
    pub async fn timelines(&self) -> Vec<Option<Timeline>> {
        let mut cores = Vec::with_capacity(self.cores());
        for core in 0..self.cores() {
            let t = self.call(core, |c| c.take_timeline()).await;
            cores.push(t.ok().flatten());
        }
        cores
    }
}

impl<K: QueueKey> fmt::Debug for Pool<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.handle.debug_as("Pool", f)
    }
}

impl<K: QueueKey> fmt::Debug for PoolHandle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.debug_as("PoolHandle", f)
    }
}

impl<K: QueueKey> PoolHandle<K> {
    /// The pool's state, printed under `name`.
    fn debug_as(&self, name: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(name)
            .field("cores", &self.inner.cores.len())
            .field("accepting", &self.inner.accepting.load(Ordering::Relaxed))
            .field("distribution", &self.inner.distribution)
            .finish()
    }
}
