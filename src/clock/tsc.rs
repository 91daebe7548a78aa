//! The time-stamp counter as a clock source (x86_64 only).
//!
//! Reading the TSC costs about 10 ns on the machines this crate is measured
//! on, against 25 to 70 ns for `Instant::now()`: it matters when a queue's
//! scheduler asks for per-poll timing ([`Las`](crate::sched::Las)). It is used only
//! where it is a valid clock: the kernel reports an invariant TSC
//! (`constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo`: constant rate,
//! running in every power state, synchronised across cores by the kernel at
//! boot). It is calibrated once per process against `Instant` (a 2 ms
//! measurement) and read through a monotonic guard, so a small skew between
//! cores after a migration never makes time go back.
//!
//! This module holds the crate's only `unsafe` outside the task and waker
//! modules: the call of the `_rdtsc` intrinsic.

#![cfg(target_arch = "x86_64")]
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::duration::duration_ns;

/// Ticks-to-nanoseconds conversion, measured once per process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Calibration {
    /// TSC value at the calibration's start: the clock's origin.
    base: u64,
    /// Nanoseconds per tick, as a 32.32 fixed-point number.
    mult: u64,
}

fn read() -> u64 {
    // SAFETY: `rdtsc` has no preconditions and touches no memory; the
    // intrinsic is `unsafe` only because every `core::arch` intrinsic is.
    // This module is compiled only for x86_64, where the instruction exists.
    unsafe { core::arch::x86_64::_rdtsc() }
}

fn invariant_tsc() -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
        return false;
    };
    let Some(flags) = info.lines().find(|l| l.starts_with("flags")) else {
        return false;
    };
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    has("constant_tsc") && has("nonstop_tsc")
}

fn calibrate() -> Option<Calibration> {
    if !invariant_tsc() {
        return None;
    }
    let (t0, c0) = (Instant::now(), read());
    while t0.elapsed() < Duration::from_millis(2) {
        std::hint::spin_loop();
    }
    let (t1, c1) = (Instant::now(), read());
    let ticks = c1.checked_sub(c0).filter(|&t| t > 0)?;
    let ns = duration_ns(t1.duration_since(t0));
    let mult = ((ns as u128) << 32) / ticks as u128;
    Some(Calibration {
        base: c0,
        mult: u64::try_from(mult).ok()?,
    })
}

/// The process's TSC calibration, or `None` where the TSC is not a valid
/// clock.
pub(crate) fn calibration() -> Option<Calibration> {
    static CAL: OnceLock<Option<Calibration>> = OnceLock::new();
    *CAL.get_or_init(calibrate)
}

impl Calibration {
    /// Nanoseconds since the calibration's origin.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        let ticks = read().wrapping_sub(self.base);
        ((ticks as u128 * self.mult as u128) >> 32) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsc_clock_brackets_instant() {
        // Only where the TSC is used. Two sandwiches: an interval measured
        // inside another is not longer than it, up to the calibration's
        // error (bounded here by 1%). A thread moved to another CPU between
        // two reads (whose counters a VM may offset slightly) or
        // descheduled at the wrong instant can spoil one sandwich, so each
        // is tried up to 5 times and must hold once.
        let Some(cal) = calibration() else { return };
        let spin = |d: Duration| {
            let t = Instant::now();
            while t.elapsed() < d {
                std::hint::spin_loop();
            }
        };
        // TSC interval inside the Instant interval.
        let outer_holds = |_| {
            let t0 = Instant::now();
            let a = cal.now_ns();
            spin(Duration::from_millis(3));
            let b = cal.now_ns();
            let outer = t0.elapsed().as_nanos() as u64;
            (b - a <= outer + outer / 100)
                .then_some(())
                .ok_or((b - a, outer))
        };
        let tries: Vec<_> = (0..5).map(outer_holds).collect();
        assert!(
            tries.iter().any(Result::is_ok),
            "the TSC interval exceeded the enclosing Instant interval in every try: {tries:?}"
        );
        // Instant interval inside the TSC interval.
        let inner_holds = |_| {
            let a = cal.now_ns();
            let t0 = Instant::now();
            spin(Duration::from_millis(3));
            let inner = t0.elapsed().as_nanos() as u64;
            let b = cal.now_ns();
            (inner <= (b - a) + (b - a) / 100)
                .then_some(())
                .ok_or((inner, b - a))
        };
        let tries: Vec<_> = (0..5).map(inner_holds).collect();
        assert!(
            tries.iter().any(Result::is_ok),
            "the Instant interval exceeded the enclosing TSC interval in every try: {tries:?}"
        );
    }
}
