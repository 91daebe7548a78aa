//! Fuzz target: the fuzz input is decoded into an executor configuration
//! (queue shares, run options, panic policy, the custom scheduler's kind
//! and place) and a sequence of API operations with injected faults
//! (futures, outputs and panic payloads whose destructors panic, join
//! handle wakers whose `wake` panics, a clock and custom schedulers armed
//! to panic at a chosen call), run by the same interpreter as
//! `tests/api_prop.rs` (`tests/api_model/mod.rs`), with the same
//! invariants; a violation panics (a crash for libFuzzer), as does any
//! panic out of the executor itself that the model did not inject, and a
//! panic while unwinding aborts (a crash too). ASan (cargo-fuzz's default)
//! checks the memory accesses of the unsafe code on the way.
//!
//! Run: `cargo +nightly fuzz run api_ops -- -max_total_time=60`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/api_model/mod.rs"]
mod api_model;

use api_model::{
    run_case, Config, Faults, Op, Step, GATES, MAX_STEPS, QUEUES, SCHED_METHODS, VIAS,
};
use tourbillon::config::PanicPolicy;

/// Longest op sequence decoded from one input.
const MAX_OPS: usize = 64;

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    /// The faults of a task, from a byte's bits 0 to 2 (future, output,
    /// payload destructors), if its bit 3 says so.
    fn faults(b: u8) -> Faults {
        if b & 8 != 0 {
            Faults::from_bits(b)
        } else {
            Faults::NONE
        }
    }

    /// A queue key: mostly a declared one, 1 in 16 the undeclared key.
    fn queue(&mut self) -> Option<u8> {
        let b = self.byte()?;
        Some(if b % 16 == 15 {
            QUEUES as u8
        } else {
            b % QUEUES as u8
        })
    }

    fn steps(&mut self) -> Option<Vec<Step>> {
        let n = self.byte()? as usize % (MAX_STEPS + 1);
        let mut steps = Vec::with_capacity(n);
        for _ in 0..n {
            let b = self.byte()?;
            let arg = b >> 3;
            steps.push(match b % 8 {
                0 => Step::Yield,
                1 => Step::YieldMaybe,
                2 | 3 => Step::Wait(arg % GATES as u8),
                4 => Step::Open(arg % GATES as u8),
                5 => Step::Work(1 + arg as u16 * 2),
                6 => Step::SpawnChild,
                _ => Step::Reweight(arg % QUEUES as u8, 1 + self.byte()? % 100),
            });
        }
        Some(steps)
    }

    fn config(&mut self) -> Option<Config> {
        let mut shares = [1; QUEUES];
        for s in &mut shares {
            *s = 1 + (self.byte()? % 100) as u32;
        }
        let f = self.byte()?;
        let g = self.byte()?;
        Some(Config {
            shares,
            max_polls: 1 + (f & 7) as u32,
            preemption: f & 8 == 0,
            general_pick: f & 16 != 0,
            latency: f & 32 != 0,
            stall_detector: f & 64 != 0,
            drain: f & 128 == 0,
            policy: if g & 1 == 0 {
                PanicPolicy::Catch
            } else {
                PanicPolicy::Propagate
            },
            custom_lifo: g & 2 != 0,
            custom_on_0: g & 4 != 0,
        })
    }

    fn op(&mut self) -> Option<Op> {
        Some(match self.byte()? % 20 {
            0..=2 => {
                let via = VIAS[self.byte()? as usize % VIAS.len()];
                let queue = self.queue()?;
                let group = self.byte()? % 4;
                let flags = self.byte()?;
                Op::Spawn {
                    via,
                    queue,
                    group,
                    steps: self.steps()?,
                    panic: flags % 8 == 0,
                    keep: flags & 8 == 0,
                    faults: Self::faults(flags >> 4),
                }
            }
            3 | 19 => {
                let queue = self.queue()?;
                let flags = self.byte()?;
                Op::RemoteSpawn {
                    queue,
                    group: (flags & 4 != 0).then_some(flags >> 4 & 3),
                    steps: self.steps()?,
                    panic: flags & 3 == 0,
                    from_thread: flags & 8 != 0,
                    faults: Self::faults(self.byte()?),
                }
            }
            4 | 5 => {
                let b = self.byte()?;
                Op::Open {
                    gate: b % GATES as u8,
                    from_thread: b & 128 != 0,
                }
            }
            6 => {
                let handle = self.byte()?;
                Op::Abort {
                    handle,
                    from_thread: handle & 1 != 0,
                }
            }
            7 => Op::DropHandle {
                handle: self.byte()?,
            },
            8 => Op::Poll {
                handle: self.byte()?,
            },
            9 => Op::AwaitTurn {
                handle: self.byte()?,
            },
            10 => Op::Join {
                handle: self.byte()?,
                queue: self.byte()? % QUEUES as u8,
            },
            11 | 12 => Op::Run,
            13 => Op::Turns(1 + self.byte()? % 3),
            14 => {
                let queue = self.byte()? % QUEUES as u8;
                let shares = match self.byte()? {
                    0 => 0,
                    255 => tourbillon::config::MAX_SHARES + 1,
                    b => 1 + (b % 100) as u32,
                };
                Op::SetShares { queue, shares }
            }
            15 => Op::Advance(1 + self.byte()? as u16),
            16 => Op::PollWaker {
                handle: self.byte()?,
            },
            17 => Op::ArmClock(1 + self.byte()? % 64),
            _ => Op::ArmScheduler {
                method: SCHED_METHODS[self.byte()? as usize % SCHED_METHODS.len()],
                n: 1 + self.byte()? % 16,
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
