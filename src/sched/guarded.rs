#![forbid(unsafe_code)]
//! A custom [`Scheduler`] behind the executor's panic boundary and contract
//! checks.
//!
//! Every method of a scheduler written outside the crate is user code: a
//! panic in it is caught and goes to the executor's [`PanicSink`], and the
//! call's effect is replaced by a safe one:
//!
//! * `push`: the task goes to a rescue list of this queue, which `pop`
//!   serves first, so a task is never lost;
//! * `pop`: nothing is returned this time, and the queue stays runnable
//!   (the next run asks again);
//! * `len`: 0 (it only feeds statistics and debug checks, which skip the
//!   comparison);
//! * `wants_timing`: `false`; `polled`, `forget`, `group_ended`: nothing.
//!
//! The executor never trusts `len` to decide whether the queue has work:
//! a push makes it runnable, a `pop` that returns `None` makes it empty.
//! So a wrong `len` cannot hang the executor. Debug builds check `len`
//! after every `push` and `pop` and report a wrong one as a contract
//! violation ([`PanicSink::violation`]); the executor checks the ids that
//! `pop` returns itself (in the poll harness, where the task's state is
//! read anyway).
//!
//! The methods are kept out of line: inlined into the executor's dispatch
//! on the scheduler kind, they make the dispatch too large to be inlined
//! into the run loop, which costs the built-in schedulers' paths
//! (callgrind).

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use super::Scheduler;
use crate::boundary::{call, PanicSink};
use crate::task::id::{GroupId, TaskId};

/// A user's scheduler, guarded.
pub(crate) struct Guarded {
    inner: Box<dyn Scheduler>,
    /// Tasks whose `push` panicked, served before the scheduler's own.
    rescued: VecDeque<TaskId>,
    /// Whether the queue may hold tasks: set by a push, cleared by a `pop`
    /// that returned `None`.
    may_hold: bool,
    sink: Rc<PanicSink>,
    /// The queue's name, for the messages of contract violations.
    queue: String,
}

impl Guarded {
    pub(crate) fn new(inner: Box<dyn Scheduler>) -> Self {
        Self {
            inner,
            rescued: VecDeque::new(),
            may_hold: false,
            sink: Rc::new(PanicSink::default()),
            queue: String::new(),
        }
    }

    /// Connects the scheduler to its executor's sink, and names its queue.
    pub(crate) fn attach(&mut self, sink: Rc<PanicSink>, queue: &str) {
        self.sink = sink;
        self.queue = queue.to_string();
    }

    /// The scheduler's own `len`; `None` if it panicked (the panic went to
    /// the sink).
    fn inner_len(&self) -> Option<usize> {
        let inner = &self.inner;
        self.sink.check(call(|| inner.len()))
    }

    /// Reports a wrong `len` (debug builds). A `len` that panicked, here or
    /// before the call checked, is a panic, not a wrong length: nothing to
    /// compare.
    fn check_len(&self, expected: usize, after: &str) {
        let Some(len) = self.inner_len() else {
            return;
        };
        if len != expected {
            self.sink.violation(|| {
                format!(
                    "queue {}: len() is {len} after {after}, but the scheduler holds {expected} \
                     (rule: len equals the number of ids held)",
                    self.queue
                )
            });
        }
    }

    #[inline(never)]
    pub(crate) fn push(&mut self, task: TaskId, group: GroupId) {
        let before = cfg!(debug_assertions).then(|| self.inner_len()).flatten();
        let inner = &mut self.inner;
        match call(|| inner.push(task, group)) {
            Ok(()) => {
                if let Some(before) = before {
                    self.check_len(before + 1, "a push");
                }
            }
            Err(p) => {
                self.sink.report(p);
                self.rescued.push_back(task);
            }
        }
        self.may_hold = true;
    }

    #[inline(never)]
    pub(crate) fn pop(&mut self) -> Option<TaskId> {
        if let Some(task) = self.rescued.pop_front() {
            return Some(task);
        }
        let before = cfg!(debug_assertions).then(|| self.inner_len()).flatten();
        let inner = &mut self.inner;
        match call(|| inner.pop()) {
            Ok(Some(task)) => {
                if let Some(before) = before {
                    self.check_len(before.saturating_sub(1), "a pop that returned a task");
                }
                Some(task)
            }
            Ok(None) => {
                if let Some(before) = before.filter(|&n| n != 0) {
                    self.sink.violation(|| {
                        format!(
                            "queue {}: pop() returned None while len() says {before} \
                             (rule: len equals the number of ids held)",
                            self.queue
                        )
                    });
                }
                self.may_hold = false;
                None
            }
            Err(p) => {
                self.sink.report(p);
                None
            }
        }
    }

    #[inline(never)]
    pub(crate) fn len(&self) -> usize {
        self.rescued.len() + self.inner_len().unwrap_or(0)
    }

    /// Whether the queue is known to hold no task (see the module docs).
    #[inline(never)]
    pub(crate) fn is_empty(&self) -> bool {
        self.rescued.is_empty() && !self.may_hold
    }

    #[inline(never)]
    pub(crate) fn wants_timing(&self) -> bool {
        let inner = &self.inner;
        self.sink
            .check(call(|| inner.wants_timing()))
            .unwrap_or(false)
    }

    #[inline(never)]
    pub(crate) fn polled(
        &mut self,
        task: TaskId,
        group: GroupId,
        elapsed: Option<Duration>,
        finished: bool,
    ) {
        let inner = &mut self.inner;
        self.sink
            .check(call(|| inner.polled(task, group, elapsed, finished)));
    }

    #[inline(never)]
    pub(crate) fn forget(&mut self, task: TaskId, group: GroupId) {
        if let Some(i) = self.rescued.iter().position(|&t| t == task) {
            self.rescued.remove(i);
        }
        let inner = &mut self.inner;
        self.sink.check(call(|| inner.forget(task, group)));
    }

    #[inline(never)]
    pub(crate) fn group_ended(&mut self, group: GroupId) {
        let inner = &mut self.inner;
        self.sink.check(call(|| inner.group_ended(group)));
    }
}
