//! Per-queue schedulers: `RunnableFifo` against `Las` (`Las::new()`, keys
//! quantized to levels, and `Las::exact()`, a heap), through the executor
//! and by calling their `Scheduler` methods directly (tourbillon only).
//!
//! Why: the scheduler is called on every wake (`push`) and every poll
//! (`pop`, `polled`); `Las` also makes the executor read the clock once
//! per poll (`wants_timing`). The executor series give the whole price of
//! choosing `Las` for a queue; the direct series isolate the data
//! structures' part of it.
//!
//! Group `sched_executor` (throughput per poll): a one-queue executor with
//! each scheduler; `T` tasks (64 or 4,096), every task its own group, each
//! yielding `iters` times. Timing: the executor is built once per
//! benchmark; each sample enters `block_on` once (`iter_custom`), spawns
//! the tasks and times from after the spawns to the last join.
//!
//! Group `sched_direct` (throughput per task id pushed and popped): the
//! scheduler values are driven directly through the public `Scheduler`
//! trait. `TaskKey` and `GroupId` have no public constructor, so real keys
//! are collected first (untimed, once) by a recording scheduler of a
//! throwaway executor that `N` tasks are spawned on (slab indices
//! `0..N`, each task its own group).
//! * `push_pop/N`: push `N` ids, then pop them all;
//! * `cycle/N`: `N` ids queued; one iteration pops one, reports a poll of
//!   it (`polled`, with durations of 50 to 170 us, so that `Las` keys
//!   spread over several levels) and pushes it back: the steady state of a
//!   queue of `N` yielding tasks.
//!
//! A fresh scheduler is built for each sample (and, for `cycle`, filled),
//! untimed (`iter_custom`); the timed part is the loop of `iters`
//! operations. `N` in 64 and 4,096. Not pinned to a CPU.

mod micro;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tourbillon::sched::{Las, RunnableFifo, Scheduler};
use tourbillon::task::{GroupId, TaskKey};
use tourbillon::QueueSpec;

const TASKS: [u64; 2] = [64, 4096];

#[derive(Clone, Copy)]
enum Kind {
    Fifo,
    Las,
    LasExact,
}

const KINDS: [(Kind, &str); 3] = [
    (Kind::Fifo, "RunnableFifo"),
    (Kind::Las, "Las::new"),
    (Kind::LasExact, "Las::exact"),
];

fn executor(kind: Kind) -> tourbillon::Executor<u8> {
    let spec = QueueSpec::new(1);
    let spec = match kind {
        Kind::Fifo => spec.scheduler(RunnableFifo::new()),
        Kind::Las => spec.scheduler(Las::new()),
        Kind::LasExact => spec.scheduler(Las::exact()),
    };
    tourbillon::Builder::new()
        .queue_with(0, spec)
        .build()
        .unwrap()
}

fn sched_executor(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched_executor");
    for (kind, name) in KINDS {
        let ex = executor(kind);
        for t in TASKS {
            g.throughput(Throughput::Elements(t));
            g.bench_with_input(BenchmarkId::new(name, t), &t, |b, &t| {
                // One queue: every task on queue 0.
                b.iter_custom(|iters| micro::yield_round(&ex, t, iters))
            });
        }
    }
    g.finish();
}

/// A FIFO that records every id pushed to it.
struct Recorder {
    seen: Rc<RefCell<Vec<(TaskKey, GroupId)>>>,
    queue: VecDeque<TaskKey>,
}

impl Scheduler for Recorder {
    fn push(&mut self, task: TaskKey, group: GroupId) {
        self.seen.borrow_mut().push((task, group));
        self.queue.push_back(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        self.queue.pop_front()
    }
    fn len(&self) -> usize {
        self.queue.len()
    }
}

/// `n` real (task, own group) id pairs, of `n` tasks alive at once.
fn ids(n: u64) -> Vec<(TaskKey, GroupId)> {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let recorder = Recorder {
        seen: seen.clone(),
        queue: VecDeque::new(),
    };
    let ex = tourbillon::Builder::new()
        .queue_with(0u8, QueueSpec::new(1).scheduler(recorder))
        .build()
        .unwrap();
    let hs: Vec<_> = (0..n)
        .map(|_| ex.spawn(0, std::future::pending::<()>()).unwrap())
        .collect();
    ex.run_until_stalled();
    drop(hs);
    drop(ex);
    let ids = seen.borrow().clone();
    assert_eq!(ids.len() as u64, n, "one push per spawned task");
    ids
}

/// A new scheduler of kind `kind`.
fn fresh(kind: Kind) -> Sched {
    match kind {
        Kind::Fifo => Sched::Fifo(RunnableFifo::new()),
        Kind::Las => Sched::Las(Las::new()),
        Kind::LasExact => Sched::Las(Las::exact()),
    }
}

/// The scheduler under test, by value (static dispatch, as the executor
/// calls the built-ins).
enum Sched {
    Fifo(RunnableFifo),
    Las(Las),
}

/// `iters` times: push every id, then pop them all.
fn push_pop<S: Scheduler>(mut s: S, ids: &[(TaskKey, GroupId)], iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        for &(t, g) in ids {
            s.push(t, g);
        }
        while let Some(t) = s.pop() {
            black_box(t);
        }
    }
    start.elapsed()
}

/// Every id queued (untimed), then `iters` times: pop, `polled`, push.
fn cycle<S: Scheduler>(mut s: S, ids: &[(TaskKey, GroupId)], iters: u64) -> Duration {
    // Groups by task slab index (the ids are of slab indices 0..n).
    let mut groups = vec![None; ids.len()];
    for &(t, g) in ids {
        groups[t.index() as usize] = Some(g);
        s.push(t, g);
    }
    let timed = s.wants_timing();
    let start = Instant::now();
    for k in 0..iters {
        let t = s.pop().unwrap();
        let g = groups[t.index() as usize].unwrap();
        let elapsed = timed.then(|| Duration::from_micros(50 + (k % 7) * 20));
        s.polled(t, g, elapsed, false);
        s.push(t, g);
    }
    start.elapsed()
}

fn sched_direct(c: &mut Criterion) {
    let mut g = c.benchmark_group("sched_direct");
    for n in TASKS {
        let ids = ids(n);
        for (kind, name) in KINDS {
            g.throughput(Throughput::Elements(n));
            g.bench_with_input(
                BenchmarkId::new(format!("push_pop/{name}"), n),
                &n,
                |b, _| {
                    b.iter_custom(|iters| match fresh(kind) {
                        Sched::Fifo(s) => push_pop(s, &ids, iters),
                        Sched::Las(s) => push_pop(s, &ids, iters),
                    })
                },
            );
            g.throughput(Throughput::Elements(1));
            g.bench_with_input(BenchmarkId::new(format!("cycle/{name}"), n), &n, |b, _| {
                b.iter_custom(|iters| match fresh(kind) {
                    Sched::Fifo(s) => cycle(s, &ids, iters),
                    Sched::Las(s) => cycle(s, &ids, iters),
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = micro::config();
    targets = sched_executor, sched_direct
}
criterion_main!(benches);
