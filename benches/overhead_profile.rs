//! Profiling target: the headline workload (50,000 tasks x 5 yields, one
//! queue) run `N` times (first argument, default 1; the second sets the
//! yields per task, default 5; the third the number of queues, default 1;
//! a fourth, `fresh`, builds a new executor for every round; a fifth, the
//! tasks per round, default 50,000) with nothing else in the
//! process, for `valgrind --tool=callgrind` (deterministic instruction
//! counts; use `--toggle-collect=overhead_profile::workload`) and for
//! sampling profilers (`perf record`, samply) with a large `N`.
//!
//! `spawn R N Q` runs `compare`'s W2 workload R times (default 1), each on a
//! new executor: `N` empty tasks (default 100,000) spawned through one
//! `QueueHandle` per queue, round-robin over `Q` queues (default 1, a power
//! of two; shares 1:2:3:...), then every handle awaited (collect with
//! `--toggle-collect=overhead_profile::spawn_empty`).
//!
//! `pingpong N Q` instead runs `compare`'s W4 workload once: two tasks on
//! queue 0 and queue `1 % Q` of `Q` queues (default 1; shares 1:2:3:...,
//! as `compare`'s "4 queues" system), `N`
//! round trips (default 100,000) over two
//! `futures::channel::mpsc::channel(1)` (collect with
//! `--toggle-collect=overhead_profile::pingpong`); `pingpong-tokio N` runs
//! it on tokio's `LocalSet` (`--toggle-collect=overhead_profile::pingpong_tokio`).
//! `pingpong N Q fixed` sets the host-yield interval to one second, so
//! that every turn ends at the builder's 61 polls: with the default 200 µs,
//! callgrind's slowdown ends turns after 16 to 42 polls, as many as the
//! run's speed allows, and each count then moves by 500 to 1,000
//! instructions per turn from run to run (±1% of `pingpong 100000 2`);
//! with `fixed` the counts repeat to within a few hundred instructions
//! (2-vCPU VM, `Intel(R) Xeon(R) Processor`, Linux 6.18.44, rustc 1.95.0,
//! 2026-11-29).
//!
//! `queues8 R` runs the headline workload R times (default 1) on 8 queues
//! with shares 1:2:...:8, the tasks spread round-robin, each round on a new
//! executor (collect with `--toggle-collect=overhead_profile::workload`;
//! the same as `R 5 8 fresh`): against `R 5 1 fresh`, what the EEVDF pick
//! among several queues costs.
//!
//! `las R Y` runs the headline workload R times (default 1) on one
//! `Las::new()` queue, tasks yielding Y times (default 5), each round on a
//! new executor (collect with `--toggle-collect=overhead_profile::workload`);
//! `las-exact R Y` does the same on one `Las::exact()` queue.
//!
//! `observe R Y` runs the headline workload R times (default 1) on one
//! `RunnableFifo` queue with `latency_histograms(true)` and a 10 ms
//! `stall_detector` (as `benches/overhead.rs`'s "histograms + stall
//! detector" row), tasks yielding Y times (default 5), each round on a new
//! executor (collect with `--toggle-collect=overhead_profile::workload`).
//! `observe R Y clock` keeps the stall detector (of one hour, which never
//! reports) and leaves the histograms off: `compare`'s "a clock read per
//! poll" row, what `observe` is measured against.
//!
//! `timeline R Y` runs the headline workload R times (default 1) on one
//! `RunnableFifo` queue with `Builder::timeline` sized for every poll of a
//! round and nothing else (as `benches/overhead.rs`'s "timeline" row),
//! tasks yielding Y times (default 5), each round on a new executor
//! (collect with `--toggle-collect=overhead_profile::workload`).
//!
//! `nested R N` runs the headline workload nested in tokio: R rounds
//! (default 1) of `N` tasks (default 50,000), each on a new executor in a
//! new `current_thread` runtime, `rt.block_on(ex.run_until(..))` (collect
//! with `--toggle-collect=overhead_profile::workload_nested`; with
//! `--features tokio`, it counts what a budget per task poll costs).
//!
//! `tokio R N` runs the headline workload on tokio's `LocalSet` as
//! `benches/overhead.rs` does (a new `current_thread` runtime per round,
//! `spawn_local`, `tokio::task::yield_now`; without its 1,000 warm-up
//! tasks, as the tourbillon workload here), R rounds (default 1) of `N`
//! tasks (default 50,000), for counting what tokio's rounds cost
//! (`--toggle-collect=overhead_profile::workload_tokio`; PROFILING.md,
//! "Why timings move").
//!
//! Without arguments and without `--bench`, which `cargo bench` passes
//! (`cargo test --all-targets` runs it so), a smoke pass: the headline
//! once with 1,000 tasks. Given a workload or a number of rounds, it runs
//! what it is given, with or without `--bench` (profilers run the binary
//! by hand).

