#![forbid(unsafe_code)]
//! What the executor reads of its configuration: [`Config`], the knobs the
//! run loop reads, and the stall detector's callback. The
//! [`Builder`](crate::Builder) validates the options and fills these in;
//! the executor never sees the builder. A leaf: it imports only the
//! [`Stall`] record the callback takes.

use std::rc::Rc;

use crate::stats::Stall;

/// Knobs the run loop reads; set through [`Builder`](crate::Builder).
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) max_polls: u32,
    pub(crate) host_yield_interval_ns: u64,
    pub(crate) preemption: bool,
    pub(crate) min_run_ns: u64,
    pub(crate) general_pick: bool,
    /// Record wake-to-first-poll histograms.
    pub(crate) latency: bool,
    /// Stall threshold, ns (`u64::MAX`: no detector).
    pub(crate) stall_ns: u64,
    /// One clock read per poll for every queue (latency or stalls on).
    pub(crate) per_poll_timing: bool,
}

/// The stall detector's callback.
pub(crate) type StallReport = Rc<dyn Fn(&Stall)>;
