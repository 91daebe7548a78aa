#![forbid(unsafe_code)]
//! The run loop: one *turn* runs queues until nothing is runnable or the
//! host-yield budget is spent; one *run* gives one queue the thread until a
//! boundary.
//!
//! ```text
//! turn:  release deferred yields; read clock
//!        loop { boundary work; pick queue (EEVDF R5); run it } until budget
//! run:   loop { pop task; poll; [checkpoint]; requeue/complete;
//!               boundary work if flagged; end? }
//!        checkpoint; depart if empty (R7)
//! ```
//!
//! A **checkpoint** reads the clock, charges the time since the previous
//! checkpoint to the running queue (R1), renews its deadline when its
//! request is used (R4) and checks the host-yield interval. It happens at
//! every run end, and inside a run:
//! * after every poll when the clock is cheap (`Clock::is_cheap`, e.g. the
//!   virtual clock of tests) or the queue's scheduler wants per-poll timing:
//!   runs then end exactly at the first poll boundary after the slice (R8);
//! * otherwise after as many polls as the running estimate of the queue's
//!   poll cost says fit in what is left of the slice and of the host
//!   interval (after one poll while the queue has no estimate, or an
//!   estimate of 0): an `Instant::now()` (25 to 70 ns on the
//!   machines measured) per poll would cost more
//!   than the poll itself.
//!
//! With one runnable queue its slice does not end its run (the EEVDF pick
//! would choose it again); the run still ends at the host-yield budget
//! (`max_polls` polls or the turn's host interval, R8d). The host interval
//! is the builder's `host_yield_interval`, or the shortest latency
//! requirement (`QueueSpec::latency`) of a queue that waits for the host,
//! computed at the start of the turn and again when such a queue departs.

use std::rc::Rc;
use std::time::Duration;

use super::batch::Held;
use super::core::{bump, Core};
use super::inbox::RemoteOp;
use super::queues::Queues;
use crate::boundary;
use crate::stats::Stall;
use crate::task::id::TaskId;
use crate::task::raw::Finish;
use crate::task::slab::{cancel_idle, poll_task, Done, Next, Panics, Polled, Spurious};

/// What [`Core::observe_before`] read before a poll.
struct Observed {
    ready_ns: Option<u64>,
    name: Option<Rc<str>>,
}

/// A `tracing` span entered for a run or a poll: the subscriber's code
/// that enters and leaves it is user code, behind the panic boundary.
#[cfg(feature = "tracing")]
struct Traced<'a> {
    span: Option<tracing::span::EnteredSpan>,
    sink: &'a crate::boundary::PanicSink,
}

#[cfg(feature = "tracing")]
impl<'a> Traced<'a> {
    fn enter(
        sink: &'a crate::boundary::PanicSink,
        f: impl FnOnce() -> tracing::span::EnteredSpan,
    ) -> Self {
        Self {
            span: sink.check(boundary::call(f)),
            sink,
        }
    }
}

#[cfg(feature = "tracing")]
impl Drop for Traced<'_> {
    fn drop(&mut self) {
        if let Some(span) = self.span.take() {
            self.sink.check(boundary::call(move || drop(span)));
        }
    }
}

/// Whether work remains after a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Tasks are runnable (or yielded, waiting for the next turn).
    Busy,
    /// Nothing to do until a wake.
    Idle,
}

impl Core {
    /// One driver turn. `follows`: the driver runs it right after a busy
    /// turn, with nothing in between (no host turn, no poll of its own
    /// future, no park): the clock reading of that turn's last checkpoint
    /// is then its start, which saves a clock read (an `rdtsc`) per turn
    /// of 61 polls: 368.7 → 356.8 M cycles for a million headline tasks
    /// (`perf stat`; PROFILING.md, "Applied in the seventh session"). The
    /// gap, the driver's own few instructions, goes to the first run's
    /// charge.
    ///
    /// A panic that the panic policy propagates (`crate::boundary`)
    /// resumes from here, at the end of the turn, with the executor's
    /// state whole.
    pub(crate) fn run_turn(&self, follows: bool) -> Turn {
        let turn = self.turn(follows);
        self.panics.rethrow();
        turn
    }

