//! One shard of the store: a hash map that lives on one core.
//!
//! Each core of the pool is one OS thread, so the shard is a thread-local:
//! the tasks of that core reach it without locks, and no other thread
//! ever sees it. An operation on a key of another shard is not done here;
//! the connection (commands.rs) sends it to the core that owns the key,
//! which runs [`apply_batch`] on its own thread.
//!
//! `DEL` does not remove the entry: it leaves a tombstone, as
//! log-structured stores do, and the background pass ([`snapshot_pass`])
//! drops the tombstones, and the entries whose time to live has run out,
//! while it writes a snapshot of the live entries. An expired entry is
//! never returned: a read that finds one turns it into a tombstone. As in
//! Redis, `DBSIZE` counts the expired entries not yet found.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The shard that owns `key` among `shards`: FNV-1a, the same on every
/// thread and in every run.
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    if shards == 1 {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % shards as u64) as usize
}

/// An operation on one shard, as forwarded to the core that owns it.
#[derive(Debug)]
pub enum Op {
    Get(Vec<u8>),
    Set(Vec<u8>, Vec<u8>, Option<Duration>),
    Del(Vec<u8>),
    Exists(Vec<u8>),
    /// The shard's number of keys.
    Len,
    /// Removes every key of the shard.
    Flush,
}

/// The result of an [`Op`].
#[derive(Debug, PartialEq, Eq)]
pub enum OpResult {
    /// `Get`: the value, if the key has one.
    Value(Option<Vec<u8>>),
    /// `Set`, `Flush`.
    Done,
    /// `Del`, `Exists`: 0 or 1; `Len`: the number of keys.
    Count(u64),
}

/// What a shard counted, for the summary at the end.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardStats {
    /// Operations applied to this shard (its own and forwarded ones).
    pub applied: u64,
    /// Of those, operations that arrived on another core and were forwarded.
    pub forwarded_in: u64,
    /// Completed background passes.
    pub passes: u64,
    /// Tombstones and expired entries the background passes removed.
    pub tombstones_dropped: u64,
    /// Live entries and bytes of the latest snapshot.
    pub snapshot_entries: u64,
    pub snapshot_bytes: u64,
    /// Entries in the map now (tombstones included).
    pub entries: u64,
}

struct Entry {
    /// `None`: a tombstone left by `DEL` (or by a read of an expired entry).
    value: Option<Vec<u8>>,
    /// When the value expires (`SET ... EX/PX`).
    expires: Option<Instant>,
}

impl Entry {
    /// The value, unless the entry is a tombstone or has expired (then it
    /// becomes a tombstone, and `live` drops by one).
    fn live_value(&mut self, live: &mut u64) -> Option<&mut Vec<u8>> {
        if let (Some(_), Some(at)) = (&self.value, self.expires) {
            if Instant::now() >= at {
                self.value = None;
                self.expires = None;
                *live -= 1;
            }
        }
        self.value.as_mut()
    }
}

/// The hash of the shard's map: FNV-1a with a final mix (the keys of one
/// shard share their FNV-1a value modulo the number of shards, so its low
/// bits alone would crowd the table). Fast on short keys; not resistant to
/// keys chosen to collide (std's `RandomState` is: use it for a server
/// that untrusted clients reach).
pub struct KeyHasher(u64);

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        // splitmix64's finaliser.
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The entries of a shard in a vector, found by key through a hash map
/// of positions, so that a background pass can walk them by position and
/// resume where it left off after a yield. The key's bytes are allocated
/// once and shared by the vector and the map.
#[derive(Default)]
struct Entries {
    slots: Vec<(Rc<[u8]>, Entry)>,
    position: HashMap<Rc<[u8]>, usize, BuildHasherDefault<KeyHasher>>,
}

impl Entries {
    fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let at = *self.position.get(key)?;
        Some(&mut self.slots[at].1)
    }

    /// Adds `key`, which has no entry yet.
    fn insert_new(&mut self, key: &[u8], entry: Entry) {
        let key: Rc<[u8]> = Rc::from(key);
        let previous = self.position.insert(Rc::clone(&key), self.slots.len());
        debug_assert!(previous.is_none(), "insert_new of a present key");
        self.slots.push((key, entry));
    }

    fn get_index(&self, at: usize) -> Option<(&[u8], &Entry)> {
        self.slots.get(at).map(|(k, e)| (&k[..], e))
    }

    /// Removes the entry at `at` and moves the last entry into its place.
    fn swap_remove_index(&mut self, at: usize) {
        let (key, _) = self.slots.swap_remove(at);
        self.position.remove(&key[..]);
        if let Some((moved, _)) = self.slots.get(at) {
            *self
                .position
                .get_mut(&moved[..])
                .expect("every slot's key has a position") = at;
        }
    }

    fn len(&self) -> usize {
        self.slots.len()
    }

    fn clear(&mut self) {
        self.slots.clear();
        self.position.clear();
    }
}

