#![forbid(unsafe_code)]
//! Statistics: exact counters kept by the run loop, returned by value as
//! plain snapshots ([`ExecutorStats`] from
//! [`Executor::stats`](crate::Executor::stats), [`QueueStats`] from
//! [`Executor::queue_stats`](crate::Executor::queue_stats)), the
//! wake-to-first-poll [`LatencyHistogram`], and the [`Stall`] reports of
//! the stall detector.
//!
//! The counters are always on: they are plain integer increments on data
//! the run loop touches anyway. The histogram and the stall detector need
//! one clock read per poll, so they are opt-in
//! ([`Builder::latency_histograms`](crate::Builder::latency_histograms),
//! [`Builder::stall_detector`](crate::Builder::stall_detector)).

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use crate::error::quarantine::Quarantine;
use crate::task::id::TaskId;

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
    pub(crate) stalls: u64,
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
    /// Tasks spawned onto it: its local spawns, and the spawns from other
    /// threads it admitted (made tasks). A remote spawn still waiting
    /// ([`remote_waiting`](Self::remote_waiting)), or dropped by the
    /// shutdown before it was admitted, is not a task and is not counted.
    pub spawned: u64,
    /// Tasks that returned their output.
    pub completed: u64,
    /// Tasks that ended cancelled: by `abort()`, or dropped unfinished by
    /// the executor's shutdown. Once the executor is shut down, `spawned`
    /// equals `completed + cancelled + panicked`.
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
    /// Spawns from other threads ([`RemoteSpawner`](crate::remote::RemoteSpawner))
    /// that the executor took from its inbox and has not made tasks yet:
    /// a queue admits them up to 64 of its remote tasks waiting for their
    /// first poll (see [`RemoteSpawner`](crate::remote::RemoteSpawner)).
    /// Not counted in `spawned` until admitted.
    pub remote_waiting: usize,
    /// Whether it is in the EEVDF runnable set.
    pub runnable: bool,
    /// EEVDF virtual runtime (virtual ns, wrapping).
    pub vruntime: u64,
    /// EEVDF virtual deadline (virtual ns, wrapping).
    pub deadline: u64,
    /// EEVDF lag in real ns: service owed (positive) or received in excess
    /// (negative). For a queue that is not runnable, the lag it left with.
    /// Saturated at `i64::MIN` / `i64::MAX` (a lag beyond 292 years,
    /// reachable only through a jump of the clock).
    pub lag_ns: i64,
    /// Polls that ran at least the stall threshold
    /// ([`Builder::stall_detector`](crate::Builder::stall_detector)); 0
    /// without a detector.
    pub stalls: u64,
    /// Wake-to-first-poll delays of its tasks: from the instant a task
    /// became runnable (spawned, woken, or yielded; the clock reading that
    /// stands for it is the one
    /// [`Builder::latency_histograms`](crate::Builder::latency_histograms)
    /// says) to the start of its next poll. Empty unless
    /// [`Builder::latency_histograms`](crate::Builder::latency_histograms)
    /// is on.
    pub wake_latency: LatencyHistogram,
    /// Why the queue is quarantined, if it is: a method of its custom
    /// [`Scheduler`](crate::sched::Scheduler) panicked
    /// [`QUARANTINE_AFTER`](crate::sched::QUARANTINE_AFTER) times in a row
    /// (see the scheduler contract). Its tasks then ended as `panicked`.
    pub quarantine: Option<Quarantine>,
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
    /// Panics of user code other than a task's own poll or destructor (a
    /// waker, a clock, a custom scheduler, a callback, an output's or a
    /// payload's destructor) that the executor caught and dropped, as
    /// [`PanicPolicy`](crate::config::PanicPolicy) says. A task's panic is not
    /// counted here: its join handle reports it.
    pub caught_panics: u64,
    /// Broken rules of the [`Scheduler`](crate::sched::Scheduler) contract seen
    /// (ids not the scheduler's to hand out, a wrong `len` in debug
    /// builds).
    pub scheduler_violations: u64,
    /// Tasks alive: spawned and not yet ended (as tokio's
    /// `num_alive_tasks`; an ended task's unread result waits in its join
    /// handle's hold, not in the executor).
    pub live_tasks: usize,
    /// Keyed groups alive (groups of `spawn_in_group` with a live task).
    pub live_groups: usize,
    /// EEVDF `V`: the weighted average vruntime of the runnable queues.
    pub avg_vruntime: u64,
    /// Per queue, in declaration order.
    pub queues: Vec<QueueStats>,
}

