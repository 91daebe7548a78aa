#![forbid(unsafe_code)]
//! A pool's statistics: each core's [`ExecutorStats`], and their sum
//! ([`PoolStats::merged`]).

use crate::stats::{ExecutorStats, QueueStats};

/// The statistics of every core of a pool, taken by
/// [`PoolHandle::stats`](super::PoolHandle::stats): each is one executor's snapshot,
/// taken on its thread at a poll boundary.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Per core, in core order; `None` for a core that has ended (its
    /// thread panicked, or the pool is shutting down).
    pub cores: Vec<Option<ExecutorStats>>,
}

impl PoolStats {
    /// The cores' snapshots summed: counters and histograms add up (the
    /// histograms merge exactly), queues merge by declaration order (every
    /// core declares the same queues). The EEVDF positions (`vruntime`,
    /// `deadline`, `avg_vruntime`) are each core's own and have no sum:
    /// they read 0; `lag_ns` is the sum of the cores' lags, `runnable`
    /// whether the queue is runnable on any core. `None` if no core
    /// answered.
    pub fn merged(&self) -> Option<ExecutorStats> {
        let mut alive = self.cores.iter().flatten();
        let mut sum = alive.next()?.clone();
        sum.avg_vruntime = 0;
        for q in &mut sum.queues {
            q.vruntime = 0;
            q.deadline = 0;
        }
        for s in alive {
            add(&mut sum, s);
        }
        Some(sum)
    }
}

/// Adds `s` into `sum`.
fn add(sum: &mut ExecutorStats, s: &ExecutorStats) {
    sum.polls += s.polls;
    sum.runs += s.runs;
    sum.turns += s.turns;
    sum.parks += s.parks;
    sum.caught_panics += s.caught_panics;
    sum.scheduler_violations += s.scheduler_violations;
    sum.live_tasks += s.live_tasks;
    sum.live_groups += s.live_groups;
    for (q, o) in sum.queues.iter_mut().zip(&s.queues) {
        add_queue(q, o);
    }
}

/// Adds queue `o` into `q`.
fn add_queue(q: &mut QueueStats, o: &QueueStats) {
    q.spawned += o.spawned;
    q.completed += o.completed;
    q.cancelled += o.cancelled;
    q.panicked += o.panicked;
    q.polls += o.polls;
    q.runs += o.runs;
    q.service += o.service;
    q.runnable_tasks += o.runnable_tasks;
    q.runnable |= o.runnable;
    q.lag_ns = q.lag_ns.saturating_add(o.lag_ns);
    q.stalls += o.stalls;
    q.wake_latency.merge(&o.wake_latency);
}
