//! The bounded remote submission path: `BoundedRemoteSpawner`'s capacity
//! (tasks submitted and not yet first-polled), `try_spawn`'s typed errors
//! that hand the future back, the awaitable `spawn` that waits for room
//! (woken once half the room is free, in line order), and shutdown while
//! senders wait. The executor is driven with `run_until_stalled` and the
//! senders' futures are polled by hand with counting wakers, or threads
//! synchronise through channels and joins only (no sleeps).

use std::future::Future;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread;

use tourbillon::error::SpawnError;
use tourbillon::remote::{BoundedRemoteSpawner, RemoteJoinHandle, SpawnWait, TrySpawnError};
use tourbillon::{Builder, Executor};

fn executor() -> Executor<u8> {
    Builder::new().queue(0u8, 1).build().unwrap()
}

fn cap(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

/// Counts its drops (thread-safe: refused futures are dropped anywhere).
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Wakes {
    fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A sender's `spawn` future polled by hand with a counting waker.
struct Sender<'a, F> {
    fut: SpawnWait<'a, F>,
    wakes: Arc<Wakes>,
}

impl<'a, F> Sender<'a, F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn new(tx: &'a BoundedRemoteSpawner<u8>, future: F) -> Self {
        Sender {
            fut: tx.spawn(0, future),
            wakes: Arc::default(),
        }
    }

    fn poll(&mut self) -> Poll<Result<RemoteJoinHandle<F::Output>, SpawnError>> {
        let waker = Waker::from(self.wakes.clone());
        Pin::new(&mut self.fut).poll(&mut Context::from_waker(&waker))
    }
}

#[test]
fn bounded_spawner_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<BoundedRemoteSpawner<u8>>();
    send_sync::<SpawnWait<'static, std::future::Ready<u8>>>();
}

// `try_spawn` fills the capacity, then reports Full and hands the future
// back unpolled; the room comes back when the executor first-polls the
// tasks.
#[test]
fn try_spawn_reports_full_and_hands_the_future_back() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(2));
    assert_eq!((tx.capacity(), tx.max_capacity()), (2, 2));
    let a = tx.try_spawn(0, async { 1 }).unwrap();
    let b = tx.try_spawn(0, async { 2 }).unwrap();
    assert_eq!(tx.capacity(), 0);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = Counted(drops.clone());
    let err = tx
        .try_spawn(0, async move {
            let _d = d;
            3
        })
        .unwrap_err();
    assert!(err.is_full() && !err.is_shutdown());
    assert_eq!(format!("{err:?}"), "Full(..)");
    let refused = err.into_inner();
    assert_eq!(drops.load(Ordering::SeqCst), 0, "handed back, not dropped");
    assert_eq!(ex.run_until_stalled(), 2);
    assert_eq!(tx.capacity(), 2);
    // The future handed back is whole: spawned now, it runs.
    let c = tx.try_spawn(0, refused).unwrap();
    ex.run_until_stalled();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let sum = ex.block_on(async { a.await.unwrap() + b.await.unwrap() + c.await.unwrap() });
    assert_eq!(sum, 6);
}

// The largest capacity is kept as asked: `max_capacity` is what the
// spawner was made with, and `capacity` the room left, that minus the tasks
// not yet first-polled.
#[test]
fn max_capacity_is_the_capacity_asked_for_even_the_largest() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(NonZeroUsize::MAX);
    assert_eq!((tx.capacity(), tx.max_capacity()), (usize::MAX, usize::MAX));
    let a = tx.try_spawn(0, async { 1 }).unwrap();
    let b = tx.try_spawn(0, async { 2 }).unwrap();
    assert_eq!(
        (tx.capacity(), tx.max_capacity()),
        (usize::MAX - 2, usize::MAX)
    );
    assert_eq!(ex.run_until_stalled(), 2);
    assert_eq!(tx.capacity(), usize::MAX);
    assert_eq!(
        ex.block_on(async { a.await.unwrap() + b.await.unwrap() }),
        3
    );
}

// The capacity counts tasks not yet first-polled: a task that is pending
// (polled once, not finished) no longer holds room.
#[test]
fn capacity_is_released_at_the_first_poll_not_at_completion() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(1));
    let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
    let long = tx
        .try_spawn(0, async move {
            let _ = stop_rx.await;
            7
        })
        .unwrap();
    assert!(tx.try_spawn(0, async { 0 }).unwrap_err().is_full());
    ex.run_until_stalled();
    assert!(!long.is_finished());
    assert_eq!(tx.capacity(), 1);
    let next = tx.try_spawn(0, async { 8 }).unwrap();
    stop_tx.send(()).unwrap();
    ex.run_until_stalled();
    assert_eq!(
        ex.block_on(async { long.await.unwrap() + next.await.unwrap() }),
        15
    );
}

