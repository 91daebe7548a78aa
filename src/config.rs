#![forbid(unsafe_code)]
//! The defaults and limits of [`Builder`](crate::Builder) and
//! [`QueueSpec`](crate::QueueSpec), and the [`PanicPolicy`] a builder
//! chooses.
//!
//! Defaults: the base slice of a queue, the polls per turn, the host-yield
//! interval and the minimum run before a wake-up preemption. Limits: the
//! largest number of queues of one executor and of shares of one queue
//! ([`Builder::build`](crate::Builder::build) returns a
//! [`BuildError`](crate::error::BuildError) beyond them).

// Inside the crate this module also holds what the executor reads of its
// configuration: `Config`, the knobs the run loop reads. The builder validates the options and fills these
// in; the executor never sees the builder.

use std::time::Duration;

/// The largest number of shares of one queue. Shares are relative: what
/// matters is `shares(i) / sum(shares(j))` over the queues that have
/// runnable tasks.
pub const MAX_SHARES: u32 = 10_000;

/// The largest number of queues of one executor. Picking a queue scans the
/// runnable ones (exact and cheap at this size).
pub const MAX_QUEUES: usize = 256;

/// Default base slice (EEVDF request): 250 us, a third of Linux's base
/// slice on one CPU (`sysctl_sched_base_slice`, 750 us).
///
/// EEVDF keeps a queue's lag within about one request, so the slice is the
/// error a window of service can find in a queue's share; a shorter slice
/// costs more queue switches while several queues are busy. The
/// measurements behind the choice (`benches/fairness.rs`, `compare`) are in
/// docs/benchmarks.md.
pub const DEFAULT_BASE_SLICE: Duration = Duration::from_micros(250);

/// Default polls per turn before control goes back to the host: 61, tokio's
/// `LocalSet::MAX_TASKS_PER_TICK` and `event_interval`.
pub const DEFAULT_MAX_POLLS: u32 = 61;

/// Default host-yield interval: 200 us.
///
/// Nested in a host runtime, the host's timers and I/O are serviced once
/// per turn, so while long polls keep the executor busy, a task waiting on
/// a host timer waits for the next turn. A shorter interval shortens those
/// waits and costs throughput (more turns); `benches/priority.rs` and
/// `benches/host_interval.rs` measure both (docs/benchmarks.md).
pub const DEFAULT_HOST_YIELD_INTERVAL: Duration = Duration::from_micros(200);

/// Default minimum run before a waking queue may preempt: 100 us,
/// clockworker's `min_slice` (capped by the running queue's slice).
pub const DEFAULT_MIN_RUN: Duration = Duration::from_micros(100);

/// What happens when a task, or other user code the executor calls,
/// panics.
///
/// Every call into user code is caught: polling and dropping futures,
/// dropping outputs and panic payloads, waking joiners' and hosts' wakers,
/// the methods of a custom [`Scheduler`](crate::sched::Scheduler),
/// [`Clock::now_ns`](crate::clock::Clock::now_ns), the stall detector's callback
/// and `tracing` subscribers. Whatever the policy, the executor's state
/// stays whole: every task reaches a final state that its join handle
/// reads, the counters stay exact, and dropping the executor never panics.
/// A panic of user code other than a task is replaced by a safe default
/// (a clock read gives the last reading, a scheduler's failed `push` is
/// kept by the executor, a waker's panic wakes nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PanicPolicy {
    /// Catch the panic at the poll: the task ends, its [`JoinHandle`]
    /// gives [`JoinError`] with the payload, every other task keeps running
    /// and keeps its share. tokio's behaviour; the default. Panics of other
    /// user code are dropped and counted in
    /// [`ExecutorStats::caught_panics`](crate::stats::ExecutorStats::caught_panics).
    /// Nothing unwinds out of `block_on`, `run_until` or
    /// `run_until_stalled` apart from their own main future.
    ///
    /// [`JoinHandle`]: crate::task::JoinHandle
    /// [`JoinError`]: crate::task::JoinError
    #[default]
    Catch,
    /// The task ends as with `Catch`, then the panic resumes out of
    /// `block_on` / `run_until` / `run_until_stalled` at the end of the
    /// executor's turn (the join handle gets a placeholder payload). A panic
    /// of other user code resumes the same way. One panic resumes per turn:
    /// others caught meanwhile are dropped and counted in
    /// [`ExecutorStats::caught_panics`](crate::stats::ExecutorStats::caught_panics).
    /// The executor stays consistent: it can be run again, and dropping it
    /// drops every task once (and never panics).
    Propagate,
}

/// Knobs the run loop reads; set through [`Builder`](crate::Builder).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) max_polls: u32,
    pub(crate) host_yield_interval_ns: u64,
    pub(crate) preemption: bool,
    pub(crate) min_run_ns: u64,
    pub(crate) general_pick: bool,
    /// Read the clock after every poll (a `ManualClock`, or
    /// `testing::BuilderExt::read_clock_every_poll`).
    pub(crate) cheap_clock: bool,
    /// Record wake-to-first-poll histograms.
    pub(crate) latency: bool,
    /// Stall threshold, ns (`u64::MAX`: no detector).
    pub(crate) stall_ns: u64,
    /// The timeline's buffer, in polls (0: no timeline).
    pub(crate) timeline: usize,
    /// One clock read per poll for every queue (latency, stalls or the
    /// timeline on).
    pub(crate) per_poll_timing: bool,
    /// The queue (index) of tasks spawned with the free `spawn` outside a
    /// task: from the main future of `block_on` / `run_until`.
    pub(crate) default_queue: usize,
}
