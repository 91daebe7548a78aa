//! Foreground latency through real sockets: a TCP request/response server
//! whose requests share one core with CPU-bound background work.
//!
//! # Workload
//!
//! * **Server** (one thread, pinned to CPU 1): a TCP request/response
//!   server on 127.0.0.1. A task accepts the client's connections from a
//!   `tokio::net::TcpListener` and spawns one task per connection; each
//!   connection task reads a 32-byte request (its id and a CPU time),
//!   busy-spins that CPU time on `Instant`, and writes a 32-byte answer
//!   (the id echoed), one request after the other.
//! * **Background** (bg): 4 tasks (`--bg`) that each spin `--bg-poll-us`
//!   microseconds (default both 50 and 200, one series each) then yield
//!   (`tokio::task::yield_now` under tokio, `tourbillon::task::yield_now` under
//!   tourbillon), until the connections are closed. One *chunk* is one
//!   spin of `--bg-poll-us`; bg throughput is chunks completed inside the
//!   measured window, per second.
//! * **Client** (one thread, pinned to CPU 0, its own tokio
//!   `current_thread` runtime): 32 connections (`--conns`, `TCP_NODELAY`),
//!   open-loop Poisson arrivals at `--rps` in all (default 2,000/s), each
//!   request sent on a connection drawn uniformly, each asking for a CPU
//!   time uniform in 20-200 us: 110 us on average, so the requests alone
//!   are about 22% of CPU 1 at the default rate. The script (arrival
//!   times, connections, CPU times) comes from splitmix64 seeded with
//!   `--seed` and the round's index: every system of a round replays the
//!   same script. A pacer task sends each request at its scheduled time
//!   (it spins on `tokio::task::yield_now`, so the client's I/O driver is
//!   polled between two sends, and sleeps only across gaps over 2 ms);
//!   requests are pipelined: one whose connection still waits for an
//!   answer is written behind the earlier ones and waits at the server.
//!   A reader task per connection takes the time of each answer.
//!   *Latency* is answer receipt - scheduled send time, so the time a
//!   request waits behind a busy connection counts (no coordinated
//!   omission); the pacer's own lateness is reported (`send late p99`).
//!
//! # Systems
//!
//! Each a fresh runtime (tokio `current_thread`, `enable_all`), executor
//! and listener per round:
//!
//! 1. `tokio fg only`: a `LocalSet`, the accept loop and connection tasks
//!    `spawn_local`ed;
//! 2. `tokio fg+bg`: the same with the bg tasks;
//! 3. `tourbillon fg+bg`: tourbillon nested in the runtime
//!    (`rt.block_on(ex.run_until(..))`), queues `Fg` (99 shares; accept
//!    loop and connections) and `Bg` (1 share; bg tasks), default settings
//!    (`host_yield_interval` 200 us);
//! 4. `tourbillon fg+bg latency`: the same with
//!    `QueueSpec::new(99).latency(L)` on `Fg` (`--fg-latency-us`, default
//!    50): while `Fg` waits for its sockets the executor returns to tokio
//!    (whose `block_on` then polls its I/O driver) at least every L;
//! 5. `tourbillon fg only`: the queues of 3, no bg tasks.
//!
//! With `--bg-yield-maybe`, two more, the bg tasks of 3 and 4 spinning
//! their chunk in 10 us pieces with `tourbillon::task::yield_maybe().await`
//! after each piece (a yield only when the executor wants the thread back)
//! instead of one spin then `yield_now`:
//!
//! 6. `tourbillon fg+bg yield_maybe`: default settings;
//! 7. `tourbillon fg+bg latency yield_maybe`: with `latency(L)` on `Fg`.
//!
//! And only when named in `--systems`:
//!
//! 8. `tourbillon fg+bg host_yield_interval L`: the queues of 3 with the
//!    builder's `host_yield_interval` set to L (no `latency`): a turn ends
//!    once it has lasted L, whichever queue runs. It differs from 4 where a
//!    turn begins while `Fg` is runnable: in 4 that turn's limit is the
//!    default 200 us until `Fg` runs dry, and once it does, the turn runs
//!    one more poll (of `Bg`) before it sees that L is spent.
//!
//! # Measurements
//!
//! Each round runs every system once (the order rotates round by round),
//! `--warmup` s (default 1) then `--secs` s measured (default 6), over
//! `--rounds` rounds (default 3); `--quick`: 1 round of 1 s after 0.3 s.
//! Requests scheduled inside the window are measured to their answer (the
//! drain after the window counts, bounded by 5 s). Per system, the table
//! gives the median over the rounds of each round's p50 / p90 / p99 /
//! p99.9 latency (us; index `round(p (n - 1))` of the sorted latencies),
//! of its fg answers received in the window per second, and of its bg
//! chunks per second; for tourbillon, host turns per second in the window
//! (`ExecutorStats::turns`: each one a return to tokio's `block_on` loop,
//! which polls the I/O driver before it polls `run_until` again); and the
//! time the server and the client threads spent runnable but kept off
//! their CPUs by other processes (`/proc/thread-self/schedstat`, whole
//! round), as a share of the round.
//!
//! A system's round in which either thread waited more than `--max-waited`
//! percent (default 1) of it is run again, up to `--retries` times
//! (default 3), with the same script; the count of re-runs is printed, and
//! a round kept over the limit is marked `*`. That wait is the time other
//! processes held the thread's CPU (the server's CPU has no other thread
//! of the benchmark) plus the kernel's wake-up latency when the thread had
//! slept (a few tenths of a percent of a round for the fg-only systems,
//! whose server sleeps between requests, on the machine this was written
//! on); it does not depend on the latencies measured, so this selects
//! rounds by the machine's noise, not by their result. `--max-waited 100`
//! keeps every round.
//!
//! Ratios (the targets): tourbillon fg+bg p99 / tokio fg-only p99
//! (<= 1.05 with 50 us bg polls), tourbillon bg chunks/s / tokio fg+bg bg
//! chunks/s (>= 0.97).
//!
//! # Placement and noise
//!
//! The server thread pins itself to CPU 1 and the client thread to CPU 0
//! (`taskset -p -c N <tid>`; `--no-pin` to skip); the client busy-polls
//! CPU 0 while it runs. On a 2-CPU machine shared with other work, every
//! other process competes for those CPUs: run it on a quiet machine
//! (check `uptime` and the `waited %` column). The threads are named
//! `sock-server` and `sock-client` (for `perf stat -t`, `top -H`).
//!
//! Usage: `cargo bench --bench sockets [-- --quick --rounds N --secs S
//! --warmup S --rps N --conns N --bg N --bg-poll-us N --fg-latency-us N
//! --bg-yield-maybe --systems 1,3,4 --seed N --event-interval N --no-pin
//! --max-waited PCT --retries N --verbose]`. `--verbose` prints a line
//! per system and round. `--event-interval N` sets the server runtimes'
//! tokio `event_interval` (default tokio's 61).
//!
//! Without `--bench`, which `cargo bench` passes (`cargo test --all-targets`
//! runs it without), a smoke pass: one round of 0.2 s (warm-up 0.1 s) per
//! system, background polls of 50 us only, no reruns.

