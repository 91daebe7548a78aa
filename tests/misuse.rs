//! Misuse of every public entry point gives a clear error value (checked
//! with its `Display` message) or a documented panic (checked with its
//! whole message), and leaves nothing behind: a refused future is dropped
//! once, unpolled, and the executor stays usable after a refused re-entry.
//!
//! `tests/errors.rs` already covers every `BuildError` except the stall
//! detector's, unknown keys for `Executor::spawn` / `queue` / `queue_stats` /
//! `Spawner::spawn`, and re-entering `block_on` and `run_until_stalled` from
//! a task or `block_on` from its own main future; they are not repeated
//! here.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::executor::block_on as host_block_on;
use tourbillon::config::{PanicPolicy, MAX_SHARES};
use tourbillon::error::{BuildError, SharesError, SpawnError, UnknownQueue};
use tourbillon::sched::Las;
use tourbillon::task::{yield_now, JoinError};
use tourbillon::{spawn, try_spawn, Builder, Executor};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Fg,
    Bg,
    /// Never declared.
    Nope,
}

const SHUTDOWN: &str = "the executor is shut down: it accepts no new task";
const NO_EXECUTOR: &str =
    "spawn called outside a running tourbillon executor: use Executor::spawn or a QueueHandle";
const UNKNOWN: &str = "no queue with key Nope was declared in the builder";

fn executor() -> Executor<Q> {
    Builder::new()
        .queue(Q::Fg, 4)
        .queue(Q::Bg, 1)
        .build()
        .unwrap()
}

/// The error for the key `Q::Nope`, from a lookup of a fresh executor.
fn unknown_key() -> UnknownQueue {
    let e = executor().queue(Q::Nope).unwrap_err();
    assert_eq!(e.key(), "Nope");
    e
}

/// A future that must never be polled; counts its drop (thread-safe, so
/// that remote spawns can take it).
struct Refused(Arc<AtomicUsize>);

impl Refused {
    fn new() -> (Self, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(0));
        (Refused(n.clone()), n)
    }
}

impl Future for Refused {
    type Output = u32;
    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<u32> {
        panic!("a refused future was polled");
    }
}

impl Drop for Refused {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// An output that counts its drops.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Runs `spawn` with a fresh [`Refused`] future, expects `want`, and checks
/// that the future was dropped exactly once.
fn refused<T: std::fmt::Debug>(
    what: &str,
    want: &SpawnError,
    spawn: impl FnOnce(Refused) -> Result<T, SpawnError>,
) {
    let (f, drops) = Refused::new();
    let e = spawn(f).expect_err(what);
    assert_eq!(&e, want, "{what}");
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "{what}: future dropped once"
    );
}

/// The message of a panic payload (`&str` or `String`).
fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .expect("a string payload")
}

fn panic_message(f: impl FnOnce()) -> String {
    let p = catch_unwind(AssertUnwindSafe(f)).expect_err("it should panic");
    message(p.as_ref())
}

/// Polls `f` once with a no-op waker.
fn poll_once<F: Future>(f: F) {
    let mut f = std::pin::pin!(f);
    let _ = f
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
}

fn reentry(entry: &str) -> String {
    format!(
        "tourbillon: {entry} called while this executor is already running \
         (from inside one of its tasks?); a task must .await instead of blocking its own executor"
    )
}

// ---------------------------------------------------------------------------
// Spawning after shutdown
// ---------------------------------------------------------------------------