    #[inline(always)]
    fn turn(&self, follows: bool) -> Turn {
        self.release_deferred();
        let now = if follows && !self.cheap_clock {
            self.run.clock.last_ns.get()
        } else {
            self.now_ns()
        };
        let r = &self.run;
        r.turn.start_ns.set(now);
        self.update_host_interval();
        r.clock.last_ns.set(now);
        r.turn.polls_left.set(self.cfg.max_polls);
        r.turn.over.set(false);
        bump(&self.counters.turns);
        loop {
            self.boundary();
            let picked = self
                .queues
                .borrow_mut()
                .eevdf
                .pick(r.current.prev.get(), self.cfg.general_pick);
            let Some(q) = picked else {
                return if self.deferred.borrow().is_empty()
                    && self.deferred_wakers.borrow().is_empty()
                {
                    Turn::Idle
                } else {
                    Turn::Busy
                };
            };
            // A held panic resumes out of the driver, which returns here
            // only after it (`PanicSink::rethrow`).
            if self.run_queue(q) || self.panics.holds() {
                return Turn::Busy;
            }
        }
    }

    /// Sets the turn's host-yield interval from the queues that wait now
    /// ([`QueueSpec::latency`](crate::QueueSpec::latency)).
    fn update_host_interval(&self) {
        let interval = self
            .queues
            .borrow()
            .host_interval_ns(self.cfg.host_yield_interval_ns);
        self.run.turn.host_interval_ns.set(interval);
    }

    /// Deferred yields of the previous turn become runnable.
    fn release_deferred(&self) {
        if !self.deferred.borrow().is_empty() {
            let ids = std::mem::take(&mut *self.deferred.borrow_mut());
            for &id in &ids {
                let target = self.tasks.borrow().deferred_target(id);
                if let Some((q, g)) = target {
                    self.push_task(q, id, g);
                }
            }
            let mut slot = self.deferred.borrow_mut();
            if slot.is_empty() {
                let mut ids = ids;
                ids.clear();
                *slot = ids;
            }
        }
        if !self.deferred_wakers.borrow().is_empty() {
            let wakers = std::mem::take(&mut *self.deferred_wakers.borrow_mut());
            for w in wakers {
                self.panics.check(boundary::call(move || w.wake()));
            }
        }
    }

    /// Whether more than one queue competes (or the general pick is forced):
    /// only then does a used-up slice end a run.
    fn contended(&self) -> bool {
        self.cfg.general_pick || self.queues.borrow().eevdf.runnable_count() > 1
    }

    /// Runs queue `q` until a boundary ends the run. Returns `true` when
    /// the turn's budget is spent.
    ///
    /// Two instances of one loop: the common one (a real clock read every
    /// few polls, no per-poll timing or observation) has those branches
    /// compiled out (9 instructions per headline task, callgrind; with
    /// `poll_task` inlined into each instance, the larger part of the
    /// change listed in PROFILING.md, "Findings").
    #[inline(always)]
    fn run_queue(&self, q: usize) -> bool {
        let (sched_timing, tell_polled) = {
            let mut qs = self.queues.borrow_mut();
            qs.list[q].counters.runs += 1;
            (qs.list[q].timing, !qs.list[q].sched.is_stateless())
        };
        if sched_timing || self.cfg.per_poll_timing || self.cheap_clock {
            self.run_queue_in::<true>(q, sched_timing, tell_polled)
        } else {
            self.run_queue_in::<false>(q, false, tell_polled)
        }
    }

