//! Cross-thread entry: wakes and spawns arriving from another OS thread, in
//! one process, tourbillon against tokio and async-executor.
//!
//! Every system runs its executor on a thread of its own (pinned to CPU 1)
//! until told to stop; the bench's main thread (pinned to CPU 0) is the
//! *remote* thread that wakes and spawns:
//! * `tourbillon`: `Executor::block_on` of a stop signal, one
//!   `RunnableFifo` queue, tasks spawned with a `RemoteSpawner`;
//! * `tourbillon bounded` (spawn workloads only): the same executor, tasks
//!   spawned with a `BoundedRemoteSpawner` of capacity `--capacity`
//!   (default 128): each spawn awaits its `spawn(..)` future, which parks
//!   the remote thread while `capacity` tasks of the spawner are not yet
//!   polled (until half of them are);
//! * `tokio`: a `current_thread` runtime (`enable_all()`: its I/O driver is
//!   what it parks on) in `Runtime::block_on` of the stop signal, tasks
//!   spawned with `Handle::spawn` from the remote thread (the baseline of
//!   every ratio);
//! * `async-executor`: its `Send` `Executor` in
//!   `futures_lite::future::block_on(ex.run(stop))`, tasks spawned with
//!   `Executor::spawn` from the remote thread (`LocalExecutor` cannot be
//!   spawned onto from another thread).
//!
//! The stop signal is a `futures::channel::oneshot`; a fresh executor and
//! thread per run, or with `--keep-executors` one executor thread per
//! system, kept for every run (its executor built once, warm from its
//! earlier runs: a server's long-lived executor); the spawn loops and the
//! handles run on the remote thread in `futures::executor::block_on`.
//! Each run's costs on the executor thread are measured on that thread from
//! the run's start to its stop signal (the executor's construction and
//! drop are outside).
//!
//! Workloads:
//! * `wake idle`: one task (spawned remotely) waits `wakes` times on a
//!   signal (a flag and a `futures::task::AtomicWaker`) that the remote
//!   thread raises. Before each wake the remote thread waits for the task's
//!   ack of the previous one, then spins `--gap-us` (default 50 us) so that
//!   the executor has gone idle (parked); it then records the time, raises
//!   the flag and calls `wake()`. The task records the time when its poll
//!   sees the flag. *Wake-to-poll latency* is the difference (so it includes
//!   the executor's unpark, its inbox or injection queue, and the poll);
//!   the first 200 wakes of a run are a warm-up, not recorded. A wake that
//!   the task saw before it had to wait (the flag was already up when its
//!   poll looked) has no wake-to-poll latency: it is counted (`no-wait %`)
//!   and left out of the percentiles. Also reported: the cost of the
//!   `wake()` call itself on the remote thread (for an executor that parks,
//!   it includes the system call that unparks it), and for tourbillon the
//!   number of parks per wake (warm-up included; about 1 when the gap let
//!   it park each time).
//! * `wake back-to-back`: the same without the gap: the remote thread
//!   wakes the task as soon as it sees the ack, so the executor has just
//!   finished the previous poll (tourbillon is usually still in its
//!   bounded spin before parking). When the wake lands before the task
//!   re-registered its waker, the poll that follows the ack sees the flag at
//!   once (counted in `no-wait %`, not in the percentiles).
//! * `spawn throughput`: the remote thread spawns `tasks` tiny tasks
//!   (`async move { i }`), then awaits every handle in spawn order; timed
//!   from the first spawn to the last handle; reported as tasks/s and
//!   ns/task, with the remote thread's share spent in the spawn calls and
//!   the executor thread's CPU time per task (`/proc/thread-self/schedstat`;
//!   less sensitive than wall time to other processes on its CPU) and its
//!   minor page faults per run (`/proc/thread-self/stat`; their kernel time
//!   is part of that CPU time).
//! * `spawn latency`: the same, each task capturing the time just before its
//!   spawn call and returning the time elapsed at its first poll: the
//!   *spawn-to-first-poll latency*. The remote thread spawns as fast as it
//!   can, so this includes the backlog the executor has not yet drained;
//!   the bounded spawner's spawn call includes its wait for room (the
//!   timestamp is taken before the call), and its backlog is at most
//!   `capacity` tasks.
//!
//! Systems are alternated run by run (for each round, each workload: every
//! system), after one untimed pass of everything at the quick sizes.
//! Latency percentiles are of all recorded samples of all rounds (sorted,
//! index `round(p (n - 1))`); the per-round p50 range shows the spread.
//! Also reported per run: the executor thread's time runnable but kept off
//! its CPU by other threads (`/proc/thread-self/schedstat`), as a share of
//! its life; a few percent means other processes were competing.
//!
//! The machine this was written on has 2 vCPUs shared with other work:
//! expect noise, and run it several times before trusting a difference of
//! a few tens of percent.
//!
//! Usage: `cargo bench --bench remote [-- --rounds N --quick --no-pin
//! --gap-us US --capacity N --spawn-only --keep-executors --only TEXT --out DIR]` (`--only`: the
//! systems whose name contains TEXT, and the baseline), or `-- profile N` (the spawn
//! path on one thread, for callgrind: see [`profile`]), or `-- profile-feed N`
//! (a stream of remote spawns, one per poll: see [`profile_feed`]), or
//! `-- line-latency` (what one cache line takes to go from the remote
//! thread's CPU to the executor's and back: see [`line_latency`]). `--quick`: 3 rounds and a fifth of the wakes and
//! a tenth of the tasks (labelled). Other flags are ignored. Writes
//! `remote.json` to `target/remote/` (in the workspace's target directory,
//! whatever the working directory) or to `--out DIR`.
//!
//! Without `--bench`, which `cargo bench` passes (`cargo test
//! --all-targets` runs it without), a smoke pass: one round of 50 wakes
//! and 500 tasks per run, a few seconds in a debug build (the `profile`,
//! `profile-feed` and `line-latency` modes run as asked either way).

mod common;

use common::{json_str, median, pct, pin_thread, sched_times};

use std::future::{poll_fn, Future};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread;
use std::time::{Duration, Instant};

use futures::channel::oneshot;
use futures::task::AtomicWaker;

/// CPUs of the executor threads and of the remote (main) thread.
const EXEC_CPU: u32 = 1;
const REMOTE_CPU: u32 = 0;
/// Wakes of a wake run not recorded (the task's spawn, first faults).
const WAKE_WARMUP: usize = 200;

#[derive(Clone, Copy)]
struct Sizes {
    wakes: usize,
    tasks: usize,
}

