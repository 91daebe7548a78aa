//! The reference model of the L6 replay in `tests/las.rs`: one executor
//! thread on a virtual clock, with no scheduling cost, serving a scripted
//! open-loop workload under an ideal policy. It shares no code with the
//! executor: an event heap of arrivals and wake-ups and one simple queue per
//! policy.
//!
//! * Workload ([`generate`]): Poisson arrivals at the rate that gives load
//!   `rho`; each task is thin with probability `thin_frac`, else fat, and
//!   has `k` polls (CPU segments, `k` uniform in the thin or fat range),
//!   each costing a uniform draw from the CPU range and followed, unless it
//!   is the last, by a sleep drawn from the I/O range (0: the task yields).
//!   Drawn in float microseconds from a seeded SplitMix64 and rounded to
//!   integer nanoseconds, so that the simulation is exact integer
//!   arithmetic.
//! * Simulation ([`simulate`]): the thread pushes every arrival and wake-up
//!   due at or before the current instant (in `(due, sequence)` order:
//!   arrivals are numbered by task, before every wake-up, and wake-ups in
//!   the order they are set), pops one task by the policy, and runs its next
//!   poll: the clock advances by the poll's cost, which the task's attained
//!   service is charged. A task that is not done is then due again after its
//!   sleep (a yield is a wake-up due at once, after the events already due).
//!   When nothing is runnable the clock jumps to the next event.
//! * Policies ([`Policy`]): FIFO (runnable order), exact LAS (least attained
//!   service first, ties in push order), and QLAS (attained service in
//!   levels: 0 below `q0`, then `1 + floor(log2(a / q0))`, capped at
//!   `levels - 1`; lowest level first, FIFO within a level), optionally
//!   with a starvation guard: a level head that has waited longer than
//!   `max_wait` since its push is served before any other, oldest first.
//!
//! Completion time of a task: the end of its last poll.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// One scripted task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    /// Arrival instant, ns.
    pub arrival: u64,
    /// Drawn from the thin class (else fat).
    pub thin: bool,
    /// (CPU cost, sleep after) per poll, ns; the last sleep is unused.
    pub segs: Vec<(u64, u64)>,
}

/// The shape of a workload.
pub struct Shape {
    pub name: &'static str,
    /// Probability that a task is thin.
    pub thin_frac: f64,
    /// Polls per thin task, inclusive range.
    pub thin_k: (u64, u64),
    /// Polls per fat task, inclusive range.
    pub fat_k: (u64, u64),
    /// CPU cost of one poll, us (uniform).
    pub cpu_us: (f64, f64),
    /// Sleep after a non-final poll, us (uniform; 0 is a yield).
    pub io_us: (f64, f64),
}

/// The workloads A, C, D and B-io.
pub const SHAPES: [Shape; 4] = [
    // High-variance mix: where LAS helps thin tasks.
    Shape {
        name: "A",
        thin_frac: 0.90,
        thin_k: (1, 3),
        fat_k: (20, 40),
        cpu_us: (50.0, 150.0),
        io_us: (0.0, 0.0),
    },
    // Equal polls: LAS keys tie constantly.
    Shape {
        name: "C",
        thin_frac: 0.99,
        thin_k: (1, 1),
        fat_k: (100, 100),
        cpu_us: (10.0, 10.0),
        io_us: (0.0, 0.0),
    },
    // Sleeps between polls.
    Shape {
        name: "D",
        thin_frac: 0.95,
        thin_k: (1, 1),
        fat_k: (50, 50),
        cpu_us: (20.0, 80.0),
        io_us: (50.0, 200.0),
    },
    // Low variance with I/O: where LAS is worse for thin tasks.
    Shape {
        name: "B-io",
        thin_frac: 0.99,
        thin_k: (1, 4),
        fat_k: (5, 9),
        cpu_us: (100.0, 500.0),
        io_us: (100.0, 1000.0),
    },
];

