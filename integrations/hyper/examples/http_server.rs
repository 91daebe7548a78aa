//! An HTTP/1.1 server on hyper next to CPU-bound background work, on one
//! thread: tourbillon nested in a tokio `current_thread` runtime, or the
//! same server on plain tokio for comparison (`--plain-tokio`).
//!
//! * **Foreground** (queue `Http`): a task accepts connections with
//!   tokio's `TcpListener` and spawns one task per connection into a
//!   `JoinSet` on its own queue; each serves its connection with hyper's
//!   `http1::Builder::serve_connection` (keep-alive on). Routes: `GET /`
//!   answers a small text body, `GET /stats` the executor's statistics as
//!   JSON (per queue: polls, runs, service, runnable tasks, lag, and the
//!   wake-to-first-poll latency with `--wake-histograms`); other paths are
//!   404, other methods on those paths 405. hyper's HTTP/1.1 server spawns
//!   nothing (its `rt::Executor` serves HTTP/2 only), so no spawner is
//!   handed to it: every task of the server is spawned by the acceptor.
//! * **Background** (queue `Background`): `--background N` tasks compute
//!   Adler-32 checksums over a buffer of their own, `--chunk-kib` KiB at a
//!   time with `task::yield_maybe().await` between chunks (it yields only
//!   when a run of the queue or a host turn is due to end).
//! * **Shares** `--shares FG:BG` (default 99:1): while both queues are
//!   runnable the foreground gets FG/(FG+BG) of the thread; while it
//!   waits for the network the background gets all of it. `--latency-us`
//!   sets `QueueSpec::latency` on `Http` (default 50 us): while `Http`
//!   waits for tokio's reactor, the executor returns to tokio at least
//!   that often, so a request that arrives behind background work is seen
//!   within about that time rather than the host-yield interval (200 us).
//! * **`--plain-tokio`**: the same acceptor, connections and background
//!   tasks as plain tokio tasks on a `LocalSet` (`spawn_local`) of a
//!   `current_thread` runtime, the background yielding with
//!   `tokio::task::yield_now()` after every chunk. tokio has one run queue
//!   for both, in FIFO order; `/stats` then has no executor statistics.
//!
//! The server binds 127.0.0.1 and serves until SIGINT or SIGTERM; it then
//! stops accepting, closes idle connections and lets requests in flight
//! finish (hyper's `graceful_shutdown`), stops the background, and prints
//! what it served, the background's throughput and (tourbillon) the
//! executor's statistics. `benches/http_compare.sh` drives it with `wrk`.
//!
//! ```text
//! cargo run --release -p tourbillon-hyper --example http_server -- --background 4
//! cargo run --release -p tourbillon-hyper --example http_server -- --background 4 --plain-tokio
//! curl http://127.0.0.1:8080/stats
//! ```

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::rc::{Rc, Weak};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tourbillon::stats::{ExecutorStats, QueueStats};
use tourbillon::task::{yield_maybe, JoinSet};
use tourbillon::{Builder, Executor, QueueSpec};

/// The executor's queues.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Q {
    /// The acceptor and the connections.
    Http,
    /// The checksumming tasks.
    Background,
}

/// Which executor runs the server.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// tourbillon with the queues `Http` and `Background`, nested in a tokio
    /// `current_thread` runtime.
    Tourbillon,
    /// Plain tokio tasks on a `LocalSet` of a `current_thread` runtime.
    PlainTokio,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Tourbillon => "tourbillon",
            Mode::PlainTokio => "plain-tokio",
        }
    }
}

/// How to run the server.
#[derive(Clone, Debug)]
pub struct Config {
    pub mode: Mode,
    /// Background tasks (0: no background load).
    pub background_tasks: usize,
    /// Shares of the `Http` queue (tourbillon only).
    pub http_shares: u32,
    /// Shares of the `Background` queue (tourbillon only).
    pub background_shares: u32,
    /// `QueueSpec::latency` of the `Http` queue (tourbillon only).
    pub latency: Option<Duration>,
    /// Bytes a background task checksums between two yields.
    pub chunk_bytes: usize,
    /// Each background task's buffer, checksummed over and over.
    pub buffer_bytes: usize,
    /// `Builder::latency_histograms`: wake-to-first-poll histograms per
    /// queue in `/stats` (tourbillon only).
    pub wake_histograms: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Tourbillon,
            background_tasks: 0,
            http_shares: 99,
            background_shares: 1,
            latency: Some(Duration::from_micros(50)),
            chunk_bytes: 16 * 1024,
            buffer_bytes: 256 * 1024,
            wake_histograms: false,
        }
    }
}

