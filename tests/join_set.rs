//! `JoinSet`: results in finish order, abort, detach, drop, shutdown,
//! panics, several queues, and the waker of `poll_join_next`.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use tourbillon::clock::ManualClock;
use tourbillon::error::SpawnError;
use tourbillon::task::{yield_now, JoinSet};
use tourbillon::{Builder, Executor};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    A,
    B,
}

fn executor() -> Executor<Q> {
    Builder::new()
        .queue(Q::A, 1)
        .queue(Q::B, 1)
        .clock(ManualClock::new())
        .build()
        .unwrap()
}

/// Yields `n` times, then returns `n`.
async fn yields(n: u32) -> u32 {
    for _ in 0..n {
        yield_now().await;
    }
    n
}

/// Counts its drops (a task's future dropped by an abort or at its end).
struct DropCount(Rc<Cell<u32>>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

/// A task that never finishes and counts the drop of its future.
fn forever(drops: &Rc<Cell<u32>>) -> impl Future<Output = u32> + 'static {
    let guard = DropCount(drops.clone());
    async move {
        let _guard = guard;
        std::future::pending::<u32>().await
    }
}

/// A waker that counts its wakes.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Results follow the order in which the tasks finish, not the order they
/// were added in.
#[test]
fn results_in_finish_order() {
    let ex = executor();
    let order = ex.block_on(async {
        let mut set = JoinSet::new();
        for n in [5, 0, 3, 1, 4, 2] {
            set.spawn(yields(n));
        }
        assert_eq!(set.len(), 6);
        let mut order = Vec::new();
        while let Some(res) = set.join_next().await {
            order.push(res.unwrap());
        }
        assert!(set.is_empty());
        order
    });
    assert_eq!(order, [0, 1, 2, 3, 4, 5]);
}

/// A task watched by the set is joined in finish order even when every
/// task finished before the first `join_next`: the set watches a task from
/// the moment it is inserted.
#[test]
fn finish_order_when_all_finished_before_the_first_join() {
    let ex = executor();
    let mut set = JoinSet::new();
    for n in [3, 0, 2, 1] {
        set.insert(ex.spawn(Q::A, yields(n)).unwrap());
    }
    ex.run_until_stalled();
    assert_eq!(set.len(), 4);
    let mut order = Vec::new();
    while let Some(res) = set.try_join_next() {
        order.push(res.unwrap());
    }
    assert_eq!(order, [0, 1, 2, 3]);
    assert!(set.is_empty());
    assert!(set.try_join_next().is_none());
}

/// `try_join_next` gives nothing while no task has finished, without
/// waiting.
#[test]
fn try_join_next_does_not_wait() {
    let ex = executor();
    let mut set = JoinSet::new();
    assert!(set.try_join_next().is_none());
    set.insert(ex.spawn(Q::A, yields(2)).unwrap());
    assert!(set.try_join_next().is_none());
    assert_eq!(set.len(), 1);
    ex.run_until_stalled();
    assert_eq!(set.try_join_next().unwrap().unwrap(), 2);
    assert!(set.try_join_next().is_none());
    assert!(set.is_empty());
}

#[test]
fn len_and_is_empty() {
    let ex = executor();
    ex.block_on(async {
        let mut set = JoinSet::<u32>::default();
        assert!(set.is_empty());
        assert_eq!(set.len(), 0);
        assert!(set.join_next().await.is_none());
        set.spawn(yields(1));
        set.insert(ex.spawn(Q::B, yields(0)).unwrap());
        assert_eq!(set.len(), 2);
        assert!(!set.is_empty());
        set.join_next().await.unwrap().unwrap();
        assert_eq!(set.len(), 1);
        set.join_next().await.unwrap().unwrap();
        assert_eq!(set.len(), 0);
        assert!(set.is_empty());
        assert!(set.join_next().await.is_none());
        assert_eq!(format!("{set:?}"), "JoinSet { len: 0 }");
    });
}

