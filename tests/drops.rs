//! Drop accounting: every future and every output is dropped exactly once
//! (no leak, no double drop) across completed, aborted, detached, panicked
//! and shut-down tasks, under both panic policies, including destructors
//! that re-enter the executor or panic.

mod support;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::{pending, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::task::Poll;

use support::Gate;
use tourbillon::config::PanicPolicy;
use tourbillon::error::SpawnError;
use tourbillon::task::{yield_now, JoinHandle};
use tourbillon::{Builder, Executor};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    A,
    B,
}

/// Records every value it creates and every drop, by name.
#[derive(Default)]
struct Registry {
    created: RefCell<Vec<String>>,
    drops: RefCell<BTreeMap<String, usize>>,
}

/// A value registered in a `Registry`: counts its own drop.
#[derive(Debug)]
struct Tracked {
    name: String,
    reg: Rc<Registry>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.drops.borrow().iter()).finish()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        *self
            .reg
            .drops
            .borrow_mut()
            .entry(self.name.clone())
            .or_default() += 1;
    }
}

impl Registry {
    fn new() -> Rc<Registry> {
        Rc::default()
    }

    fn make(self: &Rc<Self>, name: &str) -> Tracked {
        let mut created = self.created.borrow_mut();
        assert!(!created.iter().any(|n| n == name), "{name} made twice");
        created.push(name.to_string());
        Tracked {
            name: name.to_string(),
            reg: self.clone(),
        }
    }

    fn drops(&self, name: &str) -> usize {
        self.drops.borrow().get(name).copied().unwrap_or(0)
    }

    fn created(&self, name: &str) -> bool {
        self.created.borrow().iter().any(|n| n == name)
    }

    /// Every value created was dropped exactly once.
    fn assert_all_dropped_once(&self) {
        let created = self.created.borrow();
        let drops = self.drops.borrow();
        for name in created.iter() {
            assert_eq!(drops.get(name), Some(&1), "{name} dropped once");
        }
        assert_eq!(drops.len(), created.len(), "nothing else dropped");
    }
}

/// A task that holds `f:<name>` and, after `yields` yields, returns the
/// output `o:<name>`.
fn finishing(
    reg: &Rc<Registry>,
    name: &str,
    yields: usize,
) -> impl Future<Output = Tracked> + 'static {
    let (state, reg, out) = (
        reg.make(&format!("f:{name}")),
        reg.clone(),
        format!("o:{name}"),
    );
    async move {
        let _state = state;
        for _ in 0..yields {
            yield_now().await;
        }
        reg.make(&out)
    }
}

/// A task that holds `f:<name>` and waits for `gate` (forever if never
/// opened), then returns `o:<name>`.
fn gated(
    reg: &Rc<Registry>,
    name: &str,
    gate: &Rc<Gate>,
) -> impl Future<Output = Tracked> + 'static {
    let (state, reg, out, gate) = (
        reg.make(&format!("f:{name}")),
        reg.clone(),
        format!("o:{name}"),
        gate.clone(),
    );
    async move {
        let _state = state;
        gate.wait().await;
        reg.make(&out)
    }
}

/// A task that holds `f:<name>` and panics after one yield.
fn panicking(reg: &Rc<Registry>, name: &str) -> impl Future<Output = Tracked> + 'static {
    let state = reg.make(&format!("f:{name}"));
    async move {
        let _state = state;
        yield_now().await;
        panic!("task panic");
    }
}

fn two_queues(policy: PanicPolicy) -> Executor<Q> {
    Builder::new()
        .queue(Q::A, 1)
        .queue(Q::B, 2)
        .panic_policy(policy)
        .clock(tourbillon::clock::ManualClock::new())
        .build()
        .unwrap()
}