/// Every spawning handle that outlives its executor refuses with
/// `Shutdown` (an unknown key is still reported as such), and drops the
/// future once, unpolled; on this thread and, for the remote spawner, on
/// another.
#[test]
fn every_spawn_path_after_shutdown_is_refused() {
    let ex = executor();
    let spawner = ex.spawner();
    let qh = ex.queue(Q::Bg).unwrap();
    let remote = ex.remote_spawner();
    drop(ex);

    let shutdown = SpawnError::Shutdown;
    assert_eq!(shutdown.to_string(), SHUTDOWN);
    refused("Spawner::spawn", &shutdown, |f| spawner.spawn(Q::Fg, f));
    refused("Spawner::spawn_in_group", &shutdown, |f| {
        spawner.spawn_in_group(Q::Fg, 7, f)
    });
    refused("Spawner::task", &shutdown, |f| {
        spawner.task(Q::Bg).name("late").group(1).spawn(f)
    });
    refused("QueueHandle::spawn", &shutdown, |f| qh.spawn(f));
    refused("QueueHandle::spawn_in_group", &shutdown, |f| {
        qh.spawn_in_group(3, f)
    });
    refused("QueueHandle::task", &shutdown, |f| {
        qh.task().name("late").spawn(f)
    });
    refused("RemoteSpawner::spawn", &shutdown, |f| {
        remote.spawn(Q::Fg, f)
    });
    refused("RemoteSpawner::spawn_in_group", &shutdown, |f| {
        remote.spawn_in_group(Q::Bg, 2, f)
    });
    std::thread::scope(|s| {
        s.spawn(|| {
            refused("RemoteSpawner::spawn from another thread", &shutdown, |f| {
                remote.spawn(Q::Bg, f)
            });
        });
    });

    // The key is checked first: an unknown key after shutdown is still
    // UnknownQueue.
    let unknown = SpawnError::UnknownQueue(unknown_key());
    refused("Spawner::spawn, unknown key", &unknown, |f| {
        spawner.spawn(Q::Nope, f)
    });
    refused("RemoteSpawner::spawn, unknown key", &unknown, |f| {
        remote.spawn(Q::Nope, f)
    });
}

/// Reweighting after shutdown is `SharesError::Shutdown`; invalid shares
/// and unknown keys are reported first.
#[test]
fn set_shares_after_shutdown() {
    let ex = executor();
    let spawner = ex.spawner();
    let qh = ex.queue(Q::Fg).unwrap();
    drop(ex);
    assert_eq!(spawner.set_shares(Q::Fg, 2), Err(SharesError::Shutdown));
    assert_eq!(qh.set_shares(2), Err(SharesError::Shutdown));
    assert_eq!(
        SharesError::Shutdown.to_string(),
        "the executor is shut down"
    );
    assert_eq!(
        spawner.set_shares(Q::Fg, 0),
        Err(SharesError::ZeroShares { queue: "Fg".into() })
    );
    assert_eq!(
        qh.set_shares(MAX_SHARES + 1),
        Err(SharesError::TooManyShares {
            queue: "Fg".into(),
            shares: MAX_SHARES + 1
        })
    );
    assert_eq!(
        spawner.set_shares(Q::Nope, 1),
        Err(SharesError::UnknownQueue(unknown_key()))
    );
}

// ---------------------------------------------------------------------------
// The free `spawn` / `try_spawn`
// ---------------------------------------------------------------------------

#[test]
fn free_spawn_outside_an_executor_panics_with_the_whole_message() {
    let (f, drops) = Refused::new();
    let msg = panic_message(|| drop(spawn(f)));
    assert_eq!(msg, format!("tourbillon::spawn: {NO_EXECUTOR}"));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(SpawnError::NoExecutor.to_string(), NO_EXECUTOR);
}

/// The current executor is per thread: another thread, even while the
/// executor runs a task that started it, has none.
#[test]
fn free_spawn_from_another_thread_has_no_executor() {
    let ex = executor();
    let h = ex
        .spawn(Q::Bg, async {
            // Here it works (onto this task's queue)...
            let inner = try_spawn(async { 5 }).unwrap();
            // ...but not from a thread this task starts.
            let (err, msg) = std::thread::scope(|s| {
                s.spawn(|| {
                    let (f, drops) = Refused::new();
                    let err = try_spawn(f).unwrap_err();
                    assert_eq!(drops.load(Ordering::SeqCst), 1);
                    let msg = panic_message(|| drop(spawn(async {})));
                    (err, msg)
                })
                .join()
                .unwrap()
            });
            (err, msg, inner.await.unwrap())
        })
        .unwrap();
    let (err, msg, inner) = ex.block_on(h).unwrap();
    assert_eq!(err, SpawnError::NoExecutor);
    assert_eq!(msg, format!("tourbillon::spawn: {NO_EXECUTOR}"));
    assert_eq!(inner, 5);
    assert_eq!(ex.queue_stats(Q::Bg).unwrap().spawned, 2);
}

