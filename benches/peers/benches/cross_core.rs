//! Cross-core submission: how long it takes to hand a small closure to
//! another core's executor and get its result back, and how many such
//! submissions go through per second with many in flight.
//!
//! Measures, per system, on 2 cores (the submitting side on CPU 0, the
//! executing side on CPU 1, where the system allows pinning):
//! * latency: 1,000 warm-up submissions, then 10,000 timed ones, one at a
//!   time (each awaited before the next); p50 and p99 of the round trips;
//! * throughput: 100,000 submissions with at most 256 in flight (a
//!   `FuturesUnordered` of the pending results, refilled as each one
//!   completes); submissions per second from the first to the last result.
//!
//! Every submission is a `Send` closure `move || async move { i + 1 }` that
//! builds the future on the executing core; the result is checked.
//!
//! Systems:
//! * tourbillon `Pool::submit_to` (`Host::Standalone`, one `RunnableFifo`
//!   queue per core), *from outside*: a pool of one core
//!   (`Placement::Cpus(vec![1])`), `submit_to(0, ..)` from the main thread
//!   (CPU 0) driven by `futures::executor::block_on`;
//! * tourbillon, *core to core*: a pool of two cores
//!   (`Placement::Cpus(vec![0, 1])`), the submitting loop is a task of core
//!   0 (itself started with `submit_to(0, ..)`) that submits to core 1;
//! * tokio-util 0.7 `LocalPoolHandle` (one `LocalRuntime` per worker
//!   thread), *from outside*: a pool of one worker (pinned to CPU 1 by a task
//!   of its own), `spawn_pinned` from the main thread (CPU 0) driven by
//!   `futures::executor::block_on`;
//! * tokio-util, *core to core*: a pool of two workers (CPU 0 and 1), the
//!   submitting loop is a task of worker 0 (`spawn_pinned_by_idx(.., 0)`),
//!   which submits with `spawn_pinned_by_idx(.., 1)`;
//! * glommio 0.9, *core to core*: two `LocalExecutor`s
//!   (`Placement::Fixed(0)` and `Fixed(1)`) connected by two
//!   `shared_channel`s (requests, replies; 1,024 slots each). Core 1 spawns
//!   a local task per request and sends `(id, result)` back; on core 0 a
//!   dispatcher task hands each reply to the submitter's local
//!   `futures::channel::oneshot` (a slab of them, indexed by id): the
//!   request/reply layer a glommio program writes for this, since glommio
//!   has no cross-executor spawn. Reported as skipped when glommio cannot
//!   start (io_uring unavailable or limited);
//! * glommio again with `spin_before_park(10 us)` on both executors: an
//!   idle tourbillon core spins briefly (a bounded number of
//!   `spin_loop` hints) before it parks, so a wake that comes soon is
//!   taken without a futex; glommio parks at once unless told to spin;
//! * the *floor*, no executor: a plain thread on CPU 1 receives boxed
//!   closures on a `std::sync::mpsc` channel, runs each and sends its result
//!   on the submitter's `futures::channel::oneshot`: what waking a parked
//!   thread on the other CPU and being woken back costs, the least any
//!   system pays for a sequential round trip.
//!
//! Each round runs every system once, with a fresh pool or executors per
//! run, in an order shuffled for each round (`common::run_order`, a fixed
//! seed: no system always follows the same one). Prints the medians over the rounds of p50, p99 and throughput per
//! system and the ratios of tourbillon to each peer in the same mode.
//!
//! Usage, from the repository root: `cargo bench -p tourbillon-peers --bench
//! cross_core [-- --rounds N --quick --no-pin --only NAME,NAME]`. Default 5
//! rounds; `--quick`: 3 rounds and a tenth of the sizes (labelled);
//! `--only`: the systems whose names contain one of the words; `--no-pin`:
//! no thread is pinned (glommio `Placement::Unbound`). Unknown flags (such
//! as `--bench`, which cargo passes) are ignored.

#[path = "../../common/mod.rs"]
mod common;

use common::{median, pct};

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::Instant;

use futures::future::LocalBoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};

// ---------------------------------------------------------------------------
// The workload, generic over how a system submits

const WARMUP: usize = 1_000;

#[derive(Clone, Copy)]
struct Sizes {
    /// Sequential submissions timed one by one.
    latency: usize,
    /// Submissions of the throughput part.
    throughput: usize,
    /// Most submissions in flight in the throughput part.
    window: usize,
}

const FULL: Sizes = Sizes {
    latency: 10_000,
    throughput: 100_000,
    window: 256,
};

/// What one run measured.
struct Sample {
    p50_ns: u64,
    p99_ns: u64,
    per_sec: f64,
}

