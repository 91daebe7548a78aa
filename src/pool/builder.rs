#![forbid(unsafe_code)]
//! [`PoolBuilder`]: how many cores, where their threads run
//! ([`Placement`]), what drives each core's executor ([`Host`]), how
//! [`PoolHandle::spawn`](super::PoolHandle::spawn) picks a core ([`Distribution`]),
//! and the executor every core declares. `build` starts the threads and
//! waits until every core's executor is up (or one failed).

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use super::core_thread::{self, CoreLink, CoreStart};
use super::error::PoolBuildError;
use super::Pool;
use crate::builder::Builder;
use crate::queue::QueueKey;

/// Where the cores' threads run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Placement {
    /// One core per CPU of the affinity mask of the thread that builds the
    /// pool, core `i` pinned to the mask's `i`-th CPU
    /// ([`PoolBuilder::cores`] takes the first `n`).
    #[default]
    EachCpu,
    /// Core `i` pinned to the `i`-th CPU of the list (CPU numbers as the
    /// operating system counts them; any CPU online, whatever the affinity
    /// of the thread that builds the pool); the list's length is the
    /// number of cores.
    Cpus(Vec<usize>),
    /// Threads not pinned: the operating system moves them at will.
    Unpinned,
}

/// What drives each core's executor on its thread. Every core gets a host
/// of its own.
///
/// `Tokio` and `AsyncIo` exist only with the crate's cargo features of the
/// same names (`tokio`, `async-io`); without them, `Host::Tokio` is error
/// E0599 ("no variant named `Tokio`"): enable the feature, e.g.
/// `tourbillon = { path = "../tourbillon", features = ["tokio"] }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Host {
    /// The executor alone ([`Executor::block_on`](crate::Executor::block_on)):
    /// the thread parks when no task is runnable.
    #[default]
    Standalone,
    /// A tokio `current_thread` runtime with its I/O and time drivers
    /// enabled (`enable_all`), driving the executor with
    /// [`Executor::run_until`](crate::Executor::run_until): tokio sockets,
    /// timers and `spawn_blocking` work in the core's tasks. With the cargo
    /// feature `tokio`.
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    Tokio,
    /// async-io's reactor (smol's): `async_io::block_on` drives the
    /// executor; `async_io::Async` sockets and `Timer`s work in the core's
    /// tasks. With the cargo feature `async-io`.
    #[cfg(feature = "async-io")]
    #[cfg_attr(docsrs, doc(cfg(feature = "async-io")))]
    AsyncIo,
}

/// How [`PoolHandle::spawn`](super::PoolHandle::spawn) chooses a core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Distribution {
    /// Each core in turn.
    #[default]
    RoundRobin,
    /// The core with the fewest tasks submitted through the pool and not
    /// yet ended (ties: the lowest index).
    LeastLoaded,
}

/// The executor declaration run on each core's thread, given the core's
/// index.
pub(crate) type MakeExecutor<K> = Arc<dyn Fn(usize) -> Builder<K> + Send + Sync>;

/// Builds a [`Pool`]: see [`Pool::builder`].
pub struct PoolBuilder<K: QueueKey> {
    cores: Option<usize>,
    placement: Placement,
    host: Host,
    distribution: Distribution,
    capacity: NonZeroUsize,
    make: Option<MakeExecutor<K>>,
}

/// The largest number of cores of a pool: 8192, the most CPUs Linux can be
/// built for (`NR_CPUS` of its largest configurations), so a pool with a
/// core per CPU never needs more. [`PoolBuilder::build`] refuses a larger
/// count with [`PoolBuildError::TooManyCores`] before it starts a thread.
pub const MAX_CORES: usize = 8192;

/// The default capacity of each core's cross-core queue.
const DEFAULT_CAPACITY: NonZeroUsize = match NonZeroUsize::new(1024) {
    Some(n) => n,
    None => unreachable!(),
};

/// Gives each pool a number, so that a thread knows which pool it is a
/// core of.
static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

