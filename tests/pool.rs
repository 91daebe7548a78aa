//! The thread-per-core pool (`tourbillon::pool`): placement and its typed
//! errors, routing (`submit_to`, `spawn_on`, round-robin and least-loaded
//! `spawn`), the bounded cross-core queues (full, wait, timeout), control
//! (shares, stats), shutdown in each state, and a panic on one core.
//!
//! Determinism: the tests never sleep and assert no timing. A core is held
//! busy by a task that blocks its thread on a channel the test releases;
//! "eventually" conditions are waited for by joins, channel receives and
//! the pool's own futures. Timeouts are only asserted where the outcome
//! cannot depend on timing (the core stays blocked until the test frees it).

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use futures::executor::block_on;
use tourbillon::config::PanicPolicy;
use tourbillon::error::SharesError;
use tourbillon::pool::{
    current_core, ControlError, Distribution, Placement, Pool, PoolBuildError, ShutdownError,
    SubmitError, TrySubmitError, MAX_CORES,
};
use tourbillon::Builder;

type Key = &'static str;

fn queues() -> Builder<Key> {
    Builder::new().queue("fg", 4).queue("bg", 1)
}

fn pool(cores: usize) -> Pool<Key> {
    Pool::builder()
        .cores(cores)
        .placement(Placement::Unpinned)
        .executor(|_| queues())
        .build()
        .unwrap()
}

const GRACE: Duration = Duration::from_secs(30);

/// Blocks core `core`'s thread inside a poll until the returned sender is
/// used (or dropped); returns once the core is blocked.
fn block_core(pool: &Pool<Key>, core: usize) -> mpsc::Sender<()> {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (blocked_tx, blocked_rx) = mpsc::channel::<()>();
    let h = pool
        .try_spawn_on(core, "fg", move || async move {
            blocked_tx.send(()).unwrap();
            let _ = release_rx.recv();
        })
        .unwrap();
    drop(h);
    blocked_rx.recv().unwrap();
    release_tx
}

