//! The interpreter of random pool sequences shared by `tests/pool_prop.rs`
//! (proptest) and the `pool_ops` fuzz target
//! (`fuzz/fuzz_targets/pool_ops.rs` includes this file by path): the ops,
//! the tracked tasks, the injected faults and the invariants.
//!
//! One [`Pool`] of one to three unpinned standalone cores; each core
//! declares its own set of queues, a subset of the keys `"a"`, `"b"` and
//! `"c"` in an order of its own, so that the same key sits at different
//! positions on different cores and some keys are missing on some cores.
//! The ops submit tasks across cores by every form (`try_spawn_on`,
//! `spawn_on`, `submit_to`), to cores and queues that may not exist, open
//! gates the tasks wait on (from the test thread: every wake of a core is
//! a cross-thread wake), hold a core's thread busy (so that submissions
//! wait in its inbox and remote backlog) and release it, abort tasks from
//! the test thread, change shares,
//! take the pool's statistics, and shut the pool down at a random point,
//! with a grace period of zero or after every gate was opened. Tasks yield
//! a few times, may wait on a gate, and end with their output or with a
//! panic; a task's future may panic in its destructor.
//!
//! The invariants, checked after every op and at the end:
//!
//! * every submission the pool refused was refused for a reason the model
//!   knows (no such core, a queue the core did not declare, a full
//!   cross-core queue for `try_spawn_on`), and its closure never ran;
//! * every accepted submission ends exactly once: its handle reads its own
//!   output, its own panic (the task's, or its future's destructor's at
//!   completion), or a cancellation; a closure runs at most once, and
//!   every future it built is dropped exactly once by the time the pool's
//!   threads are joined;
//! * the shutdown report counts every accepted submission that was never
//!   finished and not aborted before the shutdown (tasks alive, spawns
//!   waiting in a core's remote backlog or inbox), exactly, per core and
//!   per queue: those whose handle reads `Cancelled`, and those whose
//!   future was dropped unfinished and panicked in its destructor; after a
//!   shutdown that followed the opening of every gate, nothing is
//!   cancelled and the report is clean;
//! * `PoolStats::merged` equals the sum, queue by queue matched by name,
//!   over the union of the cores' queues in the order of first appearance
//!   (core by core), of the cores' own statistics; each core's statistics
//!   list its own queues in its own order, and no queue has ended more
//!   tasks than it admitted;
//! * after the shutdown, every submission form and a second shutdown are
//!   refused with their typed errors.
//!
//! The cores' threads interleave as the operating system runs them, so
//! how many tasks a zero-grace shutdown cancels varies from run to run;
//! every invariant holds exactly for every interleaving. Each op that
//! waits (a `spawn_on`, a `submit_to`, an aborted task's handle, the
//! statistics, the shutdown) waits for an event the pool must deliver,
//! never for time.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::num::NonZeroUsize;
use std::panic::panic_any;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use tourbillon::config::MAX_SHARES;
use tourbillon::pool::{
    ControlError, Placement, Pool, PoolStats, ShutdownError, ShutdownReport, SubmitError,
    TrySubmitError,
};
use tourbillon::remote::RemoteJoinHandle;
use tourbillon::stats::ExecutorStats;
use tourbillon::task::JoinError;
use tourbillon::Builder;

/// The queue keys a core may declare.
pub const KEYS: [&str; 3] = ["a", "b", "c"];
/// The most cores of a case.
pub const MAX_CORES: usize = 3;
/// The gates tasks may wait on.
pub const GATES: usize = 2;
/// The most yields of a task.
pub const MAX_YIELDS: u8 = 4;

/// A case's pool.
#[derive(Debug, Clone)]
pub struct Config {
    /// Per core (one to [`MAX_CORES`]), the keys it declares, as indices
    /// into [`KEYS`], in declaration order.
    pub queue_sets: Vec<Vec<u8>>,
    /// The capacity of each core's cross-core queue.
    pub capacity: u8,
}

