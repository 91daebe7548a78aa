#![forbid(unsafe_code)]
//! The [`Scheduler`] trait, its contract with the executor, and the
//! quarantine threshold of a custom scheduler that keeps panicking.

use std::time::Duration;

use crate::task::id::{GroupId, TaskKey};

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
///   [`spawn_in_group`](crate::Spawner::spawn_in_group)) on every queue's
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
