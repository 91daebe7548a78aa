//! What the load client sends, prepared before the run, and how it reads
//! the replies, so that the client spends little CPU per request (it
//! shares the machine with the server).
//!
//! * Each connection's requests are encoded once, before the measured
//!   phase, into a [`RequestRing`]: [`RING`] requests in RESP2 (arrays of
//!   bulk strings), laid out twice in a row so that any run of up to
//!   [`RING`] consecutive requests, wrapping or not, is one contiguous
//!   slice. Sending `n` requests is one `write` of a slice of it: no
//!   formatting, no allocation, no copy. A connection's requests repeat
//!   every [`RING`] requests.
//! * The replies are counted by their framing ([`scan_replies`]), with a
//!   look at the first byte of each for `-` (an error); nothing is
//!   allocated.

use crate::server::resp;
use crate::server::store::shard_of;

/// Requests prepared per connection (at least `--depth`).
pub const RING: usize = 8192;

/// The name of key number `k`.
pub fn key_name(k: u64) -> Vec<u8> {
    format!("key:{k}").into_bytes()
}

/// A value for key `k`.
pub fn value_for(k: u64, version: u64) -> Vec<u8> {
    format!("value-{k:08}-{version:08}").into_bytes()
}

/// The keys `0..keys`, split by the shard that owns them among `shards`
/// (the server's own function, [`shard_of`]).
pub fn keys_by_shard(keys: u64, shards: usize) -> Vec<Vec<u64>> {
    let mut by_shard = vec![Vec::new(); shards];
    for k in 0..keys {
        by_shard[shard_of(&key_name(k), shards)].push(k);
    }
    by_shard
}

/// A request of the client's mix.
#[derive(Debug)]
pub enum Request {
    Get(Vec<u8>),
    Set(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
}

impl Request {
    /// Appends the request in RESP2 to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Request::Get(k) => resp::command(out, &[b"GET", k]),
            Request::Set(k, v) => resp::command(out, &[b"SET", k, v]),
            Request::Del(k) => resp::command(out, &[b"DEL", k]),
        }
    }
}

/// A small xorshift generator: the request mix needs no more.
pub struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// 90% GET, 8% SET, 2% DEL, on a key chosen uniformly from `keys`.
    fn request(&mut self, keys: &[u64]) -> Request {
        let k = keys[(self.next() % keys.len() as u64) as usize];
        match self.next() % 100 {
            0..90 => Request::Get(key_name(k)),
            90..98 => Request::Set(key_name(k), value_for(k, self.next() % 1000)),
            _ => Request::Del(key_name(k)),
        }
    }
}

/// A connection's requests, encoded before the run (see the module doc).
pub struct RequestRing {
    /// The `len` request lines, then the same lines again.
    bytes: Vec<u8>,
    /// `starts[i]`: where request `i` of `bytes` begins, for `i` in
    /// `0..=2 * len` (the last entry is `bytes.len()`).
    starts: Vec<usize>,
    len: usize,
    next: usize,
}

impl RequestRing {
    /// `len` requests (at least one) of the mix of [`Rng::request`] on
    /// `keys` (not empty).
    pub fn new(keys: &[u64], len: usize, rng: &mut Rng) -> RequestRing {
        let len = len.max(1);
        let mut once = Vec::new();
        let mut starts = Vec::with_capacity(2 * len + 1);
        for _ in 0..len {
            starts.push(once.len());
            rng.request(keys).encode(&mut once);
        }
        let size = once.len();
        starts.extend_from_within(..);
        for s in &mut starts[len..] {
            *s += size;
        }
        starts.push(2 * size);
        once.extend_from_within(..);
        RequestRing {
            bytes: once,
            starts,
            len,
            next: 0,
        }
    }

    /// The number of requests prepared: the most one
    /// [`RequestRing::take`] returns.
    pub fn size(&self) -> usize {
        self.len
    }

    /// The next `n` requests (`n` at most [`RequestRing::size`]), as one
    /// slice of request lines.
    pub fn take(&mut self, n: usize) -> &[u8] {
        assert!(n <= self.len, "at most {} requests at a time", self.len);
        let from = self.next;
        self.next = (from + n) % self.len;
        &self.bytes[self.starts[from]..self.starts[from + n]]
    }
}

