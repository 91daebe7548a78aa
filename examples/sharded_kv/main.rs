//! A sharded in-memory key-value server that speaks Redis's protocol
//! (RESP2), one shard per core of a `tourbillon::pool::Pool`, and a load
//! client that measures it.
//!
//! ```text
//! cargo run --release --example sharded_kv --features tokio -- serve --cores 2 --port 6380
//! redis-cli -p 6380 set greeting hello
//! redis-benchmark -p 6380 -t set,get -r 100000 -n 1000000 -P 16
//! cargo run --release --example sharded_kv --features tokio -- load --cores 1 --rate max
//! ```
//!
//! Two subcommands:
//!
//! * `serve`: the server, on 127.0.0.1, until SIGINT or SIGTERM; then it
//!   stops gracefully (the requests already received are answered) and
//!   prints what each core did and the pool's shutdown report. With
//!   `--plain-tokio`, the same server code on one tokio `current_thread`
//!   runtime without tourbillon (one shard), for comparison
//!   (benches/redis_compare.sh measures the three: redis-server, this
//!   server on a tourbillon core, and on plain tokio).
//! * `load` (also without a subcommand): the server and its built-in load
//!   client in one process: the client runs for a fixed duration, prints
//!   its measurements and what each core did, and the program shuts the
//!   pool down.
//!
//! Architecture (each part has its own file):
//!
//! * server/: the server (its mod.rs describes it): resp.rs, the protocol
//!   (an incremental RESP2 parser and the reply encoders); commands.rs,
//!   the commands (`GET`, `SET` with `EX`/`PX`, `DEL`, `EXISTS`, `MGET`
//!   and `MSET` across shards, `DBSIZE`, `FLUSHALL`, `PING`, `ECHO`, and
//!   what clients send on connect: `HELLO`, `CLIENT`, `CONFIG GET`,
//!   `COMMAND`); store.rs, a shard. The pool has one thread per core,
//!   each an executor with a foreground queue "fg" (shares 32: accept
//!   loops, connections), a queue "fwd" for the operations forwarded from
//!   other cores (shares 128) and a background queue "bg" (shares 1:
//!   snapshot passes over the shard). Each core accepts on a shared
//!   `SO_REUSEPORT` port and on a port of its own; a key belongs to shard
//!   `hash(key) % cores`, and operations on another core's keys go there
//!   with `pool.submit_to`, whose `Send` closure builds the (non-`Send`)
//!   future on the target core.
//! * client.rs: the load client, on threads of its own outside the pool:
//!   open-loop arrivals at a target rate (or a fixed window of requests in
//!   flight with `--rate max`) for a fixed duration, then latency
//!   percentiles, throughput and the CPU time per request of the server's
//!   cores and of the client (cpu.rs, from Linux's `/proc`). Shard-aware
//!   routing (the default) connects to each core's own port and sends it
//!   only its own keys; `--routing any` connects to the shared port with
//!   keys of every shard, so the server forwards.
//! * workload.rs, latency.rs: the client's requests, encoded before the
//!   run, and its latency histogram.
//!
//! Measured with redis-benchmark beside redis-server: docs/benchmarks.md,
//! "Redis protocol: redis-benchmark against sharded_kv and redis-server";
//! with the built-in client: "Sharded key-value server" there.
//!
//! With `TOURBILLON_TIMELINE=<file>` in the environment (`serve` and
//! `load`), every core records its timeline (`tourbillon::Builder::timeline`:
//! each poll's queue, task and times), and the program writes one window of
//! 50 ms of it, the last whole window before the load client ends or the
//! signal arrives, to `<file>` as a Chrome trace-event JSON file (a process
//! per core, a row per queue), which ui.perfetto.dev and `chrome://tracing`
//! open and `docs/profiling/timeline2svg.py` draws:
//!
//! ```text
//! TOURBILLON_TIMELINE=kv.json cargo run --release --example sharded_kv --features tokio -- load --cores 2
//! python3 docs/profiling/timeline2svg.py kv.json -o kv.svg
//! ```
//!
//! `--help` explains the flags and every line of the output ([`HELP`]).

mod client;
mod cpu;
mod latency;
mod server;
mod workload;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use futures::executor::block_on;
use tourbillon::pool::{Placement, Pool};

