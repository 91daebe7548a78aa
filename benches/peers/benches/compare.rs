//! Peer comparison: tourbillon against other single-threaded executors on
//! the four workloads of the peers table (`W1` to `W4`), in one process.
//!
//! Workloads (each system uses its own `yield_now`: tokio's for tokio and
//! clockworker, futures-lite's for async-executor, `LocalPool` and glommio,
//! `tourbillon::task::yield_now` for tourbillon):
//! * `W1 yield5` (the headline, as `benches/overhead.rs`): 1,000 warm-up
//!   tasks that yield once, awaited; then, timed, 50,000 tasks that each
//!   yield 5 times, all spawned, then every handle awaited in spawn order;
//! * `W2 spawn`: 100,000 empty tasks spawned, then every handle awaited;
//! * `W3 yield-only`: one task yielding 1,000,000 times;
//! * `W4 pingpong`: two tasks, 100,000 round trips over two
//!   `futures::channel::mpsc::channel(1)` (a message is one way: two
//!   messages per round trip).
//!
//! The timed part runs from the first spawn to the last handle awaited (the
//! vector of handles is allocated before it, so that both the timings and
//! the allocation counts are those of the executors).
//!
//! Systems: tourbillon with one `RunnableFifo` queue, with one `Las::new()`
//! queue, with one `Las::exact()` queue, with 4 queues of shares 1:2:3:4, with 8 queues of shares
//! 1:2:...:8 (tasks spread round-robin) and with one `RunnableFifo` queue
//! that reads the clock once per poll (a stall detector of one hour, which
//! never reports: a clock read and a comparison per poll, about the least that `Las`, the observability and an exact
//! charge at each queue switch can cost), and the same with latency
//! histograms on (`tourbillon FIFO, histograms + stall detector`: what
//! the observability costs over its clock read);
//! tokio `current_thread` + `LocalSet` (`spawn_local`, the baseline of every
//! ratio); tokio `current_thread` with `tokio::spawn`; async-executor
//! `LocalExecutor`; futures `LocalPool` (`spawn_local_with_handle`);
//! clockworker 0.1.1 with `RunnableFifo` and with `LAS` (its executor runs as
//! a task of a tokio `LocalSet`); glommio 0.9 `LocalExecutor` (reported as
//! unavailable when it cannot start, e.g. without io_uring); and the
//! *floor* (`floor/mod.rs`): the least an executor can do per task (one `Rc`
//! per task, a `Vec` slab with a free list, a `VecDeque<u32>` run queue, a
//! waker whose clone and drop do nothing), the yardstick for the others;
//! and the *floor with queues* (`floor/queues.rs`: the floor with one run
//! queue per queue, served weighted round-robin in polls, with no clock)
//! on 1 queue and on 8 queues of shares 1:2:...:8 (tasks spread
//! round-robin, and, on W1, spawned in 8 blocks of consecutive tasks), the
//! yardstick for tourbillon's rows with queues.
//!
//! Systems are alternated round by round, in an order shuffled for each
//! round and workload (with a fixed seed, the same orders in every run of
//! the bench), and each timed run follows an untimed run of the same
//! system and workload: a run is affected by the one before it (see
//! PROFILING.md, "Why timings move"), so each system is timed after
//! itself. A fresh executor or
//! runtime per round, in one process pinned to CPU 1. After the
//! timed rounds, a separate untimed pass counts allocations (a counting
//! global allocator, switched on only for that pass) per spawned task on W1
//! and W2. Prints a table per workload (median / min / max, ns per unit,
//! ratio of medians to tokio `LocalSet`), the memory table, the project's
//! targets, the same ratios for the floor with queues and what the clock
//! read per poll costs on W1 and W4; writes `compare.json` and `compare.svg`
//! (ratios, log scale) to `compare/` in the target directory
//! (`target/compare/` at the repository root by default) or to `--out DIR`
//! (a relative `DIR` is relative to benches/peers, where cargo runs this
//! bench).
//!
//! This bench is the target of the workspace member `tourbillon-peers`
//! (benches/peers), whose dependencies are the peers, so that they are not
//! the library's. Usage, from the repository root:
//! `cargo bench -p tourbillon-peers --bench compare [-- --rounds N --quick
//! --no-pin --out DIR --only NAME,NAME --tokio-enable-all]`. `--quick`: 3
//! rounds and a tenth of the sizes (labelled); `--only`: the systems whose
//! names contain one of the words, plus the baseline; `--tokio-enable-all`:
//! tokio runtimes with I/O and time drivers (see `tokio_rt`). Unknown flags
//! (such as `--bench`, which cargo passes) are ignored.

#[path = "../../common/mod.rs"]
mod common;
mod floor;

use common::{json_str, median};

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::Instant;

use futures::{SinkExt, StreamExt};

// ---------------------------------------------------------------------------
// Counting allocator

/// Forwards to `System`; counts allocations and bytes while `COUNTING` is
/// on (the timed rounds pay one relaxed load per allocation).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

impl Counting {
    #[inline]
    fn grow(size: usize) {
        if COUNTING.load(Relaxed) {
            ALLOCS.fetch_add(1, Relaxed);
            BYTES.fetch_add(size as u64, Relaxed);
            let live = LIVE.fetch_add(size as i64, Relaxed) + size as i64;
            PEAK.fetch_max(live, Relaxed);
        }
    }

