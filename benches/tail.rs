//! Tail latency under open-loop load on the real clock: `RunnableFifo`
//! against `Las`, with tokio's `LocalSet` as the reference.
//!
//! # Workloads
//!
//! The workloads are those of `tests/lasmodel`, the reference model of the
//! L6 test in `tests/las.rs`, which this bench includes by path: its shapes
//! (docs/design.md, L6 and L7) and its generator (`lasmodel::generate`).
//! Poisson arrivals at the rate that gives load `rho`; each task is `k` CPU
//! segments (one poll each) of busy-spinning on `Instant` for the scripted
//! time; between two segments it either yields (`yield_now().await`,
//! workloads without I/O) or sleeps for the scripted time (B-io, D). A
//! task completes at the end of its last segment; latency = completion -
//! scripted arrival.
//!
//! * `A`: 90% thin tasks of 1-3 segments, 10% fat of 20-40; 50-150 us per
//!   segment; no sleep (a high-variance mix: where LAS should help);
//! * `B-io`: clockworker's `tail` shape: 99% thin of 1-4 segments, 1% fat of
//!   5-9; 100-500 us CPU then 100-1000 us sleep per segment (low variance:
//!   where the model says LAS is *worse* for thin tasks);
//! * `C`, `D` (not run by default; `--case C:0.8:50000`).
//!
//! Default cases: A at rho 0.8 (20,000 tasks), B-io at 0.62 and at 0.85
//! (8,000 tasks each); about 90 s in all. Each case is one script, drawn by
//! `lasmodel::generate` (seeded SplitMix64, `--seed`, default 7; times
//! rounded to integer ns) and shifted 2 ms later so that the first arrival
//! is not already late; it is replayed on every system one after the other
//! in one process pinned to CPU 1 (`taskset`, as `overhead` does).
//!
//! Systems: `tourbillon RunnableFifo` and `tourbillon Las` (one queue,
//! standalone `block_on`, every task its own group), `tokio LocalSet`
//! (`current_thread` runtime, `spawn_local`, `tokio::task::yield_now`),
//! `tourbillon Las::new()` (the default `Las`, keys quantized to levels:
//! `Las::quantized(100 us, 16)`), `tourbillon Las::exact()`, and optionally
//! `tourbillon Las+guard` (`--guard-ms N`: `Las::max_wait`).
//! Above them, three rows `model FIFO`, `model QLAS` (100 us, 16 levels, as
//! `Las::new()`) and `model LAS` (exact) replay the *same script* in virtual
//! time with no overhead (`lasmodel::simulate`), to show how close each
//! executor comes to its ideal policy.
//!
//! # Arrivals and timers: why a spin-checked "pump"
//!
//! The arrival generator is the main future of each system (polled while
//! the executor is idle, spinning: it re-wakes itself). But a main future
//! is polled only between turns (tokio's `LocalSet`: every 61 polls, i.e.
//! up to ~6 ms here; tourbillon: every 61 polls or 200 us), which would
//! batch arrivals differently per system. So the generator's step, `pump`,
//! is also called by every task at the end of each CPU segment, like an
//! interrupt that becomes visible at the next poll boundary: every system
//! sees arrivals and timer expiries with the same precision (one segment,
//! the granularity at which a cooperative executor can act anyway), in the
//! same order as the model (events merged by time, spawned or woken before
//! the task that just ran yields). The spawn delay (spawn instant - scripted
//! arrival) is reported (`spawn late p99 / max`), and it counts in the
//! latency.
//!
//! Reading the tokio row: tokio's `yield_now` defers the yielding task's
//! wake to the end of the `LocalSet` tick (up to 61 polls), while tasks
//! spawned meanwhile are queued at once; so newcomers pass tasks that
//! yielded, a mild bias towards new (thin) tasks that FIFO does not have.
//!
//! Sleeps use the same pump (a binary heap of deadlines, fired in deadline
//! order) rather than `tokio::time::sleep`: tokio's timer wheel has 1 ms
//! resolution, which would round the scripted 100-1000 us sleeps up to
//! 1-2 ms and change the workload; and its expiries would again be seen at
//! each system's own driver cadence.
//!
//! Usage: `cargo bench --bench tail [-- --case NAME:RHO:N ... --seed S
//! --scale F --guard-ms M --quantized --no-pin --quick]`. Without
//! `--bench`, which `cargo bench` passes (`cargo test --all-targets` runs it
//! without), a smoke pass: every case scaled to 1% of its tasks.