// A sender that finds no room waits (Pending) and is woken once half the
// capacity is free: with capacity 4, by the second of four first polls,
// and only once.
#[test]
fn spawn_waits_and_is_woken_once_half_the_room_is_free() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(4));
    let held: Vec<_> = (0..4)
        .map(|i| tx.try_spawn(0, async move { i }).unwrap())
        .collect();
    let mut s = Sender::new(&tx, async { 10 });
    assert!(s.poll().is_pending());
    assert_eq!(tx.capacity(), 0, "a sender waits");
    assert_eq!(ex.run_until_stalled(), 4);
    assert_eq!(s.wakes.get(), 1);
    let Poll::Ready(Ok(h)) = s.poll() else {
        panic!("a woken sender finds room");
    };
    ex.run_until_stalled();
    let total = ex.block_on(async move {
        let mut sum = h.await.unwrap();
        for h in held {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(total, 16);
}

// Waiting senders get room in the order they started waiting; a new
// `try_spawn` does not jump the line while a sender waits or was woken.
#[test]
fn waiting_senders_are_served_in_order_and_not_overtaken() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(1));
    let first = tx.try_spawn(0, async { 0 }).unwrap();
    let mut s1 = Sender::new(&tx, async { 1 });
    let mut s2 = Sender::new(&tx, async { 2 });
    assert!(s1.poll().is_pending());
    assert!(s2.poll().is_pending());
    ex.run_until_stalled();
    assert_eq!((s1.wakes.get(), s2.wakes.get()), (1, 0));
    assert!(s2.poll().is_pending(), "s2 is not first in line");
    assert!(tx.try_spawn(0, async { 9 }).unwrap_err().is_full());
    let Poll::Ready(Ok(h1)) = s1.poll() else {
        panic!("s1 was woken for room");
    };
    ex.run_until_stalled();
    assert_eq!(s2.wakes.get(), 1);
    let Poll::Ready(Ok(h2)) = s2.poll() else {
        panic!("s2 was woken for room");
    };
    ex.run_until_stalled();
    let got = ex.block_on(async { (first.await, h1.await, h2.await) });
    assert_eq!((got.0.unwrap(), got.1.unwrap(), got.2.unwrap()), (0, 1, 2));
}

// A sender woken for room and then dropped passes the wake on; a waiting
// sender that is dropped leaves the line; both drop their futures once.
#[test]
fn dropped_senders_pass_the_wake_on_and_drop_their_futures() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(1));
    let drops = Arc::new(AtomicUsize::new(0));
    let _first = tx.try_spawn(0, async {}).unwrap();
    let d1 = Counted(drops.clone());
    let mut s1 = Sender::new(&tx, async move { drop(d1) });
    let d2 = Counted(drops.clone());
    let mut s2 = Sender::new(&tx, async move { drop(d2) });
    let d3 = Counted(drops.clone());
    let mut s3 = Sender::new(&tx, async move { drop(d3) });
    assert!(s1.poll().is_pending() && s2.poll().is_pending() && s3.poll().is_pending());
    drop(s2); // waiting: leaves the line
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    ex.run_until_stalled();
    assert_eq!(s1.wakes.get(), 1);
    drop(s1); // woken: the wake goes to s3
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert_eq!(s3.wakes.get(), 1);
    assert!(s3.poll().is_ready());
    ex.run_until_stalled();
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    assert_eq!(tx.capacity(), 1);
}

// Dropping the executor while a sender waits: the tasks that held the room
// are dropped unpolled (each future once), the sender is woken and reads
// Shutdown (its future dropped), and later spawns are refused with the
// future handed back.
#[test]
fn executor_drop_wakes_waiting_senders_with_shutdown() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(1));
    let drops = Arc::new(AtomicUsize::new(0));
    let d = Counted(drops.clone());
    let held = tx.try_spawn(0, async move { drop(d) }).unwrap();
    let d = Counted(drops.clone());
    let mut s = Sender::new(&tx, async move { drop(d) });
    assert!(s.poll().is_pending());
    drop(ex);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the held task dropped");
    assert_eq!(s.wakes.get(), 1);
    assert!(matches!(s.poll(), Poll::Ready(Err(SpawnError::Shutdown))));
    assert_eq!(
        drops.load(Ordering::SeqCst),
        2,
        "the sender's future dropped"
    );
    assert!(futures::executor::block_on(held)
        .unwrap_err()
        .is_cancelled());
    let d = Counted(drops.clone());
    let err = tx.try_spawn(0, async move { drop(d) }).unwrap_err();
    assert!(err.is_shutdown());
    assert_eq!(
        err.to_string(),
        "the executor is shut down: it accepts no new task"
    );
    drop(err);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    let r = futures::executor::block_on(tx.spawn(0, async {}));
    assert_eq!(r.unwrap_err(), SpawnError::Shutdown);
}

