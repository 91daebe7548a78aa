#![forbid(unsafe_code)]
//! The executor-side state bits of a task.
//!
//! The state lives in the task cell's header and is only written on the
//! executor's thread (relaxed loads and stores, never a read-modify-write).
//! Foreign threads' wakes go through the inbox and are applied by the
//! executor thread; the only foreign read is an abort handle's
//! `is_finished`, which may lag behind.
//!
//! Every change of state that the caller must act on is a `transition_to_*`
//! method returning a `#[must_use]` value that says what to do.

use std::fmt;

/// The task is in its queue's scheduler (or waiting in the deferred-yield
/// list for the next host turn). Set by a wake, cleared when the run loop
/// pops the task. While set, further wakes are no-ops: several wakes before
/// the next poll enqueue the task once.
const SCHEDULED: u8 = 1 << 0;
/// The task's future is being polled right now. While set the slab entry is
/// never removed and the future never dropped (the poll holds a raw pointer
/// to the task cell). Set and cleared by `harness::poll_task`.
const RUNNING: u8 = 1 << 1;
/// The task was woken during its own poll; it is pushed to its scheduler
/// after the poll (behind every task already queued), once.
const NOTIFIED: u8 = 1 << 2;
/// The stage holds the result (output, cancellation or panic) or has been
/// consumed; the future is gone and is never polled again.
const COMPLETE: u8 = 1 << 3;
/// A `JoinHandle` for the task is alive; without it the output is dropped as
/// soon as the task completes and the slot is freed.
const JOIN_INTEREST: u8 = 1 << 4;
/// `abort()` was called; the future is dropped at the next poll boundary
/// without being polled again.
const CANCELLED: u8 = 1 << 5;
/// The task belongs to a keyed group (`spawn_in_group`), whose id the slab
/// keeps beside the entry; without it the task's group is its own, derived
/// from its id. Fixed at spawn.
const KEYED: u8 = 1 << 6;

/// A reference to the cell counted in the header's reference word but
/// owned by no waker: a waker of the task given up on the executor's
/// thread during a poll of one of its tasks (dropped, or consumed by
/// `wake`) leaves its reference counted and sets this bit, and the next
/// clone there takes it back, so that a waker that is taken, woken and
/// registered again (a channel's) costs no atomic read-modify-write. Only
/// while the slab holds the task (not COMPLETE): the count then exceeds the
/// owners by one at most, and never reaches zero early; the slab gives the
/// reference back when it lets go of the task (`OwnedTask::release_ref`).
const CREDIT: u8 = 1 << 7;

/// A snapshot of a task's state bits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct State(u8);

impl State {
    /// A freshly spawned task: queued, with a join handle.
    pub(crate) const INITIAL: State = State(SCHEDULED | JOIN_INTEREST);

    pub(crate) fn bits(self) -> u8 {
        self.0
    }
    pub(crate) fn from_bits(bits: u8) -> State {
        State(bits)
    }

