#![forbid(unsafe_code)]
//! tokio's cooperative budget for each task poll (cargo feature `tokio`).
//!
//! tokio gives each poll of one of its tasks a budget (128 units) that its
//! resources (channels, sockets, timers, join handles) spend, one unit per
//! operation that makes progress; once it is spent they return `Pending`,
//! even when ready, and wake the task at the host's next turn. Nested in
//! tokio, every tourbillon task polled during one host poll of
//! [`RunUntil`](crate::RunUntil) would spend that poll's budget: after the
//! first few the tasks of a turn would be refused. A `LocalSet` gives each
//! of its task polls a budget of its own; so does this module.
//!
//! tokio's public API cannot set a budget, only take a unit and put the
//! budget back as it was ([`poll_proceed`]: the [`RestoreOnPending`] it
//! returns restores, when dropped, the budget as it was before the call).
//! The run loop takes one before each task poll of a nested executor
//! (driven by `run_until`) and drops it after the poll: every task poll of
//! a turn starts from the budget the host poll had when the turn began,
//! less that one unit (127 for a host poll that had the full 128), and the
//! host's budget after the turn is what it was before. Outside a tokio
//! runtime (a `run_until` polled by another host) the budget is
//! unconstrained and this does nothing but read tokio's thread-local.
//! `block_on` and `run_until_stalled` take no unit.

use std::task::{Context, Poll, Waker};

use tokio::task::coop::{poll_proceed, RestoreOnPending};

/// Held over one task poll: dropped after it, it puts tokio's budget back
/// to what it was before [`task_budget`]. `None` when the budget was
/// already spent (the host poll used it up before the turn): the tasks then
/// run on what is left, as without the feature.
pub(crate) type TaskBudget = Option<RestoreOnPending>;

/// Starts a task poll's budget; drop the result after the poll.
#[inline]
pub(crate) fn task_budget() -> TaskBudget {
    // tokio defers this waker to its next turn when the budget is spent:
    // a no-op, as the task's resources register the task's own wakers.
    let mut cx = Context::from_waker(Waker::noop());
    match poll_proceed(&mut cx) {
        Poll::Ready(restore) => Some(restore),
        Poll::Pending => None,
    }
}