const FULL: Sizes = Sizes {
    wakes: 5_000,
    tasks: 100_000,
};

const QUICK: Sizes = Sizes {
    wakes: 1_000,
    tasks: 10_000,
};

/// A smoke pass's sizes (without `--bench`).
const SMOKE: Sizes = Sizes {
    wakes: 50,
    tasks: 500,
};

#[derive(Clone, Copy)]
struct Config {
    sizes: Sizes,
    /// The bounded spawner's capacity.
    capacity: usize,
    /// `--spawn-only`: the spawn workloads alone.
    spawn_only: bool,
    /// `--only TEXT`: the systems whose name contains `TEXT` (and the
    /// baseline).
    only: Option<&'static str>,
    gap: Duration,
    pin: bool,
    /// `--keep-executors`: one executor thread per system, kept for every
    /// run, rather than a fresh one per run.
    keep: bool,
}

// ---------------------------------------------------------------------------
// Threads: placement and scheduler statistics (as benches/priority.rs)

/// Set when an executor thread could not pin itself (reported once).
static PIN_FAILED: AtomicBool = AtomicBool::new(false);

/// Spins until `cond`; yields the CPU now and then, in case both threads
/// share one (`--no-pin`).
fn spin_until(cond: impl Fn() -> bool) {
    let mut n = 0u32;
    while !cond() {
        n += 1;
        if n.is_multiple_of(4096) {
            thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

// ---------------------------------------------------------------------------
// Systems

/// What the workloads need from a system, on the remote thread: spawn a
/// `Send` future onto the executor, and await its handle anywhere.
trait RemoteSys {
    type Handle<T: Send + 'static>;

    fn spawn<F>(&self, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;

    /// The spawn workloads' spawn, inside the remote thread's one
    /// `futures::executor::block_on`: `spawn`, unless the system's spawn
    /// waits for room.
    async fn spawn_async<F>(&self, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.spawn(f)
    }

    async fn join<T: Send + 'static>(h: Self::Handle<T>) -> T;
}

impl RemoteSys for tourbillon::remote::RemoteSpawner<u8> {
    type Handle<T: Send + 'static> = tourbillon::remote::RemoteJoinHandle<T>;

    fn spawn<F>(&self, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        tourbillon::remote::RemoteSpawner::spawn(self, 0, f).unwrap()
    }

    async fn join<T: Send + 'static>(h: Self::Handle<T>) -> T {
        h.await.unwrap()
    }
}

/// The bounded path: each spawn awaits room (`BoundedRemoteSpawner::spawn`,
/// which parks the remote thread's `block_on` while the spawner is full,
/// until the executor has first-polled half the capacity of its tasks).
impl RemoteSys for tourbillon::remote::BoundedRemoteSpawner<u8> {
    type Handle<T: Send + 'static> = tourbillon::remote::RemoteJoinHandle<T>;

    fn spawn<F>(&self, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        futures::executor::block_on(self.spawn_async(f))
    }

    async fn spawn_async<F>(&self, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        tourbillon::remote::BoundedRemoteSpawner::spawn(self, 0, f)
            .await
            .unwrap()
    }

    async fn join<T: Send + 'static>(h: Self::Handle<T>) -> T {
        h.await.unwrap()
    }
}

impl RemoteSys for tokio::runtime::Handle {
    type Handle<T: Send + 'static> = tokio::task::JoinHandle<T>;

    fn spawn<F>(&self, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        tokio::runtime::Handle::spawn(self, f)
    }

    async fn join<T: Send + 'static>(h: Self::Handle<T>) -> T {
        h.await.unwrap()
    }
}

impl RemoteSys for Arc<async_executor::Executor<'static>> {
    type Handle<T: Send + 'static> = async_executor::Task<T>;

    fn spawn<F>(&self, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        async_executor::Executor::spawn(self, f)
    }

    async fn join<T: Send + 'static>(h: Self::Handle<T>) -> T {
        h.await
    }
}

/// What a run cost the executor thread that served it.
#[derive(Clone, Copy, Default)]
struct ExecReport {
    /// tourbillon's `ExecutorStats::parks` during the run (others: not
    /// available).
    parks: Option<u64>,
    /// The run's length on the thread, its time on its CPU, and its time
    /// runnable but off its CPU.
    life_ns: u64,
    cpu_ns: u64,
    wait_ns: u64,
    /// Minor page faults taken by the thread (its time in them is part of
    /// `cpu_ns`).
    faults: u64,
}

/// A run an executor thread serves: its executor runs until `stop`, then
/// the thread sends what the run cost it to `report`.
struct Run {
    stop: oneshot::Receiver<()>,
    report: mpsc::Sender<ExecReport>,
}

impl Run {
    /// Runs `block` (the executor until the stop signal; it returns the
    /// executor's parks meanwhile, if it counts them) and reports the run's
    /// share of the thread's time and faults.
    fn serve(self, block: impl FnOnce(oneshot::Receiver<()>) -> Option<u64>) {
        let began = Instant::now();
        let before = sched_times();
        let faults = common::thread_minor_faults();
        let parks = block(self.stop);
        let after = sched_times();
        let _ = self.report.send(ExecReport {
            parks,
            life_ns: began.elapsed().as_nanos() as u64,
            cpu_ns: after.0.saturating_sub(before.0),
            wait_ns: after.1.saturating_sub(before.1),
            faults: common::thread_minor_faults().saturating_sub(faults),
        });
    }
}

/// An executor on a thread of its own, which serves runs until it is
/// closed: one run (a fresh thread per run), or every run of its system
/// (`--keep-executors`).
struct ExecThread<S> {
    spawner: S,
    runs: mpsc::Sender<Run>,
    thread: thread::JoinHandle<()>,
}

/// A run in progress: [`finish`](Self::finish) stops it.
struct RunStop {
    stop: oneshot::Sender<()>,
    report: mpsc::Receiver<ExecReport>,
}

impl RunStop {
    fn finish(self) -> ExecReport {
        let _ = self.stop.send(());
        self.report.recv().expect("executor thread panicked")
    }
}

