#![forbid(unsafe_code)]
//! Observation of the run: the [`Observer`] (what the latency histograms
//! read before a poll, [`Observed`], and record after it; the stall
//! detector's comparison after it: only runs with per-poll timing come
//! here; the stall report; the timeline's recorder, `crate::timeline`),
//! and the `tracing` spans of runs and polls (`Traced`, with the `tracing`
//! feature). It observes and counts; it decides nothing about the run.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use super::queues::Queues;
use crate::boundary::{self, PanicSink};
use crate::config::Config;
use crate::remote::op::Remote;
use crate::stats::{LatencyHistogram, LatencyRecorder, Stall, StallReport};
use crate::task::id::{TaskId, TaskKey};
use crate::task::slab::TaskSlab;
use crate::timeline::{Recorder, Timeline};

/// [`Observer::stamp`]: no reading to stamp with (outside the driver's
/// polls and turns): a stamp reads the clock.
const STAMP_READ: u64 = u64::MAX;
/// [`Observer::stamp`]: the first stamp reads the clock, and the stamps
/// after it, until the mark changes, take the same reading (the poll of a
/// driver's own future).
const STAMP_READ_ONCE: u64 = u64::MAX - 1;

/// The observer of an executor's polls: what it watches for (the latency
/// histograms, the stall threshold) and whom it tells of a stall (the
/// stall detector's callback).
pub(crate) struct Observer {
    /// The recorders of the wake-to-first-poll histograms, one per queue;
    /// empty unless they are on.
    latency: Box<[LatencyRecorder]>,
    /// With the histograms on, what a task that becomes runnable now is
    /// stamped with ([`ready_stamp`](Self::ready_stamp)): from a turn's
    /// first poll on, the executor's latest clock reading (a poll's start,
    /// a poll's end), so that no spawn or wake reads the clock;
    /// [`STAMP_READ_ONCE`] during the poll of a driver's own future;
    /// [`STAMP_READ`] elsewhere. (A clock that reads one of these two
    /// values makes the stamps after it read the clock: no harm done.)
    stamp: Cell<u64>,
    /// The stall threshold (`u64::MAX`: no stall detector).
    stall_ns: u64,
    /// The stall detector's callback, if any; dropped at shutdown
    /// ([`take_report`](Self::take_report)), so that a callback that holds
    /// a [`Spawner`](crate::Spawner) (and so the executor's core) cannot
    /// keep the executor alive.
    report: RefCell<Option<StallReport>>,
    /// The timeline's buffer, if it is on.
    timeline: Option<RefCell<Recorder>>,
}

/// What [`Observer::before`] read before a poll: when the task became
/// runnable, for its wake-to-first-poll delay. The task's id and name,
/// for a stall report and the timeline, are read after the poll
/// ([`Observer::polled_task`]).
pub(crate) struct Observed {
    /// When the task became runnable (histograms on; 0 otherwise).
    ready_ns: u64,
}

/// A `tracing` span entered for a run or a poll: the subscriber's code
/// that enters and leaves it is user code, behind the panic boundary.
#[cfg(feature = "tracing")]
pub(crate) struct Traced<'a> {
    span: Option<tracing::span::EnteredSpan>,
    sink: &'a crate::boundary::PanicSink,
}

