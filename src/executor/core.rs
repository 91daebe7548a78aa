#![forbid(unsafe_code)]
//! `Core`: the state one executor shares between its handles (executor,
//! queue handles, join handles, the thread-local context). Holds the task
//! slab, the queues, the run state and the thread-safe inbox, and the
//! operations that are neither the run loop nor spawning: wake, abort,
//! yield, shares, stats, shutdown. No borrow of a `RefCell` here is ever
//! held while user code (a poll, a destructor, a foreign waker) runs.
//!
//! The run loop and the spawn path extend `Core` from files of their own
//! (`run_loop`, `accounting`, `placement`, `batch`, `observe`, `spawning`),
//! which import `Core`; this file imports nothing from them.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::{Rc, Weak};
use std::task::Waker;
use std::time::Duration;

use super::observe::Observer;
use super::queues::Queues;
use super::run_state::RunState;
use crate::boundary::{self, PanicSink};
use crate::clock::{Clock, ExecutorClock};
use crate::config::Config;
use crate::error::quarantine::Quarantine;
use crate::error::{SharesError, SpawnError};
use crate::remote::intake::Intake;
use crate::remote::op::Remote;
use crate::remote::target::{Insert, Target};
use crate::remote::ticket::Window;
use crate::stats::StallReport;
use crate::stats::{ExecutorStats, LatencyHistogram, QueueStats};
use crate::task::group::Groups;
use crate::task::id::{GroupId, TaskKey};
use crate::task::join::JoinHandle;
use crate::task::raw::Header;
use crate::task::slab::TaskSlab;
use crate::task::state::TransitionToScheduled;

pub(crate) struct Core {
    pub(crate) tasks: RefCell<TaskSlab<Remote>>,
    pub(crate) queues: RefCell<Queues>,
    pub(crate) run: RunState,
    /// Remote work: the inbox other threads send to, and the backlog of
    /// remote spawns waiting for admission (`remote/intake.rs`).
    pub(crate) intake: Intake,
    pub(crate) clock: ExecutorClock,
    pub(crate) cfg: Config,
    /// Read the clock after every poll (cheap clock).
    pub(crate) cheap_clock: bool,
    /// Something for the next poll boundary: activations, aborts.
    pub(crate) attention: Cell<bool>,
    /// Idle tasks aborted since the last poll boundary, which drops them.
    pub(crate) aborts: RefCell<Vec<TaskKey>>,
    /// `aborts` holds an id: what a poll boundary tests, one load (the
    /// borrow and the length cost 5 instructions per boundary; callgrind).
    pub(crate) any_abort: Cell<bool>,
    /// Yielded tasks waiting for the next host turn (nested mode).
    pub(crate) deferred: RefCell<Vec<TaskKey>>,
    pub(crate) deferred_wakers: RefCell<Vec<Waker>>,
    pub(crate) shutdown: Cell<bool>,
    /// A queue is quarantined (`Core::settle_quarantines`, `executor/run_loop.rs`): spawns look
    /// their queue up.
    pub(crate) any_quarantine: Cell<bool>,
    /// Inside `block_on` / `run_until` / `run_until_stalled`.
    pub(crate) driving: Cell<bool>,
    /// Driven by a host runtime (`run_until`): yields wait for a host turn.
    pub(crate) nested: Cell<bool>,
    pub(crate) groups: RefCell<Groups>,
    /// Where panics of user code go (the panic policy: `crate::boundary`).
    pub(crate) panics: Rc<PanicSink>,
    /// The observer of polls: latency histograms, the stall detector
    /// (`executor/observe.rs`).
    pub(crate) observer: Observer,
    /// The unit of tokio's budget that each task poll of a nested turn
    /// renews (`crate::coop`).
    #[cfg(feature = "tokio")]
    pub(crate) task_budget: crate::coop::TaskBudget,
    /// The wakers of the waiting [`Drained`](super::drive::Drained)
    /// futures, woken by a driver that finds no task alive.
    pub(crate) drained_wakers: RefCell<Vec<Waker>>,
    /// This core, for what its tasks hold of it (a remote task's
    /// admission ticket, `remote/backlog.rs`).
    pub(crate) me: Weak<Core>,
}

