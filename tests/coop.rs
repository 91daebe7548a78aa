//! tokio's cooperative budget in tourbillon tasks nested in tokio with
//! `Executor::run_until`.
//!
//! tokio gives every poll of one of its tasks a budget of 128 units, which
//! its resources (channels, sockets, timers, join handles) spend: once it
//! is spent, they return `Pending` (and wake the task at the host's next
//! turn) even when they are ready. A `LocalSet` gives each of its tasks'
//! polls a budget of its own. The tourbillon tasks of one turn run inside
//! one host poll of `RunUntil`; without the `tokio` feature they spend that
//! poll's budget together, with it each task poll starts from the budget
//! the host poll had when the turn began (less the unit taken to restore it
//! afterwards: 127 for a top-level host task).
//!
//! The expectations of the tourbillon host depend on the feature: CI runs
//! this file with and without `--features tokio`. The host polls are
//! compared with a `LocalSet`'s, with `unconstrained(ex.run_until(..))`,
//! and with a per-task wrapper ([`OwnBudget`]) that a user can write
//! without the feature.
//!
//! Everything here is deterministic: one thread, tokio's `current_thread`
//! runtime, a `ManualClock` that never moves (a turn ends after
//! `max_polls_per_turn` polls, never on time), messages sent before the
//! tasks start. The host polls are observed by a wrapper future that
//! records the count of finished tasks after each of them.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{ready, Context, Poll};

use futures::channel::oneshot;
use tokio::sync::mpsc;
use tourbillon::clock::ManualClock;
use tourbillon::task::JoinSet;
use tourbillon::{Builder, Executor};

/// The receivers ([`receivers`]).
const TASKS: usize = 200;
/// Ready messages each receiver takes: budget units spent per task.
const MSGS: usize = 4;
/// tokio's budget per task poll.
const BUDGET: usize = 128;
/// Polls per turn (the default, set explicitly).
const TURN: usize = 61;

