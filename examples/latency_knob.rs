//! When `QueueSpec::latency` helps: a foreground queue waiting for socket
//! reads shares its thread with background tasks that compute, nested in a
//! tokio `current_thread` runtime.
//!
//! A client thread sends a timestamped request (8 bytes) over TCP on
//! loopback every `--interval-us` microseconds; a task of the `Requests`
//! queue (shares 99) reads them and records, per request, the delay from
//! the client's send to the task's read: the time the request waited for
//! tokio's reactor to see it and for the executor to poll the task. Two
//! `Background` tasks (shares 1) burn CPU the whole time. Four runs, one
//! per row:
//!
//! * background polls of 200 us (`yield_now` after each 200 us of work),
//!   or the same work in 20 us chunks with `task::yield_maybe()` between
//!   them (it yields only when a queue's run or a host turn is due);
//! * without and with `QueueSpec::new(99).latency(50 us)` on `Requests`.
//!
//! The knob makes the executor return to tokio (whose reactor then sees
//! the request) at least every 50 us while `Requests` waits, but it can
//! only do so between polls: behind a 200 us poll the request waits for
//! the poll to end whatever the knob says. Only short polls let the knob
//! bound the wait.
//!
//! The four runs alternate round by round (`--rounds`, 5 by default), so
//! that another process that disturbs the machine for a while disturbs
//! one round of each case rather than one case. The table gives, per
//! case, the medians over the rounds of the requests' p50, p90 and p99
//! delay (the first 100 requests of each run are a warm-up, not counted;
//! percentiles are the lower bounds of `LatencyHistogram` buckets, within
//! 12.5% of the value), the p99 of the quietest round, and the
//! background's work in ms of CPU per second of the run; then each
//! round's p99. On a machine shared with other busy processes, rounds in
//! which the thread was preempted (for a scheduler slice of a few ms) show
//! it in their p99, in every case alike. Latencies depend on the machine and its
//! load; what the example checks is that every request was read and the
//! background worked in every run.
//!
//! ```text
//! cargo run --release --example latency_knob --features tokio
//! cargo run --release --example latency_knob --features tokio -- --rounds 9 --interval-us 500
//! ```

use std::cell::Cell;
use std::hint::black_box;
use std::io::Write;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tourbillon::stats::LatencyHistogram;
use tourbillon::task::{yield_maybe, yield_now};
use tourbillon::{Builder, QueueSpec};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Requests,
    Background,
}

/// Requests of each run left out of the histogram (connection set-up,
/// first page faults).
const WARM_UP: u32 = 100;
/// Background tasks.
const BACKGROUND_TASKS: usize = 2;
/// The background's unit of work; a long poll is `LONG_POLL_CHUNKS` of them.
const CHUNK: Duration = Duration::from_micros(20);
const LONG_POLL_CHUNKS: u32 = 10;

const HELP: &str = "\
latency_knob: foreground request latency against background CPU work, with
and without QueueSpec::latency, with long and with short background polls.

USAGE:
    cargo run --release --example latency_knob --features tokio [-- OPTIONS]

OPTIONS:
    --rounds N         rounds; each runs the four cases once, in turn (default 5)
    --requests N       requests per run (default 1000; the first 100 are a warm-up)
    --interval-us US   microseconds between requests (default 1000)
    -h, --help         this text

OUTPUT, one row per case, medians over the rounds:
    background polls   200 us (yield_now) or 20 us chunks (yield_maybe)
    latency knob       QueueSpec::latency on the Requests queue, or none
    p50, p90, p99      delay from the client's send to the task's read
    p99, quietest round  the lowest of the rounds' p99s (each round's follow)
    background         the background's CPU work, ms per s of the run
";

struct Options {
    rounds: usize,
    requests: u32,
    interval: Duration,
}

fn options() -> Options {
    let mut o = Options {
        rounds: 5,
        requests: 1000,
        interval: Duration::from_micros(1000),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> u64 {
            let v = args
                .next()
                .unwrap_or_else(|| fail(&format!("{name} needs a value")));
            v.parse()
                .unwrap_or_else(|_| fail(&format!("{name}: not a number: {v:?}")))
        };
        match a.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            "--rounds" => o.rounds = value("--rounds") as usize,
            "--requests" => o.requests = value("--requests") as u32,
            "--interval-us" => o.interval = Duration::from_micros(value("--interval-us")),
            other => fail(&format!("unknown argument {other:?}")),
        }
    }
    if o.rounds == 0 {
        fail("--rounds must be at least 1");
    }
    if o.requests <= WARM_UP {
        fail(&format!("--requests must be more than {WARM_UP}"));
    }
    o
}

fn fail(msg: &str) -> ! {
    eprintln!("latency_knob: {msg}\n\n{HELP}");
    std::process::exit(2);
}