// ---------------------------------------------------------------------------
// Re-entering the drivers
// ---------------------------------------------------------------------------

/// `run_until` polled from inside one of the executor's tasks: the task
/// panics with the message of drive.rs (caught by the default policy), and
/// the executor keeps working.
#[test]
fn run_until_from_inside_a_task_panics() {
    let ex = Rc::new(executor());
    let inner = ex.clone();
    let h = ex
        .spawn(Q::Fg, async move {
            host_block_on(inner.run_until(async {}));
        })
        .unwrap();
    let e = ex.block_on(h).unwrap_err();
    assert!(e.is_panic());
    assert_eq!(
        e.to_string(),
        format!(
            "task {} panicked with message {:?}",
            e.id(),
            reentry("run_until")
        )
    );
    assert_eq!(message(e.into_panic().as_ref()), reentry("run_until"));
    assert_eq!(Rc::strong_count(&ex), 1, "the task's future was dropped");
    let h = ex.spawn(Q::Bg, async { 3 }).unwrap();
    assert_eq!(host_block_on(ex.run_until(h)).unwrap(), 3);
}

/// From the main future of a driver (which is not a task, so nothing
/// catches it): every combination of the three drivers panics out of the
/// outer driver with the inner driver's name, and the executor is usable
/// afterwards (the guard restored its state while unwinding).
#[test]
fn drivers_reentered_from_a_main_future_panic() {
    let ex = executor();
    type Driver<'a> = Box<dyn Fn(&mut dyn FnMut()) + 'a>;
    let outers: Vec<(&str, Driver)> = vec![
        (
            "block_on",
            Box::new(|f: &mut dyn FnMut()| {
                ex.block_on(async { f() });
            }),
        ),
        (
            "run_until",
            Box::new(|f: &mut dyn FnMut()| {
                host_block_on(ex.run_until(async { f() }));
            }),
        ),
    ];
    type Inner<'a> = Box<dyn Fn() + 'a>;
    let inners: Vec<(&str, Inner)> = vec![
        ("block_on", Box::new(|| ex.block_on(async {}))),
        // Polled by hand: futures' `block_on` refuses to nest in itself.
        ("run_until", Box::new(|| poll_once(ex.run_until(async {})))),
        (
            "run_until_stalled",
            Box::new(|| {
                ex.run_until_stalled();
            }),
        ),
    ];
    for (outer_name, outer) in &outers {
        for (inner_name, inner) in &inners {
            if (*outer_name, *inner_name) == ("block_on", "block_on") {
                continue; // tests/errors.rs
            }
            let msg = panic_message(|| outer(&mut || inner()));
            assert_eq!(msg, reentry(inner_name), "{inner_name} inside {outer_name}");
            // Still usable.
            let h = ex.spawn(Q::Fg, async { 1 }).unwrap();
            assert_eq!(ex.block_on(h).unwrap(), 1);
        }
    }
}

/// Not a misuse: a task may drive a *different* executor.
#[test]
fn a_task_may_drive_another_executor() {
    let outer = executor();
    let h = outer
        .spawn(Q::Fg, async {
            let other = executor();
            let h = other.spawn(Q::Bg, async { 9 }).unwrap();
            other.block_on(h).unwrap() + host_block_on(other.run_until(async { 1 }))
        })
        .unwrap();
    assert_eq!(outer.block_on(h).unwrap(), 10);
}

// ---------------------------------------------------------------------------
// Handles after their executor is gone
// ---------------------------------------------------------------------------

