#![forbid(unsafe_code)]
//! `Builder`: declare the queues and tune the executor; `build()` validates
//! and assembles the executor (its `Config`, queues and `Core`). The
//! builder depends on the executor, never the reverse: the executor reads
//! only `crate::config`.

use std::any::TypeId;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use crate::boundary::PanicSink;
use crate::clock::{duration_ns, Clock, ExecutorClock, ManualClock, SystemClock};
use crate::config::{
    Config, PanicPolicy, DEFAULT_BASE_SLICE, DEFAULT_HOST_YIELD_INTERVAL, DEFAULT_MAX_POLLS,
    DEFAULT_MIN_RUN, MAX_QUEUES, MAX_SHARES,
};
use crate::error::BuildError;
use crate::executor::core::Core;
use crate::executor::queues::Queues;
use crate::executor::Executor;
use crate::queue::{KeyMap, QueueKey, QueueSpec};
use crate::stats::{Stall, StallReport};

/// Builds an [`Executor`]: its queues (key, shares, scheduler) and options.
///
/// ```
/// use tourbillon::sched::RunnableFifo;
/// use tourbillon::{Builder, QueueSpec};
///
/// #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
/// enum Q { Foreground, Background }
///
/// let ex = Builder::new()
///     .queue(Q::Foreground, 8)
///     .queue_with(Q::Background, QueueSpec::new(1).scheduler(RunnableFifo::new()))
///     .build()
///     .unwrap();
/// let fg = ex.spawn(Q::Foreground, async { "request" }).unwrap();
/// let bg = ex.spawn(Q::Background, async { "compaction" }).unwrap();
/// ex.block_on(async {
///     assert_eq!(fg.await.unwrap(), "request");
///     assert_eq!(bg.await.unwrap(), "compaction");
/// });
/// ```
pub struct Builder<K> {
    queues: Vec<(K, QueueSpec)>,
    base_slice: Duration,
    max_polls: u32,
    host_yield_interval: Duration,
    preemption: bool,
    min_run: Duration,
    panic_policy: PanicPolicy,
    clock: Option<ExecutorClock>,
    /// The clock set by [`Builder::clock`] is a [`ManualClock`].
    manual_clock: bool,
    pub(crate) read_clock_every_poll: Option<bool>,
    pub(crate) general_pick: bool,
    latency: bool,
    stall: Option<(Duration, StallReport)>,
    timeline: usize,
    default_queue: Option<K>,
}

impl<K: QueueKey> Default for Builder<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: QueueKey> Builder<K> {
    /// A builder with no queue and the default options.
    pub fn new() -> Self {
        Self {
            queues: Vec::new(),
            base_slice: DEFAULT_BASE_SLICE,
            max_polls: DEFAULT_MAX_POLLS,
            host_yield_interval: DEFAULT_HOST_YIELD_INTERVAL,
            preemption: true,
            min_run: DEFAULT_MIN_RUN,
            panic_policy: PanicPolicy::Catch,
            clock: None,
            manual_clock: false,
            read_clock_every_poll: None,
            general_pick: false,
            latency: false,
            stall: None,
            timeline: 0,
            default_queue: None,
        }
    }