mod common;

use common::{pct, pin_thread, sched_times, Rng, Window};

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tourbillon::{Builder, QueueSpec};

/// Bytes of a request and of an answer.
const MSG: usize = 32;
/// Range of a request's CPU time, us.
const CPU_US: (u64, u64) = (20, 200);
/// Shares of the tourbillon queues.
const FG_SHARES: u32 = 99;
const BG_SHARES: u32 = 1;
/// The piece of a bg chunk between two `yield_maybe` checks.
const MAYBE_PIECE: Duration = Duration::from_micros(10);
/// CPUs: the server's and the client's.
const SERVER_CPU: u32 = 1;
const CLIENT_CPU: u32 = 0;
/// Time from a round's start to its script's time 0: the threads start,
/// pin themselves, bind and connect meanwhile.
const LEAD: Duration = Duration::from_millis(300);
/// How long the client waits for the last answers after the window.
const DRAIN: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum System {
    TokioFg,
    TokioFgBg,
    TourbillonFgBg,
    TourbillonFgBgLatency,
    TourbillonFg,
    TourbillonFgBgMaybe,
    TourbillonFgBgLatencyMaybe,
    TourbillonFgBgInterval,
}

impl System {
    const ALL: [System; 8] = [
        System::TokioFg,
        System::TokioFgBg,
        System::TourbillonFgBg,
        System::TourbillonFgBgLatency,
        System::TourbillonFg,
        System::TourbillonFgBgMaybe,
        System::TourbillonFgBgLatencyMaybe,
        System::TourbillonFgBgInterval,
    ];

