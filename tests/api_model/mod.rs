//! The interpreter of random API sequences shared by `tests/api_prop.rs`
//! (proptest) and the `api_ops` fuzz target (`fuzz/fuzz_targets/api_ops.rs`
//! includes this file by path): ops, the tracked task script, and the
//! invariants.
//!
//! One executor with three queues (keys 0, 1, 2: `RunnableFifo`,
//! `Las::new()`, quantized `Las` with a starvation guard; key 3 is never
//! declared) on a [`ManualClock`]. Tasks run a small script (yield, wait for
//! a gate, open a gate, spend virtual time, spawn a child, reweight a queue)
//! and end by completing with a tracked output or by panicking. Every task
//! has a [`Track`] of thread-safe counters; the invariants are checked after
//! every op and at the end:
//!
//! * no task is polled after it completed, nor after `abort()` was called on
//!   it (from outside the executor, so the abort is always observed at the
//!   next poll boundary);
//! * every future is dropped exactly once (spawned, rejected, aborted,
//!   panicked, completed, or dropped at shutdown);
//! * every output is dropped exactly once, and delivered at most once, only
//!   to its own handle; a handle reads `Ok` only for a completed task,
//!   `Cancelled` only for an aborted task (or after shutdown), a panic only
//!   for a panicked task;
//! * `stats()` and `queue_stats()` agree with the model after every op:
//!   per queue, spawned / completed / cancelled / panicked exactly, hence
//!   spawned = completed + cancelled + panicked + live; the executor's
//!   `live_tasks` (tasks not ended: an ended task's result waits in its
//!   cell for the join handle, not in the executor) and `live_groups`; the
//!   shares;
//! * with `drain` on, once every gate has been opened often enough, every
//!   task that was neither aborted nor scripted to panic completes (no task
//!   lost);
//! * after the executor is dropped, every handle resolves at once, spawning
//!   by every path gives `SpawnError::Shutdown`, and stale wakers (woken on
//!   this thread and on another) are harmless.
//!
//! Everything is deterministic: the clock is manual, and every other thread
//! is joined before the next op. `API_MODEL_SUMMARY=1` prints, per case,
//! how many tasks completed, panicked, were aborted, etc. (with
//! `-- --nocapture`), to check what the generated cases exercise.
#![allow(dead_code)]

use std::cell::RefCell;
use std::future::{pending, poll_fn, Future};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, Once};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tourbillon::{
    try_spawn, yield_maybe, yield_now, Builder, Executor, JoinError, JoinHandle, Las, ManualClock,
    QueueSpec, RemoteJoinHandle, SharesError, SpawnError, Spawner, TaskId, MAX_SHARES,
};

pub const QUEUES: usize = 3;
pub const GATES: usize = 3;
/// The payload of scripted panics (the panic hook keeps them quiet).
pub const MARKER: &str = "api_model: scripted panic";
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

/// One API operation, performed on the test's thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Spawn a scripted task; `queue` 3 is undeclared (the spawn must fail
    /// with `UnknownQueue` and drop the future once); `keep` keeps the join
    /// handle, else it is dropped at once (detached).
    Spawn {
        via: Via,
        queue: u8,
        group: u8,
        steps: Vec<Step>,
        panic: bool,
        keep: bool,
    },
    /// `RemoteSpawner::spawn` (or `spawn_in_group`), from this thread or from
    /// another (joined) thread.
    RemoteSpawn {
        queue: u8,
        group: Option<u8>,
        steps: Vec<Step>,
        panic: bool,
        from_thread: bool,
    },
    /// Open gate `gate` from this thread or from another (joined) thread.
    Open { gate: u8, from_thread: bool },
    /// `abort()` a held handle (a remote one possibly from another thread).
    Abort { handle: u8, from_thread: bool },
    /// Drop a held handle (detach).
    DropHandle { handle: u8 },
    /// Poll a held handle once, outside the executor.
    Poll { handle: u8 },
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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            shares: [1, 2, 3],
            max_polls: 4,
            preemption: true,
            general_pick: false,
            latency: false,
            stall_detector: false,
            drain: true,
        }
    }
}