impl<S> ExecThread<S> {
    /// Starts the thread: it pins itself, then `body` builds the executor,
    /// sends its remote spawner, and serves every run it receives.
    fn start(
        name: &str,
        pin: bool,
        body: impl FnOnce(mpsc::Sender<S>, mpsc::Receiver<Run>) + Send + 'static,
    ) -> Self
    where
        S: Send + 'static,
    {
        let (tx, rx) = mpsc::channel();
        let (runs, runs_rx) = mpsc::channel();
        let thread = thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                if pin && !pin_thread(EXEC_CPU) {
                    PIN_FAILED.store(true, Ordering::Relaxed);
                }
                body(tx, runs_rx);
            })
            .unwrap();
        let spawner = rx.recv().expect("executor thread failed to start");
        ExecThread {
            spawner,
            runs,
            thread,
        }
    }

    /// Starts a run: the executor runs until the returned stop finishes it.
    fn begin(&self) -> RunStop {
        let (stop, stop_rx) = oneshot::channel();
        let (report, report_rx) = mpsc::channel();
        self.runs
            .send(Run {
                stop: stop_rx,
                report,
            })
            .expect("executor thread gone");
        RunStop {
            stop,
            report: report_rx,
        }
    }

    /// Ends the thread (its executor is dropped there).
    fn close(self) {
        drop(self.runs);
        self.thread.join().expect("executor thread panicked");
    }
}

/// Serves `runs` on `ex` until the sender closes, with its parks per run.
fn serve_tourbillon(ex: &tourbillon::Executor<u8>, runs: mpsc::Receiver<Run>) {
    for run in runs {
        run.serve(|stop| {
            let parks = ex.stats().parks;
            ex.block_on(async {
                let _ = stop.await;
            });
            Some(ex.stats().parks - parks)
        });
    }
}

fn start_tourbillon(pin: bool) -> ExecThread<tourbillon::remote::RemoteSpawner<u8>> {
    ExecThread::start("tourbillon", pin, |tx, runs| {
        let ex = tourbillon::Builder::new().queue(0u8, 1).build().unwrap();
        tx.send(ex.remote_spawner()).unwrap();
        serve_tourbillon(&ex, runs);
    })
}

fn start_tourbillon_bounded(
    pin: bool,
    capacity: usize,
) -> ExecThread<tourbillon::remote::BoundedRemoteSpawner<u8>> {
    ExecThread::start("tourbillon-bounded", pin, move |tx, runs| {
        let ex = tourbillon::Builder::new().queue(0u8, 1).build().unwrap();
        let capacity = std::num::NonZeroUsize::new(capacity).expect("--capacity is at least 1");
        tx.send(ex.bounded_remote_spawner(capacity)).unwrap();
        serve_tourbillon(&ex, runs);
    })
}

fn start_tokio(pin: bool) -> ExecThread<tokio::runtime::Handle> {
    ExecThread::start("tokio", pin, |tx, runs| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tx.send(rt.handle().clone()).unwrap();
        for run in runs {
            run.serve(|stop| {
                rt.block_on(async {
                    let _ = stop.await;
                });
                None
            });
        }
    })
}

fn start_async_executor(pin: bool) -> ExecThread<Arc<async_executor::Executor<'static>>> {
    ExecThread::start("async-executor", pin, |tx, runs| {
        let ex = Arc::new(async_executor::Executor::new());
        tx.send(ex.clone()).unwrap();
        for run in runs {
            run.serve(|stop| {
                futures_lite::future::block_on(ex.run(async {
                    let _ = stop.await;
                }));
                None
            });
        }
    })
}

/// The executor threads kept for every run (`--keep-executors`), each
/// started at its system's first run.
#[derive(Default)]
struct Kept {
    tourbillon: Option<ExecThread<tourbillon::remote::RemoteSpawner<u8>>>,
    bounded: Option<ExecThread<tourbillon::remote::BoundedRemoteSpawner<u8>>>,
    tokio: Option<ExecThread<tokio::runtime::Handle>>,
    async_executor: Option<ExecThread<Arc<async_executor::Executor<'static>>>>,
}

impl Kept {
    fn close(self) {
        if let Some(ex) = self.tourbillon {
            ex.close();
        }
        if let Some(ex) = self.bounded {
            ex.close();
        }
        if let Some(ex) = self.tokio {
            ex.close();
        }
        if let Some(ex) = self.async_executor {
            ex.close();
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum System {
    Tourbillon,
    TourbillonBounded,
    Tokio,
    AsyncExecutor,
}

const SYSTEMS: [System; 4] = [
    System::Tourbillon,
    System::TourbillonBounded,
    System::Tokio,
    System::AsyncExecutor,
];
const BASELINE: System = System::Tokio;

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Tourbillon => "tourbillon (RemoteSpawner)",
            System::TourbillonBounded => "tourbillon bounded (BoundedRemoteSpawner, spawn().await)",
            System::Tokio => "tokio current_thread (Handle::spawn)",
            System::AsyncExecutor => "async-executor Executor (spawn)",
        }
    }

    /// Whether the system takes part in `w`: the bounded spawner only in the
    /// spawn workloads (the wake workloads spawn one task).
    fn runs_in(self, w: Workload, cfg: &Config) -> bool {
        let spawn = matches!(w, Workload::SpawnThroughput | Workload::SpawnLatency);
        let picked = self == BASELINE || cfg.only.is_none_or(|o| self.name().contains(o));
        picked && (spawn || !cfg.spawn_only) && (self != System::TourbillonBounded || spawn)
    }

