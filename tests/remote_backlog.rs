//! The remote backlog and its admission window (`docs/design.md`, T9): a
//! queue admits remote spawns until 64 of its remote tasks wait for their
//! first poll, and again, up to 64, once half of them are polled (or
//! dropped unpolled); the window is per queue; the inbox's spawns are taken at every
//! boundary while fewer than 64 wait in all, else at the next turn's start;
//! shutdown cancels what waits. One thread, so every order is exact.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use tourbillon::remote::RemoteJoinHandle;
use tourbillon::task::yield_now;
use tourbillon::Builder;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Fg,
    Bg,
}

/// The window of a queue (`WINDOW` in `src/remote/backlog.rs`).
const WINDOW: usize = 64;

/// What the tasks saw, in poll order.
type Log = Arc<Mutex<Vec<String>>>;

fn log(l: &Log, s: String) {
    l.lock().unwrap().push(s);
}

fn taken(l: &Log) -> Vec<String> {
    l.lock().unwrap().clone()
}

// 100 remote spawns and one local task L (spawned first, yielding) on one
// FIFO queue. The turn's first boundary takes the 100 spawns; the window
// admits R0..R63 behind L. L yields behind R63. R31's poll leaves 32
// unpolled: R64..R95 are admitted, behind L; R63's poll does the same for
// R96..R99. The order is L, R0..R63, L, R64..R99, then L alone. Without a
// window, L's second poll would come after R99.
#[test]
fn t9_the_window_admits_a_flood_in_order_behind_local_work() {
    let ex = Builder::new().queue(Q::Fg, 1).build().unwrap();
    let seen: Log = Arc::default();
    let s = seen.clone();
    let local = ex
        .spawn(Q::Fg, async move {
            for _ in 0..3 {
                log(&s, "L".into());
                yield_now().await;
            }
        })
        .unwrap();
    let remote = ex.remote_spawner();
    let handles: Vec<RemoteJoinHandle<usize>> = (0..100)
        .map(|i| {
            let s = seen.clone();
            remote
                .spawn(Q::Fg, async move {
                    log(&s, format!("R{i}"));
                    i
                })
                .unwrap()
        })
        .collect();
    ex.run_until_stalled();
    let mut want = vec!["L".to_string()];
    want.extend((0..WINDOW).map(|i| format!("R{i}")));
    want.push("L".into());
    want.extend((WINDOW..100).map(|i| format!("R{i}")));
    want.push("L".into());
    assert_eq!(taken(&seen), want);
    assert!(local.now_or_never().unwrap().is_ok());
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.now_or_never().unwrap().unwrap(), i);
    }
    let st = ex.queue_stats(Q::Fg).unwrap();
    assert_eq!((st.spawned, st.completed, st.remote_waiting), (101, 101, 0));
}

// Queue Bg's backlog is long (200 spawns, 64 admitted); a local task on Fg
// then spawns F onto Fg from inside its poll. F waits in the inbox until
// the next turn's start (the backlog is long), is admitted at once there
// (Fg's window is empty: the window is per queue) and runs before Bg's
// 65th task: the weights, not Bg's backlog, decide.
#[test]
fn t9_one_queues_backlog_does_not_hold_back_another_queue() {
    let ex = Builder::new()
        .queue(Q::Fg, 4)
        .queue(Q::Bg, 1)
        .build()
        .unwrap();
    let seen: Log = Arc::default();
    let remote = ex.remote_spawner();
    let bg: Vec<RemoteJoinHandle<()>> = (0..200)
        .map(|i| {
            let s = seen.clone();
            remote
                .spawn(Q::Bg, async move { log(&s, format!("B{i}")) })
                .unwrap()
        })
        .collect();
    let (s, r) = (seen.clone(), remote.clone());
    let local = ex
        .spawn(Q::Bg, async move {
            // Bg's backlog: B64..B199 wait (136 >= 64), so F's spawn waits in
            // the inbox for the next turn.
            let s2 = s.clone();
            let f = r.spawn(Q::Fg, async move { log(&s2, "F".into()) }).unwrap();
            log(&s, "spawned F".into());
            Some(f) // the handle, read below (not awaited here)
        })
        .unwrap();
    // The local task was spawned after the 200 remote ones were queued in
    // the inbox, but is a task at once: it runs first of Bg's line, ahead
    // of B0..B63 (admitted at the turn's start).
    ex.run_until_stalled();
    let f = local.now_or_never().unwrap().unwrap().unwrap();
    assert!(f.now_or_never().unwrap().is_ok());
    assert!(bg.into_iter().all(|h| h.now_or_never().unwrap().is_ok()));
    let seen = taken(&seen);
    let at = |name: &str| seen.iter().position(|s| s == name).unwrap();
    assert_eq!(seen.len(), 202);
    assert_eq!(at("spawned F"), 0);
    assert!(at("F") < at(&format!("B{WINDOW}")), "{seen:?}");
    let b: Vec<&String> = seen.iter().filter(|s| s.starts_with('B')).collect();
    let want: Vec<String> = (0..200).map(|i| format!("B{i}")).collect();
    assert_eq!(
        b,
        want.iter().collect::<Vec<_>>(),
        "Bg's order is arrival order"
    );
}

