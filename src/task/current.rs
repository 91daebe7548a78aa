//! The task being polled on this thread: set by the run loop around each
//! poll (through the harness's `PollScope`), read by `yield_now`'s fast
//! path and by `task::id()`; and the task whose future or output is being
//! dropped on this thread ([`dropping`]), which `task::id()` gives first.
//! A driver (`block_on`, a poll of `run_until`,
//! `run_until_stalled`) and each run save, clear and restore the marker of
//! an enclosing poll (an executor driven inside another executor's task),
//! so a driver's main future, which is no task, sees no task.
//!
//! The `unsafe` here reads the header of the task being polled, under one
//! invariant:
//!
//! * **P1 (poll marker).** `POLLING` is not null only between [`enter`]
//!   and [`leave`] of one poll on this thread (a nested driver and a nested
//!   run clear it and restore it after, [`save_marker`]), and [`enter`]
//!   stores the header of a `RawTask` the harness is polling: its RUNNING
//!   bit keeps the slab's reference (S1, RUNNING lock, in `task/slab.rs`),
//!   so the cell is alive (I1, liveness, in `task/raw/mod.rs`) while this
//!   thread is inside that poll.

use std::cell::Cell;

use super::id::TaskId;
use super::raw::{header_ref, Header};

thread_local! {
    /// Header address of the task this thread is polling (null if none).
    static POLLING: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
    /// Set by `yield_now` when it yields the task being polled.
    static YIELDED: Cell<bool> = const { Cell::new(false) };
    /// The task whose future or output this thread is dropping, if any.
    static DROPPING: Cell<Option<TaskId>> = const { Cell::new(None) };
}

/// The poll marker of an enclosing poll (a task of an outer executor that
/// runs this one inside its own poll), saved when a driver is entered or a
/// run starts and restored when it ends (also when unwinding): the
/// driver's main future is polled with no task marked, and a yield of the
/// outer task is neither lost nor taken for an inner task's. Saved once
/// per driver call (per poll of `run_until`) and once per run, never per
/// task poll.
pub(crate) struct SavedMarker {
    header: *const (),
    yielded: bool,
    dropping: Option<TaskId>,
}

/// A driver is entered or a run of this thread's executor starts: saves
/// (and clears) the marker of an enclosing poll until the returned guard
/// is dropped.
pub(crate) fn save_marker() -> SavedMarker {
    SavedMarker {
        header: POLLING.with(|p| p.replace(std::ptr::null())),
        yielded: YIELDED.with(|y| y.replace(false)),
        dropping: DROPPING.with(|d| d.replace(None)),
    }
}

impl Drop for SavedMarker {
    fn drop(&mut self) {
        let _ = POLLING.try_with(|p| p.set(self.header));
        let _ = YIELDED.try_with(|y| y.set(self.yielded));
        let _ = DROPPING.try_with(|d| d.set(self.dropping));
    }
}

/// The id of the task whose future or output is dropped on this thread
/// while the returned guard lives (`task::id()` gives it there, also
/// inside a poll of another task); the previous one is back when the guard
/// is dropped, also when unwinding.
#[inline]
pub(crate) fn dropping(id: TaskId) -> DroppingGuard {
    DroppingGuard(DROPPING.try_with(|d| d.replace(Some(id))).ok().flatten())
}

/// Restores the task marked by [`dropping`] before.
pub(crate) struct DroppingGuard(Option<TaskId>);

impl Drop for DroppingGuard {
    #[inline]
    fn drop(&mut self) {
        let _ = DROPPING.try_with(|d| d.set(self.0));
    }
}

/// Marks the start of a poll of the task whose header is at `header`
/// (`RawTask::header_addr`; inside a run: see [`save_marker`]).
#[inline(always)]
pub(crate) fn enter(header: *const ()) {
    POLLING.with(|p| p.set(header));
    YIELDED.with(|y| y.set(false));
}

/// Marks the end of a poll; returns whether the task yielded through the
/// fast path during it.
#[inline(always)]
pub(crate) fn leave() -> bool {
    POLLING.with(|p| p.set(std::ptr::null()));
    YIELDED.with(|y| y.get())
}

