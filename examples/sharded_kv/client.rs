//! The load client: plain threads, each with its own tokio `current_thread`
//! runtime, none of them part of the pool. It first fills the store with
//! every key (not measured), then sends a mix of GET / SET / DEL for a
//! fixed duration and measures each request's latency.
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
//! flight (closed loop, pipelined), which measures how much the server can
//! do; latencies then count from the write.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Semaphore};

use crate::protocol::{complete_lines, Request, Response, MAX_LINE};

/// How the client loads the server.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    pub addr: SocketAddr,
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
    /// Nanoseconds from the due time, and from the write, per response.
    from_due: Vec<u64>,
    from_write: Vec<u64>,
    last_response: Option<Instant>,
}

/// The whole run, merged over the connections.
pub struct LoadReport {
    pub sent: u64,
    pub received: u64,
    pub errors: u64,
    /// From the start of the measured phase to the last response.
    pub elapsed: Duration,
    pub from_due: Vec<u64>,
    pub from_write: Vec<u64>,
}

/// Runs the client to completion on `cfg.threads` threads of its own.
pub fn run(cfg: &LoadConfig) -> std::io::Result<LoadReport> {
    let threads = cfg.threads.clamp(1, cfg.conns);
    // Every thread's connections start at the same instant, a little
    // after the fill, so that no connection's first requests are late.
    let (start_tx, start_rx) = std::sync::mpsc::channel::<Instant>();
    let start_rx = Arc::new(std::sync::Mutex::new(start_rx));
    let fill_done = Arc::new(std::sync::Barrier::new(threads + 1));
    let mut handles = Vec::new();
    for t in 0..threads {
        let cfg = cfg.clone();
        let conns: Vec<usize> = (t..cfg.conns).step_by(threads).collect();
        let (fill_done, start_rx) = (fill_done.clone(), start_rx.clone());
        let thread = std::thread::Builder::new().name(format!("kv-client-{t}"));
        handles.push(thread.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let mut streams = Vec::new();
                for &c in &conns {
                    let mut s = TcpStream::connect(cfg.addr).await?;
                    s.set_nodelay(true)?;
                    fill(&mut s, c, &cfg).await?;
                    streams.push(s);
                }
                fill_done.wait();
                let start = start_rx.lock().unwrap().recv().unwrap();
                let tasks: Vec<_> = streams
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| tokio::spawn(run_conn(s, conns[i], start, cfg.clone())))
                    .collect();
                let mut results = Vec::new();
                for t in tasks {
                    results.push(t.await.expect("client connection task panicked")?);
                }
                Ok::<_, std::io::Error>(results)
            })
        })?);
    }
    fill_done.wait();
    let start = Instant::now() + Duration::from_millis(20);
    for _ in 0..threads {
        start_tx.send(start).unwrap();
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.join().expect("client thread panicked")?);
    }
    Ok(merge(all, start))
}

fn merge(results: Vec<ConnResult>, start: Instant) -> LoadReport {
    let mut report = LoadReport {
        sent: 0,
        received: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        from_due: Vec::new(),
        from_write: Vec::new(),
    };
    for r in results {
        report.sent += r.sent;
        report.received += r.received;
        report.errors += r.errors;
        if let Some(t) = r.last_response {
            report.elapsed = report.elapsed.max(t.saturating_duration_since(start));
        }
        report.from_due.extend(r.from_due);
        report.from_write.extend(r.from_write);
    }
    report.from_due.sort_unstable();
    report.from_write.sort_unstable();
    report
}

/// Sets the keys `k` with `k % conns == conn`, pipelined in batches, and
/// reads the responses (not measured).
async fn fill(s: &mut TcpStream, conn: usize, cfg: &LoadConfig) -> std::io::Result<()> {
    let keys: Vec<u64> = (conn as u64..cfg.keys).step_by(cfg.conns).collect();
    let mut out = Vec::new();
    let mut inbuf = Vec::with_capacity(64 * 1024);
    for batch in keys.chunks(1000) {
        out.clear();
        for &k in batch {
            Request::Set(key_name(k), value_for(k, 0)).encode(&mut out);
        }
        s.write_all(&out).await?;
        let mut lines = 0;
        while lines < batch.len() {
            if s.read_buf(&mut inbuf).await? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            let (done, used) = complete_lines(&inbuf);
            lines += done.len();
            inbuf.drain(..used);
        }
    }
    Ok(())
}

fn key_name(k: u64) -> Vec<u8> {
    format!("key:{k}").into_bytes()
}

fn value_for(k: u64, version: u64) -> Vec<u8> {
    format!("value-{k:08}-{version:08}").into_bytes()
}

