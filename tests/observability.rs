//! Observability on the virtual clock: the stall detector (oracle T7 of
//! docs/design.md, section 6), the per-queue counters and the wake-to-first-poll
//! histograms (T8), with exact assertions.

mod common;

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use tourbillon::stats::{LatencyHistogram, Stall};
use tourbillon::task::yield_now;

// T7: with a 10 ms threshold, a scripted 30 ms poll fires exactly one
// report naming its queue and task (id and name) with the exact duration;
// polls under the threshold (1 ms, 9.999 ms) fire none. The overrun is
// counted in the queue's stats.
#[test]
fn t7_stall_detector_reports_the_long_poll_only() {
    let sim = Sim::new(2);
    let reports: Rc<RefCell<Vec<Stall>>> = Rc::default();
    let log = reports.clone();
    let ex = sim
        .builder()
        .queue(0, 1)
        .queue(1, 1)
        .stall_detector(Duration::from_millis(10), move |s| {
            log.borrow_mut().push(s.clone())
        })
        .build()
        .unwrap();
    let s = sim.clone();
    let short = ex
        .task(0)
        .name("short polls")
        .spawn(async move {
            for _ in 0..5 {
                s.spend(0, 0, MS);
                yield_now().await;
            }
            s.spend(0, 0, 10 * MS - 1);
        })
        .unwrap();
    let s = sim.clone();
    let long = ex
        .task(1)
        .name("compaction")
        .spawn(async move {
            s.spend(1, 1, 2 * MS);
            yield_now().await;
            s.spend(1, 1, 30 * MS);
            yield_now().await;
            s.spend(1, 1, MS);
        })
        .unwrap();
    let long_id = long.id();
    sim.drive(&ex);
    assert!(short.is_finished() && long.is_finished());
    let reports = reports.borrow();
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert_eq!(r.queue, "1");
    assert_eq!(r.queue_index, 1);
    assert_eq!(r.task, long_id);
    assert_eq!(r.name.as_deref(), Some("compaction"));
    assert_eq!(r.duration, Duration::from_millis(30));
    assert_eq!(
        r.to_string(),
        format!("task {long_id:?} (compaction) of queue 1 ran 30ms in one poll")
    );
    assert_eq!(ex.queue_stats(0).unwrap().stalls, 0);
    assert_eq!(ex.queue_stats(1).unwrap().stalls, 1);
}

// The threshold is inclusive ("at least"), and a task without a name is
// reported with `name: None`; a panicking callback is contained.
#[test]
fn t7_threshold_is_inclusive_and_callback_panics_are_contained() {
    let sim = Sim::new(1);
    let count = Rc::new(RefCell::new(0));
    let c = count.clone();
    let ex = sim
        .builder()
        .queue(0, 1)
        .stall_detector(Duration::from_millis(10), move |s| {
            assert!(s.name.is_none());
            *c.borrow_mut() += 1;
            panic!("a callback that panics");
        })
        .build()
        .unwrap();
    let s = sim.clone();
    let h = ex
        .spawn(0, async move {
            s.spend(0, 0, 10 * MS);
            yield_now().await;
            s.spend(0, 0, 10 * MS);
            7
        })
        .unwrap();
    sim.drive(&ex);
    assert_eq!(*count.borrow(), 2);
    assert_eq!(ex.block_on(h).unwrap(), 7);
    assert_eq!(ex.queue_stats(0).unwrap().stalls, 2);
}

// T7: a task that ends in a stalling poll is reported with its own id and
// name, even when what its end runs (the destructor of its unread result)
// spawns a named task into the slot it leaves.
#[test]
fn t7_a_completing_stall_names_its_task_not_the_next_occupant_of_its_slot() {
    struct SpawnsOnDrop(
        tourbillon::Spawner<usize>,
        Rc<RefCell<Option<tourbillon::task::TaskKey>>>,
    );
    impl Drop for SpawnsOnDrop {
        fn drop(&mut self) {
            let h = self.0.task(0).name("newcomer").spawn(async {}).unwrap();
            *self.1.borrow_mut() = Some(h.key());
        }
    }
    let sim = Sim::new(1);
    let reports: Rc<RefCell<Vec<Stall>>> = Rc::default();
    let log = reports.clone();
    let ex = sim
        .builder()
        .queue(0, 1)
        .stall_detector(Duration::from_millis(10), move |s| {
            log.borrow_mut().push(s.clone())
        })
        .build()
        .unwrap();
    let spawner = ex.spawner();
    let newcomer = Rc::new(RefCell::new(None));
    let slot = newcomer.clone();
    let s = sim.clone();
    let ender = ex
        .task(0)
        .name("ender")
        .spawn(async move {
            s.spend(0, 0, 30 * MS);
            SpawnsOnDrop(spawner, slot)
        })
        .unwrap();
    let (ender_id, ender_key) = (ender.id(), ender.key());
    // Detached: the result is dropped as the task ends.
    drop(ender);
    sim.drive(&ex);
    let newcomer = newcomer.borrow().expect("the destructor spawned");
    assert_eq!(newcomer.index(), ender_key.index(), "the slot is reused");
    let reports = reports.borrow();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0].task, ender_id);
    assert_eq!(reports[0].name.as_deref(), Some("ender"));
    assert_eq!(reports[0].duration, Duration::from_millis(30));
    assert_eq!(ex.queue_stats(0).unwrap().stalls, 1);
}

