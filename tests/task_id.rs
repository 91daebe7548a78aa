//! Task ids as tokio's: unique in the process (across executors, nested
//! executors and the cores of a `Pool`), set while a task's future or
//! output is dropped, printed as `Id(N)` / `N`; and the panics of the
//! spawn functions located at their caller.

use std::cell::RefCell;
use std::collections::HashSet;
use std::future::pending;
use std::panic;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::executor::block_on;
use tourbillon::pool::{Placement, Pool};
use tourbillon::task::{self, JoinSet, TaskId};
use tourbillon::{Builder, Executor};

fn executor() -> Executor<&'static str> {
    Builder::new().queue("main", 1).build().unwrap()
}

/// Spawns `n` tasks on `ex` and returns their ids, as their handles and
/// `task::id()` inside them give them (checked equal).
fn ids_of(ex: &Executor<&'static str>, n: usize) -> Vec<TaskId> {
    ex.block_on(async {
        let mut ids = Vec::new();
        for _ in 0..n {
            let h = ex.spawn("main", async { task::id() }).unwrap();
            let id = h.id();
            assert_eq!(h.await.unwrap(), id);
            ids.push(id);
        }
        ids
    })
}

#[test]
fn ids_are_unique_across_two_executors() {
    let (a, b) = (executor(), executor());
    let mut ids = ids_of(&a, 3);
    ids.extend(ids_of(&b, 3));
    let set: HashSet<TaskId> = ids.iter().copied().collect();
    assert_eq!(set.len(), 6, "{ids:?}");
    // The first task of each executor has the same key, not the same id.
    let (ha, hb) = (
        a.spawn("main", async {}).unwrap(),
        b.spawn("main", async {}).unwrap(),
    );
    assert_eq!(ha.key(), hb.key());
    assert_ne!(ha.id(), hb.id());
}

#[test]
fn ids_are_unique_across_nested_executors() {
    let outer = executor();
    let h = outer
        .spawn("main", async {
            let inner = executor();
            let mut ids = ids_of(&inner, 3);
            ids.push(task::id());
            ids
        })
        .unwrap();
    let outer_id = h.id();
    let ids = outer.block_on(h).unwrap();
    assert_eq!(ids[3], outer_id);
    let set: HashSet<TaskId> = ids.iter().copied().collect();
    assert_eq!(set.len(), 4, "{ids:?}");
}

#[test]
fn ids_are_unique_across_the_cores_of_a_pool() {
    let pool: Pool<&'static str> = Pool::builder()
        .cores(3)
        .placement(Placement::Unpinned)
        .executor(|_| Builder::new().queue("main", 1))
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for core in 0..3 {
        for _ in 0..2 {
            let h = pool
                .try_spawn_on(core, "main", || async { task::id() })
                .unwrap_or_else(|_| panic!("core {core} refused the task"));
            ids.push(block_on(h).unwrap());
        }
    }
    pool.shutdown(Duration::from_secs(30)).unwrap();
    let set: HashSet<TaskId> = ids.iter().copied().collect();
    assert_eq!(set.len(), 6, "{ids:?}");
}

/// Records `task::try_id()` when dropped.
struct RecordsId(Rc<RefCell<Vec<Option<TaskId>>>>);

impl Drop for RecordsId {
    fn drop(&mut self) {
        self.0.borrow_mut().push(task::try_id());
    }
}

#[test]
fn the_id_is_set_while_an_aborted_tasks_future_is_dropped() {
    let ex = executor();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let guard = RecordsId(seen.clone());
    let h = ex
        .spawn("main", async move {
            let _guard = guard;
            pending::<()>().await;
        })
        .unwrap();
    let id = h.id();
    assert_eq!(ex.run_until_stalled(), 1, "polled once: now pending");
    let err = ex.block_on(async {
        h.abort();
        h.await.unwrap_err()
    });
    assert!(err.is_cancelled());
    assert_eq!(*seen.borrow(), [Some(id)]);
    assert_eq!(task::try_id(), None, "restored after");
}

