//! The server: a Redis-protocol (RESP2) key-value store with one shard
//! per core of a `tourbillon::pool::Pool` hosted by tokio ([`Server`]), or
//! the same code on one tokio `current_thread` runtime without tourbillon
//! ([`run_plain_tokio`], for comparison).
//!
//! * resp.rs: the protocol (an incremental request parser, the reply
//!   encoders, the limits);
//! * commands.rs: what each command does, and how a connection's batch
//!   of requests is split between the shards and answered in order;
//! * store.rs: a shard, a hash map in a thread-local of its core: no
//!   locks, and nothing `Send` about it.
//!
//! What each core runs:
//!
//! * Two accept loops. One on the shared port: every core binds it with
//!   `SO_REUSEPORT`, so the kernel spreads incoming connections over the
//!   cores (by a hash of the connection's addresses) and no core hands
//!   sockets to another. One on the core's own port, for shard-aware
//!   clients, which send there only the keys of this core's shard (as the
//!   shard-aware drivers of ScyllaDB or Seastar's memcached do). Both
//!   kinds of connection are served alike: a request for another shard's
//!   key is forwarded whichever port it came in on.
//! * A task per connection, which reads whatever requests have arrived,
//!   answers them (commands.rs) and writes all the replies in one write.
//! * A background task that runs snapshot passes over the core's shard
//!   (store.rs): every [`Snapshot::Every`], back to back
//!   ([`Snapshot::Busy`]), or none ([`Snapshot::Off`]).
//!
//! Each core's executor has three queues and shares its thread between
//! them by their shares:
//!
//! * "fg" (32, latency [`FG_LATENCY`]): the accept loops and the
//!   connections;
//! * "fwd" (128): the operations forwarded from other cores. They are
//!   short, and a connection of another core waits for their results, so
//!   they get a queue of their own with more shares: they run before this
//!   core's next reads instead of after them, which shortens the round
//!   trip between the cores;
//! * "bg" (1): the snapshot passes, so a long pass cannot hold the
//!   requests up: when the requests keep the core busy, the passes get
//!   1/33 of it (3%); when they leave it idle, the passes use the rest.
//!
//! Stopping ([`Server::shutdown`]): the accept loops stop accepting and
//! close their listeners; each connection reads what has already arrived
//! on its socket, answers every complete request of it (forwarding to
//! other cores as usual: the pool still runs), writes the replies and
//! closes (a request not complete by then is dropped unanswered); each
//! accept loop waits up to the grace period for its connections, and
//! cancels those left (one whose client does not read its replies); the
//! background loops end after their current pass; then the pool shuts
//! down, and its report says whether every core drained.

pub mod commands;
pub mod resp;
pub mod store;

use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::mpsc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tourbillon::pool::{current_core, Host, Placement, Pool, PoolHandle, ShutdownReport};
use tourbillon::QueueSpec;

use commands::{Next, Session};
use store::{Op, OpResult};

/// The queues of every core.
pub const FG: &str = "fg";
pub const FWD: &str = "fwd";
pub const BG: &str = "bg";

/// How soon the readiness of a waiting connection is seen while the
/// background queue runs ("fg"'s `QueueSpec::latency`): the executor
/// returns to tokio's reactor at least this often then, instead of every
/// 200 us (the builder's host-yield interval).
pub const FG_LATENCY: Duration = Duration::from_micros(20);

/// The background snapshot passes of each core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Snapshot {
    /// None.
    Off,
    /// One pass, then this pause, and again.
    Every(Duration),
    /// Passes back to back: the background queue always has work.
    Busy,
}

impl std::fmt::Display for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Snapshot::Off => f.write_str("off"),
            Snapshot::Every(pause) => write!(f, "every {} ms", pause.as_millis()),
            Snapshot::Busy => f.write_str("busy"),
        }
    }
}

/// How to start a [`Server`].
#[derive(Clone, Debug)]
pub struct Config {
    pub cores: usize,
    pub placement: Placement,
    /// The shared port on 127.0.0.1 (0: a free port).
    pub port: u16,
    pub snapshot: Snapshot,
    /// How long a stop waits for the connections to answer what they
    /// have received and close.
    pub grace: Duration,
}

/// Per-core counters of the server (the shard keeps its own, store.rs).
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnStats {
    pub accepted: u64,
    /// Requests read on this core.
    pub requests: u64,
}

thread_local! {
    static CONN_STATS: std::cell::Cell<ConnStats> = const {
        std::cell::Cell::new(ConnStats { accepted: 0, requests: 0 })
    };
}

fn count(f: impl FnOnce(&mut ConnStats)) {
    CONN_STATS.with(|c| {
        let mut s = c.get();
        f(&mut s);
        c.set(s);
    });
}