// T8, counters: per queue, service equals the sum of the scripted poll
// costs and polls equal the scripted polls; spawned / completed /
// cancelled / panicked count what happened.
#[test]
fn t8_counters_are_exact() {
    let sim = Sim::new(2);
    let ex = sim.builder().queue(0, 1).queue(1, 3).build().unwrap();
    let mut handles = Vec::new();
    for q in 0..2usize {
        for task in 0..3u32 {
            let s = sim.clone();
            let cost = (q as u64 + 1) * 70 * US + task as u64 * 13 * US;
            handles.push(
                ex.spawn(q, async move {
                    for _ in 0..10 {
                        s.spend(q, task, cost);
                        yield_now().await;
                    }
                    s.spend(q, task, cost);
                })
                .unwrap(),
            );
        }
    }
    let s = sim.clone();
    let aborted = ex
        .spawn(1, async move {
            s.spend(1, 9, US);
            std::future::pending::<()>().await
        })
        .unwrap();
    let panics = ex.spawn(0, async { panic!("scripted panic") }).unwrap();
    sim.drive(&ex);
    aborted.abort();
    sim.drive(&ex);
    let st = ex.stats();
    for q in 0..2 {
        let qs = &st.queues[q];
        assert_eq!(
            qs.service,
            Duration::from_nanos(sim.service(q)),
            "queue {q}"
        );
        // Scripted polls plus the polls that spent nothing (the panic's).
        assert_eq!(qs.polls, sim.polls(q) + (q == 0) as u64, "queue {q}");
    }
    assert_eq!(st.queues[0].spawned, 4);
    assert_eq!(st.queues[0].completed, 3);
    assert_eq!(st.queues[0].panicked, 1);
    assert_eq!(st.queues[1].spawned, 4);
    assert_eq!(st.queues[1].completed, 3);
    assert_eq!(st.queues[1].cancelled, 1);
    assert!(handles.iter().all(|h| h.is_finished()));
    drop(panics);
}

// T8, histogram: one queue, a worker W (20 polls of 100 us, yielding) and a
// sleeper S (6 polls of 10 us, sleeping until scripted instants between
// them, which fall inside W's polls). Every poll's wake-to-first-poll delay
// is known from the script: from the spawn (t = 0, a clock read: spawned
// outside the executor's polls) for a first poll, from the end of the
// previous poll after a yield, and after a sleep from the start of W's poll
// in which the timer fired (a wake inside a poll is stamped with the
// poll's start, without a clock read). The executor's histogram equals,
// bucket for bucket and in count, sum, min and max, the histogram of those
// scripted delays.
#[test]
fn t8_wake_latency_histogram_equals_the_scripted_delays() {
    let sim = Sim::new(1);
    sim.record_trace();
    let ex = sim
        .builder()
        .queue(0, 1)
        .latency_histograms(true)
        .build()
        .unwrap();
    let s = sim.clone();
    let worker = ex
        .spawn(0, async move {
            for i in 0..20 {
                s.spend(0, 0, 100 * US);
                if i < 19 {
                    yield_now().await;
                }
            }
        })
        .unwrap();
    let dues: Vec<u64> = (1..=5).map(|k| k * 330 * US + 7 * US).collect();
    let s = sim.clone();
    let ds = dues.clone();
    let sleeper = ex
        .spawn(0, async move {
            s.spend(0, 1, 10 * US);
            for &due in &ds {
                s.sleep_until(due).await;
                s.spend(0, 1, 10 * US);
            }
        })
        .unwrap();
    sim.drive(&ex);
    assert!(worker.is_finished() && sleeper.is_finished());
    let trace = sim.take_trace();
    assert_eq!(trace.len(), 26);
    let mut want = LatencyHistogram::new();
    // Each due instant falls inside one of W's polls: the wake's stamp is
    // that poll's start.
    let stamps: Vec<u64> = dues
        .iter()
        .map(|&due| {
            let p = trace
                .iter()
                .find(|p| p.start <= due && due < p.end)
                .unwrap();
            assert_eq!(p.task, 0, "{due} falls in a poll of W");
            p.start
        })
        .collect();
    let (mut w_ready, mut s_wakes) = (0u64, vec![0u64].into_iter().chain(stamps));
    for p in &trace {
        let ready = if p.task == 0 {
            let r = w_ready;
            w_ready = p.end;
            r
        } else {
            s_wakes.next().unwrap()
        };
        assert!(
            p.start >= ready,
            "{p:?} polled before it was ready ({ready})"
        );
        want.record(Duration::from_nanos(p.start - ready));
    }
    let got = ex.queue_stats(0).unwrap().wake_latency;
    assert_eq!(got, want);
    assert_eq!(got.count(), 26);
    // The sleeper's delays are not trivial: each wake waited for the end of
    // the worker's poll in which its timer fired.
    assert!(got.max() > Duration::from_micros(10), "{got:?}");
}

