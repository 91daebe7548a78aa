//! Headline overhead benchmark: tourbillon against tokio's `LocalSet`.
//!
//! Workload (the one clockworker and the peers table use): spawn 1,000
//! warm-up tasks that yield once and await them; then, timed, spawn 50,000
//! tasks that each `yield_now().await` 5 times, and await every join handle
//! in spawn order. Each system uses its own `yield_now`.
//!
//! Systems, alternated round by round in one process, in an order shuffled
//! for each round (`common::run_order`, a fixed seed), each timed round
//! right after an untimed round of the same system. A round is not
//! independent of the one before it: after tokio's round glibc has handed
//! much of the freed heap back to the kernel, and the next round pays a
//! page fault for each page it touches afresh (PROFILING.md, "Why timings
//! move"); so each system is timed after itself, in the state it leaves
//! the heap and the caches in. The last column gives the median of each
//! system's minor page faults per timed round (the whole round: runtime
//! built, run and dropped).
//! * `tokio LocalSet`: tokio `current_thread` runtime + `LocalSet`,
//!   `spawn_local`, `tokio::task::yield_now` (the baseline, ratio 1.00);
//! * `tourbillon 1 queue`: standalone `block_on`, one `RunnableFifo` queue;
//! * `tourbillon nested`: the same, nested in a tokio `current_thread`
//!   runtime through `run_until` (yields wait for tokio's driver turn);
//! * `tourbillon 4 queues`: standalone, 4 queues with shares 1:2:3:4 sharing
//!   the 50,000 tasks round-robin;
//! * `tourbillon 8 queues`: the same with 8 queues, shares 1:2:...:8 (what
//!   the EEVDF pick costs among more queues);
//! * `tourbillon 8 queues, spawned in blocks`: the same 8 queues, the first
//!   eighth of the tasks spawned to queue 0, the next to queue 1, and so
//!   on: each queue's tasks lie together in memory, as one queue's do
//!   (round-robin, each queue's next task is 8 cells further);
//! * `tourbillon Las exact 1 queue`: standalone, one queue with
//!   `Las::exact()` (every task its own group; `Las` times every poll, so
//!   this series adds one clock read per poll and a heap push/pop per wake
//!   to `tourbillon 1 queue`);
//! * `tourbillon Las 1 queue`: the same with the default `Las::new()`, keys
//!   quantized to levels (`Las::quantized(100 us, 16)`: FIFO per level of
//!   attained service, a heap of the non-empty levels);
//! * `tourbillon 1 queue, histograms + stall detector`: one `RunnableFifo`
//!   queue with `latency_histograms(true)` and a 10 ms `stall_detector`
//!   (what the opt-in observability costs: a clock read per poll, a
//!   histogram record per poll, a stamp per spawn, wake and yield from a
//!   reading the executor already took);
//! * `tourbillon 1 queue, a clock read per poll`: one `RunnableFifo` queue
//!   with a 1-hour `stall_detector` and nothing else, which reads the
//!   clock once per poll and never reports: what per-poll timing costs at
//!   the least, the part of each `Las` and of the observability that the
//!   clock accounts for;
//! * `tourbillon 1 queue, timeline`: one `RunnableFifo` queue with
//!   `Builder::timeline` sized for every poll of the round (50,000 x 6
//!   polls: a 12 MB buffer, allocated with the executor), nothing else:
//!   what recording the timeline costs (a clock read per poll, the task's
//!   id and name read before it, a 40-byte record after it).
//!
//! Prints median / min / max ms per round, ns per task, and the ratio of
//! medians to tokio `LocalSet` (and of 4 and 8 queues to 1 queue, of each
//! `Las`, of the observability and of the clock reads to `RunnableFifo` on
//! one queue). Then, per poll of a timed round (its spawns and joins
//! included), what the one-queue row costs and what its clock read adds;
//! and the executor's default clock (`SystemClock`) and `Instant::now()`
//! read back to back in a loop, ns per read: the clock's own cost, without
//! the executor around it. The process pins
//! itself to CPU 1 with `taskset` when available (`--no-pin` to skip).
//!
//! Usage: `cargo bench --bench overhead [-- --rounds N --tasks N --no-pin --quick]`.
//! Without `--bench`, which `cargo bench` passes (`cargo test --all-targets`
//! runs it without), a smoke pass: one round of 1,000 tasks and one loop
//! of clock reads.