#[test]
fn the_id_is_set_while_a_future_is_dropped_by_the_executors_drop() {
    let ex = executor();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let guard = RecordsId(seen.clone());
    let h = ex
        .spawn("main", async move {
            let _guard = guard;
            pending::<()>().await;
        })
        .unwrap();
    let id = h.id();
    assert_eq!(ex.run_until_stalled(), 1, "polled once: now pending");
    drop(ex);
    assert_eq!(*seen.borrow(), [Some(id)]);
    assert!(block_on(h).unwrap_err().is_cancelled());
}

#[test]
fn the_id_is_set_while_an_output_is_dropped() {
    let ex = executor();
    let seen = Rc::new(RefCell::new(Vec::new()));
    // A detached task: its output is dropped when it ends.
    let detached = {
        let seen = seen.clone();
        ex.spawn("main", async move { RecordsId(seen) }).unwrap()
    };
    let detached_id = detached.id();
    drop(detached);
    // A joined one whose handle is dropped after the task ended.
    let joined = {
        let seen = seen.clone();
        ex.spawn("main", async move { RecordsId(seen) }).unwrap()
    };
    let joined_id = joined.id();
    // Both run to their end.
    ex.run_until_stalled();
    assert_eq!(*seen.borrow(), [Some(detached_id)]);
    ex.block_on(async {
        assert!(joined.is_finished());
        drop(joined);
        // Inside the main future, which is no task: the id is the ended
        // task's during the drop, and none after.
        assert_eq!(task::try_id(), None);
    });
    assert_eq!(*seen.borrow(), [Some(detached_id), Some(joined_id)]);
}

#[test]
fn ids_and_join_errors_print_as_tokios() {
    let ex = executor();
    let (id, cancelled, panicked) = ex.block_on(async {
        let c = ex.spawn("main", pending::<()>()).unwrap();
        let id = c.id();
        c.abort();
        let cancelled = c.await.unwrap_err();
        let p = ex.spawn("main", async { panic!("boom") }).unwrap();
        let pid = p.id();
        let panicked = p.await.unwrap_err();
        assert_eq!(panicked.id(), pid);
        (id, cancelled, panicked)
    });
    let n = id.as_u64();
    assert_ne!(n, 0);
    assert_eq!(format!("{id:?}"), format!("Id({n})"));
    assert_eq!(id.to_string(), n.to_string());
    assert_eq!(cancelled.id(), id);
    assert_eq!(
        format!("{cancelled:?}"),
        format!("JoinError::Cancelled(Id({n}))")
    );
    assert_eq!(cancelled.to_string(), format!("task {n} was cancelled"));
    let m = panicked.id().as_u64();
    assert_eq!(
        format!("{panicked:?}"),
        format!("JoinError::Panic(Id({m}), \"boom\", ...)")
    );
    assert_eq!(
        panicked.to_string(),
        format!("task {m} panicked with message \"boom\"")
    );
}

/// The location of the first panic on this thread while `f` runs.
fn panic_location(f: impl FnOnce() + panic::UnwindSafe) -> String {
    let seen: Arc<Mutex<Option<String>>> = Arc::default();
    let hook = {
        let seen = seen.clone();
        let me = std::thread::current().id();
        Box::new(move |info: &panic::PanicHookInfo<'_>| {
            if std::thread::current().id() == me {
                let loc = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                seen.lock().unwrap().get_or_insert(loc.unwrap_or_default());
            }
        })
    };
    let previous = panic::take_hook();
    panic::set_hook(hook);
    let result = panic::catch_unwind(f);
    panic::set_hook(previous);
    assert!(result.is_err(), "it panicked");
    let loc = seen.lock().unwrap().take();
    loc.expect("the hook saw the panic")
}

#[test]
fn the_panics_of_the_spawn_functions_point_at_their_caller() {
    let line = line!() + 2;
    let loc = panic_location(|| {
        drop(tourbillon::spawn(async {}));
    });
    assert_eq!(loc, format!("{}:{}", file!(), line));
    let line = line!() + 3;
    let loc = panic_location(|| {
        let mut set = JoinSet::<()>::new();
        set.spawn(async {});
    });
    assert_eq!(loc, format!("{}:{}", file!(), line));
}