/// `abort_all` cancels every task still running; they stay in the set and
/// are joined with a cancelled error. A task that finished first keeps its
/// output.
#[test]
fn abort_all_gives_cancelled_errors() {
    let ex = executor();
    let drops = Rc::new(Cell::new(0));
    let mut set = JoinSet::new();
    set.insert(ex.spawn(Q::A, async { 7 }).unwrap());
    ex.run_until_stalled();
    for _ in 0..3 {
        set.insert(ex.spawn(Q::A, forever(&drops)).unwrap());
    }
    ex.run_until_stalled();
    set.abort_all();
    assert_eq!(set.len(), 4);
    let (ok, cancelled) = ex.block_on(async {
        let (mut ok, mut cancelled) = (Vec::new(), 0);
        while let Some(res) = set.join_next().await {
            match res {
                Ok(v) => ok.push(v),
                Err(e) => {
                    assert!(e.is_cancelled());
                    cancelled += 1;
                }
            }
        }
        (ok, cancelled)
    });
    assert_eq!(ok, [7]);
    assert_eq!(cancelled, 3);
    assert_eq!(drops.get(), 3);
    assert_eq!(ex.queue_stats(Q::A).unwrap().cancelled, 3);
}

/// Dropping the set aborts every task still in it.
#[test]
fn drop_aborts_the_tasks() {
    let ex = executor();
    let drops = Rc::new(Cell::new(0));
    let mut set = JoinSet::new();
    for q in [Q::A, Q::B, Q::A] {
        set.insert(ex.spawn(q, forever(&drops)).unwrap());
    }
    ex.run_until_stalled();
    assert_eq!(ex.stats().live_tasks, 3);
    drop(set);
    ex.run_until_stalled();
    assert_eq!(drops.get(), 3);
    assert_eq!(ex.stats().live_tasks, 0);
    let stats = ex.stats();
    let cancelled: u64 = stats.queues.iter().map(|q| q.cancelled).sum();
    assert_eq!(cancelled, 3);
}

/// `detach_all` empties the set; the tasks run on, and dropping the set
/// then aborts nothing.
#[test]
fn detach_all_lets_the_tasks_run() {
    let ex = executor();
    let finished = Rc::new(Cell::new(0));
    let mut set = JoinSet::new();
    for n in 0..3 {
        let finished = finished.clone();
        set.insert(
            ex.spawn(Q::A, async move {
                yields(n).await;
                finished.set(finished.get() + 1);
            })
            .unwrap(),
        );
    }
    set.detach_all();
    assert!(set.is_empty());
    drop(set);
    ex.run_until_stalled();
    assert_eq!(finished.get(), 3);
    assert_eq!(ex.queue_stats(Q::A).unwrap().completed, 3);
    assert_eq!(ex.queue_stats(Q::A).unwrap().cancelled, 0);
}

/// `shutdown` aborts every task and returns once all have ended.
#[test]
fn shutdown_aborts_and_waits() {
    let ex = executor();
    let drops = Rc::new(Cell::new(0));
    ex.block_on(async {
        let mut set = JoinSet::new();
        for _ in 0..4 {
            set.spawn(forever(&drops));
        }
        set.spawn(async { 1 });
        yield_now().await;
        set.shutdown().await;
        assert!(set.is_empty());
        assert_eq!(drops.get(), 4);
        // The set is usable again.
        set.spawn(async { 2 });
        assert_eq!(set.join_next().await.unwrap().unwrap(), 2);
    });
    assert_eq!(ex.stats().live_tasks, 0);
}