mod common;

use common::median;
use std::hint::black_box;
use std::time::{Duration, Instant};
use tourbillon::clock::{Clock, SystemClock};

const WARMUP: usize = 1_000;
const YIELDS: usize = 5;
/// Clock reads per run of [`clock_read_cost`].
const CLOCK_READS: u32 = 1_000_000;

fn tokio_localset(tasks: usize) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let warm: Vec<_> = (0..WARMUP)
            .map(|_| tokio::task::spawn_local(async { tokio::task::yield_now().await }))
            .collect();
        for h in warm {
            h.await.unwrap();
        }
        let start = Instant::now();
        let hs: Vec<_> = (0..tasks)
            .map(|i| {
                tokio::task::spawn_local(async move {
                    for _ in 0..YIELDS {
                        tokio::task::yield_now().await;
                    }
                    i
                })
            })
            .collect();
        for h in hs {
            black_box(h.await.unwrap());
        }
        start.elapsed()
    })
}

async fn task(i: usize) -> usize {
    for _ in 0..YIELDS {
        tourbillon::task::yield_now().await;
    }
    i
}

async fn tourbillon_workload(ex: &tourbillon::Executor<u8>, queues: u8, tasks: usize) -> Duration {
    tourbillon_workload_spread(ex, queues, tasks, Spread::RoundRobin).await
}

/// How the workload's tasks are spread over the queues.
#[derive(Clone, Copy, PartialEq)]
enum Spread {
    /// Task `i` to queue `i mod n`: each queue's tasks lie interleaved with
    /// the others' in memory (cells and slab entries in spawn order).
    RoundRobin,
    /// The first `tasks / n` to queue 0, the next to queue 1, ...: each
    /// queue's tasks lie together in memory.
    Blocks,
}

async fn tourbillon_workload_spread(
    ex: &tourbillon::Executor<u8>,
    queues: u8,
    tasks: usize,
    spread: Spread,
) -> Duration {
    let warm: Vec<_> = (0..WARMUP)
        .map(|_| ex.spawn(0, tourbillon::task::yield_now()).unwrap())
        .collect();
    for h in warm {
        h.await.unwrap();
    }
    let handles: Vec<_> = (0..queues).map(|q| ex.queue(q).unwrap()).collect();
    let n = handles.len();
    let start = Instant::now();
    // No division for a power-of-two number of queues (1, 4, 8): a 64-bit
    // `%` per spawn (about 10 ns here) is the harness's cost, which tokio's
    // rows do not pay (as in `compare`).
    let mask = n.is_power_of_two().then(|| n - 1);
    let per_block = tasks.div_ceil(n).max(1);
    let (mut block, mut left) = (0, per_block);
    let hs: Vec<_> = (0..tasks)
        .map(|i| {
            let q = match spread {
                Spread::RoundRobin => mask.map_or_else(|| i % n, |m| i & m),
                Spread::Blocks => {
                    if left == 0 {
                        (block, left) = (block + 1, per_block);
                    }
                    left -= 1;
                    block
                }
            };
            handles[q].spawn(task(i)).unwrap()
        })
        .collect();
    for h in hs {
        black_box(h.await.unwrap());
    }
    start.elapsed()
}

fn executor(queues: u8) -> tourbillon::Executor<u8> {
    build(queues, Sched::Fifo)
}

#[derive(Clone, Copy)]
enum Sched {
    Fifo,
    Las,
    LasQuantized,
    /// `RunnableFifo` with the opt-in observability on: wake-to-first-poll
    /// histograms and a stall detector (one clock read per poll).
    Observed,
    /// `RunnableFifo` with a stall detector that never fires (1 hour) and
    /// nothing else: one clock read per poll and a comparison, the least
    /// that any per-poll timing costs.
    ClockPerPoll,
    /// `RunnableFifo` with the timeline on, its buffer sized for every poll
    /// of the round.
    Timeline,
}

/// `queues` queues with shares 1, 2, ... and the scheduler `sched`.
fn build(queues: u8, sched: Sched) -> tourbillon::Executor<u8> {
    build_for(queues, sched, 0)
}