/// One core's shard.
#[derive(Default)]
pub struct Shard {
    map: Entries,
    /// Entries with a value (not tombstones), expired ones not yet found
    /// included.
    live: u64,
    stats: ShardStats,
}

thread_local! {
    static SHARD: RefCell<Shard> = RefCell::new(Shard::default());
}

/// Runs `f` on this thread's shard. `f` must not call `with_shard`.
pub fn with_shard<R>(f: impl FnOnce(&mut Shard) -> R) -> R {
    SHARD.with_borrow_mut(f)
}

/// Applies operations to this thread's shard, in order. `forwarded` says
/// whether they came from another core (only counted).
pub fn apply_batch(ops: Vec<Op>, forwarded: bool) -> Vec<OpResult> {
    with_shard(|shard| {
        if forwarded {
            shard.stats.forwarded_in += ops.len() as u64;
        }
        ops.into_iter().map(|op| shard.apply(op)).collect()
    })
}

impl Shard {
    fn apply(&mut self, op: Op) -> OpResult {
        match op {
            Op::Get(k) => OpResult::Value(self.get(&k).map(<[u8]>::to_vec)),
            Op::Set(k, v, ttl) => {
                self.set(&k, &v, ttl);
                OpResult::Done
            }
            Op::Del(k) => OpResult::Count(u64::from(self.del(&k))),
            Op::Exists(k) => OpResult::Count(u64::from(self.exists(&k))),
            Op::Len => OpResult::Count(self.len()),
            Op::Flush => {
                self.flush();
                OpResult::Done
            }
        }
    }

    /// The value of `key`, if it has a live one.
    pub fn get(&mut self, key: &[u8]) -> Option<&[u8]> {
        self.stats.applied += 1;
        let entry = self.map.get_mut(key)?;
        entry.live_value(&mut self.live).map(|v| &v[..])
    }

    /// Sets `key` to `value`, which expires after `ttl` (never: `None`,
    /// which also clears an earlier time to live, as in Redis).
    pub fn set(&mut self, key: &[u8], value: &[u8], ttl: Option<Duration>) {
        self.stats.applied += 1;
        let expires = ttl.map(|t| Instant::now() + t);
        match self.map.get_mut(key) {
            Some(entry) => {
                match &mut entry.value {
                    // The old value's allocation is reused.
                    Some(old) => {
                        old.clear();
                        old.extend_from_slice(value);
                    }
                    None => {
                        entry.value = Some(value.to_vec());
                        self.live += 1;
                    }
                }
                entry.expires = expires;
            }
            None => {
                let value = Some(value.to_vec());
                self.map.insert_new(key, Entry { value, expires });
                self.live += 1;
            }
        }
    }

    /// Deletes `key`; whether it had a live value.
    pub fn del(&mut self, key: &[u8]) -> bool {
        self.stats.applied += 1;
        let Some(entry) = self.map.get_mut(key) else {
            return false;
        };
        if entry.live_value(&mut self.live).is_none() {
            return false;
        }
        entry.value = None;
        entry.expires = None;
        self.live -= 1;
        true
    }

    /// Whether `key` has a live value.
    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// The number of keys (expired ones not yet found included).
    pub fn len(&mut self) -> u64 {
        self.stats.applied += 1;
        self.live
    }

    /// Removes every entry.
    pub fn flush(&mut self) {
        self.stats.applied += 1;
        self.map.clear();
        self.live = 0;
    }
}

/// This thread's shard counters.
pub fn stats() -> ShardStats {
    SHARD.with_borrow(|shard| ShardStats {
        entries: shard.map.len() as u64,
        ..shard.stats
    })
}

/// Entries a background pass handles between two yields.
const CHUNK: usize = 64;

