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
//! **Quarantine.** Each method has a count of its panics in a row, which a
//! call that returns normally resets. When one reaches
//! [`QUARANTINE_AFTER`], the scheduler is *quarantined*: from then on it
//! is never called again (`pop` returns `None`, `len` 0, the others do
//! nothing), and the sink is told ([`PanicSink::quarantine`]), so that the
//! driver, at the end of its turn, takes the scheduler to drop it and ends
//! the queue's tasks ([`Guarded::take_quarantined`]). Without it a `pop`
//! that always panics would have the queue run again at once, forever.
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

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use super::scheduler::{Scheduler, QUARANTINE_AFTER};
use crate::boundary::{call, panic_message, PanicSink, Payload};
use crate::error::quarantine::Quarantine;
use crate::task::id::{GroupId, TaskKey};

/// The methods of [`Scheduler`] the executor calls, each with its count
/// of panics in a row.
#[derive(Clone, Copy)]
enum Method {
    Push,
    Pop,
    Len,
    WantsTiming,
    Polled,
    Forget,
    GroupEnded,
}

impl Method {
    const COUNT: usize = 7;

    fn name(self) -> &'static str {
        match self {
            Method::Push => "push",
            Method::Pop => "pop",
            Method::Len => "len",
            Method::WantsTiming => "wants_timing",
            Method::Polled => "polled",
            Method::Forget => "forget",
            Method::GroupEnded => "group_ended",
        }
    }
}

/// A user's scheduler, guarded.
pub(crate) struct Guarded {
    /// The user's scheduler; `None` once the quarantine took it.
    inner: Option<Box<dyn Scheduler>>,
    /// Tasks whose `push` panicked, served before the scheduler's own.
    rescued: VecDeque<TaskKey>,
    /// Whether the queue may hold tasks: set by a push, cleared by a `pop`
    /// that returned `None`.
    may_hold: bool,
    sink: Rc<PanicSink>,
    /// The queue's name, for the messages of contract violations.
    queue: String,
    /// Panics in a row, per [`Method`].
    streaks: [Cell<u32>; Method::COUNT],
    /// Why the scheduler is quarantined, once it is: it is not called
    /// again.
    quarantine: RefCell<Option<Quarantine>>,
    /// `quarantine` is set (read before every call).
    quarantined: Cell<bool>,
}

impl Guarded {
    pub(crate) fn new(inner: Box<dyn Scheduler>) -> Self {
        Self {
            inner: Some(inner),
            rescued: VecDeque::new(),
            may_hold: false,
            sink: Rc::new(PanicSink::default()),
            queue: String::new(),
            streaks: Default::default(),
            quarantine: RefCell::new(None),
            quarantined: Cell::new(false),
        }
    }

    /// Connects the scheduler to its executor's sink, and names its queue.
    pub(crate) fn attach(&mut self, sink: Rc<PanicSink>, queue: &str) {
        self.sink = sink;
        self.queue = queue.to_string();
    }

    /// The user's scheduler, unless it is quarantined.
    fn live(&self) -> Option<&dyn Scheduler> {
        if self.quarantined.get() {
            return None;
        }
        self.inner.as_deref()
    }

    /// As [`live`](Self::live), mutable.
    fn live_mut(&mut self) -> Option<&mut Box<dyn Scheduler>> {
        if self.quarantined.get() {
            return None;
        }
        self.inner.as_mut()
    }

    /// The outcome of a call of `method`: a normal return resets its count
    /// of panics in a row; a panic goes to the sink, after it counted
    /// toward the quarantine.
    fn outcome<R>(&self, method: Method, result: Result<R, Payload>) -> Option<R> {
        let streak = &self.streaks[method as usize];
        match result {
            Ok(r) => {
                streak.set(0);
                Some(r)
            }
            Err(p) => {
                let n = streak.get() + 1;
                streak.set(n);
                if n >= QUARANTINE_AFTER && !self.quarantined.get() {
                    self.trip(method, n, &p);
                }
                self.sink.report(p);
                None
            }
        }
    }

