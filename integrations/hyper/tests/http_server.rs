//! `examples/http_server.rs` served in-process on 127.0.0.1 and driven by
//! hyper's HTTP/1.1 client over one keep-alive connection: the routes, the
//! `/stats` JSON, and a graceful shutdown with the connection still open,
//! in both modes (tourbillon nested in tokio, and plain tokio).
//!
//! `cargo test --features tokio --test http_server` (the example needs the
//! `tokio` feature, and so does this test).

#[path = "../examples/http_server.rs"]
#[allow(dead_code)]
mod http_server;

use std::net::SocketAddr;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{handshake, SendRequest};
use hyper::header::{ALLOW, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use http_server::{Config, Mode, Report, HELLO};

/// Background tasks of the servers under test.
const BACKGROUND_TASKS: usize = 2;
/// `GET /` requests sent on the connection before `/stats`.
const HELLOS: u64 = 3;

/// Starts a server on 127.0.0.1:0 on a thread of its own; returns its
/// address, the sender that shuts it down, and the thread.
fn start(
    config: Config,
) -> (
    SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    std::thread::JoinHandle<Report>,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind on loopback");
    let addr = listener.local_addr().expect("local address");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let shutdown = async move {
            // A dropped sender shuts the server down too.
            let _ = rx.await;
        };
        http_server::serve(listener, &config, shutdown).expect("the server ran")
    });
    (addr, tx, server)
}

struct Answer {
    status: StatusCode,
    content_type: Option<String>,
    allow: Option<String>,
    body: Bytes,
}

async fn request(sender: &mut SendRequest<Empty<Bytes>>, method: Method, path: &str) -> Answer {
    sender
        .ready()
        .await
        .expect("the connection takes a request");
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header(HOST, "127.0.0.1")
        .body(Empty::new())
        .expect("a request");
    let resp = sender.send_request(req).await.expect("a response");
    let header = |name| {
        resp.headers()
            .get(name)
            .map(|v: &hyper::header::HeaderValue| v.to_str().expect("ASCII").to_string())
    };
    let (content_type, allow) = (header(CONTENT_TYPE), header(ALLOW));
    let status = resp.status();
    let body = resp
        .into_body()
        .collect()
        .await
        .expect("the body")
        .to_bytes();
    Answer {
        status,
        content_type,
        allow,
        body,
    }
}

/// Every check but the executor's statistics: the routes over one
/// keep-alive connection, then the shutdown with that connection open.
/// Returns the `/stats` JSON and the server's report.
fn exercise(config: Config) -> (Value, Report) {
    let mode = config.mode;
    let (addr, shutdown, server) = start(config);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let stats = rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let (mut sender, conn) = handshake::<_, Empty<Bytes>>(TokioIo::new(stream))
            .await
            .expect("an HTTP/1.1 handshake");
        // The client's side of the connection runs as a task of its own.
        let conn = tokio::spawn(conn);

        // Several requests on the one connection: keep-alive.
        for _ in 0..HELLOS {
            let a = request(&mut sender, Method::GET, "/").await;
            assert_eq!(a.status, StatusCode::OK);
            assert_eq!(a.body, HELLO.as_bytes());
            assert_eq!(a.content_type.as_deref(), Some("text/plain; charset=utf-8"));
        }
        let a = request(&mut sender, Method::GET, "/no/such/page").await;
        assert_eq!(a.status, StatusCode::NOT_FOUND);
        let a = request(&mut sender, Method::POST, "/").await;
        assert_eq!(a.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(a.allow.as_deref(), Some("GET, HEAD"));
        let a = request(&mut sender, Method::HEAD, "/").await;
        assert_eq!(a.status, StatusCode::OK);
        assert!(a.body.is_empty(), "a HEAD response has no body");

        let a = request(&mut sender, Method::GET, "/stats").await;
        assert_eq!(a.status, StatusCode::OK);
        assert_eq!(a.content_type.as_deref(), Some("application/json"));
        let stats: Value = serde_json::from_slice(&a.body).expect("/stats is JSON");

        // Shut the server down with the connection open and idle: the
        // server closes it, which ends the client's side without error.
        shutdown.send(()).expect("the server is running");
        conn.await
            .expect("the client's connection task")
            .expect("the server closed the connection cleanly");
        assert!(
            sender
                .send_request(Request::new(Empty::new()))
                .await
                .is_err(),
            "the connection is closed"
        );
        stats
    });
    let report = server.join().expect("the server thread");

    assert_eq!(stats["mode"], mode_name(mode));
    // Every request so far, this one included, and all on one connection.
    assert_eq!(stats["requests"], HELLOS + 4);
    assert_eq!(stats["connections"]["accepted"], 1);
    assert_eq!(stats["connections"]["open"], 1);
    assert_eq!(stats["background"]["tasks"], BACKGROUND_TASKS);
    assert!(stats["background"]["bytes"].is_u64());
    assert!(stats["uptime_ms"].is_u64());

    assert_eq!(report.mode, mode);
    assert_eq!(report.requests, HELLOS + 4);
    assert_eq!(report.connections, 1);
    assert_eq!(report.connection_errors, 0);
    // Each background task checksums at least one chunk before it stops.
    let chunk = Config::default().chunk_bytes as u64;
    assert!(report.background_bytes >= BACKGROUND_TASKS as u64 * chunk);
    assert_eq!(report.background_bytes % chunk, 0);
    (stats, report)
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Tourbillon => "tourbillon",
        Mode::PlainTokio => "plain-tokio",
    }
}