type Task = Pin<Box<dyn Future<Output = ()>>>;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn executor() -> Executor<()> {
    Builder::new()
        .queue((), 1)
        .max_polls_per_turn(TURN as u32)
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

/// Finished tasks and task polls, with the signal sent when the last of
/// `expected` tasks finishes.
struct Counts {
    expected: usize,
    done: Cell<usize>,
    polls: Cell<usize>,
    all_done: RefCell<Option<oneshot::Sender<()>>>,
    all_done_rx: RefCell<Option<oneshot::Receiver<()>>>,
}

impl Counts {
    fn new(expected: usize) -> Rc<Self> {
        let (tx, rx) = oneshot::channel();
        Rc::new(Counts {
            expected,
            done: Cell::new(0),
            polls: Cell::new(0),
            all_done: RefCell::new(Some(tx)),
            all_done_rx: RefCell::new(Some(rx)),
        })
    }

    fn finished(&self) {
        self.done.set(self.done.get() + 1);
        if self.done.get() == self.expected {
            let _ = self.all_done.borrow_mut().take().unwrap().send(());
        }
    }
}

/// `fut`, with its polls counted in `counts`.
fn counted(counts: Rc<Counts>, fut: impl Future<Output = ()> + 'static) -> Task {
    let mut fut = Box::pin(fut);
    Box::pin(poll_fn(move |cx| {
        counts.polls.set(counts.polls.get() + 1);
        fut.as_mut().poll(cx)
    }))
}

/// Polls `fut` to completion as `rt`'s main future (each host poll with a
/// budget of its own, as tokio gives a task) and returns the number of
/// finished tasks after each host poll.
fn host_polls(rt: &tokio::runtime::Runtime, fut: impl Future, counts: &Counts) -> Vec<usize> {
    rt.block_on(async {
        let mut fut = pin!(fut);
        let mut seen = Vec::new();
        poll_fn(|cx| {
            let p = fut.as_mut().poll(cx);
            seen.push(counts.done.get());
            p.map(drop)
        })
        .await;
        seen
    })
}

/// `TASKS` tasks, each receiving `MSGS` messages that are already in its
/// channel: every one can finish in its first poll, spending `MSGS` units.
fn receivers(counts: &Rc<Counts>) -> Vec<Task> {
    (0..TASKS)
        .map(|_| {
            let (tx, mut rx) = mpsc::unbounded_channel();
            for m in 0..MSGS {
                tx.send(m).unwrap();
            }
            let c = counts.clone();
            counted(counts.clone(), async move {
                for _ in 0..MSGS {
                    rx.recv().await.unwrap();
                }
                c.finished();
            })
        })
        .collect()
}

/// `PROBES` tasks, each receiving `MANY` messages that are already in its
/// channel: a task's first poll receives as many as its budget allows (one
/// unit each), which is recorded in `firsts`.
fn probes(counts: &Rc<Counts>, firsts: &Rc<RefCell<Vec<usize>>>) -> Vec<Task> {
    (0..PROBES)
        .map(|_| {
            let (tx, mut rx) = mpsc::unbounded_channel();
            for m in 0..MANY {
                tx.send(m).unwrap();
            }
            let got = Rc::new(Cell::new(0));
            let (c, g) = (counts.clone(), got.clone());
            let mut fut = counted(counts.clone(), async move {
                while g.get() < MANY {
                    rx.recv().await.unwrap();
                    g.set(g.get() + 1);
                }
                c.finished();
            });
            let firsts = firsts.clone();
            let mut first = true;
            Box::pin(poll_fn(move |cx| {
                let p = fut.as_mut().poll(cx);
                if std::mem::take(&mut first) {
                    firsts.borrow_mut().push(got.get());
                }
                p
            })) as Task
        })
        .collect()
}

/// The probes of [`probes`].
const PROBES: usize = 3;
/// Ready messages per probe: more than a budget.
const MANY: usize = 1_000;

/// What drives the tasks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Host {
    /// `rt.block_on(ex.run_until(..))`.
    Tourbillon,
    /// `rt.block_on(unconstrained(ex.run_until(..)))`.
    Unconstrained,
    /// `rt.block_on(local.run_until(..))`, tasks spawned with `spawn_local`.
    LocalSet,
}

/// Runs `tasks` (each wrapped in [`OwnBudget`] if `own_budget`) on `host`
/// until all have finished; returns the finished count after each host
/// poll.
fn run(host: Host, tasks: Vec<Task>, own_budget: bool, counts: &Counts) -> Vec<usize> {
    let done = counts.all_done_rx.borrow_mut().take().unwrap();
    let tasks = tasks.into_iter().map(|t| -> Task {
        if own_budget {
            Box::pin(OwnBudget(t))
        } else {
            t
        }
    });
    let rt = rt();
    match host {
        Host::Tourbillon | Host::Unconstrained => {
            let ex = executor();
            for t in tasks {
                drop(ex.spawn((), t).unwrap());
            }
            let run = ex.run_until(done);
            let seen = if host == Host::Unconstrained {
                host_polls(&rt, tokio::task::coop::unconstrained(run), counts)
            } else {
                host_polls(&rt, run, counts)
            };
            assert_eq!(ex.stats().polls as usize, counts.polls.get());
            seen
        }
        Host::LocalSet => {
            let local = tokio::task::LocalSet::new();
            for t in tasks {
                drop(local.spawn_local(t));
            }
            host_polls(&rt, local.run_until(done), counts)
        }
    }
}

/// The user-side alternative to the `tokio` feature: each poll of the
/// wrapped task starts from the budget the host poll had when the turn
/// began, less one unit (`poll_proceed` takes it; dropping what it returns
/// puts the budget back as it was before).
struct OwnBudget(Task);

impl Future for OwnBudget {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let restore = ready!(tokio::task::coop::poll_proceed(cx));
        let out = self.0.as_mut().poll(cx);
        drop(restore);
        out
    }
}