    /// Records, per queue, the delay from the instant a task becomes
    /// runnable (spawned, woken, yielded) to the start of its next poll, in
    /// a [`LatencyHistogram`](crate::stats::LatencyHistogram) of
    /// [`QueueStats::wake_latency`](crate::stats::QueueStats::wake_latency).
    /// Default off. The delay ends at the clock reading that starts the
    /// poll, and starts at a reading the executor has already taken, so
    /// that neither a spawn nor a wake reads the clock:
    ///
    /// * spawned or woken inside a task's poll (by the task, by a waker it
    ///   calls): the start of that poll, so the delay includes the rest of
    ///   that poll (at most its duration, which the
    ///   [stall detector](Self::stall_detector) bounds);
    /// * yielded, or woken during its own poll: the end of that poll;
    /// * spawned or woken by the executor between polls (a wake or a spawn
    ///   from another thread, taken from its inbox at a poll boundary): the
    ///   end of the poll before (a clock read of its own before a turn's
    ///   first poll);
    /// * spawned or woken by the main future of
    ///   [`block_on`](crate::Executor::block_on) or
    ///   [`run_until`](crate::Executor::run_until): one clock reading,
    ///   taken at the first spawn or wake of that poll of the main future;
    /// * anywhere else (before the executor runs, or by the host's code
    ///   between two polls of `run_until`): a clock read at the spawn or
    ///   the wake.
    ///
    /// Cost: the clock read per poll that starts it (shared with the
    /// [stall detector](Self::stall_detector) and the
    /// [timeline](Self::timeline)), a read of the task's stamp before each
    /// poll, and after it the record (the bucket by leading zeros and
    /// shifts, an increment, the sum, minimum and maximum: no borrow, no
    /// division, no allocation) and the new stamp of a task runnable
    /// again; the buckets (4 KiB per queue) are allocated with the
    /// executor. On the headline workload of near-empty polls (50,000
    /// tasks x 5 yields on one `RunnableFifo` queue), `valgrind
    /// --tool=callgrind` counts 2,016 instructions per task with the
    /// histograms and a stall detector, 1,713 with a clock read per poll
    /// alone (a stall detector) and 1,290 without either
    /// (`overhead_profile observe 3`, `observe 3 5 clock` and `3 5 1
    /// fresh`, `--toggle-collect=overhead_profile::workload`, medians of 3
    /// runs: `docs/profiling/callgrind_table.sh --repeats 3`; 2-vCPU VM, `Intel(R) Xeon(R) Processor`,
    /// Linux 6.18.44, rustc 1.95.0, 2026-11-29). Polls that do real work
    /// make the share smaller.
    ///
    /// ```
    /// use tourbillon::task::yield_now;
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new().queue("q", 1).latency_histograms(true).build().unwrap();
    /// ex.block_on(async {
    ///     let h = ex.spawn("q", async { yield_now().await }).unwrap();
    ///     h.await.unwrap();
    /// });
    /// // Two polls: after the spawn and after the yield.
    /// assert_eq!(ex.queue_stats("q").unwrap().wake_latency.count(), 2);
    /// ```
    pub fn latency_histograms(mut self, on: bool) -> Self {
        self.latency = on;
        self
    }

    /// Reports every poll that runs for at least `threshold` (a task that
    /// blocks the thread, or computes too long between yields) to
    /// `report`, with its queue, task id, task name
    /// ([`TaskBuilder::name`](crate::task::TaskBuilder::name)) and duration, and
    /// counts it in [`QueueStats::stalls`](crate::stats::QueueStats::stalls).
    /// `report` runs on the executor's thread right after the poll; a
    /// panic there is handled by the [`PanicPolicy`]. The executor drops
    /// `report` when it shuts down, so `report` may hold a
    /// [`Spawner`](crate::Spawner) of its own executor (to spawn follow-up
    /// work) without keeping the executor alive. Default: no
    /// detector. `threshold` must be between 1 us and 1 hour.
    ///
    /// Cost: one clock read per poll (the poll's duration runs from the
    /// reading that starts it to the one that ends it, which starts the
    /// next) and a comparison with the threshold; the task's id and name
    /// are looked up, and the report built, only for a stall (the
    /// executor keeps the id and name of the task that ended last, for
    /// a stall in the poll in which a task ends). The
    /// [latency histograms](Self::latency_histograms) document what both
    /// cost together on the headline workload.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use std::rc::Rc;
    /// use std::time::Duration;
    /// use tourbillon::Builder;
    ///
    /// let seen = Rc::new(RefCell::new(Vec::new()));
    /// let log = seen.clone();
    /// let ex = Builder::new()
    ///     .queue("q", 1)
    ///     .stall_detector(Duration::from_millis(5), move |s| log.borrow_mut().push(s.to_string()))
    ///     .build()
    ///     .unwrap();
    /// let h = ex.task("q").name("sleeper").spawn(async {
    ///     std::thread::sleep(Duration::from_millis(10)); // blocks the executor
    /// }).unwrap();
    /// ex.block_on(h).unwrap();
    /// assert_eq!(seen.borrow().len(), 1);
    /// assert!(seen.borrow()[0].contains("sleeper"));
    /// assert_eq!(ex.queue_stats("q").unwrap().stalls, 1);
    /// ```
    pub fn stall_detector(
        mut self,
        threshold: Duration,
        report: impl Fn(&Stall) + 'static,
    ) -> Self {
        self.stall = Some((threshold, Rc::new(report)));
        self
    }

