//! The load client: plain threads, each with its own tokio `current_thread`
//! runtime, none of them part of the pool. It first fills the store with
//! every key (not measured), then sends a mix of GET / SET / DEL for a
//! fixed duration and measures each request's latency.
//!
//! Routing (`--routing`):
//!
//! * `shard-aware`: connection `c` goes to core `c % cores` on that core's
//!   own port and sends only keys of that core's shard (the client knows
//!   the server's hash, as shard-aware drivers do), so the server never
//!   forwards a request;
//! * `any`: every connection goes to the shared `SO_REUSEPORT` port, the
//!   kernel picks its core, and the keys are drawn from all shards: with
//!   `N` cores, `(N - 1) / N` of the requests land on a core that does not
//!   own their key and are forwarded.
//!
//! Arrivals are open-loop at `--rate`: request `i` of a connection is due
//! at `start + i * interval`, whatever the server does, and its latency
//! counts from that due time, so a slow server shows as latency instead of
//! slowing the arrivals down (no coordinated omission). The writer wakes
//! on tokio's millisecond timer and sends all the requests due by then in
//! one write, so the latency from the due time includes up to a tick of
//! the client's own lateness; the latency from the write (the time the
//! request really left) is reported next to it.
//!
//! With `--rate max` each connection instead keeps `--depth` requests in
//! flight (closed loop, pipelined): one task per connection writes as many
//! requests as answers it just read, which measures how much the server
//! can do; latencies then count from the write.
//!
//! The requests are prepared before the measured phase and the answers
//! only counted (workload.rs), so the client costs little CPU per request.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::cpu;
use crate::latency::Histogram;
use crate::workload::{
    key_name, keys_by_shard, scan_replies, value_for, Request, RequestRing, Rng, MAX_REPLY, RING,
};

/// Which core each connection goes to, and with which keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// A connection per core's own port, only that core's keys.
    ShardAware,
    /// The shared port, keys of every shard.
    Any,
}

/// How the client loads the server.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The port every core accepts on (`SO_REUSEPORT`).
    pub addr: SocketAddr,
    /// Each core's own port, by core.
    pub core_addrs: Vec<SocketAddr>,
    pub routing: Routing,
    pub conns: usize,
    pub threads: usize,
    pub duration: Duration,
    /// Requests per second over all connections; `None`: as fast as the
    /// server answers, `depth` in flight per connection.
    pub rate: Option<f64>,
    pub depth: usize,
    pub keys: u64,
}

/// How long the client waits for the last responses after the end of the
/// run before it gives up on them.
const DRAIN: Duration = Duration::from_secs(2);

/// What one connection measured.
#[derive(Default)]
struct ConnResult {
    sent: u64,
    received: u64,
    errors: u64,
    /// Nanoseconds from the due time (open loop only), and from the write.
    from_due: Histogram,
    from_write: Histogram,
    last_response: Option<Instant>,
}

/// The whole run, merged over the connections.
pub struct LoadReport {
    pub sent: u64,
    pub received: u64,
    pub errors: u64,
    /// From the start of the measured phase to the last response.
    pub elapsed: Duration,
    pub from_due: Histogram,
    pub from_write: Histogram,
    /// CPU time over the measured phase: the client's threads, and the
    /// server's cores (threads `tb-core-*`); zero without `/proc`.
    pub client_cpu: Duration,
    pub server_cpu: Duration,
}

/// One connection's address, keys and share of the fill.
struct ConnPlan {
    addr: SocketAddr,
    /// The keys this connection asks for.
    keys: Arc<Vec<u64>>,
    /// It fills `keys[i]` for `i % fill_of == fill_rank`.
    fill_rank: usize,
    fill_of: usize,
}

/// The plan of every connection. Shard-aware: connection `c` to core
/// `c % cores`, the connections of one core splitting its keys for the
/// fill; any: all connections to the shared port, all keys.
fn plan(cfg: &LoadConfig) -> Result<Vec<ConnPlan>, String> {
    match cfg.routing {
        Routing::Any => {
            let all = Arc::new((0..cfg.keys).collect::<Vec<u64>>());
            Ok((0..cfg.conns)
                .map(|c| ConnPlan {
                    addr: cfg.addr,
                    keys: all.clone(),
                    fill_rank: c,
                    fill_of: cfg.conns,
                })
                .collect())
        }
        Routing::ShardAware => {
            let cores = cfg.core_addrs.len();
            let by_shard: Vec<Arc<Vec<u64>>> = keys_by_shard(cfg.keys, cores)
                .into_iter()
                .map(Arc::new)
                .collect();
            if let Some(shard) = by_shard.iter().position(|k| k.is_empty()) {
                return Err(format!(
                    "--routing shard-aware: core {shard} owns none of the {} keys (more --keys)",
                    cfg.keys
                ));
            }
            if cfg.conns < cores {
                return Err(
                    "--routing shard-aware needs a connection per core at least (--conns >= --cores)"
                        .to_string(),
                );
            }
            Ok((0..cfg.conns)
                .map(|c| ConnPlan {
                    addr: cfg.core_addrs[c % cores],
                    keys: by_shard[c % cores].clone(),
                    fill_rank: c / cores,
                    fill_of: (cfg.conns - c % cores).div_ceil(cores),
                })
                .collect())
        }
    }
}

