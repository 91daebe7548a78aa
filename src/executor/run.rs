#![forbid(unsafe_code)]
//! A run: one queue has the thread until a boundary ends it ([`Run`]).
//!
//! ```text
//! run:   loop { take task (Held); poll; [checkpoint]; requeue/complete;
//!               boundary work if flagged; end? }
//!        checkpoint; depart if empty (R7)
//! ```
//!
//! It owns what happens at a poll: it takes the queue's tasks through
//! [`Held`], polls each through the task core's harness
//! (`task::harness::poll_task`), counts the poll (a checkpoint when the
//! countdown reaches it), observes it when asked, requeues or finishes the
//! task, and ends the run when the stop flag says so. The turn around it
//! (the pick, the boundary work between runs, the host-yield budget) is
//! `run_loop.rs`'s. This is the crate's hottest path: its helpers are
//! `#[inline(always)]`, so the loop compiles to the code of one function
//! per `PER_POLL`.

use std::time::Duration;

use super::batch::Held;
use super::context::TaskScope;
use super::core::Core;
#[cfg(feature = "tracing")]
use super::observe::Observer;
use super::queues::SchedMode;
use super::run_state::bump;
use crate::stats::LatencyRecorder;
use crate::task::harness::{poll_task, Done, Next, Polled};
use crate::task::id::{GroupId, TaskKey};

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
    /// The run's loop may go on with the run of a queue whose scheduler
    /// asks this of a run, after a queue switch (`Core::boundary_in_run`);
    /// `None` with observation or `tracing`, which mark each run's start
    /// and end, and for a queue that allows no switch
    /// ([`SchedMode::switches`]: a custom scheduler, or a latency
    /// requirement).
    chain: Option<SchedMode>,
}

/// Whether the run goes on after a poll.
#[must_use = "`EndRun` must end the run: a stop, a preemption or a held panic would be ignored"]
enum Step {
    /// Poll the next task.
    Next,
    /// The run ends at this boundary.
    EndRun,
    /// The run ended at a queue switch, which started the run of this
    /// queue (`Core::boundary_in_run`).
    Switch(usize),
}

/// How the polls of a run ended.
#[must_use = "a switch's run must be polled; a stop ends the run"]
enum Polls {
    /// The queue has nothing to run (`pop` returned `None`).
    Drained,
    /// A boundary ended the run.
    Stopped,
    /// A queue switch ended the run and started the run of this queue.
    Switched(usize),
}

/// The run of queue `q`, which the turn picked and started
/// (`Core::start_run`): the executor's state it runs on, and the queue.
#[derive(Clone, Copy)]
pub(super) struct Run<'a> {
    core: &'a Core,
    q: usize,
}

impl<'a> Run<'a> {
    /// The run of queue `q` of `core`.
    #[inline(always)]
    pub(super) fn new(core: &'a Core, q: usize) -> Self {
        Self { core, q }
    }

    /// Runs queue `q`, which [`start_run`](Core::start_run) started and
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
    pub(super) fn run_queue(&self, sched: SchedMode) -> bool {
        if self.core.cfg.per_poll_timing {
            self.run_queue_in::<true, true>(sched)
        } else if sched.timing() || self.core.cheap_clock {
            self.run_queue_in::<true, false>(sched)
        } else {
            // A batching `Las` times its polls: never in this instance.
            self.run_queue_in::<false, false>(sched.untimed())
        }
    }

    /// The run of [`run_queue`](Self::run_queue): start, the polls, the
    /// end. With `PER_POLL` false, the caller has checked that no per-poll
    /// clock read or observation is asked for; with `OBSERVE` false, that
    /// no observation is.
    #[must_use = "`true` ends the turn: dropping it runs past the host-yield budget"]
    #[inline(always)]
    fn run_queue_in<const PER_POLL: bool, const OBSERVE: bool>(&self, sched: SchedMode) -> bool {
        let q = self.q;
        #[cfg(feature = "tracing")]
        let _run_span = Observer::run_span(&self.core.queues, &self.core.panics, q);
        let mode = self.run_mode::<PER_POLL, OBSERVE>(sched);
        bump(&self.core.run.counters.runs);
        // The poll marker of an enclosing task (nested executors), put back
        // when the run ends.
        let _marker = crate::task::current::save_marker();
        // The recorder of the queue's histogram (a run with observation
        // does not switch queues).
        let latency = if mode.observe {
            self.core.observer.recorder(q)
        } else {
            None
        };
        let mut held = Held::new(self.core, q);
        // The run in progress: a queue switch continues with the run of
        // the queue switched to, which it started (`Core::switch_in_run`):
        // without the return to the turn, the batch's put-back (it is
        // spent), the run's setup (its mode, the poll marker,
        // [`Held::new`]) and the checks between them.
        let mut run = *self;
        let drained = loop {
            match run.poll_tasks(mode, latency, &mut held) {
                Polls::Drained => break true,
                Polls::Stopped => break false,
                Polls::Switched(next) => {
                    run = Run::new(self.core, next);
                    held.moved_to(next);
                }
            }
        };
        // Puts the batch back (`Held::put_back`) before the run's end.
        drop(held);
        run.end_run(drained)
    }

