// `deny`, not `forbid`: `tsc` allows its one `unsafe` block.
#![deny(unsafe_code)]
//! The clock the executor measures service with, injectable so that every
//! scheduling decision can be replayed exactly on a virtual clock in tests:
//! the [`Clock`] trait, the real [`SystemClock`] (the TSC where it is a
//! valid clock, [`Instant`] elsewhere) and the virtual [`ManualClock`].
//!
//! A leaf: it knows nothing of the executor, which only calls
//! [`Clock::now_ns`]. `tsc` and `duration` import nothing from this file.

mod duration;
#[cfg(target_arch = "x86_64")]
mod tsc;

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub(crate) use self::duration::duration_ns;

/// A monotonic time source, in nanoseconds since an arbitrary origin.
///
/// The executor reads it at every run end and, inside a run, after as many
/// polls as its running estimate of the poll cost says fit in what is left
/// of the slice (after the next poll while a queue has no estimate):
/// `Instant::now()` costs 25 to 70 ns (27 to 30 ns measured on this
/// project's 2-vCPU VM, 70 ns in the design notes), close to or more than a
/// whole poll. A [`ManualClock`] it reads after every poll, so that runs end
/// exactly at the first poll boundary after their slice; any other clock
/// too with `testing::BuilderExt::read_clock_every_poll` (cargo feature
/// `testing`). A scheduler that asks for per-poll timing, the latency
/// histograms and the stall detector add one read per poll.
pub trait Clock: 'static {
    /// Nanoseconds since the clock's origin. Must never decrease.
    ///
    /// Every value up to `u64::MAX` is legal, and so is a jump forward of
    /// any size: the executor's arithmetic on times saturates at the end of
    /// the range (a clock that reached `u64::MAX` stays there; polls then
    /// take no time).
    fn now_ns(&self) -> u64;
}

/// The real clock: the cheapest monotonic clock of the machine.
///
/// On x86_64 Linux with an invariant TSC (the kernel's `constant_tsc` and
/// `nonstop_tsc` flags) it reads the time-stamp counter, calibrated once per
/// process against [`Instant`] (about 10 ns a read here, against 25 to
/// 70 ns for `Instant::now()`, 27 to 30 ns measured on the same VM);
/// elsewhere it reads [`Instant`]. Either way it never goes back. [`SystemClock::source`] says which is used.
#[derive(Debug, Clone)]
pub struct SystemClock {
    origin: Instant,
    #[cfg(target_arch = "x86_64")]
    tsc: Option<tsc::Calibration>,
    #[cfg(target_arch = "x86_64")]
    last: std::cell::Cell<u64>,
}

impl SystemClock {
    /// A clock whose origin is now. The first clock of a process that uses
    /// the TSC calibrates it (a 2 ms measurement).
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
            #[cfg(target_arch = "x86_64")]
            tsc: tsc::calibration(),
            #[cfg(target_arch = "x86_64")]
            last: std::cell::Cell::new(0),
        }
    }

    /// A clock that reads [`Instant`] whatever the machine offers.
    pub fn instant() -> Self {
        Self {
            origin: Instant::now(),
            #[cfg(target_arch = "x86_64")]
            tsc: None,
            #[cfg(target_arch = "x86_64")]
            last: std::cell::Cell::new(0),
        }
    }

    /// `"tsc"` or `"instant"`: the source this clock reads.
    pub fn source(&self) -> &'static str {
        #[cfg(target_arch = "x86_64")]
        if self.tsc.is_some() {
            return "tsc";
        }
        "instant"
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        if let Some(cal) = &self.tsc {
            // Monotonic guard against a small skew after a core migration.
            let now = cal.now_ns().max(self.last.get());
            self.last.set(now);
            return now;
        }
        duration_ns(self.origin.elapsed())
    }
}

/// The clock an executor reads: the built-in [`SystemClock`] (the crate's
/// own code: read inline, without a virtual call or a panic boundary), or
/// a clock given to [`Builder::clock`](crate::Builder::clock).
pub(crate) enum ExecutorClock {
    System(SystemClock),
    User(Box<dyn Clock>),
}

impl ExecutorClock {
    /// `clock` as the executor reads it: a [`SystemClock`] is recognised
    /// by type.
    pub(crate) fn from_clock<C: Clock>(clock: C) -> Self {
        let mut slot = Some(clock);
        if let Some(sys) =
            (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<SystemClock>>()
        {
            if let Some(sys) = sys.take() {
                return ExecutorClock::System(sys);
            }
        }
        match slot {
            Some(c) => ExecutorClock::User(Box::new(c)),
            None => ExecutorClock::System(SystemClock::new()),
        }
    }
}

/// A virtual clock that only moves when told to: for deterministic tests and
/// simulations. Clones share the same time. The executor reads it after
/// every poll, so that runs end exactly at the first poll boundary after
/// their slice.
///
/// Its range is that of the [`Clock`] trait, `0..=u64::MAX` ns: it stops at
/// `u64::MAX` and never goes back (see [`advance`](ManualClock::advance)).
///
/// ```
/// use std::time::Duration;
/// use tourbillon::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let handle = clock.clone();
/// handle.advance(Duration::from_micros(5));
/// assert_eq!(clock.now_ns(), 5_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Rc<Cell<u64>>,
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `d`, saturating at `u64::MAX` ns: an
    /// advance past the end of the range (or by a `Duration` of more than
    /// `u64::MAX` ns, such as `Duration::MAX`) leaves the clock at
    /// `u64::MAX`, where it stays.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tourbillon::clock::ManualClock;
    ///
    /// let clock = ManualClock::new();
    /// clock.set_ns(u64::MAX - 1_000);
    /// clock.advance(Duration::from_micros(5));
    /// assert_eq!(clock.now(), u64::MAX);
    /// clock.advance(Duration::MAX);
    /// assert_eq!(clock.now(), u64::MAX);
    /// ```
    pub fn advance(&self, d: Duration) {
        self.now.set(self.now.get().saturating_add(duration_ns(d)));
    }

    /// Sets the clock to `ns`; a time before the current one is ignored (the
    /// clock never goes back).
    pub fn set_ns(&self, ns: u64) {
        if ns > self.now.get() {
            self.now.set(ns);
        }
    }

    /// The current time, in ns.
    pub fn now(&self) -> u64 {
        self.now.get()
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now.get()
    }
}
