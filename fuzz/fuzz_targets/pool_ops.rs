//! Fuzz target: the fuzz input is decoded into a pool configuration (one
//! to three cores, each with its own set of queues, and the capacity of
//! the cores' cross-core queues) and a sequence of pool operations
//! (submissions by every form, gates opened and tasks aborted from the
//! fuzzer's thread, shares, statistics, a shutdown at a chosen point),
//! with injected faults (tasks that panic, futures whose destructors
//! panic), run by the same interpreter as `tests/pool_prop.rs`
//! (`tests/pool_model/mod.rs`), with the same invariants; a violation
//! panics (a crash for libFuzzer), as does any panic out of the pool that
//! the model did not inject. ASan (cargo-fuzz's default) checks the memory
//! accesses of the unsafe code on the cores' threads on the way.
//!
//! Run: `cargo +nightly fuzz run pool_ops -- -max_total_time=60`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/pool_model/mod.rs"]
mod pool_model;

use pool_model::{run_case, Config, Op, Task, GATES, KEYS, MAX_CORES, MAX_YIELDS, VIAS};

/// Longest op sequence decoded from one input.
const MAX_OPS: usize = 48;

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn config(&mut self) -> Option<Config> {
        let cores = 1 + self.byte()? as usize % MAX_CORES;
        let mut queue_sets = Vec::with_capacity(cores);
        for _ in 0..cores {
            // Bits 0-1: how many keys (1 to 3); bits 2-7: their order.
            let b = self.byte()?;
            let n = 1 + (b & 3) as usize % KEYS.len();
            let set = (0..n)
                .map(|i| ((b >> 2) as usize + i * (1 + (b as usize >> 5) % 2)) as u8)
                .collect();
            queue_sets.push(set);
        }
        let capacity = match self.byte()? % 4 {
            0 => 1 + self.byte()? % 3,
            _ => 64,
        };
        Some(Config {
            queue_sets,
            capacity,
        })
    }

    fn task(&mut self) -> Option<Task> {
        let b = self.byte()?;
        Some(Task {
            yields: b % (MAX_YIELDS + 1),
            gate: (b & 0x20 != 0).then_some((b >> 6) % GATES as u8),
            panic: b & 0x08 != 0 && b & 0x10 != 0,
            drop_panics: b & 0x08 != 0 && b & 0x04 != 0,
        })
    }

    fn op(&mut self) -> Option<Op> {
        let kind = self.byte()? % 16;
        Some(match kind {
            0..=8 => Op::Submit {
                via: VIAS[self.byte()? as usize % VIAS.len()],
                core: self.byte()? % (MAX_CORES as u8 + 1),
                key: self.byte()? % KEYS.len() as u8,
                task: self.task()?,
            },
            9 => Op::Open(self.byte()? % GATES as u8),
            10 => Op::Hold(self.byte()? % MAX_CORES as u8),
            11 => Op::Release,
            12 => Op::Abort(self.byte()?),
            13 => Op::SetShares {
                core: self.byte()? % (MAX_CORES as u8 + 1),
                key: self.byte()? % KEYS.len() as u8,
                shares: match self.byte()? {
                    0 => 0,
                    255 => u32::MAX,
                    b => b as u32,
                },
            },
            14 => Op::Stats,
            _ => Op::Shutdown {
                graceful: self.byte()? & 1 == 1,
            },
        })
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Some(cfg) = input.config() else {
        return;
    };
    let mut ops = Vec::new();
    while ops.len() < MAX_OPS {
        match input.op() {
            Some(op) => ops.push(op),
            None => break,
        }
    }
    let violations = run_case(&cfg, &ops);
    if !violations.is_empty() {
        panic!("invariants violated: {violations:#?}\nconfig: {cfg:?}\nops: {ops:#?}");
    }
});
