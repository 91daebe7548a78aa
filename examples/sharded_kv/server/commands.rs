//! The commands: what each request does and what it answers, as Redis
//! does for the commands this server has.
//!
//! | command | reply |
//! |---|---|
//! | `GET key` | the value, or the null bulk string |
//! | `SET key value [EX seconds \| PX milliseconds]` | `+OK`; other options (`NX`, `XX`, `GET`, `KEEPTTL`, `EXAT`, `PXAT`) are refused with an error |
//! | `DEL key [key ...]`, `EXISTS key [key ...]` | how many of the keys were there |
//! | `MGET key [key ...]` | an array of values (null for a missing key) |
//! | `MSET key value [key value ...]` | `+OK` (atomic per shard, not across shards) |
//! | `DBSIZE` | the number of keys of all shards |
//! | `FLUSHALL [ASYNC \| SYNC]` | `+OK` once every shard is empty |
//! | `PING [message]`, `ECHO message` | `+PONG` or the message |
//! | `SELECT 0` | `+OK` (one database; another index is an error) |
//! | `QUIT` | `+OK`, then the server closes the connection |
//! | `CONFIG GET parameter ...` | `save` (empty: no persistence) and `appendonly` (`no`); others are not listed (an empty array if none is known) |
//! | `COMMAND`, `COMMAND COUNT`, `COMMAND INFO name ...` | this table, in Redis 7's format; `COMMAND DOCS`: an empty array (no documentation) |
//! | `HELLO [2 [AUTH user password] [SETNAME name]]` | the connection's properties, as Redis's; `HELLO 3`: `-NOPROTO unsupported protocol version` (RESP2 only) |
//! | `CLIENT SETNAME name`, `CLIENT GETNAME`, `CLIENT ID`, `CLIENT SETINFO LIB-NAME\|LIB-VER value` | as Redis |
//! | `AUTH ...` | an error: this server has no passwords |
//!
//! Errors, with Redis's wording: an unknown command
//! (`ERR unknown command 'x', with args beginning with: 'a' 'b' `), a wrong
//! number of arguments (`ERR wrong number of arguments for 'get' command`),
//! an unknown subcommand (`ERR unknown subcommand 'x'. Try CONFIG HELP.`),
//! a bad option (`ERR syntax error`), a time to live that is not a
//! positive integer. The connection goes on after them.
//!
//! # Shards and order
//!
//! A key belongs to shard `shard_of(key, cores)`. A connection handles
//! the requests of one read as a batch ([`Session::run`]). As long as
//! every key of a request is in the shard of the connection's core, the
//! request runs at once on that shard and its reply is appended to the
//! output, with no allocation for `GET` and `SET` of an existing key.
//! From the first request of the batch that needs another shard on (or
//! `DBSIZE` / `FLUSHALL` with more than one core), each request's
//! operations are queued per shard, in request order; at the end of the
//! batch each other shard gets its queue in one
//! `pool.submit_to(shard, "fwd", ...)`, all in flight at once, this core
//! applies its own, and the replies are assembled in request order. Each
//! shard thus applies a connection's operations in the order of its
//! requests, and the replies go out in that order.

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::join_all;

use super::resp::{self, Parser, ProtocolError};
use super::store::{self, shard_of, Op, OpResult};
use super::Shards;

/// What the connection does after a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Reads on.
    Continue,
    /// Writes the replies and closes: `QUIT`, or a protocol error (whose
    /// reply is the last).
    Close,
}

/// The state of one connection.
pub struct Session {
    parser: Parser,
    id: u64,
    name: Option<Vec<u8>>,
    /// The replies still to assemble when a batch has forwarded requests.
    pending: Vec<Pending>,
    /// Their operations, per shard.
    ops: Vec<Vec<Op>>,
    /// The replies of the batch's requests that need no shard, once the
    /// batch has forwarded requests.
    ready: Vec<u8>,
}