use client::{LoadConfig, LoadReport, Routing};
use latency::Histogram;
use server::{store, Config, Server, Snapshot, Stopped, FG};

const USAGE: &str =
    "usage: sharded_kv serve [--cores N] [--port P] [--placement each-cpu|unpinned] \
[--snapshot off|busy|MILLISECONDS] [--plain-tokio]; \
sharded_kv [load] [--cores N] [--placement each-cpu|unpinned] [--routing shard-aware|any] \
[--duration SECONDS] [--rate REQUESTS_PER_SECOND|max] [--conns N] [--depth N] [--keys N] \
[--client-threads N]; sharded_kv --help explains them";

const HELP: &str = "\
sharded_kv: a key-value server that speaks Redis's protocol (RESP2), with one
shard per core of a tourbillon Pool (each core an executor in a tokio
current_thread runtime, queues fg, fwd and bg), and a load client.

USAGE:
    cargo run --release --example sharded_kv --features tokio -- serve [OPTIONS]
    cargo run --release --example sharded_kv --features tokio [-- [load] OPTIONS]

serve: serves on 127.0.0.1 until SIGINT or SIGTERM, then stops gracefully (the
requests already received are answered), prints what each core did and the
pool's shutdown report. Commands: GET, SET [EX|PX], DEL, EXISTS, MGET, MSET,
DBSIZE, FLUSHALL, PING, ECHO, SELECT 0, QUIT, and HELLO 2, CLIENT, CONFIG GET,
COMMAND as clients send them on connect (examples/sharded_kv/server/commands.rs).

load (also without a subcommand): starts the server, runs the built-in client
for --duration, prints what the client measured and what each core did, and
shuts the pool down.

OPTIONS (default in brackets):
    --cores N              pool cores, one thread and one shard each [2]
    --placement P          each-cpu: core i pinned to the i-th CPU of the
                           process's affinity mask (so `taskset -c 1` puts
                           a 1-core server on CPU 1); unpinned: the OS
                           places the threads [each-cpu]
    --snapshot S           the background snapshot passes of each core: off,
                           busy (back to back), or a pause in milliseconds
                           between passes [50]
serve only:
    --port P               the shared port, on 127.0.0.1 (each core also
                           listens on a free port of its own, printed) [6380]
    --plain-tokio          the same server code on one tokio current_thread
                           runtime, without tourbillon (one shard; --cores
                           and --placement do not apply)
load only:
    --routing R            shard-aware: the client sends each core only its
                           own keys, on the core's own port; any: keys of
                           every shard on the shared port, and the server
                           forwards them to their core [shard-aware]
    --duration SECONDS     how long the client sends [2]
    --rate R|max           R: open loop, R requests/s in all; max: closed
                           loop, --depth requests in flight per
                           connection [50000]
    --conns N              client connections [16]
    --depth N              requests in flight per connection with
                           --rate max [64]
    --keys N               distinct keys (the client fills them first) [50000]
    --client-threads N     client threads (not pinned) [1]
    -h, --help             this text

OUTPUT (load):
    server: ...            cores and ports, and the client's settings
    client: sent S received R errors E in T s: X requests/s
                           requests sent and answered, error replies, and
                           replies per second over the measured phase
    latency from due time  (open loop) from when the request was due to be
                           sent to its reply: includes the client's own
                           delays, so a server that falls behind shows here
    latency from write     from the write of the request to its reply
                           (p50, p99, p999, max, in us)
    cpu: ...               CPU time of the server's core threads and of the
                           client threads, in all and per request (Linux
                           /proc; absent elsewhere)