/// Computes for `d` (the thread is busy, as in a compaction).
fn spin(d: Duration) {
    let start = Instant::now();
    let mut x = 0u64;
    while start.elapsed() < d {
        for i in 0..64u64 {
            x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    black_box(x);
}

/// Background work until `stop`, in polls of `LONG_POLL_CHUNKS` chunks
/// (`short == false`) or in chunks with `yield_maybe` between them;
/// returns the chunks done.
async fn background(short: bool, stop: Rc<Cell<bool>>) -> u64 {
    let mut chunks = 0;
    while !stop.get() {
        for _ in 0..LONG_POLL_CHUNKS {
            spin(CHUNK);
            chunks += 1;
            if short {
                yield_maybe().await;
            }
        }
        if !short {
            yield_now().await;
        }
    }
    chunks
}

struct Row {
    latency: LatencyHistogram,
    background_ms_per_s: f64,
}

fn run(o: &Options, short: bool, knob: Option<Duration>) -> Row {
    let spec = match knob {
        Some(d) => QueueSpec::new(99).latency(d),
        None => QueueSpec::new(99),
    };
    let ex = Builder::new()
        .queue_with(Q::Requests, spec)
        .queue(Q::Background, 1)
        .build()
        .expect("valid configuration");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind on loopback");
    listener.set_nonblocking(true).expect("non-blocking");
    let addr = listener.local_addr().expect("local address");
    let base = Instant::now();
    let (requests, interval) = (o.requests, o.interval);
    let client = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        let start = Instant::now();
        for i in 1..=requests {
            // On a fixed schedule, not after the previous send.
            let at = start + interval * i;
            if let Some(wait) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let sent = base.elapsed().as_nanos() as u64;
            s.write_all(&sent.to_le_bytes()).expect("send");
        }
    });

    let started = Instant::now();
    let (latency, chunks) = rt.block_on(ex.run_until(async {
        let stop = Rc::new(Cell::new(false));
        let workers: Vec<_> = (0..BACKGROUND_TASKS)
            .map(|_| {
                ex.spawn(Q::Background, background(short, stop.clone()))
                    .expect("queue declared")
            })
            .collect();
        let server = ex
            .spawn(Q::Requests, async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                let (mut conn, _) = listener.accept().await.expect("accept");
                let mut hist = LatencyHistogram::new();
                let mut buf = [0u8; 8];
                for i in 0..requests {
                    conn.read_exact(&mut buf).await.expect("a request");
                    let now = base.elapsed().as_nanos() as u64;
                    let sent = u64::from_le_bytes(buf);
                    if i >= WARM_UP {
                        hist.record(Duration::from_nanos(now.saturating_sub(sent)));
                    }
                }
                hist
            })
            .expect("queue declared");
        let latency = server.await.expect("the server task");
        stop.set(true);
        let mut chunks = 0;
        for w in workers {
            chunks += w.await.expect("a background task");
        }
        (latency, chunks)
    }));
    let elapsed = started.elapsed();
    client.join().expect("the client thread");

    // What the example checks: every request was read, the background worked.
    assert_eq!(latency.count(), u64::from(o.requests - WARM_UP));
    assert!(chunks > 0, "the background did no work");
    let background = CHUNK * u32::try_from(chunks).unwrap_or(u32::MAX);
    Row {
        latency,
        background_ms_per_s: background.as_secs_f64() * 1e3 / elapsed.as_secs_f64(),
    }
}

fn us(d: Duration) -> String {
    format!("{:.0} us", d.as_secs_f64() * 1e6)
}

/// The median of `v` (the lower one of the middle two).
fn median<T: Copy + PartialOrd>(v: &[T]) -> T {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    v[(v.len() - 1) / 2]
}

fn main() {
    let o = options();
    println!(
        "{} rounds of 4 runs; per run {} requests (the first {WARM_UP} not counted), \
         one every {} us; {} background tasks\n",
        o.rounds,
        o.requests,
        o.interval.as_micros(),
        BACKGROUND_TASKS
    );
    let knob = Duration::from_micros(50);
    let cases = [
        (false, None),
        (false, Some(knob)),
        (true, None),
        (true, Some(knob)),
    ];
    // Round by round, so that a disturbance of the machine (another
    // process) hits one round of every case rather than all of one case.
    let mut rows: Vec<Vec<Row>> = cases.iter().map(|_| Vec::new()).collect();
    for _ in 0..o.rounds {
        for (i, &(short, knob)) in cases.iter().enumerate() {
            rows[i].push(run(&o, short, knob));
        }
    }
    println!(
        "| background polls | latency knob | p50 | p90 | p99 | p99, quietest round | background |\n\
         |---|---|---|---|---|---|---|"
    );
    let mut spread = String::new();
    for (&(short, knob), rounds) in cases.iter().zip(&rows) {
        let of = |q: f64| {
            median(
                &rounds
                    .iter()
                    .map(|r| r.latency.percentile(q))
                    .collect::<Vec<_>>(),
            )
        };
        let polls = if short {
            "20 us chunks (`yield_maybe`)"
        } else {
            "200 us (`yield_now`)"
        };
        let knob = knob.map_or("none".to_string(), |d| format!("{} us", d.as_micros()));
        let per_round: Vec<String> = rounds
            .iter()
            .map(|r| format!("{:.0}", r.latency.p99().as_secs_f64() * 1e6))
            .collect();
        let quietest = rounds.iter().map(|r| r.latency.p99()).min();
        let background: Vec<f64> = rounds.iter().map(|r| r.background_ms_per_s).collect();
        println!(
            "| {polls} | {knob} | {} | {} | {} | {} | {:.0} ms/s |",
            us(of(0.50)),
            us(of(0.90)),
            us(of(0.99)),
            us(quietest.unwrap_or_default()),
            median(&background),
        );
        spread += &format!("{polls}, knob {knob}: {} us\n", per_round.join(" / "));
    }
    print!("\np99 of each round:\n{spread}");
}
