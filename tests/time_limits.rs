//! Time at the limits of a `u64` of nanoseconds: every legal clock value and
//! every forward jump of a monotonic clock, up to the end of its range,
//! leaves the executor working (no overflow panic in a debug build, no time
//! going back), with exact counters.
//!
//! Deterministic: the clock is a [`ManualClock`] (exact charging after every
//! poll) or the same clock behind [`NotCheap`] (the amortised charging of
//! the real clock), and it moves only inside the scripted polls.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tourbillon::clock::{Clock, ManualClock};
use tourbillon::stats::ExecutorStats;
use tourbillon::task::yield_now;
use tourbillon::{Builder, QueueSpec};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
/// The longest stall threshold the builder accepts: 1 hour.
const HOUR: u64 = 3_600_000_000_000;

/// A [`ManualClock`] that says it is not cheap, as the `SystemClock`: the
/// executor reads it every few polls and at every run end.
#[derive(Clone)]
struct NotCheap(ManualClock);

impl Clock for NotCheap {
    fn now_ns(&self) -> u64 {
        self.0.now()
    }
}

// ---------------------------------------------------------------------------
// 1. ManualClock::advance saturates at u64::MAX.

#[test]
fn advance_by_duration_max_gives_u64_max() {
    let clock = ManualClock::new();
    clock.advance(Duration::MAX);
    assert_eq!(clock.now(), u64::MAX);
    assert_eq!(clock.now_ns(), u64::MAX);
    // From a later start.
    let clock = ManualClock::new();
    clock.advance(Duration::from_millis(1));
    clock.advance(Duration::MAX);
    assert_eq!(clock.now(), u64::MAX);
}

#[test]
fn advance_wider_than_u64_is_not_truncated() {
    // 2^64 ns + 290 ms: taken modulo 2^64, it would be 290 ms.
    let d = Duration::from_nanos(u64::MAX) + Duration::from_nanos(1) + Duration::from_millis(290);
    assert_eq!(d.as_nanos(), (1u128 << 64) + 290 * MS as u128);
    let clock = ManualClock::new();
    clock.advance(d);
    assert_eq!(clock.now(), u64::MAX);
    // From a later start too.
    let clock = ManualClock::new();
    clock.set_ns(7 * MS);
    clock.advance(d);
    assert_eq!(clock.now(), u64::MAX);
}

#[test]
fn advance_past_the_end_saturates_and_never_goes_back() {
    let clock = ManualClock::new();
    let other = clock.clone();
    clock.set_ns(u64::MAX - 5 * MS - 1);
    let mut seen = Vec::new();
    for _ in 0..8 {
        clock.advance(Duration::from_millis(1));
        seen.push(other.now());
    }
    let expect: Vec<u64> = (1..=8)
        .map(|i| (u64::MAX - 5 * MS - 1).saturating_add(i * MS))
        .collect();
    assert_eq!(seen, expect);
    assert_eq!(seen[4], u64::MAX - 1);
    assert_eq!(seen[5..], [u64::MAX; 3]);
    // Saturated: any further advance, and a set_ns before it, change nothing.
    clock.advance(Duration::from_nanos(1));
    clock.advance(Duration::MAX);
    clock.set_ns(0);
    clock.set_ns(u64::MAX - 1);
    assert_eq!(other.now(), u64::MAX);
}

// ---------------------------------------------------------------------------
// 2. Forward jumps during a run.

/// What one scripted poll does to the clock.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `ManualClock::advance` by this many ns.
    Advance(u64),
    /// `ManualClock::advance` by a `Duration`.
    AdvanceBy(Duration),
    /// `ManualClock::set_ns` (a jump to this instant).
    SetNs(u64),
}

/// One task: its queue and the steps of its polls (then a last poll that
/// takes no time and ends it).
type Script = (usize, Vec<Step>);

/// What the scripts made the executor see, per queue.
#[derive(Default, Clone, Debug)]
struct Expect {
    tasks: u64,
    polls: u64,
    service: u64,
    stalls: u64,
}

