#![forbid(unsafe_code)]
//! Clock accounting of the run in progress: a **checkpoint** reads the
//! clock, charges the time since the previous checkpoint to the running
//! queue (R1), renews its deadline when its request is used (R4), updates
//! the queue's poll-cost estimate and checks the host-yield interval; then
//! it sets the countdown to the next checkpoint and whether the run stops.
//! It happens at every run end, and inside a run:
//! * after every poll for a `ManualClock` (or any clock with
//!   `testing::BuilderExt::read_clock_every_poll`; `Config::cheap_clock`):
//!   runs then end exactly at the first poll boundary after the slice (R8);
//! * otherwise after as many polls as the running estimate of the queue's
//!   poll cost says fit in what is left of the slice and of the host
//!   interval (after one poll while the queue has no estimate, or an
//!   estimate of 0): an `Instant::now()` (25 to 70 ns on the machines
//!   measured) per poll would cost more than the poll itself.
//!
//! It is [`RunState`]'s clock accounting: it owns the clock-derived fields
//! (checkpoints, turn budget, the stop flag, the poll count); which queue
//! runs and when a run starts or ends are the run loop's, and the clock
//! read (user code, behind the panic boundary) is the caller's.

use super::queues::Queues;
use super::run_state::RunState;
use crate::config::Config;

impl RunState {
    /// Charges the time from the last checkpoint to `now` to queue `q`
    /// (R1, R4), then sets the countdown to the next checkpoint and
    /// whether the run stops here.
    #[inline(always)]
    pub(crate) fn checkpoint(&self, qs: &mut Queues, q: usize, now: u64, cfg: &Config) {
        self.charge(qs, q, now, cfg);
        self.reset_countdown(qs, q, cfg);
        self.update_stop(qs, cfg);
    }

    /// The charge of [`checkpoint`](Self::checkpoint), without the
    /// countdown and the stop flag, which the caller must set.
    #[inline(always)]
    pub(crate) fn charge(&self, qs: &mut Queues, q: usize, now: u64, cfg: &Config) {
        let r = self;
        let delta = now.saturating_sub(r.clock.last_ns.get());
        r.clock.last_ns.set(now);
        let polls = r.clock.countdown_set.get() - r.clock.countdown.get();
        r.turn
            .polls_left
            .set(r.turn.polls_left.get().saturating_sub(polls));
        r.counters
            .polls
            .set(r.counters.polls.get() + u64::from(polls));
        if qs.eevdf.charge(q, delta) {
            r.end.slice_over.set(true);
            r.end.renewed.set(true);
        } else if qs.eevdf.runnable_count() == 1 && !cfg.general_pick {
            // Alone, a used request does not end the run (R5 would pick
            // the queue again) and R4 renewed it: once another queue is
            // placed, the run ends when the request in force is used
            // (R8b), not at once.
            r.end.slice_over.set(false);
        }
        qs.list[q].record_service(delta, polls);
        if now.saturating_sub(r.turn.start_ns.get()) >= r.turn.host_interval_ns.get() {
            r.turn.over.set(true);
        }
        if r.end.preempt_at.get().is_some_and(|at| now >= at) {
            r.end.preempt.set(true);
        }
    }

    /// The charge of a run that ends at a queue switch whose next run
    /// starts at once (`Core::switch_in_run`): the time from the last
    /// checkpoint to `now` and the `polls` since it (at least one: the
    /// caller reads `now` only when a poll is uncharged), with the turn's
    /// polls left after them (`polls_left`, which the caller found above
    /// 0). Returns the time, which the caller charges to the queue's
    /// EEVDF entity (R1, R4:
    /// [`Eevdf::switch_lone_picked`](crate::eevdf::Eevdf::switch_lone_picked)).
    /// Of [`charge`](Self::charge), it leaves out what the next run's start
    /// resets (the causes of the run's end) and the host interval's check,
    /// which the caller made.
    #[inline(always)]
    pub(crate) fn charge_switching(
        &self,
        qs: &mut Queues,
        q: usize,
        now: u64,
        polls: u32,
        polls_left: u32,
    ) -> u64 {
        let delta = now.saturating_sub(self.clock.last_ns.get());
        self.clock.last_ns.set(now);
        self.turn.polls_left.set(polls_left);
        self.counters
            .polls
            .set(self.counters.polls.get() + u64::from(polls));
        qs.list[q].record_polls(delta, polls);
        delta
    }

