//! Helpers shared by the criterion microbenchmarks (`spawn`, `wake`, `join`,
//! `pingpong`, `queues`, `schedulers`): a module of each of those bench
//! binaries, not a bench itself. Each binary uses a subset.
#![allow(dead_code)]

use std::time::Duration;

use criterion::Criterion;

/// The criterion configuration of every microbenchmark: 1 s of warm-up and
/// 3 s of measurement (criterion's defaults are 3 s and 5 s), so that a full
/// `cargo bench` of all the groups stays within minutes. Command-line flags
/// (`--quick`, `--sample-size`, `--measurement-time`, a filter, ...) still
/// apply on top: `criterion_group!` calls `configure_from_args` after this.
/// In `--quick` mode criterion stops a benchmark once two consecutive
/// doublings agree within 5%, after at least 100 ms and at most the
/// measurement time (3 s).
pub fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

/// A tokio `current_thread` runtime without I/O or timer driver (as
/// `benches/overhead.rs` builds it) and a `LocalSet` to `spawn_local` on.
pub fn tokio_local() -> (tokio::runtime::Runtime, tokio::task::LocalSet) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    (rt, tokio::task::LocalSet::new())
}

/// A tourbillon executor with `queues` `RunnableFifo` queues keyed `0..queues`
/// with shares 1, 2, 3, ... (queue `q` has `q + 1` shares), other options
/// at their defaults.
pub fn tourbillon(queues: u8) -> tourbillon::Executor<u8> {
    let mut b = tourbillon::Builder::new();
    for q in 0..queues {
        b = b.queue(q, q as u32 + 1);
    }
    b.build().unwrap()
}

/// `tasks` tasks spread over the queues of `ex` (task `i` on queue
/// `i % queues`), each yielding `iters` times: the time from after the
/// spawns to the last join.
pub fn yield_round(ex: &tourbillon::Executor<u8>, tasks: u64, iters: u64) -> std::time::Duration {
    ex.block_on(async {
        let queues = ex.queue_keys().len() as u64;
        let hs: Vec<_> = (0..tasks)
            .map(|i| {
                ex.spawn((i % queues) as u8, async move {
                    for _ in 0..iters {
                        tourbillon::task::yield_now().await;
                    }
                })
                .unwrap()
            })
            .collect();
        let start = std::time::Instant::now();
        for h in hs {
            h.await.unwrap();
        }
        start.elapsed()
    })
}