    /// One run of `w`: on the system's kept executor thread if `kept`,
    /// else on a fresh one.
    fn run(self, w: Workload, cfg: &Config, kept: Option<&mut Kept>) -> Sample {
        let (pin, capacity) = (cfg.pin, cfg.capacity);
        match (self, kept) {
            (System::Tourbillon, None) => run_fresh(start_tourbillon(pin), w, cfg),
            (System::TourbillonBounded, None) => {
                run_fresh(start_tourbillon_bounded(pin, capacity), w, cfg)
            }
            (System::Tokio, None) => run_fresh(start_tokio(pin), w, cfg),
            (System::AsyncExecutor, None) => run_fresh(start_async_executor(pin), w, cfg),
            (System::Tourbillon, Some(k)) => run_on(
                k.tourbillon.get_or_insert_with(|| start_tourbillon(pin)),
                w,
                cfg,
            ),
            (System::TourbillonBounded, Some(k)) => run_on(
                k.bounded
                    .get_or_insert_with(|| start_tourbillon_bounded(pin, capacity)),
                w,
                cfg,
            ),
            (System::Tokio, Some(k)) => {
                run_on(k.tokio.get_or_insert_with(|| start_tokio(pin)), w, cfg)
            }
            (System::AsyncExecutor, Some(k)) => run_on(
                k.async_executor
                    .get_or_insert_with(|| start_async_executor(pin)),
                w,
                cfg,
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// Workloads

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Workload {
    WakeIdle,
    WakeBackToBack,
    SpawnThroughput,
    SpawnLatency,
}

const WORKLOADS: [Workload; 4] = [
    Workload::WakeIdle,
    Workload::WakeBackToBack,
    Workload::SpawnThroughput,
    Workload::SpawnLatency,
];

impl Workload {
    fn key(self) -> &'static str {
        match self {
            Workload::WakeIdle => "wake_idle",
            Workload::WakeBackToBack => "wake_back_to_back",
            Workload::SpawnThroughput => "spawn_throughput",
            Workload::SpawnLatency => "spawn_latency",
        }
    }
}

/// What one run measured.
#[derive(Default)]
struct Sample {
    /// Timed part (spawn workloads): first spawn to last handle.
    secs: f64,
    /// Of which the remote thread spent in the spawn loop.
    spawn_secs: f64,
    /// Latencies, ns: wake-to-poll, or spawn-to-first-poll.
    lat_ns: Vec<u64>,
    /// The remote thread's `wake()` calls, ns (wake workloads).
    call_ns: Vec<u64>,
    /// Wakes (warm-up included) or tasks of the run (for parks per unit).
    units: usize,
    /// Recorded wakes the task saw before it had to wait (the flag was up
    /// when it looked): no wake-to-poll latency, not in `lat_ns`.
    no_wait: usize,
    exec: ExecReport,
}

/// One run of `w` on a fresh executor thread, closed after it.
fn run_fresh<S: RemoteSys>(ex: ExecThread<S>, w: Workload, cfg: &Config) -> Sample {
    let s = run_on(&ex, w, cfg);
    ex.close();
    s
}

fn run_on<S: RemoteSys>(ex: &ExecThread<S>, w: Workload, cfg: &Config) -> Sample {
    let run = ex.begin();
    let mut s = match w {
        Workload::WakeIdle => wake_run(&ex.spawner, cfg.sizes.wakes, Some(cfg.gap)),
        Workload::WakeBackToBack => wake_run(&ex.spawner, cfg.sizes.wakes, None),
        Workload::SpawnThroughput => spawn_throughput(&ex.spawner, cfg.sizes.tasks),
        Workload::SpawnLatency => spawn_latency(&ex.spawner, cfg.sizes.tasks),
    };
    s.exec = run.finish();
    s
}

/// The signal between the remote thread and the waiting task.
struct Signal {
    base: Instant,
    waker: AtomicWaker,
    flag: AtomicBool,
    /// When the remote thread woke the task (ns after `base`).
    wake_at: AtomicU64,
    /// Wakes the task has seen.
    ack: AtomicU64,
}

impl Signal {
    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }
}

fn wake_run<S: RemoteSys>(s: &S, wakes: usize, gap: Option<Duration>) -> Sample {
    let total = WAKE_WARMUP + wakes;
    let sig = Arc::new(Signal {
        base: Instant::now(),
        waker: AtomicWaker::new(),
        flag: AtomicBool::new(false),
        wake_at: AtomicU64::new(0),
        ack: AtomicU64::new(0),
    });
    let task_sig = sig.clone();
    let task = s.spawn(async move {
        let sig = task_sig;
        let mut lat = Vec::with_capacity(wakes);
        let mut no_wait = 0;
        for i in 0..total {
            let mut waited = false;
            poll_fn(|cx| {
                if sig.flag.swap(false, Ordering::AcqRel) {
                    return Poll::Ready(());
                }
                sig.waker.register(cx.waker());
                if sig.flag.swap(false, Ordering::AcqRel) {
                    Poll::Ready(())
                } else {
                    waited = true;
                    Poll::Pending
                }
            })
            .await;
            let now = sig.now();
            if i >= WAKE_WARMUP {
                if waited {
                    lat.push(now.saturating_sub(sig.wake_at.load(Ordering::Acquire)));
                } else {
                    no_wait += 1;
                }
            }
            sig.ack.store(i as u64 + 1, Ordering::Release);
        }
        (lat, no_wait)
    });
    let mut call_ns = Vec::with_capacity(total);
    for i in 0..total as u64 {
        spin_until(|| sig.ack.load(Ordering::Acquire) >= i);
        if let Some(gap) = gap {
            common::spin(gap);
        }
        let t = sig.now();
        sig.wake_at.store(t, Ordering::Release);
        sig.flag.store(true, Ordering::Release);
        sig.waker.wake();
        call_ns.push(sig.now() - t);
    }
    let (lat, no_wait) = futures::executor::block_on(S::join(task));
    call_ns.drain(..WAKE_WARMUP);
    Sample {
        lat_ns: lat,
        call_ns,
        no_wait,
        units: total,
        ..Sample::default()
    }
}

fn spawn_throughput<S: RemoteSys>(s: &S, tasks: usize) -> Sample {
    let mut hs = Vec::with_capacity(tasks);
    let start = Instant::now();
    futures::executor::block_on(async {
        for i in 0..tasks {
            hs.push(s.spawn_async(async move { i }).await);
        }
    });
    let spawned = start.elapsed();
    let sum = futures::executor::block_on(async {
        let mut sum = 0usize;
        for h in hs {
            sum = sum.wrapping_add(S::join(h).await);
        }
        sum
    });
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(sum, tasks * (tasks.saturating_sub(1)) / 2);
    Sample {
        secs,
        spawn_secs: spawned.as_secs_f64(),
        units: tasks,
        ..Sample::default()
    }
}

fn spawn_latency<S: RemoteSys>(s: &S, tasks: usize) -> Sample {
    let base = Instant::now();
    let mut hs = Vec::with_capacity(tasks);
    let start = Instant::now();
    futures::executor::block_on(async {
        for _ in 0..tasks {
            let at = base.elapsed();
            hs.push(
                s.spawn_async(async move { (base.elapsed() - at).as_nanos() as u64 })
                    .await,
            );
        }
    });
    let spawned = start.elapsed();
    let lat = futures::executor::block_on(async {
        let mut lat = Vec::with_capacity(tasks);
        for h in hs {
            lat.push(S::join(h).await);
        }
        lat
    });
    Sample {
        secs: start.elapsed().as_secs_f64(),
        spawn_secs: spawned.as_secs_f64(),
        lat_ns: lat,
        units: tasks,
        ..Sample::default()
    }
}

// ---------------------------------------------------------------------------
// Statistics and reports

/// Sorted, index round(p (n - 1)) (as benches/tail.rs); `p` in [0, 1].
fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}

/// Latency summary of all rounds of one system on one workload, in us.
struct Lat {
    p50: f64,
    p99: f64,
    max: f64,
    n: usize,
    /// Range of the per-round p50 and p99.
    round_p50: (f64, f64),
    round_p99: (f64, f64),
    call_p50: f64,
    call_p99: f64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn lat_summary(runs: &[Sample]) -> Lat {
    let mut all: Vec<u64> = runs.iter().flat_map(|r| r.lat_ns.iter().copied()).collect();
    all.sort_unstable();
    let mut calls: Vec<u64> = runs
        .iter()
        .flat_map(|r| r.call_ns.iter().copied())
        .collect();
    calls.sort_unstable();
    let per_round = |p: f64| -> Vec<f64> {
        runs.iter()
            .map(|r| {
                let mut v = r.lat_ns.clone();
                v.sort_unstable();
                us(pct(&v, p))
            })
            .collect()
    };
    Lat {
        p50: us(pct(&all, 50.0)),
        p99: us(pct(&all, 99.0)),
        max: us(all.last().copied().unwrap_or(0)),
        n: all.len(),
        round_p50: min_max(&per_round(50.0)),
        round_p99: min_max(&per_round(99.0)),
        call_p50: us(pct(&calls, 50.0)),
        call_p99: us(pct(&calls, 99.0)),
    }
}

/// Median over rounds of the executor thread's waiting share, in percent.
fn wait_pct(runs: &[Sample]) -> f64 {
    let v: Vec<f64> = runs
        .iter()
        .map(|r| 100.0 * r.exec.wait_ns as f64 / r.exec.life_ns.max(1) as f64)
        .collect();
    median(&v)
}

/// Parks per unit (wake or task), median over rounds; tourbillon only.
fn parks_per_unit(runs: &[Sample]) -> Option<f64> {
    let v: Option<Vec<f64>> = runs
        .iter()
        .map(|r| r.exec.parks.map(|p| p as f64 / r.units.max(1) as f64))
        .collect();
    v.map(|v| median(&v))
}

/// Throughput summary of one system on one workload.
struct Thr {
    median_s: f64,
    min_s: f64,
    max_s: f64,
    spawn_s: f64,
    /// The executor thread's CPU time (median over rounds).
    exec_cpu_s: f64,
    /// The executor thread's minor page faults (median over rounds).
    exec_faults: f64,
}

fn thr_summary(runs: &[Sample]) -> Thr {
    let secs: Vec<f64> = runs.iter().map(|r| r.secs).collect();
    let (min_s, max_s) = min_max(&secs);
    Thr {
        median_s: median(&secs),
        min_s,
        max_s,
        spawn_s: median(&runs.iter().map(|r| r.spawn_secs).collect::<Vec<_>>()),
        exec_cpu_s: median(
            &runs
                .iter()
                .map(|r| r.exec.cpu_ns as f64 / 1e9)
                .collect::<Vec<_>>(),
        ),
        exec_faults: median(
            &runs
                .iter()
                .map(|r| r.exec.faults as f64)
                .collect::<Vec<_>>(),
        ),
    }
}

struct Report {
    /// `samples[system][workload]`: one per round.
    samples: Vec<Vec<Vec<Sample>>>,
    cfg: Config,
    rounds: usize,
    quick: bool,
}

fn sys_index(s: System) -> usize {
    SYSTEMS.iter().position(|&x| x == s).unwrap()
}

fn opt(x: Option<f64>, digits: usize) -> String {
    match x {
        Some(v) => format!("{v:.digits$}"),
        None => "-".to_string(),
    }
}

impl Report {
    fn runs(&self, si: usize, wi: usize) -> &[Sample] {
        &self.samples[si][wi]
    }