    fn name(self) -> &'static str {
        match self {
            System::TokioFg => "1 tokio fg only",
            System::TokioFgBg => "2 tokio fg+bg",
            System::TourbillonFgBg => "3 tourbillon fg+bg 99:1",
            System::TourbillonFgBgLatency => "4 tourbillon fg+bg 99:1 latency",
            System::TourbillonFg => "5 tourbillon fg only",
            System::TourbillonFgBgMaybe => "6 tourbillon fg+bg 99:1 yield_maybe",
            System::TourbillonFgBgLatencyMaybe => "7 tourbillon fg+bg 99:1 latency yield_maybe",
            System::TourbillonFgBgInterval => "8 tourbillon fg+bg 99:1 host_yield_interval L",
        }
    }

    fn is_tokio(self) -> bool {
        matches!(self, System::TokioFg | System::TokioFgBg)
    }

    fn has_bg(self) -> bool {
        !matches!(self, System::TokioFg | System::TourbillonFg)
    }

    fn latency(self) -> bool {
        matches!(
            self,
            System::TourbillonFgBgLatency | System::TourbillonFgBgLatencyMaybe
        )
    }

    fn yield_maybe(self) -> bool {
        matches!(
            self,
            System::TourbillonFgBgMaybe | System::TourbillonFgBgLatencyMaybe
        )
    }
}

#[derive(Clone, Copy, Debug)]
struct Config {
    secs: f64,
    warmup: f64,
    rps: f64,
    conns: usize,
    bg_tasks: usize,
    fg_latency: Duration,
    seed: u64,
    pin: bool,
    event_interval: Option<u32>,
}

// ----------------------------------------------------------------- script --

/// One round's requests, in send order; times in ns after the script's
/// time 0.
struct Script {
    due_ns: Vec<u64>,
    conn: Vec<u32>,
    cpu_us: Vec<u32>,
}

fn script(cfg: &Config, seed: u64) -> Script {
    let mut rng = Rng(seed);
    let total_ns = ((cfg.warmup + cfg.secs) * 1e9) as u64;
    let mean_gap_ns = 1e9 / cfg.rps;
    let (mut due_ns, mut conn, mut cpu_us) = (Vec::new(), Vec::new(), Vec::new());
    let mut t = 0.0f64;
    loop {
        // Exponential gaps: Poisson arrivals.
        t += -(1.0 - rng.f64()).ln() * mean_gap_ns;
        if t as u64 >= total_ns {
            break;
        }
        due_ns.push(t as u64);
        conn.push(rng.int((0, cfg.conns as u64 - 1)) as u32);
        cpu_us.push(rng.int(CPU_US) as u32);
    }
    Script {
        due_ns,
        conn,
        cpu_us,
    }
}

// ----------------------------------------------------------------- server --

/// Counters of one server run.
#[derive(Default)]
struct ServerOut {
    bg_chunks: u64,
    /// tourbillon: host turns in the window and the window's measured
    /// length (s), from two snapshots taken by the main future.
    turns: Option<(u64, f64)>,
    /// tourbillon: host turns over the whole run.
    turns_total: Option<u64>,
    /// Server thread: time runnable but off the CPU, ns, and the run's
    /// wall time, ns.
    waited_ns: u64,
    wall_ns: u64,
}

fn server_rt(cfg: &Config) -> tokio::runtime::Runtime {
    let mut b = tokio::runtime::Builder::new_current_thread();
    b.enable_all();
    if let Some(n) = cfg.event_interval {
        b.event_interval(n);
    }
    b.build().unwrap()
}

/// One connection: request, spin, answer, until EOF or an error.
async fn serve_conn(mut s: TcpStream) {
    let mut req = [0u8; MSG];
    loop {
        if s.read_exact(&mut req).await.is_err() {
            break;
        }
        let cpu = u32::from_le_bytes(req[8..12].try_into().unwrap());
        common::spin(Duration::from_micros(cpu as u64));
        let mut ans = [0u8; MSG];
        ans[..12].copy_from_slice(&req[..12]);
        if s.write_all(&ans).await.is_err() {
            break;
        }
    }
}

/// Accepts `n` connections and spawns a task for each with `spawn`;
/// returns the handles.
async fn accept_loop<H>(
    listener: TcpListener,
    n: usize,
    mut spawn: impl FnMut(TcpStream) -> H,
) -> Vec<H> {
    let mut handles = Vec::with_capacity(n);
    for _ in 0..n {
        let (s, _) = listener.accept().await.expect("accept");
        s.set_nodelay(true).unwrap();
        handles.push(spawn(s));
    }
    handles
}

/// A bg task: chunks of `poll` spin, each followed by `yield_now` (given
/// as `yield_`), until `stop`.
async fn bg_loop<Y: std::future::Future<Output = ()>>(
    poll: Duration,
    stop: Rc<Cell<bool>>,
    chunks: Rc<Cell<u64>>,
    window: Window,
    yield_: impl Fn() -> Y,
) {
    while !stop.get() {
        let end = common::spin(poll);
        if window.contains(end) {
            chunks.set(chunks.get() + 1);
        }
        yield_().await;
    }
}

