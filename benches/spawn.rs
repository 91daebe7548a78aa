//! Spawn + join: spawn `N` tasks that complete on their first poll, then
//! await every join handle in spawn order; tourbillon against tokio.
//!
//! Why: this is the fixed cost every task pays whatever it does (allocating
//! the task, inserting it in the slab, pushing it on its queue, its one
//! poll, storing the output, waking the joiner, reading the output and
//! freeing the task), without any yield or wake of its own. `N = 1` is the
//! round trip of a single spawn-and-await (the joiner parks on every task);
//! `N = 64` and `N = 1024` amortise the joiner's wakes over a batch, as a
//! server accepting a burst of requests would.
//!
//! Group `spawn_join`, throughput per task, `N` in 1, 64, 1024:
//! * `tokio`: tokio `current_thread` runtime (no drivers) + `LocalSet`,
//!   `tokio::task::spawn_local`;
//! * `tourbillon`: standalone `block_on`, one `RunnableFifo` queue,
//!   `Executor::spawn` (a key lookup per spawn);
//! * `tourbillon_queue_handle`: the same through a `QueueHandle` (no key
//!   lookup).
//!
//! Timing: the runtime or executor is built once per benchmark, outside the
//! timed part; each criterion sample enters `block_on` once and times
//! `iters` rounds of (spawn `N`, await `N`) inside it with `Instant`
//! (`iter_custom`), so neither runtime construction nor `block_on` entry
//! is measured. The vector of handles is reused across rounds. Not pinned
//! to a CPU: the series run one after the other, each measured on its own;
//! for steadier figures run the whole bench under `taskset -c 1` yourself.

mod micro;

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const SIZES: [usize; 3] = [1, 64, 1024];

fn spawn_join(c: &mut Criterion) {
    let mut g = c.benchmark_group("spawn_join");
    let (rt, local) = micro::tokio_local();
    let ex = micro::tourbillon(1);
    let queue = ex.queue(0).unwrap();
    for n in SIZES {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::new("tokio", n), &n, |b, &n| {
            b.iter_custom(|iters| {
                local.block_on(&rt, async {
                    let mut hs = Vec::with_capacity(n);
                    let start = Instant::now();
                    for _ in 0..iters {
                        hs.extend((0..n).map(|i| tokio::task::spawn_local(async move { i })));
                        for h in hs.drain(..) {
                            black_box(h.await.unwrap());
                        }
                    }
                    start.elapsed()
                })
            })
        });
        g.bench_with_input(BenchmarkId::new("tourbillon", n), &n, |b, &n| {
            b.iter_custom(|iters| {
                ex.block_on(async {
                    let mut hs = Vec::with_capacity(n);
                    let start = Instant::now();
                    for _ in 0..iters {
                        hs.extend((0..n).map(|i| ex.spawn(0, async move { i }).unwrap()));
                        for h in hs.drain(..) {
                            black_box(h.await.unwrap());
                        }
                    }
                    start.elapsed()
                })
            })
        });
        g.bench_with_input(
            BenchmarkId::new("tourbillon_queue_handle", n),
            &n,
            |b, &n| {
                b.iter_custom(|iters| {
                    ex.block_on(async {
                        let mut hs = Vec::with_capacity(n);
                        let start = Instant::now();
                        for _ in 0..iters {
                            hs.extend((0..n).map(|i| queue.spawn(async move { i }).unwrap()));
                            for h in hs.drain(..) {
                                black_box(h.await.unwrap());
                            }
                        }
                        start.elapsed()
                    })
                })
            },
        );
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = micro::config();
    targets = spawn_join
}
criterion_main!(benches);
