#![forbid(unsafe_code)]
//! The task being polled on this thread: set by the run loop around each
//! poll (through the harness's `PollScope`), read by `yield_now`'s fast
//! path and by `task::id()`. A run saves and restores the marker of an
//! enclosing poll (an executor driven inside another executor's task).

use std::cell::Cell;

use super::id::TaskId;

thread_local! {
    /// Header address of the task this thread is polling (null if none).
    static POLLING: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
    /// The id of the task this thread is polling (valid while `POLLING`
    /// is not null).
    static POLLING_ID: Cell<TaskId> = const { Cell::new(TaskId::new(0, 0)) };
    /// Set by `yield_now` when it yields the task being polled.
    static YIELDED: Cell<bool> = const { Cell::new(false) };
}

/// The poll marker of an enclosing poll (a task of an outer executor that
/// runs this one inside its own poll), saved when a run starts and
/// restored when it ends (also when unwinding), so that a yield of the
/// outer task is neither lost nor taken for an inner task's. Saved once
/// per run rather than once per poll.
pub(crate) struct RunMarker {
    header: *const (),
    id: TaskId,
    yielded: bool,
}

/// A run of this thread's executor starts: saves (and clears) the marker of
/// an enclosing poll until the returned guard is dropped.
pub(crate) fn begin_run() -> RunMarker {
    RunMarker {
        header: POLLING.with(|p| p.replace(std::ptr::null())),
        id: POLLING_ID.with(Cell::get),
        yielded: YIELDED.with(|y| y.replace(false)),
    }
}

impl Drop for RunMarker {
    fn drop(&mut self) {
        let _ = POLLING.try_with(|p| p.set(self.header));
        let _ = POLLING_ID.try_with(|p| p.set(self.id));
        let _ = YIELDED.try_with(|y| y.set(self.yielded));
    }
}

/// Marks the start of a poll of the task whose header is at `header`, with
/// id `id` (inside a run: see [`begin_run`]).
#[inline(always)]
pub(crate) fn enter(header: *const (), id: TaskId) {
    POLLING.with(|p| p.set(header));
    POLLING_ID.with(|p| p.set(id));
    YIELDED.with(|y| y.set(false));
}

/// Marks the end of a poll; returns whether the task yielded through the
/// fast path during it.
#[inline(always)]
pub(crate) fn leave() -> bool {
    POLLING.with(|p| p.set(std::ptr::null()));
    YIELDED.with(|y| y.get())
}

/// The id of the task this thread is polling, if any (`task::try_id`).
pub(crate) fn task_id() -> Option<TaskId> {
    let polling = POLLING.try_with(|p| !p.get().is_null()).unwrap_or(false);
    polling.then(|| POLLING_ID.with(Cell::get))
}

/// Whether this thread is polling a task right now.
#[inline]
pub(crate) fn in_task_poll() -> bool {
    !POLLING.with(|p| p.get()).is_null()
}

/// `yield_now` fast path: if `waker` is the own waker of the task this
/// thread is polling, record the yield (the run loop requeues or defers the
/// task after the poll) and return `true`. No executor lookup, no slab
/// access: two thread-local reads and a pointer comparison.
#[inline]
pub(crate) fn try_fast_yield(waker: &std::task::Waker) -> bool {
    let polling = POLLING.with(|p| p.get());
    if !polling.is_null() && waker.data() == polling && super::waker::is_task_waker(waker) {
        YIELDED.with(|y| y.set(true));
        true
    } else {
        false
    }
}

/// The id of the task being polled on this thread.
///
/// # Panics
/// Outside a task of a tourbillon executor (tokio's `task::id` panics
/// likewise); [`try_id`] returns `None` there instead.
///
/// ```
/// use tourbillon::Builder;
///
/// let ex = Builder::new().queue("main", 1).build().unwrap();
/// ex.block_on(async {
///     let h = ex
///         .spawn("main", async { tourbillon::task::id() })
///         .unwrap();
///     let id = h.id();
///     assert_eq!(h.await.unwrap(), id);
/// });
/// ```
#[track_caller]
pub fn id() -> TaskId {
    try_id().expect("tourbillon::task::id() called outside a task")
}

/// The id of the task being polled on this thread, or `None` outside a
/// task (in `block_on`'s own future, in a host runtime's task, on another
/// thread).
pub fn try_id() -> Option<TaskId> {
    task_id()
}