#[test]
fn every_future_and_output_is_dropped_exactly_once_with_catch() {
    let reg = Registry::new();
    let ex = two_queues(PanicPolicy::Catch);
    let never = Rc::new(Gate::default());
    let later = Rc::new(Gate::default());

    // Completed and joined.
    let joined = ex.spawn(Q::A, finishing(&reg, "joined", 2)).unwrap();
    // Completed, output never read (handle outlives the executor).
    let unjoined = ex.spawn(Q::B, finishing(&reg, "unjoined", 1)).unwrap();
    // Detached before completion.
    drop(ex.spawn(Q::A, finishing(&reg, "detached", 3)).unwrap());
    // Completed, handle dropped afterwards.
    let dropped_after = ex.spawn(Q::B, finishing(&reg, "dropped_after", 0)).unwrap();
    // Idle, then aborted.
    let aborted_idle = ex.spawn(Q::A, gated(&reg, "aborted_idle", &never)).unwrap();
    // Aborted before its first poll.
    let aborted_queued = ex
        .spawn(Q::B, finishing(&reg, "aborted_queued", 0))
        .unwrap();
    aborted_queued.abort();
    // Aborts itself, then yields.
    let slot: Rc<RefCell<Option<JoinHandle<Tracked>>>> = Rc::default();
    let self_aborted = {
        let (state, slot) = (reg.make("f:self_aborted"), slot.clone());
        ex.spawn(Q::A, async move {
            let _state = state;
            slot.borrow().as_ref().unwrap().abort();
            yield_now().await;
            unreachable!("never polled again")
        })
        .unwrap()
    };
    *slot.borrow_mut() = Some(self_aborted);
    // Panics: joined, and detached.
    let panicked = ex.spawn(Q::B, panicking(&reg, "panicked")).unwrap();
    drop(
        ex.spawn(Q::A, panicking(&reg, "panicked_detached"))
            .unwrap(),
    );
    // Left idle at shutdown: joinable, detached, and aborted (not applied).
    let idle = ex.spawn(Q::B, gated(&reg, "idle", &never)).unwrap();
    drop(
        ex.spawn(Q::A, gated(&reg, "idle_detached", &never))
            .unwrap(),
    );
    let aborted_late = ex.spawn(Q::A, gated(&reg, "aborted_late", &never)).unwrap();
    // Woken between runs, still queued at shutdown.
    let woken_late = ex.spawn(Q::B, gated(&reg, "woken_late", &later)).unwrap();
    // Holds the join handle of the unjoined task, drops it at shutdown.
    let holder = {
        let state = reg.make("f:holder");
        let other = ex.spawn(Q::A, finishing(&reg, "held", 0)).unwrap();
        ex.spawn(Q::B, async move {
            let _state = state;
            let _other = other;
            pending::<()>().await;
        })
        .unwrap()
    };

    ex.block_on(async {
        let out = joined.await.unwrap();
        assert_eq!(out.name, "o:joined");
        assert!(panicked.await.unwrap_err().is_panic());
    });
    ex.run_until_stalled();

    // The run dropped exactly what ended.
    for name in [
        "f:joined",
        "o:joined",
        "f:unjoined",
        "f:detached",
        "o:detached",
        "f:dropped_after",
        "f:aborted_queued",
        "f:self_aborted",
        "f:panicked",
        "f:panicked_detached",
        "f:held",
    ] {
        assert_eq!(reg.drops(name), 1, "{name}");
    }
    assert!(!reg.created("o:aborted_queued"), "aborted before it ran");
    for name in [
        "o:unjoined",
        "o:dropped_after",
        "o:held",
        "f:aborted_idle",
        "f:idle",
        "f:idle_detached",
        "f:aborted_late",
        "f:woken_late",
        "f:holder",
    ] {
        assert_eq!(reg.drops(name), 0, "{name}");
    }
    // An unread output goes with its handle.
    drop(dropped_after);
    assert_eq!(reg.drops("o:dropped_after"), 1);
    aborted_idle.abort();
    ex.run_until_stalled();
    assert_eq!(reg.drops("f:aborted_idle"), 1);
    assert!(ex.block_on(aborted_idle).unwrap_err().is_cancelled());
    assert!(ex.block_on(aborted_queued).unwrap_err().is_cancelled());
    let self_aborted = slot.borrow_mut().take().unwrap();
    assert!(ex.block_on(self_aborted).unwrap_err().is_cancelled());

    // Abort and wake without a run before shutdown.
    aborted_late.abort();
    later.open();
    // Not ended: idle, idle_detached, aborted_late, woken_late and holder
    // (the results of unjoined and held wait in their handles' cells).
    let st = ex.stats();
    assert_eq!(st.live_tasks, 5, "{st:?}");

    drop(ex);
    // Joining after shutdown: a task that completed keeps its output (as in
    // tokio), an unfinished one reads Cancelled; nothing dropped twice.
    assert_eq!(reg.drops("o:unjoined"), 0, "the handle still holds it");
    let out = futures::executor::block_on(unjoined).unwrap();
    assert_eq!(out.name, "o:unjoined");
    drop(out);
    assert!(futures::executor::block_on(idle)
        .unwrap_err()
        .is_cancelled());
    drop((aborted_late, woken_late, holder));
    reg.assert_all_dropped_once();
}

