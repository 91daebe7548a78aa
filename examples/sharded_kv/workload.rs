//! What the load client sends, prepared before the run, and how it reads
//! the answers, so that the client spends little CPU per request (it
//! shares the machine with the server).
//!
//! * Each connection's requests are encoded once, before the measured
//!   phase, into a [`RequestRing`]: [`RING`] request lines, laid out twice
//!   in a row so that any run of up to [`RING`] consecutive requests,
//!   wrapping or not, is one contiguous slice. Sending `n` requests is one
//!   `write` of a slice of it: no formatting, no allocation, no copy.
//!   A connection's requests repeat every [`RING`] requests.
//! * The answers are counted by their line ends ([`scan_replies`]), with a
//!   look at the first bytes of each line for `ERR`; nothing is parsed or
//!   allocated.

use crate::protocol::{Request, Response};
use crate::store::shard_of;

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

/// The complete answer lines at the front of a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replies {
    pub lines: usize,
    pub errors: usize,
    /// Bytes of those lines; the rest is an incomplete line.
    pub used: usize,
}

/// Counts the complete lines at the front of `buf` and the `ERR` lines
/// among them.
pub fn scan_replies(buf: &[u8]) -> Replies {
    let mut r = Replies {
        lines: 0,
        errors: 0,
        used: 0,
    };
    while let Some(pos) = buf[r.used..].iter().position(|&b| b == b'\n') {
        r.errors += usize::from(Response::line_is_error(&buf[r.used..]));
        r.lines += 1;
        r.used += pos + 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::parse_request;

    fn lines(bytes: &[u8]) -> Vec<&[u8]> {
        bytes.split_inclusive(|&b| b == b'\n').collect()
    }

    #[test]
    fn ring_slices_wrap_and_repeat() {
        let keys: Vec<u64> = (0..100).collect();
        let mut ring = RequestRing::new(&keys, 5, &mut Rng(7));
        let first: Vec<Vec<u8>> = lines(ring.take(5))
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        assert_eq!(first.len(), 5);
        for line in &first {
            let req = parse_request(line.strip_suffix(b"\n").unwrap()).unwrap();
            let k: u64 = std::str::from_utf8(&req.key()[4..])
                .unwrap()
                .parse()
                .unwrap();
            assert!(k < 100);
        }
        // 3, then 4 wrapping past the end: requests 0..3, then 3, 4, 0, 1.
        assert_eq!(
            lines(ring.take(3)),
            first[..3].iter().map(Vec::as_slice).collect::<Vec<_>>()
        );
        let wrapped = lines(ring.take(4));
        let expected: Vec<&[u8]> = [3, 4, 0, 1].iter().map(|&i| first[i].as_slice()).collect();
        assert_eq!(wrapped, expected);
        assert_eq!(ring.size(), 5);
    }

    #[test]
    fn ring_draws_only_the_given_keys() {
        let by_shard = keys_by_shard(1000, 2);
        assert_eq!(by_shard[0].len() + by_shard[1].len(), 1000);
        let mut ring = RequestRing::new(&by_shard[1], 200, &mut Rng(3));
        for line in lines(ring.take(200)) {
            let req = parse_request(line.strip_suffix(b"\n").unwrap()).unwrap();
            assert_eq!(shard_of(req.key(), 2), 1);
        }
    }

    #[test]
    fn replies_are_counted_by_line_ends() {
        let buf = b"OK\nVALUE v\nERR no\nNIL\nVAL";
        assert_eq!(
            scan_replies(buf),
            Replies {
                lines: 4,
                errors: 1,
                used: buf.len() - 3
            }
        );
        assert_eq!(
            scan_replies(b""),
            Replies {
                lines: 0,
                errors: 0,
                used: 0
            }
        );
    }
}
