//! Soundness under panics and misuse: one test per way a user's code could
//! break the executor from safe code. Every call into user code (futures
//! and their destructors, outputs, panic payloads, wakers, schedulers,
//! clocks, callbacks) is a panic boundary (`src/boundary.rs`): under
//! `PanicPolicy::Catch` no panic leaves the driver or the executor's drop,
//! every task reaches a final state that its handle reads, the counters
//! stay exact, and nothing is leaked or dropped twice. The suite also runs
//! under valgrind memcheck in CI, which turns a use-after-free or a leak
//! here into a failure.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use tourbillon::clock::{Clock, ManualClock};
use tourbillon::config::PanicPolicy;
use tourbillon::sched::Scheduler;
use tourbillon::task::{yield_now, GroupId, TaskKey};
use tourbillon::testing::BuilderExt;
use tourbillon::{Builder, QueueSpec};

/// Panics when dropped, with a `&str` payload.
#[derive(Debug)]
struct PanicOnDrop(&'static str);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("{}", self.0);
    }
}

/// A future that is ready at once with a `PanicOnDrop` output, and whose
/// own destructor panics too.
struct BothPanic {
    drops: Rc<Cell<u32>>,
}

impl Future for BothPanic {
    type Output = PanicOnDrop;
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<PanicOnDrop> {
        Poll::Ready(PanicOnDrop("the output's destructor"))
    }
}

impl Drop for BothPanic {
    fn drop(&mut self) {
        self.drops.set(self.drops.get() + 1);
        panic!("the future's destructor");
    }
}

fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Finding 1: a future whose destructor panics and whose output's
/// destructor panics at completion. The task ends as panicked (the
/// future's panic), its handle finishes, and a handle that outlives the
/// executor never reaches it: `abort()` is a no-op, also after a new
/// executor took the old one's memory.
#[test]
fn f1_future_and_output_destructors_both_panic() {
    let drops = Rc::new(Cell::new(0));
    let ex = Builder::new().queue("q", 1).build().unwrap();
    let h = ex
        .spawn(
            "q",
            BothPanic {
                drops: drops.clone(),
            },
        )
        .unwrap();
    let detached = ex.spawn("q", std::future::pending::<()>()).unwrap();
    ex.run_until_stalled();
    assert_eq!(drops.get(), 1, "the future is dropped exactly once");
    assert!(h.is_finished());
    let stats = ex.stats();
    assert_eq!(stats.live_tasks, 1, "only the pending task lives");
    assert_eq!(stats.queues[0].panicked, 1);
    drop(ex);
    assert!(detached.is_finished(), "shutdown ends every task");
    // The executor is gone: the handles' operations are no-ops.
    h.abort();
    detached.abort();
    // A new executor, maybe at the old one's address: the old handles
    // cannot reach it.
    let ex2 = Builder::new().queue("q", 1).build().unwrap();
    let fresh = ex2.spawn("q", async { 7 }).unwrap();
    h.abort();
    detached.abort();
    assert_eq!(ex2.block_on(fresh).unwrap(), 7);
    let err = ex2.block_on(h).unwrap_err();
    assert!(err.is_panic());
    assert_eq!(message(&*err.into_panic()), "the future's destructor");
    assert!(ex2.block_on(detached).unwrap_err().is_cancelled());
}

/// A payload whose own destructor panics.
struct NastyPayload;

impl Drop for NastyPayload {
    fn drop(&mut self) {
        panic!("the payload's destructor");
    }
}

/// A future that panics when polled, and whose destructor then panics
/// with a [`NastyPayload`].
struct PanicsTwice;

impl Future for PanicsTwice {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        panic!("the poll");
    }
}

impl Drop for PanicsTwice {
    fn drop(&mut self) {
        std::panic::panic_any(NastyPayload);
    }
}

