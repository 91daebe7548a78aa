//! Schedulers written outside the crate against the public `Scheduler`
//! trait: a LIFO and a "smallest TaskKey first" priority scheduler. Checks
//! the order of polls, that the executor keeps the contract documented in
//! `src/sched/mod.rs` (`push` / `polled` / `forget` / `group_ended`, counted
//! and cross-checked call by call), and that a custom scheduler runs under
//! the executor like the built-in `RunnableFifo`.

mod support;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::future::{pending, Future};
use std::rc::Rc;
use std::time::Duration;

use support::Gate;
use tourbillon::clock::ManualClock;
use tourbillon::sched::{RunnableFifo, Scheduler};
use tourbillon::task::{yield_now, GroupId, JoinHandle, TaskKey};
use tourbillon::{Builder, QueueSpec};

// ---------------------------------------------------------------------------
// Call recorder: checks the contract as the calls arrive.
// ---------------------------------------------------------------------------

#[derive(Default, Debug)]
struct Calls {
    pushes: usize,
    /// Ids returned by `pop`, in order.
    popped: Vec<TaskKey>,
    polled_pending: usize,
    polled_finished: Vec<TaskKey>,
    elapsed: Vec<(TaskKey, Option<Duration>)>,
    forgotten: Vec<TaskKey>,
    /// `group_ended` calls per group incarnation: a group id may come back
    /// for a new group after it ended (ids are dense), so a group is a
    /// (`GroupId`, incarnation) pair.
    group_ended: HashMap<(GroupId, u32), usize>,
    /// Current incarnation of each group id, and whether it ended.
    incarnation: HashMap<GroupId, (u32, bool)>,
    /// Group of every task, from `push`.
    group_of: HashMap<TaskKey, (GroupId, u32)>,
    /// Ids held (pushed, not popped).
    held: HashSet<TaskKey>,
    /// The last id `pop` returned, until `polled` names it.
    last_popped: Option<TaskKey>,
    /// Tasks that ended (finished poll or forget).
    ended: HashSet<TaskKey>,
    violations: Vec<String>,
}

type Recorder = Rc<RefCell<Calls>>;

impl Calls {
    fn push(&mut self, t: TaskKey, g: GroupId) {
        self.pushes += 1;
        if !self.held.insert(t) {
            self.violations
                .push(format!("{t:?} pushed twice without a pop"));
        }
        if self.ended.contains(&t) {
            self.violations.push(format!("{t:?} pushed after it ended"));
        }
        let known = self.group_of.get(&t).copied();
        let inc = self.incarnation.entry(g).or_insert((0, false));
        if inc.1 {
            if known.is_some() {
                // A task of the group that ended comes back: a violation.
                self.violations
                    .push(format!("{t:?} pushed into ended group {g:?}"));
            } else {
                // A new task reuses the id: a new group.
                *inc = (inc.0 + 1, false);
            }
        }
        let cur = (g, inc.0);
        if let Some(old) = known {
            if old.0 != g {
                self.violations.push(format!("{t:?} changed group"));
            }
        } else {
            self.group_of.insert(t, cur);
        }
    }

    fn pop(&mut self, t: Option<TaskKey>) {
        if let Some(t) = t {
            self.held.remove(&t);
            self.popped.push(t);
            self.last_popped = Some(t);
        }
    }

    fn polled(&mut self, t: TaskKey, g: GroupId, elapsed: Option<Duration>, finished: bool) {
        if self.last_popped != Some(t) {
            self.violations.push(format!(
                "polled({t:?}) but the last pop was {:?}",
                self.last_popped
            ));
        }
        self.last_popped = None;
        if self.group_of.get(&t).map(|x| x.0) != Some(g) {
            self.violations
                .push(format!("polled({t:?}) with a wrong group"));
        }
        if self.ended.contains(&t) {
            self.violations
                .push(format!("polled({t:?}) after it ended"));
        }
        self.elapsed.push((t, elapsed));
        if finished {
            self.polled_finished.push(t);
            self.ended.insert(t);
        } else {
            self.polled_pending += 1;
        }
    }

    fn forget(&mut self, t: TaskKey, g: GroupId) {
        if self.group_of.get(&t).map(|x| x.0) != Some(g) {
            self.violations
                .push(format!("forget({t:?}) with a wrong group"));
        }
        if !self.ended.insert(t) {
            self.violations
                .push(format!("forget({t:?}) of an ended task"));
        }
        self.forgotten.push(t);
    }

