//! Task life cycle (docs/design.md: F1 in section 5, T1-T6 in section 6):
//! scheduling order, abort, detach, panics, shutdown, cooperative yielding,
//! and spawning. Deterministic: no sleeps, and a `ManualClock` wherever time
//! matters.

#![allow(
    clippy::waker_clone_wake,
    reason = "`clone().wake()` deliberately exercises the consuming wake of an owned waker"
)]
#![allow(
    clippy::async_yields_async,
    reason = "some tasks hand a JoinHandle back to the main future on purpose"
)]

mod support;

use std::cell::{Cell, RefCell};
use std::future::{pending, poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use support::Gate;
use tourbillon::clock::ManualClock;
use tourbillon::config::PanicPolicy;
use tourbillon::error::SpawnError;
use tourbillon::task::{should_yield, yield_maybe, yield_now, JoinHandle};
use tourbillon::{spawn, try_spawn, Builder, Executor, QueueSpec};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    A,
    B,
}

fn one_queue() -> Executor<Q> {
    Builder::new().queue(Q::A, 1).build().unwrap()
}

fn two_queues() -> Executor<Q> {
    Builder::new()
        .queue(Q::A, 1)
        .queue(Q::B, 1)
        .build()
        .unwrap()
}

/// Queues A and B of equal shares with a 1 ms slice on a `ManualClock`:
/// advancing the clock by more than a slice in a poll of A ends A's run
/// after that poll when B is runnable.
fn two_queues_on_manual_clock() -> (Rc<Executor<Q>>, ManualClock) {
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue(Q::A, 1)
        .queue(Q::B, 1)
        .base_slice(Duration::from_millis(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    (Rc::new(ex), clock)
}

fn counter() -> Rc<Cell<usize>> {
    Rc::new(Cell::new(0))
}

/// Adds one to its counter when dropped.
#[derive(Debug)]
struct DropCount(Rc<Cell<usize>>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

type Log = Rc<RefCell<Vec<&'static str>>>;

fn new_log() -> Log {
    Rc::new(RefCell::new(Vec::new()))
}

fn entries(log: &Log) -> Vec<&'static str> {
    log.borrow().clone()
}

/// A future that logs `name` when polled and completes.
fn logged(log: &Log, name: &'static str) -> impl Future<Output = ()> + 'static {
    let log = log.clone();
    async move { log.borrow_mut().push(name) }
}

/// A task of queue A that parks its waker in the returned slot at its
/// first poll, and logs `name` and completes at its second.
fn parked_task(
    ex: &Executor<Q>,
    log: &Log,
    name: &'static str,
) -> (JoinHandle<()>, Rc<RefCell<Option<std::task::Waker>>>) {
    let parked: Rc<RefCell<Option<std::task::Waker>>> = Rc::default();
    let (l, p) = (log.clone(), parked.clone());
    let mut polled = false;
    let task = ex
        .spawn(
            Q::A,
            poll_fn(move |cx| {
                if polled {
                    l.borrow_mut().push(name);
                    return Poll::Ready(());
                }
                polled = true;
                *p.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }),
        )
        .unwrap();
    (task, parked)
}

/// Wraps a future and counts its polls.
struct Counted<F> {
    inner: Pin<Box<F>>,
    polls: Rc<Cell<usize>>,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        this.polls.set(this.polls.get() + 1);
        this.inner.as_mut().poll(cx)
    }
}

fn counted<F: Future>(polls: &Rc<Cell<usize>>, f: F) -> Counted<F> {
    Counted {
        inner: Box::pin(f),
        polls: polls.clone(),
    }
}

// ---------------------------------------------------------------------------
// F1: RunnableFifo order
// ---------------------------------------------------------------------------

#[test]
fn f1_fifo_self_wake_is_queued_once_behind_every_queued_task() {
    let ex = one_queue();
    let log = new_log();
    let l = log.clone();
    let mut first = true;
    let a = ex
        .spawn(
            Q::A,
            poll_fn(move |cx| {
                l.borrow_mut().push("a");
                if first {
                    first = false;
                    // Three wakes of itself during its own poll ...
                    cx.waker().wake_by_ref();
                    cx.waker().wake_by_ref();
                    cx.waker().clone().wake();
                    // ... and a task spawned after them: it is queued before
                    // `a`, which is pushed only when its poll returns.
                    drop(spawn(logged(&l, "d")));
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            }),
        )
        .unwrap();
    let b = ex.spawn(Q::A, logged(&log, "b")).unwrap();
    let c = ex.spawn(Q::A, logged(&log, "c")).unwrap();
    assert_eq!(ex.run_until_stalled(), 5);
    // `a` once more, behind b, c and d, and only once.
    assert_eq!(entries(&log), ["a", "b", "c", "d", "a"]);
    assert!(a.is_finished() && b.is_finished() && c.is_finished());
    ex.block_on(async {
        a.await.unwrap();
        b.await.unwrap();
        c.await.unwrap();
    });
    assert_eq!(ex.stats().live_tasks, 0);
    assert_eq!(ex.stats().polls, 5);
}

/// A run takes its FIFO queue's next tasks in batches: a task polled in the
/// middle of a batch still sees the tasks behind it as runnable, and a run
/// that ends mid-batch (its slice used up, a second queue waiting) leaves
/// the rest to the queue's next run, in their order.
#[test]
fn f1_fifo_batches_are_counted_as_runnable_and_put_back_in_order() {
    let (ex, clock) = two_queues_on_manual_clock();
    let seen = Rc::new(RefCell::new(Vec::new()));
    // `Some(i)` for task a<i> of queue A, `None` for the task of queue B.
    let order: Rc<RefCell<Vec<Option<usize>>>> = Rc::default();
    for i in 0..40usize {
        let (weak, seen, order, clock) = (
            Rc::downgrade(&ex),
            seen.clone(),
            order.clone(),
            clock.clone(),
        );
        let task = async move {
            let ex = weak.upgrade().unwrap();
            let runnable = ex.queue_stats(Q::A).unwrap().runnable_tasks;
            seen.borrow_mut().push(runnable);
            order.borrow_mut().push(Some(i));
            if i == 5 {
                // B becomes runnable and A's slice is used up: A's run
                // ends after this poll, with a6.. still in its batch.
                let o = order.clone();
                drop(
                    ex.spawn(Q::B, async move { o.borrow_mut().push(None) })
                        .unwrap(),
                );
                clock.advance(Duration::from_millis(5));
            }
        };
        drop(ex.spawn(Q::A, task).unwrap());
    }
    assert_eq!(ex.run_until_stalled(), 41);
    // Each task saw the ones behind it in its queue: 39, 38, ..., 0.
    assert_eq!(*seen.borrow(), (0..40).rev().collect::<Vec<usize>>());
    let mut expect: Vec<Option<usize>> = (0..40).map(Some).collect();
    expect.insert(6, None);
    assert_eq!(*order.borrow(), expect);
    assert_eq!(ex.stats().live_tasks, 0);
}

#[test]
fn f1_fifo_yielded_tasks_keep_their_place_before_later_wakes() {
    let ex = one_queue();
    let log = new_log();
    let (w, parked) = parked_task(&ex, &log, "w");
    let l = log.clone();
    let a = ex
        .spawn(Q::A, async move {
            l.borrow_mut().push("a");
            yield_now().await;
            l.borrow_mut().push("a");
        })
        .unwrap();
    let (l, p) = (log.clone(), parked.clone());
    let b = ex
        .spawn(Q::A, async move {
            l.borrow_mut().push("b");
            p.borrow_mut().take().unwrap().wake();
        })
        .unwrap();
    assert_eq!(ex.run_until_stalled(), 5);
    // `a` yielded before `b` woke `w`: `a` first.
    assert_eq!(entries(&log), ["a", "b", "a", "w"]);
    assert!(w.is_finished() && a.is_finished() && b.is_finished());

    // 40 tasks yielding 3 times each: exact rounds, more than 32 per round.
    let order = Rc::new(RefCell::new(Vec::new()));
    for i in 0..40u32 {
        let order = order.clone();
        drop(
            ex.spawn(Q::A, async move {
                for _ in 0..3 {
                    order.borrow_mut().push(i);
                    yield_now().await;
                }
            })
            .unwrap(),
        );
    }
    assert_eq!(ex.run_until_stalled(), 160);
    let expect: Vec<u32> = (0..3).flat_map(|_| 0..40).collect();
    assert_eq!(*order.borrow(), expect);

    // Every runnable task yields, so the queue is empty when a round ends
    // and the yielded tasks are the next round as they are; a task spawned
    // during a round runs after the tasks that yielded before it and
    // before those that yield after it.
    let order: Rc<RefCell<Vec<&'static str>>> = Rc::default();
    for name in ["a", "b", "c"] {
        let o = order.clone();
        drop(
            ex.spawn(Q::A, async move {
                for round in 0..3 {
                    o.borrow_mut().push(name);
                    if name == "a" && round == 1 {
                        let o = o.clone();
                        drop(tourbillon::spawn(async move { o.borrow_mut().push("d") }));
                    }
                    yield_now().await;
                }
            })
            .unwrap(),
        );
    }
    assert_eq!(ex.run_until_stalled(), 13);
    assert_eq!(
        *order.borrow(),
        ["a", "b", "c", "a", "b", "c", "d", "a", "b", "c"]
    );
}

/// A task woken while the run holds every queued task of its queue joins
/// the end of the run's batch: it counts as runnable at once, and a run
/// that ends before polling it puts it back in its place.
#[test]
fn f1_fifo_a_task_woken_into_the_batch_keeps_its_place_when_the_run_ends() {
    let (ex, clock) = two_queues_on_manual_clock();
    let log = new_log();
    let (w, parked) = parked_task(&ex, &log, "w");
    assert_eq!(ex.run_until_stalled(), 1);
    let seen = Rc::new(Cell::new(usize::MAX));
    let (weak, l, p, s, c) = (
        Rc::downgrade(&ex),
        log.clone(),
        parked.clone(),
        seen.clone(),
        clock.clone(),
    );
    let a = ex
        .spawn(Q::A, async move {
            let ex = weak.upgrade().unwrap();
            l.borrow_mut().push("a");
            // `w` joins the batch behind `a`: runnable at once.
            p.borrow_mut().take().unwrap().wake();
            s.set(ex.queue_stats(Q::A).unwrap().runnable_tasks);
            // B becomes runnable and A's slice is used up: A's run ends
            // after this poll, with `w` still in its batch.
            let l = l.clone();
            drop(
                ex.spawn(Q::B, async move { l.borrow_mut().push("b") })
                    .unwrap(),
            );
            c.advance(Duration::from_millis(5));
        })
        .unwrap();
    assert_eq!(ex.run_until_stalled(), 3);
    assert_eq!(seen.get(), 1);
    assert_eq!(entries(&log), ["a", "b", "w"]);
    assert!(a.is_finished() && w.is_finished());
    assert_eq!(ex.stats().live_tasks, 0);
}

/// A lone task yielding in a loop is its own next batch, without a look
/// at the queue; a task pushed while it runs (spawned, woken, or spawned
/// from the inbox) still takes its place in the FIFO order.
#[test]
fn f1_fifo_lone_yielder_lets_tasks_pushed_during_its_polls_in() {
    let ex = one_queue();
    let log = new_log();
    let (w, parked) = parked_task(&ex, &log, "w");
    assert_eq!(ex.run_until_stalled(), 1);
    let remote = ex.remote_spawner();
    // Polls of `a` so far, and how many the inbox's task saw.
    let a_polls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(AtomicUsize::new(0));
    let (l, p, n, s) = (log.clone(), parked.clone(), a_polls.clone(), seen.clone());
    let a = ex
        .spawn(Q::A, async move {
            for round in 0..9 {
                l.borrow_mut().push("a");
                n.fetch_add(1, Ordering::Relaxed);
                match round {
                    // Spawned during its poll: queued before `a`, which is
                    // pushed only when the poll returns.
                    2 => drop(spawn(logged(&l, "d"))),
                    // Woken during its poll: the same.
                    4 => p.borrow_mut().take().unwrap().wake(),
                    // Spawned through the inbox, which is read after the
                    // poll: queued behind `a`.
                    6 => {
                        let (n, s) = (n.clone(), s.clone());
                        let task =
                            async move { s.store(n.load(Ordering::Relaxed), Ordering::Relaxed) };
                        drop(remote.spawn(Q::A, task).unwrap());
                    }
                    _ => {}
                }
                yield_now().await;
            }
        })
        .unwrap();
    assert_eq!(ex.run_until_stalled(), 13);
    assert_eq!(
        entries(&log),
        ["a", "a", "a", "d", "a", "a", "w", "a", "a", "a", "a"]
    );
    // The inbox's task ran right after the poll of `a` that followed the
    // one that spawned it (the 7th).
    assert_eq!(seen.load(Ordering::Relaxed), 8);
    assert!(a.is_finished() && w.is_finished());
    assert_eq!(ex.stats().live_tasks, 0);
}

#[test]
fn f1_fifo_polls_woken_tasks_in_wake_order() {
    let ex = one_queue();
    let log = new_log();
    const OUTSIDE: [&str; 4] = ["o0", "o1", "o2", "o3"];
    const INSIDE: [&str; 4] = ["i0", "i1", "i2", "i3"];
    let gates: Vec<Rc<Gate>> = (0..8).map(|_| Gate::new()).collect();
    let handles: Vec<JoinHandle<()>> = (0..8)
        .map(|i| {
            let g = gates[i].clone();
            let l = log.clone();
            let name = if i < 4 { OUTSIDE[i] } else { INSIDE[i - 4] };
            ex.spawn(Q::A, async move {
                g.wait().await;
                l.borrow_mut().push(name);
            })
            .unwrap()
        })
        .collect();
    assert_eq!(ex.run_until_stalled(), 8);
    assert!(entries(&log).is_empty());

    // Wakes while the executor is not running go through its inbox and
    // keep their order.
    for i in [2, 0, 3, 1] {
        gates[i].open();
    }
    assert_eq!(ex.run_until_stalled(), 4);
    assert_eq!(entries(&log), ["o2", "o0", "o3", "o1"]);

    // Wakes on the executor's thread during a run (from the main future).
    log.borrow_mut().clear();
    ex.block_on(async {
        for i in [3, 1, 0, 2] {
            gates[4 + i].open();
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    assert_eq!(entries(&log), ["i3", "i1", "i0", "i2"]);
    for g in &gates {
        assert_eq!(g.polls.get(), 2, "each task polled once per wake");
    }
}

// ---------------------------------------------------------------------------
// T1: abort of an idle task
// ---------------------------------------------------------------------------

#[test]
fn t1_abort_of_idle_task_between_runs_drops_it_before_its_queue_runs_again() {
    let ex = one_queue();
    let dropped = counter();
    let gate = Gate::new();
    let victim = {
        let d = DropCount(dropped.clone());
        let g = gate.clone();
        ex.spawn(Q::A, async move {
            let _d = d;
            g.wait().await;
            unreachable!("an aborted task is never polled again");
        })
        .unwrap()
    };
    ex.run_until_stalled();
    assert_eq!(gate.polls.get(), 1);
    assert_eq!(dropped.get(), 0);

    victim.abort();
    // A wake after the abort must not get it polled either.
    gate.open();
    // The first task of the queue's next run sees the future already gone.
    let seen = Rc::new(Cell::new(None));
    let probe = {
        let (seen, dropped) = (seen.clone(), dropped.clone());
        ex.spawn(Q::A, async move { seen.set(Some(dropped.get())) })
            .unwrap()
    };
    ex.run_until_stalled();
    assert_eq!(seen.get(), Some(1), "dropped before the probe ran");
    assert_eq!(gate.polls.get(), 1, "not polled again");
    assert_eq!(dropped.get(), 1);
    assert!(victim.is_finished());
    let err = ex.block_on(victim).unwrap_err();
    assert!(err.is_cancelled() && !err.is_panic());
    ex.block_on(probe).unwrap();
    let st = ex.queue_stats(Q::A).unwrap();
    assert_eq!((st.cancelled, st.completed, st.panicked), (1, 1, 0));
    drop(ex);
    assert_eq!(dropped.get(), 1);
}

#[test]
fn t1_abort_of_idle_task_during_a_run_drops_it_before_the_next_poll() {
    let ex = one_queue();
    let dropped = counter();
    let gate = Gate::new();
    let victim = {
        let d = DropCount(dropped.clone());
        let g = gate.clone();
        ex.spawn(Q::A, async move {
            let _d = d;
            g.wait().await;
        })
        .unwrap()
    };
    ex.run_until_stalled();
    assert_eq!(gate.polls.get(), 1);

    // Another task of the same queue aborts the idle victim; the next task
    // polled in that same run already sees its future dropped.
    let aborter = ex
        .spawn(Q::A, async move {
            victim.abort();
            victim
        })
        .unwrap();
    let seen = Rc::new(Cell::new(None));
    let checker = {
        let (seen, dropped) = (seen.clone(), dropped.clone());
        ex.spawn(Q::A, async move { seen.set(Some(dropped.get())) })
            .unwrap()
    };
    ex.block_on(async {
        let victim = aborter.await.unwrap();
        checker.await.unwrap();
        assert!(victim.await.unwrap_err().is_cancelled());
    });
    assert_eq!(seen.get(), Some(1));
    assert_eq!(gate.polls.get(), 1);
    assert_eq!(dropped.get(), 1);
    assert_eq!(ex.queue_stats(Q::A).unwrap().cancelled, 1);
}

// ---------------------------------------------------------------------------
// T2: abort of a queued task, self-abort, abort after completion
// ---------------------------------------------------------------------------

#[test]
fn t2_abort_of_a_never_polled_task_drops_it_unpolled() {
    let ex = one_queue();
    let dropped = counter();
    let polls = counter();
    let h = {
        let d = DropCount(dropped.clone());
        ex.spawn(
            Q::A,
            counted(&polls, async move {
                let _d = d;
                7
            }),
        )
        .unwrap()
    };
    h.abort();
    assert_eq!(dropped.get(), 0, "dropped at the next scheduling point");
    let r = ex.block_on(h);
    assert!(r.unwrap_err().is_cancelled());
    assert_eq!(polls.get(), 0);
    assert_eq!(dropped.get(), 1);
    assert_eq!(ex.stats().polls, 0);
    assert_eq!(ex.queue_stats(Q::A).unwrap().cancelled, 1);
}

#[test]
fn t2_abort_of_a_woken_queued_task_drops_it_at_the_next_boundary() {
    let ex = one_queue();
    let dropped = counter();
    let gate = Gate::new();
    let victim = {
        let d = DropCount(dropped.clone());
        let g = gate.clone();
        ex.spawn(Q::A, async move {
            let _d = d;
            g.wait().await;
            "not reached"
        })
        .unwrap()
    };
    // Runs after the victim's first poll: wakes it (it is now queued behind
    // the checker), then aborts it.
    let aborter = {
        let g = gate.clone();
        ex.spawn(Q::A, async move {
            g.open();
            victim.abort();
            victim
        })
        .unwrap()
    };
    let seen = Rc::new(Cell::new(None));
    let checker = {
        let (seen, dropped) = (seen.clone(), dropped.clone());
        ex.spawn(Q::A, async move { seen.set(Some(dropped.get())) })
            .unwrap()
    };
    ex.run_until_stalled();
    assert_eq!(seen.get(), Some(1), "dropped before the next task ran");
    assert_eq!(gate.polls.get(), 1, "the queued victim was not polled");
    ex.block_on(async {
        let victim = aborter.await.unwrap();
        assert!(victim.await.unwrap_err().is_cancelled());
        checker.await.unwrap();
    });
    assert_eq!(dropped.get(), 1);
}

#[test]
fn t2_task_aborting_itself_is_dropped_when_its_poll_returns() {
    let ex = one_queue();
    let dropped = counter();
    let polls = counter();
    let log = new_log();
    let slot: Rc<RefCell<Option<JoinHandle<()>>>> = Rc::default();
    let h = {
        let d = DropCount(dropped.clone());
        let (slot, log) = (slot.clone(), log.clone());
        ex.spawn(
            Q::A,
            counted(&polls, async move {
                let _d = d;
                slot.borrow().as_ref().unwrap().abort();
                // The rest of this poll still runs ...
                log.borrow_mut().push("after abort");
                yield_now().await;
                // ... but it is never polled again.
                log.borrow_mut().push("resumed");
            }),
        )
        .unwrap()
    };
    *slot.borrow_mut() = Some(h);
    let seen = Rc::new(Cell::new(None));
    let checker = {
        let (seen, dropped) = (seen.clone(), dropped.clone());
        ex.spawn(Q::A, async move { seen.set(Some(dropped.get())) })
            .unwrap()
    };
    ex.run_until_stalled();
    assert_eq!(entries(&log), ["after abort"]);
    assert_eq!(polls.get(), 1);
    assert_eq!(seen.get(), Some(1), "dropped when its poll returned");
    let h = slot.borrow_mut().take().unwrap();
    assert!(h.is_finished());
    assert!(ex.block_on(h).unwrap_err().is_cancelled());
    ex.block_on(checker).unwrap();
    assert_eq!(dropped.get(), 1);
    assert_eq!(ex.queue_stats(Q::A).unwrap().cancelled, 1);
}

#[test]
fn t2_abort_after_completion_keeps_the_output() {
    let ex = one_queue();
    // Completed in an earlier run.
    let h = ex.spawn(Q::A, async { 41 }).unwrap();
    ex.run_until_stalled();
    assert!(h.is_finished());
    h.abort();
    h.abort();
    assert_eq!(ex.block_on(h).unwrap(), 41);

    // Completed earlier in the same run as the abort.
    let first = ex.spawn(Q::A, async { 42 }).unwrap();
    let aborter = ex
        .spawn(Q::A, async move {
            assert!(first.is_finished());
            first.abort();
            first
        })
        .unwrap();
    let out = ex.block_on(async { aborter.await.unwrap().await });
    assert_eq!(out.unwrap(), 42);
    let st = ex.queue_stats(Q::A).unwrap();
    assert_eq!((st.completed, st.cancelled), (3, 0));
}

// ---------------------------------------------------------------------------
// T3: dropping a JoinHandle detaches
// ---------------------------------------------------------------------------

#[test]
fn t3_dropped_handle_detaches_and_the_output_is_dropped_once() {
    let ex = one_queue();
    let out_drops = counter();
    let finished = Rc::new(Cell::new(false));
    let gate = Gate::new();
    let h = {
        let (o, f, g) = (out_drops.clone(), finished.clone(), gate.clone());
        ex.spawn(Q::A, async move {
            g.wait().await;
            for _ in 0..3 {
                yield_now().await;
            }
            f.set(true);
            DropCount(o)
        })
        .unwrap()
    };
    ex.run_until_stalled();
    // Detach while the task is idle, then let it finish.
    drop(h);
    gate.open();
    assert_eq!(ex.run_until_stalled(), 4);
    assert!(finished.get(), "the detached task ran to completion");
    assert_eq!(out_drops.get(), 1, "its output was dropped at completion");
    assert_eq!(ex.stats().live_tasks, 0);
    assert_eq!(ex.queue_stats(Q::A).unwrap().completed, 1);
    drop(ex);
    assert_eq!(out_drops.get(), 1);
}

#[test]
fn t3_handle_dropped_after_completion_drops_the_unread_output_once() {
    let ex = one_queue();
    let out_drops = counter();
    let h = {
        let o = out_drops.clone();
        ex.spawn(Q::A, async move { DropCount(o) }).unwrap()
    };
    ex.run_until_stalled();
    assert!(h.is_finished());
    assert_eq!(out_drops.get(), 0, "kept for the join handle");
    // Ended: no longer live; its result waits in the handle's cell.
    assert_eq!(ex.stats().live_tasks, 0);
    drop(h);
    assert_eq!(out_drops.get(), 1);
    assert_eq!(ex.stats().live_tasks, 0);
    drop(ex);
    assert_eq!(out_drops.get(), 1);
}

#[test]
fn t3_handle_dropped_by_its_own_task_detaches_it() {
    let ex = one_queue();
    let out_drops = counter();
    let slot: Rc<RefCell<Option<JoinHandle<DropCount>>>> = Rc::default();
    let h = {
        let (o, slot) = (out_drops.clone(), slot.clone());
        ex.spawn(Q::A, async move {
            drop(slot.borrow_mut().take());
            yield_now().await;
            DropCount(o)
        })
        .unwrap()
    };
    *slot.borrow_mut() = Some(h);
    assert_eq!(ex.run_until_stalled(), 2);
    assert_eq!(out_drops.get(), 1);
    assert_eq!(ex.stats().live_tasks, 0);
}

// ---------------------------------------------------------------------------
// T4: panic policy
// ---------------------------------------------------------------------------

#[test]
fn t4_catch_reports_the_payload_and_every_queue_keeps_its_share() {
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue(Q::A, 1)
        .queue(Q::B, 3)
        .base_slice(Duration::from_micros(50))
        .clock(clock.clone())
        .build()
        .unwrap();
    let boom_a = ex
        .spawn(Q::A, async {
            yield_now().await;
            panic!("boom");
        })
        .unwrap();
    let boom_a2 = ex
        .spawn(Q::A, async {
            yield_now().await;
            yield_now().await;
            std::panic::panic_any(17u32);
        })
        .unwrap();
    let boom_b = ex
        .spawn(Q::B, async {
            let queue = String::from("B");
            yield_now().await;
            panic!("boom in {queue}");
        })
        .unwrap();
    let (a_polls, b_done) = (counter(), Rc::new(Cell::new(false)));
    let worker_a = {
        let (n, done, clock) = (a_polls.clone(), b_done.clone(), clock.clone());
        ex.spawn(Q::A, async move {
            while !done.get() {
                n.set(n.get() + 1);
                clock.advance(Duration::from_micros(10));
                yield_now().await;
            }
            "a done"
        })
        .unwrap()
    };
    let worker_b = {
        let (done, clock) = (b_done.clone(), clock.clone());
        ex.spawn(Q::B, async move {
            for _ in 0..300 {
                clock.advance(Duration::from_micros(10));
                yield_now().await;
            }
            done.set(true);
            "b done"
        })
        .unwrap()
    };
    let (id_a, id_a2, id_b) = (boom_a.id(), boom_a2.id(), boom_b.id());
    ex.block_on(async {
        let e = boom_a.await.unwrap_err();
        assert!(e.is_panic() && !e.is_cancelled());
        assert_eq!(e.id(), id_a);
        assert_eq!(
            e.to_string(),
            format!("task {id_a} panicked with message \"boom\"")
        );
        assert_eq!(*e.into_panic().downcast::<&str>().unwrap(), "boom");

        let e = boom_a2.await.unwrap_err();
        assert_eq!(e.id(), id_a2);
        assert_eq!(e.to_string(), format!("task {id_a2} panicked"));
        assert_eq!(*e.into_panic().downcast::<u32>().unwrap(), 17);

        let e = boom_b.await.unwrap_err();
        assert_eq!(e.id(), id_b);
        assert_eq!(*e.into_panic().downcast::<String>().unwrap(), "boom in B");

        assert_eq!(worker_b.await.unwrap(), "b done");
        assert_eq!(worker_a.await.unwrap(), "a done");
    });
    // While both were runnable, A (1 share) got about a quarter of the
    // polls of equal cost: 300 B polls against about 100 A polls.
    let a = a_polls.get();
    assert!(
        (90..=110).contains(&a),
        "A polled {a} times against 300 of B"
    );
    let (sa, sb) = (ex.queue_stats(Q::A).unwrap(), ex.queue_stats(Q::B).unwrap());
    assert_eq!((sa.panicked, sa.completed, sa.cancelled), (2, 1, 0));
    assert_eq!((sb.panicked, sb.completed, sb.cancelled), (1, 1, 0));
    assert_eq!(ex.stats().live_tasks, 0);
}

#[test]
fn t4_propagate_unwinds_out_of_block_on_and_the_executor_stays_usable() {
    let ex = Builder::new()
        .queue(Q::A, 1)
        .queue(Q::B, 1)
        .clock(ManualClock::new())
        .panic_policy(PanicPolicy::Propagate)
        .build()
        .unwrap();
    let (boom_drops, idle_a, idle_b) = (counter(), counter(), counter());
    let boom = {
        let d = DropCount(boom_drops.clone());
        ex.spawn(Q::A, async move {
            let _d = d;
            yield_now().await;
            panic!("propagated boom");
        })
        .unwrap()
    };
    let ia = {
        let d = DropCount(idle_a.clone());
        ex.spawn(Q::A, async move {
            let _d = d;
            pending::<()>().await;
        })
        .unwrap()
    };
    let ib = {
        let d = DropCount(idle_b.clone());
        ex.spawn(Q::B, async move {
            let _d = d;
            pending::<()>().await;
        })
        .unwrap()
    };
    let mut sentinel = ex
        .spawn(Q::B, async {
            for _ in 0..100 {
                yield_now().await;
            }
            100
        })
        .unwrap();

    let r = catch_unwind(AssertUnwindSafe(|| ex.block_on(&mut sentinel)));
    let payload = r.expect_err("the task's panic unwinds out of block_on");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"propagated boom"),
        "with the task's own payload"
    );
    assert_eq!(boom_drops.get(), 1, "the panicked future was dropped");
    assert_eq!((idle_a.get(), idle_b.get()), (0, 0));
    assert_eq!(ex.queue_stats(Q::A).unwrap().panicked, 1);

    // The join handle still reports a panic (with a placeholder payload).
    let e = ex.block_on(boom).unwrap_err();
    assert!(e.is_panic());
    // The executor runs again: the interrupted work and new work finish.
    assert_eq!(ex.block_on(sentinel).unwrap(), 100);
    let h = ex.spawn(Q::A, async { 5 }).unwrap();
    assert_eq!(ex.block_on(h).unwrap(), 5);
    assert!(!ia.is_finished() && !ib.is_finished());

    drop(ex);
    assert_eq!((idle_a.get(), idle_b.get()), (1, 1));
    assert_eq!(boom_drops.get(), 1);
    assert!(futures::executor::block_on(ia).unwrap_err().is_cancelled());
    assert!(futures::executor::block_on(ib).unwrap_err().is_cancelled());
}

#[test]
fn t4_propagate_unwinds_out_of_run_until_in_a_host_runtime() {
    let ex = Builder::new()
        .queue(Q::A, 1)
        .panic_policy(PanicPolicy::Propagate)
        .build()
        .unwrap();
    let idle = counter();
    let ih = {
        let d = DropCount(idle.clone());
        ex.spawn(Q::A, async move {
            let _d = d;
            pending::<()>().await;
        })
        .unwrap()
    };
    let boom = ex
        .spawn(Q::A, async {
            yield_now().await;
            panic!("nested boom");
        })
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(ex.run_until(pending::<()>()))
    }));
    let payload = r.expect_err("unwinds out of run_until");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"nested boom"));
    assert!(rt.block_on(ex.run_until(boom)).unwrap_err().is_panic());
    let h = ex.spawn(Q::A, async { 3 }).unwrap();
    assert_eq!(rt.block_on(ex.run_until(h)).unwrap(), 3);
    drop(ex);
    assert_eq!(idle.get(), 1);
    drop(ih);
}

