//! Property test of random API sequences over four queues (FIFO, two
//! `Las`, and a custom FIFO or LIFO; optionally the custom one on queue 0
//! too): spawns by every path (executor, spawner, queue handle, task
//! builder, free `spawn`, remote spawner from this thread or another),
//! gate wakes from this thread and from other threads, aborts, detaches,
//! handle polls and awaits (outside the executor, in `block_on`, from
//! another task), bounded runs, reweights, and the executor's drop; under
//! both panic policies, with injected panics (futures, outputs and panic
//! payloads whose destructors panic, join handle wakers whose `wake`
//! panics, a clock and custom schedulers that panic at chosen calls). The
//! interpreter and the invariants are in `api_model/mod.rs` (shared with
//! the `api_ops` fuzz target).
//!
//! 64 cases by default; `PROPTEST_CASES=n` changes it (e.g. fewer under
//! valgrind, more for a soak).

mod api_model;

use api_model::{
    run_case, Config, Faults, Op, Step, GATES, MAX_STEPS, QUEUES, SCHED_METHODS, VIAS,
};
use proptest::prelude::*;
use tourbillon::config::PanicPolicy;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Yield),
        1 => Just(Step::YieldMaybe),
        4 => (0..GATES as u8).prop_map(Step::Wait),
        1 => (0..GATES as u8).prop_map(Step::Open),
        2 => (1u16..60).prop_map(Step::Work),
        1 => Just(Step::SpawnChild),
        1 => (0..QUEUES as u8, 1u8..=100).prop_map(|(q, s)| Step::Reweight(q, s)),
    ]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(step(), 0..=MAX_STEPS)
}

/// Mostly none; else any combination of the three task faults.
fn faults() -> impl Strategy<Value = Faults> {
    prop_oneof![
        5 => Just(Faults::NONE),
        1 => (1u8..8).prop_map(Faults::from_bits),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            proptest::sample::select(VIAS.to_vec()),
            // QUEUES is an undeclared queue (1 in 16).
            prop_oneof![15 => 0u8..QUEUES as u8, 1 => Just(QUEUES as u8)],
            0u8..4,
            steps(),
            proptest::bool::weighted(0.15),
            proptest::bool::weighted(0.7),
            faults(),
        )
            .prop_map(|(via, queue, group, steps, panic, keep, faults)| Op::Spawn {
                via,
                queue,
                group,
                steps,
                panic,
                keep,
                faults,
            }),
        2 => (
            prop_oneof![15 => 0u8..QUEUES as u8, 1 => Just(QUEUES as u8)],
            proptest::option::of(0u8..4),
            steps(),
            proptest::bool::weighted(0.15),
            any::<bool>(),
            faults(),
        )
            .prop_map(|(queue, group, steps, panic, from_thread, faults)| Op::RemoteSpawn {
                queue,
                group,
                steps,
                panic,
                from_thread,
                faults,
            }),
        4 => (0..GATES as u8, any::<bool>())
            .prop_map(|(gate, from_thread)| Op::Open { gate, from_thread }),
        2 => (any::<u8>(), any::<bool>())
            .prop_map(|(handle, from_thread)| Op::Abort { handle, from_thread }),
        1 => any::<u8>().prop_map(|handle| Op::DropHandle { handle }),
        2 => any::<u8>().prop_map(|handle| Op::Poll { handle }),
        1 => any::<u8>().prop_map(|handle| Op::PollWaker { handle }),
        1 => any::<u8>().prop_map(|handle| Op::AwaitTurn { handle }),
        1 => (any::<u8>(), 0..QUEUES as u8).prop_map(|(handle, queue)| Op::Join { handle, queue }),
        3 => Just(Op::Run),
        2 => (1u8..4).prop_map(Op::Turns),
        1 => (
            0..QUEUES as u8,
            prop_oneof![
                8 => 1u32..=100,
                1 => Just(0u32),
                1 => Just(tourbillon::config::MAX_SHARES + 1),
            ],
        )
            .prop_map(|(queue, shares)| Op::SetShares { queue, shares }),
        1 => (1u16..200).prop_map(Op::Advance),
        1 => (1u8..40).prop_map(Op::ArmClock),
        1 => (proptest::sample::select(SCHED_METHODS.to_vec()), 1u8..12)
            .prop_map(|(method, n)| Op::ArmScheduler { method, n }),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        [1u32..=100, 1u32..=100, 1u32..=100, 1u32..=100],
        1u32..8,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        proptest::bool::weighted(0.75),
        prop_oneof![Just(PanicPolicy::Catch), Just(PanicPolicy::Propagate)],
        any::<bool>(),
        proptest::bool::weighted(0.25),
    )
        .prop_map(
            |(
                shares,
                max_polls,
                preemption,
                general_pick,
                latency,
                stall_detector,
                drain,
                policy,
                custom_lifo,
                custom_on_0,
            )| {
                Config {
                    shares,
                    max_polls,
                    preemption,
                    general_pick,
                    latency,
                    stall_detector,
                    drain,
                    policy,
                    custom_lifo,
                    custom_on_0,
                }
            },
        )
}