// What a spawn is stamped with, on a clock that moves only when the test
// says so (`ManualClock`, read after every poll), each poll spending 7 us:
// * A, spawned before `block_on`, outside any poll: a clock read at the
//   spawn (t = 5 us);
// * B and C, spawned by the main future of `block_on` at t = 10 us and
//   t = 30 us: one clock reading taken at the first spawn or wake of that
//   poll (10 us) for both;
// * D, spawned by B's poll 3 us into it: the start of that poll.
// (A wake inside a poll is stamped as a spawn is: T8 above.) The turn
// starts at t = 40 us and polls A [40, 47), B [47, 54), C [54, 61),
// D [61, 68): the delays are exactly 35, 37, 44 and 14 us.
#[test]
fn t8_spawns_are_stamped_with_the_reading_of_their_poll() {
    let clock = tourbillon::clock::ManualClock::new();
    let ex = tourbillon::Builder::new()
        .clock(clock.clone())
        .queue(0, 1)
        .latency_histograms(true)
        .build()
        .unwrap();
    let us = |n: u64| Duration::from_micros(n);
    clock.set_ns(5 * US);
    let c = clock.clone();
    let a = ex.spawn(0, async move { c.advance(us(7)) }).unwrap();
    let d = Rc::new(RefCell::new(None));
    let (c, e, d2) = (clock.clone(), ex.spawner(), d.clone());
    ex.block_on(async move {
        c.set_ns(10 * US);
        let (c2, e2) = (c.clone(), e.clone());
        let b = e
            .spawn(0, async move {
                c2.advance(us(3));
                let c3 = c2.clone();
                *d2.borrow_mut() = Some(e2.spawn(0, async move { c3.advance(us(7)) }).unwrap());
                c2.advance(us(4));
            })
            .unwrap();
        c.set_ns(30 * US);
        let c4 = c.clone();
        let c_task = e.spawn(0, async move { c4.advance(us(7)) }).unwrap();
        c.set_ns(40 * US);
        b.await.unwrap();
        c_task.await.unwrap();
    });
    let d = d.borrow_mut().take().unwrap();
    ex.block_on(d).unwrap();
    assert!(a.is_finished());
    let mut want = LatencyHistogram::new();
    for delay in [35, 37, 44, 14] {
        want.record(us(delay));
    }
    assert_eq!(ex.queue_stats(0).unwrap().wake_latency, want);
    assert_eq!(clock.now(), 68 * US);
}

