//! RESP2, the protocol of Redis 2 to 7: an incremental request parser
//! ([`Parser`]) and the reply encoders.
//!
//! A request is one of:
//!
//! * an array of bulk strings, as every client library sends:
//!   `*<n>\r\n` then `n` times `$<len>\r\n<len bytes>\r\n`;
//! * an inline command, as typed into `telnet` or `nc`: one line ending in
//!   `\n` (or `\r\n`), split into arguments at spaces and tabs. Quotes are
//!   not interpreted (Redis's are); an empty line is no command.
//!
//! An array of zero (or a negative number of) elements is no command
//! either, as in Redis: nothing is answered.
//!
//! The parser is incremental: a request may arrive in any number of
//! reads. The caller keeps the received bytes in one buffer and calls
//! [`Parser::parse`] on the bytes from the start of the first request not
//! yet parsed, again after each read while it says [`None`]; the parser
//! keeps what it found of a partial request (the arguments read so far and
//! where to go on), so each byte of a request is looked at about once
//! whatever the number of reads.
//!
//! Limits (a request beyond one is a protocol error: the server answers
//! `-ERR Protocol error: ...` and closes the connection, as Redis does):
//!
//! * [`MAX_BULK`]: the longest argument, 16 MiB (Redis: 512 MiB,
//!   `proto-max-bulk-len`), `invalid bulk length`;
//! * [`MAX_ARGS`]: the most arguments of one request, 1,048,576 (Redis:
//!   2^31 - 1), `invalid multibulk length`;
//! * [`MAX_INLINE`]: the longest inline command and the longest length
//!   line (`*<n>` or `$<len>`), 64 KiB, as Redis's; `too big inline
//!   request`, `too big mbulk count string`, `too big bulk count string`.
//!
//! Other protocol errors, with Redis's wording: a length that is not a
//! number (`invalid multibulk length`, `invalid bulk length`), an element
//! of an array that is not a bulk string (`expected '$', got 'x'`). One
//! that Redis does not check: the two bytes after a bulk string's data
//! must be `\r\n` (`expected CRLF after bulk data`).

use std::fmt;
use std::ops::Range;

/// The longest argument (bulk string) of a request, in bytes.
pub const MAX_BULK: usize = 16 << 20;
/// The most arguments of one request.
pub const MAX_ARGS: usize = 1 << 20;
/// The longest inline command, and the longest `*<n>` / `$<len>` line.
pub const MAX_INLINE: usize = 64 << 10;