/// Runs the workload with `submit(i)`, a future of `i + 1` computed on the
/// other core.
async fn measure<F, Fut>(submit: F, sz: Sizes) -> Sample
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = u64>,
{
    for i in 0..WARMUP as u64 {
        assert_eq!(submit(i).await, i + 1);
    }
    let mut lat = Vec::with_capacity(sz.latency);
    for i in 0..sz.latency as u64 {
        let t = Instant::now();
        let v = submit(i).await;
        lat.push(t.elapsed().as_nanos() as u64);
        assert_eq!(v, i + 1);
    }
    lat.sort_unstable();

    let n = sz.throughput as u64;
    let start = Instant::now();
    let mut in_flight = FuturesUnordered::new();
    let mut sum = 0u64;
    for i in 0..n {
        if in_flight.len() >= sz.window {
            sum += in_flight.next().await.expect("a result");
        }
        in_flight.push(submit(i));
    }
    while let Some(v) = in_flight.next().await {
        sum += v;
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(sum, n * (n + 1) / 2, "every result came back once");
    Sample {
        p50_ns: pct(&lat, 50.0),
        p99_ns: pct(&lat, 99.0),
        per_sec: n as f64 / secs,
    }
}

/// Pins the calling thread to `cpu` if `pin`; an error if it could not.
fn pin(pin: bool, cpu: u32) -> Result<(), String> {
    if !pin || common::pin_thread(cpu) {
        Ok(())
    } else {
        Err(format!("cannot pin a thread to CPU {cpu} (taskset)"))
    }
}

/// Runs `f` on a new thread pinned to CPU 0 if `pinned`: the submitter
/// "from outside". The main thread keeps the whole affinity mask, so that
/// every system can place its own threads (tourbillon's `Placement::Cpus`
/// accepts only CPUs of the caller's mask).
fn on_cpu0<T: Send>(pinned: bool, f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|sc| {
        sc.spawn(move || pin(pinned, 0).map(|()| f()))
            .join()
            .unwrap_or_else(|_| Err("the submitting thread panicked".into()))
    })
}

// ---------------------------------------------------------------------------
// tokio-util LocalPoolHandle

/// Pins worker `idx` of `pool` to `cpu` (from a task on it).
fn pin_tokio_worker(
    pool: &tokio_util::task::LocalPoolHandle,
    idx: usize,
    cpu: u32,
) -> Result<(), String> {
    futures::executor::block_on(
        pool.spawn_pinned_by_idx(move || async move { pin(true, cpu) }, idx),
    )
    .map_err(|e| e.to_string())?
}

fn run_tokio_util_outside(sz: Sizes, pinned: bool) -> Result<Sample, String> {
    let pool = tokio_util::task::LocalPoolHandle::new(1);
    if pinned {
        pin_tokio_worker(&pool, 0, 1)?;
    }
    let submit = |i: u64| {
        pool.spawn_pinned(move || async move { i + 1 })
            .map(|r| r.expect("the task ran"))
    };
    on_cpu0(pinned, || futures::executor::block_on(measure(submit, sz)))
}