    /// Share of the recorded wakes that the task saw without waiting.
    fn no_wait_pct(&self, runs: &[Sample]) -> f64 {
        let n: usize = runs.iter().map(|r| r.no_wait).sum();
        100.0 * n as f64 / (runs.len() * self.cfg.sizes.wakes).max(1) as f64
    }

    fn print_wake(&self, wi: usize, title: &str) {
        let base = lat_summary(self.runs(sys_index(BASELINE), wi));
        println!();
        println!("{title}");
        println!();
        println!(
            "| system | p50 us | p99 us | max us | per-round p50 us | per-round p99 us | \
             p50 / tokio | p99 / tokio | wake() call p50 / p99 us | parks/wake | no-wait % | \
             exec thread waiting % |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (si, s) in SYSTEMS.iter().enumerate() {
            let runs = self.runs(si, wi);
            if runs.is_empty() {
                continue;
            }
            let l = lat_summary(runs);
            println!(
                "| {} | {:.1} | {:.1} | {:.1} | {:.1}-{:.1} | {:.1}-{:.1} | {:.2} | {:.2} | {:.2} / {:.2} | {} | {:.1} | {:.2} |",
                s.name(),
                l.p50,
                l.p99,
                l.max,
                l.round_p50.0,
                l.round_p50.1,
                l.round_p99.0,
                l.round_p99.1,
                l.p50 / base.p50,
                l.p99 / base.p99,
                l.call_p50,
                l.call_p99,
                opt(parks_per_unit(runs), 2),
                self.no_wait_pct(runs),
                wait_pct(runs)
            );
        }
    }

