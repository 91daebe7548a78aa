#![doc = include_str!("../README.md")]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs, missing_debug_implementations)]

mod boundary;
mod builder;
pub(crate) mod clock;
pub(crate) mod config;
#[cfg(feature = "tokio")]
mod coop;
mod error;
mod executor;
mod join;
mod queue;
mod sched;
mod stats;
mod sync;
mod task;
mod waker;
mod yield_now;

pub use builder::{
    Builder, PanicPolicy, DEFAULT_BASE_SLICE, DEFAULT_HOST_YIELD_INTERVAL, DEFAULT_MAX_POLLS,
    DEFAULT_MIN_RUN,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{BuildError, JoinError, SharesError, SpawnError};
pub use executor::drive::RunUntil;
pub use executor::queue_handle::QueueHandle;
pub use executor::remote::{RemoteJoinHandle, RemoteSpawner};
pub use executor::task_builder::TaskBuilder;
pub use executor::{spawn, try_spawn, Executor, Spawner};
pub use join::JoinHandle;
pub use queue::{QueueKey, QueueSpec, MAX_QUEUES, MAX_SHARES};
pub use sched::{Las, RunnableFifo, Scheduler};
pub use stats::{ExecutorStats, LatencyHistogram, QueueStats, Stall};
pub use task::cache::trim_cell_cache;
pub use task::id::{GroupId, TaskId};
pub use yield_now::{should_yield, yield_maybe, yield_now, YieldNow};