    /// The run loop of [`run_queue`](Self::run_queue); with `PER_POLL`
    /// false, the caller has checked that no per-poll clock read or
    /// observation is asked for.
    #[inline(always)]
    fn run_queue_in<const PER_POLL: bool>(
        &self,
        q: usize,
        sched_timing: bool,
        tell_polled: bool,
    ) -> bool {
        #[cfg(feature = "tracing")]
        let _run_span = {
            let name = self.queues.borrow().list[q].name.clone();
            Traced::enter(&self.panics, || {
                tracing::debug_span!("run", queue = %name, index = q).entered()
            })
        };
        // Per-poll durations: for a timing scheduler, the stall detector
        // and the latency histograms.
        let observe = PER_POLL && self.cfg.per_poll_timing;
        let timing = PER_POLL && (sched_timing || observe);
        bump(&self.counters.runs);
        // Exact slice ends (a clock read and an EEVDF charge after every
        // poll) only with a cheap clock; per-poll durations on a real clock
        // come from one clock read per poll, while the EEVDF charge stays
        // amortised.
        let precise = PER_POLL && self.cheap_clock;
        let mut poll_start = self.run.clock.last_ns.get();
        let r = &self.run;
        r.current.queue.set(Some(q));
        r.current.start_ns.set(r.clock.last_ns.get());
        r.end.slice_over.set(false);
        r.end.renewed.set(false);
        r.end.preempt.set(false);
        r.end.preempt_at.set(None);
        r.end.requested.set(false);
        r.end.stop.set(false);
        self.reset_countdown(q);
        let defer_yields = self.nested.get();
        let propagate = self.panics.propagates();
        // The poll marker of an enclosing task (nested executors), put back
        // when the run ends.
        let _marker = super::context::begin_run();
        // `pop` returned `None`: the queue has nothing to run, whatever its
        // scheduler's `len` says (a scheduler that breaks the contract must
        // not make the executor spin on an empty queue).
        let mut drained = false;
        // A `RunnableFifo` (no `polled` to call), no ready stamp to record
        // and not nested (a yield is requeued, not deferred to the host's
        // next turn): a task runnable again, woken or yielded, goes behind
        // the queued ones through the run's tail.
        let fifo_requeue = !(tell_polled || defer_yields || (observe && self.cfg.latency));
        let mut held = Held::new(self, q);
        // The record of a task that ended (`poll_task`).
        let mut done = None;
        // Few values live across the poll (the call clobbers the others):
        // the site and the poll count are in `RunState`, the batch bounds
        // in `Held`'s cells (PROFILING.md, "Applied in the seventh session").
        loop {
            let Some(id) = held.next() else {
                drained = true;
                break;
            };
            if precise {
                // The clock was read at the end of the previous poll: that
                // reading is this poll's start.
                poll_start = r.clock.last_ns.get();
            }
            let this_start = poll_start;
            // Read before the poll: a task that completes is removed.
            let observed = if observe {
                Some(self.observe_before(id))
            } else {
                None
            };
            #[cfg(feature = "tracing")]
            let poll_span = Traced::enter(&self.panics, || {
                tracing::trace_span!("poll", queue = q, task = %id).entered()
            });
            let site = r.second_site.get();
            // Nested (`defer_yields` is `self.nested`): tokio's budget for
            // this poll alone (`crate::coop`).
            #[cfg(feature = "tokio")]
            let budget = if defer_yields {
                crate::coop::task_budget()
            } else {
                None
            };
            let polled = poll_task(&self.tasks, id, propagate, site, &mut done);
            #[cfg(feature = "tokio")]
            drop(budget);
            #[cfg(feature = "tracing")]
            drop(poll_span);
            match polled {
                Polled::Stale => continue,
                // Before anything else can panic (the checkpoint's clock
                // read): the panics of the task's end go to the sink in the
                // order they happened.
                Polled::Done => self.report_panics_of(&mut done),
                Polled::Pending(_) => {}
            }
            r.second_site.set(!site);
            // `countdown >= 1` before every poll (see `countdown`); the
            // checkpoint counts the polls since the last one.
            let countdown = r.clock.countdown.get() - 1;
            r.clock.countdown.set(countdown);
            if precise || countdown == 0 {
                self.checkpoint(q);
            }
            // The whole poll, even if `should_yield` charged part of it
            // from inside the poll: one clock read per poll, shared with the
            // next poll's start.
            let elapsed = if !timing {
                None
            } else if precise {
                Some(r.clock.last_ns.get().saturating_sub(this_start))
            } else {
                let now = self.now_ns();
                poll_start = now;
                Some(now.saturating_sub(this_start))
            };
            if let Some(before) = observed {
                self.observe_after(q, id, before, this_start, elapsed.unwrap_or(0));
            }
            let sched_elapsed = elapsed.filter(|_| sched_timing).map(Duration::from_nanos);
            match polled {
                // Waiting for a wake, and no `polled` to tell: nothing to do.
                Polled::Pending(Next::Wait) if !tell_polled => {}
                Polled::Pending(_) if fifo_requeue => self.requeue_fifo(id),
                Polled::Pending(next) => {
                    let end = observe.then(|| this_start.saturating_add(elapsed.unwrap_or(0)));
                    self.pending_again(q, id, next, sched_elapsed, tell_polled, end);
                }
                Polled::Done => {
                    if let Some(done) = done.take() {
                        self.finish(id, done, sched_elapsed, true);
                        if self.panics.holds() {
                            // Resumed out of the driver (`Propagate`).
                            break;
                        }
                    }
                }
                Polled::Stale => unreachable!("handled above"),
            }
            if self.attention.get() || self.remote.has_pending() {
                self.boundary();
            }
            if r.end.stop.get() {
                break;
            }
        }
        held.put_back();
        self.end_run(q, drained)
    }