/// Once the executor is dropped, local handles of a queued task and a
/// pending task read `Cancelled` with their own id; a completed task's
/// handle still reads its output, dropped once, with the handle's read.
#[test]
fn join_handles_after_the_executor_is_gone_are_cancelled() {
    let ex = executor();
    let out_drops = Arc::new(AtomicUsize::new(0));
    let od = out_drops.clone();
    let done = ex.spawn(Q::Fg, async move { Counted(od) }).unwrap();
    let pending = ex.spawn(Q::Bg, std::future::pending::<()>()).unwrap();
    ex.run_until_stalled();
    let (f, drops) = Refused::new();
    let queued = ex.spawn(Q::Fg, f).unwrap();
    assert!(done.is_finished());
    drop(ex);
    // The completed task's output waits in its handle's cell (as in tokio).
    assert_eq!(out_drops.load(Ordering::SeqCst), 0);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let out = host_block_on(done).expect("a completed task keeps its output");
    drop(out);
    assert_eq!(out_drops.load(Ordering::SeqCst), 1);
    let ids = [pending.id(), queued.id()];
    let results = [host_block_on(pending), host_block_on(queued).map(drop)];
    for (id, r) in ids.into_iter().zip(results) {
        let e = r.unwrap_err();
        assert!(e.is_cancelled());
        assert_eq!(e.id(), id);
        assert_eq!(e.to_string(), format!("task {id} was cancelled"));
        assert_eq!(format!("{e:?}"), format!("JoinError::Cancelled({id:?})"));
    }
}

/// A remote handle whose spawn the executor never took reads `Cancelled`
/// with an id of its own, which no other task has.
#[test]
fn remote_handle_of_a_never_spawned_task_after_shutdown() {
    let ex = executor();
    let (f, drops) = Refused::new();
    let h = ex.remote_spawner().spawn(Q::Fg, f).unwrap();
    drop(ex);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert!(h.is_finished());
    let e = std::thread::spawn(move || host_block_on(h))
        .join()
        .unwrap()
        .unwrap_err();
    assert!(e.is_cancelled());
    let other = executor();
    let spawned = other.spawn(Q::Fg, async {}).unwrap();
    assert_ne!(e.id(), spawned.id());
    assert_eq!(e.to_string(), format!("task {} was cancelled", e.id()));
}

/// `RemoteJoinHandle` polled again after it returned `Ready` panics (its
/// documented panic), whether the result was `Ok` or an error; `abort` and
/// `is_finished` stay harmless.
#[test]
fn remote_join_handle_polled_after_ready_panics() {
    let ex = executor();
    let remote = ex.remote_spawner();
    let mut ok = remote.spawn(Q::Fg, async { 7u32 }).unwrap();
    let mut cancelled = remote.spawn(Q::Bg, std::future::pending::<u32>()).unwrap();
    cancelled.abort();
    ex.run_until_stalled();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    for (h, expect_ok) in [(&mut ok, true), (&mut cancelled, false)] {
        match std::pin::Pin::new(&mut *h).poll(&mut cx) {
            std::task::Poll::Ready(r) => assert_eq!(r.is_ok(), expect_ok),
            std::task::Poll::Pending => panic!("the task has ended"),
        }
        assert!(h.is_finished());
        h.abort();
        let msg = panic_message(|| {
            let _ = std::pin::Pin::new(&mut *h).poll(&mut cx);
        });
        assert_eq!(msg, "RemoteJoinHandle polled after it returned Ready");
    }
}

/// `JoinHandle` has no documented behaviour when polled after `Ready`; today
/// it reads `Cancelled` (the task is gone), and never the output twice.
#[test]
fn join_handle_polled_after_ready_reads_cancelled() {
    let ex = executor();
    let mut h = ex.spawn(Q::Fg, async { 1u8 }).unwrap();
    ex.run_until_stalled();
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let first = std::pin::Pin::new(&mut h).poll(&mut cx);
    assert!(matches!(first, std::task::Poll::Ready(Ok(1))));
    let again = std::pin::Pin::new(&mut h).poll(&mut cx);
    match again {
        std::task::Poll::Ready(Err(e)) => {
            assert!(e.is_cancelled());
            assert_eq!(e.id(), h.id());
        }
        other => panic!("polled after Ready: {other:?}"),
    }
    assert!(h.is_finished());
    h.abort();
    assert_eq!(ex.stats().live_tasks, 0);
}