    #[inline]
    fn shrink(size: usize) {
        if COUNTING.load(Relaxed) {
            LIVE.fetch_sub(size as i64, Relaxed);
        }
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments,
// so `System`'s guarantees carry over; the counting touches only atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::grow(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::grow(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        Self::shrink(layout.size());
        // SAFETY: `ptr` was allocated by `System` (through us) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::shrink(layout.size());
        Self::grow(new_size);
        // SAFETY: the caller upholds `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Start of a timed (and, in the memory pass, counted) region.
struct Mark {
    start: Instant,
    allocs: u64,
    bytes: u64,
    live: i64,
}

/// What one run of a workload measured.
#[derive(Clone, Copy, Default)]
struct Sample {
    secs: f64,
    allocs: u64,
    bytes: u64,
    /// Peak of live heap bytes above the level at the start of the region.
    peak: i64,
}

impl Mark {
    fn now() -> Mark {
        let live = LIVE.load(Relaxed);
        PEAK.store(live, Relaxed);
        Mark {
            allocs: ALLOCS.load(Relaxed),
            bytes: BYTES.load(Relaxed),
            live,
            start: Instant::now(),
        }
    }

    fn end(self) -> Sample {
        let secs = self.start.elapsed().as_secs_f64();
        Sample {
            secs,
            allocs: ALLOCS.load(Relaxed) - self.allocs,
            bytes: BYTES.load(Relaxed) - self.bytes,
            peak: PEAK.load(Relaxed) - self.live,
        }
    }
}

// ---------------------------------------------------------------------------
// Workloads, generic over the system

const WARMUP: usize = 1_000;
const YIELDS: usize = 5;

#[derive(Clone, Copy)]
struct Sizes {
    w1_tasks: usize,
    w2_tasks: usize,
    w3_yields: usize,
    w4_trips: usize,
}

impl Sizes {
    fn scaled(self, div: usize) -> Sizes {
        Sizes {
            w1_tasks: self.w1_tasks / div,
            w2_tasks: self.w2_tasks / div,
            w3_yields: self.w3_yields / div,
            w4_trips: self.w4_trips / div,
        }
    }
}

const FULL: Sizes = Sizes {
    w1_tasks: 50_000,
    w2_tasks: 100_000,
    w3_yields: 1_000_000,
    w4_trips: 100_000,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Workload {
    W1,
    W2,
    W3,
    W4,
}

const WORKLOADS: [Workload; 4] = [Workload::W1, Workload::W2, Workload::W3, Workload::W4];

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::W1 => "W1 yield5 (headline)",
            Workload::W2 => "W2 spawn",
            Workload::W3 => "W3 yield-only",
            Workload::W4 => "W4 pingpong",
        }
    }

    fn key(self) -> &'static str {
        match self {
            Workload::W1 => "w1_yield5",
            Workload::W2 => "w2_spawn",
            Workload::W3 => "w3_yield_only",
            Workload::W4 => "w4_pingpong",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Workload::W1 | Workload::W2 => "task",
            Workload::W3 => "yield",
            Workload::W4 => "msg",
        }
    }

    /// Units of work in one run (tasks, yields, one-way messages).
    fn units(self, sz: &Sizes) -> usize {
        match self {
            Workload::W1 => sz.w1_tasks,
            Workload::W2 => sz.w2_tasks,
            Workload::W3 => sz.w3_yields,
            Workload::W4 => 2 * sz.w4_trips,
        }
    }
}

/// What a workload needs from an executor: spawn (the index spreads tasks
/// over queues where there are several), join, and the system's yield.
trait Sys {
    type Handle<T: 'static>;

    fn spawn<F>(&self, i: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static;

    async fn join<T: 'static>(h: Self::Handle<T>) -> T;

    fn yield_now() -> impl Future<Output = ()> + Send + 'static;
}

async fn w1<S: Sys>(s: &S, tasks: usize) -> Sample {
    let warm: Vec<_> = (0..WARMUP).map(|i| s.spawn(i, S::yield_now())).collect();
    for h in warm {
        S::join(h).await;
    }
    let mut hs = Vec::with_capacity(tasks);
    let mark = Mark::now();
    for i in 0..tasks {
        hs.push(s.spawn(i, async move {
            for _ in 0..YIELDS {
                S::yield_now().await;
            }
            i
        }));
    }
    for h in hs {
        black_box(S::join(h).await);
    }
    mark.end()
}

async fn w2<S: Sys>(s: &S, tasks: usize) -> Sample {
    let mut hs = Vec::with_capacity(tasks);
    let mark = Mark::now();
    for i in 0..tasks {
        hs.push(s.spawn(i, async {}));
    }
    for h in hs {
        S::join(h).await;
    }
    mark.end()
}

async fn w3<S: Sys>(s: &S, yields: usize) -> Sample {
    let mark = Mark::now();
    let h = s.spawn(0, async move {
        for _ in 0..yields {
            S::yield_now().await;
        }
    });
    S::join(h).await;
    mark.end()
}

async fn w4<S: Sys>(s: &S, trips: usize) -> Sample {
    let (mut ping_tx, mut ping_rx) = futures::channel::mpsc::channel::<usize>(1);
    let (mut pong_tx, mut pong_rx) = futures::channel::mpsc::channel::<usize>(1);
    let mark = Mark::now();
    let pong = s.spawn(1, async move {
        while let Some(v) = ping_rx.next().await {
            if pong_tx.send(v).await.is_err() {
                break;
            }
        }
    });
    let ping = s.spawn(0, async move {
        for i in 0..trips {
            ping_tx.send(i).await.unwrap();
            let v = pong_rx.next().await.unwrap();
            black_box(v);
        }
    });
    S::join(ping).await;
    S::join(pong).await;
    mark.end()
}

async fn workload<S: Sys>(s: &S, w: Workload, sz: &Sizes) -> Sample {
    match w {
        Workload::W1 => w1(s, sz.w1_tasks).await,
        Workload::W2 => w2(s, sz.w2_tasks).await,
        Workload::W3 => w3(s, sz.w3_yields).await,
        Workload::W4 => w4(s, sz.w4_trips).await,
    }
}

// ---------------------------------------------------------------------------
// Systems

/// tourbillon: spawns through one `QueueHandle` per queue, round-robin.
struct Tourbillon(Vec<tourbillon::QueueHandle>);

impl Sys for Tourbillon {
    type Handle<T: 'static> = tourbillon::task::JoinHandle<T>;