impl<K> PoolBuilder<K>
where
    K: QueueKey + Send + Sync,
{
    pub(crate) fn new() -> Self {
        PoolBuilder {
            cores: None,
            placement: Placement::default(),
            host: Host::default(),
            distribution: Distribution::default(),
            capacity: DEFAULT_CAPACITY,
            make: None,
        }
    }

    /// The number of cores (threads, each with its executor), from 1 to
    /// [`MAX_CORES`]. Default: one per CPU of the affinity mask (with
    /// [`Placement::Unpinned`], of the available parallelism). With
    /// [`Placement::Cpus`] the list gives the number; a different `cores`
    /// is refused. `build` refuses 0 with [`PoolBuildError::NoCores`] and
    /// more than [`MAX_CORES`] with [`PoolBuildError::TooManyCores`].
    pub fn cores(mut self, n: usize) -> Self {
        self.cores = Some(n);
        self
    }

    /// Where the threads run (default [`Placement::EachCpu`]).
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = placement;
        self
    }

    /// What drives each executor (default [`Host::Standalone`]).
    pub fn host(mut self, host: Host) -> Self {
        self.host = host;
        self
    }

    /// How [`PoolHandle::spawn`](super::PoolHandle::spawn) picks a core (default
    /// [`Distribution::RoundRobin`]).
    pub fn distribution(mut self, distribution: Distribution) -> Self {
        self.distribution = distribution;
        self
    }

    /// The capacity of each core's cross-core queue (default 1024): how
    /// many tasks submitted to the core may wait for their first poll.
    /// Beyond it the awaitable submissions wait and the `try_` ones report
    /// [`TrySubmitError::Full`](super::TrySubmitError::Full). Any capacity
    /// is accepted, as
    /// [`BoundedRemoteSpawner::max_capacity`](crate::BoundedRemoteSpawner::max_capacity)
    /// says (one above `isize::MAX` is never reached: no bound).
    pub fn queue_capacity(mut self, capacity: NonZeroUsize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The executor of every core: `declare` runs on each core's thread
    /// with the core's index and returns its [`Builder`] (queues, shares,
    /// schedulers, slices, latency settings, panic policy). The pool builds
    /// it there, so clocks and schedulers need not be `Send`. Required:
    /// without it `build` returns [`PoolBuildError::NoExecutor`].
    pub fn executor<F>(mut self, declare: F) -> Self
    where
        F: Fn(usize) -> Builder<K> + Send + Sync + 'static,
    {
        self.make = Some(Arc::new(declare));
        self
    }

    /// Starts the cores and waits until each executor is up.
    ///
    /// # Errors
    /// [`PoolBuildError`]: no executor declared, no cores or more than
    /// [`MAX_CORES`], a CPU not in the affinity mask, a pinning failure, an executor declaration that
    /// was refused or panicked, a thread or host that could not start. The
    /// cores that started are stopped and joined before it returns.
    pub fn build(self) -> Result<Pool<K>, PoolBuildError> {
        let make = self.make.ok_or(PoolBuildError::NoExecutor)?;
        let cpus = core_thread::plan(self.cores, &self.placement)?;
        let pool_id = NEXT_POOL.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        let mut started = Vec::with_capacity(cpus.len());
        for (index, cpu) in cpus.iter().enumerate() {
            let start = CoreStart {
                pool: pool_id,
                index,
                cpu: *cpu,
                host: self.host,
                make: make.clone(),
                capacity: self.capacity,
                ready: tx.clone(),
            };
            match core_thread::spawn(start) {
                Ok(core) => started.push(core),
                Err(message) => {
                    let e = PoolBuildError::Thread {
                        core: index,
                        message,
                    };
                    return Err(core_thread::abandon(started, e));
                }
            }
        }
        drop(tx);
        let mut links: Vec<Option<CoreLink<K>>> = (0..cpus.len()).map(|_| None).collect();
        for _ in 0..cpus.len() {
            match rx.recv() {
                Ok((i, Ok(link))) => links[i] = Some(link),
                Ok((_, Err(e))) => return Err(core_thread::abandon(started, e)),
                Err(_) => {
                    let e = PoolBuildError::Thread {
                        core: links.iter().position(Option::is_none).unwrap_or(0),
                        message: "the core's thread ended before its executor was up".into(),
                    };
                    return Err(core_thread::abandon(started, e));
                }
            }
        }
        let links = links
            .into_iter()
            .map(|l| l.expect("every core answered"))
            .collect();
        Ok(Pool::start(pool_id, links, started, self.distribution))
    }
}

impl<K: QueueKey> fmt::Debug for PoolBuilder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBuilder")
            .field("cores", &self.cores)
            .field("placement", &self.placement)
            .field("host", &self.host)
            .field("distribution", &self.distribution)
            .field("queue_capacity", &self.capacity)
            .field("executor", &self.make.is_some())
            .finish()
    }
}