impl Config {
    /// The configuration with its sets made valid: one to [`MAX_CORES`]
    /// cores, each declaring each of its keys once and at least one.
    pub fn normalized(&self) -> Config {
        let mut sets: Vec<Vec<u8>> = self
            .queue_sets
            .iter()
            .take(MAX_CORES)
            .map(|set| {
                let mut keys = Vec::new();
                for &k in set {
                    let k = k % KEYS.len() as u8;
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
                if keys.is_empty() {
                    keys.push(0);
                }
                keys
            })
            .collect();
        if sets.is_empty() {
            sets.push(vec![0]);
        }
        Config {
            queue_sets: sets,
            capacity: self.capacity.max(1),
        }
    }
}

/// How a task is submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `Pool::try_spawn_on`: refused when the core's queue is full.
    TrySpawnOn,
    /// `Pool::spawn_on`, awaited: waits for room.
    SpawnOn,
    /// `Pool::submit_to`, awaited to the task's end (a task that waits on
    /// a gate is submitted with `spawn_on` instead: only the test thread
    /// opens gates).
    SubmitTo,
}

/// Every submission form.
pub const VIAS: [Via; 3] = [Via::TrySpawnOn, Via::SpawnOn, Via::SubmitTo];

/// What a task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Task {
    /// `yield_now().await` this many times first.
    pub yields: u8,
    /// Then wait until this gate is open.
    pub gate: Option<u8>,
    /// Then panic instead of returning its output.
    pub panic: bool,
    /// Its future panics in its destructor (unless already unwinding).
    pub drop_panics: bool,
}

/// One step of a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Submit `task` to core `core` (may be out of range), queue
    /// `KEYS[key]` (may be undeclared there).
    Submit {
        via: Via,
        core: u8,
        key: u8,
        task: Task,
    },
    /// Open gate `g` (for good) from the test thread.
    Open(u8),
    /// Hold core `core` (modulo the cores) busy: a task of its first queue
    /// blocks the core's thread until [`Op::Release`], an op that waits
    /// for the cores (abort, shares, statistics), or the shutdown (which
    /// releases it from another thread as it starts), so that later
    /// submissions wait in the core's inbox and remote backlog. While a
    /// core is held, submissions to it use `try_spawn_on`.
    Hold(u8),
    /// Release every held core.
    Release,
    /// Abort the `n`-th (modulo) unfinished submission from the test
    /// thread and wait for its handle.
    Abort(u8),
    /// `Pool::set_shares(core, key, shares)`.
    SetShares { core: u8, key: u8, shares: u32 },
    /// Take the pool's statistics and check them.
    Stats,
    /// Shut the pool down: with a grace period of zero, or after opening
    /// every gate, with a grace period every task finishes in. Ends the
    /// case (later ops are not run).
    Shutdown { graceful: bool },
}

/// The panic a task's script ends with.
struct TaskPanic;
/// The panic of a task future's destructor.
struct DropPanic;

/// Keeps the injected panics quiet (other panics go to the previous hook,
/// e.g. libFuzzer's abort).
fn quiet_injected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            if p.is::<TaskPanic>() || p.is::<DropPanic>() {
                return;
            }
            prev(info)
        }));
    });
}

