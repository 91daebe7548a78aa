//! The interpreter of random API sequences shared by `tests/api_prop.rs`
//! (proptest) and the `api_ops` fuzz target (`fuzz/fuzz_targets/api_ops.rs`
//! includes this file by path): ops, the tracked task script, the injected
//! faults, and the invariants.
//!
//! One executor with four queues (keys 0 to 3: `RunnableFifo`, `Las::new()`,
//! quantized `Las` with a starvation guard, and a custom FIFO or LIFO
//! scheduler; key 4 is never declared; optionally queue 0 runs the custom
//! scheduler too) on a [`ManualClock`] behind a clock that can be told to
//! panic, under either [`PanicPolicy`]. Tasks run a small script (yield,
//! wait for a gate, open a gate, spend virtual time, spawn a child,
//! reweight a queue) and end by completing with a tracked output or by
//! panicking. Every task has a [`Track`] of thread-safe counters.
//!
//! Faults: a task's future may panic in its destructor (at completion, at
//! abort, at shutdown, or when a remote spawn is aborted before it
//! started), its output may
//! panic in its destructor, and its scripted panic may carry a payload
//! whose destructor panics; a join handle may be polled with a waker whose
//! `wake` panics; the clock may panic at a chosen read; the custom
//! schedulers may panic at a chosen call of `push`, `pop`, `polled`,
//! `forget`, `group_ended` or `len` (never one panic too many in a row: a
//! method that panics `QUARANTINE_AFTER` times in a row quarantines its
//! queue, whose rule `tests/quarantine.rs` checks; an armed panic that
//! would be the last of them waits for the next call). Each injected panic is logged when it
//! fires, with where it must end up ([`Fate`]): the task's own panic, the
//! executor's panic sink, swallowed by the executor uncounted (a second
//! panic of one task, the unread result of a join handle its owner drops,
//! a payload the sink drops), the test's own `catch_unwind` (the test drops
//! a result, a payload or a remote handle itself), or the shutdown.
//!
//! The invariants are checked after every op and at the end:
//!
//! * no task is polled after it completed, nor after `abort()` was called on
//!   it (from outside the executor, so the abort is always observed at the
//!   next poll boundary);
//! * every future is dropped exactly once (spawned, rejected, aborted,
//!   panicked, completed, or dropped at shutdown), and so is every output,
//!   also when their destructors panic (the drop is counted before the
//!   panic); an output is delivered at most once, only to its own handle;
//!   a handle reads `Ok` only for a completed task, `Cancelled` only for an
//!   aborted task (or after shutdown), a panic only for a panicked task,
//!   with the task's own payload under `Catch` and the placeholder under
//!   `Propagate`; a task whose future's destructor panics at completion or
//!   at abort ends panicked; so does one whose future's destructor panics
//!   at the executor's drop, with its own payload under either policy;
//! * `stats()` and `queue_stats()` agree with the model after every op:
//!   per queue, spawned / completed / cancelled / panicked exactly, hence
//!   spawned = completed + cancelled + panicked + live; the executor's
//!   `live_tasks` (tasks not ended: an ended task's result waits in its
//!   cell for the join handle, not in the executor) and `live_groups`; the
//!   shares; no scheduler contract violation (the custom schedulers keep
//!   the contract);
//! * panics (`src/boundary.rs`): under `Catch` no panic leaves a driver
//!   (`run_until_stalled`, `run_until`, `block_on`; each is wrapped in
//!   `catch_unwind`), and `caught_panics` equals the injected panics that
//!   reached the panic sink, exactly, after every op. Under `Propagate`
//!   a panic that leaves a driver is one of the injected task or sink
//!   panics, and leaves once: task panics in the order the tasks ended,
//!   and of the sink panics the first one reported after the sink last
//!   resumed one; at most one sink panic waits to resume, the others are
//!   counted; and after a driver returned normally nothing waits: every
//!   task panic so far resumed exactly once, and every sink panic resumed
//!   once or is counted in `caught_panics`. Nothing unwinds out of the
//!   executor's drop. A panic the test catches itself is one it expected;
//! * with `drain` on, once every gate has been opened often enough, every
//!   task that was neither aborted nor scripted to panic completes its
//!   script (no task lost);
//! * after the executor is dropped, every handle resolves at once, spawning
//!   by every path gives `SpawnError::Shutdown`, and stale wakers (woken on
//!   this thread and on another) are harmless.
//!
//! Everything is deterministic: the clock is manual, the faults fire at
//! counted calls, and every other thread is joined before the next op.
//! `API_MODEL_SUMMARY=1` prints, per case, how many tasks completed,
//! panicked, were aborted, how many faults fired, etc. (with
//! `-- --nocapture`), to check what the generated cases exercise.
#![allow(dead_code)]

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::{pending, poll_fn, Future};
use std::panic::{catch_unwind, panic_any, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tourbillon::clock::{Clock, ManualClock};
use tourbillon::config::{PanicPolicy, MAX_SHARES};
use tourbillon::error::{SharesError, SpawnError};
use tourbillon::remote::RemoteJoinHandle;
use tourbillon::sched::{Las, Scheduler, QUARANTINE_AFTER};
use tourbillon::task::{yield_maybe, yield_now, GroupId, JoinError, JoinHandle, TaskId, TaskKey};
use tourbillon::testing::BuilderExt;
use tourbillon::{try_spawn, Builder, Executor, QueueSpec, Spawner};

pub const QUEUES: usize = 4;
/// The queue of the custom scheduler.
pub const CUSTOM_QUEUE: usize = 3;
pub const GATES: usize = 3;
/// Longest task script; the drain opens every gate this many times and more.
pub const MAX_STEPS: usize = 6;

/// One step of a task's script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `yield_now().await`.
    Yield,
    /// `yield_maybe().await`.
    YieldMaybe,
    /// Wait until gate `g` is opened after this step started.
    Wait(u8),
    /// Open gate `g` from inside the task (same-thread wakes while running).
    Open(u8),
    /// Spend `us` microseconds of virtual time in this poll.
    Work(u16),
    /// `tourbillon::try_spawn` a child (onto the current queue) and detach it.
    SpawnChild,
    /// `Spawner::set_shares(queue, shares)` from inside the task.
    Reweight(u8, u8),
}

/// How a spawned task (or a spawn attempt) is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    ExecutorSpawn,
    ExecutorGroup,
    SpawnerSpawn,
    SpawnerGroup,
    QueueHandleSpawn,
    QueueHandleGroup,
    ExecutorTaskBuilder,
    SpawnerTaskBuilder,
    QueueHandleTaskBuilder,
    /// The free `tourbillon::spawn` from the main future of `block_on`
    /// (always onto queue 0).
    FreeInBlockOn,
}

pub const VIAS: [Via; 10] = [
    Via::ExecutorSpawn,
    Via::ExecutorGroup,
    Via::SpawnerSpawn,
    Via::SpawnerGroup,
    Via::QueueHandleSpawn,
    Via::QueueHandleGroup,
    Via::ExecutorTaskBuilder,
    Via::SpawnerTaskBuilder,
    Via::QueueHandleTaskBuilder,
    Via::FreeInBlockOn,
];

/// The faults of one scripted task (any combination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Faults {
    /// The future's destructor panics (wherever it is dropped).
    pub future_drop: bool,
    /// The output's destructor panics.
    pub output_drop: bool,
    /// The scripted panic's payload panics in its destructor.
    pub payload_drop: bool,
}

impl Faults {
    pub const NONE: Faults = Faults {
        future_drop: false,
        output_drop: false,
        payload_drop: false,
    };

    /// Bits 0, 1, 2: future, output, payload.
    pub fn from_bits(b: u8) -> Self {
        Faults {
            future_drop: b & 1 != 0,
            output_drop: b & 2 != 0,
            payload_drop: b & 4 != 0,
        }
    }
}

/// A method of the custom scheduler, for [`Op::ArmScheduler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedMethod {
    Push,
    Pop,
    Polled,
    Forget,
    GroupEnded,
    Len,
}

pub const SCHED_METHODS: [SchedMethod; 6] = [
    SchedMethod::Push,
    SchedMethod::Pop,
    SchedMethod::Polled,
    SchedMethod::Forget,
    SchedMethod::GroupEnded,
    SchedMethod::Len,
];

