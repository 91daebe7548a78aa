#![forbid(unsafe_code)]
//! Task queues: their configuration, their runtime state (scheduler,
//! counters) and the key -> index map.

pub(crate) mod handle;

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::rc::Rc;
use std::time::Duration;

use crate::boundary::PanicSink;
use crate::clock::duration_ns;
use crate::executor::eevdf::{Eevdf, Entity};
use crate::sched::{QueueScheduler, RunnableFifo, Scheduler};
use crate::stats::QueueCounters;
use crate::task::id::{GroupId, TaskId};

/// A type that can name a queue: any small copyable key, such as an enum.
///
/// Implemented for every `Copy + Eq + Hash + Debug + 'static` type.
pub trait QueueKey: Copy + Eq + Hash + Debug + 'static {}
impl<T: Copy + Eq + Hash + Debug + 'static> QueueKey for T {}

/// The largest number of shares of one queue. Shares are relative: what
/// matters is `shares(i) / sum(shares(j))` over the queues that have
/// runnable tasks.
pub const MAX_SHARES: u32 = 10_000;

/// The largest number of queues of one executor. Picking a queue scans the
/// runnable ones (exact and cheap at this size).
pub const MAX_QUEUES: usize = 256;

/// How a queue is declared: its shares, its scheduler, its slice.
///
/// ```
/// use std::time::Duration;
/// use tourbillon::{QueueSpec, RunnableFifo};
///
/// let spec = QueueSpec::new(8)
///     .scheduler(RunnableFifo::new())
///     .slice(Duration::from_micros(250));
/// # let _ = spec;
/// ```
pub struct QueueSpec {
    pub(crate) shares: u32,
    pub(crate) scheduler: QueueScheduler,
    pub(crate) slice: Option<Duration>,
    pub(crate) latency: Option<Duration>,
}

impl QueueSpec {
    /// A queue with `shares` (1 to [`MAX_SHARES`]) and a [`RunnableFifo`].
    ///
    /// When several queues have runnable tasks, queue `i` receives about
    /// `shares(i) / sum(shares)` of the thread; an idle queue costs nothing
    /// and a lone runnable queue gets all of it.
    pub fn new(shares: u32) -> Self {
        Self {
            shares,
            scheduler: QueueScheduler::Fifo(RunnableFifo::new()),
            slice: None,
            latency: None,
        }
    }

    /// The scheduler that orders this queue's runnable tasks.
    pub fn scheduler<S: Scheduler>(mut self, scheduler: S) -> Self {
        self.scheduler = QueueScheduler::from_scheduler(scheduler);
        self
    }

    /// This queue's slice (its EEVDF request): how long it runs before the
    /// executor considers switching queues. A shorter slice gives an earlier
    /// deadline (lower wake-up latency) without changing the share. Default:
    /// the builder's [`base_slice`](crate::Builder::base_slice).
    pub fn slice(mut self, slice: Duration) -> Self {
        self.slice = Some(slice);
        self
    }

    /// This queue's latency requirement for the host's I/O and timers
    /// (glommio's `Latency::Matters`): while the queue has no runnable task
    /// (its tasks wait for a socket, a timer or another wake from the host),
    /// the executor returns to its host at least every `latency`, so that a
    /// readiness the host discovers for it is seen within about `latency`
    /// plus the poll in flight. Once the queue is runnable, EEVDF decides
    /// when it runs (a queue with more shares preempts at the next poll
    /// boundary).
    ///
    /// Without it, a waiting queue's I/O is discovered at the builder's
    /// [`host_yield_interval`](crate::Builder::host_yield_interval)
    /// (200 us by default) while other queues keep the thread busy.
    ///
    /// How to choose it: a request that arrives while other queues run
    /// waits up to about `latency` plus the poll in flight before its task
    /// is polled, so pick the delay a request can afford, and keep
    /// background polls short ([`yield_maybe`](crate::yield_maybe)) if
    /// they are longer than it. The README's results (Sockets, Host
    /// interval) give what 50 us did to a server's p99 and what a host
    /// turn costs, with their commands, machine and date. Set it
    /// on the queue that serves requests, not on background queues: each
    /// host turn is a poll of the host's driver (an `epoll_wait` with a
    /// zero timeout under tokio), which background work pays for only
    /// while a latency-sensitive queue waits; raise the builder's interval
    /// to give background work fewer host turns the rest of the time. It
    /// only matters nested in a host runtime
    /// ([`run_until`](crate::Executor::run_until)); it must be between
    /// 1 us and 1 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tourbillon::{Builder, QueueSpec};
    ///
    /// let ex = Builder::new()
    ///     .queue_with("requests", QueueSpec::new(99).latency(Duration::from_micros(50)))
    ///     .queue("compaction", 1)
    ///     .build()
    ///     .unwrap();
    /// # let _ = ex;
    /// ```
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = Some(latency);
        self
    }
}