/// The receivers on `host`: the finished count after each host poll, and
/// the task polls.
fn receivers_on(host: Host, own_budget: bool) -> (Vec<usize>, usize) {
    let counts = Counts::new(TASKS);
    let seen = run(host, receivers(&counts), own_budget, &counts);
    eprintln!(
        "{host:?}{}: finished after each host poll {seen:?}, {} task polls",
        if own_budget { " + OwnBudget" } else { "" },
        counts.polls.get()
    );
    assert_eq!(*seen.last().unwrap(), TASKS);
    (seen, counts.polls.get())
}

/// The budget of each probe's first poll on `host`.
fn probes_on(host: Host, own_budget: bool) -> Vec<usize> {
    let counts = Counts::new(PROBES);
    let firsts = Rc::new(RefCell::new(Vec::new()));
    run(host, probes(&counts, &firsts), own_budget, &counts);
    let firsts = firsts.take();
    eprintln!(
        "{host:?}{}: received in each probe's first poll {firsts:?}",
        if own_budget { " + OwnBudget" } else { "" },
    );
    firsts
}

/// tokio's `LocalSet`, the reference: each task poll has a budget of its
/// own, so every receiver finishes in its first poll.
#[test]
fn local_set_gives_each_task_poll_a_budget() {
    let (seen, polls) = receivers_on(Host::LocalSet, false);
    assert_eq!(polls, TASKS);
    assert!(seen[0] > BUDGET / MSGS, "{seen:?}");
    assert_eq!(probes_on(Host::LocalSet, false), vec![BUDGET; PROBES]);
}

/// The tourbillon tasks of a turn: without the `tokio` feature they share
/// the host poll's budget, and the tasks after the first `BUDGET / MSGS`
/// (32) get `Pending` from channels that hold their messages, to be polled
/// again at a later host poll. With it, every task finishes in its first
/// poll, as on a `LocalSet`, and a whole turn finishes in one host poll.
#[test]
fn tourbillon_tasks_and_the_host_poll_budget() {
    let (seen, polls) = receivers_on(Host::Tourbillon, false);
    let firsts = probes_on(Host::Tourbillon, false);
    if cfg!(feature = "tokio") {
        assert_eq!(seen[0], TURN);
        assert_eq!(polls, TASKS);
        assert_eq!(firsts, vec![BUDGET - 1; PROBES]);
    } else {
        assert_eq!(seen[0], BUDGET / MSGS);
        // No host poll finishes more (tokio 1.54: 32 in each of the first
        // six, then the last 8; 353 task polls).
        assert!(
            seen.windows(2).all(|w| w[1] - w[0] <= BUDGET / MSGS),
            "{seen:?}"
        );
        // The rest of the first turn's polls were refused by the budget.
        assert!(polls >= TASKS + (TURN - BUDGET / MSGS), "{polls}");
        // The first probe spends the whole budget; the others get nothing.
        assert_eq!(firsts, vec![BUDGET, 0, 0]);
    }
}

/// `tokio::task::coop::unconstrained(ex.run_until(..))` lifts the
/// throttling, but with the budget gone altogether: a task whose resources
/// are always ready is never made to yield by them (the first poll of a
/// probe takes all its messages).
#[test]
fn unconstrained_run_until_has_no_budget() {
    let (seen, polls) = receivers_on(Host::Unconstrained, false);
    assert_eq!(seen[0], TURN);
    assert_eq!(polls, TASKS);
    assert_eq!(probes_on(Host::Unconstrained, false), vec![MANY; PROBES]);
}

/// [`OwnBudget`] around each task gives every task poll the budget the
/// host poll had when the turn began, less one: 127. (With the `tokio`
/// feature, which takes a unit too, 126.)
#[test]
fn own_budget_wrapper_gives_each_task_poll_a_budget() {
    let (seen, polls) = receivers_on(Host::Tourbillon, true);
    assert_eq!(seen[0], TURN);
    assert_eq!(polls, TASKS);
    let each = if cfg!(feature = "tokio") {
        BUDGET - 2
    } else {
        BUDGET - 1
    };
    assert_eq!(probes_on(Host::Tourbillon, true), vec![each; PROBES]);
}