    /// Records a [timeline](crate::timeline) of the polls: for each, its
    /// queue, task id and name, run, start and duration, into a buffer of
    /// `polls` records allocated here (40 bytes each) and at every
    /// [`Executor::take_timeline`](crate::Executor::take_timeline), which
    /// returns them as a [`Timeline`](crate::timeline::Timeline) that
    /// writes a Chrome trace-event file for Perfetto or
    /// `chrome://tracing`. When the buffer is full, further polls are only
    /// counted ([`Timeline::dropped`](crate::timeline::Timeline::dropped)):
    /// take the timeline every so often, or size the buffer for the window
    /// to look at. Default: no timeline (`0`); at most
    /// [`MAX_TIMELINE_POLLS`](crate::timeline::MAX_TIMELINE_POLLS). For a
    /// pool, set it in the builder each core's declaration returns
    /// ([`PoolBuilder::executor`](crate::pool::PoolBuilder::executor)) and
    /// take the cores' timelines with
    /// [`Pool::timelines`](crate::pool::PoolHandle::timelines).
    ///
    /// Cost: one clock read per poll (shared with the
    /// [stall detector](Self::stall_detector) and the
    /// [latency histograms](Self::latency_histograms)), and after each
    /// poll a look-up of the task's id and name and a 40-byte record.
    /// Without it nothing is recorded, and the run loop's common instance
    /// (no stall detector, histograms or timeline) contains no timeline
    /// code. On the headline workload of near-empty polls (50,000 tasks x
    /// 5 yields on one `RunnableFifo` queue), `valgrind --tool=callgrind`
    /// counts 1,976 instructions per task with it against 1,290 without
    /// and 1,713 with a clock read per poll alone (`overhead_profile
    /// timeline 3`, `3 5 1 fresh` and `observe 3 5 clock`,
    /// `--toggle-collect=overhead_profile::workload`, medians of 3 runs:
    /// `docs/profiling/callgrind_table.sh --repeats 3`; 2-vCPU Xeon VM,
    /// 2026-11-29), and
    /// `cargo bench --bench overhead` times the run 2.56x to 2.58x as long
    /// as without it, 1.11x to 1.16x the run with a clock read per poll
    /// alone (three runs of 15 rounds, alternated, medians; 2-vCPU Xeon
    /// VM, load average 0.6 to 0.9, 2026-11-29): the clock
    /// read is most of it. Polls that do real work make the share smaller.
    ///
    /// ```
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new().queue("q", 1).timeline(1).build().unwrap();
    /// ex.block_on(async {
    ///     ex.spawn("q", async {}).unwrap().await.unwrap();
    ///     ex.spawn("q", async {}).unwrap().await.unwrap();
    /// });
    /// let t = ex.take_timeline().unwrap();
    /// // One poll kept, one dropped: the buffer holds one.
    /// assert_eq!((t.polls().len(), t.dropped()), (1, 1));
    /// assert_eq!(t.queue_names(), ["\"q\""]);
    /// ```
    pub fn timeline(mut self, polls: usize) -> Self {
        self.timeline = polls;
        self
    }

    /// Declares a queue with `shares` and the default [`RunnableFifo`]
    /// scheduler. Queues are indexed in declaration order; the first one is
    /// the [default queue](Self::default_queue) unless another is named.
    ///
    /// [`RunnableFifo`]: crate::sched::RunnableFifo
    pub fn queue(self, key: K, shares: u32) -> Self {
        self.queue_with(key, QueueSpec::new(shares))
    }

    /// Declares a queue from a [`QueueSpec`] (shares, scheduler, slice).
    pub fn queue_with(mut self, key: K, spec: QueueSpec) -> Self {
        self.queues.push((key, spec));
        self
    }

    /// The queue of tasks spawned with the free [`spawn`](crate::spawn),
    /// [`try_spawn`](crate::try_spawn) or [`JoinSet::spawn`](crate::task::JoinSet::spawn)
    /// outside a task: from the main future of
    /// [`block_on`](crate::Executor::block_on) or
    /// [`run_until`](crate::Executor::run_until), which belongs to no queue.
    /// From inside a task they spawn onto that task's queue. Default: the
    /// first declared queue. `build()` returns
    /// [`BuildError::UnknownDefaultQueue`] if `key` is not declared.
    ///
    /// ```
    /// use tourbillon::Builder;
    ///
    /// #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    /// enum Q { Background, Foreground }
    ///
    /// let ex = Builder::new()
    ///     .queue(Q::Background, 1)
    ///     .queue(Q::Foreground, 99)
    ///     .default_queue(Q::Foreground)
    ///     .build()
    ///     .unwrap();
    /// ex.block_on(async {
    ///     // The main future is in no queue: this task goes to the default queue.
    ///     tourbillon::spawn(async { "a request" }).await.unwrap();
    /// });
    /// assert_eq!(ex.queue_stats(Q::Foreground).unwrap().spawned, 1);
    /// assert_eq!(ex.queue_stats(Q::Background).unwrap().spawned, 0);
    /// ```
    pub fn default_queue(mut self, key: K) -> Self {
        self.default_queue = Some(key);
        self
    }