    fn print_spawn(&self) {
        let wi = 2;
        let tasks = self.cfg.sizes.tasks as f64;
        let base = thr_summary(self.runs(sys_index(BASELINE), wi));
        println!();
        println!(
            "Remote spawn throughput: {} tasks `async move {{ i }}` spawned from the remote thread, \
             then every handle awaited there (first spawn to last handle; median of {} rounds)",
            self.cfg.sizes.tasks, self.rounds
        );
        println!();
        println!(
            "| system | median ms | min ms | max ms | tasks/s (median) | ns/task | spawn calls ns/task | \
             time / tokio | exec thread CPU ns/task | exec thread page faults | parks/task | \
             exec thread waiting % |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (si, s) in SYSTEMS.iter().enumerate() {
            let runs = self.runs(si, wi);
            if runs.is_empty() {
                continue;
            }
            let t = thr_summary(runs);
            println!(
                "| {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.1} | {:.1} | {:.2} | {:.0} | {:.0} | {} | {:.2} |",
                s.name(),
                t.median_s * 1e3,
                t.min_s * 1e3,
                t.max_s * 1e3,
                tasks / t.median_s,
                t.median_s * 1e9 / tasks,
                t.spawn_s * 1e9 / tasks,
                t.median_s / base.median_s,
                t.exec_cpu_s * 1e9 / tasks,
                t.exec_faults,
                opt(parks_per_unit(runs), 3),
                wait_pct(runs)
            );
        }

        let wi = 3;
        let base = lat_summary(self.runs(sys_index(BASELINE), wi));
        println!();
        println!(
            "Spawn-to-first-poll latency: the same spawns, each task timestamped just before its \
             spawn call and reading the clock at its first poll (spawned back to back, so this \
             includes the executor's backlog); all samples of {} rounds",
            self.rounds
        );
        println!();
        println!(
            "| system | p50 us | p99 us | max us | per-round p50 us | p50 / tokio | p99 / tokio | \
             tasks/s (median, timestamped) |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for (si, s) in SYSTEMS.iter().enumerate() {
            let runs = self.runs(si, wi);
            if runs.is_empty() {
                continue;
            }
            let l = lat_summary(runs);
            let t = thr_summary(runs);
            println!(
                "| {} | {:.1} | {:.1} | {:.1} | {:.1}-{:.1} | {:.2} | {:.2} | {:.0} |",
                s.name(),
                l.p50,
                l.p99,
                l.max,
                l.round_p50.0,
                l.round_p50.1,
                l.p50 / base.p50,
                l.p99 / base.p99,
                tasks / t.median_s
            );
        }
    }

