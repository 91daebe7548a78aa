//! A custom scheduler one of whose methods keeps panicking: after
//! `QUARANTINE_AFTER` panics in a row of one method its queue is
//! quarantined (its tasks end with a panic `JoinError` that names the
//! quarantine, spawns onto it are refused, the other queues run on), and
//! the driver neither spins nor hangs. Rule T10 of `docs/design.md`.

mod support;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use support::Gate;
use tourbillon::config::PanicPolicy;
use tourbillon::error::SpawnError;
use tourbillon::sched::{Quarantine, Scheduler, QUARANTINE_AFTER};
use tourbillon::task::{GroupId, JoinError, TaskKey};
use tourbillon::{Builder, QueueSpec};

/// Calls after which a scheduler that is never quarantined stops
/// panicking, so that the test fails rather than hangs.
const GIVE_UP: u32 = 10_000;

/// What a test sees of its scheduler.
#[derive(Default)]
struct Probe {
    /// Calls of the method that panics, once armed.
    calls: Cell<u32>,
    /// Whether that method panics.
    armed: Cell<bool>,
    /// The scheduler was dropped.
    dropped: Cell<bool>,
}

/// A FIFO whose `pop` panics on every call once armed (up to [`GIVE_UP`]
/// calls).
struct PopPanics {
    ids: VecDeque<TaskKey>,
    probe: Rc<Probe>,
}

impl Scheduler for PopPanics {
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        self.ids.push_back(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        if self.probe.armed.get() {
            let n = self.probe.calls.get() + 1;
            self.probe.calls.set(n);
            if n < GIVE_UP {
                panic!("pop is broken ({n})");
            }
        }
        self.ids.pop_front()
    }
    fn len(&self) -> usize {
        self.ids.len()
    }
}

impl Drop for PopPanics {
    fn drop(&mut self) {
        self.probe.dropped.set(true);
    }
}

fn quarantined_message(method: &str, last: &str) -> String {
    format!(
        "tourbillon: queue \"bad\" quarantined: its scheduler's `{method}` panicked \
         {QUARANTINE_AFTER} times in a row (last panic: {last:?}); the task was dropped unfinished"
    )
}

/// The payload of a task the quarantine ended.
fn payload_of(err: JoinError) -> String {
    assert!(err.is_panic(), "{err:?}");
    *err.into_panic()
        .downcast::<String>()
        .expect("a String payload")
}

