//! A sharded in-memory key-value store over TCP, one shard per core of a
//! `tourbillon::pool::Pool`, and a load client that measures it.
//!
//! ```text
//! cargo run --release --example sharded_kv --features tokio
//! cargo run --release --example sharded_kv --features tokio -- --cores 1 --rate max
//! ```
//!
//! Architecture (each part has its own file):
//!
//! * protocol.rs: a text protocol, one request per line (`GET key`,
//!   `SET key value`, `DEL key`), answers in order, pipelining allowed.
//! * store.rs: a shard, an ordered map in a thread-local of its core: no
//!   locks, and nothing `Send` about it.
//! * server.rs: what each core runs. The pool has one thread per core,
//!   each an executor with a foreground queue "fg" (shares 8: accept loop,
//!   connections), a queue "fwd" for the requests forwarded from other
//!   cores (shares 32) and a background queue "bg" (shares 1: a periodic
//!   snapshot pass over the shard). Each core accepts on a shared
//!   `SO_REUSEPORT` port and on a port of its own; a key belongs to shard
//!   `hash(key) % cores`, and requests for another core's keys go there
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
//! Measured (`--rate max --duration 5`, 1-core and 2-core runs alternated,
//! medians of 3, 2-vCPU Xeon VM, 2026-11-26; docs/benchmarks.md, "Sharded
//! key-value server", has the tables): shard-aware, 1.27 M requests/s on
//! 1 core and 2.96 M on 2 (2.33 times, as half the 50,000 keys cost a
//! core less per request than all of them; 1.74 times with the shard size
//! per core held equal); `any`, 1.33 and 1.95 M (1.47 times: half the requests are
//! forwarded, 0.81 us of server CPU per request against 0.49). What stops
//! scaling beyond: the client's CPU in the same machine (0.15 of the 0.63
//! us a request costs at 2 cores), and under `any` the forwarded fraction
//! `(N - 1) / N` at about 0.64 us each, with `N - 1` hops per read that
//! carry fewer requests each as `N` grows.
//!
//! The program starts the server, runs the client, stops the server's
//! loops, prints what each core did and shuts the pool down, by itself.
//! `--help` explains its flags and every line of its output ([`HELP`]).

mod client;
mod cpu;
mod latency;
mod protocol;
mod server;
mod store;
mod workload;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use futures::executor::block_on;
use tokio::sync::watch;
use tourbillon::pool::{Host, Placement, Pool};

use client::{LoadConfig, LoadReport, Routing};
use latency::Histogram;
use server::{BG, FG, FWD};

struct Options {
    cores: usize,
    placement: Placement,
    load: LoadConfig,
}

const USAGE: &str = "usage: sharded_kv [--cores N] [--placement each-cpu|unpinned] \
[--routing shard-aware|any] [--duration SECONDS] [--rate REQUESTS_PER_SECOND|max] [--conns N] \
[--depth N] [--keys N] [--client-threads N]; sharded_kv --help explains them";

const HELP: &str = "\
sharded_kv: a key-value server with one shard per core of a tourbillon Pool
(each core an executor in a tokio current_thread runtime, queues fg, fwd and
bg), and a load client in the same process. It starts the server, runs the
client for --duration, prints what the client measured and what each core
did, and shuts the pool down.

USAGE:
    cargo run --release --example sharded_kv --features tokio [-- OPTIONS]

OPTIONS (default in brackets):
    --cores N              pool cores, one thread and one shard each [2]
    --placement P          each-cpu: core i pinned to the i-th CPU;
                           unpinned: the OS places the threads [each-cpu]
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

OUTPUT:
    server: ...            cores and ports, and the client's settings
    client: sent S received R errors E in T s: X requests/s
                           requests sent and answered, error answers, and
                           answers per second over the measured phase
    latency from due time  (open loop) from when the request was due to be
                           sent to its answer: includes the client's own
                           delays, so a server that falls behind shows here
    latency from write     from the write of the request to its answer
                           (p50, p99, p999, max, in us)
    cpu: ...               CPU time of the server's core threads and of the
                           client threads, in all and per request (Linux
                           /proc; absent elsewhere)
    core N: ...            connections accepted, requests read (the fill's
                           included; forwarded: sent to another core), the
                           shard's applied requests (forwarded in: from
                           other cores), entries (tombstones included), and
                           its background snapshot passes
    core N executor: ...   per queue (fg: accept loop and connections, fwd:
                           requests forwarded from other cores, bg:
                           snapshots): service time and polls
    shutdown (...):        per core, drained or the tasks cancelled