fn run_tokio_util_core_to_core(sz: Sizes, pinned: bool) -> Result<Sample, String> {
    let pool = tokio_util::task::LocalPoolHandle::new(2);
    if pinned {
        pin_tokio_worker(&pool, 0, 0)?;
        pin_tokio_worker(&pool, 1, 1)?;
    }
    let p = pool.clone();
    let run = pool.spawn_pinned_by_idx(
        move || async move {
            let submit = |i: u64| {
                p.spawn_pinned_by_idx(move || async move { i + 1 }, 1)
                    .map(|r| r.expect("the task ran"))
            };
            measure(submit, sz).await
        },
        0,
    );
    futures::executor::block_on(run).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------
// glommio: two executors and two shared channels

/// A submission as it crosses to core 1: the closure that builds the future.
type Job = Box<dyn FnOnce() -> LocalBoxFuture<'static, u64> + Send>;

/// Slots of each shared channel (more than the window: a send never waits).
const GLOMMIO_CHANNEL: usize = 1_024;

/// Spin of glommio's second row before its executors park
/// (`spin_before_park`), of the order of tourbillon's bounded spin before
/// it parks an idle core.
const GLOMMIO_SPIN: std::time::Duration = std::time::Duration::from_micros(10);

fn run_glommio(
    sz: Sizes,
    pinned: bool,
    spin: Option<std::time::Duration>,
) -> Result<Sample, String> {
    use glommio::channels::shared_channel;
    use glommio::{LocalExecutorBuilder, Placement};

    let placement = |cpu| {
        if pinned {
            Placement::Fixed(cpu)
        } else {
            Placement::Unbound
        }
    };
    let (req_tx, req_rx) = shared_channel::new_bounded::<(usize, Job)>(GLOMMIO_CHANNEL);
    let (rep_tx, rep_rx) = shared_channel::new_bounded::<(usize, u64)>(GLOMMIO_CHANNEL);

    let builder = |cpu| {
        let b = LocalExecutorBuilder::new(placement(cpu));
        match spin {
            Some(d) => b.spin_before_park(d),
            None => b,
        }
    };
    let worker = builder(1)
        .name("xcore-worker")
        .spawn(move || async move {
            let requests = req_rx.connect().await;
            let replies = Rc::new(rep_tx.connect().await);
            while let Some((id, job)) = requests.recv().await {
                let replies = replies.clone();
                glommio::spawn_local(async move {
                    let v = job().await;
                    // Fails only once core 0 is gone; nothing waits then.
                    let _ = replies.send((id, v)).await;
                })
                .detach();
            }
        })
        .map_err(|e| e.to_string())?;

    let caller = builder(0)
        .name("xcore-caller")
        .spawn(move || async move {
            let requests = req_tx.connect().await;
            let replies = rep_rx.connect().await;
            let pending = Rc::new(RefCell::new(slab::Slab::<
                futures::channel::oneshot::Sender<u64>,
            >::new()));
            let table = pending.clone();
            let dispatcher = glommio::spawn_local(async move {
                while let Some((id, v)) = replies.recv().await {
                    if let Some(tx) = table.borrow_mut().try_remove(id) {
                        let _ = tx.send(v);
                    }
                }
            });
            let requests_ref = &requests;
            let submit = |i: u64| {
                let (tx, rx) = futures::channel::oneshot::channel();
                let id = pending.borrow_mut().insert(tx);
                let job: Job = Box::new(move || async move { i + 1 }.boxed_local());
                async move {
                    if requests_ref.send((id, job)).await.is_err() {
                        panic!("core 1 is gone");
                    }
                    rx.await.expect("a reply")
                }
            };
            let sample = measure(submit, sz).await;
            // Closing the requests ends core 1's loop, whose end closes
            // the replies and so the dispatcher.
            drop(requests);
            dispatcher.await;
            sample
        })
        .map_err(|e| e.to_string())?;

    let sample = caller.join().map_err(|e| e.to_string());
    let done = worker.join().map_err(|e| e.to_string());
    done?;
    sample
}

// ---------------------------------------------------------------------------
// tourbillon Pool

/// The queue of every core (one `RunnableFifo` queue).
const Q: &str = "q";

/// A pool whose core `i` runs on `cpus[i]` (unpinned: `cpus.len()` cores).
fn tourbillon_pool(
    cpus: Vec<usize>,
    pinned: bool,
) -> Result<tourbillon::pool::Pool<&'static str>, String> {
    use tourbillon::pool::{Host, Placement};
    let n = cpus.len();
    let builder = tourbillon::pool::Pool::builder();
    let builder = if pinned {
        builder.placement(Placement::Cpus(cpus))
    } else {
        builder.cores(n).placement(Placement::Unpinned)
    };
    builder
        .host(Host::Standalone)
        .executor(|_| tourbillon::Builder::new().queue(Q, 1))
        .build()
        .map_err(|e| e.to_string())
}