    fn spawn<F>(&self, i: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // No division for a power-of-two number of queues (1, 4, 8): a
        // 64-bit `%` per spawn (about 10 ns here) is the harness's cost,
        // which the systems without queues do not pay.
        let n = self.0.len();
        let q = if n.is_power_of_two() {
            i & (n - 1)
        } else {
            i % n
        };
        self.0[q].spawn(f).unwrap()
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await.unwrap()
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        tourbillon::task::yield_now()
    }
}

#[derive(Clone, Copy)]
enum TbKind {
    Fifo,
    Las,
    LasExact,
    FourQueues,
    EightQueues,
    /// One `RunnableFifo` queue and a stall detector of one hour, which
    /// never reports: per poll, a clock read and a comparison.
    ClockPerPoll,
    /// One `RunnableFifo` queue with latency histograms and the stall
    /// detector of `ClockPerPoll`: what observability costs over its clock
    /// read.
    Observed,
}

fn run_tourbillon(kind: TbKind, w: Workload, sz: &Sizes) -> Result<Sample, String> {
    let mut b = tourbillon::Builder::new();
    let queues: u8 = match kind {
        TbKind::Fifo => {
            b = b.queue(0, 1);
            1
        }
        TbKind::Las => {
            b = b.queue_with(
                0,
                tourbillon::QueueSpec::new(1).scheduler(tourbillon::sched::Las::new()),
            );
            1
        }
        TbKind::LasExact => {
            b = b.queue_with(
                0,
                tourbillon::QueueSpec::new(1).scheduler(tourbillon::sched::Las::exact()),
            );
            1
        }
        TbKind::FourQueues => {
            for q in 0..4u8 {
                b = b.queue(q, q as u32 + 1);
            }
            4
        }
        TbKind::EightQueues => {
            for q in 0..8u8 {
                b = b.queue(q, q as u32 + 1);
            }
            8
        }
        TbKind::ClockPerPoll => {
            b = b
                .queue(0, 1)
                .stall_detector(std::time::Duration::from_secs(3600), |s| {
                    eprintln!("stall: {s}")
                });
            1
        }
        TbKind::Observed => {
            b = b
                .queue(0, 1)
                .latency_histograms(true)
                .stall_detector(std::time::Duration::from_secs(3600), |s| {
                    eprintln!("stall: {s}")
                });
            1
        }
    };
    let ex = b.build().map_err(|e| e.to_string())?;
    let sys = Tourbillon((0..queues).map(|q| ex.queue(q).unwrap()).collect());
    Ok(ex.block_on(workload(&sys, w, sz)))
}

/// `--tokio-enable-all`: tokio runtimes with their I/O and time drivers
/// (`enable_all`); by default none, as in `benches/overhead.rs`.
static TOKIO_ENABLE_ALL: AtomicBool = AtomicBool::new(false);

/// A tokio `current_thread` runtime (for tokio and clockworker). Without
/// drivers tokio's `yield_now` makes no system call; with the I/O driver it
/// polls it (one `epoll_wait`) before the yielded task runs again.
fn tokio_rt() -> tokio::runtime::Runtime {
    let mut b = tokio::runtime::Builder::new_current_thread();
    if TOKIO_ENABLE_ALL.load(Relaxed) {
        b.enable_all();
    }
    b.build().unwrap()
}

/// tokio `current_thread` + `LocalSet`, `spawn_local`.
struct TokioLocal;

impl Sys for TokioLocal {
    type Handle<T: 'static> = tokio::task::JoinHandle<T>;

    fn spawn<F>(&self, _: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        tokio::task::spawn_local(f)
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await.unwrap()
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        tokio::task::yield_now()
    }
}

fn run_tokio_local(w: Workload, sz: &Sizes) -> Result<Sample, String> {
    let rt = tokio_rt();
    let local = tokio::task::LocalSet::new();
    Ok(local.block_on(&rt, workload(&TokioLocal, w, sz)))
}

/// One `RunnableFifo` queue that reads the clock once per poll (a stall
/// detector of one hour, which never reports): about the least that
/// `Las`, the observability and a charge per queue switch cost.
const CLOCK_PER_POLL: &str = "tourbillon FIFO, a clock read per poll";

/// Latency histograms and the stall detector of [`CLOCK_PER_POLL`].
const OBSERVED: &str = "tourbillon FIFO, histograms + stall detector";

/// The rows of the floor with queues (`floor/queues.rs`).
const FLOOR_Q1: &str = "floor with queues, 1 queue";
const FLOOR_Q8: &str = "floor with queues, 8 queues 1:2:...:8";
const FLOOR_Q8_BLOCKS: &str = "floor with queues, 8 queues, W1 spawned in blocks";

/// The floor executor (`floor/mod.rs`).
struct FloorSys(floor::Floor);

impl Sys for FloorSys {
    type Handle<T: 'static> = floor::JoinHandle<T>;

    fn spawn<F>(&self, _: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.spawn(f)
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        floor::yield_now()
    }
}

fn run_floor(w: Workload, sz: &Sizes) -> Result<Sample, String> {
    let ex = floor::Floor::default();
    let sys = FloorSys(ex.clone());
    Ok(ex.block_on(workload(&sys, w, sz)))
}

/// The floor with queues (`floor/queues.rs`): task `i` on queue `i % n`
/// (round-robin, as tourbillon's rows with queues), or, with `block`, on
/// queue `i / block` (the last queue takes the rest): each queue's tasks
/// then lie together in memory.
struct FloorQueuesSys {
    ex: floor::queues::FloorQueues,
    block: Option<usize>,
}

impl Sys for FloorQueuesSys {
    type Handle<T: 'static> = floor::JoinHandle<T>;

    fn spawn<F>(&self, i: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let n = self.ex.queues();
        let q = match self.block {
            Some(b) => (i / b).min(n - 1),
            // n is a power of two here (1 or 8): no division.
            None => i & (n - 1),
        };
        self.ex.spawn(q, f)
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        floor::yield_now()
    }
}

/// The floor with `n` queues of shares 1:2:...:n; `blocks`: W1's tasks in
/// `n` blocks of consecutive spawns instead of round-robin.
fn run_floor_queues(n: u32, blocks: bool, w: Workload, sz: &Sizes) -> Result<Sample, String> {
    let shares: Vec<u32> = (1..=n).collect();
    let ex = floor::queues::FloorQueues::new(&shares);
    let block = blocks.then(|| sz.w1_tasks.div_ceil(n as usize).max(1));
    let sys = FloorQueuesSys {
        ex: ex.clone(),
        block,
    };
    Ok(ex.block_on(workload(&sys, w, sz)))
}

/// tokio `current_thread`, `tokio::spawn` (Send futures).
struct TokioSpawn;

impl Sys for TokioSpawn {
    type Handle<T: 'static> = tokio::task::JoinHandle<T>;

    fn spawn<F>(&self, _: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        tokio::spawn(f)
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await.unwrap()
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        tokio::task::yield_now()
    }
}

fn run_tokio_spawn(w: Workload, sz: &Sizes) -> Result<Sample, String> {
    Ok(tokio_rt().block_on(workload(&TokioSpawn, w, sz)))
}

/// async-executor `LocalExecutor`.
struct AsyncExecutor<'a>(&'a async_executor::LocalExecutor<'static>);

impl Sys for AsyncExecutor<'_> {
    type Handle<T: 'static> = async_executor::Task<T>;

    fn spawn<F>(&self, _: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.spawn(f)
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        futures_lite::future::yield_now()
    }
}

fn run_async_executor(w: Workload, sz: &Sizes) -> Result<Sample, String> {
    let ex = async_executor::LocalExecutor::new();
    let sys = AsyncExecutor(&ex);
    Ok(futures_lite::future::block_on(
        ex.run(workload(&sys, w, sz)),
    ))
}