/// The longest reply the client expects (its values are short): a
/// connection whose unanswered bytes grow beyond it fails.
pub const MAX_REPLY: usize = 1 << 20;

/// The complete replies at the front of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replies {
    pub count: usize,
    pub errors: usize,
    /// Bytes of those replies; the rest is an incomplete reply.
    pub used: usize,
}

/// Counts the complete replies at the front of `buf` (RESP2: simple
/// strings, errors, integers, bulk strings, arrays of them), and the
/// errors among them.
pub fn scan_replies(buf: &[u8]) -> Replies {
    let mut r = Replies {
        count: 0,
        errors: 0,
        used: 0,
    };
    while let Some(end) = reply_end(buf, r.used) {
        r.errors += usize::from(buf[r.used] == b'-');
        r.count += 1;
        r.used = end;
    }
    r
}

/// The end of the reply that starts at `buf[at..]`, if it is complete
/// (a malformed reply never is: the client then fails on its size).
fn reply_end(buf: &[u8], at: usize) -> Option<usize> {
    let kind = *buf.get(at)?;
    let nl = at + buf[at..].iter().position(|&b| b == b'\n')?;
    let next = nl + 1;
    let number = || -> Option<i64> {
        std::str::from_utf8(buf[at + 1..nl].strip_suffix(b"\r")?)
            .ok()?
            .parse()
            .ok()
    };
    match kind {
        b'+' | b'-' | b':' => Some(next),
        b'$' => match number()? {
            n if n < 0 => Some(next),
            n => {
                let end = next + n as usize + 2;
                (end <= buf.len()).then_some(end)
            }
        },
        b'*' => {
            let mut end = next;
            for _ in 0..number()?.max(0) {
                end = reply_end(buf, end)?;
            }
            Some(end)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::resp::Parser;

    /// The requests of `bytes`, each as its arguments.
    fn requests(bytes: &[u8]) -> Vec<Vec<Vec<u8>>> {
        let mut p = Parser::new();
        let (mut at, mut all) = (0, Vec::new());
        while let Some(len) = p.parse(&bytes[at..]).unwrap() {
            all.push(
                p.args()
                    .iter()
                    .map(|r| bytes[at..][r.clone()].to_vec())
                    .collect(),
            );
            at += len;
        }
        assert_eq!(at, bytes.len());
        all
    }

    #[test]
    fn ring_slices_wrap_and_repeat() {
        let keys: Vec<u64> = (0..100).collect();
        let mut ring = RequestRing::new(&keys, 5, &mut Rng(7));
        let first = requests(ring.take(5));
        assert_eq!(first.len(), 5);
        for args in &first {
            assert!(matches!(&args[0][..], b"GET" | b"SET" | b"DEL"));
            let k: u64 = std::str::from_utf8(&args[1][4..]).unwrap().parse().unwrap();
            assert!(k < 100);
        }
        // 3, then 4 wrapping past the end: requests 0..3, then 3, 4, 0, 1.
        assert_eq!(requests(ring.take(3)), first[..3]);
        let expected: Vec<_> = [3, 4, 0, 1].iter().map(|&i| first[i].clone()).collect();
        assert_eq!(requests(ring.take(4)), expected);
        assert_eq!(ring.size(), 5);
    }

    #[test]
    fn ring_draws_only_the_given_keys() {
        let by_shard = keys_by_shard(1000, 2);
        assert_eq!(by_shard[0].len() + by_shard[1].len(), 1000);
        let mut ring = RequestRing::new(&by_shard[1], 200, &mut Rng(3));
        for args in requests(ring.take(200)) {
            assert_eq!(shard_of(&args[1], 2), 1);
        }
    }

    #[test]
    fn replies_are_counted_by_their_framing() {
        let buf =
            b"+OK\r\n$1\r\nv\r\n-ERR no\r\n$-1\r\n:3\r\n*2\r\n$1\r\na\r\n$-1\r\n*0\r\n$5\r\nval";
        assert_eq!(
            scan_replies(buf),
            Replies {
                count: 7,
                errors: 1,
                used: buf.len() - 7
            }
        );
        // An array is complete only with all its elements.
        assert_eq!(scan_replies(b"*2\r\n$1\r\na\r\n").count, 0);
        assert_eq!(
            scan_replies(b""),
            Replies {
                count: 0,
                errors: 0,
                used: 0
            }
        );
    }
}