/// A reply of a batch with forwarded requests.
enum Pending {
    /// Encoded in `Session::ready`.
    Ready(Range<usize>),
    /// Made of the results of operations (shard, index in that shard's
    /// queue).
    Ops(Combine, Vec<(usize, usize)>),
}

/// How a request's operation results make its reply.
#[derive(Clone, Copy, Debug)]
enum Combine {
    /// The single result (`GET`: a bulk string or null; `SET`: `+OK`).
    One,
    /// An array of the values (`MGET`).
    Values,
    /// The sum of the counts (`DEL`, `EXISTS`, `DBSIZE`).
    Sum,
    /// `+OK` once every operation is done (`MSET`, `FLUSHALL`).
    Done,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Default for Session {
    fn default() -> Self {
        Session::new()
    }
}

impl Session {
    pub fn new() -> Session {
        Session {
            parser: Parser::new(),
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            name: None,
            pending: Vec::new(),
            ops: Vec::new(),
            ready: Vec::new(),
        }
    }

    /// Handles the complete requests at the start of `input`, appending
    /// their replies to `out` in request order; returns the bytes they
    /// took (the rest is the start of a request not complete yet: pass it
    /// again, with more bytes, next time) and whether to go on. Also
    /// returns the number of requests handled.
    pub async fn run(
        &mut self,
        shards: &Shards,
        input: &[u8],
        out: &mut Vec<u8>,
    ) -> (usize, usize, Next) {
        let here = shards.here();
        let cores = shards.cores();
        let mut used = 0;
        let mut requests = 0;
        let mut next = Next::Continue;
        let mut slow = false;
        while next == Next::Continue {
            let buf = &input[used..];
            let len = match self.parser.parse(buf) {
                Ok(Some(len)) => len,
                Ok(None) => break,
                Err(e) => {
                    self.protocol_error(e, slow, out);
                    next = Next::Close;
                    break;
                }
            };
            let args = Args {
                buf,
                ranges: self.parser.args(),
            };
            if !args.is_empty() {
                requests += 1;
                let mut batch = Batch {
                    slow,
                    here,
                    cores,
                    out: &mut *out,
                    pending: &mut self.pending,
                    ops: &mut self.ops,
                    ready: &mut self.ready,
                };
                next = execute(&args, &mut batch, self.id, &mut self.name);
                slow = batch.slow;
            }
            used += len;
        }
        if slow {
            self.finish(shards, out).await;
        }
        (used, requests, next)
    }

    fn protocol_error(&mut self, e: ProtocolError, slow: bool, out: &mut Vec<u8>) {
        let msg = format!("ERR {e}");
        if slow {
            let start = self.ready.len();
            resp::error(&mut self.ready, &msg);
            self.pending.push(Pending::Ready(start..self.ready.len()));
        } else {
            resp::error(out, &msg);
        }
    }