/// futures `LocalPool`, `spawn_local_with_handle`.
struct LocalPool(futures::executor::LocalSpawner);

impl Sys for LocalPool {
    type Handle<T: 'static> = futures::future::RemoteHandle<T>;

    fn spawn<F>(&self, _: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        use futures::task::LocalSpawnExt;
        self.0.spawn_local_with_handle(f).unwrap()
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        futures_lite::future::yield_now()
    }
}

fn run_local_pool(w: Workload, sz: &Sizes) -> Result<Sample, String> {
    let mut pool = futures::executor::LocalPool::new();
    let sys = LocalPool(pool.spawner());
    Ok(pool.run_until(workload(&sys, w, sz)))
}

/// clockworker 0.1.1: its executor runs as a task of a tokio `LocalSet`.
/// Its `QueueHandle` type is not exported (it lives in a private module),
/// so it cannot be stored in a struct: each spawn takes a fresh handle with
/// `Executor::queue` (an `Rc` clone and a scan of one queue id, a few ns).
struct Clockworker(std::rc::Rc<clockworker::Executor<u8>>);

impl Sys for Clockworker {
    type Handle<T: 'static> = clockworker::JoinHandle<T, u8>;

    fn spawn<F>(&self, _: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.0.queue(0).unwrap().spawn(f)
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await.unwrap()
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        tokio::task::yield_now()
    }
}

#[derive(Clone, Copy)]
enum CwKind {
    Fifo,
    Las,
}

fn run_clockworker(kind: CwKind, w: Workload, sz: &Sizes) -> Result<Sample, String> {
    let b = clockworker::ExecutorBuilder::new();
    let b = match kind {
        CwKind::Fifo => b.with_queue(0u8, 1, clockworker::RunnableFifo::new()),
        CwKind::Las => b.with_queue(0u8, 1, clockworker::LAS::new()),
    };
    let ex = b.build()?;
    let rt = tokio_rt();
    let local = tokio::task::LocalSet::new();
    let sample = local.block_on(&rt, async {
        let runner = ex.clone();
        // The executor's loop; it never ends by itself (its shutdown mode
        // type is not exported either) and is dropped with the `LocalSet`.
        tokio::task::spawn_local(async move { runner.run().await });
        workload(&Clockworker(ex), w, sz).await
    });
    drop(local);
    Ok(sample)
}

/// glommio 0.9 `LocalExecutor`.
struct Glommio;

impl Sys for Glommio {
    type Handle<T: 'static> = glommio::Task<T>;

    fn spawn<F>(&self, _: usize, f: F) -> Self::Handle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        glommio::spawn_local(f)
    }

    async fn join<T: 'static>(h: Self::Handle<T>) -> T {
        h.await
    }

    fn yield_now() -> impl Future<Output = ()> + Send + 'static {
        futures_lite::future::yield_now()
    }
}

fn run_glommio(w: Workload, sz: &Sizes) -> Result<Sample, String> {
    let sz = *sz;
    let run = move || -> Result<Sample, String> {
        let ex = glommio::LocalExecutorBuilder::default()
            .make()
            .map_err(|e| e.to_string())?;
        Ok(ex.run(async move { workload(&Glommio, w, &sz).await }))
    };
    match std::panic::catch_unwind(run) {
        Ok(r) => r,
        Err(p) => Err(panic_message(&p)),
    }
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}

type Runner = Box<dyn Fn(Workload, &Sizes) -> Result<Sample, String> + Send + Sync>;

struct System_ {
    name: &'static str,
    run: Runner,
    /// `Err` once the system failed to start or run (then skipped).
    status: Result<(), String>,
    /// Timed samples in seconds, per workload (index as `WORKLOADS`).
    samples: [Vec<f64>; 4],
    /// The memory pass, W1 and W2.
    memory: [Option<Sample>; 2],
}