    /// Whether the run in progress must end at this poll boundary.
    #[inline(always)]
    pub(crate) fn update_stop(&self, qs: &Queues, cfg: &Config) {
        let r = self;
        r.end.stop.set(
            r.turn.polls_left.get() == 0
                || r.turn.over.get()
                || r.end.preempt.get()
                || r.end.requested.get()
                || (r.end.slice_over.get() && contended(qs, cfg)),
        );
    }

    /// Sets the countdown to the next checkpoint; only right after a
    /// checkpoint (or at a run's start), when no poll is uncharged.
    #[inline(always)]
    pub(crate) fn reset_countdown(&self, qs: &Queues, q: usize, cfg: &Config) {
        let n = self.countdown(qs, q, cfg);
        self.clock.countdown.set(n);
        self.clock.countdown_set.set(n);
    }

    /// Polls that fit before the next needed checkpoint (amortised mode).
    #[inline(always)]
    fn countdown(&self, qs: &Queues, q: usize, cfg: &Config) -> u32 {
        let r = self;
        if r.turn.polls_left.get() <= 1 {
            // The turn's last poll (or past it): nothing to divide. At the
            // end of every full turn (callgrind).
            return 1;
        }
        let elapsed = r.clock.last_ns.get().saturating_sub(r.turn.start_ns.get());
        let mut left = r.turn.host_interval_ns.get().saturating_sub(elapsed);
        if contended(qs, cfg) {
            left = left.min(qs.eevdf.slice_left_ns(q));
        }
        if let Some(at) = r.end.preempt_at.get() {
            left = left.min(at.saturating_sub(r.clock.last_ns.get()));
        }
        polls_within(left, qs.list[q].poll_cost_ns, r.turn.polls_left.get())
    }

    /// [`countdown`](Self::countdown) of the run that a queue switch
    /// starts (`Core::switch_in_run`), from what the switch holds in
    /// locals: the queue's poll-cost estimate (`cost`), what is left of its
    /// request when the general pick is forced (`slice_left`), the turn's
    /// `polls_left` and what is `left` of its host interval. The run
    /// starts alone (no contention but the general pick's) and its start
    /// cleared `preempt_at`: the same count.
    #[inline(always)]
    pub(crate) fn switch_countdown(
        cost: u64,
        slice_left: Option<u64>,
        polls_left: u32,
        left: u64,
    ) -> u32 {
        if polls_left <= 1 {
            return 1;
        }
        let left = match slice_left {
            Some(slice) => left.min(slice),
            None => left,
        };
        polls_within(left, cost, polls_left)
    }
}

/// How many polls of `cost` ns fit in `left` ns: at least 1, at most
/// `polls_left` (the turn's, above 1).
#[inline(always)]
fn polls_within(left: u64, cost: u64, polls_left: u32) -> u32 {
    if cost == 0 {
        // No cost known: no poll of this queue measured yet, or its
        // polls took no time the clock could see. Check after the next
        // poll, whatever it costs: counted as 1 ns, `max_polls` polls of
        // unknown length could run far beyond the slice and the host
        // interval (61 ms for polls of 1 ms).
        return 1;
    }
    let most = polls_left.max(1) as u64;
    if cost.checked_mul(most).is_some_and(|all| left >= all) {
        // `left / cost >= most`: the clamp's result, without a division.
        return most as u32;
    }
    (left / cost).clamp(1, most) as u32
}

/// Whether more than one queue competes (or the general pick is forced):
/// only then does a used-up slice end a run.
#[inline(always)]
pub(crate) fn contended(qs: &Queues, cfg: &Config) -> bool {
    cfg.general_pick || qs.eevdf.runnable_count() > 1
}