impl Core {
    pub(crate) fn new(
        queues: Queues,
        clock: ExecutorClock,
        cfg: Config,
        panics: Rc<PanicSink>,
        stall_report: Option<StallReport>,
        me: Weak<Core>,
    ) -> Self {
        let intake = Intake::new(queues.list.len());
        let observer = Observer::new(&cfg, queues.list.len(), stall_report);
        let mut tasks = TaskSlab::new(intake.inbox.clone());
        if cfg.stall_ns != u64::MAX || cfg.timeline > 0 {
            // The stall report and the timeline name the task of a poll
            // in which it ended.
            tasks.keep_removed();
        }
        Self {
            tasks: RefCell::new(tasks),
            queues: RefCell::new(queues),
            run: RunState::default(),
            intake,
            cheap_clock: cfg.cheap_clock,
            clock,
            cfg,
            attention: Cell::new(false),
            aborts: RefCell::new(Vec::new()),
            any_abort: Cell::new(false),
            deferred: RefCell::new(Vec::new()),
            deferred_wakers: RefCell::new(Vec::new()),
            shutdown: Cell::new(false),
            any_quarantine: Cell::new(false),
            driving: Cell::new(false),
            nested: Cell::new(false),
            groups: RefCell::new(Groups::default()),
            panics,
            observer,
            drained_wakers: RefCell::new(Vec::new()),
            #[cfg(feature = "tokio")]
            task_budget: Default::default(),
            me,
        }
    }