mod common;

use std::hint::black_box;

const TASKS: usize = 50_000;

#[inline(never)]
fn workload(ex: &tourbillon::Executor<u8>, yields: usize, tasks: usize) {
    // As `benches/overhead.rs` spawns: through one `QueueHandle` per
    // queue, without a division per spawn for a power-of-two number of
    // queues.
    let handles: Vec<_> = ex
        .queue_keys()
        .iter()
        .map(|&q| ex.queue(q).unwrap())
        .collect();
    let n = handles.len();
    let mask = n.is_power_of_two().then(|| n - 1);
    ex.block_on(async {
        let hs: Vec<_> = (0..tasks)
            .map(|i| {
                handles[mask.map_or_else(|| i % n, |m| i & m)]
                    .spawn(async move {
                        for _ in 0..yields {
                            tourbillon::task::yield_now().await;
                        }
                        i
                    })
                    .unwrap()
            })
            .collect();
        for h in hs {
            black_box(h.await.unwrap());
        }
    });
}

#[inline(never)]
fn pingpong(ex: &tourbillon::Executor<u8>, trips: usize) {
    let second = (1 % ex.queue_keys().len()) as u8;
    use futures::{SinkExt, StreamExt};
    let (mut ping_tx, mut ping_rx) = futures::channel::mpsc::channel::<usize>(1);
    let (mut pong_tx, mut pong_rx) = futures::channel::mpsc::channel::<usize>(1);
    ex.block_on(async {
        let pong = ex
            .spawn(second, async move {
                while let Some(v) = ping_rx.next().await {
                    if pong_tx.send(v).await.is_err() {
                        break;
                    }
                }
            })
            .unwrap();
        let ping = ex
            .spawn(0, async move {
                for i in 0..trips {
                    ping_tx.send(i).await.unwrap();
                    black_box(pong_rx.next().await.unwrap());
                }
            })
            .unwrap();
        ping.await.unwrap();
        pong.await.unwrap();
    });
}

/// `compare`'s W2: `tasks` empty tasks spawned, then every handle awaited.
#[inline(never)]
fn spawn_empty(ex: &tourbillon::Executor<u8>, tasks: usize) {
    let qs: Vec<_> = ex
        .queue_keys()
        .iter()
        .map(|&k| ex.queue(k).unwrap())
        .collect();
    let mask = qs.len() - 1;
    ex.block_on(async {
        let mut hs = Vec::with_capacity(tasks);
        for i in 0..tasks {
            hs.push(qs[i & mask].spawn(async {}).unwrap());
        }
        for h in hs {
            h.await.unwrap();
        }
    });
}

/// The headline workload nested in tokio (`nested R N`), one round on a
/// new runtime and a new executor.
#[inline(never)]
fn workload_nested(tasks: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let ex = tourbillon::Builder::new().queue(0u8, 1).build().unwrap();
    let q = ex.queue(0).unwrap();
    rt.block_on(ex.run_until(async {
        let hs: Vec<_> = (0..tasks)
            .map(|i| {
                q.spawn(async move {
                    for _ in 0..5 {
                        tourbillon::task::yield_now().await;
                    }
                    i
                })
                .unwrap()
            })
            .collect();
        for h in hs {
            black_box(h.await.unwrap());
        }
    }));
}