// ---------------------------------------------------------------------------
// T5: shutdown
// ---------------------------------------------------------------------------

#[test]
fn t5_dropping_the_executor_drops_every_task_once() {
    let ex = two_queues();
    let spawner = ex.spawner();
    let qh = ex.queue(Q::B).unwrap();
    let (parked, queued, aborted, output, detached, never) = (
        counter(),
        counter(),
        counter(),
        counter(),
        counter(),
        counter(),
    );
    let gate = Gate::new();
    let h_parked = {
        let (d, g) = (DropCount(parked.clone()), gate.clone());
        ex.spawn(Q::A, async move {
            let _d = d;
            g.wait().await;
        })
        .unwrap()
    };
    let h_aborted = {
        let d = DropCount(aborted.clone());
        ex.spawn(Q::B, async move {
            let _d = d;
            pending::<()>().await;
        })
        .unwrap()
    };
    let h_done = {
        let o = output.clone();
        ex.spawn(Q::A, async move { DropCount(o) }).unwrap()
    };
    let h_detached = {
        let d = DropCount(detached.clone());
        ex.spawn(Q::B, async move {
            let _d = d;
            pending::<()>().await;
        })
        .unwrap()
    };
    drop(h_detached);
    ex.run_until_stalled();
    assert!(h_done.is_finished());

    // Queued, never polled.
    let h_queued = {
        let d = DropCount(queued.clone());
        ex.spawn(Q::A, async move {
            let _d = d;
        })
        .unwrap()
    };
    // Aborted, the abort not yet applied.
    h_aborted.abort();
    // Parked and then woken: queued in the inbox.
    gate.open();
    let all = [&parked, &queued, &aborted, &output, &detached];
    assert!(all.iter().all(|c| c.get() == 0));

    drop(ex);
    let unfinished = [&parked, &queued, &aborted, &detached];
    for (i, c) in unfinished.iter().enumerate() {
        assert_eq!(c.get(), 1, "counter {i} dropped exactly once");
    }
    // The output of the completed task waits in its handle's cell.
    assert_eq!(output.get(), 0);

    // Join handles that outlive the executor: Cancelled for the tasks it
    // dropped unfinished; the output for the one that completed (as in
    // tokio, where a completed task's output lives in its cell until the
    // handle reads or drops it).
    use futures::executor::block_on as host_block_on;
    assert!(host_block_on(h_parked).unwrap_err().is_cancelled());
    assert!(host_block_on(h_queued).unwrap_err().is_cancelled());
    assert!(host_block_on(h_aborted).unwrap_err().is_cancelled());
    let out = host_block_on(h_done).expect("the output outlives the executor");
    assert_eq!(output.get(), 0);
    drop(out);
    assert_eq!(output.get(), 1);

    // Spawning after shutdown fails, and the future is dropped, unpolled.
    let d = DropCount(never.clone());
    let r = spawner.spawn(Q::A, async move {
        let _d = d;
        unreachable!()
    });
    assert_eq!(r.unwrap_err(), SpawnError::Shutdown);
    let d = DropCount(never.clone());
    let r = qh.spawn(async move {
        let _d = d;
        unreachable!()
    });
    assert_eq!(r.unwrap_err(), SpawnError::Shutdown);
    assert_eq!(never.get(), 2);
    for c in all {
        assert_eq!(c.get(), 1);
    }
}

