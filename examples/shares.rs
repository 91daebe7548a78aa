//! Two saturated queues with shares 3:1 on the real clock.
//!
//! Each queue runs CPU-bound tasks that never wait: they compute and call
//! `yield_maybe()` between small chunks of work, so both queues are runnable
//! the whole time and EEVDF splits the thread between them by shares. After
//! about 200 ms the tasks stop and the example prints the service (thread
//! time) each queue received, from `ex.stats()`, and their ratio.
//!
//! ```text
//! cargo run --release --example shares
//! ```
//!
//! With `TOURBILLON_TIMELINE=<file>` in the environment, the executor
//! records its timeline (`Builder::timeline`: every poll's queue, task and
//! times) and the example writes it to `<file>` as a Chrome trace-event
//! JSON file, which ui.perfetto.dev ("Open trace file") and
//! `chrome://tracing` open, and `docs/profiling/timeline2svg.py` draws:
//!
//! ```text
//! TOURBILLON_TIMELINE=shares.json cargo run --release --example shares
//! python3 docs/profiling/timeline2svg.py shares.json -o shares.svg
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use tourbillon::task::yield_maybe;
use tourbillon::Builder;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Foreground,
    Background,
}

const RUN_FOR: Duration = Duration::from_millis(200);
const TASKS_PER_QUEUE: usize = 2;

/// A CPU-bound loop that checks in with the executor between chunks of work
/// until `until`; returns the number of chunks done.
async fn burn(until: Instant) -> u64 {
    let mut chunks = 0u64;
    let mut x = 0u64;
    while Instant::now() < until {
        for i in 0..200u64 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        chunks += 1;
        yield_maybe().await;
    }
    black_box(x);
    chunks
}

fn main() {
    let timeline = std::env::var_os("TOURBILLON_TIMELINE");
    let mut builder = Builder::new()
        .queue(Q::Foreground, 3)
        .queue(Q::Background, 1);
    if timeline.is_some() {
        // Room for every poll of the run (a few thousand).
        builder = builder.timeline(1_000_000);
    }
    let ex = builder.build().unwrap();

    let until = Instant::now() + RUN_FOR;
    let mut handles = Vec::new();
    for q in [Q::Foreground, Q::Background] {
        for i in 0..TASKS_PER_QUEUE {
            let name = format!("{q:?} burn {i}");
            handles.push((q, ex.task(q).name(&name).spawn(burn(until)).unwrap()));
        }
    }
    let chunks = ex.block_on(async {
        let mut chunks = [0u64; 2];
        for (q, h) in handles {
            chunks[q as usize] += h.await.unwrap();
        }
        chunks
    });

    let stats = ex.stats();
    println!(
        "shares 3:1, {TASKS_PER_QUEUE} saturated tasks per queue, {RUN_FOR:?} on the real clock"
    );
    println!(
        "{:<12} {:>6} {:>12} {:>10} {:>8} {:>10}",
        "queue", "shares", "service", "polls", "runs", "chunks"
    );
    for (q, c) in stats.queues.iter().zip(chunks) {
        println!(
            "{:<12} {:>6} {:>12.3?} {:>10} {:>8} {:>10}",
            q.name, q.shares, q.service, q.polls, q.runs, c
        );
    }
    let fg = stats.queues[0].service.as_secs_f64();
    let bg = stats.queues[1].service.as_secs_f64();
    if bg > 0.0 {
        println!(
            "service ratio Foreground/Background: {:.2} (shares ratio 3.00)",
            fg / bg
        );
    } else {
        println!("Background received no service");
    }
    if let (Some(path), Some(t)) = (timeline, ex.take_timeline()) {
        let mut file = std::fs::File::create(&path).unwrap();
        t.write_chrome_json(&mut file).unwrap();
        let busy = t.busy_ns();
        println!(
            "timeline: {} polls ({} dropped) written to {}; time in polls: Foreground {:.3} ms, Background {:.3} ms",
            t.polls().len(),
            t.dropped(),
            path.to_string_lossy(),
            busy[0] as f64 / 1e6,
            busy[1] as f64 / 1e6
        );
    }
}
