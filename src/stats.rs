#![forbid(unsafe_code)]
//! Statistics: exact counters kept by the run loop, returned by value as
//! plain snapshots ([`QueueStats`], [`ExecutorStats`]).

use std::time::Duration;

/// Counters of one queue, updated by the run loop (not sampled: exact).
#[derive(Debug, Default, Clone)]
pub(crate) struct QueueCounters {
    pub(crate) spawned: u64,
    pub(crate) completed: u64,
    pub(crate) cancelled: u64,
    pub(crate) panicked: u64,
    pub(crate) polls: u64,
    pub(crate) runs: u64,
    pub(crate) service_ns: u64,
}

/// A snapshot of one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// The queue's key, as `{:?}` prints it.
    pub name: String,
    /// Its shares (weight).
    pub shares: u32,
    /// The scheduler ordering its tasks (`"RunnableFifo"`, `"custom"`).
    pub scheduler: &'static str,
    /// Tasks spawned onto it.
    pub spawned: u64,
    /// Tasks that returned their output.
    pub completed: u64,
    /// Tasks that ended by `abort()`.
    pub cancelled: u64,
    /// Tasks that panicked.
    pub panicked: u64,
    /// Polls of its tasks.
    pub polls: u64,
    /// Runs (slices) it was given.
    pub runs: u64,
    /// Service received: time measured by the executor's clock while its
    /// tasks ran, including the executor's own per-poll work.
    pub service: Duration,
    /// Task ids held by its scheduler (runnable tasks).
    pub runnable_tasks: usize,
    /// Whether it is in the EEVDF runnable set.
    pub runnable: bool,
    /// EEVDF virtual runtime (virtual ns, wrapping).
    pub vruntime: u64,
    /// EEVDF virtual deadline (virtual ns, wrapping).
    pub deadline: u64,
    /// EEVDF lag in real ns: service owed (positive) or received in excess
    /// (negative). For a queue that is not runnable, the lag it left with.
    pub lag_ns: i64,
}

/// A snapshot of the whole executor.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecutorStats {
    /// Polls of all tasks.
    pub polls: u64,
    /// Runs (a queue given the thread until a boundary).
    pub runs: u64,
    /// Driver turns: how often control went back to `block_on`'s loop or to
    /// the host runtime.
    pub turns: u64,
    /// How often `block_on` parked the thread for lack of work.
    pub parks: u64,
    /// Tasks alive (spawned, not yet ended, or ended with an unread result).
    pub live_tasks: usize,
    /// Keyed groups alive (groups of `spawn_in_group` with a live task).
    pub live_groups: usize,
    /// EEVDF `V`: the weighted average vruntime of the runnable queues.
    pub avg_vruntime: u64,
    /// Per queue, in declaration order.
    pub queues: Vec<QueueStats>,
}
