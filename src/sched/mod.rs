#![forbid(unsafe_code)]
//! The per-queue task scheduler: which runnable task of a queue runs next.
//!
//! Between queues the executor decides (EEVDF, by weight); inside a queue a
//! [`Scheduler`] does, set per queue with
//! [`QueueSpec::scheduler`](crate::QueueSpec::scheduler). The trait sees
//! only task keys ([`TaskKey`]), group ids and measured durations: the executor owns
//! tasks, wakers, channels and clocks. Its contract with the executor is
//! documented on [`Scheduler`].
//!
//! Built in: [`RunnableFifo`] (the default: tasks in the order they became
//! runnable) and [`Las`] (least attained service first, by group). They are
//! dispatched statically (a `match`, no virtual call per poll); a custom
//! scheduler is called through a `Box<dyn Scheduler>`.
//!
//! A custom scheduler one of whose methods panics [`QUARANTINE_AFTER`]
//! times in a row is quarantined with its queue ([`Quarantine`]; see
//! [`Scheduler`]'s contract).

pub(crate) mod fifo;
pub(crate) mod guarded;
pub(crate) mod las;
pub(crate) mod scheduler;

use std::any::Any;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use crate::boundary::PanicSink;
pub use crate::error::quarantine::Quarantine;
use crate::task::id::{GroupId, TaskKey};
pub use fifo::RunnableFifo;
use guarded::Guarded;
pub use las::Las;
pub use scheduler::{Scheduler, QUARANTINE_AFTER};

/// A queue's scheduler: built-ins by value (static dispatch), others boxed.
/// `repr(u8)`: an explicit tag, which a dispatch reads in one compare (the
/// niche the compiler would pick costs about 11 instructions per dispatch;
/// callgrind).
#[repr(u8)]
pub(crate) enum QueueScheduler {
    Fifo(RunnableFifo),
    Las(Las),
    Custom(Box<Guarded>),
}

impl QueueScheduler {
    /// Wraps `s`, recognising the built-in schedulers by type.
    pub(crate) fn from_scheduler<S: Scheduler>(s: S) -> Self {
        let mut slot = Some(s);
        if let Some(f) = (&mut slot as &mut dyn Any).downcast_mut::<Option<RunnableFifo>>() {
            if let Some(f) = f.take() {
                return QueueScheduler::Fifo(f);
            }
        }
        if let Some(l) = (&mut slot as &mut dyn Any).downcast_mut::<Option<Las>>() {
            if let Some(l) = l.take() {
                return QueueScheduler::Las(l);
            }
        }
        match slot {
            Some(s) => QueueScheduler::Custom(Box::new(Guarded::new(Box::new(s)))),
            None => QueueScheduler::Fifo(RunnableFifo::new()),
        }
    }

    /// Whether [`polled`](Scheduler::polled), [`forget`](Scheduler::forget)
    /// and [`group_ended`](Scheduler::group_ended) do nothing for this
    /// scheduler (`RunnableFifo`, which keeps no per-task or per-group
    /// state), so that the executor may skip the calls.
    #[inline]
    pub(crate) fn is_stateless(&self) -> bool {
        matches!(self, QueueScheduler::Fifo(_))
    }

    /// Connects a custom scheduler to its executor's panic sink (the
    /// built-in ones do not panic).
    pub(crate) fn attach(&mut self, sink: &Rc<PanicSink>, queue: &str) {
        if let QueueScheduler::Custom(g) = self {
            g.attach(sink.clone(), queue);
        }
    }

    /// A custom scheduler that reached the quarantine
    /// ([`QUARANTINE_AFTER`]) and was not taken yet: why, and the user's
    /// scheduler, to drop (user code: behind the panic boundary).
    pub(crate) fn take_quarantined(&mut self) -> Option<(Quarantine, Box<dyn Scheduler>)> {
        match self {
            QueueScheduler::Custom(g) => g.take_quarantined(),
            _ => None,
        }
    }

    /// Whether a run that ended, `drained` when its last `pop` returned
    /// `None`, leaves the queue without work: a custom scheduler's `len`
    /// is not trusted for this (see [`Guarded`]).
    pub(crate) fn ran_dry(&self, drained: bool) -> bool {
        match self {
            QueueScheduler::Custom(g) => g.is_empty(),
            _ => drained || self.is_empty(),
        }
    }

    /// A `RunnableFifo` that holds no id.
    #[inline(always)]
    pub(crate) fn is_empty_fifo(&self) -> bool {
        matches!(self, QueueScheduler::Fifo(f) if f.is_empty())
    }

    /// A scheduler written outside the crate, whose ids the executor
    /// checks.
    #[inline]
    pub(crate) fn is_custom(&self) -> bool {
        matches!(self, QueueScheduler::Custom(_))
    }

    pub(crate) fn kind(&self) -> &'static str {
        match self {
            QueueScheduler::Fifo(_) => "RunnableFifo",
            QueueScheduler::Las(_) => "Las",
            QueueScheduler::Custom(_) => "custom",
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $s:ident => $e:expr) => {
        match $self {
            QueueScheduler::Fifo($s) => $e,
            QueueScheduler::Las($s) => $e,
            QueueScheduler::Custom($s) => $e,
        }
    };
}

