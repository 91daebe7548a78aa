//! The floor with queues: what running tasks on several queues of
//! different shares costs an executor that does nothing else (no clock,
//! no virtual time, no statistics), as the yardstick for tourbillon's
//! queue switches and its 8-queue row.
//!
//! * the floor's tasks, in its slab with a free list (`super::Slots`);
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

use super::{drop_waker, JoinHandle, Slots, MAIN};

/// Polls per unit of share in a queue's turn.
const QUANTUM: u32 = 64;

struct Inner {
    tasks: Slots,
    /// Each slot's queue.
    queue_of: RefCell<Vec<u8>>,
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
            tasks: Slots::default(),
            queue_of: RefCell::default(),
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
        let (slot, handle) = self.0.tasks.insert(fut);
        {
            let mut queue_of = self.0.queue_of.borrow_mut();
            match queue_of.get_mut(slot as usize) {
                Some(entry) => *entry = q as u8,
                None => queue_of.push(q as u8),
            }
        }
        self.0.queues[q].borrow_mut().push_back(slot);
        handle
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
                self.0.tasks.run(slot, &waker(slot));
            }
        };
        CURRENT.with(|c| *c.borrow_mut() = prev);
        out
    }
}
