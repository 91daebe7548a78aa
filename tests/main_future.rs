//! The main future of `block_on` / `run_until`: it belongs to no queue, the
//! free `spawn` called from it goes to the executor's default queue
//! (`Builder::default_queue`, the first declared queue unless named), and
//! tokio's "no reactor" panic of a main future under `block_on` is
//! explained as a task's `JoinError` explains it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use tourbillon::error::BuildError;
use tourbillon::task::JoinSet;
use tourbillon::{spawn, try_spawn, Builder};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Bg,
    Fg,
}

/// `.queue(Bg, 1).queue(Fg, 99)`, with `Fg` named as the default queue when
/// `default` is `Some`.
fn bg_first(default: Option<Q>) -> tourbillon::Executor<Q> {
    let b = Builder::new().queue(Q::Bg, 1).queue(Q::Fg, 99);
    match default {
        Some(q) => b.default_queue(q),
        None => b,
    }
    .build()
    .unwrap()
}

fn spawned(ex: &tourbillon::Executor<Q>, q: Q) -> u64 {
    ex.queue_stats(q).unwrap().spawned
}

#[test]
fn without_default_queue_the_main_future_spawns_onto_the_first_declared_queue() {
    let ex = bg_first(None);
    ex.block_on(async { spawn(async {}).await.unwrap() });
    assert_eq!((spawned(&ex, Q::Bg), spawned(&ex, Q::Fg)), (1, 0));
}

#[test]
fn default_queue_takes_spawns_of_the_main_future_under_block_on() {
    let ex = bg_first(Some(Q::Fg));
    let out = ex.block_on(async {
        let a = spawn(async { 1 });
        let b = try_spawn(async { 2 }).unwrap();
        let mut set = JoinSet::new();
        set.spawn(async { 3 });
        let c = set.join_next().await.unwrap().unwrap();
        a.await.unwrap() + b.await.unwrap() + c
    });
    assert_eq!(out, 6);
    assert_eq!((spawned(&ex, Q::Bg), spawned(&ex, Q::Fg)), (0, 3));
}

#[test]
fn default_queue_takes_spawns_of_the_main_future_under_run_until() {
    let ex = bg_first(Some(Q::Fg));
    let out =
        futures::executor::block_on(ex.run_until(async { spawn(async { 5 }).await.unwrap() }));
    assert_eq!(out, 5);
    assert_eq!((spawned(&ex, Q::Bg), spawned(&ex, Q::Fg)), (0, 1));
}

#[test]
fn a_task_spawns_onto_its_own_queue_whatever_the_default() {
    let ex = bg_first(Some(Q::Fg));
    ex.block_on(async {
        ex.spawn(Q::Bg, async { spawn(async {}).await.unwrap() })
            .unwrap()
            .await
            .unwrap()
    });
    // The parent and its child on Bg, nothing on Fg.
    assert_eq!((spawned(&ex, Q::Bg), spawned(&ex, Q::Fg)), (2, 0));
}

#[test]
fn default_queue_must_be_declared() {
    let err = Builder::new()
        .queue("bg", 1)
        .default_queue("fg")
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::UnknownDefaultQueue {
            queue: "\"fg\"".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "default_queue(\"fg\") names no declared queue: declare it with Builder::queue"
    );
}

/// The payload of a panic that must be a `String`.
fn string_payload(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => panic!("payload is not a String: {:?}", p.downcast_ref::<&str>()),
    }
}

#[test]
fn tokio_timer_in_the_main_future_of_block_on_is_explained() {
    let ex = bg_first(None);
    let payload = catch_unwind(AssertUnwindSafe(|| {
        ex.block_on(async { tokio::time::sleep(Duration::from_millis(1)).await })
    }))
    .unwrap_err();
    let msg = string_payload(payload);
    assert!(
        msg.starts_with("tourbillon: the main future of block_on / run_until"),
        "{msg}"
    );
    assert!(msg.contains("Executor::block_on has no reactor"), "{msg}");
    assert!(msg.contains("rt.block_on(ex.run_until(fut))"), "{msg}");
    assert!(
        msg.ends_with(
            "there is no reactor running, must be called from the context of a Tokio 1.x runtime"
        ),
        "{msg}"
    );
    // The executor is whole: it runs again.
    assert_eq!(ex.block_on(async { spawn(async { 7 }).await.unwrap() }), 7);
}

#[test]
fn tokio_listener_in_the_main_future_of_block_on_is_explained() {
    let ex = bg_first(None);
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let payload = catch_unwind(AssertUnwindSafe(|| {
        ex.block_on(async move { tokio::net::TcpListener::from_std(std_listener).map(|_| ()) })
    }))
    .unwrap_err();
    let msg = string_payload(payload);
    assert!(msg.starts_with("tourbillon: "), "{msg}");
    assert!(msg.contains("no reactor running"), "{msg}");
}

#[test]
fn other_panics_of_the_main_future_resume_unchanged() {
    let ex = bg_first(None);
    let payload =
        catch_unwind(AssertUnwindSafe(|| ex.block_on(async { panic!("boom") }))).unwrap_err();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));

    // A payload of another type than a string is resumed as it is.
    let payload = catch_unwind(AssertUnwindSafe(|| {
        ex.block_on(async { std::panic::panic_any(42u32) })
    }))
    .unwrap_err();
    assert_eq!(payload.downcast_ref::<u32>(), Some(&42));

    // A tokio message already explained is not explained twice.
    let payload = catch_unwind(AssertUnwindSafe(|| {
        ex.block_on(async { panic!("tourbillon: no reactor running") })
    }))
    .unwrap_err();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"tourbillon: no reactor running")
    );
}

#[test]
fn tokio_timer_in_the_main_future_works_under_run_until_in_tokio() {
    let ex = bg_first(None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let out = rt.block_on(ex.run_until(async {
        tokio::time::sleep(Duration::from_millis(1)).await;
        3
    }));
    assert_eq!(out, 3);
}