// A histogram read while a run is in progress holds the delay of every
// poll so far: the run's delays are recorded before the stats are read. One
// task yields 4 times in one run, reading its queue's histogram at each poll.
#[test]
fn wake_latency_read_during_a_run_counts_every_poll_so_far() {
    let sim = Sim::new(1);
    let ex = Rc::new(
        sim.builder()
            .queue(0, 1)
            .latency_histograms(true)
            .build()
            .unwrap(),
    );
    let counts = Rc::new(RefCell::new(Vec::new()));
    let (e, c) = (ex.clone(), counts.clone());
    let task = ex
        .spawn(0, async move {
            for i in 0..5 {
                c.borrow_mut()
                    .push(e.queue_stats(0).unwrap().wake_latency.count());
                if i < 4 {
                    yield_now().await;
                }
            }
        })
        .unwrap();
    sim.drive(&ex);
    assert!(task.is_finished());
    assert_eq!(*counts.borrow(), [0, 1, 2, 3, 4]);
    assert_eq!(ex.queue_stats(0).unwrap().wake_latency.count(), 5);
    assert_eq!(ex.queue_stats(0).unwrap().runs, 1);
}

// Without `latency_histograms` the histogram stays empty.
#[test]
fn latency_histograms_are_off_by_default() {
    let sim = Sim::new(1);
    let ex = sim.builder().queue(0, 1).build().unwrap();
    let s = sim.clone();
    let h = ex
        .spawn(0, async move {
            s.spend(0, 0, US);
            yield_now().await;
        })
        .unwrap();
    sim.drive(&ex);
    assert!(h.is_finished());
    assert_eq!(ex.queue_stats(0).unwrap().wake_latency.count(), 0);
    assert_eq!(ex.queue_stats(0).unwrap().polls, 2);
}

// T7 and T8 together on one `RunnableFifo` queue and on one `Las::new()`
// queue (both requeue through the run's tail), on the virtual clock read
// after every poll and behind `NotCheap` (read once per poll for the
// observation, as the real clock): task A wakes itself during each of its
// polls (ready again from the end of that poll) and completes in a 30 ms
// poll, task B yields. The histogram equals the scripted delays (from the
// spawn at t = 0, then from the end of the task's previous poll), and the
// one stall names A, whose slot is gone by the time the poll is over.
#[test]
fn t7_t8_self_wakes_yields_and_a_completing_stall() {
    for (cheap, las) in [(true, false), (false, false), (true, true), (false, true)] {
        let sim = Sim::new(1);
        sim.record_trace();
        let reports: Rc<RefCell<Vec<Stall>>> = Rc::default();
        let log = reports.clone();
        let spec = if las {
            tourbillon::QueueSpec::new(1).scheduler(tourbillon::sched::Las::new())
        } else {
            tourbillon::QueueSpec::new(1)
        };
        let ex = sim
            .builder_with(cheap)
            .queue_with(0, spec)
            .latency_histograms(true)
            .stall_detector(Duration::from_millis(10), move |s| {
                log.borrow_mut().push(s.clone())
            })
            .build()
            .unwrap();
        let s = sim.clone();
        let mut polls = 0;
        let a = ex
            .task(0)
            .name("self-waker")
            .spawn(std::future::poll_fn(move |cx| {
                polls += 1;
                if polls < 5 {
                    s.spend(0, 0, 100 * US);
                    cx.waker().wake_by_ref();
                    std::task::Poll::Pending
                } else {
                    s.spend(0, 0, 30 * MS);
                    std::task::Poll::Ready(())
                }
            }))
            .unwrap();
        let a_id = a.id();
        let s = sim.clone();
        let b = ex
            .spawn(0, async move {
                for _ in 0..4 {
                    s.spend(0, 1, 50 * US);
                    yield_now().await;
                }
                s.spend(0, 1, 50 * US);
            })
            .unwrap();
        sim.drive(&ex);
        assert!(a.is_finished() && b.is_finished());
        let trace = sim.take_trace();
        assert_eq!(trace.len(), 10, "cheap {cheap}, las {las}");
        let mut ready = [0u64; 2];
        let mut want = LatencyHistogram::new();
        for p in &trace {
            let t = p.task as usize;
            assert!(p.start >= ready[t], "cheap {cheap}, las {las}: {p:?}");
            want.record(Duration::from_nanos(p.start - ready[t]));
            ready[t] = p.end;
        }
        assert_eq!(
            ex.queue_stats(0).unwrap().wake_latency,
            want,
            "cheap {cheap}, las {las}"
        );
        let reports = reports.borrow();
        assert_eq!(reports.len(), 1, "cheap {cheap}, las {las}: {reports:?}");
        assert_eq!(reports[0].task, a_id);
        assert_eq!(reports[0].name.as_deref(), Some("self-waker"));
        assert_eq!(reports[0].duration, Duration::from_millis(30));
        assert_eq!(ex.queue_stats(0).unwrap().stalls, 1);
    }
}
