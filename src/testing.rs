#![forbid(unsafe_code)]
//! Verification knobs: for tests of the executor itself and of schedulers;
//! not needed by applications. Built only with the cargo feature `testing`
//! (`tourbillon = { ..., features = ["testing"] }`, typically in
//! `[dev-dependencies]`).
//!
//! * [`BuilderExt`], implemented for [`Builder`], adds two options:
//!   [`general_pick`](BuilderExt::general_pick) sends every queue pick
//!   through the general EEVDF rule, and
//!   [`read_clock_every_poll`](BuilderExt::read_clock_every_poll) makes the
//!   executor read a custom clock after every poll, as it reads a
//!   [`ManualClock`](crate::clock::ManualClock).
//! * [`trim_cell_cache`] frees the task cells this thread keeps for reuse.
//!
//! ```
//! use tourbillon::clock::ManualClock;
//! use tourbillon::testing::BuilderExt;
//! use tourbillon::Builder;
//!
//! let ex = Builder::new()
//!     .queue("q", 1)
//!     .clock(ManualClock::new())
//!     .general_pick(true)
//!     .build()
//!     .unwrap();
//! assert_eq!(ex.block_on(ex.spawn("q", async { 7 }).unwrap()).unwrap(), 7);
//! ```

use crate::builder::Builder;
use crate::queue::QueueKey;

pub use crate::task::cache::trim_cell_cache;

/// Verification options of a [`Builder`]; see the [module](self).
///
/// Sealed: implemented for [`Builder`] only.
pub trait BuilderExt: Sized + sealed::Sealed {
    /// Disables the single-runnable-queue fast path, so that every pick
    /// goes through the general EEVDF rule. For verification (the two must
    /// give the same poll sequence); costs a little per run. Default off.
    fn general_pick(self, on: bool) -> Self;

    /// Whether the executor reads the clock after every poll, which makes
    /// runs end exactly at the first poll boundary after their slice (with
    /// `false` it reads it after as many polls as its running estimate of
    /// the poll cost says fit in what is left of the slice, and at every
    /// run end). Default: on for a [`ManualClock`], off for every other
    /// clock; set, this option wins over the default whatever the clock.
    /// For a custom virtual clock whose reads cost nothing.
    ///
    /// [`ManualClock`]: crate::clock::ManualClock
    fn read_clock_every_poll(self, on: bool) -> Self;
}

impl<K: QueueKey> BuilderExt for Builder<K> {
    fn general_pick(mut self, on: bool) -> Self {
        self.general_pick = on;
        self
    }

    fn read_clock_every_poll(mut self, on: bool) -> Self {
        self.read_clock_every_poll = Some(on);
        self
    }
}

mod sealed {
    pub trait Sealed {}
    impl<K: crate::queue::QueueKey> Sealed for crate::builder::Builder<K> {}
}
