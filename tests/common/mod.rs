//! Deterministic harness for the EEVDF oracles (docs/design.md, section 4).
//!
//! Everything runs on one [`ManualClock`] (the executor reads a
//! `ManualClock` after every poll and charges each poll exactly;
//! [`Sim::builder_amortised`] hides it behind [`NotCheap`], for the real
//! clock's amortised charging):
//!
//! * [`Sim::spend`] is the scripted cost of a poll: it advances the clock by
//!   `cost` and credits the poll to its queue (service clipped to the
//!   horizon) and to the trace;
//! * [`Sim::sleep_until`] is a virtual timer. Due timers are fired from
//!   inside [`Sim::advance`] with the clock set to their exact due instant,
//!   so a wake happens *during* the poll that spans it and the executor sees
//!   it at the next poll boundary. An advance over `[now, now + d)` fires
//!   the timers due in that half-open interval: a timer due exactly at a poll
//!   boundary fires at the start of the next poll (it arrives just after the
//!   executor looked: the worst case for wake latency);
//! * [`Sim::drive`] runs the executor with `run_until_stalled` (never parks)
//!   and, when nothing is runnable, jumps the clock to the next timer.
//!
//! Queues are keyed by their index (`usize`), so a key is its declaration
//! order.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use tourbillon::clock::ManualClock;
use tourbillon::task::yield_now;
use tourbillon::{Builder, Executor, QueueKey};

pub const US: u64 = 1_000;
pub const MS: u64 = 1_000_000;
pub const SEC: u64 = 1_000_000_000;

/// A [`ManualClock`] behind another type, which the executor does not read
/// after every poll (as the `SystemClock`): it reads it every few polls, as
/// many as its estimate of the running queue's poll cost says fit in what is
/// left of the slice and of the host interval, and at every run end (the
/// amortised mode of the real clock, replayed exactly).
#[derive(Clone)]
pub struct NotCheap(pub ManualClock);

impl tourbillon::clock::Clock for NotCheap {
    fn now_ns(&self) -> u64 {
        self.0.now()
    }
}

/// One scripted poll: `[start, end)` of virtual time spent by `task` of
/// `queue`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PollRec {
    pub start: u64,
    pub end: u64,
    pub queue: usize,
    pub task: u32,
}

type Hook = Box<dyn FnMut(&Sim, usize, u32, u64)>;

/// The virtual world of one test: clock, timers, service counters, trace.
pub struct Sim {
    pub clock: ManualClock,
    /// Pending timers by (due, sequence): fired in due order, ties in
    /// registration order.
    timers: RefCell<BTreeMap<(u64, u64), Waker>>,
    timer_seq: Cell<u64>,
    /// Service is counted in `[0, horizon)`.
    horizon: Cell<u64>,
    service: RefCell<Vec<u64>>,
    polls: RefCell<Vec<u64>>,
    trace: RefCell<Option<Vec<PollRec>>>,
    /// Called at the start of every scripted poll with (sim, queue, task,
    /// now).
    hook: RefCell<Option<Hook>>,
}

impl Sim {
    pub fn new(queues: usize) -> Rc<Self> {
        Rc::new(Self {
            clock: ManualClock::new(),
            timers: RefCell::new(BTreeMap::new()),
            timer_seq: Cell::new(0),
            horizon: Cell::new(u64::MAX),
            service: RefCell::new(vec![0; queues]),
            polls: RefCell::new(vec![0; queues]),
            trace: RefCell::new(None),
            hook: RefCell::new(None),
        })
    }

    /// An executor builder on this clock, no queue declared yet.
    pub fn builder(&self) -> Builder<usize> {
        Builder::new().clock(self.clock.clone())
    }

    /// A builder on this clock behind [`NotCheap`]: the executor charges
    /// service every few polls, as with the real clock, instead of after
    /// each.
    pub fn builder_amortised(&self) -> Builder<usize> {
        Builder::new().clock(NotCheap(self.clock.clone()))
    }

    /// [`builder`](Sim::builder) if `cheap`, else
    /// [`builder_amortised`](Sim::builder_amortised).
    pub fn builder_with(&self, cheap: bool) -> Builder<usize> {
        if cheap {
            self.builder()
        } else {
            self.builder_amortised()
        }
    }

    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Count service only before `t` (a poll crossing `t` is clipped).
    pub fn set_horizon(&self, t: u64) {
        self.horizon.set(t);
    }

    /// Keep a trace of every scripted poll.
    pub fn record_trace(&self) {
        *self.trace.borrow_mut() = Some(Vec::new());
    }

    pub fn take_trace(&self) -> Vec<PollRec> {
        self.trace.borrow_mut().take().unwrap_or_default()
    }

    pub fn set_hook(&self, hook: impl FnMut(&Sim, usize, u32, u64) + 'static) {
        *self.hook.borrow_mut() = Some(Box::new(hook));
    }

    /// Service of queue `q` in `[0, horizon)`, ns.
    pub fn service(&self, q: usize) -> u64 {
        self.service.borrow()[q]
    }

    pub fn services(&self) -> Vec<u64> {
        self.service.borrow().clone()
    }