/// A bg task of systems 6 and 7: each chunk spun in pieces of
/// [`MAYBE_PIECE`] with `yield_maybe` after each.
async fn bg_loop_maybe(
    poll: Duration,
    stop: Rc<Cell<bool>>,
    chunks: Rc<Cell<u64>>,
    window: Window,
) {
    while !stop.get() {
        let mut left = poll;
        loop {
            let piece = left.min(MAYBE_PIECE);
            let end = common::spin(piece);
            left -= piece;
            if left.is_zero() {
                if window.contains(end) {
                    chunks.set(chunks.get() + 1);
                }
                break;
            }
            tourbillon::task::yield_maybe().await;
        }
        tourbillon::task::yield_maybe().await;
    }
}

/// A bound on a whole server run: it stops by itself even if the client
/// never comes or never closes.
fn server_deadline(cfg: &Config) -> Duration {
    LEAD + Duration::from_secs_f64(cfg.warmup + cfg.secs) + DRAIN + Duration::from_secs(10)
}

fn tokio_server(
    listener: std::net::TcpListener,
    cfg: Config,
    window: Window,
    bg: usize,
    bg_poll: Duration,
) -> ServerOut {
    let rt = server_rt(&cfg);
    let local = tokio::task::LocalSet::new();
    let stop = Rc::new(Cell::new(false));
    let chunks = Rc::new(Cell::new(0u64));
    let work = async {
        let listener = TcpListener::from_std(listener).unwrap();
        let bgs: Vec<_> = (0..bg)
            .map(|_| {
                tokio::task::spawn_local(bg_loop(
                    bg_poll,
                    stop.clone(),
                    chunks.clone(),
                    window,
                    tokio::task::yield_now,
                ))
            })
            .collect();
        let conns = tokio::task::spawn_local(accept_loop(listener, cfg.conns, |s| {
            tokio::task::spawn_local(serve_conn(s))
        }))
        .await
        .unwrap();
        for h in conns {
            h.await.unwrap();
        }
        stop.set(true);
        for h in bgs {
            h.await.unwrap();
        }
    };
    // The timeout's timer is made inside the runtime (it needs one).
    let bounded = async { tokio::time::timeout(server_deadline(&cfg), work).await };
    if local.block_on(&rt, bounded).is_err() {
        println!("  (tokio server: deadline passed, round cut short)");
    }
    ServerOut {
        bg_chunks: chunks.get(),
        ..Default::default()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    Fg,
    Bg,
}

fn tourbillon_server(
    listener: std::net::TcpListener,
    cfg: Config,
    window: Window,
    system: System,
    bg_poll: Duration,
) -> ServerOut {
    let rt = server_rt(&cfg);
    let mut fg_spec = QueueSpec::new(FG_SHARES);
    if system.latency() {
        fg_spec = fg_spec.latency(cfg.fg_latency);
    }
    let mut builder = Builder::new()
        .queue_with(Q::Fg, fg_spec)
        .queue(Q::Bg, BG_SHARES);
    if system == System::TourbillonFgBgInterval {
        builder = builder.host_yield_interval(cfg.fg_latency);
    }
    let ex = builder.build().unwrap();
    let fgq = ex.queue(Q::Fg).unwrap();
    let bgq = ex.queue(Q::Bg).unwrap();
    let bg = if system.has_bg() { cfg.bg_tasks } else { 0 };
    let stop = Rc::new(Cell::new(false));
    let chunks = Rc::new(Cell::new(0u64));
    let turns = RefCell::new(None);
    let work = async {
        let listener = TcpListener::from_std(listener).unwrap();
        let bgs: Vec<_> = (0..bg)
            .map(|_| {
                let (stop, chunks) = (stop.clone(), chunks.clone());
                let h = if system.yield_maybe() {
                    bgq.spawn(bg_loop_maybe(bg_poll, stop, chunks, window))
                } else {
                    bgq.spawn(bg_loop(
                        bg_poll,
                        stop,
                        chunks,
                        window,
                        tourbillon::task::yield_now,
                    ))
                };
                h.unwrap()
            })
            .collect();
        let q = fgq.clone();
        let conns = fgq
            .spawn(accept_loop(listener, cfg.conns, move |s| {
                q.spawn(serve_conn(s)).unwrap()
            }))
            .unwrap()
            .await
            .unwrap();
        for h in conns {
            h.await.unwrap();
        }
        stop.set(true);
        for h in bgs {
            h.await.unwrap();
        }
    };
    // Host turns in the window: two snapshots by the main future (polled
    // at every turn; tokio's timer has 1 ms resolution, so the window is
    // re-measured).
    let sample = async {
        tokio::time::sleep_until(window.start.into()).await;
        let (t0, n0) = (Instant::now(), ex.stats().turns);
        tokio::time::sleep_until(window.end.into()).await;
        let (t1, n1) = (Instant::now(), ex.stats().turns);
        *turns.borrow_mut() = Some((n1 - n0, t1.duration_since(t0).as_secs_f64()));
    };
    let main = async {
        futures::join!(work, sample);
    };
    let bounded = async { tokio::time::timeout(server_deadline(&cfg), main).await };
    if rt.block_on(ex.run_until(bounded)).is_err() {
        println!("  (tourbillon server: deadline passed, round cut short)");
    }
    ServerOut {
        bg_chunks: chunks.get(),
        turns: turns.take(),
        turns_total: Some(ex.stats().turns),
        ..Default::default()
    }
}

// ----------------------------------------------------------------- client --

/// What the client saw.
struct ClientOut {
    /// Latency (ns) of each request scheduled in the window and answered.
    latencies: Vec<u64>,
    /// Requests scheduled in the window but not answered.
    unanswered: usize,
    /// Answers received inside the window.
    answers_in_window: u64,
    /// How late each send was after its scheduled time, ns.
    send_late: Vec<u64>,
    /// Client thread: time runnable but off the CPU, and wall time, ns.
    waited_ns: u64,
    wall_ns: u64,
}

/// Waits until `due`: sleeps across long gaps, else spins on
/// `yield_now`, which lets the runtime poll its I/O driver in between.
async fn wait_until(due: Instant) {
    loop {
        let now = Instant::now();
        if now >= due {
            return;
        }
        let left = due - now;
        if left > Duration::from_millis(2) {
            tokio::time::sleep(left - Duration::from_micros(1500)).await;
        } else {
            tokio::task::yield_now().await;
        }
    }
}

/// Reads the answers of one connection; records each one's arrival, ns
/// after `t0`, by request id.
async fn read_answers(
    mut r: tokio::net::tcp::OwnedReadHalf,
    t0: Instant,
    received: Rc<RefCell<Vec<u64>>>,
    answered: Rc<Cell<usize>>,
) {
    let mut ans = [0u8; MSG];
    while r.read_exact(&mut ans).await.is_ok() {
        let at = Instant::now().saturating_duration_since(t0).as_nanos() as u64;
        let id = u64::from_le_bytes(ans[..8].try_into().unwrap()) as usize;
        if let Some(slot) = received.borrow_mut().get_mut(id) {
            *slot = at;
        }
        answered.set(answered.get() + 1);
    }
}

fn client(
    addr: SocketAddr,
    cfg: Config,
    script: Arc<Script>,
    t0: Instant,
    window: Window,
) -> ClientOut {
    if cfg.pin && !pin_thread(CLIENT_CPU) {
        println!("  (client: could not pin to CPU {CLIENT_CPU})");
    }
    let began = Instant::now();
    let before = sched_times();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    let n = script.due_ns.len();
    let received = Rc::new(RefCell::new(vec![u64::MAX; n]));
    let answered = Rc::new(Cell::new(0usize));
    let mut send_late = Vec::with_capacity(n);
    local.block_on(&rt, async {
        let mut writers = Vec::with_capacity(cfg.conns);
        let mut readers = Vec::with_capacity(cfg.conns);
        for _ in 0..cfg.conns {
            let s = TcpStream::connect(addr).await.expect("connect");
            s.set_nodelay(true).unwrap();
            let (r, w) = s.into_split();
            writers.push(w);
            readers.push(tokio::task::spawn_local(read_answers(
                r,
                t0,
                received.clone(),
                answered.clone(),
            )));
        }
        if Instant::now() > t0 {
            println!("  (client: connected after the script's start)");
        }
        let mut req = [0u8; MSG];
        for i in 0..n {
            let due = t0 + Duration::from_nanos(script.due_ns[i]);
            wait_until(due).await;
            send_late.push(Instant::now().duration_since(due).as_nanos() as u64);
            req[..8].copy_from_slice(&(i as u64).to_le_bytes());
            req[8..12].copy_from_slice(&script.cpu_us[i].to_le_bytes());
            if writers[script.conn[i] as usize]
                .write_all(&req)
                .await
                .is_err()
            {
                println!("  (client: a write failed; round cut short)");
                break;
            }
        }
        let deadline = Instant::now() + DRAIN;
        while answered.get() < n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Dropping a write half shuts the connection down for writing:
        // the server's connection task reads EOF, ends and closes, and
        // the reader reads EOF.
        drop(writers);
        for h in readers {
            let _ = tokio::time::timeout(Duration::from_secs(2), h).await;
        }
    });
    let waited_ns = sched_times().1 - before.1;
    let wall_ns = began.elapsed().as_nanos() as u64;
    let received = received.take();
    let start_ns = window.start.duration_since(t0).as_nanos() as u64;
    let end_ns = window.end.duration_since(t0).as_nanos() as u64;
    let mut latencies = Vec::new();
    let mut unanswered = 0;
    let mut answers_in_window = 0;
    for (i, &at) in received.iter().enumerate() {
        if at != u64::MAX && at >= start_ns && at < end_ns {
            answers_in_window += 1;
        }
        let due = script.due_ns[i];
        if due >= start_ns && due < end_ns {
            if at == u64::MAX {
                unanswered += 1;
            } else {
                latencies.push(at - due);
            }
        }
    }
    let mut send_late_w: Vec<u64> = send_late
        .iter()
        .zip(&script.due_ns)
        .filter(|(_, &d)| d >= start_ns && d < end_ns)
        .map(|(&l, _)| l)
        .collect();
    send_late_w.sort_unstable();
    latencies.sort_unstable();
    ClientOut {
        latencies,
        unanswered,
        answers_in_window,
        send_late: send_late_w,
        waited_ns,
        wall_ns,
    }
}

// ------------------------------------------------------------------ round --

impl RoundOut {
    /// The larger share of the round that the server or the client thread
    /// spent runnable but kept off its CPU by other processes, %.
    fn waited_pct(&self) -> f64 {
        self.srv_waited_pct.max(self.cli_waited_pct)
    }
}

/// One system's round, reduced.
#[derive(Clone, Copy)]
struct RoundOut {
    /// p50, p90, p99, p99.9 latency, us.
    pcts: [f64; 4],
    fg_rate: f64,
    bg_rate: f64,
    turns_per_s: Option<f64>,
    send_late_p99_us: f64,
    srv_waited_pct: f64,
    cli_waited_pct: f64,
    unanswered: usize,
    /// Server thread's whole run (s) and its host turns (tourbillon).
    srv_secs: f64,
    turns_total: Option<u64>,
}

fn run_round(system: System, cfg: Config, script: Arc<Script>, bg_poll: Duration) -> RoundOut {
    let t0 = Instant::now() + LEAD;
    let start = t0 + Duration::from_secs_f64(cfg.warmup);
    let window = Window {
        start,
        end: start + Duration::from_secs_f64(cfg.secs),
    };
    let (addr_tx, addr_rx) = mpsc::channel();
    // Named threads: `perf` and `top -H` tell them apart.
    let server = thread::Builder::new()
        .name("sock-server".into())
        .spawn(move || {
            if cfg.pin && !pin_thread(SERVER_CPU) {
                println!("  (server: could not pin to CPU {SERVER_CPU})");
            }
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            let began = Instant::now();
            let before = sched_times();
            let mut out = if system.is_tokio() {
                let bg = if system.has_bg() { cfg.bg_tasks } else { 0 };
                tokio_server(listener, cfg, window, bg, bg_poll)
            } else {
                tourbillon_server(listener, cfg, window, system, bg_poll)
            };
            out.waited_ns = sched_times().1 - before.1;
            out.wall_ns = began.elapsed().as_nanos() as u64;
            out
        })
        .unwrap();
    let addr = addr_rx.recv().unwrap();
    let client = thread::Builder::new()
        .name("sock-client".into())
        .spawn(move || client(addr, cfg, script, t0, window))
        .unwrap();
    let c = client.join().unwrap();
    let s = server.join().unwrap();
    let us = |v: &[u64], p| pct(v, p) as f64 / 1e3;
    let l = &c.latencies;
    RoundOut {
        pcts: [us(l, 50.0), us(l, 90.0), us(l, 99.0), us(l, 99.9)],
        fg_rate: c.answers_in_window as f64 / cfg.secs,
        bg_rate: s.bg_chunks as f64 / cfg.secs,
        turns_per_s: s.turns.map(|(n, secs)| n as f64 / secs),
        send_late_p99_us: us(&c.send_late, 99.0),
        srv_waited_pct: s.waited_ns as f64 / s.wall_ns.max(1) as f64 * 100.0,
        cli_waited_pct: c.waited_ns as f64 / c.wall_ns.max(1) as f64 * 100.0,
        unanswered: c.unanswered,
        srv_secs: s.wall_ns as f64 / 1e9,
        turns_total: s.turns_total,
    }
}

// ----------------------------------------------------------------- report --

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "NOT met"
    }
}