#[test]
fn every_future_and_output_is_dropped_exactly_once_with_propagate() {
    let reg = Registry::new();
    let ex = two_queues(PanicPolicy::Propagate);
    let never = Rc::new(Gate::default());

    let unjoined = ex.spawn(Q::A, finishing(&reg, "unjoined", 0)).unwrap();
    drop(ex.spawn(Q::B, finishing(&reg, "detached", 1)).unwrap());
    let idle = ex.spawn(Q::A, gated(&reg, "idle", &never)).unwrap();
    let boom = ex.spawn(Q::A, panicking(&reg, "boom")).unwrap();
    drop(ex.spawn(Q::B, panicking(&reg, "boom_detached")).unwrap());
    let mut long = ex.spawn(Q::B, finishing(&reg, "long", 100)).unwrap();

    // Each panic unwinds out of its own run; the executor stays usable.
    let mut payloads = Vec::new();
    loop {
        match catch_unwind(AssertUnwindSafe(|| ex.block_on(&mut long))) {
            Ok(out) => {
                assert_eq!(out.unwrap().name, "o:long");
                break;
            }
            Err(p) => payloads.push(*p.downcast::<&str>().unwrap()),
        }
    }
    assert_eq!(payloads, ["task panic", "task panic"]);
    assert_eq!((reg.drops("f:boom"), reg.drops("f:boom_detached")), (1, 1));
    assert_eq!(reg.drops("o:detached"), 1);
    assert!(ex.block_on(boom).unwrap_err().is_panic());
    let stats = (
        ex.queue_stats(Q::A).unwrap().panicked,
        ex.queue_stats(Q::B).unwrap().panicked,
    );
    assert_eq!(stats, (1, 1));

    assert_eq!((reg.drops("f:idle"), reg.drops("o:unjoined")), (0, 0));
    drop(ex);
    // The unfinished future goes with the executor; the unread output of
    // a completed task with its handle.
    assert_eq!((reg.drops("f:idle"), reg.drops("o:unjoined")), (1, 0));
    drop((unjoined, idle));
    assert_eq!(reg.drops("o:unjoined"), 1);
    reg.assert_all_dropped_once();
}

/// A future whose destructor panics.
struct PanicOnDrop(#[allow(dead_code)] Tracked);

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("destructor panic");
    }
}

