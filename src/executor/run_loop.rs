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
//! It owns the poll and the run's life: it picks a queue (EEVDF), takes
//! its tasks through [`Held`], polls them, requeues or finishes them, and
//! ends the run when the stop flag says so. It does not know any
//! scheduler's internals (it speaks to a queue through `QueueScheduler`),
//! charges time only through checkpoints (`accounting`), and leaves the
//! work at a poll boundary to `placement` and observation to `observe`.
//! This is the crate's hottest path: its helpers are `#[inline(always)]`,
//! so the loop compiles to the code of one function per `PER_POLL`.
//!
//! With one runnable queue its slice does not end its run (the EEVDF pick
//! would choose it again); the run still ends at the host-yield budget
//! (`max_polls` polls or the turn's host interval, R8d). The host interval
//! is the builder's `host_yield_interval`, or the shortest latency
//! requirement (`QueueSpec::latency`) of a queue that waits for the host,
//! computed at the start of the turn and again when such a queue departs.

use std::time::Duration;

use super::accounting::contended;
use super::batch::Held;
use super::context::TaskScope;
use super::core::Core;
#[cfg(feature = "tracing")]
use super::observe::Observer;
use super::queues::Queues;
use super::run_state::bump;
use crate::boundary;
use crate::error::quarantine::Quarantine;
use crate::task::harness::{cancel_idle, end_idle_with, poll_task, Done, Next, Panics, Polled};
use crate::task::id::{GroupId, TaskKey};
use crate::task::raw::Finish;
use crate::task::slab::Spurious;

/// What stays the same for the whole of one run: which per-poll work it
/// does. With `PER_POLL` false, its timing and observation flags are the
/// constant `false` and their branches compile out.
#[derive(Clone, Copy)]
struct RunMode {
    /// Observation around each poll (stall detector, latency histograms).
    observe: bool,
    /// A clock read per poll for the poll's duration.
    timing: bool,
    /// The scheduler takes the poll's duration (`Scheduler::polled`).
    sched_timing: bool,
    /// A checkpoint after every poll (a cheap clock): exact slice ends.
    precise: bool,
    /// The scheduler is told of every poll (not a `RunnableFifo`).
    tell_polled: bool,
    /// A task runnable again goes behind through the run's tail.
    fifo_requeue: bool,
    /// A batching `Las`: a task of its own group runnable again goes to
    /// the run's tail with its poll's duration (charged, and its level
    /// chosen, when the tail is pushed); any other poll is charged at once
    /// (`charge_las`).
    las_requeue: bool,
    /// Nested in a host: each poll gets a tokio budget of its own.
    #[cfg(feature = "tokio")]
    own_budget: bool,
    /// The panic policy resumes panics out of the driver.
    propagate: bool,
}

/// What the running queue's scheduler asks of the run: per-poll durations
/// (`timing`), `polled` calls (`tell_polled`), the batch path of a `Las`
/// (`las`).
#[derive(Clone, Copy)]
struct SchedMode {
    timing: bool,
    tell_polled: bool,
    las: bool,
}

/// Whether the run goes on after a poll.
#[must_use = "`EndRun` must end the run: a stop, a preemption or a held panic would be ignored"]
enum Step {
    /// Poll the next task.
    Next,
    /// The run ends at this boundary.
    EndRun,
}