/// A gate that opens once and stays open.
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Gate {
    fn open(&self) {
        self.open.store(true, SeqCst);
        let wakers = std::mem::take(&mut *self.wakers.lock().unwrap());
        for w in wakers {
            w.wake();
        }
    }

    async fn wait(&self) {
        poll_fn(|cx| {
            if self.open.load(SeqCst) {
                return Poll::Ready(());
            }
            self.wakers.lock().unwrap().push(cx.waker().clone());
            // Checked again after the waker is in: an `open` in between
            // took the list before the push, or sees the waker.
            if self.open.load(SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// What the model knows of one submission's task.
#[derive(Default)]
struct Track {
    /// The closure ran (on the core, at the task's first poll).
    made: AtomicU32,
    /// The future it built was dropped.
    dropped: AtomicU32,
    /// The script reached its end (output or panic).
    finished: AtomicBool,
}

/// Counts the drop of a task's future; panics if asked to.
struct DropGuard {
    track: Arc<Track>,
    panics: bool,
}

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.track.dropped.fetch_add(1, SeqCst);
        if self.panics && !thread::panicking() {
            panic_any(DropPanic);
        }
    }
}

/// How a submission's task ended, as its handle read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Output,
    TaskPanic,
    DropPanic,
    Cancelled,
}

/// One accepted submission.
struct Submission {
    task: Task,
    core: usize,
    key: &'static str,
    track: Arc<Track>,
    handle: Option<RemoteJoinHandle<u32>>,
    aborted: bool,
    outcome: Option<Outcome>,
}

impl Submission {
    /// Ended without finishing its script: cancelled, or its future was
    /// dropped unfinished and panicked in its destructor.
    fn dropped_unfinished(&self) -> bool {
        match self.outcome {
            Some(Outcome::Cancelled) => true,
            Some(Outcome::DropPanic) => !self.track.finished.load(SeqCst),
            _ => false,
        }
    }
}

/// Wakes the test thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `f` to its end on this thread (parks between polls).
fn wait<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

struct Case {
    cfg: Config,
    pool: Pool<&'static str>,
    gates: Arc<[Gate; GATES]>,
    subs: Vec<Submission>,
    /// Closures of refused submissions: each must never have run.
    refused: Vec<Arc<Track>>,
    violations: Vec<String>,
    /// Set by the shutdown op.
    report: Option<ShutdownReport>,
    /// The held cores, and what releases each.
    holds: Vec<(usize, mpsc::Sender<()>)>,
}

impl Case {
    fn cores(&self) -> usize {
        self.cfg.queue_sets.len()
    }

    /// Whether core `core` exists and declares `key`.
    fn declares(&self, core: usize, key: &str) -> bool {
        self.cfg
            .queue_sets
            .get(core)
            .is_some_and(|set| set.iter().any(|&k| KEYS[k as usize] == key))
    }

    fn violation(&mut self, v: String) {
        self.violations.push(v);
    }

    /// The closure of a submission: builds the task's future on the core.
    fn make(
        &self,
        index: u32,
        task: Task,
        track: &Arc<Track>,
    ) -> impl FnOnce() -> std::pin::Pin<Box<dyn Future<Output = u32>>> + Send + 'static {
        let track = track.clone();
        let gates = self.gates.clone();
        move || {
            track.made.fetch_add(1, SeqCst);
            let guard = DropGuard {
                track: track.clone(),
                panics: task.drop_panics,
            };
            Box::pin(async move {
                let guard = guard;
                for _ in 0..task.yields {
                    tourbillon::task::yield_now().await;
                }
                if let Some(g) = task.gate {
                    gates[g as usize].wait().await;
                }
                guard.track.finished.store(true, SeqCst);
                if task.panic {
                    panic_any(TaskPanic);
                }
                drop(guard);
                index
            })
        }
    }

    /// What a handle's result says of its task.
    fn outcome(&mut self, index: usize, result: Result<u32, JoinError>) -> Outcome {
        match result {
            Ok(v) => {
                if v as usize != index {
                    self.violation(format!("submission {index} read the output {v}"));
                }
                Outcome::Output
            }
            Err(e) if e.is_cancelled() => Outcome::Cancelled,
            Err(e) => {
                let p = e.into_panic();
                if p.is::<TaskPanic>() {
                    Outcome::TaskPanic
                } else if p.is::<DropPanic>() {
                    Outcome::DropPanic
                } else {
                    self.violation(format!("submission {index} read a foreign panic"));
                    Outcome::TaskPanic
                }
            }
        }
    }

    /// Records how submission `index` ended and checks that it fits the
    /// task's script.
    fn ended(&mut self, index: usize, result: Result<u32, JoinError>) {
        let outcome = Some(self.outcome(index, result));
        self.subs[index].outcome = outcome;
        let sub = &self.subs[index];
        let (task, finished) = (sub.task, sub.track.finished.load(SeqCst));
        let ok = match outcome {
            None => true,
            Some(Outcome::Output) => finished && !task.panic && !task.drop_panics,
            Some(Outcome::TaskPanic) => finished && task.panic,
            Some(Outcome::DropPanic) => task.drop_panics && (!finished || !task.panic),
            Some(Outcome::Cancelled) => !finished,
        };
        if !ok {
            self.violation(format!(
                "submission {index} ({task:?}) ended {outcome:?}, finished: {finished}"
            ));
        }
    }

    fn submit(&mut self, via: Via, core: u8, key: u8, task: Task) {
        let core = core as usize % (MAX_CORES + 1);
        let key = KEYS[key as usize % KEYS.len()];
        let task = Task {
            yields: task.yields % (MAX_YIELDS + 1),
            gate: task.gate.map(|g| g % GATES as u8),
            ..task
        };
        let via = if self.holds.iter().any(|&(c, _)| c == core) {
            // A held core polls nothing: only the form that does not wait.
            Via::TrySpawnOn
        } else if via == Via::SubmitTo && task.gate.is_some() {
            Via::SpawnOn
        } else {
            via
        };
        let index = self.subs.len() as u32;
        let track = Arc::new(Track::default());
        let make = self.make(index, task, &track);
        let known = core < self.cores();
        let declared = self.declares(core, key);
        let accepted = match via {
            Via::TrySpawnOn => match self.pool.try_spawn_on(core, key, make) {
                Ok(h) => Some(Some(h)),
                Err(TrySubmitError::UnknownCore { core: c, .. }) if !known && c == core => None,
                Err(TrySubmitError::UnknownQueue(..)) if known && !declared => None,
                // Full: the tasks before it have not been polled yet.
                Err(TrySubmitError::Full(_)) if declared => None,
                Err(e) => {
                    self.violation(format!("try_spawn_on({core}, {key}) refused: {e}"));
                    None
                }
            },
            Via::SpawnOn => match wait(self.pool.spawn_on(core, key, make)) {
                Ok(h) => Some(Some(h)),
                Err(e) => {
                    self.refusal(core, key, known, declared, e);
                    None
                }
            },
            Via::SubmitTo => match wait(self.pool.submit_to(core, key, make)) {
                Ok(v) => {
                    self.push(task, core, key, &track, None);
                    self.ended(index as usize, Ok(v));
                    return;
                }
                Err(SubmitError::Join(e)) => {
                    self.push(task, core, key, &track, None);
                    self.ended(index as usize, Err(e));
                    return;
                }
                Err(e) => {
                    self.refusal(core, key, known, declared, e);
                    None
                }
            },
        };
        match accepted {
            Some(handle) => self.push(task, core, key, &track, handle),
            None => self.refused.push(track),
        }
    }

    fn push(
        &mut self,
        task: Task,
        core: usize,
        key: &'static str,
        track: &Arc<Track>,
        handle: Option<RemoteJoinHandle<u32>>,
    ) {
        if !self.declares(core, key) {
            self.violation(format!("a submission to {core}/{key} was accepted"));
        }
        self.subs.push(Submission {
            task,
            core,
            key,
            track: track.clone(),
            handle,
            aborted: false,
            outcome: None,
        });
    }

    /// Checks the reason an awaited submission was refused.
    fn refusal(&mut self, core: usize, key: &str, known: bool, declared: bool, e: SubmitError) {
        let expected = match &e {
            SubmitError::UnknownCore { core: c, .. } => !known && *c == core,
            SubmitError::UnknownQueue(_) => known && !declared,
            _ => false,
        };
        if !expected {
            self.violation(format!("submission to {core}/{key} refused: {e}"));
        }
    }

    fn abort(&mut self, n: u8) {
        let open: Vec<usize> = (0..self.subs.len())
            .filter(|&i| self.subs[i].outcome.is_none() && self.subs[i].handle.is_some())
            .collect();
        if open.is_empty() {
            return;
        }
        let i = open[n as usize % open.len()];
        let handle = self.subs[i].handle.take().expect("an open handle");
        handle.abort();
        self.subs[i].aborted = true;
        self.ended(i, wait(handle));
    }

    fn hold(&mut self, core: u8) {
        let core = core as usize % self.cores();
        if self.holds.iter().any(|&(c, _)| c == core) {
            return;
        }
        let key = KEYS[self.cfg.queue_sets[core][0] as usize];
        let index = self.subs.len();
        let track = Arc::new(Track::default());
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (held_tx, held_rx) = mpsc::channel::<()>();
        let t = track.clone();
        let make = move || {
            t.made.fetch_add(1, SeqCst);
            let guard = DropGuard {
                track: t,
                panics: false,
            };
            async move {
                let _ = held_tx.send(());
                let _ = release_rx.recv();
                guard.track.finished.store(true, SeqCst);
                drop(guard);
                index as u32
            }
        };
        match self.pool.try_spawn_on(core, key, make) {
            Ok(h) => {
                self.push(Task::default(), core, key, &track, Some(h));
                // Held once its task blocks the thread.
                if held_rx.recv().is_ok() {
                    self.holds.push((core, release_tx));
                } else {
                    self.violation(format!("the hold of core {core} never ran"));
                }
            }
            // Its cross-core queue is full: not held.
            Err(TrySubmitError::Full(_)) => self.refused.push(track),
            Err(e) => self.violation(format!("the hold of core {core} was refused: {e}")),
        }
    }

    fn set_shares(&mut self, core: u8, key: u8, shares: u32) {
        let core = core as usize % (MAX_CORES + 1);
        let key = KEYS[key as usize % KEYS.len()];
        let r = wait(self.pool.set_shares(core, key, shares));
        let ok = match &r {
            Ok(()) => self.declares(core, key) && shares > 0 && shares <= MAX_SHARES,
            Err(ControlError::UnknownCore { .. }) => core >= self.cores(),
            Err(ControlError::Shares(_)) => {
                !self.declares(core, key) || shares == 0 || shares > MAX_SHARES
            }
            Err(_) => false,
        };
        if !ok {
            self.violation(format!("set_shares({core}, {key}, {shares}) gave {r:?}"));
        }
    }

    fn stats(&mut self) {
        let stats = wait(self.pool.stats());
        if stats.cores.len() != self.cores() {
            self.violation(format!("{} cores in the stats", stats.cores.len()));
            return;
        }
        for (c, s) in stats.cores.iter().enumerate() {
            let Some(s) = s else {
                self.violation(format!("core {c} gave no stats while running"));
                continue;
            };
            let names: Vec<&str> = s.queues.iter().map(|q| q.name.as_str()).collect();
            let declared: Vec<String> = self.cfg.queue_sets[c]
                .iter()
                .map(|&k| debug_name(KEYS[k as usize]))
                .collect();
            if names != declared {
                self.violation(format!("core {c} lists {names:?}, declared {declared:?}"));
            }
            for q in &s.queues {
                if q.completed + q.cancelled + q.panicked > q.spawned {
                    self.violation(format!(
                        "core {c} queue {} ended more than it admitted: {q:?}",
                        q.name
                    ));
                }
            }
        }
        self.check_merged(&stats);
    }

    /// `merged()` is the sum by name over the union of the cores' queues.
    fn check_merged(&mut self, stats: &PoolStats) {
        let Some(merged) = stats.merged() else {
            self.violation("merged() gave nothing while every core answered".into());
            return;
        };
        let alive: Vec<&ExecutorStats> = stats.cores.iter().flatten().collect();
        let mut order: Vec<String> = Vec::new();
        let mut sums: BTreeMap<String, [u64; 6]> = BTreeMap::new();
        for s in &alive {
            for q in &s.queues {
                if !order.contains(&q.name) {
                    order.push(q.name.clone());
                }
                let e = sums.entry(q.name.clone()).or_default();
                for (slot, v) in e.iter_mut().zip([
                    q.spawned,
                    q.completed,
                    q.cancelled,
                    q.panicked,
                    q.polls,
                    q.runs,
                ]) {
                    *slot += v;
                }
            }
        }
        let names: Vec<String> = merged.queues.iter().map(|q| q.name.clone()).collect();
        if names != order {
            self.violation(format!("merged() lists {names:?}, the union is {order:?}"));
            return;
        }
        for q in &merged.queues {
            let got = [
                q.spawned,
                q.completed,
                q.cancelled,
                q.panicked,
                q.polls,
                q.runs,
            ];
            if got != sums[&q.name] {
                self.violation(format!(
                    "merged() queue {}: {got:?}, the sum is {:?}",
                    q.name, sums[&q.name]
                ));
            }
        }
        let polls: u64 = alive.iter().map(|s| s.polls).sum();
        let live: usize = alive.iter().map(|s| s.live_tasks).sum();
        if merged.polls != polls || merged.live_tasks != live {
            self.violation(format!(
                "merged() polls {} live {}, the sums are {polls} and {live}",
                merged.polls, merged.live_tasks
            ));
        }
    }

    fn shutdown(&mut self, graceful: bool) {
        // The held cores are released as the shutdown starts.
        let holds = std::mem::take(&mut self.holds);
        let releaser = thread::spawn(move || drop(holds));
        let grace = if graceful {
            for g in self.gates.iter() {
                g.open();
            }
            Duration::from_secs(600)
        } else {
            Duration::ZERO
        };
        let report = self.pool.shutdown(grace);
        releaser.join().expect("the releaser");
        let report = match report {
            Ok(r) => r,
            Err(e) => {
                self.violation(format!("shutdown refused: {e}"));
                return;
            }
        };
        // Every handle resolves once the threads are joined.
        for i in 0..self.subs.len() {
            if let Some(h) = self.subs[i].handle.take() {
                self.ended(i, wait(h));
            }
        }
        self.check_report(&report, graceful);
        // Everything is refused from now on.
        let track = Arc::new(Track::default());
        let make = self.make(u32::MAX, Task::default(), &track);
        match self.pool.try_spawn_on(0, KEYS[0], make) {
            Err(TrySubmitError::Shutdown(_)) => {}
            Err(TrySubmitError::UnknownQueue(..)) if !self.declares(0, KEYS[0]) => {}
            other => self.violation(format!("try_spawn_on after shutdown: {:?}", other.err())),
        }
        let make = self.make(u32::MAX, Task::default(), &track);
        match wait(self.pool.spawn_on(0, KEYS[0], make)) {
            Err(SubmitError::Shutdown) => {}
            Err(SubmitError::UnknownQueue(_)) if !self.declares(0, KEYS[0]) => {}
            other => self.violation(format!("spawn_on after shutdown: {:?}", other.err())),
        }
        self.refused.push(track);
        if !matches!(
            self.pool.shutdown(Duration::ZERO),
            Err(ShutdownError::AlreadyShutDown)
        ) {
            self.violation("a second shutdown was not refused".into());
        }
        self.report = Some(report);
    }

    /// The report counts exactly the accepted submissions dropped
    /// unfinished by the shutdown, per core and per queue.
    fn check_report(&mut self, report: &ShutdownReport, graceful: bool) {
        let mut expected: BTreeMap<(usize, String), usize> = BTreeMap::new();
        for s in self.subs.iter().filter(|s| !s.aborted) {
            if s.dropped_unfinished() {
                *expected.entry((s.core, debug_name(s.key))).or_default() += 1;
            }
        }
        let total: usize = expected.values().sum();
        if report.cancelled() != total {
            self.violation(format!(
                "the report counts {} cancelled, the handles {total}: {report:?}",
                report.cancelled()
            ));
        }
        let mut got: BTreeMap<(usize, String), usize> = BTreeMap::new();
        for c in &report.cores {
            if c.panic.is_some() {
                self.violation(format!("core {} panicked: {:?}", c.core, c.panic));
            }
            let by_queue: usize = c.cancelled_by_queue.iter().map(|(_, n)| n).sum();
            if by_queue != c.cancelled {
                self.violation(format!(
                    "core {}: by queue {by_queue}, in all {}",
                    c.core, c.cancelled
                ));
            }
            for (q, n) in &c.cancelled_by_queue {
                got.insert((c.core, q.clone()), *n);
            }
        }
        if got != expected {
            self.violation(format!(
                "cancelled by queue {got:?}, the handles {expected:?}"
            ));
        }
        if graceful && (total != 0 || !report.is_clean()) {
            self.violation(format!(
                "a graceful shutdown after every gate opened: {report:?}"
            ));
        }
    }

    /// The end: every closure ran at most once, every future it built was
    /// dropped once, refused closures never ran, every submission ended.
    fn check_end(&mut self) {
        for i in 0..self.subs.len() {
            let s = &self.subs[i];
            let (made, dropped) = (s.track.made.load(SeqCst), s.track.dropped.load(SeqCst));
            let outcome = s.outcome;
            if made > 1 || dropped != made {
                self.violation(format!("submission {i}: made {made}, dropped {dropped}"));
            }
            if outcome.is_none() {
                self.violation(format!("submission {i} never ended"));
            }
        }
        for t in &self.refused {
            if t.made.load(SeqCst) != 0 {
                self.violations.push("a refused closure ran".into());
            }
        }
    }
}

/// A key as a queue's name reads it (`{:?}` of the key).
fn debug_name(key: &str) -> String {
    format!("{key:?}")
}

/// Runs one case; returns the invariants it broke (empty: none).
pub fn run_case(cfg: &Config, ops: &[Op]) -> Vec<String> {
    quiet_injected_panics();
    let cfg = cfg.normalized();
    let sets = cfg.queue_sets.clone();
    let pool = Pool::builder()
        .cores(sets.len())
        .placement(Placement::Unpinned)
        .queue_capacity(NonZeroUsize::new(cfg.capacity as usize).expect("at least 1"))
        .executor(move |core| {
            sets[core]
                .iter()
                .enumerate()
                .fold(Builder::new(), |b, (i, &k)| {
                    b.queue(KEYS[k as usize], 1 + i as u32)
                })
        })
        .build()
        .expect("the pool starts");
    let mut case = Case {
        cfg,
        pool,
        gates: Arc::new(Default::default()),
        subs: Vec::new(),
        refused: Vec::new(),
        violations: Vec::new(),
        report: None,
        holds: Vec::new(),
    };
    for op in ops {
        match *op {
            Op::Submit {
                via,
                core,
                key,
                task,
            } => case.submit(via, core, key, task),
            Op::Open(g) => case.gates[g as usize % GATES].open(),
            Op::Hold(core) => case.hold(core),
            Op::Release => case.holds.clear(),
            // Each of these waits for the cores: a held core is released
            // first.
            Op::Abort(n) => {
                case.holds.clear();
                case.abort(n)
            }
            Op::SetShares { core, key, shares } => {
                case.holds.clear();
                case.set_shares(core, key, shares)
            }
            Op::Stats => {
                case.holds.clear();
                case.stats()
            }
            Op::Shutdown { graceful } => {
                case.shutdown(graceful);
                break;
            }
        }
        if !case.violations.is_empty() {
            break;
        }
    }
    if case.report.is_none() {
        // A graceful end, unless an invariant already broke.
        let graceful = case.violations.is_empty();
        case.shutdown(graceful);
    }
    case.check_end();
    case.violations
}
