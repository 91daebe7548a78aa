#![forbid(unsafe_code)]
//! The remote backlog: spawns from other threads that the executor took
//! from its inbox but has not made into tasks yet, one line per queue, and
//! the **admission window** that makes them tasks.
//!
//! A queue admits remote spawns (each becomes a task of the queue, at the
//! end of its run queue) until [`WINDOW`] of its remote tasks wait for
//! their first poll; it admits again once half of them are polled (or
//! dropped unpolled: aborted, or their spawn refused), at the next poll
//! boundary, up to `WINDOW` again: admission is a batch per half window,
//! as the bounded spawner's gate wakes a sender per half capacity. So a
//! flood of remote spawns costs the executor at most `WINDOW` tasks in
//! memory per queue, whatever its size: the executor's task cells, slab
//! entries and run queue stay small and warm, and the backlog waits in the
//! spawning thread's allocations. The window is per queue, so that a slow
//! queue's backlog never holds back another queue's spawns (rule T9 in
//! `docs/design.md`).
//!
//! A spawn taken from the inbox with nothing waiting before it in its line
//! and its queue's window open becomes a task at once (the usual case of
//! an executor that keeps up); otherwise it joins the end of its line.
//!
//! The executor takes the inbox's spawns at every poll boundary while the
//! backlog holds fewer than `WINDOW` spawns in all, and otherwise once a
//! driver turn: under a flood the spawning thread queues into the inbox
//! without waking anything or meeting the executor at every push, and a
//! spawn still waits at most a turn before it joins its queue's line.
//! Foreign wakes are taken at every boundary, as always.
//!
//! A remote task's place in its queue's window is a `Ticket`
//! (`remote/ticket.rs`), held by its future until the first poll. The boundary work that
//! takes spawns from the inbox and admits them is `remote/intake.rs`'s.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use super::op::RemoteSpawn;

/// Remote tasks of one queue that may wait for their first poll at once.
pub(crate) const WINDOW: u32 = 64;

/// The remote backlog of every queue (see the module's notes).
pub(crate) struct Backlog {
    lines: RefCell<Vec<Line>>,
    /// Spawns waiting, all queues.
    waiting: Cell<usize>,
    /// Queues with a spawn waiting and an open window, each once.
    open: RefCell<Vec<usize>>,
}

#[derive(Default)]
struct Line {
    spawns: VecDeque<RemoteSpawn>,
    /// Admitted tasks of the queue not polled yet.
    unpolled: u32,
    /// `unpolled` reached `WINDOW` and has not yet fallen to half of it.
    full: bool,
    /// In `Backlog::open`.
    listed: bool,
}

impl Line {
    fn can_admit(&self) -> bool {
        !self.spawns.is_empty() && !self.full
    }
}

impl Backlog {
    /// A backlog for `queues` queues.
    pub(crate) fn new(queues: usize) -> Self {
        Self {
            lines: RefCell::new((0..queues).map(|_| Line::default()).collect()),
            waiting: Cell::new(0),
            open: RefCell::new(Vec::new()),
        }
    }