#[test]
fn t5_destructors_running_at_shutdown_cannot_spawn() {
    struct SpawnOnDrop {
        spawner: tourbillon::Spawner<Q>,
        result: Rc<RefCell<Option<Result<(), SpawnError>>>>,
    }
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            let r = self.spawner.spawn(Q::A, async {}).map(drop);
            *self.result.borrow_mut() = Some(r);
        }
    }
    let ex = one_queue();
    let result = Rc::default();
    let guard = SpawnOnDrop {
        spawner: ex.spawner(),
        result: Rc::clone(&result),
    };
    let h = ex
        .spawn(Q::A, async move {
            let _g = guard;
            pending::<()>().await;
        })
        .unwrap();
    ex.run_until_stalled();
    drop(ex);
    assert_eq!(*result.borrow(), Some(Err(SpawnError::Shutdown)));
    drop(h);
}

// ---------------------------------------------------------------------------
// T6: yield_maybe / should_yield
// ---------------------------------------------------------------------------

/// A task that does `iterations` steps of 10 us of virtual work and calls
/// `yield_maybe` after each; records the steps after which it yielded.
fn stepper(
    clock: &ManualClock,
    iterations: usize,
    yields: &Rc<RefCell<Vec<usize>>>,
    polls: &Rc<Cell<usize>>,
) -> impl Future<Output = ()> + 'static {
    let (clock, yields, p) = (clock.clone(), yields.clone(), polls.clone());
    counted(polls, async move {
        for i in 1..=iterations {
            clock.advance(Duration::from_micros(10));
            let before = p.get();
            yield_maybe().await;
            if p.get() != before {
                yields.borrow_mut().push(i);
            }
        }
    })
}