/// Finding 2a: panic payloads whose own destructor panics, dropped by the
/// executor: the payload of a future's destructor that panicked after its
/// poll did (the task reports the first panic), and the payload of a
/// detached task. Nothing escapes `Catch`, and the executor counts the
/// destructors' panics.
#[test]
fn f2a_panic_payload_whose_destructor_panics() {
    let ex = Builder::new().queue("q", 1).build().unwrap();
    let twice = ex.spawn("q", PanicsTwice).unwrap();
    ex.run_until_stalled();
    let err = ex.block_on(twice).unwrap_err();
    // The destructor's panic came second: dropped, payload and all.
    assert_eq!(message(&*err.into_panic()), "the poll");
    let h = ex
        .spawn("q", async { std::panic::panic_any(NastyPayload) })
        .unwrap();
    drop(h);
    let joined = ex
        .spawn("q", async { std::panic::panic_any(NastyPayload) })
        .unwrap();
    ex.run_until_stalled();
    let st = ex.stats();
    assert_eq!(st.queues[0].panicked, 3);
    assert_eq!(st.caught_panics, 1, "the detached payload's destructor");
    assert_eq!(st.live_tasks, 0);
    // The joined task's payload goes to its handle (and the handle's
    // owner drops it: their code, their panic, caught here).
    let err = ex.block_on(joined).unwrap_err();
    let payload = err.into_panic();
    assert!(payload.is::<NastyPayload>());
    assert!(catch_unwind(AssertUnwindSafe(|| drop(payload))).is_err());
}

/// A `Send` future whose destructor panics, counting its drops.
struct SendPanicOnDrop(Arc<AtomicUsize>);

impl Future for SendPanicOnDrop {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl Drop for SendPanicOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("a remote future's destructor");
    }
}

/// Finding 2b: a remote future whose destructor panics, aborted before the
/// executor started it. The innocent remote spawn of the same batch still
/// runs.
#[test]
fn f2b_remote_future_aborted_before_start_panics_in_drop() {
    let ex = Builder::new().queue("q", 1).build().unwrap();
    let remote = ex.remote_spawner();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    let (nasty, innocent) = std::thread::spawn(move || {
        let nasty = remote.spawn("q", SendPanicOnDrop(d)).unwrap();
        nasty.abort();
        let innocent = remote.spawn("q", async { 42 }).unwrap();
        (nasty, innocent)
    })
    .join()
    .unwrap();
    ex.run_until_stalled();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(ex.stats().caught_panics, 1);
    assert!(ex.block_on(nasty).unwrap_err().is_cancelled());
    assert_eq!(ex.block_on(innocent).unwrap(), 42);
}

/// Finding 2c: the same kind of future still in the inbox when the
/// executor is dropped: the rest of the shutdown happens (a local pending
/// task is dropped and its handle finishes).
#[test]
fn f2c_remote_future_in_the_inbox_at_shutdown_panics_in_drop() {
    struct Counted(Rc<Cell<u32>>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }
    let ex = Builder::new().queue("q", 1).build().unwrap();
    let local_drops = Rc::new(Cell::new(0));
    let c = Counted(local_drops.clone());
    let local = ex
        .spawn("q", async move {
            let _c = c;
            std::future::pending::<()>().await
        })
        .unwrap();
    ex.run_until_stalled();
    let drops = Arc::new(AtomicUsize::new(0));
    let nasty = ex
        .remote_spawner()
        .spawn("q", SendPanicOnDrop(drops.clone()))
        .unwrap();
    let innocent = ex.remote_spawner().spawn("q", async { 1 }).unwrap();
    drop(ex);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(local_drops.get(), 1, "the local task was dropped");
    assert!(local.is_finished());
    let ex2 = Builder::new().queue("q", 1).build().unwrap();
    assert!(ex2.block_on(local).unwrap_err().is_cancelled());
    // The destructor's panic is the handle's (as tokio's shutdown reports).
    assert!(ex2.block_on(nasty).unwrap_err().is_panic());
    assert!(ex2.block_on(innocent).unwrap_err().is_cancelled());
}

/// A waker whose `wake` panics.
struct PanickingWaker;

impl Wake for PanickingWaker {
    fn wake(self: Arc<Self>) {
        panic!("a joiner's waker");
    }
}