    /// What a run of a queue whose scheduler is described by `sched` does
    /// per poll.
    #[inline(always)]
    fn run_mode<const PER_POLL: bool, const OBSERVE: bool>(&self, sched: SchedMode) -> RunMode {
        let (sched_timing, tell_polled, las) = (sched.timing(), sched.tell_polled(), sched.las());
        // Per-poll durations: for a timing scheduler, the stall detector
        // and the latency histograms.
        let observe = PER_POLL && OBSERVE && self.core.cfg.per_poll_timing;
        let defer_yields = self.core.nested.get();
        RunMode {
            observe,
            timing: PER_POLL && (sched_timing || observe),
            sched_timing: PER_POLL && sched_timing,
            // Exact slice ends (a clock read and an EEVDF charge after
            // every poll) only with a cheap clock; per-poll durations on a
            // real clock come from one clock read per poll, while the
            // EEVDF charge stays amortised.
            precise: PER_POLL && self.core.cheap_clock,
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
            propagate: self.core.panics.propagates(),
            chain: (!observe && !cfg!(feature = "tracing") && sched.switches()).then_some(sched),
        }
    }

    /// Polls the tasks `held` hands out until a boundary ends the run.
    /// Returns whether the queue ran dry: `pop` returned `None`, so the
    /// queue has nothing to run, whatever its scheduler's `len` says (a
    /// scheduler that breaks the contract must not make the executor spin
    /// on an empty queue).
    /// `latency`: the recorder of the queue's histogram, histograms on.
    #[inline(always)]
    fn poll_tasks(
        &self,
        mode: RunMode,
        latency: Option<&LatencyRecorder>,
        held: &mut Held<'_>,
    ) -> Polls {
        // The start of the next poll: the last checkpoint's reading, or the
        // clock read that ended the previous poll.
        let mut poll_start = self.core.run.clock.last_ns.get();
        // The record of a task that ended (`poll_task`).
        let mut done = None;
        // Few values live across the poll (the call clobbers the others):
        // the site and the poll count are in `RunState`, the batch bounds
        // in its `HeldIds`.
        loop {
            let Some(id) = held.next() else {
                return Polls::Drained;
            };
            match self.poll_step(id, mode, latency, &mut poll_start, &mut done) {
                Step::Next => {}
                Step::EndRun => return Polls::Stopped,
                Step::Switch(next) => return Polls::Switched(next),
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
        id: TaskKey,
        mode: RunMode,
        latency: Option<&LatencyRecorder>,
        poll_start: &mut u64,
        done: &mut Option<Done>,
    ) -> Step {
        let q = self.q;
        let r = &self.core.run;
        if mode.precise {
            // The clock was read at the end of the previous poll: that
            // reading is this poll's start.
            *poll_start = r.clock.last_ns.get();
        }
        let start = *poll_start;
        // Read before the poll: a task that completes is removed.
        let observed = if mode.observe {
            Some(
                self.core
                    .observer
                    .before(&self.core.tasks, id, start, latency.is_some()),
            )
        } else {
            None
        };
        #[cfg(feature = "tracing")]
        let poll_span = Observer::poll_span(&self.core.tasks, &self.core.panics, q, id);
        let site = r.second_site.get();
        let polled = self.poll_one(id, site, mode, done);
        #[cfg(feature = "tracing")]
        drop(poll_span);
        match polled {
            Polled::Stale => return Step::Next,
            // Before anything else can panic (the checkpoint's clock
            // read): the panics of the task's end go to the sink in the
            // order they happened.
            Polled::Done => self.core.report_panics_of(done),
            Polled::Pending(..) => {}
        }
        r.second_site.set(!site);
        let elapsed = self.count_poll(mode, start, poll_start);
        if let Some(before) = observed {
            let again = matches!(polled, Polled::Pending(n, _) if n != Next::Wait);
            self.core.observer.after(
                &self.core.queues,
                &self.core.tasks,
                &self.core.panics,
                latency,
                q,
                id,
                before,
                again,
                r.counters.runs.get(),
                start,
                elapsed.unwrap_or(0),
            );
        }
        if let Step::EndRun = self.after_poll(id, polled, mode, elapsed, done) {
            return Step::EndRun;
        }
        if self.core.attention.get() || self.core.intake.inbox.has_pending() {
            if let Some(next) = self.core.boundary_in_run(mode.chain) {
                return Step::Switch(next);
            }
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
    fn count_poll(&self, mode: RunMode, start: u64, poll_start: &mut u64) -> Option<u64> {
        let q = self.q;
        let r = &self.core.run;
        // `countdown >= 1` before every poll (see `countdown`); the
        // checkpoint counts the polls since the last one.
        let countdown = r.clock.countdown.get() - 1;
        r.clock.countdown.set(countdown);
        if mode.precise || countdown == 0 {
            self.core.checkpoint(q);
        }
        if !mode.timing {
            None
        } else if mode.precise {
            Some(r.clock.last_ns.get().saturating_sub(start))
        } else {
            let now = self.core.now_ns();
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
            self.core.task_budget.renew();
        }
        poll_task(&self.core.tasks, id, mode.propagate, site, done, &TaskScope)
    }

    /// What a poll's outcome asks of the executor: nothing for a task that
    /// waits (unless its scheduler is told), the requeue of a task runnable
    /// again (through the run's tail, or its scheduler), the end of a task
    /// that completed.
    #[inline(always)]
    fn after_poll(
        &self,
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
                self.core.run.held.requeue_tail(&self.core.queues, id)
            }
            // Runnable again, in its own group: charged when the tail is
            // pushed (`Tail`).
            Polled::Pending(next, true) if mode.las_requeue && next != Next::Wait => {
                self.core.run.held.requeue_tail_charged(
                    &self.core.queues,
                    id,
                    elapsed.unwrap_or(0),
                );
            }
            Polled::Pending(next, own_group) if mode.las_requeue => {
                let group = if own_group {
                    GroupId::task(id.index())
                } else {
                    self.core.tasks.borrow().group_of_id(id)
                };
                self.charge_las(id, group, next, elapsed.unwrap_or(0));
            }
            Polled::Pending(next, _) => {
                self.pending_again(id, next, sched_elapsed(), mode.tell_polled);
            }
            Polled::Done => {
                if let Some(done) = done.take() {
                    self.core.finish(id, done, sched_elapsed(), true);
                    if self.core.panics.holds() {
                        // Resumed out of the driver (`Propagate`).
                        return Step::EndRun;
                    }
                }
            }
            Polled::Stale => unreachable!("a stale id is skipped before"),
        }
        Step::Next
    }

    /// A task of queue `q` is pending after its poll and not requeued
    /// through the run's tail: `polled` for a scheduler that wants it, the
    /// push of a task runnable again (the contract: both in one dispatch),
    /// the deferral of a yield while nested. Out of line: the headline's
    /// polls never come here.
    #[inline(never)]
    fn pending_again(&self, id: TaskKey, next: Next, elapsed: Option<Duration>, tell_polled: bool) {
        let q = self.q;
        let defer = next == Next::Yield && self.core.nested.get();
        let requeue = next != Next::Wait && !defer;
        // The running queue is runnable for the whole run (it departs only
        // in `end_run`), so a requeue cannot activate it: no activation
        // check here. A waiting task of a scheduler that ignores `polled`
        // needs no call at all.
        if tell_polled || requeue {
            // The scheduler may push (`RunnableFifo` included, whose
            // deque is then no longer known empty).
            self.core.run.held.front_empty.set(false);
            let group = self.core.tasks.borrow().group_of_id(id);
            self.core.queues.borrow_mut().list[q]
                .sched
                .polled_pending(id, group, elapsed, requeue);
        }
        if defer {
            self.core.deferred.borrow_mut().push(id);
        }
    }

    /// A poll of task `id`, of `group`, of the running batching `Las` queue
    /// `q` took `ns`, charged here: the task waits, or belongs to a keyed
    /// group (whose service other tasks' requeues depend on). A task
    /// runnable again is pushed to its level, after the run's tail (which
    /// was requeued before it).
    #[inline(never)]
    fn charge_las(&self, id: TaskKey, group: GroupId, next: Next, ns: u64) {
        let q = self.q;
        let mut qs = self.core.queues.borrow_mut();
        let requeue = next != Next::Wait;
        if requeue {
            self.core.run.held.flush_tail(&mut qs);
        }
        let Some(las) = qs.list[q].sched.batching_las() else {
            unreachable!("tourbillon bug: las_requeue on a queue that does not batch a Las");
        };
        let _ = las.charge(group, ns);
        if requeue {
            self.core.run.held.front_empty.set(false);
            crate::sched::Scheduler::push(las, id, group);
        }
    }

    /// Ends the run of `q`: charges the rest, departs if empty (R7), and
    /// leaves the next pick the queue to continue, if RUN_TO_PARITY still
    /// protects it. Returns `true` when the turn's budget is spent.
    #[must_use = "`true` ends the turn: dropping it runs past the host-yield budget"]
    #[inline(always)]
    fn end_run(&self, drained: bool) -> bool {
        let q = self.q;
        let r = &self.core.run;
        if r.clock.countdown_set.get() != r.clock.countdown.get() {
            self.core.checkpoint(q);
        }
        {
            let mut qs = self.core.queues.borrow_mut();
            let empty = qs.list[q].sched.ran_dry(drained);
            // A queue switch's placement may have departed it already
            // (`Queues::switch_now`).
            if empty && qs.eevdf.ents[q].runnable {
                qs.eevdf.depart(q);
                if qs.list[q].latency_ns.is_some() {
                    // A latency-sensitive queue now waits for the host: if
                    // another queue would run next, the host runs its I/O
                    // first (R8e), so that what it finds for this queue
                    // does not wait for that queue's poll.
                    let others = qs.eevdf.runnable_count() > 0 || !qs.pending.is_empty();
                    drop(qs);
                    self.core.update_host_interval();
                    if others {
                        r.turn.over.set(true);
                    }
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
}