    /// The scheduler of queue `q` handed out `id`, which was not its to
    /// hand out: a contract violation, counted (debug builds: resumed out of
    /// the driver with this message). The task is not polled.
    #[cold]
    #[inline(never)]
    pub(crate) fn refused(&self, qs: &Queues, q: usize, id: TaskId, why: Spurious) {
        let name = &qs.list[q].name;
        self.panics.violation(|| match why {
            Spurious::OtherQueue(other) => format!(
                "queue {name}: pop() returned task {id:?}, which belongs to queue {} \
                 (rule: pop returns only ids given to push)",
                qs.list[other].name
            ),
            Spurious::NotQueued => format!(
                "queue {name}: pop() returned task {id:?}, which was not pushed since it was \
                 last popped (rule: one pop per push; an id returned twice or never given)"
            ),
        });
    }

    /// A task of queue `q` is pending after its poll and not requeued
    /// through the run's tail: `polled` for a scheduler that wants it, the
    /// push of a task runnable again (the contract: both in one dispatch),
    /// the deferral of a yield while nested, the ready stamp (`ready_at`,
    /// the end of the poll) for the latency histogram. Out of line: the
    /// headline's polls never come here.
    #[inline(never)]
    fn pending_again(
        &self,
        q: usize,
        id: TaskId,
        next: Next,
        elapsed: Option<Duration>,
        tell_polled: bool,
        ready_at: Option<u64>,
    ) {
        let defer = next == Next::Yield && self.nested.get();
        let requeue = next != Next::Wait && !defer;
        // The running queue is runnable for the whole run (it departs only
        // in `end_run`), so a requeue cannot activate it: no activation
        // check here. A waiting task of a scheduler that ignores `polled`
        // needs no call at all.
        if tell_polled || requeue {
            let group = self.tasks.borrow().group_of_id(id);
            self.queues.borrow_mut().list[q]
                .sched
                .polled_pending(id, group, elapsed, requeue);
        }
        if defer {
            self.deferred.borrow_mut().push(id);
        }
        if let Some(end) = ready_at.filter(|_| self.cfg.latency && next != Next::Wait) {
            // Runnable again from the end of this poll.
            self.tasks.borrow_mut().set_ready(id, end);
        }
    }

    /// Ends the run of `q`: charges the rest, departs if empty (R7).
    fn end_run(&self, q: usize, drained: bool) -> bool {
        let r = &self.run;
        if r.clock.countdown_set.get() != r.clock.countdown.get() {
            self.checkpoint(q);
        }
        {
            let mut qs = self.queues.borrow_mut();
            let empty = qs.list[q].sched.ran_dry(drained);
            if empty && qs.eevdf.ents[q].runnable {
                qs.eevdf.depart(q);
                if qs.list[q].latency_ns.is_some() {
                    // A latency-sensitive queue now waits for the host.
                    drop(qs);
                    self.update_host_interval();
                }
            }
        }
        // RUN_TO_PARITY protects the request the queue was picked with,
        // and only that one (Linux's `protect_slice`: the protection ends
        // when the deadline is renewed). So the next pick is the general
        // one when that request is used (R4 renewed it during this run),
        // or when a waker was entitled to preempt the run (or soon would
        // be, after min_run).
        let protected =
            !(r.end.renewed.get() || r.end.preempt.get() || r.end.preempt_at.get().is_some());
        r.current.prev.set(protected.then_some(q));
        r.current.queue.set(None);
        r.turn.polls_left.get() == 0 || r.turn.over.get()
    }