#[test]
fn t10_a_scheduler_whose_pop_always_panics_is_quarantined_and_the_driver_returns() {
    let probe = Rc::new(Probe::default());
    let ex = Builder::new()
        .queue_with(
            "bad",
            QueueSpec::new(1).scheduler(PopPanics {
                ids: VecDeque::new(),
                probe: probe.clone(),
            }),
        )
        .queue("good", 1)
        .build()
        .unwrap();
    // A task that waits for a wake, polled before `pop` breaks.
    let gate = Gate::new();
    let waiter = ex.spawn("bad", gate.wait()).unwrap();
    assert_eq!(ex.run_until_stalled(), 1);
    probe.armed.set(true);
    // Runnable tasks, a remote spawn, and a task of the other queue.
    let runnable: Vec<_> = (0..2)
        .map(|i| ex.spawn("bad", async move { i }).unwrap())
        .collect();
    let remote = ex.remote_spawner().spawn("bad", async { 7 }).unwrap();
    let good = ex.spawn("good", async { "good" }).unwrap();

    ex.run_until_stalled();

    assert_eq!(
        probe.calls.get(),
        QUARANTINE_AFTER,
        "pop is not asked again"
    );
    assert!(probe.dropped.get(), "the scheduler was dropped");
    let last = format!("pop is broken ({QUARANTINE_AFTER})");
    let want = quarantined_message("pop", &last);
    assert_eq!(ex.block_on(good).unwrap(), "good");
    assert_eq!(payload_of(ex.block_on(waiter).unwrap_err()), want);
    for h in runnable {
        assert_eq!(payload_of(ex.block_on(h).unwrap_err()), want);
    }
    assert_eq!(payload_of(ex.block_on(remote).unwrap_err()), want);
    assert_eq!(gate.polls.get(), 1, "the waiter was not polled again");

    let why = Quarantine::clone(
        ex.queue_stats("bad")
            .unwrap()
            .quarantine
            .as_ref()
            .expect("quarantined"),
    );
    assert_eq!(why.queue, "\"bad\"");
    assert_eq!(why.method, "pop");
    assert_eq!(why.panics, QUARANTINE_AFTER);
    assert_eq!(why.message.as_deref(), Some(last.as_str()));
    let st = ex.stats();
    assert_eq!(st.caught_panics, u64::from(QUARANTINE_AFTER));
    assert_eq!(st.live_tasks, 0);
    let bad = &st.queues[0];
    assert_eq!(
        (bad.spawned, bad.completed, bad.cancelled, bad.panicked),
        (4, 0, 0, 4)
    );
    assert_eq!(
        (bad.runnable, bad.runnable_tasks, bad.remote_waiting),
        (false, 0, 0)
    );
    assert_eq!(st.queues[1].quarantine, None);
    assert_eq!(st.queues[1].completed, 1);

    // Every local spawn path refuses the queue; the other queue runs on.
    let refused = SpawnError::Quarantined(why.clone());
    assert_eq!(ex.spawn("bad", async {}).unwrap_err(), refused);
    assert_eq!(ex.spawn_in_group("bad", 1, async {}).unwrap_err(), refused);
    assert_eq!(ex.spawner().spawn("bad", async {}).unwrap_err(), refused);
    assert_eq!(
        ex.queue("bad").unwrap().spawn(async {}).unwrap_err(),
        refused
    );
    assert_eq!(
        ex.task("bad").name("t").spawn(async {}).unwrap_err(),
        refused
    );
    // The main future of `block_on` spawns onto the first queue, "bad".
    let free = ex.block_on(async { tourbillon::try_spawn(async {}).map(drop) });
    assert_eq!(free.unwrap_err(), refused);
    assert_eq!(
        refused.to_string(),
        format!(
            "queue \"bad\" quarantined: its scheduler's `pop` panicked {QUARANTINE_AFTER} \
             times in a row (last panic: {last:?}); it takes no new task"
        )
    );
    // A later remote spawn ends as the queue's tasks did.
    let late = ex.remote_spawner().spawn("bad", async { 8 }).unwrap();
    assert_eq!(payload_of(ex.block_on(late).unwrap_err()), want);
    let again = ex.spawn("good", async { 2 }).unwrap();
    assert_eq!(ex.block_on(again).unwrap(), 2);

    let st = ex.stats();
    assert_eq!(st.queues[0].spawned, 4, "refused spawns are not counted");
    assert_eq!(st.caught_panics, u64::from(QUARANTINE_AFTER));
    assert_eq!(probe.calls.get(), QUARANTINE_AFTER);
}

/// A FIFO whose `push` panics on the calls `fails` names (1-based).
struct PushPanics {
    ids: VecDeque<TaskKey>,
    pushes: Rc<Cell<u32>>,
    fails: &'static [u32],
}

impl Scheduler for PushPanics {
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        let n = self.pushes.get() + 1;
        self.pushes.set(n);
        if self.fails.contains(&n) {
            panic!("push is flaky ({n})");
        }
        self.ids.push_back(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        self.ids.pop_front()
    }
    fn len(&self) -> usize {
        self.ids.len()
    }
}

#[test]
fn t10_a_push_that_panics_one_time_less_than_the_limit_in_a_row_is_not_quarantined() {
    assert_eq!(QUARANTINE_AFTER, 3, "the calls below are written for 3");
    let pushes = Rc::new(Cell::new(0));
    let ex = Builder::new()
        .queue_with(
            "q",
            QueueSpec::new(1).scheduler(PushPanics {
                ids: VecDeque::new(),
                pushes: pushes.clone(),
                // Two in a row, one that works, two in a row again.
                fails: &[1, 2, 4, 5],
            }),
        )
        .build()
        .unwrap();
    let handles: Vec<_> = (0..6)
        .map(|i| ex.spawn("q", async move { i }).unwrap())
        .collect();
    ex.run_until_stalled();
    assert_eq!(pushes.get(), 6);
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(ex.block_on(h).unwrap(), i);
    }
    let st = ex.stats();
    assert_eq!(st.caught_panics, 4);
    let q = &st.queues[0];
    assert_eq!(q.quarantine, None);
    assert_eq!((q.spawned, q.completed, q.panicked), (6, 6, 0));
    assert_eq!(ex.spawn("q", async { 9 }).map(drop), Ok(()));
}

