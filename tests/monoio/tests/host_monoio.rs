//! The executor nested in monoio, a thread-per-core runtime on io_uring
//! (its `IoUringDriver` only, no epoll fallback):
//! `rt.block_on(ex.run_until(fut))`. Tasks on two queues sleep on monoio's
//! timer, talk over loopback TCP with monoio's `TcpListener` and
//! `TcpStream` (completion-based, owned buffers), and are woken from
//! another thread (monoio's `sync` feature, which the dev-dependency
//! enables, gives its `block_on` a waker that works from any thread).
//!
//! Where io_uring is not allowed (ENOSYS: an old kernel or
//! `kernel.io_uring_disabled = 2`; EPERM: a seccomp filter such as Docker's
//! default one, or `kernel.io_uring_disabled = 1` outside `io_uring_group`)
//! the runtime cannot be built: each test then says so on stderr (past the
//! harness's capture) and passes without running.
//!
//! Timing is never asserted beyond what a timer promises (it does not fire
//! before its deadline), nor the order of sleepers (see
//! tests/host_async_io.rs at the repository root).

#[path = "../../hosted/mod.rs"]
mod hosted;

use std::cell::RefCell;
use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use hosted::{
    assert_all_slept, assert_echoed, echo_over_loopback, executor, message, MESSAGES, Q, SLEEPERS,
};
use monoio::io::{AsyncReadRent, AsyncReadRentExt, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};
use monoio::time::{sleep, sleep_until, Instant};
use monoio::{IoUringDriver, RuntimeBuilder};
use tourbillon::task::yield_now;
use tourbillon::Executor;

/// Runs `fut` in `ex` hosted by a monoio runtime on io_uring with its
/// timer, failing the test (instead of hanging it) if it has not completed
/// after 30 s. `None` when io_uring is not allowed here.
fn host<T>(ex: &Executor<Q>, fut: impl Future<Output = T>) -> Option<T> {
    let mut rt = match RuntimeBuilder::<IoUringDriver>::new()
        .enable_timer()
        .build()
    {
        Ok(rt) => rt,
        Err(e) if io_uring_refused(&e) => {
            // Straight to stderr, past the test harness's capture, so that
            // the skip shows in a plain `cargo test`.
            let _ = writeln!(
                std::io::stderr(),
                "host_monoio: skipped: io_uring is not allowed here ({e}), so monoio cannot run"
            );
            return None;
        }
        Err(e) => panic!("monoio's io_uring runtime: {e}"),
    };
    Some(rt.block_on(ex.run_until(async {
        match monoio::time::timeout(Duration::from_secs(30), fut).await {
            Ok(out) => out,
            Err(_) => panic!("not done after 30 s: a lost wake-up?"),
        }
    })))
}

/// Whether setting up io_uring failed with EPERM (1) or ENOSYS (38), the
/// errors that mean it is not allowed here.
fn io_uring_refused(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(1 | 38))
}

// ---------------------------------------------------------------- timers

/// Tasks on two queues sleep on monoio's timer until distinct deadlines
/// measured from one instant: each completes, and none before its deadline.
#[test]
fn timers_on_two_queues() {
    let ex = executor();
    let done: Rc<RefCell<Vec<&'static str>>> = Rc::default();
    let Some(sum) = host(&ex, async {
        let start = Instant::now();
        let handles: Vec<_> = SLEEPERS
            .iter()
            .map(|&(name, q, ms)| {
                let done = done.clone();
                ex.spawn(q, async move {
                    let deadline = start + Duration::from_millis(ms);
                    sleep_until(deadline).await;
                    assert!(Instant::now() >= deadline, "{name} woke early");
                    done.borrow_mut().push(name);
                    ms
                })
                .unwrap()
            })
            .collect();
        // The main future is not a task, but it sleeps on the host's timer
        // all the same.
        sleep(Duration::from_millis(2)).await;
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    }) else {
        return;
    };
    assert_all_slept(&ex, sum, &done.borrow());
}

// ---------------------------------------------------------------- TCP echo

/// Echoes every byte of one connection until the peer closes it. monoio's
/// I/O takes the buffer and gives it back with the result.
async fn echo(mut stream: TcpStream) -> usize {
    // Initialised (not only reserved) so that the bytes the kernel writes
    // are defined for valgrind too.
    let mut buf = vec![0u8; 256];
    let mut total = 0;
    loop {
        let (res, back) = stream.read(buf).await;
        let n = res.unwrap();
        if n == 0 {
            return total;
        }
        let (res, mut back) = stream.write_all(back).await;
        assert_eq!(res.unwrap(), n);
        total += n;
        back.resize(256, 0);
        buf = back;
    }
}

/// Sends `MESSAGES` messages and checks each echo; returns the bytes sent.
/// Sleeps on a timer and yields between some of them.
async fn client(addr: SocketAddr, id: usize) -> usize {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut sent = 0;
    for m in 0..MESSAGES {
        let msg = message(id, m).into_bytes();
        let len = msg.len();
        let (res, msg) = stream.write_all(msg).await;
        assert_eq!(res.unwrap(), len);
        let (res, back) = stream.read_exact(vec![0u8; len]).await;
        assert_eq!(res.unwrap(), len);
        assert_eq!(back, msg, "client {id} message {m}");
        sent += len;
        match m % 5 {
            2 => sleep(Duration::from_millis(1)).await,
            4 => yield_now().await,
            _ => (),
        }
    }
    sent
}

/// A tourbillon task runs a monoio TCP echo server on loopback, with a
/// task per connection; other tourbillon tasks, on another queue, are its
/// clients ([`echo_over_loopback`]).
#[test]
fn tcp_echo_over_loopback() {
    let ex = executor();
    let Some(out) = host(&ex, async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = async move || listener.accept().await.unwrap().0;
        echo_over_loopback(&ex, accept, echo, |id| client(addr, id)).await
    }) else {
        return;
    };
    assert_echoed(&ex, out);
}

// ------------------------------------------------------ wakes from threads

/// A task spawned from another thread with a `RemoteSpawner` while the
/// executor is hosted by monoio, whose thread waits in io_uring meanwhile:
/// the spawn wakes the host from the other thread, and so does the channel
/// that then wakes the task (monoio's timer futures are not `Send`, so the
/// remote task itself waits on the channel and the main future sleeps on
/// the timer). The join handle comes back over a channel too.
#[test]
fn remote_spawn_reaches_the_hosted_executor() {
    let ex = executor();
    let remote = ex.remote_spawner();
    let (tx, rx) = futures::channel::oneshot::channel();
    let (value_tx, value_rx) = futures::channel::oneshot::channel::<u32>();
    let spawner = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2));
        let handle = remote
            .spawn(Q::Bg, async move { value_rx.await.unwrap() })
            .unwrap();
        // The receivers are gone if the runtime could not be built.
        let _ = tx.send(handle);
        std::thread::sleep(Duration::from_millis(2));
        let _ = value_tx.send(21);
    });
    let out = host(&ex, async {
        let handle = rx.await.unwrap();
        sleep(Duration::from_millis(1)).await;
        handle.await.unwrap() * 2
    });
    spawner.join().unwrap();
    let Some(out) = out else {
        return;
    };
    assert_eq!(out, 42);
    let st = ex.stats();
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.queues[1].completed, 1);
}