OUTPUT (both):
    core N: ...            connections accepted, requests read (in load,
                           the fill's included), the shard's applied operations
                           (forwarded in: from other cores), entries
                           (tombstones included), and its background passes
    core N executor: ...   per queue (fg: accept loops and connections, fwd:
                           operations forwarded from other cores, bg:
                           snapshots): service time and polls
    connections: ...       (serve) connections accepted, closed at the stop
                           after answering, cancelled at the end of the grace
    shutdown (...):        per core, drained or the tasks cancelled
";

enum Mode {
    Serve { plain_tokio: bool },
    Load,
}

struct Options {
    mode: Mode,
    server: Config,
    load: LoadConfig,
}

fn parse_args() -> Result<Options, String> {
    let mut args = std::env::args().skip(1).peekable();
    // No subcommand (nothing, or a flag first): `load`.
    let mode = match args.peek().map(String::as_str) {
        Some("serve") => Mode::Serve { plain_tokio: false },
        Some("load") => Mode::Load,
        None => Mode::Load,
        Some(flag) if flag.starts_with('-') => Mode::Load,
        Some(other) => return Err(format!("unknown subcommand {other:?}\n{USAGE}")),
    };
    if args.peek().is_some_and(|a| a == "serve" || a == "load") {
        args.next();
    }
    let mut o = Options {
        server: Config {
            cores: 2,
            placement: Placement::EachCpu,
            port: if matches!(mode, Mode::Serve { .. }) {
                6380
            } else {
                0
            },
            snapshot: Snapshot::Every(Duration::from_millis(50)),
            grace: Duration::from_secs(2),
        },
        mode,
        load: LoadConfig {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            core_addrs: Vec::new(),
            routing: Routing::ShardAware,
            conns: 16,
            threads: 1,
            duration: Duration::from_secs(2),
            rate: Some(50_000.0),
            depth: 64,
            keys: 50_000,
        },
    };
    let serve = matches!(o.mode, Mode::Serve { .. });
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            print!("{HELP}");
            std::process::exit(0);
        }
        if flag == "--plain-tokio" && serve {
            o.mode = Mode::Serve { plain_tokio: true };
            continue;
        }
        let value = args
            .next()
            .ok_or(format!("{flag} needs a value\n{USAGE}"))?;
        // Each value parses to `Some` or the flag is refused.
        let count = value.parse::<usize>().ok().filter(|&n| n > 0);
        let secs = value.trim_end_matches('s').parse::<f64>().ok();
        // `--rate max`: `Some(None)`, no target rate.
        let rate = match value.as_str() {
            "max" => Some(None),
            v => v
                .parse::<f64>()
                .ok()
                .filter(|r| r.is_finite() && *r > 0.0)
                .map(Some),
        };
        let placement = match value.as_str() {
            "each-cpu" => Some(Placement::EachCpu),
            "unpinned" => Some(Placement::Unpinned),
            _ => None,
        };
        let routing = match value.as_str() {
            "shard-aware" => Some(Routing::ShardAware),
            "any" => Some(Routing::Any),
            _ => None,
        };
        let snapshot = match value.as_str() {
            "off" => Some(Snapshot::Off),
            "busy" => Some(Snapshot::Busy),
            ms => ms
                .parse::<u64>()
                .ok()
                .map(|ms| Snapshot::Every(Duration::from_millis(ms))),
        };
        let parsed = match (flag.as_str(), serve) {
            ("--cores", _) => count.map(|n| o.server.cores = n),
            ("--placement", _) => placement.map(|p| o.server.placement = p),
            ("--snapshot", _) => snapshot.map(|s| o.server.snapshot = s),
            ("--port", true) => value.parse::<u16>().ok().map(|p| o.server.port = p),
            ("--conns", false) => count.map(|n| o.load.conns = n),
            ("--depth", false) => count.map(|n| o.load.depth = n),
            ("--client-threads", false) => count.map(|n| o.load.threads = n),
            ("--keys", false) => count.map(|n| o.load.keys = n as u64),
            ("--duration", false) => secs
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .filter(|d| !d.is_zero())
                .map(|d| o.load.duration = d),
            ("--rate", false) => rate.map(|r| o.load.rate = r),
            ("--routing", false) => routing.map(|r| o.load.routing = r),
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        };
        parsed.ok_or(format!("bad value for {flag}: {value:?}\n{USAGE}"))?;
    }
    Ok(o)
}

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(2);
        }
    };
    match opts.mode {
        Mode::Serve { plain_tokio: false } => serve(&opts.server),
        Mode::Serve { plain_tokio: true } => serve_plain_tokio(&opts.server),
        Mode::Load => load(opts.server, opts.load),
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("sharded_kv: {what}: {e}");
    std::process::exit(1);
}