/// What the model knows about one task (or one rejected spawn).
pub struct Track {
    pub n: usize,
    pub queue: usize,
    pub remote: bool,
    pub group: Option<u8>,
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
    /// The body returned its output.
    pub completed: AtomicBool,
    /// The body reached its scripted panic.
    pub panicked: AtomicBool,
    pub output_drops: AtomicU32,
    pub delivered: AtomicU32,
    /// `abort()` was called while the task had not ended.
    pub aborted: AtomicBool,
    pub kind: Kind,
}

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
    fn describe(&self) -> String {
        format!(
            "task #{} ({:?}, queue {}, remote {}, group {:?}, polls {}, completed {}, panicked {}, aborted {}, accepted {}, ended {})",
            self.n,
            self.kind,
            self.queue,
            self.remote,
            self.group,
            self.polls.load(SeqCst),
            self.completed.load(SeqCst),
            self.panicked.load(SeqCst),
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

/// The state shared by the test's thread, the tasks and other threads.
pub struct World {
    pub tracks: Mutex<Vec<Arc<Track>>>,
    pub violations: Mutex<Vec<String>>,
    pub gates: [Gate; GATES],
    pub shares: Mutex<[u32; QUEUES]>,
}

impl World {
    fn violate(&self, v: String) {
        self.violations.lock().unwrap().push(v);
    }

    fn new_track(&self, kind: Kind, queue: usize, remote: bool, group: Option<u8>) -> Arc<Track> {
        let mut tracks = self.tracks.lock().unwrap();
        let t = Arc::new(Track {
            n: tracks.len(),
            queue,
            remote,
            group,
            has_handle: AtomicBool::new(false),
            handle_alive: AtomicBool::new(false),
            handle_read: AtomicBool::new(false),
            accepted: AtomicBool::new(false),
            remote_pending: AtomicBool::new(false),
            polls: AtomicU32::new(0),
            future_drops: AtomicU32::new(0),
            completed: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
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
}

/// A task's output: counts its drops.
pub struct Out {
    track: Arc<Track>,
}

impl Drop for Out {
    fn drop(&mut self) {
        self.track.output_drops.fetch_add(1, SeqCst);
    }
}

/// Wraps a task's future: counts polls and drops, and flags polls after
/// completion or after an abort.
struct Probe<F> {
    inner: Pin<Box<F>>,
    track: Arc<Track>,
    world: Arc<World>,
    done: bool,
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
        let r = this.inner.as_mut().poll(cx);
        if r.is_ready() {
            this.done = true;
        }
        r
    }
}

impl<F> Drop for Probe<F> {
    fn drop(&mut self) {
        if self.track.future_drops.fetch_add(1, SeqCst) != 0 {
            self.world
                .violate(format!("future dropped twice: {}", self.track.describe()));
        }
    }
}

fn probe<F: Future>(world: &Arc<World>, track: &Arc<Track>, inner: F) -> Probe<F> {
    Probe {
        inner: Box::pin(inner),
        track: track.clone(),
        world: world.clone(),
        done: false,
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
        std::panic::panic_any(MARKER);
    }
    track.completed.store(true, SeqCst);
    Out { track }
}

/// A child: spawned with the free `try_spawn` onto the current task's queue,
/// detached; it yields once and completes.
fn spawn_child(world: &Arc<World>, parent: &Arc<Track>) {
    let t = world.new_track(Kind::Child, parent.queue, false, None);
    let body = {
        let t = t.clone();
        async move {
            yield_now().await;
            t.completed.store(true, SeqCst);
            Out { track: t }
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

/// A held local join handle: tells its track when it is dropped.
struct Held {
    h: JoinHandle<Out>,
    track: Arc<Track>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.track.handle_alive.store(false, SeqCst);
    }
}

enum Handle {
    Local(Held),
    Remote(Arc<Track>, RemoteJoinHandle<Out>),
}

impl Handle {
    fn track(&self) -> &Arc<Track> {
        match self {
            Handle::Local(h) => &h.track,
            Handle::Remote(t, _) => t,
        }
    }
}

/// Checks a result read from `t`'s handle and drops it.
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
            if !t.completed.load(SeqCst) {
                world.violate(format!("Ok from an uncompleted task: {}", t.describe()));
            }
            if t.delivered.fetch_add(1, SeqCst) != 0 {
                world.violate(format!("output delivered twice: {}", t.describe()));
            }
            drop(out);
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
                if t.completed.load(SeqCst) && !local_shutdown {
                    world.violate(format!(
                        "Cancelled but it completed (output lost): {}",
                        t.describe()
                    ));
                }
                if t.panicked.load(SeqCst) && !local_shutdown {
                    world.violate(format!("Cancelled but it panicked: {}", t.describe()));
                }
            } else if e.is_panic() {
                if !t.panicked.load(SeqCst) {
                    world.violate(format!("panic error from {}", t.describe()));
                }
                let msg = e.to_string();
                let p = e.into_panic();
                if p.downcast_ref::<&str>() != Some(&MARKER) {
                    world.violate(format!("wrong panic payload: {msg}"));
                }
            } else {
                world.violate(format!("JoinError neither cancelled nor panic: {e:?}"));
            }
        }
    }
}

/// Keeps the scripted panics quiet (other panics go to the previous hook,
/// e.g. libFuzzer's abort).
pub fn quiet_scripted_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() == Some(&MARKER) {
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

    fn spawn(&mut self, via: Via, queue: u8, group: u8, steps: &[Step], panic: bool, keep: bool) {
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
        let t = w.new_track(Kind::Task, q, false, grouped.then_some(group % 4));
        let fut = probe(&w, &t, script(w.clone(), t.clone(), steps.to_vec(), panic));
        let g = (group % 4) as u64;
        let ex = self.ex.as_ref().unwrap();
        let r = match via {
            Via::ExecutorSpawn => ex.spawn(q, fut),
            Via::ExecutorGroup => ex.spawn_in_group(q, g, fut),
            Via::SpawnerSpawn => ex.spawner().spawn(q, fut),
            Via::SpawnerGroup => ex.spawner().spawn_in_group(q, g, fut),
            Via::QueueHandleSpawn => ex.queue(q).and_then(|h| h.spawn(fut)),
            Via::QueueHandleGroup => ex.queue(q).and_then(|h| h.spawn_in_group(g, fut)),
            Via::ExecutorTaskBuilder => ex.task(q).name("api").group(g).spawn(fut),
            Via::SpawnerTaskBuilder => ex.spawner().task(q).name("api").spawn(fut),
            Via::QueueHandleTaskBuilder => ex.queue(q).and_then(|h| h.task().group(g).spawn(fut)),
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
                    self.handles.push(Handle::Local(Held {
                        h,
                        track: t.clone(),
                    }));
                }
            }
            Err(e) => {
                if q < QUEUES {
                    w.violate(format!("spawn via {via:?} onto queue {q} failed: {e}"));
                } else if e
                    != (SpawnError::UnknownQueue {
                        queue: q.to_string(),
                    })
                {
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
    ) {
        let w = self.world.clone();
        let q = queue as usize % (QUEUES + 1);
        let t = w.new_track(Kind::Task, q, true, group.map(|g| g % 4));
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
                self.handles.push(Handle::Remote(t.clone(), h));
            }
            Err(e) => {
                if q < QUEUES
                    || e != (SpawnError::UnknownQueue {
                        queue: q.to_string(),
                    })
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
            Handle::Local(held) => held.h.abort(),
            Handle::Remote(_, rh) if from_thread => std::thread::scope(|s| {
                s.spawn(|| rh.abort()).join().expect("abort thread");
            }),
            Handle::Remote(_, rh) => rh.abort(),
        }
    }

    /// Polls handle `i` once with `cx`; on `Ready` removes it and checks the
    /// result.
    fn poll_handle(&mut self, i: usize, cx: &mut Context<'_>, after_shutdown: bool) -> bool {
        let ready = match &mut self.handles[i] {
            Handle::Local(held) => match Pin::new(&mut held.h).poll(cx) {
                Poll::Ready(r) => Some((r, Some(held.h.id()))),
                Poll::Pending => None,
            },
            Handle::Remote(_, rh) => match Pin::new(rh).poll(cx) {
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

    /// `block_on` a future that polls the handle, then lets exactly one turn
    /// run, then polls it again.
    fn await_turn(&mut self, i: usize) {
        let ex = self.ex.take().unwrap();
        let mut polls = 0;
        let mut done = false;
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
        }));
        self.ex = Some(ex);
        self.drove();
    }

    fn join(&mut self, i: usize, queue: u8) {
        let w = self.world.clone();
        let q = queue as usize % QUEUES;
        let jt = w.new_track(Kind::Joiner, q, false, None);
        let target = self.handles.swap_remove(i);
        let body = {
            let (w, jt) = (w.clone(), jt.clone());
            async move {
                match target {
                    Handle::Local(mut held) => {
                        let id = held.h.id();
                        let r = (&mut held.h).await;
                        held.track.handle_read.store(true, SeqCst);
                        let t = held.track.clone();
                        drop(held);
                        consume(&w, &t, r, Some(id), false);
                    }
                    Handle::Remote(t, rh) => {
                        let r = rh.await;
                        consume(&w, &t, r, None, false);
                    }
                }
                jt.completed.store(true, SeqCst);
                Out { track: jt }
            }
        };
        match self.ex().spawn(q, probe(&w, &jt, body)) {
            Ok(h) => {
                jt.accepted.store(true, SeqCst);
                jt.has_handle.store(true, SeqCst);
                jt.handle_alive.store(true, SeqCst);
                self.handles.push(Handle::Local(Held {
                    h,
                    track: jt.clone(),
                }));
            }
            Err(e) => w.violate(format!("joiner spawn: {e}")),
        }
    }

    fn turns(&mut self, n: u8) {
        {
            let ex = self.ex();
            let mut fut = pin!(ex.run_until(pending::<()>()));
            let mut cx = Context::from_waker(Waker::noop());
            for _ in 0..n.max(1) {
                if fut.as_mut().poll(&mut cx).is_ready() {
                    self.world.violate("run_until(pending()) completed".into());
                }
            }
        }
        self.drove();
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
        let now = self.ex().queue_stats(q).unwrap().shares;
        let want = if r.is_ok() { shares } else { before };
        if now != want {
            self.world.violate(format!(
                "queue {q} has {now} shares after set_shares({shares}), expected {want}"
            ));
        }
    }

    /// The executor's counters against the model.
    fn check_stats(&self, when: &str) {
        let Some(ex) = self.ex.as_ref() else {
            return;
        };
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
            let completed = count(&|t| t.completed.load(SeqCst));
            let panicked = count(&|t| t.panicked.load(SeqCst) && t.ended());
            let cancelled =
                count(&|t| t.ended() && !t.completed.load(SeqCst) && !t.panicked.load(SeqCst));
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
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Spawn {
                via,
                queue,
                group,
                steps,
                panic,
                keep,
            } => self.spawn(*via, *queue, *group, steps, *panic, *keep),
            Op::RemoteSpawn {
                queue,
                group,
                steps,
                panic,
                from_thread,
            } => self.remote_spawn(*queue, *group, steps, *panic, *from_thread),
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
            Op::AwaitTurn { handle } => {
                if let Some(i) = self.pick(*handle) {
                    self.await_turn(i);
                }
            }
            Op::Join { handle, queue } => {
                if let Some(i) = self.pick(*handle) {
                    self.join(i, *queue);
                }
            }
            Op::Run => {
                self.ex().run_until_stalled();
                self.drove();
            }
            Op::Turns(n) => self.turns(*n),
            Op::SetShares { queue, shares } => self.set_shares(*queue, *shares),
            Op::Advance(us) => self.clock.advance(Duration::from_micros(*us as u64)),
        }
    }

    /// Opens every gate and runs until every task ended (bounded).
    fn drain(&mut self) {
        for _ in 0..(MAX_STEPS + 4) {
            for g in &self.world.gates {
                g.open();
            }
            self.ex().run_until_stalled();
            self.drove();
            if self
                .world
                .tracks()
                .iter()
                .all(|t| !t.accepted.load(SeqCst) || t.ended())
            {
                break;
            }
        }
        self.check_stats("after the drain");
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
        drop(self.ex.take());
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
                let t = w.new_track(Kind::Refused, 0, false, None);
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
            if d > 1 || (d == 1 && !completed) {
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
    }
}

/// Runs one case; returns the violations found (empty: all invariants
/// held). A panic out of the executor itself propagates.
pub fn run_case(cfg: &Config, ops: &[Op]) -> Vec<String> {
    quiet_scripted_panics();
    let clock = ManualClock::new();
    let mut b = Builder::new()
        .clock(clock.clone())
        .base_slice(Duration::from_micros(20))
        .min_run(Duration::from_micros(5))
        .max_polls_per_turn(cfg.max_polls.max(1))
        .preemption(cfg.preemption)
        .general_pick(cfg.general_pick)
        .latency_histograms(cfg.latency)
        .queue_with(0usize, QueueSpec::new(cfg.shares[0]))
        .queue_with(1, QueueSpec::new(cfg.shares[1]).scheduler(Las::new()))
        .queue_with(
            2,
            QueueSpec::new(cfg.shares[2])
                .scheduler(
                    Las::quantized(Duration::from_micros(10), 4)
                        .max_wait(Duration::from_micros(50)),
                )
                .slice(Duration::from_micros(7)),
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
    let world = Arc::new(World {
        tracks: Mutex::new(Vec::new()),
        violations: Mutex::new(Vec::new()),
        gates: Default::default(),
        shares: Mutex::new(cfg.shares),
    });
    let mut case = Case {
        world: world.clone(),
        ex: Some(ex),
        clock,
        handles: Vec::new(),
    };
    for (i, op) in ops.iter().enumerate() {
        case.apply(op);
        case.check_stats(&format!("after op {i} ({op:?})"));
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
        eprintln!(
            "SUMMARY ops {} tracks {} accepted {} completed {} panicked {} aborted {} delivered {} polls {} remote {} child {} joiner {}",
            ops.len(),
            t.len(),
            c(&|t| t.accepted.load(SeqCst)),
            c(&|t| t.completed.load(SeqCst)),
            c(&|t| t.panicked.load(SeqCst)),
            c(&|t| t.aborted.load(SeqCst)),
            c(&|t| t.delivered.load(SeqCst) == 1),
            t.iter().map(|t| t.polls.load(SeqCst)).sum::<u32>(),
            c(&|t| t.remote),
            c(&|t| t.kind == Kind::Child),
            c(&|t| t.kind == Kind::Joiner),
        );
    }
    let v = std::mem::take(&mut *world.violations.lock().unwrap());
    v
}