impl Future for PanicOnDrop {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

#[test]
fn a_panicking_destructor_is_contained_and_drops_its_fields_once() {
    let reg = Registry::new();
    let ex = two_queues(PanicPolicy::Catch);
    // Aborted: the destructor's panic is reported to the join handle.
    let aborted = ex.spawn(Q::A, PanicOnDrop(reg.make("f:aborted"))).unwrap();
    // Left at shutdown: the panic is swallowed, the others still dropped.
    let at_shutdown = ex
        .spawn(Q::A, PanicOnDrop(reg.make("f:at_shutdown")))
        .unwrap();
    let neighbour = ex
        .spawn(Q::B, gated(&reg, "neighbour", &Rc::default()))
        .unwrap();
    ex.run_until_stalled();
    aborted.abort();
    ex.run_until_stalled();
    assert_eq!(reg.drops("f:aborted"), 1);
    let e = ex.block_on(aborted).unwrap_err();
    assert!(e.is_panic());
    assert_eq!(
        e.into_panic().downcast_ref::<&str>(),
        Some(&"destructor panic")
    );
    assert_eq!(ex.queue_stats(Q::A).unwrap().panicked, 1);

    drop(ex);
    // At shutdown too, the destructor's panic is the handle's.
    let e = futures::executor::block_on(at_shutdown).unwrap_err();
    assert_eq!(
        e.into_panic().downcast_ref::<&str>(),
        Some(&"destructor panic")
    );
    drop(neighbour);
    reg.assert_all_dropped_once();
}

/// A `Send` future whose destructor panics: a remote spawn's.
struct SendPanicOnDrop;

impl Drop for SendPanicOnDrop {
    fn drop(&mut self) {
        panic!("remote destructor panic");
    }
}

impl Future for SendPanicOnDrop {
    type Output = ();
    fn poll(self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> Poll<()> {
        Poll::Pending
    }
}

/// As tokio's runtime shutdown does, dropping the executor reports the
/// panic of a task's destructor on the task's handle, with the
/// destructor's payload: a local join handle, the remote handle of a
/// remote task, and the remote handle of a remote spawn that was not made
/// a task yet. Under both panic policies, and nothing unwinds out of the
/// drop.
#[test]
fn a_destructor_panic_at_executor_drop_is_the_panic_its_handle_reads() {
    for policy in [PanicPolicy::Catch, PanicPolicy::Propagate] {
        let reg = Registry::new();
        let ex = two_queues(policy);
        let local = ex.spawn(Q::A, PanicOnDrop(reg.make("f:local"))).unwrap();
        let remote = ex.remote_spawner();
        let started = remote.spawn(Q::A, SendPanicOnDrop).unwrap();
        assert_eq!(ex.run_until_stalled(), 2);
        let waiting = remote.spawn(Q::B, SendPanicOnDrop).unwrap();
        let dropped = catch_unwind(AssertUnwindSafe(|| drop(ex)));
        assert!(dropped.is_ok(), "{policy:?}");
        assert_eq!(reg.drops("f:local"), 1);
        let payload = |e: tourbillon::task::JoinError| {
            assert!(e.is_panic(), "{policy:?}: {e:?}");
            *e.into_panic().downcast::<&str>().unwrap()
        };
        let local = futures::executor::block_on(local).unwrap_err();
        assert_eq!(payload(local), "destructor panic");
        for h in [started, waiting] {
            let e = futures::executor::block_on(h).unwrap_err();
            assert_eq!(payload(e), "remote destructor panic");
        }
        reg.assert_all_dropped_once();
    }
}

#[test]
fn destructors_that_reenter_the_executor_at_shutdown_drop_everything_once() {
    /// At drop: aborts `victim`, wakes `wake`, drops `handle`, tries to spawn.
    struct Reenter {
        _state: Tracked,
        victim: Option<JoinHandle<Tracked>>,
        handle: Option<JoinHandle<Tracked>>,
        wake: Rc<Gate>,
        spawner: tourbillon::Spawner<Q>,
        spawn_result: Rc<Cell<Option<bool>>>,
        reg: Rc<Registry>,
    }
    impl Drop for Reenter {
        fn drop(&mut self) {
            if let Some(v) = &self.victim {
                v.abort();
            }
            self.wake.open();
            drop(self.handle.take());
            let fut = finishing(&self.reg, "spawned_in_drop", 0);
            let r = self.spawner.spawn(Q::A, fut);
            self.spawn_result
                .set(Some(matches!(r, Err(SpawnError::Shutdown))));
        }
    }

    let reg = Registry::new();
    let ex = two_queues(PanicPolicy::Catch);
    let never = Rc::new(Gate::default());
    let wake_gate = Rc::new(Gate::default());
    let victim = ex.spawn(Q::A, gated(&reg, "victim", &never)).unwrap();
    let woken = ex.spawn(Q::B, gated(&reg, "woken", &wake_gate)).unwrap();
    let completed = ex.spawn(Q::B, finishing(&reg, "completed", 0)).unwrap();
    let spawn_result = Rc::new(Cell::new(None));
    let reenter = Reenter {
        _state: reg.make("f:reenter"),
        victim: Some(victim),
        handle: Some(completed),
        wake: wake_gate.clone(),
        spawner: ex.spawner(),
        spawn_result: spawn_result.clone(),
        reg: reg.clone(),
    };
    let h = ex
        .spawn(Q::A, async move {
            let _r = reenter;
            pending::<()>().await;
        })
        .unwrap();
    ex.run_until_stalled();
    assert_eq!(reg.drops("o:completed"), 0);

    drop(ex);
    assert_eq!(spawn_result.get(), Some(true), "spawning failed: Shutdown");
    // The spawned future was refused and dropped, never run.
    assert_eq!(reg.drops("f:spawned_in_drop"), 1);
    assert!(!reg.created("o:spawned_in_drop"));
    drop((h, woken));
    reg.assert_all_dropped_once();
}

#[test]
fn many_mixed_tasks_leak_nothing() {
    let reg = Registry::new();
    let ex = two_queues(PanicPolicy::Catch);
    let never = Rc::new(Gate::default());
    // Kept handles, with whether their task is bound to end (so that
    // awaiting it cannot hang).
    let mut kept = Vec::new();
    for i in 0..200 {
        let q = if i % 2 == 0 { Q::A } else { Q::B };
        let name = format!("t{i}");
        let (h, mut ends) = match i % 5 {
            0 => (ex.spawn(q, finishing(&reg, &name, i % 3)).unwrap(), true),
            1 => (ex.spawn(q, gated(&reg, &name, &never)).unwrap(), false),
            2 => (ex.spawn(q, panicking(&reg, &name)).unwrap(), true),
            3 => {
                let h = ex.spawn(q, gated(&reg, &name, &never)).unwrap();
                h.abort();
                (h, true)
            }
            _ => (ex.spawn(q, finishing(&reg, &name, 1)).unwrap(), true),
        };
        match i % 3 {
            0 => kept.push((h, ends)),
            1 => drop(h),
            _ => {
                if i % 7 == 0 {
                    h.abort();
                    ends = true;
                }
                kept.push((h, ends))
            }
        }
        if i % 50 == 49 {
            ex.run_until_stalled();
        }
    }
    // Join the first half of the handles whose tasks end; leave the rest.
    let (mut oks, mut errs) = (0, 0);
    ex.block_on(async {
        for _ in 0..kept.len() / 2 {
            let (h, ends) = kept.remove(0);
            if !ends {
                kept.push((h, ends));
                continue;
            }
            match h.await {
                Ok(out) => {
                    assert!(out.name.starts_with("o:t"));
                    oks += 1;
                }
                Err(e) => {
                    assert!(e.is_cancelled() || e.is_panic());
                    errs += 1;
                }
            }
        }
    });
    assert!(oks > 0 && errs > 0, "{oks} outputs, {errs} errors");
    drop(ex);
    drop(kept);
    reg.assert_all_dropped_once();
}