/// What a server did, returned when it stops.
#[derive(Debug)]
pub struct Report {
    pub mode: Mode,
    /// Connections accepted.
    pub connections: u64,
    /// Connections that ended with an error (a reset by the client, a
    /// malformed request).
    pub connection_errors: u64,
    /// Requests answered.
    pub requests: u64,
    /// Bytes the background checksummed.
    pub background_bytes: u64,
    /// From the start of serving to the end of the shutdown.
    pub elapsed: Duration,
    /// How long the shutdown took: from the signal to the last task's end.
    pub shutdown: Duration,
    /// tourbillon: the executor's statistics once every task has ended.
    pub stats: Option<ExecutorStats>,
}

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The body of `GET /`.
pub const HELLO: &str = "Hello, world!\n";

/// What the handlers and the acceptor share (one thread: `Cell`s).
struct App {
    mode: Mode,
    background_tasks: usize,
    started: Instant,
    connections: Cell<u64>,
    open: Cell<u64>,
    connection_errors: Cell<u64>,
    requests: Cell<u64>,
    background_bytes: Cell<u64>,
    /// tourbillon: the executor, for `/stats`. Weak: the executor owns the
    /// tasks that hold the `App`.
    executor: Option<Weak<Executor<Q>>>,
}

impl App {
    fn new(config: &Config, executor: Option<Weak<Executor<Q>>>) -> Self {
        App {
            mode: config.mode,
            background_tasks: config.background_tasks,
            started: Instant::now(),
            connections: Cell::new(0),
            open: Cell::new(0),
            connection_errors: Cell::new(0),
            requests: Cell::new(0),
            background_bytes: Cell::new(0),
            executor,
        }
    }