    pub(crate) fn is_scheduled(self) -> bool {
        self.0 & SCHEDULED != 0
    }
    pub(crate) fn is_running(self) -> bool {
        self.0 & RUNNING != 0
    }
    pub(crate) fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }
    pub(crate) fn is_complete(self) -> bool {
        self.0 & COMPLETE != 0
    }
    pub(crate) fn has_join_interest(self) -> bool {
        self.0 & JOIN_INTEREST != 0
    }
    pub(crate) fn is_cancelled(self) -> bool {
        self.0 & CANCELLED != 0
    }
    pub(crate) fn is_keyed(self) -> bool {
        self.0 & KEYED != 0
    }
    pub(crate) fn has_credit(self) -> bool {
        self.0 & CREDIT != 0
    }
    /// Queued and neither being polled nor complete: what a task a
    /// scheduler hands out must be (one compare).
    #[inline]
    pub(crate) fn is_queued(self) -> bool {
        self.0 & (SCHEDULED | RUNNING | COMPLETE) == SCHEDULED
    }

    pub(crate) fn set_scheduled(&mut self, on: bool) {
        self.set(SCHEDULED, on)
    }
    pub(crate) fn set_running(&mut self, on: bool) {
        self.set(RUNNING, on)
    }
    pub(crate) fn set_notified(&mut self, on: bool) {
        self.set(NOTIFIED, on)
    }
    pub(crate) fn set_complete(&mut self) {
        self.set(COMPLETE, true)
    }
    pub(crate) fn set_join_interest(&mut self, on: bool) {
        self.set(JOIN_INTEREST, on)
    }
    pub(crate) fn set_cancelled(&mut self) {
        self.set(CANCELLED, true)
    }
    pub(crate) fn set_keyed(&mut self) {
        self.set(KEYED, true)
    }
    pub(crate) fn set_credit(&mut self, on: bool) {
        self.set(CREDIT, on)
    }

    fn set(&mut self, bit: u8, on: bool) {
        if on {
            self.0 |= bit
        } else {
            self.0 &= !bit
        }
    }
}

impl fmt::Debug for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (SCHEDULED, "SCHEDULED"),
            (RUNNING, "RUNNING"),
            (NOTIFIED, "NOTIFIED"),
            (COMPLETE, "COMPLETE"),
            (JOIN_INTEREST, "JOIN_INTEREST"),
            (CANCELLED, "CANCELLED"),
            (KEYED, "KEYED"),
            (CREDIT, "CREDIT"),
        ];
        let mut list = f.debug_set();
        for (bit, name) in names {
            if self.0 & bit != 0 {
                list.entry(&format_args!("{name}"));
            }
        }
        list.finish()
    }
}

/// What a wake does to a task, decided from its state.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransitionToScheduled {
    /// Push the task to its scheduler now.
    Push,
    /// The task is being polled: it is pushed after the poll.
    AfterPoll,
    /// Already queued, or complete: nothing to do.
    Nothing,
}

/// What popping a task for a poll does to it, decided from its state
/// ([`State::transition_to_running`]).
#[must_use = "a task marked RUNNING must be polled or cancelled"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToRunning {
    /// RUNNING is set: poll the future.
    Poll,
    /// RUNNING is set and the task was aborted: drop the future unpolled.
    Cancel,
    /// Complete or being polled already (a stale id): leave it.
    Stale,
}

/// What a task whose poll returned `Pending` does next
/// ([`State::transition_to_idle`]).
#[must_use = "a task woken or yielded during its poll must be pushed to its scheduler"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToIdle {
    /// Not runnable: it waits for a wake.
    Wait,
    /// Woken during its poll: SCHEDULED again, push it now.
    Requeue,
    /// Yielded through `yield_now`: SCHEDULED again, push it now or hold
    /// it until the host's next turn.
    Yield,
    /// Aborted during its own poll: still RUNNING, cancel it now.
    Cancel,
}

/// What an abort does to a task ([`State::transition_to_cancelled`]).
#[must_use = "an idle task that was aborted must be cancelled at the next poll boundary"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TransitionToCancelled {
    /// CANCELLED set on an idle or queued task: the caller cancels it at
    /// the next poll boundary.
    CancelIdle,
    /// CANCELLED set on a task being polled: cancelled when its poll
    /// returns.
    AtPollEnd,
    /// Complete: nothing to do.
    Nothing,
}

impl State {
    /// A task popped for a poll: sets RUNNING (and clears SCHEDULED) unless
    /// it is complete or running already.
    #[inline(always)]
    pub(crate) fn transition_to_running(&mut self) -> TransitionToRunning {
        if self.is_complete() || self.is_running() {
            return TransitionToRunning::Stale;
        }
        self.set_scheduled(false);
        self.set_running(true);
        if self.is_cancelled() {
            TransitionToRunning::Cancel
        } else {
            TransitionToRunning::Poll
        }
    }