";

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        cores: 2,
        placement: Placement::EachCpu,
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
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            print!("{HELP}");
            std::process::exit(0);
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
        let parsed = match flag.as_str() {
            "--cores" => count.map(|n| o.cores = n),
            "--conns" => count.map(|n| o.load.conns = n),
            "--depth" => count.map(|n| o.load.depth = n),
            "--client-threads" => count.map(|n| o.load.threads = n),
            "--keys" => count.map(|n| o.load.keys = n as u64),
            "--duration" => secs
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .filter(|d| !d.is_zero())
                .map(|d| o.load.duration = d),
            "--rate" => rate.map(|r| o.load.rate = r),
            "--placement" => placement.map(|p| o.placement = p),
            "--routing" => routing.map(|r| o.load.routing = r),
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        };
        parsed.ok_or(format!("bad value for {flag}: {value:?}\n{USAGE}"))?;
    }
    Ok(o)
}

fn main() {
    let mut opts = match parse_args() {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(2);
        }
    };

    // One executor per core, each on a thread of its own nested in a tokio
    // current_thread runtime (tokio sockets and timers work in its tasks).
    let pool: Pool<&'static str> = Pool::builder()
        .cores(opts.cores)
        .placement(opts.placement.clone())
        .host(Host::Tokio)
        .executor(|_core| {
            tourbillon::Builder::new()
                .queue(FG, 8)
                .queue(FWD, 32)
                .queue(BG, 1)
        })
        .build()
        .unwrap_or_else(|e| fail("building the pool", e));

    let (stop_tx, stop_rx) = watch::channel(false);
    let ports =
        block_on(start_server(&pool, stop_rx)).unwrap_or_else(|e| fail("starting the server", e));
    opts.load.addr.set_port(ports.shared);
    opts.load.core_addrs = (ports.own.iter())
        .map(|&p| SocketAddr::from((Ipv4Addr::LOCALHOST, p)))
        .collect();
    println!(
        "server: {} cores on 127.0.0.1:{} (shared), own ports {:?}; \
         client: {} connections on {} thread(s), routing {:?}, {}, {:?}",
        pool.cores(),
        ports.shared,
        ports.own,
        opts.load.conns,
        opts.load.threads,
        opts.load.routing,
        match opts.load.rate {
            Some(r) => format!("open loop at {r} requests/s"),
            None => format!("closed loop, {} in flight per connection", opts.load.depth),
        },
        opts.load.duration,
    );

    let report = client::run(&opts.load).unwrap_or_else(|e| fail("client", e));
    print_load(&report, &opts.load);

    // Ask the accept and background loops to return, read what each core
    // counted (on that core: the counters are thread-locals), shut down.
    stop_tx.send_replace(true);
    print_cores(&pool);
    match pool.shutdown(Duration::from_secs(1)) {
        Ok(report) => print!(
            "shutdown ({} task(s) cancelled):\n{report}",
            report.cancelled()
        ),
        Err(e) => eprintln!("shutdown: {e}"),
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("sharded_kv: {what}: {e}");
    std::process::exit(1);
}

/// The server's ports: the one every core accepts on, and each core's own.
struct Ports {
    shared: u16,
    own: Vec<u16>,
}

/// Binds two listeners on each core: one on the shared port (the first
/// core's on a free port, the others on the same port) and one on a free
/// port of the core's own; spawns each core's accept loops and background
/// loop; returns the ports.
async fn start_server(
    pool: &Pool<&'static str>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<Ports> {
    let mut ports = Ports {
        shared: 0,
        own: Vec::new(),
    };
    for core in 0..pool.cores() {
        // The loops hold a handle that does not keep the pool alive (a
        // `Pool` clone in a task would keep every core running).
        let (p, s) = (pool.handle(), stop.clone());
        let shared = ports.shared;
        // The closure runs on `core`: the listeners are created there, in
        // that core's tokio runtime, and their accept loops stay there.
        let (shared, own) = pool
            .submit_to(core, FG, move || async move {
                let listener = server::listen(shared, true)?;
                let own = server::listen(0, false)?;
                let ports = (listener.local_addr()?.port(), own.local_addr()?.port());
                // Detached: the loops return when `stop` changes.
                drop(tourbillon::spawn(server::accept_loop(
                    p.clone(),
                    listener,
                    s.clone(),
                )));
                drop(tourbillon::spawn(server::accept_loop(p, own, s)));
                Ok::<_, std::io::Error>(ports)
            })
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))??;
        ports.shared = shared;
        ports.own.push(own);
        let s = stop.clone();
        let background = pool
            .spawn_on(core, BG, move || server::background_loop(s))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        // Detached: the loop returns when `stop` changes.
        drop(background);
    }
    Ok(ports)
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
            "core {core}: accepted {} connections, read {} requests (the fill's included; {} forwarded \
             to other cores); \
             shard applied {} ({} forwarded in), {} entries; {} snapshot passes \
             (last: {} entries, {} KiB), {} tombstones dropped",
            conn.accepted,
            conn.requests,
            conn.forwarded_out,
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