/// A task's panic is its result's `JoinError` (with `PanicPolicy::Catch`,
/// the default); the other tasks of the set are not affected.
#[test]
fn panics_are_join_errors() {
    let ex = executor();
    let (ok, panics) = ex.block_on(async {
        let mut set = JoinSet::new();
        set.spawn(async { 1 });
        set.spawn(async {
            yield_now().await;
            panic!("boom")
        });
        set.spawn(yields(3));
        let (mut ok, mut panics) = (Vec::new(), Vec::new());
        while let Some(res) = set.join_next().await {
            match res {
                Ok(v) => ok.push(v),
                Err(e) => {
                    assert!(e.is_panic());
                    let payload = e.into_panic();
                    panics.push(*payload.downcast::<&str>().unwrap());
                }
            }
        }
        (ok, panics)
    });
    assert_eq!(ok, [1, 3]);
    assert_eq!(panics, ["boom"]);
    assert_eq!(ex.queue_stats(Q::A).unwrap().panicked, 1);
}

/// Tasks of several queues in one set: `spawn_on` a chosen queue, `spawn`
/// onto the current task's queue, `insert` from any entry point.
#[test]
fn tasks_of_two_queues() {
    let ex = executor();
    let a = ex.queue(Q::A).unwrap();
    let b = ex.queue(Q::B).unwrap();
    let out = ex.block_on(async {
        let mut set = JoinSet::new();
        set.spawn_on(yields(2), &a).unwrap();
        set.spawn_on(yields(0), &b).unwrap();
        set.insert(ex.spawner().spawn(Q::B, yields(4)).unwrap());
        set.insert(ex.task(Q::A).name("named").spawn(yields(6)).unwrap());
        // From a task of queue B, `spawn` puts the task onto queue B.
        let inner = ex
            .spawn(Q::B, async {
                let mut set = JoinSet::new();
                set.spawn(yields(1));
                set.join_next().await.unwrap().unwrap()
            })
            .unwrap();
        set.insert(inner);
        let mut out = Vec::new();
        while let Some(res) = set.join_next().await {
            out.push(res.unwrap());
        }
        out.sort_unstable();
        out
    });
    assert_eq!(out, [0, 1, 2, 4, 6]);
    assert_eq!(ex.queue_stats(Q::A).unwrap().spawned, 2);
    assert_eq!(ex.queue_stats(Q::B).unwrap().spawned, 4);
}

/// `spawn_on` after the executor was dropped fails and leaves the set as
/// it was; the free `spawn`'s panic outside an executor is `JoinSet::spawn`'s
/// too.
#[test]
fn spawn_errors() {
    let ex = executor();
    let a = ex.queue(Q::A).unwrap();
    let mut set = JoinSet::new();
    set.spawn_on(yields(0), &a).unwrap();
    drop(ex);
    assert_eq!(
        set.spawn_on(yields(1), &a).unwrap_err(),
        SpawnError::Shutdown
    );
    assert_eq!(set.len(), 1);
    let res = set.try_join_next().unwrap();
    assert!(res.unwrap_err().is_cancelled());

    let panic = catch_unwind(AssertUnwindSafe(|| set.spawn(yields(1)))).unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.starts_with("tourbillon::spawn: spawn called outside"));
    assert!(set.is_empty());
}

/// After `poll_join_next` returns `Pending`, the waker it was given is
/// woken when a task finishes, also a task inserted after that call.
#[test]
fn waker_of_the_latest_poll_stays_registered() {
    let ex = executor();
    let drops = Rc::new(Cell::new(0));
    let mut set = JoinSet::new();
    set.insert(ex.spawn(Q::A, forever(&drops)).unwrap());
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let waker = Waker::from(counter.clone());
    let mut cx = Context::from_waker(&waker);
    assert!(set.poll_join_next(&mut cx).is_pending());
    set.insert(ex.spawn(Q::B, yields(1)).unwrap());
    assert_eq!(counter.0.load(Ordering::SeqCst), 0);
    ex.run_until_stalled();
    assert!(counter.0.load(Ordering::SeqCst) >= 1);
    match set.poll_join_next(&mut cx) {
        Poll::Ready(Some(Ok(1))) => {}
        other => panic!("expected the finished task, got {other:?}"),
    }
    assert_eq!(set.len(), 1);
}