/// The headline workload on tokio's `LocalSet`, one round on a new
/// runtime (`tokio R N`).
#[inline(never)]
fn workload_tokio(tasks: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let hs: Vec<_> = (0..tasks)
            .map(|i| {
                tokio::task::spawn_local(async move {
                    for _ in 0..5 {
                        tokio::task::yield_now().await;
                    }
                    i
                })
            })
            .collect();
        for h in hs {
            black_box(h.await.unwrap());
        }
    });
}

/// The same ping-pong on tokio's `LocalSet` (current_thread runtime), for
/// comparing instruction counts (`pingpong-tokio N`).
#[inline(never)]
fn pingpong_tokio(trips: usize) {
    use futures::{SinkExt, StreamExt};
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let (mut ping_tx, mut ping_rx) = futures::channel::mpsc::channel::<usize>(1);
        let (mut pong_tx, mut pong_rx) = futures::channel::mpsc::channel::<usize>(1);
        let pong = tokio::task::spawn_local(async move {
            while let Some(v) = ping_rx.next().await {
                if pong_tx.send(v).await.is_err() {
                    break;
                }
            }
        });
        let ping = tokio::task::spawn_local(async move {
            for i in 0..trips {
                ping_tx.send(i).await.unwrap();
                black_box(pong_rx.next().await.unwrap());
            }
        });
        ping.await.unwrap();
        pong.await.unwrap();
    });
}