/// One API operation, performed on the test's thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Spawn a scripted task; `queue` 4 is undeclared (the spawn must fail
    /// with `UnknownQueue` and drop the future once); `keep` keeps the join
    /// handle, else it is dropped at once (detached).
    Spawn {
        via: Via,
        queue: u8,
        group: u8,
        steps: Vec<Step>,
        panic: bool,
        keep: bool,
        faults: Faults,
    },
    /// `RemoteSpawner::spawn` (or `spawn_in_group`), from this thread or from
    /// another (joined) thread.
    RemoteSpawn {
        queue: u8,
        group: Option<u8>,
        steps: Vec<Step>,
        panic: bool,
        from_thread: bool,
        faults: Faults,
    },
    /// Open gate `gate` from this thread or from another (joined) thread.
    Open { gate: u8, from_thread: bool },
    /// `abort()` a held handle (a remote one possibly from another thread).
    Abort { handle: u8, from_thread: bool },
    /// Drop a held handle (detach).
    DropHandle { handle: u8 },
    /// Poll a held handle once, outside the executor.
    Poll { handle: u8 },
    /// Poll a held handle once, outside the executor, with a waker whose
    /// `wake` panics (the handle keeps it until it is polled again).
    PollWaker { handle: u8 },
    /// Await a held handle in `block_on` for exactly one executor turn.
    AwaitTurn { handle: u8 },
    /// Move a held handle into a new task on `queue` that awaits it.
    Join { handle: u8, queue: u8 },
    /// `run_until_stalled()`.
    Run,
    /// Poll `run_until(pending())` `n` times: `n` bounded turns, nested mode.
    Turns(u8),
    /// `Executor::set_shares(queue, shares)` (0 and > MAX_SHARES must fail).
    SetShares { queue: u8, shares: u32 },
    /// Advance the manual clock.
    Advance(u16),
    /// The `n`-th next read of the clock panics (`n` >= 1).
    ArmClock(u8),
    /// The `n`-th next call of `method` of the custom schedulers panics.
    ArmScheduler { method: SchedMethod, n: u8 },
}

/// Executor options of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub shares: [u32; QUEUES],
    pub max_polls: u32,
    pub preemption: bool,
    pub general_pick: bool,
    pub latency: bool,
    pub stall_detector: bool,
    /// Before dropping the executor, open the gates until every task ended
    /// and check that none was lost.
    pub drain: bool,
    pub policy: PanicPolicy,
    /// The custom scheduler is a LIFO (else a FIFO).
    pub custom_lifo: bool,
    /// Queue 0 runs the custom scheduler too (instead of `RunnableFifo`).
    pub custom_on_0: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            shares: [1, 2, 3, 2],
            max_polls: 4,
            preemption: true,
            general_pick: false,
            latency: false,
            stall_detector: false,
            drain: true,
            policy: PanicPolicy::Catch,
            custom_lifo: false,
            custom_on_0: false,
        }
    }
}

/// Where an injected panic must end up, decided where it fires from what
/// the model knows then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// A task's own panic (its poll, or its future's destructor at
    /// completion or at abort): the task ends panicked, and its handle
    /// reads it (`Catch`) or it resumes out of a driver once (`Propagate`).
    Task,
    /// Any other panic the executor catches: counted in `caught_panics`
    /// (`Catch`), or resumed out of a driver / counted (`Propagate`).
    Sink,
    /// Caught and dropped by the executor without counting: the
    /// destructor of a task's future after its poll panicked, or of its
    /// output after its future's destructor panicked; the unread result of
    /// a join handle dropped by its owner; a payload the sink drops.
    Swallowed,
    /// Unwinds into the test's own `catch_unwind` (the test drops a result,
    /// a payload or a remote handle itself, or a rejected spawn drops the
    /// future in the caller's frame).
    Test,
    /// During the executor's drop (counted by an executor that is gone).
    Shutdown,
}

/// An injected panic, as logged when it fires.
#[derive(Debug, Clone)]
pub struct Fire {
    pub fate: Fate,
    pub what: &'static str,
    pub track: Option<usize>,
    /// Times it resumed out of a driver.
    pub surfaced: u32,
    /// Times the test's own `catch_unwind` caught it.
    pub absorbed: u32,
}

/// The payload of every injected panic but scripted ones: the index of its
/// [`Fire`].
#[derive(Debug)]
pub struct Fault {
    pub id: usize,
}

/// The payload of a scripted task panic; with `nasty` its destructor
/// panics (once).
pub struct Boom {
    pub id: usize,
    nasty: Option<(Arc<World>, usize)>,
}

impl Drop for Boom {
    fn drop(&mut self) {
        if let Some((w, track)) = self.nasty.take() {
            let fate = match side() {
                Side::Test => Fate::Test,
                Side::HandleDrop => Fate::Swallowed,
                _ if w.shutdown.load(SeqCst) => Fate::Shutdown,
                // The sink holds task panics to resume; it drops them only
                // when it counts them.
                _ if w.propagate => Fate::Swallowed,
                // The executor drops the stage of a detached task, or a
                // remote delivery to a handle that is gone.
                _ => Fate::Sink,
            };
            let id = w.fire(fate, "payload destructor", Some(track));
            drop(w);
            panic_any(Fault { id });
        }
    }
}

/// What the test's thread is doing, for the fate of a panic that fires on
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Anything else: executor code calling user code.
    Executor,
    /// The test drops something itself, in its own `catch_unwind`.
    Test,
    /// A held join handle is being dropped (the cell drops an unread
    /// result, swallowing its panic).
    HandleDrop,
    /// The invariants are being checked: the armed faults do not count
    /// these calls down (reads of `stats()` call the schedulers' `len`).
    Check,
}

thread_local! {
    static SIDE: Cell<Side> = const { Cell::new(Side::Executor) };
}

fn side() -> Side {
    SIDE.with(|s| s.get())
}

/// Runs `f` with the side set to `side` (restored on unwind).
fn with_side<R>(side: Side, f: impl FnOnce() -> R) -> R {
    struct Restore(Side);
    impl Drop for Restore {
        fn drop(&mut self) {
            SIDE.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SIDE.with(|s| s.replace(side)));
    f()
}

/// What the model knows about one task (or one rejected spawn).
pub struct Track {
    pub n: usize,
    pub queue: usize,
    pub remote: bool,
    pub group: Option<u8>,
    pub faults: Faults,
    /// A local join handle was made (and kept past the spawn).
    pub has_handle: AtomicBool,
    pub handle_alive: AtomicBool,
    /// The handle returned `Ready` (the result left the slab).
    pub handle_read: AtomicBool,
    /// Counted by the executor's stats (spawned).
    pub accepted: AtomicBool,
    /// The remote spawn op is waiting for the executor's next boundary.
    pub remote_pending: AtomicBool,
    pub polls: AtomicU32,
    pub future_drops: AtomicU32,
    /// The future's destructor panicked.
    pub future_drop_fired: AtomicBool,
    /// ... during the executor's drop: its handle, local or remote, reads
    /// that panic, with its own payload under either policy.
    pub shutdown_panic: AtomicBool,
    /// The body returned its output.
    pub completed: AtomicBool,
    /// The body reached its scripted panic.
    pub panicked: AtomicBool,
    /// The [`Fire`] that is the task's own panic (`NO_FIRE`: none).
    pub task_panic: AtomicU64,
    pub output_drops: AtomicU32,
    pub delivered: AtomicU32,
    /// `abort()` was called while the task had not ended.
    pub aborted: AtomicBool,
    pub kind: Kind,
}

const NO_FIRE: u64 = u64::MAX;

/// What a tracked future is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Spawned by an op.
    Task,
    /// Spawned by a task (`Step::SpawnChild`).
    Child,
    /// Spawned by `Op::Join` to await another task's handle.
    Joiner,
    /// Offered to a spawn after shutdown.
    Refused,
}

impl Track {
    fn ended(&self) -> bool {
        self.future_drops.load(SeqCst) > 0
    }
    /// The task ended panicked (its poll, or its future's destructor at
    /// completion, abort or the executor's drop).
    fn task_panicked(&self) -> bool {
        self.task_panic.load(SeqCst) != NO_FIRE
    }
    /// The task ended completed: its body returned and its future's
    /// destructor did not panic.
    fn outcome_completed(&self) -> bool {
        self.completed.load(SeqCst) && !self.task_panicked()
    }
    fn describe(&self) -> String {
        format!(
            "task #{} ({:?}, queue {}, remote {}, group {:?}, faults {:?}, polls {}, completed {}, panicked {}, task panic {}, aborted {}, accepted {}, ended {})",
            self.n,
            self.kind,
            self.queue,
            self.remote,
            self.group,
            self.faults,
            self.polls.load(SeqCst),
            self.completed.load(SeqCst),
            self.panicked.load(SeqCst),
            self.task_panicked(),
            self.aborted.load(SeqCst),
            self.accepted.load(SeqCst),
            self.ended(),
        )
    }
}