/// One background pass over this thread's shard: writes the live entries
/// into `snapshot` (each as a little-endian `u32` length and the bytes of
/// the key, then the same for the value) and removes the tombstones and
/// the expired entries.
///
/// The pass walks the entries by position, [`CHUNK`] at a time, and calls
/// `tourbillon::task::yield_now()` between chunks, so the requests on the
/// foreground queue run in between (the executor decides, by the queues'
/// shares, when the pass continues). It holds the map only during a chunk
/// and resumes at the position it reached, so requests may change the map
/// between chunks: the snapshot is fuzzy (each entry as it was when its
/// chunk was written; a key added meanwhile is in it, at the end), as the
/// snapshots of many in-memory stores are. Requests never remove an entry
/// (`DEL` leaves a tombstone) and the pass removes one by moving the last
/// entry into its place, which it then looks at: no entry is skipped.
pub async fn snapshot_pass(snapshot: &mut Vec<u8>) {
    snapshot.clear();
    let mut at = 0;
    let mut written = 0u64;
    loop {
        let finished = SHARD.with_borrow_mut(|shard| {
            let now = Instant::now();
            for _ in 0..CHUNK {
                let Some((k, entry)) = shard.map.get_index(at) else {
                    break;
                };
                match &entry.value {
                    Some(v) if entry.expires.is_none_or(|t| now < t) => {
                        written += 1;
                        for part in [k, v] {
                            snapshot.extend_from_slice(&(part.len() as u32).to_le_bytes());
                            snapshot.extend_from_slice(part);
                        }
                        at += 1;
                    }
                    dead => {
                        // An expired value still counted as live.
                        if dead.is_some() {
                            shard.live -= 1;
                        }
                        shard.stats.tombstones_dropped += 1;
                        shard.map.swap_remove_index(at);
                    }
                }
            }
            at >= shard.map.len()
        });
        if finished {
            break;
        }
        tourbillon::task::yield_now().await;
    }
    SHARD.with_borrow_mut(|shard| {
        shard.stats.passes += 1;
        shard.stats.snapshot_entries = written;
        shard.stats.snapshot_bytes = snapshot.len() as u64;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_keep_the_live_count() {
        let mut s = Shard::default();
        s.set(b"a", b"1", None);
        s.set(b"b", b"2", None);
        s.set(b"a", b"3", None);
        assert_eq!(s.get(b"a"), Some(&b"3"[..]));
        assert_eq!(s.len(), 2);
        assert!(s.del(b"a"));
        assert!(!s.del(b"a"));
        assert!(!s.exists(b"a"));
        assert_eq!(s.len(), 1);
        s.set(b"a", b"4", None);
        assert_eq!(s.len(), 2);
        s.flush();
        assert_eq!((s.len(), s.get(b"b")), (0, None));
    }

    #[test]
    fn an_expired_value_is_gone() {
        let mut s = Shard::default();
        // Expired at once: a zero time to live is already over when read.
        s.set(b"k", b"v", Some(Duration::ZERO));
        s.set(b"long", b"v", Some(Duration::from_secs(3600)));
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(b"k"), None);
        assert_eq!(s.len(), 1);
        assert!(!s.del(b"k"));
        assert_eq!(s.get(b"long"), Some(&b"v"[..]));
        // SET without a time to live clears it.
        s.set(b"k", b"w", Some(Duration::ZERO));
        s.set(b"k", b"x", None);
        assert_eq!(s.get(b"k"), Some(&b"x"[..]));
    }

    #[test]
    fn a_pass_writes_the_live_entries_and_drops_the_dead() {
        with_shard(|s| {
            for i in 0..1000u32 {
                s.set(format!("k{i}").as_bytes(), &i.to_le_bytes(), None);
            }
            for i in (0..1000u32).step_by(3) {
                assert!(s.del(format!("k{i}").as_bytes()));
            }
            s.set(b"k1", b"gone", Some(Duration::ZERO));
        });
        let mut snapshot = Vec::new();
        futures::executor::block_on(snapshot_pass(&mut snapshot));
        // 1000 - 334 deleted - 1 expired.
        let st = stats();
        assert_eq!(
            (st.snapshot_entries, st.entries, st.tombstones_dropped),
            (665, 665, 335)
        );
        assert_eq!(with_shard(|s| s.len()), 665);
        // Every live key once, each with its value.
        let mut keys = Vec::new();
        let mut rest = &snapshot[..];
        while !rest.is_empty() {
            let mut part = || {
                let n = u32::from_le_bytes(rest[..4].try_into().unwrap()) as usize;
                let p = rest[4..4 + n].to_vec();
                rest = &rest[4 + n..];
                p
            };
            let (k, v) = (part(), part());
            let i: u32 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
            assert_eq!(v, i.to_le_bytes());
            keys.push(i);
        }
        keys.sort_unstable();
        let expected: Vec<u32> = (0..1000).filter(|i| i % 3 != 0 && *i != 1).collect();
        assert_eq!(keys, expected);
    }

    #[test]
    fn forwarded_batches_apply_in_order() {
        let results = apply_batch(
            vec![
                Op::Set(b"f".to_vec(), b"1".to_vec(), None),
                Op::Get(b"f".to_vec()),
                Op::Exists(b"f".to_vec()),
                Op::Del(b"f".to_vec()),
                Op::Get(b"f".to_vec()),
                Op::Len,
            ],
            true,
        );
        assert_eq!(
            results,
            vec![
                OpResult::Done,
                OpResult::Value(Some(b"1".to_vec())),
                OpResult::Count(1),
                OpResult::Count(1),
                OpResult::Value(None),
                OpResult::Count(0),
            ]
        );
        assert_eq!(stats().forwarded_in, 6);
    }
}