#[cfg(feature = "tracing")]
impl<'a> Traced<'a> {
    pub(crate) fn enter(
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

impl Observer {
    /// The observer `cfg` asks for of an executor of `queues` queues,
    /// telling `report` of stalls.
    pub(crate) fn new(cfg: &Config, queues: usize, report: Option<StallReport>) -> Self {
        let latency = if cfg.latency { queues } else { 0 };
        Self {
            latency: (0..latency).map(|_| LatencyRecorder::new()).collect(),
            stamp: Cell::new(STAMP_READ),
            stall_ns: cfg.stall_ns,
            report: RefCell::new(report),
            timeline: (cfg.timeline > 0).then(|| RefCell::new(Recorder::new(cfg.timeline))),
        }
    }

    /// Takes the timeline recorded so far (`None` when it is off), with
    /// the queues' names, the executor's name and a clock reading taken
    /// now.
    pub(crate) fn take_timeline(&self, queues: &RefCell<Queues>, now_ns: u64) -> Option<Timeline> {
        let rec = self.timeline.as_ref()?;
        let names = queues
            .borrow()
            .list
            .iter()
            .map(|q| q.name.to_string())
            .collect();
        let label = std::thread::current()
            .name()
            .unwrap_or("executor")
            .to_string();
        Some(rec.borrow_mut().take(label, names, now_ns))
    }

    /// Takes the stall callback out (shutdown).
    pub(crate) fn take_report(&self) -> Option<StallReport> {
        self.report.borrow_mut().take()
    }

    /// The `tracing` span of a run of queue `q`.
    #[cfg(feature = "tracing")]
    pub(super) fn run_span<'a>(
        queues: &RefCell<Queues>,
        panics: &'a PanicSink,
        q: usize,
    ) -> Traced<'a> {
        let name = queues.borrow().list[q].name.clone();
        Traced::enter(panics, || {
            tracing::debug_span!("run", queue = %name, index = q).entered()
        })
    }

