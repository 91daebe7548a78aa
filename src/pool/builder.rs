#![forbid(unsafe_code)]
//! [`PoolBuilder`]: how many cores, where their threads run
//! ([`Placement`]), what drives each core's executor ([`Host`]), how
//! [`PoolHandle::spawn`](super::PoolHandle::spawn) picks a core ([`Distribution`]),
//! and the executor every core declares (the options are in `options`).
//! `build` starts the threads and waits until every core's executor is up
//! (or one failed).

use std::fmt;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use super::core_thread::{self, CoreLink, CoreStart};
use super::error::PoolBuildError;
use super::options::{Distribution, Host, MakeExecutor, Placement};
use super::Pool;
use crate::builder::Builder;
use crate::queue::QueueKey;

/// Builds a [`Pool`]: see [`Pool::builder`].
pub struct PoolBuilder<K: QueueKey> {
    cores: Option<usize>,
    placement: Placement,
    host: Host,
    distribution: Distribution,
    capacity: NonZeroUsize,
    make: Option<MakeExecutor<K>>,
}

/// The default capacity of each core's cross-core queue.
const DEFAULT_CAPACITY: NonZeroUsize = match NonZeroUsize::new(1024) {
    Some(n) => n,
    None => unreachable!(),
};

/// Gives each pool a number, so that a thread knows which pool it is a
/// core of.
static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

impl<K> Pool<K>
where
    K: QueueKey + Send + Sync,
{
    /// A [`PoolBuilder`] (cores, placement, host, the executor of every
    /// core).
    pub fn builder() -> PoolBuilder<K> {
        PoolBuilder::new()
    }
}

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
    /// [`MAX_CORES`](super::MAX_CORES). Default: one per CPU of the affinity mask (with
    /// [`Placement::Unpinned`], of the available parallelism). With
    /// [`Placement::Cpus`] the list gives the number; a different `cores`
    /// is refused. `build` refuses 0 with [`PoolBuildError::NoCores`] and
    /// more than [`MAX_CORES`](super::MAX_CORES) with [`PoolBuildError::TooManyCores`].
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
    /// [`BoundedRemoteSpawner::max_capacity`](crate::remote::BoundedRemoteSpawner::max_capacity)
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
    /// [`MAX_CORES`](super::MAX_CORES), a CPU not in the affinity mask, a pinning failure, an executor declaration that
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
