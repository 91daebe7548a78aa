#![forbid(unsafe_code)]
//! [`RunState`]: what the run loop keeps between polls (the run in
//! progress, the clock checkpoints, the turn's budget, why the run ends,
//! the ids it holds, its counts), in plain `Cell`s grouped by concern. Its
//! clock accounting (charges, countdown, stop flag) is `accounting.rs`'s
//! `impl RunState`; the run loop (`run_loop`, `placement`, `batch`) reads
//! and writes the rest.
//!
//! Plain `Cell`s rather than fields behind a borrow: they are read and
//! written on every poll, and by `should_yield` from inside a poll.

use std::cell::Cell;

use crate::task::id::TaskKey;

/// The run loop's state, read and written on every poll.
#[derive(Debug, Default)]
pub(crate) struct RunState {
    /// The run in progress, and the queue the next pick may continue.
    pub(crate) current: CurrentRun,
    /// The amortised clock reads: the last checkpoint, and the polls until
    /// the next one.
    pub(crate) clock: Checkpoints,
    /// The turn's host-yield budget: polls and time until control goes
    /// back to the host.
    pub(crate) turn: TurnBudget,
    /// Whether the run ends at the next poll boundary, and the causes that
    /// decide it.
    pub(crate) end: RunEnd,
    /// The ids the run took from its queue's scheduler and has not polled,
    /// and the ones it requeued.
    pub(crate) held: HeldIds,
    /// The call site of the next poll ([`RawTask::poll`]): flipped at every
    /// poll and kept across runs, so that two tasks polled in turn keep
    /// one site each whatever the length of the runs.
    ///
    /// [`RawTask::poll`]: crate::task::raw::RawTask::poll
    pub(crate) second_site: Cell<bool>,
    /// What the run loop counts (polls, runs, turns, parks).
    pub(crate) counters: ExecCounters,
}

/// The executor's counts of polls, runs, turns and parks
/// (`ExecutorStats`).
#[derive(Debug, Default)]
pub(crate) struct ExecCounters {
    pub(crate) polls: Cell<u64>,
    pub(crate) runs: Cell<u64>,
    pub(crate) turns: Cell<u64>,
    pub(crate) parks: Cell<u64>,
}

/// Adds one to a counter.
pub(crate) fn bump(c: &Cell<u64>) {
    c.set(c.get() + 1);
}

/// Which queue runs, since when, and which queue ran last.
#[derive(Debug, Default)]
pub(crate) struct CurrentRun {
    /// Queue of the run in progress.
    pub(crate) queue: Cell<Option<usize>>,
    /// The clock at the run's start (the checkpoint it started at).
    pub(crate) start_ns: Cell<u64>,
    /// Queue whose run ended last, if it may continue (RUN_TO_PARITY).
    pub(crate) prev: Cell<Option<usize>>,
}

/// The clock checkpoints of the run in progress (see `accounting`).
#[derive(Debug, Default)]
pub(crate) struct Checkpoints {
    /// Clock at the last checkpoint.
    pub(crate) last_ns: Cell<u64>,
    /// Polls before the next checkpoint (amortised mode); counted down by
    /// one per poll.
    pub(crate) countdown: Cell<u32>,
    /// `countdown` as the last checkpoint set it: the polls since that
    /// checkpoint are `countdown_set - countdown`.
    pub(crate) countdown_set: Cell<u32>,
}

/// The turn's budget before control returns to the host (R8d).
#[derive(Debug, Default)]
pub(crate) struct TurnBudget {
    /// The clock at the turn's start.
    pub(crate) start_ns: Cell<u64>,
    /// The turn ends once this long has passed since its start: the
    /// builder's host-yield interval, or the shortest latency requirement
    /// of a waiting queue
    /// ([`Queues::host_interval_ns`](super::queues::Queues::host_interval_ns)).
    pub(crate) host_interval_ns: Cell<u64>,
    /// Polls left in this turn, as of the last checkpoint (the countdown
    /// never exceeds it, so the turn's last poll is a checkpoint).
    pub(crate) polls_left: Cell<u32>,
    /// The host interval has passed: the run ends, and the turn with it.
    pub(crate) over: Cell<bool>,
}

/// Whether the run in progress ends at the next poll boundary, and why.
#[derive(Debug, Default)]
pub(crate) struct RunEnd {
    /// The run ends at this poll boundary: the one flag the run loop reads
    /// per poll, recomputed (`RunState::update_stop`) wherever one of the
    /// causes below, or the turn's budget, changes (checkpoint, placement,
    /// `should_yield`).
    pub(crate) stop: Cell<bool>,
    /// The request in force is used: the run ends at this boundary once
    /// another queue is runnable (R8b).
    pub(crate) slice_over: Cell<bool>,
    /// R4 renewed the running queue's request during this run, so
    /// RUN_TO_PARITY no longer protects it.
    pub(crate) renewed: Cell<bool>,
    /// A queue that woke may preempt this run now (R9).
    pub(crate) preempt: Cell<bool>,
    /// A queue that woke during this run may preempt it but `min_run` still
    /// protects the run: preempt at the first checkpoint at or after this
    /// instant (R9; E4's bound `min_run + p`).
    pub(crate) preempt_at: Cell<Option<u64>>,
    /// `should_yield` told the task to yield: end the run after this poll.
    pub(crate) requested: Cell<bool>,
}