/// A small xorshift generator: the request mix needs no more.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// 90% GET, 8% SET, 2% DEL, on a key chosen uniformly.
    fn request(&mut self, keys: u64) -> Request {
        let k = self.next() % keys;
        match self.next() % 100 {
            0..90 => Request::Get(key_name(k)),
            90..98 => Request::Set(key_name(k), value_for(k, self.next() % 1000)),
            _ => Request::Del(key_name(k)),
        }
    }
}

/// One connection of the measured phase: a writer task sends, this task
/// reads; the writer tells the reader each request's due and write time
/// through a channel, in order, as responses come back in order.
async fn run_conn(
    stream: TcpStream,
    conn: usize,
    start: Instant,
    cfg: LoadConfig,
) -> std::io::Result<ConnResult> {
    let (read, write) = stream.into_split();
    let (times_tx, times_rx) = mpsc::unbounded_channel();
    let pace = match cfg.rate {
        Some(rate) => Pace::Every(Duration::from_secs_f64(cfg.conns as f64 / rate)),
        None => Pace::Window(Arc::new(Semaphore::new(cfg.depth))),
    };
    let window = match &pace {
        Pace::Window(w) => Some(w.clone()),
        Pace::Every(_) => None,
    };
    let end = start + cfg.duration;
    let writer = tokio::spawn(write_requests(
        write,
        times_tx,
        pace,
        Rng(0x9e37_79b9_7f4a_7c15 ^ (conn as u64 + 1)),
        start,
        cfg,
    ));
    let mut result = read_responses(read, times_rx, window, end + DRAIN).await?;
    result.sent = writer.await.expect("client writer panicked")?;
    Ok(result)
}

/// When a connection's writer sends.
enum Pace {
    /// Open loop: one request per interval (`--rate`).
    Every(Duration),
    /// Closed loop: whenever the window (`--depth` slots, freed by the
    /// reader as responses arrive) has room (`--rate max`).
    Window(Arc<Semaphore>),
}

/// Sends requests until the end of the run, then half-closes the
/// connection (the server answers what it has and closes its side);
/// returns the number sent.
async fn write_requests(
    mut write: OwnedWriteHalf,
    times: mpsc::UnboundedSender<(Instant, Instant)>,
    pace: Pace,
    mut rng: Rng,
    start: Instant,
    cfg: LoadConfig,
) -> std::io::Result<u64> {
    let end = start + cfg.duration;
    let mut next_due = start;
    let mut sent = 0u64;
    let mut out = Vec::new();
    tokio::time::sleep_until(start.into()).await;
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        // Which requests go out now, each with its due time.
        let mut due = Vec::new();
        match &pace {
            &Pace::Every(interval) => {
                while next_due <= now {
                    due.push(next_due);
                    next_due += interval;
                }
            }
            Pace::Window(window) => {
                // One free slot at least (waiting for it), then all free.
                window.acquire().await.expect("window closed").forget();
                let more = window.available_permits();
                window
                    .acquire_many(more as u32)
                    .await
                    .expect("window closed")
                    .forget();
                let now = Instant::now();
                due.extend(std::iter::repeat_n(now, 1 + more));
            }
        }
        out.clear();
        let written = Instant::now();
        for &d in &due {
            rng.request(cfg.keys).encode(&mut out);
            // The reader cannot see a response before its entry: the entry
            // is queued before the request is written.
            let _ = times.send((d, written));
        }
        write.write_all(&out).await?;
        sent += due.len() as u64;
        if let Pace::Every(_) = pace {
            tokio::time::sleep_until(next_due.min(end).into()).await;
        }
    }
    write.shutdown().await?;
    Ok(sent)
}

/// Reads responses until the server closes the connection (after the
/// writer's half-close) or `deadline`.
async fn read_responses(
    mut read: OwnedReadHalf,
    mut times: mpsc::UnboundedReceiver<(Instant, Instant)>,
    window: Option<Arc<Semaphore>>,
    deadline: Instant,
) -> std::io::Result<ConnResult> {
    let mut result = ConnResult::default();
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        let n = match tokio::time::timeout_at(deadline.into(), read.read_buf(&mut buf)).await {
            Ok(n) => n?,
            Err(_elapsed) => break,
        };
        if n == 0 {
            break;
        }
        let now = Instant::now();
        let (lines, used) = complete_lines(&buf);
        for line in &lines {
            let Ok((due, written)) = times.try_recv() else {
                return Err(std::io::Error::other("a response to no request"));
            };
            result
                .from_due
                .push(now.saturating_duration_since(due).as_nanos() as u64);
            result
                .from_write
                .push(now.saturating_duration_since(written).as_nanos() as u64);
            result.errors += u64::from(Response::line_is_error(line));
        }
        result.received += lines.len() as u64;
        if !lines.is_empty() {
            result.last_response = Some(now);
            if let Some(window) = &window {
                window.add_permits(lines.len());
            }
        }
        buf.drain(..used);
        if buf.len() > MAX_LINE {
            return Err(std::io::Error::other("response line too long"));
        }
    }
    Ok(result)
}
