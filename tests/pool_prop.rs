//! Property test of random pool sequences: one to three cores with queue
//! sets of their own, submissions by every form to cores and queues that
//! may not exist, gates opened and tasks aborted from the test thread,
//! shares and statistics taken across cores, and a shutdown at a random
//! point; tasks may panic, and their futures may panic in their
//! destructors. The interpreter and the invariants (every accepted
//! submission ends once and is either run or counted as cancelled by the
//! shutdown report, exactly per core and queue; merged statistics equal
//! the sum by queue name) are in `pool_model/mod.rs`, shared with the
//! `pool_ops` fuzz target.
//!
//! 64 cases by default; `PROPTEST_CASES=n` changes it.

mod pool_model;

use pool_model::{run_case, Config, Op, Task, GATES, KEYS, MAX_CORES, MAX_YIELDS, VIAS};
use proptest::prelude::*;

fn task() -> impl Strategy<Value = Task> {
    (
        0..=MAX_YIELDS,
        proptest::option::weighted(0.4, 0..GATES as u8),
        proptest::bool::weighted(0.15),
        proptest::bool::weighted(0.15),
    )
        .prop_map(|(yields, gate, panic, drop_panics)| Task {
            yields,
            gate,
            panic,
            drop_panics,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (
            proptest::sample::select(VIAS.to_vec()),
            // MAX_CORES is never a core (1 in 8).
            prop_oneof![7 => 0..MAX_CORES as u8, 1 => Just(MAX_CORES as u8)],
            0..KEYS.len() as u8,
            task(),
        )
            .prop_map(|(via, core, key, task)| Op::Submit { via, core, key, task }),
        3 => (0..GATES as u8).prop_map(Op::Open),
        1 => (0..MAX_CORES as u8).prop_map(Op::Hold),
        1 => Just(Op::Release),
        2 => any::<u8>().prop_map(Op::Abort),
        1 => (
            0..=MAX_CORES as u8,
            0..KEYS.len() as u8,
            prop_oneof![8 => 1u32..=100, 1 => Just(0u32), 1 => Just(u32::MAX)],
        )
            .prop_map(|(core, key, shares)| Op::SetShares { core, key, shares }),
        2 => Just(Op::Stats),
        1 => any::<bool>().prop_map(|graceful| Op::Shutdown { graceful }),
    ]
}

fn config() -> impl Strategy<Value = Config> {
    (
        proptest::collection::vec(
            proptest::collection::vec(0..KEYS.len() as u8, 1..=KEYS.len()),
            1..=MAX_CORES,
        ),
        prop_oneof![1 => 1u8..4, 3 => Just(64u8)],
    )
        .prop_map(|(queue_sets, capacity)| Config {
            queue_sets,
            capacity,
        })
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
    fn random_pool_sequences_keep_the_invariants(
        cfg in config(),
        ops in proptest::collection::vec(op(), 1..40),
    ) {
        let violations = run_case(&cfg, &ops);
        prop_assert!(violations.is_empty(), "{:#?}", violations);
    }
}

/// The reviewer's case, fixed: the first core held by tasks waiting on a
/// gate, cores with different queue sets, submissions queued behind the
/// cross-core queue's room, and a zero-grace shutdown; then the same with
/// the gates opened and a graceful shutdown.
#[test]
fn a_fixed_sequence_through_every_op_kind() {
    let cfg = Config {
        queue_sets: vec![vec![0], vec![1, 0], vec![2, 1]],
        capacity: 64,
    };
    let waiting = Task {
        yields: 1,
        gate: Some(0),
        panic: false,
        drop_panics: false,
    };
    for graceful in [false, true] {
        let mut ops = vec![Op::Hold(2)];
        for i in 0..40u8 {
            ops.push(Op::Submit {
                via: VIAS[i as usize % VIAS.len()],
                core: i % 4,
                key: i % 3,
                task: Task {
                    yields: i % 3,
                    gate: (i % 2 == 0).then_some(i % 2),
                    panic: i % 7 == 3,
                    drop_panics: i % 5 == 4,
                },
            });
        }
        ops.push(Op::Submit {
            via: VIAS[0],
            core: 0,
            key: 0,
            task: waiting,
        });
        ops.push(Op::Stats);
        ops.push(Op::Abort(3));
        ops.push(Op::SetShares {
            core: 1,
            key: 1,
            shares: 7,
        });
        ops.push(Op::SetShares {
            core: 0,
            key: 2,
            shares: 7,
        });
        ops.push(Op::Release);
        ops.push(Op::Hold(1));
        ops.push(Op::Open(1));
        ops.push(Op::Stats);
        ops.push(Op::Shutdown { graceful });
        let violations = run_case(&cfg, &ops);
        assert!(violations.is_empty(), "{violations:#?}");
    }
}