fn main() {
    // Positional arguments only: flags (`--bench`, which cargo adds, and
    // `--quick` or others from `cargo bench -- ...`) are skipped wherever
    // they are, with the value of criterion's flags that take one.
    // `--quick` caps the rounds at 3.
    const VALUE_FLAGS: [&str; 8] = [
        "--sample-size",
        "--measurement-time",
        "--warm-up-time",
        "--save-baseline",
        "--baseline",
        "--load-baseline",
        "--profile-time",
        "--output-format",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let positional: Vec<&str> = (0..args.len())
        .filter(|&i| !args[i].starts_with("--"))
        .filter(|&i| i == 0 || !VALUE_FLAGS.contains(&args[i - 1].as_str()))
        .map(|i| args[i].as_str())
        .collect();
    let nth = |i: usize| positional.get(i - 1).copied();
    if nth(1) == Some("pingpong-tokio") {
        pingpong_tokio(nth(2).and_then(|a| a.parse().ok()).unwrap_or(100_000));
        return;
    }
    if nth(1) == Some("nested") {
        let rounds: usize = nth(2).and_then(|a| a.parse().ok()).unwrap_or(1);
        let tasks: usize = nth(3).and_then(|a| a.parse().ok()).unwrap_or(TASKS);
        for _ in 0..rounds {
            workload_nested(tasks);
        }
        return;
    }
    if nth(1) == Some("tokio") {
        let rounds: usize = nth(2).and_then(|a| a.parse().ok()).unwrap_or(1);
        let tasks: usize = nth(3).and_then(|a| a.parse().ok()).unwrap_or(TASKS);
        for _ in 0..rounds {
            workload_tokio(tasks);
        }
        return;
    }
    if nth(1) == Some("spawn") {
        let rounds: usize = nth(2).and_then(|a| a.parse().ok()).unwrap_or(1);
        let tasks: usize = nth(3).and_then(|a| a.parse().ok()).unwrap_or(100_000);
        let queues: u8 = nth(4).and_then(|a| a.parse().ok()).unwrap_or(1);
        for _ in 0..rounds {
            let mut b = tourbillon::Builder::new();
            for q in 0..queues.max(1) {
                b = b.queue(q, q as u32 + 1);
            }
            spawn_empty(&b.build().unwrap(), tasks);
        }
        return;
    }
    if nth(1) == Some("queues8") {
        let rounds: usize = nth(2).and_then(|a| a.parse().ok()).unwrap_or(1);
        for _ in 0..rounds {
            let mut b = tourbillon::Builder::new();
            for q in 0..8u8 {
                b = b.queue(q, q as u32 + 1);
            }
            workload(&b.build().unwrap(), 5, TASKS);
        }
        return;
    }
    if nth(1) == Some("las") || nth(1) == Some("las-exact") {
        // The headline on one `Las::new()` (or `Las::exact()`) queue, a new
        // executor per round.
        let rounds: usize = nth(2).and_then(|a| a.parse().ok()).unwrap_or(1);
        let yields: usize = nth(3).and_then(|a| a.parse().ok()).unwrap_or(5);
        for _ in 0..rounds {
            let las = if nth(1) == Some("las") {
                tourbillon::sched::Las::new()
            } else {
                tourbillon::sched::Las::exact()
            };
            let spec = tourbillon::QueueSpec::new(1).scheduler(las);
            let ex = tourbillon::Builder::new()
                .queue_with(0u8, spec)
                .build()
                .unwrap();
            workload(&ex, yields, TASKS);
        }
        return;
    }
    if nth(1) == Some("observe") {
        // The headline with the opt-in observability, a new executor per
        // round.
        let rounds: usize = nth(2).and_then(|a| a.parse().ok()).unwrap_or(1);
        let yields: usize = nth(3).and_then(|a| a.parse().ok()).unwrap_or(5);
        let clock_only = nth(4) == Some("clock");
        for _ in 0..rounds {
            let stall = if clock_only {
                std::time::Duration::from_secs(3600)
            } else {
                std::time::Duration::from_millis(10)
            };
            let ex = tourbillon::Builder::new()
                .queue(0u8, 1)
                .latency_histograms(!clock_only)
                .stall_detector(stall, |s| eprintln!("stall: {s}"))
                .build()
                .unwrap();
            workload(&ex, yields, TASKS);
        }
        return;
    }
    if nth(1) == Some("timeline") {
        // The headline with the timeline on, a new executor per round.
        let rounds: usize = nth(2).and_then(|a| a.parse().ok()).unwrap_or(1);
        let yields: usize = nth(3).and_then(|a| a.parse().ok()).unwrap_or(5);
        for _ in 0..rounds {
            let ex = tourbillon::Builder::new()
                .queue(0u8, 1)
                .timeline(TASKS * (yields + 1))
                .build()
                .unwrap();
            workload(&ex, yields, TASKS);
            black_box(ex.take_timeline());
        }
        return;
    }
    if nth(1) == Some("pingpong") {
        let trips = nth(2).and_then(|a| a.parse().ok()).unwrap_or(100_000);
        let queues: u8 = nth(3).and_then(|a| a.parse().ok()).unwrap_or(1);
        // Shares 1:2:3:... as `compare`'s "4 queues" system.
        let mut b = tourbillon::Builder::new();
        if nth(4) == Some("fixed") {
            // Turns end at `max_polls`, not at a time that callgrind
            // stretches (see the header).
            b = b.host_yield_interval(std::time::Duration::from_secs(1));
        }
        for q in 0..queues.max(1) {
            b = b.queue(q, q as u32 + 1);
        }
        pingpong(&b.build().unwrap(), trips);
        return;
    }
    // A smoke pass: nothing asked for, and not a benchmark run.
    let smoke = positional.is_empty() && common::Args::from_env().smoke();
    let rounds: usize = nth(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let rounds = if quick { rounds.min(3) } else { rounds };
    // Second argument: yields per task (default 5, the headline workload).
    let yields: usize = nth(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    // Third argument: number of queues (shares 1:2:3:...), default 1.
    let queues: u8 = nth(3).and_then(|a| a.parse().ok()).unwrap_or(1);
    // Fourth argument `fresh`: a new executor for every round (as the
    // headline benchmark does) instead of one reused executor.
    let fresh = nth(4) == Some("fresh");
    // Fifth argument: tasks per round (default 50,000).
    let tasks: usize =
        nth(5)
            .and_then(|a| a.parse().ok())
            .unwrap_or(if smoke { 1_000 } else { TASKS });
    let build = || {
        let mut b = tourbillon::Builder::new();
        for q in 0..queues.max(1) {
            b = b.queue(q, q as u32 + 1);
        }
        b.build().unwrap()
    };
    let mut ex = build();
    for _ in 0..rounds {
        if fresh {
            ex = build();
        }
        workload(&ex, yields, tasks);
    }
}
