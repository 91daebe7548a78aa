//! Typed errors: every `BuildError` and its message, `UnknownQueue` and its
//! place in `SpawnError` and `SharesError`, `SpawnError` from every
//! spawning path, and the panic of a task that blocks on its own executor.

use std::error::Error;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::Duration;

use tourbillon::config::{PanicPolicy, MAX_QUEUES, MAX_SHARES};
use tourbillon::error::{BuildError, SharesError, SpawnError, UnknownQueue};
use tourbillon::{Builder, Executor, QueueSpec};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Fg,
    Bg,
}

fn build_err<K: tourbillon::QueueKey>(b: Builder<K>) -> BuildError {
    match b.build() {
        Ok(_) => panic!("the configuration was accepted"),
        Err(e) => e,
    }
}

#[test]
fn no_queues() {
    let e = build_err(Builder::<Q>::new());
    assert_eq!(e, BuildError::NoQueues);
    assert_eq!(
        e.to_string(),
        "no queue declared: declare at least one with Builder::queue"
    );
}

#[test]
fn zero_shares() {
    let e = build_err(Builder::new().queue(Q::Fg, 1).queue(Q::Bg, 0));
    assert_eq!(e, BuildError::ZeroShares { queue: "Bg".into() });
    assert_eq!(
        e.to_string(),
        "queue Bg has zero shares: shares must be at least 1"
    );
    // Through a QueueSpec too.
    let e = build_err(Builder::new().queue_with(Q::Fg, QueueSpec::new(0)));
    assert_eq!(e, BuildError::ZeroShares { queue: "Fg".into() });
}

#[test]
fn too_many_shares() {
    // The maximum itself is accepted.
    assert!(Builder::new().queue(Q::Fg, MAX_SHARES).build().is_ok());
    let e = build_err(Builder::new().queue("heavy", MAX_SHARES + 1));
    assert_eq!(
        e,
        BuildError::TooManyShares {
            queue: "\"heavy\"".into(),
            shares: MAX_SHARES + 1
        }
    );
    assert_eq!(
        e.to_string(),
        "queue \"heavy\" has 10001 shares: the maximum is 10000"
    );
}

#[test]
fn duplicate_key() {
    let e = build_err(
        Builder::new()
            .queue(Q::Fg, 1)
            .queue(Q::Bg, 2)
            .queue(Q::Fg, 3),
    );
    assert_eq!(e, BuildError::DuplicateQueue { queue: "Fg".into() });
    assert_eq!(e.to_string(), "queue Fg is declared twice");
}

#[test]
fn too_many_queues() {
    let ok = (0..MAX_QUEUES as u32).fold(Builder::new(), |b, k| b.queue(k, 1));
    assert_eq!(ok.build().unwrap().queue_keys().len(), MAX_QUEUES);
    let too_many = (0..=MAX_QUEUES as u32).fold(Builder::new(), |b, k| b.queue(k, 1));
    let e = build_err(too_many);
    assert_eq!(
        e,
        BuildError::TooManyQueues {
            count: MAX_QUEUES + 1
        }
    );
    assert_eq!(e.to_string(), "257 queues declared: the maximum is 256");
}