/// Without the feature the tasks of a turn spend the host poll's budget
/// (here all of it: 32 receivers of 4 messages); with it, the host's budget
/// after the turn is what it was before: task polls are not charged to the
/// host task, as on a `LocalSet`.
#[test]
fn a_turn_and_the_host_budget_after_it() {
    let counts = Counts::new(TASKS);
    let ex = executor();
    for t in receivers(&counts) {
        drop(ex.spawn((), t).unwrap());
    }
    let done = counts.all_done_rx.borrow_mut().take().unwrap();
    let left = rt().block_on(async {
        let mut run = pin!(ex.run_until(done));
        poll_fn(|cx| {
            assert!(run.as_mut().poll(cx).is_pending());
            Poll::Ready(tokio::task::coop::has_budget_remaining())
        })
        .await
    });
    assert_eq!(counts.polls.get(), TURN);
    if cfg!(feature = "tokio") {
        assert_eq!(counts.done.get(), TURN);
        assert!(left);
    } else {
        assert_eq!(counts.done.get(), BUDGET / MSGS);
        assert!(!left);
    }
}

/// A host poll whose budget is spent before the turn by the future that
/// `run_until` wraps: without the feature its turn's task polls are
/// refused by tokio's resources and run at the next host poll. With it,
/// as on a `LocalSet`, the task polls do not depend on what the future
/// spent: each starts from the budget the host poll began with, less one.
#[test]
fn a_host_poll_whose_budget_is_spent_before_the_turn() {
    let counts = Counts::new(PROBES);
    let firsts = Rc::new(RefCell::new(Vec::new()));
    let ex = executor();
    for t in probes(&counts, &firsts) {
        drop(ex.spawn((), t).unwrap());
    }
    let done = counts.all_done_rx.borrow_mut().take().unwrap();
    let seen = host_polls(
        &rt(),
        ex.run_until(async {
            for _ in 0..BUDGET {
                tokio::task::coop::consume_budget().await;
            }
            done.await.unwrap();
        }),
        &counts,
    );
    if cfg!(feature = "tokio") {
        assert_eq!(firsts.take(), vec![BUDGET - 1; PROBES]);
    } else {
        assert_eq!(firsts.take(), vec![0; PROBES]);
    }
    assert_eq!(*seen.last().unwrap(), PROBES);
}

/// The future that `run_until` wraps spends 100 units before the turn.
/// With the feature, every task poll of the turn starts from the same
/// budget, 127, whatever the future and the turn's other tasks spent (a
/// `LocalSet` gives each 128; tokio's public API gives no budget, only
/// takes from the host poll's: `src/coop.rs`). Without it, the first task
/// takes what the future left (28) and the others get nothing.
#[test]
fn each_task_poll_of_a_turn_starts_from_the_same_budget() {
    let counts = Counts::new(PROBES);
    let firsts = Rc::new(RefCell::new(Vec::new()));
    let ex = executor();
    for t in probes(&counts, &firsts) {
        drop(ex.spawn((), t).unwrap());
    }
    let done = counts.all_done_rx.borrow_mut().take().unwrap();
    let left = Rc::new(Cell::new(None));
    let l = left.clone();
    host_polls(
        &rt(),
        ex.run_until(async move {
            for _ in 0..100 {
                tokio::task::coop::consume_budget().await;
            }
            l.set(Some(tokio::task::coop::has_budget_remaining()));
            done.await.unwrap();
        }),
        &counts,
    );
    assert_eq!(left.get(), Some(true));
    if cfg!(feature = "tokio") {
        assert_eq!(firsts.take(), vec![BUDGET - 1; PROBES]);
    } else {
        assert_eq!(firsts.take(), vec![BUDGET - 100, 0, 0]);
    }
}

/// Tasks that finish in a standalone run, each joined by every kind of
/// join: `JoinSet`, `JoinHandle`, `RemoteJoinHandle`.
const JOINS: usize = 1_000;

