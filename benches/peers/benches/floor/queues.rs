//! The floor with queues: what running tasks on several queues of
//! different shares costs an executor that does nothing else (no clock,
//! no virtual time, no statistics), as the yardstick for tourbillon's
//! queue switches and its 8-queue row.
//!
//! * the floor's tasks, slab, free list and waker (`super`);
//! * one `VecDeque<u32>` run queue per queue, and each slot's queue beside
//!   the slab (a wake pushes the slot to its own queue);
//! * weighted round-robin counted in polls: queue `k` polls up to
//!   `shares[k] * QUANTUM` tasks, then the next non-empty queue in index
//!   order takes over (an empty queue hands over at once);
//! * the main future is polled again when it was woken, checked after
//!   every poll.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use super::{JoinHandle, Runnable, Stage, TaskCell, MAIN};

/// Polls per unit of share in a queue's turn.
const QUANTUM: u32 = 64;

struct Inner {
    slab: RefCell<Vec<Option<Rc<dyn Runnable>>>>,
    /// Each slot's queue.
    queue_of: RefCell<Vec<u8>>,
    free: RefCell<Vec<u32>>,
    queues: Box<[RefCell<VecDeque<u32>>]>,
    shares: Box<[u32]>,
    main_woken: Cell<bool>,
}

thread_local! {
    /// The executor running on this thread (the wakers' target).
    static CURRENT: RefCell<Option<Rc<Inner>>> = const { RefCell::new(None) };
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop_waker);

fn clone(data: *const ()) -> RawWaker {
    RawWaker::new(data, &VTABLE)
}

fn wake(data: *const ()) {
    let slot = data as usize as u32;
    CURRENT.with(|c| {
        if let Some(inner) = &*c.borrow() {
            if slot == MAIN {
                inner.main_woken.set(true);
            } else {
                let q = inner.queue_of.borrow()[slot as usize] as usize;
                inner.queues[q].borrow_mut().push_back(slot);
            }
        }
    });
}

fn drop_waker(_: *const ()) {}

fn waker(slot: u32) -> Waker {
    // SAFETY (bench code): the vtable's functions ignore the data pointer's
    // target (it is a number), so any value is valid.
    unsafe { Waker::from_raw(RawWaker::new(slot as usize as *const (), &VTABLE)) }
}

/// The floor with queues; `spawn` works while `block_on` runs.
#[derive(Clone)]
pub struct FloorQueues(Rc<Inner>);

impl FloorQueues {
    /// One queue per share (at most 256 queues, shares at least 1).
    pub fn new(shares: &[u32]) -> Self {
        assert!(!shares.is_empty() && shares.len() <= 256 && shares.iter().all(|&s| s > 0));
        FloorQueues(Rc::new(Inner {
            slab: RefCell::default(),
            queue_of: RefCell::default(),
            free: RefCell::default(),
            queues: shares.iter().map(|_| RefCell::default()).collect(),
            shares: shares.into(),
            main_woken: Cell::new(false),
        }))
    }

    pub fn queues(&self) -> usize {
        self.0.queues.len()
    }

    /// Spawns `fut` on queue `q`.
    pub fn spawn<F: Future + 'static>(&self, q: usize, fut: F) -> JoinHandle<F::Output> {
        let cell = Rc::new(TaskCell {
            stage: RefCell::new(Stage::Running(fut)),
            joiner: Cell::new(None),
        });
        let slot = match self.0.free.borrow_mut().pop() {
            Some(s) => {
                self.0.slab.borrow_mut()[s as usize] = Some(cell.clone());
                self.0.queue_of.borrow_mut()[s as usize] = q as u8;
                s
            }
            None => {
                let mut slab = self.0.slab.borrow_mut();
                slab.push(Some(cell.clone()));
                self.0.queue_of.borrow_mut().push(q as u8);
                (slab.len() - 1) as u32
            }
        };
        self.0.queues[q].borrow_mut().push_back(slot);
        JoinHandle(cell)
    }

    /// The next slot to poll: from queue `*k` while its turn lasts
    /// (`*left` polls), else from the next non-empty queue, whose turn
    /// starts.
    fn next(&self, k: &mut usize, left: &mut u32) -> Option<u32> {
        if *left > 0 {
            if let Some(slot) = self.0.queues[*k].borrow_mut().pop_front() {
                *left -= 1;
                return Some(slot);
            }
        }
        let n = self.0.queues.len();
        for step in 1..=n {
            let j = (*k + step) % n;
            if let Some(slot) = self.0.queues[j].borrow_mut().pop_front() {
                *k = j;
                *left = self.0.shares[j] * QUANTUM - 1;
                return Some(slot);
            }
        }
        None
    }

    /// Runs the tasks until `main` completes.
    pub fn block_on<F: Future>(&self, main: F) -> F::Output {
        let prev = CURRENT.with(|c| c.replace(Some(self.0.clone())));
        let mut main = std::pin::pin!(main);
        let main_waker = waker(MAIN);
        let (mut k, mut left) = (0, self.0.shares[0] * QUANTUM);
        let out = 'outer: loop {
            self.0.main_woken.set(false);
            if let Poll::Ready(out) = main.as_mut().poll(&mut Context::from_waker(&main_waker)) {
                break 'outer out;
            }
            while !self.0.main_woken.get() {
                let Some(slot) = self.next(&mut k, &mut left) else {
                    panic!("floor: nothing runnable and the main future is pending");
                };
                let task = self.0.slab.borrow()[slot as usize].clone();
                let Some(task) = task else { continue };
                let w = waker(slot);
                if task.run(&mut Context::from_waker(&w)) {
                    self.0.slab.borrow_mut()[slot as usize] = None;
                    self.0.free.borrow_mut().push(slot);
                }
            }
        };
        CURRENT.with(|c| *c.borrow_mut() = prev);
        out
    }
}