/// A signal that any thread may open: waiters wait for an opening after
/// they started waiting.
#[derive(Default)]
pub struct Gate {
    st: Mutex<GateSt>,
}

#[derive(Default)]
struct GateSt {
    epoch: u64,
    wakers: Vec<Waker>,
}

impl Gate {
    pub fn open(&self) {
        let wakers = {
            let mut st = self.st.lock().unwrap();
            st.epoch += 1;
            std::mem::take(&mut st.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    async fn wait(&self) {
        let start = self.st.lock().unwrap().epoch;
        poll_fn(|cx| {
            let mut st = self.st.lock().unwrap();
            if st.epoch > start {
                return Poll::Ready(());
            }
            if !st.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                st.wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}

/// The state shared by the test's thread, the tasks, the faulty clock and
/// schedulers, and other threads.
pub struct World {
    pub tracks: Mutex<Vec<Arc<Track>>>,
    pub violations: Mutex<Vec<String>>,
    pub gates: [Gate; GATES],
    pub shares: Mutex<[u32; QUEUES]>,
    /// `PanicPolicy::Propagate`.
    pub propagate: bool,
    /// The executor is being dropped, or was.
    pub shutdown: AtomicBool,
    pub fires: Mutex<Vec<Fire>>,
    /// How many panics had fired when a sink panic last left a driver.
    sink_resumed_at: AtomicUsize,
    /// Reads of the clock until the one that panics (0: none armed).
    clock_countdown: AtomicU32,
    /// Per [`SchedMethod`], calls until the one that panics (0: none).
    sched_countdown: [AtomicU32; 6],
}

impl World {
    fn violate(&self, v: String) {
        self.violations.lock().unwrap().push(v);
    }

    fn new_track(
        &self,
        kind: Kind,
        queue: usize,
        remote: bool,
        group: Option<u8>,
        faults: Faults,
    ) -> Arc<Track> {
        let mut tracks = self.tracks.lock().unwrap();
        let t = Arc::new(Track {
            n: tracks.len(),
            queue,
            remote,
            group,
            faults,
            has_handle: AtomicBool::new(false),
            handle_alive: AtomicBool::new(false),
            handle_read: AtomicBool::new(false),
            accepted: AtomicBool::new(false),
            remote_pending: AtomicBool::new(false),
            polls: AtomicU32::new(0),
            future_drops: AtomicU32::new(0),
            future_drop_fired: AtomicBool::new(false),
            shutdown_panic: AtomicBool::new(false),
            completed: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            task_panic: AtomicU64::new(NO_FIRE),
            output_drops: AtomicU32::new(0),
            delivered: AtomicU32::new(0),
            aborted: AtomicBool::new(false),
            kind,
        });
        tracks.push(t.clone());
        t
    }

    fn tracks(&self) -> Vec<Arc<Track>> {
        self.tracks.lock().unwrap().clone()
    }

    /// Logs an injected panic about to be raised; returns its id.
    fn fire(&self, fate: Fate, what: &'static str, track: Option<usize>) -> usize {
        let mut fires = self.fires.lock().unwrap();
        fires.push(Fire {
            fate,
            what,
            track,
            surfaced: 0,
            absorbed: 0,
        });
        fires.len() - 1
    }

    /// Counts down `c` (outside the checks); `true` when this call is the
    /// armed one.
    fn count_down(&self, c: &AtomicU32) -> bool {
        if side() == Side::Check {
            return false;
        }
        let n = c.load(SeqCst);
        if n == 0 {
            return false;
        }
        c.store(n - 1, SeqCst);
        n == 1
    }

    /// The fate of a clock's, a scheduler's or a waker's panic.
    fn sink_fate(&self) -> Fate {
        if side() == Side::Test {
            self.violate("a sink fault fired in the test's own code".into());
            Fate::Test
        } else if self.shutdown.load(SeqCst) {
            Fate::Shutdown
        } else {
            Fate::Sink
        }
    }

    /// A payload the test caught in its own code: one of ours, expected
    /// there.
    fn absorbed(&self, p: Box<dyn Any + Send>) {
        match p.downcast::<Fault>() {
            Ok(f) => {
                let mut fires = self.fires.lock().unwrap();
                let fire = &mut fires[f.id];
                fire.absorbed += 1;
                if fire.fate != Fate::Test || fire.absorbed > 1 {
                    let msg = format!("the test caught {fire:?} (#{})", f.id);
                    drop(fires);
                    self.violate(msg);
                }
            }
            Err(p) => self.violate(format!(
                "the test caught an unexpected panic: {}",
                payload_text(&*p)
            )),
        }
    }

    /// A panic that left a driver.
    fn surfaced(&self, p: Box<dyn Any + Send>) {
        let id = if let Some(b) = p.downcast_ref::<Boom>() {
            Some(b.id)
        } else {
            p.downcast_ref::<Fault>().map(|f| f.id)
        };
        match id {
            None => self.violate(format!(
                "a panic that is not an injected one left a driver: {}",
                payload_text(&*p)
            )),
            Some(id) => {
                let mut fires = self.fires.lock().unwrap();
                // Task panics resume in the order the tasks ended (the order
                // their panics fired); of the other panics the sink holds
                // the first one reported after it last resumed one.
                let resumed_at = self.sink_resumed_at.load(SeqCst);
                let in_order = match fires[id].fate {
                    Fate::Task => fires[..id]
                        .iter()
                        .all(|f| f.fate != Fate::Task || f.surfaced > 0),
                    Fate::Sink => {
                        self.sink_resumed_at.store(fires.len(), SeqCst);
                        id >= resumed_at
                            && fires[resumed_at..id].iter().all(|f| f.fate != Fate::Sink)
                    }
                    _ => true,
                };
                let fire = &mut fires[id];
                fire.surfaced += 1;
                let bad = if !self.propagate {
                    Some("left a driver under Catch")
                } else if fire.surfaced > 1 {
                    Some("left a driver twice")
                } else if !matches!(fire.fate, Fate::Task | Fate::Sink) {
                    Some("left a driver, but it was not the executor's to report")
                } else if !in_order {
                    Some("left a driver out of order")
                } else {
                    None
                };
                if let Some(bad) = bad {
                    let msg = format!("injected panic #{id} {bad}: {fire:?}");
                    drop(fires);
                    self.violate(msg);
                }
            }
        }
        // Our own code drops it (a `Boom` may panic in its destructor).
        absorb(self, move || drop(p));
    }
}

fn payload_text(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else if let Some(f) = p.downcast_ref::<Fault>() {
        format!("{f:?}")
    } else if let Some(b) = p.downcast_ref::<Boom>() {
        format!("Boom #{}", b.id)
    } else {
        "(unknown payload)".into()
    }
}

/// Runs `f` as the test's own code: an injected panic out of it is caught
/// and checked ([`World::absorbed`]).
fn absorb(world: &World, f: impl FnOnce()) {
    if let Err(p) = with_side(Side::Test, || catch_unwind(AssertUnwindSafe(f))) {
        world.absorbed(p);
    }
}

/// A task's output: counts its drops; with the fault, its destructor
/// panics (after counting).
pub struct Out {
    track: Arc<Track>,
    world: Arc<World>,
}

impl Drop for Out {
    fn drop(&mut self) {
        self.track.output_drops.fetch_add(1, SeqCst);
        if !self.track.faults.output_drop {
            return;
        }
        let fate = match side() {
            Side::Test => Fate::Test,
            Side::HandleDrop => Fate::Swallowed,
            // Dropped right after the future's destructor panicked.
            _ if self.track.future_drop_fired.load(SeqCst) => Fate::Swallowed,
            _ if self.world.shutdown.load(SeqCst) => Fate::Shutdown,
            // A detached task's output, or a remote delivery to a handle
            // that is gone.
            _ => Fate::Sink,
        };
        let id = self
            .world
            .fire(fate, "output destructor", Some(self.track.n));
        panic_any(Fault { id });
    }
}

/// Wraps a task's future: counts polls and drops, flags polls after
/// completion or after an abort, and with the fault panics in its
/// destructor (after counting).
struct Probe<F> {
    inner: Pin<Box<F>>,
    track: Arc<Track>,
    world: Arc<World>,
    done: bool,
    /// Inside the inner poll (still set after it unwound).
    in_poll: bool,
}

impl<F: Future> Future for Probe<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        if this.done {
            this.world.violate(format!(
                "polled after it completed: {}",
                this.track.describe()
            ));
        }
        if this.track.aborted.load(SeqCst) {
            this.world
                .violate(format!("polled after abort(): {}", this.track.describe()));
        }
        this.track.polls.fetch_add(1, SeqCst);
        this.in_poll = true;
        let r = this.inner.as_mut().poll(cx);
        this.in_poll = false;
        if r.is_ready() {
            this.done = true;
        }
        r
    }
}

impl<F> Drop for Probe<F> {
    fn drop(&mut self) {
        let t = &self.track;
        if t.future_drops.fetch_add(1, SeqCst) != 0 {
            self.world
                .violate(format!("future dropped twice: {}", t.describe()));
        }
        if !t.faults.future_drop {
            return;
        }
        let w = &self.world;
        let fate = match side() {
            Side::Test => Fate::Test,
            // The executor drops the future after its poll panicked.
            _ if self.in_poll => Fate::Swallowed,
            // At completion: the task's panic.
            _ if self.done => Fate::Task,
            _ if w.shutdown.load(SeqCst) => Fate::Shutdown,
            // A remote spawn aborted before the executor started it.
            _ if t.remote && t.remote_pending.load(SeqCst) && t.aborted.load(SeqCst) => Fate::Sink,
            // Aborted: the task's panic.
            _ if t.aborted.load(SeqCst) => Fate::Task,
            _ => {
                w.violate(format!("future dropped unexpectedly: {}", t.describe()));
                Fate::Swallowed
            }
        };
        let id = w.fire(fate, "future destructor", Some(t.n));
        t.future_drop_fired.store(true, SeqCst);
        if fate == Fate::Task {
            t.task_panic.store(id as u64, SeqCst);
        }
        if fate == Fate::Shutdown {
            // The task's result, for a handle that reads it.
            t.task_panic.store(id as u64, SeqCst);
            t.shutdown_panic.store(true, SeqCst);
        }
        panic_any(Fault { id });
    }
}

fn probe<F: Future>(world: &Arc<World>, track: &Arc<Track>, inner: F) -> Probe<F> {
    Probe {
        inner: Box::pin(inner),
        track: track.clone(),
        world: world.clone(),
        done: false,
        in_poll: false,
    }
}

/// The clock: a [`ManualClock`] whose reads panic when the world's
/// countdown says so.
struct FaultyClock {
    inner: ManualClock,
    world: Arc<World>,
}

impl Clock for FaultyClock {
    fn now_ns(&self) -> u64 {
        if self.world.count_down(&self.world.clock_countdown) {
            let id = self.world.fire(self.world.sink_fate(), "clock read", None);
            panic_any(Fault { id });
        }
        self.inner.now_ns()
    }
}

/// A custom scheduler over a `VecDeque` (FIFO or LIFO) that keeps the
/// contract, and whose methods panic (before any effect) when the world's
/// countdowns say so.
struct FaultySched {
    ids: VecDeque<TaskKey>,
    lifo: bool,
    world: Arc<World>,
    /// Per [`SchedMethod`], its panics in a row (a call that returns
    /// normally resets the count, as the executor's does).
    streaks: [Cell<u32>; 6],
}

impl FaultySched {
    fn point(&self, m: SchedMethod) {
        let i = SCHED_METHODS.iter().position(|&x| x == m).unwrap();
        let countdown = &self.world.sched_countdown[i];
        let streak = &self.streaks[i];
        if !self.world.count_down(countdown) {
            streak.set(0);
            return;
        }
        if streak.get() + 1 == QUARANTINE_AFTER {
            // This panic would quarantine the queue: the call returns
            // normally instead, and the next call of the method panics.
            countdown.store(1, SeqCst);
            streak.set(0);
            return;
        }
        streak.set(streak.get() + 1);
        let what = match m {
            SchedMethod::Push => "scheduler push",
            SchedMethod::Pop => "scheduler pop",
            SchedMethod::Polled => "scheduler polled",
            SchedMethod::Forget => "scheduler forget",
            SchedMethod::GroupEnded => "scheduler group_ended",
            SchedMethod::Len => "scheduler len",
        };
        let id = self.world.fire(self.world.sink_fate(), what, None);
        panic_any(Fault { id });
    }
}

impl Scheduler for FaultySched {
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        self.point(SchedMethod::Push);
        self.ids.push_back(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        self.point(SchedMethod::Pop);
        if self.lifo {
            self.ids.pop_back()
        } else {
            self.ids.pop_front()
        }
    }
    fn len(&self) -> usize {
        self.point(SchedMethod::Len);
        self.ids.len()
    }
    fn polled(&mut self, _task: TaskKey, _group: GroupId, _e: Option<Duration>, _f: bool) {
        self.point(SchedMethod::Polled);
    }
    fn forget(&mut self, task: TaskKey, _group: GroupId) {
        self.point(SchedMethod::Forget);
        self.ids.retain(|&t| t != task);
    }
    fn group_ended(&mut self, _group: GroupId) {
        self.point(SchedMethod::GroupEnded);
    }
}

/// A join handle's waker whose `wake` panics.
struct PanicWaker {
    world: Arc<World>,
    track: usize,
}

impl Wake for PanicWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let id = self
            .world
            .fire(self.world.sink_fate(), "joiner's wake", Some(self.track));
        panic_any(Fault { id });
    }
}

/// The faults of a task spawned onto queue `q`: none for its future's
/// destructor if the spawn is rejected (an undeclared queue). The spawn
/// drops the future while it returns its error, and rustc leaks a return
/// value when a destructor panics during the return
/// (rust-lang/rust#47949), which memcheck and LeakSanitizer report.
fn rejectable(q: usize, faults: Faults) -> Faults {
    if q < QUEUES {
        faults
    } else {
        Faults {
            future_drop: false,
            ..faults
        }
    }
}

/// What tasks reach through their thread (they run on the executor's).
struct TaskCtx {
    spawner: Spawner<usize>,
    clock: ManualClock,
}

thread_local! {
    static CTX: RefCell<Option<TaskCtx>> = const { RefCell::new(None) };
}

fn with_ctx<R>(f: impl FnOnce(&TaskCtx) -> R) -> R {
    CTX.with(|c| f(c.borrow().as_ref().expect("task context set")))
}

/// The body of a scripted task.
async fn script(world: Arc<World>, track: Arc<Track>, steps: Vec<Step>, panic: bool) -> Out {
    for step in steps {
        match step {
            Step::Yield => yield_now().await,
            Step::YieldMaybe => yield_maybe().await,
            Step::Wait(g) => world.gates[g as usize % GATES].wait().await,
            Step::Open(g) => world.gates[g as usize % GATES].open(),
            Step::Work(us) => with_ctx(|c| c.clock.advance(Duration::from_micros(us as u64))),
            Step::SpawnChild => spawn_child(&world, &track),
            Step::Reweight(q, s) => {
                let (q, s) = (q as usize % QUEUES, (s as u32).max(1));
                let r = with_ctx(|c| c.spawner.set_shares(q, s));
                if r.is_ok() {
                    world.shares.lock().unwrap()[q] = s;
                } else {
                    world.violate(format!("set_shares({q}, {s}) in a task: {r:?}"));
                }
            }
        }
    }
    if panic {
        track.panicked.store(true, SeqCst);
        let id = world.fire(Fate::Task, "scripted panic", Some(track.n));
        track.task_panic.store(id as u64, SeqCst);
        let nasty = track.faults.payload_drop.then(|| (world.clone(), track.n));
        panic_any(Boom { id, nasty });
    }
    track.completed.store(true, SeqCst);
    Out { track, world }
}

/// A child: spawned with the free `try_spawn` onto the current task's queue,
/// detached; it yields once and completes.
fn spawn_child(world: &Arc<World>, parent: &Arc<Track>) {
    let t = world.new_track(Kind::Child, parent.queue, false, None, Faults::NONE);
    let body = {
        let (t, w) = (t.clone(), world.clone());
        async move {
            yield_now().await;
            t.completed.store(true, SeqCst);
            Out { track: t, world: w }
        }
    };
    match try_spawn(probe(world, &t, body)) {
        Ok(h) => {
            t.accepted.store(true, SeqCst);
            drop(h);
        }
        Err(e) => world.violate(format!("try_spawn in a task: {e}")),
    }
}

/// A held local join handle: tells its track when it is dropped, and drops
/// the handle as [`Side::HandleDrop`] (the cell swallows the panic of an
/// unread result's destructor).
struct Held {
    h: Option<JoinHandle<Out>>,
    track: Arc<Track>,
}

impl Held {
    fn new(h: JoinHandle<Out>, track: Arc<Track>) -> Self {
        Held { h: Some(h), track }
    }
    fn h(&mut self) -> &mut JoinHandle<Out> {
        self.h.as_mut().expect("handle held")
    }
    fn get(&self) -> &JoinHandle<Out> {
        self.h.as_ref().expect("handle held")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.track.handle_alive.store(false, SeqCst);
        if let Some(h) = self.h.take() {
            with_side(Side::HandleDrop, move || drop(h));
        }
    }
}

/// A held remote join handle: dropped as the test's own code (the slot
/// drops an unread result right there, and its destructor may panic).
struct RemoteHeld {
    rh: Option<RemoteJoinHandle<Out>>,
    track: Arc<Track>,
    world: Arc<World>,
}

impl RemoteHeld {
    fn rh(&mut self) -> &mut RemoteJoinHandle<Out> {
        self.rh.as_mut().expect("handle held")
    }
    fn get(&self) -> &RemoteJoinHandle<Out> {
        self.rh.as_ref().expect("handle held")
    }
}

impl Drop for RemoteHeld {
    fn drop(&mut self) {
        if let Some(rh) = self.rh.take() {
            absorb(&self.world, move || drop(rh));
        }
    }
}

enum Handle {
    Local(Held),
    Remote(RemoteHeld),
}

impl Handle {
    fn track(&self) -> &Arc<Track> {
        match self {
            Handle::Local(h) => &h.track,
            Handle::Remote(h) => &h.track,
        }
    }
}

/// Checks a result read from `t`'s handle and drops it (as the test's own
/// code: an output or payload may panic in its destructor).
fn consume(
    world: &World,
    t: &Track,
    r: Result<Out, JoinError>,
    id: Option<TaskId>,
    after_shutdown: bool,
) {
    match r {
        Ok(out) => {
            if !std::ptr::eq(&*out.track, t) {
                world.violate(format!(
                    "handle of {} got the output of {}",
                    t.describe(),
                    out.track.describe()
                ));
            }
            if !t.outcome_completed() {
                world.violate(format!("Ok from an uncompleted task: {}", t.describe()));
            }
            if t.delivered.fetch_add(1, SeqCst) != 0 {
                world.violate(format!("output delivered twice: {}", t.describe()));
            }
            absorb(world, move || drop(out));
        }
        Err(e) => {
            if let Some(id) = id {
                if e.id() != id {
                    world.violate(format!("JoinError id {:?}, handle id {id:?}", e.id()));
                }
            }
            if e.is_cancelled() {
                let local_shutdown = after_shutdown && !t.remote;
                if !t.aborted.load(SeqCst) && !after_shutdown {
                    world.violate(format!("Cancelled but not aborted: {}", t.describe()));
                }
                if t.outcome_completed() && !local_shutdown {
                    world.violate(format!(
                        "Cancelled but it completed (output lost): {}",
                        t.describe()
                    ));
                }
                if t.task_panicked() && !local_shutdown {
                    world.violate(format!("Cancelled but it panicked: {}", t.describe()));
                }
            } else if e.is_panic() {
                if !t.task_panicked() {
                    world.violate(format!("panic error from {}", t.describe()));
                }
                let msg = e.to_string();
                let p = e.into_panic();
                let want = t.task_panic.load(SeqCst) as usize;
                let ok = if world.propagate && !t.shutdown_panic.load(SeqCst) {
                    p.downcast_ref::<&str>()
                        .is_some_and(|s| s.contains("propagated out of the executor"))
                } else if let Some(b) = p.downcast_ref::<Boom>() {
                    b.id == want
                } else if let Some(f) = p.downcast_ref::<Fault>() {
                    f.id == want
                } else {
                    false
                };
                if !ok {
                    world.violate(format!(
                        "wrong panic payload ({msg}: {}) for {}",
                        payload_text(&*p),
                        t.describe()
                    ));
                }
                absorb(world, move || drop(p));
            } else {
                world.violate(format!("JoinError neither cancelled nor panic: {e:?}"));
            }
        }
    }
}

/// Keeps the injected panics quiet (other panics go to the previous hook,
/// e.g. libFuzzer's abort).
pub fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            if p.is::<Fault>() || p.is::<Boom>() {
                return;
            }
            prev(info)
        }));
    });
}