/// This core's server counters.
pub fn conn_stats() -> ConnStats {
    CONN_STATS.with(|c| c.get())
}

/// Where a connection's shards are: the cores of a pool, or this thread
/// alone (plain tokio, one shard).
#[derive(Clone)]
pub enum Shards {
    Pool(PoolHandle<&'static str>),
    Single,
}

impl Shards {
    /// The number of shards.
    pub fn cores(&self) -> usize {
        match self {
            Shards::Pool(p) => p.cores(),
            Shards::Single => 1,
        }
    }

    /// The shard of the calling thread.
    pub fn here(&self) -> usize {
        match self {
            Shards::Pool(_) => current_core().expect("the server runs on pool cores"),
            Shards::Single => 0,
        }
    }

    /// Applies `ops` on `shard`'s core, in order (`None`: the core did not
    /// take them, as when the pool has shut down).
    pub async fn forward(&self, shard: usize, ops: Vec<Op>) -> Option<Vec<OpResult>> {
        match self {
            // The closure is `Send` (it owns plain data) and runs on the
            // shard's core, where it builds a future that reads that
            // core's thread-local shard.
            Shards::Pool(p) => p
                .submit_to(
                    shard,
                    FWD,
                    move || async move { store::apply_batch(ops, true) },
                )
                .await
                .ok(),
            Shards::Single => None,
        }
    }
}

/// The connection tasks of an accept loop.
enum ConnSet {
    Pool(tourbillon::task::JoinSet<()>),
    Plain(tokio::task::JoinSet<()>),
}

impl ConnSet {
    fn for_shards(shards: &Shards) -> ConnSet {
        match shards {
            Shards::Pool(_) => ConnSet::Pool(tourbillon::task::JoinSet::new()),
            Shards::Single => ConnSet::Plain(tokio::task::JoinSet::new()),
        }
    }

    /// Spawns a connection task on the calling thread (on a pool core,
    /// onto the calling task's queue: "fg").
    fn spawn(&mut self, task: impl Future<Output = ()> + 'static) {
        match self {
            ConnSet::Pool(set) => drop(set.spawn(task)),
            ConnSet::Plain(set) => drop(set.spawn_local(task)),
        }
    }

    fn len(&self) -> usize {
        match self {
            ConnSet::Pool(s) => s.len(),
            ConnSet::Plain(s) => s.len(),
        }
    }

    /// Waits for a connection task to end; `None` if there is none.
    async fn join_next(&mut self) -> Option<()> {
        match self {
            ConnSet::Pool(s) => s.join_next().await.map(drop),
            ConnSet::Plain(s) => s.join_next().await.map(drop),
        }
    }
}

/// What an accept loop did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AcceptReport {
    pub accepted: u64,
    /// Connections still open at the stop, which then answered what they
    /// had received and closed within the grace period.
    pub closed_at_stop: u64,
    /// Connections still open when the grace period ended, cancelled.
    pub cancelled: u64,
}

/// A listener on 127.0.0.1:`port` (0: a free port chosen by the kernel);
/// with `shared`, one that other sockets of this process may bind too
/// (`SO_REUSEPORT`). Called on the thread whose tokio reactor serves it.
pub fn listen(port: u16, shared: bool) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseport(shared)?;
    socket.set_reuseaddr(true)?;
    socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    socket.listen(1024)
}

/// Accepts connections until `stop` changes (or its sender is dropped),
/// each served by a task of its own on the calling core's "fg" queue; then
/// closes the listener, waits up to `grace` for the connections to end
/// (each answers what it has received, as `stop` tells it), and cancels
/// those left.
pub async fn accept_loop(
    shards: Shards,
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
) -> AcceptReport {
    let mut report = AcceptReport::default();
    let mut conns = ConnSet::for_shards(&shards);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            Some(()) = conns.join_next(), if conns.len() > 0 => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    count(|s| s.accepted += 1);
                    report.accepted += 1;
                    let (shards2, stop) = (shards.clone(), stop.clone());
                    conns.spawn(async move {
                        if let Err(e) = serve(shards2, stream, stop).await {
                            eprintln!("connection: {e}");
                        }
                    });
                }
                Err(e) => eprintln!("accept: {e}"),
            },
        }
    }
    drop(listener);
    let open = conns.len() as u64;
    let drained =
        tokio::time::timeout(grace, async { while conns.join_next().await.is_some() {} }).await;
    report.cancelled = if drained.is_ok() {
        0
    } else {
        conns.len() as u64
    };
    report.closed_at_stop = open - report.cancelled;
    // Dropping the set cancels the connections left.
    report
}