#[test]
fn tourbillon_serves_routes_stats_keep_alive_and_shuts_down() {
    let config = Config {
        mode: Mode::Tourbillon,
        background_tasks: BACKGROUND_TASKS,
        wake_histograms: true,
        ..Config::default()
    };
    let (stats, report) = exercise(config);

    // /stats: the executor's statistics, a row per queue, by name.
    let ex = &stats["executor"];
    assert!(ex["polls"].as_u64().expect("polls") > 0);
    let queues = ex["queues"].as_array().expect("a list of queues");
    let names: Vec<&str> = queues
        .iter()
        .map(|q| q["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["Http", "Background"]);
    assert_eq!(queues[0]["shares"], 99);
    assert_eq!(queues[1]["shares"], 1);
    // The acceptor and the one connection, both still running.
    assert_eq!(queues[0]["spawned"], 2);
    assert_eq!(queues[1]["spawned"], BACKGROUND_TASKS);
    for q in queues {
        assert!(q["polls"].as_u64().expect("polls") > 0, "{q}");
        assert!(q["service_us"].as_f64().expect("service") >= 0.0, "{q}");
        assert!(q["runnable_tasks"].is_u64(), "{q}");
        assert!(q["lag_us"].is_f64(), "{q}");
        // With histograms on, each queue's tasks were woken and polled.
        let wake = &q["wake_latency"];
        assert!(wake["count"].as_u64().expect("a wake count") > 0, "{q}");
        assert!(wake["p99_us"].as_f64().expect("p99") >= wake["p50_us"].as_f64().expect("p50"));
    }

    // After the shutdown: every task ended by itself (none cancelled or
    // panicked, none left).
    let st = report.stats.expect("the executor's statistics");
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.caught_panics, 0);
    for q in &st.queues {
        assert_eq!(q.spawned, q.completed, "{q:?}");
        assert_eq!((q.cancelled, q.panicked), (0, 0), "{q:?}");
    }
    assert_eq!(st.queues[0].spawned, 2);
    assert_eq!(st.queues[1].spawned, BACKGROUND_TASKS as u64);
}

#[test]
fn plain_tokio_serves_the_same_routes_and_shuts_down() {
    let config = Config {
        mode: Mode::PlainTokio,
        background_tasks: BACKGROUND_TASKS,
        ..Config::default()
    };
    let (stats, report) = exercise(config);
    assert!(stats["executor"].is_null(), "no executor statistics");
    assert!(report.stats.is_none());
}

#[test]
fn without_background_load_the_server_serves_and_stops() {
    let config = Config {
        background_tasks: 0,
        latency: None,
        ..Config::default()
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind on loopback");
    // Shut down before any client came: the server stops at once.
    let report = http_server::serve(listener, &config, async {}).expect("the server ran");
    assert_eq!((report.requests, report.connections), (0, 0));
    assert_eq!(report.background_bytes, 0);
    let st = report.stats.expect("the executor's statistics");
    assert_eq!(st.live_tasks, 0);
    assert_eq!(st.queues[0].spawned, st.queues[0].completed);
}

#[test]
fn adler32_matches_the_reference() {
    // RFC 1950's checksum of "Wikipedia", and of nothing.
    assert_eq!(http_server::adler32(1, b"Wikipedia"), 0x11E6_0398);
    assert_eq!(http_server::adler32(1, b""), 1);
    // Against the definition (a modulo after every byte), over several of
    // the 5552-byte blocks between the function's modulos, whole and in
    // pieces.
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 255) as u8).collect();
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in &data {
        a = (a + u32::from(byte)) % 65521;
        b = (b + a) % 65521;
    }
    let reference = (b << 16) | a;
    assert_eq!(http_server::adler32(1, &data), reference);
    assert_eq!(data.chunks(3001).fold(1, http_server::adler32), reference);
}