/// Runs `scripts` on queues `specs` from clock time `start`, on the exact
/// clock (`cheap`) or in the amortised mode, with or without the latency
/// histograms and the stall detector (`observe`), and checks every counter
/// against what the scripts did: tasks completed, polls, service (the
/// clock moves only inside polls, so each queue is charged exactly the time
/// its polls took, and all of them together the whole elapsed time), stalls
/// and wake latencies. Returns the final stats.
fn run_scripts(
    specs: &[(u32, Duration)],
    start: u64,
    scripts: &[Script],
    cheap: bool,
    observe: bool,
) -> ExecutorStats {
    let clock = ManualClock::new();
    clock.set_ns(start);
    let mut b = if cheap {
        Builder::new().clock(clock.clone())
    } else {
        Builder::new().clock(NotCheap(clock.clone()))
    };
    for (q, &(shares, slice)) in specs.iter().enumerate() {
        b = b.queue_with(q, QueueSpec::new(shares).slice(slice));
    }
    let reported = Rc::new(RefCell::new(Vec::new()));
    if observe {
        let log = reported.clone();
        b = b
            .latency_histograms(true)
            .stall_detector(Duration::from_nanos(HOUR), move |s| {
                log.borrow_mut().push((s.queue_index, s.duration))
            });
    }
    let ex = b.build().unwrap();
    let expect = Rc::new(RefCell::new(vec![Expect::default(); specs.len()]));
    let mut handles = Vec::new();
    for (q, steps) in scripts.iter().cloned() {
        let (clock, expect) = (clock.clone(), expect.clone());
        expect.borrow_mut()[q].tasks += 1;
        let task = async move {
            for step in steps {
                let before = clock.now();
                match step {
                    Step::Advance(ns) => clock.advance(Duration::from_nanos(ns)),
                    Step::AdvanceBy(d) => clock.advance(d),
                    Step::SetNs(t) => clock.set_ns(t),
                }
                let after = clock.now();
                assert!(after >= before, "the clock went back: {before} -> {after}");
                {
                    let mut e = expect.borrow_mut();
                    e[q].polls += 1;
                    e[q].service += after - before;
                    e[q].stalls += u64::from(after - before >= HOUR);
                }
                yield_now().await;
            }
            expect.borrow_mut()[q].polls += 1;
            q
        };
        handles.push((q, ex.spawn(q, task).unwrap()));
    }
    ex.run_until_stalled();
    for (q, h) in &handles {
        assert!(h.is_finished(), "a task of queue {q} did not complete");
    }
    let outputs = ex.block_on(async move {
        let mut out = Vec::new();
        for (_, h) in handles {
            out.push(h.await.unwrap());
        }
        out
    });
    assert_eq!(outputs, scripts.iter().map(|s| s.0).collect::<Vec<_>>());

    let st = ex.stats();
    let expect = expect.borrow();
    let total_polls: u64 = expect.iter().map(|e| e.polls).sum();
    assert_eq!(st.polls, total_polls);
    assert_eq!(st.live_tasks, 0);
    let mut service = 0u128;
    for (q, (qs, e)) in st.queues.iter().zip(expect.iter()).enumerate() {
        assert_eq!(qs.spawned, e.tasks, "queue {q}");
        assert_eq!(qs.completed, e.tasks, "queue {q}");
        assert_eq!(qs.cancelled + qs.panicked, 0, "queue {q}");
        assert_eq!(qs.polls, e.polls, "queue {q}");
        assert_eq!(qs.service.as_nanos(), e.service as u128, "queue {q}");
        assert!(!qs.runnable && qs.runnable_tasks == 0, "queue {q}");
        // A queue leaves with its credit clamped to two requests (R7).
        let slice = specs[q].1.as_nanos() as i64;
        assert!(qs.lag_ns <= 2 * slice, "queue {q}: lag {} ns", qs.lag_ns);
        if observe {
            assert_eq!(qs.stalls, e.stalls, "queue {q}");
            assert_eq!(qs.wake_latency.count(), e.polls, "queue {q}");
        } else {
            assert_eq!(qs.stalls, 0);
            assert_eq!(qs.wake_latency.count(), 0);
        }
        service += qs.service.as_nanos();
    }
    assert_eq!(service, (clock.now() - start) as u128);
    let reported = reported.borrow();
    let stalls = if observe {
        expect.iter().map(|e| e.stalls).sum::<u64>()
    } else {
        0
    };
    assert_eq!(reported.len() as u64, stalls);
    assert!(reported
        .iter()
        .all(|&(q, d)| q < specs.len() && d >= Duration::from_nanos(HOUR)));
    st
}