    fn json(&self, wall: f64, pinned: bool) -> String {
        let num = |x: f64| {
            if x.is_finite() {
                format!("{x}")
            } else {
                "null".to_string()
            }
        };
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut o = String::from("{\n");
        o += &format!("  \"unix_time\": {unix},\n");
        o += &format!("  \"rounds\": {},\n", self.rounds);
        o += &format!("  \"quick\": {},\n", self.quick);
        o += &format!("  \"pinned\": {pinned},\n");
        o += &format!("  \"wall_seconds\": {},\n", num(wall));
        o += &format!(
            "  \"sizes\": {{\"wakes_per_run\": {}, \"wake_warmup\": {WAKE_WARMUP}, \"gap_us\": {}, \
             \"tasks_per_run\": {}, \"bounded_capacity\": {}}},\n",
            self.cfg.sizes.wakes,
            num(self.cfg.gap.as_secs_f64() * 1e6),
            self.cfg.sizes.tasks,
            self.cfg.capacity
        );
        o += &format!("  \"baseline\": {},\n", json_str(BASELINE.name()));
        o += "  \"workloads\": [\n";
        let mut ws = Vec::new();
        for (wi, w) in WORKLOADS.iter().enumerate() {
            if self.runs(sys_index(BASELINE), wi).is_empty() {
                continue;
            }
            let base_lat = lat_summary(self.runs(sys_index(BASELINE), wi));
            let base_thr = thr_summary(self.runs(sys_index(BASELINE), wi));
            let rows: Vec<String> = SYSTEMS
                .iter()
                .enumerate()
                .filter(|&(_, s)| s.runs_in(*w, &self.cfg))
                .map(|(si, s)| {
                    let runs = self.runs(si, wi);
                    let mut r = format!("      {{\"system\": {}", json_str(s.name()));
                    let wait: Vec<String> = runs
                        .iter()
                        .map(|x| num(100.0 * x.exec.wait_ns as f64 / x.exec.life_ns.max(1) as f64))
                        .collect();
                    r += &format!(", \"exec_thread_waiting_pct\": [{}]", wait.join(", "));
                    if let Some(p) = parks_per_unit(runs) {
                        r += &format!(", \"parks_per_unit\": {}", num(p));
                    }
                    if !runs.iter().all(|x| x.lat_ns.is_empty()) {
                        let l = lat_summary(runs);
                        let per_round: Vec<String> = runs
                            .iter()
                            .map(|x| {
                                let mut v = x.lat_ns.clone();
                                v.sort_unstable();
                                format!(
                                    "{{\"p50\": {}, \"p99\": {}, \"max\": {}}}",
                                    num(us(pct(&v, 50.0))),
                                    num(us(pct(&v, 99.0))),
                                    num(us(v.last().copied().unwrap_or(0)))
                                )
                            })
                            .collect();
                        r += &format!(
                            ", \"latency_us\": {{\"samples\": {}, \"p50\": {}, \"p99\": {}, \"max\": {}, \
                             \"p50_ratio\": {}, \"p99_ratio\": {}, \"per_round\": [{}]}}",
                            l.n,
                            num(l.p50),
                            num(l.p99),
                            num(l.max),
                            num(l.p50 / base_lat.p50),
                            num(l.p99 / base_lat.p99),
                            per_round.join(", ")
                        );
                        if !runs.iter().all(|x| x.call_ns.is_empty()) {
                            r += &format!(
                                ", \"wake_call_us\": {{\"p50\": {}, \"p99\": {}}}, \"no_wait_pct\": {}",
                                num(l.call_p50),
                                num(l.call_p99),
                                num(self.no_wait_pct(runs))
                            );
                        }
                    }
                    if matches!(w, Workload::SpawnThroughput | Workload::SpawnLatency) {
                        let t = thr_summary(runs);
                        let tasks = self.cfg.sizes.tasks as f64;
                        r += &format!(
                            ", \"samples_ms\": [{}], \"median_ms\": {}, \"min_ms\": {}, \"max_ms\": {}, \
                             \"tasks_per_sec\": {}, \"ns_per_task\": {}, \"spawn_call_ns_per_task\": {}, \
                             \"time_ratio\": {}, \"exec_thread_cpu_ns_per_task\": {}, \
                             \"exec_thread_page_faults\": {}",
                            runs.iter()
                                .map(|x| num(x.secs * 1e3))
                                .collect::<Vec<_>>()
                                .join(", "),
                            num(t.median_s * 1e3),
                            num(t.min_s * 1e3),
                            num(t.max_s * 1e3),
                            num(tasks / t.median_s),
                            num(t.median_s * 1e9 / tasks),
                            num(t.spawn_s * 1e9 / tasks),
                            num(t.median_s / base_thr.median_s),
                            num(t.exec_cpu_s * 1e9 / tasks),
                            num(t.exec_faults)
                        );
                    }
                    r + "}"
                })
                .collect();
            ws.push(format!(
                "    {{\"key\": {}, \"systems\": [\n{}\n    ]}}",
                json_str(w.key()),
                rows.join(",\n")
            ));
        }
        o += &ws.join(",\n");
        o += "\n  ]\n}\n";
        o
    }
}

// ---------------------------------------------------------------------------

/// `profile N`: the remote spawn path on one thread, for callgrind. The
/// main thread spawns `N` tasks through a `RemoteSpawner`
/// ([`profile_spawn`]), then the executor takes and runs them all
/// ([`profile_exec`], `run_until_stalled`), then the handles are read
/// ([`profile_join`]). Each function is a `--toggle-collect` target:
/// `valgrind --tool=callgrind --toggle-collect='remote::profile_exec' $B
/// profile 100000`, Ir / N = the executor's instructions per remote task.
/// One untimed round of `N` tasks ([`profile_warm_up`], not a toggle
/// target) runs first on the same executor, so that the measured round
/// finds the state of a running executor (the thread's cell cache filled,
/// the slab and the queues grown), as the throughput benchmark does after
/// its first tasks.
fn profile(n: usize, bounded: bool) {
    let ex = tourbillon::Builder::new().queue(0u8, 1).build().unwrap();
    let remote = ex.remote_spawner();
    profile_warm_up(&ex, &remote, n);
    let t = Instant::now();
    let hs = if bounded {
        let cap = std::num::NonZeroUsize::new(n.max(1)).unwrap();
        profile_bounded_spawn(&ex.bounded_remote_spawner(cap), n)
    } else {
        profile_spawn(&remote, n)
    };
    let spawned = t.elapsed();
    let t = Instant::now();
    let polls = profile_exec(&ex);
    let ran = t.elapsed();
    let t = Instant::now();
    let sum = profile_join(hs);
    let joined = t.elapsed();
    assert_eq!(polls as usize, n);
    assert_eq!(sum, n * (n - 1) / 2);
    let per = |d: Duration| d.as_nanos() as f64 / n as f64;
    println!(
        "profile: {n} remote tasks; ns per task (wall, one thread): spawn {:.1}, executor {:.1}, join {:.1}",
        per(spawned),
        per(ran),
        per(joined)
    );
}

/// The untimed round of [`profile`]: spawns, runs and joins `n` tasks.
#[inline(never)]
fn profile_warm_up(
    ex: &tourbillon::Executor<u8>,
    remote: &tourbillon::remote::RemoteSpawner<u8>,
    n: usize,
) {
    let hs: Vec<_> = (0..n)
        .map(|i| remote.spawn(0, async move { i }).unwrap())
        .collect();
    assert_eq!(ex.run_until_stalled() as usize, n);
    futures::executor::block_on(async {
        for h in hs {
            h.await.unwrap();
        }
    });
}

#[inline(never)]
fn profile_spawn(
    remote: &tourbillon::remote::RemoteSpawner<u8>,
    n: usize,
) -> Vec<tourbillon::remote::RemoteJoinHandle<usize>> {
    (0..n)
        .map(|i| remote.spawn(0, async move { i }).unwrap())
        .collect()
}

/// `profile-bounded N`: [`profile_bounded_spawn`] instead of
/// [`profile_spawn`] (a bounded spawner of capacity `N`, never full).
#[inline(never)]
fn profile_bounded_spawn(
    remote: &tourbillon::remote::BoundedRemoteSpawner<u8>,
    n: usize,
) -> Vec<tourbillon::remote::RemoteJoinHandle<usize>> {
    futures::executor::block_on(async {
        let mut hs = Vec::with_capacity(n);
        for i in 0..n {
            hs.push(remote.spawn(0, async move { i }).await.unwrap());
        }
        hs
    })
}

#[inline(never)]
fn profile_exec(ex: &tourbillon::Executor<u8>) -> u64 {
    ex.run_until_stalled()
}

#[inline(never)]
fn profile_join(hs: Vec<tourbillon::remote::RemoteJoinHandle<usize>>) -> usize {
    futures::executor::block_on(async {
        let mut sum = 0usize;
        for h in hs {
            sum = sum.wrapping_add(h.await.unwrap());
        }
        sum
    })
}

/// `profile-feed N`: a stream of remote spawns as a flooded executor's
/// poll boundaries see it, on one thread, for callgrind: a task of the
/// executor spawns `N` tasks through a `RemoteSpawner`, one per poll (it
/// yields after each), so that each boundary finds an op in the inbox.
/// `--toggle-collect='remote::profile_feed_exec'`, Ir / N = instructions
/// per remote task, its spawn call and its share of the feeding task
/// included. One untimed round first, as [`profile`].
fn profile_feed(n: usize) {
    let ex = tourbillon::Builder::new().queue(0u8, 1).build().unwrap();
    for measured in [false, true] {
        let remote = ex.remote_spawner();
        let feeder = ex.spawn(0, async move {
            let mut hs = Vec::with_capacity(n);
            for i in 0..n {
                hs.push(remote.spawn(0, async move { i }).unwrap());
                tourbillon::task::yield_now().await;
            }
            hs
        });
        let t = Instant::now();
        let polls = if measured {
            profile_feed_exec(&ex)
        } else {
            ex.run_until_stalled()
        };
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        assert_eq!(polls as usize, 2 * n + 1);
        let hs = ex.block_on(feeder.unwrap()).unwrap();
        assert_eq!(profile_join(hs), n * (n - 1) / 2);
        if measured {
            println!("profile-feed: {n} remote tasks; ns per task (wall, one thread): {ns:.1}");
        }
    }
}

#[inline(never)]
fn profile_feed_exec(ex: &tourbillon::Executor<u8>) -> u64 {
    // Not folded into `profile_exec` (an identical body): a toggle target
    // of its own.
    std::hint::black_box(ex).run_until_stalled()
}

/// A value alone on its cache line (and on the adjacent one, which some
/// CPUs fetch in pairs).
#[repr(align(128))]
struct OwnLine(AtomicU64);

/// `line-latency`: one cache line bounced between a thread on the remote
/// thread's CPU and one on the executor's CPU (pinned as the benchmark pins
/// them), each waiting for the other's store: 1,000,000 round trips, 7
/// times, median. Half a round trip is what a line written on one CPU
/// costs the other to read, the least a handoff between the two threads
/// pays for each line it moves (the remote spawn's op, its task's memory,
/// the inbox's words).
fn line_latency() {
    const TRIPS: u64 = 1_000_000;
    let line = Arc::new(OwnLine(AtomicU64::new(0)));
    let other = line.clone();
    let echo = std::thread::spawn(move || {
        let pinned = pin_thread(EXEC_CPU);
        for round in 0..7u64 {
            let base = round * 2 * TRIPS;
            for i in 0..TRIPS {
                while other.0.load(Ordering::Acquire) != base + 2 * i + 1 {
                    std::hint::spin_loop();
                }
                other.0.store(base + 2 * i + 2, Ordering::Release);
            }
        }
        pinned
    });
    let pinned = pin_thread(REMOTE_CPU);
    let mut trips = Vec::new();
    for round in 0..7u64 {
        let base = round * 2 * TRIPS;
        let t = Instant::now();
        for i in 0..TRIPS {
            line.0.store(base + 2 * i + 1, Ordering::Release);
            while line.0.load(Ordering::Acquire) != base + 2 * i + 2 {
                std::hint::spin_loop();
            }
        }
        trips.push(t.elapsed().as_nanos() as f64 / TRIPS as f64);
    }
    let echo_pinned = echo.join().expect("echo thread panicked");
    let rt = median(&trips);
    println!(
        "line-latency: a cache line between CPU {REMOTE_CPU} and CPU {EXEC_CPU}{}: round trip {rt:.1} ns (median of 7 x {TRIPS}), one way {:.1} ns",
        if pinned && echo_pinned { "" } else { " (not pinned)" },
        rt / 2.0
    );
}

fn main() {
    let wall = Instant::now();
    if std::env::args().any(|a| a == "line-latency") {
        line_latency();
        return;
    }
    if let Some(n) = std::env::args()
        .skip_while(|a| a != "profile-feed")
        .nth(1)
        .and_then(|n| n.parse().ok())
    {
        profile_feed(n);
        return;
    }
    for (mode, bounded) in [("profile", false), ("profile-bounded", true)] {
        if let Some(n) = std::env::args()
            .skip_while(|a| a != mode)
            .nth(1)
            .and_then(|n| n.parse().ok())
        {
            profile(n, bounded);
            return;
        }
    }
    let args = common::Args::from_env();
    let value = |name: &str| args.value(name);
    let smoke = args.smoke();
    let quick = args.flag("--quick") || smoke;
    let rounds = args
        .parsed::<usize>("--rounds")
        .unwrap_or(if smoke {
            1
        } else if quick {
            3
        } else {
            7
        })
        .max(1);
    let gap_us = args.parsed::<u64>("--gap-us").unwrap_or(50);
    let out = value("--out")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::target_subdir("remote"));
    let pin = !args.flag("--no-pin");
    let capacity = args.parsed::<usize>("--capacity").unwrap_or(128).max(1);
    let cfg = Config {
        sizes: if smoke {
            SMOKE
        } else if quick {
            QUICK
        } else {
            FULL
        },
        capacity,
        spawn_only: args.flag("--spawn-only"),
        only: value("--only").map(|o| &*o.to_string().leak()),
        gap: Duration::from_micros(gap_us),
        pin,
        keep: args.flag("--keep-executors"),
    };
    let pinned = pin && pin_thread(REMOTE_CPU);
    if pin {
        if pinned {
            println!("remote (main) thread pinned to CPU {REMOTE_CPU}, executor threads to CPU {EXEC_CPU} (taskset -p -c N <tid>)");
        } else {
            println!("not pinned (taskset unavailable or refused); figures are noisier");
        }
    } else {
        println!("not pinned (--no-pin)");
    }
    if smoke {
        println!("SMOKE PASS (no --bench): {rounds} round, smallest sizes; figures not comparable");
    } else if quick {
        println!("QUICK MODE: {rounds} rounds, reduced sizes; figures not comparable to full runs");
    }
    println!(
        "wakes: {} recorded per run (+{WAKE_WARMUP} warm-up), idle gap {gap_us} us; spawns: {} tasks per run. \
         bounded spawner capacity {}. {rounds} rounds, systems alternated run by run, {}",
        cfg.sizes.wakes,
        cfg.sizes.tasks,
        cfg.capacity,
        if cfg.keep {
            "one executor thread per system, kept for every run (--keep-executors)"
        } else {
            "fresh executor thread per run"
        }
    );

