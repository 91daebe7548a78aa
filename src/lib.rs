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
pub mod error;
mod executor;
mod join_set;
pub mod pool;
mod queue;
pub mod remote;
pub mod sched;
pub mod stats;
mod sync;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod timeline;
mod yield_now;

pub use crate::builder::Builder;
pub use crate::executor::drive::{Drained, RunUntil};
pub use crate::executor::queue_handle::QueueHandle;
pub use crate::executor::{spawn, try_spawn, Executor, Spawner};
pub use crate::queue::{QueueKey, QueueSpec};

pub mod task {
    //! Tasks: their handles, their ids, the current task, and cooperative
    //! yielding.
    //!
    //! A task is a `!Send` future spawned onto one queue of an executor
    //! (`ex.spawn(key, future)`, [`Spawner::spawn`](crate::Spawner::spawn),
    //! a [`QueueHandle`](crate::QueueHandle), the free [`spawn`](crate::spawn)
    //! onto the current task's queue, or a [`TaskBuilder`] to give it a name
    //! or a group). It runs until its future completes, it panics, or it is
    //! aborted; the executor polls it only when it is woken.
    //!
    //! * **Handles.** A spawn returns a [`JoinHandle`]: awaiting it gives the
    //!   task's output, or a [`JoinError`] if the task panicked or was
    //!   cancelled; dropping it detaches the task. Its [`AbortHandle`]
    //!   (`Send + Sync`) cancels the task from any thread. A [`JoinSet`]
    //!   holds many handles of one output type and gives their results in
    //!   the order the tasks finish.
    //! * **Ids.** Each task has a [`TaskId`], unique in the process (what a
    //!   user sees: [`JoinHandle::id`], [`id`]), a [`TaskKey`] in its
    //!   executor and a group ([`GroupId`]): schedulers see keys and groups.
    //! * **The current task.** [`id`] and [`try_id`] tell which task is
    //!   being polled on this thread, as tokio's `task::id` and
    //!   `task::try_id` do.
    //! * **Yields.** A task that computes for long between awaits gives the
    //!   thread back with [`yield_now`] (always) or [`yield_maybe`] (only
    //!   when another task or the host is due; [`should_yield`] is the
    //!   check).
    //!
    //! For tokio users: `tokio::task::{JoinHandle, AbortHandle, JoinError,
    //! JoinSet, Id, id, try_id, yield_now, Builder}` are, here,
    //! `task::{JoinHandle, AbortHandle, JoinError, JoinSet, TaskId, id,
    //! try_id, yield_now, TaskBuilder}`.
    //!

    // The task core (src/task/): its files are crate-private; its design
    // (reference types, state bits, life cycle, safety) is documented in
    // docs/architecture.md, "The task core".
    pub(crate) mod cache;
    pub(crate) mod current;
    pub(crate) mod group;
    pub(crate) mod harness;
    pub(crate) mod id;
    pub(crate) mod join;
    pub(crate) mod join_error;
    pub(crate) mod raw;
    pub(crate) mod schedule;
    pub(crate) mod slab;
    pub(crate) mod state;
    pub(crate) mod waker;

    pub use self::current::{id, try_id};
    pub use self::id::{GroupId, TaskId, TaskKey};
    pub use self::join::{AbortHandle, JoinHandle};
    pub use self::join_error::JoinError;
    pub use crate::executor::task_builder::TaskBuilder;
    pub use crate::join_set::JoinSet;
    pub use crate::yield_now::{should_yield, yield_maybe, yield_now, YieldNow};
}
