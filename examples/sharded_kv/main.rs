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
//!   snapshot pass over the shard). Each
//!   core accepts on its own `SO_REUSEPORT` listener; a key belongs to
//!   shard `hash(key) % cores`, and requests for another core's keys go
//!   there with `pool.submit_to`, whose `Send` closure builds the
//!   (non-`Send`) future on the target core.
//! * client.rs: the load client, on threads of its own outside the pool:
//!   open-loop arrivals at a target rate (or a fixed window of requests in
//!   flight with `--rate max`) for a fixed duration, then latency
//!   percentiles and throughput.
//!
//! The program starts the server, runs the client, stops the server's
//! loops, prints what each core did and shuts the pool down, by itself.
//! Flags: `--cores N` (default 2), `--placement each-cpu|unpinned`
//! (each-cpu: core `i` pinned to the `i`-th CPU), `--duration SECONDS` (2),
//! `--rate REQUESTS_PER_SECOND|max` (50000), `--conns N` (16), `--depth N`
//! (64, with `--rate max`), `--keys N` (50000), `--client-threads N` (1).
//! The client's threads are not pinned.

mod client;
mod protocol;
mod server;
mod store;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use futures::executor::block_on;
use tokio::sync::watch;
use tourbillon::pool::{Host, Placement, Pool};

use client::{LoadConfig, LoadReport};
use server::{BG, FG, FWD};

struct Options {
    cores: usize,
    placement: Placement,
    load: LoadConfig,
}

const USAGE: &str =
    "usage: sharded_kv [--cores N] [--placement each-cpu|unpinned] [--duration SECONDS] \
[--rate REQUESTS_PER_SECOND|max] [--conns N] [--depth N] [--keys N] [--client-threads N]";

fn parse_args() -> Result<Options, String> {
    let mut o = Options {
        cores: 2,
        placement: Placement::EachCpu,
        load: LoadConfig {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
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
            return Err(USAGE.to_string());
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
    let port =
        block_on(start_server(&pool, stop_rx)).unwrap_or_else(|e| fail("starting the server", e));
    opts.load.addr.set_port(port);
    println!(
        "server: {} cores on 127.0.0.1:{port}; client: {} connections on {} thread(s), {}, {:?}",
        pool.cores(),
        opts.load.conns,
        opts.load.threads,
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

/// Binds a listener on each core (the first on a free port, the others on
/// the same port) and spawns each core's accept loop and background loop;
/// returns the port.
async fn start_server(
    pool: &Pool<&'static str>,
    stop: watch::Receiver<bool>,
) -> std::io::Result<u16> {
    let mut port = 0;
    for core in 0..pool.cores() {
        let (p, s) = (pool.clone(), stop.clone());
        // The closure runs on `core`: the listener is created there, in
        // that core's tokio runtime, and its accept loop stays there.
        port = pool
            .submit_to(core, FG, move || async move {
                let listener = server::listen(port)?;
                let port = listener.local_addr()?.port();
                // Detached: the loop returns when `stop` changes.
                drop(tourbillon::spawn(server::accept_loop(p, listener, s)));
                Ok::<_, std::io::Error>(port)
            })
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))??;
        let s = stop.clone();
        let background = pool
            .spawn_on(core, BG, move || server::background_loop(s))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        // Detached: the loop returns when `stop` changes.
        drop(background);
    }
    Ok(port)
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
    let line = |name: &str, v: &[u64]| {
        let pct = |q: f64| {
            let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len().max(1)) - 1;
            v.get(i).map_or(0.0, |&ns| ns as f64 / 1000.0)
        };
        println!(
            "  latency {name:<16} p50 {:>8.1} us  p99 {:>8.1} us  p999 {:>8.1} us  max {:>8.1} us",
            pct(0.50),
            pct(0.99),
            pct(0.999),
            v.last().map_or(0.0, |&ns| ns as f64 / 1000.0)
        );
    };
    if cfg.rate.is_some() {
        line("from due time", &r.from_due);
    }
    line("from write", &r.from_write);
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
