//! The executor nested in a host runtime with `Executor::run_until`: tokio's
//! `current_thread` runtime (timers, TCP over loopback), tokio's `LocalSet`,
//! and `futures::executor` for a runtime-agnostic host; and what a task that
//! uses a tokio timer or socket under plain `block_on`, with no reactor, gets.
//!
//! Timing is never asserted: sleeps are a few milliseconds and only the
//! completion and the order of events are checked. The tests of the order
//! in which sleepers wake run on tokio's paused clock (`start_paused`,
//! tokio's `test-util`), which moves only when the runtime is idle: on the
//! real clock a slow run (valgrind) could pass several deadlines before the
//! sleepers were first polled, and they then completed in spawn order.

mod hosted;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use hosted::{
    assert_echoed, echo_over_loopback, executor, message, tokio_rt_paused, MESSAGES, Q, SLEEPERS,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tourbillon::task::yield_now;
use tourbillon::Executor;

/// tokio's `current_thread` runtime on the real clock (see
/// [`tokio_rt_paused`]).
fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

type Log = Rc<RefCell<Vec<String>>>;

fn log() -> Log {
    Rc::new(RefCell::new(Vec::new()))
}

fn push(log: &Log, entry: impl Into<String>) {
    log.borrow_mut().push(entry.into());
}

fn position(log: &[String], entry: &str) -> usize {
    log.iter()
        .position(|e| e == entry)
        .unwrap_or_else(|| panic!("{entry:?} not in {log:?}"))
}

// ---------------------------------------------------------------- (a) timers

/// Spawns one task per `(name, queue, ms)` that sleeps on tokio's timer
/// until `start + ms` and then logs its name.
fn spawn_sleepers(
    ex: &Executor<Q>,
    start: tokio::time::Instant,
    sleepers: &[(&'static str, Q, u64)],
    done: &Log,
) -> Vec<tourbillon::task::JoinHandle<u64>> {
    sleepers
        .iter()
        .map(|&(name, q, ms)| {
            let done = done.clone();
            ex.spawn(q, async move {
                tokio::time::sleep_until(start + Duration::from_millis(ms)).await;
                push(&done, name);
                ms
            })
            .unwrap()
        })
        .collect()
}

/// Tasks of one queue sleep on tokio's timer until distinct deadlines,
/// measured from one instant: they complete, in deadline order (timers that
/// fire in the same host tick wake in deadline order, and a queue's
/// `RunnableFifo` keeps the wake order).
#[test]
fn tokio_sleeps_complete_in_deadline_order() {
    let ex = executor();
    let rt = tokio_rt_paused();
    let done = log();
    let out = rt.block_on(ex.run_until(async {
        let start = tokio::time::Instant::now();
        // Spawned out of deadline order.
        let handles = spawn_sleepers(
            &ex,
            start,
            &[
                ("five", Q::Fg, 5),
                ("one", Q::Fg, 1),
                ("three", Q::Fg, 3),
                ("two", Q::Fg, 2),
                ("four", Q::Fg, 4),
            ],
            &done,
        );
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    }));
    assert_eq!(out, 15);
    assert_eq!(*done.borrow(), ["one", "two", "three", "four", "five"]);
    let st = ex.stats();
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.queues[0].completed, 5);
}

/// The same across two queues: every sleeper completes, and each queue's
/// sleepers complete in deadline order. (Between queues the order of tasks
/// that become runnable in the same host tick is EEVDF's choice, so only
/// the per-queue order is asserted.)
#[test]
fn tokio_sleeps_on_two_queues() {
    let ex = executor();
    let rt = tokio_rt_paused();
    let done = log();
    rt.block_on(ex.run_until(async {
        let start = tokio::time::Instant::now();
        let handles = spawn_sleepers(&ex, start, &SLEEPERS, &done);
        for h in handles {
            h.await.unwrap();
        }
    }));
    let done = done.borrow();
    assert_eq!(done.len(), 6);
    let of = |prefix: &str| -> Vec<&str> {
        done.iter()
            .map(String::as_str)
            .filter(|e| e.starts_with(prefix))
            .collect()
    };
    assert_eq!(of("fg"), ["fg1", "fg3", "fg5"]);
    assert_eq!(of("bg"), ["bg1", "bg2", "bg4"]);
    let st = ex.stats();
    assert_eq!(st.queues[0].completed, 3);
    assert_eq!(st.queues[1].completed, 3);
}

/// A task sleeps repeatedly, and a second one waits for the first through a
/// tourbillon join handle: each step happens in order.
#[test]
fn repeated_sleeps_and_joins() {
    let ex = executor();
    let rt = tokio_rt();
    let steps = log();
    rt.block_on(ex.run_until(async {
        let s = steps.clone();
        let sleeper = ex
            .spawn(Q::Bg, async move {
                for i in 0..5 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    push(&s, format!("sleep {i}"));
                }
                "slept"
            })
            .unwrap();
        let s = steps.clone();
        let waiter = ex
            .spawn(Q::Fg, async move {
                let what = sleeper.await.unwrap();
                push(&s, format!("joined {what}"));
            })
            .unwrap();
        waiter.await.unwrap();
    }));
    assert_eq!(
        *steps.borrow(),
        [
            "sleep 0",
            "sleep 1",
            "sleep 2",
            "sleep 3",
            "sleep 4",
            "joined slept"
        ]
    );
}

/// The main future of `run_until` itself may use the host's timers, and
/// `#[tokio::test]` works as a host.
#[tokio::test(flavor = "current_thread")]
async fn main_future_uses_host_timers() {
    let ex = executor();
    let order = log();
    let o = order.clone();
    ex.run_until(async {
        let h = ex
            .spawn(Q::Fg, async move {
                tokio::time::sleep(Duration::from_millis(3)).await;
                push(&o, "task");
            })
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
        push(&order, "main");
        h.await.unwrap();
    })
    .await;
    assert_eq!(*order.borrow(), ["main", "task"]);
}

// ------------------------------------------------------------ (b) TCP echo

/// Echoes every byte of one connection until the peer closes it.
async fn echo(mut stream: TcpStream) -> usize {
    let mut buf = [0u8; 256];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        if n == 0 {
            return total;
        }
        stream.write_all(&buf[..n]).await.unwrap();
        total += n;
    }
}