/// [`build`] for a round of `tasks` tasks (the timeline's buffer holds
/// every poll of it).
fn build_for(queues: u8, sched: Sched, tasks: usize) -> tourbillon::Executor<u8> {
    let mut b = tourbillon::Builder::new();
    for q in 0..queues {
        let spec = tourbillon::QueueSpec::new(q as u32 + 1);
        b = match sched {
            Sched::Fifo => b.queue(q, q as u32 + 1),
            Sched::Las => b.queue_with(q, spec.scheduler(tourbillon::sched::Las::exact())),
            Sched::LasQuantized => b.queue_with(q, spec.scheduler(tourbillon::sched::Las::new())),
            Sched::Observed | Sched::ClockPerPoll | Sched::Timeline => b.queue(q, q as u32 + 1),
        };
    }
    if let Sched::ClockPerPoll = sched {
        b = b.stall_detector(Duration::from_secs(3600), |s| eprintln!("stall: {s}"));
    }
    if let Sched::Timeline = sched {
        b = b.timeline(tasks * (YIELDS + 1));
    }
    if let Sched::Observed = sched {
        b = b
            .latency_histograms(true)
            .stall_detector(Duration::from_millis(10), |s| eprintln!("stall: {s}"));
    }
    b.build().unwrap()
}

fn tourbillon_standalone(queues: u8, tasks: usize) -> Duration {
    let ex = executor(queues);
    ex.block_on(tourbillon_workload(&ex, queues, tasks))
}

fn tourbillon_las(sched: Sched, tasks: usize) -> Duration {
    let ex = build_for(1, sched, tasks);
    ex.block_on(tourbillon_workload(&ex, 1, tasks))
}

fn tourbillon_nested(tasks: usize) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ex = executor(1);
    rt.block_on(ex.run_until(tourbillon_workload(&ex, 1, tasks)))
}

struct Series {
    name: &'static str,
    run: Box<dyn Fn(usize) -> Duration>,
    samples: Vec<f64>,
    /// Minor page faults per round.
    faults: Vec<f64>,
}

