//! The example `sharded_kv`'s server (examples/sharded_kv/server/), started
//! in this process on 127.0.0.1 with a free port, driven by a real Redis
//! client library (the `redis` crate, its synchronous API) and, for what a
//! client library never sends, by raw sockets: keys on both shards of a
//! 2-core pool (so operations are forwarded between the cores with
//! `submit_to`), `MGET`/`MSET` across shards, a pipeline whose replies
//! come in order, error replies, malformed requests (a protocol error
//! reply, then the connection closes; the other connections go on), a
//! stop with requests in flight (all answered before the close), and the
//! same server on plain tokio.
//!
//! `cargo test --features tokio --test sharded_kv_resp` (the test needs
//! the `tokio` feature: Cargo.toml's `[[test]]` entry).

// The server's functions that only the example's main uses.
#[allow(dead_code)]
#[path = "../../../examples/sharded_kv/server/mod.rs"]
mod server;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use redis::{Commands, Connection, Value};
use server::store::shard_of;
use server::{store, Config, Server, Snapshot, FG};
use tourbillon::pool::Placement;

/// A 2-core server (threads not pinned: the tests share the machine),
/// snapshot passes every 5 ms beside the requests.
fn start() -> Server {
    Server::start(&Config {
        cores: 2,
        placement: Placement::Unpinned,
        port: 0,
        snapshot: Snapshot::Every(Duration::from_millis(5)),
        grace: Duration::from_secs(10),
    })
    .expect("the server starts")
}

fn connect(addr: SocketAddr) -> Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let con = client.get_connection().expect("the client connects");
    con.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    con
}

/// A raw connection; the timeout only turns a hang into a failure.
fn raw(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Everything the server sends until it closes the connection.
fn read_to_close(s: &mut TcpStream) -> String {
    let mut all = Vec::new();
    s.read_to_end(&mut all)
        .expect("the server closes the connection");
    String::from_utf8(all).unwrap()
}

/// `n` keys, of which some belong to each of the 2 shards.
fn keys_on_both_shards(n: usize) -> Vec<String> {
    let keys: Vec<String> = (0..n).map(|i| format!("key:{i}")).collect();
    for shard in 0..2 {
        assert!(keys.iter().any(|k| shard_of(k.as_bytes(), 2) == shard));
    }
    keys
}

/// Operations forwarded in, summed over the cores.
fn forwarded(server: &Server) -> u64 {
    (0..2)
        .map(|core| {
            futures::executor::block_on(
                server
                    .pool()
                    .submit_to(core, FG, || async { store::stats().forwarded_in }),
            )
            .unwrap()
        })
        .sum()
}

/// Stops the server and checks that everything ended by itself.
fn stop(server: Server) -> server::AcceptReport {
    let stopped = server.shutdown();
    let report = stopped.pool.expect("the pool shuts down");
    assert!(report.is_clean(), "{report}");
    assert_eq!(stopped.connections.cancelled, 0);
    stopped.connections
}

#[test]
fn get_set_del_across_shards() {
    let server = start();
    let mut con = connect(server.addr());
    let keys = keys_on_both_shards(20);
    for (i, k) in keys.iter().enumerate() {
        let () = con.set(k, format!("v{i}")).unwrap();
    }
    for (i, k) in keys.iter().enumerate() {
        let v: Option<String> = con.get(k).unwrap();
        assert_eq!(v, Some(format!("v{i}")));
    }
    let missing: Option<String> = con.get("no such key").unwrap();
    assert_eq!(missing, None);
    let deleted: i64 = con.del(&keys[..10]).unwrap();
    assert_eq!(deleted, 10);
    let again: i64 = con.del(&keys[..10]).unwrap();
    assert_eq!(again, 0);
    let exists: i64 = con.exists(&keys[8..12]).unwrap();
    assert_eq!(exists, 2);
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, 10);
    // SET with EX keeps the value (it expires in an hour).
    let () = redis::cmd("SET")
        .arg(&keys[0])
        .arg("ttl")
        .arg("EX")
        .arg(3600)
        .query(&mut con)
        .unwrap();
    let v: String = con.get(&keys[0]).unwrap();
    assert_eq!(v, "ttl");
    // The connection is on one core: the other shard's keys went there.
    assert!(forwarded(&server) > 0);
    let () = redis::cmd("FLUSHALL").query(&mut con).unwrap();
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, 0);
    drop(con);
    stop(server);
}