    /// Runs the queued operations (this shard's here, the others' on
    /// their cores) and appends the batch's replies in order.
    async fn finish(&mut self, shards: &Shards, out: &mut Vec<u8>) {
        let here = shards.here();
        let mut remote = Vec::new();
        let mut results: Vec<Option<Vec<OpResult>>> = Vec::with_capacity(self.ops.len());
        for (shard, ops) in self.ops.iter_mut().enumerate() {
            results.push(None);
            if ops.is_empty() {
                results[shard] = Some(Vec::new());
            } else if shard != here {
                remote.push((shard, shards.forward(shard, std::mem::take(ops))));
            }
        }
        if let Some(ops) = self.ops.get_mut(here).filter(|o| !o.is_empty()) {
            results[here] = Some(store::apply_batch(std::mem::take(ops), false));
        }
        let (which, futures): (Vec<usize>, Vec<_>) = remote.into_iter().unzip();
        for (shard, answer) in which.into_iter().zip(join_all(futures).await) {
            results[shard] = answer;
        }
        for pending in self.pending.drain(..) {
            match pending {
                Pending::Ready(range) => out.extend_from_slice(&self.ready[range]),
                Pending::Ops(combine, parts) => encode_results(combine, &parts, &results, out),
            }
        }
        self.ready.clear();
    }
}

/// Appends the reply made of the results `parts` (shard, index) of
/// `results` (per shard; `None`: the shard did not answer).
fn encode_results(
    combine: Combine,
    parts: &[(usize, usize)],
    results: &[Option<Vec<OpResult>>],
    out: &mut Vec<u8>,
) {
    let mut got = Vec::with_capacity(parts.len());
    for &(shard, i) in parts {
        match results[shard].as_ref().and_then(|r| r.get(i)) {
            Some(r) => got.push(r),
            None => {
                resp::error(out, &format!("ERR shard {shard} is not available"));
                return;
            }
        }
    }
    match combine {
        Combine::One => encode_result(got[0], out),
        Combine::Values => {
            resp::array(out, got.len());
            for r in got {
                encode_result(r, out);
            }
        }
        Combine::Sum => {
            let sum: u64 = got
                .iter()
                .map(|r| match r {
                    OpResult::Count(n) => *n,
                    _ => 0,
                })
                .sum();
            resp::integer(out, sum as i64);
        }
        Combine::Done => resp::ok(out),
    }
}

fn encode_result(r: &OpResult, out: &mut Vec<u8>) {
    match r {
        OpResult::Value(Some(v)) => resp::bulk(out, v),
        OpResult::Value(None) => resp::nil(out),
        OpResult::Done => resp::ok(out),
        OpResult::Count(n) => resp::integer(out, *n as i64),
    }
}

/// The arguments of one request: ranges of `buf`.
struct Args<'a> {
    buf: &'a [u8],
    ranges: &'a [Range<usize>],
}

impl<'a> Args<'a> {
    fn len(&self) -> usize {
        self.ranges.len()
    }

    fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    fn get(&self, i: usize) -> &'a [u8] {
        &self.buf[self.ranges[i].clone()]
    }

    fn iter(&self) -> impl Iterator<Item = &'a [u8]> + '_ {
        let buf = self.buf;
        self.ranges.iter().map(move |r| &buf[r.clone()])
    }
}

/// Where a request's reply goes: straight to the output while the batch
/// has forwarded nothing, else into the batch's pending replies.
struct Batch<'s> {
    slow: bool,
    here: usize,
    cores: usize,
    out: &'s mut Vec<u8>,
    pending: &'s mut Vec<Pending>,
    ops: &'s mut Vec<Vec<Op>>,
    ready: &'s mut Vec<u8>,
}

impl Batch<'_> {
    /// A reply that needs no shard.
    fn reply(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        if self.slow {
            let start = self.ready.len();
            encode(self.ready);
            self.pending.push(Pending::Ready(start..self.ready.len()));
        } else {
            encode(self.out);
        }
    }

    fn error(&mut self, msg: &str) {
        self.reply(|out| resp::error(out, msg));
    }

    /// Whether the operations on `shards` can run here at once.
    fn at_once(&self, mut shards: impl Iterator<Item = usize>) -> bool {
        !self.slow && shards.all(|s| s == self.here)
    }

    /// A request made of operations on shards: run at once if they are
    /// all on this core's shard and nothing of the batch was forwarded,
    /// else queued.
    fn ops(&mut self, combine: Combine, ops: Vec<(usize, Op)>) {
        if self.at_once(ops.iter().map(|(s, _)| *s)) {
            let results = store::apply_batch(ops.into_iter().map(|(_, op)| op).collect(), false);
            let here = self.here;
            let parts: Vec<(usize, usize)> = (0..results.len()).map(|i| (here, i)).collect();
            let mut per_shard: Vec<Option<Vec<OpResult>>> = (0..self.cores).map(|_| None).collect();
            per_shard[here] = Some(results);
            encode_results(combine, &parts, &per_shard, self.out);
            return;
        }
        self.slow = true;
        if self.ops.len() < self.cores {
            self.ops.resize_with(self.cores, Vec::new);
        }
        let parts = ops
            .into_iter()
            .map(|(shard, op)| {
                self.ops[shard].push(op);
                (shard, self.ops[shard].len() - 1)
            })
            .collect();
        self.pending.push(Pending::Ops(combine, parts));
    }
}