fn systems() -> Vec<System_> {
    let v: Vec<(&'static str, Runner)> = vec![
        ("tokio LocalSet", Box::new(run_tokio_local)),
        ("tokio spawn", Box::new(run_tokio_spawn)),
        (
            "tourbillon FIFO",
            Box::new(|w, sz| run_tourbillon(TbKind::Fifo, w, sz)),
        ),
        (
            "tourbillon LAS",
            Box::new(|w, sz| run_tourbillon(TbKind::Las, w, sz)),
        ),
        (
            "tourbillon LAS exact",
            Box::new(|w, sz| run_tourbillon(TbKind::LasExact, w, sz)),
        ),
        (
            "tourbillon 4 queues 1:2:3:4",
            Box::new(|w, sz| run_tourbillon(TbKind::FourQueues, w, sz)),
        ),
        (
            "tourbillon 8 queues 1:2:...:8",
            Box::new(|w, sz| run_tourbillon(TbKind::EightQueues, w, sz)),
        ),
        (
            CLOCK_PER_POLL,
            Box::new(|w, sz| run_tourbillon(TbKind::ClockPerPoll, w, sz)),
        ),
        (
            OBSERVED,
            Box::new(|w, sz| run_tourbillon(TbKind::Observed, w, sz)),
        ),
        ("async-executor LocalExecutor", Box::new(run_async_executor)),
        ("futures LocalPool", Box::new(run_local_pool)),
        (
            "clockworker 0.1.1 RunnableFifo",
            Box::new(|w, sz| run_clockworker(CwKind::Fifo, w, sz)),
        ),
        (
            "clockworker 0.1.1 LAS",
            Box::new(|w, sz| run_clockworker(CwKind::Las, w, sz)),
        ),
        ("glommio 0.9 LocalExecutor", Box::new(run_glommio)),
        ("floor (minimal executor)", Box::new(run_floor)),
        (
            FLOOR_Q1,
            Box::new(|w, sz| run_floor_queues(1, false, w, sz)),
        ),
        (
            FLOOR_Q8,
            Box::new(|w, sz| run_floor_queues(8, false, w, sz)),
        ),
        (
            FLOOR_Q8_BLOCKS,
            Box::new(|w, sz| run_floor_queues(8, true, w, sz)),
        ),
    ];
    v.into_iter()
        .map(|(name, run)| System_ {
            name,
            run,
            status: Ok(()),
            samples: Default::default(),
            memory: [None, None],
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Statistics and reports

/// Median / min / max seconds of one system on one workload.
#[derive(Clone, Copy)]
struct Stat {
    median: f64,
    min: f64,
    max: f64,
}

fn stat(samples: &[f64]) -> Option<Stat> {
    if samples.is_empty() {
        return None;
    }
    Some(Stat {
        median: median(samples),
        min: samples.iter().cloned().fold(f64::INFINITY, f64::min),
        max: samples.iter().cloned().fold(0.0, f64::max),
    })
}

struct Report<'a> {
    systems: &'a [System_],
    sizes: Sizes,
    rounds: usize,
    quick: bool,
    pinned: bool,
}

impl Report<'_> {
    /// The position of system `name`; `None` when `--only` left it out.
    fn index(&self, name: &str) -> Option<usize> {
        self.systems.iter().position(|s| s.name == name)
    }

    fn stat(&self, sys: usize, wi: usize) -> Option<Stat> {
        stat(&self.systems[sys].samples[wi])
    }

    fn ns_per_unit(&self, sys: usize, wi: usize) -> Option<f64> {
        let units = WORKLOADS[wi].units(&self.sizes) as f64;
        self.stat(sys, wi).map(|s| s.median * 1e9 / units)
    }

    /// Ratio of medians to tokio `LocalSet`.
    /// Ratio of the medians of two systems on workload `wi`.
    fn ratio_between(&self, a: &str, b: &str, wi: usize) -> Option<f64> {
        let ia = self.systems.iter().position(|s| s.name == a)?;
        let ib = self.systems.iter().position(|s| s.name == b)?;
        Some(self.stat(ia, wi)?.median / self.stat(ib, wi)?.median)
    }

    /// The ratios the performance targets are stated in: tourbillon's
    /// single-queue paths against the floor, `Las` against `RunnableFifo`,
    /// a queue switch (W4 with ping and pong on different queues) against
    /// one queue, and W1 on 8 queues of different shares against one.
    fn relative_targets(&self) -> Vec<Target> {
        let (fifo, floor) = ("tourbillon FIFO", "floor (minimal executor)");
        let rows: [(&'static str, &str, &str, usize, f64); 9] = [
            ("W3 FIFO / floor", fifo, floor, 2, 1.10),
            ("W4 FIFO / floor", fifo, floor, 3, 1.10),
            ("W2 FIFO / floor (ahead of it)", fifo, floor, 1, 1.00),
            ("W1 Las::new() / FIFO", "tourbillon LAS", fifo, 0, 1.25),
            (
                "W1 Las::exact() / FIFO",
                "tourbillon LAS exact",
                fifo,
                0,
                4.0,
            ),
            (
                "W1 Las::new() / a clock read per poll",
                "tourbillon LAS",
                CLOCK_PER_POLL,
                0,
                1.05,
            ),
            (
                "W4 queue switch / one queue",
                "tourbillon 4 queues 1:2:3:4",
                fifo,
                3,
                1.40,
            ),
            (
                "W1 8 queues of shares 1:2:...:8 / one queue",
                "tourbillon 8 queues 1:2:...:8",
                fifo,
                0,
                1.05,
            ),
            (
                "W1 observability / a clock read per poll",
                OBSERVED,
                CLOCK_PER_POLL,
                0,
                1.15,
            ),
        ];
        rows.iter()
            .filter_map(|&(name, a, b, wi, limit)| {
                let r = self.ratio_between(a, b, wi)?;
                Some(Target {
                    name,
                    value: r,
                    limit,
                    detail: format!("{r:.3} ({a} / {b}, medians), target <= {limit:.2}"),
                })
            })
            .collect()
    }

    /// What one clock read per poll costs tourbillon's one-queue path (with
    /// the stall detector's comparison),
    /// for the targets that time polls or runs: W1 (six polls a task) for
    /// `Las` and the observability, W4 (one poll a message) for an exact
    /// charge at every queue switch.
    /// `(name, detail)`.
    fn clock_floor(&self) -> Vec<(&'static str, String)> {
        let fifo = "tourbillon FIFO";
        [
            ("W1 a clock read per poll / none", 0),
            ("W4 a clock read per poll (per message) / none", 3),
        ]
        .iter()
        .filter_map(|&(name, wi)| {
            let r = self.ratio_between(CLOCK_PER_POLL, fifo, wi)?;
            let extra = self.ns_per_unit(self.index(CLOCK_PER_POLL)?, wi)?
                - self.ns_per_unit(self.index(fifo)?, wi)?;
            Some((
                name,
                format!("{r:.3} ({CLOCK_PER_POLL} / {fifo}, medians; {extra:+.1} ns per unit)"),
            ))
        })
        .collect()
    }

    /// What queues cost the floor with queues (`floor/queues.rs`), for
    /// the queue targets: the same ratios as those targets, of a system
    /// with no clock and nothing else to do. `(name, detail)`.
    fn yardsticks(&self) -> Vec<(&'static str, String)> {
        let rows: [(&'static str, &str, &str, usize); 3] = [
            ("W4 queue switch / one queue", FLOOR_Q8, FLOOR_Q1, 3),
            (
                "W1 8 queues of shares 1:2:...:8 / one queue",
                FLOOR_Q8,
                FLOOR_Q1,
                0,
            ),
            (
                "W1 8 queues, spawned in blocks / one queue",
                FLOOR_Q8_BLOCKS,
                FLOOR_Q1,
                0,
            ),
        ];
        rows.iter()
            .filter_map(|&(name, a, b, wi)| {
                let r = self.ratio_between(a, b, wi)?;
                Some((name, format!("{r:.3} ({a} / {b}, medians)")))
            })
            .collect()
    }

    fn ratio(&self, sys: usize, wi: usize) -> Option<f64> {
        let base = self.stat(self.index("tokio LocalSet")?, wi)?.median;
        self.stat(sys, wi).map(|s| s.median / base)
    }

    /// Allocations, bytes and peak live bytes per spawned task.
    fn memory(&self, sys: usize, mi: usize) -> Option<(f64, f64, f64)> {
        let m = self.systems[sys].memory[mi]?;
        let tasks = if mi == 0 {
            self.sizes.w1_tasks
        } else {
            self.sizes.w2_tasks
        } as f64;
        Some((
            m.allocs as f64 / tasks,
            m.bytes as f64 / tasks,
            m.peak as f64 / tasks,
        ))
    }

    fn print_tables(&self) {
        for (wi, w) in WORKLOADS.iter().enumerate() {
            let units = w.units(&self.sizes);
            println!();
            println!("{} ({} {}s per run)", w.name(), units, w.unit());
            println!();
            println!(
                "| system | median ms | min ms | max ms | ns/{} | ratio to tokio LocalSet |",
                w.unit()
            );
            println!("|---|---|---|---|---|---|");
            for (si, s) in self.systems.iter().enumerate() {
                match (self.stat(si, wi), &s.status) {
                    (Some(st), Ok(())) => println!(
                        "| {} | {:.2} | {:.2} | {:.2} | {:.1} | {:.3} |",
                        s.name,
                        st.median * 1e3,
                        st.min * 1e3,
                        st.max * 1e3,
                        self.ns_per_unit(si, wi).unwrap(),
                        self.ratio(si, wi).unwrap()
                    ),
                    (_, Err(e)) => println!("| {} | unavailable: {} | | | | |", s.name, e),
                    (None, Ok(())) => println!("| {} | no samples | | | | |", s.name),
                }
            }
        }
    }

    fn print_memory(&self) {
        println!();
        println!(
            "Memory per spawned task (untimed pass, each run on a new thread, counting allocator; W1 {} tasks, W2 {} tasks; \
             bytes = bytes allocated, peak = peak live heap above the start of the timed part):",
            self.sizes.w1_tasks, self.sizes.w2_tasks
        );
        println!();
        println!(
            "| system | W1 allocs/task | W1 bytes/task | W1 peak bytes/task | W2 allocs/task | W2 bytes/task | W2 peak bytes/task |"
        );
        println!("|---|---|---|---|---|---|---|");
        for (si, s) in self.systems.iter().enumerate() {
            if let Err(e) = &s.status {
                println!("| {} | unavailable: {} | | | | | |", s.name, e);
                continue;
            }
            let cell = |mi| match self.memory(si, mi) {
                Some((a, b, p)) => format!("{a:.2} | {b:.1} | {p:.1}"),
                None => "- | - | -".to_string(),
            };
            println!("| {} | {} | {} |", s.name, cell(0), cell(1));
        }
    }

    /// The project's targets for tourbillon FIFO (one `RunnableFifo` queue).
    fn targets(&self) -> Vec<Target> {
        let (Some(tb), Some(tokio)) = (self.index("tourbillon FIFO"), self.index("tokio LocalSet"))
        else {
            // `--only` left out a system the targets are stated against.
            return Vec::new();
        };
        let mut t = Vec::new();
        let mut ratio_target = |name: &'static str, wi: usize, limit: f64| {
            if let (Some(r), Some(ns)) = (self.ratio(tb, wi), self.ns_per_unit(tb, wi)) {
                t.push(Target {
                    name,
                    value: r,
                    limit,
                    detail: format!(
                        "{:.3}x tokio LocalSet ({:.0} vs {:.0} ns/{}), target <= {:.2}x",
                        r,
                        ns,
                        self.ns_per_unit(tokio, wi).unwrap(),
                        WORKLOADS[wi].unit(),
                        limit
                    ),
                });
            }
        };
        ratio_target("headline (W1)", 0, 0.20);
        ratio_target("spawn (W2)", 1, 0.35);
        if let Some(ns) = self.ns_per_unit(tb, 2) {
            t.push(Target {
                name: "yield (W3)",
                value: ns,
                limit: 40.0,
                detail: format!("{ns:.1} ns/yield, target <= 40 ns/yield"),
            });
        }
        let mut ratio_target = |name: &'static str, wi: usize, limit: f64| {
            if let (Some(r), Some(ns)) = (self.ratio(tb, wi), self.ns_per_unit(tb, wi)) {
                t.push(Target {
                    name,
                    value: r,
                    limit,
                    detail: format!(
                        "{:.3}x tokio LocalSet ({:.0} vs {:.0} ns/msg), target <= {:.2}x",
                        r,
                        ns,
                        self.ns_per_unit(tokio, wi).unwrap(),
                        limit
                    ),
                });
            }
        };
        ratio_target("ping-pong (W4)", 3, 1.0);
        for (mi, name) in [(0, "bytes per task (W1)"), (1, "bytes per task (W2)")] {
            if let (Some(m), Some(base)) = (self.memory(tb, mi), self.memory(tokio, mi)) {
                t.push(Target {
                    name,
                    value: m.1,
                    limit: base.1,
                    detail: format!(
                        "{:.1} bytes allocated/task ({:.2} allocs) vs tokio LocalSet {:.1} ({:.2} allocs), \
                         target <= tokio LocalSet; peak live {:.1} vs {:.1} bytes/task ({})",
                        m.1,
                        m.0,
                        base.1,
                        base.0,
                        m.2,
                        base.2,
                        if m.2 <= base.2 { "no more" } else { "more" }
                    ),
                });
            }
        }
        t
    }

    fn json(&self, targets: &[Target], wall: f64) -> String {
        let num = |x: f64| {
            if x.is_finite() {
                format!("{x}")
            } else {
                "null".to_string()
            }
        };
        let mut o = String::from("{\n");
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        o += &format!("  \"unix_time\": {unix},\n");
        o += &format!("  \"rounds\": {},\n", self.rounds);
        o += &format!("  \"quick\": {},\n", self.quick);
        o += &format!("  \"pinned\": {},\n", self.pinned);
        o += &format!(
            "  \"tokio_enable_all\": {},\n",
            TOKIO_ENABLE_ALL.load(Relaxed)
        );
        o += &format!("  \"wall_seconds\": {},\n", num(wall));
        o += &format!(
            "  \"sizes\": {{\"w1_tasks\": {}, \"w1_warmup\": {WARMUP}, \"w1_yields_per_task\": {YIELDS}, \
             \"w2_tasks\": {}, \"w3_yields\": {}, \"w4_round_trips\": {}}},\n",
            self.sizes.w1_tasks, self.sizes.w2_tasks, self.sizes.w3_yields, self.sizes.w4_trips
        );
        o += "  \"baseline\": \"tokio LocalSet\",\n";
        o += "  \"workloads\": [\n";
        for (wi, w) in WORKLOADS.iter().enumerate() {
            o += &format!(
                "    {{\"key\": {}, \"name\": {}, \"unit\": {}, \"units_per_run\": {}, \"systems\": [\n",
                json_str(w.key()),
                json_str(w.name()),
                json_str(w.unit()),
                w.units(&self.sizes)
            );
            let rows: Vec<String> = self
                .systems
                .iter()
                .enumerate()
                .map(|(si, s)| match (&s.status, self.stat(si, wi)) {
                    (Ok(()), Some(st)) => format!(
                        "      {{\"system\": {}, \"samples_ms\": [{}], \"median_ms\": {}, \"min_ms\": {}, \
                         \"max_ms\": {}, \"ns_per_unit\": {}, \"ratio\": {}}}",
                        json_str(s.name),
                        s.samples[wi]
                            .iter()
                            .map(|x| num(x * 1e3))
                            .collect::<Vec<_>>()
                            .join(", "),
                        num(st.median * 1e3),
                        num(st.min * 1e3),
                        num(st.max * 1e3),
                        num(self.ns_per_unit(si, wi).unwrap()),
                        num(self.ratio(si, wi).unwrap())
                    ),
                    (Err(e), _) => format!(
                        "      {{\"system\": {}, \"unavailable\": {}}}",
                        json_str(s.name),
                        json_str(e)
                    ),
                    (Ok(()), None) => format!(
                        "      {{\"system\": {}, \"unavailable\": \"no samples\"}}",
                        json_str(s.name)
                    ),
                })
                .collect();
            o += &rows.join(",\n");
            o += "\n    ]}";
            o += if wi + 1 < WORKLOADS.len() {
                ",\n"
            } else {
                "\n"
            };
        }
        o += "  ],\n  \"memory_per_task\": [\n";
        let rows: Vec<String> = self
            .systems
            .iter()
            .enumerate()
            .map(|(si, s)| {
                let cell = |mi| match self.memory(si, mi) {
                    Some((a, b, p)) => format!(
                        "{{\"allocs\": {}, \"bytes\": {}, \"peak_live_bytes\": {}}}",
                        num(a),
                        num(b),
                        num(p)
                    ),
                    None => "null".to_string(),
                };
                match &s.status {
                    Ok(()) => format!(
                        "    {{\"system\": {}, \"w1\": {}, \"w2\": {}}}",
                        json_str(s.name),
                        cell(0),
                        cell(1)
                    ),
                    Err(e) => format!(
                        "    {{\"system\": {}, \"unavailable\": {}}}",
                        json_str(s.name),
                        json_str(e)
                    ),
                }
            })
            .collect();
        o += &rows.join(",\n");
        o += "\n  ],\n  \"targets\": [\n";
        let rows: Vec<String> = targets
            .iter()
            .map(|t| {
                format!(
                    "    {{\"target\": {}, \"system\": \"tourbillon FIFO\", \"value\": {}, \"limit\": {}, \
                     \"met\": {}, \"detail\": {}}}",
                    json_str(t.name),
                    num(t.value),
                    num(t.limit),
                    t.met(),
                    json_str(&t.detail)
                )
            })
            .collect();
        o += &rows.join(",\n");
        o += "\n  ]\n}\n";
        o
    }

    /// Horizontal bars of the ratios to tokio `LocalSet`, one panel per
    /// workload, log scale.
    fn svg(&self, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
        use plotters::prelude::*;
        use plotters::style::text_anchor::{HPos, Pos, VPos};

        let root = SVGBackend::new(path, (1400, 1000)).into_drawing_area();
        root.fill(&WHITE)?;
        let title = format!(
            "Single-threaded executors: time relative to tokio LocalSet (median of {} rounds, lower is faster){}",
            self.rounds,
            if self.quick { " [QUICK: reduced sizes]" } else { "" }
        );
        let root = root.titled(&title, ("sans-serif", 20))?;
        let panels = root.split_evenly((2, 2));
        for (wi, panel) in panels.iter().enumerate() {
            let w = WORKLOADS[wi];
            // Top to bottom in the order of the tables.
            let rows: Vec<(&str, f64)> = self
                .systems
                .iter()
                .enumerate()
                .filter(|(_, s)| s.status.is_ok())
                .filter_map(|(si, s)| self.ratio(si, wi).map(|r| (s.name, r)))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if rows.is_empty() {
                continue;
            }
            let n = rows.len();
            let lo_r = rows.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
            let hi_r = rows.iter().map(|r| r.1).fold(0.0, f64::max);
            let lo = 10f64.powf((lo_r.min(1.0) / 1.5).log10().floor());
            let hi = 10f64.powf((hi_r.max(1.0) * 1.4).log10().ceil());
            let names: Vec<&str> = rows.iter().map(|r| r.0).collect();
            let caption = format!(
                "{}: tokio LocalSet = {:.0} ns/{}",
                w.name(),
                self.index("tokio LocalSet")
                    .and_then(|i| self.ns_per_unit(i, wi))
                    .unwrap_or(f64::NAN),
                w.unit()
            );
            let mut chart = ChartBuilder::on(panel)
                .caption(caption, ("sans-serif", 16))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(230)
                .build_cartesian_2d((lo..hi).log_scale(), (0..n - 1).into_segmented())?;
            let label = |v: &SegmentValue<usize>| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                    names.get(*i).map(|s| s.to_string()).unwrap_or_default()
                }
                SegmentValue::Last => String::new(),
            };
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(n)
                .y_label_formatter(&label)
                .x_desc("ratio to tokio LocalSet (log scale)")
                .draw()?;
            chart.draw_series(rows.iter().enumerate().map(|(i, (name, r))| {
                let color = if name.starts_with("tourbillon") {
                    RGBColor(204, 85, 0)
                } else if *name == "tokio LocalSet" {
                    RGBColor(60, 60, 60)
                } else {
                    RGBColor(120, 140, 180)
                };
                let mut bar = Rectangle::new(
                    [
                        (lo, SegmentValue::Exact(i)),
                        (*r, SegmentValue::Exact(i + 1)),
                    ],
                    color.filled(),
                );
                bar.set_margin(4, 4, 0, 0);
                bar
            }))?;
            let font = TextStyle::from(("sans-serif", 13).into_font())
                .pos(Pos::new(HPos::Left, VPos::Center));
            chart.draw_series(rows.iter().enumerate().map(|(i, (_, r))| {
                Text::new(
                    format!("{r:.2}x"),
                    (*r * 1.06, SegmentValue::CenterOf(i)),
                    font.clone(),
                )
            }))?;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Last)],
                BLACK.stroke_width(1),
            )))?;
        }
        root.present()?;
        Ok(())
    }
}