/// Finding 2d: the joiner's waker panics in `wake`: the task's end is
/// still counted and its keyed group still ends.
#[test]
fn f2d_joiners_waker_panics_in_wake() {
    let ex = Builder::new().queue("q", 1).build().unwrap();
    let mut h = ex
        .spawn_in_group("q", 9, async {
            yield_now().await;
            5
        })
        .unwrap();
    let waker = Waker::from(Arc::new(PanickingWaker));
    assert!(Pin::new(&mut h)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(ex.stats().live_groups, 1);
    ex.run_until_stalled();
    let st = ex.stats();
    assert_eq!(st.queues[0].completed, 1);
    assert_eq!(st.live_groups, 0, "the keyed group ended");
    assert_eq!(st.caught_panics, 1);
    assert_eq!(ex.block_on(h).unwrap(), 5);
}

/// The same under `Propagate`: the waker's panic resumes out of the
/// driver once, after the task's end was counted.
#[test]
fn f2d_joiners_waker_panic_propagates_once() {
    let ex = Builder::new()
        .queue("q", 1)
        .panic_policy(PanicPolicy::Propagate)
        .build()
        .unwrap();
    let mut h = ex.spawn("q", async { 5 }).unwrap();
    let waker = Waker::from(Arc::new(PanickingWaker));
    assert!(Pin::new(&mut h)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    let p = catch_unwind(AssertUnwindSafe(|| ex.run_until_stalled())).unwrap_err();
    assert_eq!(message(&*p), "a joiner's waker");
    assert_eq!(ex.stats().queues[0].completed, 1);
    assert_eq!(ex.run_until_stalled(), 0, "surfaced once");
    assert_eq!(ex.block_on(h).unwrap(), 5);
}

/// Finding 4: a stall callback that captures a `Spawner` does not keep the
/// executor alive: the executor drops the callback when it shuts down.
#[test]
fn f4_stall_callback_holding_a_spawner_frees_the_executor() {
    struct CountedClock {
        inner: ManualClock,
        drops: Rc<Cell<u32>>,
    }
    impl Clock for CountedClock {
        fn now_ns(&self) -> u64 {
            self.inner.now_ns()
        }
    }
    impl Drop for CountedClock {
        fn drop(&mut self) {
            self.drops.set(self.drops.get() + 1);
        }
    }
    let clock = ManualClock::new();
    let clock_drops = Rc::new(Cell::new(0));
    let spawner_slot = Rc::new(RefCell::new(None));
    let slot = spawner_slot.clone();
    let stalls = Rc::new(Cell::new(0));
    let seen = stalls.clone();
    let ex = Builder::new()
        .queue("q", 1)
        .clock(CountedClock {
            inner: clock.clone(),
            drops: clock_drops.clone(),
        })
        .read_clock_every_poll(true)
        .stall_detector(Duration::from_millis(1), move |_stall| {
            seen.set(seen.get() + 1);
            // What a callback naturally does: spawn through a Spawner it
            // holds (a follow-up task that logs the stall, say).
            if let Some(spawner) = slot.borrow().as_ref() {
                let _ = tourbillon::Spawner::spawn(spawner, "q", async {});
            }
        })
        .build()
        .unwrap();
    *spawner_slot.borrow_mut() = Some(ex.spawner());
    drop(spawner_slot);
    let c = clock.clone();
    ex.block_on(async {
        let h = ex
            .spawn("q", async move {
                c.advance(Duration::from_millis(2));
            })
            .unwrap();
        h.await.unwrap();
    });
    assert_eq!(stalls.get(), 1);
    assert_eq!(clock_drops.get(), 0);
    drop(ex);
    assert_eq!(clock_drops.get(), 1, "the executor was freed");
}

/// A clock that panics on one chosen read.
struct FlakyClock {
    inner: ManualClock,
    reads: Rc<Cell<u32>>,
    fail_at: u32,
}

impl Clock for FlakyClock {
    fn now_ns(&self) -> u64 {
        let n = self.reads.get() + 1;
        self.reads.set(n);
        if n == self.fail_at {
            panic!("the clock");
        }
        self.inner.now_ns()
    }
}

/// Finding 6a: a clock that panics once. Whichever read fails, every task
/// is polled to completion, and the panic is counted once.
#[test]
fn f6a_clock_that_panics_once_loses_no_task() {
    for fail_at in 1.. {
        let reads = Rc::new(Cell::new(0));
        let ex = Builder::new()
            .queue("a", 1)
            .queue("b", 2)
            .clock(FlakyClock {
                inner: ManualClock::new(),
                reads: reads.clone(),
                fail_at,
            })
            .read_clock_every_poll(true)
            .build()
            .unwrap();
        let handles: Vec<_> = (0..4)
            .map(|i| {
                ex.spawn(if i % 2 == 0 { "a" } else { "b" }, async move {
                    for _ in 0..3 {
                        yield_now().await;
                    }
                    i
                })
                .unwrap()
            })
            .collect();
        ex.run_until_stalled();
        for (i, h) in handles.into_iter().enumerate() {
            assert!(h.is_finished(), "fail_at {fail_at}: task {i} was lost");
            assert_eq!(ex.block_on(h).unwrap(), i);
        }
        let st = ex.stats();
        assert_eq!(st.live_tasks, 0);
        if reads.get() < fail_at {
            // Every read of the workload was tried.
            assert_eq!(st.caught_panics, 0);
            assert!(fail_at > 10, "the workload reads the clock");
            break;
        }
        assert_eq!(st.caught_panics, 1, "fail_at {fail_at}");
    }
}

/// A FIFO whose `push` panics on chosen calls.
struct FlakyPush {
    ids: std::collections::VecDeque<TaskKey>,
    pushes: Rc<Cell<u32>>,
    fail_at: u32,
}

impl Scheduler for FlakyPush {
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        let n = self.pushes.get() + 1;
        self.pushes.set(n);
        if n == self.fail_at {
            panic!("a scheduler's push");
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

/// Finding 6b: a scheduler whose `push` panics during a wake (from a
/// waker's `wake`, which consumes the waker): the woken task still runs,
/// and the waker's reference is given back (valgrind sees no leak).
#[test]
fn f6b_scheduler_push_that_panics_during_a_wake_loses_no_task() {
    let pushes = Rc::new(Cell::new(0));
    let ex = Builder::new()
        .queue_with(
            "q",
            QueueSpec::new(1).scheduler(FlakyPush {
                ids: Default::default(),
                pushes: pushes.clone(),
                fail_at: 3,
            }),
        )
        .build()
        .unwrap();
    let parked: Rc<RefCell<Option<Waker>>> = Rc::default();
    let p = parked.clone();
    let sleeper = ex
        .spawn(
            "q",
            std::future::poll_fn(move |cx| {
                if p.borrow().is_some() {
                    return Poll::Ready(1);
                }
                *p.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }),
        )
        .unwrap();
    let p = parked.clone();
    let waker_task = ex
        .spawn("q", async move {
            yield_now().await;
            // Push 3 (the wake) panics.
            let w = p.borrow().clone().unwrap();
            w.wake();
            2
        })
        .unwrap();
    ex.run_until_stalled();
    assert!(pushes.get() >= 3);
    assert_eq!(ex.stats().caught_panics, 1);
    assert_eq!(ex.block_on(sleeper).unwrap(), 1);
    assert_eq!(ex.block_on(waker_task).unwrap(), 2);
    parked.borrow_mut().take();
}

/// A scheduler that hands out, once, the id of a task it was never given.
struct Forger {
    ids: Vec<TaskKey>,
    forged: Rc<Cell<Option<TaskKey>>>,
    twice: bool,
    last: Option<TaskKey>,
}

impl Scheduler for Forger {
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        self.ids.push(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        if let Some(id) = self.forged.take() {
            return Some(id);
        }
        if self.twice {
            if let Some(id) = self.last.take() {
                return Some(id);
            }
        }
        let id = self.ids.pop();
        self.last = id;
        id
    }
    fn len(&self) -> usize {
        self.ids.len()
    }
}

/// Runs `ex` until stalled; in debug builds the violation's panic comes
/// out first (its message checked against `rule`), and the executor runs
/// on when driven again.
fn run_expecting_violation<K: tourbillon::QueueKey>(ex: &tourbillon::Executor<K>, rule: &str) {
    match (
        catch_unwind(AssertUnwindSafe(|| ex.run_until_stalled())),
        cfg!(debug_assertions),
    ) {
        (Ok(_), false) => {}
        (Ok(_), true) => panic!("debug builds report the violation"),
        (Err(_), false) => panic!("release builds do not panic"),
        (Err(p), true) => {
            let msg = message(&*p);
            assert!(
                msg.contains("scheduler contract broken") && msg.contains(rule),
                "{msg}"
            );
            ex.run_until_stalled();
        }
    }
}

/// Finding 7a: a custom scheduler returns an id it was never given (a
/// task of another queue): that task is not polled without a wake.
#[test]
fn f7a_scheduler_returning_another_queues_task() {
    let forged = Rc::new(Cell::new(None));
    let ex = Builder::new()
        .queue_with(
            "forger",
            QueueSpec::new(1).scheduler(Forger {
                ids: Vec::new(),
                forged: forged.clone(),
                twice: false,
                last: None,
            }),
        )
        .queue("fifo", 1)
        .build()
        .unwrap();
    let polls = Rc::new(Cell::new(0));
    let p = polls.clone();
    let victim = ex
        .spawn(
            "fifo",
            std::future::poll_fn(move |_| {
                p.set(p.get() + 1);
                Poll::<()>::Pending
            }),
        )
        .unwrap();
    ex.run_until_stalled();
    assert_eq!(polls.get(), 1);
    forged.set(Some(victim.key()));
    let _own = ex.spawn("forger", async {}).unwrap();
    run_expecting_violation(&ex, "belongs to queue \"fifo\"");
    assert_eq!(polls.get(), 1, "the victim was not polled without a wake");
    // Debug builds also see `len` unchanged by the forged pop.
    assert!(ex.stats().scheduler_violations >= 1);
}

/// Finding 7b: a custom scheduler returns one id twice: no spurious poll.
#[test]
fn f7b_scheduler_returning_an_id_twice() {
    let ex = Builder::new()
        .queue_with(
            "q",
            QueueSpec::new(1).scheduler(Forger {
                ids: Vec::new(),
                forged: Rc::default(),
                twice: true,
                last: None,
            }),
        )
        .build()
        .unwrap();
    let polls = Rc::new(Cell::new(0));
    let p = polls.clone();
    let _h = ex
        .spawn(
            "q",
            std::future::poll_fn(move |_| {
                p.set(p.get() + 1);
                Poll::<()>::Pending
            }),
        )
        .unwrap();
    run_expecting_violation(&ex, "not pushed since it was last popped");
    assert_eq!(polls.get(), 1, "no spurious poll");
    assert_eq!(ex.stats().scheduler_violations, 1);
}

/// Finding 7c: a custom scheduler whose `len` is always 0 while it holds
/// tasks: its queue is still placed and `block_on` finishes.
#[test]
fn f7c_scheduler_whose_len_is_always_zero() {
    struct Zero(Vec<TaskKey>);
    impl Scheduler for Zero {
        fn push(&mut self, task: TaskKey, _group: GroupId) {
            self.0.push(task);
        }
        fn pop(&mut self) -> Option<TaskKey> {
            self.0.pop()
        }
        fn len(&self) -> usize {
            0
        }
    }
    let ex = Builder::new()
        .queue_with("zero", QueueSpec::new(1).scheduler(Zero(Vec::new())))
        .build()
        .unwrap();
    let mut h = ex
        .spawn("zero", async {
            yield_now().await;
            3
        })
        .unwrap();
    // `block_on` parks when no queue is runnable: with the queue never
    // placed, it would sleep for good.
    let first = catch_unwind(AssertUnwindSafe(|| ex.block_on(&mut h)));
    let out = match (first, cfg!(debug_assertions)) {
        (Ok(out), false) => out,
        (Err(p), true) => {
            let msg = message(&*p);
            assert!(
                msg.contains("rule: len equals the number of ids held"),
                "{msg}"
            );
            ex.block_on(&mut h)
        }
        (r, debug) => panic!("debug build {debug}: block_on returned {:?}", r.is_ok()),
    };
    assert_eq!(out.unwrap(), 3);
}

/// A pending future whose destructor panics with `"the destructor"`.
struct PendingPanicOnDrop;

impl Future for PendingPanicOnDrop {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

impl Drop for PendingPanicOnDrop {
    fn drop(&mut self) {
        panic!("the destructor");
    }
}

/// Runs `ex` until stalled under `Propagate`: the message of the panic
/// that resumed, or `None` if it returned normally.
fn resumed<K: tourbillon::QueueKey>(ex: &tourbillon::Executor<K>) -> Option<String> {
    catch_unwind(AssertUnwindSafe(|| ex.run_until_stalled()))
        .err()
        .map(|p| message(&*p))
}

/// Finding 8a (fault injection in `tests/api_model`): under `Propagate`,
/// an idle task aborted while its future's destructor panics ends panicked,
/// and that panic, the task's own, resumes out of the driver once (the
/// join handle reads the placeholder), as a panic of its poll does.
#[test]
fn f8a_propagate_resumes_the_panic_of_an_aborted_tasks_destructor() {
    let ex = Builder::new()
        .queue("q", 1)
        .panic_policy(PanicPolicy::Propagate)
        .build()
        .unwrap();
    let h = ex.spawn("q", PendingPanicOnDrop).unwrap();
    assert_eq!(resumed(&ex), None);
    h.abort();
    assert_eq!(resumed(&ex).as_deref(), Some("the destructor"));
    assert_eq!(resumed(&ex), None, "resumed once");
    let st = ex.stats();
    assert_eq!(st.queues[0].panicked, 1);
    assert_eq!(st.caught_panics, 0);
    let err = ex.block_on(h).unwrap_err();
    assert!(err.is_panic());
    assert!(message(&*err.into_panic()).contains("PanicPolicy::Propagate"));
}

/// Finding 8b (fault injection in `tests/api_model`): under `Propagate`,
/// every task's panic resumes out of a driver once, one per call, also
/// when another panic waits: the panic of the joiner's waker, woken when
/// the task ended (before the task's own panic reached the sink), and the
/// panics of two aborted tasks' destructors, taken at one poll boundary.
/// Only the panics of other user code beyond the first that waits are
/// dropped and counted.
#[test]
fn f8b_propagate_resumes_every_task_panic_once() {
    let ex = Builder::new()
        .queue("q", 1)
        .panic_policy(PanicPolicy::Propagate)
        .build()
        .unwrap();
    let mut h = ex.spawn("q", async { panic!("the task") }).unwrap();
    let waker = Waker::from(Arc::new(PanickingWaker));
    assert!(Pin::new(&mut h)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    assert_eq!(resumed(&ex).as_deref(), Some("the task"));
    assert_eq!(resumed(&ex).as_deref(), Some("a joiner's waker"));
    assert_eq!(resumed(&ex), None);
    assert_eq!(ex.stats().caught_panics, 0);
    drop(h);

    let a = ex.spawn("q", PendingPanicOnDrop).unwrap();
    let b = ex.spawn("q", PendingPanicOnDrop).unwrap();
    assert_eq!(resumed(&ex), None);
    a.abort();
    b.abort();
    assert_eq!(resumed(&ex).as_deref(), Some("the destructor"));
    assert_eq!(resumed(&ex).as_deref(), Some("the destructor"));
    assert_eq!(resumed(&ex), None);
    let st = ex.stats();
    assert_eq!(st.queues[0].panicked, 3);
    assert_eq!(st.caught_panics, 0);
    assert!(a.is_finished() && b.is_finished());
}

/// A FIFO whose `len` panics on one chosen call.
struct FlakyLen {
    ids: std::collections::VecDeque<TaskKey>,
    calls: Rc<Cell<u32>>,
    fail_at: u32,
}

impl Scheduler for FlakyLen {
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        self.ids.push_back(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        self.ids.pop_front()
    }
    fn len(&self) -> usize {
        let n = self.calls.get() + 1;
        self.calls.set(n);
        if n == self.fail_at {
            panic!("a scheduler's len");
        }
        self.ids.len()
    }
}

/// Finding 8c (fault injection in `tests/api_model`): a `len` that panics
/// is a panic of user code, caught and counted, not a wrong length: debug
/// builds, which check `len` around every `push` and `pop`, report no
/// contract violation for it (one would resume out of the driver even
/// under `Catch`). Whichever call panics.
#[test]
fn f8c_a_panicking_len_is_not_a_contract_violation() {
    for fail_at in 1.. {
        let calls = Rc::new(Cell::new(0));
        let ex = Builder::new()
            .queue_with(
                "q",
                QueueSpec::new(1).scheduler(FlakyLen {
                    ids: Default::default(),
                    calls: calls.clone(),
                    fail_at,
                }),
            )
            .build()
            .unwrap();
        let handles: Vec<_> = (0..3)
            .map(|i| {
                ex.spawn("q", async move {
                    yield_now().await;
                    i
                })
                .unwrap()
            })
            .collect();
        let run = catch_unwind(AssertUnwindSafe(|| ex.run_until_stalled()));
        assert!(run.is_ok(), "fail_at {fail_at}: a panic left the driver");
        let st = ex.stats();
        assert_eq!(st.scheduler_violations, 0, "fail_at {fail_at}");
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(ex.block_on(h).unwrap(), i, "fail_at {fail_at}");
        }
        if calls.get() < fail_at {
            // Every call of the workload was tried (release builds call
            // `len` only for statistics).
            assert_eq!(st.caught_panics, 0);
            break;
        }
        assert_eq!(st.caught_panics, 1, "fail_at {fail_at}");
    }
}

/// Finding 8d (fault injection in `tests/api_model`): a remote spawn
/// aborted before the executor started it, whose future's destructor
/// panics and whose handle was polled with a waker whose `wake` panics.
/// The two are separate calls into user code: the second ran while the
/// first unwound, and a panic while unwinding aborted the process. Now
/// both are caught and counted, at the poll boundary that takes the op and
/// when the executor is dropped with the op still in its inbox.
#[test]
fn f8d_remote_spawn_dropped_unstarted_with_panicking_destructor_and_waker() {
    let waker = Waker::from(Arc::new(PanickingWaker));
    let drops = Arc::new(AtomicUsize::new(0));
    let ex = Builder::new().queue("q", 1).build().unwrap();
    let mut aborted = ex
        .remote_spawner()
        .spawn("q", SendPanicOnDrop(drops.clone()))
        .unwrap();
    assert!(Pin::new(&mut aborted)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    aborted.abort();
    ex.run_until_stalled();
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(ex.stats().caught_panics, 2);
    assert!(ex.block_on(aborted).unwrap_err().is_cancelled());

    let mut queued = ex
        .remote_spawner()
        .spawn("q", SendPanicOnDrop(drops.clone()))
        .unwrap();
    assert!(Pin::new(&mut queued)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    drop(ex);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    assert!(queued.is_finished());
    let ex2 = Builder::new().queue("q", 1).build().unwrap();
    assert!(ex2.block_on(queued).unwrap_err().is_panic());
}

/// Finding 8e (fault injection in `tests/api_model`): a remote task's
/// output whose destructor panics, delivered to a handle that was polled
/// with a waker whose `wake` panics and then dropped. The delivery dropped
/// the output (nobody reads it) while the wake unwound, and the process
/// aborted. Now the slot is let go before the wake: the output's panic is
/// caught and counted, and the waker is dropped unwoken.
#[test]
fn f8e_remote_output_dropped_by_the_delivery_and_a_panicking_waker() {
    let waker = Waker::from(Arc::new(PanickingWaker));
    let ex = Builder::new().queue("q", 1).build().unwrap();
    let mut h = ex
        .remote_spawner()
        .spawn("q", async { PanicOnDrop("a remote output's destructor") })
        .unwrap();
    assert!(Pin::new(&mut h)
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    drop(h);
    ex.run_until_stalled();
    let st = ex.stats();
    assert_eq!(st.queues[0].completed, 1);
    assert_eq!(st.caught_panics, 1);
    assert_eq!(st.live_tasks, 0);
}

/// A host waker whose destructor panics.
struct DropPanickingHost(Arc<AtomicUsize>);

impl Wake for DropPanickingHost {
    fn wake(self: Arc<Self>) {}
}

impl Drop for DropPanickingHost {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        panic!("a host waker's destructor");
    }
}

/// A host's waker is user code too: the executor drops the one a
/// `run_until` registered when that future is dropped (which may happen
/// while unwinding) and the ones still registered when it shuts down,
/// and a panicking destructor escapes neither.
#[test]
fn host_wakers_whose_destructor_panics() {
    let drops = Arc::new(AtomicUsize::new(0));
    let ex = Builder::new().queue("q", 1).build().unwrap();
    {
        let waker = Waker::from(Arc::new(DropPanickingHost(drops.clone())));
        let mut fut = Box::pin(ex.run_until(std::future::pending::<()>()));
        let _ = fut.as_mut().poll(&mut Context::from_waker(&waker));
        // The executor's registration is the last reference.
        drop(waker);
        assert_eq!(drops.load(Ordering::SeqCst), 0);
        drop(fut);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped with its driver");
    {
        let waker = Waker::from(Arc::new(DropPanickingHost(drops.clone())));
        // The driver is never dropped (no heap memory to leak: it lives
        // here), so its registration stays until shutdown.
        let mut fut = std::mem::ManuallyDrop::new(ex.run_until(std::future::pending::<()>()));
        let _ = Pin::new(&mut *fut).poll(&mut Context::from_waker(&waker));
        drop(waker);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(ex);
    assert_eq!(drops.load(Ordering::SeqCst), 2, "dropped at shutdown");
}