    /// Reads the clock and charges the time since the last checkpoint to
    /// queue `q` (R1, R4), then sets the countdown to the next one and
    /// whether the run stops here. Returns the time charged.
    pub(crate) fn checkpoint(&self, q: usize) -> u64 {
        let delta = self.charge_now(q);
        self.reset_countdown(q);
        self.update_stop();
        delta
    }

    /// The charge of [`checkpoint`](Self::checkpoint), without the
    /// countdown and the stop flag, which the caller must set.
    fn charge_now(&self, q: usize) -> u64 {
        let now = self.now_ns();
        let r = &self.run;
        let delta = now.saturating_sub(r.clock.last_ns.get());
        r.clock.last_ns.set(now);
        let polls = r.clock.countdown_set.get() - r.clock.countdown.get();
        r.turn
            .polls_left
            .set(r.turn.polls_left.get().saturating_sub(polls));
        self.counters
            .polls
            .set(self.counters.polls.get() + u64::from(polls));
        {
            let mut qs = self.queues.borrow_mut();
            if qs.eevdf.charge(q, delta) {
                r.end.slice_over.set(true);
                r.end.renewed.set(true);
            } else if qs.eevdf.runnable_count() == 1 && !self.cfg.general_pick {
                // Alone, a used request does not end the run (R5 would pick
                // the queue again) and R4 renewed it: once another queue
                // is placed, the run ends when the request in force is
                // used (R8b), not at once.
                r.end.slice_over.set(false);
            }
            let st = &mut qs.list[q];
            st.counters.service_ns = st.counters.service_ns.saturating_add(delta);
            st.counters.polls += u64::from(polls);
            if polls > 0 {
                let per = delta / polls as u64;
                st.poll_cost_ns = if st.poll_cost_ns == 0 {
                    per
                } else {
                    // In 128 bits: after a jump of the clock `3·cost + per`
                    // can pass `u64::MAX`; the average itself fits in 64
                    // bits, and `/ 4` is a shift.
                    ((3 * st.poll_cost_ns as u128 + per as u128) / 4) as u64
                };
            }
        }
        if now.saturating_sub(r.turn.start_ns.get()) >= r.turn.host_interval_ns.get() {
            r.turn.over.set(true);
        }
        if r.end.preempt_at.get().is_some_and(|at| now >= at) {
            r.end.preempt.set(true);
        }
        delta
    }

    /// Whether the run in progress must end at this poll boundary.
    pub(crate) fn update_stop(&self) {
        let r = &self.run;
        r.end.stop.set(
            r.turn.polls_left.get() == 0
                || r.turn.over.get()
                || r.end.preempt.get()
                || r.end.requested.get()
                || (r.end.slice_over.get() && self.contended()),
        );
    }

    /// Sets the countdown to the next checkpoint; only right after a
    /// checkpoint (or at a run's start), when no poll is uncharged.
    pub(crate) fn reset_countdown(&self, q: usize) {
        let n = self.countdown(q);
        self.run.clock.countdown.set(n);
        self.run.clock.countdown_set.set(n);
    }

    /// Polls that fit before the next needed checkpoint (amortised mode).
    fn countdown(&self, q: usize) -> u32 {
        let r = &self.run;
        if r.turn.polls_left.get() <= 1 {
            // The turn's last poll (or past it): nothing to divide. At the
            // end of every full turn (callgrind).
            return 1;
        }
        let qs = self.queues.borrow();
        let elapsed = r.clock.last_ns.get().saturating_sub(r.turn.start_ns.get());
        let mut left = r.turn.host_interval_ns.get().saturating_sub(elapsed);
        if self.cfg.general_pick || qs.eevdf.runnable_count() > 1 {
            left = left.min(qs.eevdf.slice_left_ns(q));
        }
        if let Some(at) = r.end.preempt_at.get() {
            left = left.min(at.saturating_sub(r.clock.last_ns.get()));
        }
        let cost = qs.list[q].poll_cost_ns;
        if cost == 0 {
            // No cost known: no poll of this queue measured yet, or its
            // polls took no time the clock could see. Check after the next
            // poll, whatever it costs: counted as 1 ns, `max_polls` polls of
            // unknown length could run far beyond the slice and the host
            // interval (61 ms for polls of 1 ms).
            return 1;
        }
        (left / cost).clamp(1, r.turn.polls_left.get().max(1) as u64) as u32
    }

