#![forbid(unsafe_code)]
//! Work at a poll boundary (between two polls of a run, or between runs):
//! remote work (foreign wakes, ops and the admission of remote spawns:
//! `remote/intake.rs`), aborts, the placement of queues
//! that became runnable (EEVDF R6) and the wake-up preemption decision
//! (R9). It may end the run in progress (through the stop flag); it never
//! polls.

use super::core::Core;
use super::queues::Queues;
use crate::task::harness::cancel_idle;

impl Core {
    /// Work at a poll boundary: foreign wakes, aborts, remote spawns the
    /// windows admit (`remote/intake.rs`), placement of queues that
    /// became runnable, and the wake-up preemption decision (R9).
    /// `turn_start`: the first boundary of a driver turn, which takes the
    /// inbox's spawns whatever the backlog holds. Inlined where it is
    /// called, so that the common boundary (a queue to place, nothing in
    /// the inbox, no abort) costs one call.
    #[inline(always)]
    pub(crate) fn boundary(&self, turn_start: bool) {
        self.attention.set(false);
        self.intake.at_boundary(self, turn_start);
        if !self.aborts.borrow().is_empty() {
            self.drop_aborted();
        }
        self.place_activations(true);
    }

    /// Drops the aborted idle tasks.
    #[cold]
    #[inline(never)]
    fn drop_aborted(&self) {
        let ids = std::mem::take(&mut *self.aborts.borrow_mut());
        for id in ids {
            if let Some(done) = cancel_idle(&self.tasks, id, self.panics.propagates()) {
                // A panic of the destructor is the task's, reported to its
                // join handle.
                self.finish(id, done, None, false);
            }
        }
    }

    /// Places the queues that became runnable and decides preemption.
    /// `between_polls`: called at a poll boundary (no task of the running
    /// queue is being polled), not from inside a poll (`should_yield`).
    #[inline(never)]
    pub(crate) fn place_activations(&self, between_polls: bool) {
        if self.queues.borrow().pending.is_empty() {
            return;
        }
        let r = &self.run;
        let cur = r.current.queue.get();
        // Charge the running queue first so that V is current (the
        // countdown and the stop flag are set below, once placed); unless
        // the last checkpoint was at this boundary (no poll since), whose
        // `slice_over` must stay as it is. The clock is read before the
        // queues are borrowed (it is user code).
        let charge = cur
            .filter(|_| r.clock.countdown_set.get() != r.clock.countdown.get())
            .map(|c| (c, self.now_ns()));
        let mut qs = self.queues.borrow_mut();
        if let Some((c, now)) = charge {
            r.charge(&mut qs, c, now, &self.cfg);
        }
        // Between polls, the running queue has nothing left to run: its run
        // ends at its next step whatever is placed, so neither a preemption
        // nor a new countdown would change anything. (Inside a poll the
        // task being polled may still yield or be woken, and a preemption
        // is what `should_yield` asks about.)
        let ending = between_polls && cur.is_some_and(|c| self.run_ends_now(&qs, c));
        // No user code runs below: nothing is pushed to `pending` meanwhile.
        for k in 0..qs.pending.len() {
            let j = qs.pending[k];
            qs.list[j].activation_pending = false;
            if qs.list[j].sched.is_empty() || qs.eevdf.ents[j].runnable {
                continue;
            }
            qs.eevdf.place(j);
            if let (Some(c), true, false) = (cur, self.cfg.preemption, ending) {
                if c != j && qs.eevdf.would_preempt(c, j) {
                    self.preempt_by(&qs, c, j);
                }
            }
            // Between runs (a wake from the host between two turns): the
            // queue that ran last would continue under RUN_TO_PARITY; a
            // waking queue that would preempt it takes the pick instead.
            if let (None, Some(p), true) = (cur, r.current.prev.get(), self.cfg.preemption) {
                if p != j && qs.eevdf.would_preempt(p, j) {
                    r.current.prev.set(None);
                }
            }
        }
        qs.pending.clear();
        drop(qs);
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
            let qs = self.queues.borrow();
            r.reset_countdown(&qs, c, &self.cfg);
            // A placed queue may contend with a used-up slice, or preempt.
            r.update_stop(&qs, &self.cfg);
        }
    }

    /// Whether the running queue `c` has nothing left to run in this run:
    /// the run holds no ids (its batch is used up, nothing requeued) and
    /// its scheduler is empty (a built-in one, whose emptiness is exact).
    #[inline]
    fn run_ends_now(&self, qs: &Queues, c: usize) -> bool {
        let held = &self.run.held;
        held.pos.get() == held.len.get()
            && held.tail.len() == 0
            && !qs.list[c].sched.is_custom()
            && qs.list[c].sched.is_empty()
    }

    /// The placed queue `j` would preempt the running queue `c` (R9): at
    /// once if the run has lasted `min_run` (capped by `c`'s request) or
    /// `j`'s request is shorter; else once it has (E4's bound
    /// `min_run + p`): protected for now, not vetoed.
    #[inline(always)]
    fn preempt_by(&self, qs: &Queues, c: usize, j: usize) {
        let r = &self.run;
        let (rc, rj) = (qs.eevdf.ents[c].request_ns, qs.eevdf.ents[j].request_ns);
        let ran = r
            .clock
            .last_ns
            .get()
            .saturating_sub(r.current.start_ns.get());
        let min_run = self.cfg.min_run_ns.min(rc);
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