/// Shuts `pool` down; an error unless every core drained.
fn tourbillon_shutdown(pool: &tourbillon::pool::Pool<&'static str>) -> Result<(), String> {
    let report = pool
        .shutdown(std::time::Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    if report.is_clean() {
        Ok(())
    } else {
        Err(format!("shutdown not clean: {report}"))
    }
}

fn run_tourbillon_outside(sz: Sizes, pinned: bool) -> Result<Sample, String> {
    let pool = tourbillon_pool(vec![1], pinned)?;
    let submit = |i: u64| {
        pool.submit_to(0, Q, move || async move { i + 1 })
            .map(|r| r.expect("the task ran"))
    };
    let sample = on_cpu0(pinned, || futures::executor::block_on(measure(submit, sz)));
    tourbillon_shutdown(&pool)?;
    let sample = sample?;
    Ok(sample)
}

fn run_tourbillon_core_to_core(sz: Sizes, pinned: bool) -> Result<Sample, String> {
    let pool = tourbillon_pool(vec![0, 1], pinned)?;
    let p = pool.handle();
    let run = pool.submit_to(0, Q, move || async move {
        assert_eq!(tourbillon::pool::current_core(), Some(0));
        let there = p.submit_to(1, Q, || async { tourbillon::pool::current_core() });
        assert_eq!(there.await.expect("the task ran"), Some(1));
        let submit = |i: u64| {
            p.submit_to(1, Q, move || async move { i + 1 })
                .map(|r| r.expect("the task ran"))
        };
        measure(submit, sz).await
    });
    let sample = futures::executor::block_on(run).map_err(|e| e.to_string())?;
    tourbillon_shutdown(&pool)?;
    Ok(sample)
}

// ---------------------------------------------------------------------------
// The floor: a thread and a channel, no executor

/// A submission to the floor's thread: the closure and where its result goes.
type FloorJob = (
    Box<dyn FnOnce() -> u64 + Send>,
    futures::channel::oneshot::Sender<u64>,
);

fn run_floor(sz: Sizes, pinned: bool) -> Result<Sample, String> {
    let (tx, rx) = std::sync::mpsc::channel::<FloorJob>();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = ready_tx.send(pin(pinned, 1));
        while let Ok((job, reply)) = rx.recv() {
            let _ = reply.send(job());
        }
    });
    ready_rx.recv().map_err(|e| e.to_string())??;
    let submit = |i: u64| {
        let (reply, result) = futures::channel::oneshot::channel();
        tx.send((Box::new(move || i + 1), reply))
            .expect("the floor's thread runs");
        result.map(|r| r.expect("a reply"))
    };
    let sample = on_cpu0(pinned, || futures::executor::block_on(measure(submit, sz)));
    drop(tx);
    worker.join().map_err(|_| "the floor's thread panicked")?;
    sample
}

// ---------------------------------------------------------------------------
// Systems, rounds, report

type Runner = Box<dyn Fn(Sizes, bool) -> Result<Sample, String>>;

struct System {
    name: &'static str,
    run: Runner,
    /// `Err` once the system failed to start or run (then skipped).
    status: Result<(), String>,
    p50_ns: Vec<f64>,
    p99_ns: Vec<f64>,
    per_sec: Vec<f64>,
}

fn systems() -> Vec<System> {
    let v: Vec<(&'static str, Runner)> = vec![
        (
            "tourbillon submit_to, from outside",
            Box::new(run_tourbillon_outside),
        ),
        (
            "tourbillon submit_to, core to core",
            Box::new(run_tourbillon_core_to_core),
        ),
        (
            "tokio-util spawn_pinned, from outside",
            Box::new(run_tokio_util_outside),
        ),
        (
            "tokio-util spawn_pinned, core to core",
            Box::new(run_tokio_util_core_to_core),
        ),
        (
            "glommio 0.9 shared_channel, core to core",
            Box::new(|sz, pinned| run_glommio(sz, pinned, None)),
        ),
        (
            "glommio 0.9 shared_channel spin 10us, core to core",
            Box::new(|sz, pinned| run_glommio(sz, pinned, Some(GLOMMIO_SPIN))),
        ),
        (
            "floor: std thread + mpsc, from outside",
            Box::new(run_floor),
        ),
    ];
    v.into_iter()
        .map(|(name, run)| System {
            name,
            run,
            status: Ok(()),
            p50_ns: Vec::new(),
            p99_ns: Vec::new(),
            per_sec: Vec::new(),
        })
        .collect()
}

/// Runs `run`, a panic turned into an error.
fn run_caught(run: &Runner, sz: Sizes, pinned: bool) -> Result<Sample, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(sz, pinned))) {
        Ok(r) => r,
        Err(p) => Err(if let Some(s) = p.downcast_ref::<&str>() {
            format!("panicked: {s}")
        } else if let Some(s) = p.downcast_ref::<String>() {
            format!("panicked: {s}")
        } else {
            "panicked".to_string()
        }),
    }
}

/// The (tourbillon row, peer row) pairs compared in "Relative".
const PAIRS: &[(&str, &str)] = &[
    (
        "tourbillon submit_to, from outside",
        "tokio-util spawn_pinned, from outside",
    ),
    (
        "tourbillon submit_to, core to core",
        "tokio-util spawn_pinned, core to core",
    ),
    (
        "tourbillon submit_to, core to core",
        "glommio 0.9 shared_channel, core to core",
    ),
    (
        "tourbillon submit_to, core to core",
        "glommio 0.9 shared_channel spin 10us, core to core",
    ),
    (
        "tourbillon submit_to, from outside",
        "floor: std thread + mpsc, from outside",
    ),
];