/// The joins made in each poll of a tokio task that joins `JOINS`
/// finished tasks in a loop, with `join` (which returns `Pending` when it
/// cannot join).
fn joins_per_host_poll(mut join: impl FnMut(&mut Context<'_>) -> Poll<()>) -> Vec<usize> {
    rt().block_on(async {
        let (mut joined, mut seen) = (0, Vec::new());
        poll_fn(|cx| {
            while joined < JOINS {
                if join(cx).is_pending() {
                    seen.push(joined);
                    return Poll::Pending;
                }
                joined += 1;
            }
            seen.push(joined);
            Poll::Ready(())
        })
        .await;
        seen
    })
}

/// With the feature, joins spend tokio's budget as tokio's `JoinSet` and
/// `JoinHandle` do: a poll of a tokio task joins at most 128 finished tasks
/// (one unit each), then gets `Pending` and is polled again at tokio's next
/// turn. Without it, one poll joins all 1,000.
#[test]
fn joins_spend_tokios_budget() {
    let ex = executor();
    let mut set = JoinSet::new();
    let mut handles = std::collections::VecDeque::new();
    let mut remotes = std::collections::VecDeque::new();
    let remote = ex.remote_spawner();
    for n in 0..JOINS {
        set.insert(ex.spawn((), async move { n }).unwrap());
        handles.push_back(ex.spawn((), async move { n }).unwrap());
        remotes.push_back(remote.spawn((), async move { n }).unwrap());
    }
    ex.run_until_stalled();
    assert_eq!(ex.stats().polls as usize, 3 * JOINS);
    let expected: Vec<usize> = if cfg!(feature = "tokio") {
        (1..=JOINS / BUDGET)
            .map(|k| k * BUDGET)
            .chain([JOINS])
            .collect()
    } else {
        vec![JOINS]
    };
    let by_set = joins_per_host_poll(|cx| {
        set.poll_join_next(cx).map(|r| {
            r.unwrap().unwrap();
        })
    });
    assert_eq!(by_set, expected);
    assert!(set.is_empty());
    let by_handle = joins_per_host_poll(|cx| {
        let p = Pin::new(handles.front_mut().unwrap()).poll(cx);
        p.map(|r| {
            r.unwrap();
            handles.pop_front();
        })
    });
    assert_eq!(by_handle, expected);
    let by_remote = joins_per_host_poll(|cx| {
        let p = Pin::new(remotes.front_mut().unwrap()).poll(cx);
        p.map(|r| {
            r.unwrap();
            remotes.pop_front();
        })
    });
    assert_eq!(by_remote, expected);
}

/// Inside a tourbillon task nested in tokio, a `JoinSet` loop joins the
/// task poll's budget's worth of finished tasks (127 with the feature)
/// before the task yields; without it, all of them.
#[test]
fn a_join_set_loop_in_a_nested_task_yields_when_its_budget_is_spent() {
    let ex = executor();
    let mut set = JoinSet::new();
    for n in 0..JOINS {
        set.insert(ex.spawn((), async move { n }).unwrap());
    }
    ex.run_until_stalled();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s = seen.clone();
    let joiner = ex
        .spawn((), async move {
            let mut joined = 0;
            poll_fn(|cx| {
                while let Poll::Ready(r) = set.poll_join_next(cx) {
                    match r {
                        Some(r) => joined += usize::from(r.is_ok()),
                        None => {
                            s.borrow_mut().push(joined);
                            return Poll::Ready(());
                        }
                    }
                }
                s.borrow_mut().push(joined);
                Poll::Pending
            })
            .await;
        })
        .unwrap();
    rt().block_on(ex.run_until(joiner)).unwrap();
    let seen = seen.take();
    if cfg!(feature = "tokio") {
        assert_eq!(seen[0], BUDGET - 1);
        assert!(seen.windows(2).all(|w| w[1] - w[0] < BUDGET));
    } else {
        assert_eq!(seen, vec![JOINS]);
    }
    assert_eq!(*seen.last().unwrap(), JOINS);
}