/// Every combination of the exact and amortised clock, with and without the
/// observability's per-poll clock reads.
fn all_modes(specs: &[(u32, Duration)], start: u64, scripts: &[Script]) -> Vec<ExecutorStats> {
    let mut out = Vec::new();
    for cheap in [true, false] {
        for observe in [false, true] {
            out.push(run_scripts(specs, start, scripts, cheap, observe));
        }
    }
    out
}

/// `n` polls of `ns` each.
fn polls_of(n: usize, ns: u64) -> Vec<Step> {
    vec![Step::Advance(ns); n]
}

/// `steps` with `jump` inserted at position `at`.
fn with_jump(mut steps: Vec<Step>, at: usize, jump: Step) -> Vec<Step> {
    steps.insert(at, jump);
    steps
}

const HALF: u64 = u64::MAX / 2;
const SLICE: Duration = Duration::from_micros(250);

#[test]
fn a_jump_of_half_the_range_on_one_queue() {
    let specs = [(1, SLICE)];
    // The jump as the queue's first poll (no poll cost known yet), in the
    // middle of a run, and as two tasks' consecutive polls.
    for at in [0, 3] {
        let scripts = vec![(0, with_jump(polls_of(10, 10 * US), at, Step::Advance(HALF)))];
        for st in all_modes(&specs, 0, &scripts) {
            assert_eq!(st.queues[0].service.as_nanos(), (HALF + 100 * US) as u128);
        }
    }
    let scripts = vec![
        (0, vec![Step::Advance(HALF), Step::Advance(US)]),
        (0, vec![Step::Advance(HALF), Step::Advance(US)]),
    ];
    for st in all_modes(&specs, 0, &scripts) {
        // The two jumps end 1 ns short of the end of the range, where the
        // next poll takes the clock.
        assert_eq!(st.queues[0].service.as_nanos(), u64::MAX as u128);
    }
}

#[test]
fn a_jump_to_the_end_of_the_range_on_one_queue() {
    let specs = [(1, SLICE)];
    for at in [0, 3] {
        let scripts = vec![(
            0,
            with_jump(polls_of(10, 10 * US), at, Step::SetNs(u64::MAX - 20 * US)),
        )];
        for st in all_modes(&specs, 5 * MS, &scripts) {
            // The clock reaches u64::MAX after two of the 10 us polls and
            // stays there: the service is the whole range from the start.
            assert_eq!(st.queues[0].service.as_nanos(), (u64::MAX - 5 * MS) as u128);
        }
    }
    // A jump by more than the range left.
    let scripts = vec![(
        0,
        with_jump(polls_of(5, US), 2, Step::AdvanceBy(Duration::MAX)),
    )];
    for st in all_modes(&specs, 0, &scripts) {
        assert_eq!(st.queues[0].service.as_nanos(), u64::MAX as u128);
    }
}

#[test]
fn a_jump_of_half_the_range_with_two_queues() {
    for specs in [
        [(1, SLICE), (1, SLICE)],
        [
            (1, Duration::from_millis(5)),
            (8, Duration::from_micros(100)),
        ],
        [
            (tourbillon::config::MAX_SHARES, SLICE),
            (1, Duration::from_secs(1)),
        ],
    ] {
        for (jumper, at) in [(0, 0), (0, 4), (1, 0), (1, 4)] {
            let mut scripts: Vec<Script> =
                vec![(0, polls_of(12, 10 * US)), (1, polls_of(12, 10 * US))];
            scripts[jumper].1.insert(at, Step::Advance(HALF));
            for st in all_modes(&specs, 0, &scripts) {
                let total: u128 = st.queues.iter().map(|q| q.service.as_nanos()).sum();
                assert_eq!(total, (HALF + 240 * US) as u128);
            }
            // Both queues jump: together they reach the end of the range.
            scripts[1 - jumper].1.insert(at + 2, Step::Advance(HALF));
            for st in all_modes(&specs, 0, &scripts) {
                let total: u128 = st.queues.iter().map(|q| q.service.as_nanos()).sum();
                assert_eq!(total, u64::MAX as u128);
            }
        }
    }
}