/// Serves one connection until the client closes its side, sends `QUIT`
/// or a malformed request, or `stop` changes.
async fn serve(
    shards: Shards,
    mut stream: TcpStream,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut input = Vec::with_capacity(16 * 1024);
    let mut out = Vec::with_capacity(16 * 1024);
    let mut session = Session::new();
    // One future for the whole connection, polled once: it registers the
    // task's waker with the channel, and the change wakes the task. After
    // that a stop is seen by a second receiver's version check, an atomic
    // load, instead of a poll of the channel's future (which locks its
    // list of waiters) before every read.
    let probe = stop.clone();
    let changed = stop.changed();
    tokio::pin!(changed);
    let mut stopped = StopSignal::new(changed, &probe);
    let mut stopping = false;
    loop {
        if input.capacity() - input.len() < 4096 {
            input.reserve(16 * 1024);
        }
        tokio::select! {
            // The stop first: a client that never stops sending is still
            // stopped.
            biased;
            _ = &mut stopped => {
                // What has arrived by now is answered; nothing more is read.
                stopping = true;
                drain_received(&stream, &mut input)?;
            }
            read = tokio::io::AsyncReadExt::read_buf(&mut stream, &mut input) => {
                if read? == 0 {
                    return Ok(());
                }
            }
        }
        let (used, requests, next) = session.run(&shards, &input, &mut out).await;
        count(|s| s.requests += requests as u64);
        input.drain(..used);
        if !out.is_empty() {
            stream.write_all(&out).await?;
            out.clear();
        }
        if next == Next::Close || stopping {
            return stream.shutdown().await;
        }
    }
}

/// Ready once `probe`'s channel has changed (or its sender is gone).
/// The first poll polls `changed`, a `changed()` future of a receiver at
/// the same version as `probe`: that registers the polling task with the
/// channel, which wakes it at the change. Later polls only compare
/// `probe`'s version with the channel's. The task that polls it must stay
/// the same (the registered waker is the first poll's).
struct StopSignal<'a, F> {
    changed: Pin<&'a mut F>,
    probe: &'a watch::Receiver<bool>,
    registered: bool,
}

impl<'a, F> StopSignal<'a, F> {
    fn new(changed: Pin<&'a mut F>, probe: &'a watch::Receiver<bool>) -> Self {
        StopSignal {
            changed,
            probe,
            registered: false,
        }
    }
}