/// A request that breaks the protocol: the connection gets
/// `-ERR Protocol error: <the Display>` and is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// `*<n>` where `n` is not a number or above [`MAX_ARGS`].
    InvalidMultibulkLength,
    /// `$<len>` where `len` is not a number, negative or above [`MAX_BULK`].
    InvalidBulkLength,
    /// An element of a request array that is not a bulk string: its first byte.
    ExpectedDollar(u8),
    /// No `\r\n` after a bulk string's data.
    ExpectedCrlf,
    /// An inline command longer than [`MAX_INLINE`].
    TooBigInline,
    /// A `*<n>` line longer than [`MAX_INLINE`].
    TooBigMbulkCount,
    /// A `$<len>` line longer than [`MAX_INLINE`].
    TooBigBulkCount,
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Protocol error: ")?;
        match self {
            ProtocolError::InvalidMultibulkLength => f.write_str("invalid multibulk length"),
            ProtocolError::InvalidBulkLength => f.write_str("invalid bulk length"),
            ProtocolError::ExpectedDollar(b) => {
                write!(f, "expected '$', got '{}'", char::from(*b).escape_default())
            }
            ProtocolError::ExpectedCrlf => f.write_str("expected CRLF after bulk data"),
            ProtocolError::TooBigInline => f.write_str("too big inline request"),
            ProtocolError::TooBigMbulkCount => f.write_str("too big mbulk count string"),
            ProtocolError::TooBigBulkCount => f.write_str("too big bulk count string"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// An incremental request parser (see the module doc). One per
/// connection.
#[derive(Debug, Default)]
pub struct Parser {
    /// The arguments of the request being parsed (complete ones), as
    /// ranges of the bytes passed to [`Parser::parse`].
    args: Vec<Range<usize>>,
    /// The number of arguments of the array being parsed; 0 while no
    /// array header has been read.
    expected: usize,
    /// Where parsing goes on: the first byte not yet accounted for.
    pos: usize,
}

impl Parser {
    pub fn new() -> Parser {
        Parser::default()
    }

    /// Parses the request at the start of `buf`, which holds the bytes
    /// received from the start of that request on (the same start on
    /// every call until the request is complete, with more bytes after
    /// each read).
    ///
    /// `Ok(Some(len))`: a complete request of `len` bytes, whose
    /// arguments are [`Parser::args`] (none: no command, answer nothing);
    /// the next request starts at `buf[len..]`. `Ok(None)`: the request
    /// is not complete; call again with more bytes. `Err`: a protocol
    /// error; the connection must be closed.
    pub fn parse(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        if self.expected == 0 {
            self.args.clear();
            self.pos = 0;
            match buf.first() {
                None => return Ok(None),
                Some(b'*') => {}
                Some(_) => return self.inline(buf),
            }
            let Some((n, next)) = number_line(buf, 1, ProtocolError::TooBigMbulkCount)? else {
                return Ok(None);
            };
            let n = n.ok_or(ProtocolError::InvalidMultibulkLength)?;
            if n > MAX_ARGS as i64 {
                return Err(ProtocolError::InvalidMultibulkLength);
            }
            if n <= 0 {
                return Ok(Some(next));
            }
            self.expected = n as usize;
            self.pos = next;
            // Not above MAX_ARGS; grows as arguments arrive.
            self.args.reserve(self.expected.min(64));
        }
        while self.args.len() < self.expected {
            let Some(&first) = buf.get(self.pos) else {
                return Ok(None);
            };
            if first != b'$' {
                return Err(ProtocolError::ExpectedDollar(first));
            }
            let Some((len, data)) = number_line(buf, self.pos + 1, ProtocolError::TooBigBulkCount)?
            else {
                return Ok(None);
            };
            let len = len
                .filter(|&l| (0..=MAX_BULK as i64).contains(&l))
                .ok_or(ProtocolError::InvalidBulkLength)? as usize;
            let end = data + len;
            if buf.len() < end + 2 {
                return Ok(None);
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(ProtocolError::ExpectedCrlf);
            }
            self.args.push(data..end);
            self.pos = end + 2;
        }
        self.expected = 0;
        Ok(Some(self.pos))
    }

    /// The arguments of the request [`Parser::parse`] just completed, as
    /// ranges of the bytes it was given.
    pub fn args(&self) -> &[Range<usize>] {
        &self.args
    }

    fn inline(&mut self, buf: &[u8]) -> Result<Option<usize>, ProtocolError> {
        let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
            return if buf.len() > MAX_INLINE {
                Err(ProtocolError::TooBigInline)
            } else {
                Ok(None)
            };
        };
        if nl > MAX_INLINE {
            return Err(ProtocolError::TooBigInline);
        }
        let line = &buf[..nl];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let mut i = 0;
        while i < line.len() {
            if line[i] == b' ' || line[i] == b'\t' {
                i += 1;
                continue;
            }
            let start = i;
            while i < line.len() && line[i] != b' ' && line[i] != b'\t' {
                i += 1;
            }
            self.args.push(start..i);
        }
        Ok(Some(nl + 1))
    }
}

/// A complete number line: its number (if it is one) and the first byte
/// after it; `None`: not complete yet.
type NumberLine = Option<(Option<i64>, usize)>;

/// Reads the number of the line that starts at `buf[from..]` and ends in
/// `\r\n`: `Ok(None)` if the line is not complete (and not too long:
/// `too_long` if it is); `Ok(Some((number, next)))` with `next` the
/// first byte after the line and `number` `None` if the line is not a
/// decimal integer (an optional `-`, then 1 to 18 digits).
#[inline]
fn number_line(
    buf: &[u8],
    from: usize,
    too_long: ProtocolError,
) -> Result<NumberLine, ProtocolError> {
    match plain_number_line(buf, from) {
        Some(line) => Ok(Some(line)),
        None => any_number_line(buf, from, too_long),
    }
}

/// The line every client sends: an optional `-`, 1 to 18 digits and
/// `\r\n`, read in one pass. `None`: the bytes at `buf[from..]` are not
/// such a line (yet); [`any_number_line`] says what they are.
#[inline]
fn plain_number_line(buf: &[u8], from: usize) -> Option<(Option<i64>, usize)> {
    let rest = buf.get(from..)?;
    let negative = rest.first() == Some(&b'-');
    let start = usize::from(negative);
    let mut i = start;
    let mut n: i64 = 0;
    while let Some(&d) = rest.get(i) {
        if !d.is_ascii_digit() {
            break;
        }
        if i - start == 18 {
            return None;
        }
        n = n * 10 + i64::from(d - b'0');
        i += 1;
    }
    if i == start || rest.get(i..i + 2)? != b"\r\n" {
        return None;
    }
    Some((Some(if negative { -n } else { n }), from + i + 2))
}

/// [`number_line`] for any bytes: a line of another form, an incomplete
/// one or one too long.
fn any_number_line(
    buf: &[u8],
    from: usize,
    too_long: ProtocolError,
) -> Result<NumberLine, ProtocolError> {
    let rest = &buf[from.min(buf.len())..];
    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
        return if rest.len() > MAX_INLINE {
            Err(too_long)
        } else {
            Ok(None)
        };
    };
    if nl > MAX_INLINE {
        return Err(too_long);
    }
    let number = rest[..nl].strip_suffix(b"\r").and_then(parse_i64);
    Ok(Some((number, from + nl + 1)))
}

