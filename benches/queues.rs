//! Queue selection: the cost of picking among 1, 2, 8 or 64 weighted
//! queues (tourbillon only: tokio has no weighted queues).
//!
//! Why: the point of tourbillon is to share the thread between queues; this
//! measures what having more queues costs per poll when all of them are
//! busy. The work is the same in every case: 64 tasks that yield, spread
//! round-robin over `N` queues with shares 1, 2, ..., `N` (queue `q` has
//! `q + 1` shares), so only the number of runnable queues changes (with 64
//! queues each queue holds one task).
//!
//! Groups (throughput per poll, i.e. per yield; `N` in 1, 2, 8, 64):
//! * `queues_default_slice`: default options (250 us slice). Between
//!   queues the executor decides at the end of a queue's slice, so the pick
//!   is amortised over the many polls of a run: this is what the choice
//!   among queues costs in practice.
//! * `queues_slice_1us`: `base_slice` 1 us (the minimum), so a queue's run
//!   ends every few polls and the EEVDF pick (and the charging of service
//!   to the queue) happens almost every time: the pick's own cost, made
//!   visible.
//!
//! Timing: the executor is built once per benchmark; each sample enters
//! `block_on` once (`iter_custom`), spawns the 64 tasks (each yields
//! `iters` times) and times from after the spawns to the last join with
//! `Instant`. Not pinned to a CPU.

mod micro;

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const TASKS: u64 = 64;
const QUEUES: [u8; 4] = [1, 2, 8, 64];

fn executor(queues: u8, slice: Option<Duration>) -> tourbillon::Executor<u8> {
    let mut b = tourbillon::Builder::new();
    for q in 0..queues {
        b = b.queue(q, q as u32 + 1);
    }
    if let Some(s) = slice {
        b = b.base_slice(s);
    }
    b.build().unwrap()
}

fn group(c: &mut Criterion, name: &str, slice: Option<Duration>) {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(TASKS));
    for n in QUEUES {
        let ex = executor(n, slice);
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter_custom(|iters| micro::yield_round(&ex, TASKS, iters))
        });
    }
    g.finish();
}

fn queues(c: &mut Criterion) {
    group(c, "queues_default_slice", None);
    group(c, "queues_slice_1us", Some(Duration::from_micros(1)));
}

criterion_group! {
    name = benches;
    config = micro::config();
    targets = queues
}
criterion_main!(benches);
