//! Helpers shared by the tests of the executor nested in a host runtime
//! (`tests/nested.rs`, `tests/hosts.rs`, `tests/host_async_io.rs`,
//! `tests/host_monoio.rs`; a module of each, not a test itself; each uses a
//! part of it): the executor they host, the sleepers of the timer tests,
//! and the loopback TCP echo scenario. The host's own calls (its timers, its
//! sockets, how it runs the executor) stay in each test file.
#![allow(dead_code)]

use std::future::Future;

use tourbillon::{Builder, Executor};

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Q {
    Fg,
    Bg,
}

/// Two queues: `Q::Fg` (share 3) and `Q::Bg` (share 1).
pub fn executor() -> Executor<Q> {
    Builder::new()
        .queue(Q::Fg, 3)
        .queue(Q::Bg, 1)
        .build()
        .unwrap()
}

/// tokio's `current_thread` runtime on its paused clock: time advances only
/// when the runtime has nothing to do, straight to the next timer.
pub fn tokio_rt_paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
}

// ---------------------------------------------------------------- timers

/// The sleepers of the timer tests on two queues, `(name, queue, ms)`: each
/// sleeps until `ms` after one common instant. Listed (and spawned) out of
/// deadline order.
pub const SLEEPERS: [(&str, Q, u64); 6] = [
    ("fg5", Q::Fg, 5),
    ("bg1", Q::Bg, 1),
    ("fg3", Q::Fg, 3),
    ("bg2", Q::Bg, 2),
    ("bg4", Q::Bg, 4),
    ("fg1", Q::Fg, 1),
];

/// Checks, once the host returned, that every one of [`SLEEPERS`]
/// completed, in any order: `sum` is the sum of their outputs (each its
/// `ms`), `done` the names they logged as they completed.
pub fn assert_all_slept(ex: &Executor<Q>, sum: u64, done: &[&str]) {
    assert_eq!(sum, 5 + 1 + 3 + 2 + 4 + 1);
    let mut done = done.to_vec();
    done.sort_unstable();
    assert_eq!(done, ["bg1", "bg2", "bg4", "fg1", "fg3", "fg5"]);
    let st = ex.stats();
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.queues[0].completed, 3);
    assert_eq!(st.queues[1].completed, 3);
}

// ---------------------------------------------------------------- TCP echo

/// Clients of the echo scenario.
pub const CLIENTS: usize = 4;
/// Messages each client sends.
pub const MESSAGES: usize = 20;

/// Message `m` of client `id`.
pub fn message(id: usize, m: usize) -> String {
    format!("client {id} message {m}")
}

/// The echo scenario, run by `ex` inside the host: a tourbillon task on
/// `Q::Bg` is the server; it takes `CLIENTS` connections from `accept` and
/// serves each with `echo` in a task of its own, on the server's queue.
/// `CLIENTS` tourbillon tasks on `Q::Fg` are the clients, `client(id)`.
/// Returns the bytes the clients sent and the bytes the server echoed (as
/// `client` and `echo` count them).
pub async fn echo_over_loopback<S, E, C>(
    ex: &Executor<Q>,
    mut accept: impl AsyncFnMut() -> S + 'static,
    echo: impl Fn(S) -> E + 'static,
    client: impl Fn(usize) -> C,
) -> (usize, usize)
where
    S: 'static,
    E: Future<Output = usize> + 'static,
    C: Future<Output = usize> + 'static,
{
    let server = ex
        .spawn(Q::Bg, async move {
            let mut conns = Vec::new();
            for _ in 0..CLIENTS {
                let stream = accept().await;
                // A task per connection, on the server's queue.
                conns.push(tourbillon::spawn(echo(stream)));
            }
            let mut echoed = 0;
            for c in conns {
                echoed += c.await.unwrap();
            }
            echoed
        })
        .unwrap();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| ex.spawn(Q::Fg, client(id)).unwrap())
        .collect();
    let mut sent = 0;
    for c in clients {
        sent += c.await.unwrap();
    }
    (sent, server.await.unwrap())
}

/// Checks the outcome of [`echo_over_loopback`] once the host returned:
/// every byte of every [`message`] was sent and echoed, and every task
/// completed on its queue.
pub fn assert_echoed(ex: &Executor<Q>, (sent, echoed): (usize, usize)) {
    let expected: usize = (0..CLIENTS)
        .flat_map(|id| (0..MESSAGES).map(move |m| message(id, m).len()))
        .sum();
    assert_eq!(sent, expected);
    assert_eq!(echoed, expected);
    let st = ex.stats();
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.queues[0].completed, CLIENTS as u64);
    assert_eq!(st.queues[1].completed, 1 + CLIENTS as u64);
}