#[test]
fn building_reports_bad_input_with_typed_errors() {
    let no_exec = Pool::<Key>::builder()
        .placement(Placement::Unpinned)
        .build();
    assert!(matches!(no_exec, Err(PoolBuildError::NoExecutor)));
    let zero = Pool::builder()
        .cores(0)
        .placement(Placement::Unpinned)
        .executor(|_| queues())
        .build();
    assert!(matches!(zero, Err(PoolBuildError::NoCores)));
    let cpu = Pool::builder()
        .placement(Placement::Cpus(vec![usize::MAX]))
        .executor(|_| queues())
        .build();
    match cpu {
        Err(e @ PoolBuildError::CpuUnavailable { cpu, .. }) => {
            assert_eq!(cpu, usize::MAX);
            assert!(e.to_string().contains("not available"), "{e}");
        }
        other => panic!("expected CpuUnavailable, got {other:?}"),
    }
    let mismatch = Pool::builder()
        .cores(3)
        .placement(Placement::Cpus(vec![0]))
        .executor(|_| queues())
        .build();
    assert!(matches!(
        mismatch,
        Err(PoolBuildError::CoreCount { cores: 3, cpus: 1 })
    ));
    let cpus = core_affinity::get_core_ids().unwrap().len();
    let too_many = Pool::builder()
        .cores(cpus + 1)
        .placement(Placement::EachCpu)
        .executor(|_| queues())
        .build();
    assert!(matches!(too_many, Err(PoolBuildError::CoreCount { .. })));
    // A refused declaration on one core: the cores that started are joined.
    let refused = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned)
        .executor(|core| if core == 1 { Builder::new() } else { queues() })
        .build();
    assert!(matches!(
        refused,
        Err(PoolBuildError::Executor { core: 1, .. })
    ));
    let panicked = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned)
        .executor(|core| {
            assert!(core != 1, "no executor for core 1");
            queues()
        })
        .build();
    match panicked {
        Err(PoolBuildError::ExecutorPanicked { core: 1, message }) => {
            assert!(message.contains("no executor for core 1"), "{message}")
        }
        other => panic!("expected ExecutorPanicked, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn more_cores_than_max_cores_are_refused_before_a_thread_starts() {
    // The declaration runs on each core's thread: a count of 0 calls means
    // no core thread came up.
    let declared = Arc::new(AtomicUsize::new(0));
    let build = |cores: usize, placement: Placement| {
        let declared = declared.clone();
        Pool::builder()
            .cores(cores)
            .placement(placement)
            .executor(move |_| {
                declared.fetch_add(1, Ordering::SeqCst);
                queues()
            })
            .build()
    };
    let placements = [
        Placement::Unpinned,
        Placement::EachCpu,
        Placement::Cpus(vec![0]),
    ];
    for placement in placements {
        for cores in [usize::MAX, MAX_CORES + 1] {
            let message =
                format!("{cores} cores asked for, but a pool has at most 8192 (MAX_CORES)");
            match build(cores, placement.clone()) {
                Err(e @ PoolBuildError::TooManyCores { .. }) => {
                    assert_eq!(
                        e,
                        PoolBuildError::TooManyCores {
                            cores,
                            max: MAX_CORES
                        }
                    );
                    assert_eq!(e.to_string(), message);
                }
                other => panic!(
                    "{placement:?}, {cores} cores: expected TooManyCores, got {:?}",
                    other.map(|_| ())
                ),
            }
        }
    }
    let list = Pool::builder()
        .placement(Placement::Cpus(vec![0; MAX_CORES + 1]))
        .executor(|_| queues())
        .build();
    assert!(matches!(
        list,
        Err(PoolBuildError::TooManyCores { cores, max: MAX_CORES }) if cores == MAX_CORES + 1
    ));
    assert!(matches!(
        build(0, Placement::Unpinned),
        Err(PoolBuildError::NoCores)
    ));
    assert_eq!(declared.load(Ordering::SeqCst), 0);
}

#[test]
fn each_cpu_pins_core_i_to_the_ith_cpu_of_the_mask() {
    let mut mask: Vec<usize> = core_affinity::get_core_ids()
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    mask.sort_unstable();
    let pool = Pool::builder()
        .placement(Placement::EachCpu)
        .executor(|_| queues())
        .build()
        .unwrap();
    assert_eq!(pool.cores(), mask.len());
    for (core, &cpu) in mask.iter().enumerate() {
        assert_eq!(pool.cpu(core), Some(cpu));
        // The core's thread may run on its CPU alone.
        let seen = block_on(pool.submit_to(core, "fg", || async {
            let ids: Vec<usize> = core_affinity::get_core_ids()
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect();
            (current_core(), ids)
        }))
        .unwrap();
        assert_eq!(seen, (Some(core), vec![cpu]));
    }
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn submit_to_runs_a_non_send_future_on_the_core_it_names() {
    let pool = pool(2);
    for core in [1, 0, 1] {
        let out = block_on(pool.submit_to(core, "bg", move || {
            let local = std::rc::Rc::new(std::cell::Cell::new(core));
            async move {
                tourbillon::task::yield_now().await;
                (local.get(), current_core())
            }
        }))
        .unwrap();
        assert_eq!(out, (core, Some(core)));
    }
    let unknown = block_on(pool.submit_to(7, "fg", || async {}));
    assert!(matches!(
        unknown,
        Err(SubmitError::UnknownCore { core: 7, cores: 2 })
    ));
    let no_queue = block_on(pool.submit_to(0, "nope", || async {}));
    assert!(matches!(no_queue, Err(SubmitError::UnknownQueue(_))));
    let panicked = block_on(pool.submit_to(0, "fg", || async { panic!("boom") }));
    match panicked {
        Err(SubmitError::Join(e)) => assert!(e.is_panic()),
        other => panic!("expected a panic, got {other:?}"),
    }
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn a_task_of_one_core_awaits_work_forwarded_to_another() {
    let pool = pool(2);
    let p2 = pool.clone();
    let out = block_on(pool.submit_to(0, "fg", move || async move {
        // On core 0: forward to core 1 and await there without blocking.
        let remote = p2.submit_to(1, "fg", || async { current_core() }).await;
        (current_core(), remote.unwrap())
    }))
    .unwrap();
    assert_eq!(out, (Some(0), Some(1)));
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

/// Each core's thread has a name of its own as the OS sees it: Linux keeps
/// 15 bytes of a thread's name (`comm`), which perf and `/proc` show; each
/// core reads its own from `/proc/thread-self/comm`.
#[cfg(target_os = "linux")]
#[test]
fn each_core_thread_has_its_own_name_in_proc() {
    let pool = pool(3);
    let names: Vec<String> = (0..3)
        .map(|core| {
            block_on(pool.submit_to(core, "fg", || async {
                std::fs::read_to_string("/proc/thread-self/comm").unwrap()
            }))
            .unwrap()
        })
        .collect();
    assert_eq!(names, ["tb-core-0\n", "tb-core-1\n", "tb-core-2\n"]);
    pool.shutdown(Duration::from_secs(5)).unwrap();
}

#[test]
fn round_robin_visits_the_cores_in_turn() {
    let pool = pool(2);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let h = block_on(pool.spawn("fg", || async { current_core().unwrap() })).unwrap();
        seen.push(block_on(h).unwrap());
    }
    assert_eq!(seen, [0, 1, 0, 1]);
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn least_loaded_avoids_the_core_with_live_pool_tasks() {
    let pool = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned)
        .distribution(Distribution::LeastLoaded)
        .executor(|_| queues())
        .build()
        .unwrap();
    // Two tasks stay alive on core 0 (waiting on a channel, not blocking).
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let (tx2, rx2) = futures::channel::oneshot::channel::<()>();
    let a = block_on(pool.spawn_on(0, "fg", move || async move { rx.await.ok() })).unwrap();
    let b = block_on(pool.spawn_on(0, "fg", move || async move { rx2.await.ok() })).unwrap();
    assert_eq!(pool.load(0), Some(2));
    let picked = block_on(pool.spawn("fg", || async { current_core().unwrap() })).unwrap();
    assert_eq!(block_on(picked).unwrap(), 1);
    tx.send(()).unwrap();
    tx2.send(()).unwrap();
    block_on(a).unwrap();
    block_on(b).unwrap();
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn a_full_core_queue_is_reported_waited_for_and_timed_out() {
    let pool = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned)
        .queue_capacity(NonZeroUsize::new(2).unwrap())
        .executor(|_| queues())
        .build()
        .unwrap();
    let release = block_core(&pool, 0);
    // The blocking task was polled: its permit is back. Two more fill the
    // queue (the core cannot poll them while it is blocked).
    let ran = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for _ in 0..2 {
        let ran = ran.clone();
        handles.push(
            pool.try_spawn_on(0, "fg", move || async move {
                ran.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap(),
        );
    }
    let full = pool.try_spawn_on(0, "fg", || async {});
    assert!(matches!(full, Err(TrySubmitError::Full(_))), "{full:?}");
    // The other core has room.
    assert!(pool.try_spawn_on(1, "fg", || async {}).is_ok());
    // Waiting with a timeout while the core stays blocked: Timeout, and the
    // closure is dropped, never run.
    let dropped = Arc::new(AtomicUsize::new(0));
    let guard = DropCount(dropped.clone());
    let timed_out = block_on(
        pool.spawn_on(0, "fg", move || {
            let _keep = &guard;
            async {}
        })
        .timeout(Duration::from_millis(20)),
    );
    assert!(matches!(timed_out, Err(SubmitError::Timeout)));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    // A sender that waits without a timeout gets room once the core runs.
    let pool2 = pool.clone();
    let ran2 = ran.clone();
    let waiter = std::thread::spawn(move || {
        let h = block_on(pool2.spawn_on(0, "fg", move || async move {
            ran2.fetch_add(1, Ordering::SeqCst);
        }))
        .unwrap();
        block_on(h).unwrap();
    });
    release.send(()).unwrap();
    waiter.join().unwrap();
    for h in handles {
        block_on(h).unwrap();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 3);
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

/// Counts its drops.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn submit_to_with_a_timeout_aborts_a_task_that_runs_too_long() {
    let pool = pool(1);
    let dropped = Arc::new(AtomicUsize::new(0));
    // Held by the closure, then by its future: dropped once, whether the
    // abort finds the task polled or not.
    let guard = DropCount(dropped.clone());
    let (_never_tx, never_rx) = futures::channel::oneshot::channel::<()>();
    let out = block_on(
        pool.submit_to(0, "fg", move || async move {
            let _g = guard;
            let _ = never_rx.await;
        })
        .timeout(Duration::from_millis(20)),
    );
    assert!(matches!(out, Err(SubmitError::Timeout)));
    // The abort reaches the task at the core's next poll boundary; the
    // shutdown finds nothing alive once it has.
    let report = pool.shutdown(GRACE).unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(report.cancelled(), 0);
}

#[test]
fn shares_and_stats_are_per_core_and_merge() {
    let pool = pool(2);
    block_on(pool.set_shares(1, "bg", 7)).unwrap();
    let stats = block_on(pool.stats());
    let shares = |core: usize| stats.cores[core].as_ref().unwrap().queues[1].shares;
    assert_eq!((shares(0), shares(1)), (1, 7));
    block_on(pool.set_shares_all("fg", 9)).unwrap();
    for core in 0..2 {
        for _ in 0..3 {
            block_on(pool.submit_to(core, "bg", || async {})).unwrap();
        }
    }
    let stats = block_on(pool.stats());
    for s in stats.cores.iter().flatten() {
        assert_eq!(s.queues[0].shares, 9);
        assert_eq!(s.queues[1].spawned, 3);
    }
    let merged = stats.merged().unwrap();
    assert_eq!(merged.queues[1].spawned, 6);
    assert_eq!(merged.queues[1].completed, 6);
    assert!(matches!(
        block_on(pool.set_shares(0, "bg", 0)),
        Err(ControlError::Shares(SharesError::ZeroShares { .. }))
    ));
    assert!(matches!(
        block_on(pool.set_shares(0, "nope", 1)),
        Err(ControlError::Shares(SharesError::UnknownQueue(_)))
    ));
    assert!(matches!(
        block_on(pool.set_shares(5, "bg", 1)),
        Err(ControlError::UnknownCore { core: 5, cores: 2 })
    ));
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn merged_stats_match_queues_by_name_across_cores_that_declare_different_queues() {
    // Core 0 declares "a"; core 1 declares "b" first, then "a".
    let pool = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned)
        .executor(|core| {
            if core == 0 {
                Builder::new().queue("a", 2)
            } else {
                Builder::new().queue("b", 5).queue("a", 2)
            }
        })
        .build()
        .unwrap();
    // (core, queue, tasks): "a" completes 2 + 4 = 6, "b" completes 3.
    for (core, key, n) in [(0, "a", 2), (1, "b", 3), (1, "a", 4)] {
        for _ in 0..n {
            block_on(pool.submit_to(core, key, || async {})).unwrap();
        }
    }
    let stats = block_on(pool.stats());
    let merged = stats.merged().unwrap();
    let names: Vec<&str> = merged.queues.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ["\"a\"", "\"b\""]);
    let (a, b) = (&merged.queues[0], &merged.queues[1]);
    assert_eq!((a.spawned, a.completed), (6, 6));
    assert_eq!((b.spawned, b.completed), (3, 3));
    assert_eq!((a.shares, b.shares), (2, 5));
    assert_eq!((a.scheduler, b.scheduler), ("RunnableFifo", "RunnableFifo"));
    // Every counter is the sum of the same-named queue's over the cores.
    let cores: Vec<_> = stats.cores.iter().flatten().collect();
    for q in &merged.queues {
        let same = || {
            cores
                .iter()
                .flat_map(|c| c.queues.iter().filter(|o| o.name == q.name))
        };
        assert_eq!(q.polls, same().map(|o| o.polls).sum::<u64>());
        assert_eq!(q.runs, same().map(|o| o.runs).sum::<u64>());
        assert_eq!(q.service, same().map(|o| o.service).sum());
        assert_eq!(q.cancelled + q.panicked, 0);
    }
    assert_eq!(merged.polls, cores.iter().map(|c| c.polls).sum::<u64>());
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn shutdown_lets_work_finish_within_the_grace_period() {
    let pool = pool(2);
    // Tasks that end only once the shutdown has begun: they finish while
    // the cores drain.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Arc::new(std::sync::Mutex::new(go_rx));
    let mut handles = Vec::new();
    for core in 0..2 {
        let go = go_rx.clone();
        handles.push(
            pool.try_spawn_on(core, "bg", move || async move {
                // Yields until told; the core keeps running meanwhile.
                loop {
                    if go.lock().unwrap().try_recv().is_ok() {
                        return core;
                    }
                    tourbillon::task::yield_now().await;
                }
            })
            .unwrap(),
        );
    }
    let releaser = std::thread::spawn(move || {
        go_tx.send(()).unwrap();
        go_tx.send(()).unwrap();
    });
    let report = pool.shutdown(GRACE).unwrap();
    releaser.join().unwrap();
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.cancelled(), 0);
    for (core, h) in handles.into_iter().enumerate() {
        assert_eq!(block_on(h).unwrap(), core);
    }
    // Closed for new work, and closed once.
    assert!(matches!(
        block_on(pool.submit_to(0, "fg", || async {})),
        Err(SubmitError::Shutdown)
    ));
    assert!(matches!(
        pool.try_spawn_on(0, "fg", || async {}),
        Err(TrySubmitError::Shutdown(_))
    ));
    assert_eq!(pool.shutdown(GRACE), Err(ShutdownError::AlreadyShutDown));
    assert!(matches!(
        block_on(pool.set_shares(0, "fg", 2)),
        Err(ControlError::Shutdown)
    ));
}

#[test]
fn shutdown_cancels_what_outlives_the_grace_period() {
    let pool = pool(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    let mut keep = Vec::new();
    let mut handles = Vec::new();
    for core in 0..2 {
        for _ in 0..=core {
            let (tx, rx) = futures::channel::oneshot::channel::<()>();
            keep.push(tx);
            // Held by the closure, then by its future: counted once,
            // whether the task was polled before the shutdown or not.
            let guard = DropCount(dropped.clone());
            handles.push(
                pool.try_spawn_on(core, "fg", move || async move {
                    let _g = guard;
                    let _ = rx.await;
                })
                .unwrap(),
            );
        }
    }
    // Every task is spawned: the cores took the submissions above before
    // these (each core's inbox is taken in order).
    block_on(async {
        for core in 0..2 {
            pool.submit_to(core, "bg", || async {}).await.unwrap();
        }
    });
    let report = pool.shutdown(Duration::ZERO).unwrap();
    assert_eq!(report.cores[0].cancelled, 1);
    assert_eq!(report.cores[1].cancelled, 2);
    assert_eq!(
        report.cores[1].cancelled_by_queue,
        vec![("\"fg\"".to_string(), 2)]
    );
    assert!(report
        .to_string()
        .contains("2 task(s) cancelled, 2 on \"fg\""));
    assert!(!report.cores[0].drained && !report.is_clean());
    assert_eq!(dropped.load(Ordering::SeqCst), 3);
    for h in handles {
        assert!(block_on(h).unwrap_err().is_cancelled());
    }
    drop(keep);
}

#[test]
fn shutdown_wakes_senders_waiting_for_room() {
    let pool = Pool::builder()
        .cores(1)
        .placement(Placement::Unpinned)
        .queue_capacity(NonZeroUsize::new(1).unwrap())
        .executor(|_| queues())
        .build()
        .unwrap();
    let release = block_core(&pool, 0);
    let queued = pool.try_spawn_on(0, "fg", || async {}).unwrap();
    let p2 = pool.clone();
    let (waiting_tx, waiting_rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let mut fut = Box::pin(p2.spawn_on(0, "fg", || async {}));
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        waiting_tx.send(()).unwrap();
        block_on(fut).map(drop)
    });
    waiting_rx.recv().unwrap();
    let shutter = {
        let p3 = pool.clone();
        std::thread::spawn(move || p3.shutdown(Duration::ZERO).unwrap())
    };
    release.send(()).unwrap();
    let report = shutter.join().unwrap();
    // The waiter got room once the core polled the queued task, or saw the
    // shutdown: either way it is not left waiting.
    let waited = waiter.join().unwrap();
    assert!(
        matches!(waited, Ok(()) | Err(SubmitError::Shutdown)),
        "{waited:?}"
    );
    let _ = block_on(queued);
    assert_eq!(report.cores.len(), 1);
}

#[test]
fn shutdown_on_a_pool_thread_is_refused() {
    let pool = pool(1);
    let p2 = pool.clone();
    let refused =
        block_on(pool.submit_to(
            0,
            "fg",
            move || async move { p2.shutdown(GRACE).unwrap_err() },
        ))
        .unwrap();
    assert_eq!(refused, ShutdownError::OnPoolCore);
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn a_panic_that_ends_one_core_leaves_the_others_running() {
    let pool = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned)
        .executor(|_| queues().panic_policy(PanicPolicy::Propagate))
        .build()
        .unwrap();
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let victim = pool
        .try_spawn_on(0, "bg", move || async move { rx.await.ok() })
        .unwrap();
    // Core 0's thread unwinds out of its executor: its tasks are dropped.
    let boom = block_on(pool.submit_to(0, "fg", || async { panic!("core 0 fails") }));
    assert!(matches!(boom, Err(SubmitError::Join(_))), "{boom:?}");
    assert!(block_on(victim).unwrap_err().is_cancelled());
    drop(tx);
    // Core 1 serves on; core 0 refuses.
    assert_eq!(
        block_on(pool.submit_to(1, "fg", || async { 5 })).unwrap(),
        5
    );
    let stats = block_on(pool.stats());
    assert!(stats.cores[0].is_none());
    assert!(stats.cores[1].is_some());
    assert!(matches!(
        block_on(pool.submit_to(0, "fg", || async {})),
        Err(SubmitError::Shutdown | SubmitError::Join(_))
    ));
    let report = pool.shutdown(GRACE).unwrap();
    let msg = report.cores[0].panic.as_deref().unwrap();
    assert!(msg.contains("core 0 fails"), "{msg}");
    assert!(report.cores[1].drained && report.cores[1].panic.is_none());
}

#[test]
fn a_catching_core_reports_the_task_panic_and_runs_on() {
    let pool = pool(1);
    let out = block_on(pool.submit_to(0, "fg", || -> std::future::Ready<()> {
        panic!("in the closure")
    }));
    match out {
        Err(SubmitError::Join(e)) => assert!(e.is_panic()),
        other => panic!("expected a panic, got {other:?}"),
    }
    assert_eq!(
        block_on(pool.submit_to(0, "fg", || async { 1 })).unwrap(),
        1
    );
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn dropping_every_handle_stops_the_cores() {
    let pool = pool(2);
    let dropped = Arc::new(AtomicUsize::new(0));
    let (started_tx, started_rx) = mpsc::channel();
    for core in 0..2 {
        let d = dropped.clone();
        let started = started_tx.clone();
        drop(
            pool.try_spawn_on(core, "fg", move || async move {
                let _g = DropCount(d);
                started.send(()).unwrap();
                std::future::pending::<()>().await
            })
            .unwrap(),
        );
    }
    started_rx.recv().unwrap();
    started_rx.recv().unwrap();
    // The last handle gone, the cores drop their tasks (each guard counts).
    let (done_tx, done_rx) = mpsc::channel();
    struct Signal(mpsc::Sender<()>);
    impl Drop for Signal {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    for core in 0..2 {
        let s = Signal(done_tx.clone());
        drop(pool.try_spawn_on(core, "bg", move || async move {
            let _s = s;
            std::future::pending::<()>().await
        }));
    }
    drop(done_tx);
    drop(pool);
    // Each Signal is dropped when its core drops its tasks.
    for _ in 0..2 {
        done_rx.recv().unwrap();
    }
    assert!(dropped.load(Ordering::SeqCst) <= 2);
}

/// A tokio host per core: tokio timers and sockets work in the cores'
/// tasks (a listener on core 0, a client on core 1, over loopback).
#[cfg(feature = "tokio")]
#[test]
fn tokio_hosts_give_the_cores_tokio_sockets_and_timers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pool = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned)
        .host(tourbillon::pool::Host::Tokio)
        .executor(|_| queues())
        .build()
        .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let server = block_on(pool.spawn_on(0, "fg", move || async move {
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4];
        sock.read_exact(&mut buf).await.unwrap();
        sock.write_all(&buf).await.unwrap();
        current_core()
    }))
    .unwrap();
    let echoed = block_on(pool.submit_to(1, "fg", move || async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
        sock.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        sock.read_exact(&mut buf).await.unwrap();
        (buf, current_core())
    }))
    .unwrap();
    assert_eq!(echoed, (*b"ping", Some(1)));
    assert_eq!(block_on(server).unwrap(), Some(0));
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

/// An async-io host per core: async-io timers work in the cores' tasks.
#[cfg(feature = "async-io")]
#[test]
fn async_io_hosts_give_the_cores_async_io_timers() {
    let pool = Pool::builder()
        .cores(2)
        .placement(Placement::Unpinned)
        .host(tourbillon::pool::Host::AsyncIo)
        .executor(|_| queues())
        .build()
        .unwrap();
    for core in 0..2 {
        let out = block_on(pool.submit_to(core, "fg", || async {
            async_io::Timer::after(Duration::from_millis(1)).await;
            current_core()
        }))
        .unwrap();
        assert_eq!(out, Some(core));
    }
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn a_core_may_be_pinned_outside_the_builders_own_mask() {
    let cpus: Vec<usize> = core_affinity::get_core_ids()
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    if cpus.len() < 2 {
        // One CPU: nothing outside the builder's mask to pin to.
        return;
    }
    let (first, last) = (cpus[0], cpus[cpus.len() - 1]);
    // A builder thread pinned to the first CPU pins a core to the last.
    let seen = std::thread::spawn(move || {
        assert!(core_affinity::set_for_current(core_affinity::CoreId {
            id: first
        }));
        let pool = Pool::builder()
            .placement(Placement::Cpus(vec![last]))
            .executor(|_| queues())
            .build()
            .unwrap();
        let seen = block_on(pool.submit_to(0, "fg", || async {
            core_affinity::get_core_ids()
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect::<Vec<_>>()
        }))
        .unwrap();
        pool.shutdown(GRACE).unwrap();
        seen
    })
    .join()
    .unwrap();
    assert_eq!(seen, vec![last]);
}

#[test]
fn submission_errors_are_send_and_sync_errors() {
    fn send_sync_error<E: std::error::Error + Send + Sync + 'static>() {}
    send_sync_error::<SubmitError>();
    send_sync_error::<tourbillon::task::JoinError>();
    send_sync_error::<TrySubmitError<fn()>>();
    let pool = pool(1);
    // A panic's error, with a payload that is neither a string nor Sync,
    // goes where `Send + Sync` errors go (anyhow, `io::Error::other`).
    let err = block_on(pool.submit_to(0, "fg", || async {
        std::panic::panic_any(std::cell::Cell::new(7u8))
    }))
    .unwrap_err();
    let io = std::io::Error::other(err);
    assert!(io.to_string().contains("panicked"), "{io}");
    let err = block_on(pool.submit_to(0, "fg", || async { panic!("plain") })).unwrap_err();
    assert!(err.to_string().contains("\"plain\""), "{err}");
    let SubmitError::Join(join) = err else {
        panic!("expected Join")
    };
    assert_eq!(join.into_panic().downcast_ref::<&str>(), Some(&"plain"));
    assert!(pool.shutdown(GRACE).unwrap().is_clean());
}

#[test]
fn shutdown_counts_every_accepted_submission_it_cancels_by_queue() {
    let pool = pool(1);
    // The core's only task blocks its thread, then never completes.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (blocked_tx, blocked_rx) = mpsc::channel::<()>();
    let mut handles = vec![pool
        .try_spawn_on(0, "fg", move || async move {
            blocked_tx.send(()).unwrap();
            let _ = release_rx.recv();
            std::future::pending::<()>().await
        })
        .unwrap()];
    blocked_rx.recv().unwrap();
    // Accepted while the core is blocked: they wait in its inbox (or, once
    // it runs again, in its remote backlog or as tasks).
    for i in 0..200 {
        let key = if i % 5 < 3 { "fg" } else { "bg" };
        handles.push(
            pool.try_spawn_on(0, key, std::future::pending::<()>)
                .unwrap(),
        );
    }
    let shutter = {
        let p = pool.clone();
        std::thread::spawn(move || p.shutdown(Duration::ZERO).unwrap())
    };
    // The shutdown has begun once the pool refuses work (an unknown queue
    // is refused for the shutdown first, and is never accepted).
    while matches!(
        pool.try_spawn_on(0, "none", || async {}),
        Err(TrySubmitError::UnknownQueue(..))
    ) {
        std::thread::yield_now();
    }
    release_tx.send(()).unwrap();
    let report = shutter.join().unwrap();
    let cancelled = handles
        .into_iter()
        .map(|h| block_on(h).unwrap_err())
        .filter(|e| e.is_cancelled())
        .count();
    assert_eq!(cancelled, 201);
    assert_eq!(report.cancelled(), 201);
    let core = &report.cores[0];
    assert_eq!(core.cancelled, 201);
    assert_eq!(
        core.cancelled_by_queue,
        vec![("\"fg\"".to_string(), 121), ("\"bg\"".to_string(), 80)]
    );
    assert!(!core.drained && !report.is_clean());
    // The executor's own counters agree: every task it spawned ended.
    let stats = core.stats.as_ref().unwrap();
    assert_eq!(stats.live_tasks, 0);
    for q in &stats.queues {
        assert_eq!(q.spawned, q.completed + q.cancelled + q.panicked, "{q:?}");
        assert_eq!(q.remote_waiting, 0);
    }
}

/// A panic payload whose destructor panics.
struct PanickyPayload;

impl Drop for PanickyPayload {
    fn drop(&mut self) {
        panic!("payload drop panic");
    }
}

#[test]
fn a_propagated_panic_whose_payload_panics_on_drop_is_reported_as_the_tasks() {
    let pool = Pool::builder()
        .cores(1)
        .placement(Placement::Unpinned)
        .executor(|_| queues().panic_policy(PanicPolicy::Propagate))
        .build()
        .unwrap();
    let boom =
        block_on(pool.submit_to(0, "fg", || async { std::panic::panic_any(PanickyPayload) }));
    assert!(matches!(boom, Err(SubmitError::Join(_))), "{boom:?}");
    let report = pool.shutdown(GRACE).unwrap();
    assert_eq!(
        report.cores[0].panic.as_deref(),
        Some("a panic with a non-string payload")
    );
    assert_eq!(report.cores[0].cancelled, 0);
}

/// Sends on its channel when dropped.
struct Signal(mpsc::Sender<()>);

impl Drop for Signal {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[test]
fn tasks_holding_a_pool_handle_do_not_keep_the_cores_alive() {
    let pool = pool(2);
    let outside = pool.handle();
    let (started_tx, started_rx) = mpsc::channel();
    let (dropped_tx, dropped_rx) = mpsc::channel();
    for core in 0..2 {
        let handle = pool.handle();
        let started = started_tx.clone();
        let signal = Signal(dropped_tx.clone());
        drop(
            pool.try_spawn_on(core, "fg", move || async move {
                let _signal = signal;
                started.send(()).unwrap();
                // Holds the handle for as long as it lives.
                loop {
                    let _ = handle.load(core);
                    tourbillon::task::yield_now().await;
                }
            })
            .unwrap(),
        );
    }
    started_rx.recv().unwrap();
    started_rx.recv().unwrap();
    drop(dropped_tx);
    // The only `Pool` dropped: each core drops its task (and its handle).
    drop(pool);
    for _ in 0..2 {
        dropped_rx.recv().unwrap();
    }
    assert!(matches!(
        outside.try_spawn_on(0, "fg", || async {}),
        Err(TrySubmitError::Shutdown(_))
    ));
    assert!(matches!(
        block_on(outside.submit_to(1, "fg", || async {})),
        Err(SubmitError::Shutdown)
    ));
    assert!(matches!(
        block_on(outside.set_shares(0, "fg", 2)),
        Err(ControlError::Shutdown)
    ));
    assert_eq!(block_on(outside.stats()).cores, vec![None, None]);
}