    /// Reads the clock: the built-in `SystemClock` inline; a user's clock
    /// behind the panic boundary (a panic goes to the panic sink, and the
    /// reading is then the last checkpoint's, as if no time had passed).
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        match &self.clock {
            ExecutorClock::System(c) => c.now_ns(),
            ExecutorClock::User(c) => match boundary::call(|| c.now_ns()) {
                Ok(now) => now,
                Err(p) => self.clock_failed(p),
            },
        }
    }

    #[cold]
    #[inline(never)]
    fn clock_failed(&self, payload: boundary::Payload) -> u64 {
        self.panics.report(payload);
        self.run.clock.last_ns.get()
    }

    /// What a task that becomes runnable now is stamped with for the
    /// latency histograms ([`Observer::ready_stamp`]): from a turn's first
    /// poll on, the executor's latest clock reading; in the poll of a driver's own
    /// future, one clock reading taken at its first spawn or wake;
    /// elsewhere a clock read.
    #[inline(always)]
    pub(crate) fn ready_stamp(&self) -> u64 {
        self.observer.ready_stamp(|| self.now_ns())
    }

    /// Wakes the hosts that drive the executor (their wakers are user
    /// code: a panic goes to the panic sink).
    pub(crate) fn wake_hosts(&self) {
        self.panics
            .check(boundary::call(|| self.intake.inbox.wake_host()));
    }

    /// A queue went from empty to non-empty: it needs placement at the next
    /// boundary, and the host must run us if we are not running.
    #[inline(always)]
    pub(super) fn on_activation(&self) {
        self.attention.set(true);
        if !self.driving.get() {
            self.wake_hosts();
        }
    }

    /// Pushes a task that became runnable (woken, or a deferred yield
    /// released) to its queue's scheduler, or to the end of the
    /// run's batch when that is its place (`HeldIds::join_batch`).
    #[inline(always)]
    pub(crate) fn push_task(&self, q: usize, id: TaskKey, group: GroupId) {
        let activated = {
            let mut qs = self.queues.borrow_mut();
            self.run.held.flush_tail(&mut qs);
            // Its place in FIFO order is the end of the run's batch: no
            // push (the deque stays empty; the queue is running, so no
            // activation).
            if self.run.held.join_batch(&qs, q, id) {
                return;
            }
            self.push_flushed(&mut qs, q, id, group)
        };
        if activated {
            self.on_activation();
        }
    }

    /// Pushes runnable task `id` of `group` to queue `q`'s scheduler, after
    /// the run's requeued tasks (which keep their place); returns whether
    /// the queue awaits placement ([`Queues::push`]). Every push of a
    /// spawned or woken task goes through here (a woken one may join the
    /// run's batch instead: [`push_task`](Self::push_task)); the polled
    /// task's own requeue goes through the run's tail or its scheduler's
    /// `polled` (`pending_again`, `charge_las`), which clear `front_empty`
    /// too.
    #[inline(always)]
    pub(crate) fn push_to(&self, qs: &mut Queues, q: usize, id: TaskKey, group: GroupId) -> bool {
        self.run.held.flush_tail(qs);
        self.push_flushed(qs, q, id, group)
    }

    /// [`push_to`](Self::push_to) once the run's requeued tasks are
    /// pushed.
    #[inline(always)]
    fn push_flushed(&self, qs: &mut Queues, q: usize, id: TaskKey, group: GroupId) -> bool {
        debug_assert_eq!(self.run.held.tail.len(), 0);
        self.run.held.front_empty.set(false);
        let activated = qs.push(q, id, group);
        // A task pushed to the running queue ahead of the ids the run
        // holds (a `Las` with exact keys): they go back behind it.
        self.run.held.yield_to_push(qs, q);
        activated
    }

    /// A wake of `id` on the executor's own thread.
    #[inline]
    pub(crate) fn wake_local(&self, id: TaskKey) {
        let target = self.tasks.borrow_mut().wake(id);
        if let Some((q, group)) = target {
            if self.cfg.latency {
                let ready = self.ready_stamp();
                self.tasks.borrow_mut().set_ready(id, ready);
            }
            self.push_task(q, id, group);
        }
    }

    /// A wake by the waker of one of this executor's tasks, on the
    /// executor's own thread: the waker's cell holds the task's state,
    /// queue and group, so no slab lookup is needed (the waker keeps its
    /// own cell alive, so a reused slot cannot be confused with it).
    #[inline(always)]
    pub(crate) fn wake_by_header(&self, header: &Header) {
        let push =
            header.update_state(|st| st.transition_to_scheduled() == TransitionToScheduled::Push);
        if push {
            if self.cfg.latency {
                let ready = self.ready_stamp();
                self.tasks.borrow_mut().set_ready(header.key, ready);
            }
            let group = if header.state().is_keyed() {
                self.tasks.borrow().group_of(header)
            } else {
                GroupId::task(header.key.index())
            };
            self.push_task(header.queue as usize, header.key, group);
        }
    }

    /// Spawns `spawn` with a local join handle: where every local spawn
    /// entry point ends.
    pub(crate) fn spawn_task<F>(&self, spawn: Spawn<F>) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let Spawn {
            queue,
            group,
            name,
            future,
        } = spawn;
        self.insert_and_queue(queue, group, name, |tasks, group| {
            let (cell, group) = tasks.insert_joined(future, queue, group);
            let id = cell.key();
            (JoinHandle::new(cell), id, group)
        })
    }

    /// Stores a new task with `insert` (which returns what the caller gets,
    /// the task's id and its group) and queues it on queue `q`; refused
    /// once the executor shut down, or onto a quarantined queue.
    #[inline(always)]
    pub(super) fn insert_and_queue<R>(
        &self,
        q: usize,
        group: Option<u64>,
        name: Option<Rc<str>>,
        insert: impl FnOnce(&mut TaskSlab<Remote>, Option<GroupId>) -> (R, TaskKey, GroupId),
    ) -> Result<R, SpawnError> {
        if self.shutdown.get() {
            return Err(SpawnError::Shutdown);
        }
        if self.any_quarantine.get() {
            self.refuse_quarantined(q)?;
        }
        let group = group.map(|key| self.groups.borrow_mut().join(key));
        let (spawned, id, group) = {
            let mut tasks = self.tasks.borrow_mut();
            let (spawned, id, group) = insert(&mut tasks, group);
            if let Some(name) = name {
                tasks.set_name(id, name);
            }
            (spawned, id, group)
        };
        if self.cfg.latency {
            // Not under the borrow: the clock, if it is read, is user code.
            let ready = self.ready_stamp();
            self.tasks.borrow_mut().set_ready(id, ready);
        }
        let activated = {
            let mut qs = self.queues.borrow_mut();
            qs.list[q].counters.spawned += 1;
            self.push_to(&mut qs, q, id, group)
        };
        if activated {
            self.on_activation();
        }
        Ok(spawned)
    }

    /// Why queue `q` is quarantined, if it is.
    pub(crate) fn quarantine_of(&self, q: usize) -> Option<Quarantine> {
        if !self.any_quarantine.get() {
            return None;
        }
        self.queues.borrow().quarantine_of(q)
    }

    /// The refusal of a local spawn onto queue `q`, if it is quarantined.
    #[cold]
    #[inline(never)]
    pub(crate) fn refuse_quarantined(&self, q: usize) -> Result<(), SpawnError> {
        match self.quarantine_of(q) {
            Some(why) => Err(SpawnError::Quarantined(why)),
            None => Ok(()),
        }
    }

    /// `JoinHandle::abort`.
    pub(crate) fn abort(&self, id: TaskKey) {
        if self.tasks.borrow_mut().abort(id) {
            self.aborts.borrow_mut().push(id);
            self.any_abort.set(true);
            self.attention.set(true);
            if !self.driving.get() {
                self.wake_hosts();
            }
        }
    }

    /// `yield_now()` inside this executor, when the fast path (the waker is
    /// the polled task's own) did not apply: the waker belongs to a
    /// combinator or another executor. Standalone it is woken now; nested it
    /// is woken at the next host turn, as tokio defers it.
    pub(crate) fn yield_current(&self, waker: &Waker) {
        if self.driving.get() && self.nested.get() {
            // Cloned before the borrow: the clone is the waker's code.
            let waker = waker.clone();
            self.deferred_wakers.borrow_mut().push(waker);
        } else {
            waker.wake_by_ref();
        }
    }

    /// Gives queue `q` a new weight, keeping its lag and its relative
    /// deadline (R10). A run in progress is charged first, at the old
    /// weights, so that the change applies from this instant on.
    pub(crate) fn set_shares(&self, q: usize, shares: u32) -> Result<(), SharesError> {
        let name = || self.queues.borrow().list[q].name.clone();
        if shares == 0 {
            return Err(SharesError::ZeroShares { queue: name() });
        }
        if shares > crate::config::MAX_SHARES {
            return Err(SharesError::TooManyShares {
                queue: name(),
                shares,
            });
        }
        if self.shutdown.get() {
            return Err(SharesError::Shutdown);
        }
        let running = self.run.current.queue.get();
        if let Some(c) = running {
            self.checkpoint(c);
        }
        {
            let mut qs = self.queues.borrow_mut();
            qs.eevdf.set_weight(q, shares as u64);
            qs.list[q].shares = shares;
        }
        if let Some(c) = running {
            // The running queue's slice left, in real time, changed.
            let qs = self.queues.borrow();
            self.run.reset_countdown(&qs, c, &self.cfg);
            self.run.update_stop(&qs, &self.cfg);
        }
        Ok(())
    }

    pub(crate) fn stats(&self) -> ExecutorStats {
        let qs = self.queues.borrow();
        let queues = (0..qs.list.len())
            .map(|i| {
                queue_stats(
                    &qs,
                    i,
                    self.held(i),
                    &self.intake,
                    self.observer.histogram(i),
                )
            })
            .collect();
        ExecutorStats {
            polls: self.run.counters.polls.get(),
            runs: self.run.counters.runs.get(),
            turns: self.run.counters.turns.get(),
            parks: self.run.counters.parks.get(),
            caught_panics: self.panics.caught(),
            scheduler_violations: self.panics.violations(),
            live_tasks: self.tasks.borrow().len(),
            live_groups: self.groups.borrow().len(),
            avg_vruntime: qs.eevdf.avg_vruntime(),
            queues,
        }
    }

    pub(crate) fn queue_stats(&self, q: usize) -> QueueStats {
        queue_stats(
            &self.queues.borrow(),
            q,
            self.held(q),
            &self.intake,
            self.observer.histogram(q),
        )
    }

    /// Runnable tasks of queue `q` that its run in progress took from the
    /// scheduler and has not polled yet, or requeued and not pushed yet.
    fn held(&self, q: usize) -> usize {
        if self.run.current.queue.get() == Some(q) {
            self.run.held.len.get() - self.run.held.pos.get() + self.run.held.tail.len()
        } else {
            0
        }
    }

    /// Drops every unfinished task exactly once and refuses new ones. Their
    /// join handles, local or remote, then resolve to `Cancelled`, or to
    /// the panic of the future's destructor (`JoinError::is_panic`), as
    /// tokio's do (completed tasks left the slab already: their results
    /// wait in their handles' cells).
    ///
    /// Returns, per queue, what it dropped unfinished: the tasks alive (each
    /// also counted in its queue's `cancelled`) and the remote spawns it had
    /// accepted and not made tasks yet (waiting in the inbox or the remote
    /// backlog), whose handles read the same. Empty if the executor was
    /// shut down already.
    ///
    /// Every destructor, waker and callback it runs is a panic boundary;
    /// the panics no handle reads are dropped (nothing unwinds out of a
    /// drop, whatever the panic policy): the shutdown always finishes.
    pub(crate) fn shutdown(&self) -> Vec<u64> {
        if self.shutdown.replace(true) {
            return Vec::new();
        }
        let mut dropped = vec![0; self.queues.borrow().list.len()];
        // Remote spawns that never became tasks: each sees the shutdown and
        // drops its future, then its delivery (its join handle reads
        // Cancelled), each behind a boundary of its own (either may panic).
        self.intake.close(self, &mut dropped);
        self.aborts.borrow_mut().clear();
        self.any_abort.set(false);
        self.deferred.borrow_mut().clear();
        let wakers = std::mem::take(&mut *self.deferred_wakers.borrow_mut());
        for w in wakers {
            self.drop_quietly(w);
        }
        let report = self.observer.take_report();
        self.drop_quietly(report);
        self.drain_tasks(&mut dropped);
        self.panics.discard();
        dropped
    }

    /// Drops `value`, whose destructor is user code, at shutdown.
    fn drop_quietly<T>(&self, value: T) {
        if let Some(p) = boundary::drop_caught(value) {
            self.panics.report(p);
        }
    }

    /// Drops every unfinished task (shutdown), counting each in its queue's
    /// `cancelled` and in `dropped`.
    fn drain_tasks(&self, dropped: &mut [u64]) {
        // Destructors may drop join handles or wake tasks: each pass drops
        // with no borrow held, and the loop catches anything they left.
        loop {
            let entries = self.tasks.borrow_mut().drain();
            if entries.is_empty() {
                break;
            }
            {
                let mut qs = self.queues.borrow_mut();
                // A completed task already ended for its scheduler
                // (`polled(finished)`, `group_ended`) and left the slab; the
                // filter guards that.
                for d in entries.iter().filter(|d| !d.entry.is_complete()) {
                    let (e, group) = (&d.entry, d.group);
                    qs.list[e.queue()].counters.cancelled += 1;
                    dropped[e.queue()] += 1;
                    qs.list[e.queue()].sched.forget(e.id(), group);
                    if self.groups.borrow_mut().leave(group) {
                        qs.group_ended(e.queue(), group);
                    }
                }
            }
            let mut join_wakers = Vec::new();
            for d in entries {
                join_wakers.extend(d.join_waker);
                // Its handle, local or remote, reads Cancelled, or the panic
                // of its destructor.
                let (delivered, released) = d.entry.end_at_shutdown(d.deliver);
                for p in [delivered, released].into_iter().flatten() {
                    self.panics.report(p);
                }
            }
            for w in join_wakers {
                self.panics.check(boundary::call(move || w.wake()));
            }
        }
    }
}