/// Whether work remains after a turn.
#[must_use = "a driver must run another turn when `Busy`, or wait for a wake when `Idle`"]
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
    /// of 61 polls (about 3% of the cycles of the headline workload;
    /// `perf stat`). The gap, the driver's own few instructions, goes to
    /// the first run's charge.
    ///
    /// A panic that the panic policy propagates (`crate::boundary`)
    /// resumes from here, at the end of the turn, with the executor's
    /// state whole; a quarantine a custom scheduler reached is settled
    /// here first (`executor/quarantine.rs`), and the turn is then `Busy`
    /// (its ends may have woken tasks or the driver's own future).
    pub(crate) fn run_turn(&self, follows: bool) -> Turn {
        let turn = self.turn(follows);
        if self.panics.holds() {
            return self.after_held(turn);
        }
        turn
    }

    /// The end of a turn after which the panic sink holds something: a
    /// quarantine to settle, a panic to resume.
    #[cold]
    #[inline(never)]
    fn after_held(&self, turn: Turn) -> Turn {
        let turn = if self.settle_quarantines() {
            Turn::Busy
        } else {
            turn
        };
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
        bump(&self.run.counters.turns);
        self.boundary(true);
        loop {
            // The pick and the start of the run it picks, under one borrow.
            let started = {
                let mut qs = self.queues.borrow_mut();
                let picked = qs.eevdf.pick(r.current.prev.get(), self.cfg.general_pick);
                picked.map(|q| (q, self.start_run(&mut qs, q)))
            };
            let Some((q, kind)) = started else {
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
            if self.run_queue(q, kind) || self.panics.holds() {
                return Turn::Busy;
            }
            // Whatever needs boundary work (a placement, an abort, the
            // inbox) set `attention` or the inbox's flag.
            if self.attention.get() || self.intake.inbox.has_pending() {
                self.boundary(false);
            }
        }
    }

    // The quarantine of a queue whose custom scheduler keeps panicking
    // (`QUARANTINE_AFTER` panics in a row of one of its methods; see
    // `src/sched/guarded.rs`): the scheduler stops calling the user's code
    // at once and tells the panic sink; the turn settles it at its end,
    // where no run is in progress, no task is being polled and no borrow
    // is held: the queue leaves the EEVDF runnable set for good, its
    // scheduler is dropped, its tasks end (their join handles read the
    // quarantine's panic `JoinError`), and so do the remote spawns that wait
    // for it in the remote backlog. From then on a local spawn onto it is
    // refused (`SpawnError::Quarantined`) and a remote one ends as its
    // tasks did.

    /// Settles every quarantine the schedulers asked for (the sink's
    /// request, [`PanicSink::take_quarantine`](crate::boundary::PanicSink::take_quarantine)).
    /// Returns whether there was one. Ending tasks runs user code
    /// (destructors, wakers), which may quarantine another queue: settled
    /// in the same call.
    #[cold]
    #[inline(never)]
    pub(crate) fn settle_quarantines(&self) -> bool {
        let mut any = false;
        while self.panics.take_quarantine() {
            any = true;
            loop {
                let taken = {
                    let mut qs = self.queues.borrow_mut();
                    qs.list
                        .iter_mut()
                        .enumerate()
                        .find_map(|(q, st)| st.sched.take_quarantined().map(|t| (q, t)))
                };
                let Some((q, (why, scheduler))) = taken else {
                    break;
                };
                self.quarantine_queue(q, why);
                // The user's scheduler: its destructor is user code.
                if let Some(p) = boundary::drop_caught(scheduler) {
                    self.panics.report(p);
                }
                self.end_quarantined_tasks(q);
            }
        }
        any
    }

    /// Marks queue `q` quarantined (refusing spawns from here on) and takes
    /// it out of the EEVDF runnable set (`Queues::quarantine`).
    fn quarantine_queue(&self, q: usize, why: Quarantine) {
        let latency = self.queues.borrow_mut().quarantine(q, why);
        self.any_quarantine.set(true);
        if latency {
            // A latency-sensitive queue left: the host interval may change.
            self.update_host_interval();
        }
    }

    /// Ends every task of quarantined queue `q` unpolled, and the remote
    /// spawns that wait for it in the backlog. Passes until none is left:
    /// a destructor or a waker may wake a task of the queue, never add one
    /// (spawns onto it are refused).
    fn end_quarantined_tasks(&self, q: usize) {
        let payload = self
            .quarantine_of(q)
            .expect("tourbillon bug: ending the tasks of a queue that is not quarantined")
            .task_payload();
        let propagate = self.panics.propagates();
        loop {
            let ids = self.tasks.borrow().ids_in_queue(q);
            let mut ended_any = false;
            for id in ids {
                let ended = end_idle_with(&self.tasks, id, propagate, || Box::new(payload.clone()));
                if let Some((done, destructor)) = ended {
                    ended_any = true;
                    // The future's destructor is not the task's result here:
                    // a panic of other user code.
                    if let Some(p) = destructor {
                        self.panics.report(p);
                    }
                    self.finish(id, done, None, false);
                }
            }
            if !ended_any {
                break;
            }
        }
        self.intake.end_line(self, q);
    }

    /// Reads the clock and charges the time since the last checkpoint to
    /// queue `q` (R1, R4), then sets the countdown to the next one and
    /// whether the run stops here (`RunState::checkpoint`). The clock is
    /// user code: read before the queues are borrowed.
    #[inline(never)]
    pub(crate) fn checkpoint(&self, q: usize) {
        let now = self.now_ns();
        self.run
            .checkpoint(&mut self.queues.borrow_mut(), q, now, &self.cfg);
    }

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

    /// Places the queues that became runnable and decides preemption
    /// (`Queues::place_activations`, `executor/placement.rs`).
    /// `between_polls`: called at a poll boundary (no task of the running
    /// queue is being polled), not from inside a poll (`should_yield`).
    /// The clock is read before the queues are borrowed (it is user code).
    #[inline(never)]
    pub(crate) fn place_activations(&self, between_polls: bool) {
        if self.queues.borrow().pending.is_empty() {
            return;
        }
        let r = &self.run;
        let charge = r
            .current
            .queue
            .get()
            .filter(|_| r.clock.countdown_set.get() != r.clock.countdown.get())
            .map(|c| (c, self.now_ns()));
        self.queues
            .borrow_mut()
            .place_activations(r, &self.cfg, charge, between_polls);
    }

    /// Sets the turn's host-yield interval from the queues that wait now
    /// ([`QueueSpec::latency`](crate::QueueSpec::latency)).
    pub(super) fn update_host_interval(&self) {
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

    /// Runs queue `q`, which [`start_run`](Self::start_run) started and
    /// whose scheduler's needs (`sched`) it returned,
    /// until a boundary ends the run. Returns `true` when the turn's budget
    /// is spent.
    ///
    /// Three instances of one loop, each with `poll_task` inlined: the
    /// common one (a real clock read every few polls, no per-poll timing
    /// or observation) has those branches compiled out (about 9
    /// instructions per headline task; callgrind); the second times each
    /// poll (a timing scheduler such as `Las`, or a cheap clock) without
    /// observation; the third observes too (stall detector, latency
    /// histograms).
    #[must_use = "`true` ends the turn: dropping it runs past the host-yield budget"]
    #[inline(always)]
    fn run_queue(&self, q: usize, sched: SchedMode) -> bool {
        if self.cfg.per_poll_timing {
            self.run_queue_in::<true, true>(q, sched)
        } else if sched.timing || self.cheap_clock {
            self.run_queue_in::<true, false>(q, sched)
        } else {
            // A batching `Las` times its polls: never in this instance.
            let sched = SchedMode {
                timing: false,
                las: false,
                ..sched
            };
            self.run_queue_in::<false, false>(q, sched)
        }
    }

    /// The run of [`run_queue`](Self::run_queue): start, the polls, the
    /// end. With `PER_POLL` false, the caller has checked that no per-poll
    /// clock read or observation is asked for; with `OBSERVE` false, that
    /// no observation is.
    #[must_use = "`true` ends the turn: dropping it runs past the host-yield budget"]
    #[inline(always)]
    fn run_queue_in<const PER_POLL: bool, const OBSERVE: bool>(
        &self,
        q: usize,
        sched: SchedMode,
    ) -> bool {
        #[cfg(feature = "tracing")]
        let _run_span = Observer::run_span(&self.queues, &self.panics, q);
        let mode = self.run_mode::<PER_POLL, OBSERVE>(sched);
        bump(&self.run.counters.runs);
        // The poll marker of an enclosing task (nested executors), put back
        // when the run ends.
        let _marker = crate::task::current::save_marker();
        let mut held = Held::new(self, q);
        let drained = self.poll_tasks(q, mode, &mut held);
        // Puts the batch back (`Held::put_back`) before the run's end.
        drop(held);
        self.end_run(q, drained)
    }

    /// What a run of a queue whose scheduler is described by `sched` does
    /// per poll.
    #[inline(always)]
    fn run_mode<const PER_POLL: bool, const OBSERVE: bool>(&self, sched: SchedMode) -> RunMode {
        let SchedMode {
            timing: sched_timing,
            tell_polled,
            las,
        } = sched;
        // Per-poll durations: for a timing scheduler, the stall detector
        // and the latency histograms.
        let observe = PER_POLL && OBSERVE && self.cfg.per_poll_timing;
        let defer_yields = self.nested.get();
        RunMode {
            observe,
            timing: PER_POLL && (sched_timing || observe),
            sched_timing: PER_POLL && sched_timing,
            // Exact slice ends (a clock read and an EEVDF charge after
            // every poll) only with a cheap clock; per-poll durations on a
            // real clock come from one clock read per poll, while the
            // EEVDF charge stays amortised.
            precise: PER_POLL && self.cheap_clock,
            tell_polled,
            // A `RunnableFifo` (no `polled` to call) and not nested (a
            // yield is requeued, not deferred to the host's next turn): a
            // task runnable again, woken or yielded, goes behind the queued
            // ones through the run's tail.
            fifo_requeue: !(tell_polled || defer_yields),
            // The same condition for a batching `Las`, whose polls are
            // charged when the tail is pushed (`requeue_tail_charged`), or
            // at once (`charge_las`).
            las_requeue: las && !defer_yields,
            #[cfg(feature = "tokio")]
            own_budget: defer_yields,
            propagate: self.panics.propagates(),
        }
    }

    /// A run of `q` starts at the last checkpoint, with no cause to end it
    /// yet and the countdown to its first checkpoint. Returns whether its
    /// scheduler wants per-poll timing and `polled` calls (for
    /// [`run_queue`](Self::run_queue)).
    #[inline(always)]
    fn start_run(&self, qs: &mut Queues, q: usize) -> SchedMode {
        let r = &self.run;
        qs.list[q].counters.runs += 1;
        r.current.queue.set(Some(q));
        r.current.start_ns.set(r.clock.last_ns.get());
        r.end.clear();
        self.run.reset_countdown(qs, q, &self.cfg);
        let st = &mut qs.list[q];
        SchedMode {
            timing: st.timing,
            tell_polled: !st.sched.is_stateless(),
            las: st.sched.batching_las().is_some(),
        }
    }

    /// Polls the tasks `held` hands out until a boundary ends the run.
    /// Returns whether the queue ran dry: `pop` returned `None`, so the
    /// queue has nothing to run, whatever its scheduler's `len` says (a
    /// scheduler that breaks the contract must not make the executor spin
    /// on an empty queue).
    #[inline(always)]
    fn poll_tasks(&self, q: usize, mode: RunMode, held: &mut Held<'_>) -> bool {
        // The start of the next poll: the last checkpoint's reading, or the
        // clock read that ended the previous poll.
        let mut poll_start = self.run.clock.last_ns.get();
        // The record of a task that ended (`poll_task`).
        let mut done = None;
        // Few values live across the poll (the call clobbers the others):
        // the site and the poll count are in `RunState`, the batch bounds
        // in its `HeldIds`.
        loop {
            let Some(id) = held.next() else {
                return true;
            };
            if let Step::EndRun = self.poll_step(q, id, mode, &mut poll_start, &mut done) {
                return false;
            }
        }
    }

    /// One poll of task `id` of the running queue `q`, and what follows
    /// from it: the checkpoint when due, the poll's duration and
    /// observation, the task's requeue or end, and the boundary work the
    /// poll flagged.
    #[inline(always)]
    fn poll_step(
        &self,
        q: usize,
        id: TaskKey,
        mode: RunMode,
        poll_start: &mut u64,
        done: &mut Option<Done>,
    ) -> Step {
        let r = &self.run;
        if mode.precise {
            // The clock was read at the end of the previous poll: that
            // reading is this poll's start.
            *poll_start = r.clock.last_ns.get();
        }
        let start = *poll_start;
        // Read before the poll: a task that completes is removed.
        let observed = if mode.observe {
            Some(self.observer.before(&self.tasks.borrow(), id, start))
        } else {
            None
        };
        #[cfg(feature = "tracing")]
        let poll_span = Observer::poll_span(&self.tasks, &self.panics, q, id);
        let site = r.second_site.get();
        let polled = self.poll_one(id, site, mode, done);
        #[cfg(feature = "tracing")]
        drop(poll_span);
        match polled {
            Polled::Stale => return Step::Next,
            // Before anything else can panic (the checkpoint's clock
            // read): the panics of the task's end go to the sink in the
            // order they happened.
            Polled::Done => self.report_panics_of(done),
            Polled::Pending(..) => {}
        }
        r.second_site.set(!site);
        let elapsed = self.count_poll(q, mode, start, poll_start);
        if let Some(before) = observed {
            let again = matches!(polled, Polled::Pending(n, _) if n != Next::Wait);
            self.observer.after(
                &self.queues,
                &self.tasks,
                &self.panics,
                q,
                id,
                before,
                again,
                start,
                elapsed.unwrap_or(0),
            );
        }
        if let Step::EndRun = self.after_poll(q, id, polled, mode, elapsed, done) {
            return Step::EndRun;
        }
        if self.attention.get() || self.intake.inbox.has_pending() {
            self.boundary(false);
        }
        if r.end.stop.get() {
            Step::EndRun
        } else {
            Step::Next
        }
    }

    /// Counts a poll of the running queue `q` that started at `start`: the
    /// checkpoint when the countdown reaches it (after every poll in
    /// precise mode). Returns the poll's duration when the run times its
    /// polls: the whole poll, even if `should_yield` charged part of it from
    /// inside the poll, from one clock read per poll that is also the next
    /// poll's start (`poll_start`).
    #[inline(always)]
    fn count_poll(&self, q: usize, mode: RunMode, start: u64, poll_start: &mut u64) -> Option<u64> {
        let r = &self.run;
        // `countdown >= 1` before every poll (see `countdown`); the
        // checkpoint counts the polls since the last one.
        let countdown = r.clock.countdown.get() - 1;
        r.clock.countdown.set(countdown);
        if mode.precise || countdown == 0 {
            self.checkpoint(q);
        }
        if !mode.timing {
            None
        } else if mode.precise {
            Some(r.clock.last_ns.get().saturating_sub(start))
        } else {
            let now = self.now_ns();
            *poll_start = now;
            Some(now.saturating_sub(start))
        }
    }

    /// The poll itself, at the call site `site`
    /// ([`RunState::second_site`](super::run_state::RunState::second_site));
    /// nested, with tokio's budget for this poll alone (`crate::coop`).
    #[inline(always)]
    fn poll_one(&self, id: TaskKey, site: bool, mode: RunMode, done: &mut Option<Done>) -> Polled {
        #[cfg(feature = "tokio")]
        if mode.own_budget {
            self.task_budget.renew();
        }
        poll_task(&self.tasks, id, mode.propagate, site, done, &TaskScope)
    }

    /// What a poll's outcome asks of the executor: nothing for a task that
    /// waits (unless its scheduler is told), the requeue of a task runnable
    /// again (through the run's tail, or its scheduler), the end of a task
    /// that completed.
    #[inline(always)]
    fn after_poll(
        &self,
        q: usize,
        id: TaskKey,
        polled: Polled,
        mode: RunMode,
        elapsed: Option<u64>,
        done: &mut Option<Done>,
    ) -> Step {
        // Only where a scheduler call takes it: a `Duration` made per poll
        // costs about 10 instructions (callgrind).
        let sched_elapsed = || {
            elapsed
                .filter(|_| mode.sched_timing)
                .map(Duration::from_nanos)
        };
        match polled {
            // Waiting for a wake, and no `polled` to tell: nothing to do.
            Polled::Pending(Next::Wait, _) if !mode.tell_polled => {}
            Polled::Pending(..) if mode.fifo_requeue => {
                self.run.held.requeue_tail(&self.queues, id)
            }
            // Runnable again, in its own group: charged when the tail is
            // pushed (`Tail`).
            Polled::Pending(next, true) if mode.las_requeue && next != Next::Wait => {
                self.run
                    .held
                    .requeue_tail_charged(&self.queues, id, elapsed.unwrap_or(0));
            }
            Polled::Pending(next, own_group) if mode.las_requeue => {
                let group = if own_group {
                    GroupId::task(id.index())
                } else {
                    self.tasks.borrow().group_of_id(id)
                };
                self.charge_las(q, id, group, next, elapsed.unwrap_or(0));
            }
            Polled::Pending(next, _) => {
                self.pending_again(q, id, next, sched_elapsed(), mode.tell_polled);
            }
            Polled::Done => {
                if let Some(done) = done.take() {
                    self.finish(id, done, sched_elapsed(), true);
                    if self.panics.holds() {
                        // Resumed out of the driver (`Propagate`).
                        return Step::EndRun;
                    }
                }
            }
            Polled::Stale => unreachable!("a stale id is skipped before"),
        }
        Step::Next
    }

    /// The scheduler of queue `q` handed out `id`, which was not its to
    /// hand out: a contract violation, counted (debug builds: resumed out of
    /// the driver with this message). The task is not polled.
    #[cold]
    #[inline(never)]
    pub(crate) fn refused(&self, qs: &Queues, q: usize, id: TaskKey, why: Spurious) {
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
    /// the deferral of a yield while nested. Out of line: the headline's
    /// polls never come here.
    #[inline(never)]
    fn pending_again(
        &self,
        q: usize,
        id: TaskKey,
        next: Next,
        elapsed: Option<Duration>,
        tell_polled: bool,
    ) {
        let defer = next == Next::Yield && self.nested.get();
        let requeue = next != Next::Wait && !defer;
        // The running queue is runnable for the whole run (it departs only
        // in `end_run`), so a requeue cannot activate it: no activation
        // check here. A waiting task of a scheduler that ignores `polled`
        // needs no call at all.
        if tell_polled || requeue {
            // The scheduler may push (`RunnableFifo` included, whose
            // deque is then no longer known empty).
            self.run.held.front_empty.set(false);
            let group = self.tasks.borrow().group_of_id(id);
            self.queues.borrow_mut().list[q]
                .sched
                .polled_pending(id, group, elapsed, requeue);
        }
        if defer {
            self.deferred.borrow_mut().push(id);
        }
    }

    /// A poll of task `id`, of `group`, of the running batching `Las` queue
    /// `q` took `ns`, charged here: the task waits, or belongs to a keyed
    /// group (whose service other tasks' requeues depend on). A task
    /// runnable again is pushed to its level, after the run's tail (which
    /// was requeued before it).
    #[inline(never)]
    fn charge_las(&self, q: usize, id: TaskKey, group: GroupId, next: Next, ns: u64) {
        let mut qs = self.queues.borrow_mut();
        let requeue = next != Next::Wait;
        if requeue {
            self.run.held.flush_tail(&mut qs);
        }
        let Some(las) = qs.list[q].sched.batching_las() else {
            unreachable!("tourbillon bug: las_requeue on a queue that does not batch a Las");
        };
        let _ = las.charge(group, ns);
        if requeue {
            self.run.held.front_empty.set(false);
            crate::sched::Scheduler::push(las, id, group);
        }
    }

    /// Ends the run of `q`: charges the rest, departs if empty (R7), and
    /// leaves the next pick the queue to continue, if RUN_TO_PARITY still
    /// protects it. Returns `true` when the turn's budget is spent.
    #[must_use = "`true` ends the turn: dropping it runs past the host-yield budget"]
    #[inline(always)]
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

    /// Book-keeping for a task that ended; its panic, taken for
    /// `Propagate`, goes to the panic sink.
    #[inline(always)]
    pub(super) fn finish(&self, id: TaskKey, done: Done, elapsed: Option<Duration>, polled: bool) {
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

    /// `should_yield()`: would the current run end at this boundary? If
    /// so, the run ends after the poll in progress.
    #[must_use = "`true` ended the run: the task must yield"]
    pub(crate) fn should_yield(&self) -> bool {
        if !self.driving.get() || !crate::task::current::in_task_poll() {
            return false;
        }
        let Some(q) = self.run.current.queue.get() else {
            return false;
        };
        self.checkpoint(q);
        self.place_activations(false);
        let r = &self.run;
        let yes = r.end.preempt.get()
            || r.turn.over.get()
            || r.end.requested.get()
            || (r.end.slice_over.get() && contended(&self.queues.borrow(), &self.cfg));
        if yes {
            r.end.requested.set(true);
            r.end.stop.set(true);
        }
        yes
    }
}