/// A readable report, one line for the executor and a table with a row
/// per queue (each line ends with a newline, as the pool's
/// `ShutdownReport`; print it with `print!`):
///
/// ```text
/// executor: 5 polls, 2 runs, 1 turns, 0 parks, 0 live tasks
/// queue       shares  spawned  completed  cancelled  panicked    polls    service  runnable        lag
/// Requests         4        2          1          1         0        1          0         0          0
/// Compaction       1        1          1          0         0        4     30.0us         0          0
/// ```
///
/// `service` is the time the queue's tasks ran, `runnable` its runnable
/// tasks, `lag` the service it is owed (`+`) or received in excess (`-`).
/// Columns `wake p50` and `wake p99` follow when
/// [latency histograms](crate::Builder::latency_histograms) recorded
/// something; counters that are zero and rarely anything else (caught
/// panics, scheduler violations, stalls, remote spawns waiting, a
/// quarantine) are printed only when they are not.
///
/// ```
/// use tourbillon::Builder;
///
/// let ex = Builder::new().queue("fg", 4).queue("bg", 1).build().unwrap();
/// ex.block_on(async { ex.spawn("fg", async {}).unwrap().await.unwrap() });
/// let report = ex.stats().to_string();
/// assert!(report.starts_with("executor: 1 polls, "));
/// let fg: Vec<&str> = report.lines().nth(2).unwrap().split_whitespace().collect();
/// assert_eq!(fg[..5], ["\"fg\"", "4", "1", "1", "0"]); // queue, shares, spawned, completed, cancelled
/// ```
impl fmt::Display for ExecutorStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "executor: {} polls, {} runs, {} turns, {} parks, {} live tasks",
            self.polls, self.runs, self.turns, self.parks, self.live_tasks
        )?;
        if self.live_groups > 0 {
            write!(f, ", {} live groups", self.live_groups)?;
        }
        if self.caught_panics > 0 {
            write!(f, ", {} caught panics", self.caught_panics)?;
        }
        if self.scheduler_violations > 0 {
            write!(f, ", {} scheduler violations", self.scheduler_violations)?;
        }
        writeln!(f)?;
        let name_w = self
            .queues
            .iter()
            .map(|q| q.name.len())
            .chain([5])
            .max()
            .unwrap_or(5);
        let histograms = self.queues.iter().any(|q| q.wake_latency.count() > 0);
        write!(
            f,
            "{:<name_w$}  {:>6}  {:>7}  {:>9}  {:>9}  {:>8}  {:>7}  {:>9}  {:>8}  {:>9}",
            "queue",
            "shares",
            "spawned",
            "completed",
            "cancelled",
            "panicked",
            "polls",
            "service",
            "runnable",
            "lag"
        )?;
        if histograms {
            write!(f, "  {:>9}  {:>9}", "wake p50", "wake p99")?;
        }
        writeln!(f)?;
        for q in &self.queues {
            let lag = Duration::from_nanos(q.lag_ns.unsigned_abs());
            let sign = if q.lag_ns < 0 { '-' } else { '+' };
            write!(
                f,
                "{:<name_w$}  {:>6}  {:>7}  {:>9}  {:>9}  {:>8}  {:>7}  {:>9}  {:>8}  {:>9}",
                q.name,
                q.shares,
                q.spawned,
                q.completed,
                q.cancelled,
                q.panicked,
                q.polls,
                short(q.service),
                q.runnable_tasks,
                if q.lag_ns == 0 {
                    "0".to_string()
                } else {
                    format!("{sign}{}", short(lag))
                },
            )?;
            if histograms {
                write!(
                    f,
                    "  {:>9}  {:>9}",
                    short(q.wake_latency.p50()),
                    short(q.wake_latency.p99())
                )?;
            }
            if q.stalls > 0 {
                write!(f, "  {} stalls", q.stalls)?;
            }
            if q.remote_waiting > 0 {
                write!(f, "  {} remote spawns waiting", q.remote_waiting)?;
            }
            if let Some(quarantine) = &q.quarantine {
                write!(f, "  quarantined: {quarantine}")?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// `d` in a few characters: `0`, `812ns`, `39.5us`, `1.23ms`, `2.50s`.
fn short(d: Duration) -> String {
    let ns = d.as_nanos();
    match ns {
        0 => "0".to_string(),
        1..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// A poll that ran at least the stall threshold, as reported to the
/// callback of [`Builder::stall_detector`](crate::Builder::stall_detector).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stall {
    /// The queue's key, as `{:?}` prints it.
    pub queue: String,
    /// The queue's index in declaration order.
    pub queue_index: usize,
    /// The task whose poll stalled the executor.
    pub task: TaskId,
    /// The task's name, if it was spawned with one
    /// ([`TaskBuilder::name`](crate::task::TaskBuilder::name)).
    pub name: Option<String>,
    /// How long the poll ran.
    pub duration: Duration,
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {:?}", self.task)?;
        if let Some(n) = &self.name {
            write!(f, " ({n})")?;
        }
        write!(
            f,
            " of queue {} ran {:?} in one poll",
            self.queue, self.duration
        )
    }
}

/// Sub-buckets per power of two: values are kept to within 1/8 (12.5%).
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Values at or above 2^40 ns (about 18 minutes) share the last bucket.
const MAX_EXP: u32 = 40;
const BUCKETS: usize = (SUB as usize) * (MAX_EXP - SUB_BITS + 1) as usize + 1;

/// The bucket of `ns` in [`LatencyHistogram`]'s layout extended to every
/// exponent (below [`RECORDER_BUCKETS`]): with `e` the exponent of
/// `ns | SUB` and `s = e - SUB_BITS`, `ns >> s` is the bucket's place
/// among the `SUB` of exponent `e` (`SUB..2 * SUB`, values below `SUB`
/// being their own), and `SUB * s` the offset of that exponent's
/// buckets: a bit scan, a shift and an addition.
#[inline(always)]
fn unclamped_index(ns: u64) -> usize {
    let s = (ns | SUB).ilog2() - SUB_BITS;
    ((ns >> s) + SUB * u64::from(s)) as usize
}

/// The buckets of [`LatencyRecorder`]: every index [`unclamped_index`]
/// makes (495 at most, for `u64::MAX`), rounded up to a power of two so
/// that a mask keeps the index in bounds.
const RECORDER_BUCKETS: usize = 512;

/// A histogram of durations with log-linear buckets (HdrHistogram's layout
/// with 3 significant bits): values below 8 ns are exact, larger ones fall
/// in one of 8 buckets per power of two, so a bucket's lower bound is within
/// 12.5% of every value in it. Count, sum, min and max are exact.
///
/// ```
/// use std::time::Duration;
/// use tourbillon::stats::LatencyHistogram;
///
/// let mut h = LatencyHistogram::new();
/// for us in [10, 20, 30, 40, 1000] {
///     h.record(Duration::from_micros(us));
/// }
/// assert_eq!(h.count(), 5);
/// assert_eq!(h.max(), Duration::from_micros(1000));
/// // The median is 30 us, reported as its bucket's lower bound (28.672 us).
/// let p50 = h.p50();
/// assert!(p50 <= Duration::from_micros(30) && p50 * 8 >= Duration::from_micros(30) * 7);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram (allocates its buckets at the first record).
    pub fn new() -> Self {
        Self {
            counts: Vec::new(),
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// The bucket of `ns`, without a branch: with `e` the exponent of
    /// `ns | SUB` (at least `SUB_BITS`, so values below `SUB` are their own
    /// bucket), `SUB` buckets per exponent from `SUB_BITS` on; values at or
    /// above `2^MAX_EXP` land past the last bucket and are clamped to it.
    #[inline]
    fn index(ns: u64) -> usize {
        unclamped_index(ns).min(BUCKETS - 1)
    }

    /// The lower bound of bucket `i`, ns.
    fn lower(i: usize) -> u64 {
        let i = i as u64;
        if i < SUB {
            return i;
        }
        let exp = (i / SUB) as u32 + SUB_BITS - 1;
        (SUB + i % SUB) << (exp - SUB_BITS)
    }

    /// Records one value.
    pub fn record(&mut self, d: Duration) {
        self.record_ns(crate::clock::duration_ns(d));
    }

    fn record_ns(&mut self, ns: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        self.counts[Self::index(ns)] += 1;
        self.count += 1;
        self.sum_ns += ns as u128;
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Adds every value recorded in `other` (the histograms of several
    /// executors, e.g. the cores of a [`Pool`](crate::pool::Pool), merge
    /// exactly: the buckets are the same everywhere).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tourbillon::stats::LatencyHistogram;
    ///
    /// let (mut a, mut b) = (LatencyHistogram::new(), LatencyHistogram::new());
    /// a.record(Duration::from_micros(10));
    /// b.record(Duration::from_micros(30));
    /// a.merge(&b);
    /// assert_eq!(a.count(), 2);
    /// assert_eq!(a.max(), Duration::from_micros(30));
    /// ```
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if other.count == 0 {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest value (zero when empty).
    pub fn min(&self) -> Duration {
        Duration::from_nanos(if self.count == 0 { 0 } else { self.min_ns })
    }

    /// Largest value (zero when empty).
    pub fn max(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// Mean of the values (zero when empty).
    pub fn mean(&self) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.sum_ns / self.count as u128) as u64)
    }

    /// The `q`-quantile (`q` in 0..=1): the lower bound of the bucket that
    /// holds the value of rank `ceil(q·count)`, so at most 12.5% below it
    /// (exact below 8 ns). Zero when empty.
    pub fn percentile(&self, q: f64) -> Duration {
        if self.count == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Duration::from_nanos(Self::lower(i).max(self.min_ns));
            }
        }
        self.max()
    }

    /// The median, see [`percentile`](Self::percentile).
    pub fn p50(&self) -> Duration {
        self.percentile(0.50)
    }

    /// The 99th percentile, see [`percentile`](Self::percentile).
    pub fn p99(&self) -> Duration {
        self.percentile(0.99)
    }

    /// The non-empty buckets as `(lower bound, count)`, in increasing order.
    pub fn buckets(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (Duration::from_nanos(Self::lower(i)), c))
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("count", &self.count)
            .field("min", &self.min())
            .field("p50", &self.p50())
            .field("p99", &self.p99())
            .field("max", &self.max())
            .finish()
    }
}

/// The recording side of one queue's wake-to-first-poll histogram
/// ([`Builder::latency_histograms`](crate::Builder::latency_histograms)),
/// which the run loop updates at every poll: the buckets of
/// [`LatencyHistogram`] in a flat array of `Cell`s, allocated with the
/// executor, so that a record is the bucket index (leading zeros and
/// shifts, no division), one increment at an index a mask keeps in
/// bounds (no bounds check), and the sum, minimum and maximum; no borrow,
/// no allocation. The count is the sum of the buckets, added
/// up when the stats read the histogram ([`histogram`](Self::histogram)).
pub(crate) struct LatencyRecorder {
    /// [`unclamped_index`]'s buckets: those from `BUCKETS - 1` on are the
    /// histogram's last.
    counts: [Cell<u64>; RECORDER_BUCKETS],
    /// The sum's low 64 bits; the high ones are in `sum_high`, which a
    /// carry out of these reaches (the 128-bit addition's load, add with
    /// carry and store of the high half, taken only at a carry).
    sum_low: Cell<u64>,
    sum_high: Cell<u64>,
    min_ns: Cell<u64>,
    max_ns: Cell<u64>,
}

impl LatencyRecorder {
    /// A recorder with nothing recorded.
    pub(crate) fn new() -> Self {
        Self {
            counts: std::array::from_fn(|_| Cell::new(0)),
            sum_low: Cell::new(0),
            sum_high: Cell::new(0),
            min_ns: Cell::new(u64::MAX),
            max_ns: Cell::new(0),
        }
    }

    /// Records one delay, ns.
    #[inline(always)]
    pub(crate) fn record(&self, ns: u64) {
        // The mask changes nothing (the index is below 496) but spares the
        // bounds check.
        let c = &self.counts[unclamped_index(ns) & (RECORDER_BUCKETS - 1)];
        c.set(c.get() + 1);
        let (low, carry) = self.sum_low.get().overflowing_add(ns);
        self.sum_low.set(low);
        if carry {
            self.carry();
        }
        // Branches, taken only while the extremes move.
        if ns < self.min_ns.get() {
            self.min_ns.set(ns);
        }
        if ns > self.max_ns.get() {
            self.max_ns.set(ns);
        }
    }

    /// A carry out of the sum's low half.
    #[cold]
    #[inline(never)]
    fn carry(&self) {
        self.sum_high.set(self.sum_high.get() + 1);
    }

    /// What it recorded, as a histogram (the one that
    /// [`LatencyHistogram::record`] of the same delays in the same order
    /// makes).
    pub(crate) fn histogram(&self) -> LatencyHistogram {
        let mut counts: Vec<u64> = self.counts[..BUCKETS].iter().map(Cell::get).collect();
        counts[BUCKETS - 1] = self.counts[BUCKETS - 1..].iter().map(Cell::get).sum();
        let count = counts.iter().sum();
        if count == 0 {
            return LatencyHistogram::new();
        }
        LatencyHistogram {
            counts,
            count,
            sum_ns: u128::from(self.sum_high.get()) << 64 | u128::from(self.sum_low.get()),
            min_ns: self.min_ns.get(),
            max_ns: self.max_ns.get(),
        }
    }
}

/// The stall detector's callback ([`Builder::stall_detector`](crate::Builder::stall_detector)).
pub(crate) type StallReport = Rc<dyn Fn(&Stall)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev = 0;
        for i in 1..BUCKETS {
            let lo = LatencyHistogram::lower(i);
            assert!(lo > prev, "bucket {i} starts at {lo} <= {prev}");
            assert_eq!(LatencyHistogram::index(lo), i);
            assert_eq!(LatencyHistogram::index(lo - 1), i - 1);
            prev = lo;
        }
        for ns in [9u64, 100, 1_000, 123_456, 10_000_000, 999_999_999] {
            let lo = LatencyHistogram::lower(LatencyHistogram::index(ns));
            assert!(lo <= ns && ns - lo <= ns / 8, "{ns} -> {lo}");
        }
        assert_eq!(LatencyHistogram::index(u64::MAX), BUCKETS - 1);
        assert_eq!(unclamped_index(u64::MAX), 495);
        assert!(unclamped_index(u64::MAX) < RECORDER_BUCKETS);
    }

    #[test]
    fn the_recorder_makes_the_histogram_of_its_records() {
        let rec = LatencyRecorder::new();
        assert_eq!(rec.histogram(), LatencyHistogram::new());
        let mut want = LatencyHistogram::new();
        for ns in [0, 7, 8, 1_000, 123_456, 999, 1 << 40, u64::MAX, 5] {
            rec.record(ns);
            want.record_ns(ns);
        }
        let got = rec.histogram();
        assert_eq!(got, want);
        assert_eq!(got.count(), 9);
        assert_eq!(got.min(), Duration::ZERO);
        assert_eq!(got.max(), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn the_recorders_sum_carries_into_its_high_half() {
        let rec = LatencyRecorder::new();
        let mut want = LatencyHistogram::new();
        for ns in [u64::MAX, u64::MAX, 3, u64::MAX] {
            rec.record(ns);
            want.record_ns(ns);
        }
        assert_eq!(rec.histogram(), want);
        // 3 * (2^64 - 1) + 3 = 3 * 2^64.
        assert_eq!((rec.sum_high.get(), rec.sum_low.get()), (3, 0));
    }

    #[test]
    fn percentiles_by_rank() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.p99(), Duration::ZERO);
        for ns in 1..=100u64 {
            h.record_ns(ns * 1024);
        }
        assert_eq!(h.count(), 100);
        assert_eq!(h.min(), Duration::from_nanos(1024));
        assert_eq!(h.max(), Duration::from_nanos(102_400));
        let p50 = h.p50().as_nanos() as u64;
        assert!((50 * 1024 * 7 / 8..=50 * 1024).contains(&p50), "{p50}");
        let p99 = h.p99().as_nanos() as u64;
        assert!((99 * 1024 * 7 / 8..=99 * 1024).contains(&p99), "{p99}");
        assert_eq!(h.buckets().map(|(_, c)| c).sum::<u64>(), 100);
    }
}
