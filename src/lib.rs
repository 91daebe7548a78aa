#![doc = include_str!("lib.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Every `unsafe fn` and every field of the task vtable has a `# Safety`
// section, and every `unsafe` block of the task core (src/task/) a
// `SAFETY:` comment that names the invariant it relies on: I1 to I6 in
// src/task/raw/mod.rs, S1 to S3 in src/task/slab.rs, C1 and C2 in
// src/task/cache.rs, P1 in src/task/current.rs. `missing_safety_doc`
// checks public `unsafe fn`s only (this crate's are all crate-private).
// `multiple_unsafe_ops_per_block` stays off: a few blocks of the task cell
// and the waker make two or more unsafe operations under one justification.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![warn(clippy::missing_safety_doc)]
#![warn(missing_docs, missing_debug_implementations)]

mod boundary;
mod builder;
pub mod clock;
pub mod config;
#[cfg(feature = "tokio")]
mod coop;
mod eevdf;
mod error;
mod executor;
mod join_set;
pub mod pool;
mod queue;
pub mod remote;
pub mod sched;
pub mod stats;
mod sync;
// The task core (src/task/) is crate-private; the public `task` module
// below re-exports its modules for the crate, so `crate::task::id` and the
// like resolve, next to the public items.
#[path = "task/mod.rs"]
mod task_impl;
pub mod testing;
mod yield_now;

pub use builder::{Builder, PanicPolicy};
pub use error::{BuildError, SharesError, SpawnError, TrySpawnError, UnknownQueue};
pub use executor::drive::{Drained, RunUntil};
pub use executor::queue_handle::QueueHandle;
pub use executor::task_builder::TaskBuilder;
pub use executor::{spawn, try_spawn, Executor, Spawner};
pub use join_set::JoinSet;
pub use pool::{Pool, PoolBuilder};
pub use queue::{QueueKey, QueueSpec};
pub use remote::{BoundedRemoteSpawner, RemoteJoinHandle, RemoteSpawner, SpawnWait};
pub use task_impl::join::{AbortHandle, JoinHandle};
pub use task_impl::join_error::JoinError;
pub use yield_now::yield_now;

pub mod task {
    //! Tasks: their ids, the current task, and cooperative yielding.
    //!
    //! A task is a future spawned onto a queue ([`Executor::spawn`],
    //! [`spawn`](crate::spawn), a [`QueueHandle`](crate::QueueHandle), ...).
    //! Each has a [`TaskId`], unique in the process, a [`TaskKey`] in its
    //! executor and a group ([`GroupId`]): schedulers see keys and groups. [`id`] and [`try_id`] tell which task is being polled
    //! on this thread, as tokio's `task::id` and `task::try_id` do. A task that computes for long between awaits gives
    //! the thread back with [`yield_now`] (always) or [`yield_maybe`] (only
    //! when another task or the host is due; [`should_yield`] is the check).
    //!
    //! [`Executor::spawn`]: crate::Executor::spawn

    pub(crate) use crate::task_impl::*;

    pub use crate::task_impl::current::{id, try_id};
    pub use crate::task_impl::id::{GroupId, TaskId, TaskKey};
    pub use crate::yield_now::{should_yield, yield_maybe, yield_now, YieldNow};
}