#[test]
fn a_jump_to_the_end_of_the_range_with_two_queues() {
    for specs in [
        [(1, SLICE), (1, SLICE)],
        [
            (1, Duration::from_millis(5)),
            (8, Duration::from_micros(100)),
        ],
        [
            (tourbillon::config::MAX_SHARES, SLICE),
            (1, Duration::from_secs(1)),
        ],
    ] {
        for (jumper, at) in [(0, 0), (0, 4), (1, 0), (1, 4)] {
            let mut scripts: Vec<Script> =
                vec![(0, polls_of(12, 10 * US)), (1, polls_of(12, 10 * US))];
            scripts[jumper]
                .1
                .insert(at, Step::SetNs(u64::MAX - 30 * US));
            for st in all_modes(&specs, 0, &scripts) {
                let total: u128 = st.queues.iter().map(|q| q.service.as_nanos()).sum();
                assert_eq!(total, u64::MAX as u128);
            }
        }
    }
}

/// A queue that received a jump's worth of service and left while others
/// stay runnable owes it: its lag is a debt, however large (saturated at
/// `i64::MIN` ns when it does not fit), never turned into a credit.
#[test]
fn a_queue_that_jumped_leaves_with_a_debt() {
    for cheap in [true, false] {
        let clock = ManualClock::new();
        let mut b = if cheap {
            Builder::new().clock(clock.clone())
        } else {
            Builder::new().clock(NotCheap(clock.clone()))
        };
        for q in 0..3usize {
            b = b.queue(q, tourbillon::config::MAX_SHARES);
        }
        let ex = Rc::new(b.build().unwrap());
        // Queue 0 jumps to near the end of the range, then waits forever;
        // queues 1 and 2 look at its lag while they are still runnable.
        let c = clock.clone();
        let jumper = ex
            .spawn(0, async move {
                c.set_ns(u64::MAX - MS);
                std::future::pending::<()>().await
            })
            .unwrap();
        let lags = Rc::new(RefCell::new(Vec::new()));
        for q in 1..3usize {
            let (weak, lags, c) = (Rc::downgrade(&ex), lags.clone(), clock.clone());
            drop(
                ex.spawn(q, async move {
                    for _ in 0..3 {
                        let ex = weak.upgrade().unwrap();
                        lags.borrow_mut().push(ex.queue_stats(0).unwrap().lag_ns);
                        c.advance(Duration::from_micros(10));
                        yield_now().await;
                    }
                })
                .unwrap(),
            );
        }
        ex.run_until_stalled();
        assert!(!jumper.is_finished());
        let lags = lags.borrow();
        assert_eq!(lags.len(), 6);
        // About -(2/3)·(u64::MAX - 1 ms) ns at its departure: beyond i64.
        assert!(lags.iter().all(|&l| l == i64::MIN), "lags {lags:?}");
        assert_eq!(ex.queue_stats(0).unwrap().lag_ns, i64::MIN);
        let st = ex.stats();
        assert_eq!(st.queues[0].service.as_nanos(), (u64::MAX - MS) as u128);
        assert_eq!(st.queues[1].completed + st.queues[2].completed, 2);
        assert_eq!(clock.now(), u64::MAX - MS + 60 * US);
    }
}