impl<F: Future> Future for StopSignal<'_, F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.registered {
            if self.changed.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            self.registered = true;
        }
        if self.probe.has_changed().unwrap_or(true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Appends to `input` every byte the kernel has received on `stream` and
/// not yet given to it. A read on a duplicate of the socket's descriptor
/// (the socket is non-blocking), not tokio's `try_read`: that one reads
/// only once the reactor has seen the socket readable, and the stop may
/// come before the reactor's next poll.
fn drain_received(stream: &TcpStream, input: &mut Vec<u8>) -> io::Result<()> {
    use std::io::Read;
    use std::os::fd::AsFd;
    let mut raw = std::net::TcpStream::from(stream.as_fd().try_clone_to_owned()?);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match raw.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The background work of one core: snapshot passes over its shard as
/// `snapshot` says, until `stop` changes.
pub async fn background_loop(snapshot: Snapshot, mut stop: watch::Receiver<bool>) {
    let pause = match snapshot {
        Snapshot::Off => return,
        Snapshot::Every(pause) => pause,
        Snapshot::Busy => Duration::ZERO,
    };
    let mut buf = Vec::new();
    loop {
        store::snapshot_pass(&mut buf).await;
        if pause.is_zero() {
            if stop.has_changed().unwrap_or(true) {
                return;
            }
            // A pass over a small shard may never have yielded.
            tourbillon::task::yield_now().await;
            continue;
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// A running server on a pool (see the module doc).
pub struct Server {
    pool: Pool<&'static str>,
    stop: watch::Sender<bool>,
    /// One report per accept loop, sent when it ends.
    reports: mpsc::Receiver<AcceptReport>,
    loops: usize,
    /// The port every core accepts on, and each core's own.
    pub port: u16,
    pub own_ports: Vec<u16>,
    grace: Duration,
}

/// What [`Server::shutdown`] found.
pub struct Stopped {
    /// The accept loops' reports, summed.
    pub connections: AcceptReport,
    /// The pool's.
    pub pool: Result<ShutdownReport, tourbillon::pool::ShutdownError>,
}

impl Server {
    /// Builds the pool, binds the ports and starts each core's loops;
    /// returns once every listener accepts.
    pub fn start(cfg: &Config) -> io::Result<Server> {
        // With `TOURBILLON_TIMELINE` set, each core records its timeline
        // (main.rs writes a window of it): room for 50 ms of polls at well
        // over a million polls a second.
        let timeline = if std::env::var_os("TOURBILLON_TIMELINE").is_some() {
            200_000
        } else {
            0
        };
        // One executor per core, each on a thread of its own nested in a
        // tokio current_thread runtime (tokio sockets and timers work in
        // its tasks).
        let pool: Pool<&'static str> = Pool::builder()
            .cores(cfg.cores)
            .placement(cfg.placement.clone())
            .host(Host::Tokio)
            .executor(move |_core| {
                tourbillon::Builder::new()
                    .queue_with(FG, QueueSpec::new(32).latency(FG_LATENCY))
                    .queue(FWD, 128)
                    .queue(BG, 1)
                    .timeline(timeline)
            })
            .build()
            .map_err(io::Error::other)?;
        let (stop, stop_rx) = watch::channel(false);
        let (report_tx, reports) = mpsc::channel();
        let mut port = cfg.port;
        let mut own_ports = Vec::new();
        for core in 0..pool.cores() {
            let (shards, s, tx) = (
                Shards::Pool(pool.handle()),
                stop_rx.clone(),
                report_tx.clone(),
            );
            let grace = cfg.grace;
            // The closure runs on `core`: the listeners are created there,
            // in that core's tokio runtime, and their accept loops stay
            // there.
            let (shared, own) =
                futures::executor::block_on(pool.submit_to(core, FG, move || async move {
                    let listener = listen(port, true)?;
                    let own = listen(0, false)?;
                    let ports = (listener.local_addr()?.port(), own.local_addr()?.port());
                    for l in [listener, own] {
                        let (shards, s, tx) = (shards.clone(), s.clone(), tx.clone());
                        // Detached: the loop ends at the stop, and sends
                        // its report.
                        drop(tourbillon::spawn(async move {
                            let _ = tx.send(accept_loop(shards, l, s, grace).await);
                        }));
                    }
                    Ok::<_, io::Error>(ports)
                }))
                .map_err(io::Error::other)??;
            port = shared;
            own_ports.push(own);
            let (s, snapshot) = (stop_rx.clone(), cfg.snapshot);
            // Detached: the loop ends at the stop.
            drop(futures::executor::block_on(pool.spawn_on(
                core,
                BG,
                move || background_loop(snapshot, s),
            )));
        }
        Ok(Server {
            loops: 2 * pool.cores(),
            pool,
            stop,
            reports,
            port,
            own_ports,
            grace: cfg.grace,
        })
    }

    /// The address every core accepts on.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    pub fn pool(&self) -> &Pool<&'static str> {
        &self.pool
    }

    /// Stops the server (see the module doc) and shuts the pool down;
    /// blocks until then.
    pub fn shutdown(self) -> Stopped {
        self.stop.send_replace(true);
        let mut connections = AcceptReport::default();
        for _ in 0..self.loops {
            // Each loop ends within the grace period of the stop; `Err`:
            // every loop has ended (or was dropped) without a report.
            let Ok(r) = self.reports.recv() else { break };
            connections.accepted += r.accepted;
            connections.closed_at_stop += r.closed_at_stop;
            connections.cancelled += r.cancelled;
        }
        Stopped {
            connections,
            pool: self.pool.shutdown(self.grace),
        }
    }
}

/// The same server on the calling thread: a tokio `current_thread`
/// runtime, no tourbillon (one shard, one listener on 127.0.0.1:`port`,
/// the background passes as a plain task). Calls `ready` with the bound
/// address, serves until `until` completes (polled once before the
/// listener is bound), then stops as
/// [`Server::shutdown`] does; returns the accept loop's report.
pub fn run_plain_tokio(
    cfg: &Config,
    ready: impl FnOnce(SocketAddr),
    until: impl Future<Output = ()>,
) -> io::Result<AcceptReport> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        // A first poll of `until` before serving (it may set signal
        // handlers then).
        tokio::pin!(until);
        if futures::poll!(until.as_mut()).is_ready() {
            return Ok(AcceptReport::default());
        }
        let listener = listen(cfg.port, false)?;
        ready(listener.local_addr()?);
        let (stop, stop_rx) = watch::channel(false);
        let accept = tokio::task::spawn_local(accept_loop(
            Shards::Single,
            listener,
            stop_rx.clone(),
            cfg.grace,
        ));
        let background = tokio::task::spawn_local(background_loop(cfg.snapshot, stop_rx));
        until.await;
        stop.send_replace(true);
        let report = accept.await.map_err(io::Error::other)?;
        background.await.map_err(io::Error::other)?;
        Ok(report)
    })
}
