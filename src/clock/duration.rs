#![forbid(unsafe_code)]
//! Conversion of a `Duration` to the clock's unit, nanoseconds in a `u64`:
//! shared by the clocks and the TSC calibration, and used by everything
//! that turns a configured `Duration` into the executor's time.

use std::time::Duration;

/// `d` in nanoseconds, saturated at `u64::MAX` (about 584 years): a
/// `Duration` wider than that is not taken modulo 2^64.
#[inline]
pub(crate) fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