#[test]
fn t10_under_propagate_the_scheduler_panics_resume_and_the_quarantined_ends_do_not() {
    let probe = Rc::new(Probe::default());
    let ex = Builder::new()
        .panic_policy(PanicPolicy::Propagate)
        .queue_with(
            "bad",
            QueueSpec::new(1).scheduler(PopPanics {
                ids: VecDeque::new(),
                probe: probe.clone(),
            }),
        )
        .queue("good", 1)
        .build()
        .unwrap();
    probe.armed.set(true);
    let handles: Vec<_> = (0..3)
        .map(|i| ex.spawn("bad", async move { i }).unwrap())
        .collect();
    let ended = Rc::new(RefCell::new(Vec::new()));
    let e = ended.clone();
    let good = ex
        .spawn("good", async move {
            e.borrow_mut().push("good");
        })
        .unwrap();
    // Each driver call resumes one panic of `pop`; the third quarantines.
    for n in 1..=QUARANTINE_AFTER {
        let run = catch_unwind(AssertUnwindSafe(|| ex.run_until_stalled()));
        let payload = run.expect_err("the scheduler's panic resumes");
        assert_eq!(
            payload.downcast_ref::<String>().map(String::as_str),
            Some(format!("pop is broken ({n})").as_str())
        );
        let quarantined = ex.queue_stats("bad").unwrap().quarantine.is_some();
        assert_eq!(quarantined, n == QUARANTINE_AFTER, "after panic {n}");
    }
    // The quarantined tasks' ends resume nothing; the other queue runs.
    ex.run_until_stalled();
    assert_eq!(*ended.borrow(), ["good"]);
    let want = quarantined_message("pop", &format!("pop is broken ({QUARANTINE_AFTER})"));
    for h in handles {
        assert_eq!(payload_of(ex.block_on(h).unwrap_err()), want);
    }
    ex.block_on(good).unwrap();
    assert_eq!(probe.calls.get(), QUARANTINE_AFTER);
    let st = ex.stats();
    assert_eq!(st.caught_panics, 0);
    let bad = &st.queues[0];
    assert_eq!((bad.spawned, bad.completed, bad.panicked), (3, 0, 3));
}

/// A pending future whose destructor panics.
struct PanicsOnDrop;

impl std::future::Future for PanicsOnDrop {
    type Output = ();
    fn poll(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        std::task::Poll::Pending
    }
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("the destructor");
    }
}

#[test]
fn t10_block_on_awaiting_a_task_of_a_quarantined_queue_gets_its_error() {
    let probe = Rc::new(Probe::default());
    probe.armed.set(true);
    let ex = Builder::new()
        .queue("main", 1)
        .queue_with(
            "bad",
            QueueSpec::new(1).scheduler(PopPanics {
                ids: VecDeque::new(),
                probe: probe.clone(),
            }),
        )
        .build()
        .unwrap();
    let ex = &ex;
    let out = ex.block_on(async move {
        let h = ex.spawn("bad", PanicsOnDrop).unwrap();
        h.await
    });
    let want = quarantined_message("pop", &format!("pop is broken ({QUARANTINE_AFTER})"));
    assert_eq!(payload_of(out.unwrap_err()), want);
    assert_eq!(probe.calls.get(), QUARANTINE_AFTER);
    let st = ex.stats();
    // The scheduler's panics, and the future's destructor's (not the
    // task's result: its handle reads the quarantine).
    assert_eq!(st.caught_panics, u64::from(QUARANTINE_AFTER) + 1);
    assert_eq!((st.queues[1].spawned, st.queues[1].panicked), (1, 1));
    assert_eq!(st.live_tasks, 0);
}