    /// The default slice of every queue (EEVDF request, `r_i`): how long a
    /// queue runs before the executor reconsiders when others are runnable.
    /// Default [`DEFAULT_BASE_SLICE`](crate::config::DEFAULT_BASE_SLICE)
    /// (250 us). Range 1 us ..= 1 s.
    pub fn base_slice(mut self, slice: Duration) -> Self {
        self.base_slice = slice;
        self
    }

    /// Polls per turn before control returns to the host (`block_on`'s loop,
    /// or the host runtime's driver). Default
    /// [`DEFAULT_MAX_POLLS`](crate::config::DEFAULT_MAX_POLLS) (61).
    pub fn max_polls_per_turn(mut self, polls: u32) -> Self {
        self.max_polls = polls;
        self
    }

    /// Time after which control returns to the host even if tasks are
    /// runnable, so its timers and I/O are serviced. Default
    /// [`DEFAULT_HOST_YIELD_INTERVAL`](crate::config::DEFAULT_HOST_YIELD_INTERVAL)
    /// (200 us). A queue that needs its I/O discovered sooner while it
    /// waits says so with [`QueueSpec::latency`](crate::QueueSpec::latency).
    pub fn host_yield_interval(mut self, interval: Duration) -> Self {
        self.host_yield_interval = interval;
        self
    }

    /// Wake-up preemption (EEVDF R9): a queue that wakes with an earlier
    /// eligible deadline ends the running queue's run at the next poll
    /// boundary, once that run has lasted [`min_run`](Builder::min_run) (or
    /// at once if its slice is shorter). Default on.
    pub fn preemption(mut self, on: bool) -> Self {
        self.preemption = on;
        self
    }

    /// How long a run is protected from wake-up preemption. Default
    /// [`DEFAULT_MIN_RUN`](crate::config::DEFAULT_MIN_RUN) (100 us), capped
    /// by the running queue's slice.
    pub fn min_run(mut self, min_run: Duration) -> Self {
        self.min_run = min_run;
        self
    }

    /// What a panicking task does. Default [`PanicPolicy::Catch`].
    pub fn panic_policy(mut self, policy: PanicPolicy) -> Self {
        self.panic_policy = policy;
        self
    }

    /// The clock that measures service. Default
    /// [`SystemClock`](crate::clock::SystemClock); tests use a
    /// [`ManualClock`](crate::clock::ManualClock).
    ///
    /// The executor reads a [`ManualClock`](crate::clock::ManualClock)
    /// after every poll, so that a run ends exactly at the first poll
    /// boundary after its slice; any other clock it reads at run
    /// boundaries and after as many polls as its estimate of the poll cost
    /// says fit in what is left of the slice (see
    /// `testing::BuilderExt::read_clock_every_poll`, cargo feature
    /// `testing`).
    pub fn clock<C: Clock>(mut self, clock: C) -> Self {
        self.manual_clock = TypeId::of::<C>() == TypeId::of::<ManualClock>();
        self.clock = Some(ExecutorClock::from_clock(clock));
        self
    }