/// The commands, by name (case-insensitive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cmd {
    Get,
    Set,
    Del,
    Exists,
    MGet,
    MSet,
    DbSize,
    FlushAll,
    Ping,
    Echo,
    Select,
    Quit,
    Config,
    Command,
    Hello,
    Client,
    Auth,
}

/// A command's name, Redis's arity (`n`: exactly `n` arguments with the
/// name; `-n`: at least `n`), flags, and first key, last key and step
/// (`COMMAND`'s format).
struct Info {
    cmd: Cmd,
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
}

const fn info(
    cmd: Cmd,
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    first: i64,
    last: i64,
    step: i64,
) -> Info {
    Info {
        cmd,
        name,
        arity,
        flags,
        keys: (first, last, step),
    }
}

/// The commands.
const TABLE: &[Info] = &[
    info(Cmd::Get, "get", 2, &["readonly", "fast"], 1, 1, 1),
    info(Cmd::Set, "set", -3, &["write", "denyoom"], 1, 1, 1),
    info(Cmd::Del, "del", -2, &["write"], 1, -1, 1),
    info(Cmd::Exists, "exists", -2, &["readonly", "fast"], 1, -1, 1),
    info(Cmd::MGet, "mget", -2, &["readonly", "fast"], 1, -1, 1),
    info(Cmd::MSet, "mset", -3, &["write", "denyoom"], 1, -1, 2),
    info(Cmd::DbSize, "dbsize", 1, &["readonly", "fast"], 0, 0, 0),
    info(Cmd::FlushAll, "flushall", -1, &["write"], 0, 0, 0),
    info(Cmd::Ping, "ping", -1, &["fast"], 0, 0, 0),
    info(Cmd::Echo, "echo", 2, &["fast"], 0, 0, 0),
    info(
        Cmd::Select,
        "select",
        2,
        &["loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    info(Cmd::Quit, "quit", -1, &["fast"], 0, 0, 0),
    info(Cmd::Config, "config", -2, &[], 0, 0, 0),
    info(Cmd::Command, "command", -1, &["loading", "stale"], 0, 0, 0),
    info(
        Cmd::Hello,
        "hello",
        -1,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
    info(Cmd::Client, "client", -2, &[], 0, 0, 0),
    info(
        Cmd::Auth,
        "auth",
        -2,
        &["noscript", "loading", "stale", "fast"],
        0,
        0,
        0,
    ),
];

fn lookup(name: &[u8]) -> Option<&'static Info> {
    TABLE
        .iter()
        .find(|e| name.eq_ignore_ascii_case(e.name.as_bytes()))
}

fn arity_ok(arity: i64, n: usize) -> bool {
    if arity >= 0 {
        n as i64 == arity
    } else {
        n as i64 >= -arity
    }
}

fn wrong_arity(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// Redis's reply to an unknown command: its name and the start of its
/// arguments, each quoted and followed by a space, up to 128 bytes.
fn unknown_command(args: &Args<'_>) -> String {
    let name = String::from_utf8_lossy(&args.get(0)[..args.get(0).len().min(128)]).into_owned();
    let mut listed = String::new();
    for a in args.iter().skip(1) {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let a = String::from_utf8_lossy(&a[..a.len().min(room)]).into_owned();
        let _ = write!(listed, "'{a}' ");
    }
    format!("ERR unknown command '{name}', with args beginning with: {listed}")
}

fn unknown_subcommand(sub: &[u8], command: &str) -> String {
    let sub = String::from_utf8_lossy(&sub[..sub.len().min(128)]).into_owned();
    format!("ERR unknown subcommand '{sub}'. Try {command} HELP.")
}

const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";
const NO_PASSWORD: &str = "ERR AUTH <password> called without any password configured for \
the default user. Are you sure your configuration is correct?";

/// Runs one request (not empty).
fn execute(args: &Args<'_>, b: &mut Batch<'_>, id: u64, name: &mut Option<Vec<u8>>) -> Next {
    let Some(&Info {
        cmd,
        name: cmd_name,
        arity,
        ..
    }) = lookup(args.get(0))
    else {
        b.error(&unknown_command(args));
        return Next::Continue;
    };
    if !arity_ok(arity, args.len()) {
        b.error(&wrong_arity(cmd_name));
        return Next::Continue;
    }
    let cores = b.cores;
    match cmd {
        Cmd::Get => {
            let key = args.get(1);
            let shard = shard_of(key, cores);
            if b.at_once([shard].into_iter()) {
                store::with_shard(|s| match s.get(key) {
                    Some(v) => resp::bulk(b.out, v),
                    None => resp::nil(b.out),
                });
            } else {
                b.ops(Combine::One, vec![(shard, Op::Get(key.to_vec()))]);
            }
        }
        Cmd::Set => match set_ttl(args) {
            Err(msg) => b.error(&msg),
            Ok(ttl) => {
                let (key, value) = (args.get(1), args.get(2));
                let shard = shard_of(key, cores);
                if b.at_once([shard].into_iter()) {
                    store::with_shard(|s| s.set(key, value, ttl));
                    resp::ok(b.out);
                } else {
                    let op = Op::Set(key.to_vec(), value.to_vec(), ttl);
                    b.ops(Combine::One, vec![(shard, op)]);
                }
            }
        },
        Cmd::Del | Cmd::Exists | Cmd::MGet => {
            let ops = args
                .iter()
                .skip(1)
                .map(|k| {
                    let op = match cmd {
                        Cmd::Del => Op::Del(k.to_vec()),
                        Cmd::Exists => Op::Exists(k.to_vec()),
                        _ => Op::Get(k.to_vec()),
                    };
                    (shard_of(k, cores), op)
                })
                .collect();
            let combine = if cmd == Cmd::MGet {
                Combine::Values
            } else {
                Combine::Sum
            };
            b.ops(combine, ops);
        }
        Cmd::MSet => {
            if args.len().is_multiple_of(2) {
                b.error(&wrong_arity(cmd_name));
            } else {
                let pairs: Vec<(usize, Op)> = (1..args.len())
                    .step_by(2)
                    .map(|i| {
                        let (k, v) = (args.get(i), args.get(i + 1));
                        (shard_of(k, cores), Op::Set(k.to_vec(), v.to_vec(), None))
                    })
                    .collect();
                b.ops(Combine::Done, pairs);
            }
        }
        Cmd::DbSize => b.ops(Combine::Sum, (0..cores).map(|s| (s, Op::Len)).collect()),
        Cmd::FlushAll => {
            let mode = (args.len() == 2).then(|| args.get(1));
            if args.len() > 2
                || mode.is_some_and(|m| {
                    !m.eq_ignore_ascii_case(b"ASYNC") && !m.eq_ignore_ascii_case(b"SYNC")
                })
            {
                b.error(SYNTAX);
            } else {
                b.ops(Combine::Done, (0..cores).map(|s| (s, Op::Flush)).collect());
            }
        }
        Cmd::Ping => match args.len() {
            1 => b.reply(|out| resp::simple(out, "PONG")),
            2 => b.reply(|out| resp::bulk(out, args.get(1))),
            _ => b.error(&wrong_arity(cmd_name)),
        },
        Cmd::Echo => b.reply(|out| resp::bulk(out, args.get(1))),
        Cmd::Select => match resp::parse_int(args.get(1)) {
            Some(0) => b.reply(resp::ok),
            Some(_) => b.error("ERR DB index is out of range"),
            None => b.error(NOT_AN_INTEGER),
        },
        Cmd::Quit => {
            b.reply(resp::ok);
            return Next::Close;
        }
        Cmd::Auth => b.error(NO_PASSWORD),
        Cmd::Config => config(args, b),
        Cmd::Command => command(args, b),
        Cmd::Hello => hello(args, b, id, name),
        Cmd::Client => client(args, b, id, name),
    }
    Next::Continue
}

/// `SET`'s options after the key and value: the time to live, or the
/// error reply.
fn set_ttl(args: &Args<'_>) -> Result<Option<Duration>, String> {
    let mut ttl = None;
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        let unit_ms = if opt.eq_ignore_ascii_case(b"EX") {
            1000
        } else if opt.eq_ignore_ascii_case(b"PX") {
            1
        } else if [&b"NX"[..], b"XX", b"GET", b"KEEPTTL", b"EXAT", b"PXAT"]
            .iter()
            .any(|o| opt.eq_ignore_ascii_case(o))
        {
            return Err(format!(
                "ERR SET option '{}' is not supported by this server (only EX and PX are)",
                String::from_utf8_lossy(opt)
            ));
        } else {
            return Err(SYNTAX.to_string());
        };
        if ttl.is_some() || i + 1 >= args.len() {
            return Err(SYNTAX.to_string());
        }
        let n = resp::parse_int(args.get(i + 1)).ok_or(NOT_AN_INTEGER)?;
        let ms = n
            .checked_mul(unit_ms)
            .filter(|&ms| ms > 0)
            .ok_or("ERR invalid expire time in 'set' command")?;
        ttl = Some(Duration::from_millis(ms as u64));
        i += 2;
    }
    Ok(ttl)
}

/// The parameters `CONFIG GET` knows, and their values.
const CONFIG: &[(&str, &str)] = &[("save", ""), ("appendonly", "no")];

fn config(args: &Args<'_>, b: &mut Batch<'_>) {
    let sub = args.get(1);
    if !sub.eq_ignore_ascii_case(b"GET") {
        return b.error(&unknown_subcommand(sub, "CONFIG"));
    }
    if args.len() < 3 {
        return b.error(&wrong_arity("config|get"));
    }
    let mut found: Vec<(&str, &str)> = Vec::new();
    for p in args.iter().skip(2) {
        for &(name, value) in CONFIG {
            if p.eq_ignore_ascii_case(name.as_bytes()) && !found.iter().any(|f| f.0 == name) {
                found.push((name, value));
            }
        }
    }
    b.reply(|out| {
        resp::array(out, 2 * found.len());
        for (name, value) in found {
            resp::bulk(out, name.as_bytes());
            resp::bulk(out, value.as_bytes());
        }
    });
}

/// One command's `COMMAND` entry, in Redis 7's ten fields (no ACL
/// categories, tips, key specifications or subcommands).
fn command_entry(out: &mut Vec<u8>, e: &Info) {
    resp::array(out, 10);
    resp::bulk(out, e.name.as_bytes());
    resp::integer(out, e.arity);
    resp::array(out, e.flags.len());
    for flag in e.flags {
        resp::simple(out, flag);
    }
    resp::integer(out, e.keys.0);
    resp::integer(out, e.keys.1);
    resp::integer(out, e.keys.2);
    for _ in 0..4 {
        resp::array(out, 0);
    }
}

fn command(args: &Args<'_>, b: &mut Batch<'_>) {
    if args.len() == 1 {
        return b.reply(|out| {
            resp::array(out, TABLE.len());
            for e in TABLE {
                command_entry(out, e);
            }
        });
    }
    let sub = args.get(1);
    if sub.eq_ignore_ascii_case(b"COUNT") && args.len() == 2 {
        b.reply(|out| resp::integer(out, TABLE.len() as i64));
    } else if sub.eq_ignore_ascii_case(b"DOCS") {
        b.reply(|out| resp::array(out, 0));
    } else if sub.eq_ignore_ascii_case(b"INFO") {
        b.reply(|out| {
            resp::array(out, args.len() - 2);
            for name in args.iter().skip(2) {
                match TABLE
                    .iter()
                    .find(|e| name.eq_ignore_ascii_case(e.name.as_bytes()))
                {
                    Some(e) => command_entry(out, e),
                    None => resp::nil(out),
                }
            }
        });
    } else if sub.eq_ignore_ascii_case(b"COUNT") {
        b.error(&wrong_arity("command|count"));
    } else {
        b.error(&unknown_subcommand(sub, "COMMAND"));
    }
}

/// Whether a client name is valid (Redis: no spaces, newlines or other
/// bytes outside `!`..`~`).
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

const BAD_NAME: &str = "ERR Client names cannot contain spaces, newlines or special characters.";

fn hello(args: &Args<'_>, b: &mut Batch<'_>, id: u64, name: &mut Option<Vec<u8>>) {
    let mut i = 1;
    if args.len() > 1 {
        match resp::parse_int(args.get(1)) {
            Some(2) => {}
            Some(_) => return b.error("NOPROTO unsupported protocol version"),
            None => return b.error("ERR Protocol version is not an integer or out of range"),
        }
        i = 2;
    }
    let mut new_name = None;
    while i < args.len() {
        let opt = args.get(i);
        let more = args.len() - i - 1;
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            return b.error(NO_PASSWORD);
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            let n = args.get(i + 1);
            if !valid_name(n) {
                return b.error(BAD_NAME);
            }
            new_name = Some(n);
            i += 2;
        } else {
            return b.error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(opt)
            ));
        }
    }
    if let Some(n) = new_name {
        *name = (!n.is_empty()).then(|| n.to_vec());
    }
    b.reply(|out| {
        resp::array(out, 14);
        for (k, v) in [
            ("server", "sharded_kv"),
            ("version", env!("CARGO_PKG_VERSION")),
        ] {
            resp::bulk(out, k.as_bytes());
            resp::bulk(out, v.as_bytes());
        }
        resp::bulk(out, b"proto");
        resp::integer(out, 2);
        resp::bulk(out, b"id");
        resp::integer(out, id as i64);
        for (k, v) in [("mode", "standalone"), ("role", "master")] {
            resp::bulk(out, k.as_bytes());
            resp::bulk(out, v.as_bytes());
        }
        resp::bulk(out, b"modules");
        resp::array(out, 0);
    });
}

