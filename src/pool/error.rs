#![forbid(unsafe_code)]
//! The pool's errors: building it ([`PoolBuildError`]), submitting to a
//! core ([`SubmitError`], [`TrySubmitError`]).

use std::error::Error;
use std::fmt;

use crate::error::{BuildError, SharesError, SpawnError, UnknownQueue};
use crate::task::join_error::JoinError;

/// Why [`PoolBuilder::build`](super::PoolBuilder::build) failed. The
/// threads of the cores that did start are stopped and joined first.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolBuildError {
    /// No executor was declared ([`PoolBuilder::executor`](super::PoolBuilder::executor)).
    NoExecutor,
    /// Zero cores were asked for (or the placement lists no CPU).
    NoCores,
    /// More cores were asked for ([`PoolBuilder::cores`](super::PoolBuilder::cores),
    /// or the length of the [`Placement::Cpus`](super::Placement::Cpus)
    /// list) than a pool may have.
    TooManyCores {
        /// The cores asked for.
        cores: usize,
        /// The most a pool may have, [`MAX_CORES`](super::MAX_CORES).
        max: usize,
    },
    /// [`PoolBuilder::cores`](super::PoolBuilder::cores) differs from the
    /// length of the [`Placement::Cpus`](super::Placement::Cpus) list, or
    /// asks for more cores than [`Placement::EachCpu`](super::Placement::EachCpu) has CPUs.
    CoreCount {
        /// The cores asked for.
        cores: usize,
        /// The CPUs the placement has.
        cpus: usize,
    },
    /// The placement names a CPU that is not online (or does not exist).
    CpuUnavailable {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs online.
        available: Vec<usize>,
    },
    /// Pinning a core's thread to its CPU failed.
    PinFailed {
        /// The core.
        core: usize,
        /// The CPU it was to run on.
        cpu: usize,
    },
    /// The executor declaration of a core was refused.
    Executor {
        /// The core.
        core: usize,
        /// Why its builder refused.
        error: BuildError,
    },
    /// The closure that declares the executors panicked on a core.
    ExecutorPanicked {
        /// The core.
        core: usize,
        /// The panic message, if it was a string.
        message: String,
    },
    /// A core's thread or its host runtime could not be started.
    Thread {
        /// The core.
        core: usize,
        /// The operating system's or the runtime's message.
        message: String,
    },
}

impl fmt::Display for PoolBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolBuildError::NoExecutor => write!(
                f,
                "no executor declared: call PoolBuilder::executor with the queues of every core"
            ),
            PoolBuildError::NoCores => write!(f, "a pool needs at least one core"),
            PoolBuildError::TooManyCores { cores, max } => write!(
                f,
                "{cores} cores asked for, but a pool has at most {max} (MAX_CORES)"
            ),
            PoolBuildError::CoreCount { cores, cpus } => write!(
                f,
                "{cores} cores asked for, but the placement has {cpus} CPUs"
            ),
            PoolBuildError::CpuUnavailable { cpu, available } => write!(
                f,
                "CPU {cpu} is not available: the CPUs online are {available:?}"
            ),
            PoolBuildError::PinFailed { core, cpu } => {
                write!(f, "could not pin core {core}'s thread to CPU {cpu}")
            }
            PoolBuildError::Executor { core, error } => {
                write!(f, "the executor of core {core} was refused: {error}")
            }
            PoolBuildError::ExecutorPanicked { core, message } => write!(
                f,
                "the executor declaration panicked on core {core}: {message}"
            ),
            PoolBuildError::Thread { core, message } => {
                write!(f, "could not start core {core}: {message}")
            }
        }
    }
}

impl Error for PoolBuildError {}

/// Why a submission to a pool core failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum SubmitError {
    /// No core with this index: the pool has `cores` of them.
    UnknownCore {
        /// The index asked for.
        core: usize,
        /// The pool's number of cores.
        cores: usize,
    },
    /// No queue with this key was declared.
    UnknownQueue(UnknownQueue),
    /// The pool is shutting down (it accepts no new work), or the core's
    /// executor has ended (its thread panicked).
    Shutdown,
    /// The submission's timeout passed before it was done: while it waited
    /// for room (the closure is dropped, never run), or while its task ran
    /// (the task is aborted).
    Timeout,
    /// The task ran and ended without an output: it panicked, or it was
    /// cancelled (aborted, or dropped by the shutdown).
    Join(JoinError),
}

impl fmt::Display for SubmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubmitError::UnknownCore { core, cores } => {
                write!(
                    f,
                    "no core {core}: the pool has {cores} (0 to {})",
                    cores - 1
                )
            }
            SubmitError::UnknownQueue(e) => fmt::Display::fmt(e, f),
            SubmitError::Shutdown => write!(f, "the pool core accepts no new work (shut down)"),
            SubmitError::Timeout => write!(f, "the submission timed out"),
            SubmitError::Join(e) => write!(f, "the submitted task failed: {e}"),
        }
    }
}