// ---------------------------------------------------------------------------
// Shares at run time
// ---------------------------------------------------------------------------

/// Zero and too many shares through every entry point (executor, spawner,
/// queue handle, from inside a task): the exact error and message, and the
/// queue keeps its shares; the bounds are accepted.
#[test]
fn invalid_shares_at_run_time() {
    let ex = executor();
    let spawner = ex.spawner();
    let qh = ex.queue(Q::Bg).unwrap();
    let zero = SharesError::ZeroShares { queue: "Bg".into() };
    let too_many = SharesError::TooManyShares {
        queue: "Bg".into(),
        shares: MAX_SHARES + 1,
    };
    assert_eq!(
        zero.to_string(),
        "cannot give queue Bg zero shares: shares must be at least 1"
    );
    assert_eq!(
        too_many.to_string(),
        "cannot give queue Bg 10001 shares: the maximum is 10000"
    );
    type SetShares<'a> = &'a dyn Fn(u32) -> Result<(), SharesError>;
    let attempts: [(&str, SetShares); 3] = [
        ("Executor", &|s| ex.set_shares(Q::Bg, s)),
        ("Spawner", &|s| spawner.set_shares(Q::Bg, s)),
        ("QueueHandle", &|s| qh.set_shares(s)),
    ];
    for (name, set) in attempts {
        assert_eq!(set(0), Err(zero.clone()), "{name}");
        assert_eq!(set(MAX_SHARES + 1), Err(too_many.clone()), "{name}");
        assert_eq!(
            set(u32::MAX).unwrap_err().to_string(),
            format!(
                "cannot give queue Bg {} shares: the maximum is 10000",
                u32::MAX
            ),
            "{name}"
        );
        assert_eq!(
            ex.queue_stats(Q::Bg).unwrap().shares,
            1,
            "{name}: unchanged"
        );
    }
    // From inside a task (a run in progress).
    let sp = ex.spawner();
    let h = ex
        .spawn(Q::Bg, async move {
            let r = (sp.set_shares(Q::Bg, 0), sp.set_shares(Q::Fg, MAX_SHARES));
            yield_now().await;
            r
        })
        .unwrap();
    let (r0, rmax) = ex.block_on(h).unwrap();
    assert_eq!(r0, Err(zero));
    assert_eq!(rmax, Ok(()));
    assert_eq!(ex.queue_stats(Q::Bg).unwrap().shares, 1);
    assert_eq!(ex.queue_stats(Q::Fg).unwrap().shares, MAX_SHARES);
    assert_eq!(qh.set_shares(1), Ok(()));
}

// ---------------------------------------------------------------------------
// Unknown queue keys (the paths tests/errors.rs does not cover)
// ---------------------------------------------------------------------------

#[test]
fn unknown_queue_key_on_every_other_path() {
    let ex = executor();
    let spawner = ex.spawner();
    let remote = ex.remote_spawner();
    let unknown = SpawnError::UnknownQueue(unknown_key());
    assert_eq!(unknown.to_string(), UNKNOWN);
    refused("Executor::spawn_in_group", &unknown, |f| {
        ex.spawn_in_group(Q::Nope, 1, f)
    });
    refused("Spawner::spawn_in_group", &unknown, |f| {
        spawner.spawn_in_group(Q::Nope, 1, f)
    });
    refused("Executor::task", &unknown, |f| {
        ex.task(Q::Nope).name("x").group(4).spawn(f)
    });
    refused("Spawner::task", &unknown, |f| {
        spawner.task(Q::Nope).spawn(f)
    });
    refused("RemoteSpawner::spawn", &unknown, |f| {
        remote.spawn(Q::Nope, f)
    });
    refused("RemoteSpawner::spawn_in_group", &unknown, |f| {
        remote.spawn_in_group(Q::Nope, 1, f)
    });
    // From inside a task too.
    let sp = ex.spawner();
    let h = ex
        .spawn(Q::Fg, async move {
            let (f, drops) = Refused::new();
            (sp.spawn(Q::Nope, f).map(drop), drops.load(Ordering::SeqCst))
        })
        .unwrap();
    assert_eq!(ex.block_on(h).unwrap(), (Err(unknown), 1));

    let shares_unknown = SharesError::UnknownQueue(unknown_key());
    assert_eq!(ex.set_shares(Q::Nope, 1), Err(shares_unknown.clone()));
    assert_eq!(spawner.set_shares(Q::Nope, 1), Err(shares_unknown.clone()));
    // The key is checked before the shares.
    assert_eq!(ex.set_shares(Q::Nope, 0), Err(shares_unknown.clone()));
    assert_eq!(shares_unknown.to_string(), UNKNOWN);

    // Nothing was spawned but the one task above.
    ex.run_until_stalled();
    let stats = ex.stats();
    assert_eq!(stats.live_tasks, 0);
    assert_eq!(stats.live_groups, 0);
    let spawned: u64 = stats.queues.iter().map(|q| q.spawned).sum();
    assert_eq!(spawned, 1);
}