/// A queue reweighted after a jump keeps its debt as a debt: from the
/// heaviest weight to a light one, the debt in virtual time grows by the
/// ratio of the weights, beyond what a vruntime can hold.
#[test]
fn reweighting_after_a_jump_keeps_the_debt() {
    for light in [1, 2, 3, 7] {
        let clock = ManualClock::new();
        let ex = Rc::new(
            Builder::new()
                .clock(clock.clone())
                .queue(0usize, tourbillon::config::MAX_SHARES)
                .queue(1, tourbillon::config::MAX_SHARES)
                .build()
                .unwrap(),
        );
        let c = clock.clone();
        // Queue 0 (picked first: a tie, to the lower index) jumps by half
        // the range and stays runnable behind queue 1.
        let jumper = ex
            .spawn(0, async move {
                c.advance(Duration::from_nanos(HALF));
                yield_now().await;
                c.advance(Duration::from_micros(10));
            })
            .unwrap();
        let seen = Rc::new(RefCell::new(Vec::new()));
        let (weak, s, c) = (Rc::downgrade(&ex), seen.clone(), clock.clone());
        let other = ex
            .spawn(1, async move {
                let ex = weak.upgrade().unwrap();
                s.borrow_mut().push(ex.queue_stats(0).unwrap().lag_ns);
                ex.set_shares(0, light).unwrap();
                s.borrow_mut().push(ex.queue_stats(0).unwrap().lag_ns);
                ex.set_shares(0, tourbillon::config::MAX_SHARES).unwrap();
                s.borrow_mut().push(ex.queue_stats(0).unwrap().lag_ns);
                c.advance(Duration::from_micros(10));
            })
            .unwrap();
        ex.run_until_stalled();
        assert!(jumper.is_finished() && other.is_finished());
        let seen = seen.borrow();
        // Before the reweighting: V is halfway between the two vruntimes,
        // `v_0 = ceil(HALF·1024/10000)` and 0, so the lag is
        // `-10000·ceil(v_0/2)/1024`, exactly.
        let v0 = (HALF as u128 * 1024).div_ceil(10_000) as i128;
        let lag = -(10_000 * (v0 - v0 / 2) / 1024);
        assert_eq!(seen[0] as i128, lag, "shares {light}");
        assert!(seen.iter().all(|&l| l < 0), "shares {light}: lags {seen:?}");
        let st = ex.stats();
        assert_eq!(st.queues[0].completed + st.queues[1].completed, 2);
        assert_eq!(st.queues[0].service.as_nanos(), (HALF + 10 * US) as u128);
        assert_eq!(clock.now(), HALF + 20 * US);
    }
}

// ---------------------------------------------------------------------------
// 3. A clock near the end of its range when a second queue wakes and may
// preempt.

