//! tourbillon hosted by smol's reactor, `async-io`, with no tokio: an echo
//! server and its clients on loopback, as tasks on two weighted queues,
//! with async-io's sockets and timers. It stops by itself once every
//! client is done (or after 10 s, if something hangs) and prints what it
//! did.
//!
//! ```text
//! cargo run --example async_io_host
//! ```

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use futures_lite::future;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use tourbillon::Builder;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Q {
    /// The clients, as the "requests" of this program.
    Clients,
    /// The server: its accept loop and a task per connection.
    Server,
}

const CLIENTS: usize = 3;
const MESSAGES: usize = 5;

/// Echoes one connection until the peer closes it; returns the bytes.
async fn echo(mut stream: Async<TcpStream>) -> std::io::Result<usize> {
    let mut buf = [0u8; 1024];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(total);
        }
        stream.write_all(&buf[..n]).await?;
        total += n;
    }
}

/// Sends `MESSAGES` lines, reads each echo back, and waits 1 ms on
/// async-io's timer between them; returns the echoes.
async fn client(addr: SocketAddr, id: usize) -> std::io::Result<Vec<String>> {
    let mut stream = Async::<TcpStream>::connect(addr).await?;
    let mut echoes = Vec::new();
    for m in 0..MESSAGES {
        let line = format!("client {id}, message {m}");
        stream.write_all(line.as_bytes()).await?;
        let mut back = vec![0u8; line.len()];
        stream.read_exact(&mut back).await?;
        echoes.push(String::from_utf8(back).expect("an echo of UTF-8"));
        Timer::after(Duration::from_millis(1)).await;
    }
    Ok(echoes)
}

fn main() -> std::io::Result<()> {
    let ex = Builder::new()
        .queue(Q::Clients, 4)
        .queue(Q::Server, 1)
        .build()
        .expect("a valid configuration");
    let started = Instant::now();

    let work = ex.run_until(async {
        let listener = Async::<TcpListener>::bind(([127, 0, 0, 1], 0))?;
        let addr = listener.get_ref().local_addr()?;
        println!("echo server listening on {addr}");

        let server = ex
            .spawn(Q::Server, async move {
                let mut conns = Vec::new();
                for _ in 0..CLIENTS {
                    let (stream, peer) = listener.accept().await?;
                    println!("server: accepted {peer}");
                    // A task per connection, on the server's queue.
                    conns.push(tourbillon::spawn(echo(stream)));
                }
                let mut echoed = 0;
                for c in conns {
                    echoed += c.await.expect("an echo task")?;
                }
                Ok::<_, std::io::Error>(echoed)
            })
            .expect("the server's queue");

        let clients: Vec<_> = (0..CLIENTS)
            .map(|id| {
                ex.spawn(Q::Clients, client(addr, id))
                    .expect("the clients' queue")
            })
            .collect();
        for (id, c) in clients.into_iter().enumerate() {
            let echoes = c.await.expect("a client task")?;
            println!(
                "client {id}: {} echoes, last {:?}",
                echoes.len(),
                echoes.last().unwrap()
            );
        }
        let echoed = server.await.expect("the server task")?;
        println!("server: echoed {echoed} bytes");
        Ok(())
    });
    // async-io drives its reactor (sockets and timers) on this thread while
    // it polls the executor; a 10 s timer bounds the whole run.
    async_io::block_on(future::or(work, async {
        Timer::after(Duration::from_secs(10)).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "not done after 10 s",
        ))
    }))?;

    let st = ex.stats();
    println!(
        "done in {:.1?}: {} client tasks and {} server tasks completed",
        started.elapsed(),
        st.queues[0].completed,
        st.queues[1].completed
    );
    Ok(())
}