#[test]
fn mget_and_mset_across_shards() {
    let server = start();
    let mut con = connect(server.addr());
    let keys = keys_on_both_shards(30);
    let pairs: Vec<(String, String)> = keys.iter().map(|k| (k.clone(), format!("={k}"))).collect();
    let () = con.mset(&pairs).unwrap();
    let mut asked = keys.clone();
    asked.insert(7, "missing".to_string());
    let values: Vec<Option<String>> = con.mget(&asked).unwrap();
    let expected: Vec<Option<String>> = asked
        .iter()
        .map(|k| (k != "missing").then(|| format!("={k}")))
        .collect();
    assert_eq!(values, expected);
    assert!(forwarded(&server) > 0);
    drop(con);
    stop(server);
}

#[test]
fn pipelined_replies_come_in_request_order() {
    let server = start();
    let mut con = connect(server.addr());
    let keys = keys_on_both_shards(400);
    let mut pipe = redis::pipe();
    for (i, k) in keys.iter().enumerate() {
        pipe.cmd("SET").arg(k).arg(i).cmd("GET").arg(k);
        if i % 50 == 0 {
            pipe.cmd("DBSIZE")
                .cmd("PING")
                .cmd("MGET")
                .arg(k)
                .arg("none");
        }
    }
    let replies: Vec<Value> = pipe.query(&mut con).unwrap();
    let mut expected = Vec::new();
    for i in 0..keys.len() {
        expected.push(Value::Okay);
        expected.push(Value::BulkString(i.to_string().into_bytes()));
        if i % 50 == 0 {
            expected.push(Value::Int(i as i64 + 1));
            expected.push(Value::SimpleString("PONG".into()));
            expected.push(Value::Array(vec![
                Value::BulkString(i.to_string().into_bytes()),
                Value::Nil,
            ]));
        }
    }
    assert_eq!(replies, expected);

    // A request split across two writes (whether or not the server reads
    // it in two pieces, the reply is the same) and an inline command.
    let mut s = raw(server.addr());
    s.write_all(b"*3\r\n$3\r\nSET\r\n$5\r\nsp").unwrap();
    s.write_all(b"lit\r\n$1\r\nx\r\nGET split\r\nQUIT\r\n")
        .unwrap();
    assert_eq!(read_to_close(&mut s), "+OK\r\n$1\r\nx\r\n+OK\r\n");
    drop(con);
    stop(server);
}

/// The server's error reply to `cmd`.
fn error_of(con: &mut Connection, cmd: &redis::Cmd) -> String {
    let e = cmd.query::<Value>(con).expect_err("an error reply");
    format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))
}

#[test]
fn errors_are_redis_replies_and_the_connection_goes_on() {
    let server = start();
    let mut con = connect(server.addr());
    let mut unknown = redis::cmd("FOO");
    unknown.arg("a").arg("b");
    assert_eq!(
        error_of(&mut con, &unknown),
        "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
    );
    assert_eq!(
        error_of(&mut con, redis::cmd("GET").arg("a").arg("b")),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        error_of(&mut con, redis::cmd("MSET").arg("a").arg("1").arg("b")),
        "ERR wrong number of arguments for 'mset' command"
    );
    assert_eq!(
        error_of(&mut con, redis::cmd("SET").arg("k").arg("v").arg("NX")),
        "ERR SET option 'NX' is not supported by this server (only EX and PX are)"
    );
    assert_eq!(
        error_of(&mut con, redis::cmd("SET").arg("k").arg("v").arg("BOGUS")),
        "ERR syntax error"
    );
    assert_eq!(
        error_of(
            &mut con,
            redis::cmd("SET").arg("k").arg("v").arg("EX").arg(-1)
        ),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        error_of(
            &mut con,
            redis::cmd("CONFIG").arg("SET").arg("save").arg("")
        ),
        "ERR unknown subcommand 'SET'. Try CONFIG HELP."
    );
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    // What clients send on connect.
    let config: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .arg("appendonly")
        .query(&mut con)
        .unwrap();
    assert_eq!(config, ["save", "", "appendonly", "no"]);
    let () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("tester")
        .query(&mut con)
        .unwrap();
    let name: String = redis::cmd("CLIENT").arg("GETNAME").query(&mut con).unwrap();
    assert_eq!(name, "tester");
    let mut s = raw(server.addr());
    s.write_all(b"HELLO 3\r\nHELLO 2\r\nCOMMAND DOCS\r\nQUIT\r\n")
        .unwrap();
    let replies = read_to_close(&mut s);
    assert!(
        replies.starts_with("-NOPROTO unsupported protocol version\r\n*14\r\n$6\r\nserver\r\n"),
        "{replies}"
    );
    assert!(
        replies.ends_with("$7\r\nmodules\r\n*0\r\n*0\r\n+OK\r\n"),
        "{replies}"
    );
    drop(con);
    stop(server);
}

