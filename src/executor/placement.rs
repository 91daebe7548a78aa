#![forbid(unsafe_code)]
//! Placement: at a poll boundary, the queues that became runnable enter
//! the EEVDF table (R6), and a placed queue may preempt the running one
//! (R9: at once, or once the run has lasted `min_run`). It may end the run
//! in progress (through the stop flag); it never polls. `impl Queues`: the
//! queues and their EEVDF entities decide; the run state ([`RunState`]) is
//! read and its stop flag set. The pick itself is
//! [`Eevdf::pick`](crate::eevdf::Eevdf::pick), called by the run loop.

use super::queues::{Queues, SchedMode};
use super::run_state::{HeldIds, RunState};
use crate::config::Config;

impl Queues {
    /// Places the queues that became runnable and decides preemption.
    /// `between_polls`: called at a poll boundary (no task of the running
    /// queue is being polled), not from inside a poll (`should_yield`).
    /// `charge`: the running queue and the clock's reading, when a poll
    /// since the last checkpoint is uncharged: charged first so that V is
    /// current (the countdown and the stop flag are set below, once
    /// placed); none when the last checkpoint was at this boundary (no
    /// poll since), whose `slice_over` must stay as it is.
    #[inline(always)]
    pub(crate) fn place_activations(
        &mut self,
        r: &RunState,
        cfg: &Config,
        charge: Option<(usize, u64)>,
        between_polls: bool,
    ) {
        let qs = self;
        let cur = r.current.queue.get();
        if let Some((c, now)) = charge {
            r.charge(qs, c, now, cfg);
        }
        // Between polls, the running queue has nothing left to run: its run
        // ends at its next step whatever is placed, so neither a preemption
        // nor a new countdown would change anything. (Inside a poll the
        // task being polled may still yield or be woken, and a preemption
        // is what `should_yield` asks about.)
        let ending = between_polls && cur.is_some_and(|c| qs.run_ends_now(&r.held, c));
        if ending && qs.switch_now(cur) {
            r.clock.countdown_set.set(r.clock.countdown.get());
            r.end.stop.set(true);
            return;
        }
        // No user code runs below: nothing is pushed to `pending` meanwhile.
        for k in 0..qs.pending.len() {
            let j = qs.pending[k];
            qs.list[j].activation_pending = false;
            if qs.list[j].sched.is_empty() || qs.eevdf.ents[j].runnable {
                continue;
            }
            qs.eevdf.place(j);
            if let (Some(c), true, false) = (cur, cfg.preemption, ending) {
                if c != j && qs.eevdf.would_preempt(c, j) {
                    qs.preempt_by(r, cfg, c, j);
                }
            }
            // Between runs (a wake from the host between two turns): the
            // queue that ran last would continue under RUN_TO_PARITY; a
            // waking queue that would preempt it takes the pick instead.
            if let (None, Some(p), true) = (cur, r.current.prev.get(), cfg.preemption) {
                if p != j && qs.eevdf.would_preempt(p, j) {
                    r.current.prev.set(None);
                }
            }
        }
        qs.pending.clear();
        if ending {
            // Charged above: no poll is uncharged. The run ends here rather
            // than at a take from its empty queue (`end_run` sees the same
            // empty scheduler).
            r.clock.countdown_set.set(r.clock.countdown.get());
            r.end.stop.set(true);
        } else if let Some(c) = cur {
            // Amortised clock reads: the next checkpoint comes when what is
            // left of the running queue's request is used, now that it
            // contends (a lone queue's countdown only looked at the host
            // interval), or when min_run is over. The checkpoint above
            // charged every poll so far.
            r.reset_countdown(qs, c, cfg);
            // A placed queue may contend with a used-up slice, or preempt.
            r.update_stop(qs, cfg);
        }
    }