impl std::fmt::Debug for QueueSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSpec")
            .field("shares", &self.shares)
            .field("scheduler", &self.scheduler.kind())
            .field("slice", &self.slice)
            .field("latency", &self.latency)
            .finish()
    }
}

/// One queue at run time.
pub(crate) struct QueueState {
    pub(crate) name: String,
    pub(crate) shares: u32,
    pub(crate) sched: QueueScheduler,
    pub(crate) timing: bool,
    pub(crate) counters: QueueCounters,
    /// Running estimate of the cost of one poll, ns (amortised clock reads).
    pub(crate) poll_cost_ns: u64,
    /// Waiting for EEVDF placement at the next boundary.
    pub(crate) activation_pending: bool,
    /// [`QueueSpec::latency`], ns.
    pub(crate) latency_ns: Option<u64>,
}

/// Every queue of an executor plus the EEVDF table, indexed alike.
pub(crate) struct Queues {
    pub(crate) list: Vec<QueueState>,
    pub(crate) eevdf: Eevdf,
    /// Queues that went from empty to non-empty since the last boundary.
    pub(crate) pending: Vec<usize>,
    /// Whether any queue has a latency requirement ([`QueueSpec::latency`]).
    pub(crate) any_latency: bool,
}

impl Queues {
    pub(crate) fn new(
        specs: Vec<(String, QueueSpec)>,
        base_slice: Duration,
        sink: &Rc<PanicSink>,
    ) -> Self {
        let mut list = Vec::with_capacity(specs.len());
        let mut ents = Vec::with_capacity(specs.len());
        for (name, mut spec) in specs {
            spec.scheduler.attach(sink, &name);
            let slice = duration_ns(spec.slice.unwrap_or(base_slice));
            ents.push(Entity::new(spec.shares as u64, slice));
            list.push(QueueState {
                name,
                shares: spec.shares,
                timing: spec.scheduler.wants_timing(),
                sched: spec.scheduler,
                counters: QueueCounters::default(),
                poll_cost_ns: 0,
                activation_pending: false,
                latency_ns: spec.latency.map(duration_ns),
            });
        }
        Self {
            any_latency: list.iter().any(|q| q.latency_ns.is_some()),
            list,
            eevdf: Eevdf::new(ents),
            pending: Vec::new(),
        }
    }

    /// The host-yield interval while the queues stand as they are: the
    /// shortest latency requirement of a queue that waits (is not
    /// runnable), or `default` (the builder's interval) if shorter or if
    /// none waits.
    pub(crate) fn host_interval_ns(&self, default: u64) -> u64 {
        if !self.any_latency {
            return default;
        }
        self.list
            .iter()
            .zip(&self.eevdf.ents)
            .filter(|(_, e)| !e.runnable)
            .filter_map(|(q, _)| q.latency_ns)
            .fold(default, u64::min)
    }

    /// Pushes a runnable task; returns `true` if its queue just became
    /// non-empty and awaits placement.
    #[inline(always)]
    pub(crate) fn push(&mut self, q: usize, task: TaskId, group: GroupId) -> bool {
        let qs = &mut self.list[q];
        qs.sched.push(task, group);
        if qs.activation_pending || self.eevdf.ents[q].runnable {
            return false;
        }
        qs.activation_pending = true;
        self.pending.push(q);
        true
    }
}

impl Queues {
    /// The last task of `group` ended: a task's own group concerns its
    /// queue's scheduler only; a keyed group may have had tasks on every
    /// queue, so every scheduler is told.
    pub(crate) fn group_ended(&mut self, queue: usize, group: GroupId) {
        if group.is_task_group() {
            self.list[queue].sched.group_ended(group);
        } else {
            for st in &mut self.list {
                st.sched.group_ended(group);
            }
        }
    }
}

/// Maps queue keys to queue indices: a linear scan for a few queues (faster
/// than hashing), a hash map beyond.
pub(crate) struct KeyMap<K> {
    keys: Vec<K>,
    map: Option<HashMap<K, usize>>,
}

const LINEAR_SCAN_MAX: usize = 8;

impl<K: QueueKey> KeyMap<K> {
    pub(crate) fn new(keys: Vec<K>) -> Self {
        let map = (keys.len() > LINEAR_SCAN_MAX)
            .then(|| keys.iter().enumerate().map(|(i, k)| (*k, i)).collect());
        Self { keys, map }
    }

    #[inline]
    pub(crate) fn get(&self, key: &K) -> Option<usize> {
        match &self.map {
            Some(m) => m.get(key).copied(),
            None => self.keys.iter().position(|k| k == key),
        }
    }

    pub(crate) fn keys(&self) -> &[K] {
        &self.keys
    }
}