/// The shape named `name` (one of [`SHAPES`]).
pub fn shape(name: &str) -> &'static Shape {
    SHAPES
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no workload {name:?} (A, C, D, B-io)"))
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi]` (a point range gives its point).
    fn uniform(&mut self, (lo, hi): (f64, f64)) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform integer in `[lo, hi]`.
    fn int(&mut self, (lo, hi): (u64, u64)) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Exponential with rate `rate` (inverse CDF).
    fn exp(&mut self, rate: f64) -> f64 {
        -(1.0 - self.unit()).ln() / rate
    }
}

/// `n` tasks of `shape` at load `rho` (mean CPU demand per unit of time),
/// drawn from `seed`.
pub fn generate(shape: &Shape, rho: f64, n: usize, seed: u64) -> Vec<Task> {
    let mid = |(lo, hi): (u64, u64)| (lo + hi) as f64 / 2.0;
    let mean_k = shape.thin_frac * mid(shape.thin_k) + (1.0 - shape.thin_frac) * mid(shape.fat_k);
    let mean_cpu_us = (shape.cpu_us.0 + shape.cpu_us.1) / 2.0;
    let rate_per_us = rho / (mean_k * mean_cpu_us);
    let ns = |us: f64| (us * 1000.0).round() as u64;
    let mut rng = Rng(seed);
    let mut t_us = 0.0;
    (0..n)
        .map(|_| {
            t_us += rng.exp(rate_per_us);
            let thin = rng.unit() < shape.thin_frac;
            let k = rng.int(if thin { shape.thin_k } else { shape.fat_k });
            let segs = (0..k)
                .map(|_| {
                    let cpu = rng.uniform(shape.cpu_us);
                    let io = rng.uniform(shape.io_us);
                    (ns(cpu), ns(io))
                })
                .collect();
            Task {
                arrival: ns(t_us),
                thin,
                segs,
            }
        })
        .collect()
}

/// When the starvation guard's clock starts for a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stamp {
    /// At the instant the task is pushed; among overdue heads with equal
    /// stamps, the lowest level's is served.
    Push,
    /// As the executor's `Las` stamps: a task that became runnable during
    /// another task's poll (an arrival or a wake-up due in `(start, end]`
    /// of the poll) is stamped with the poll's start, since `Las` measures
    /// waiting in the queue's service time and charges the running poll
    /// only when it returns; every other push (a task requeued after its own
    /// poll, a push while the thread is idle) is stamped with the current
    /// instant. Among overdue heads with equal stamps, the one pushed first
    /// is served. (With one queue the queue is busy throughout any wait, so
    /// its service time advances like the clock.)
    PollStart,
}

/// The starvation guard of QLAS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    /// A level head waiting longer than this (ns) is overdue.
    pub max_wait: u64,
    pub stamp: Stamp,
}

/// A scheduling policy of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Runnable order.
    Fifo,
    /// Least attained service first, ties in push order.
    Las,
    /// Levels of attained service (see the module's doc), ns.
    Qlas {
        q0: u64,
        levels: usize,
        guard: Option<Guard>,
    },
}

/// The QLAS level of attained service `a`.
pub fn level(a: u64, q0: u64, levels: usize) -> usize {
    if a < q0 {
        0
    } else {
        (1 + (a / q0).ilog2() as usize).min(levels - 1)
    }
}

/// A runnable task as a QLAS level holds it.
struct Queued {
    task: usize,
    /// Start of its wait, for the guard.
    stamp: u64,
    /// Push number.
    order: u64,
}

/// The runnable tasks, by policy.
enum Runnable {
    Fifo(VecDeque<usize>),
    /// `(attained service, push number, task)`.
    Las(BinaryHeap<Reverse<(u64, u64, usize)>>),
    Qlas {
        q0: u64,
        guard: Option<Guard>,
        levels: Vec<VecDeque<Queued>>,
    },
}

impl Runnable {
    fn new(policy: Policy) -> Self {
        match policy {
            Policy::Fifo => Runnable::Fifo(VecDeque::new()),
            Policy::Las => Runnable::Las(BinaryHeap::new()),
            Policy::Qlas { q0, levels, guard } => Runnable::Qlas {
                q0,
                guard,
                levels: (0..levels).map(|_| VecDeque::new()).collect(),
            },
        }
    }

    fn push(&mut self, task: usize, attained: u64, stamp: u64, order: u64) {
        match self {
            Runnable::Fifo(q) => q.push_back(task),
            Runnable::Las(h) => h.push(Reverse((attained, order, task))),
            Runnable::Qlas { q0, levels, .. } => {
                let l = level(attained, *q0, levels.len());
                levels[l].push_back(Queued { task, stamp, order });
            }
        }
    }

    fn pop(&mut self, now: u64) -> Option<usize> {
        match self {
            Runnable::Fifo(q) => q.pop_front(),
            Runnable::Las(h) => h.pop().map(|Reverse((_, _, j))| j),
            Runnable::Qlas { guard, levels, .. } => {
                if let Some(g) = guard {
                    // The overdue head that has waited longest; ties by
                    // level (`min_by_key` keeps the first) or push order.
                    let overdue = levels
                        .iter()
                        .enumerate()
                        .filter_map(|(l, q)| q.front().map(|h| (l, h)))
                        .filter(|(_, h)| now - h.stamp > g.max_wait)
                        .min_by_key(|(_, h)| match g.stamp {
                            Stamp::Push => (h.stamp, 0),
                            Stamp::PollStart => (h.stamp, h.order),
                        });
                    if let Some((l, _)) = overdue {
                        return levels[l].pop_front().map(|q| q.task);
                    }
                }
                levels
                    .iter_mut()
                    .find_map(|q| q.pop_front())
                    .map(|q| q.task)
            }
        }
    }
}

/// Runs `tasks` under `policy`: the completion time of every task, ns.
pub fn simulate(tasks: &[Task], policy: Policy) -> Vec<u64> {
    let n = tasks.len();
    // Arrivals and wake-ups: `(due, sequence, task)`.
    let mut events: BinaryHeap<Reverse<(u64, u64, usize)>> = tasks
        .iter()
        .enumerate()
        .map(|(j, t)| Reverse((t.arrival, j as u64, j)))
        .collect();
    let mut seq = n as u64;
    let mut attained = vec![0u64; n];
    let mut next_poll = vec![0usize; n];
    let mut done = vec![u64::MAX; n];
    let mut runnable = Runnable::new(policy);
    let mut pushes = 0u64;
    let poll_start_stamps = matches!(
        policy,
        Policy::Qlas {
            guard: Some(Guard {
                stamp: Stamp::PollStart,
                ..
            }),
            ..
        }
    );
    let mut now = 0u64;
    // Start and task of the poll that ended at `now`, if one did.
    let mut last_poll: Option<(u64, usize)> = None;
    loop {
        while let Some(&Reverse((due, _, j))) = events.peek() {
            if due > now {
                break;
            }
            events.pop();
            let stamp = match last_poll {
                Some((start, polled)) if poll_start_stamps && due > start && j != polled => start,
                _ => now,
            };
            runnable.push(j, attained[j], stamp, pushes);
            pushes += 1;
        }
        let Some(j) = runnable.pop(now) else {
            match events.peek() {
                Some(&Reverse((due, _, _))) => {
                    now = due;
                    last_poll = None;
                    continue;
                }
                None => break,
            }
        };
        let (cost, sleep) = tasks[j].segs[next_poll[j]];
        last_poll = Some((now, j));
        now += cost;
        attained[j] += cost;
        next_poll[j] += 1;
        if next_poll[j] == tasks[j].segs.len() {
            done[j] = now;
        } else {
            events.push(Reverse((now + sleep, seq, j)));
            seq += 1;
        }
    }
    assert!(
        done.iter().all(|&d| d != u64::MAX),
        "a task never completed"
    );
    done
}