#[test]
fn a_malformed_request_closes_its_connection_only() {
    let server = start();
    let mut other = connect(server.addr());
    let () = other.set("kept", "yes").unwrap();
    for (request, error) in [
        // A length that is not a number.
        (&b"*x\r\n"[..], "invalid multibulk length"),
        (b"*1\r\n$1x\r\n", "invalid bulk length"),
        // A bad length.
        (b"*1\r\n$-5\r\n", "invalid bulk length"),
        // A bulk string above the limit (16 MiB).
        (b"*2\r\n$3\r\nSET\r\n$16777217\r\n", "invalid bulk length"),
        (b"*1\r\n:1\r\n", "expected '$', got ':'"),
    ] {
        let mut s = raw(server.addr());
        // A request before the malformed one is answered first.
        s.write_all(b"PING\r\n").unwrap();
        s.write_all(request).unwrap();
        assert_eq!(
            read_to_close(&mut s),
            format!("+PONG\r\n-ERR Protocol error: {error}\r\n")
        );
        // The other connection goes on, with what it had stored.
        let kept: String = other.get("kept").unwrap();
        assert_eq!(kept, "yes");
    }
    let () = other.set("after", "1").unwrap();
    drop(other);
    stop(server);
}

#[test]
fn a_stop_answers_the_requests_already_sent() {
    let server = start();
    let addr = server.addr();
    let mut s = raw(addr);
    // A round trip first: the connection is accepted and served.
    s.write_all(b"PING\r\n").unwrap();
    let mut pong = [0u8; 7];
    s.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
    // 300 requests on both shards (17 KB: the socket buffers hold them
    // and their replies), not read before the stop.
    let keys = keys_on_both_shards(300);
    let mut requests = Vec::new();
    for k in &keys {
        requests.extend_from_slice(format!("SET {k} v\r\n").as_bytes());
    }
    requests.extend_from_slice(b"DBSIZE\r\n");
    s.write_all(&requests).unwrap();
    // Blocks until the connection has answered and closed.
    let connections = stop(server);
    // (Whether its accept loop counted it as open at the stop or saw it
    // end first is a race; it was not cancelled: `stop`.)
    assert_eq!(connections.accepted, 1);
    let replies = read_to_close(&mut s);
    assert_eq!(replies, format!("{}:300\r\n", "+OK\r\n".repeat(300)));
    assert!(TcpStream::connect(addr).is_err(), "the listener is closed");
}

#[test]
fn the_same_server_on_plain_tokio() {
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let cfg = Config {
            cores: 1,
            placement: Placement::Unpinned,
            port: 0,
            snapshot: Snapshot::Busy,
            grace: Duration::from_secs(10),
        };
        server::run_plain_tokio(&cfg, |addr| addr_tx.send(addr).unwrap(), async move {
            let _ = stop_rx.await;
        })
    });
    let addr = addr_rx.recv().unwrap();
    let mut con = connect(addr);
    let () = con.mset(&[("a", "1"), ("b", "2")]).unwrap();
    let values: Vec<Option<String>> = con.mget(&["a", "b", "c"]).unwrap();
    assert_eq!(values, [Some("1".into()), Some("2".into()), None]);
    let size: i64 = redis::cmd("DBSIZE").query(&mut con).unwrap();
    assert_eq!(size, 2);
    stop_tx.send(()).unwrap();
    let report = thread.join().unwrap().unwrap();
    assert_eq!((report.accepted, report.cancelled), (1, 0));
    // The connection was closed by the stop.
    assert!(redis::cmd("PING").query::<String>(&mut con).is_err());
}