    /// `method` panicked `panics` times in a row, the last with `last`:
    /// the scheduler is quarantined.
    #[cold]
    #[inline(never)]
    fn trip(&self, method: Method, panics: u32, last: &Payload) {
        *self.quarantine.borrow_mut() = Some(Quarantine {
            queue: self.queue.clone(),
            method: method.name(),
            panics,
            message: panic_message(last.as_ref()).map(str::to_string),
        });
        self.quarantined.set(true);
        self.sink.quarantine();
    }

    /// The quarantine, once the scheduler reached it and if not taken
    /// yet: why, and the user's scheduler (to drop behind the panic
    /// boundary). The rescued ids go with it: the executor ends the
    /// queue's tasks itself.
    pub(crate) fn take_quarantined(&mut self) -> Option<(Quarantine, Box<dyn Scheduler>)> {
        if !self.quarantined.get() {
            return None;
        }
        let why = self.quarantine.borrow().clone()?;
        let inner = self.inner.take()?;
        self.rescued.clear();
        self.may_hold = false;
        Some((why, inner))
    }

    /// The scheduler's own `len`; `None` if it panicked (the panic went to
    /// the sink) or the scheduler is quarantined.
    fn inner_len(&self) -> Option<usize> {
        let inner = self.live()?;
        self.outcome(Method::Len, call(|| inner.len()))
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
    pub(crate) fn push(&mut self, task: TaskKey, group: GroupId) {
        let before = cfg!(debug_assertions).then(|| self.inner_len()).flatten();
        let Some(inner) = self.live_mut() else {
            // Quarantined: the executor ends the task.
            return;
        };
        let result = call(|| inner.push(task, group));
        match self.outcome(Method::Push, result) {
            Some(()) => {
                if let Some(before) = before {
                    self.check_len(before + 1, "a push");
                }
            }
            None => self.rescued.push_back(task),
        }
        self.may_hold = true;
    }

    #[inline(never)]
    pub(crate) fn pop(&mut self) -> Option<TaskKey> {
        if self.quarantined.get() {
            self.may_hold = false;
            return None;
        }
        if let Some(task) = self.rescued.pop_front() {
            return Some(task);
        }
        let before = cfg!(debug_assertions).then(|| self.inner_len()).flatten();
        let inner = self.live_mut()?;
        let result = call(|| inner.pop());
        match self.outcome(Method::Pop, result) {
            Some(Some(task)) => {
                if let Some(before) = before {
                    self.check_len(before.saturating_sub(1), "a pop that returned a task");
                }
                Some(task)
            }
            Some(None) => {
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
            // The queue stays runnable (the next run asks again), unless
            // this panic quarantined it.
            None => {
                if self.quarantined.get() {
                    self.may_hold = false;
                }
                None
            }
        }
    }

    #[inline(never)]
    pub(crate) fn len(&self) -> usize {
        self.rescued.len() + self.inner_len().unwrap_or(0)
    }

    /// Whether the queue is known to hold no task (see the module docs); a
    /// quarantined one holds none.
    #[inline(never)]
    pub(crate) fn is_empty(&self) -> bool {
        self.quarantined.get() || (self.rescued.is_empty() && !self.may_hold)
    }

    #[inline(never)]
    pub(crate) fn wants_timing(&self) -> bool {
        let Some(inner) = self.live() else {
            return false;
        };
        self.outcome(Method::WantsTiming, call(|| inner.wants_timing()))
            .unwrap_or(false)
    }

    #[inline(never)]
    pub(crate) fn polled(
        &mut self,
        task: TaskKey,
        group: GroupId,
        elapsed: Option<Duration>,
        finished: bool,
    ) {
        if let Some(inner) = self.live_mut() {
            let result = call(|| inner.polled(task, group, elapsed, finished));
            self.outcome(Method::Polled, result);
        }
    }

    #[inline(never)]
    pub(crate) fn forget(&mut self, task: TaskKey, group: GroupId) {
        if let Some(i) = self.rescued.iter().position(|&t| t == task) {
            self.rescued.remove(i);
        }
        if let Some(inner) = self.live_mut() {
            let result = call(|| inner.forget(task, group));
            self.outcome(Method::Forget, result);
        }
    }

    #[inline(never)]
    pub(crate) fn group_ended(&mut self, group: GroupId) {
        if let Some(inner) = self.live_mut() {
            let result = call(|| inner.group_ended(group));
            self.outcome(Method::GroupEnded, result);
        }
    }
}