fn main() {
    let args = common::Args::from_env();
    let arg = |name: &str| args.parsed::<usize>(name);
    // `--quick` (e.g. `cargo bench -- --quick`, criterion's flag): 3 rounds
    // of 10,000 tasks; a smoke pass (no `--bench`): 1 round of 1,000; unless
    // `--rounds` / `--tasks` say otherwise. Other flags (criterion's) are
    // ignored.
    let smoke = args.smoke();
    let quick = args.flag("--quick");
    let (rounds, tasks) = match (smoke, quick) {
        (true, _) => (1, 1_000),
        (false, true) => (3, 10_000),
        (false, false) => (9, 50_000),
    };
    let rounds = arg("--rounds").unwrap_or(rounds).max(1);
    let tasks = arg("--tasks").unwrap_or(tasks);
    if !args.flag("--no-pin") {
        common::pin_to_cpu1();
    }
    let mut series = vec![
        Series {
            name: "tokio LocalSet",
            run: Box::new(tokio_localset),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon 1 queue",
            run: Box::new(|n| tourbillon_standalone(1, n)),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon nested in tokio",
            run: Box::new(tourbillon_nested),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon 4 queues 1:2:3:4",
            run: Box::new(|n| tourbillon_standalone(4, n)),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon 8 queues 1:2:...:8",
            run: Box::new(|n| tourbillon_standalone(8, n)),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon 8 queues 1:2:...:8, spawned in blocks",
            run: Box::new(|n| {
                let ex = executor(8);
                ex.block_on(tourbillon_workload_spread(&ex, 8, n, Spread::Blocks))
            }),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon Las exact 1 queue",
            run: Box::new(|n| tourbillon_las(Sched::Las, n)),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon Las 1 queue",
            run: Box::new(|n| tourbillon_las(Sched::LasQuantized, n)),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon 1 queue, histograms + stall detector",
            run: Box::new(|n| tourbillon_las(Sched::Observed, n)),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon 1 queue, a clock read per poll",
            run: Box::new(|n| tourbillon_las(Sched::ClockPerPoll, n)),
            samples: vec![],
            faults: vec![],
        },
        Series {
            name: "tourbillon 1 queue, timeline",
            run: Box::new(|n| tourbillon_las(Sched::Timeline, n)),
            samples: vec![],
            faults: vec![],
        },
    ];
    println!(
        "workload: {WARMUP} warm-up tasks, then {tasks} tasks x {YIELDS} yields (spawn all, await all); \
         {rounds} rounds, systems alternated each round in a shuffled order"
    );
    // One untimed pass of everything first (page faults, allocator growth).
    for s in &series {
        black_box((s.run)(tasks / 10));
    }
    for round in 0..rounds {
        for k in common::run_order(series.len(), round, 0) {
            let s = &mut series[k];
            // Untimed, so that the timed run follows its own system.
            black_box((s.run)(tasks));
            let before = common::minor_faults();
            let d = (s.run)(tasks);
            s.faults.push((common::minor_faults() - before) as f64);
            s.samples.push(d.as_secs_f64() * 1e3);
        }
    }
    let base = median(&series[0].samples);
    let one_queue = median(&series[1].samples);
    println!();
    println!(
        "| system | median ms | min ms | max ms | ns/task | ratio to tokio LocalSet | page faults per round |"
    );
    println!("|---|---|---|---|---|---|---|");
    for s in &series {
        let m = median(&s.samples);
        let min = s.samples.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = s.samples.iter().cloned().fold(0.0, f64::max);
        println!(
            "| {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.3} | {:.0} |",
            s.name,
            m,
            min,
            max,
            m * 1e6 / tasks as f64,
            m / base,
            median(&s.faults)
        );
    }
    let four = median(&series[3].samples);
    let eight = median(&series[4].samples);
    let eight_blocks = median(&series[5].samples);
    let exact = median(&series[6].samples);
    let las = median(&series[7].samples);
    let observed = median(&series[8].samples);
    let clocked = median(&series[9].samples);
    let timeline = median(&series[10].samples);
    println!();
    println!("4 queues / 1 queue (medians): {:.3}", four / one_queue);
    println!("8 queues / 1 queue (medians): {:.3}", eight / one_queue);
    println!(
        "8 queues, spawned in blocks / 1 queue (medians): {:.3}",
        eight_blocks / one_queue
    );
    println!(
        "Las (default, quantized) / RunnableFifo (medians, 1 queue): {:.3}",
        las / one_queue
    );
    println!(
        "Las exact / RunnableFifo (medians, 1 queue): {:.3}",
        exact / one_queue
    );
    println!(
        "latency histograms + stall detector on / off (medians, 1 queue): {:.3}",
        observed / one_queue
    );
    println!(
        "a clock read per poll (stall detector of 1 h) / none (medians, 1 queue): {:.3}",
        clocked / one_queue
    );
    println!(
        "timeline on / off (medians, 1 queue): {:.3}; on / a clock read per poll: {:.3}",
        timeline / one_queue,
        timeline / clocked
    );
    // The polls of a timed round: each task's first poll and one per
    // yield (the warm-up's polls are outside the timed part).
    let polls = (tasks * (YIELDS + 1)) as f64;
    println!(
        "per poll (a round's ns / {polls}, its spawns and joins included): 1 queue {:.1} ns; \
         the clock read per poll adds {:.1} ns",
        one_queue * 1e6 / polls,
        (clocked - one_queue) * 1e6 / polls
    );
    let (system, instant) = clock_read_cost(rounds);
    println!(
        "the clock alone, in a loop of {CLOCK_READS} reads (median of {rounds} loops): \
         SystemClock ({}) {system:.1} ns per read, Instant::now() {instant:.1} ns",
        SystemClock::new().source()
    );
}

/// Nanoseconds per read of the executor's default clock ([`SystemClock`],
/// with its monotonic guard, as the executor reads it) and of
/// `Instant::now()`, each read back to back `CLOCK_READS` times; medians of
/// `rounds` loops, alternated.
fn clock_read_cost(rounds: usize) -> (f64, f64) {
    let clock = SystemClock::new();
    let per_read = |d: Duration| d.as_nanos() as f64 / f64::from(CLOCK_READS);
    let (mut system, mut instant) = (vec![], vec![]);
    for _ in 0..rounds {
        let t = Instant::now();
        let mut sum = 0u64;
        for _ in 0..CLOCK_READS {
            sum = sum.wrapping_add(clock.now_ns());
        }
        black_box(sum);
        system.push(per_read(t.elapsed()));
        let t = Instant::now();
        let mut last = t;
        for _ in 0..CLOCK_READS {
            last = last.max(Instant::now());
        }
        black_box(last);
        instant.push(per_read(t.elapsed()));
    }
    (median(&system), median(&instant))
}
