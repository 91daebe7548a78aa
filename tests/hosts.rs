//! Several `run_until` futures of one executor pending in one host at once
//! (tasks of a tokio `LocalSet`, branches of a `FuturesUnordered` or of a
//! `join`): each must be woken for the executor's work, also after the
//! others completed or were dropped.
//!
//! Everything runs on tokio's paused clock (`start_paused`): time moves
//! only when the runtime is idle, straight to the next timer, so the
//! sleepers wake in a fixed order, and a lost wake-up does not hang the test:
//! the runtime goes idle, the clock jumps to the bound of
//! [`bounded`] and the test fails there.

mod hosted;

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use hosted::{executor, tokio_rt_paused, Q};
use tokio::task::LocalSet;
use tourbillon::task::{yield_now, JoinHandle};
use tourbillon::Executor;

type Log = Rc<RefCell<Vec<u32>>>;

/// Runs `fut` with a bound of an hour of tokio's paused clock: reached
/// at once when every host waits and nothing wakes them (a lost wake-up).
async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(3600), fut)
        .await
        .expect("a run_until was never woken again (lost wake-up)")
}

/// A task of `ex` that sleeps `ms` on tokio's timer and returns `out`.
fn sleeper(ex: &Executor<Q>, ms: u64, out: u32) -> JoinHandle<u32> {
    ex.spawn(Q::Fg, async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        out
    })
    .unwrap()
}

/// A `run_until` whose future spawns a sleeper of `ms`, awaits it, and
/// logs `out`: after its first poll it needs the executor again only when
/// the timer fires.
fn job<'a>(ex: &'a Executor<Q>, ms: u64, out: u32, log: &Log) -> impl Future<Output = u32> + 'a {
    let log = log.clone();
    ex.run_until(async move {
        let v = sleeper(ex, ms, out).await.unwrap();
        log.borrow_mut().push(v);
        v
    })
}

/// [`job`] as a `LocalSet` task, with the executor shared.
fn spawn_job(ex: &Rc<Executor<Q>>, ms: u64, out: u32, log: &Log) -> tokio::task::JoinHandle<u32> {
    let (ex, log) = (ex.clone(), log.clone());
    tokio::task::spawn_local(async move { job(&ex, ms, out, &log).await })
}

/// Two `run_until` tasks of one `LocalSet`: the second one polled finishes
/// first; the first one's timer fires later and must still reach it.
#[test]
fn two_run_untils_in_a_local_set() {
    let ex = Rc::new(executor());
    let rt = tokio_rt_paused();
    let log = Log::default();
    let out = LocalSet::new().block_on(&rt, async {
        bounded(async {
            let a = spawn_job(&ex, 20, 1, &log);
            let b = spawn_job(&ex, 10, 2, &log);
            (a.await.unwrap(), b.await.unwrap())
        })
        .await
    });
    assert_eq!(out, (1, 2));
    assert_eq!(*log.borrow(), [2, 1]);
    assert_eq!(ex.stats().live_tasks, 0);
}

/// Three `run_until` tasks finishing in the order second, third, first:
/// each of the remaining ones is still woken after each completion.
#[test]
fn three_run_untils_in_a_local_set() {
    let ex = Rc::new(executor());
    let rt = tokio_rt_paused();
    let log = Log::default();
    let out = LocalSet::new().block_on(&rt, async {
        bounded(async {
            let a = spawn_job(&ex, 30, 1, &log);
            let b = spawn_job(&ex, 10, 2, &log);
            let c = spawn_job(&ex, 20, 3, &log);
            (a.await.unwrap(), b.await.unwrap(), c.await.unwrap())
        })
        .await
    });
    assert_eq!(out, (1, 2, 3));
    assert_eq!(*log.borrow(), [2, 3, 1]);
    assert_eq!(ex.stats().live_tasks, 0);
}

/// Three `run_until` futures in a `FuturesUnordered` inside one tokio
/// `block_on` (no `LocalSet`): each branch has a waker of its own.
#[test]
fn three_run_untils_in_futures_unordered() {
    let ex = executor();
    let rt = tokio_rt_paused();
    let log = Log::default();
    let done: Vec<u32> = rt.block_on(bounded(
        [(30, 1), (10, 2), (20, 3)]
            .into_iter()
            .map(|(ms, out)| job(&ex, ms, out, &log))
            .collect::<FuturesUnordered<_>>()
            .collect(),
    ));
    assert_eq!(done, [2, 3, 1]);
    assert_eq!(*log.borrow(), [2, 3, 1]);
    assert_eq!(ex.stats().live_tasks, 0);
}

