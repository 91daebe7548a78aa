//! Ping-pong: two tasks pass a message back and forth through
//! runtime-agnostic channels; tourbillon against tokio.
//!
//! Why: the most common local wake in a server is not a yield but one task
//! waking another (a request handed to a worker, a reply handed back). Each
//! message here finds its receiver parked, so every message is one wake of
//! another task, one switch and one poll; nothing else runs. The channels
//! are `futures::channel::mpsc::channel(1)` (one each way), the same code
//! for both systems, so the difference is the executor's wake-and-switch.
//!
//! Group `pingpong` (throughput per round trip: two messages, two wakes):
//! * `tokio`: `current_thread` runtime (no drivers) + `LocalSet`, both
//!   tasks `spawn_local`;
//! * `tourbillon`: standalone `block_on`, both tasks on one `RunnableFifo`
//!   queue;
//! * `tourbillon_2_queues`: ping on queue 0 (1 share), pong on queue 1
//!   (2 shares): every wake makes the other queue runnable, so each
//!   message also goes through the choice between queues (EEVDF), and
//!   through wake-up preemption when it applies.
//!
//! Timing: runtimes and executors are built once per benchmark; each sample
//! enters `block_on` once (`iter_custom`) and spawns the two tasks; the
//! ping task times its own loop of `iters` round trips with `Instant`,
//! after one untimed round trip, so spawning and task exit are left out.
//! Not pinned to a CPU.

mod micro;

use std::future::Future;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};

/// The two tasks: the ping side (returns the time of `iters` round trips)
/// and the pong side (echoes until the ping side hangs up).
fn pair(iters: u64) -> (impl Future<Output = Duration>, impl Future<Output = ()>) {
    let (mut to_pong, mut from_ping) = mpsc::channel::<u64>(1);
    let (mut to_ping, mut from_pong) = mpsc::channel::<u64>(1);
    let ping = async move {
        to_pong.send(0).await.unwrap();
        black_box(from_pong.next().await.unwrap());
        let start = Instant::now();
        for i in 0..iters {
            to_pong.send(i).await.unwrap();
            black_box(from_pong.next().await.unwrap());
        }
        start.elapsed()
    };
    let pong = async move {
        while let Some(i) = from_ping.next().await {
            if to_ping.send(i).await.is_err() {
                break;
            }
        }
    };
    (ping, pong)
}

fn pingpong(c: &mut Criterion) {
    let mut g = c.benchmark_group("pingpong");
    g.throughput(Throughput::Elements(1));
    let (rt, local) = micro::tokio_local();
    let one = micro::tourbillon(1);
    let two = micro::tourbillon(2);
    g.bench_function("tokio", |b| {
        b.iter_custom(|iters| {
            local.block_on(&rt, async {
                let (ping, pong) = pair(iters);
                let pong = tokio::task::spawn_local(pong);
                let d = tokio::task::spawn_local(ping).await.unwrap();
                pong.await.unwrap();
                d
            })
        })
    });
    g.bench_function("tourbillon", |b| {
        b.iter_custom(|iters| {
            one.block_on(async {
                let (ping, pong) = pair(iters);
                let pong = one.spawn(0, pong).unwrap();
                let d = one.spawn(0, ping).unwrap().await.unwrap();
                pong.await.unwrap();
                d
            })
        })
    });
    g.bench_function("tourbillon_2_queues", |b| {
        b.iter_custom(|iters| {
            two.block_on(async {
                let (ping, pong) = pair(iters);
                let pong = two.spawn(1, pong).unwrap();
                let d = two.spawn(0, ping).unwrap().await.unwrap();
                pong.await.unwrap();
                d
            })
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = micro::config();
    targets = pingpong
}
criterion_main!(benches);