#[test]
fn t6_yield_maybe_yields_once_each_time_the_slice_is_used_while_contended() {
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue(Q::A, 1)
        .queue(Q::B, 1)
        .base_slice(Duration::from_micros(100))
        .host_yield_interval(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    let (ya, yb) = (Rc::default(), Rc::default());
    let (pa, pb) = (counter(), counter());
    let a = ex.spawn(Q::A, stepper(&clock, 100, &ya, &pa)).unwrap();
    let b = ex.spawn(Q::B, stepper(&clock, 50, &yb, &pb)).unwrap();
    ex.block_on(async {
        a.await.unwrap();
        b.await.unwrap();
    });
    // Both queues start with half a slice (50 us, EEVDF's initial
    // placement), then get a full slice (100 us = 10 steps) per request,
    // and take turns: A, B, A, B, ... (a used request ends the run's
    // RUN_TO_PARITY protection; equal vruntimes and deadlines go to the
    // lower index, A). yield_maybe is a no-op until the slice is used, and
    // yields exactly once when it is.
    assert_eq!(*yb.borrow(), [5, 15, 25, 35, 45]);
    // A's run from step 46 is still contended (B has steps 46-50 left):
    // it yields at 55. Once B is done, A runs alone: its used-up slices no
    // longer make it yield (nothing else would run).
    assert_eq!(*ya.borrow(), [5, 15, 25, 35, 45, 55]);
    assert_eq!((pa.get(), pb.get()), (7, 6));
}

#[test]
fn t6_yield_maybe_yields_to_a_queue_woken_during_the_poll_of_a_lone_task() {
    // A's only task is being polled when it spawns onto B: inside that
    // poll, `should_yield` must see B's placement, and B, whose request is
    // shorter, preempts A at once (R9), although A has no other task
    // queued.
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue(Q::A, 1)
        .queue_with(Q::B, QueueSpec::new(1).slice(Duration::from_micros(10)))
        .base_slice(Duration::from_micros(100))
        .host_yield_interval(Duration::from_secs(1))
        .clock(clock.clone())
        .build()
        .unwrap();
    let yields = Rc::new(RefCell::new(Vec::new()));
    let (c, y, spawner) = (clock.clone(), yields.clone(), ex.spawner());
    let a = ex
        .spawn(Q::A, async move {
            for i in 1..=30u32 {
                c.advance(Duration::from_micros(10));
                if i == 12 {
                    drop(spawner.spawn(Q::B, async {}).unwrap());
                }
                if should_yield() {
                    y.borrow_mut().push(i);
                    yield_now().await;
                }
            }
        })
        .unwrap();
    ex.block_on(a).unwrap();
    assert_eq!(yields.borrow().first(), Some(&12));
}

#[test]
fn t6_lone_queue_yields_only_when_the_host_interval_is_spent() {
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue(Q::A, 1)
        .base_slice(Duration::from_micros(50))
        .host_yield_interval(Duration::from_micros(200))
        .clock(clock.clone())
        .build()
        .unwrap();
    let yields = Rc::default();
    let polls = counter();
    let h = ex
        .spawn(Q::A, stepper(&clock, 100, &yields, &polls))
        .unwrap();
    ex.block_on(h).unwrap();
    // The 50 us slice is used every 5 steps, but with one runnable queue
    // that does not end its run; the 200 us host interval (20 steps) does.
    assert_eq!(*yields.borrow(), [20, 40, 60, 80, 100]);
    assert_eq!(polls.get(), 6);
}

#[test]
fn t6_should_yield_is_false_outside_a_task() {
    // No executor at all.
    assert!(!should_yield());
    let polls = counter();
    let f = counted(&polls, async {
        for _ in 0..1000 {
            yield_maybe().await;
        }
    });
    futures::executor::block_on(f);
    assert_eq!(polls.get(), 1, "yield_maybe never yielded");

    // Inside another runtime.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async { assert!(!should_yield()) });

    // In the main future of block_on (not a task), even with the clock far
    // beyond every slice and interval.
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue(Q::A, 1)
        .queue(Q::B, 1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let _a = ex.spawn(Q::A, pending::<()>()).unwrap();
    let _b = ex.spawn(Q::B, pending::<()>()).unwrap();
    let polls = counter();
    ex.block_on(counted(&polls, async {
        clock.advance(Duration::from_secs(10));
        assert!(!should_yield());
        yield_maybe().await;
    }));
    assert_eq!(polls.get(), 1);
    // And after a run, outside it.
    assert!(!should_yield());
}

// ---------------------------------------------------------------------------
// Pending tasks across runs, spawning, is_finished
// ---------------------------------------------------------------------------

#[test]
fn pending_tasks_stay_and_resume_on_the_next_run() {
    let ex = one_queue();
    let gate = Gate::new();
    let waiting = {
        let g = gate.clone();
        ex.spawn(Q::A, async move {
            g.wait().await;
            7
        })
        .unwrap()
    };
    let polls = counter();
    let busy = ex
        .spawn(
            Q::A,
            counted(&polls, async {
                for _ in 0..1000 {
                    yield_now().await;
                }
                1000
            }),
        )
        .unwrap();
    let marker = ex.spawn(Q::A, async {}).unwrap();
    // Returns once the marker is done: the others are left pending, one
    // idle and one queued.
    ex.block_on(marker).unwrap();
    let after_first = polls.get();
    assert!((1..1001).contains(&after_first));
    assert_eq!(gate.polls.get(), 1);
    assert!(!waiting.is_finished() && !busy.is_finished());

    // Woken between runs.
    gate.open();
    assert_eq!(ex.block_on(waiting).unwrap(), 7);
    assert_eq!(ex.block_on(busy).unwrap(), 1000);
    assert_eq!(polls.get(), 1001);
    assert_eq!(ex.stats().live_tasks, 0);
}

#[test]
fn spawning_from_tasks_uses_the_current_queue_and_spawner_reaches_any() {
    let ex = two_queues();
    let spawner = ex.spawner();
    let qa = ex.queue(Q::A).unwrap();
    assert_eq!(qa.index(), 0);
    let out = ex.block_on(async {
        // From the main future: the first declared queue.
        let from_main = spawn(async { 1 });
        let parent = ex
            .spawn(Q::B, async move {
                // The running task's queue (B).
                let child = spawn(async { 10 });
                let via_try = try_spawn(async { 1000 }).unwrap();
                // Any queue by key.
                let other = spawner.spawn(Q::A, async { 100 }).unwrap();
                let via_handle = qa.spawn(async { 10_000 }).unwrap();
                child.await.unwrap()
                    + via_try.await.unwrap()
                    + other.await.unwrap()
                    + via_handle.await.unwrap()
            })
            .unwrap();
        from_main.await.unwrap() + parent.await.unwrap()
    });
    assert_eq!(out, 11_111);
    assert_eq!(ex.queue_stats(Q::A).unwrap().spawned, 3);
    assert_eq!(ex.queue_stats(Q::B).unwrap().spawned, 3);
    assert_eq!(ex.stats().live_tasks, 0);
}

#[test]
fn a_detached_child_outlives_its_parent() {
    let ex = one_queue();
    let done = Rc::new(Cell::new(false));
    let parent = {
        let done = done.clone();
        ex.spawn(Q::A, async move {
            drop(spawn(async move {
                for _ in 0..5 {
                    yield_now().await;
                }
                done.set(true);
            }));
        })
        .unwrap()
    };
    ex.block_on(parent).unwrap();
    ex.run_until_stalled();
    assert!(done.get());
    assert_eq!(ex.queue_stats(Q::A).unwrap().completed, 2);
}

#[test]
fn try_spawn_outside_an_executor_gives_no_executor() {
    let dropped = counter();
    let d = DropCount(dropped.clone());
    let r = try_spawn(async move {
        let _d = d;
    });
    assert_eq!(r.unwrap_err(), SpawnError::NoExecutor);
    assert_eq!(dropped.get(), 1);
    // Also after an executor ran on this thread, and while one exists.
    let ex = one_queue();
    ex.block_on(async {
        assert!(try_spawn(async {}).is_ok());
    });
    assert_eq!(try_spawn(async {}).unwrap_err(), SpawnError::NoExecutor);
    drop(ex);
    assert_eq!(try_spawn(async {}).unwrap_err(), SpawnError::NoExecutor);
}

#[test]
#[should_panic(expected = "spawn called outside a running tourbillon executor")]
fn spawn_outside_an_executor_panics() {
    drop(spawn(async {}));
}

#[test]
fn is_finished_follows_the_task() {
    let ex = one_queue();
    let gate = Gate::new();
    let h = ex.spawn(Q::A, gate.wait()).unwrap();
    assert!(!h.is_finished(), "spawned");
    ex.run_until_stalled();
    assert!(!h.is_finished(), "idle");
    gate.open();
    assert!(!h.is_finished(), "woken");
    ex.run_until_stalled();
    assert!(h.is_finished(), "completed, output unread");
    ex.block_on(h).unwrap();

    let aborted = ex.spawn(Q::A, pending::<()>()).unwrap();
    ex.run_until_stalled();
    aborted.abort();
    ex.run_until_stalled();
    assert!(aborted.is_finished(), "cancelled");

    let panicked = ex
        .spawn(Q::A, async {
            panic!("finished by panic");
        })
        .unwrap();
    ex.run_until_stalled();
    assert!(panicked.is_finished());
    assert!(ex.block_on(panicked).unwrap_err().is_panic());
}

/// A task that yields inside a combinator and, in the same poll, drives
/// another executor (whose tasks yield too) must still be rescheduled: the
/// inner executor's polls must neither consume nor fake the outer task's
/// yield (the yield fast path keeps a per-thread marker).
#[test]
fn yield_in_combinator_survives_a_nested_executor_in_the_same_poll() {
    let outer = Builder::new().queue(0u8, 1).build().unwrap();
    let h = outer
        .spawn(0, async {
            let inner = Builder::new().queue(0u8, 1).build().unwrap();
            let (_, inner_out) = futures::future::join(tourbillon::task::yield_now(), async {
                inner.block_on(async {
                    let t = inner
                        .spawn(0, async {
                            tourbillon::task::yield_now().await;
                            tourbillon::task::yield_now().await;
                            7
                        })
                        .unwrap();
                    t.await.unwrap()
                })
            })
            .await;
            inner_out
        })
        .unwrap();
    outer.run_until_stalled();
    assert!(h.is_finished(), "the outer task's yield was lost");
    assert_eq!(outer.block_on(h).unwrap(), 7);
}

/// `Executor::drained` completes once every task has ended, tasks spawned
/// while it waits included, as awaiting a tokio `LocalSet` does: nested in
/// tokio with `run_until`, and standalone with `block_on`; two may wait at
/// once.
#[test]
fn drained_completes_once_every_task_has_ended() {
    let ex = Builder::new()
        .queue(Q::A, 1)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let ended = Rc::new(Cell::new(0));
    let spawn_chain = |depth: u32| {
        let ended = ended.clone();
        async move {
            // Each task spawns the next before it ends.
            let mut left = depth;
            loop {
                yield_now().await;
                if left == 0 {
                    break;
                }
                left -= 1;
                let ended = ended.clone();
                drop(spawn(async move {
                    yield_now().await;
                    ended.set(ended.get() + 1);
                }));
            }
            ended.set(ended.get() + 1);
        }
    };
    drop(ex.spawn(Q::A, spawn_chain(3)).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(ex.run_until(async {
        let (a, b) = (ex.drained(), ex.drained());
        futures::future::join(a, b).await;
    }));
    assert_eq!(ended.get(), 4);
    assert_eq!(ex.stats().live_tasks, 0);

    drop(ex.spawn(Q::A, spawn_chain(2)).unwrap());
    ex.block_on(ex.drained());
    assert_eq!(ended.get(), 7);
    // Nothing alive: ready at once.
    ex.block_on(ex.drained());
}