mod common;
// The workloads and the reference model of the L6 test; the bench uses a
// part of it.
#[allow(dead_code)]
#[path = "../tests/lasmodel/mod.rs"]
mod lasmodel;

use common::pct;
use lasmodel::{Policy, Shape, Task};

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- script --

/// Start of the script on the real clock: every arrival is shifted this
/// much later than `lasmodel::generate` draws it, so that the first one is
/// not already late when the system starts.
const START_NS: u64 = 2_000_000;

/// The QLAS of the model as the executor's default `Las::new()`:
/// `Las::quantized(100 us, 16)`.
const Q0_NS: u64 = 100_000;
const LEVELS: usize = 16;

struct Case {
    shape: &'static Shape,
    rho: f64,
    tasks: Vec<Task>,
}

impl Case {
    /// `n` tasks of `shape` at load `rho` from `seed`, drawn by
    /// `lasmodel::generate` and shifted by [`START_NS`].
    fn generate(shape: &'static Shape, rho: f64, n: usize, seed: u64) -> Case {
        let mut tasks = lasmodel::generate(shape, rho, n, seed);
        for t in &mut tasks {
            t.arrival += START_NS;
        }
        Case { shape, rho, tasks }
    }

    fn offered_per_s(&self) -> f64 {
        let span = self.tasks.last().unwrap().arrival - self.tasks[0].arrival;
        (self.tasks.len() - 1) as f64 / (span as f64 / 1e9)
    }
}

// ------------------------------------------------------------------- run --

/// One replay of a script on one system: the shared state of the generator,
/// the timer heap and the tasks.
struct Run {
    script: Rc<Case>,
    t0: Instant,
    /// Next arrival to spawn.
    next: Cell<usize>,
    /// Sleeping tasks: (deadline ns, task), earliest first.
    timers: RefCell<BinaryHeap<Reverse<(u64, usize)>>>,
    /// The waker of each sleeping task; `None` once its timer fired.
    wakers: RefCell<Vec<Option<Waker>>>,
    /// Spawns task `j` on the system under test.
    spawn: Box<dyn Fn(Rc<Run>, usize)>,
    spawned: RefCell<Vec<u64>>,
    done: RefCell<Vec<u64>>,
    completed: Cell<usize>,
}

impl Run {
    fn new(script: Rc<Case>, spawn: Box<dyn Fn(Rc<Run>, usize)>) -> Rc<Run> {
        let n = script.tasks.len();
        Rc::new(Run {
            script,
            t0: Instant::now(),
            next: Cell::new(0),
            timers: RefCell::new(BinaryHeap::new()),
            wakers: RefCell::new((0..n).map(|_| None).collect()),
            spawn,
            spawned: RefCell::new(vec![0; n]),
            done: RefCell::new(vec![0; n]),
            completed: Cell::new(0),
        })
    }

    fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.t0).as_nanos() as u64
    }

    /// Spawns the arrivals and fires the timers due at `now`, merged in time
    /// order (arrivals first on a tie), as the model does.
    fn pump(self: &Rc<Self>, now: Instant) {
        let now = self.ns(now);
        let tasks = &self.script.tasks;
        loop {
            let j = self.next.get();
            let arrival = tasks.get(j).map(|t| t.arrival).filter(|&t| t <= now);
            let timer = self
                .timers
                .borrow()
                .peek()
                .map(|&Reverse(e)| e)
                .filter(|&(d, _)| d <= now);
            match (arrival, timer) {
                (Some(a), t) if t.is_none_or(|(d, _)| a <= d) => {
                    self.next.set(j + 1);
                    self.spawned.borrow_mut()[j] = now;
                    (self.spawn)(self.clone(), j);
                }
                (_, Some((_, k))) => {
                    self.timers.borrow_mut().pop();
                    let w = self.wakers.borrow_mut()[k].take();
                    if let Some(w) = w {
                        w.wake();
                    }
                }
                (None, None) => break,
                (Some(_), None) => unreachable!("handled by the first arm"),
            }
        }
    }

    fn finished(&self) -> bool {
        self.completed.get() == self.script.tasks.len()
    }

    /// The generator: pumps, spinning (it re-wakes itself), until every task
    /// has completed.
    async fn generate(self: Rc<Self>) {
        poll_fn(|cx| {
            self.pump(Instant::now());
            if self.finished() {
                Poll::Ready(())
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await
    }
}

/// Sleeps until `deadline` (ns after `t0`), woken by `Run::pump`.
struct Sleep<'a> {
    run: &'a Run,
    task: usize,
    deadline: u64,
    armed: bool,
}

impl Future for Sleep<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let run = self.run;
        let mut wakers = run.wakers.borrow_mut();
        if !self.armed {
            wakers[self.task] = Some(cx.waker().clone());
            run.timers
                .borrow_mut()
                .push(Reverse((self.deadline, self.task)));
            self.armed = true;
            return Poll::Pending;
        }
        match &mut wakers[self.task] {
            None => Poll::Ready(()),
            Some(w) => {
                w.clone_from(cx.waker());
                Poll::Pending
            }
        }
    }
}

/// Busy-spins `ns` from now; returns the instant it ended.
fn spin(ns: u64) -> Instant {
    common::spin(Duration::from_nanos(ns))
}

/// Task `j` of the script: its segments, with the system's `yield_now`.
async fn task<Y, F>(run: Rc<Run>, j: usize, yield_now: Y)
where
    Y: Fn() -> F,
    F: Future<Output = ()>,
{
    let segs = &run.script.tasks[j].segs;
    for (s, &(cpu, io)) in segs.iter().enumerate() {
        let end = spin(cpu);
        if s + 1 == segs.len() {
            run.done.borrow_mut()[j] = run.ns(end);
            run.completed.set(run.completed.get() + 1);
            run.pump(end);
            return;
        }
        run.pump(end);
        if io > 0 {
            Sleep {
                run: &run,
                task: j,
                deadline: run.ns(end) + io,
                armed: false,
            }
            .await;
        } else {
            yield_now().await;
        }
    }
}

// --------------------------------------------------------------- systems --

#[derive(Clone, Copy)]
enum System {
    Fifo,
    Las,
    LasGuard(Duration),
    LasQuantized,
    Tokio,
}

impl System {
    fn name(self) -> String {
        match self {
            System::Fifo => "tourbillon RunnableFifo".into(),
            System::Las => "tourbillon Las::exact()".into(),
            System::LasGuard(d) => format!("tourbillon Las+guard {} ms", d.as_millis()),
            System::LasQuantized => "tourbillon Las::new() (quantized)".into(),
            System::Tokio => "tokio LocalSet".into(),
        }
    }

    /// Replays `case` on this system; returns (spawned, done) ns per task.
    fn replay(self, case: &Rc<Case>) -> (Vec<u64>, Vec<u64>) {
        let run = match self {
            System::Tokio => {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let local = tokio::task::LocalSet::new();
                let run = Run::new(
                    case.clone(),
                    Box::new(|run, j| {
                        drop(tokio::task::spawn_local(task(
                            run,
                            j,
                            tokio::task::yield_now,
                        )))
                    }),
                );
                local.block_on(&rt, run.clone().generate());
                run
            }
            _ => {
                let spec = tourbillon::QueueSpec::new(1);
                let spec = match self {
                    System::Las => spec.scheduler(tourbillon::sched::Las::exact()),
                    System::LasGuard(d) => {
                        spec.scheduler(tourbillon::sched::Las::new().max_wait(d))
                    }
                    System::LasQuantized => {
                        // The default `Las::new()` is `Las::quantized(100 us, 16)`.
                        debug_assert_eq!((Q0_NS, LEVELS), (100_000, 16));
                        spec.scheduler(tourbillon::sched::Las::new())
                    }
                    _ => spec,
                };
                let ex = tourbillon::Builder::new()
                    .queue_with((), spec)
                    .build()
                    .unwrap();
                let q = ex.queue(()).unwrap();
                let run = Run::new(
                    case.clone(),
                    Box::new(move |run, j| {
                        drop(q.spawn(task(run, j, tourbillon::task::yield_now)).unwrap())
                    }),
                );
                ex.block_on(run.clone().generate());
                drop(ex);
                run
            }
        };
        let spawned = run.spawned.take();
        let done = run.done.take();
        (spawned, done)
    }
}