/// Waits for SIGINT or SIGTERM, whose handlers it sets at its first poll.
async fn signalled() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).unwrap_or_else(|e| fail("SIGTERM", e));
    let mut int = signal(SignalKind::interrupt()).unwrap_or_else(|e| fail("SIGINT", e));
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    println!("{name}: stopping");
}

/// `serve`: the server on a pool until a signal.
fn serve(cfg: &Config) {
    // The main thread only waits for the signal (the signal handlers are
    // set before the server accepts anything).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail("runtime", e));
    let mut signal = Box::pin(signalled());
    // Its first poll sets the handlers.
    let _ = rt.block_on(async { futures::poll!(signal.as_mut()) });
    let server = Server::start(cfg).unwrap_or_else(|e| fail("starting the server", e));
    println!(
        "sharded_kv: serving RESP2 on {} ({} cores, own ports {:?}, snapshot passes {}) \
         until SIGINT or SIGTERM",
        server.addr(),
        server.pool().cores(),
        server.own_ports,
        cfg.snapshot
    );
    let window = TimelineWindow::start(server.pool());
    rt.block_on(signal);
    window.write();
    print_cores(server.pool());
    print_stopped(server.shutdown());
}

/// `serve --plain-tokio`: the same server code on this thread's tokio
/// runtime, without tourbillon.
fn serve_plain_tokio(cfg: &Config) {
    let report = server::run_plain_tokio(
        cfg,
        |addr| {
            println!(
                "sharded_kv: serving RESP2 on {addr} (plain tokio current_thread, snapshot passes {}) \
                 until SIGINT or SIGTERM",
                cfg.snapshot
            );
        },
        signalled(),
    )
    .unwrap_or_else(|e| fail("serving", e));
    let (conn, shard) = (server::conn_stats(), store::stats());
    println!(
        "accepted {} connections, read {} requests; shard applied {}, {} entries; \
         {} snapshot passes",
        conn.accepted, conn.requests, shard.applied, shard.entries, shard.passes
    );
    println!(
        "connections: {} accepted, {} closed at the stop, {} cancelled",
        report.accepted, report.closed_at_stop, report.cancelled
    );
}

fn print_stopped(stopped: Stopped) {
    let c = stopped.connections;
    println!(
        "connections: {} accepted, {} closed at the stop, {} cancelled",
        c.accepted, c.closed_at_stop, c.cancelled
    );
    match stopped.pool {
        Ok(report) => print!(
            "shutdown ({} task(s) cancelled):\n{report}",
            report.cancelled()
        ),
        Err(e) => eprintln!("shutdown: {e}"),
    }
}

/// `load`: the server and the built-in client in this process.
fn load(server_cfg: Config, mut load: LoadConfig) {
    let server = Server::start(&server_cfg).unwrap_or_else(|e| fail("starting the server", e));
    load.addr.set_port(server.port);
    load.core_addrs = (server.own_ports.iter())
        .map(|&p| SocketAddr::from((Ipv4Addr::LOCALHOST, p)))
        .collect();
    println!(
        "server: {} cores on 127.0.0.1:{} (shared), own ports {:?}; \
         client: {} connections on {} thread(s), routing {:?}, {}, {:?}",
        server.pool().cores(),
        server.port,
        server.own_ports,
        load.conns,
        load.threads,
        load.routing,
        match load.rate {
            Some(r) => format!("open loop at {r} requests/s"),
            None => format!("closed loop, {} in flight per connection", load.depth),
        },
        load.duration,
    );

    let window = TimelineWindow::start(server.pool());
    let report = client::run(&load).unwrap_or_else(|e| fail("client", e));
    window.write();
    print_load(&report, &load);
    print_cores(server.pool());
    print_stopped(server.shutdown());
}

/// With `TOURBILLON_TIMELINE=<file>`: a thread that takes the cores'
/// timelines every [`TimelineWindow::EVERY`] and keeps the last two
/// windows; [`write`](Self::write) writes the older one (the last whole
/// window before the call) to `<file>`.
struct TimelineWindow {
    path: Option<std::ffi::OsString>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Vec<tourbillon::timeline::Timeline>>>>,
}

impl TimelineWindow {
    const EVERY: Duration = Duration::from_millis(50);