fn first_line_of(path: &str, key: &str) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

fn header(args: &common::Args) {
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into());
    println!("command: {}", args.all().join(" "));
    println!(
        "machine: {} x {} CPUs; kernel {kernel}; date {date}; load average at start {load}",
        first_line_of("/proc/cpuinfo", "model name"),
        thread::available_parallelism().map_or(0, |n| n.get()),
    );
}

fn main() {
    let args = common::Args::from_env();
    let smoke = args.smoke();
    let quick = args.flag("--quick");
    let (secs, warmup) = match (smoke, quick) {
        (true, _) => (0.2, 0.1),
        (false, true) => (1.0, 0.3),
        (false, false) => (6.0, 1.0),
    };
    let cfg = Config {
        secs: args.parsed("--secs").unwrap_or(secs),
        warmup: args.parsed("--warmup").unwrap_or(warmup),
        rps: args.parsed("--rps").unwrap_or(2000.0),
        conns: args.parsed("--conns").unwrap_or(32usize).max(1),
        bg_tasks: args.parsed("--bg").unwrap_or(4),
        fg_latency: Duration::from_micros(args.parsed("--fg-latency-us").unwrap_or(50)),
        seed: args.parsed("--seed").unwrap_or(18),
        pin: !args.flag("--no-pin"),
        event_interval: args.parsed("--event-interval"),
    };
    let rounds: usize = args
        .parsed("--rounds")
        .unwrap_or(if quick || smoke { 1 } else { 3 })
        .max(1);
    let bg_polls: Vec<u64> = match args.parsed::<u64>("--bg-poll-us") {
        Some(us) => vec![us],
        None if smoke => vec![50],
        None => vec![50, 200],
    };
    let maybe = args.flag("--bg-yield-maybe");
    let verbose = args.flag("--verbose");
    let max_waited: f64 = args.parsed("--max-waited").unwrap_or(1.0);
    let retries: usize = args
        .parsed("--retries")
        .unwrap_or(if smoke { 0 } else { 3 });
    let systems: Vec<System> = match args.value("--systems") {
        Some(list) => list
            .split(',')
            .filter_map(|s| s.trim().parse::<usize>().ok())
            .filter_map(|i| System::ALL.get(i.wrapping_sub(1)).copied())
            .collect(),
        None => System::ALL[..if maybe { 7 } else { 5 }].to_vec(),
    };

    header(&args);
    println!(
        "server: 1 thread{}, tokio current_thread (enable_all{}), {} connections, 32-byte \
         request -> spin {}-{} us -> 32-byte answer; bg: {} tasks spinning a chunk then \
         yielding; tourbillon: Fg:Bg {FG_SHARES}:{BG_SHARES}, Fg latency {} us in systems 4 and 7",
        if cfg.pin {
            " pinned to CPU 1"
        } else {
            " (unpinned)"
        },
        cfg.event_interval
            .map(|n| format!(", event_interval {n}"))
            .unwrap_or_default(),
        cfg.conns,
        CPU_US.0,
        CPU_US.1,
        cfg.bg_tasks,
        cfg.fg_latency.as_micros()
    );
    println!(
        "client: 1 thread{}, Poisson {} req/s over the connections; warm-up {} s, measured {} s; \
         {rounds} round(s), systems rotated; seed {}",
        if cfg.pin {
            " pinned to CPU 0"
        } else {
            " (unpinned)"
        },
        cfg.rps,
        cfg.warmup,
        cfg.secs,
        cfg.seed
    );

    let wall = Instant::now();
    for &bg_us in &bg_polls {
        let bg_poll = Duration::from_micros(bg_us);
        let mut outs: Vec<Vec<RoundOut>> = vec![Vec::new(); systems.len()];
        let mut reruns = 0;
        for r in 0..rounds {
            let script = Arc::new(script(&cfg, cfg.seed ^ ((r as u64) << 32) ^ bg_us));
            for k in 0..systems.len() {
                let i = (k + r) % systems.len();
                let mut o = run_round(systems[i], cfg, script.clone(), bg_poll);
                let mut tries = 0;
                while o.waited_pct() > max_waited && tries < retries {
                    println!(
                        "  ({} round {r}: server thread waited {:.1}%, client {:.1}% of the round \
                         for other processes: run again)",
                        systems[i].name(),
                        o.srv_waited_pct,
                        o.cli_waited_pct
                    );
                    reruns += 1;
                    tries += 1;
                    o = run_round(systems[i], cfg, script.clone(), bg_poll);
                }
                if verbose {
                    println!(
                        "  round {r} {}: p50/p99 {:.0}/{:.0} us, bg {:.0}/s, turns/s {}, \
                         server run {:.3} s, turns in all {}, waited srv {:.1}% cli {:.1}%, \
                         send late p99 {:.1} us",
                        systems[i].name(),
                        o.pcts[0],
                        o.pcts[2],
                        o.bg_rate,
                        o.turns_per_s.map_or("-".into(), |t| format!("{t:.0}")),
                        o.srv_secs,
                        o.turns_total.map_or("-".into(), |t| t.to_string()),
                        o.srv_waited_pct,
                        o.cli_waited_pct,
                        o.send_late_p99_us
                    );
                }
                if o.unanswered > 0 {
                    println!(
                        "  ({} round {r}: {} requests of the window unanswered)",
                        systems[i].name(),
                        o.unanswered
                    );
                }
                outs[i].push(o);
            }
        }
        println!();
        println!("bg polls of {bg_us} us (medians over {rounds} round(s)):");
        println!(
            "| system | p50 (us) | p90 (us) | p99 (us) | p99.9 (us) | p99 per round (us) | fg answers/s \
             | bg chunks/s | host turns/s | send late p99 (us) | waited % srv / cli |"
        );
        println!("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|");
        let med = |i: usize, f: &dyn Fn(&RoundOut) -> f64| {
            common::median(&outs[i].iter().map(f).collect::<Vec<_>>())
        };
        for (i, s) in systems.iter().enumerate() {
            let per_round: Vec<String> = outs[i]
                .iter()
                .map(|o| {
                    let mark = if o.waited_pct() > max_waited { "*" } else { "" };
                    format!("{:.0}{mark}", o.pcts[2])
                })
                .collect();
            let turns = if s.is_tokio() {
                "-".to_string()
            } else {
                format!("{:.0}", med(i, &|o| o.turns_per_s.unwrap_or(f64::NAN)))
            };
            let bg = if s.has_bg() {
                format!("{:.0}", med(i, &|o| o.bg_rate))
            } else {
                "-".to_string()
            };
            println!(
                "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {:.0} | {bg} | {turns} | {:.1} | {:.1} / {:.1} |",
                s.name(),
                med(i, &|o| o.pcts[0]),
                med(i, &|o| o.pcts[1]),
                med(i, &|o| o.pcts[2]),
                med(i, &|o| o.pcts[3]),
                per_round.join(" / "),
                med(i, &|o| o.fg_rate),
                med(i, &|o| o.send_late_p99_us),
                med(i, &|o| o.srv_waited_pct),
                med(i, &|o| o.cli_waited_pct),
            );
        }
        println!(
            "re-runs: {reruns} (a system's round is run again, up to {retries} times, when its \
             server or client thread waited more than {max_waited}% of it for other processes; \
             * marks a round kept over that)"
        );
        let find = |s: System| systems.iter().position(|&x| x == s);
        let p99 = |i: usize| med(i, &|o| o.pcts[2]);
        let bgr = |i: usize| med(i, &|o| o.bg_rate);
        println!();
        if let Some(base) = find(System::TokioFg) {
            for s in [
                System::TourbillonFgBg,
                System::TourbillonFgBgLatency,
                System::TourbillonFgBgMaybe,
                System::TourbillonFgBgLatencyMaybe,
                System::TourbillonFgBgInterval,
                System::TokioFgBg,
                System::TourbillonFg,
            ] {
                if let Some(i) = find(s) {
                    let ratio = p99(i) / p99(base);
                    let target = if bg_us == 50 && !s.is_tokio() && s.has_bg() {
                        format!(" (target <= 1.05: {})", met(ratio <= 1.05))
                    } else {
                        String::new()
                    };
                    println!(
                        "p99 {} / p99 1 tokio fg only: {:.0} / {:.0} us = {ratio:.3}{target}",
                        s.name(),
                        p99(i),
                        p99(base)
                    );
                }
            }
        }
        if let Some(base) = find(System::TokioFgBg) {
            for s in [
                System::TourbillonFgBg,
                System::TourbillonFgBgLatency,
                System::TourbillonFgBgMaybe,
                System::TourbillonFgBgLatencyMaybe,
                System::TourbillonFgBgInterval,
            ] {
                if let Some(i) = find(s) {
                    let ratio = bgr(i) / bgr(base);
                    println!(
                        "bg chunks/s {} / 2 tokio fg+bg: {:.0} / {:.0} = {ratio:.3} (target >= 0.97: {})",
                        s.name(),
                        bgr(i),
                        bgr(base),
                        met(ratio >= 0.97)
                    );
                }
            }
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into());
    println!();
    println!(
        "wall time {:.0} s; load average at end {load}",
        wall.elapsed().as_secs_f64()
    );
}
