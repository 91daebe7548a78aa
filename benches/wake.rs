//! Wakes: a task woken on its own thread (it yields) and a task woken from
//! another thread (a channel send from a second OS thread); tourbillon
//! against tokio.
//!
//! Why: a wake is what every I/O readiness, timer, channel message or
//! `yield_now` costs the executor: mark the task runnable, queue it, pick
//! it, poll it. A local wake (the task wakes itself by yielding) is the
//! executor's fast path; a wake from another thread goes through the
//! executor's cross-thread inbox and must unpark the executor's thread.
//!
//! Group `yield` (throughput per yield): `T` tasks (1 or 64) each yield
//! `iters` times (each system's own `yield_now`):
//! * `tokio`: `current_thread` runtime (no drivers) + `LocalSet`,
//!   `spawn_local`, `tokio::task::yield_now` (which defers the wake to the
//!   end of the scheduler tick);
//! * `tourbillon`: standalone `block_on`, one `RunnableFifo` queue,
//!   `tourbillon::task::yield_now`;
//! * `tourbillon_nested`: the same executor nested in a tokio
//!   `current_thread` runtime (`run_until`): a yield waits for the next host
//!   turn, so this series includes the executor's return to tokio.
//!
//! Group `wake_remote` (throughput per round trip): one task and one OS
//! thread. The task sends a request through a `std::sync::mpsc` channel
//! (the thread blocks in `recv`) and awaits the reply on a
//! `futures::channel::mpsc::unbounded` channel; the thread answers at once,
//! so every reply wakes the task from the second thread, usually while the
//! executor is idle. One iteration is one round trip: one executor wake from
//! another thread, plus the thread's own wake by the std channel (the same
//! for both systems). Series `tokio` and `tourbillon` as above.
//!
//! Timing: runtimes and executors are built once per benchmark, outside the
//! timed part (`iter_custom`); the timed part is the tasks' own loops, from
//! after they are spawned to their end (`yield`), or the task's loop of
//! `iters` round trips, timed by the task itself after one untimed round
//! trip that lets the thread start (`wake_remote`; the thread is spawned
//! per sample, untimed). Not pinned to a CPU (`wake_remote` needs two
//! threads; pinning both to one CPU would measure the OS's context switch).

mod micro;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::StreamExt;

const TASKS: [usize; 2] = [1, 64];

/// Spawns `tasks` tasks with `spawn`, each yielding `iters` times with the
/// yield of `yield_now`, and awaits them; times from the first spawn's
/// return (tasks run only once the caller awaits) to the last join.
macro_rules! yield_round {
    ($spawn:expr, $yield_now:path, $tasks:expr, $iters:expr) => {{
        let iters = $iters;
        let hs: Vec<_> = (0..$tasks)
            .map(|_| {
                $spawn(async move {
                    for _ in 0..iters {
                        $yield_now().await;
                    }
                })
            })
            .collect();
        let start = Instant::now();
        for h in hs {
            h.await.unwrap();
        }
        start.elapsed()
    }};
}

fn yields(c: &mut Criterion) {
    let mut g = c.benchmark_group("yield");
    let (rt, local) = micro::tokio_local();
    let ex = micro::tourbillon(1);
    for t in TASKS {
        g.throughput(Throughput::Elements(t as u64));
        g.bench_with_input(BenchmarkId::new("tokio", t), &t, |b, &t| {
            b.iter_custom(|iters| {
                local.block_on(&rt, async {
                    yield_round!(tokio::task::spawn_local, tokio::task::yield_now, t, iters)
                })
            })
        });
        g.bench_with_input(BenchmarkId::new("tourbillon", t), &t, |b, &t| {
            b.iter_custom(|iters| {
                ex.block_on(async {
                    let spawn = |f| ex.spawn(0, f).unwrap();
                    yield_round!(spawn, tourbillon::task::yield_now, t, iters)
                })
            })
        });
        g.bench_with_input(BenchmarkId::new("tourbillon_nested", t), &t, |b, &t| {
            b.iter_custom(|iters| {
                rt.block_on(ex.run_until(async {
                    let spawn = |f| ex.spawn(0, f).unwrap();
                    yield_round!(spawn, tourbillon::task::yield_now, t, iters)
                }))
            })
        });
    }
    g.finish();
}

/// The task side of `wake_remote`: `iters` round trips with a fresh thread,
/// after one untimed round trip; returns the time of the `iters`.
async fn remote_round_trips(iters: u64) -> Duration {
    let (req_tx, req_rx) = std::sync::mpsc::channel::<u64>();
    let (reply_tx, mut reply_rx) = futures::channel::mpsc::unbounded::<u64>();
    let thread = std::thread::spawn(move || {
        while let Ok(i) = req_rx.recv() {
            if reply_tx.unbounded_send(i).is_err() {
                break;
            }
        }
    });
    req_tx.send(0).unwrap();
    black_box(reply_rx.next().await.unwrap());
    let start = Instant::now();
    for i in 0..iters {
        req_tx.send(i).unwrap();
        black_box(reply_rx.next().await.unwrap());
    }
    let elapsed = start.elapsed();
    drop(req_tx);
    thread.join().unwrap();
    elapsed
}

fn wake_remote(c: &mut Criterion) {
    let mut g = c.benchmark_group("wake_remote");
    g.throughput(Throughput::Elements(1));
    let (rt, local) = micro::tokio_local();
    let ex = micro::tourbillon(1);
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            local.block_on(&rt, async {
                tokio::task::spawn_local(remote_round_trips(iters))
                    .await
                    .unwrap()
            })
        })
    });
    g.bench_function("tourbillon", |b| {
        b.iter_custom(|iters| {
            ex.block_on(async {
                ex.spawn(0, remote_round_trips(iters))
                    .unwrap()
                    .await
                    .unwrap()
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = micro::config();
    targets = yields, wake_remote
}
criterion_main!(benches);
