#![forbid(unsafe_code)]
//! The run loop: one *turn* runs queues until nothing is runnable or the
//! host-yield budget is spent; one *run* (`run.rs`, [`Run`]) gives one
//! queue the thread until a boundary.
//!
//! ```text
//! turn:  release deferred yields; read clock
//!        loop { boundary work; pick queue (EEVDF R5); run it } until budget
//!        settle quarantines; resume a held panic
//! ```
//!
//! It owns the turn: the pick (`Eevdf::pick`, `crate::eevdf`) and the start
//! of the run it picks, the work at a poll boundary (remote work through
//! `Intake::at_boundary`, aborts, placement through
//! `Queues::place_activations` in `placement.rs`), the clock checkpoints
//! (read here, charged by `RunState`'s accounting), the end of a task, the
//! quarantine of a queue whose custom scheduler keeps panicking, and
//! `should_yield`. It does not know any scheduler's internals (it speaks
//! to a queue through `QueueScheduler`).
//!
//! With one runnable queue its slice does not end its run (the EEVDF pick
//! would choose it again); the run still ends at the host-yield budget
//! (`max_polls` polls or the turn's host interval, R8d). The host interval
//! is the builder's `host_yield_interval`, or the shortest latency
//! requirement (`QueueSpec::latency`) of a queue that waits for the host,
//! computed at the start of the turn and again when such a queue departs;
//! that departure ends the turn if another queue would run next (R8e,
//! `Run::end_run`).

use std::time::Duration;