/// `futures::future::join` of three `run_until` futures: one host waker
/// shared by all three.
#[test]
fn three_run_untils_joined() {
    let ex = executor();
    let rt = tokio_rt_paused();
    let log = Log::default();
    let out = rt.block_on(bounded(futures::future::join3(
        job(&ex, 30, 1, &log),
        job(&ex, 10, 2, &log),
        job(&ex, 20, 3, &log),
    )));
    assert_eq!(out, (1, 2, 3));
    assert_eq!(*log.borrow(), [2, 3, 1]);
    assert_eq!(ex.stats().live_tasks, 0);
}

/// The remaining `run_until` is woken by a tokio oneshot that a tokio task
/// fires once the other `run_until` completed: the executor's work then
/// comes from the host, between two of its polls.
#[test]
fn run_until_woken_by_a_host_task_after_the_other_completed() {
    let ex = Rc::new(executor());
    let rt = tokio_rt_paused();
    let out = LocalSet::new().block_on(&rt, async {
        bounded(async {
            let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
            let waiter = ex
                .spawn(Q::Bg, async move { rx.await.unwrap() + 1 })
                .unwrap();
            let a = {
                let ex = ex.clone();
                tokio::task::spawn_local(async move {
                    ex.run_until(async { waiter.await.unwrap() }).await
                })
            };
            let b = {
                let ex = ex.clone();
                tokio::task::spawn_local(async move {
                    ex.run_until(async {
                        let h = ex
                            .spawn(Q::Fg, async {
                                for _ in 0..3 {
                                    yield_now().await;
                                }
                                5
                            })
                            .unwrap();
                        h.await.unwrap()
                    })
                    .await
                })
            };
            let fired = tokio::task::spawn_local(async move {
                let v = b.await.unwrap();
                // `b`'s run_until is done: only `a` can run `waiter` now.
                tokio::task::yield_now().await;
                tx.send(v).unwrap();
                v
            });
            (a.await.unwrap(), fired.await.unwrap())
        })
        .await
    });
    assert_eq!(out, (6, 5));
    assert_eq!(ex.stats().live_tasks, 0);
}

/// A `run_until` completes right after its future made a task runnable
/// (a wake on the executor's thread while it is driven, which wakes no
/// host): the pending `run_until` that awaits that task is woken to run it.
#[test]
fn completing_run_until_hands_its_work_to_the_other() {
    let ex = Rc::new(executor());
    let rt = tokio_rt_paused();
    let out = LocalSet::new().block_on(&rt, async {
        bounded(async {
            let (tx, rx) = futures::channel::oneshot::channel::<u32>();
            let waiter = ex
                .spawn(Q::Bg, async move { rx.await.unwrap() * 2 })
                .unwrap();
            let a = {
                let ex = ex.clone();
                tokio::task::spawn_local(async move {
                    ex.run_until(async { waiter.await.unwrap() }).await
                })
            };
            let b = {
                let ex = ex.clone();
                tokio::task::spawn_local(async move {
                    // Polled after `a`'s first poll ran `waiter` up to its
                    // `rx.await`; completes at its first poll.
                    ex.run_until(async {
                        tx.send(21).unwrap();
                    })
                    .await
                })
            };
            b.await.unwrap();
            a.await.unwrap()
        })
        .await
    });
    assert_eq!(out, 42);
    assert_eq!(ex.stats().live_tasks, 0);
}

/// A `run_until` dropped while pending (its host gave up on it, here a
/// timeout): the other one is still woken, and the dropped one's host
/// waker is not kept.
#[test]
fn dropped_run_until_leaves_the_other_woken() {
    let ex = Rc::new(executor());
    let rt = tokio_rt_paused();
    let log = Log::default();
    let out = LocalSet::new().block_on(&rt, async {
        bounded(async {
            let a = spawn_job(&ex, 20, 1, &log);
            let b = {
                let ex = ex.clone();
                tokio::task::spawn_local(async move {
                    tokio::time::timeout(
                        Duration::from_millis(10),
                        ex.run_until(std::future::pending::<()>()),
                    )
                    .await
                    .is_err()
                })
            };
            (a.await.unwrap(), b.await.unwrap())
        })
        .await
    });
    assert_eq!(out, (1, true));
    assert_eq!(*log.borrow(), [1]);
    assert_eq!(ex.stats().live_tasks, 0);
}