/// 64 cases unless `PROPTEST_CASES` says otherwise.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_api_sequences_keep_the_invariants(
        cfg in config(),
        ops in proptest::collection::vec(op(), 1..48),
    ) {
        let violations = run_case(&cfg, &ops);
        prop_assert!(violations.is_empty(), "{:#?}", violations);
    }
}

/// A fixed sequence through every op kind and every fault, so that a run
/// with few cases still covers each path once; under both policies, with
/// and without the drain, with the custom scheduler as a FIFO and as a
/// LIFO, on queue 3 and on queue 0 too.
#[test]
fn every_op_kind_once() {
    use api_model::{SchedMethod, Via};
    let script = vec![Step::Yield, Step::Wait(0), Step::SpawnChild, Step::Work(30)];
    let fault = |b: u8| Faults::from_bits(b);
    let mut ops = vec![Op::ArmScheduler {
        method: SchedMethod::Push,
        n: 2,
    }];
    for (i, via) in VIAS.iter().enumerate() {
        ops.push(Op::Spawn {
            via: *via,
            queue: (i % QUEUES) as u8,
            group: i as u8,
            steps: script.clone(),
            panic: i == 3 || i == 6,
            keep: i % 4 != 1,
            // Futures (2, 5), outputs (1, 7) and payloads (6) that panic in
            // their destructors, kept and detached.
            faults: fault(match i {
                2 | 5 => 1,
                1 | 7 => 2,
                6 => 4,
                _ => 0,
            }),
        });
    }
    ops.extend([
        // A rejected spawn (its future's fault is cleared: see
        // `api_model::rejectable`).
        Op::Spawn {
            via: Via::ExecutorSpawn,
            queue: QUEUES as u8,
            group: 0,
            steps: vec![],
            panic: false,
            keep: true,
            faults: fault(1),
        },
        Op::RemoteSpawn {
            queue: 1,
            group: Some(2),
            steps: vec![Step::Wait(1), Step::Reweight(2, 9)],
            panic: false,
            from_thread: true,
            faults: fault(3),
        },
        Op::RemoteSpawn {
            queue: 2,
            group: None,
            steps: vec![Step::Open(0)],
            panic: true,
            from_thread: false,
            faults: fault(4),
        },
        Op::RemoteSpawn {
            queue: 0,
            group: None,
            steps: vec![],
            panic: false,
            from_thread: false,
            faults: Faults::NONE,
        },
        // Rejected on another thread.
        Op::RemoteSpawn {
            queue: QUEUES as u8,
            group: None,
            steps: vec![],
            panic: false,
            from_thread: true,
            faults: fault(1),
        },
        // A remote spawn aborted before it started (its future's
        // destructor panics, so does its handle's waker).
        Op::RemoteSpawn {
            queue: 3,
            group: None,
            steps: vec![],
            panic: false,
            from_thread: true,
            faults: fault(1),
        },
        // Handle 10 is the last remote spawn's (7 local handles kept, then
        // 4 remote spawns accepted).
        Op::PollWaker { handle: 10 },
        Op::Abort {
            handle: 10,
            from_thread: true,
        },
        Op::ArmClock(3),
        Op::ArmScheduler {
            method: SchedMethod::Pop,
            n: 1,
        },
        Op::Turns(2),
        Op::Open {
            gate: 0,
            from_thread: true,
        },
        Op::PollWaker { handle: 0 },
        Op::ArmScheduler {
            method: SchedMethod::Polled,
            n: 1,
        },
        Op::ArmScheduler {
            method: SchedMethod::Len,
            n: 3,
        },
        Op::Join {
            handle: 3,
            queue: 2,
        },
        Op::Poll { handle: 0 },
        Op::AwaitTurn { handle: 1 },
        // An idle task whose future panics in its destructor, aborted.
        Op::Abort {
            handle: 2,
            from_thread: false,
        },
        Op::ArmScheduler {
            method: SchedMethod::Forget,
            n: 1,
        },
        Op::ArmScheduler {
            method: SchedMethod::GroupEnded,
            n: 1,
        },
        Op::DropHandle { handle: 4 },
        Op::SetShares {
            queue: 1,
            shares: 0,
        },
        Op::SetShares {
            queue: 2,
            shares: 77,
        },
        Op::Advance(150),
        Op::Run,
        Op::Open {
            gate: 1,
            from_thread: false,
        },
        Op::Run,
    ]);
    for policy in [PanicPolicy::Catch, PanicPolicy::Propagate] {
        for drain in [true, false] {
            for (custom_lifo, custom_on_0) in [(false, false), (true, true)] {
                let cfg = Config {
                    drain,
                    policy,
                    custom_lifo,
                    custom_on_0,
                    ..Config::default()
                };
                let violations = run_case(&cfg, &ops);
                assert!(violations.is_empty(), "{cfg:?}: {violations:#?}");
            }
        }
    }
}
