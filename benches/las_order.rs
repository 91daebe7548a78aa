//! What the order of exact LAS costs by itself: the headline workload (W1:
//! 50,000 tasks x 5 yields, one queue) on a `RunnableFifo` queue whose
//! tasks are polled in a shuffled order, against the same in spawn order,
//! `Las::exact()` and plain FIFO, in one process.
//!
//! `Las::exact()` keys a task by its group's attained service in ns. After
//! a task's first poll the keys are all distinct and follow measured
//! durations, so every later round visits the tasks in a new order
//! unrelated to where they are in memory: each poll opens with cache
//! misses on the task's slab entry and cell (W1's 50,000 cells of 96 bytes
//! do not fit the 2 MiB L2 of the machine this was written on), where a
//! FIFO visits them in address order and the hardware prefetcher runs
//! ahead. This bench separates that cost from the cost of the structure
//! that keeps the order: a FIFO pick (batches of 64 ids) with the same
//! visiting order.
//!
//! Systems (one queue each, a new executor per run, W1 as
//! `peers/compare`'s: 1,000 warm-up tasks that yield once, then the timed
//! part from the first spawn to the last handle awaited in spawn order):
//! * `FIFO`: W1 on a `RunnableFifo` queue (the denominator of
//!   `compare`'s "W1 Las::exact() / FIFO");
//! * `FIFO, a clock read per poll`: the same with a stall detector of one
//!   hour, which never reports (`compare`'s "a clock read per poll" row:
//!   the clock read that `Las` needs per poll);
//! * `Las::exact()`: W1 on a `Las::exact()` queue;
//! * `FIFO gated, spawn order` and `FIFO gated, shuffled`: W1's tasks
//!   made to wait first at a gate of their own (a flag and a waker), then
//!   yield 4 times: six polls a task as in W1, the first in spawn order
//!   (as `Las::exact()`'s first, all keys being 0), the five others in the
//!   order the gates open; the main task opens them, once every task
//!   waits, in spawn order or in a shuffled order (Fisher-Yates, splitmix64,
//!   a new permutation each run), and the FIFO keeps that order for the
//!   rounds that follow. The two differ only in that order: their ratio
//!   is what the order costs with a FIFO pick (the gates' wakes in a
//!   shuffled order count in it too: one more visit of each cell);
//! * `FIFO gated, shuffled, a clock read per poll`: the same with the
//!   stall detector of the clock-read row: a FIFO pick, a clock read per
//!   poll and exact LAS's kind of order, the least `Las::exact()` can cost
//!   on W1 with its cells where the executor puts them (its tasks are
//!   charged their measured durations, which needs the clock read, and it
//!   prefetches the cells of the tasks 8 to 15 pops ahead, which the FIFO
//!   rows do not);
//! * `Las::new()` and `Las::new() gated, shuffled`: W1 and the gated W1 on
//!   a `Las::new()` queue. Every W1 task stays below its first level
//!   (100 us of service), so its pick is a FIFO's (batches of level 0) and
//!   each poll is timed and charged as `Las::exact()`'s are: the shuffled
//!   row is a FIFO pick with exact LAS's clock read, charge and kind of
//!   order.
//!
//! Each round runs the systems in a shuffled order (`common::run_order`),
//! each timed run after an untimed run of the same system. A timing is
//! the time the thread ran: the wall time minus the time it waited for a
//! CPU (`/proc/thread-self/schedstat`), so that a shared machine's other
//! processes count only by what they do to the caches. Medians over
//! the rounds, and the ratios of medians to `FIFO` and to `FIFO gated,
//! spawn order`. Two timings per gated run: the whole (as W1) and the part
//! after the gates opened (the five polls in the gates' order and the
//! awaits).
//!
//! Usage: `cargo bench -p tourbillon-benches --bench las_order [-- --rounds
//! N --tasks N --no-pin]` (default 15 rounds of 50,000 tasks; pinned to
//! CPU 1 with `taskset`). Without `--bench` (`cargo test --all-targets`), a
//! smoke pass: one round of 1,000 tasks.

mod common;

use std::cell::Cell;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tourbillon::sched::Las;
use tourbillon::{Builder, Executor, QueueSpec};

/// W1's warm-up tasks (as `peers/compare`).
const WARMUP: usize = 1_000;
/// W1's yields per task.
const YIELDS: usize = 5;

/// A system: its name and how to build its executor.
#[derive(Clone, Copy)]
enum System {
    Fifo,
    FifoClock,
    LasExact,
    GatedSpawnOrder,
    GatedShuffled,
    GatedShuffledClock,
    LasNew,
    LasNewGatedShuffled,
}