// The same across threads: a thread blocks in `spawn(..).await`
// (futures' block_on) on a full spawner; it tells the test once it waits,
// then the executor is dropped; the thread's spawn returns Shutdown.
#[test]
fn a_sender_blocked_on_another_thread_gets_shutdown() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(1));
    let _held = tx.try_spawn(0, async {}).unwrap();
    let (waiting_tx, waiting_rx) = mpsc::channel();
    let t = thread::spawn(move || {
        let mut fut = tx.spawn(0, async {});
        futures::executor::block_on(std::future::poll_fn(|cx| {
            let r = Pin::new(&mut fut).poll(cx);
            if r.is_pending() {
                let _ = waiting_tx.send(());
            }
            r
        }))
        .map(drop)
    });
    waiting_rx.recv().unwrap();
    drop(ex);
    assert_eq!(t.join().unwrap(), Err(SpawnError::Shutdown));
}

#[test]
fn unknown_queue_errors_name_the_key_and_hand_the_future_back() {
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(1));
    let err = tx.try_spawn(9, async { 5 }).unwrap_err();
    assert!(matches!(&err, TrySpawnError::UnknownQueue(u, _) if u.key() == "9"));
    assert_eq!(
        err.to_string(),
        "no queue with key 9 was declared in the builder"
    );
    let fut = err.into_inner();
    assert_eq!(futures::executor::block_on(fut), 5);
    let r = futures::executor::block_on(tx.spawn(9, async {}));
    assert!(matches!(r, Err(SpawnError::UnknownQueue(u)) if u.key() == "9"));
    assert_eq!(tx.capacity(), 1, "no room taken");
}

// A thread floods a spawner of capacity 4 with 2,000 tasks, awaiting room
// for each, while the executor runs on this thread. At each first poll, the
// tasks counted as submitted and not yet polled are at most the capacity,
// plus the one the sender is submitting (counted before its spawn), plus
// the one being polled (its room is given back as its first poll starts,
// before the task counts itself polled); every output arrives.
#[test]
fn a_flood_from_another_thread_stays_within_the_capacity() {
    const N: usize = 2_000;
    const CAP: usize = 4;
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(CAP));
    let submitted = Arc::new(AtomicUsize::new(0));
    let polled = Arc::new(AtomicUsize::new(0));
    let worst = Arc::new(AtomicUsize::new(0));
    let (s, p, w) = (submitted.clone(), polled.clone(), worst.clone());
    let producer = thread::spawn(move || {
        futures::executor::block_on(async {
            let mut handles = Vec::with_capacity(N);
            for i in 0..N {
                s.fetch_add(1, Ordering::SeqCst);
                let (s, p, w) = (s.clone(), p.clone(), w.clone());
                let h = tx
                    .spawn(0, async move {
                        let outstanding =
                            s.load(Ordering::SeqCst) - p.fetch_add(1, Ordering::SeqCst);
                        w.fetch_max(outstanding, Ordering::SeqCst);
                        i
                    })
                    .await
                    .unwrap();
                handles.push(h);
            }
            handles
        })
    });
    let (done_tx, done_rx) = futures::channel::oneshot::channel();
    let watcher = thread::spawn(move || {
        let handles = producer.join().unwrap();
        let _ = done_tx.send(());
        handles
    });
    ex.block_on(async {
        let _ = done_rx.await;
    });
    let handles = watcher.join().unwrap();
    let sum = ex.block_on(async {
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(sum, N * (N - 1) / 2);
    assert_eq!(polled.load(Ordering::SeqCst), N);
    let worst = worst.load(Ordering::SeqCst);
    assert!(
        (1..=CAP + 2).contains(&worst),
        "{worst} tasks waited for their first poll"
    );
}

// A waiting sender's waker is user code: when it panics as the executor
// wakes it (at a task's first poll), the panic is caught and counted
// (`PanicPolicy::Catch`), the task that gave the room back is unaffected,
// and the sender still finds room when polled.
#[test]
fn a_panicking_sender_waker_is_caught_on_the_executor_thread() {
    struct Panics;
    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("sender waker panics");
        }
    }
    let ex = executor();
    let tx = ex.bounded_remote_spawner(cap(1));
    let held = tx.try_spawn(0, async { 1 }).unwrap();
    let mut fut = tx.spawn(0, async { 2 });
    let waker = Waker::from(Arc::new(Panics));
    assert!(Pin::new(&mut fut)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(ex.run_until_stalled(), 1);
    assert_eq!(ex.stats().caught_panics, 1);
    let Poll::Ready(Ok(h)) = Pin::new(&mut fut).poll(&mut Context::from_waker(Waker::noop()))
    else {
        panic!("the sender finds room");
    };
    ex.run_until_stalled();
    assert_eq!(
        ex.block_on(async { held.await.unwrap() + h.await.unwrap() }),
        3
    );
}
