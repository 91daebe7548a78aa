//! The wire protocol: text lines, one request per line and one response
//! line per request, in the order of the requests.
//!
//! ```text
//! GET key          ->  VALUE value   |  NIL
//! SET key value    ->  OK
//! DEL key          ->  OK            |  NIL  (NIL: there was no such key)
//! anything else    ->  ERR message
//! ```
//!
//! Commands may be in any case. Keys and values are bytes without spaces
//! or line breaks. A client may pipeline: send many requests before it
//! reads the responses.

/// The longest line either side accepts; a connection that sends a longer
/// one gets an `ERR` and is closed.
pub const MAX_LINE: usize = 16 * 1024;

/// A parsed request.
#[derive(Debug)]
pub enum Request {
    Get(Vec<u8>),
    Set(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
}

impl Request {
    /// The key, which decides the shard that owns the request.
    pub fn key(&self) -> &[u8] {
        match self {
            Request::Get(k) | Request::Set(k, _) | Request::Del(k) => k,
        }
    }

    /// Appends the request as one line to `out` (used by the client).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Request::Get(k) => encode_parts(out, &[b"GET", k]),
            Request::Set(k, v) => encode_parts(out, &[b"SET", k, v]),
            Request::Del(k) => encode_parts(out, &[b"DEL", k]),
        }
    }
}

/// A response to one request.
#[derive(Debug)]
pub enum Response {
    Value(Vec<u8>),
    Nil,
    Ok,
    Err(&'static str),
}

impl Response {
    /// Appends the response as one line to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Response::Value(v) => encode_parts(out, &[b"VALUE", v]),
            Response::Nil => out.extend_from_slice(b"NIL\n"),
            Response::Ok => out.extend_from_slice(b"OK\n"),
            Response::Err(msg) => encode_parts(out, &[b"ERR", msg.as_bytes()]),
        }
    }

    /// Whether a response line (without its `\n`) is an error.
    pub fn line_is_error(line: &[u8]) -> bool {
        line.starts_with(b"ERR")
    }
}

fn encode_parts(out: &mut Vec<u8>, parts: &[&[u8]]) {
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        out.extend_from_slice(p);
    }
    out.push(b'\n');
}

/// Parses one request line (without its `\n`; a trailing `\r` is allowed,
/// so that `telnet` or `nc -C` work).
pub fn parse_request(line: &[u8]) -> Result<Request, &'static str> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let cmd = words.next().ok_or("empty line")?;
    let mut arg = || words.next().map(<[u8]>::to_vec);
    let req = if cmd.eq_ignore_ascii_case(b"GET") {
        Request::Get(arg().ok_or("GET needs a key")?)
    } else if cmd.eq_ignore_ascii_case(b"SET") {
        let key = arg().ok_or("SET needs a key and a value")?;
        Request::Set(key, arg().ok_or("SET needs a key and a value")?)
    } else if cmd.eq_ignore_ascii_case(b"DEL") {
        Request::Del(arg().ok_or("DEL needs a key")?)
    } else {
        return Err("unknown command (GET, SET or DEL)");
    };
    match words.next() {
        None => Ok(req),
        Some(_) => Err("too many words"),
    }
}

/// Splits the complete lines (each ending in `\n`) off the front of
/// `buf`: returns them without their `\n`, and the number of bytes they
/// took. The bytes after the last `\n` are an incomplete line that the
/// caller keeps until more data arrives.
pub fn complete_lines(buf: &[u8]) -> (Vec<&[u8]>, usize) {
    let mut lines = Vec::new();
    let mut start = 0;
    while let Some(pos) = buf[start..].iter().position(|&b| b == b'\n') {
        lines.push(&buf[start..start + pos]);
        start += pos + 1;
    }
    (lines, start)
}