struct Case {
    world: Arc<World>,
    ex: Option<Executor<usize>>,
    clock: ManualClock,
    handles: Vec<Handle>,
}

impl Case {
    fn ex(&self) -> &Executor<usize> {
        self.ex.as_ref().expect("executor alive")
    }

    fn pick(&self, i: u8) -> Option<usize> {
        (!self.handles.is_empty()).then(|| i as usize % self.handles.len())
    }

    /// The executor ran at least one boundary: pending remote spawn ops were
    /// taken (spawned unless aborted first).
    fn drove(&self) {
        for t in self.world.tracks() {
            if t.remote_pending.swap(false, SeqCst) && !t.aborted.load(SeqCst) {
                t.accepted.store(true, SeqCst);
            }
        }
    }

    /// Runs a driver call, catching a panic out of it; `true` when it
    /// returned normally.
    fn drive(&self, f: impl FnOnce(&Executor<usize>)) -> bool {
        let r = catch_unwind(AssertUnwindSafe(|| f(self.ex())));
        self.drove();
        match r {
            Ok(()) => true,
            Err(p) => {
                self.world.surfaced(p);
                false
            }
        }
    }

    /// `run_until_stalled` until it returns normally (under `Propagate`
    /// each call resumes at most one panic), bounded.
    fn run_to_stall(&self) -> bool {
        let budget = self.world.tracks().len() + 16;
        for _ in 0..budget {
            if self.drive(|ex| {
                ex.run_until_stalled();
            }) {
                return true;
            }
        }
        false
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn(
        &mut self,
        via: Via,
        queue: u8,
        group: u8,
        steps: &[Step],
        panic: bool,
        keep: bool,
        faults: Faults,
    ) {
        let w = self.world.clone();
        let grouped = matches!(
            via,
            Via::ExecutorGroup
                | Via::SpawnerGroup
                | Via::QueueHandleGroup
                | Via::ExecutorTaskBuilder
                | Via::QueueHandleTaskBuilder
        );
        let q = if via == Via::FreeInBlockOn {
            0
        } else {
            queue as usize % (QUEUES + 1)
        };
        let t = w.new_track(
            Kind::Task,
            q,
            false,
            grouped.then_some(group % 4),
            rejectable(q, faults),
        );
        let fut = probe(&w, &t, script(w.clone(), t.clone(), steps.to_vec(), panic));
        let g = (group % 4) as u64;
        let ex = self.ex.as_ref().unwrap();
        let r = match via {
            Via::ExecutorSpawn => ex.spawn(q, fut),
            Via::ExecutorGroup => ex.spawn_in_group(q, g, fut),
            Via::SpawnerSpawn => ex.spawner().spawn(q, fut),
            Via::SpawnerGroup => ex.spawner().spawn_in_group(q, g, fut),
            Via::QueueHandleSpawn => ex
                .queue(q)
                .map_err(SpawnError::from)
                .and_then(|h| h.spawn(fut)),
            Via::QueueHandleGroup => ex
                .queue(q)
                .map_err(SpawnError::from)
                .and_then(|h| h.spawn_in_group(g, fut)),
            Via::ExecutorTaskBuilder => ex.task(q).name("api").group(g).spawn(fut),
            Via::SpawnerTaskBuilder => ex.spawner().task(q).name("api").spawn(fut),
            Via::QueueHandleTaskBuilder => ex
                .queue(q)
                .map_err(SpawnError::from)
                .and_then(|h| h.task().group(g).spawn(fut)),
            Via::FreeInBlockOn => ex.block_on(async { try_spawn(fut) }),
        };
        match r {
            Ok(h) => {
                if q >= QUEUES {
                    w.violate(format!("spawn onto undeclared queue {q} accepted"));
                }
                t.accepted.store(true, SeqCst);
                if keep {
                    t.has_handle.store(true, SeqCst);
                    t.handle_alive.store(true, SeqCst);
                    self.handles.push(Handle::Local(Held::new(h, t.clone())));
                } else {
                    drop(Held::new(h, t.clone()));
                }
            }
            Err(e) => {
                if q < QUEUES {
                    w.violate(format!("spawn via {via:?} onto queue {q} failed: {e}"));
                } else if !matches!(&e, SpawnError::UnknownQueue(u) if u.key() == q.to_string()) {
                    w.violate(format!("spawn onto undeclared queue: {e:?}"));
                }
                if t.future_drops.load(SeqCst) != 1 {
                    w.violate(format!(
                        "rejected spawn did not drop the future once: {}",
                        t.describe()
                    ));
                }
            }
        }
    }

    fn remote_spawn(
        &mut self,
        queue: u8,
        group: Option<u8>,
        steps: &[Step],
        panic: bool,
        from_thread: bool,
        faults: Faults,
    ) {
        let w = self.world.clone();
        let q = queue as usize % (QUEUES + 1);
        let t = w.new_track(
            Kind::Task,
            q,
            true,
            group.map(|g| g % 4),
            rejectable(q, faults),
        );
        let fut = probe(&w, &t, script(w.clone(), t.clone(), steps.to_vec(), panic));
        let remote = self.ex().remote_spawner();
        let submit = move || match group {
            Some(g) => remote.spawn_in_group(q, (g % 4) as u64, fut),
            None => remote.spawn(q, fut),
        };
        let r = if from_thread {
            std::thread::spawn(submit)
                .join()
                .expect("remote spawn thread")
        } else {
            submit()
        };
        match r {
            Ok(h) => {
                if q >= QUEUES {
                    w.violate(format!("remote spawn onto undeclared queue {q} accepted"));
                }
                t.remote_pending.store(true, SeqCst);
                self.handles.push(Handle::Remote(RemoteHeld {
                    rh: Some(h),
                    track: t.clone(),
                    world: w.clone(),
                }));
            }
            Err(e) => {
                if q < QUEUES
                    || !matches!(&e, SpawnError::UnknownQueue(u) if u.key() == q.to_string())
                {
                    w.violate(format!("remote spawn onto queue {q}: {e:?}"));
                }
                if t.future_drops.load(SeqCst) != 1 {
                    w.violate(format!(
                        "rejected remote spawn did not drop the future once: {}",
                        t.describe()
                    ));
                }
            }
        }
    }

    fn open(&self, gate: u8, from_thread: bool) {
        let g = gate as usize % GATES;
        if from_thread {
            let w = self.world.clone();
            std::thread::spawn(move || w.gates[g].open())
                .join()
                .expect("gate thread");
        } else {
            self.world.gates[g].open();
        }
    }

    fn abort(&self, i: usize, from_thread: bool) {
        let h = &self.handles[i];
        let t = h.track();
        if !t.ended() {
            t.aborted.store(true, SeqCst);
        }
        match h {
            Handle::Local(held) => held.get().abort(),
            Handle::Remote(rh) if from_thread => std::thread::scope(|s| {
                s.spawn(|| rh.get().abort()).join().expect("abort thread");
            }),
            Handle::Remote(rh) => rh.get().abort(),
        }
    }

    /// Polls handle `i` once with `cx`; on `Ready` removes it and checks the
    /// result.
    fn poll_handle(&mut self, i: usize, cx: &mut Context<'_>, after_shutdown: bool) -> bool {
        let ready = match &mut self.handles[i] {
            Handle::Local(held) => match Pin::new(held.h()).poll(cx) {
                Poll::Ready(r) => Some((r, Some(held.get().id()))),
                Poll::Pending => None,
            },
            Handle::Remote(rh) => match Pin::new(rh.rh()).poll(cx) {
                Poll::Ready(r) => Some((r, None)),
                Poll::Pending => None,
            },
        };
        let Some((r, id)) = ready else {
            return false;
        };
        let h = self.handles.swap_remove(i);
        let t = h.track().clone();
        t.handle_read.store(true, SeqCst);
        drop(h);
        consume(&self.world, &t, r, id, after_shutdown);
        true
    }

    /// Polls handle `i` once with a waker whose `wake` panics.
    fn poll_with_panicking_waker(&mut self, i: usize) {
        let waker = Waker::from(Arc::new(PanicWaker {
            world: self.world.clone(),
            track: self.handles[i].track().n,
        }));
        let mut cx = Context::from_waker(&waker);
        self.poll_handle(i, &mut cx, false);
    }

    /// `block_on` a future that polls the handle, then lets exactly one turn
    /// run, then polls it again.
    fn await_turn(&mut self, i: usize) -> bool {
        let ex = self.ex.take().unwrap();
        let mut polls = 0;
        let mut done = false;
        let r = catch_unwind(AssertUnwindSafe(|| {
            ex.block_on(poll_fn(|cx| {
                polls += 1;
                if !done {
                    done = self.poll_handle(i, cx, false);
                }
                if polls == 1 {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            }))
        }));
        self.ex = Some(ex);
        self.drove();
        match r {
            Ok(()) => true,
            Err(p) => {
                self.world.surfaced(p);
                false
            }
        }
    }

    fn join(&mut self, i: usize, queue: u8) {
        let w = self.world.clone();
        let q = queue as usize % QUEUES;
        let jt = w.new_track(Kind::Joiner, q, false, None, Faults::NONE);
        let target = self.handles.swap_remove(i);
        let body = {
            let (w, jt) = (w.clone(), jt.clone());
            async move {
                match target {
                    Handle::Local(mut held) => {
                        let id = held.get().id();
                        let r = held.h().await;
                        held.track.handle_read.store(true, SeqCst);
                        let t = held.track.clone();
                        drop(held);
                        consume(&w, &t, r, Some(id), false);
                    }
                    Handle::Remote(mut rh) => {
                        let r = rh.rh().await;
                        let t = rh.track.clone();
                        drop(rh);
                        consume(&w, &t, r, None, false);
                    }
                }
                jt.completed.store(true, SeqCst);
                Out {
                    track: jt,
                    world: w,
                }
            }
        };
        match self.ex().spawn(q, probe(&w, &jt, body)) {
            Ok(h) => {
                jt.accepted.store(true, SeqCst);
                jt.has_handle.store(true, SeqCst);
                jt.handle_alive.store(true, SeqCst);
                self.handles.push(Handle::Local(Held::new(h, jt.clone())));
            }
            Err(e) => w.violate(format!("joiner spawn: {e}")),
        }
    }

    fn turns(&mut self, n: u8) -> bool {
        let mut settled = false;
        {
            let ex = self.ex();
            let mut fut = pin!(ex.run_until(pending::<()>()));
            let mut cx = Context::from_waker(Waker::noop());
            for _ in 0..n.max(1) {
                match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx))) {
                    Ok(p) => {
                        if p.is_ready() {
                            self.world.violate("run_until(pending()) completed".into());
                        }
                        settled = true;
                    }
                    Err(p) => {
                        self.world.surfaced(p);
                        settled = false;
                    }
                }
            }
        }
        self.drove();
        settled
    }

    fn set_shares(&self, queue: u8, shares: u32) {
        let q = queue as usize % QUEUES;
        let before = self.world.shares.lock().unwrap()[q];
        let r = self.ex().set_shares(q, shares);
        let expected = if shares == 0 {
            Err(SharesError::ZeroShares {
                queue: q.to_string(),
            })
        } else if shares > MAX_SHARES {
            Err(SharesError::TooManyShares {
                queue: q.to_string(),
                shares,
            })
        } else {
            Ok(())
        };
        if r != expected {
            self.world.violate(format!(
                "set_shares({q}, {shares}) = {r:?}, expected {expected:?}"
            ));
        }
        if r.is_ok() {
            self.world.shares.lock().unwrap()[q] = shares;
        }
        let now = with_side(Side::Check, || self.ex().queue_stats(q).unwrap().shares);
        let want = if r.is_ok() { shares } else { before };
        if now != want {
            self.world.violate(format!(
                "queue {q} has {now} shares after set_shares({shares}), expected {want}"
            ));
        }
    }

    /// The executor's counters against the model. `settled`: a driver call
    /// just returned normally, so no panic waits to resume.
    fn check_stats(&self, when: &str, settled: bool) {
        let Some(ex) = self.ex.as_ref() else {
            return;
        };
        with_side(Side::Check, || self.check_stats_of(ex, when, settled));
    }

    fn check_stats_of(&self, ex: &Executor<usize>, when: &str, settled: bool) {
        let stats = ex.stats();
        let tracks = self.world.tracks();
        let shares = *self.world.shares.lock().unwrap();
        let mut polls = 0u64;
        for (q, &want_shares) in shares.iter().enumerate() {
            let on_q: Vec<&Arc<Track>> = tracks
                .iter()
                .filter(|t| t.queue == q && t.accepted.load(SeqCst))
                .collect();
            let count = |f: &dyn Fn(&Track) -> bool| on_q.iter().filter(|t| f(t)).count() as u64;
            let spawned = on_q.len() as u64;
            let completed = count(&|t| t.ended() && t.outcome_completed());
            let panicked = count(&|t| t.ended() && t.task_panicked());
            let cancelled = count(&|t| t.ended() && !t.outcome_completed() && !t.task_panicked());
            let live = count(&|t| !t.ended());
            let s = &stats.queues[q];
            let got = (s.spawned, s.completed, s.cancelled, s.panicked);
            let want = (spawned, completed, cancelled, panicked);
            if got != want {
                self.world.violate(format!(
                    "{when}: queue {q} (spawned, completed, cancelled, panicked) = {got:?}, model {want:?}"
                ));
            }
            if s.spawned != s.completed + s.cancelled + s.panicked + live {
                self.world.violate(format!(
                    "{when}: queue {q}: spawned {} != completed {} + cancelled {} + panicked {} + live {live}",
                    s.spawned, s.completed, s.cancelled, s.panicked
                ));
            }
            if s.shares != want_shares {
                self.world.violate(format!(
                    "{when}: queue {q} has {} shares, model {want_shares}",
                    s.shares
                ));
            }
            if ex.queue_stats(q).as_ref() != Ok(s) {
                self.world
                    .violate(format!("{when}: queue_stats({q}) differs from stats()"));
            }
            polls += s.polls;
        }
        let entries = tracks
            .iter()
            .filter(|t| t.accepted.load(SeqCst) && !t.ended())
            .count();
        if stats.live_tasks != entries {
            self.world.violate(format!(
                "{when}: live_tasks {} but the model has {entries} entries",
                stats.live_tasks
            ));
        }
        let mut groups: Vec<u8> = tracks
            .iter()
            .filter(|t| t.accepted.load(SeqCst) && !t.ended())
            .filter_map(|t| t.group)
            .collect();
        groups.sort_unstable();
        groups.dedup();
        if stats.live_groups != groups.len() {
            self.world.violate(format!(
                "{when}: live_groups {} but the model has {groups:?}",
                stats.live_groups
            ));
        }
        let probe_polls: u64 = tracks.iter().map(|t| t.polls.load(SeqCst) as u64).sum();
        if stats.polls < probe_polls || polls != stats.polls {
            self.world.violate(format!(
                "{when}: polls {} (queues {polls}), futures were polled {probe_polls} times",
                stats.polls
            ));
        }
        if stats.scheduler_violations != 0 {
            self.world.violate(format!(
                "{when}: {} scheduler contract violations (the custom schedulers keep it)",
                stats.scheduler_violations
            ));
        }
        self.check_panics(when, stats.caught_panics, settled);
    }

    /// `caught_panics` and the panics that left drivers against the log of
    /// injected panics (see `src/boundary.rs`).
    fn check_panics(&self, when: &str, caught: u64, settled: bool) {
        let fires = self.world.fires.lock().unwrap().clone();
        let n = |f: &dyn Fn(&Fire) -> bool| fires.iter().filter(|x| f(x)).count() as u64;
        let sink = n(&|f| f.fate == Fate::Sink);
        let task = n(&|f| f.fate == Fate::Task);
        let sink_out = n(&|f| f.fate == Fate::Sink && f.surfaced > 0);
        let task_out = n(&|f| f.fate == Fate::Task && f.surfaced > 0);
        if !self.world.propagate {
            // Every panic that reached the sink is counted at once.
            if caught != sink {
                self.world.violate(format!(
                    "{when}: caught_panics {caught}, but {sink} injected panics reached the sink: {fires:?}"
                ));
            }
            return;
        }
        // Sink panics: resumed once, counted, or (at most one) held.
        let held = sink as i64 - sink_out as i64 - caught as i64;
        let max_held = if settled { 0 } else { 1 };
        if !(0..=max_held).contains(&held) {
            self.world.violate(format!(
                "{when}: {sink} sink panics, {sink_out} resumed, caught_panics {caught}: {held} held (settled {settled}): {fires:?}"
            ));
        }
        // Task panics: each resumes once; after a driver returned
        // normally, all have.
        if settled && task_out != task {
            self.world.violate(format!(
                "{when}: {task} task panics but {task_out} resumed out of a driver: {fires:?}"
            ));
        }
    }

    /// Applies `op`; returns whether it ended with a driver call that
    /// returned normally.
    fn apply(&mut self, op: &Op) -> bool {
        match op {
            Op::Spawn {
                via,
                queue,
                group,
                steps,
                panic,
                keep,
                faults,
            } => self.spawn(*via, *queue, *group, steps, *panic, *keep, *faults),
            Op::RemoteSpawn {
                queue,
                group,
                steps,
                panic,
                from_thread,
                faults,
            } => self.remote_spawn(*queue, *group, steps, *panic, *from_thread, *faults),
            Op::Open { gate, from_thread } => self.open(*gate, *from_thread),
            Op::Abort {
                handle,
                from_thread,
            } => {
                if let Some(i) = self.pick(*handle) {
                    self.abort(i, *from_thread);
                }
            }
            Op::DropHandle { handle } => {
                if let Some(i) = self.pick(*handle) {
                    drop(self.handles.swap_remove(i));
                }
            }
            Op::Poll { handle } => {
                if let Some(i) = self.pick(*handle) {
                    let mut cx = Context::from_waker(Waker::noop());
                    self.poll_handle(i, &mut cx, false);
                }
            }
            Op::PollWaker { handle } => {
                if let Some(i) = self.pick(*handle) {
                    self.poll_with_panicking_waker(i);
                }
            }
            Op::AwaitTurn { handle } => {
                if let Some(i) = self.pick(*handle) {
                    return self.await_turn(i);
                }
            }
            Op::Join { handle, queue } => {
                if let Some(i) = self.pick(*handle) {
                    self.join(i, *queue);
                }
            }
            Op::Run => {
                return self.drive(|ex| {
                    ex.run_until_stalled();
                })
            }
            Op::Turns(n) => return self.turns(*n),
            Op::SetShares { queue, shares } => self.set_shares(*queue, *shares),
            Op::Advance(us) => self.clock.advance(Duration::from_micros(*us as u64)),
            Op::ArmClock(n) => self.world.clock_countdown.store((*n).max(1) as u32, SeqCst),
            Op::ArmScheduler { method, n } => {
                let i = SCHED_METHODS.iter().position(|m| m == method).unwrap();
                self.world.sched_countdown[i].store((*n).max(1) as u32, SeqCst);
            }
        }
        false
    }

    /// Opens every gate and runs until every task ended (bounded).
    fn drain(&mut self) {
        let mut settled = false;
        for _ in 0..(MAX_STEPS + 4) {
            for g in &self.world.gates {
                g.open();
            }
            settled = self.run_to_stall();
            if self
                .world
                .tracks()
                .iter()
                .all(|t| !t.accepted.load(SeqCst) || t.ended())
            {
                break;
            }
        }
        self.check_stats("after the drain", settled);
        for t in self.world.tracks() {
            if !t.accepted.load(SeqCst) {
                continue;
            }
            let lost =
                !t.completed.load(SeqCst) && !t.panicked.load(SeqCst) && !t.aborted.load(SeqCst);
            if lost || !t.ended() {
                self.world.violate(format!(
                    "task lost: every gate was opened {} times and it did not finish: {}",
                    MAX_STEPS + 4,
                    t.describe()
                ));
            }
        }
    }

    /// Drops the executor, then checks handles, spawns after shutdown and
    /// stale wakers.
    fn shutdown(&mut self) {
        let ex = self.ex.as_ref().unwrap();
        let spawner = ex.spawner();
        let qh = ex.queue(1).unwrap();
        let remote = ex.remote_spawner();
        let w = self.world.clone();
        w.shutdown.store(true, SeqCst);
        let ex = self.ex.take();
        if catch_unwind(AssertUnwindSafe(move || drop(ex))).is_err() {
            w.violate("a panic left the executor's drop".into());
        }
        CTX.with(|c| *c.borrow_mut() = None);
        // Every handle resolves at once.
        let mut cx = Context::from_waker(Waker::noop());
        while !self.handles.is_empty() {
            let i = self.handles.len() - 1;
            if !self.poll_handle(i, &mut cx, true) {
                let h = self.handles.pop().unwrap();
                w.violate(format!(
                    "handle pending after the executor was dropped: {}",
                    h.track().describe()
                ));
            }
        }
        // Spawning by every path is refused, and drops the future once.
        let spawn_refused =
            |name: &str, f: &dyn Fn(Probe<std::future::Ready<()>>) -> Result<(), SpawnError>| {
                let t = w.new_track(Kind::Refused, 0, false, None, Faults::NONE);
                let r = f(probe(&w, &t, std::future::ready(())));
                if r != Err(SpawnError::Shutdown) {
                    w.violate(format!("{name} after shutdown: {r:?}"));
                }
                if t.future_drops.load(SeqCst) != 1 || t.polls.load(SeqCst) != 0 {
                    w.violate(format!("{name} after shutdown: {}", t.describe()));
                }
            };
        spawn_refused("Spawner::spawn", &|f| spawner.spawn(0, f).map(drop));
        spawn_refused("QueueHandle::spawn", &|f| qh.spawn(f).map(drop));
        spawn_refused("TaskBuilder::spawn", &|f| qh.task().spawn(f).map(drop));
        spawn_refused("RemoteSpawner::spawn", &|f| remote.spawn(2, f).map(drop));
        if spawner.set_shares(0, 1) != Err(SharesError::Shutdown) {
            w.violate("set_shares after shutdown".into());
        }
        // Stale wakers: on this thread and on another.
        self.open(0, false);
        self.open(1, true);
        self.open(2, true);
    }

    fn final_checks(&self) {
        for t in self.world.tracks() {
            let completed = t.completed.load(SeqCst);
            if t.future_drops.load(SeqCst) != 1 {
                self.world.violate(format!(
                    "future dropped {} times: {}",
                    t.future_drops.load(SeqCst),
                    t.describe()
                ));
            }
            let out = t.output_drops.load(SeqCst);
            if out != completed as u32 {
                self.world
                    .violate(format!("output dropped {out} times: {}", t.describe()));
            }
            let d = t.delivered.load(SeqCst);
            if d > 1 || (d == 1 && !t.outcome_completed()) {
                self.world
                    .violate(format!("output delivered {d} times: {}", t.describe()));
            }
            if completed && t.panicked.load(SeqCst) {
                self.world
                    .violate(format!("completed and panicked: {}", t.describe()));
            }
            if !t.accepted.load(SeqCst) && t.polls.load(SeqCst) != 0 {
                self.world
                    .violate(format!("polled but never spawned: {}", t.describe()));
            }
        }
        let fires = self.world.fires.lock().unwrap().clone();
        for (id, f) in fires.iter().enumerate() {
            if f.fate == Fate::Test && f.absorbed != 1 {
                self.world.violate(format!(
                    "injected panic #{id} should have reached the test's code once: {f:?}"
                ));
            }
        }
    }
}