// ---------------------------------------------------------------- report --

/// The model's percentile: sorted, index round(p (n - 1)).
struct Row {
    name: String,
    thin: Vec<u64>,
    fat: Vec<u64>,
    late: Option<Vec<u64>>,
    per_s: f64,
}

impl Row {
    fn new(name: String, case: &Case, done: &[u64], spawned: Option<&[u64]>) -> Row {
        let (mut thin, mut fat) = (Vec::new(), Vec::new());
        for (t, &d) in case.tasks.iter().zip(done) {
            let lat = d - t.arrival;
            if t.thin {
                thin.push(lat)
            } else {
                fat.push(lat)
            }
        }
        thin.sort_unstable();
        fat.sort_unstable();
        let late = spawned.map(|s| {
            let mut v: Vec<u64> = case
                .tasks
                .iter()
                .zip(s)
                .map(|(t, &s)| s.saturating_sub(t.arrival))
                .collect();
            v.sort_unstable();
            v
        });
        let end = *done.iter().max().unwrap();
        let per_s = case.tasks.len() as f64 / ((end - case.tasks[0].arrival) as f64 / 1e9);
        Row {
            name,
            thin,
            fat,
            late,
            per_s,
        }
    }

    fn print(&self) {
        let us = |v: u64| format!("{:.0}", v as f64 / 1e3);
        let q = |v: &[u64]| {
            [50.0, 90.0, 99.0, 99.9]
                .iter()
                .map(|&p| us(pct(v, p)))
                .collect::<Vec<_>>()
                .join(" / ")
        };
        let late = match &self.late {
            Some(l) => format!("{} / {}", us(pct(l, 99.0)), us(*l.last().unwrap())),
            None => "-".into(),
        };
        println!(
            "| {} | {} | {} | {} | {:.0} | {} |",
            self.name,
            q(&self.thin),
            q(&self.fat),
            us(*self.fat.last().unwrap()),
            self.per_s,
            late
        );
    }

    fn p99_thin(&self) -> u64 {
        pct(&self.thin, 99.0)
    }
    fn p99_fat(&self) -> u64 {
        pct(&self.fat, 99.0)
    }
}

