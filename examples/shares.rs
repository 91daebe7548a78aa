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
    let ex = Builder::new()
        .queue(Q::Foreground, 3)
        .queue(Q::Background, 1)
        .build()
        .unwrap();

    let until = Instant::now() + RUN_FOR;
    let mut handles = Vec::new();
    for q in [Q::Foreground, Q::Background] {
        for _ in 0..TASKS_PER_QUEUE {
            handles.push((q, ex.spawn(q, burn(until)).unwrap()));
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
}