impl RunEnd {
    /// No cause to end the run: its state at the run's start.
    #[inline(always)]
    pub(crate) fn clear(&self) {
        self.slice_over.set(false);
        self.renewed.set(false);
        self.preempt.set(false);
        self.preempt_at.set(None);
        self.requested.set(false);
        self.stop.set(false);
    }
}

/// The ids a run holds outside its queue's scheduler (see `batch`).
#[derive(Debug, Default)]
pub(crate) struct HeldIds {
    /// The run's batch (`Held`): ids from `pos` to `len` were taken from
    /// the running queue's scheduler, or woken into the batch (see
    /// `open`), and not polled yet (counted in the queue's
    /// `runnable_tasks`).
    pub(crate) pos: Cell<usize>,
    pub(crate) len: Cell<usize>,
    /// The batch's ids: here rather than in the `Held` guard, so that a run
    /// neither initialises nor moves them (a run of one poll, as in a
    /// ping-pong, would pay about 90 instructions for that; callgrind).
    pub(crate) batch: Batch,
    /// Tasks of the running queue (a `RunnableFifo`, or a batching `Las`)
    /// requeued by the run and not yet pushed to its scheduler.
    pub(crate) tail: Tail,
    /// The running queue is a `RunnableFifo` whose deque the run left
    /// empty, and nothing was pushed to any queue since
    /// (`Core::push_to` and every other push
    /// clear it): a lone requeued task is the next batch without a borrow
    /// of the queues (one task yielding in a loop takes that path at every
    /// poll).
    pub(crate) front_empty: Cell<bool>,
    /// Whether a `Held` guard holds the batch (from `Held::new` to its
    /// put-back), and whether a push can overtake the ids it holds (see
    /// [`HeldState`]).
    pub(crate) open: Cell<HeldState>,
    /// The running queue, whose ids these are (set by `Held::new`; valid
    /// while `open`, and while the tail holds ids).
    pub(crate) queue: Cell<usize>,
}

/// The state of the run's batch ([`HeldIds::open`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum HeldState {
    /// No `Held` guard holds the batch.
    #[default]
    Closed,
    /// A `Held` guard holds the batch: a task of the running
    /// `RunnableFifo` queue woken while the run holds every queued task of
    /// it (no requeued task, an empty deque) joins the batch at its end,
    /// which is its place in FIFO order (`HeldIds::join_batch`).
    Open,
    /// Open, and the batch was taken from a `Las` with exact keys, whose
    /// ids a push of a smaller key overtakes (`HeldIds::yield_to_push`):
    /// every push to a queue tests this state alone, so that it costs one
    /// read on any other queue.
    Overtakable,
}

/// How many ids a run takes from a `RunnableFifo` per borrow of the queues:
/// 64, so that a turn of the default 61 polls takes one batch (32 takes
/// two per turn: about 8 more instructions per headline task, and 4% more
/// cycles; callgrind and `perf stat`).
pub(crate) const HELD: usize = 64;

/// Task ids in `Cell`s, written and read without a borrow.
#[derive(Debug)]
pub(crate) struct Batch(pub(crate) [Cell<TaskKey>; HELD]);

impl Default for Batch {
    fn default() -> Self {
        Self(std::array::from_fn(|_| Cell::new(TaskKey::new(0, 0))))
    }
}

/// Tasks of the running `RunnableFifo` queue that are runnable again after
/// their poll (a yield, or a wake during the poll), kept here rather than
/// pushed one by one (which costs a borrow of the queues, a dispatch and a
/// deque push per poll). They belong behind every task already queued, in
/// order, so they are pushed to the deque before anything else is pushed
/// to a queue (`HeldIds::flush_tail`), before the run takes its next batch,
/// and when the run ends or unwinds (`Held`). They are tasks of the
/// running queue (the run pushes them before it ends), so the queue is not
/// stored.
///
/// On a batching `Las` queue the tail also holds, per task, the duration of
/// its last poll, charged to its own group when the tail is pushed
/// (`Las::push_back_charged`): the level the task goes to is decided then,
/// and since nothing reaches the scheduler before the tail does, that is
/// the order of a charge and a push per poll.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    pub(crate) ids: Batch,
    /// Uncharged poll durations (ns), on a batching `Las` queue.
    pub(crate) ns: Durations,
    pub(crate) len: Cell<usize>,
}

/// Poll durations in `Cell`s, one per tail entry.
#[derive(Debug)]
pub(crate) struct Durations(pub(crate) [Cell<u64>; HELD]);

impl Default for Durations {
    fn default() -> Self {
        Self(std::array::from_fn(|_| Cell::new(0)))
    }
}

impl Tail {
    /// Tasks kept.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len.get()
    }
}