    /// Spawns waiting, all queues.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.get()
    }

    /// Spawns waiting for queue `q`.
    pub(crate) fn waiting_in(&self, q: usize) -> usize {
        self.lines.borrow().get(q).map_or(0, |l| l.spawns.len())
    }

    /// Whether a spawn can be admitted now (one load while nothing waits:
    /// every poll boundary asks).
    #[inline]
    pub(crate) fn has_open(&self) -> bool {
        self.waiting.get() != 0 && !self.open.borrow().is_empty()
    }

    /// Queues a spawn for queue `q` (an index the spawner checked).
    pub(crate) fn push(&self, q: usize, spawn: RemoteSpawn) {
        let mut lines = self.lines.borrow_mut();
        let line = &mut lines[q];
        line.spawns.push_back(spawn);
        self.waiting.set(self.waiting.get() + 1);
        self.list(q, line);
    }

    /// Takes a place in queue `q`'s window for a spawn that arrives now,
    /// if it can be admitted at once: nothing waits before it in its line
    /// and the window is open. `false`: it must wait in the line
    /// ([`push`](Self::push)).
    pub(crate) fn admit_now(&self, q: usize) -> bool {
        let mut lines = self.lines.borrow_mut();
        let line = &mut lines[q];
        if !line.spawns.is_empty() || line.full {
            return false;
        }
        line.unpolled += 1;
        line.full = line.unpolled == WINDOW;
        true
    }

    /// The next spawn to admit, with its queue; its place in the window is
    /// taken (given back by [`polled`](Self::polled)). `None` when no queue
    /// with a spawn waiting has room.
    pub(crate) fn admit(&self) -> Option<(usize, RemoteSpawn)> {
        let mut lines = self.lines.borrow_mut();
        let mut open = self.open.borrow_mut();
        while let Some(&q) = open.last() {
            let line = &mut lines[q];
            if line.can_admit() {
                let spawn = line.spawns.pop_front().expect("a waiting spawn");
                line.unpolled += 1;
                line.full = line.unpolled == WINDOW;
                self.waiting.set(self.waiting.get() - 1);
                return Some((q, spawn));
            }
            line.listed = false;
            open.pop();
        }
        None
    }

    /// An admitted task of queue `q` was polled (or dropped unpolled): its
    /// place in the window is free, and a full window opens again at half.
    /// Returns whether a spawn can now be admitted.
    pub(crate) fn polled(&self, q: usize) -> bool {
        let mut lines = self.lines.borrow_mut();
        let line = &mut lines[q];
        line.unpolled -= 1;
        if line.unpolled <= WINDOW / 2 {
            line.full = false;
        }
        self.list(q, line)
    }

    /// The spawns waiting in queue `q`'s line, in arrival order (a
    /// quarantined queue's). The line stays listed as open until
    /// [`admit`](Self::admit) finds it empty.
    pub(crate) fn take_line(&self, q: usize) -> VecDeque<RemoteSpawn> {
        let mut lines = self.lines.borrow_mut();
        let spawns = std::mem::take(&mut lines[q].spawns);
        self.waiting.set(self.waiting.get() - spawns.len());
        spawns
    }

    /// Every waiting spawn, in queue order then arrival order (shutdown).
    pub(crate) fn take_all(&self) -> Vec<RemoteSpawn> {
        let mut lines = self.lines.borrow_mut();
        self.open.borrow_mut().clear();
        self.waiting.set(0);
        lines
            .iter_mut()
            .flat_map(|l| {
                l.listed = false;
                std::mem::take(&mut l.spawns)
            })
            .collect()
    }

    /// Lists queue `q` as open if it can admit and is not listed; returns
    /// whether it can admit.
    fn list(&self, q: usize, line: &mut Line) -> bool {
        let can = line.can_admit();
        if can && !line.listed {
            line.listed = true;
            self.open.borrow_mut().push(q);
        }
        can
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue admits up to `WINDOW` spawns, then again once half of them
    /// are polled; a queue with a full window does not hold back another.
    #[test]
    fn the_window_admits_per_queue_in_arrival_order() {
        let b = Backlog::new(2);
        for _ in 0..WINDOW + 40 {
            b.push(0, RemoteSpawn::empty());
        }
        let mut admitted = 0;
        while let Some((q, _)) = b.admit() {
            assert_eq!(q, 0);
            admitted += 1;
        }
        assert_eq!(admitted, WINDOW);
        assert_eq!((b.waiting(), b.waiting_in(0)), (40, 40));
        b.push(1, RemoteSpawn::empty());
        assert!(matches!(b.admit(), Some((1, _))));
        assert!(b.admit().is_none());
        for _ in 0..WINDOW / 2 - 1 {
            assert!(!b.polled(0), "the window is full until half is polled");
            assert!(b.admit().is_none());
        }
        assert!(b.polled(0), "half polled: open again");
        let mut again = 0;
        while b.admit().is_some() {
            again += 1;
        }
        assert_eq!(again, WINDOW / 2, "up to a full window again");
        assert_eq!(b.waiting(), 8);
        for _ in 0..WINDOW / 2 {
            b.polled(0);
        }
        assert_eq!(std::iter::from_fn(|| b.admit()).count(), 8);
        assert_eq!(b.waiting(), 0);
        assert!(!b.has_open());
    }

    #[test]
    fn take_all_empties_every_line() {
        let b = Backlog::new(3);
        for q in [2, 0, 2] {
            b.push(q, RemoteSpawn::empty());
        }
        assert_eq!(b.take_all().len(), 3);
        assert_eq!(b.waiting(), 0);
        assert!(!b.has_open());
        assert!(b.admit().is_none());
    }
}
