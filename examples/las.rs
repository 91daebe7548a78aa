//! A request server on a `Las` queue: short requests overtake long ones.
//!
//! Requests arrive open-loop (Poisson, about 80% load on the real clock)
//! for 0.6 s. Each request is a *connection* group: its handler is spawned
//! with `spawn_in_group(connection, ..)` and spawns its parts in the same
//! group, so the whole request is charged as one account of attained
//! service. 90% of the requests are short (2 parts of one 60 us chunk), 10%
//! long (3 parts of 12 chunks, yielding between chunks: 2.2 ms of CPU).
//!
//! The same arrivals are served twice, by a `RunnableFifo` queue and by a
//! `Las` queue, and the example prints the latency (completion - arrival)
//! of short and long requests, and the share of short requests served
//! within 1 ms. Under FIFO a short
//! request waits behind the chunks of every long request in flight; under
//! LAS it goes first, since its group has received less service; long
//! requests pay for it.
//!
//! ```text
//! cargo run --release --example las
//! ```

use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tourbillon::sched::{Las, RunnableFifo, Scheduler};
use tourbillon::task::yield_now;
use tourbillon::{Builder, QueueHandle, QueueSpec};

const RUN_FOR: Duration = Duration::from_millis(600);
const CHUNK: Duration = Duration::from_micros(60);
const LOAD: f64 = 0.8;

/// Compute for `d` (stands for parsing, a lookup, rendering a response).
fn work(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// One part of a request: `chunks` chunks of work, yielding between them.
async fn part(chunks: u32) {
    for c in 0..chunks {
        work(CHUNK);
        if c + 1 < chunks {
            yield_now().await;
        }
    }
}

/// A connection's request: its parts run as tasks of the connection's group.
/// Returns when the last part is done.
async fn handle(q: QueueHandle, connection: u64, long: bool) -> Instant {
    let (parts, chunks) = if long { (3, 12) } else { (2, 1) };
    let parts: Vec<_> = (0..parts)
        .map(|_| q.spawn_in_group(connection, part(chunks)).unwrap())
        .collect();
    for p in parts {
        p.await.unwrap();
    }
    Instant::now()
}

/// Arrival offsets and sizes: Poisson at `LOAD`, 10% long (xorshift64*).
fn script() -> Vec<(Duration, bool)> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    };
    let mean_cpu = CHUNK.as_secs_f64() * (0.9 * 2.0 + 0.1 * 36.0);
    let rate = LOAD / mean_cpu;
    let mut t = 0.0;
    let mut out = Vec::new();
    loop {
        t += -(1.0 - rand()).ln() / rate;
        if t > RUN_FOR.as_secs_f64() {
            return out;
        }
        out.push((Duration::from_secs_f64(t), rand() < 0.1));
    }
}

struct Served {
    long: bool,
    arrival: Instant,
    done: Instant,
}

/// Serves the script on one queue ordered by `scheduler`.
fn serve<S: Scheduler>(scheduler: S, script: &[(Duration, bool)]) -> Vec<Served> {
    let ex = Builder::new()
        .queue_with("requests", QueueSpec::new(1).scheduler(scheduler))
        // The accept loop (the main future) runs between turns: end a turn
        // every 100 us so that it sees arrivals promptly.
        .host_yield_interval(Duration::from_micros(100))
        .build()
        .unwrap();
    let q = ex.queue("requests").unwrap();
    let served = Rc::new(RefCell::new(Vec::new()));
    ex.block_on(async {
        let start = Instant::now();
        let mut handlers = Vec::new();
        for (connection, &(at, long)) in script.iter().enumerate() {
            let arrival = start + at;
            // Accept: wait for the next arrival (spinning, for precision).
            poll_fn(|cx| {
                if Instant::now() >= arrival {
                    Poll::Ready(())
                } else {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
            })
            .await;
            let connection = connection as u64;
            let h = q
                .spawn_in_group(connection, handle(q.clone(), connection, long))
                .unwrap();
            handlers.push((long, arrival, h));
        }
        for (long, arrival, h) in handlers {
            let done = h.await.unwrap();
            served.borrow_mut().push(Served {
                long,
                arrival,
                done,
            });
        }
    });
    served.take()
}

fn summary(served: &[Served], long: bool) -> String {
    let mut ms: Vec<f64> = served
        .iter()
        .filter(|s| s.long == long)
        .map(|s| (s.done - s.arrival).as_secs_f64() * 1e3)
        .collect();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let p = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    format!(
        "{:4} requests, p50 {:6.2} / p99 {:6.2} / max {:6.2} ms",
        ms.len(),
        p(0.5),
        p(0.99),
        ms[ms.len() - 1]
    )
}

/// Share of the short requests served within `within`.
fn served_within(served: &[Served], within: Duration) -> f64 {
    let short: Vec<&Served> = served.iter().filter(|s| !s.long).collect();
    let fast = short
        .iter()
        .filter(|s| s.done - s.arrival <= within)
        .count();
    100.0 * fast as f64 / short.len() as f64
}

fn main() {
    let script = script();
    println!(
        "{} requests over {} ms at ~{:.0}% load (one core)\n",
        script.len(),
        RUN_FOR.as_millis(),
        LOAD * 100.0
    );
    for (name, served) in [
        ("RunnableFifo", serve(RunnableFifo::new(), &script)),
        ("Las", serve(Las::new(), &script)),
    ] {
        println!("{name}:");
        println!("  short: {}", summary(&served, false));
        println!("  long:  {}", summary(&served, true));
        println!(
            "  short requests served within 1 ms: {:.1}%",
            served_within(&served, Duration::from_millis(1))
        );
    }
}