// Spawns aborted while they wait give their place back as soon as they are
// admitted (dropped unpolled): the 70 aborted first spawns do not clog the
// window, the 30 after them run, every future is dropped once.
#[test]
fn t9_aborted_spawns_give_their_place_back() {
    let ex = Builder::new().queue(Q::Fg, 1).build().unwrap();
    let (drops, polls) = (Counter::default(), Counter::default());
    let handles = spawn_counted(&ex, 100, &drops, &polls);
    for h in &handles[..70] {
        h.abort();
    }
    ex.run_until_stalled();
    assert_eq!(polls.load(Ordering::SeqCst), 30);
    assert_eq!(drops.load(Ordering::SeqCst), 100);
    for (i, h) in handles.into_iter().enumerate() {
        let out = h.now_or_never().expect("resolved");
        if i < 70 {
            assert!(out.unwrap_err().is_cancelled());
        } else {
            assert_eq!(out.unwrap(), i);
        }
    }
    let st = ex.queue_stats(Q::Fg).unwrap();
    assert_eq!(st.remote_waiting, 0);
}

/// A count shared with remote tasks.
type Counter = Arc<AtomicUsize>;

/// Counts its drops.
struct Dropped(Counter);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// `n` remote spawns onto `Fg`: task `i` counts its poll in `polls` and
/// the drop of what it holds in `drops`, and returns `i`.
fn spawn_counted(
    ex: &tourbillon::Executor<Q>,
    n: usize,
    drops: &Counter,
    polls: &Counter,
) -> Vec<RemoteJoinHandle<usize>> {
    let remote = ex.remote_spawner();
    (0..n)
        .map(|i| {
            let (d, p) = (Dropped(drops.clone()), polls.clone());
            remote
                .spawn(Q::Fg, async move {
                    p.fetch_add(1, Ordering::SeqCst);
                    drop(d);
                    i
                })
                .unwrap()
        })
        .collect()
}

// A backlog at shutdown: with one poll per turn, the first turn takes the
// 100 spawns, admits 64 and polls R0 (63 unpolled: the window stays
// closed); 36 wait (`remote_waiting`). Dropping the executor cancels them
// with the admitted ones: every handle resolves, every future is dropped
// once, only R0 ran.
#[test]
fn t9_shutdown_cancels_the_backlog() {
    let ex = Builder::new()
        .queue(Q::Fg, 1)
        .max_polls_per_turn(1)
        .build()
        .unwrap();
    let (drops, polls) = (Counter::default(), Counter::default());
    let handles = spawn_counted(&ex, 100, &drops, &polls);
    // The main future yields once: one turn runs between its two polls.
    ex.block_on(yield_now());
    let st = ex.queue_stats(Q::Fg).unwrap();
    assert_eq!((st.spawned, st.polls, st.remote_waiting), (64, 1, 36));
    assert_eq!(st.runnable_tasks, 63);
    drop(ex);
    assert_eq!(polls.load(Ordering::SeqCst), 1);
    assert_eq!(drops.load(Ordering::SeqCst), 100);
    for (i, h) in handles.into_iter().enumerate() {
        let out = h.now_or_never().expect("resolved");
        if i == 0 {
            assert_eq!(out.unwrap(), 0);
        } else {
            assert!(out.unwrap_err().is_cancelled());
        }
    }
}
