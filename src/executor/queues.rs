#![forbid(unsafe_code)]
//! The queues at run time: each queue's scheduler, counters and poll-cost
//! estimate ([`QueueState`]) and the EEVDF table, indexed alike
//! ([`Queues`]). Built from the user's [`QueueSpec`]s; it pushes tasks and
//! records which queues became runnable, and leaves every decision (when
//! to place, pick, charge) to the run loop.

use std::rc::Rc;
use std::time::Duration;

use crate::boundary::PanicSink;
use crate::clock::duration_ns;
use crate::eevdf::{Eevdf, Entity};
use crate::error::quarantine::Quarantine;
use crate::queue::QueueSpec;
use crate::sched::QueueScheduler;
use crate::stats::QueueCounters;
use crate::task::id::{GroupId, TaskKey};

/// What a queue's scheduler asks of a run: per-poll durations
/// (`timing`), `polled` calls (`tell_polled`), the batch path of a `Las`
/// (`las`). Fixed when the queue is built (`QueueState::mode`). One byte
/// of flags, so that a queue switch compares the next queue's needs with
/// the run's in one instruction (`Core::switch_in_run`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct SchedMode(u8);

impl SchedMode {
    const TIMING: u8 = 1;
    const TELL_POLLED: u8 = 1 << 1;
    const LAS: u8 = 1 << 2;
    const SWITCH: u8 = 1 << 3;

    /// What `sched`, the scheduler of a queue with a latency requirement
    /// or not (`latency`), asks of a run.
    pub(super) fn of(sched: &mut QueueScheduler, latency: bool) -> Self {
        let needs = Self::new(
            sched.wants_timing(),
            !sched.is_stateless(),
            sched.batching_las().is_some(),
        );
        needs.switching(!sched.is_custom() && !latency)
    }

    /// The same needs, and whether a queue switch may end a run of the
    /// queue or start one (`Core::switch_in_run`): a built-in scheduler,
    /// whose emptiness is exact, and no latency requirement, whose
    /// departure ends the turn (R8e).
    #[inline(always)]
    const fn switching(self, switch: bool) -> Self {
        Self(self.0 | (switch as u8 * Self::SWITCH))
    }

    /// A queue switch may end a run of the queue or start one.
    #[inline(always)]
    pub(super) const fn switches(self) -> bool {
        self.0 & Self::SWITCH != 0
    }

    /// The needs given as flags.
    #[inline(always)]
    const fn new(timing: bool, tell_polled: bool, las: bool) -> Self {
        Self(
            (timing as u8 * Self::TIMING)
                | (tell_polled as u8 * Self::TELL_POLLED)
                | (las as u8 * Self::LAS),
        )
    }

    /// The scheduler takes each poll's duration.
    #[inline(always)]
    pub(super) const fn timing(self) -> bool {
        self.0 & Self::TIMING != 0
    }

    /// The scheduler is told of every poll (not a `RunnableFifo`).
    #[inline(always)]
    pub(super) const fn tell_polled(self) -> bool {
        self.0 & Self::TELL_POLLED != 0
    }

    /// A batching `Las`.
    #[inline(always)]
    pub(super) const fn las(self) -> bool {
        self.0 & Self::LAS != 0
    }

    /// The same needs without per-poll durations and the batch path of a
    /// `Las` (a run that reads the clock only at checkpoints).
    #[inline(always)]
    pub(super) const fn untimed(self) -> Self {
        Self(self.0 & !(Self::TIMING | Self::LAS))
    }
}

/// One queue at run time.
pub(crate) struct QueueState {
    pub(crate) name: String,
    pub(crate) shares: u32,
    pub(crate) sched: QueueScheduler,
    /// What its scheduler asks of a run, read at every run's start and
    /// queue switch (`Core::sched_mode`).
    pub(super) mode: SchedMode,
    pub(crate) counters: QueueCounters,
    /// Running estimate of the cost of one poll, ns (amortised clock reads).
    pub(crate) poll_cost_ns: u64,
    /// Waiting for EEVDF placement at the next boundary.
    pub(crate) activation_pending: bool,
    /// [`QueueSpec::latency`], ns.
    pub(crate) latency_ns: Option<u64>,
    /// Why the queue is quarantined, once it is (`Core::settle_quarantines`, `executor/run_loop.rs`).
    /// Boxed: one word in the state the run loop indexes.
    pub(crate) quarantine: Option<Box<Quarantine>>,
}

impl QueueState {
    /// A checkpoint charged `delta_ns` for `polls` polls of this queue:
    /// its service, its poll count, and its running poll-cost estimate
    /// (an average weighted 3:1 toward the past).
    #[inline(always)]
    pub(crate) fn record_service(&mut self, delta_ns: u64, polls: u32) {
        if polls > 0 {
            self.record_polls(delta_ns, polls);
        } else {
            self.counters.service_ns = self.counters.service_ns.saturating_add(delta_ns);
        }
    }

    /// This queue, the only one pending, is placed by a queue switch: no
    /// longer pending, and the list of pending queues (`pending`) empty.
    #[inline(always)]
    pub(crate) fn switched_to(&mut self, pending: &mut Vec<usize>) {
        debug_assert!(self.activation_pending && pending.len() == 1);
        self.activation_pending = false;
        pending.clear();
    }