fn queue_stats(
    qs: &Queues,
    i: usize,
    held: usize,
    intake: &Intake,
    wake_latency: LatencyHistogram,
) -> QueueStats {
    let st = &qs.list[i];
    let e = &qs.eevdf.ents[i];
    QueueStats {
        name: st.name.clone(),
        shares: st.shares,
        scheduler: st.sched.kind(),
        spawned: st.counters.spawned,
        completed: st.counters.completed,
        cancelled: st.counters.cancelled,
        panicked: st.counters.panicked,
        polls: st.counters.polls,
        runs: st.counters.runs,
        service: Duration::from_nanos(st.counters.service_ns),
        runnable_tasks: st.sched.len() + held,
        remote_waiting: intake.waiting_in(i),
        runnable: e.runnable,
        vruntime: e.v,
        deadline: e.d,
        lag_ns: qs.eevdf.lag_ns(i),
        stalls: st.counters.stalls,
        wake_latency,
        quarantine: st.quarantine.as_deref().cloned(),
    }
}

/// A task to spawn: the queue it goes to (an index), its keyed group (a
/// group of its own if `None`), its name (for stall reports) and its
/// future. Every local spawn describes its task so and hands it to
/// [`Core::spawn_task`] (`task_builder::spawn_local`).
#[must_use = "a `Spawn` spawns nothing until `Core::spawn_task` takes it"]
pub(crate) struct Spawn<F> {
    pub(crate) queue: usize,
    pub(crate) group: Option<u64>,
    pub(crate) name: Option<Rc<str>>,
    pub(crate) future: F,
}