/// Sends `MESSAGES` messages and checks each echo; returns the bytes sent.
async fn client(addr: std::net::SocketAddr, id: usize) -> usize {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut sent = 0;
    for m in 0..MESSAGES {
        let msg = message(id, m);
        stream.write_all(msg.as_bytes()).await.unwrap();
        let mut back = vec![0u8; msg.len()];
        stream.read_exact(&mut back).await.unwrap();
        assert_eq!(back, msg.as_bytes(), "client {id} message {m}");
        sent += msg.len();
        if m % 5 == 4 {
            // Mix in a tourbillon yield (which waits for a host turn).
            yield_now().await;
        }
    }
    sent
}

/// A tourbillon task runs a tokio TCP echo server on loopback, with a task
/// per connection; other tourbillon tasks, on another queue, are its
/// clients ([`echo_over_loopback`]).
#[test]
fn tcp_echo_over_loopback() {
    let ex = executor();
    let rt = tokio_rt();
    let out = rt.block_on(ex.run_until(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = async move || listener.accept().await.unwrap().0;
        echo_over_loopback(&ex, accept, echo, |id| client(addr, id)).await
    }));
    assert_echoed(&ex, out);
}

// ------------------------------------------------------------ (c) LocalSet

/// Inside a `LocalSet`: tourbillon tasks sleep on tokio's timer, a
/// tourbillon task awaits a tokio local task, and a tokio local task awaits
/// a tourbillon task.
#[test]
fn inside_a_local_set() {
    let ex = executor();
    let rt = tokio_rt();
    let local = tokio::task::LocalSet::new();
    let order = log();
    let out = local.block_on(&rt, async {
        let o = order.clone();
        let t_task = ex
            .spawn(Q::Fg, async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                // A tokio local task spawned from a tourbillon task.
                let o2 = o.clone();
                let tokio_task = tokio::task::spawn_local(async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    push(&o2, "tokio child");
                    20
                });
                let v = tokio_task.await.unwrap();
                push(&o, "tourbillon parent");
                v + 1
            })
            .unwrap();
        // A tokio local task that awaits a tourbillon join handle.
        let o = order.clone();
        let bg = ex
            .spawn(Q::Bg, async move {
                tokio::time::sleep(Duration::from_millis(1)).await;
                push(&o, "tourbillon child");
                10
            })
            .unwrap();
        let o = order.clone();
        let tokio_parent = tokio::task::spawn_local(async move {
            let v = bg.await.unwrap();
            push(&o, "tokio parent");
            v + 1
        });
        ex.run_until(async move { t_task.await.unwrap() + tokio_parent.await.unwrap() })
            .await
    });
    assert_eq!(out, 21 + 11);
    let order = order.borrow();
    assert!(position(&order, "tourbillon child") < position(&order, "tokio parent"));
    assert!(position(&order, "tokio child") < position(&order, "tourbillon parent"));
    assert_eq!(order.len(), 4);
}

