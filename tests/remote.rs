//! Cross-thread entry: `RemoteSpawner` from other threads, `RemoteJoinHandle`
//! awaited and aborted from other threads, shutdown, panics, and exactly-once
//! drops of remote futures and outputs. Threads synchronise through
//! channels and joins only (no sleeps).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use futures::channel::oneshot;
use tourbillon::error::SpawnError;
use tourbillon::remote::{RemoteJoinHandle, RemoteSpawner};
use tourbillon::task::{yield_now, JoinError};
use tourbillon::Builder;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Fg,
    Bg,
}

/// Counts its drops (thread-safe: remote futures may be dropped anywhere).
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn executor() -> tourbillon::Executor<Q> {
    Builder::new()
        .queue(Q::Fg, 4)
        .queue(Q::Bg, 1)
        .build()
        .unwrap()
}

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<RemoteSpawner<Q>>();
    send::<RemoteJoinHandle<String>>();
    send_sync::<RemoteJoinHandle<String>>();
}

// Four threads spawn 250 tasks each (yielding, on both queues) while the
// executor runs `block_on` on this thread; each thread awaits its own
// handles on its own thread (futures' block_on) and sends back the sum.
// Every output is delivered exactly once, to the right handle.
#[test]
fn spawns_from_many_threads_deliver_every_output_once() {
    let ex = executor();
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let mut joins = Vec::new();
    for t in 0..4u64 {
        let remote = ex.remote_spawner();
        let done = done_tx.clone();
        joins.push(thread::spawn(move || {
            let handles: Vec<_> = (0..250u64)
                .map(|i| {
                    let q = if i % 2 == 0 { Q::Fg } else { Q::Bg };
                    remote
                        .spawn(q, async move {
                            yield_now().await;
                            t * 1000 + i
                        })
                        .unwrap()
                })
                .collect();
            let sum: u64 = handles
                .into_iter()
                .map(|h| futures::executor::block_on(h).unwrap())
                .sum();
            done.send(sum).unwrap();
        }));
    }
    drop(done_tx);
    // Drive until every thread reported (the main future completes when the
    // channel closes); the threads' handles are resolved by our tasks.
    let (sums_tx, sums_rx) = oneshot::channel();
    let collector = thread::spawn(move || {
        let sums: Vec<u64> = done_rx.iter().collect();
        sums_tx.send(sums).unwrap();
    });
    let mut sums = ex.block_on(sums_rx).unwrap();
    collector.join().unwrap();
    for j in joins {
        j.join().unwrap();
    }
    sums.sort();
    let want: Vec<u64> = (0..4u64)
        .map(|t| (0..250u64).map(|i| t * 1000 + i).sum())
        .collect();
    assert_eq!(sums, want);
    let st = ex.stats();
    assert_eq!(st.queues[0].spawned + st.queues[1].spawned, 1000);
    assert_eq!(st.queues[0].completed + st.queues[1].completed, 1000);
    assert_eq!(st.live_tasks, 0);
}

