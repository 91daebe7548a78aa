//! The executor nested in smol's reactor, `async-io`, with no tokio:
//! `async_io::block_on(ex.run_until(fut))`. Tasks on two queues sleep on
//! `async_io::Timer`, talk over loopback TCP with `Async<TcpListener>` and
//! `Async<TcpStream>`, and are woken from another thread.
//!
//! async-io has no paused clock, so timing is never asserted beyond what a
//! timer promises: it does not fire before its deadline. A slow run
//! (valgrind) may pass several deadlines before the sleepers are first
//! polled, so the order in which sleepers complete is not asserted either;
//! which tasks completed, their outputs and the executor's counters are.

mod hosted;

use std::cell::RefCell;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::rc::Rc;
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use futures_lite::StreamExt;
use hosted::{
    assert_all_slept, assert_echoed, echo_over_loopback, executor, message, MESSAGES, Q, SLEEPERS,
};
use tourbillon::task::yield_now;
use tourbillon::Executor;

type Log = Rc<RefCell<Vec<&'static str>>>;

/// Runs `fut` in `ex` hosted by async-io's `block_on`, failing the test
/// (instead of hanging it) if it has not completed after 30 s.
fn host<T>(ex: &Executor<Q>, fut: impl std::future::Future<Output = T>) -> T {
    async_io::block_on(ex.run_until(futures_lite::future::or(fut, async {
        Timer::after(Duration::from_secs(30)).await;
        panic!("not done after 30 s: a lost wake-up?")
    })))
}

// ---------------------------------------------------------------- timers

/// Tasks on two queues sleep on async-io timers until distinct deadlines
/// measured from one instant: each completes, and none before its deadline.
#[test]
fn timers_on_two_queues() {
    let ex = executor();
    let done: Log = Rc::default();
    let sum = host(&ex, async {
        let start = Instant::now();
        let handles: Vec<_> = SLEEPERS
            .iter()
            .map(|&(name, q, ms)| {
                let done = done.clone();
                ex.spawn(q, async move {
                    let deadline = start + Duration::from_millis(ms);
                    let fired = Timer::at(deadline).await;
                    assert!(fired >= deadline, "{name} fired before its deadline");
                    assert!(Instant::now() >= deadline, "{name} woke early");
                    done.borrow_mut().push(name);
                    ms
                })
                .unwrap()
            })
            .collect();
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_all_slept(&ex, sum, &done.borrow());
}

/// A periodic timer (`Timer::interval`) ticks in a background task while
/// a foreground task sleeps and yields: the ticks come in increasing
/// order, and the main future also sleeps on the host's timer.
#[test]
fn interval_and_sleeps() {
    let ex = executor();
    let (ticks, slept) = host(&ex, async {
        let ticker = ex
            .spawn(Q::Bg, async {
                let mut ticks = Vec::new();
                let mut interval = Timer::interval(Duration::from_millis(1));
                while ticks.len() < 5 {
                    ticks.push(interval.next().await.unwrap());
                }
                ticks
            })
            .unwrap();
        let sleeper = ex
            .spawn(Q::Fg, async {
                let mut n = 0;
                for _ in 0..3 {
                    Timer::after(Duration::from_millis(1)).await;
                    yield_now().await;
                    n += 1;
                }
                n
            })
            .unwrap();
        // The main future is not a task, but it is polled inside the host
        // all the same.
        Timer::after(Duration::from_millis(2)).await;
        (ticker.await.unwrap(), sleeper.await.unwrap())
    });
    assert_eq!(ticks.len(), 5);
    assert!(ticks.windows(2).all(|w| w[0] < w[1]), "{ticks:?}");
    assert_eq!(slept, 3);
    assert_eq!(ex.stats().live_tasks, 0);
}

// ---------------------------------------------------------------- TCP echo

/// Echoes every byte of one connection until the peer closes it.
async fn echo(mut stream: Async<TcpStream>) -> usize {
    let mut buf = [0u8; 256];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        if n == 0 {
            return total;
        }
        stream.write_all(&buf[..n]).await.unwrap();
        total += n;
    }
}

/// Sends `MESSAGES` messages and checks each echo; returns the bytes sent.
/// Sleeps on a timer and yields between some of them.
async fn client(addr: SocketAddr, id: usize) -> usize {
    let mut stream = Async::<TcpStream>::connect(addr).await.unwrap();
    let mut sent = 0;
    for m in 0..MESSAGES {
        let msg = message(id, m);
        stream.write_all(msg.as_bytes()).await.unwrap();
        let mut back = vec![0u8; msg.len()];
        stream.read_exact(&mut back).await.unwrap();
        assert_eq!(back, msg.as_bytes(), "client {id} message {m}");
        sent += msg.len();
        match m % 5 {
            2 => {
                Timer::after(Duration::from_millis(1)).await;
            }
            4 => yield_now().await,
            _ => (),
        }
    }
    sent
}

/// A tourbillon task runs an async-io TCP echo server on loopback, with a
/// task per connection; other tourbillon tasks, on another queue, are its
/// clients ([`echo_over_loopback`]).
#[test]
fn tcp_echo_over_loopback() {
    let ex = executor();
    let out = host(&ex, async {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0)).unwrap();
        let addr = listener.get_ref().local_addr().unwrap();
        let accept = async move || listener.accept().await.unwrap().0;
        echo_over_loopback(&ex, accept, echo, |id| client(addr, id)).await
    });
    assert_echoed(&ex, out);
}

// ------------------------------------------------------ wakes from threads

/// A task spawned from another thread with a `RemoteSpawner` while the
/// executor is hosted by async-io, whose thread is parked in the reactor
/// meanwhile: the spawn wakes the host from the other thread, and the task
/// uses the host's timer. The join handle comes back over a channel, whose
/// wake also crosses threads.
#[test]
fn remote_spawn_reaches_the_hosted_executor() {
    let ex = executor();
    let remote = ex.remote_spawner();
    let (tx, rx) = futures::channel::oneshot::channel();
    let spawner = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(2));
        let handle = remote
            .spawn(Q::Bg, async {
                Timer::after(Duration::from_millis(1)).await;
                21
            })
            .unwrap();
        tx.send(handle).unwrap();
    });
    let out = host(&ex, async {
        let handle = rx.await.unwrap();
        handle.await.unwrap() * 2
    });
    spawner.join().unwrap();
    assert_eq!(out, 42);
    let st = ex.stats();
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.queues[1].completed, 1);
}
