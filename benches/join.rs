//! Join-handle await: awaiting the handle of a task that has already
//! finished, and of one that has not; tourbillon against tokio.
//!
//! Why: awaiting a `JoinHandle` is how a caller gets a task's output. When
//! the task is done the await should cost a state check, moving the output
//! out and freeing the task; when it is not, the awaiter registers its
//! waker in the task, parks, and is woken by the task's completion: the
//! join-waker path. The spawn itself is measured by `benches/spawn.rs`.
//!
//! Group `join_await` (throughput per awaited handle), series `tokio`
//! (`current_thread` runtime without drivers + `LocalSet`, `spawn_local`)
//! and `tourbillon` (standalone `block_on`, one `RunnableFifo` queue):
//! * `finished`: chunks of 256 tasks that return at once are spawned and
//!   run to completion (the awaiter yields until every handle
//!   `is_finished()`), untimed; then the awaits of the 256 finished handles
//!   are timed.
//! * `pending`: chunks of 256 tasks are spawned, each awaiting its own
//!   `futures::channel::oneshot` gate, and run until all of them wait on
//!   their gate, untimed; then, timed, for each task in turn: open its gate
//!   (a local wake of the task) and await its handle, which is pending: the
//!   awaiter parks, the task runs, completes and wakes the awaiter. So
//!   `pending` includes one local wake and one poll of the task.
//!
//! Timing: runtimes and executors are built once per benchmark; each sample
//! enters `block_on` once (`iter_custom`) and sums `Instant` time over the
//! timed parts of its chunks, so spawning and the untimed set-up are left
//! out. Not pinned to a CPU.

mod micro;

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::channel::oneshot;

const CHUNK: u64 = 256;

/// `iters` awaits of finished handles, in chunks: the timed awaits only.
macro_rules! finished {
    ($spawn:expr, $yield_now:path, $iters:expr) => {{
        let mut total = Duration::ZERO;
        let mut left = $iters;
        let mut hs = Vec::with_capacity(CHUNK as usize);
        while left > 0 {
            let n = left.min(CHUNK);
            left -= n;
            hs.extend((0..n).map(|i| $spawn(async move { i })));
            while !hs.iter().all(|h| h.is_finished()) {
                $yield_now().await;
            }
            let start = Instant::now();
            for h in hs.drain(..) {
                black_box(h.await.unwrap());
            }
            total += start.elapsed();
        }
        total
    }};
}

/// `iters` awaits of pending handles (gate opened just before), in chunks.
macro_rules! pending {
    ($spawn:expr, $yield_now:path, $iters:expr) => {{
        let mut total = Duration::ZERO;
        let mut left = $iters;
        let waiting = Rc::new(Cell::new(0u64));
        let mut tasks = Vec::with_capacity(CHUNK as usize);
        while left > 0 {
            let n = left.min(CHUNK);
            left -= n;
            waiting.set(0);
            tasks.extend((0..n).map(|i| {
                let (tx, rx) = oneshot::channel::<u64>();
                let waiting = waiting.clone();
                let h = $spawn(async move {
                    waiting.set(waiting.get() + 1);
                    rx.await.unwrap() + i
                });
                (tx, h)
            }));
            while waiting.get() < n {
                $yield_now().await;
            }
            let start = Instant::now();
            for (tx, h) in tasks.drain(..) {
                tx.send(1).unwrap();
                black_box(h.await.unwrap());
            }
            total += start.elapsed();
        }
        total
    }};
}

fn join_await(c: &mut Criterion) {
    let mut g = c.benchmark_group("join_await");
    g.throughput(Throughput::Elements(1));
    let (rt, local) = micro::tokio_local();
    let ex = micro::tourbillon(1);
    g.bench_function("finished/tokio", |b| {
        b.iter_custom(|iters| {
            local.block_on(&rt, async {
                finished!(tokio::task::spawn_local, tokio::task::yield_now, iters)
            })
        })
    });
    g.bench_function("finished/tourbillon", |b| {
        b.iter_custom(|iters| {
            ex.block_on(async {
                let spawn = |f| ex.spawn(0, f).unwrap();
                finished!(spawn, tourbillon::task::yield_now, iters)
            })
        })
    });
    g.bench_function("pending/tokio", |b| {
        b.iter_custom(|iters| {
            local.block_on(&rt, async {
                pending!(tokio::task::spawn_local, tokio::task::yield_now, iters)
            })
        })
    });
    g.bench_function("pending/tourbillon", |b| {
        b.iter_custom(|iters| {
            ex.block_on(async {
                let spawn = |f| ex.spawn(0, f).unwrap();
                pending!(spawn, tourbillon::task::yield_now, iters)
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = micro::config();
    targets = join_await
}
criterion_main!(benches);
