//! The task waker: wake merging, stale and orphaned wakers, `will_wake`,
//! and wakes from other threads (unparking `block_on`, no lost wake-up).
//! Threads synchronise through channels and barriers, never sleeps.

#![allow(
    clippy::waker_clone_wake,
    reason = "`clone().wake()` deliberately exercises the consuming wake of an owned waker"
)]

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::task::{Poll, Waker};
use std::thread;

use tourbillon::{Builder, Executor};

fn one_queue() -> Executor<&'static str> {
    Builder::new().queue("q", 1).build().unwrap()
}

/// A task body that never completes on its own: counts its polls and keeps
/// a clone of its latest waker; completes once `done` is set.
#[derive(Default)]
struct Probe {
    polls: Cell<usize>,
    waker: RefCell<Option<Waker>>,
    done: Cell<bool>,
}

impl Probe {
    fn new() -> Rc<Probe> {
        Rc::default()
    }

    fn run(self: &Rc<Self>) -> impl Future<Output = ()> + 'static {
        let p = self.clone();
        poll_fn(move |cx| {
            p.polls.set(p.polls.get() + 1);
            if p.done.get() {
                return Poll::Ready(());
            }
            *p.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
    }

    fn waker(&self) -> Waker {
        self.waker.borrow().clone().expect("polled once")
    }
}

#[test]
fn several_wakes_before_the_next_poll_enqueue_the_task_once() {
    let ex = one_queue();
    let p = Probe::new();
    let h = ex.spawn("q", p.run()).unwrap();
    assert_eq!(ex.run_until_stalled(), 1);

    // Between runs, on the executor's thread (through the inbox).
    let w = p.waker();
    for _ in 0..5 {
        w.wake_by_ref();
    }
    w.clone().wake();
    assert_eq!(ex.run_until_stalled(), 1);
    assert_eq!(p.polls.get(), 2);

    // From another thread while the executor is not running.
    let w = p.waker();
    thread::spawn(move || {
        for _ in 0..5 {
            w.wake_by_ref();
        }
        w.wake();
    })
    .join()
    .unwrap();
    assert_eq!(ex.run_until_stalled(), 1);
    assert_eq!(p.polls.get(), 3);

    // During a run, from the main future, mixed with a foreign wake that
    // is still in the inbox. The marker task is spawned after the wakes, so
    // it runs after the probe's poll (FIFO) whatever the turns: `block_on`
    // returns once the marker is done, and a turn may end after any poll
    // on the real clock (the host-yield interval; under valgrind a poll
    // can take longer than the interval).
    let w = p.waker();
    let w2 = w.clone();
    thread::spawn(move || w2.wake()).join().unwrap();
    ex.block_on(async {
        for _ in 0..5 {
            w.wake_by_ref();
        }
        ex.spawn("q", async {}).unwrap().await.unwrap();
    });
    assert_eq!(p.polls.get(), 4);
    assert_eq!(ex.run_until_stalled(), 0);

    p.done.set(true);
    p.waker().wake();
    ex.block_on(h).unwrap();
    assert_eq!(p.polls.get(), 5);
    assert_eq!(ex.stats().polls, 6, "5 probe polls and the marker");
}

#[test]
fn a_waker_kept_after_its_task_finished_is_harmless() {
    let ex = one_queue();
    let kept: Rc<RefCell<Option<Waker>>> = Rc::default();
    let h = {
        let kept = kept.clone();
        ex.spawn(
            "q",
            poll_fn(move |cx| {
                *kept.borrow_mut() = Some(cx.waker().clone());
                Poll::Ready(5)
            }),
        )
        .unwrap()
    };
    assert_eq!(ex.block_on(h).unwrap(), 5);
    assert_eq!(ex.stats().live_tasks, 0);
    let polls_before = ex.stats().polls;

    let w = kept.take().unwrap();
    // Outside a run.
    w.wake_by_ref();
    let c = w.clone();
    assert!(c.will_wake(&w));
    c.wake();
    assert_eq!(ex.run_until_stalled(), 0);
    // During a run.
    let marker = ex.spawn("q", async {}).unwrap();
    ex.block_on(async {
        w.wake_by_ref();
        w.clone().wake();
        marker.await.unwrap();
    });
    // From another thread, which also drops the last reference.
    thread::spawn(move || {
        w.wake_by_ref();
        drop(w.clone());
        w.wake();
    })
    .join()
    .unwrap();
    assert_eq!(ex.run_until_stalled(), 0);
    assert_eq!(ex.stats().polls, polls_before + 1, "only the marker ran");
    assert_eq!(ex.stats().live_tasks, 0);
}

#[test]
fn a_stale_waker_does_not_wake_the_new_occupant_of_its_slot() {
    let ex = one_queue();
    let stale: Rc<RefCell<Option<Waker>>> = Rc::default();
    let old = {
        let stale = stale.clone();
        ex.spawn(
            "q",
            poll_fn(move |cx| {
                *stale.borrow_mut() = Some(cx.waker().clone());
                Poll::Ready(())
            }),
        )
        .unwrap()
    };
    let old_id = old.key();
    ex.block_on(old).unwrap(); // joined: the slot is free

    let p = Probe::new();
    let new = ex.spawn("q", p.run()).unwrap();
    let new_id = new.key();
    assert_eq!(new_id.index(), old_id.index(), "the slot was reused");
    assert_ne!(new_id.generation(), old_id.generation());
    assert_ne!(new_id, old_id);
    assert_ne!(new_id.as_u64(), old_id.as_u64());
    assert_eq!(ex.run_until_stalled(), 1);

    let w = stale.take().unwrap();
    assert!(!w.will_wake(&p.waker()), "different tasks");
    // Between runs.
    w.wake_by_ref();
    assert_eq!(ex.run_until_stalled(), 0);
    // During a run.
    let marker = ex.spawn("q", async {}).unwrap();
    ex.block_on(async {
        w.wake_by_ref();
        marker.await.unwrap();
    });
    // From another thread.
    let w2 = w.clone();
    thread::spawn(move || w2.wake()).join().unwrap();
    assert_eq!(ex.run_until_stalled(), 0);
    assert_eq!(p.polls.get(), 1, "the new task was never woken");

    // Its own waker still works.
    p.done.set(true);
    p.waker().wake();
    ex.block_on(new).unwrap();
    assert_eq!(p.polls.get(), 2);
    drop(w);
}

#[test]
fn a_waker_that_outlives_its_executor_is_harmless() {
    struct DropThread(Rc<Cell<Option<thread::ThreadId>>>);
    impl Drop for DropThread {
        fn drop(&mut self) {
            self.0.set(Some(thread::current().id()));
        }
    }
    let ex = one_queue();
    let p = Probe::new();
    let dropped_on = Rc::new(Cell::new(None));
    let h = {
        let (run, d) = (p.run(), DropThread(dropped_on.clone()));
        ex.spawn("q", async move {
            let _d = d;
            run.await;
        })
        .unwrap()
    };
    ex.run_until_stalled();
    let w = p.waker();
    p.waker.borrow_mut().take();
    drop(ex);
    assert_eq!(
        dropped_on.get(),
        Some(thread::current().id()),
        "the future was dropped with the executor, on its thread"
    );

    // From this thread.
    w.wake_by_ref();
    let c = w.clone();
    assert!(c.will_wake(&w));
    c.wake();
    // From other threads; the last one drops the last reference.
    let w2 = w.clone();
    thread::spawn(move || {
        w2.wake_by_ref();
        w2.clone().wake();
    })
    .join()
    .unwrap();
    let (tx, rx) = mpsc::channel::<Waker>();
    let t = thread::spawn(move || {
        let w = rx.recv().unwrap();
        w.wake_by_ref();
        w.wake();
    });
    tx.send(w).unwrap();
    t.join().unwrap();
    assert!(futures::executor::block_on(h).unwrap_err().is_cancelled());
    assert_eq!(p.polls.get(), 1);
}

#[test]
fn will_wake_recognises_wakers_of_the_same_task() {
    let ex = one_queue();
    let checks: Rc<RefCell<Vec<bool>>> = Rc::default();
    let first: Rc<RefCell<Option<Waker>>> = Rc::default();
    let a = {
        let (checks, first) = (checks.clone(), first.clone());
        let mut polls = 0;
        ex.spawn(
            "q",
            poll_fn(move |cx| {
                polls += 1;
                if polls == 1 {
                    *first.borrow_mut() = Some(cx.waker().clone());
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                let w1 = first.borrow().clone().unwrap();
                let w2 = cx.waker().clone();
                let mut c = checks.borrow_mut();
                c.push(cx.waker().will_wake(&w1)); // the poll's waker vs a clone from the previous poll
                c.push(w1.will_wake(&w2)); // two clones
                c.push(w2.will_wake(cx.waker()));
                Poll::Ready(())
            }),
        )
        .unwrap()
    };
    let other: Rc<RefCell<Option<Waker>>> = Rc::default();
    let b = {
        let other = other.clone();
        ex.spawn(
            "q",
            poll_fn(move |cx| {
                *other.borrow_mut() = Some(cx.waker().clone());
                Poll::Ready(())
            }),
        )
        .unwrap()
    };
    ex.block_on(async {
        a.await.unwrap();
        b.await.unwrap();
    });
    assert_eq!(*checks.borrow(), [true, true, true]);
    let (wa, wb) = (first.take().unwrap(), other.take().unwrap());
    assert!(!wa.will_wake(&wb), "wakers of different tasks differ");
    assert!(wa.will_wake(&wa.clone()));
}

#[test]
fn a_wake_from_another_thread_unparks_block_on() {
    // Repeated: the wake races with the executor going to sleep, and both
    // orders must work.
    for round in 0..100u32 {
        let ex = one_queue();
        let ready = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Waker>();
        let waker_thread = {
            let ready = ready.clone();
            thread::spawn(move || {
                // Wait until the task has registered its waker.
                let w = rx.recv().unwrap();
                ready.store(true, Ordering::Release);
                w.wake();
            })
        };
        let polls = Rc::new(Cell::new(0));
        let h = {
            let polls = polls.clone();
            ex.spawn(
                "q",
                poll_fn(move |cx| {
                    polls.set(polls.get() + 1);
                    if ready.load(Ordering::Acquire) {
                        Poll::Ready(round)
                    } else {
                        if polls.get() == 1 {
                            tx.send(cx.waker().clone()).unwrap();
                        }
                        Poll::Pending
                    }
                }),
            )
            .unwrap()
        };
        // Nothing else is runnable: block_on parks until the thread's wake.
        assert_eq!(ex.block_on(h).unwrap(), round);
        waker_thread.join().unwrap();
        assert_eq!(polls.get(), 2, "one poll to register, one after the wake");
    }
}

#[test]
fn a_wake_of_the_main_future_from_another_thread_unparks_block_on() {
    for round in 0..100u32 {
        let ex = one_queue();
        let ready = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<Waker>();
        let waker_thread = {
            let ready = ready.clone();
            thread::spawn(move || {
                let w = rx.recv().unwrap();
                ready.store(true, Ordering::Release);
                w.wake();
            })
        };
        let mut sent = false;
        let out = ex.block_on(poll_fn(|cx| {
            if ready.load(Ordering::Acquire) {
                return Poll::Ready(round);
            }
            if !sent {
                sent = true;
                tx.send(cx.waker().clone()).unwrap();
            }
            Poll::Pending
        }));
        assert_eq!(out, round);
        waker_thread.join().unwrap();
    }
}

#[test]
fn concurrent_wakes_from_four_threads_lose_no_wake_up() {
    const THREADS: usize = 4;
    const WAKES: usize = 1000;
    for _round in 0..5 {
        let ex = one_queue();
        let produced = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(Barrier::new(THREADS));
        let mut senders = Vec::new();
        let mut threads = Vec::new();
        for t in 0..THREADS {
            let (tx, rx) = mpsc::channel::<Waker>();
            senders.push(tx);
            let (produced, barrier) = (produced.clone(), barrier.clone());
            threads.push(thread::spawn(move || {
                let w = rx.recv().unwrap();
                barrier.wait();
                for i in 0..WAKES {
                    produced.fetch_add(1, Ordering::Release);
                    if (i + t) % 2 == 0 {
                        w.wake_by_ref();
                    } else {
                        w.clone().wake();
                    }
                }
            }));
        }
        let polls = Rc::new(Cell::new(0usize));
        let seen = Rc::new(Cell::new(0usize));
        let h = {
            let (polls, seen, produced) = (polls.clone(), seen.clone(), produced.clone());
            ex.spawn(
                "q",
                poll_fn(move |cx| {
                    polls.set(polls.get() + 1);
                    // Re-arms on every poll: done once every wake's
                    // increment has been seen. Read before the wakers are
                    // handed out, so the first poll always sees 0.
                    let now = produced.load(Ordering::Acquire);
                    seen.set(now);
                    if polls.get() == 1 {
                        assert_eq!(now, 0);
                        for tx in senders.drain(..) {
                            tx.send(cx.waker().clone()).unwrap();
                        }
                    }
                    if now == THREADS * WAKES {
                        Poll::Ready(now)
                    } else {
                        Poll::Pending
                    }
                }),
            )
            .unwrap()
        };
        assert_eq!(ex.block_on(h).unwrap(), THREADS * WAKES);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(seen.get(), THREADS * WAKES);
        let n = polls.get();
        assert!(
            (2..=THREADS * WAKES + 1).contains(&n),
            "polled {n} times: at most once per wake, plus the first poll"
        );
        assert_eq!(ex.stats().live_tasks, 0);
        assert_eq!(ex.run_until_stalled(), 0, "no stray wake left behind");
    }
}

/// Two tasks hand each other their wakers through slots, as a channel's
/// sender and receiver do: each takes the other's waker and wakes it
/// (consumed), then stores a clone of its own. On the executor's thread
/// the consumed waker's reference stays counted for the next clone (the
/// task's credit); a clone kept outside, one left in a slot when the task
/// ends, and one left when the executor is dropped with a task unfinished
/// all stay usable and are freed once (valgrind memcheck runs this suite).
#[test]
fn wakers_handed_back_and_forth_on_the_executor_thread_are_counted_exactly() {
    const TRIPS: usize = 1_000;
    type Slot = Rc<RefCell<Option<Waker>>>;
    fn side(
        mine: Slot,
        theirs: Slot,
        turns: Rc<Cell<usize>>,
        last: usize,
    ) -> impl Future<Output = usize> {
        poll_fn(move |cx| {
            if let Some(w) = theirs.borrow_mut().take() {
                w.wake();
            }
            let n = turns.get() + 1;
            turns.set(n);
            if n >= last {
                return Poll::Ready(n);
            }
            *mine.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
    }
    let ex = one_queue();
    let (a_slot, b_slot): (Slot, Slot) = Default::default();
    let turns = Rc::new(Cell::new(0));
    // A ends first, leaving its clone in B's reach (B takes and wakes it
    // after A ended: a wake of a finished task, harmless); B never ends.
    let a = ex
        .spawn(
            "q",
            side(a_slot.clone(), b_slot.clone(), turns.clone(), 2 * TRIPS),
        )
        .unwrap();
    let b = ex
        .spawn(
            "q",
            side(b_slot.clone(), a_slot.clone(), turns.clone(), usize::MAX),
        )
        .unwrap();
    assert!(ex.block_on(a).unwrap() >= 2 * TRIPS);
    // B's poll after A's last one, if it has not run yet, takes and wakes
    // the clone A left in its slot: a wake of a finished task.
    assert!(ex.run_until_stalled() <= 1);
    assert!(a_slot.borrow().is_none());
    let b_waker = b_slot.borrow().clone().expect("B waits");
    assert!(!b.is_finished());
    // A wake of B's kept clone from another thread goes through the inbox.
    let before = turns.get();
    let remote = b_waker.clone();
    thread::spawn(move || remote.wake()).join().unwrap();
    assert_eq!(ex.run_until_stalled(), 1);
    assert_eq!(turns.get(), before + 1);
    // Dropped with B unfinished: the slot's clone and the kept one outlive
    // the executor.
    drop(b);
    drop(ex);
    b_waker.wake_by_ref();
    drop(b_slot.take());
    drop(b_waker);
}

/// A host waker that counts its wakes.
struct HostWakes(AtomicUsize);

impl std::task::Wake for HostWakes {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn host_waker() -> (Arc<HostWakes>, Waker) {
    let wakes = Arc::new(HostWakes(AtomicUsize::new(0)));
    (wakes.clone(), Waker::from(wakes))
}

/// One queue `"q"` on a virtual clock that stays still, so that a turn
/// never ends for time (a slow run, as under valgrind, would otherwise end
/// a turn busy and have its driver wake its host once more).
fn one_queue_still_clock() -> Executor<&'static str> {
    Builder::new()
        .queue("q", 1)
        .clock(tourbillon::clock::ManualClock::new())
        .build()
        .unwrap()
}

/// A task that waits until `ready` is set, keeping its latest waker in
/// `slot` (a socket that the host's reactor reports ready).
fn wait_for_host(
    slot: Rc<RefCell<Option<Waker>>>,
    ready: Rc<Cell<bool>>,
) -> impl Future<Output = ()> {
    poll_fn(move |cx| {
        if ready.get() {
            return Poll::Ready(());
        }
        *slot.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    })
}

#[test]
fn a_wake_from_the_host_between_turns_counts_its_wait_from_the_wake() {
    // The host's reactor wakes the task during the host's own turn, on the
    // executor's thread, while the nested executor waits for its next
    // poll: the task's wake-to-poll latency runs from that wake, through
    // the rest of the host's turn (300 us here), to the poll.
    let clock = tourbillon::clock::ManualClock::new();
    let ex = Builder::new()
        .queue("q", 1)
        .clock(clock.clone())
        .latency_histograms(true)
        .build()
        .unwrap();
    let (slot, ready) = (Rc::new(RefCell::new(None)), Rc::new(Cell::new(false)));
    let task = ex
        .spawn("q", wait_for_host(slot.clone(), ready.clone()))
        .unwrap();
    let (wakes, waker) = host_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut host = std::pin::pin!(ex.run_until(std::future::pending::<()>()));
    assert!(host.as_mut().poll(&mut cx).is_pending());
    let stats = ex.queue_stats("q").unwrap();
    assert_eq!(stats.wake_latency.count(), 1);
    assert_eq!(stats.wake_latency.max(), std::time::Duration::ZERO);
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);

    ready.set(true);
    slot.borrow_mut().take().unwrap().wake();
    // The idle queue became runnable: the host is woken to poll again.
    assert_eq!(wakes.0.load(Ordering::SeqCst), 1);
    clock.advance(std::time::Duration::from_micros(300));
    assert!(host.as_mut().poll(&mut cx).is_pending());
    assert!(task.is_finished());
    let stats = ex.queue_stats("q").unwrap();
    assert_eq!(stats.wake_latency.count(), 2);
    assert_eq!(
        stats.wake_latency.max(),
        std::time::Duration::from_micros(300)
    );
}

#[test]
fn host_wakes_reach_each_of_two_nested_executors_waiting_on_one_thread() {
    // Two executors nested in one host, both waiting: the wake of a task of
    // the one that waited first (not the thread's latest) goes through its
    // inbox; either way each host is woken once and its task runs at its
    // executor's next turn.
    let (a, b) = (one_queue_still_clock(), one_queue_still_clock());
    let (slot_a, ready_a) = (Rc::new(RefCell::new(None)), Rc::new(Cell::new(false)));
    let (slot_b, ready_b) = (Rc::new(RefCell::new(None)), Rc::new(Cell::new(false)));
    let task_a = a
        .spawn("q", wait_for_host(slot_a.clone(), ready_a.clone()))
        .unwrap();
    let task_b = b
        .spawn("q", wait_for_host(slot_b.clone(), ready_b.clone()))
        .unwrap();
    let (wakes_a, waker_a) = host_waker();
    let (wakes_b, waker_b) = host_waker();
    let mut host_a = std::pin::pin!(a.run_until(std::future::pending::<()>()));
    let mut host_b = std::pin::pin!(b.run_until(std::future::pending::<()>()));
    let mut cx_a = std::task::Context::from_waker(&waker_a);
    let mut cx_b = std::task::Context::from_waker(&waker_b);
    assert!(host_a.as_mut().poll(&mut cx_a).is_pending());
    assert!(host_b.as_mut().poll(&mut cx_b).is_pending());
    for (slot, ready) in [(&slot_a, &ready_a), (&slot_b, &ready_b)] {
        ready.set(true);
        slot.borrow_mut().take().unwrap().wake();
    }
    assert_eq!(wakes_a.0.load(Ordering::SeqCst), 1);
    assert_eq!(wakes_b.0.load(Ordering::SeqCst), 1);
    assert!(!task_a.is_finished() && !task_b.is_finished());
    assert!(host_b.as_mut().poll(&mut cx_b).is_pending());
    assert!(host_a.as_mut().poll(&mut cx_a).is_pending());
    assert!(task_a.is_finished() && task_b.is_finished());
}

#[test]
fn a_host_wake_after_run_until_ended_waits_for_the_next_driver() {
    // Once its `run_until` future is dropped the executor is no longer the
    // thread's waiting one: a later wake on the thread is kept (in the
    // inbox) for whichever driver comes next, here `block_on`.
    let ex = one_queue_still_clock();
    let (slot, ready) = (Rc::new(RefCell::new(None)), Rc::new(Cell::new(false)));
    let task = ex
        .spawn("q", wait_for_host(slot.clone(), ready.clone()))
        .unwrap();
    let (wakes, waker) = host_waker();
    {
        let mut host = std::pin::pin!(ex.run_until(std::future::pending::<()>()));
        assert!(host
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker))
            .is_pending());
    }
    ready.set(true);
    slot.borrow_mut().take().unwrap().wake();
    // Its host is gone: nobody is woken.
    assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    assert!(!task.is_finished());
    ex.block_on(task).unwrap();
}
