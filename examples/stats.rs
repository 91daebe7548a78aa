//! Watching an executor: a foreground / background workload with periodic
//! stats snapshots, wake-to-first-poll histograms, a stall detector and a
//! live reweight.
//!
//! * Foreground: a request every millisecond (a tokio interval: the
//!   executor runs nested in a tokio `current_thread` runtime, so tokio's
//!   timers work in its tasks), each 100-300 us of CPU work.
//! * Background: 3 compaction tasks burning CPU in 50 us chunks with
//!   `yield_maybe()` between them; one of them sometimes blocks the thread
//!   for 8 ms, which the stall detector (5 ms threshold) reports by name.
//! * Every 250 ms a reporter prints each queue's counters, share of the
//!   thread, lag and wake-to-first-poll p50 / p99 from `ex.stats()`.
//! * At 1 s the background's shares go from 1 to 4 (`set_shares`).
//! * At the end, the whole `ExecutorStats` as its `Display` prints it.
//!
//! ```text
//! cargo run --release --example stats
//! ```

use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tourbillon::stats::ExecutorStats;
use tourbillon::task::yield_maybe;
use tourbillon::{Builder, Executor};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Requests,
    Compaction,
}

const RUN_FOR: Duration = Duration::from_secs(2);

/// Busy work for `d` of wall time.
fn spin(d: Duration) {
    let until = Instant::now() + d;
    let mut x = 1u64;
    while Instant::now() < until {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
}

fn print_report(t: Duration, now: &ExecutorStats, prev: &ExecutorStats) {
    let total: u128 = now
        .queues
        .iter()
        .zip(&prev.queues)
        .map(|(a, b)| (a.service - b.service).as_nanos())
        .sum();
    println!(
        "t={:>5} ms  polls {:>7}  live tasks {:>3}",
        t.as_millis(),
        now.polls,
        now.live_tasks
    );
    for (q, p) in now.queues.iter().zip(&prev.queues) {
        let share = (q.service - p.service).as_nanos() as f64 * 100.0 / total.max(1) as f64;
        println!(
            "  {:<12} shares {:>2}  spawned {:>5}  done {:>5}  share {:>5.1}%  lag {:>6} us  \
             wake p50 {:>6.1} us  p99 {:>7.1} us  stalls {}",
            q.name,
            q.shares,
            q.spawned,
            q.completed,
            share,
            q.lag_ns / 1000,
            q.wake_latency.p50().as_secs_f64() * 1e6,
            q.wake_latency.p99().as_secs_f64() * 1e6,
            q.stalls,
        );
    }
}

fn main() {
    let ex: Rc<Executor<Q>> = Rc::new(
        Builder::new()
            .queue(Q::Requests, 8)
            .queue(Q::Compaction, 1)
            .latency_histograms(true)
            .stall_detector(Duration::from_millis(5), |s| println!("  STALL: {s}"))
            .build()
            .expect("valid configuration"),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    let start = Instant::now();
    let stop = start + RUN_FOR;

    for n in 0..3u64 {
        // Detached: dropping a JoinHandle lets the task run on.
        let compaction = ex
            .task(Q::Compaction)
            .name(&format!("compaction-{n}"))
            .spawn(async move {
                let mut chunk = 0u64;
                while Instant::now() < stop {
                    spin(Duration::from_micros(50));
                    chunk += 1;
                    if n == 0 && chunk.is_multiple_of(4000) {
                        // A blocking call in the wrong place: the detector names it.
                        std::thread::sleep(Duration::from_millis(8));
                    }
                    yield_maybe().await;
                }
            })
            .expect("queue declared");
        drop(compaction);
    }

    let requests = ex.spawner();
    let reporter_ex = ex.clone();
    let main = async move {
        let spawner = requests.clone();
        let generator = spawner
            .spawn(Q::Requests, async move {
                let mut tick = tokio::time::interval(Duration::from_millis(1));
                let mut i = 0u64;
                while Instant::now() < stop {
                    tick.tick().await;
                    let work = Duration::from_micros(100 + (i * 37) % 200);
                    drop(requests.spawn(Q::Requests, async move { spin(work) }));
                    i += 1;
                }
            })
            .expect("queue declared");
        let mut prev = reporter_ex.stats();
        let mut reweighted = false;
        while Instant::now() < stop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = reporter_ex.stats();
            print_report(start.elapsed(), &now, &prev);
            prev = now;
            if !reweighted && start.elapsed() >= Duration::from_secs(1) {
                reporter_ex
                    .set_shares(Q::Compaction, 4)
                    .expect("valid shares");
                println!("  -> Compaction shares 1 -> 4");
                reweighted = true;
            }
        }
        generator.await.expect("generator finished");
    };
    rt.block_on(ex.run_until(main));
    println!("at the end:");
    print!("{}", ex.stats());
}