use super::accounting::contended;
use super::core::Core;
use super::queues::{Queues, SchedMode};
use super::run::Run;
use super::run_state::{bump, RunState};
use crate::boundary;
use crate::error::quarantine::Quarantine;
use crate::task::harness::{cancel_idle, end_idle_with, Done, Panics};
use crate::task::id::TaskKey;
use crate::task::raw::Finish;
use crate::task::slab::Spurious;

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
    /// here first (`Core::settle_quarantines`, `executor/run_loop.rs`), and the turn is then `Busy`
    /// (its ends may have woken tasks or the driver's own future).
    pub(crate) fn run_turn(&self, follows: bool) -> Turn {
        let turn = self.turn(follows);
        self.observer.turn_ended();
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
            if Run::new(self, q).run_queue(kind) || self.panics.holds() {
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
        self.boundary_work(turn_start);
        self.place_activations(true);
    }

    /// [`boundary`](Self::boundary) after a poll of a run whose loop may
    /// go on with the run of another queue that asks the same of a run
    /// (`chain`, that queue's [`SchedMode`]; `None` when the run may not:
    /// observation and `tracing` mark each run's start and end): returns
    /// the queue whose run a queue switch started here
    /// ([`switch_in_run`](Self::switch_in_run)).
    #[inline(always)]
    pub(super) fn boundary_in_run(&self, chain: Option<SchedMode>) -> Option<usize> {
        self.boundary_work(false);
        match chain {
            Some(want) => self.switch_or_place(want),
            None => {
                self.place_activations(true);
                None
            }
        }
    }

    /// The boundary's work before placement: foreign wakes, remote spawns,
    /// aborts.
    #[inline(always)]
    fn boundary_work(&self, turn_start: bool) {
        self.attention.set(false);
        self.intake.at_boundary(self, turn_start);
        if self.any_abort.get() {
            self.drop_aborted();
        }
    }

    /// Drops the aborted idle tasks.
    #[cold]
    #[inline(never)]
    fn drop_aborted(&self) {
        let ids = std::mem::take(&mut *self.aborts.borrow_mut());
        self.any_abort.set(false);
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
    pub(super) fn place_activations(&self, between_polls: bool) {
        if self.queues.borrow().pending.is_empty() {
            return;
        }
        let (cur, now) = self.uncharged_now();
        self.place_pending(cur, now, between_polls);
    }

    /// [`place_activations`](Self::place_activations) at a poll boundary
    /// of a run whose loop may go on with the run of another queue that
    /// asks the same of a run (`want`, see
    /// [`boundary_in_run`](Self::boundary_in_run)), or a queue switch
    /// that starts that run here
    /// ([`switch_in_run`](Self::switch_in_run)): returns the queue whose
    /// run it started. Out of line apart from the general placement
    /// ([`place_pending`](Self::place_pending)), so that a queue switch
    /// saves and restores only the registers it uses.
    #[inline(never)]
    fn switch_or_place(&self, want: SchedMode) -> Option<usize> {
        if self.queues.borrow().pending.is_empty() {
            return None;
        }
        let (cur, now) = self.uncharged_now();
        // A switch charges the run's last polls: none uncharged (a
        // checkpoint at this boundary) takes the general placement.
        if let (Some(c), Some(now)) = (cur, now) {
            let next = self.switch_in_run(&mut self.queues.borrow_mut(), c, want, now);
            if next.is_some() {
                return next;
            }
        }
        self.place_pending(cur, now, true);
        None
    }

    /// The running queue, and the clock's reading when a poll of its run
    /// is uncharged.
    #[inline(always)]
    fn uncharged_now(&self) -> (Option<usize>, Option<u64>) {
        let r = &self.run;
        let cur = r.current.queue.get();
        let now = cur
            .filter(|_| r.clock.countdown_set.get() != r.clock.countdown.get())
            .map(|_| self.now_ns());
        (cur, now)
    }

    /// The placement of [`place_activations`](Self::place_activations)
    /// (`Queues::place_activations`), given the running queue `cur` and
    /// the clock's reading `now` when a poll of its run is uncharged.
    #[inline(never)]
    fn place_pending(&self, cur: Option<usize>, now: Option<u64>, between_polls: bool) {
        self.queues.borrow_mut().place_activations(
            &self.run,
            &self.cfg,
            cur.zip(now),
            between_polls,
        );
    }

    /// A queue switch at a poll boundary of the run of `c`, whose next run
    /// starts here: `c` has nothing left to run and is the lone runnable
    /// queue, one queue `j` is to be placed (`Queues::switch_target`), and
    /// the run's loop can go on with `j`'s run at once: `j` asks the same
    /// of a run (`want`), no panic is held, no boundary work waits, and
    /// the turn's budget is not spent by the charge of `c`'s last polls
    /// (read at `now`; at least one is uncharged). Then, under one borrow of
    /// the queues: the charge of `c` (R1, R4), its departure (R7), the
    /// placement of `j` (R6), the pick (R5: `j`, alone) in one pass over
    /// the EEVDF table (`Eevdf::switch_lone_picked`), the start of `j`'s
    /// run (`start_run`'s steps) and its first batch (`HeldIds::restart`).
    /// The same steps, in the same order, as the charge and placement of
    /// `Queues::place_activations` (whose departure and placement are
    /// `Queues::switch_now`'s), the run's end and the turn's pick and
    /// start: the flags of the run's end that the charge would set are not
    /// set, since the start clears them. Returns `j`, or `None` (nothing
    /// done: the general placement follows).
    #[inline(always)]
    fn switch_in_run(&self, qs: &mut Queues, c: usize, want: SchedMode, now: u64) -> Option<usize> {
        let r = &self.run;
        // First the checks of the executor's state: the inbox's is an
        // acquire load, after which the queues' state is read anew.
        if self.panics.holds()
            || self.attention.get()
            || self.intake.inbox.has_pending()
            || r.turn.over.get()
        {
            return None;
        }
        let j = qs.switch_target(&r.held, c, want)?;
        // What the charge would leave of the turn's budget (R8d), read
        // once: the next run's start and countdown take them from here.
        let polls = r.clock.countdown_set.get() - r.clock.countdown.get();
        let polls_left = r.turn.polls_left.get().saturating_sub(polls);
        if polls_left == 0 {
            return None;
        }
        // What is left of the turn's host interval (R8d) at the charge:
        // nothing ends the turn (the charge's check).
        let left = r
            .turn
            .host_interval_ns
            .get()
            .saturating_sub(now.saturating_sub(r.turn.start_ns.get()));
        if left == 0 {
            return None;
        }
        let charge_ns = r.charge_switching(qs, c, now, polls, polls_left);
        // The queue switched to, indexed once (`Queues::switched`'s steps,
        // then `begin_run`'s, with the countdown from the values above).
        let Queues {
            list,
            eevdf,
            pending,
            ..
        } = &mut *qs;
        eevdf.switch_lone_picked(c, Some(charge_ns), j);
        debug_assert_eq!(eevdf.runnable_count(), 1);
        let slice_left = self.cfg.general_pick.then(|| eevdf.slice_left_ns(j));
        let st = &mut list[j];
        st.switched_to(pending);
        st.counters.runs += 1;
        self.open_run_state(j, now);
        let n = RunState::switch_countdown(st.poll_cost_ns, slice_left, polls_left, left);
        r.clock.countdown.set(n);
        r.clock.countdown_set.set(n);
        bump(&r.counters.runs);
        r.held.restart(&mut st.sched, j);
        debug_assert_eq!(n, {
            r.reset_countdown(qs, j, &self.cfg);
            r.clock.countdown.get()
        });
        Some(j)
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

    /// A run of `q` starts at the last checkpoint, with no cause to end it
    /// yet and the countdown to its first checkpoint. Returns whether its
    /// scheduler wants per-poll timing and `polled` calls (for
    /// [`Run::run_queue`]).
    #[inline(always)]
    pub(super) fn start_run(&self, qs: &mut Queues, q: usize) -> SchedMode {
        self.begin_run(qs, q);
        Self::sched_mode(qs, q)
    }

    /// [`start_run`](Self::start_run) without the scheduler's needs.
    #[inline(always)]
    fn begin_run(&self, qs: &mut Queues, q: usize) {
        self.open_run(qs, q, self.run.clock.last_ns.get());
        self.run.reset_countdown(qs, q, &self.cfg);
    }

    /// The run of `q` that starts at `start_ns`: counted, current, no
    /// cause of its end yet (its countdown is the caller's).
    #[inline(always)]
    fn open_run(&self, qs: &mut Queues, q: usize, start_ns: u64) {
        qs.list[q].counters.runs += 1;
        self.open_run_state(q, start_ns);
    }

    /// [`open_run`](Self::open_run) without the queue's count of runs.
    #[inline(always)]
    fn open_run_state(&self, q: usize, start_ns: u64) {
        let r = &self.run;
        r.current.queue.set(Some(q));
        r.current.start_ns.set(start_ns);
        r.end.clear();
    }

    /// What the scheduler of queue `q` asks of a run ([`SchedMode`]), as
    /// the queue's build found it.
    #[inline(always)]
    pub(super) fn sched_mode(qs: &mut Queues, q: usize) -> SchedMode {
        let st = &mut qs.list[q];
        debug_assert_eq!(
            st.mode,
            SchedMode::of(&mut st.sched, st.latency_ns.is_some())
        );
        st.mode
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
    pub(super) fn report_panics_of(&self, done: &mut Option<Done>) {
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