    /// Validates the configuration and builds the executor.
    pub fn build(self) -> Result<Executor<K>, BuildError> {
        self.check_options()?;
        let mut keys = Vec::with_capacity(self.queues.len());
        let mut specs = Vec::with_capacity(self.queues.len());
        for (key, spec) in self.queues {
            let name = format!("{key:?}");
            if keys.contains(&key) {
                return Err(BuildError::DuplicateQueue { queue: name });
            }
            if spec.shares == 0 {
                return Err(BuildError::ZeroShares { queue: name });
            }
            if spec.shares > MAX_SHARES {
                return Err(BuildError::TooManyShares {
                    queue: name,
                    shares: spec.shares,
                });
            }
            if let Some(s) = spec.slice {
                check_range(s, "QueueSpec::slice")?;
            }
            if let Some(l) = spec.latency {
                check_range(l, "QueueSpec::latency")?;
            }
            keys.push(key);
            specs.push((name, spec));
        }
        let default_queue = match &self.default_queue {
            None => 0,
            Some(key) => keys.iter().position(|k| k == key).ok_or_else(|| {
                BuildError::UnknownDefaultQueue {
                    queue: format!("{key:?}"),
                }
            })?,
        };
        let cfg = Config {
            max_polls: self.max_polls,
            host_yield_interval_ns: duration_ns(self.host_yield_interval),
            preemption: self.preemption,
            min_run_ns: duration_ns(self.min_run),
            general_pick: self.general_pick,
            cheap_clock: self.read_clock_every_poll.unwrap_or(self.manual_clock),
            latency: self.latency,
            stall_ns: self
                .stall
                .as_ref()
                .map_or(u64::MAX, |(t, _)| duration_ns(*t)),
            timeline: self.timeline,
            per_poll_timing: self.latency || self.stall.is_some() || self.timeline > 0,
            default_queue,
        };
        let clock = self
            .clock
            .unwrap_or_else(|| ExecutorClock::System(SystemClock::new()));
        let report = self.stall.map(|(_, r)| r);
        let panics = Rc::new(PanicSink::new(self.panic_policy == PanicPolicy::Propagate));
        let queues = Queues::new(specs, self.base_slice, &panics);
        let core = Rc::new_cyclic(|me| Core::new(queues, clock, cfg, panics, report, me.clone()));
        Ok(Executor::from_parts(
            core,
            std::sync::Arc::new(KeyMap::new(keys)),
        ))
    }
}

impl<K: QueueKey> Builder<K> {
    /// Checks the number of queues and the executor-wide options (the
    /// queues' own are checked as `build` takes them).
    fn check_options(&self) -> Result<(), BuildError> {
        if self.queues.is_empty() {
            return Err(BuildError::NoQueues);
        }
        if self.queues.len() > MAX_QUEUES {
            return Err(BuildError::TooManyQueues {
                count: self.queues.len(),
            });
        }
        check_range(self.base_slice, "base_slice")?;
        check_range(self.host_yield_interval, "host_yield_interval")?;
        if self.min_run > Duration::from_secs(1) {
            return Err(BuildError::InvalidOption {
                option: "min_run",
                reason: "must be at most 1 s",
            });
        }
        if let Some((t, _)) = &self.stall {
            if *t < Duration::from_micros(1) || *t > Duration::from_secs(3600) {
                return Err(BuildError::InvalidOption {
                    option: "stall_detector",
                    reason: "the threshold must be between 1 us and 1 hour",
                });
            }
        }
        if self.timeline > crate::timeline::MAX_TIMELINE_POLLS {
            return Err(BuildError::InvalidOption {
                option: "timeline",
                reason: "must be at most MAX_TIMELINE_POLLS (16 Mi polls)",
            });
        }
        if self.max_polls == 0 {
            return Err(BuildError::InvalidOption {
                option: "max_polls_per_turn",
                reason: "must be at least 1",
            });
        }
        Ok(())
    }
}

/// Checks a duration option that must be between 1 us and 1 s.
fn check_range(d: Duration, option: &'static str) -> Result<(), BuildError> {
    if d < Duration::from_micros(1) || d > Duration::from_secs(1) {
        Err(BuildError::InvalidOption {
            option,
            reason: "must be between 1 us and 1 s",
        })
    } else {
        Ok(())
    }
}

// Here rather than in the executor's module, so that the builder depends
// on the executor and not the other way round.
impl<K: QueueKey> Executor<K> {
    /// A [`Builder`] to declare queues and options.
    pub fn builder() -> Builder<K> {
        Builder::new()
    }
}

impl<K: QueueKey> fmt::Debug for Builder<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field(
                "queues",
                &self
                    .queues
                    .iter()
                    .map(|(k, s)| (k, s.shares))
                    .collect::<Vec<_>>(),
            )
            .field("base_slice", &self.base_slice)
            .field("max_polls", &self.max_polls)
            .field("host_yield_interval", &self.host_yield_interval)
            .field("preemption", &self.preemption)
            .field("min_run", &self.min_run)
            .field("panic_policy", &self.panic_policy)
            .field("general_pick", &self.general_pick)
            .field("read_clock_every_poll", &self.read_clock_every_poll)
            .field("latency_histograms", &self.latency)
            .field("stall_threshold", &self.stall.as_ref().map(|(t, _)| t))
            .field("timeline", &self.timeline)
            .field("default_queue", &self.default_queue)
            .finish()
    }
}