/// A one-shot signal: the waiting task is woken by `fire`.
#[derive(Default)]
struct Signal {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Signal {
    fn fire(&self) {
        self.fired.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    fn wait(self: &Rc<Self>) -> impl Future<Output = ()> {
        let s = self.clone();
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            if s.fired.get() {
                Poll::Ready(())
            } else {
                *s.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}

/// Queue 0 (1 share, 5 ms slice) runs `a_polls` polls of `cost`; at its
/// fourth poll it wakes the task of queue 1 (`b_shares`, `b_slice`), which
/// then runs 5 polls of `cost`. The clock starts at `start`. Checks that
/// both tasks complete and the counters, and returns the order of the polls
/// from the wake on (the queue of each) and the final clock.
fn wake_near_the_end(
    start: u64,
    cost: u64,
    a_polls: usize,
    b_shares: u32,
    b_slice: Duration,
    min_run: Duration,
    cheap: bool,
) -> (Vec<usize>, u64) {
    let clock = ManualClock::new();
    clock.set_ns(start);
    let b = if cheap {
        Builder::new().clock(clock.clone())
    } else {
        Builder::new().clock(NotCheap(clock.clone()))
    };
    let ex = b
        .queue_with(0usize, QueueSpec::new(1).slice(Duration::from_millis(5)))
        .queue_with(1, QueueSpec::new(b_shares).slice(b_slice))
        .preemption(true)
        .min_run(min_run)
        // Neither the host-yield interval nor the poll budget ends a run.
        .host_yield_interval(Duration::from_secs(1))
        .max_polls_per_turn(100_000)
        .build()
        .unwrap();
    let signal = Rc::new(Signal::default());
    let order = Rc::new(RefCell::new(Vec::new()));
    let (s, o, c) = (signal.clone(), order.clone(), clock.clone());
    let waiter = ex
        .spawn(1, async move {
            s.wait().await;
            for _ in 0..5 {
                o.borrow_mut().push(1);
                c.advance(Duration::from_nanos(cost));
                yield_now().await;
            }
        })
        .unwrap();
    let (s, o, c) = (signal.clone(), order.clone(), clock.clone());
    let worker = ex
        .spawn(0, async move {
            for i in 0..a_polls {
                if i == 3 {
                    s.fire();
                }
                if i >= 3 {
                    o.borrow_mut().push(0);
                }
                c.advance(Duration::from_nanos(cost));
                yield_now().await;
            }
        })
        .unwrap();
    ex.run_until_stalled();
    assert!(waiter.is_finished() && worker.is_finished());
    let st = ex.stats();
    assert_eq!(st.queues[0].completed, 1);
    assert_eq!(st.queues[1].completed, 1);
    assert_eq!(st.queues[0].polls, a_polls as u64 + 1);
    assert_eq!(st.queues[1].polls, 7);
    assert_eq!(st.live_tasks, 0);
    let total: u128 = st.queues.iter().map(|q| q.service.as_nanos()).sum();
    assert_eq!(total, (clock.now() - start) as u128);
    let order = order.borrow().clone();
    (order, clock.now())
}

/// min_run protects queue 0's run past the end of the clock's range: the
/// preemption is due at `u64::MAX`, and happens once the clock is there.
#[test]
fn a_protected_run_near_the_end_of_the_range_is_preempted_at_its_end() {
    let start = u64::MAX - MS;
    for cheap in [true, false] {
        // 200 polls of 10 us: the clock reaches u64::MAX at the 100th.
        let (order, end) = wake_near_the_end(
            start,
            10 * US,
            200,
            8,
            Duration::from_millis(10),
            Duration::from_millis(5),
            cheap,
        );
        assert_eq!(end, u64::MAX);
        // Polls 3..=99 of queue 0 run before the clock is at its end (97
        // polls), then queue 1 preempts and runs to completion. Amortised,
        // the checkpoint falls at the same poll: the countdown set at the
        // wake counts the polls left until the preemption is due.
        let mut expect = vec![0; 97];
        expect.extend([1; 5]);
        expect.extend([0; 100]);
        assert_eq!(order, expect, "cheap: {cheap}");
    }
}

/// The same with a run that ends before the clock does: no preemption was
/// due within the range, queue 1 runs after queue 0.
#[test]
fn a_protected_run_near_the_end_of_the_range_ends_first() {
    for cheap in [true, false] {
        let (order, end) = wake_near_the_end(
            u64::MAX - MS,
            10 * US,
            20,
            8,
            Duration::from_millis(10),
            Duration::from_millis(5),
            cheap,
        );
        assert_eq!(end, u64::MAX - MS + 250 * US);
        let mut expect = vec![0; 17];
        expect.extend([1; 5]);
        assert_eq!(order, expect);
    }
}

/// A waking queue with a shorter slice preempts at once, at the end of the
/// range as anywhere else.
#[test]
fn an_immediate_preemption_near_the_end_of_the_range() {
    for cheap in [true, false] {
        let (order, end) = wake_near_the_end(
            u64::MAX - 50 * US,
            10 * US,
            20,
            8,
            Duration::from_micros(100),
            Duration::from_millis(1),
            cheap,
        );
        assert_eq!(end, u64::MAX);
        assert_eq!(order.len(), 22);
        assert_eq!(order[..6], [0, 1, 1, 1, 1, 1]);
    }
}

/// Default min_run (100 us) and a clock 50 us from its end.
#[test]
fn default_min_run_near_the_end_of_the_range() {
    for cheap in [true, false] {
        let clock = ManualClock::new();
        clock.set_ns(u64::MAX - 50 * US);
        let b = if cheap {
            Builder::new().clock(clock.clone())
        } else {
            Builder::new().clock(NotCheap(clock.clone()))
        };
        let ex = b
            .queue(0usize, 1)
            .queue_with(1, QueueSpec::new(4).slice(SLICE))
            .build()
            .unwrap();
        let signal = Rc::new(Signal::default());
        let s = signal.clone();
        let waiter = ex.spawn(1, async move { s.wait().await }).unwrap();
        let c = clock.clone();
        let worker = ex
            .spawn(0, async move {
                for i in 0..30 {
                    if i == 2 {
                        signal.fire();
                    }
                    c.advance(Duration::from_micros(5));
                    yield_now().await;
                }
            })
            .unwrap();
        ex.run_until_stalled();
        assert!(waiter.is_finished() && worker.is_finished());
        assert_eq!(clock.now(), u64::MAX);
        let st = ex.stats();
        assert_eq!(st.queues[0].polls, 31);
        assert_eq!(st.queues[1].polls, 2);
        assert_eq!(st.queues[0].service.as_nanos(), 50 * US as u128);
    }
}
