#![forbid(unsafe_code)]
//! The thread-local "current executor": set while an executor drives its
//! tasks (inside `block_on`, `run_until` or `run_until_stalled`), so that
//! free functions (`spawn`, `yield_now`, `should_yield`) and same-thread
//! wakes find it. Nested executors save and restore the previous one.

use std::cell::RefCell;
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