/// Runs one case; returns the violations found (empty: all invariants
/// held). A panic out of the executor itself propagates.
pub fn run_case(cfg: &Config, ops: &[Op]) -> Vec<String> {
    quiet_injected_panics();
    let world = Arc::new(World {
        tracks: Mutex::new(Vec::new()),
        violations: Mutex::new(Vec::new()),
        gates: Default::default(),
        shares: Mutex::new(cfg.shares),
        propagate: cfg.policy == PanicPolicy::Propagate,
        shutdown: AtomicBool::new(false),
        fires: Mutex::new(Vec::new()),
        sink_resumed_at: AtomicUsize::new(0),
        clock_countdown: AtomicU32::new(0),
        sched_countdown: Default::default(),
    });
    let custom = || FaultySched {
        ids: VecDeque::new(),
        lifo: cfg.custom_lifo,
        world: world.clone(),
        streaks: Default::default(),
    };
    let clock = ManualClock::new();
    let first = if cfg.custom_on_0 {
        QueueSpec::new(cfg.shares[0]).scheduler(custom())
    } else {
        QueueSpec::new(cfg.shares[0])
    };
    let mut b = Builder::new()
        .clock(FaultyClock {
            inner: clock.clone(),
            world: world.clone(),
        })
        .read_clock_every_poll(true)
        .panic_policy(cfg.policy)
        .base_slice(Duration::from_micros(20))
        .min_run(Duration::from_micros(5))
        .max_polls_per_turn(cfg.max_polls.max(1))
        .preemption(cfg.preemption)
        .general_pick(cfg.general_pick)
        .latency_histograms(cfg.latency)
        .queue_with(0usize, first)
        .queue_with(1, QueueSpec::new(cfg.shares[1]).scheduler(Las::new()))
        .queue_with(
            2,
            QueueSpec::new(cfg.shares[2])
                .scheduler(
                    Las::quantized(Duration::from_micros(10), 4)
                        .max_wait(Duration::from_micros(50)),
                )
                .slice(Duration::from_micros(7)),
        )
        .queue_with(
            CUSTOM_QUEUE,
            QueueSpec::new(cfg.shares[CUSTOM_QUEUE]).scheduler(custom()),
        );
    if cfg.stall_detector {
        b = b.stall_detector(Duration::from_micros(40), |_| {});
    }
    let ex = b.build().expect("valid configuration");
    CTX.with(|c| {
        *c.borrow_mut() = Some(TaskCtx {
            spawner: ex.spawner(),
            clock: clock.clone(),
        })
    });
    let mut case = Case {
        world: world.clone(),
        ex: Some(ex),
        clock,
        handles: Vec::new(),
    };
    for (i, op) in ops.iter().enumerate() {
        let settled = case.apply(op);
        case.check_stats(&format!("after op {i} ({op:?})"), settled);
        if !world.violations.lock().unwrap().is_empty() {
            break;
        }
    }
    if cfg.drain && world.violations.lock().unwrap().is_empty() {
        case.drain();
    }
    case.shutdown();
    drop(case.handles.drain(..));
    case.final_checks();
    CTX.with(|c| *c.borrow_mut() = None);
    if std::env::var_os("API_MODEL_SUMMARY").is_some() {
        let t = world.tracks();
        let c = |f: &dyn Fn(&Track) -> bool| t.iter().filter(|t| f(t)).count();
        let fires = world.fires.lock().unwrap().clone();
        let fc = |fate: Fate| fires.iter().filter(|f| f.fate == fate).count();
        eprintln!(
            "SUMMARY {:?} ops {} tracks {} accepted {} completed {} panicked {} aborted {} delivered {} polls {} remote {} child {} joiner {} fires task {} sink {} swallowed {} test {} shutdown {} surfaced {}",
            cfg.policy,
            ops.len(),
            t.len(),
            c(&|t| t.accepted.load(SeqCst)),
            c(&|t| t.outcome_completed()),
            c(&|t| t.task_panicked()),
            c(&|t| t.aborted.load(SeqCst)),
            c(&|t| t.delivered.load(SeqCst) == 1),
            t.iter().map(|t| t.polls.load(SeqCst)).sum::<u32>(),
            c(&|t| t.remote),
            c(&|t| t.kind == Kind::Child),
            c(&|t| t.kind == Kind::Joiner),
            fc(Fate::Task),
            fc(Fate::Sink),
            fc(Fate::Swallowed),
            fc(Fate::Test),
            fc(Fate::Shutdown),
            fires.iter().filter(|f| f.surfaced > 0).count(),
        );
    }
    let v = std::mem::take(&mut *world.violations.lock().unwrap());
    v
}
