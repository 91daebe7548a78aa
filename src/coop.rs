#![forbid(unsafe_code)]
//! tokio's cooperative budget for each task poll and each join (cargo
//! feature `tokio`).
//!
//! tokio gives each poll of one of its tasks a budget (128 units) that its
//! resources (channels, sockets, timers, join handles) spend, one unit per
//! operation that makes progress; once it is spent they return `Pending`,
//! even when ready, and wake the task at the host's next turn. Nested in
//! tokio, every tourbillon task polled during one host poll of
//! [`RunUntil`](crate::RunUntil) would spend that poll's budget: after the
//! first few the tasks of a turn would be refused. A `LocalSet` gives each
//! of its task polls a full budget of its own; this module gives each the
//! same budget of its own, the host poll's less one unit.
//!
//! tokio's public API cannot set a budget: [`poll_proceed`] takes a unit
//! and returns a [`RestoreOnPending`] that, when dropped, puts the budget
//! back as it was before the call; [`unconstrained`] lifts the budget for
//! one poll and puts it back as it was after. With these alone no budget
//! can exceed the one the host poll starts with, and each task poll that
//! starts from that budget uses up one `RestoreOnPending` taken at it,
//! which leaves the budget one unit lower. So:
//!
//! * [`HostStart::take`], before `run_until` polls its future, takes a unit
//!   of the host poll's budget `B` (the future then runs on `B - 1`);
//! * the turn runs inside `unconstrained` ([`in_turn`]), so that the host's
//!   budget after the turn is what it was before it (what the future left);
//! * before each task poll, [`TaskBudget::renew`] drops the unit it holds
//!   (the budget is `B` again) and takes a new one: every task poll starts
//!   from `B - 1`, 127 when `run_until` is a tokio task's or `block_on`'s
//!   own future, whatever its future and the turn's other tasks spent.
//!
//! A host poll whose budget is already spent when it begins gives its tasks
//! none (they run on what is left: nothing). Outside a tokio runtime (a
//! `run_until` polled by another host) the budget is unconstrained and this
//! does nothing but read tokio's thread-local. `block_on` and
//! `run_until_stalled` take no unit.
//!
//! Joins spend the budget as tokio's do ([`join_unit`]): a join that finds
//! it spent returns `Pending` and has its waker woken at tokio's next turn;
//! each join that returns `Ready` takes one unit.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use tokio::task::coop::{poll_proceed, unconstrained, RestoreOnPending};

/// Takes a unit of the current budget: `None` when it is spent.
#[inline]
fn take_unit() -> Option<RestoreOnPending> {
    // tokio defers this waker to its next turn when the budget is spent:
    // a no-op, as the task's resources register the task's own wakers.
    let mut cx = Context::from_waker(Waker::noop());
    match poll_proceed(&mut cx) {
        Poll::Ready(unit) => Some(unit),
        Poll::Pending => None,
    }
}

/// The unit of the host poll's budget taken before `run_until` polls its
/// future: dropped with it, it keeps the unit spent (the future's spending
/// is the host's, as on a `LocalSet`).
pub(crate) struct HostStart(Option<RestoreOnPending>);

impl HostStart {
    /// Takes the unit, at the start of a host poll.
    #[inline]
    pub(crate) fn take() -> Self {
        HostStart(take_unit())
    }
}

impl Drop for HostStart {
    fn drop(&mut self) {
        if let Some(unit) = self.0.take() {
            unit.made_progress();
        }
    }
}

/// The unit each task poll of a nested turn renews ([`renew`](Self::renew)):
/// dropping it puts the budget back to the host poll's at its start.
#[derive(Default)]
pub(crate) struct TaskBudget(Cell<Option<RestoreOnPending>>);

impl TaskBudget {
    /// Before a task poll of a nested turn: the budget back to the host
    /// poll's at its start, less the unit taken again for the next poll.
    /// Nothing in a turn whose host poll had no budget left.
    #[inline]
    pub(crate) fn renew(&self) {
        if let Some(unit) = self.0.take() {
            drop(unit);
            self.0.set(take_unit());
        }
    }
}

/// Drops the turn's unit inside `unconstrained` (also on unwind), where it
/// changes nothing the host sees.
struct EndTurn<'a>(&'a TaskBudget);

impl Drop for EndTurn<'_> {
    fn drop(&mut self) {
        drop(self.0 .0.take());
    }
}

/// Runs a nested turn (`turn`) with `start`'s unit in `budget` for its task
/// polls to renew, inside `unconstrained`: the host's budget afterwards is
/// what it was before. Without a unit (the host poll's budget was spent
/// when it began), runs `turn` as it is.
pub(crate) fn in_turn<R>(budget: &TaskBudget, mut start: HostStart, turn: impl FnOnce() -> R) -> R {
    let Some(unit) = start.0.take() else {
        return turn();
    };
    let mut turn = Some(turn);
    let mut unit = Some(unit);
    let fut = pin!(unconstrained(poll_fn(|_| {
        budget.0.set(unit.take());
        let _end = EndTurn(budget);
        Poll::Ready(turn.take().map(|turn| turn()))
    })));
    match fut.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Some(out)) => out,
        // `poll_fn` above is ready at its first poll, which runs `turn`.
        _ => unreachable!("tourbillon bug: the turn did not run"),
    }
}

/// A join's unit of tokio's budget ([`JoinHandle`](crate::task::JoinHandle),
/// [`RemoteJoinHandle`](crate::remote::RemoteJoinHandle), [`JoinSet`](crate::task::JoinSet)),
/// as tokio's `JoinHandle` takes one: `Pending` when the budget is spent
/// (tokio wakes `cx`'s waker at its next turn). Call
/// [`RestoreOnPending::made_progress`] on the result when the join returns
/// `Ready`; dropped otherwise, it gives the unit back.
#[inline]
pub(crate) fn join_unit(cx: &mut Context<'_>) -> Poll<RestoreOnPending> {
    poll_proceed(cx)
}
