//! `AbortHandle` (tokio's `JoinHandle::abort_handle`) and the current task's
//! id (`task::id`, `task::try_id`): abort from this thread and from others,
//! before and after the task ends and after its executor is gone; ids seen
//! from inside tasks, outside them, and in nested executors.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::mpsc;

use tourbillon::task::{self, AbortHandle, JoinSet, TaskId};
use tourbillon::Builder;

fn executor() -> tourbillon::Executor<&'static str> {
    Builder::new().queue("a", 1).build().unwrap()
}

const _: () = {
    const fn send_sync_clone<T: Send + Sync + Clone + 'static>() {}
    send_sync_clone::<AbortHandle>();
};

/// Counts its drops: a future dropped unpolled by an abort drops this.
struct Dropped(Rc<Cell<u32>>);
impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn abort_from_this_thread_drops_the_idle_task_unpolled() {
    let ex = executor();
    let (polls, drops) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let (p, d) = (polls.clone(), Dropped(drops.clone()));
    let h = ex
        .spawn("a", async move {
            let _d = d;
            p.set(p.get() + 1);
            std::future::pending::<()>().await;
        })
        .unwrap();
    ex.run_until_stalled();
    assert_eq!((polls.get(), drops.get()), (1, 0));
    let abort = h.abort_handle();
    assert_eq!(abort.id(), h.id());
    assert!(!abort.is_finished());
    abort.abort();
    ex.run_until_stalled();
    assert_eq!(
        (polls.get(), drops.get()),
        (1, 1),
        "dropped, not polled again"
    );
    assert!(abort.is_finished());
    assert!(h.is_finished());
    let err = ex.block_on(h).unwrap_err();
    assert!(err.is_cancelled());
    // Aborting again, or through a clone, does nothing more.
    abort.clone().abort();
    assert_eq!(ex.run_until_stalled(), 0);
}

#[test]
fn abort_from_another_thread_wakes_a_parked_executor() {
    let ex = executor();
    let h = ex.spawn("a", std::future::pending::<u32>()).unwrap();
    let abort = h.abort_handle();
    let (tx, rx) = mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        rx.recv().unwrap();
        abort.abort();
    });
    // `block_on` parks on the joined handle; the abort arrives through the
    // inbox and unparks it.
    let err = ex.block_on(async {
        tx.send(()).unwrap();
        h.await.unwrap_err()
    });
    assert!(err.is_cancelled());
    t.join().unwrap();
}

#[test]
fn abort_after_completion_keeps_the_output() {
    let ex = executor();
    let h = ex.spawn("a", async { 7 }).unwrap();
    let abort = h.abort_handle();
    ex.run_until_stalled();
    assert!(abort.is_finished());
    std::thread::spawn({
        let abort = abort.clone();
        move || abort.abort()
    })
    .join()
    .unwrap();
    abort.abort();
    assert_eq!(ex.block_on(h).unwrap(), 7);
}

#[test]
fn abort_handle_outlives_its_task_and_its_executor() {
    let ex = executor();
    let h = ex.spawn("a", std::future::pending::<()>()).unwrap();
    let abort = h.abort_handle();
    drop(h);
    drop(ex);
    // The executor dropped the task at shutdown; the handle still works,
    // on this thread and another, and does nothing.
    assert!(abort.is_finished());
    abort.abort();
    std::thread::spawn(move || {
        abort.abort();
        drop(abort);
    })
    .join()
    .unwrap();
}

#[test]
fn abort_handle_made_after_the_executor_is_gone() {
    // The task completed and its executor was dropped before the abort
    // handle was made: the handle must not reach the executor's freed
    // inbox (valgrind's memcheck step runs this test).
    let ex = executor();
    let h = ex.spawn("a", async { 3 }).unwrap();
    ex.run_until_stalled();
    drop(ex);
    let abort = h.abort_handle();
    assert!(abort.is_finished());
    abort.abort();
    let a2 = abort.clone();
    std::thread::spawn(move || a2.abort()).join().unwrap();
    drop(abort);
    let out = futures::executor::block_on(h).unwrap();
    assert_eq!(out, 3);
}

#[test]
fn a_task_may_abort_itself_through_its_handle() {
    let ex = executor();
    let (tx, rx) = std::sync::mpsc::channel::<AbortHandle>();
    let polls = Rc::new(Cell::new(0));
    let p = polls.clone();
    let h = ex
        .spawn("a", async move {
            p.set(p.get() + 1);
            rx.recv().unwrap().abort();
            tourbillon::task::yield_now().await;
            p.set(p.get() + 1);
        })
        .unwrap();
    tx.send(h.abort_handle()).unwrap();
    ex.run_until_stalled();
    assert_eq!(polls.get(), 1, "cancelled when its poll returned");
    assert!(ex.block_on(h).unwrap_err().is_cancelled());
}

#[test]
fn join_set_spawns_return_abort_handles() {
    let ex = executor();
    let q = ex.queue("a").unwrap();
    ex.block_on(async {
        let mut set = JoinSet::new();
        let slow = set.spawn_on(std::future::pending::<u32>(), &q).unwrap();
        let fast = set.spawn(async { 1 });
        assert_ne!(slow.id(), fast.id());
        slow.abort();
        let mut results = vec![];
        while let Some(r) = set.join_next().await {
            results.push(r.map_err(|e| e.is_cancelled()));
        }
        results.sort();
        assert_eq!(results, vec![Ok(1), Err(true)]);
    });
}

#[test]
fn task_id_inside_and_outside_tasks() {
    let ex = executor();
    assert_eq!(task::try_id(), None);
    let h = ex
        .spawn("a", async {
            let before = task::id();
            tourbillon::task::yield_now().await;
            assert_eq!(task::id(), before, "stable across polls");
            before
        })
        .unwrap();
    let expected = h.id();
    let seen: TaskId = ex.block_on(async {
        // The main future of `block_on` is not a task.
        assert_eq!(task::try_id(), None);
        h.await.unwrap()
    });
    assert_eq!(seen, expected);
    assert_eq!(task::try_id(), None);
}

#[test]
fn task_id_in_a_nested_executor_is_the_inner_tasks() {
    let outer = executor();
    let h = outer
        .spawn("a", async {
            let me = task::id();
            let inner = executor();
            let ih = inner.spawn("a", async { task::id() }).unwrap();
            let inner_id = ih.id();
            let got = inner.block_on(ih).unwrap();
            assert_eq!(got, inner_id);
            // Back in the outer task's poll: its own id again.
            assert_eq!(task::id(), me);
            me
        })
        .unwrap();
    let id = h.id();
    assert_eq!(outer.block_on(h).unwrap(), id);
}

#[test]
#[should_panic(expected = "tourbillon::task::id() called outside a task")]
fn task_id_outside_a_task_panics() {
    let _ = task::id();
}