    fn group_ended(&mut self, g: GroupId) {
        let inc = self.incarnation.entry(g).or_insert((0, false));
        inc.1 = true;
        *self.group_ended.entry((g, inc.0)).or_default() += 1;
    }
}

// ---------------------------------------------------------------------------
// The two schedulers.
// ---------------------------------------------------------------------------

/// Last in, first out. Keeps forgotten ids (the executor skips them when
/// they are popped).
struct Lifo {
    stack: Vec<TaskKey>,
    calls: Recorder,
}

impl Scheduler for Lifo {
    fn push(&mut self, task: TaskKey, group: GroupId) {
        self.calls.borrow_mut().push(task, group);
        self.stack.push(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        let t = self.stack.pop();
        self.calls.borrow_mut().pop(t);
        t
    }
    fn len(&self) -> usize {
        self.stack.len()
    }
    fn polled(&mut self, task: TaskKey, group: GroupId, elapsed: Option<Duration>, finished: bool) {
        self.calls
            .borrow_mut()
            .polled(task, group, elapsed, finished);
    }
    fn forget(&mut self, task: TaskKey, group: GroupId) {
        self.calls.borrow_mut().forget(task, group);
    }
    fn group_ended(&mut self, group: GroupId) {
        self.calls.borrow_mut().group_ended(group);
    }
}

/// Smallest `TaskKey` (slot index, then generation) first. Drops forgotten
/// ids at once, and asks for per-poll timing.
struct ByTaskId {
    set: BTreeSet<TaskKey>,
    calls: Recorder,
}

impl Scheduler for ByTaskId {
    fn push(&mut self, task: TaskKey, group: GroupId) {
        self.calls.borrow_mut().push(task, group);
        self.set.insert(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        let t = self.set.pop_first();
        self.calls.borrow_mut().pop(t);
        t
    }
    fn len(&self) -> usize {
        self.set.len()
    }
    fn wants_timing(&self) -> bool {
        true
    }
    fn polled(&mut self, task: TaskKey, group: GroupId, elapsed: Option<Duration>, finished: bool) {
        self.calls
            .borrow_mut()
            .polled(task, group, elapsed, finished);
    }
    fn forget(&mut self, task: TaskKey, group: GroupId) {
        self.set.remove(&task);
        self.calls.borrow_mut().forget(task, group);
    }
    fn group_ended(&mut self, group: GroupId) {
        self.calls.borrow_mut().group_ended(group);
    }
}

/// A plain FIFO outside the crate, to compare with the built-in one.
#[derive(Default)]
struct MyFifo(VecDeque<TaskKey>);

impl Scheduler for MyFifo {
    fn push(&mut self, task: TaskKey, _group: GroupId) {
        self.0.push_back(task);
    }
    fn pop(&mut self) -> Option<TaskKey> {
        self.0.pop_front()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

fn lifo(calls: &Recorder) -> Lifo {
    Lifo {
        stack: Vec::new(),
        calls: calls.clone(),
    }
}

fn by_task_id(calls: &Recorder) -> ByTaskId {
    ByTaskId {
        set: BTreeSet::new(),
        calls: calls.clone(),
    }
}

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

type Log = Rc<RefCell<Vec<&'static str>>>;

fn new_log() -> Log {
    Rc::default()
}

/// Logs `name` at each poll and yields `yields` times before completing.
fn worker(log: &Log, name: &'static str, yields: usize) -> impl Future<Output = ()> + 'static {
    let log = log.clone();
    async move {
        log.borrow_mut().push(name);
        for _ in 0..yields {
            yield_now().await;
            log.borrow_mut().push(name);
        }
    }
}

// ---------------------------------------------------------------------------
// Order
// ---------------------------------------------------------------------------

#[test]
fn lifo_polls_the_latest_runnable_task_first() {
    let calls = Recorder::default();
    let ex = Builder::new()
        .queue_with("lifo", QueueSpec::new(1).scheduler(lifo(&calls)))
        .build()
        .unwrap();
    assert_eq!(ex.queue_stats("lifo").unwrap().scheduler, "custom");
    let log = new_log();
    let a = ex.spawn("lifo", worker(&log, "a", 0)).unwrap();
    let b = ex.spawn("lifo", worker(&log, "b", 1)).unwrap();
    let c = ex.spawn("lifo", worker(&log, "c", 2)).unwrap();
    ex.run_until_stalled();
    // A yielding task is pushed last, so it is popped again at once.
    assert_eq!(*log.borrow(), ["c", "c", "c", "b", "b", "a"]);
    let c_ = calls.borrow();
    assert_eq!(
        c_.popped,
        [c.key(), c.key(), c.key(), b.key(), b.key(), a.key()]
    );
    assert!(c_.violations.is_empty(), "{:?}", c_.violations);
    assert_eq!(c_.pushes, 6, "3 spawns and 3 yields");
    assert_eq!(c_.polled_pending, 3);
    assert_eq!(c_.polled_finished, [c.key(), b.key(), a.key()]);
    // No timing asked: no durations.
    assert!(c_.elapsed.iter().all(|(_, e)| e.is_none()));
    assert_eq!(c_.group_ended.len(), 3);
    assert!(c_.group_ended.values().all(|&n| n == 1));
    drop(c_);
    ex.block_on(async {
        a.await.unwrap();
        b.await.unwrap();
        c.await.unwrap();
    });
}

#[test]
fn priority_by_task_id_polls_the_smallest_id_first() {
    let calls = Recorder::default();
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue_with("prio", QueueSpec::new(1).scheduler(by_task_id(&calls)))
        .clock(clock.clone())
        .build()
        .unwrap();
    let log = new_log();
    const NAMES: [&str; 5] = ["t0", "t1", "t2", "t3", "t4"];
    let gates: Vec<Rc<Gate>> = (0..5).map(|_| Rc::default()).collect();
    let handles: Vec<JoinHandle<()>> = (0..5)
        .map(|i| {
            let (g, l, clock) = (gates[i].clone(), log.clone(), clock.clone());
            ex.spawn("prio", async move {
                g.wait().await;
                // Each poll costs (i + 1) us of virtual time.
                clock.advance(Duration::from_micros(i as u64 + 1));
                l.borrow_mut().push(NAMES[i]);
            })
            .unwrap()
        })
        .collect();
    let ids: Vec<TaskKey> = handles.iter().map(|h| h.key()).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "fresh slots are taken in order");
    ex.run_until_stalled();
    // Woken in reverse order; polled by id.
    ex.block_on(async {
        for g in gates.iter().rev() {
            g.open();
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    assert_eq!(*log.borrow(), NAMES);
    let c = calls.borrow();
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    assert_eq!(c.popped[5..], ids[..]);
    // Timing was asked for: every poll reports its exact virtual duration
    // (0 for the first polls, which only register with the gate).
    let expected: Vec<(TaskKey, Option<Duration>)> = ids
        .iter()
        .map(|&t| (t, Some(Duration::ZERO)))
        .chain(
            ids.iter()
                .enumerate()
                .map(|(i, &t)| (t, Some(Duration::from_micros(i as u64 + 1)))),
        )
        .collect();
    assert_eq!(c.elapsed, expected);
    assert_eq!(c.polled_pending, 5);
    assert_eq!(c.polled_finished, ids);
}

// ---------------------------------------------------------------------------
// Contract
// ---------------------------------------------------------------------------

/// Every way a task can end, on one queue with `sched`; checks the calls.
fn contract_workload<S: Scheduler>(make: impl FnOnce(&Recorder) -> S) {
    let calls = Recorder::default();
    let ex = Builder::new()
        .queue_with("c", QueueSpec::new(1).scheduler(make(&calls)))
        .queue("other", 1)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let gate: Rc<Gate> = Rc::default();
    let log = new_log();

    // Completes at its first poll; completes after two yields.
    let done0 = ex.spawn("c", async { 0 }).unwrap();
    let done2 = ex.spawn("c", worker(&log, "done2", 2)).unwrap();
    // Idle, then aborted.
    let idle_abort = ex.spawn("c", gate.wait()).unwrap();
    let idle_abort_id = idle_abort.key();
    // Aborted before its first poll.
    let queued_abort = ex.spawn("c", async { unreachable!() }).unwrap();
    let queued_abort_id = queued_abort.key();
    queued_abort.abort();
    // Aborts itself.
    let slot: Rc<RefCell<Option<JoinHandle<()>>>> = Rc::default();
    let self_abort = {
        let slot = slot.clone();
        ex.spawn("c", async move {
            slot.borrow().as_ref().unwrap().abort();
            pending::<()>().await;
        })
        .unwrap()
    };
    let self_abort_id = self_abort.key();
    *slot.borrow_mut() = Some(self_abort);
    // Panics (PanicPolicy::Catch).
    let panics = ex
        .spawn("c", async {
            panic!("custom scheduler task panic");
        })
        .unwrap();
    // Idle at shutdown.
    let idle_shutdown = ex.spawn("c", pending::<()>()).unwrap();
    // Completed, output never read before shutdown.
    let unjoined = ex.spawn("c", async { String::from("unread") }).unwrap();
    // Detached, completes.
    drop(ex.spawn("c", worker(&log, "detached", 1)).unwrap());

    ex.run_until_stalled();
    idle_abort.abort();
    ex.run_until_stalled();
    // Queued at shutdown, never polled.
    let queued_shutdown = ex.spawn("c", async {}).unwrap();

    ex.block_on(async {
        assert_eq!(done0.await.unwrap(), 0);
        done2.await.unwrap();
        assert!(idle_abort.await.unwrap_err().is_cancelled());
        assert!(queued_abort.await.unwrap_err().is_cancelled());
        assert!(panics.await.unwrap_err().is_panic());
    });
    // Not polled by that run: the main future completed first.
    assert!(!queued_shutdown.is_finished());
    assert!(unjoined.is_finished());
    let polls = ex.stats().polls;
    let spawned = ex.queue_stats("c").unwrap().spawned;
    assert_eq!(spawned, 10);
    let (unjoined_id, expected_forgotten) = (
        unjoined.key(),
        HashSet::from([
            idle_abort_id,
            queued_abort_id,
            idle_shutdown.key(),
            queued_shutdown.key(),
        ]),
    );
    drop(ex);

    let c = calls.borrow();
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    // `polled` once per poll, and never for the forgotten.
    assert_eq!(
        (c.polled_pending + c.polled_finished.len()) as u64,
        polls,
        "polled is called after every poll"
    );
    // done0, done2, self_abort, panics, unjoined, detached finished in a poll.
    assert_eq!(c.polled_finished.len(), 6);
    assert!(c.polled_finished.contains(&self_abort_id));
    assert!(c.polled_finished.contains(&unjoined_id));
    // Forgotten, once each: the two aborted without a poll and the two
    // shut down; not the completed ones whose output was still unread.
    let forgotten: HashSet<TaskKey> = c.forgotten.iter().copied().collect();
    assert_eq!(c.forgotten.len(), 4, "{:?}", c.forgotten);
    assert_eq!(forgotten, expected_forgotten);
    // Every group (one per spawn) ended exactly once.
    assert_eq!(c.group_of.len(), 10);
    let groups: HashSet<(GroupId, u32)> = c.group_of.values().copied().collect();
    assert_eq!(groups.len(), 10);
    for g in &groups {
        assert_eq!(c.group_ended.get(g), Some(&1), "group_ended({g:?})");
    }
    assert_eq!(c.group_ended.len(), 10);
    assert!(c.held.iter().all(|t| c.ended.contains(t)));
}

#[test]
fn lifo_gets_the_documented_calls() {
    contract_workload(lifo);
}

#[test]
fn priority_scheduler_gets_the_documented_calls() {
    contract_workload(by_task_id);
}

// ---------------------------------------------------------------------------
// Under the executor like the built-in
// ---------------------------------------------------------------------------

/// Runs the same mixed workload on a queue with `spec`; returns the poll
/// log and the executor's poll count.
fn fifo_workload(spec: QueueSpec) -> (Vec<&'static str>, u64, String) {
    let ex = Builder::new()
        .queue_with("q", spec)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let log = new_log();
    let gate: Rc<Gate> = Rc::default();
    let hs = vec![
        ex.spawn("q", worker(&log, "a", 3)).unwrap(),
        ex.spawn("q", {
            let (g, l) = (gate.clone(), log.clone());
            async move {
                g.wait().await;
                l.borrow_mut().push("gated");
            }
        })
        .unwrap(),
        ex.spawn("q", worker(&log, "b", 1)).unwrap(),
        ex.spawn("q", {
            let (g, l) = (gate.clone(), log.clone());
            async move {
                l.borrow_mut().push("opener");
                yield_now().await;
                g.open();
                l.borrow_mut().push("opener");
            }
        })
        .unwrap(),
        ex.spawn("q", worker(&log, "c", 2)).unwrap(),
    ];
    ex.block_on(async {
        for h in hs {
            h.await.unwrap();
        }
    });
    let kind = ex.queue_stats("q").unwrap().scheduler.to_string();
    let log = log.borrow().clone();
    (log, ex.stats().polls, kind)
}

#[test]
fn a_custom_fifo_runs_exactly_like_the_built_in() {
    let (built_in, polls_a, kind_a) = fifo_workload(QueueSpec::new(1));
    let (explicit, polls_b, kind_b) =
        fifo_workload(QueueSpec::new(1).scheduler(RunnableFifo::new()));
    let (custom, polls_c, kind_c) = fifo_workload(QueueSpec::new(1).scheduler(MyFifo::default()));
    assert_eq!(
        built_in,
        ["a", "b", "opener", "c", "a", "b", "opener", "c", "a", "gated", "c", "a"]
    );
    assert_eq!(explicit, built_in);
    assert_eq!(custom, built_in);
    assert_eq!((polls_a, polls_b, polls_c), (13, 13, 13));
    assert_eq!(kind_a, "RunnableFifo");
    assert_eq!(kind_b, "RunnableFifo", "a RunnableFifo is recognised");
    assert_eq!(kind_c, "custom");
}

#[test]
fn a_custom_queue_gets_its_share_next_to_a_built_in_one() {
    let clock = ManualClock::new();
    let calls = Recorder::default();
    let ex = Builder::new()
        .queue_with("custom", QueueSpec::new(3).scheduler(lifo(&calls)))
        .queue("fifo", 1)
        .base_slice(Duration::from_micros(50))
        .clock(clock.clone())
        .build()
        .unwrap();
    let stop = Rc::new(Cell::new(false));
    let mut hs = Vec::new();
    for key in ["custom", "fifo"] {
        for _ in 0..3 {
            let (clock, stop) = (clock.clone(), stop.clone());
            hs.push(
                ex.spawn(key, async move {
                    let mut n = 0u32;
                    while !stop.get() {
                        clock.advance(Duration::from_micros(10));
                        n += 1;
                        yield_now().await;
                    }
                    n
                })
                .unwrap(),
            );
        }
    }
    let timer = {
        let (clock, stop) = (clock.clone(), stop.clone());
        // Stops everyone after 40 ms of virtual time; it is polled once per
        // fifo-queue run, which is often enough.
        ex.spawn("fifo", async move {
            while clock.now() < 40_000_000 {
                yield_now().await;
            }
            stop.set(true);
        })
        .unwrap()
    };
    ex.block_on(async {
        timer.await.unwrap();
        for h in hs {
            h.await.unwrap();
        }
    });
    let (sc, sf) = (
        ex.queue_stats("custom").unwrap(),
        ex.queue_stats("fifo").unwrap(),
    );
    let ratio = sc.service.as_nanos() as f64 / sf.service.as_nanos() as f64;
    assert!(
        (2.8..=3.2).contains(&ratio),
        "service {:?} vs {:?}: ratio {ratio}",
        sc.service,
        sf.service
    );
    let c = calls.borrow();
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    assert_eq!(
        c.polled_pending + c.polled_finished.len(),
        sc.polls as usize
    );
}

/// A scheduler that breaks the contract (`len` says 1 while `pop` has
/// nothing) must not make the executor spin: a queue whose `pop` returns
/// `None` is treated as empty.
#[test]
fn a_scheduler_whose_len_lies_does_not_hang_the_executor() {
    struct Liar(Vec<TaskKey>);
    impl Scheduler for Liar {
        fn push(&mut self, task: TaskKey, _group: GroupId) {
            self.0.push(task);
        }
        fn pop(&mut self) -> Option<TaskKey> {
            self.0.pop()
        }
        fn len(&self) -> usize {
            self.0.len() + 1
        }
    }
    let ex = Builder::new()
        .queue_with("liar", QueueSpec::new(1).scheduler(Liar(Vec::new())))
        .queue("fifo", 1)
        .build()
        .unwrap();
    let a = ex.spawn("liar", async { 1 }).unwrap();
    let b = ex.spawn("fifo", async { 2 }).unwrap();
    // Returns (instead of looping on the "non-empty" liar queue); debug
    // builds report the wrong `len` as a panic out of the driver, and the
    // executor runs on when driven again.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ex.run_until_stalled()));
    match (run, cfg!(debug_assertions)) {
        (Ok(polls), false) => assert_eq!(polls, 2),
        (Ok(_), true) => panic!("debug builds report the wrong len"),
        (Err(_), false) => panic!("release builds do not panic"),
        (Err(p), true) => {
            let msg = p.downcast_ref::<String>().expect("a message");
            assert!(
                msg.contains("len() says 1") && msg.contains("rule: len equals"),
                "{msg}"
            );
            ex.run_until_stalled();
        }
    }
    assert!(a.is_finished() && b.is_finished());
    // `len` is checked in debug builds only.
    assert_eq!(ex.stats().scheduler_violations >= 1, cfg!(debug_assertions));
    assert_eq!(
        ex.block_on(async { a.await.unwrap() + b.await.unwrap() }),
        3
    );
}