impl QueueScheduler {
    /// Always inlined: `Las`'s push inlines its level-0 case, and a push
    /// called out of line costs the nested run loop about 60
    /// instructions per task (callgrind `overhead_profile nested 1
    /// 50000`: 2,180 per task against 2,120 inlined; 2-vCPU VM,
    /// `Intel(R) Xeon(R) Processor`, Linux 6.18.44, rustc 1.95.0,
    /// 2026-11-29).
    #[inline(always)]
    pub(crate) fn push(&mut self, task: TaskKey, group: GroupId) {
        dispatch!(self, s => s.push(task, group))
    }
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<TaskKey> {
        dispatch!(self, s => s.pop())
    }
    #[inline]
    pub(crate) fn len(&self) -> usize {
        dispatch!(self, s => s.len())
    }
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        dispatch!(self, s => s.is_empty())
    }
    pub(crate) fn wants_timing(&self) -> bool {
        dispatch!(self, s => s.wants_timing())
    }
    #[inline]
    pub(crate) fn polled(
        &mut self,
        task: TaskKey,
        group: GroupId,
        elapsed: Option<Duration>,
        finished: bool,
    ) {
        dispatch!(self, s => s.polled(task, group, elapsed, finished))
    }
    /// `polled(.., finished = false)`, then `push` if the task is runnable
    /// again: one dispatch for the two calls of a pending poll.
    #[inline]
    pub(crate) fn polled_pending(
        &mut self,
        task: TaskKey,
        group: GroupId,
        elapsed: Option<Duration>,
        requeue: bool,
    ) {
        dispatch!(self, s => {
            s.polled(task, group, elapsed, false);
            if requeue {
                s.push(task, group);
            }
        })
    }
    /// Takes the next tasks to run into `buf`, in order, and returns how
    /// many: a batch from a `RunnableFifo` (its order is fixed at push
    /// time) or from level 0 of a batching `Las` ([`Las::batches`]), one
    /// task from any other scheduler (whose choice may change with every
    /// push).
    #[inline(always)]
    pub(crate) fn take_next(&mut self, buf: &[Cell<TaskKey>]) -> usize {
        match self {
            QueueScheduler::Fifo(f) => f.take_front(buf),
            QueueScheduler::Las(l) => l.take_front(buf),
            QueueScheduler::Custom(_) => match self.pop() {
                Some(id) => {
                    buf[0].set(id);
                    1
                }
                None => 0,
            },
        }
    }
    /// The front of the queue, if the run loop may take ids from it in
    /// batches ([`take_next`](Self::take_next)), give back those it did
    /// not run ([`Front::put_front`]) and requeue in bulk
    /// ([`Front::push_back_all`]): a `RunnableFifo`, or the level 0 of a
    /// batching `Las`.
    #[inline(always)]
    pub(crate) fn front(&mut self) -> Option<Front<'_>> {
        match self {
            QueueScheduler::Fifo(f) => Some(Front::Fifo(f)),
            QueueScheduler::Las(l) if l.requeues_behind() => Some(Front::Las(l)),
            _ => None,
        }
    }
    /// The queue's `Las`, if that is its scheduler and it batches
    /// ([`Las::batches`]) or requeues behind ([`Las::requeues_behind`]):
    /// the run loop charges its polls ([`Las::charge`]) and requeues
    /// through its tail.
    #[inline(always)]
    pub(crate) fn batching_las(&mut self) -> Option<&mut Las> {
        match self {
            QueueScheduler::Las(l) if l.requeues_behind() => Some(l),
            _ => None,
        }
    }
    pub(crate) fn forget(&mut self, task: TaskKey, group: GroupId) {
        dispatch!(self, s => s.forget(task, group))
    }
    #[inline]
    pub(crate) fn group_ended(&mut self, group: GroupId) {
        dispatch!(self, s => s.group_ended(group))
    }
}

/// The batch end of a queue's scheduler ([`QueueScheduler::front`]): where
/// the run loop's batches come from and its requeues go.
pub(crate) enum Front<'a> {
    Fifo(&'a mut RunnableFifo),
    /// Level 0 of a batching `Las`.
    Las(&'a mut Las),
}

impl Front<'_> {
    /// Whether the front holds no id.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Front::Fifo(f) => f.is_empty(),
            Front::Las(l) => l.front_is_empty(),
        }
    }

    /// Pushes `ids` behind, in order; on a `Las`, first charges each
    /// task's own group with its poll's duration in `ns`
    /// ([`Las::push_back_charged`]).
    #[inline]
    pub(crate) fn push_back_all(&mut self, ids: &[Cell<TaskKey>], ns: &[Cell<u64>]) {
        match self {
            Front::Fifo(f) => f.push_back_all(ids),
            Front::Las(l) => l.push_back_charged(ids, ns),
        }
    }

    /// Puts `ids` back in front, in order.
    pub(crate) fn put_front(&mut self, ids: &[Cell<TaskKey>]) {
        match self {
            Front::Fifo(f) => f.put_front(ids),
            Front::Las(l) => l.put_front(ids),
        }
    }
}
