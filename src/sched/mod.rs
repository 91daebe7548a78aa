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

use std::any::Any;
use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use crate::boundary::PanicSink;
use crate::task::id::{GroupId, TaskKey};
pub use fifo::RunnableFifo;
use guarded::Guarded;
pub use las::Las;

/// Orders the runnable tasks of one queue.
///
/// A scheduler names tasks by their [`TaskKey`]: where the task lives in
/// its executor (unique among that executor's tasks, reused by a later
/// task of another generation), not its process-unique [`TaskId`]
/// (`task::id()`, `JoinHandle::id`). [`JoinHandle::key`](crate::task::JoinHandle::key)
/// and [`AbortHandle::key`](crate::task::AbortHandle::key) give a task's key, to
/// relate what a scheduler sees to a task.
///
/// [`TaskId`]: crate::task::TaskId
///
/// # Contract
///
/// What the executor guarantees:
/// * [`push`](Scheduler::push) is called when a task becomes runnable (it is
///   spawned, or woken after a poll returned `Pending`), at most once between
///   two [`pop`](Scheduler::pop)s that return it: several wakes of a task are
///   merged before they reach the scheduler.
/// * After each poll of a task that `pop` returned,
///   [`polled`](Scheduler::polled) is called once, with the poll's measured
///   duration if [`wants_timing`](Scheduler::wants_timing) is `true`, and
///   whether the task finished. A task that is pending again is pushed again
///   only when it is woken, after `polled`.
/// * [`forget`](Scheduler::forget) is called when a task ends without a poll
///   (aborted while idle or queued, or dropped at shutdown). If the scheduler
///   still holds the id it may drop it then, or return it from `pop` later:
///   the executor skips ids of ended tasks.
/// * [`group_ended`](Scheduler::group_ended) is called once, when the last
///   task of a group has ended (by finishing, abort or shutdown): for a
///   task's own group on its queue's scheduler, for a keyed group (see
///   [`spawn_in_group`](crate::Executor::spawn_in_group)) on every queue's
///   scheduler. After that the same [`GroupId`] may name a new group.
/// * All calls happen on the executor's thread, never re-entrantly.
///
/// What a scheduler must guarantee: never lose a task (every pushed id is
/// eventually returned by `pop`, unless forgotten), return only ids it was
/// given, never return an id twice for one push, and keep `len` equal to
/// the number of ids it holds. It must not drive an executor (`block_on`,
/// `run_until`) from inside one of its methods: `push` may run inside a
/// waker's `wake`, with the current executor borrowed.
///
/// What the executor does when a scheduler breaks it:
/// * An id that names a live task which is not queued (an id returned
///   twice, or never pushed) or which belongs to another queue is not
///   polled. Ids of tasks that ended are skipped silently (a scheduler may
///   keep ids after `forget`).
/// * Whether the queue has work is decided by `push` (it has) and by a
///   `pop` that returns `None` (it has not), never by `len`, so a wrong
///   `len` cannot stall the queue.
/// * A panic in any method is caught and handled by the executor's
///   [`PanicPolicy`](crate::config::PanicPolicy): a task whose `push` panicked is
///   kept by the executor and run as if `pop` had returned it next; a `pop`
///   that panicked is asked again at the queue's next run.
/// * A method that panics [`QUARANTINE_AFTER`] times in a row (a call of
///   that method that returns normally starts the count again; each
///   method has its own count) quarantines the queue, at the end of the
///   driver's turn: the scheduler is never called again and is dropped;
///   every task of the queue ends unpolled (its future is dropped) and
///   its join handle reads a [`JoinError`](crate::task::JoinError) whose
///   [`is_panic`](crate::task::JoinError::is_panic) is `true` and whose payload
///   is a `String` that starts with `tourbillon: queue <key> quarantined`
///   (a task aborted before reads `Cancelled`), remote spawns onto the
///   queue included, then and later; a local spawn onto it fails with
///   [`SpawnError::Quarantined`](crate::error::SpawnError::Quarantined); the
///   queue leaves the EEVDF runnable set for good; and
///   [`QueueStats::quarantine`](crate::stats::QueueStats::quarantine)
///   says why. These ends are not the tasks' own panics: they never
///   resume out of the driver (the scheduler's panics go to the panic
///   policy as any other). The other queues run on.
///
/// Every violation is counted in
/// [`ExecutorStats::scheduler_violations`](crate::stats::ExecutorStats::scheduler_violations);
/// in debug builds it also panics out of `block_on` / `run_until` with a
/// message naming the broken rule, whatever the panic policy.
///
/// # Example
///
/// A last-in-first-out scheduler, written outside the crate:
///
/// ```
/// use tourbillon::sched::Scheduler;
/// use tourbillon::task::{GroupId, TaskKey};
/// use tourbillon::{Builder, QueueSpec};
///
/// #[derive(Default)]
/// struct Lifo(Vec<TaskKey>);
///
/// impl Scheduler for Lifo {
///     fn push(&mut self, task: TaskKey, _group: GroupId) {
///         self.0.push(task);
///     }
///     fn pop(&mut self) -> Option<TaskKey> {
///         self.0.pop()
///     }
///     fn len(&self) -> usize {
///         self.0.len()
///     }
/// }
///
/// let ex = Builder::new()
///     .queue_with("lifo", QueueSpec::new(1).scheduler(Lifo::default()))
///     .build()
///     .unwrap();
/// let out = ex.block_on(async {
///     let a = ex.spawn("lifo", async { 1 }).unwrap();
///     let b = ex.spawn("lifo", async { 2 }).unwrap();
///     a.await.unwrap() + b.await.unwrap()
/// });
/// assert_eq!(out, 3);
/// ```
pub trait Scheduler: 'static {
    /// `task`, of group `group`, became runnable.
    fn push(&mut self, task: TaskKey, group: GroupId);

    /// Removes and returns the task to poll next.
    fn pop(&mut self) -> Option<TaskKey>;

    /// Number of task ids held.
    fn len(&self) -> usize;

    /// Whether no task id is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether [`polled`](Scheduler::polled) should receive each poll's
    /// duration. Asking costs one clock read per poll. Read once, when the
    /// executor is built.
    fn wants_timing(&self) -> bool {
        false
    }

    /// A poll of `task` (returned by `pop`) ended; `elapsed` is its measured
    /// duration when timing was asked for; `finished` says the task is done.
    fn polled(&mut self, task: TaskKey, group: GroupId, elapsed: Option<Duration>, finished: bool) {
        let _ = (task, group, elapsed, finished);
    }

    /// `task` ended without being polled (aborted, or shut down).
    fn forget(&mut self, task: TaskKey, group: GroupId) {
        let _ = (task, group);
    }

    /// The last task of `group` ended: per-group state can go.
    fn group_ended(&mut self, group: GroupId) {
        let _ = group;
    }
}