    // One untimed pass at the quick sizes (thread start-up, page faults,
    // allocator growth); at the smoke sizes in a smoke pass.
    let warm = Config {
        sizes: if smoke { SMOKE } else { QUICK },
        ..cfg
    };
    let mut kept = Kept::default();
    for w in WORKLOADS {
        for s in SYSTEMS.into_iter().filter(|s| s.runs_in(w, &warm)) {
            drop(s.run(w, &warm, cfg.keep.then_some(&mut kept)));
        }
    }

    let mut samples: Vec<Vec<Vec<Sample>>> = SYSTEMS
        .iter()
        .map(|_| WORKLOADS.iter().map(|_| Vec::new()).collect())
        .collect();
    for round in 0..rounds {
        let t = Instant::now();
        for (wi, w) in WORKLOADS.iter().enumerate() {
            for (si, s) in SYSTEMS.iter().enumerate() {
                if s.runs_in(*w, &cfg) {
                    samples[si][wi].push(s.run(*w, &cfg, cfg.keep.then_some(&mut kept)));
                }
            }
        }
        eprintln!(
            "round {}/{rounds} done in {:.1} s",
            round + 1,
            t.elapsed().as_secs_f64()
        );
    }
    kept.close();
    if PIN_FAILED.load(Ordering::Relaxed) {
        println!("(some executor threads could not pin themselves to CPU {EXEC_CPU})");
    }

    let report = Report {
        samples,
        cfg,
        rounds,
        quick,
    };
    if !cfg.spawn_only {
        report.print_wake(
        0,
        &format!(
            "Wake-to-poll latency from another thread, idle executor ({} wakes per run, {gap_us} us \
             spin after each ack before the next wake; all samples of {rounds} rounds)",
            cfg.sizes.wakes
        ),
    );
        report.print_wake(
        1,
        &format!(
            "Wake-to-poll latency from another thread, back-to-back ({} wakes per run, next wake as \
             soon as the ack is seen; all samples of {rounds} rounds)",
            cfg.sizes.wakes
        ),
    );
    }
    report.print_spawn();

    let wall = wall.elapsed().as_secs_f64();
    if let Err(e) = std::fs::create_dir_all(&out) {
        println!("cannot create {}: {e}", out.display());
    } else {
        let json = out.join("remote.json");
        match std::fs::write(&json, report.json(wall, pinned)) {
            Ok(()) => println!("\nwrote {}", json.display()),
            Err(e) => println!("\ncannot write {}: {e}", json.display()),
        }
    }
    println!("wall time {wall:.1} s");
}