    /// [`record_service`](Self::record_service) of at least one poll (a
    /// queue switch charges the polls of the run it ends: one or more).
    #[inline(always)]
    pub(crate) fn record_polls(&mut self, delta_ns: u64, polls: u32) {
        debug_assert!(polls > 0);
        self.counters.service_ns = self.counters.service_ns.saturating_add(delta_ns);
        self.counters.polls += u64::from(polls);
        // One poll (a run that a queue switch ends): no division.
        let per = if polls == 1 {
            delta_ns
        } else {
            delta_ns / polls as u64
        };
        self.poll_cost_ns = if self.poll_cost_ns == 0 {
            per
        } else {
            // In 128 bits: after a jump of the clock `3·cost + per` can
            // pass `u64::MAX`; the average itself fits in 64 bits, and
            // `/ 4` is a shift.
            ((3 * self.poll_cost_ns as u128 + per as u128) / 4) as u64
        };
    }
}

/// Every queue of an executor plus the EEVDF table, indexed alike.
pub(crate) struct Queues {
    pub(crate) list: Vec<QueueState>,
    pub(crate) eevdf: Eevdf,
    /// Queues that went from empty to non-empty since the last boundary.
    pub(crate) pending: Vec<usize>,
    /// Whether any queue has a latency requirement ([`QueueSpec::latency`]).
    pub(crate) any_latency: bool,
}

impl Queues {
    pub(crate) fn new(
        specs: Vec<(String, QueueSpec)>,
        base_slice: Duration,
        sink: &Rc<PanicSink>,
    ) -> Self {
        let mut list = Vec::with_capacity(specs.len());
        let mut ents = Vec::with_capacity(specs.len());
        for (name, mut spec) in specs {
            spec.scheduler.attach(sink, &name);
            let slice = duration_ns(spec.slice.unwrap_or(base_slice));
            ents.push(Entity::new(spec.shares as u64, slice));
            list.push(QueueState {
                name,
                shares: spec.shares,
                mode: SchedMode::of(&mut spec.scheduler, spec.latency.is_some()),
                sched: spec.scheduler,
                counters: QueueCounters::default(),
                poll_cost_ns: 0,
                activation_pending: false,
                latency_ns: spec.latency.map(duration_ns),
                quarantine: None,
            });
        }
        Self {
            any_latency: list.iter().any(|q| q.latency_ns.is_some()),
            list,
            eevdf: Eevdf::new(ents),
            pending: Vec::new(),
        }
    }

    /// The host-yield interval while the queues stand as they are: the
    /// shortest latency requirement of a queue that waits (is not
    /// runnable), or `default` (the builder's interval) if shorter or if
    /// none waits.
    pub(crate) fn host_interval_ns(&self, default: u64) -> u64 {
        if !self.any_latency {
            return default;
        }
        self.list
            .iter()
            .zip(&self.eevdf.ents)
            .filter(|(_, e)| !e.runnable)
            .filter_map(|(q, _)| q.latency_ns)
            .fold(default, u64::min)
    }

    /// Pushes a runnable task; returns `true` if its queue just became
    /// non-empty and awaits placement.
    #[must_use = "`true` asks for a placement at the next boundary (`Core::on_activation`)"]
    #[inline(always)]
    pub(crate) fn push(&mut self, q: usize, task: TaskKey, group: GroupId) -> bool {
        let qs = &mut self.list[q];
        qs.sched.push(task, group);
        if qs.activation_pending || self.eevdf.ents[q].runnable {
            return false;
        }
        qs.activation_pending = true;
        self.pending.push(q);
        true
    }

    /// The last task of `group` ended: a task's own group concerns its
    /// queue's scheduler only; a keyed group may have had tasks on every
    /// queue, so every scheduler is told.
    pub(crate) fn group_ended(&mut self, queue: usize, group: GroupId) {
        if group.is_task_group() {
            self.list[queue].sched.group_ended(group);
        } else {
            for st in &mut self.list {
                st.sched.group_ended(group);
            }
        }
    }
}

/// A queue's quarantine (a custom scheduler that keeps panicking,
/// `sched/guarded.rs`; settled by the run loop at the end of a turn).
impl Queues {
    /// Why queue `q` is quarantined, if it is.
    pub(crate) fn quarantine_of(&self, q: usize) -> Option<Quarantine> {
        self.list[q].quarantine.as_deref().cloned()
    }

    /// Marks queue `q` quarantined and takes it out of the EEVDF runnable
    /// set: it is never placed again (its scheduler is empty for good).
    /// Returns whether the queue had a latency requirement (the host
    /// interval may change).
    pub(crate) fn quarantine(&mut self, q: usize, why: Quarantine) -> bool {
        self.list[q].quarantine = Some(Box::new(why));
        if self.eevdf.ents[q].runnable {
            self.eevdf.depart(q);
        }
        self.list[q].latency_ns.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::SchedMode;

    /// Each of the sixteen combinations reads back as given, compares
    /// equal only to itself, and loses exactly its timing and `Las`
    /// flags in `untimed`.
    #[test]
    fn sched_mode_flags() {
        let all: Vec<(bool, bool, bool, bool)> = (0..16u8)
            .map(|i| (i & 1 != 0, i & 2 != 0, i & 4 != 0, i & 8 != 0))
            .collect();
        let mode = |(t, p, l, s): (bool, bool, bool, bool)| SchedMode::new(t, p, l).switching(s);
        for &flags in &all {
            let (_, tell_polled, _, switch) = flags;
            let m = mode(flags);
            assert_eq!((m.timing(), m.tell_polled(), m.las(), m.switches()), flags);
            assert_eq!(m.untimed(), mode((false, tell_polled, false, switch)));
            for &other in &all {
                assert_eq!(m == mode(other), flags == other);
            }
        }
    }
}