/// Whether this thread is polling a task of the executor that owns
/// `header` (one with the same sink): then this is that executor's thread,
/// where the task's state bits may be read and written.
#[inline(always)]
fn on_owner_thread(header: &Header) -> bool {
    let polling = POLLING.with(|p| p.get());
    if polling.is_null() {
        return false;
    }
    if std::ptr::eq(polling, (header as *const Header).cast()) {
        return true;
    }
    // SAFETY: `header_ref`'s `# Safety`: P1 (poll marker): a non-null
    // `POLLING` is the header of a task this thread is polling (I5), whose
    // RUNNING bit keeps its cell alive until the poll returns (S1, I1), and
    // this runs on this thread, so inside that poll; the reference ends
    // before we return.
    let polled = unsafe { header_ref(polling) };
    polled.same_sink(header)
}

/// A waker of the task of `header` is cloned: `true` if it takes back the
/// reference a dropped one left counted (the CREDIT state bit), so that
/// the clone adds none.
#[inline(always)]
pub(crate) fn take_credit(header: &Header) -> bool {
    if !on_owner_thread(header) {
        return false;
    }
    let mut st = header.state();
    if !st.has_credit() {
        return false;
    }
    st.set_credit(false);
    header.set_state(st);
    true
}

/// A waker of the task of `header` that owns a reference is given up:
/// `true` if its reference stays counted for the next clone (the CREDIT
/// state bit), instead of being released. Only on the executor's thread,
/// while the slab holds the task (not COMPLETE), and for one reference.
#[inline(always)]
pub(crate) fn keep_credit(header: &Header) -> bool {
    if !on_owner_thread(header) {
        return false;
    }
    let mut st = header.state();
    if st.is_complete() || st.has_credit() {
        return false;
    }
    st.set_credit(true);
    header.set_state(st);
    true
}

/// The id of the task whose future or output this thread is dropping, else
/// of the task it is polling, if any (`task::try_id`).
pub(crate) fn task_id() -> Option<TaskId> {
    if let Some(id) = DROPPING.try_with(Cell::get).ok().flatten() {
        return Some(id);
    }
    let header = POLLING.try_with(Cell::get).ok()?;
    if header.is_null() {
        return None;
    }
    // SAFETY: `header_ref`'s `# Safety`: P1 (poll marker): a non-null
    // `POLLING` is the header of the task this thread is polling (I5),
    // whose RUNNING bit keeps its cell alive (S1, I1) while this thread is
    // inside that poll, as it is here; the reference ends before we return.
    Some(unsafe { header_ref(header) }.task_id)
}

/// Whether this thread is polling a task right now.
#[inline]
pub(crate) fn in_task_poll() -> bool {
    !POLLING.with(|p| p.get()).is_null()
}

/// The header address of the task this thread is polling (null if none):
/// what `yield_now`'s fast path compares a waker's data with
/// (`waker::try_fast_yield`).
#[inline(always)]
pub(crate) fn polling() -> *const () {
    POLLING.with(|p| p.get())
}

/// Records that the task being polled yielded through `yield_now`'s fast
/// path (the run loop requeues or defers it after the poll: [`leave`]).
#[inline(always)]
pub(crate) fn mark_yielded() {
    YIELDED.with(|y| y.set(true));
}

/// The id of the task being polled on this thread, or whose future or
/// output is being dropped on it (as tokio's `task::id`: in a destructor
/// run by an abort, by a cancellation when the executor shuts down, or by
/// the end of the task).
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

/// The id of the task being polled on this thread, or whose future or
/// output is being dropped on it, or `None` outside a task: in the future given to [`Executor::block_on`](crate::Executor::block_on)
/// or [`Executor::run_until`](crate::Executor::run_until) (also when that
/// call is made inside a task of another executor, whose id is back once
/// it returns), in a host runtime's task, on another thread.
///
/// ```
/// use tourbillon::{task, Builder};
///
/// let outer = Builder::new().queue("main", 1).build().unwrap();
/// let h = outer
///     .spawn("main", async {
///         let inner = Builder::new().queue("main", 1).build().unwrap();
///         let nested = inner.block_on(async { task::try_id() });
///         (nested, task::try_id())
///     })
///     .unwrap();
/// let id = h.id();
/// assert_eq!(outer.block_on(h).unwrap(), (None, Some(id)));
/// ```
pub fn try_id() -> Option<TaskId> {
    task_id()
}