/// `join_next` is cancel safe: a `join_next` future dropped before it
/// completes takes no task out of the set.
#[test]
fn join_next_is_cancel_safe() {
    let ex = executor();
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut set = JoinSet::new();
    set.insert(ex.spawn(Q::A, yields(1)).unwrap());
    {
        let mut fut = std::pin::pin!(set.join_next());
        let mut cx = Context::from_waker(Waker::noop());
        assert!(Pin::as_mut(&mut fut).poll(&mut cx).is_pending());
    }
    ex.run_until_stalled();
    assert_eq!(set.len(), 1);
    ex.block_on(async {
        while let Some(res) = set.join_next().await {
            log.borrow_mut().push(res.unwrap());
        }
    });
    assert_eq!(*log.borrow(), [1]);
}

/// `join_all`, as tokio's: the outputs of every task, in the order the
/// tasks finished (not the order they were spawned in).
#[test]
fn join_all_gives_every_output_in_finish_order() {
    let ex = executor();
    let all = ex.block_on(async {
        let mut set = JoinSet::new();
        for n in [3, 1, 2, 0] {
            set.spawn(yields(n));
        }
        set.join_all().await
    });
    assert_eq!(all, [0, 1, 2, 3]);
    assert_eq!(ex.block_on(JoinSet::<u32>::new().join_all()), []);
}

/// `join_all` of a set with a panicked task panics with the task's
/// payload, and the tasks still in the set are aborted (the set is
/// dropped by the unwind), as tokio's.
#[test]
fn join_all_resumes_a_tasks_panic_and_aborts_the_rest() {
    let ex = executor();
    let drops = Rc::new(Cell::new(0));
    let mut set = JoinSet::new();
    set.spawn_on(forever(&drops), &ex.queue(Q::A).unwrap())
        .unwrap();
    set.spawn_on(
        async {
            yield_now().await;
            panic!("task panic")
        },
        &ex.queue(Q::B).unwrap(),
    )
    .unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| ex.block_on(set.join_all()))).unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"task panic"));
    assert_eq!(ex.run_until_stalled(), 0);
    assert_eq!(drops.get(), 1);
}

/// `join_all` of a set with an aborted task panics with the cancellation's
/// message, as tokio's.
#[test]
fn join_all_panics_on_a_cancelled_task() {
    let ex = executor();
    let drops = Rc::new(Cell::new(0));
    let payload = catch_unwind(AssertUnwindSafe(|| {
        ex.block_on(async {
            let mut set = JoinSet::new();
            set.spawn(forever(&drops)).abort();
            set.join_all().await
        })
    }))
    .unwrap_err();
    let message = payload.downcast_ref::<String>().unwrap();
    assert!(message.contains("cancelled"), "{message}");
    assert_eq!(drops.get(), 1);
}

/// A set collected from futures, and extended with more, as tokio's
/// `FromIterator` and `Extend`: each future is spawned as by `spawn` (from
/// the main future, onto the first declared queue).
#[test]
fn a_set_is_collected_from_futures_and_extended_with_more() {
    let ex = executor();
    let all = ex.block_on(async {
        let mut set: JoinSet<u32> = [2, 0].into_iter().map(yields).collect();
        assert_eq!(set.len(), 2);
        set.extend([1, 3].map(yields));
        assert_eq!(set.len(), 4);
        set.join_all().await
    });
    assert_eq!(all, [0, 1, 2, 3]);
    assert_eq!(ex.queue_stats(Q::A).unwrap().completed, 4);
    assert_eq!(ex.queue_stats(Q::B).unwrap().spawned, 0);
}

/// Collecting futures into a set outside a running executor panics, as
/// tokio's does outside a runtime.
#[test]
fn collecting_a_set_outside_an_executor_panics() {
    let r = catch_unwind(|| {
        let _set: JoinSet<u32> = [async { 1 }].into_iter().collect();
    });
    assert!(r.is_err());
}