// ------------------------------------- (d) yields wait for the next host turn

/// A tokio task on the `LocalSet` runs between the yields of tourbillon
/// tasks: a nested `yield_now` gives the host a turn.
#[test]
fn yields_let_the_host_run_in_between() {
    const YIELDS: usize = 5;
    let ex = executor();
    let rt = tokio_rt();
    let local = tokio::task::LocalSet::new();
    let events = log();
    let e = events.clone();
    let finished = Rc::new(std::cell::Cell::new(false));
    let f = finished.clone();
    // The host task keeps going until the tourbillon tasks are done (with a
    // bound, so that a regression fails the assertions instead of hanging).
    let host = local.spawn_local(async move {
        let mut i = 0;
        while !f.get() && i < 100_000 {
            push(&e, format!("host {i}"));
            tokio::task::yield_now().await;
            i += 1;
        }
    });
    local.block_on(&rt, async {
        let handles: Vec<_> = [Q::Fg, Q::Bg]
            .into_iter()
            .map(|q| {
                let e = events.clone();
                ex.spawn(q, async move {
                    for i in 0..YIELDS {
                        push(&e, format!("{q:?} {i}"));
                        yield_now().await;
                    }
                })
                .unwrap()
            })
            .collect();
        ex.run_until(async {
            for h in handles {
                h.await.unwrap();
            }
        })
        .await;
        finished.set(true);
        host.await.unwrap();
    });
    let events = events.borrow();
    let host0 = position(&events, "host 0");
    for q in ["Fg", "Bg"] {
        let last = position(&events, &format!("{q} {}", YIELDS - 1));
        assert!(
            host0 < last,
            "the host ran only after all yields of {q}: {events:?}"
        );
        // Each yield waits for a host turn: the host task logs between any
        // two consecutive iterations of a tourbillon task.
        for i in 1..YIELDS {
            let a = position(&events, &format!("{q} {}", i - 1));
            let b = position(&events, &format!("{q} {i}"));
            assert!(
                events[a..b].iter().any(|e| e.starts_with("host")),
                "{q} {i} did not wait for a host turn: {events:?}"
            );
        }
    }
}

/// Without a `LocalSet` the same holds for the host's own work: each nested
/// yield waits for a new driver turn, so the host regains control between
/// the iterations of a yielding task.
#[test]
fn yield_ends_the_turn_for_the_main_future() {
    let ex = executor();
    let rt = tokio_rt();
    let events = log();
    let e = events.clone();
    let h = ex
        .spawn(Q::Fg, async move {
            for i in 0..3 {
                push(&e, format!("task {i}"));
                yield_now().await;
            }
        })
        .unwrap();
    let turns_before = ex.stats().turns;
    rt.block_on(ex.run_until(h)).unwrap();
    assert_eq!(*events.borrow(), ["task 0", "task 1", "task 2"]);
    // Each yield waited for a new turn: at least one turn per iteration
    // (the last one completes the task).
    assert!(ex.stats().turns - turns_before >= 4, "{:?}", ex.stats());
}

// ------------------------------------- (e) pending tasks resume on next run

/// Tasks still pending when `run_until`'s future completes stay in the
/// executor and resume on the next `run_until`, including a timer wake that
/// arrived while the executor was not being driven.
#[test]
fn pending_tasks_resume_on_next_run_until() {
    let ex = executor();
    let rt = tokio_rt();
    let progress = Rc::new(RefCell::new(0u32));
    let p = progress.clone();
    let yielder = ex
        .spawn(Q::Bg, async move {
            for _ in 0..1000 {
                *p.borrow_mut() += 1;
                yield_now().await;
            }
        })
        .unwrap();
    let sleeper = ex
        .spawn(Q::Fg, async {
            tokio::time::sleep(Duration::from_millis(3)).await;
            "woke"
        })
        .unwrap();

    // First run: a main future that finishes after a couple of turns.
    rt.block_on(ex.run_until(async {
        yield_now().await;
        yield_now().await;
    }));
    let first = *progress.borrow();
    assert!((1..1000).contains(&first), "progress {first}");
    assert!(!yielder.is_finished());
    assert!(!sleeper.is_finished());

    // Without the executor being driven, nothing moves; the sleeper's timer
    // fires meanwhile (its wake goes to the inbox).
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(5)).await });
    assert_eq!(*progress.borrow(), first);
    assert!(!sleeper.is_finished());

    // Second run: both resume and complete.
    let woke = rt.block_on(ex.run_until(async {
        let w = sleeper.await.unwrap();
        yielder.await.unwrap();
        w
    }));
    assert_eq!(woke, "woke");
    assert_eq!(*progress.borrow(), 1000);
    assert_eq!(ex.stats().live_tasks, 0);
}

