#![forbid(unsafe_code)]
//! The thread-local "current executor": set while an executor drives its
//! tasks (inside `block_on`, `run_until` or `run_until_stalled`), so that
//! free functions (`spawn`, `yield_now`, `should_yield`) and same-thread
//! wakes find it. Nested executors save and restore the previous one.
//!
//! And the thread's "waiting nested executor": the one whose `run_until`
//! future last returned `Pending` to its host on this thread, so that a
//! wake from the host's turn on this thread (its reactor reporting a
//! socket ready) reaches the task's queue without the inbox
//! (`executor::wake`).
//!
//! And [`TaskScope`], the harness's `PollScope`: the run loop enters each
//! poll's task into the task core's record of the task being polled on
//! this thread (`task::current`).

use std::cell::RefCell;
use std::rc::{Rc, Weak};

use super::core::Core;
use crate::boundary;
use crate::task::current;
use crate::task::harness::PollScope;
use crate::task::raw::RawTask;

thread_local! {
    static CURRENT: RefCell<Option<Rc<Core>>> = const { RefCell::new(None) };
    static WAITING: RefCell<Weak<Core>> = const { RefCell::new(Weak::new()) };
}

/// Restores the previous current executor on drop (also when unwinding).
pub(crate) struct EnterGuard {
    prev: Option<Rc<Core>>,
    /// Its panic sink is the driving executor's (`boundary::report_here`).
    _sink: boundary::SinkGuard,
}

pub(crate) fn enter(core: &Rc<Core>) -> EnterGuard {
    let _sink = boundary::enter_sink(&core.panics);
    let prev = CURRENT.with(|c| c.replace(Some(core.clone())));
    EnterGuard { prev, _sink }
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

/// Records `core` as this thread's waiting nested executor (its
/// `run_until` future returns `Pending` to the host), in place of any
/// other.
#[inline]
pub(crate) fn set_waiting(core: &Rc<Core>) {
    let _ = WAITING.try_with(|w| {
        if let Ok(mut w) = w.try_borrow_mut() {
            if !std::ptr::eq(w.as_ptr(), Rc::as_ptr(core)) {
                *w = Rc::downgrade(core);
            }
        }
    });
}

/// Forgets `core` as this thread's waiting nested executor (its
/// `run_until` future ended), if it is the one recorded.
pub(crate) fn clear_waiting(core: &Core) {
    let _ = WAITING.try_with(|w| {
        if let Ok(mut w) = w.try_borrow_mut() {
            if std::ptr::eq(w.as_ptr(), core) {
                *w = Weak::new();
            }
        }
    });
}

/// Runs `f` with this thread's waiting nested executor, if there is one
/// and it is alive. `f` must not drive an executor (as in
/// [`with_current_ref`]).
#[inline]
pub(crate) fn with_waiting<R>(f: impl FnOnce(Option<&Core>) -> R) -> R {
    let core = WAITING
        .try_with(|w| w.try_borrow().ok().and_then(|w| w.upgrade()))
        .ok()
        .flatten();
    f(core.as_deref())
}

/// The context of each poll of a run (inside a run: see
/// [`current::save_marker`]): marks the task being polled on this thread.
pub(crate) struct TaskScope;

impl PollScope for TaskScope {
    #[inline(always)]
    fn enter(&self, task: RawTask) {
        current::enter(task.header_addr());
    }

    #[inline(always)]
    fn leave(&self) -> bool {
        current::leave()
    }
}