/// The executor as remote work sees it (`remote/target.rs`).
impl Target<Remote> for Core {
    fn wake_foreign(&self, key: TaskKey) {
        self.tasks.borrow().clear_remote_notified(key);
        self.wake_local(key);
    }

    fn abort(&self, key: TaskKey) {
        Core::abort(self, key);
    }

    fn report(&self, payload: boundary::Payload) {
        self.panics.report(payload);
    }

    fn is_shut_down(&self) -> bool {
        self.shutdown.get()
    }

    fn quarantine_of(&self, q: usize) -> Option<Quarantine> {
        Core::quarantine_of(self, q)
    }

    fn spawn_detached(
        &self,
        q: usize,
        group: Option<u64>,
        insert: Insert<'_, Remote>,
    ) -> Result<TaskKey, SpawnError> {
        self.insert_and_queue(q, group, None, |tasks, group| {
            let (id, group) = insert(tasks, group);
            (id, id, group)
        })
    }

    fn window(&self) -> Weak<dyn Window> {
        self.me.clone()
    }

    fn set_shares(&self, q: usize, shares: u32) -> Result<(), SharesError> {
        Core::set_shares(self, q, shares)
    }

    fn stats(&self) -> ExecutorStats {
        Core::stats(self)
    }

    fn take_timeline(&self) -> Option<crate::timeline::Timeline> {
        self.observer.take_timeline(&self.queues, self.now_ns())
    }
}

/// A remote task's ticket gives its place in the admission window back
/// (`remote/ticket.rs`).
impl Window for Core {
    fn freed(&self, q: usize) {
        if self.intake.window_freed(q) && !self.shutdown.get() {
            self.attention.set(true);
        }
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.shutdown();
    }
}
