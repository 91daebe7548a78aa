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

/// The hash of the shard's map: eight bytes at a time, each word mixed in
/// with a multiply and a rotation, and a final mix (the keys of one shard
/// share their FNV-1a value modulo the number of shards, so a weak hash's
/// low bits alone would crowd the table). Fast on short keys; not
/// resistant to keys chosen to collide (std's `RandomState` is: use it for
/// a server that untrusted clients reach).
pub struct KeyHasher(u64);

impl Default for KeyHasher {
    fn default() -> Self {
        KeyHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl KeyHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0 ^ word)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.add(u64::from_le_bytes(w.try_into().expect("8 bytes")));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(last));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // splitmix64's finaliser.
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A key as the shard stores it: up to [`Key::INLINE`] bytes in place (a
/// lookup compares them in the map's own memory, with no pointer to
/// follow), longer ones in a shared allocation.
#[derive(Clone)]
enum Key {
    Inline { len: u8, bytes: [u8; Key::INLINE] },
    Shared(Rc<[u8]>),
}

impl Key {
    /// The longest key kept in place: the enum is then 24 bytes, the size
    /// of its shared form.
    const INLINE: usize = 22;

    fn new(key: &[u8]) -> Key {
        if key.len() <= Key::INLINE {
            let mut bytes = [0; Key::INLINE];
            bytes[..key.len()].copy_from_slice(key);
            Key::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            Key::Shared(Rc::from(key))
        }
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Key::Shared(b) => b,
        }
    }
}

impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

// As `Borrow` requires: the same hash and equality as the bytes.
impl std::hash::Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

/// The entries of a shard in a hash map, and their keys in a vector, so
/// that a background pass can walk them by position and resume where it
/// left off after a yield. A request's lookup finds the entry in the map's
/// own memory (the key too, up to [`Key::INLINE`] bytes); only the walk
/// reads the vector. Both hold the key (a copy of a short one, a shared
/// allocation of a long one).
#[derive(Default)]
struct Entries {
    map: HashMap<Key, Entry, BuildHasherDefault<KeyHasher>>,
    order: Vec<Key>,
}

impl Entries {
    #[inline]
    fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.map.get_mut(key)
    }

    /// Adds `key`, which has no entry yet.
    fn insert_new(&mut self, key: &[u8], entry: Entry) {
        let key = Key::new(key);
        let previous = self.map.insert(key.clone(), entry);
        debug_assert!(previous.is_none(), "insert_new of a present key");
        self.order.push(key);
    }

    fn get_index(&self, at: usize) -> Option<(&[u8], &Entry)> {
        let key = self.order.get(at)?;
        let entry = self
            .map
            .get(key.as_bytes())
            .expect("every position's key has an entry");
        Some((key.as_bytes(), entry))
    }

    /// Removes the entry at `at` and moves the last entry into its place.
    fn swap_remove_index(&mut self, at: usize) {
        let key = self.order.swap_remove(at);
        self.map.remove(key.as_bytes());
    }

    fn len(&self) -> usize {
        self.order.len()
    }

    fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
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
    fn short_and_long_keys_are_found_by_their_bytes() {
        let mut e = Entries::default();
        // Around the inline limit, and a key that is a prefix of another.
        let keys: Vec<Vec<u8>> = [0, 1, 7, 8, 9, Key::INLINE, Key::INLINE + 1, 64]
            .iter()
            .map(|&n| (0..n).map(|i| b'a' + (i % 26) as u8).collect())
            .collect();
        for (i, k) in keys.iter().enumerate() {
            e.insert_new(
                k,
                Entry {
                    value: Some(vec![i as u8]),
                    expires: None,
                },
            );
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(e.get_mut(k).unwrap().value, Some(vec![i as u8]));
        }
        assert!(e.get_mut(b"zz").is_none());
        // Removing by position moves the last entry (a long key) into the
        // hole; every key is still found at its new position.
        e.swap_remove_index(1);
        assert!(e.get_mut(&keys[1]).is_none());
        assert_eq!(e.len(), keys.len() - 1);
        for (i, k) in keys.iter().enumerate().filter(|&(i, _)| i != 1) {
            assert_eq!(e.get_mut(k).unwrap().value, Some(vec![i as u8]));
        }
        assert_eq!(e.get_index(1).unwrap().0, &keys[keys.len() - 1][..]);
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
