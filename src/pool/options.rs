#![forbid(unsafe_code)]
//! A pool's options: where the cores' threads run ([`Placement`]), what
//! drives each core's executor ([`Host`]), how
//! [`PoolHandle::spawn`](super::PoolHandle::spawn) picks a core
//! ([`Distribution`]), the executor declaration every core runs
//! ([`MakeExecutor`]) and the largest number of cores ([`MAX_CORES`]).
//! [`PoolBuilder`](super::PoolBuilder) collects them; a core's thread
//! (`core_thread`) follows them.

use std::sync::Arc;

use crate::builder::Builder;

/// Where the cores' threads run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Placement {
    /// One core per CPU of the affinity mask of the thread that builds the
    /// pool, core `i` pinned to the mask's `i`-th CPU
    /// ([`PoolBuilder::cores`](super::PoolBuilder::cores) takes the first `n`).
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

/// The largest number of cores of a pool: 8192, the most CPUs Linux can be
/// built for (`NR_CPUS` of its largest configurations), so a pool with a
/// core per CPU never needs more. [`PoolBuilder::build`](super::PoolBuilder::build) refuses a larger
/// count with [`PoolBuildError::TooManyCores`](super::PoolBuildError::TooManyCores) before it starts a thread.
pub const MAX_CORES: usize = 8192;