impl Error for SubmitError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            SubmitError::UnknownQueue(e) => Some(e),
            SubmitError::Join(e) => Some(e),
            _ => None,
        }
    }
}

impl From<SpawnError> for SubmitError {
    fn from(e: SpawnError) -> Self {
        match e {
            SpawnError::UnknownQueue(q) => SubmitError::UnknownQueue(q),
            _ => SubmitError::Shutdown,
        }
    }
}

impl From<UnknownQueue> for SubmitError {
    fn from(e: UnknownQueue) -> Self {
        SubmitError::UnknownQueue(e)
    }
}

/// Why [`PoolHandle::try_spawn_on`](super::PoolHandle::try_spawn_on) did not submit;
/// each variant hands the closure back, never run.
#[non_exhaustive]
pub enum TrySubmitError<C> {
    /// No room: the core's cross-core queue is at its capacity.
    Full(C),
    /// See [`SubmitError::Shutdown`].
    Shutdown(C),
    /// See [`SubmitError::UnknownCore`].
    UnknownCore {
        /// The index asked for.
        core: usize,
        /// The pool's number of cores.
        cores: usize,
        /// The closure.
        make: C,
    },
    /// No queue with this key was declared.
    UnknownQueue(UnknownQueue, C),
}

impl<C> TrySubmitError<C> {
    /// The closure that was not submitted.
    pub fn into_inner(self) -> C {
        match self {
            TrySubmitError::Full(c) | TrySubmitError::Shutdown(c) => c,
            TrySubmitError::UnknownCore { make, .. } => make,
            TrySubmitError::UnknownQueue(_, c) => c,
        }
    }

    /// Whether the core's queue was full (trying again later may succeed).
    pub fn is_full(&self) -> bool {
        matches!(self, TrySubmitError::Full(_))
    }
}

impl<C> fmt::Debug for TrySubmitError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySubmitError::Full(_) => f.write_str("Full(..)"),
            TrySubmitError::Shutdown(_) => f.write_str("Shutdown(..)"),
            TrySubmitError::UnknownCore { core, cores, .. } => f
                .debug_struct("UnknownCore")
                .field("core", core)
                .field("cores", cores)
                .finish_non_exhaustive(),
            TrySubmitError::UnknownQueue(e, _) => {
                f.debug_tuple("UnknownQueue").field(e).field(&"..").finish()
            }
        }
    }
}

impl<C> fmt::Display for TrySubmitError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySubmitError::Full(_) => write!(f, "the core's cross-core queue is full"),
            TrySubmitError::Shutdown(_) => fmt::Display::fmt(&SubmitError::Shutdown, f),
            TrySubmitError::UnknownCore { core, cores, .. } => fmt::Display::fmt(
                &SubmitError::UnknownCore {
                    core: *core,
                    cores: *cores,
                },
                f,
            ),
            TrySubmitError::UnknownQueue(e, _) => fmt::Display::fmt(e, f),
        }
    }
}

impl<C> Error for TrySubmitError<C> {}

/// Why a control call on a pool core ([`PoolHandle::set_shares`](super::PoolHandle::set_shares)) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ControlError {
    /// No core with this index.
    UnknownCore {
        /// The index asked for.
        core: usize,
        /// The pool's number of cores.
        cores: usize,
    },
    /// The core's executor has ended (the pool shut down, or its thread
    /// panicked).
    Shutdown,
    /// The executor refused the change.
    Shares(SharesError),
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ControlError::UnknownCore { core, cores } => fmt::Display::fmt(
                &SubmitError::UnknownCore {
                    core: *core,
                    cores: *cores,
                },
                f,
            ),
            ControlError::Shutdown => write!(f, "the pool core has ended"),
            ControlError::Shares(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl Error for ControlError {}

impl From<SubmitError> for ControlError {
    fn from(e: SubmitError) -> Self {
        match e {
            SubmitError::UnknownCore { core, cores } => ControlError::UnknownCore { core, cores },
            _ => ControlError::Shutdown,
        }
    }
}

/// Why [`Pool::shutdown`](super::Pool::shutdown) did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownError {
    /// Called on one of the pool's own threads, which it would have to
    /// join: shut the pool down from another thread.
    OnPoolCore,
    /// The pool was shut down already (by this handle or a clone).
    AlreadyShutDown,
}

impl fmt::Display for ShutdownError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShutdownError::OnPoolCore => write!(
                f,
                "Pool::shutdown called on one of the pool's own threads, which it would join"
            ),
            ShutdownError::AlreadyShutDown => write!(f, "the pool is already shut down"),
        }
    }
}

impl Error for ShutdownError {}