    /// A queue switch (every message of a ping-pong across queues): the
    /// running queue `cur`, alone runnable and without a latency
    /// requirement, ends its run with nothing left to run, and one queue
    /// is to be placed. Its departure (R7), which the run's end would do
    /// right after (`Run::end_run`, which finds it departed), is done here
    /// with the placement (R6) in one pass over the EEVDF table
    /// ([`Eevdf::switch_lone`](crate::eevdf::Eevdf::switch_lone)): the
    /// same table as `place` then `depart`. Returns whether it did (the
    /// pending queue is then placed); no preemption is decided, as none
    /// is for a run that ends.
    #[inline(always)]
    fn switch_now(&mut self, cur: Option<usize>) -> bool {
        let (Some(c), &[j]) = (cur, &self.pending[..]) else {
            return false;
        };
        if !self.lone_switch(c, j) {
            return false;
        }
        self.switched(j);
        self.eevdf.switch_lone(c, j);
        true
    }

    /// The queue a queue switch goes to at this poll boundary, if it is
    /// one, for the run of `c`, whose scheduler asks `want` of a run and
    /// allows a switch ([`SchedMode::switches`]: a built-in scheduler and
    /// no latency requirement): the run has nothing left to run
    /// (`run_ends_now`), `c` is the lone runnable queue, and the one queue
    /// to place, `j`, has a task and asks the same of a run (so it allows
    /// a switch too). The same as `run_ends_now` and
    /// [`lone_switch`](Self::lone_switch), with the checks `want` implies
    /// left out. Changes nothing.
    #[inline(always)]
    pub(super) fn switch_target(&self, held: &HeldIds, c: usize, want: SchedMode) -> Option<usize> {
        let &[j] = &self.pending[..] else {
            return None;
        };
        debug_assert!(want.switches() && self.list[c].mode.untimed() == want.untimed());
        let (sc, sj) = (&self.list[c], &self.list[j]);
        let go = held.pos.get() == held.len.get()
            && held.tail.len() == 0
            && self.eevdf.is_lone(c)
            && sc.sched.is_empty()
            && sj.mode == want
            && !sj.sched.is_empty();
        debug_assert!(!go || (self.run_ends_now(held, c) && self.lone_switch(c, j)));
        go.then_some(j)
    }

    /// Whether placing `j` and departing `c` is a queue switch: `c` is the
    /// lone runnable queue and has no latency requirement (whose departure
    /// ends the turn, R8e), and `j` has a task. (`j`, pending, is not
    /// runnable: a queue is pending only from a push that found it
    /// neither pending nor runnable until the boundary that places it.)
    #[inline(always)]
    fn lone_switch(&self, c: usize, j: usize) -> bool {
        debug_assert!(!self.eevdf.ents[j].runnable);
        self.eevdf.is_lone(c) && self.list[c].latency_ns.is_none() && !self.list[j].sched.is_empty()
    }

    /// The pending queue `j` is placed by a queue switch: no longer
    /// pending (`QueueState::switched_to`).
    #[inline(always)]
    pub(crate) fn switched(&mut self, j: usize) {
        self.list[j].switched_to(&mut self.pending);
    }

    /// Whether the running queue `c` has nothing left to run in this run:
    /// the run holds no ids (its batch is used up, nothing requeued) and
    /// its scheduler is empty (a built-in one, whose emptiness is exact).
    #[inline(always)]
    fn run_ends_now(&self, held: &HeldIds, c: usize) -> bool {
        held.pos.get() == held.len.get()
            && held.tail.len() == 0
            && !self.list[c].sched.is_custom()
            && self.list[c].sched.is_empty()
    }

    /// The placed queue `j` would preempt the running queue `c` (R9): at
    /// once if the run has lasted `min_run` (capped by `c`'s request) or
    /// `j`'s request is shorter; else once it has (E4's bound
    /// `min_run + p`): protected for now, not vetoed.
    #[inline(always)]
    fn preempt_by(&self, r: &RunState, cfg: &Config, c: usize, j: usize) {
        let (rc, rj) = (self.eevdf.ents[c].request_ns, self.eevdf.ents[j].request_ns);
        let ran = r
            .clock
            .last_ns
            .get()
            .saturating_sub(r.current.start_ns.get());
        let min_run = cfg.min_run_ns.min(rc);
        if ran >= min_run || rj < rc {
            r.end.preempt.set(true);
        } else if r.end.preempt_at.get().is_none() {
            // Saturated: near the end of the clock's range the preemption
            // is due at its last instant.
            r.end
                .preempt_at
                .set(Some(r.current.start_ns.get().saturating_add(min_run)));
        }
    }
}
