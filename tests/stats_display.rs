//! `ExecutorStats`'s `Display`: one line for the executor, a table with a
//! row per queue. Service and lag are measured by a `ManualClock` that a
//! task advances, so the report is exact.

use std::time::Duration;

use tourbillon::clock::ManualClock;
use tourbillon::task::yield_now;
use tourbillon::Builder;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Requests,
    Compaction,
}

#[test]
fn executor_stats_display_is_a_table_per_queue() {
    let clock = ManualClock::new();
    let ex = Builder::new()
        .queue(Q::Requests, 4)
        .queue(Q::Compaction, 1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let c = clock.clone();
    ex.block_on(async {
        let bg = ex
            .spawn(Q::Compaction, async move {
                for _ in 0..3 {
                    c.advance(Duration::from_micros(10));
                    yield_now().await;
                }
            })
            .unwrap();
        let fg = ex.spawn(Q::Requests, async { 1 }).unwrap();
        let aborted = ex.spawn(Q::Requests, std::future::pending::<()>()).unwrap();
        aborted.abort();
        bg.await.unwrap();
        fg.await.unwrap();
    });
    let report = ex.stats().to_string();
    print!("{report}");
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 4, "{report}");
    assert!(report.ends_with('\n'));
    assert!(lines[0].starts_with("executor: 5 polls, "), "{}", lines[0]);
    assert!(lines[0].ends_with(", 0 live tasks"), "{}", lines[0]);
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "queue",
            "shares",
            "spawned",
            "completed",
            "cancelled",
            "panicked",
            "polls",
            "service",
            "runnable",
            "lag"
        ]
    );
    let requests: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(
        &requests[..8],
        ["Requests", "4", "2", "1", "1", "0", "1", "0"]
    );
    let compaction: Vec<&str> = lines[3].split_whitespace().collect();
    assert_eq!(
        &compaction[..9],
        ["Compaction", "1", "1", "1", "0", "0", "4", "30.0us", "0"]
    );
    // The columns line up: every row is as wide as the header up to `lag`.
    let lag_end = lines[1].find("lag").unwrap() + 3;
    assert_eq!(lines[2].len(), lag_end, "{report}");
}

#[test]
fn executor_stats_display_adds_wake_latency_and_rare_counters_when_present() {
    let ex = Builder::new()
        .queue("q", 1)
        .latency_histograms(true)
        .build()
        .unwrap();
    ex.block_on(async { ex.spawn("q", async {}).unwrap().await.unwrap() });
    let report = ex.stats().to_string();
    let header = report.lines().nth(1).unwrap();
    assert!(header.ends_with("wake p50   wake p99"), "{header}");
    print!("{report}");
    assert!(!report.contains("stalls") && !report.contains("caught panics"));
}
