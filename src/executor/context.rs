#![forbid(unsafe_code)]
//! The thread-local "current executor": set while an executor drives its
//! tasks (inside `block_on`, `run_until` or `run_until_stalled`), so that
//! free functions (`spawn`, `yield_now`, `should_yield`) and same-thread
//! wakes find it. Nested executors save and restore the previous one.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::core::Core;

thread_local! {
    static CURRENT: RefCell<Option<Rc<Core>>> = const { RefCell::new(None) };
}

/// Restores the previous current executor on drop (also when unwinding).
pub(crate) struct EnterGuard {
    prev: Option<Rc<Core>>,
}

pub(crate) fn enter(core: &Rc<Core>) -> EnterGuard {
    let prev = CURRENT.with(|c| c.replace(Some(core.clone())));
    EnterGuard { prev }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = prev);
    }
}

/// Runs `f` with the current executor, if any. Returns `None` during thread
/// teardown.
#[inline]
pub(crate) fn with_current<R>(f: impl FnOnce(Option<&Rc<Core>>) -> R) -> R {
    match CURRENT.try_with(|c| c.try_borrow().ok().map(|b| b.clone())) {
        Ok(Some(core)) => f(core.as_ref()),
        _ => f(None),
    }
}

/// Runs `f` with the current executor while holding a shared borrow of the
/// thread-local slot (no reference-count traffic): for the local wake
/// path, which runs no user code that could enter an executor (a custom
/// scheduler's `push` calling `block_on` would panic in [`enter`]: a
/// scheduler must not drive an executor). `None` during thread teardown.
#[inline]
pub(crate) fn with_current_ref<R>(f: impl FnOnce(Option<&Core>) -> R) -> R {
    let mut f = Some(f);
    let r = CURRENT.try_with(|c| match c.try_borrow() {
        Ok(b) => (f.take().expect("called once"))(b.as_deref()),
        Err(_) => (f.take().expect("called once"))(None),
    });
    match r {
        Ok(r) => r,
        Err(_) => (f.take().expect("teardown: not called yet"))(None),
    }
}

thread_local! {
    /// Header address of the task this thread is polling (null if none).
    static POLLING: Cell<*const ()> = const { Cell::new(std::ptr::null()) };
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
    yielded: bool,
}

/// A run of this thread's executor starts: saves (and clears) the marker of
/// an enclosing poll until the returned guard is dropped.
pub(crate) fn begin_run() -> RunMarker {
    RunMarker {
        header: POLLING.with(|p| p.replace(std::ptr::null())),
        yielded: YIELDED.with(|y| y.replace(false)),
    }
}

impl Drop for RunMarker {
    fn drop(&mut self) {
        let _ = POLLING.try_with(|p| p.set(self.header));
        let _ = YIELDED.try_with(|y| y.set(self.yielded));
    }
}

/// Marks the start of a poll of the task whose header is at `header` (inside
/// a run: see [`begin_run`]).
#[inline]
pub(crate) fn begin_poll(header: *const ()) {
    POLLING.with(|p| p.set(header));
    YIELDED.with(|y| y.set(false));
}

/// Marks the end of a poll; returns whether the task yielded through the
/// fast path during it.
#[inline]
pub(crate) fn end_poll() -> bool {
    POLLING.with(|p| p.set(std::ptr::null()));
    YIELDED.with(|y| y.get())
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
    if !polling.is_null() && waker.data() == polling && crate::waker::is_task_waker(waker) {
        YIELDED.with(|y| y.set(true));
        true
    } else {
        false
    }
}