    /// Scripted polls of queue `q`.
    pub fn polls(&self, q: usize) -> u64 {
        self.polls.borrow()[q]
    }

    /// Moves the clock forward by `d` ns, firing the timers due in
    /// `[now, now + d)` at their exact instants.
    pub fn advance(&self, d: u64) {
        let target = self.now() + d;
        loop {
            let next = {
                let mut timers = self.timers.borrow_mut();
                match timers.first_key_value() {
                    Some((&(due, _), _)) if due < target => timers.pop_first(),
                    _ => None,
                }
            };
            let Some(((due, _), waker)) = next else { break };
            self.clock.set_ns(due);
            waker.wake();
        }
        self.clock.set_ns(target);
    }

    /// Fires the timers due at or before now (used when the executor is
    /// idle and the clock jumped).
    fn fire_due(&self) {
        loop {
            let next = {
                let mut timers = self.timers.borrow_mut();
                match timers.first_key_value() {
                    Some((&(due, _), _)) if due <= self.now() => timers.pop_first(),
                    _ => None,
                }
            };
            let Some((_, waker)) = next else { break };
            waker.wake();
        }
    }

    /// Timers registered and not fired yet.
    pub fn pending_timers(&self) -> usize {
        self.timers.borrow().len()
    }

    /// The earliest pending timer.
    pub fn next_timer(&self) -> Option<u64> {
        self.timers.borrow().keys().next().map(|&(due, _)| due)
    }

    /// One scripted poll body: `cost` ns of work by `task` of queue `q`.
    pub fn spend(&self, q: usize, task: u32, cost: u64) {
        let start = self.now();
        if let Some(h) = self.hook.borrow_mut().as_mut() {
            h(self, q, task, start);
        }
        self.advance(cost);
        let end = self.now();
        debug_assert_eq!(end, start + cost);
        let h = self.horizon.get();
        self.service.borrow_mut()[q] += end.min(h) - start.min(h);
        self.polls.borrow_mut()[q] += 1;
        if let Some(t) = self.trace.borrow_mut().as_mut() {
            t.push(PollRec {
                start,
                end,
                queue: q,
                task,
            });
        }
    }

    /// A virtual sleep until `due`.
    pub fn sleep_until(self: &Rc<Self>, due: u64) -> Sleep {
        Sleep {
            sim: self.clone(),
            due,
            key: None,
        }
    }

    /// An always-runnable task: `loop { spend(cost(now)); yield_now() }`
    /// while `now < until` at the start of a poll.
    pub fn worker(
        self: &Rc<Self>,
        q: usize,
        task: u32,
        until: u64,
        mut cost: impl FnMut(u64) -> u64 + 'static,
    ) -> impl Future<Output = ()> + 'static {
        let sim = self.clone();
        async move {
            while sim.now() < until {
                let c = cost(sim.now());
                sim.spend(q, task, c);
                yield_now().await;
            }
        }
    }

    /// Runs the executor until every task ended or sleeps with no timer
    /// left: `run_until_stalled`, then jump the clock to the next timer.
    pub fn drive<K: QueueKey>(&self, ex: &Executor<K>) {
        self.drive_with(ex, |_| {});
    }

    /// [`drive`](Sim::drive), calling `on_idle` each time the executor
    /// stalled and the clock is about to jump.
    pub fn drive_with<K: QueueKey>(&self, ex: &Executor<K>, mut on_idle: impl FnMut(&Self)) {
        loop {
            ex.run_until_stalled();
            let Some(due) = self.next_timer() else { break };
            on_idle(self);
            assert!(due >= self.now(), "a timer was left behind");
            self.clock.set_ns(due);
            self.fire_due();
        }
    }
}

/// Future of [`Sim::sleep_until`].
pub struct Sleep {
    sim: Rc<Sim>,
    due: u64,
    key: Option<(u64, u64)>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.sim.now() >= self.due {
            if let Some(k) = self.key.take() {
                self.sim.timers.borrow_mut().remove(&k);
            }
            return Poll::Ready(());
        }
        let key = match self.key {
            Some(k) => k,
            None => {
                let seq = self.sim.timer_seq.get();
                self.sim.timer_seq.set(seq + 1);
                let k = (self.due, seq);
                self.key = Some(k);
                k
            }
        };
        self.sim.timers.borrow_mut().insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            self.sim.timers.borrow_mut().remove(&k);
        }
    }
}

/// Hash of a poll trace with the deterministic `DefaultHasher::new()`.
pub fn trace_hash(trace: &[PollRec]) -> u64 {
    let mut h = DefaultHasher::new();
    trace.hash(&mut h);
    h.finish()
}

/// Runs of a trace: maximal sequences of consecutive polls of one queue,
/// as (queue, start, end).
pub fn runs_of(trace: &[PollRec]) -> Vec<(usize, u64, u64)> {
    let mut runs: Vec<(usize, u64, u64)> = Vec::new();
    for p in trace {
        match runs.last_mut() {
            Some(r) if r.0 == p.queue && r.2 == p.start => r.2 = p.end,
            _ => runs.push((p.queue, p.start, p.end)),
        }
    }
    runs
}