const SYSTEMS: [System; 8] = [
    System::Fifo,
    System::FifoClock,
    System::LasExact,
    System::GatedSpawnOrder,
    System::GatedShuffled,
    System::GatedShuffledClock,
    System::LasNew,
    System::LasNewGatedShuffled,
];

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Fifo => "FIFO",
            System::FifoClock => "FIFO, a clock read per poll",
            System::LasExact => "Las::exact()",
            System::GatedSpawnOrder => "FIFO gated, spawn order",
            System::GatedShuffled => "FIFO gated, shuffled",
            System::GatedShuffledClock => "FIFO gated, shuffled, a clock read per poll",
            System::LasNew => "Las::new()",
            System::LasNewGatedShuffled => "Las::new() gated, shuffled",
        }
    }

    fn executor(self) -> Executor<u8> {
        let b = Builder::new();
        let b = match self {
            System::LasExact => b.queue_with(0, QueueSpec::new(1).scheduler(Las::exact())),
            System::LasNew | System::LasNewGatedShuffled => {
                b.queue_with(0, QueueSpec::new(1).scheduler(Las::new()))
            }
            _ => b.queue(0, 1),
        };
        let b = match self {
            System::FifoClock | System::GatedShuffledClock => {
                b.stall_detector(Duration::from_secs(3600), |s| eprintln!("stall: {s}"))
            }
            _ => b,
        };
        b.build().unwrap()
    }

    /// `Some(shuffled)` for a gated system.
    fn gated(self) -> Option<bool> {
        match self {
            System::GatedSpawnOrder => Some(false),
            System::GatedShuffled | System::GatedShuffledClock | System::LasNewGatedShuffled => {
                Some(true)
            }
            _ => None,
        }
    }
}

/// A task's gate: open, or the waker of the task that waits at it.
#[derive(Default)]
struct Gate {
    open: Cell<bool>,
    waker: Cell<Option<Waker>>,
}

/// The gates of a run, and how many tasks wait at theirs.
struct Gates {
    gates: Vec<Gate>,
    waiting: Cell<usize>,
}

impl Gates {
    fn new(n: usize) -> Rc<Self> {
        Rc::new(Self {
            gates: (0..n).map(|_| Gate::default()).collect(),
            waiting: Cell::new(0),
        })
    }

    /// Once every task waits at its gate (the main future is polled
    /// between turns, not behind every task), calls `at` and opens the
    /// gates in `order`.
    async fn open_then(&self, order: &[usize], at: impl FnOnce()) {
        while self.waiting.get() < order.len() {
            tourbillon::task::yield_now().await;
        }
        at();
        for &i in order {
            let g = &self.gates[i];
            g.open.set(true);
            if let Some(w) = g.waker.take() {
                w.wake();
            }
        }
    }
}

/// Waits until gate `i` of `gates` is open.
struct AtGate {
    gates: Rc<Gates>,
    i: usize,
}

impl Future for AtGate {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let g = &self.gates.gates[self.i];
        if g.open.get() {
            Poll::Ready(())
        } else {
            if g.waker.replace(Some(cx.waker().clone())).is_none() {
                self.gates.waiting.set(self.gates.waiting.get() + 1);
            }
            Poll::Pending
        }
    }
}

/// A point in time, to measure the time this thread ran since: the wall
/// time minus the time it waited for a CPU (`run_delay` of
/// `/proc/thread-self/schedstat`, which counts every wait before the
/// thread's current time slice), so that other processes on the CPU do not
/// count; their effect on the caches does.
struct Mark {
    at: Instant,
    delay: u64,
}

impl Mark {
    fn now() -> Self {
        let delay = common::sched_times().1;
        Self {
            at: Instant::now(),
            delay,
        }
    }

    fn running(&self) -> Duration {
        let wall = self.at.elapsed();
        let waited = common::sched_times().1.saturating_sub(self.delay);
        wall.saturating_sub(Duration::from_nanos(waited))
    }
}

/// W1's warm-up: tasks that yield once, awaited.
async fn warm_up(ex: &Executor<u8>) {
    let warm: Vec<_> = (0..WARMUP)
        .map(|_| ex.spawn(0, tourbillon::task::yield_now()).unwrap())
        .collect();
    for h in warm {
        h.await.unwrap();
    }
}

/// W1 on `ex`; the time from the first spawn to the last handle (the
/// time the thread ran, [`Mark`]).
fn w1(ex: &Executor<u8>, tasks: usize) -> Duration {
    ex.block_on(async {
        warm_up(ex).await;
        let mut hs = Vec::with_capacity(tasks);
        let start = Mark::now();
        for i in 0..tasks {
            hs.push(
                ex.spawn(0, async move {
                    for _ in 0..YIELDS {
                        tourbillon::task::yield_now().await;
                    }
                    i
                })
                .unwrap(),
            );
        }
        for h in hs {
            black_box(h.await.unwrap());
        }
        start.running()
    })
}