/// A task whose yield is deferred to the next host turn survives a
/// `run_until` that ends after one turn, and then completes when the
/// executor is driven standalone by `block_on`.
#[test]
fn pending_task_resumes_under_block_on_after_nesting() {
    let ex = executor();
    let rt = tokio_rt();
    let h = ex
        .spawn(Q::Fg, async {
            for _ in 0..3 {
                yield_now().await;
            }
            3
        })
        .unwrap();
    // Nested: run one turn (the task yields and is deferred), then stop.
    rt.block_on(ex.run_until(yield_now()));
    assert!(!h.is_finished());
    // Standalone: the deferred task is released and completes.
    assert_eq!(ex.block_on(h).unwrap(), 3);
}

// ------------------------------------------------ futures::executor as host

/// Nested in `futures::executor::block_on`: yields, and a wake from another
/// thread (a futures oneshot sent by a std thread) reach the task through
/// the host's waker.
#[test]
fn nested_in_futures_block_on() {
    let ex = executor();
    let (tx, rx) = futures::channel::oneshot::channel::<u32>();
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2));
        tx.send(5).unwrap();
    });
    let out = futures::executor::block_on(ex.run_until(async {
        let waiter = ex.spawn(Q::Fg, async move { rx.await.unwrap() }).unwrap();
        let yielders: Vec<_> = (0..10u32)
            .map(|i| {
                ex.spawn(Q::Bg, async move {
                    for _ in 0..i {
                        yield_now().await;
                    }
                    i
                })
                .unwrap()
            })
            .collect();
        let mut sum = waiter.await.unwrap();
        for y in yielders {
            sum += y.await.unwrap();
        }
        sum
    }));
    sender.join().unwrap();
    assert_eq!(out, 5 + 45);
    assert_eq!(ex.stats().live_tasks, 0);
}

/// Nested in a `futures::executor::LocalPool`, next to a pool task: the
/// pool task runs between tourbillon yields, as with tokio's `LocalSet`.
#[test]
fn nested_in_futures_local_pool() {
    use futures::task::LocalSpawnExt;

    let ex = executor();
    let mut pool = futures::executor::LocalPool::new();
    let events = log();
    let e = events.clone();
    pool.spawner()
        .spawn_local(async move {
            push(&e, "pool");
        })
        .unwrap();
    let e = events.clone();
    let h = ex
        .spawn(Q::Fg, async move {
            for i in 0..4 {
                push(&e, format!("task {i}"));
                yield_now().await;
            }
        })
        .unwrap();
    pool.run_until(ex.run_until(h)).unwrap();
    let events = events.borrow();
    let pool_at = position(&events, "pool");
    assert!(pool_at < position(&events, "task 3"), "{events:?}");
    assert_eq!(events.len(), 5);
}

/// tourbillon inside a task of another tourbillon executor, run in the
/// same outer poll as a `yield_now` of the outer task (a `join` of the
/// yield and a `run_until_stalled` of the inner executor): the outer task's
/// yield is recorded before the inner executor runs (and completes) its
/// yielding tasks, and must survive that run (the inner run saves and
/// restores the outer poll's marker). Nothing else wakes the outer task: a
/// lost yield would leave it waiting forever, and `block_on` would never
/// return.
#[test]
fn outer_yield_survives_an_inner_run_in_the_same_poll() {
    let outer = executor();
    let inner = Rc::new(executor());
    let inner2 = inner.clone();
    let out = outer.block_on(async {
        let h = outer
            .spawn(Q::Fg, async move {
                let mut polls = 0;
                for _ in 0..20 {
                    let ((), n) = futures::future::join(yield_now(), async {
                        for _ in 0..3 {
                            // Detached: no join handle wakes the outer task.
                            drop(
                                inner2
                                    .spawn(Q::Bg, async {
                                        yield_now().await;
                                    })
                                    .unwrap(),
                            );
                        }
                        inner2.run_until_stalled()
                    })
                    .await;
                    polls += n;
                }
                polls
            })
            .unwrap();
        h.await.unwrap()
    });
    // Each round: 3 tasks, each polled twice (its yield, then completion).
    assert_eq!(out, 20 * 3 * 2);
    assert_eq!(inner.stats().live_tasks, 0);
    assert_eq!(outer.stats().live_tasks, 0);
}