    fn stats_json(&self) -> Value {
        let executor = self
            .executor
            .as_ref()
            .and_then(Weak::upgrade)
            .map(|ex| executor_json(&ex.stats()));
        json!({
            "mode": self.mode.name(),
            "uptime_ms": self.started.elapsed().as_millis() as u64,
            "connections": { "accepted": self.connections.get(), "open": self.open.get(),
                             "errors": self.connection_errors.get() },
            "requests": self.requests.get(),
            "background": { "tasks": self.background_tasks,
                            "bytes": self.background_bytes.get() },
            "executor": executor,
        })
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// `ExecutorStats` as JSON: the executor's counters and a row per queue.
pub fn executor_json(s: &ExecutorStats) -> Value {
    json!({
        "polls": s.polls,
        "runs": s.runs,
        "turns": s.turns,
        "parks": s.parks,
        "live_tasks": s.live_tasks,
        "caught_panics": s.caught_panics,
        "queues": s.queues.iter().map(queue_json).collect::<Vec<_>>(),
    })
}

fn queue_json(q: &QueueStats) -> Value {
    let wake = &q.wake_latency;
    let wake_latency = if wake.count() == 0 {
        Value::Null
    } else {
        json!({ "count": wake.count(), "p50_us": micros(wake.p50()),
                "p99_us": micros(wake.p99()), "max_us": micros(wake.max()) })
    };
    json!({
        "name": q.name,
        "shares": q.shares,
        "spawned": q.spawned,
        "completed": q.completed,
        "cancelled": q.cancelled,
        "panicked": q.panicked,
        "polls": q.polls,
        "runs": q.runs,
        "service_us": micros(q.service),
        "runnable_tasks": q.runnable_tasks,
        "runnable": q.runnable,
        "lag_us": q.lag_ns as f64 / 1e3,
        "stalls": q.stalls,
        "wake_latency": wake_latency,
    })
}

fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

async fn handle(app: Rc<App>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    app.requests.set(app.requests.get() + 1);
    let get = matches!(*req.method(), Method::GET | Method::HEAD);
    let text = "text/plain; charset=utf-8";
    Ok(match req.uri().path() {
        "/" if get => respond(StatusCode::OK, text, Bytes::from_static(HELLO.as_bytes())),
        "/stats" if get => {
            let mut body = serde_json::to_vec_pretty(&app.stats_json()).expect("JSON of numbers");
            body.push(b'\n');
            respond(StatusCode::OK, "application/json", body.into())
        }
        "/" | "/stats" => {
            let mut r = respond(
                StatusCode::METHOD_NOT_ALLOWED,
                text,
                Bytes::from_static(b"method not allowed\n"),
            );
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            r
        }
        _ => respond(
            StatusCode::NOT_FOUND,
            text,
            Bytes::from_static(b"not found\n"),
        ),
    })
}

/// Completes once the server is told to stop (or the sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Serves one connection until the client closes it or, after `stop`,
/// until hyper's graceful shutdown ends it (at once if it is idle, after
/// the response if a request is in flight).
async fn serve_connection(app: Rc<App>, stream: TcpStream, mut stop: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let handler = app.clone();
    let service = service_fn(move |req| handle(handler.clone(), req));
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(stream), service);
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if result.is_err() {
        app.connection_errors.set(app.connection_errors.get() + 1);
    }
    app.open.set(app.open.get() - 1);
}

/// The connection tasks, on tourbillon or on tokio.
trait Connections {
    fn spawn(&mut self, conn: impl Future<Output = ()> + 'static);
    fn is_empty(&self) -> bool;
    /// Waits for a connection task to end; false when none is left.
    async fn join_next(&mut self) -> bool;
}

impl Connections for JoinSet<()> {
    fn spawn(&mut self, conn: impl Future<Output = ()> + 'static) {
        // Onto the current task's queue: `Http`.
        JoinSet::spawn(self, conn);
    }
    fn is_empty(&self) -> bool {
        JoinSet::is_empty(self)
    }
    async fn join_next(&mut self) -> bool {
        match JoinSet::join_next(self).await {
            Some(Ok(())) => true,
            Some(Err(e)) => {
                eprintln!("http_server: a connection task failed: {e}");
                true
            }
            None => false,
        }
    }
}

impl Connections for tokio::task::JoinSet<()> {
    fn spawn(&mut self, conn: impl Future<Output = ()> + 'static) {
        self.spawn_local(conn);
    }
    fn is_empty(&self) -> bool {
        tokio::task::JoinSet::is_empty(self)
    }
    async fn join_next(&mut self) -> bool {
        match tokio::task::JoinSet::join_next(self).await {
            Some(Ok(())) => true,
            Some(Err(e)) => {
                eprintln!("http_server: a connection task failed: {e}");
                true
            }
            None => false,
        }
    }
}

/// Accepts connections until `stop`, each served by a task of `conns`
/// (reaped as they end); then waits for every connection to end.
async fn accept_loop(
    listener: std::net::TcpListener,
    app: Rc<App>,
    mut stop: watch::Receiver<bool>,
    mut conns: impl Connections,
) -> std::io::Result<()> {
    let listener = TcpListener::from_std(listener)?;
    let conn_stop = stop.clone();
    loop {
        tokio::select! {
            biased;
            () = stopped(&mut stop) => break,
            _ = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    app.connections.set(app.connections.get() + 1);
                    app.open.set(app.open.get() + 1);
                    conns.spawn(serve_connection(app.clone(), stream, conn_stop.clone()));
                }
                Err(e) => {
                    // Out of file descriptors, say: back off, do not spin.
                    eprintln!("http_server: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
    drop(listener);
    while conns.join_next().await {}
    Ok(())
}

/// Adler-32 (RFC 1950) of `data`, continuing from `adler` (1 to start).
pub fn adler32(adler: u32, data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    // The most bytes before `b` could overflow a u32 (zlib's NMAX).
    const NMAX: usize = 5552;
    let (mut a, mut b) = (adler & 0xffff, adler >> 16);
    for block in data.chunks(NMAX) {
        for &byte in block {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// A background task: checksums its buffer `chunk` bytes at a time, calling
/// `yield_point` between chunks, until `stop`; at least one chunk. Returns
/// the bytes it checksummed.
async fn background<Y: Future<Output = ()>>(
    app: Rc<App>,
    seed: u64,
    chunk: usize,
    buffer: usize,
    stop: watch::Receiver<bool>,
    yield_point: impl Fn() -> Y,
) -> u64 {
    // xorshift64: data that no compiler folds away.
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let data: Vec<u8> = (0..buffer.max(chunk))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let (mut done, mut sum) = (0u64, 1u32);
    for window in data.chunks_exact(chunk).cycle() {
        sum = adler32(sum, black_box(window));
        done += chunk as u64;
        app.background_bytes
            .set(app.background_bytes.get() + chunk as u64);
        if *stop.borrow() {
            break;
        }
        yield_point().await;
    }
    black_box(sum);
    done
}

/// Serves `listener` until `shutdown` completes, then shuts down gracefully
/// and returns what it served. Builds its own tokio `current_thread`
/// runtime: call it on a thread of its own.
pub fn serve(
    listener: std::net::TcpListener,
    config: &Config,
    shutdown: impl Future<Output = ()>,
) -> Result<Report, Error> {
    if config.chunk_bytes == 0 {
        return Err("chunk_bytes must be at least 1".into());
    }
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match config.mode {
        Mode::Tourbillon => serve_tourbillon(&rt, listener, config, shutdown),
        Mode::PlainTokio => serve_plain_tokio(&rt, listener, config, shutdown),
    }
}

fn serve_tourbillon(
    rt: &tokio::runtime::Runtime,
    listener: std::net::TcpListener,
    config: &Config,
    shutdown: impl Future<Output = ()>,
) -> Result<Report, Error> {
    let mut http = QueueSpec::new(config.http_shares);
    if let Some(d) = config.latency {
        http = http.latency(d);
    }
    let ex = Rc::new(
        Builder::new()
            .queue_with(Q::Http, http)
            .queue(Q::Background, config.background_shares)
            .latency_histograms(config.wake_histograms)
            .build()?,
    );
    let app = Rc::new(App::new(config, Some(Rc::downgrade(&ex))));
    let (stop_tx, stop) = watch::channel(false);
    let (bytes, shutdown_took) = rt.block_on(ex.run_until(async {
        let acceptor = ex.task(Q::Http).name("acceptor").spawn(accept_loop(
            listener,
            app.clone(),
            stop.clone(),
            JoinSet::new(),
        ))?;
        let mut workers = Vec::new();
        for i in 0..config.background_tasks {
            let work = background(
                app.clone(),
                i as u64 + 1,
                config.chunk_bytes,
                config.buffer_bytes,
                stop.clone(),
                yield_maybe,
            );
            workers.push(ex.task(Q::Background).name("checksum").spawn(work)?);
        }
        shutdown.await;
        let since = Instant::now();
        stop_tx.send_replace(true);
        acceptor.await??;
        let mut bytes = 0;
        for w in workers {
            bytes += w.await?;
        }
        Ok::<_, Error>((bytes, since.elapsed()))
    }))?;
    Ok(Report {
        stats: Some(ex.stats()),
        ..report(&app, bytes, shutdown_took)
    })
}

fn serve_plain_tokio(
    rt: &tokio::runtime::Runtime,
    listener: std::net::TcpListener,
    config: &Config,
    shutdown: impl Future<Output = ()>,
) -> Result<Report, Error> {
    let app = Rc::new(App::new(config, None));
    let (stop_tx, stop) = watch::channel(false);
    let local = tokio::task::LocalSet::new();
    let (bytes, shutdown_took) = local.block_on(rt, async {
        let acceptor = tokio::task::spawn_local(accept_loop(
            listener,
            app.clone(),
            stop.clone(),
            tokio::task::JoinSet::new(),
        ));
        let workers: Vec<_> = (0..config.background_tasks)
            .map(|i| {
                tokio::task::spawn_local(background(
                    app.clone(),
                    i as u64 + 1,
                    config.chunk_bytes,
                    config.buffer_bytes,
                    stop.clone(),
                    tokio::task::yield_now,
                ))
            })
            .collect();
        shutdown.await;
        let since = Instant::now();
        stop_tx.send_replace(true);
        acceptor.await??;
        let mut bytes = 0;
        for w in workers {
            bytes += w.await?;
        }
        Ok::<_, Error>((bytes, since.elapsed()))
    })?;
    Ok(report(&app, bytes, shutdown_took))
}

fn report(app: &App, background_bytes: u64, shutdown: Duration) -> Report {
    debug_assert_eq!(background_bytes, app.background_bytes.get());
    Report {
        mode: app.mode,
        connections: app.connections.get(),
        connection_errors: app.connection_errors.get(),
        requests: app.requests.get(),
        background_bytes,
        elapsed: app.started.elapsed(),
        shutdown,
        stats: None,
    }
}

const HELP: &str = "\
http_server: an HTTP/1.1 server on hyper with CPU-bound background work on
the same thread; tourbillon (queues Http and Background) nested in tokio, or
plain tokio tasks (--plain-tokio). Serves until SIGINT or SIGTERM.

USAGE:
    cargo run --release -p tourbillon-hyper --example http_server [-- OPTIONS]

OPTIONS:
    --port P            port on 127.0.0.1 (default 8080; 0: any free port)
    --background N      background tasks checksumming a buffer (default 0)
    --chunk-kib K       KiB checksummed between two yields (default 16)
    --buffer-kib K      each background task's buffer (default 256)
    --shares FG:BG      shares of the Http and Background queues (default 99:1)
    --latency-us US     QueueSpec::latency of Http, 0 for none (default 50)
    --wake-histograms   wake-to-first-poll histograms in /stats
    --plain-tokio       plain tokio tasks on a LocalSet instead of tourbillon
    -h, --help          this text

ROUTES:
    GET /        a small text body
    GET /stats   the executor's statistics as JSON
";

fn fail(msg: &str) -> ! {
    eprintln!("http_server: {msg}\n\n{HELP}");
    std::process::exit(2);
}

fn options() -> (u16, Config) {
    let mut port = 8080u16;
    let mut c = Config::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> String {
            args.next()
                .unwrap_or_else(|| fail(&format!("{name} needs a value")))
        };
        fn number<T: std::str::FromStr>(name: &str, v: &str) -> T {
            v.parse()
                .unwrap_or_else(|_| fail(&format!("{name}: not a number: {v:?}")))
        }
        match a.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            "--port" => port = number("--port", &value("--port")),
            "--background" => c.background_tasks = number("--background", &value("--background")),
            "--chunk-kib" => {
                c.chunk_bytes = number::<usize>("--chunk-kib", &value("--chunk-kib")) * 1024
            }
            "--buffer-kib" => {
                c.buffer_bytes = number::<usize>("--buffer-kib", &value("--buffer-kib")) * 1024
            }
            "--shares" => {
                let v = value("--shares");
                let (fg, bg) = v
                    .split_once(':')
                    .unwrap_or_else(|| fail(&format!("--shares: not FG:BG: {v:?}")));
                c.http_shares = number("--shares", fg);
                c.background_shares = number("--shares", bg);
            }
            "--latency-us" => {
                let us: u64 = number("--latency-us", &value("--latency-us"));
                c.latency = (us > 0).then(|| Duration::from_micros(us));
            }
            "--wake-histograms" => c.wake_histograms = true,
            "--plain-tokio" => c.mode = Mode::PlainTokio,
            other => fail(&format!("unknown argument {other:?}")),
        }
    }
    if c.chunk_bytes == 0 {
        fail("--chunk-kib must be at least 1");
    }
    (port, c)
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn signalled() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.expect("a SIGINT handler"),
        _ = term.recv() => {}
    }
}

fn main() {
    let (port, config) = options();
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))
        .unwrap_or_else(|e| fail(&format!("bind 127.0.0.1:{port}: {e}")));
    let addr = listener.local_addr().expect("a bound address");
    let setup = match config.mode {
        Mode::Tourbillon => format!(
            "tourbillon, shares Http {} : Background {}, latency {}",
            config.http_shares,
            config.background_shares,
            config
                .latency
                .map_or("none".to_string(), |d| format!("{} us", d.as_micros())),
        ),
        Mode::PlainTokio => "plain tokio (LocalSet)".to_string(),
    };
    println!(
        "http_server: listening on http://{addr} ({setup}; {} background tasks, {} KiB chunks)",
        config.background_tasks,
        config.chunk_bytes / 1024
    );
    let r = match serve(listener, &config, signalled()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("http_server: {e}");
            std::process::exit(1);
        }
    };
    let secs = r.elapsed.as_secs_f64();
    println!(
        "http_server: {} ({}) served {} requests on {} connections ({} ended with an error) \
         in {secs:.1} s; shutdown took {:.1} ms",
        r.mode.name(),
        addr,
        r.requests,
        r.connections,
        r.connection_errors,
        r.shutdown.as_secs_f64() * 1e3,
    );
    let mib = r.background_bytes as f64 / (1024.0 * 1024.0);
    println!(
        "background: {mib:.1} MiB checksummed, {:.1} MiB/s",
        mib / secs.max(1e-9)
    );
    if let Some(stats) = &r.stats {
        print!("{stats}");
    }
}