/// How many panics in a row of one method of a custom [`Scheduler`]
/// quarantine its queue (see the contract on [`Scheduler`]).
pub const QUARANTINE_AFTER: u32 = 3;

/// Why a queue was quarantined: a method of its custom [`Scheduler`]
/// panicked [`QUARANTINE_AFTER`] times in a row. Read it in
/// [`QueueStats::quarantine`](crate::stats::QueueStats::quarantine) and
/// [`SpawnError::Quarantined`](crate::error::SpawnError::Quarantined).
///
/// Its `Display` is the message of the quarantine:
///
/// ```text
/// queue "jobs" quarantined: its scheduler's `pop` panicked 3 times in a row (last panic: "index out of bounds")
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quarantine {
    /// The queue's key, as `{:?}` prints it.
    pub queue: String,
    /// The method that kept panicking: `"push"`, `"pop"`, `"len"`,
    /// `"wants_timing"`, `"polled"`, `"forget"` or `"group_ended"`.
    pub method: &'static str,
    /// Its panics in a row ([`QUARANTINE_AFTER`]).
    pub panics: u32,
    /// The message of the last of them, if its payload is a string.
    pub message: Option<String>,
}

impl fmt::Display for Quarantine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "queue {} quarantined: its scheduler's `{}` panicked {} times in a row",
            self.queue, self.method, self.panics
        )?;
        match &self.message {
            Some(m) => write!(f, " (last panic: {m:?})"),
            None => write!(f, " (last panic: a payload that is not a string)"),
        }
    }
}

impl Quarantine {
    /// The panic payload of a task that the quarantine ended.
    pub(crate) fn task_payload(&self) -> String {
        format!("tourbillon: {self}; the task was dropped unfinished")
    }
}

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
    #[inline]
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
            QueueScheduler::Las(l) if l.batches() => Some(Front::Las(l)),
            _ => None,
        }
    }
    /// The queue's `Las`, if that is its scheduler and it batches
    /// ([`Las::batches`]): the run loop charges its polls
    /// ([`Las::charge`]) and requeues through its batch path.
    #[inline(always)]
    pub(crate) fn batching_las(&mut self) -> Option<&mut Las> {
        match self {
            QueueScheduler::Las(l) if l.batches() => Some(l),
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