/// The main future of a driver nested in a task of another executor is
/// not a task: `try_id` is `None` in it (under `block_on`, and under
/// `run_until` across a yield), and the outer task's id is back once the
/// nested call returns.
#[test]
fn a_nested_drivers_main_future_is_outside_the_enclosing_task() {
    use tourbillon::task::{id, try_id};
    let outer = executor();
    let inner = Rc::new(executor());
    let inner2 = inner.clone();
    let h = outer
        .spawn(Q::Fg, async move {
            let in_block_on = inner2.block_on(async { try_id() });
            let after_block_on = id();
            let in_run_until = inner2
                .run_until(async {
                    let first = try_id();
                    yield_now().await;
                    (first, try_id())
                })
                .await;
            (in_block_on, after_block_on, in_run_until, id())
        })
        .unwrap();
    let me = Some(h.id());
    let (in_block_on, after_block_on, in_run_until, after_run_until) = outer.block_on(h).unwrap();
    assert_eq!(in_block_on, None);
    assert_eq!(in_run_until, (None, None));
    assert_eq!((Some(after_block_on), Some(after_run_until)), (me, me));
}

// ------------------------------------------ (f) block_on alone has no reactor

/// The panic message of a task's `JoinError`, which must be a `String`.
fn panic_string(err: tourbillon::task::JoinError) -> String {
    let payload = err.into_panic();
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => panic!("payload is not a String: {:?}", p.downcast_ref::<&str>()),
    }
}

/// A task that sleeps on tokio's timer under plain `block_on` (no tokio
/// runtime entered): tokio panics with "no reactor running", and the
/// task's `JoinError` carries a `String` that says to nest the executor
/// with `run_until` in a tokio runtime, followed by tokio's message.
#[test]
fn tokio_timer_under_block_on_names_run_until() {
    let ex = executor();
    let err = ex.block_on(async {
        ex.spawn(Q::Fg, async {
            tokio::time::sleep(Duration::from_millis(1)).await;
        })
        .unwrap()
        .await
        .unwrap_err()
    });
    assert!(err.is_panic());
    let shown = err.to_string();
    assert!(shown.contains("run_until"), "{shown}");
    let msg = panic_string(err);
    assert!(msg.starts_with("tourbillon: "), "{msg}");
    assert!(msg.contains("Executor::block_on has no reactor"), "{msg}");
    assert!(msg.contains("rt.block_on(ex.run_until(fut))"), "{msg}");
    // tokio's own message is kept at the end.
    assert!(
        msg.ends_with(
            "there is no reactor running, must be called from the context of a Tokio 1.x runtime"
        ),
        "{msg}"
    );
    assert_eq!(ex.stats().live_tasks, 0);
}

/// The same for a tokio socket: registering a listener with tokio's
/// reactor under plain `block_on`.
#[test]
fn tokio_socket_under_block_on_names_run_until() {
    let ex = executor();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let err = ex.block_on(async {
        ex.spawn(Q::Bg, async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            listener.local_addr().unwrap()
        })
        .unwrap()
        .await
        .unwrap_err()
    });
    let msg = panic_string(err);
    assert!(msg.starts_with("tourbillon: "), "{msg}");
    assert!(msg.contains("run_until"), "{msg}");
    assert!(msg.contains("no reactor running"), "{msg}");
}

/// Any other panic keeps its payload as it is (a `&str` stays a `&str`),
/// and the same tokio timer works once the executor runs in a tokio
/// runtime with `run_until`.
#[test]
fn other_panics_unchanged_and_run_until_fixes_it() {
    let ex = executor();
    let err = ex.block_on(async {
        ex.spawn(Q::Fg, async { panic!("boom") })
            .unwrap()
            .await
            .unwrap_err()
    });
    assert_eq!(err.into_panic().downcast_ref::<&str>(), Some(&"boom"));

    let slept = tokio_rt_paused().block_on(ex.run_until(async {
        ex.spawn(Q::Fg, async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            "slept"
        })
        .unwrap()
        .await
        .unwrap()
    }));
    assert_eq!(slept, "slept");
}