struct Target {
    name: &'static str,
    value: f64,
    limit: f64,
    detail: String,
}

impl Target {
    fn met(&self) -> bool {
        self.value <= self.limit
    }
}

// ---------------------------------------------------------------------------

/// `compare/` in the target directory of this executable (which cargo
/// builds at `TARGET/release/deps/compare-HASH`), whatever the working
/// directory (cargo runs a bench in its package's directory,
/// benches/peers); `target/compare` if the executable's path does not
/// have that shape.
fn default_out() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            let deps = exe.parent()?;
            (deps.file_name()? == "deps").then_some(())?;
            Some(deps.parent()?.parent()?.join("compare"))
        })
        .unwrap_or_else(|| PathBuf::from("target/compare"))
}

fn main() {
    let wall = Instant::now();
    let args = common::Args::from_env();
    let value = |name: &str| args.value(name);
    let quick = args.flag("--quick");
    let rounds = args
        .parsed::<usize>("--rounds")
        .unwrap_or(if quick { 3 } else { 7 })
        .max(1);
    let out = value("--out")
        .map(PathBuf::from)
        .unwrap_or_else(default_out);
    let pinned = !args.flag("--no-pin");
    if pinned {
        common::pin_to_cpu1();
    }
    let tokio_all = args.flag("--tokio-enable-all");
    TOKIO_ENABLE_ALL.store(tokio_all, Relaxed);
    let sizes = if quick { FULL.scaled(10) } else { FULL };
    if quick {
        println!("QUICK MODE: {rounds} rounds, a tenth of the sizes; figures not comparable to full runs");
    }
    println!(
        "W1: {WARMUP} warm-up tasks, then {} tasks x {YIELDS} yields; W2: {} empty tasks; \
         W3: {} yields of one task; W4: {} round trips (2 msgs each) over mpsc::channel(1). \
         {rounds} rounds, systems alternated each round, fresh executor per run",
        sizes.w1_tasks, sizes.w2_tasks, sizes.w3_yields, sizes.w4_trips
    );
    println!(
        "tokio runtimes (tokio rows, clockworker's host): current_thread, {}",
        if tokio_all {
            "enable_all() (I/O and time drivers; --tokio-enable-all)"
        } else {
            "no drivers enabled (as benches/overhead.rs; --tokio-enable-all to enable them)"
        }
    );

    let mut systems = systems();
    // `--only a,b`: the systems whose names contain one of the words (tokio
    // LocalSet, the baseline, always runs).
    if let Some(only) = value("--only") {
        let words: Vec<&str> = only.split(',').collect();
        systems.retain(|s| s.name == "tokio LocalSet" || words.iter().any(|w| s.name.contains(w)));
    }

    // One untimed pass of everything (page faults, allocator growth: W1 and
    // W2 at full size, W3 and W4 at a tenth); a system that fails here is
    // reported unavailable.
    let warm = Sizes {
        w3_yields: sizes.w3_yields / 10,
        w4_trips: sizes.w4_trips / 10,
        ..sizes
    };
    for s in systems.iter_mut().filter(|s| s.status.is_ok()) {
        for w in WORKLOADS {
            if let Err(e) = (s.run)(w, &warm) {
                println!("{}: unavailable: {e}", s.name);
                s.status = Err(e);
                break;
            }
        }
    }

    for round in 0..rounds {
        let t = Instant::now();
        // A system's run is affected by the one before it (a runtime that
        // hands its heap back to the kernel makes the next one fault its
        // pages in afresh; one that fills the caches leaves the next one
        // cold). So each timed run follows an untimed run of the same
        // system and workload, which leaves the heap and the caches as the
        // system itself leaves them (its steady state, as in a process
        // that runs it all the time); and each workload of each round runs
        // the systems in an order of its own.
        for (wi, w) in WORKLOADS.iter().enumerate() {
            for k in common::run_order(systems.len(), round, wi) {
                let s = &mut systems[k];
                if s.status.is_err() {
                    continue;
                }
                let timed = (s.run)(*w, &sizes).and_then(|_| (s.run)(*w, &sizes));
                match timed {
                    Ok(sample) => s.samples[wi].push(sample.secs),
                    Err(e) => {
                        println!("{}: failed in round {}: {e}", s.name, round + 1);
                        s.status = Err(e);
                    }
                }
            }
        }
        eprintln!(
            "round {}/{rounds} done in {:.1} s",
            round + 1,
            t.elapsed().as_secs_f64()
        );
    }

    // The memory pass: counting on, W1 and W2 once per system, each on a
    // new thread, so that what a system keeps in thread-local caches from
    // earlier runs (tourbillon keeps freed task cells per thread) is not
    // counted as free memory: every run starts from an empty thread.
    for s in systems.iter_mut().filter(|s| s.status.is_ok()) {
        for (mi, w) in [Workload::W1, Workload::W2].into_iter().enumerate() {
            let run = &s.run;
            let sizes = &sizes;
            let r = thread::scope(|sc| {
                sc.spawn(move || {
                    COUNTING.store(true, Relaxed);
                    let r = run(w, sizes);
                    COUNTING.store(false, Relaxed);
                    r
                })
                .join()
                .unwrap_or_else(|_| Err("panicked".into()))
            });
            s.memory[mi] = r.ok();
        }
    }

    let report = Report {
        systems: &systems,
        sizes,
        rounds,
        quick,
        pinned,
    };
    report.print_tables();
    report.print_memory();
    let targets = report.targets();
    println!();
    println!("Targets (tourbillon FIFO, one RunnableFifo queue):");
    for t in &targets {
        println!(
            "  {}: {} - {}",
            t.name,
            if t.met() { "met" } else { "NOT MET" },
            t.detail
        );
    }

    let relative = report.relative_targets();
    if !relative.is_empty() {
        println!();
        println!("Relative targets (ratios of medians in this run):");
        for t in &relative {
            println!(
                "  {}: {} - {}",
                t.name,
                if t.met() { "met" } else { "NOT MET" },
                t.detail
            );
        }
    }

    let yardsticks = report.yardsticks();
    if !yardsticks.is_empty() {
        println!();
        println!(
            "The same ratios for the floor with queues (no clock, weighted round-robin in polls):"
        );
        for (name, detail) in &yardsticks {
            println!("  {name}: {detail}");
        }
    }

    let clock = report.clock_floor();
    if !clock.is_empty() {
        println!();
        println!("The clock's floor (tourbillon's one queue with a clock read per poll):");
        for (name, detail) in &clock {
            println!("  {name}: {detail}");
        }
    }

    let wall = wall.elapsed().as_secs_f64();
    if let Err(e) = std::fs::create_dir_all(&out) {
        println!("cannot create {}: {e}", out.display());
    } else {
        let json = out.join("compare.json");
        match std::fs::write(&json, report.json(&targets, wall)) {
            Ok(()) => println!("\nwrote {}", json.display()),
            Err(e) => println!("\ncannot write {}: {e}", json.display()),
        }
        let svg = out.join("compare.svg");
        match report.svg(&svg) {
            Ok(()) => println!("wrote {}", svg.display()),
            Err(e) => println!("cannot write {}: {e}", svg.display()),
        }
    }
    println!("wall time {wall:.1} s");
}