    /// The `tracing` span of a poll of the task of key `id` of queue `q`,
    /// whose `task` field is the task's id (none for a stale key: nothing
    /// is polled).
    #[cfg(feature = "tracing")]
    pub(super) fn poll_span<'a>(
        tasks: &RefCell<TaskSlab<Remote>>,
        panics: &'a PanicSink,
        q: usize,
        id: TaskKey,
    ) -> Traced<'a> {
        let task = tasks.borrow().get(id).map(|e| e.task_id());
        Traced::enter(panics, || match task {
            Some(task) => tracing::trace_span!("poll", queue = q, task = %task).entered(),
            None => tracing::trace_span!("poll", queue = q).entered(),
        })
    }

    /// The recorder of queue `q`'s histogram, if the histograms are on.
    #[inline(always)]
    pub(super) fn recorder(&self, q: usize) -> Option<&LatencyRecorder> {
        self.latency.get(q)
    }

    /// Queue `q`'s wake-to-first-poll histogram (empty when off).
    pub(crate) fn histogram(&self, q: usize) -> LatencyHistogram {
        self.latency
            .get(q)
            .map_or_else(LatencyHistogram::new, LatencyRecorder::histogram)
    }

    /// What a task that becomes runnable now (spawned, woken) is stamped
    /// with, for the histograms: the reading [`stamp`](Self::stamp)
    /// holds, or a clock read (`read`, the executor's clock).
    #[inline(always)]
    pub(crate) fn ready_stamp(&self, read: impl FnOnce() -> u64) -> u64 {
        let s = self.stamp.get();
        if s < STAMP_READ_ONCE {
            s
        } else {
            self.read_stamp(s, read())
        }
    }

    /// [`ready_stamp`](Self::ready_stamp) outside a turn: `now`, kept for
    /// the stamps that follow in the poll of a driver's own future.
    #[inline(never)]
    fn read_stamp(&self, s: u64, now: u64) -> u64 {
        if s == STAMP_READ_ONCE {
            self.stamp.set(now);
        }
        now
    }

    /// The turn ended (or the driver left it): a stamp reads the clock.
    #[inline(always)]
    pub(crate) fn turn_ended(&self) {
        self.stamp.set(STAMP_READ);
    }

    /// A driver polls its own future (the main future of `block_on` or
    /// `run_until`): the tasks it spawns or wakes are stamped with one
    /// clock reading, taken at the first of them.
    #[inline(always)]
    pub(crate) fn main_poll(&self) {
        self.stamp.set(STAMP_READ_ONCE);
    }

    /// What the observability needs from before a poll of `id` that
    /// starts at `start_ns`: when the task became runnable (`latency`: the
    /// histograms are on). Whether `id` is live is not checked: the poll
    /// says so, and the result of a stale id is dropped. The tasks the
    /// poll spawns or wakes are stamped with its start. Nothing is read for
    /// the stall detector, which compares the poll's duration with its
    /// threshold after the poll.
    #[inline(always)]
    pub(super) fn before(
        &self,
        tasks: &RefCell<TaskSlab<Remote>>,
        id: TaskKey,
        start_ns: u64,
        latency: bool,
    ) -> Observed {
        let ready_ns = if latency {
            self.stamp.set(start_ns);
            // Every task is stamped at its spawn: no stamp only for a
            // stale id.
            // Exclusive though it only reads: a `RefMut`'s flag costs
            // fewer instructions than a `Ref`'s count.
            tasks.borrow_mut().slot_ready_ns(id).unwrap_or(start_ns)
        } else {
            0
        };
        Observed { ready_ns }
    }

    /// The id and name of task `id` after its poll: from its slot while
    /// it lives (nothing removes a task between its poll and the
    /// observer's look at it), else as the slab kept them when it ended in
    /// the poll ([`TaskSlab::removed`]: its slot is gone, and may hold
    /// another task already, spawned by what its end ran).
    ///
    /// Inlined: the timeline calls it after every poll, and a call per
    /// poll made `overhead_profile timeline 3` cost 2,095 instructions per
    /// task against 1,965 inlined (callgrind, `--toggle-collect=
    /// overhead_profile::workload`; a 2-vCPU `Intel(R) Xeon(R) Processor`
    /// VM, Linux 6.18.44, rustc 1.95.0, 2026-11-29).
    #[inline(always)]
    fn polled_task(
        tasks: &RefCell<TaskSlab<Remote>>,
        id: TaskKey,
    ) -> Option<(TaskId, Option<Rc<str>>)> {
        let tasks = tasks.borrow();
        match tasks.get(id) {
            Some(e) => Some((e.task_id(), tasks.slot_name(id))),
            None => tasks.removed(id),
        }
    }

    /// After a poll of task `id` of queue `q`, in the executor's run
    /// `run`, that started at `start_ns` and took `elapsed_ns`: records
    /// its wake-to-first-poll delay in `latency` (the queue's recorder,
    /// histograms on), stamps a task runnable again (`again`: yielded, or
    /// woken during the poll) as ready from the end of the poll, as it
    /// does the tasks that become runnable until the next poll starts,
    /// records the poll in the timeline, and reports a stall.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn after(
        &self,
        queues: &RefCell<Queues>,
        tasks: &RefCell<TaskSlab<Remote>>,
        panics: &PanicSink,
        latency: Option<&LatencyRecorder>,
        q: usize,
        id: TaskKey,
        before: Observed,
        again: bool,
        run: u64,
        start_ns: u64,
        elapsed_ns: u64,
    ) {
        if let Some(rec) = latency {
            rec.record(start_ns.saturating_sub(before.ready_ns));
            // `elapsed_ns` is the end's reading minus `start_ns`, or 0.
            let end = start_ns.wrapping_add(elapsed_ns);
            self.stamp.set(end);
            if again {
                tasks.borrow_mut().restamp_ready(id, end);
            }
        }
        if let Some(rec) = &self.timeline {
            if let Some((task, name)) = Self::polled_task(tasks, id) {
                rec.borrow_mut()
                    .push(q, task, name, run, start_ns, elapsed_ns);
            }
        }
        if elapsed_ns >= self.stall_ns {
            self.report_stall(queues, tasks, panics, q, id, elapsed_ns);
        }
    }

    /// A poll of task `id` ran at least the stall threshold: count it and tell the callback the task's id
    /// and name (no borrow held; a panic of the callback is discarded).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn report_stall(
        &self,
        queues: &RefCell<Queues>,
        tasks: &RefCell<TaskSlab<Remote>>,
        panics: &PanicSink,
        q: usize,
        id: TaskKey,
        ns: u64,
    ) {
        let Some((id, name)) = Self::polled_task(tasks, id) else {
            return;
        };
        let queue = {
            let mut qs = queues.borrow_mut();
            qs.list[q].counters.stalls += 1;
            qs.list[q].name.clone()
        };
        // A clone of the callback, called with no borrow held: it may drop
        // the executor, which drops the callback.
        let report = self.report.borrow().clone();
        if let Some(report) = report {
            let stall = Stall {
                queue,
                queue_index: q,
                task: id,
                name: name.map(|n| n.to_string()),
                duration: Duration::from_nanos(ns),
            };
            panics.check(boundary::call(|| report(&stall)));
        }
    }
}