    /// Work at a poll boundary: foreign wakes, aborts, placement of queues
    /// that became runnable, and the wake-up preemption decision (R9).
    pub(crate) fn boundary(&self) {
        self.attention.set(false);
        if self.remote.has_pending() {
            let (mut ids, mut ops) = (Vec::new(), Vec::new());
            self.remote.drain_into(&mut ids, &mut ops);
            for id in ids {
                self.tasks.borrow().clear_remote_notified(id);
                self.wake_local(id);
            }
            for op in ops {
                match op {
                    // The op may drop a future (aborted before it started),
                    // or a task's spawn may wake a host: user code.
                    RemoteOp::Spawn(spawn) => {
                        self.panics.check(boundary::call(|| spawn(self)));
                    }
                    RemoteOp::Abort(id) => self.abort(id),
                }
            }
        }
        if !self.aborts.borrow().is_empty() {
            let ids = std::mem::take(&mut *self.aborts.borrow_mut());
            for id in ids {
                if let Some(done) = cancel_idle(&self.tasks, id, self.panics.propagates()) {
                    // A panic of the destructor is the task's, reported to
                    // its join handle.
                    self.finish(id, done, None, false);
                }
            }
        }
        self.place_activations();
    }

    /// Places the queues that became runnable and decides preemption.
    pub(crate) fn place_activations(&self) {
        if self.queues.borrow().pending.is_empty() {
            return;
        }
        let r = &self.run;
        let cur = r.current.queue.get();
        if let Some(c) = cur {
            // Charge the running queue first so that V is current (the
            // countdown and the stop flag are set below, once placed);
            // unless the last checkpoint was at this boundary (no poll
            // since), whose `slice_over` must stay as it is.
            if r.clock.countdown_set.get() != r.clock.countdown.get() {
                self.charge_now(c);
            }
        }
        let mut qs = self.queues.borrow_mut();
        let mut pending = std::mem::take(&mut qs.pending);
        for &j in &pending {
            qs.list[j].activation_pending = false;
            if qs.list[j].sched.is_empty() || qs.eevdf.ents[j].runnable {
                continue;
            }
            qs.eevdf.place(j);
            if let (Some(c), true) = (cur, self.cfg.preemption) {
                if c != j && qs.eevdf.would_preempt(c, j) {
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
                        // Protected for now, not vetoed: preempt once the
                        // run has lasted min_run.
                        // Saturated: near the end of the clock's range
                        // the preemption is due at its last instant.
                        r.end
                            .preempt_at
                            .set(Some(r.current.start_ns.get().saturating_add(min_run)));
                    }
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
        pending.clear();
        if qs.pending.is_empty() {
            qs.pending = pending;
        }
        drop(qs);
        if let Some(c) = cur {
            // Amortised clock reads: the next checkpoint comes when what is
            // left of the running queue's request is used, now that it
            // contends (a lone queue's countdown only looked at the host
            // interval), or when min_run is over. The checkpoint above
            // charged every poll so far.
            self.reset_countdown(c);
            // A placed queue may contend with a used-up slice, or preempt.
            self.update_stop();
        }
    }

    /// Book-keeping for a task that ended; its panic, taken for
    /// `Propagate`, goes to the panic sink.
    #[inline(always)]
    fn finish(&self, id: TaskId, done: Done, elapsed: Option<Duration>, polled: bool) {
        let Done {
            queue,
            group,
            finish,
            cancelled,
            panics,
        } = done;
        // First: they happened as the task ended, before the scheduler
        // calls below (which may panic too).
        if let Some(panics) = panics {
            self.report_panics(*panics);
        }
        // A task's own group ends with it; a keyed group when its last task
        // does.
        let own_group = group.is_task_group();
        let group_over = own_group || self.groups.borrow_mut().leave(group);
        let mut qs = self.queues.borrow_mut();
        let st = &mut qs.list[queue];
        match (finish, cancelled) {
            (Finish::Panicked, _) => st.counters.panicked += 1,
            (_, true) => st.counters.cancelled += 1,
            _ => st.counters.completed += 1,
        }
        // `RunnableFifo` keeps no per-task or per-group state: its
        // `polled`, `forget` and `group_ended` do nothing, and are skipped.
        if !st.sched.is_stateless() {
            if polled {
                st.sched.polled(id, group, elapsed, true);
            } else {
                st.sched.forget(id, group);
            }
            if own_group {
                st.sched.group_ended(group);
            }
        }
        if group_over && !own_group {
            qs.group_ended(queue, group);
        }
    }

    /// Sends the panics of a task's end, if any, to the panic sink.
    #[inline(always)]
    fn report_panics_of(&self, done: &mut Option<Done>) {
        if let Some(panics) = done.as_mut().and_then(|d| d.panics.take()) {
            self.report_panics(*panics);
        }
    }

    #[cold]
    #[inline(never)]
    fn report_panics(&self, panics: Panics) {
        let Panics { task, caught } = panics;
        if let Some(p) = task {
            self.panics.report_task(p);
        }
        for p in caught {
            self.panics.report(p);
        }
    }

    /// What the observability needs from before a poll (histograms, stall
    /// detector): when the task became runnable, and its name.
    #[cold]
    #[inline(never)]
    fn observe_before(&self, id: TaskId) -> Observed {
        let tasks = self.tasks.borrow();
        Observed {
            ready_ns: if self.cfg.latency {
                tasks.ready_ns(id)
            } else {
                None
            },
            name: if self.cfg.stall_ns != u64::MAX {
                tasks.name(id)
            } else {
                None
            },
        }
    }

    /// After a poll that started at `start_ns` and took `elapsed_ns`:
    /// records its wake-to-first-poll delay and reports a stall.
    #[cold]
    #[inline(never)]
    fn observe_after(
        &self,
        q: usize,
        id: TaskId,
        before: Observed,
        start_ns: u64,
        elapsed_ns: u64,
    ) {
        if let Some(ready) = before.ready_ns {
            self.queues.borrow_mut().list[q]
                .counters
                .wake_latency
                .record_ns(start_ns.saturating_sub(ready));
        }
        if elapsed_ns >= self.cfg.stall_ns {
            self.report_stall(q, id, before.name, elapsed_ns);
        }
    }

    /// A poll ran at least the stall threshold: count it and tell the
    /// callback (no borrow held; a panic of the callback is discarded).
    #[cold]
    fn report_stall(&self, q: usize, id: TaskId, name: Option<Rc<str>>, ns: u64) {
        let queue = {
            let mut qs = self.queues.borrow_mut();
            qs.list[q].counters.stalls += 1;
            qs.list[q].name.clone()
        };
        // A clone of the callback, called with no borrow held: it may drop
        // the executor, which drops the callback.
        let report = self.stall_report.borrow().clone();
        if let Some(report) = report {
            let stall = Stall {
                queue,
                queue_index: q,
                task: id,
                name: name.map(|n| n.to_string()),
                duration: Duration::from_nanos(ns),
            };
            self.panics.check(boundary::call(|| report(&stall)));
        }
    }

    /// `should_yield()`: would the current run end at this boundary?
    pub(crate) fn should_yield(&self) -> bool {
        if !self.driving.get() || !super::context::in_task_poll() {
            return false;
        }
        let Some(q) = self.run.current.queue.get() else {
            return false;
        };
        self.checkpoint(q);
        self.place_activations();
        let r = &self.run;
        let yes = r.end.preempt.get()
            || r.turn.over.get()
            || r.end.requested.get()
            || (r.end.slice_over.get() && self.contended());
        if yes {
            r.end.requested.set(true);
            r.end.stop.set(true);
        }
        yes
    }
}
