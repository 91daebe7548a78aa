#![forbid(unsafe_code)]
//! A pool's statistics: each core's [`ExecutorStats`], and their sum
//! ([`PoolStats::merged`]), which matches the cores' queues by name.

use std::collections::HashMap;

use crate::stats::{ExecutorStats, QueueStats};

/// The statistics of every core of a pool, taken by
/// [`PoolHandle::stats`](super::PoolHandle::stats): each is one executor's
/// snapshot, taken on its thread at a poll boundary. Each core lists the
/// queues its own declaration made
/// ([`PoolBuilder::executor`](super::PoolBuilder::executor) is given the
/// core's index, so cores may declare different queues, or the same ones in
/// another order); [`merged`](Self::merged) matches them by name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Per core, in core order; `None` for a core that has ended (its
    /// thread panicked, or the pool is shutting down).
    pub cores: Vec<Option<ExecutorStats>>,
}

/// The [`QueueStats::scheduler`] of a merged queue whose cores order it
/// with different schedulers.
const MIXED_SCHEDULERS: &str = "mixed";

impl PoolStats {
    /// The snapshots of the cores that answered, summed into one. `None`
    /// if no core answered.
    ///
    /// The executor's counters (`polls`, `runs`, `turns`, `parks`,
    /// `caught_panics`, `scheduler_violations`, `live_tasks`,
    /// `live_groups`) are the sums of the cores'. `avg_vruntime` is each
    /// core's own EEVDF position and has no sum: it reads 0.
    ///
    /// Queues are matched by key, that is by [`QueueStats::name`], whatever
    /// their index on each core. `queues` is the union of the cores'
    /// queues, in order of first appearance: core 0's queues in its
    /// declaration order, then the queues of core 1 that core 0 does not
    /// declare, in core 1's order, and so on. Each merged queue sums, over
    /// the cores that declare it, every counter (`spawned`, `completed`,
    /// `cancelled`, `panicked`, `polls`, `runs`, `service`,
    /// `runnable_tasks`, `remote_waiting`, `stalls`), `lag_ns` (saturating)
    /// and its `wake_latency` histogram (merged exactly); `runnable` says
    /// whether it is runnable on any core. The fields that have no sum:
    ///
    /// * `shares`: the cores' shares when they all agree, otherwise 0 (a
    ///   value no queue has: [`Spawner::set_shares`](crate::Spawner::set_shares)
    ///   refuses it);
    /// * `scheduler`: the cores' scheduler kind when they all agree,
    ///   otherwise `"mixed"`;
    /// * `vruntime` and `deadline`: each core's own EEVDF position, 0.
    ///
    /// Two queues of one core whose keys print the same name are matched,
    /// in order, to the first, second, ... queue of that name.
    ///
    /// ```
    /// # use tourbillon::pool::{Placement, Pool};
    /// # use tourbillon::Builder;
    /// let pool = Pool::builder()
    ///     .cores(2)
    ///     .placement(Placement::Unpinned)
    ///     .executor(|core| match core {
    ///         0 => Builder::new().queue("a", 1),
    ///         _ => Builder::new().queue("b", 1).queue("a", 1),
    ///     })
    ///     .build()
    ///     .unwrap();
    /// futures::executor::block_on(async {
    ///     pool.submit_to(0, "a", || async {}).await.unwrap();
    ///     pool.submit_to(1, "a", || async {}).await.unwrap();
    ///     pool.submit_to(1, "b", || async {}).await.unwrap();
    /// });
    /// let merged = futures::executor::block_on(pool.stats()).merged().unwrap();
    /// let completed: Vec<_> = merged
    ///     .queues
    ///     .iter()
    ///     .map(|q| (q.name.as_str(), q.completed))
    ///     .collect();
    /// assert_eq!(completed, [("\"a\"", 2), ("\"b\"", 1)]);
    /// pool.shutdown(std::time::Duration::from_secs(1)).unwrap();
    /// ```
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

/// Adds `s` into `sum`: its queues into the same-named ones of `sum`, the
/// queues `sum` does not have yet appended.
fn add(sum: &mut ExecutorStats, s: &ExecutorStats) {
    sum.polls += s.polls;
    sum.runs += s.runs;
    sum.turns += s.turns;
    sum.parks += s.parks;
    sum.caught_panics += s.caught_panics;
    sum.scheduler_violations += s.scheduler_violations;
    sum.live_tasks += s.live_tasks;
    sum.live_groups += s.live_groups;
    // The indices in `sum` of each name, in order, and how many of them
    // `s`'s queues have matched so far.
    let mut by_name: HashMap<String, (Vec<usize>, usize)> = HashMap::new();
    for (i, q) in sum.queues.iter().enumerate() {
        by_name.entry(q.name.clone()).or_default().0.push(i);
    }
    for o in &s.queues {
        let (at, used) = by_name.entry(o.name.clone()).or_default();
        match at.get(*used) {
            Some(&i) => add_queue(&mut sum.queues[i], o),
            None => {
                let mut q = o.clone();
                q.vruntime = 0;
                q.deadline = 0;
                sum.queues.push(q);
            }
        }
        *used += 1;
    }
}

/// Adds queue `o` into `q`, the same queue on another core.
fn add_queue(q: &mut QueueStats, o: &QueueStats) {
    if q.shares != o.shares {
        q.shares = 0;
    }
    if q.scheduler != o.scheduler {
        q.scheduler = MIXED_SCHEDULERS;
    }
    q.spawned += o.spawned;
    q.completed += o.completed;
    q.cancelled += o.cancelled;
    q.panicked += o.panicked;
    q.polls += o.polls;
    q.runs += o.runs;
    q.service += o.service;
    q.runnable_tasks += o.runnable_tasks;
    q.remote_waiting += o.remote_waiting;
    q.runnable |= o.runnable;
    q.lag_ns = q.lag_ns.saturating_add(o.lag_ns);
    q.stalls += o.stalls;
    q.wake_latency.merge(&o.wake_latency);
}
