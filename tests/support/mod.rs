//! Helpers shared by several test binaries (a module of each, not a test
//! itself; each uses a part of it).
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::{Poll, Waker};

/// A one-shot signal on the executor's thread: `wait` is pending until
/// `open`. Counts the polls of its waiter.
#[derive(Default)]
pub struct Gate {
    open: Cell<bool>,
    waker: RefCell<Option<Waker>>,
    /// Polls of the future returned by `wait`.
    pub polls: Cell<usize>,
}

impl Gate {
    pub fn new() -> Rc<Gate> {
        Rc::default()
    }

    /// Opens the gate and wakes its waiter, if any.
    pub fn open(&self) {
        self.open.set(true);
        let w = self.waker.borrow_mut().take();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Pending until `open` was called.
    pub fn wait(self: &Rc<Self>) -> impl Future<Output = ()> + 'static {
        let g = self.clone();
        poll_fn(move |cx| {
            g.polls.set(g.polls.get() + 1);
            if g.open.get() {
                Poll::Ready(())
            } else {
                *g.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }
}