// ---------------------------------------------------------------------------
// Builder and scheduler options
// ---------------------------------------------------------------------------

#[test]
fn stall_detector_threshold_out_of_range() {
    let with = |t: Duration| {
        Builder::new()
            .queue(Q::Fg, 1)
            .stall_detector(t, |_| {})
            .build()
    };
    let want = BuildError::InvalidOption {
        option: "stall_detector",
        reason: "the threshold must be between 1 us and 1 hour",
    };
    for t in [
        Duration::ZERO,
        Duration::from_nanos(999),
        Duration::from_secs(3600) + Duration::from_nanos(1),
        Duration::MAX,
    ] {
        let e = with(t).expect_err("out of range");
        assert_eq!(e, want, "{t:?}");
        assert_eq!(
            e.to_string(),
            "invalid value for stall_detector: the threshold must be between 1 us and 1 hour"
        );
    }
    assert!(with(Duration::from_micros(1)).is_ok());
    assert!(with(Duration::from_secs(3600)).is_ok());
}

#[test]
fn las_quantized_documented_panics() {
    assert_eq!(
        panic_message(|| drop(Las::quantized(Duration::ZERO, 4))),
        "Las::quantized: q0 must be positive"
    );
    for levels in [0, 1, 65, u8::MAX] {
        assert_eq!(
            panic_message(|| drop(Las::quantized(Duration::from_micros(1), levels))),
            "Las::quantized: levels must be in 2..=64",
            "{levels}"
        );
    }
    drop(Las::quantized(Duration::from_nanos(1), 2));
    drop(Las::quantized(Duration::MAX, 64));
}

#[test]
fn into_panic_of_a_cancellation_panics() {
    let ex = executor();
    let h = ex.spawn(Q::Fg, std::future::pending::<()>()).unwrap();
    h.abort();
    let e: JoinError = ex.block_on(h).unwrap_err();
    let id = e.id();
    assert_eq!(
        panic_message(|| drop(e.into_panic())),
        format!("`JoinError` reason is not a panic.: JoinError::Cancelled({id:?})")
    );
}

/// With `PanicPolicy::Propagate` the documented panic of `block_on` is the
/// task's own payload; the handle keeps a placeholder.
#[test]
fn block_on_propagates_a_task_panic_with_its_payload() {
    let ex = Builder::new()
        .queue(Q::Fg, 1)
        .panic_policy(PanicPolicy::Propagate)
        .build()
        .unwrap();
    let h = ex
        .spawn(Q::Fg, async {
            panic!("task boom");
        })
        .unwrap();
    let msg = panic_message(|| ex.block_on(async { yield_now().await }));
    assert_eq!(msg, "task boom");
    let e = ex.block_on(h).unwrap_err();
    assert!(e.is_panic());
    assert_eq!(
        message(e.into_panic().as_ref()),
        "the panic payload was propagated out of the executor (PanicPolicy::Propagate)"
    );
}
