#![forbid(unsafe_code)]
//! What a pool's shutdown reports: per core, how it ended
//! ([`CoreReport`]), and the whole ([`ShutdownReport`]).

use std::any::Any;
use std::fmt;

use crate::stats::ExecutorStats;

/// How one core ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoreReport {
    /// The core's index.
    pub core: usize,
    /// The CPU it was pinned to (`None`: unpinned).
    pub cpu: Option<usize>,
    /// Every task had ended when the core stopped (within the grace
    /// period): nothing was cancelled.
    pub drained: bool,
    /// Submissions the core accepted and never completed, dropped when the
    /// grace period ended (their join handles read `Cancelled`): the tasks
    /// alive then, and the submissions still waiting to become tasks (in
    /// the core's cross-core queue or its executor's remote backlog).
    pub cancelled: usize,
    /// [`cancelled`](Self::cancelled) by queue: the queue's name (its key,
    /// as `{:?}` prints it) and how many of its submissions and tasks were
    /// dropped unfinished; only queues with any, in declaration order.
    pub cancelled_by_queue: Vec<(String, usize)>,
    /// The message of a panic that ended the core's thread (a task's panic
    /// under [`PanicPolicy::Propagate`](crate::config::PanicPolicy::Propagate), or
    /// one out of the executor's declaration); the other cores ran on.
    pub panic: Option<String>,
    /// The executor's last statistics, taken after its shutdown dropped
    /// what was left (`None` if the thread panicked): no task is alive
    /// then, and each queue's `spawned` equals its `completed + cancelled +
    /// panicked`.
    pub stats: Option<ExecutorStats>,
}

impl CoreReport {
    /// A core whose executor shut down: `cancelled` is what its shutdown
    /// dropped unfinished, per queue in declaration order (the order of
    /// `stats.queues`).
    pub(crate) fn ended(
        core: usize,
        cpu: Option<usize>,
        drained: bool,
        cancelled: &[u64],
        stats: ExecutorStats,
    ) -> Self {
        let cancelled_by_queue: Vec<(String, usize)> = stats
            .queues
            .iter()
            .zip(cancelled)
            .filter(|&(_, &n)| n > 0)
            .map(|(q, &n)| (q.name.clone(), n as usize))
            .collect();
        CoreReport {
            core,
            cpu,
            drained,
            cancelled: cancelled_by_queue.iter().map(|(_, n)| n).sum(),
            cancelled_by_queue,
            panic: None,
            stats: Some(stats),
        }
    }

    /// A core that never came up (the builder reported why).
    pub(crate) fn failed(core: usize, cpu: Option<usize>) -> Self {
        CoreReport {
            core,
            cpu,
            drained: false,
            cancelled: 0,
            cancelled_by_queue: Vec::new(),
            panic: None,
            stats: None,
        }
    }

    pub(crate) fn panicked(core: usize, cpu: Option<usize>, payload: &(dyn Any + Send)) -> Self {
        CoreReport {
            panic: Some(message(payload)),
            ..CoreReport::failed(core, cpu)
        }
    }
}

/// What [`Pool::shutdown`](super::Pool::shutdown) found, core by core.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// One report per core, in core order.
    pub cores: Vec<CoreReport>,
}

impl ShutdownReport {
    /// Submissions cancelled on all cores (each core's
    /// [`CoreReport::cancelled`]).
    pub fn cancelled(&self) -> usize {
        self.cores.iter().map(|c| c.cancelled).sum()
    }

    /// Whether every core drained (no task cancelled, no core panicked).
    pub fn is_clean(&self) -> bool {
        self.cores.iter().all(|c| c.drained && c.panic.is_none())
    }
}

impl fmt::Display for ShutdownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in &self.cores {
            write!(f, "core {}", c.core)?;
            if let Some(cpu) = c.cpu {
                write!(f, " (CPU {cpu})")?;
            }
            match &c.panic {
                Some(m) => writeln!(f, ": panicked: {m}")?,
                None if c.drained => writeln!(f, ": drained")?,
                None => {
                    write!(f, ": {} task(s) cancelled", c.cancelled)?;
                    for (queue, n) in &c.cancelled_by_queue {
                        write!(f, ", {n} on {queue}")?;
                    }
                    writeln!(f)?;
                }
            }
        }
        Ok(())
    }
}

/// A panic payload's message (`&str` or `String`), or a placeholder.
pub(crate) fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}
