//! Property test of random API sequences over three queues (FIFO and two
//! `Las`): spawns by every path (executor, spawner, queue handle, task
//! builder, free `spawn`, remote spawner from this thread or another),
//! gate wakes from this thread and from other threads, aborts, detaches,
//! handle polls and awaits (outside the executor, in `block_on`, from
//! another task), bounded runs, reweights, and the executor's drop. The
//! interpreter and the invariants are in `api_model/mod.rs` (shared with
//! the `api_ops` fuzz target).
//!
//! 64 cases by default; `PROPTEST_CASES=n` changes it (e.g. fewer under
//! valgrind, more for a soak).

mod api_model;

use api_model::{run_case, Config, Op, Step, GATES, MAX_STEPS, QUEUES, VIAS};
use proptest::prelude::*;

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

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            proptest::sample::select(VIAS.to_vec()),
            // 3 is an undeclared queue (1 in 16).
            prop_oneof![15 => 0u8..QUEUES as u8, 1 => Just(QUEUES as u8)],
            0u8..4,
            steps(),
            proptest::bool::weighted(0.15),
            proptest::bool::weighted(0.7),
        )
            .prop_map(|(via, queue, group, steps, panic, keep)| Op::Spawn {
                via,
                queue,
                group,
                steps,
                panic,
                keep,
            }),
        2 => (
            prop_oneof![15 => 0u8..QUEUES as u8, 1 => Just(QUEUES as u8)],
            proptest::option::of(0u8..4),
            steps(),
            proptest::bool::weighted(0.15),
            any::<bool>(),
        )
            .prop_map(|(queue, group, steps, panic, from_thread)| Op::RemoteSpawn {
                queue,
                group,
                steps,
                panic,
                from_thread,
            }),
        4 => (0..GATES as u8, any::<bool>())
            .prop_map(|(gate, from_thread)| Op::Open { gate, from_thread }),
        2 => (any::<u8>(), any::<bool>())
            .prop_map(|(handle, from_thread)| Op::Abort { handle, from_thread }),
        1 => any::<u8>().prop_map(|handle| Op::DropHandle { handle }),
        2 => any::<u8>().prop_map(|handle| Op::Poll { handle }),
        1 => any::<u8>().prop_map(|handle| Op::AwaitTurn { handle }),
        1 => (any::<u8>(), 0..QUEUES as u8).prop_map(|(handle, queue)| Op::Join { handle, queue }),
        3 => Just(Op::Run),
        2 => (1u8..4).prop_map(Op::Turns),
        1 => (
            0..QUEUES as u8,
            prop_oneof![
                8 => 1u32..=100,
                1 => Just(0u32),
                1 => Just(tourbillon::MAX_SHARES + 1),
            ],
        )
            .prop_map(|(queue, shares)| Op::SetShares { queue, shares }),
        1 => (1u16..200).prop_map(Op::Advance),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        [1u32..=100, 1u32..=100, 1u32..=100],
        1u32..8,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        proptest::bool::weighted(0.75),
    )
        .prop_map(
            |(shares, max_polls, preemption, general_pick, latency, stall_detector, drain)| {
                Config {
                    shares,
                    max_polls,
                    preemption,
                    general_pick,
                    latency,
                    stall_detector,
                    drain,
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

/// A fixed sequence through every op kind, so that a run with few cases
/// still covers each path once.
#[test]
fn every_op_kind_once() {
    use api_model::Via;
    let script = vec![Step::Yield, Step::Wait(0), Step::SpawnChild, Step::Work(30)];
    let mut ops = Vec::new();
    for (i, via) in VIAS.iter().enumerate() {
        ops.push(Op::Spawn {
            via: *via,
            queue: (i % QUEUES) as u8,
            group: i as u8,
            steps: script.clone(),
            panic: i == 3,
            keep: i % 4 != 1,
        });
    }
    ops.extend([
        Op::Spawn {
            via: Via::ExecutorSpawn,
            queue: QUEUES as u8,
            group: 0,
            steps: vec![],
            panic: false,
            keep: true,
        },
        Op::RemoteSpawn {
            queue: 1,
            group: Some(2),
            steps: vec![Step::Wait(1), Step::Reweight(2, 9)],
            panic: false,
            from_thread: true,
        },
        Op::RemoteSpawn {
            queue: 2,
            group: None,
            steps: vec![Step::Open(0)],
            panic: true,
            from_thread: false,
        },
        Op::RemoteSpawn {
            queue: 0,
            group: None,
            steps: vec![],
            panic: false,
            from_thread: false,
        },
        Op::Abort {
            handle: 255,
            from_thread: true,
        },
        Op::Turns(2),
        Op::Open {
            gate: 0,
            from_thread: true,
        },
        Op::Join {
            handle: 3,
            queue: 2,
        },
        Op::Poll { handle: 0 },
        Op::AwaitTurn { handle: 1 },
        Op::Abort {
            handle: 2,
            from_thread: false,
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
    for drain in [true, false] {
        let cfg = Config {
            drain,
            ..Config::default()
        };
        let violations = run_case(&cfg, &ops);
        assert!(violations.is_empty(), "{violations:#?}");
    }
}
