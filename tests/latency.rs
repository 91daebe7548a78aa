//! `QueueSpec::latency`: while a latency-sensitive queue waits, the
//! executor returns to its host at least that often, so that the host's
//! I/O and timers for it are discovered in time; while it is runnable, or
//! without the setting, the builder's host-yield interval applies.
//! Deterministic: the virtual clock, and exact counts of turns.

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Waker};
use std::time::Duration;

use tourbillon::clock::ManualClock;
use tourbillon::error::BuildError;
use tourbillon::task::yield_now;
use tourbillon::{Builder, Executor, QueueSpec};

const POLL: Duration = Duration::from_micros(20);

/// An executor on a virtual clock with a foreground queue `"fg"`
/// (`fg_shares`, the given latency requirement) and a background queue
/// `"bg"` (1 share), and its clock.
fn fg_and_bg(
    fg_latency: Option<Duration>,
    fg_shares: u32,
) -> (Executor<&'static str>, ManualClock) {
    let clock = ManualClock::new();
    let mut fg = QueueSpec::new(fg_shares);
    if let Some(l) = fg_latency {
        fg = fg.latency(l);
    }
    let ex = Builder::new()
        .queue_with("fg", fg)
        .queue("bg", 1)
        .clock(clock.clone())
        .build()
        .unwrap();
    (ex, clock)
}

/// Runs `polls` polls of 20 us of one background task until stalled, next
/// to a foreground queue (`fg_shares`, the given latency requirement) whose
/// one task makes `fg_polls` polls of 20 us (none if 0), and returns the
/// executor's turns.
fn turns(fg_latency: Option<Duration>, fg_shares: u32, fg_polls: u32, polls: u32) -> u64 {
    let (ex, clock) = fg_and_bg(fg_latency, fg_shares);
    let c = clock.clone();
    let bg = ex
        .spawn("bg", async move {
            for _ in 0..polls {
                c.advance(POLL);
                yield_now().await;
            }
        })
        .unwrap();
    let fg_task = (fg_polls > 0).then(|| {
        let c = clock.clone();
        ex.spawn("fg", async move {
            for _ in 0..fg_polls {
                c.advance(POLL);
                yield_now().await;
            }
        })
        .unwrap()
    });
    let before = ex.stats().turns;
    ex.run_until_stalled();
    assert!(bg.is_finished());
    assert!(fg_task.is_none_or(|h| h.is_finished()));
    ex.stats().turns - before
}

#[test]
fn a_waiting_latency_queue_shortens_the_turns() {
    // Default interval (200 us): ten 20 us polls a turn, 30 polls end in
    // the fourth turn, and a last turn finds nothing to run.
    assert_eq!(turns(None, 99, 0, 30), 4);
    // A waiting queue that needs 50 us: a turn ends after the poll that
    // reaches 50 us (three polls), so 30 polls take ten turns, plus one.
    assert_eq!(turns(Some(Duration::from_micros(50)), 99, 0, 30), 11);
    // A requirement longer than the builder's interval changes nothing.
    assert_eq!(turns(Some(Duration::from_millis(1)), 99, 0, 30), 4);
}

#[test]
fn a_runnable_latency_queue_does_not_shorten_the_turns() {
    // Equal shares, and the foreground task outlasts the background one:
    // the foreground queue is runnable the whole time, so its requirement
    // never applies and the turns are the default's.
    let with = turns(Some(Duration::from_micros(50)), 1, 60, 30);
    let without = turns(None, 1, 60, 30);
    assert_eq!(with, without);
    // 90 polls of 20 us, ten a turn, and a last turn that finds nothing.
    assert_eq!(without, 10);
}

#[test]
fn the_requirement_applies_once_the_queue_waits_again() {
    // The foreground task ends after 30 polls, the background one (with
    // 1 share of 100, so it runs after) takes its 30 polls in 50 us turns.
    let with = turns(Some(Duration::from_micros(50)), 99, 30, 30);
    let without = turns(None, 99, 30, 30);
    // Without: 1,200 us of polls in 200 us turns, and a last empty one.
    assert_eq!(without, 7);
    // With: the foreground's 600 us in 200 us turns, then the background's
    // polls three to a 50 us turn.
    assert_eq!(with, 13);
}

#[test]
fn latency_out_of_range_is_refused() {
    for bad in [Duration::ZERO, Duration::from_secs(2)] {
        let err = Builder::new()
            .queue_with("fg", QueueSpec::new(1).latency(bad))
            .build()
            .unwrap_err();
        assert_eq!(
            err,
            BuildError::InvalidOption {
                option: "QueueSpec::latency",
                reason: "must be between 1 us and 1 s",
            }
        );
    }
}

/// The queue each poll of one driver turn belonged to, for the first
/// `turns` turns of a `run_until` polled by hand (one host poll is one
/// turn): a foreground queue (99 shares, the given latency requirement)
/// whose one task polls once for 10 us and then waits for the host, and a
/// background queue (1 share) of four tasks that each poll once for
/// 100 us and then wait.
fn polls_per_turn(fg_latency: Option<Duration>, turns: usize) -> Vec<Vec<&'static str>> {
    let (ex, clock) = fg_and_bg(fg_latency, 99);
    let log = Rc::new(RefCell::new(Vec::new()));
    let spawn = |queue: &'static str, poll: Duration| {
        let (c, l) = (clock.clone(), log.clone());
        // Detached: the tasks never end, and the executor is dropped with
        // them pending.
        let _detached = ex
            .spawn(queue, async move {
                l.borrow_mut().push(queue);
                c.advance(poll);
                // A socket that has nothing yet: only the host could wake it.
                std::future::pending::<()>().await;
            })
            .unwrap();
    };
    spawn("fg", Duration::from_micros(10));
    for _ in 0..4 {
        spawn("bg", Duration::from_micros(100));
    }
    let mut host = pin!(ex.run_until(std::future::pending::<()>()));
    let mut cx = Context::from_waker(Waker::noop());
    (0..turns)
        .map(|_| {
            assert!(host.as_mut().poll(&mut cx).is_pending());
            std::mem::take(&mut *log.borrow_mut())
        })
        .collect()
}

#[test]
fn a_departing_latency_queue_returns_to_the_host_before_another_queue_runs() {
    // R8e: the foreground queue (earlier deadline, picked first) departs
    // after its poll while the background one is runnable: the turn ends
    // there, and the host's I/O is checked before a background poll. The
    // next turns are the background's, one poll each (the waiting queue's
    // 50 us interval, R8d).
    assert_eq!(
        polls_per_turn(Some(Duration::from_micros(50)), 4),
        [vec!["fg"], vec!["bg"], vec!["bg"], vec!["bg"]]
    );
    // Without the requirement the background runs on in the same turn
    // until the builder's 200 us interval is spent (after its second poll).
    assert_eq!(
        polls_per_turn(None, 3),
        [vec!["fg", "bg", "bg"], vec!["bg", "bg"], vec![]]
    );
}
