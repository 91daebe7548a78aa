//! The *floor*: the least a single-threaded executor can do per task, as a
//! yardstick for the others (it is no executor anyone should use).
//!
//! * one `Rc` allocation per task, holding the future, then its output, and
//!   the joiner's waker;
//! * a `Vec` slab of those `Rc`s with a free list of slots, and a
//!   `VecDeque<u32>` of runnable slots;
//! * a waker whose data is the slot number: `clone` and `drop` do nothing,
//!   `wake` pushes the slot to the run queue of this thread's executor.
//!
//! What it leaves out, and real executors pay for: generation checks (a
//! wake of a finished task whose slot was reused polls the new task once,
//! spuriously: futures allow it), wakes from other threads, panics, fairness,
//! statistics, cancellation.
//!
//! [`queues`] is the same floor with several run queues of different
//! shares, the yardstick for what queues cost.

pub mod queues;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

/// A task as the run loop sees it: poll it once; `true` when it finished.
trait Runnable {
    fn run(&self, cx: &mut Context<'_>) -> bool;
}

/// A task as its join handle sees it.
trait Joinable<T> {
    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<T>;
}

enum Stage<F: Future> {
    Running(F),
    Done(F::Output),
    Taken,
}

struct TaskCell<F: Future> {
    stage: RefCell<Stage<F>>,
    joiner: Cell<Option<Waker>>,
}

impl<F: Future> Runnable for TaskCell<F> {
    fn run(&self, cx: &mut Context<'_>) -> bool {
        let mut stage = self.stage.borrow_mut();
        let Stage::Running(fut) = &mut *stage else {
            return true;
        };
        // SAFETY (bench code): the future lives inside the `Rc`'s heap cell
        // and is never moved until it is replaced by its output below.
        let fut = unsafe { Pin::new_unchecked(fut) };
        match fut.poll(cx) {
            Poll::Pending => false,
            Poll::Ready(out) => {
                *stage = Stage::Done(out);
                drop(stage);
                if let Some(w) = self.joiner.take() {
                    w.wake();
                }
                true
            }
        }
    }
}

impl<F: Future> Joinable<F::Output> for TaskCell<F> {
    fn poll_join(&self, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut stage = self.stage.borrow_mut();
        match std::mem::replace(&mut *stage, Stage::Taken) {
            Stage::Done(out) => Poll::Ready(out),
            other => {
                *stage = other;
                self.joiner.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

/// Awaits a task's output.
pub struct JoinHandle<T>(Rc<dyn Joinable<T>>);

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        self.0.poll_join(cx)
    }
}

/// The tasks: a `Vec` slab of their cells with a free list of slots.
#[derive(Default)]
struct Slots {
    slab: RefCell<Vec<Option<Rc<dyn Runnable>>>>,
    free: RefCell<Vec<u32>>,
}

impl Slots {
    /// Stores a new task for `fut`; returns its slot and its join handle.
    #[inline(always)]
    fn insert<F: Future + 'static>(&self, fut: F) -> (u32, JoinHandle<F::Output>) {
        let cell = Rc::new(TaskCell {
            stage: RefCell::new(Stage::Running(fut)),
            joiner: Cell::new(None),
        });
        let slot = match self.free.borrow_mut().pop() {
            Some(s) => {
                self.slab.borrow_mut()[s as usize] = Some(cell.clone());
                s
            }
            None => {
                let mut slab = self.slab.borrow_mut();
                slab.push(Some(cell.clone()));
                (slab.len() - 1) as u32
            }
        };
        (slot, JoinHandle(cell))
    }

    /// Polls the task in `slot` (if any) once with `waker`; frees the slot
    /// when it finished.
    #[inline(always)]
    fn run(&self, slot: u32, waker: &Waker) {
        let task = self.slab.borrow()[slot as usize].clone();
        let Some(task) = task else { return };
        if task.run(&mut Context::from_waker(waker)) {
            self.slab.borrow_mut()[slot as usize] = None;
            self.free.borrow_mut().push(slot);
        }
    }
}

#[derive(Default)]
struct Inner {
    tasks: Slots,
    runnable: RefCell<VecDeque<u32>>,
}

thread_local! {
    /// The executor running on this thread (the wakers' target).
    static CURRENT: RefCell<Option<Rc<Inner>>> = const { RefCell::new(None) };
}

/// The main future's wakes go to this slot number.
const MAIN: u32 = u32::MAX;

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop_waker);

fn clone(data: *const ()) -> RawWaker {
    RawWaker::new(data, &VTABLE)
}

fn wake(data: *const ()) {
    let slot = data as usize as u32;
    CURRENT.with(|c| {
        if let Some(inner) = &*c.borrow() {
            inner.runnable.borrow_mut().push_back(slot);
        }
    });
}

fn drop_waker(_: *const ()) {}

fn waker(slot: u32) -> Waker {
    // SAFETY (bench code): the vtable's functions ignore the data pointer's
    // target (it is a number), so any value is valid.
    unsafe { Waker::from_raw(RawWaker::new(slot as usize as *const (), &VTABLE)) }
}

/// The floor executor; `spawn` works while `block_on` runs.
#[derive(Clone, Default)]
pub struct Floor(Rc<Inner>);

impl Floor {
    pub fn spawn<F: Future + 'static>(&self, fut: F) -> JoinHandle<F::Output> {
        let (slot, handle) = self.0.tasks.insert(fut);
        self.0.runnable.borrow_mut().push_back(slot);
        handle
    }

    /// Runs the tasks until `main` completes.
    pub fn block_on<F: Future>(&self, main: F) -> F::Output {
        let prev = CURRENT.with(|c| c.replace(Some(self.0.clone())));
        let mut main = std::pin::pin!(main);
        let main_waker = waker(MAIN);
        let out = 'outer: loop {
            if let Poll::Ready(out) = main.as_mut().poll(&mut Context::from_waker(&main_waker)) {
                break 'outer out;
            }
            loop {
                let Some(slot) = self.0.runnable.borrow_mut().pop_front() else {
                    panic!("floor: nothing runnable and the main future is pending");
                };
                if slot == MAIN {
                    break;
                }
                self.0.tasks.run(slot, &waker(slot));
            }
        };
        CURRENT.with(|c| *c.borrow_mut() = prev);
        out
    }
}

/// Yields once: wakes itself and returns `Pending`.
pub struct YieldNow(bool);

pub fn yield_now() -> YieldNow {
    YieldNow(false)
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
