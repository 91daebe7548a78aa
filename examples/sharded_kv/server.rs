//! The server side: what runs on each core of the pool.
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
//!   answers them and writes all the answers in one write. A request
//!   whose key belongs to another core's shard is forwarded there with
//!   `pool.submit_to`: the requests of one read are grouped per shard, so a
//!   foreign shard costs one hop per read, not one per request.
//! * A background task that runs a snapshot pass over the core's shard
//!   every [`SNAPSHOT_EVERY`] (store.rs).
//!
//! Each core's executor has three queues and shares its thread between
//! them by their shares:
//!
//! * "fg" (8): the accept loop and the connections;
//! * "fwd" (32): the requests forwarded from other cores. They are short,
//!   and a connection of another core waits for their answers, so they
//!   get a queue of their own with more shares: they run before this
//!   core's next reads instead of after them, which shortens the round
//!   trip between the cores;
//! * "bg" (1): the snapshot passes, so a long pass cannot hold the
//!   requests up.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use futures::future::join_all;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tourbillon::pool::{current_core, PoolHandle};

use crate::protocol::{complete_lines, parse_request, Request, Response, MAX_LINE};
use crate::store;

/// The queues of every core.
pub const FG: &str = "fg";
pub const FWD: &str = "fwd";
pub const BG: &str = "bg";

/// The pause between two background passes of a core.
pub const SNAPSHOT_EVERY: Duration = Duration::from_millis(50);

/// Per-core counters of the server (the shard keeps its own, store.rs).
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnStats {
    pub accepted: u64,
    /// Requests read on this core, and those of them sent to another core.
    pub requests: u64,
    pub forwarded_out: u64,
}

thread_local! {
    static CONN_STATS: std::cell::Cell<ConnStats> = const {
        std::cell::Cell::new(ConnStats { accepted: 0, requests: 0, forwarded_out: 0 })
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

/// A listener on 127.0.0.1:`port` (0: a free port chosen by the kernel);
/// with `shared`, one that other sockets of this process may bind too
/// (`SO_REUSEPORT`). Called on a pool core: the socket registers with that
/// core's tokio reactor.
pub fn listen(port: u16, shared: bool) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseport(shared)?;
    socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))?;
    socket.listen(1024)
}

/// Accepts connections until `stop` changes, each served by a task of its
/// own on this core's "fg" queue (`tourbillon::spawn` spawns on the queue
/// of the calling task).
pub async fn accept_loop(
    pool: PoolHandle<&'static str>,
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    count(|s| s.accepted += 1);
                    let pool = pool.clone();
                    // Detached: the task ends when its connection does.
                    drop(tourbillon::spawn(async move {
                        if let Err(e) = serve(pool, stream).await {
                            eprintln!("connection: {e}");
                        }
                    }));
                }
                Err(e) => eprintln!("accept: {e}"),
            },
        }
    }
}

/// Serves one connection until the client closes its side.
async fn serve(pool: PoolHandle<&'static str>, mut stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut inbuf = Vec::with_capacity(16 * 1024);
    let mut outbuf = Vec::with_capacity(16 * 1024);
    loop {
        if stream.read_buf(&mut inbuf).await? == 0 {
            return Ok(());
        }
        let (lines, used) = complete_lines(&inbuf);
        // A request that does not parse gets its ERR in its place.
        let parsed: Vec<Result<Request, &'static str>> =
            lines.into_iter().map(parse_request).collect();
        inbuf.drain(..used);
        for response in execute(&pool, parsed).await {
            response.encode(&mut outbuf);
        }
        if inbuf.len() > MAX_LINE {
            Response::Err("line too long").encode(&mut outbuf);
        }
        stream.write_all(&outbuf).await?;
        outbuf.clear();
        if inbuf.len() > MAX_LINE {
            return Ok(());
        }
    }
}

/// Answers a batch of requests in order: those of this core's shard here,
/// the others by one `submit_to` per foreign shard, all in flight at once.
async fn execute(
    pool: &PoolHandle<&'static str>,
    batch: Vec<Result<Request, &'static str>>,
) -> Vec<Response> {
    let cores = pool.cores();
    let here = current_core().expect("the server runs on pool cores");
    let mut responses: Vec<Option<Response>> = Vec::with_capacity(batch.len());
    // Per shard: the requests and their places in the batch.
    let mut per_shard: Vec<(Vec<Request>, Vec<usize>)> =
        (0..cores).map(|_| Default::default()).collect();
    for (i, parsed) in batch.into_iter().enumerate() {
        match parsed {
            Ok(req) => {
                let shard = store::shard_of(req.key(), cores);
                per_shard[shard].0.push(req);
                per_shard[shard].1.push(i);
                responses.push(None);
            }
            Err(msg) => responses.push(Some(Response::Err(msg))),
        }
    }
    let mut forwarded = 0;
    let mut remote = Vec::new();
    let mut places = Vec::new();
    for (shard, (requests, at)) in per_shard.into_iter().enumerate() {
        if requests.is_empty() {
            continue;
        }
        if shard == here {
            let answers = store::apply_batch(requests, false);
            for (i, a) in at.into_iter().zip(answers) {
                responses[i] = Some(a);
            }
        } else {
            forwarded += requests.len() as u64;
            // The closure is `Send` (it owns plain data) and runs on the
            // shard's core, where it builds a future that reads that
            // core's thread-local shard.
            remote.push(pool.submit_to(shard, FWD, move || async move {
                store::apply_batch(requests, true)
            }));
            places.push(at);
        }
    }
    count(|s| {
        s.requests += responses.len() as u64;
        s.forwarded_out += forwarded;
    });
    for (answers, at) in join_all(remote).await.into_iter().zip(places) {
        match answers {
            Ok(answers) => {
                for (i, a) in at.into_iter().zip(answers) {
                    responses[i] = Some(a);
                }
            }
            Err(_) => {
                for i in at {
                    responses[i] = Some(Response::Err("shard unavailable"));
                }
            }
        }
    }
    responses
        .into_iter()
        .map(|r| r.unwrap_or(Response::Err("no answer")))
        .collect()
}

/// The background work of one core: a snapshot pass over its shard every
/// [`SNAPSHOT_EVERY`], until `stop` changes.
pub async fn background_loop(mut stop: watch::Receiver<bool>) {
    let mut snapshot = Vec::new();
    loop {
        store::snapshot_pass(&mut snapshot).await;
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(SNAPSHOT_EVERY) => {}
        }
    }
}