// abort() before the executor took the task: the future is dropped without
// ever being polled and the handle reads Cancelled.
#[test]
fn abort_before_spawn_drops_the_future_unpolled() {
    let ex = executor();
    let drops = Arc::new(AtomicUsize::new(0));
    let polls = Arc::new(AtomicUsize::new(0));
    let (d, p) = (Counted(drops.clone()), polls.clone());
    let remote = ex.remote_spawner();
    let h = thread::spawn(move || {
        let h = remote
            .spawn(Q::Fg, async move {
                p.fetch_add(1, Ordering::SeqCst);
                drop(d);
            })
            .unwrap();
        h.abort();
        h
    })
    .join()
    .unwrap();
    let err = ex.block_on(h).unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(polls.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(ex.stats().live_tasks, 0);
}

// abort() from another thread while the task waits: the future is dropped
// (once) at the next boundary and the handle, awaited on that thread,
// reads Cancelled.
#[test]
fn abort_from_another_thread_cancels_a_waiting_task() {
    let ex = executor();
    let drops = Arc::new(AtomicUsize::new(0));
    let (started_tx, started_rx) = oneshot::channel::<()>();
    let d = Counted(drops.clone());
    let h = ex
        .remote_spawner()
        .spawn(Q::Bg, async move {
            let _d = d;
            started_tx.send(()).unwrap();
            std::future::pending::<u32>().await
        })
        .unwrap();
    let aborter = thread::spawn(move || {
        futures::executor::block_on(started_rx).unwrap();
        h.abort();
        h.abort(); // twice is harmless
        futures::executor::block_on(h)
    });
    // Run until the other thread has its answer.
    let (tx, rx) = oneshot::channel();
    let waiter = thread::spawn(move || tx.send(aborter.join().unwrap()).unwrap());
    let result: Result<u32, JoinError> = ex.block_on(rx).unwrap();
    waiter.join().unwrap();
    assert!(result.unwrap_err().is_cancelled());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(ex.queue_stats(Q::Bg).unwrap().cancelled, 1);
}

// A task that completed before abort() keeps its output.
#[test]
fn abort_after_completion_keeps_the_output() {
    let ex = executor();
    let h = ex.remote_spawner().spawn(Q::Fg, async { 5 }).unwrap();
    ex.block_on(async { yield_now().await });
    assert!(h.is_finished());
    h.abort();
    assert_eq!(ex.block_on(h).unwrap(), 5);
}

// A panicking remote task: with the default Catch policy its handle reads
// the panic with its payload, and the executor counts it.
#[test]
fn panic_reaches_the_remote_handle() {
    let ex = executor();
    let h = ex
        .remote_spawner()
        .spawn(Q::Fg, async {
            if true {
                panic!("remote boom");
            }
        })
        .unwrap();
    let err = ex.block_on(h).unwrap_err();
    assert!(err.is_panic());
    assert_eq!(*err.into_panic().downcast::<&str>().unwrap(), "remote boom");
    assert_eq!(ex.queue_stats(Q::Fg).unwrap().panicked, 1);
}

// Shutdown: a spawn queued but never taken, and a task left pending, both
// resolve to Cancelled on their own thread; their futures are dropped once;
// spawning after the executor is gone is an error, as is an unknown key.
#[test]
fn shutdown_cancels_queued_and_pending_remote_tasks() {
    let ex = executor();
    let drops = Arc::new(AtomicUsize::new(0));
    let remote = ex.remote_spawner();
    let d = Counted(drops.clone());
    let pending = remote
        .spawn(Q::Fg, async move {
            let _d = d;
            std::future::pending::<()>().await
        })
        .unwrap();
    ex.block_on(async { yield_now().await });
    let d = Counted(drops.clone());
    let queued = remote
        .spawn(Q::Bg, async move {
            drop(d);
        })
        .unwrap();
    drop(ex);
    let t = thread::spawn(move || {
        (
            futures::executor::block_on(pending),
            futures::executor::block_on(queued),
        )
    });
    let (a, b) = t.join().unwrap();
    assert!(a.unwrap_err().is_cancelled());
    assert!(b.unwrap_err().is_cancelled());
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert_eq!(
        remote.spawn(Q::Fg, async {}).unwrap_err(),
        SpawnError::Shutdown
    );
}

#[test]
fn unknown_queue_is_an_error() {
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    enum Other {
        A,
        B,
    }
    let ex = Builder::new().queue(Other::A, 1).build().unwrap();
    let err = ex.remote_spawner().spawn(Other::B, async {}).unwrap_err();
    assert!(matches!(&err, SpawnError::UnknownQueue(u) if u.key() == "B"));
    assert_eq!(
        err.to_string(),
        "no queue with key B was declared in the builder"
    );
}

// A remote handle awaited by a task of the same executor (the delivery
// wakes a local task, with no borrow held), and remote outputs that are
// never read are dropped exactly once.
#[test]
fn remote_handle_awaited_locally_and_unread_outputs_dropped_once() {
    let ex = executor();
    let drops = Arc::new(AtomicUsize::new(0));
    let remote = ex.remote_spawner();
    let d = drops.clone();
    let h = remote
        .spawn(Q::Bg, async move {
            yield_now().await;
            Counted(d)
        })
        .unwrap();
    let local = ex
        .spawn(Q::Fg, async move {
            let out = h.await.unwrap();
            drop(out);
            1
        })
        .unwrap();
    assert_eq!(ex.block_on(local).unwrap(), 1);
    let d = drops.clone();
    let detached = remote.spawn(Q::Bg, async move { Counted(d) }).unwrap();
    drop(detached);
    ex.block_on(async { yield_now().await });
    let d = drops.clone();
    let unread = remote.spawn(Q::Bg, async move { Counted(d) }).unwrap();
    ex.block_on(async { yield_now().await });
    assert!(unread.is_finished());
    drop(unread);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    drop(ex);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}