    fn start(pool: &Pool<&'static str>) -> Self {
        let path = std::env::var_os("TOURBILLON_TIMELINE");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = path.as_ref().map(|_| {
            let (pool, stop) = (pool.handle(), stop.clone());
            std::thread::spawn(move || {
                let take =
                    || -> Vec<_> { block_on(pool.timelines()).into_iter().flatten().collect() };
                // What came before the first window is dropped.
                drop(take());
                let mut windows = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Self::EVERY);
                    windows.push(take());
                    if windows.len() > 2 {
                        windows.remove(0);
                    }
                }
                windows
            })
        });
        TimelineWindow { path, stop, thread }
    }

    fn write(mut self) {
        let (Some(path), Some(thread)) = (self.path.take(), self.thread.take()) else {
            return;
        };
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let windows = thread.join().unwrap_or_default();
        let Some(window) = windows.first() else {
            eprintln!("timeline: no whole window of {:?} recorded", Self::EVERY);
            return;
        };
        let mut file = std::fs::File::create(&path).unwrap_or_else(|e| fail("timeline file", e));
        tourbillon::timeline::write_chrome_json(window, &mut file)
            .unwrap_or_else(|e| fail("timeline file", e));
        for t in window {
            let busy = t.busy_ns();
            let queues: Vec<String> = (t.queue_names().iter().zip(&busy))
                .map(|(q, ns)| format!("{q} {:.3} ms", *ns as f64 / 1e6))
                .collect();
            println!(
                "timeline {}: {} polls ({} dropped) in {:?}; time in polls: {}",
                t.label(),
                t.polls().len(),
                t.dropped(),
                Self::EVERY,
                queues.join(", ")
            );
        }
        println!("timeline written to {}", path.to_string_lossy());
    }
}

fn print_load(r: &LoadReport, cfg: &LoadConfig) {
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    println!(
        "client: sent {} received {} errors {} in {:.3} s: {:.0} requests/s",
        r.sent,
        r.received,
        r.errors,
        secs,
        r.received as f64 / secs
    );
    let line = |name: &str, h: &Histogram| {
        let us = |ns: u64| ns as f64 / 1000.0;
        println!(
            "  latency {name:<16} p50 {:>8.1} us  p99 {:>8.1} us  p999 {:>8.1} us  max {:>8.1} us",
            us(h.percentile_ns(0.50)),
            us(h.percentile_ns(0.99)),
            us(h.percentile_ns(0.999)),
            us(h.max_ns())
        );
    };
    if cfg.rate.is_some() {
        line("from due time", &r.from_due);
    }
    line("from write", &r.from_write);
    if !r.server_cpu.is_zero() {
        let per_request = |cpu: Duration| cpu.as_secs_f64() * 1e6 / r.received.max(1) as f64;
        println!(
            "  cpu: server cores {:.2} s ({:.3} us/request), client threads {:.2} s ({:.3} us/request)",
            r.server_cpu.as_secs_f64(),
            per_request(r.server_cpu),
            r.client_cpu.as_secs_f64(),
            per_request(r.client_cpu)
        );
    }
}

fn print_cores(pool: &Pool<&'static str>) {
    for core in 0..pool.cores() {
        let counted = block_on(pool.submit_to(core, FG, || async {
            (server::conn_stats(), store::stats())
        }));
        let Ok((conn, shard)) = counted else {
            println!("core {core}: unavailable");
            continue;
        };
        println!(
            "core {core}: accepted {} connections, read {} requests; \
             shard applied {} ({} forwarded in), {} entries; {} snapshot passes \
             (last: {} entries, {} KiB), {} tombstones dropped",
            conn.accepted,
            conn.requests,
            shard.applied,
            shard.forwarded_in,
            shard.entries,
            shard.passes,
            shard.snapshot_entries,
            shard.snapshot_bytes / 1024,
            shard.tombstones_dropped
        );
    }
    let stats = block_on(pool.stats());
    for (core, ex) in stats.cores.iter().enumerate() {
        let Some(ex) = ex else { continue };
        let queues: Vec<String> = ex
            .queues
            .iter()
            .map(|q| {
                format!(
                    "{} {:.1} ms in {} polls",
                    q.name,
                    q.service.as_secs_f64() * 1e3,
                    q.polls
                )
            })
            .collect();
        println!("core {core} executor: {}", queues.join(", "));
    }
}
