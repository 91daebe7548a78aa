//! What the host-yield interval costs when tourbillon runs nested in tokio.
//!
//! Every turn ends by returning to the host (`run_until` yields to tokio's
//! `block_on`, which polls its I/O and timer driver before polling the
//! executor again), so a shorter `host_yield_interval` services the host's
//! timers sooner (benches/priority.rs) at the price of more host turns.
//! This measures that price: the throughput of CPU-bound polls.
//!
//! # Workload
//!
//! A tokio `current_thread` runtime (`enable_all`: I/O and timer drivers)
//! runs `Executor::run_until`; one queue holds 1,000 tasks that each loop
//! on a busy spin of `--poll-us` microseconds (default 5 and 20, one series
//! each) and `yield_now().await`, for 0.5 s per round (`--secs`), ended by
//! a `tokio::time::sleep` in the main future. Nested, a yielded task waits
//! for the next host turn, so a turn polls each runnable task at most once:
//! with 1,000 of them, the interval, not the 61-poll cap, ends the turns
//! (61 polls of 5 us are 305 us).
//!
//! Systems: `host_yield_interval` 500 us, 200 us (the default), 100 us and
//! 50 us (the turns a queue with `QueueSpec::latency(50 us)` asks for while
//! it waits); a new runtime and executor per round, alternated round by
//! round (`--rounds`, default 7), pinned to CPU 1. Prints polls per
//! second (median, min, max), turns per second, and the ratio of medians
//! to 500 us.
//!
//! Usage: `cargo bench --bench host_interval [-- --rounds N --secs S
//! --poll-us N --quick --no-pin]`. Without `--bench`, which `cargo bench`
//! passes (`cargo test --all-targets` runs it without), a smoke pass: one
//! round of 0.05 s per interval, polls of 5 us only.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tourbillon::task::yield_now;
use tourbillon::Builder;

/// Host-yield intervals compared, us.
const INTERVALS_US: [u64; 4] = [500, 200, 100, 50];
/// Tasks in the queue.
const TASKS: usize = 1_000;

/// One round: (polls per second, turns per second).
fn round(interval_us: u64, poll: Duration, secs: f64) -> (f64, f64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ex = Builder::new()
        .queue(0u8, 1)
        .host_yield_interval(Duration::from_micros(interval_us))
        .build()
        .unwrap();
    let stop = Rc::new(Cell::new(false));
    let handles: Vec<_> = (0..TASKS)
        .map(|_| {
            let stop = stop.clone();
            ex.spawn(0u8, async move {
                while !stop.get() {
                    common::spin(poll);
                    yield_now().await;
                }
            })
            .unwrap()
        })
        .collect();
    let start = Instant::now();
    rt.block_on(ex.run_until(async {
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        stop.set(true);
        for h in handles {
            h.await.unwrap();
        }
    }));
    let elapsed = start.elapsed().as_secs_f64();
    let st = ex.stats();
    (st.polls as f64 / elapsed, st.turns as f64 / elapsed)
}

fn main() {
    let args = common::Args::from_env();
    let smoke = args.smoke();
    let quick = args.flag("--quick");
    let (rounds, secs, polls_us) = match (smoke, quick) {
        (true, _) => (1, 0.05, vec![5]),
        (false, true) => (3, 0.2, vec![5, 20]),
        (false, false) => (7, 0.5, vec![5, 20]),
    };
    let rounds: usize = args.parsed("--rounds").unwrap_or(rounds).max(1);
    let secs: f64 = args.parsed("--secs").unwrap_or(secs);
    let polls_us: Vec<u64> = match args.parsed::<u64>("--poll-us") {
        Some(us) => vec![us],
        None => polls_us,
    };
    if !args.flag("--no-pin") {
        common::pin_to_cpu1();
    }
    println!(
        "nested in tokio current_thread (enable_all); {TASKS} tasks spinning then yield_now; \
         {secs} s per round, {rounds} rounds, intervals alternated"
    );
    for &us in &polls_us {
        let poll = Duration::from_micros(us);
        let mut polls = vec![Vec::new(); INTERVALS_US.len()];
        let mut turns = vec![Vec::new(); INTERVALS_US.len()];
        for _ in 0..rounds {
            for (i, &iv) in INTERVALS_US.iter().enumerate() {
                let (p, t) = round(iv, poll, secs);
                polls[i].push(p);
                turns[i].push(t);
            }
        }
        println!();
        println!("polls of {us} us:");
        println!("| host_yield_interval | polls/s median | min | max | turns/s median | ratio to 500 us |");
        println!("|---|---:|---:|---:|---:|---:|");
        let base = common::median(&polls[0]);
        for (i, &iv) in INTERVALS_US.iter().enumerate() {
            let p = &polls[i];
            let min = p.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = p.iter().cloned().fold(0.0, f64::max);
            println!(
                "| {iv} us | {:.0} | {min:.0} | {max:.0} | {:.0} | {:.4} |",
                common::median(p),
                common::median(&turns[i]),
                common::median(p) / base
            );
        }
    }
}