/// A decimal integer: an optional `-` and 1 to 18 digits (so that it
/// cannot overflow).
fn parse_i64(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, s),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'));
    Some(if negative { -n } else { n })
}

/// Parses an argument as a decimal integer, as Redis does for `EX`
/// (digits with an optional `-`, no spaces, no `+`).
pub fn parse_int(arg: &[u8]) -> Option<i64> {
    parse_i64(arg)
}

/// Appends the decimal digits of `n` to `out` (no allocation).
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// `+<s>\r\n`. `s` must not hold `\r` or `\n`.
pub fn simple(out: &mut Vec<u8>, s: &str) {
    out.push(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `+OK\r\n`.
pub fn ok(out: &mut Vec<u8>) {
    out.extend_from_slice(b"+OK\r\n");
}

/// `-<msg>\r\n`; line breaks in `msg` become spaces (as Redis does), so
/// the reply stays one line whatever the message quotes.
pub fn error(out: &mut Vec<u8>, msg: &str) {
    out.push(b'-');
    out.extend(
        msg.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// `:<n>\r\n`.
pub fn integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    if n < 0 {
        out.push(b'-');
    }
    push_u64(out, n.unsigned_abs());
    out.extend_from_slice(b"\r\n");
}

/// `$<len>\r\n<bytes>\r\n`.
pub fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    push_u64(out, bytes.len() as u64);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// The null bulk string, `$-1\r\n` (`GET` of a missing key).
pub fn nil(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

/// `*<n>\r\n`, the header of an array of `n` replies that follow.
pub fn array(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    push_u64(out, n as u64);
    out.extend_from_slice(b"\r\n");
}

/// A request as a client sends it: an array of bulk strings.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    array(out, args.len());
    for a in args {
        bulk(out, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses every complete request of `buf`: their arguments, and the
    /// bytes they took.
    fn parse_all(buf: &[u8]) -> (Vec<Vec<Vec<u8>>>, usize) {
        let mut p = Parser::new();
        let mut at = 0;
        let mut requests = Vec::new();
        while let Some(len) = p.parse(&buf[at..]).unwrap() {
            let args = p.args().iter().map(|r| buf[at..][r.clone()].to_vec());
            requests.push(args.collect());
            at += len;
        }
        (requests, at)
    }

    /// Every string of up to 6 bytes over `-`, `0`, `7`, `\r`, `\n` and
    /// `x`, and runs of up to 21 digits with and without a `-` and a
    /// `\r\n`, at offsets 0 and 2: the one-pass reading of a number line
    /// gives what the general reading gives.
    #[test]
    fn number_lines_read_in_one_pass_equal_the_general_reading() {
        let alphabet = b"-07\r\nx";
        let mut cases: Vec<Vec<u8>> = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 0..6 {
            let next: Vec<Vec<u8>> = last
                .iter()
                .flat_map(|s: &Vec<u8>| {
                    alphabet.iter().map(move |&b| {
                        let mut t = s.clone();
                        t.push(b);
                        t
                    })
                })
                .collect();
            cases.extend(next.iter().cloned());
            last = next;
        }
        for digits in 1..=21 {
            for sign in ["", "-"] {
                for end in ["", "\r", "\r\n", "\n", "\r\nx"] {
                    let line = format!("{sign}{}{end}", "9".repeat(digits));
                    cases.push(line.into_bytes());
                }
            }
        }
        for case in &cases {
            for pad in [0, 2] {
                let mut buf = b"$$".to_vec();
                buf.truncate(pad);
                buf.extend_from_slice(case);
                let err = ProtocolError::TooBigBulkCount;
                assert_eq!(
                    number_line(&buf, pad, err),
                    any_number_line(&buf, pad, err),
                    "{:?}",
                    String::from_utf8_lossy(&buf)
                );
            }
        }
    }

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn arrays_and_inline_commands_parse_in_order() {
        let buf =
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\nGET  k\t x\r\nPING\n\r\n*0\r\n*1\r\n$4\r\nPI";
        let (requests, used) = parse_all(buf);
        assert_eq!(
            requests,
            vec![
                args(&["SET", "k", ""]),
                args(&["GET", "k", "x"]),
                args(&["PING"]),
                vec![], // an empty line
                vec![], // *0
            ]
        );
        assert_eq!(&buf[used..], b"*1\r\n$4\r\nPI");
    }

    /// Fed one byte at a time, the parser finds the same requests as with
    /// the whole buffer, each only once its last byte is there.
    #[test]
    fn requests_split_across_reads_at_every_byte() {
        let buf = b"*2\r\n$4\r\nECHO\r\n$12\r\nhello\r\nworld\r\nDBSIZE\r\n*1\r\n$4\r\nPING\r\n";
        let (whole, _) = parse_all(buf);
        assert_eq!(whole.len(), 3);
        let mut p = Parser::new();
        let (mut start, mut found) = (0, Vec::new());
        for end in 0..=buf.len() {
            while let Some(len) = p.parse(&buf[start..end]).unwrap() {
                let args = p.args().iter().map(|r| buf[start..][r.clone()].to_vec());
                found.push(args.collect::<Vec<_>>());
                start += len;
                // Complete exactly at its last byte.
                assert_eq!(start, end);
            }
        }
        assert_eq!(found, whole);
        assert_eq!(found[0], args(&["ECHO", "hello\r\nworld"]));
    }

    #[test]
    fn negative_counts_are_no_command() {
        let (requests, used) = parse_all(b"*-1\r\n");
        assert_eq!((requests, used), (vec![vec![]], 5));
    }

    fn error_of(buf: &[u8]) -> ProtocolError {
        let mut p = Parser::new();
        let mut at = 0;
        loop {
            match p.parse(&buf[at..]) {
                Ok(Some(len)) => at += len,
                Ok(None) => panic!("no error in {:?}", String::from_utf8_lossy(buf)),
                Err(e) => return e,
            }
        }
    }

    #[test]
    fn malformed_requests_are_protocol_errors() {
        use ProtocolError::*;
        assert_eq!(error_of(b"*x\r\n"), InvalidMultibulkLength);
        assert_eq!(error_of(b"*1x\r\n"), InvalidMultibulkLength);
        assert_eq!(error_of(b"*\r\n"), InvalidMultibulkLength);
        assert_eq!(error_of(b"*2\n"), InvalidMultibulkLength);
        assert_eq!(error_of(b"*1048577\r\n"), InvalidMultibulkLength);
        assert_eq!(
            error_of(b"*99999999999999999999\r\n"),
            InvalidMultibulkLength
        );
        assert_eq!(error_of(b"*1\r\n$x\r\n"), InvalidBulkLength);
        assert_eq!(error_of(b"*1\r\n$-1\r\n"), InvalidBulkLength);
        assert_eq!(error_of(b"*1\r\n$16777217\r\n"), InvalidBulkLength);
        assert_eq!(error_of(b"*1\r\n:1\r\n"), ExpectedDollar(b':'));
        assert_eq!(error_of(b"*1\r\n$2\r\nabc\r\n"), ExpectedCrlf);
        // A valid request before the bad one is parsed first.
        assert_eq!(
            error_of(b"PING\r\n*2\r\n$4\r\nPING\r\n+x\r\n"),
            ExpectedDollar(b'+')
        );
        assert_eq!(
            ExpectedDollar(b'+').to_string(),
            "Protocol error: expected '$', got '+'"
        );
        assert_eq!(
            InvalidBulkLength.to_string(),
            "Protocol error: invalid bulk length"
        );
    }

    #[test]
    fn lines_longer_than_the_limit_are_refused_before_their_end() {
        let mut long = vec![b'a'; MAX_INLINE + 1];
        assert_eq!(error_of(&long), ProtocolError::TooBigInline);
        long.insert(0, b'*');
        assert_eq!(error_of(&long), ProtocolError::TooBigMbulkCount);
        let mut bulk = b"*1\r\n$".to_vec();
        bulk.extend(vec![b'1'; MAX_INLINE + 1]);
        assert_eq!(error_of(&bulk), ProtocolError::TooBigBulkCount);
        // Up to the limit, an unfinished line waits for more bytes.
        let mut p = Parser::new();
        assert_eq!(p.parse(&vec![b'a'; MAX_INLINE]), Ok(None));
    }

    #[test]
    fn the_largest_bulk_is_accepted() {
        let mut buf = format!("*1\r\n${MAX_BULK}\r\n").into_bytes();
        let data = buf.len();
        buf.resize(data + MAX_BULK, b'v');
        let mut p = Parser::new();
        assert_eq!(p.parse(&buf), Ok(None));
        buf.extend_from_slice(b"\r\n");
        assert_eq!(p.parse(&buf), Ok(Some(buf.len())));
        assert_eq!(p.args().len(), 1);
        assert_eq!(p.args()[0], data..data + MAX_BULK);
    }

    #[test]
    fn replies_encode_as_resp2() {
        let mut out = Vec::new();
        ok(&mut out);
        simple(&mut out, "PONG");
        error(&mut out, "ERR bad\r\nline");
        integer(&mut out, -12);
        integer(&mut out, 0);
        bulk(&mut out, b"a\r\nb");
        nil(&mut out);
        array(&mut out, 2);
        command(&mut out, &[b"GET", b"k"]);
        assert_eq!(
            out,
            b"+OK\r\n+PONG\r\n-ERR bad  line\r\n:-12\r\n:0\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n\
              *2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
        );
        let (requests, _) = parse_all(&out[out.len() - 20..]);
        assert_eq!(requests, vec![args(&["GET", "k"])]);
    }
}