/// Runs the client to completion on `cfg.threads` threads of its own.
pub fn run(cfg: &LoadConfig) -> std::io::Result<LoadReport> {
    let threads = cfg.threads.clamp(1, cfg.conns);
    let mut plans: Vec<Vec<(usize, ConnPlan)>> = (0..threads).map(|_| Vec::new()).collect();
    for (c, p) in plan(cfg)
        .map_err(std::io::Error::other)?
        .into_iter()
        .enumerate()
    {
        plans[c % threads].push((c, p));
    }
    // Every thread's connections start at the same instant, a little
    // after the fill, so that no connection's first requests are late.
    let (start_tx, start_rx) = std::sync::mpsc::channel::<Instant>();
    let start_rx = Arc::new(std::sync::Mutex::new(start_rx));
    let fill_done = Arc::new(std::sync::Barrier::new(threads + 1));
    let mut handles = Vec::new();
    for (t, conns) in plans.into_iter().enumerate() {
        let cfg = cfg.clone();
        let (fill_done, start_rx) = (fill_done.clone(), start_rx.clone());
        let thread = std::thread::Builder::new().name(format!("kv-client-{t}"));
        handles.push(thread.spawn(move || client_thread(conns, cfg, fill_done, start_rx))?);
    }
    fill_done.wait();
    let start = Instant::now() + Duration::from_millis(20);
    let server_before = cpu::threads_named("tb-core-");
    for _ in 0..threads {
        start_tx.send(start).unwrap();
    }
    let mut all = Vec::new();
    let mut client_cpu = Duration::ZERO;
    for h in handles {
        let (results, thread_cpu) = h.join().expect("client thread panicked")?;
        all.extend(results);
        client_cpu += thread_cpu;
    }
    let server_cpu = cpu::threads_named("tb-core-").saturating_sub(server_before);
    let mut report = merge(all, start);
    report.client_cpu = client_cpu;
    report.server_cpu = server_cpu;
    Ok(report)
}

/// One client thread: connects and fills, waits for the start, runs its
/// connections; returns their results and the thread's CPU time from the
/// start to the end of its connections.
fn client_thread(
    conns: Vec<(usize, ConnPlan)>,
    cfg: LoadConfig,
    fill_done: Arc<std::sync::Barrier>,
    start_rx: Arc<std::sync::Mutex<std::sync::mpsc::Receiver<Instant>>>,
) -> std::io::Result<(Vec<ConnResult>, Duration)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut streams = Vec::new();
        for (c, p) in conns {
            let mut s = TcpStream::connect(p.addr).await?;
            s.set_nodelay(true)?;
            fill(&mut s, &p).await?;
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (c as u64 + 1));
            let ring = RequestRing::new(&p.keys, RING.max(cfg.depth), &mut rng);
            streams.push((s, ring));
        }
        fill_done.wait();
        let start = start_rx.lock().unwrap().recv().unwrap();
        let cpu_before = cpu::this_thread();
        let tasks: Vec<_> = streams
            .into_iter()
            .map(|(s, ring)| {
                let cfg = cfg.clone();
                tokio::spawn(async move {
                    match cfg.rate {
                        None => closed_loop(s, ring, start, &cfg).await,
                        Some(rate) => open_loop(s, ring, rate, start, &cfg).await,
                    }
                })
            })
            .collect();
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.expect("client connection task panicked")?);
        }
        Ok((results, cpu::this_thread().saturating_sub(cpu_before)))
    })
}

fn merge(results: Vec<ConnResult>, start: Instant) -> LoadReport {
    let mut report = LoadReport {
        sent: 0,
        received: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        from_due: Histogram::default(),
        from_write: Histogram::default(),
        client_cpu: Duration::ZERO,
        server_cpu: Duration::ZERO,
    };
    for r in results {
        report.sent += r.sent;
        report.received += r.received;
        report.errors += r.errors;
        if let Some(t) = r.last_response {
            report.elapsed = report.elapsed.max(t.saturating_duration_since(start));
        }
        report.from_due.merge(&r.from_due);
        report.from_write.merge(&r.from_write);
    }
    report
}