#[test]
fn invalid_options() {
    let base = || Builder::new().queue(Q::Fg, 1);
    let range = "must be between 1 us and 1 s";
    let cases: Vec<(Builder<Q>, &str, &str)> = vec![
        (base().base_slice(Duration::ZERO), "base_slice", range),
        (
            base().base_slice(Duration::from_nanos(999)),
            "base_slice",
            range,
        ),
        (
            base().base_slice(Duration::from_secs(1) + Duration::from_nanos(1)),
            "base_slice",
            range,
        ),
        (
            base().host_yield_interval(Duration::ZERO),
            "host_yield_interval",
            range,
        ),
        (
            base().host_yield_interval(Duration::from_secs(2)),
            "host_yield_interval",
            range,
        ),
        (
            base().min_run(Duration::from_secs(1) + Duration::from_nanos(1)),
            "min_run",
            "must be at most 1 s",
        ),
        (
            base().max_polls_per_turn(0),
            "max_polls_per_turn",
            "must be at least 1",
        ),
        (
            Builder::new().queue_with(Q::Fg, QueueSpec::new(1).slice(Duration::ZERO)),
            "QueueSpec::slice",
            range,
        ),
        (
            Builder::new().queue_with(Q::Fg, QueueSpec::new(1).slice(Duration::from_secs(5))),
            "QueueSpec::slice",
            range,
        ),
    ];
    for (b, option, reason) in cases {
        let e = build_err(b);
        assert_eq!(e, BuildError::InvalidOption { option, reason });
        assert_eq!(
            e.to_string(),
            format!("invalid value for {option}: {reason}")
        );
    }
    // The bounds themselves are accepted.
    let ok = base()
        .base_slice(Duration::from_micros(1))
        .host_yield_interval(Duration::from_secs(1))
        .min_run(Duration::ZERO)
        .max_polls_per_turn(1)
        .queue_with(Q::Bg, QueueSpec::new(1).slice(Duration::from_secs(1)))
        .build();
    assert!(ok.is_ok());
}

#[test]
fn build_error_is_a_std_error() {
    let e: Box<dyn Error> = Box::new(BuildError::NoQueues);
    assert!(e.source().is_none());
    assert!(e.to_string().starts_with("no queue declared"));
}

#[test]
fn unknown_queue_from_queue_and_queue_stats() {
    let ex: Executor<Q> = Builder::new().queue(Q::Fg, 1).build().unwrap();
    let msg = "no queue with key Bg was declared in the builder";

    let e: UnknownQueue = ex.queue(Q::Bg).unwrap_err();
    assert_eq!(e.key(), "Bg");
    assert_eq!(e.to_string(), msg);
    assert_eq!(format!("{e:?}"), r#"UnknownQueue { key: "Bg" }"#);

    let e2: UnknownQueue = ex.queue_stats(Q::Bg).unwrap_err();
    assert_eq!(e2, e);

    // A `std::error::Error` with no source, which `?` boxes whatever the
    // key type.
    let boxed: Box<dyn Error + Send + Sync> = Box::new(e.clone());
    assert!(boxed.source().is_none());
    assert_eq!(boxed.to_string(), msg);

    // The key is named as `{:?}` prints it: with quotes for a `&str`.
    let ex = Builder::new().queue("fg", 1).build().unwrap();
    let e = ex.queue("bg").unwrap_err();
    assert_eq!(e.key(), "\"bg\"");
    assert_eq!(
        e.to_string(),
        "no queue with key \"bg\" was declared in the builder"
    );
}

#[test]
fn unknown_queue_in_spawn_error_and_shares_error() {
    let ex: Executor<Q> = Builder::new().queue(Q::Fg, 1).build().unwrap();
    let unknown = ex.queue(Q::Bg).unwrap_err();
    let msg = "no queue with key Bg was declared in the builder";

    let e = ex.spawn(Q::Bg, async {}).unwrap_err();
    assert!(matches!(&e, SpawnError::UnknownQueue(u) if *u == unknown));
    assert_eq!(e, SpawnError::from(unknown.clone()));
    assert_eq!(e.to_string(), msg);
    assert!(e.source().is_none());

    let e = ex.spawner().spawn(Q::Bg, async {}).unwrap_err();
    assert_eq!(e, SpawnError::UnknownQueue(unknown.clone()));
    let e = ex.task(Q::Bg).spawn(async {}).unwrap_err();
    assert_eq!(e, SpawnError::UnknownQueue(unknown.clone()));
    let e = ex.remote_spawner().spawn(Q::Bg, async {}).unwrap_err();
    assert_eq!(e, SpawnError::UnknownQueue(unknown.clone()));

    let e = ex.set_shares(Q::Bg, 2).unwrap_err();
    assert!(matches!(&e, SharesError::UnknownQueue(u) if *u == unknown));
    assert_eq!(e, SharesError::from(unknown.clone()));
    assert_eq!(e.to_string(), msg);
    assert!(e.source().is_none());

    // `?` converts it into either error.
    fn spawn_on_queue(ex: &Executor<Q>, key: Q) -> Result<(), SpawnError> {
        drop(ex.queue(key)?.spawn(async {})?);
        Ok(())
    }
    assert_eq!(
        spawn_on_queue(&ex, Q::Bg),
        Err(SpawnError::UnknownQueue(unknown))
    );
    assert_eq!(spawn_on_queue(&ex, Q::Fg), Ok(()));
    ex.run_until_stalled();

    // Nothing was spawned but the one task above.
    assert_eq!(ex.stats().live_tasks, 0);
    assert_eq!(ex.queue_stats(Q::Fg).unwrap().spawned, 1);
}

#[test]
fn spawn_error_messages() {
    assert_eq!(
        SpawnError::Shutdown.to_string(),
        "the executor is shut down: it accepts no new task"
    );
    assert_eq!(
        SpawnError::NoExecutor.to_string(),
        "spawn called outside a running tourbillon executor: use Executor::spawn or a QueueHandle"
    );
    let e: Box<dyn Error> = Box::new(SpawnError::Shutdown);
    assert!(e.source().is_none());
}

#[test]
fn join_error_messages() {
    let ex = Builder::new().queue(Q::Fg, 1).build().unwrap();
    let cancelled = ex.spawn(Q::Fg, std::future::pending::<()>()).unwrap();
    let id = cancelled.id();
    cancelled.abort();
    let e = ex.block_on(cancelled).unwrap_err();
    assert_eq!(e.to_string(), format!("task {id} was cancelled"));
    assert_eq!(format!("{e:?}"), format!("JoinError::Cancelled({id:?})"));
    let e = e.try_into_panic().unwrap_err();
    assert!(e.is_cancelled());

    let panicked = ex
        .spawn(Q::Fg, async {
            panic!("oops");
        })
        .unwrap();
    let id = panicked.id();
    let e = ex.block_on(panicked).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("task {id} panicked with message \"oops\"")
    );
    assert_eq!(
        format!("{e:?}"),
        format!("JoinError::Panic({id:?}, \"oops\", ...)")
    );
    let p = e.try_into_panic().unwrap();
    assert_eq!(p.downcast_ref::<&str>(), Some(&"oops"));
}

