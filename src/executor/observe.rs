#![forbid(unsafe_code)]
//! Observation of the run: the [`Observer`] (what the stall detector and
//! the latency histograms read around a poll, [`Observed`]: only runs with
//! per-poll timing come here; the stall report; the timeline's recorder,
//! `crate::timeline`), and the `tracing` spans of runs and polls
//! (`Traced`, with the `tracing` feature). It observes and counts; it
//! decides nothing about the run.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::queues::Queues;
use super::run_state::{Latencies, HELD};
use crate::boundary::{self, PanicSink};
use crate::config::Config;
use crate::remote::op::Remote;
use crate::stats::{Stall, StallReport};
use crate::task::id::{TaskId, TaskKey};
use crate::task::slab::TaskSlab;
use crate::timeline::{Recorder, Timeline};

/// The observer of an executor's polls: what it watches for (the latency
/// histograms, the stall threshold) and whom it tells of a stall (the
/// stall detector's callback).
pub(crate) struct Observer {
    /// Wake-to-first-poll histograms are recorded.
    latency: bool,
    /// The stall threshold (`u64::MAX`: no stall detector).
    stall_ns: u64,
    /// The stall detector's callback, if any; dropped at shutdown
    /// ([`take_report`](Self::take_report)), so that a callback that holds
    /// a [`Spawner`](crate::Spawner) (and so the executor's core) cannot
    /// keep the executor alive.
    report: RefCell<Option<StallReport>>,
    /// The task's id and name are read before each poll (stall detector,
    /// timeline).
    task_ids: bool,
    /// The timeline's buffer, if it is on.
    timeline: Option<RefCell<Recorder>>,
}

/// What [`Observer::before`] read before a poll: the task's
/// wake-to-first-poll delay, and its id and name (for a stall report and
/// the timeline: a task that completes in the poll loses its slot).
pub(crate) struct Observed {
    latency_ns: Option<u64>,
    task: Option<TaskId>,
    name: Option<Rc<str>>,
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
    /// The observer `cfg` asks for, telling `report` of stalls.
    pub(crate) fn new(cfg: &Config, report: Option<StallReport>) -> Self {
        Self {
            latency: cfg.latency,
            stall_ns: cfg.stall_ns,
            report: RefCell::new(report),
            task_ids: cfg.stall_ns != u64::MAX || cfg.timeline > 0,
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

    /// What the observability needs from before a poll of `id` that
    /// starts at `start_ns` (histograms, stall detector): the delay since
    /// the task became runnable, and its id and name. Whether `id` is live is not
    /// checked: the poll says so, and the result of a stale id is dropped.
    #[inline(always)]
    pub(super) fn before(&self, tasks: &TaskSlab<Remote>, id: TaskKey, start_ns: u64) -> Observed {
        Observed {
            latency_ns: if self.latency {
                tasks
                    .slot_ready_ns(id)
                    .map(|ready| start_ns.saturating_sub(ready))
            } else {
                None
            },
            task: if self.task_ids {
                tasks.get(id).map(|e| e.task_id())
            } else {
                None
            },
            name: if self.task_ids {
                tasks.slot_name(id)
            } else {
                None
            },
        }
    }

    /// After a poll of task `id` of queue `q`, in the executor's run
    /// `run`, that started at `start_ns` and took `elapsed_ns`: records
    /// its wake-to-first-poll delay, stamps a task runnable again (`again`:
    /// yielded, or woken during the poll) as ready from the end of the
    /// poll, records the poll in the timeline, and reports a stall.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn after(
        &self,
        queues: &RefCell<Queues>,
        tasks: &RefCell<TaskSlab<Remote>>,
        panics: &PanicSink,
        latencies: &Latencies,
        q: usize,
        id: TaskKey,
        before: Observed,
        again: bool,
        run: u64,
        start_ns: u64,
        elapsed_ns: u64,
    ) {
        if let Some(latency) = before.latency_ns {
            latencies.push(queues, latency);
            if again {
                tasks
                    .borrow_mut()
                    .restamp_ready(id, start_ns.saturating_add(elapsed_ns));
            }
        }
        if let (Some(rec), Some(task)) = (&self.timeline, before.task) {
            rec.borrow_mut()
                .push(q, task, before.name.clone(), run, start_ns, elapsed_ns);
        }
        if elapsed_ns >= self.stall_ns {
            if let Some(task) = before.task {
                self.report_stall(queues, panics, q, task, before.name, elapsed_ns);
            }
        }
    }

    /// The start of a run of queue `q` with observation: the delays kept
    /// from before (a run that a panic ended) are recorded, and the run's
    /// are kept for `q`.
    #[inline(always)]
    pub(super) fn begin_run(&self, queues: &RefCell<Queues>, latencies: &Latencies, q: usize) {
        if latencies.len.get() != 0 {
            latencies.flush(&mut queues.borrow_mut());
        }
        latencies.queue.set(q);
    }

    /// A poll ran at least the stall threshold: count it and tell the
    /// callback (no borrow held; a panic of the callback is discarded).
    #[cold]
    #[inline(never)]
    fn report_stall(
        &self,
        queues: &RefCell<Queues>,
        panics: &PanicSink,
        q: usize,
        id: TaskId,
        name: Option<Rc<str>>,
        ns: u64,
    ) {
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

impl Latencies {
    /// Keeps the delay `ns` of a poll of the running queue; records the
    /// kept ones first when `HELD` are kept.
    #[inline(always)]
    pub(super) fn push(&self, queues: &RefCell<Queues>, ns: u64) {
        let mut n = self.len.get();
        if n >= HELD {
            self.flush(&mut queues.borrow_mut());
            n = 0;
        }
        self.ns.0[n].set(ns);
        self.len.set(n + 1);
    }

    /// Records the kept delays in their queue's histogram, in the order
    /// they were measured (the histogram is the one a record per poll
    /// makes).
    #[inline(never)]
    pub(crate) fn flush(&self, qs: &mut Queues) {
        let n = self.len.replace(0);
        if n == 0 {
            return;
        }
        qs.list[self.queue.get()]
            .counters
            .wake_latency
            .record_all_ns(self.ns.0[..n].iter().map(std::cell::Cell::get));
    }
}