/// Medians over the rounds: (p50 us, p99 us, M submissions/s).
fn medians(s: &System) -> Option<(f64, f64, f64)> {
    if s.per_sec.is_empty() {
        return None;
    }
    Some((
        median(&s.p50_ns) / 1e3,
        median(&s.p99_ns) / 1e3,
        median(&s.per_sec) / 1e6,
    ))
}

fn print_table(systems: &[System], rounds: usize) {
    println!();
    println!("Medians of {rounds} rounds:");
    println!("| system | p50 us | p99 us | throughput M/s | M/s min..max |");
    println!("|---|---:|---:|---:|---:|");
    for s in systems {
        match (medians(s), &s.status) {
            (Some((p50, p99, tput)), Ok(())) => {
                let min = s.per_sec.iter().cloned().fold(f64::INFINITY, f64::min) / 1e6;
                let max = s.per_sec.iter().cloned().fold(0.0, f64::max) / 1e6;
                println!(
                    "| {} | {p50:.2} | {p99:.2} | {tput:.3} | {min:.3}..{max:.3} |",
                    s.name
                );
            }
            (_, Err(e)) => println!("| {} | skipped: {e} | | | |", s.name),
            (None, Ok(())) => println!("| {} | no samples | | | |", s.name),
        }
    }
}

fn print_relative(systems: &[System]) {
    let find = |name: &str| {
        systems
            .iter()
            .find(|s| s.name == name && s.status.is_ok())
            .and_then(medians)
    };
    let mut lines = Vec::new();
    for (tb, peer) in PAIRS {
        if let (Some(a), Some(b)) = (find(tb), find(peer)) {
            lines.push(format!(
                "  {tb} / {peer}: p50 {:.2}, p99 {:.2} (below 1: tourbillon faster), \
                 throughput {:.2} (above 1: tourbillon more)",
                a.0 / b.0,
                a.1 / b.1,
                a.2 / b.2
            ));
        }
    }
    if !lines.is_empty() {
        println!();
        println!("Relative (tourbillon / peer, ratios of medians in this run):");
        for l in lines {
            println!("{l}");
        }
    }
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let wall = Instant::now();
    let args = common::Args::from_env();
    let quick = args.flag("--quick");
    let rounds = args
        .parsed::<usize>("--rounds")
        .unwrap_or(if quick { 3 } else { 5 })
        .max(1);
    let pinned = !args.flag("--no-pin");
    let sizes = if quick {
        Sizes {
            latency: FULL.latency / 10,
            throughput: FULL.throughput / 10,
            ..FULL
        }
    } else {
        FULL
    };
    if quick {
        println!("QUICK MODE: {rounds} rounds, a tenth of the sizes; figures not comparable to full runs");
    }
    println!(
        "cross-core submission: latency of {} sequential submissions ({WARMUP} warm-up), \
         throughput of {} with {} in flight; {rounds} rounds, systems alternated, fresh pool \
         per run; {}; load average at start: {}",
        sizes.latency,
        sizes.throughput,
        sizes.window,
        if pinned {
            "submitter on CPU 0, executor on CPU 1"
        } else {
            "not pinned (--no-pin)"
        },
        load_average()
    );

    let mut systems = systems();
    if let Some(only) = args.value("--only") {
        let words: Vec<&str> = only.split(',').collect();
        systems.retain(|s| words.iter().any(|w| s.name.contains(w)));
    }

    // One untimed pass at a tenth of the sizes: a system that fails here is
    // skipped.
    let warm = Sizes {
        latency: sizes.latency / 10,
        throughput: sizes.throughput / 10,
        ..sizes
    };
    for s in systems.iter_mut() {
        if let Err(e) = run_caught(&s.run, warm, pinned) {
            println!("{}: skipped: {e}", s.name);
            s.status = Err(e);
        }
    }

    for round in 0..rounds {
        let t = Instant::now();
        for k in common::run_order(systems.len(), round, 0) {
            let s = &mut systems[k];
            if s.status.is_err() {
                continue;
            }
            match run_caught(&s.run, sizes, pinned) {
                Ok(sample) => {
                    s.p50_ns.push(sample.p50_ns as f64);
                    s.p99_ns.push(sample.p99_ns as f64);
                    s.per_sec.push(sample.per_sec);
                }
                Err(e) => {
                    println!("{}: failed in round {}: {e}", s.name, round + 1);
                    s.status = Err(e);
                }
            }
        }
        eprintln!(
            "round {}/{rounds} done in {:.1} s",
            round + 1,
            t.elapsed().as_secs_f64()
        );
    }

    print_table(&systems, rounds);
    print_relative(&systems);
    println!(
        "wall time {:.1} s; load average at the end: {}",
        wall.elapsed().as_secs_f64(),
        load_average()
    );
}
