#![forbid(unsafe_code)]
//! [`Intake`]: how remote work enters the executor. It owns the inbox
//! (where other threads send wakes and [`RemoteOp`]s) and the remote
//! backlog (spawns taken from the inbox, waiting for their queue's
//! admission window, `remote/backlog.rs`), and at each poll boundary
//! ([`Intake::at_boundary`]) takes foreign wakes and ops from the inbox and
//! admits the spawns the windows let in. It reaches the executor only
//! through [`Target`](super::target::Target).

use std::cell::Cell;
use std::sync::Arc;

use super::backlog::{Backlog, WINDOW};
use super::op::{ExecutorTarget, Remote, RemoteOp, RemoteSpawn};
use super::ticket::Ticket;
use crate::boundary;
use crate::task::id::TaskKey;

/// The executor's intake of remote work (see the module's notes).
pub(crate) struct Intake {
    /// Where other threads send wakes and ops.
    pub(crate) inbox: Arc<Remote>,
    /// Remote spawns taken from the inbox, not yet tasks.
    backlog: Backlog,
    /// The vectors a boundary drains the inbox into, kept with their room
    /// between boundaries (no allocation per drain).
    batch: Cell<(Vec<TaskKey>, Vec<RemoteOp>)>,
}

impl Intake {
    /// The intake of an executor with `queues` queues.
    pub(crate) fn new(queues: usize) -> Self {
        Self {
            inbox: Arc::new(Remote::default()),
            backlog: Backlog::new(queues),
            batch: Cell::default(),
        }
    }

    /// Work at a poll boundary: foreign wakes, ops, and the spawns the open
    /// windows admit. `turn_start`: the first boundary of a driver turn,
    /// which takes the inbox's ops whatever the backlog holds. Inlined
    /// where it is called: with nothing in the inbox and nothing waiting
    /// it costs two loads.
    #[inline(always)]
    pub(crate) fn at_boundary(&self, target: &ExecutorTarget, turn_start: bool) {
        if self.inbox.has_pending() {
            // The inbox's ops wait while the remote backlog is long (they
            // are taken at the next turn's start); its wakes never do.
            let take_ops = turn_start || self.backlog.waiting() < WINDOW as usize;
            if take_ops || self.inbox.has_wakes() {
                self.drain(target, take_ops);
            }
        }
        if self.backlog.has_open() {
            self.admit(target);
        }
    }

    /// Foreign wakes and ops from the inbox: the wakes always; the ops
    /// (spawns, aborts, calls, in the order they came) with `take_ops`.
    /// A spawn becomes a task at once when its queue's admission window
    /// is open and nothing waits before it, else joins its queue's line
    /// of the remote backlog.
    #[cold]
    #[inline(never)]
    fn drain(&self, target: &ExecutorTarget, take_ops: bool) {
        let (mut ids, mut ops) = self.batch.take();
        self.inbox
            .drain_into(&mut ids, take_ops.then_some(&mut ops));
        for id in ids.drain(..) {
            target.wake_foreign(id);
        }
        for op in ops.drain(..) {
            match op {
                RemoteOp::Spawn(spawn) => self.take(target, spawn),
                RemoteOp::Abort(id) => target.abort(id),
                // The pool's control: user code may run (a waker of
                // whoever waits for the answer).
                RemoteOp::Call(call) => {
                    if let Err(p) = boundary::call(|| call(target)) {
                        target.report(p);
                    }
                }
            }
        }
        self.batch.set((ids, ops));
    }

    /// A spawn taken from the inbox: made a task at once if its queue's
    /// window admits it with nothing waiting before it, else put at the
    /// end of its queue's line of the remote backlog.
    fn take(&self, target: &ExecutorTarget, spawn: RemoteSpawn) {
        let q = spawn.queue();
        if self.backlog.admit_now(q) {
            run_admitted(target, q, spawn);
        } else {
            self.backlog.push(q, spawn);
        }
    }

    /// Makes tasks of the waiting spawns that the open windows admit. No
    /// borrow of the backlog is held while a spawn runs.
    #[cold]
    #[inline(never)]
    fn admit(&self, target: &ExecutorTarget) {
        while let Some((q, spawn)) = self.backlog.admit() {
            run_admitted(target, q, spawn);
        }
    }

    /// A place in queue `q`'s window is free: returns whether that opens
    /// the window with spawns waiting (the next boundary admits them).
    pub(crate) fn window_freed(&self, q: usize) -> bool {
        self.backlog.polled(q)
    }

    /// Spawns waiting in the backlog for queue `q`.
    pub(crate) fn waiting_in(&self, q: usize) -> usize {
        self.backlog.waiting_in(q)
    }

    /// Whether no remote work waits: no op or wake in the inbox, no spawn
    /// in the backlog.
    pub(crate) fn is_idle(&self) -> bool {
        !self.inbox.has_pending() && self.backlog.waiting() == 0
    }

    /// Ends the spawns waiting for quarantined queue `q` (each sees the
    /// quarantine and ends as its queue's tasks did).
    pub(crate) fn end_line(&self, target: &ExecutorTarget, q: usize) {
        for spawn in self.backlog.take_line(q) {
            run_unadmitted(target, spawn);
        }
    }

    /// Closes the inbox at the executor's shutdown and ends what it holds
    /// and what waits in the backlog: each spawn sees the shutdown and
    /// drops its future (its handle reads `Cancelled`), counted in
    /// `dropped` under its queue; each call is dropped (its caller reads
    /// the shutdown). Every drop is behind a boundary of its own.
    pub(crate) fn close(&self, target: &ExecutorTarget, dropped: &mut [u64]) {
        for op in self.inbox.close() {
            match op {
                RemoteOp::Spawn(spawn) => drop_spawn(target, spawn, dropped),
                // A call's drop may wake whoever waits for its answer.
                RemoteOp::Call(call) => {
                    if let Err(p) = boundary::call(|| drop(call)) {
                        target.report(p);
                    }
                }
                RemoteOp::Abort(_) => {}
            }
        }
        // Spawns waiting in the remote backlog: the same, in queue then
        // arrival order.
        for spawn in self.backlog.take_all() {
            drop_spawn(target, spawn, dropped);
        }
    }
}

/// Runs an admitted spawn of queue `q` with the ticket of its place,
/// behind a boundary (it may drop a future aborted before it started, or
/// wake a host: user code).
fn run_admitted(target: &ExecutorTarget, q: usize, spawn: RemoteSpawn) {
    let ticket = Ticket::new(target.window(), q);
    if let Err(p) = boundary::call(|| spawn.run(target, ticket)) {
        target.report(p);
    }
}

/// Runs a spawn that holds no place in a window (its queue is quarantined,
/// or the executor shuts down), behind a boundary.
fn run_unadmitted(target: &ExecutorTarget, spawn: RemoteSpawn) {
    if let Err(p) = boundary::call(|| spawn.run(target, Ticket::none())) {
        target.report(p);
    }
}

/// Drops an accepted remote spawn that never became a task (shutdown),
/// counted in `dropped` under its queue.
fn drop_spawn(target: &ExecutorTarget, spawn: RemoteSpawn, dropped: &mut [u64]) {
    if let Some(n) = dropped.get_mut(spawn.queue()) {
        *n += 1;
    }
    run_unadmitted(target, spawn);
}
