//! One shard of the store: an ordered map that lives on one core.
//!
//! Each core of the pool is one OS thread, so the shard is a thread-local:
//! the tasks of that core reach it without locks, and no other thread
//! ever sees it. A request for a key of another shard is not served here;
//! the server (server.rs) sends it to the core that owns the key, which
//! runs [`apply_batch`] on its own thread.
//!
//! `DEL` does not remove the entry: it leaves a tombstone (`None`), as
//! log-structured stores do, and the background pass ([`snapshot_pass`])
//! drops the tombstones while it writes a snapshot of the live entries.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;

use crate::protocol::{Request, Response};

/// The shard that owns `key` among `shards`: FNV-1a, the same on every
/// thread and in every run.
pub fn shard_of(key: &[u8], shards: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % shards as u64) as usize
}

/// What a shard counted, for the summary at the end.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardStats {
    /// Requests applied to this shard (its own and forwarded ones).
    pub applied: u64,
    /// Of those, requests that arrived on another core and were forwarded.
    pub forwarded_in: u64,
    /// Completed background passes.
    pub passes: u64,
    /// Tombstones the background passes removed.
    pub tombstones_dropped: u64,
    /// Live entries and bytes of the latest snapshot.
    pub snapshot_entries: u64,
    pub snapshot_bytes: u64,
    /// Entries in the map now (tombstones included).
    pub entries: u64,
}

#[derive(Default)]
struct Shard {
    /// `None` is a tombstone left by `DEL`.
    map: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    stats: ShardStats,
}

thread_local! {
    static SHARD: RefCell<Shard> = RefCell::new(Shard::default());
}

/// Applies requests to this thread's shard, in order. `forwarded` says
/// whether they came from another core (only counted).
pub fn apply_batch(requests: Vec<Request>, forwarded: bool) -> Vec<Response> {
    SHARD.with_borrow_mut(|shard| {
        let n = requests.len() as u64;
        shard.stats.applied += n;
        if forwarded {
            shard.stats.forwarded_in += n;
        }
        requests.into_iter().map(|r| shard.apply(r)).collect()
    })
}

impl Shard {
    fn apply(&mut self, request: Request) -> Response {
        match request {
            Request::Get(k) => match self.map.get(&k) {
                Some(Some(v)) => Response::Value(v.clone()),
                _ => Response::Nil,
            },
            Request::Set(k, v) => {
                self.map.insert(k, Some(v));
                Response::Ok
            }
            Request::Del(k) => match self.map.get_mut(&k) {
                Some(entry @ Some(_)) => {
                    *entry = None;
                    Response::Ok
                }
                _ => Response::Nil,
            },
        }
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
const CHUNK: usize = 256;

/// One background pass over this thread's shard: writes the live entries
/// into `snapshot` (each as a little-endian `u32` length and the bytes of
/// the key, then the same for the value) and removes the tombstones.
///
/// The pass walks the map in key order, [`CHUNK`] entries at a time, and
/// calls `tourbillon::task::yield_now()` between chunks, so the requests on the
/// foreground queue run in between (the executor decides, by the queues'
/// shares, when the pass continues). It holds the map only during a chunk
/// and resumes after the last key it saw, so requests may change the map
/// between chunks: the snapshot is fuzzy (each entry as it was when its
/// chunk was written), as the snapshots of many in-memory stores are.
pub async fn snapshot_pass(snapshot: &mut Vec<u8>) {
    snapshot.clear();
    let mut resume_after: Option<Vec<u8>> = None;
    let mut live = 0u64;
    loop {
        let finished = SHARD.with_borrow_mut(|shard| {
            let from = match &resume_after {
                Some(k) => Bound::Excluded(k.as_slice()),
                None => Bound::Unbounded,
            };
            let mut tombstones = Vec::new();
            let mut seen = 0;
            let mut last = None;
            for (k, v) in shard
                .map
                .range::<[u8], _>((from, Bound::Unbounded))
                .take(CHUNK)
            {
                seen += 1;
                match v {
                    Some(v) => {
                        live += 1;
                        for part in [k, v] {
                            snapshot.extend_from_slice(&(part.len() as u32).to_le_bytes());
                            snapshot.extend_from_slice(part);
                        }
                    }
                    None => tombstones.push(k.clone()),
                }
                last = Some(k);
            }
            resume_after = last.cloned();
            shard.stats.tombstones_dropped += tombstones.len() as u64;
            for k in tombstones {
                shard.map.remove(&k);
            }
            seen < CHUNK
        });
        if finished {
            break;
        }
        tourbillon::task::yield_now().await;
    }
    SHARD.with_borrow_mut(|shard| {
        shard.stats.passes += 1;
        shard.stats.snapshot_entries = live;
        shard.stats.snapshot_bytes = snapshot.len() as u64;
    });
}