/// W1 with a gate per task, opened in `order`: the time from the first
/// spawn to the last handle, and from the gates' opening to the last
/// handle.
fn w1_gated(ex: &Executor<u8>, order: &[usize]) -> (Duration, Duration) {
    let tasks = order.len();
    let gates = Gates::new(tasks);
    ex.block_on(async {
        warm_up(ex).await;
        let mut hs = Vec::with_capacity(tasks);
        let start = Mark::now();
        for i in 0..tasks {
            let gate = AtGate {
                gates: gates.clone(),
                i,
            };
            hs.push(
                ex.spawn(0, async move {
                    gate.await;
                    for _ in 0..YIELDS - 1 {
                        tourbillon::task::yield_now().await;
                    }
                    i
                })
                .unwrap(),
            );
        }
        let mut opened = None;
        gates.open_then(order, || opened = Some(Mark::now())).await;
        let opened = opened.expect("the gates opened");
        for h in hs {
            black_box(h.await.unwrap());
        }
        (start.running(), opened.running())
    })
}

/// Checks the premise of the gated systems on `tasks` tasks: after the
/// gates open in a shuffled order, every round of polls follows that
/// order.
fn check_gated_order(tasks: usize, rng: &mut common::Rng) {
    let order = shuffled(tasks, rng);
    let gates = Gates::new(tasks);
    let polls = Rc::new(std::cell::RefCell::new(Vec::new()));
    let ex = System::GatedShuffled.executor();
    ex.block_on(async {
        let hs: Vec<_> = (0..tasks)
            .map(|i| {
                let gate = AtGate {
                    gates: gates.clone(),
                    i,
                };
                let polls = polls.clone();
                ex.spawn(0, async move {
                    gate.await;
                    for _ in 0..YIELDS - 1 {
                        polls.borrow_mut().push(i);
                        tourbillon::task::yield_now().await;
                    }
                    polls.borrow_mut().push(i);
                })
                .unwrap()
            })
            .collect();
        gates.open_then(&order, || ()).await;
        for h in hs {
            h.await.unwrap();
        }
    });
    let polls = polls.borrow();
    assert_eq!(polls.len(), tasks * YIELDS);
    for round in polls.chunks(tasks) {
        assert_eq!(round, &order[..], "the gated tasks run in the gates' order");
    }
}

/// `0..n` in a shuffled order (Fisher-Yates with `rng`).
fn shuffled(n: usize, rng: &mut common::Rng) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// One run of `sys`: the whole, and (gated systems) the part after the
/// gates opened.
fn run(sys: System, tasks: usize, rng: &mut common::Rng) -> (Duration, Option<Duration>) {
    let ex = sys.executor();
    match sys.gated() {
        None => (w1(&ex, tasks), None),
        Some(shuffle) => {
            let order = if shuffle {
                shuffled(tasks, rng)
            } else {
                (0..tasks).collect()
            };
            let (whole, after) = w1_gated(&ex, &order);
            (whole, Some(after))
        }
    }
}

fn main() {
    let args = common::Args::from_env();
    let smoke = args.smoke();
    let (rounds, tasks) = if smoke { (1, 1_000) } else { (15, 50_000) };
    let rounds = args.parsed::<usize>("--rounds").unwrap_or(rounds).max(1);
    let tasks = args.parsed::<usize>("--tasks").unwrap_or(tasks).max(1);
    if !smoke && !args.flag("--no-pin") {
        common::pin_to_cpu1();
    }
    let mut rng = common::Rng(0x1A5_0D3E);
    check_gated_order(1_000, &mut rng);
    // Per system: ns per task, whole and after the gates.
    let mut whole: Vec<Vec<f64>> = vec![Vec::new(); SYSTEMS.len()];
    let mut after: Vec<Vec<f64>> = vec![Vec::new(); SYSTEMS.len()];
    for round in 0..rounds {
        for s in common::run_order(SYSTEMS.len(), round, 0) {
            // Untimed: the run after which the timed one comes.
            run(SYSTEMS[s], tasks, &mut rng);
            let (w, a) = run(SYSTEMS[s], tasks, &mut rng);
            whole[s].push(w.as_nanos() as f64 / tasks as f64);
            if let Some(a) = a {
                after[s].push(a.as_nanos() as f64 / tasks as f64);
            }
        }
    }
    println!(
        "W1 ({tasks} tasks x {YIELDS} yields, {WARMUP} warm-up tasks), {rounds} rounds; \
         ns per task, median (min-max); ratios of medians"
    );
    let med: Vec<f64> = whole.iter().map(|v| common::median(v)).collect();
    let (fifo, gated) = (med[0], med[3]);
    println!(
        "| system | ns/task | / FIFO | / FIFO gated, spawn order | after the gates, ns/task | after the gates / spawn order |"
    );
    println!("|---|---|---|---|---|---|");
    let gated_after = common::median(&after[3]);
    for (s, sys) in SYSTEMS.iter().enumerate() {
        let (lo, hi) = whole[s]
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let (a, ar) = if after[s].is_empty() {
            (String::from("-"), String::from("-"))
        } else {
            let m = common::median(&after[s]);
            (format!("{m:.1}"), format!("{:.2}", m / gated_after))
        };
        println!(
            "| {} | {:.1} ({lo:.1}-{hi:.1}) | {:.2} | {:.2} | {a} | {ar} |",
            sys.name(),
            med[s],
            med[s] / fifo,
            med[s] / gated,
        );
    }
}