fn client(args: &Args<'_>, b: &mut Batch<'_>, id: u64, name: &mut Option<Vec<u8>>) {
    let sub = args.get(1);
    let n = args.len();
    let is = |s: &str| sub.eq_ignore_ascii_case(s.as_bytes());
    if is("SETNAME") {
        if n != 3 {
            return b.error(&wrong_arity("client|setname"));
        }
        let new = args.get(2);
        if !valid_name(new) {
            return b.error(BAD_NAME);
        }
        *name = (!new.is_empty()).then(|| new.to_vec());
        b.reply(resp::ok);
    } else if is("GETNAME") {
        if n != 2 {
            return b.error(&wrong_arity("client|getname"));
        }
        b.reply(|out| match name {
            Some(v) => resp::bulk(out, v),
            None => resp::nil(out),
        });
    } else if is("ID") {
        if n != 2 {
            return b.error(&wrong_arity("client|id"));
        }
        b.reply(|out| resp::integer(out, id as i64));
    } else if is("SETINFO") {
        if n != 4 {
            return b.error(&wrong_arity("client|setinfo"));
        }
        let attr = args.get(2);
        if attr.eq_ignore_ascii_case(b"LIB-NAME") || attr.eq_ignore_ascii_case(b"LIB-VER") {
            b.reply(resp::ok);
        } else {
            b.error(&format!(
                "ERR Unrecognized option '{}'",
                String::from_utf8_lossy(attr)
            ));
        }
    } else {
        b.error(&unknown_subcommand(sub, "CLIENT"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `requests` (RESP2 or inline) on one core, as one batch.
    fn replies(requests: &[u8]) -> (String, Next) {
        let mut session = Session::new();
        let mut out = Vec::new();
        let (used, _, next) =
            futures::executor::block_on(session.run(&Shards::Single, requests, &mut out));
        assert!(used == requests.len() || next == Next::Close);
        (String::from_utf8(out).unwrap(), next)
    }

    #[test]
    fn errors_use_redis_wording() {
        let (out, next) = replies(
            b"FOO a b\r\nget\r\nGET a b\r\nSET k v NX\r\nSET k v FOO\r\nSET k v EX 0\r\n\
              SET k v EX x\r\nSET k v EX 1 PX 5\r\nMSET a 1 b\r\nCONFIG SET a b\r\nHELLO 3\r\n\
              SELECT 1\r\nPING a b\r\nFLUSHALL NOW\r\n",
        );
        assert_eq!(next, Next::Continue);
        let lines: Vec<&str> = out.split("\r\n").collect();
        assert_eq!(
            &lines[..14],
            [
                "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' ",
                "-ERR wrong number of arguments for 'get' command",
                "-ERR wrong number of arguments for 'get' command",
                "-ERR SET option 'NX' is not supported by this server (only EX and PX are)",
                "-ERR syntax error",
                "-ERR invalid expire time in 'set' command",
                "-ERR value is not an integer or out of range",
                "-ERR syntax error",
                "-ERR wrong number of arguments for 'mset' command",
                "-ERR unknown subcommand 'SET'. Try CONFIG HELP.",
                "-NOPROTO unsupported protocol version",
                "-ERR DB index is out of range",
                "-ERR wrong number of arguments for 'ping' command",
                "-ERR syntax error",
            ]
        );
    }

    #[test]
    fn commands_answer_in_order() {
        let (out, _) = replies(
            b"SET a 1\r\nset b 2 px 60000\r\nGET a\r\nGET nope\r\nMGET a nope b\r\n\
              EXISTS a a nope\r\nDBSIZE\r\nDEL a nope\r\nDBSIZE\r\nPING\r\nECHO hi\r\n\
              CONFIG GET save appendonly nope\r\nCONFIG GET nope\r\nCLIENT SETNAME me\r\n\
              CLIENT GETNAME\r\nCOMMAND COUNT\r\nCOMMAND DOCS\r\nFLUSHALL\r\nDBSIZE\r\n",
        );
        assert_eq!(
            out,
            "+OK\r\n+OK\r\n$1\r\n1\r\n$-1\r\n*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n\
             :2\r\n:2\r\n:1\r\n:1\r\n+PONG\r\n$2\r\nhi\r\n\
             *4\r\n$4\r\nsave\r\n$0\r\n\r\n$10\r\nappendonly\r\n$2\r\nno\r\n*0\r\n+OK\r\n\
             $2\r\nme\r\n:17\r\n*0\r\n+OK\r\n:0\r\n"
        );
    }

    #[test]
    fn quit_and_protocol_errors_close_after_the_replies_before_them() {
        assert_eq!(
            replies(b"PING\r\nQUIT\r\nPING\r\n"),
            ("+PONG\r\n+OK\r\n".to_string(), Next::Close)
        );
        assert_eq!(
            replies(b"PING\r\n*1\r\n$x\r\n"),
            (
                "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n".to_string(),
                Next::Close
            )
        );
    }

    #[test]
    fn hello_2_describes_the_connection() {
        let (out, _) = replies(b"HELLO 2 SETNAME x\r\nHELLO 2 AUTH a b\r\nHELLO x\r\n");
        assert!(
            out.starts_with("*14\r\n$6\r\nserver\r\n$10\r\nsharded_kv\r\n"),
            "{out}"
        );
        assert!(out.contains("$5\r\nproto\r\n:2\r\n"));
        assert!(out.contains("-ERR AUTH <password> called without any password"));
        assert!(out.ends_with("-ERR Protocol version is not an integer or out of range\r\n"));
    }
}