fn run_case(case: Rc<Case>, systems: &[System]) {
    let (n, thin) = (
        case.tasks.len(),
        case.tasks.iter().filter(|t| t.thin).count(),
    );
    let cpu: u64 = case.tasks.iter().flat_map(|t| &t.segs).map(|s| s.0).sum();
    println!();
    println!(
        "### {} rho={}: {} tasks ({} thin, {} fat), offered {:.0} tasks/s, {:.2} s of CPU",
        case.shape.name,
        case.rho,
        n,
        thin,
        n - thin,
        case.offered_per_s(),
        cpu as f64 / 1e9
    );
    println!();
    println!(
        "| system | thin p50 / p90 / p99 / p99.9 us | fat p50 / p90 / p99 / p99.9 us | fat max us | tasks/s | spawn late p99 / max us |"
    );
    println!("|---|---|---|---|---|---|");
    let m = |name: &str, p| {
        let done = lasmodel::simulate(&case.tasks, p);
        Row::new(name.into(), &case, &done, None)
    };
    let mfifo = m("model FIFO (same script)", Policy::Fifo);
    let mlas = m("model LAS (same script)", Policy::Las);
    let qlas = Policy::Qlas {
        q0: Q0_NS,
        levels: LEVELS,
        guard: None,
    };
    let mqlas = m("model QLAS (same script)", qlas);
    mfifo.print();
    mqlas.print();
    mlas.print();
    let mut rows = Vec::new();
    for &s in systems {
        let (spawned, done) = s.replay(&case);
        let row = Row::new(s.name(), &case, &done, Some(&spawned));
        row.print();
        rows.push(row);
    }
    let ratio = |a: &Row, b: &Row, f: fn(&Row) -> u64| f(a) as f64 / f(b) as f64;
    // rows: [0] FIFO, [1] Las::new() (quantized), [2] Las::exact(), [3] tokio.
    println!();
    println!(
        "{} rho={}: thin p99 Las / FIFO = {:.3} (model QLAS {:.3}); Las::exact = {:.3} (model LAS {:.3}); fat p99 Las / FIFO = {:.3} (model {:.3}); thin p99 tokio / FIFO = {:.3}",
        case.shape.name,
        case.rho,
        ratio(&rows[1], &rows[0], Row::p99_thin),
        ratio(&mqlas, &mfifo, Row::p99_thin),
        ratio(&rows[2], &rows[0], Row::p99_thin),
        ratio(&mlas, &mfifo, Row::p99_thin),
        ratio(&rows[1], &rows[0], Row::p99_fat),
        ratio(&mqlas, &mfifo, Row::p99_fat),
        ratio(&rows[3], &rows[0], Row::p99_thin),
    );
}

fn main() {
    let args = common::Args::from_env();
    let seed = args.parsed("--seed").unwrap_or(7u64);
    // `--quick` (e.g. `cargo bench -- --quick`, criterion's flag): every
    // case scaled to 15% of its tasks; a smoke pass (no `--bench`): to 1%;
    // unless `--scale` is given. Other flags (criterion's) are ignored.
    let quick = args.flag("--quick");
    let scale = args.parsed("--scale").unwrap_or(if args.smoke() {
        0.01
    } else if quick {
        0.15
    } else {
        1.0f64
    });
    let mut cases: Vec<(String, f64, usize)> = args
        .all()
        .windows(2)
        .filter(|w| w[0] == "--case")
        .map(|w| {
            let parts: Vec<&str> = w[1].split(':').collect();
            assert!(parts.len() == 3, "--case NAME:RHO:TASKS, e.g. A:0.8:20000");
            (
                parts[0].to_string(),
                parts[1].parse().expect("RHO"),
                parts[2].parse().expect("TASKS"),
            )
        })
        .collect();
    if cases.is_empty() {
        cases = vec![
            ("A".into(), 0.8, 20_000),
            ("B-io".into(), 0.62, 8_000),
            ("B-io".into(), 0.85, 8_000),
        ];
    }
    let mut systems = vec![
        System::Fifo,
        System::LasQuantized,
        System::Las,
        System::Tokio,
    ];
    if let Some(ms) = args.parsed("--guard-ms") {
        systems.push(System::LasGuard(Duration::from_millis(ms)));
    }
    if args.flag("--quantized") {
        // Kept for compatibility: the default `Las` (quantized) always runs.
    }
    if !args.flag("--no-pin") {
        common::pin_to_cpu1();
    }
    println!(
        "open-loop arrivals on the real clock; latency = completion - scripted arrival; seed {seed}; \
         percentiles of the sorted latencies at index round(p (n-1))"
    );
    // Untimed warm-up of every system (allocator, page faults, code).
    let warm = Rc::new(Case::generate(lasmodel::shape("A"), 0.8, 300, seed ^ 1));
    for &s in &systems {
        s.replay(&warm);
    }
    for (name, rho, n) in cases {
        let shape = lasmodel::shape(&name);
        let n = ((n as f64 * scale) as usize).max(10);
        run_case(Rc::new(Case::generate(shape, rho, n, seed)), &systems);
    }
}