/// Sets this connection's share of its keys, pipelined in batches, and
/// reads the responses (not measured).
async fn fill(s: &mut TcpStream, p: &ConnPlan) -> std::io::Result<()> {
    let keys: Vec<u64> = p
        .keys
        .iter()
        .skip(p.fill_rank)
        .step_by(p.fill_of)
        .copied()
        .collect();
    let mut out = Vec::new();
    let mut inbuf = Vec::with_capacity(64 * 1024);
    for batch in keys.chunks(1000) {
        out.clear();
        for &k in batch {
            Request::Set(key_name(k), value_for(k, 0)).encode(&mut out);
        }
        s.write_all(&out).await?;
        let mut replies = 0;
        while replies < batch.len() {
            if s.read_buf(&mut inbuf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let r = scan_replies(&inbuf);
            replies += r.count;
            inbuf.drain(..r.used);
        }
    }
    Ok(())
}

/// Reads what has arrived into `buf`; `Ok(None)` at the end of the
/// stream or at `deadline`.
async fn read_some(
    read: &mut (impl AsyncReadExt + Unpin),
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> std::io::Result<Option<usize>> {
    match tokio::time::timeout_at(deadline.into(), read.read_buf(buf)).await {
        Ok(Ok(0)) | Err(_) => Ok(None),
        Ok(Ok(n)) => Ok(Some(n)),
        Ok(Err(e)) => Err(e),
    }
}

/// `--rate max`: keeps `cfg.depth` requests in flight on one connection,
/// writing as many new requests as answers each read brings, until the
/// end of the run; then waits for the last answers.
async fn closed_loop(
    mut s: TcpStream,
    mut ring: RequestRing,
    start: Instant,
    cfg: &LoadConfig,
) -> std::io::Result<ConnResult> {
    let end = start + cfg.duration;
    let mut result = ConnResult::default();
    // The writes in flight, oldest first: when, and how many of their
    // requests are not answered yet (answers come in order).
    let mut in_flight: VecDeque<(Instant, usize)> = VecDeque::new();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut free = cfg.depth.min(ring.size());
    let mut ending = false;
    tokio::time::sleep_until(start.into()).await;
    loop {
        if !ending && free > 0 {
            let now = Instant::now();
            if now < end {
                s.write_all(ring.take(free)).await?;
                in_flight.push_back((now, free));
                result.sent += free as u64;
                free = 0;
            } else {
                ending = true;
                s.shutdown().await?;
            }
        }
        if ending && in_flight.is_empty() {
            break;
        }
        if read_some(&mut s, &mut buf, end + DRAIN).await?.is_none() {
            break;
        }
        let now = Instant::now();
        let replies = scan_replies(&buf);
        let mut left = replies.count;
        while left > 0 {
            let Some((written, pending)) = in_flight.front_mut() else {
                return Err(std::io::Error::other("a response to no request"));
            };
            let n = left.min(*pending);
            let ns = now.saturating_duration_since(*written).as_nanos() as u64;
            result.from_write.record_n(ns, n as u64);
            *pending -= n;
            left -= n;
            if *pending == 0 {
                in_flight.pop_front();
            }
        }
        account(&mut result, replies.count, replies.errors, now);
        free += replies.count;
        buf.drain(..replies.used);
        if buf.len() > MAX_REPLY {
            return Err(std::io::Error::other("a reply above MAX_REPLY bytes"));
        }
    }
    Ok(result)
}

fn account(result: &mut ConnResult, replies: usize, errors: usize, now: Instant) {
    result.received += replies as u64;
    result.errors += errors as u64;
    if replies > 0 {
        result.last_response = Some(now);
    }
}

/// What the open-loop writer tells the reader about one write: its
/// requests were due at `first_due`, `first_due + interval`, ... and
/// written at `written`.
struct Sent {
    first_due: Instant,
    written: Instant,
    count: usize,
}

/// `--rate`: a writer task sends the requests due on this connection, this
/// task reads the answers; the writer tells the reader about each write
/// through a channel, in order, as answers come back in order.
async fn open_loop(
    stream: TcpStream,
    ring: RequestRing,
    rate: f64,
    start: Instant,
    cfg: &LoadConfig,
) -> std::io::Result<ConnResult> {
    let (read, write) = stream.into_split();
    let (sent_tx, sent_rx) = mpsc::unbounded_channel();
    let interval = Duration::from_secs_f64(cfg.conns as f64 / rate);
    let end = start + cfg.duration;
    let writer = tokio::spawn(write_due(write, sent_tx, ring, interval, start, end));
    let mut result = read_answers(read, sent_rx, interval, end + DRAIN).await?;
    result.sent = writer.await.expect("client writer panicked")?;
    Ok(result)
}

/// Sends the requests due, one every `interval` from `start`, until
/// `end`, then half-closes the connection (the server answers what it has
/// and closes its side); returns the number sent.
async fn write_due(
    mut write: OwnedWriteHalf,
    sent_tx: mpsc::UnboundedSender<Sent>,
    mut ring: RequestRing,
    interval: Duration,
    start: Instant,
    end: Instant,
) -> std::io::Result<u64> {
    let mut next_due = start;
    let mut sent = 0u64;
    tokio::time::sleep_until(start.into()).await;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        let mut due = match now.checked_duration_since(next_due) {
            Some(late) => (late.as_nanos() / interval.as_nanos().max(1)) as usize + 1,
            None => 0,
        };
        // A late writer sends its backlog a ring at most at a time.
        while due > 0 {
            let count = due.min(ring.size());
            // The reader cannot see an answer before this entry: it is
            // queued before the requests are written.
            let _ = sent_tx.send(Sent {
                first_due: next_due,
                written: now,
                count,
            });
            write.write_all(ring.take(count)).await?;
            next_due += interval * count as u32;
            sent += count as u64;
            due -= count;
        }
        tokio::time::sleep_until(next_due.min(end).into()).await;
    }
    write.shutdown().await?;
    Ok(sent)
}

/// Reads answers until the server closes the connection (after the
/// writer's half-close) or `deadline`.
async fn read_answers(
    mut read: OwnedReadHalf,
    mut sent_rx: mpsc::UnboundedReceiver<Sent>,
    interval: Duration,
    deadline: Instant,
) -> std::io::Result<ConnResult> {
    let mut result = ConnResult::default();
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut current: Option<Sent> = None;
    while read_some(&mut read, &mut buf, deadline).await?.is_some() {
        let now = Instant::now();
        let replies = scan_replies(&buf);
        for _ in 0..replies.count {
            if current.as_ref().is_none_or(|b| b.count == 0) {
                let next = sent_rx.try_recv();
                current =
                    Some(next.map_err(|_| std::io::Error::other("a response to no request"))?);
            }
            let Some(batch) = current.as_mut() else {
                unreachable!("set just above")
            };
            let due = now.saturating_duration_since(batch.first_due);
            let written = now.saturating_duration_since(batch.written);
            result.from_due.record_n(due.as_nanos() as u64, 1);
            result.from_write.record_n(written.as_nanos() as u64, 1);
            batch.first_due += interval;
            batch.count -= 1;
        }
        account(&mut result, replies.count, replies.errors, now);
        buf.drain(..replies.used);
        if buf.len() > MAX_REPLY {
            return Err(std::io::Error::other("a reply above MAX_REPLY bytes"));
        }
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::shard_of;
    use crate::workload::key_name;

    fn config(routing: Routing, conns: usize, cores: usize) -> LoadConfig {
        let addr = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        LoadConfig {
            addr: addr(1000),
            core_addrs: (0..cores as u16).map(|c| addr(2000 + c)).collect(),
            routing,
            conns,
            threads: 1,
            duration: Duration::from_secs(1),
            rate: None,
            depth: 1,
            keys: 1000,
        }
    }

    /// Every key is filled by exactly one connection.
    fn assert_fill_covers(plans: &[ConnPlan], keys: u64) {
        let mut filled = vec![0; keys as usize];
        for p in plans {
            for &k in p.keys.iter().skip(p.fill_rank).step_by(p.fill_of) {
                filled[k as usize] += 1;
            }
        }
        assert!(filled.iter().all(|&n| n == 1));
    }

    #[test]
    fn shard_aware_connections_reach_the_owner_only() {
        let cfg = config(Routing::ShardAware, 5, 2);
        let plans = plan(&cfg).unwrap();
        for (c, p) in plans.iter().enumerate() {
            assert_eq!(p.addr, cfg.core_addrs[c % 2]);
            assert!(p.keys.iter().all(|&k| shard_of(&key_name(k), 2) == c % 2));
        }
        assert_fill_covers(&plans, cfg.keys);
    }

    #[test]
    fn any_connections_share_the_port_and_all_keys() {
        let cfg = config(Routing::Any, 3, 2);
        let plans = plan(&cfg).unwrap();
        assert!(plans
            .iter()
            .all(|p| p.addr == cfg.addr && p.keys.len() == 1000));
        assert_fill_covers(&plans, cfg.keys);
    }

    #[test]
    fn shard_aware_needs_a_connection_per_core() {
        let err = plan(&config(Routing::ShardAware, 1, 2)).err().unwrap();
        assert!(err.contains("--conns >= --cores"), "{err}");
    }
}