    /// An aborted idle task is cancelled at a poll boundary: sets RUNNING
    /// for the cancellation; `false` (nothing set) if it is complete,
    /// running, or not aborted.
    #[must_use = "a task marked RUNNING must be cancelled"]
    pub(crate) fn transition_to_cancelling(&mut self) -> bool {
        if self.is_complete() || self.is_running() || !self.is_cancelled() {
            return false;
        }
        self.set_running(true);
        true
    }

    /// A task that is neither complete nor running is ended at a poll
    /// boundary without a poll (its queue was quarantined): sets RUNNING
    /// for it; `false` (nothing set) if it is complete or running.
    #[must_use = "a task marked RUNNING must be ended"]
    pub(crate) fn transition_to_ending(&mut self) -> bool {
        if self.is_complete() || self.is_running() {
            return false;
        }
        self.set_running(true);
        true
    }

    /// A poll returned `Pending`: clears RUNNING and says what comes next
    /// (`yielded`: the task yielded through `yield_now` during the poll).
    /// An aborted task stays RUNNING, for its cancellation.
    #[inline(always)]
    pub(crate) fn transition_to_idle(&mut self, yielded: bool) -> TransitionToIdle {
        if self.is_cancelled() {
            return TransitionToIdle::Cancel;
        }
        self.set_running(false);
        if self.is_notified() {
            self.set_notified(false);
            self.set_scheduled(true);
            TransitionToIdle::Requeue
        } else if yielded {
            self.set_scheduled(true);
            TransitionToIdle::Yield
        } else {
            TransitionToIdle::Wait
        }
    }

    /// The task ended (its stage holds the result): COMPLETE, no longer
    /// RUNNING, SCHEDULED or NOTIFIED. Returns whether a join handle will
    /// read the result.
    #[inline(always)]
    #[must_use = "the result stays in the cell only for a join handle"]
    pub(crate) fn transition_to_complete(&mut self) -> bool {
        self.set_running(false);
        self.set_notified(false);
        self.set_scheduled(false);
        self.set_complete();
        self.has_join_interest()
    }

    /// `abort()`: sets CANCELLED unless the task is complete.
    pub(crate) fn transition_to_cancelled(&mut self) -> TransitionToCancelled {
        if self.is_complete() {
            return TransitionToCancelled::Nothing;
        }
        self.set_cancelled();
        if self.is_running() {
            TransitionToCancelled::AtPollEnd
        } else {
            TransitionToCancelled::CancelIdle
        }
    }

    /// Applies a wake to the state and says what the caller must do.
    pub(crate) fn transition_to_scheduled(&mut self) -> TransitionToScheduled {
        if self.is_complete() || self.is_scheduled() {
            TransitionToScheduled::Nothing
        } else if self.is_running() {
            if self.is_notified() {
                TransitionToScheduled::Nothing
            } else {
                self.set_notified(true);
                TransitionToScheduled::AfterPoll
            }
        } else {
            self.set_scheduled(true);
            TransitionToScheduled::Push
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_are_deduplicated() {
        let mut s = State::INITIAL;
        assert_eq!(s.transition_to_scheduled(), TransitionToScheduled::Nothing);
        s.set_scheduled(false);
        assert_eq!(s.transition_to_scheduled(), TransitionToScheduled::Push);
        assert_eq!(s.transition_to_scheduled(), TransitionToScheduled::Nothing);
        s.set_scheduled(false);
        s.set_running(true);
        assert_eq!(
            s.transition_to_scheduled(),
            TransitionToScheduled::AfterPoll
        );
        assert_eq!(s.transition_to_scheduled(), TransitionToScheduled::Nothing);
        s.set_running(false);
        s.set_notified(false);
        s.set_complete();
        assert_eq!(s.transition_to_scheduled(), TransitionToScheduled::Nothing);
        assert_eq!(
            format!("{s:?}"),
            "{JOIN_INTEREST, COMPLETE}"
                .replace("JOIN_INTEREST, COMPLETE", "COMPLETE, JOIN_INTEREST")
        );
    }
}