const NESTED: &str = "block_on called while this executor is already running";

#[test]
fn block_on_from_inside_a_task_panics_with_a_clear_message() {
    let ex = Rc::new(Builder::new().queue(Q::Fg, 1).build().unwrap());
    let inner = ex.clone();
    let h = ex
        .spawn(Q::Fg, async move {
            inner.block_on(async {});
        })
        .unwrap();
    let e = ex.block_on(h).unwrap_err();
    assert!(e.is_panic());
    let msg = e.into_panic().downcast::<String>().unwrap();
    assert!(msg.contains(NESTED), "{msg}");
    assert!(
        msg.contains("a task must .await instead of blocking"),
        "{msg}"
    );
    // The task's future (and its executor handle) is gone: no cycle left.
    assert_eq!(Rc::strong_count(&ex), 1);
    // The executor is intact.
    let h = ex.spawn(Q::Fg, async { 1 }).unwrap();
    assert_eq!(ex.block_on(h).unwrap(), 1);
}

#[test]
fn run_until_stalled_from_inside_a_task_panics_too() {
    let ex = Rc::new(
        Builder::new()
            .queue(Q::Fg, 1)
            .panic_policy(PanicPolicy::Propagate)
            .build()
            .unwrap(),
    );
    let inner = ex.clone();
    let h = ex
        .spawn(Q::Fg, async move {
            inner.run_until_stalled();
        })
        .unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| ex.run_until_stalled()));
    let msg = r.unwrap_err().downcast::<String>().unwrap();
    assert!(
        msg.contains("run_until_stalled called while this executor is already running"),
        "{msg}"
    );
    assert!(ex.block_on(h).unwrap_err().is_panic());
    assert_eq!(Rc::strong_count(&ex), 1);
}

#[test]
#[should_panic(expected = "block_on called while this executor is already running")]
fn block_on_from_the_main_future_panics() {
    let ex = Builder::new().queue(Q::Fg, 1).build().unwrap();
    ex.block_on(async {
        ex.block_on(async {});
    });
}
