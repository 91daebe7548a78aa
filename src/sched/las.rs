#![forbid(unsafe_code)]
//! `Las`: least attained service first, by group.
//!
//! The runnable task whose group has received the least service in this
//! queue runs next; ties go to the task that became runnable first. Short
//! requests overtake long ones without anyone telling the executor which is
//! which: a group's attained service is the sum of the measured durations of
//! its tasks' polls in this queue.
//!
//! The structure, its cost and the starvation guard are documented on
//! [`Las`].

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet, VecDeque};
use std::time::Duration;

use super::scheduler::Scheduler;
use crate::task::id::{GroupId, TaskKey};
use crate::task::slab::prefetch_read;

/// Least-attained-service scheduler (opt-in per queue; the default is
/// [`RunnableFifo`](crate::sched::RunnableFifo)): the runnable task whose group has
/// received the least service in this queue runs next, ties in the order the
/// tasks became runnable.
///
/// # Structure and cost
///
/// * Exact ([`Las::exact`]): entries `(service at push, task)`, 16 bytes,
///   popped least first, in a radix heap: 11 levels of 64 slots, an
///   entry's level being the 6-bit digit where its key first differs from
///   the heap's base (a lower bound of its keys), and keys below the base
///   in a small binary heap popped first. Equal keys share a slot, in push
///   order. A push is O(1); a pop is O(1) plus, when level 0 is empty, the
///   move of one slot's entries to lower levels (an entry moves at most 10
///   times, and not at all while its key differs from the base only in
///   its low 6 bits). Slots are `Vec`s; a slot that empties keeps its
///   buffer for a slot that fills, while the kept buffers' capacity stays
///   within the entries held, so the memory follows the runnable tasks.
///   The key is computed when the task becomes runnable (its group's
///   service at that moment) and never updated while it waits; the
///   running task is charged after its poll, in O(1), so its next push
///   sees the new total. This is exact LAS on the keys (the key of a
///   waiting task is stale by what its group's other tasks received since
///   it was pushed; that only favours tasks already waiting). Without a
///   guard, the run loop takes the entries of the least key (up to 64 at
///   once, in push order; see the batch path below) and prefetches their
///   tasks' slab entries and cells as it takes them (and the scheduler
///   the service of their own groups, which their requeues update): the
///   order follows measured durations, so it visits the tasks in an
///   order close to random, and the cache misses of a batch overlap
///   instead of opening each poll. The run's requeues of a batch (tasks of their own groups
///   runnable again) are charged and pushed in one loop when the run's
///   tail is pushed, each with the service just charged as its key
///   (`requeue_exact`: no lookup of the group's table or of forgotten
///   tasks per task). On the headline workload (50,000 runnable tasks x 5
///   yields, every task its own group) this costs 3,395 instructions
///   per task, against 1,290 for
///   [`RunnableFifo`](crate::sched::RunnableFifo) (medians of 3 runs of
///   `valgrind --tool=callgrind --toggle-collect='overhead_profile::workload'`
///   on `overhead_profile las-exact 3` and `3 5 1 fresh`:
///   `docs/profiling/callgrind_table.sh --repeats 3`, 2026-11-29
///   14:41 UTC, 2-vCPU VM, `Intel(R) Xeon(R) Processor`, Linux 6.18.44,
///   rustc 1.95.0; the exact form's count moves by up to 4% from run to
///   run, since its keys, and so its batches and moves, follow measured
///   durations).
/// * Quantized ([`Las::quantized`], and [`Las::new`], the default): the
///   key is a level of attained service (log2 steps above `q0`); one FIFO
///   per level and a bitmap of the non-empty levels, so push and pop are
///   O(1). An entry is the task's id (8 bytes, as in a
///   [`RunnableFifo`](crate::sched::RunnableFifo)); with a guard, its
///   sequence number goes in a FIFO beside it.
/// * Per-group service in two vectors indexed by the dense
///   [`GroupId::index`] (one for tasks' own groups, one for keyed groups), so
///   no hashing on the hot path; an entry is reset when the group ends.
/// * Lazy deletion: a task forgotten while queued (aborted) or served by the
///   starvation guard leaves its entry behind. With a guard it is skipped
///   when it surfaces, recognised by a per-task sequence number; with
///   exact keys and no guard, a bit per task says whether it is queued,
///   and the entry of a task forgotten while queued is skipped when it
///   surfaces (a set of such tasks, looked up only while it holds one);
///   with levels and no guard, no sequence numbers are kept: the
///   entry is handed out, and the executor skips it (its task has ended).
/// * The run loop's batch path (no guard): with quantized keys, level 0 is a
///   FIFO that no push can overtake (a push never goes below level 0), so
///   the executor takes its ids 64 at a time and requeues the tasks of
///   their own groups behind it in bulk, as it does for
///   [`RunnableFifo`](crate::sched::RunnableFifo); each such task's poll is
///   charged to its group when the requeues are pushed, and a task whose
///   group left level 0 goes to its level then. Nothing reaches the
///   scheduler in between, so the order is that of one `pop`, one charge
///   and one `push` per poll. With exact keys and no guard, a batch is
///   the entries of the least key: a requeue's key (the batch's plus its
///   poll's duration) and any push of the same key or a greater one go
///   behind them, so they stay the next entries, in order; a push of a
///   smaller key (a new group, say) marks the scheduler, and the executor
///   puts the ids not yet polled back in front before it polls another
///   (`take_overtaken`, `put_front`). Tasks whose polls
///   take about the same time share keys (durations are whole ns), so
///   batches are long when many runnable tasks are alike.
/// * Timing: `Las` asks for each poll's duration
///   ([`wants_timing`](Scheduler::wants_timing)), so its queue reads the
///   clock once per poll ([`SystemClock`](crate::clock::SystemClock): the
///   TSC where it is invariant, read inline).
///
/// # Starvation guard
///
/// LAS alone can starve a long group under a steady stream of new ones. With
/// [`Las::max_wait`], a task that has waited longer than that, measured in
/// this queue's service time (the time the queue ran while the task was
/// waiting, so the guard needs no clock of its own), is served before
/// anything else, oldest first (first pushed among equal waits). A task's
/// wait starts at the queue time of its push: a task woken during another
/// task's poll starts waiting at that poll's start, since a poll is charged
/// when it returns. Off by default: LAS is opt-in for workloads
/// whose tail it helps, and the guard trades some of that help for a bound.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use tourbillon::sched::Las;
/// use tourbillon::{Builder, QueueSpec};
///
/// let las = Las::new().max_wait(Duration::from_millis(50));
/// let ex = Builder::new()
///     .queue_with("requests", QueueSpec::new(1).scheduler(las))
///     .build()
///     .unwrap();
/// # drop(ex);
/// ```
#[derive(Debug)]
pub struct Las {
    order: Order,
    /// Service of tasks' own groups, by task slab index.
    task_service: Vec<u64>,
    /// Service of keyed groups, by registry slot.
    group_service: Vec<u64>,
    /// With a guard: the sequence number of each queued task's live entry
    /// (0: not queued), by task slab index.
    queued: Vec<u64>,
    /// Exact keys without a guard: bit `i % 64` of word `i / 64` is set
    /// while the task in slab slot `i` is queued (a bit per task, so the
    /// words stay in the cache where a word per task would miss).
    queued_bits: Vec<u64>,
    /// Exact keys without a guard: tasks forgotten while queued, whose
    /// entries are skipped when they surface (present only while it
    /// holds one, so that other pops hash nothing; boxed, so that `Las`
    /// stays small).
    dead: Option<Box<Dead>>,
    next_seq: u64,
    len: usize,
    /// Service this queue received so far: the guard's clock, read only
    /// with a guard ([`max_wait`](Las::max_wait)). The requeues of the
    /// run's tail ([`keep_level0`](Las::keep_level0),
    /// `requeue_exact`), which a queue with a guard never takes
    /// ([`requeues_behind`](Las::requeues_behind)), leave it alone.
    queue_time: u64,
    /// Service below which a group is at level 0 (`q0`; 0 for exact keys,
    /// which have no levels).
    level0_below: u64,
    /// Quantized keys and no guard ([`batches`](Las::batches)): entries
    /// are never skipped, so no per-task sequence numbers are kept; an
    /// entry of a forgotten task stays (and counts in `len`) until popped,
    /// and the executor skips it (its id is stale).
    batching: bool,
    /// Exact keys without a guard: the key of the ids the last
    /// [`take_front`](Las::take_front) handed out, and whether a push of
    /// a smaller key came since (`take_overtaken`).
    batch_key: u64,
    overtaken: bool,
    guard: Option<Guard>,
}

/// Tasks forgotten while queued ([`Las::forget`] with exact keys and no
/// guard), whose entries are still in the radix heap.
#[derive(Debug, Default)]
struct Dead(HashSet<TaskKey>);

impl Dead {
    /// Whether `task`'s entry is one a `forget` left behind, which it no
    /// longer is after this call. The set goes once empty, so that a
    /// queue with no such entry pays an `Option` test per pop, not a hash.
    #[inline]
    fn take(dead: &mut Option<Box<Dead>>, task: TaskKey) -> bool {
        let Some(d) = dead else {
            return false;
        };
        let was = d.0.remove(&task);
        if d.0.is_empty() {
            *dead = None;
        }
        was
    }
}

/// The ordering structure: exact keys, or keys quantized to levels.
#[derive(Debug)]
enum Order {
    /// `(service at push, task)`, least first, equal keys in push order
    /// (boxed: its bitmaps would make every queue's scheduler as large).
    Exact(Box<Radix<TaskKey>>),
    /// The same with a starvation guard: `(service at push, (sequence,
    /// task))`, the sequence telling the live entry of a task from the
    /// one the guard left behind.
    ExactSeq(Box<Radix<(u64, TaskKey)>>),
    /// One FIFO of tasks per level and a bitmap of the non-empty levels
    /// (bit `l` set: level `l` holds an entry, live or not).
    Levels {
        q0_ns: u64,
        fifos: Vec<LevelFifo>,
        nonempty: u64,
    },
}

/// The entries of a level of [`Order::Levels`]: its tasks, in push order,
/// and with a starvation guard the sequence number of each beside it
/// (without one, `seqs` stays empty: an entry is 8 bytes, as in a
/// `RunnableFifo`).
#[derive(Debug, Default)]
struct LevelFifo {
    ids: VecDeque<TaskKey>,
    seqs: VecDeque<u64>,
}

impl Default for Order {
    fn default() -> Self {
        Order::Exact(Box::default())
    }
}

/// An entry of [`Radix`]: `(key, payload)`, ordered by key, then by push
/// order. The payload is the task (`Las::exact()`), or `(sequence, task)`
/// with a starvation guard, whose entries can go stale.
type Entry<P> = (u64, P);

/// Bits of a key per level of [`Radix`]: 64 slots per level.
const DIGIT: u32 = 6;
/// Levels of [`Radix`]: enough digits for 64-bit keys.
const LEVELS: usize = u64::BITS.div_ceil(DIGIT) as usize;

/// The exact form's priority queue: a radix heap of `(key, payload)`
/// entries with 64 slots per level (6 bits of the key), popped least key
/// first, equal keys in push order, and a binary heap for keys below the
/// radix part's base.
///
/// * `base`: every entry of the radix part has a key of at least `base`
///   (0 when the structure is empty). Entry `k` sits at level `l` = the
///   6-bit digit of its highest bit that differs from `base` (0 when
///   `k == base`), in slot = its own digit `l`: the keys of a level share
///   every digit above `l` with `base`, so slots hold disjoint key ranges
///   in increasing order, level by level; a slot of level 0 holds one key.
/// * Pop: the entry at the read position (`heads`) of level 0's first
///   non-empty slot (bitmaps of the non-empty levels and slots,
///   `trailing_zeros`). When level 0 is empty, the first non-empty slot
///   of the lowest non-empty level is redistributed: its least key
///   becomes `base`, and its entries move to the lower levels they belong
///   to then. An entry moves at most once per level (10 times in all);
///   keys that differ from `base` only in their low 6 bits never move.
/// * Order within a slot: pushes append, and a slot receives moved
///   entries only while it is empty (the levels below the one being
///   redistributed are empty), in the order they had; so a slot is in
///   push order, and equal keys, which always share a slot, come out in
///   push order.
/// * Keys below `base` (a new group, or a group whose service is below
///   that of the tasks popped before) go to `low`, a binary heap by `(key,
///   push number)`: all its keys are below `base`, so it is popped first
///   while it holds anything.
/// * Memory: a slot is a `Vec`; a slot that empties hands its buffer to
///   `spare`, and a slot that fills takes one from there before it
///   allocates, so the buffers' capacity follows the entries held, not
///   the number of slots ever used.
///
/// Entries move by the slot in contiguous memory: a push or pop costs a
/// few instructions and a cache miss at most at the slot's ends, where a
/// binary heap of every runnable task sifts `log2(n)` levels (each a
/// likely cache miss past a few thousand tasks). A key's level is
/// `((k ^ base) | 1).ilog2() / 6`, without a branch (`| 1` puts `k ==
/// base` at level 0); a push inlines into its callers; a redistribution
/// counts its slot's entries by destination slot, gives each destination
/// a buffer of its count at once (no growth, so no `realloc` copying the
/// entries moved so far), then moves them, the bitmaps held in locals.
#[derive(Debug)]
struct Radix<P> {
    base: u64,
    /// Slot `s` of level `l` at `64 * l + s` (allocated at the first push).
    slots: Vec<Vec<Entry<P>>>,
    /// Read position of each slot of level 0 (the entries before it were
    /// popped); 0 for an empty slot. Slots of other levels are moved
    /// whole.
    heads: [u32; 64],
    /// Bit `s` of word `l`: slot `s` of level `l` is not empty.
    occupied: [u64; LEVELS],
    /// Bit `l`: level `l` has a non-empty slot.
    levels: u16,
    /// Keys below `base`, least first: `(key, push number, payload)`.
    low: BinaryHeap<Reverse<(u64, u64, P)>>,
    /// Pushes to `low` so far: its tie-break.
    low_pushes: u64,
    /// Empty buffers of slots that emptied, for slots that fill.
    spare: Vec<Vec<Entry<P>>>,
    /// The capacity of the buffers in `spare`, in entries.
    spare_cap: usize,
    /// Entries bound for each slot during a redistribution (all zero
    /// between them; allocated with the slots).
    counts: Vec<u32>,
    /// Entries in the slots (not in `low`).
    entries: usize,
}

impl<P> Default for Radix<P> {
    fn default() -> Self {
        Self {
            base: 0,
            slots: Vec::new(),
            heads: [0; 64],
            occupied: [0; LEVELS],
            levels: 0,
            low: BinaryHeap::new(),
            low_pushes: 0,
            spare: Vec::new(),
            spare_cap: 0,
            counts: Vec::new(),
            entries: 0,
        }
    }
}

impl<P: Copy + Ord> Radix<P> {
    /// The level and slot of key `k` (`k >= base`).
    #[inline(always)]
    fn place(&self, k: u64) -> (usize, usize) {
        // `| 1`: `k == base` (and a difference in bit 0 alone) is level 0,
        // without a branch.
        let l = ((k ^ self.base) | 1).ilog2() / DIGIT;
        (l as usize, ((k >> (DIGIT * l)) & 63) as usize)
    }

    #[inline(always)]
    fn insert(&mut self, e: Entry<P>) {
        let (l, s) = self.place(e.0);
        let i = l * 64 + s;
        let slot = &self.slots[i];
        if slot.len() == slot.capacity() {
            self.make_room(l, s);
        }
        self.slots[i].push(e);
        self.entries += 1;
        self.occupied[l] |= 1 << s;
        self.levels |= 1 << l;
    }

    #[inline(always)]
    fn push(&mut self, e: Entry<P>) {
        if e.0 < self.base {
            self.push_low(e);
            return;
        }
        if self.slots.is_empty() {
            self.alloc_slots();
        }
        self.insert(e);
    }

    /// Before a push to slot `s` of level `l` whose buffer is full: an
    /// empty slot (which has no buffer: it went to `spare`) takes a spare
    /// one; a slot of level 0 whose popped entries (before its read
    /// position) are at least half of it drops them instead of growing.
    /// So a slot that is popped and pushed at once (tasks requeued with
    /// the key they were taken with, as after polls of 0 ns) holds at most
    /// twice its live entries, however long it stays the least.
    #[inline(never)]
    fn make_room(&mut self, l: usize, s: usize) {
        let slot = &mut self.slots[l * 64 + s];
        if slot.capacity() == 0 {
            if let Some(buf) = self.spare.pop() {
                self.spare_cap -= buf.capacity();
                *slot = buf;
            }
        } else if l == 0 {
            let h = self.heads[s] as usize;
            if h > 0 && 2 * h >= slot.len() {
                slot.drain(..h);
                self.heads[s] = 0;
            }
        }
    }

    /// [`push`](Radix::push) of a key below `base`: to the binary heap.
    #[inline(never)]
    fn push_low(&mut self, e: Entry<P>) {
        self.low_pushes += 1;
        self.low.push(Reverse((e.0, self.low_pushes, e.1)));
    }

    /// The slots, at the first push (a queue that never runs a task
    /// allocates none).
    #[cold]
    #[inline(never)]
    fn alloc_slots(&mut self) {
        self.slots = (0..LEVELS * 64).map(|_| Vec::new()).collect();
        self.counts = vec![0; LEVELS * 64];
    }

    /// Takes the `n` entries from `h` on off level 0's least slot `s` (a
    /// pop, or a batch of the least key): advances the slot's read
    /// position, or recycles the slot once it is spent.
    #[inline(always)]
    fn consume_least(&mut self, s: usize, h: usize, n: usize) {
        self.entries -= n;
        if h + n < self.slots[s].len() {
            self.heads[s] = (h + n) as u32;
        } else {
            self.heads[s] = 0;
            let buf = std::mem::take(&mut self.slots[s]);
            self.recycle(buf);
            self.occupied[0] &= !(1 << s);
            if self.occupied[0] == 0 {
                self.levels &= !1;
            }
        }
    }

    #[inline]
    fn pop(&mut self) -> Option<Entry<P>> {
        if let Some(Reverse((k, _, p))) = self.low.pop() {
            return Some((k, p));
        }
        if self.levels & 1 == 0 {
            if self.levels == 0 {
                // Empty: any key may enter the radix part.
                self.base = 0;
                return None;
            }
            self.redistribute();
        }
        let s = self.occupied[0].trailing_zeros() as usize;
        let h = self.heads[s] as usize;
        let e = self.slots[s][h];
        self.consume_least(s, h, 1);
        Some(e)
    }

    /// Keeps the buffer of a slot that emptied for a slot that fills,
    /// while the spare buffers' capacity stays within the number of
    /// entries held; frees it otherwise.
    #[inline]
    fn recycle(&mut self, mut buf: Vec<Entry<P>>) {
        if self.spare_cap + buf.capacity() <= self.entries {
            buf.clear();
            self.spare_cap += buf.capacity();
            self.spare.push(buf);
        }
    }

    /// Moves the entries of the first non-empty slot of the lowest
    /// non-empty level (not level 0) to the levels below, its least key
    /// becoming `base`.
    #[inline(never)]
    fn redistribute(&mut self) {
        let l = self.levels.trailing_zeros() as usize;
        let s = self.occupied[l].trailing_zeros() as usize;
        let src = std::mem::take(&mut self.slots[l * 64 + s]);
        // Counted out for `recycle`'s bound, and back in below.
        self.entries -= src.len();
        self.occupied[l] &= !(1 << s);
        if self.occupied[l] == 0 {
            self.levels &= !(1 << l);
        }
        let base = src.iter().map(|e| e.0).min().unwrap_or(self.base);
        self.base = base;
        // The entries go to the levels below `l`, whose slots are all
        // empty: a first loop counts them by slot, each slot takes a
        // buffer of that size (a spare one if the last is large enough),
        // and a second loop moves them, without a buffer's growth (a
        // `realloc` and a copy of the entries moved so far) in between.
        // Keys of the slot share every digit from `l` up with `base`.
        let Radix {
            slots,
            spare,
            spare_cap,
            occupied,
            levels,
            counts,
            ..
        } = self;
        let dest = |k: u64| {
            let d = ((k ^ base) | 1).ilog2() / DIGIT;
            (d as usize, ((k >> (DIGIT * d)) & 63) as usize)
        };
        let mut occ = *occupied;
        let mut lv = *levels;
        for e in &src {
            let (dl, ds) = dest(e.0);
            counts[(dl * 64 + ds) % (LEVELS * 64)] += 1;
            occ[dl % LEVELS] |= 1 << ds;
            lv |= 1 << dl;
        }
        for (dl, &bits) in occ.iter().enumerate().take(l) {
            let mut bits = bits;
            while bits != 0 {
                let i = dl * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let n = std::mem::take(&mut counts[i]) as usize;
                let slot = &mut slots[i];
                if slot.capacity() - slot.len() < n {
                    match spare.last() {
                        Some(buf) if slot.is_empty() && buf.capacity() >= n => {
                            let buf = spare.pop().unwrap_or_default();
                            *spare_cap -= buf.capacity();
                            *slot = buf;
                        }
                        _ => slot.reserve_exact(n),
                    }
                }
            }
        }
        for &e in &src {
            let (dl, ds) = dest(e.0);
            slots[dl * 64 + ds].push(e);
        }
        *occupied = occ;
        *levels = lv;
        self.entries += src.len();
        self.recycle(src);
    }

    /// Removes the entry whose payload is `p`, if there is one: a scan of
    /// every entry, for the rare push of a task whose old entry was left
    /// behind.
    #[cold]
    fn remove(&mut self, p: P) {
        let before = self.low.len();
        self.low.retain(|Reverse(e)| e.2 != p);
        if self.low.len() != before {
            return;
        }
        for l in 0..LEVELS {
            let mut occupied = self.occupied[l];
            while occupied != 0 {
                let s = occupied.trailing_zeros() as usize;
                occupied &= occupied - 1;
                let i = l * 64 + s;
                let h = if l == 0 { self.heads[s] as usize } else { 0 };
                let Some(j) = self.slots[i][h..].iter().position(|e| e.1 == p) else {
                    continue;
                };
                self.slots[i].remove(h + j);
                self.entries -= 1;
                if self.slots[i].len() == h {
                    if l == 0 {
                        self.heads[s] = 0;
                    }
                    let buf = std::mem::take(&mut self.slots[i]);
                    self.recycle(buf);
                    self.occupied[l] &= !(1 << s);
                    if self.occupied[l] == 0 {
                        self.levels &= !(1 << l);
                    }
                }
                return;
            }
        }
    }
}

impl Radix<TaskKey> {
    /// Moves the entries that the next pops would return while nothing is
    /// pushed, up to `buf.len()`, into `buf`, and returns how many and
    /// their key: the entry of the least key below `base`, if any, alone;
    /// else the entries of level 0's first non-empty slot, which all have
    /// its least key, in push order. A push of that key or a greater one
    /// goes behind them, so they stay the next entries, in this order,
    /// until a push of a smaller key, before which the ones not run go
    /// back ([`put_front`](Radix::put_front)).
    #[inline]
    fn take_least(&mut self, buf: &[Cell<TaskKey>]) -> (usize, u64) {
        if !self.low.is_empty() {
            return match self.pop() {
                Some((k, task)) => {
                    buf[0].set(task);
                    (1, k)
                }
                None => (0, 0),
            };
        }
        if self.levels & 1 == 0 {
            if self.levels == 0 {
                // Empty: any key may enter the radix part.
                self.base = 0;
                return (0, 0);
            }
            self.redistribute();
        }
        let s = self.occupied[0].trailing_zeros() as usize;
        let h = self.heads[s] as usize;
        let slot = &mut self.slots[s];
        let n = (slot.len() - h).min(buf.len());
        let key = slot[h].0;
        for (dst, e) in buf.iter().zip(&slot[h..h + n]) {
            dst.set(e.1);
        }
        self.consume_least(s, h, n);
        (n, key)
    }

    /// Puts `ids` back, with key `key`, before every entry of that key:
    /// undoes a [`take_least`](Radix::take_least) of ids that were not run
    /// (the pushes since then are of keys of at least `base`, so `key`
    /// still belongs where it was taken from, or below `base`). O(`ids`)
    /// when the slot did not empty, which moves its read position back
    /// (a run that ends inside a batch); else the entries pushed since
    /// move behind them.
    #[inline(never)]
    fn put_front(&mut self, key: u64, ids: &[Cell<TaskKey>]) {
        if ids.is_empty() {
            return;
        }
        if key < self.base {
            // Taken from `low`: one id, which the earliest push number
            // puts first among its key's.
            for id in ids.iter().rev() {
                self.low.push(Reverse((key, 0, id.get())));
            }
            return;
        }
        let (l, s) = self.place(key);
        debug_assert_eq!(l, 0, "tourbillon bug: a batch taken outside level 0");
        let h = self.heads[s] as usize;
        let n = ids.len();
        if h >= n {
            // The slot kept its buffer since the take (it did not empty):
            // the ids are the entries just before its read position.
            debug_assert!(
                self.slots[s][h - n..h]
                    .iter()
                    .zip(ids)
                    .all(|(e, id)| *e == (key, id.get())),
                "tourbillon bug: a batch put back where it was not taken"
            );
            self.heads[s] = (h - n) as u32;
        } else {
            // The take emptied the slot, or a push dropped its popped
            // entries ([`make_room`](Radix::make_room)): before the
            // entries pushed since, its live ones.
            let rest = std::mem::take(&mut self.slots[s]);
            let slot = &mut self.slots[s];
            slot.reserve(n + rest.len() - h);
            slot.extend(ids.iter().map(|id| (key, id.get())));
            slot.extend_from_slice(&rest[h..]);
            self.heads[s] = 0;
            if rest.capacity() > 0 {
                self.recycle(rest);
            }
        }
        self.entries += n;
        self.occupied[0] |= 1 << s;
        self.levels |= 1;
    }
}

/// The level of attained service `a`: 0 below `q0`, then one level per
/// doubling (`1 + floor(log2(a / q0))`), capped at `levels - 1`.
fn level(a: u64, q0: u64, levels: usize) -> usize {
    if a < q0 {
        0
    } else {
        (1 + (a / q0).ilog2() as usize).min(levels - 1)
    }
}

#[derive(Debug, Default)]
struct Guard {
    max_wait_ns: u64,
    /// (queue time at push, sequence, task), in push order.
    arrivals: VecDeque<(u64, u64, TaskKey)>,
}

impl Las {
    /// The default LAS scheduler: keys quantized to levels,
    /// `Las::quantized(100 us, 16)` (the reference model's QLAS), without
    /// starvation guard.
    ///
    /// Chosen by measurement: on the headline workload (50,000 runnable
    /// tasks x 5 yields, every task its own group) exact keys cost 3.3x
    /// to 4.3x the time of `RunnableFifo`, 3.8x in the median (their
    /// order follows measured durations, so the tasks run in an order
    /// close to random, and their polls miss the cache; twelve runs of
    /// `cargo bench -p tourbillon-peers --bench compare -- --only
    /// tourbillon --rounds 7`, 2026-11-29 14:29 to 14:38 UTC, 2-vCPU VM,
    /// `Intel(R) Xeon(R) Processor`, Linux 6.18.44, rustc 1.95.0, nothing
    /// else running), levels 0.92x to 1.08x a FIFO queue with a clock
    /// read per poll in the same runs, 1.01x in the median: about the
    /// clock read per poll that `Las` needs
    /// (a clock read per poll alone: 1.88x to 1.92x; three runs of `cargo
    /// bench --bench overhead`, 2026-11-26, 2-vCPU Xeon VM). On the high-variance mix of the tail benchmark, the model
    /// gives the two the same thin-task p99 within 10%. Use [`Las::exact`]
    /// where exact LAS order matters more than the cost.
    pub fn new() -> Self {
        Self::quantized(Duration::from_micros(100), 16)
    }

    /// A LAS scheduler with exact keys (attained service in ns), without
    /// starvation guard: a radix heap of every runnable task, O(1) per push
    /// and, amortized, per pop (see the structure above).
    pub fn exact() -> Self {
        Self {
            order: Order::Exact(Box::default()),
            task_service: Vec::new(),
            group_service: Vec::new(),
            queued: Vec::new(),
            queued_bits: Vec::new(),
            dead: None,
            next_seq: 0,
            len: 0,
            queue_time: 0,
            level0_below: 0,
            batching: false,
            batch_key: 0,
            overtaken: false,
            guard: None,
        }
    }

    /// A LAS scheduler whose keys are quantized to `levels` levels of
    /// attained service: level 0 below `q0`, then one level per doubling
    /// (`1 + floor(log2(a / q0))`), FIFO within a level. Push and pop are
    /// O(1) plus a heap of at most `levels` entries; tasks of similar
    /// service run in FIFO order. `q0 = 100 us, levels = 16` is the
    /// reference model's QLAS (levels up to about 3.3 s of service).
    ///
    /// # Panics
    /// If `q0` is zero or `levels` is not in `2..=64`.
    pub fn quantized(q0: Duration, levels: u8) -> Self {
        let q0_ns = q0.as_nanos().min(u64::MAX as u128) as u64;
        assert!(q0_ns > 0, "Las::quantized: q0 must be positive");
        assert!(
            (2..=64).contains(&levels),
            "Las::quantized: levels must be in 2..=64"
        );
        Self {
            order: Order::Levels {
                q0_ns,
                fifos: (0..levels).map(|_| LevelFifo::default()).collect(),
                nonempty: 0,
            },
            level0_below: q0_ns,
            batching: true,
            ..Self::exact()
        }
    }

    /// Serves a task first once it has waited `max_wait` of this queue's
    /// service time (see the starvation guard above).
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.batching = false;
        if let Order::Exact(_) = self.order {
            // Entries with sequence numbers: the guard leaves some behind.
            self.order = Order::ExactSeq(Box::default());
        }
        self.guard = Some(Guard {
            max_wait_ns: max_wait.as_nanos().min(u64::MAX as u128) as u64,
            arrivals: VecDeque::new(),
        });
        self
    }

    /// Attained service of `group` in this queue.
    pub fn service(&self, group: GroupId) -> Duration {
        Duration::from_nanos(self.service_ns(group))
    }

    #[inline]
    fn service_ns(&self, group: GroupId) -> u64 {
        let table = if group.is_task_group() {
            &self.task_service
        } else {
            &self.group_service
        };
        table.get(group.index()).copied().unwrap_or(0)
    }

    fn service_mut(&mut self, group: GroupId) -> &mut u64 {
        let table = if group.is_task_group() {
            &mut self.task_service
        } else {
            &mut self.group_service
        };
        let i = group.index();
        if i >= table.len() {
            grow_service(table, i);
        }
        &mut table[i]
    }

    /// [`push`](Scheduler::push) of `task` with key `key` (its group's
    /// service).
    #[inline(never)]
    fn push_key(&mut self, task: TaskKey, key: u64) {
        let seq = self.enter(task);
        match &mut self.order {
            Order::Exact(radix) => {
                if self.dead.is_some() && Dead::take(&mut self.dead, task) {
                    // A forgotten task pushed again (the executor never
                    // does this: a forgotten task has ended): its old entry
                    // goes now, so that it cannot be taken for the new one.
                    radix.remove(task);
                }
                if key < self.batch_key {
                    self.overtaken = true;
                }
                radix.push((key, task))
            }
            Order::ExactSeq(radix) => radix.push((key, (seq, task))),
            Order::Levels {
                q0_ns,
                fifos,
                nonempty,
            } => {
                let l = if key < self.level0_below {
                    0
                } else {
                    level(key, *q0_ns, fifos.len())
                };
                *nonempty |= 1 << l;
                let fifo = &mut fifos[l];
                fifo.ids.push_back(task);
                if self.guard.is_some() {
                    fifo.seqs.push_back(seq);
                }
            }
        }
        if let Some(g) = &mut self.guard {
            g.arrivals.push_back((self.queue_time, seq, task));
        }
    }

    /// Whether the entries carry sequence numbers (with a guard, which
    /// leaves entries behind that a later push of the same task must not
    /// revive).
    #[inline]
    fn seqs(&self) -> bool {
        self.guard.is_some()
    }

    /// Whether `(seq, task)` is the live entry of a queued task: every
    /// entry is when [`batching`](Las::batches); with exact keys and no
    /// guard, every entry but those of tasks forgotten while queued
    /// (`dead`); with a guard, the entry whose sequence number is the
    /// task's.
    #[inline]
    fn is_live(&self, seq: u64, task: TaskKey) -> bool {
        if self.seqs() {
            self.queued.get(task.index() as usize) == Some(&seq)
        } else {
            !self.dead.as_ref().is_some_and(|d| d.0.contains(&task))
        }
    }

    #[inline]
    fn take(&mut self, task: TaskKey) -> TaskKey {
        let i = task.index() as usize;
        if self.seqs() {
            self.queued[i] = 0;
        } else if !self.batching {
            self.queued_bits[i / 64] &= !(1 << (i % 64));
        }
        self.len -= 1;
        task
    }

    /// The sequence number of a new entry of `task` (0 without a guard,
    /// which needs none).
    #[inline]
    fn enter(&mut self, task: TaskKey) -> u64 {
        self.len += 1;
        if !self.seqs() {
            if !self.batching {
                let i = task.index() as usize;
                if i / 64 >= self.queued_bits.len() {
                    self.queued_bits.resize(i / 64 + 1, 0);
                }
                // The bit may be set already: an id the run loop put back
                // ([`put_front`](Las::put_front)) may be that of a task
                // that ended while the run held it, whose slot a new task
                // took. Its entry is handed out and skipped (its id is
                // stale), and clears the bit or finds it clear, as the
                // new task's entry does.
                self.queued_bits[i / 64] |= 1 << (i % 64);
            }
            return 0;
        }
        self.next_seq += 1;
        let i = task.index() as usize;
        if i >= self.queued.len() {
            self.queued.resize(i + 1, 0);
        }
        debug_assert_eq!(self.queued[i], 0, "{task:?} pushed twice");
        self.queued[i] = self.next_seq;
        self.next_seq
    }
}

/// The run loop's batch path (`executor::batch`), as for
/// [`RunnableFifo`](crate::sched::RunnableFifo): with quantized keys and no
/// starvation guard, level 0 is a FIFO that nothing can overtake (a push
/// never goes below level 0), so the run loop takes its ids in batches,
/// charges each poll with [`charge`](Las::charge), and requeues a task
/// still at level 0 behind in bulk. The order is exactly that of one `pop`
/// and one `push` per poll.
impl Las {
    /// Whether the run loop may batch level 0: quantized keys and no
    /// guard (which serves by arrival, across levels).
    #[inline]
    pub(crate) fn batches(&self) -> bool {
        self.batching
    }

    /// Whether the run loop requeues the tasks of their own groups behind
    /// through its tail and charges their polls when the tail is pushed
    /// ([`push_back_charged`](Las::push_back_charged)): when it
    /// [`batches`](Las::batches), and with exact keys and no guard (batches
    /// of one id: the tail is pushed before the next `pop` and before any
    /// other push, so the order is that of `polled` and `push` after each
    /// poll; a guard is left out, its arrival times counting each charge).
    #[inline]
    pub(crate) fn requeues_behind(&self) -> bool {
        self.batching || matches!(self.order, Order::Exact(_))
    }

    /// Moves the next ids into `buf` in order and returns how many: up to
    /// `buf.len()` live ids of level 0 when [`batches`](Las::batches) and
    /// level 0 holds any, else the one id [`pop`](Scheduler::pop) returns.
    #[inline]
    pub(crate) fn take_front(&mut self, buf: &[Cell<TaskKey>]) -> usize {
        if let Order::Exact(radix) = &mut self.order {
            let n = loop {
                // One at a time while entries of forgotten tasks wait.
                let buf = if self.dead.is_some() { &buf[..1] } else { buf };
                let (n, key) = radix.take_least(buf);
                if n == 1 && self.dead.is_some() && Dead::take(&mut self.dead, buf[0].get()) {
                    // Forgotten while queued: `forget` counted it out.
                    continue;
                }
                self.batch_key = key;
                break n;
            };
            let service = self.task_service.as_ptr();
            for id in &buf[..n] {
                let i = id.get().index() as usize;
                self.queued_bits[i / 64] &= !(1 << (i % 64));
                // The service of the task's own group, which its requeue
                // reads and writes (`requeue_exact`): in an order close to
                // random, a cache miss per requeue without this.
                prefetch_read(service.wrapping_add(i));
            }
            self.len -= n;
            self.overtaken = false;
            return n;
        }
        if !self.batches() || self.front_is_empty() {
            return match self.pop() {
                Some(id) => {
                    buf[0].set(id);
                    1
                }
                None => 0,
            };
        }
        let Order::Levels {
            fifos, nonempty, ..
        } = &mut self.order
        else {
            return 0;
        };
        // Every entry is live when batching (see `batching`).
        let fifo = &mut fifos[0].ids;
        let n = fifo.len().min(buf.len());
        let (a, b) = fifo.as_slices();
        let first = n.min(a.len());
        for (dst, &task) in buf[..first].iter().zip(a) {
            dst.set(task);
        }
        for (dst, &task) in buf[first..n].iter().zip(b) {
            dst.set(task);
        }
        fifo.drain(..n);
        if fifo.is_empty() {
            *nonempty &= !1;
        }
        self.len -= n;
        n
    }

    /// Whether the run loop should prefetch the tasks of the ids
    /// [`take_front`](Las::take_front) hands out: exact keys without a
    /// guard, whose order visits the tasks in an order close to random.
    #[inline(always)]
    pub(crate) fn prefetches(&self) -> bool {
        matches!(self.order, Order::Exact(_))
    }

    /// Whether level 0 holds no entry (always, for exact keys).
    #[inline]
    pub(crate) fn front_is_empty(&self) -> bool {
        match &self.order {
            Order::Levels { nonempty, .. } => nonempty & 1 == 0,
            Order::Exact(_) | Order::ExactSeq(_) => true,
        }
    }

    /// The requeues of a run, in order: charges each task's own group with
    /// its last poll's duration (`ns`, as [`charge`](Las::charge)), then
    /// pushes it behind level 0 if its group stays there, else to its
    /// level ([`batches`](Las::batches) only).
    pub(crate) fn push_back_charged(&mut self, ids: &[Cell<TaskKey>], ns: &[Cell<u64>]) {
        let kept = self.keep_level0(ids, ns);
        if let Order::Levels {
            fifos, nonempty, ..
        } = &mut self.order
        {
            // Every entry is live when batching: no sequence number.
            fifos[0].ids.extend(ids[..kept].iter().map(Cell::get));
            if kept > 0 {
                *nonempty |= 1;
            }
            self.len += kept;
        }
    }

    /// [`push_back_charged`](Las::push_back_charged) for requeues that
    /// become the next batch (level 0 being empty), and its first half:
    /// those that stay at level 0 are moved to the start of `ids`, in
    /// order, instead of being pushed; returns how many. `ns` holds the
    /// tasks' keys (their groups' service) afterwards.
    ///
    /// One loop charges every task's own group, without a call (the
    /// table grows out of line) or a store of the ids; the tasks that
    /// left level 0 (rare: a task's service grows by a poll at a time)
    /// are pushed to their levels by a second loop, only when there are
    /// some.
    pub(crate) fn keep_level0(&mut self, ids: &[Cell<TaskKey>], ns: &[Cell<u64>]) -> usize {
        if self.requeue_exact(ids, ns) {
            return 0;
        }
        let n = ids.len().min(ns.len());
        let (ids, ns) = (&ids[..n], &ns[..n]);
        debug_assert!(
            self.guard.is_none(),
            "a guard's queue time is not kept here"
        );
        let bound = self.level0_below;
        // The largest key: some task left level 0 when it is not below
        // the level's bound.
        let mut top = 0u64;
        let mut i = 0;
        // The table is a slice for the whole loop (its start and length
        // stay in registers); a task beyond its end leaves the loop, the
        // table grows, and the loop goes on from that task.
        while i < n {
            let service = &mut self.task_service[..];
            for (id, ns) in ids[i..].iter().zip(&ns[i..]) {
                // The task's own group: `GroupId::task` of its index.
                let Some(s) = service.get_mut(id.get().index() as usize) else {
                    break;
                };
                let key = s.saturating_add(ns.get());
                *s = key;
                ns.set(key);
                top = top.max(key);
                i += 1;
            }
            if i < n {
                grow_service(&mut self.task_service, ids[i].get().index() as usize);
            }
        }
        if top >= bound {
            self.push_above_level0(ids, ns)
        } else {
            n
        }
    }

    /// The second loop of [`keep_level0`](Las::keep_level0): pushes the
    /// tasks whose key (in `keys`) is not below level 0's bound to their
    /// levels, and moves the others to the start of `ids`, in order;
    /// returns how many stay.
    #[cold]
    #[inline(never)]
    fn push_above_level0(&mut self, ids: &[Cell<TaskKey>], keys: &[Cell<u64>]) -> usize {
        let bound = self.level0_below;
        let mut kept = 0;
        for (id, key) in ids.iter().zip(keys) {
            let (task, key) = (id.get(), key.get());
            if key < bound {
                ids[kept].set(task);
                kept += 1;
            } else {
                self.push_key(task, key);
            }
        }
        kept
    }

    /// [`keep_level0`](Las::keep_level0) with exact keys and no entry of a
    /// forgotten task (`dead`), which keeps none (there is no level 0):
    /// each task's own group is charged, and the task pushed with the
    /// service just charged as its key, in one loop without the lookups of
    /// [`push`](Scheduler::push). Returns `false`, doing nothing, in any
    /// other case.
    #[inline]
    fn requeue_exact(&mut self, ids: &[Cell<TaskKey>], ns: &[Cell<u64>]) -> bool {
        let (Order::Exact(radix), None) = (&mut self.order, &self.dead) else {
            return false;
        };
        debug_assert!(
            self.guard.is_none(),
            "a guard's queue time is not kept here"
        );
        let n = ids.len().min(ns.len());
        let batch_key = self.batch_key;
        let mut overtaken = false;
        for (id, ns) in ids[..n].iter().zip(&ns[..n]) {
            let (task, ns) = (id.get(), ns.get());
            // The task's own group: `GroupId::task` of its index.
            let g = task.index() as usize;
            if g >= self.task_service.len() || g / 64 >= self.queued_bits.len() {
                grow_tables(&mut self.task_service, &mut self.queued_bits, g);
            }
            let s = &mut self.task_service[g];
            *s = s.saturating_add(ns);
            let key = *s;
            self.queued_bits[g / 64] |= 1 << (g % 64);
            overtaken |= key < batch_key;
            radix.push((key, task));
        }
        self.len += n;
        self.overtaken |= overtaken;
        true
    }

    /// Puts `ids` back in front of level 0, in order: undoes a
    /// [`take_front`](Las::take_front) of ids that were not run.
    pub(crate) fn put_front(&mut self, ids: &[Cell<TaskKey>]) {
        if let Order::Exact(radix) = &mut self.order {
            radix.put_front(self.batch_key, ids);
            for id in ids {
                let i = id.get().index() as usize;
                self.queued_bits[i / 64] |= 1 << (i % 64);
            }
            self.len += ids.len();
            return;
        }
        debug_assert!(
            self.batches() || ids.is_empty(),
            "tourbillon bug: a Las batch without levels"
        );
        let Order::Levels {
            fifos, nonempty, ..
        } = &mut self.order
        else {
            return;
        };
        let fifo = &mut fifos[0].ids;
        // Every entry is live when batching: no sequence number.
        fifo.reserve(ids.len());
        for id in ids.iter().rev() {
            fifo.push_front(id.get());
        }
        self.len += ids.len();
        if !fifo.is_empty() {
            *nonempty |= 1;
        }
    }

    /// Whether a push came since the last [`take_front`](Las::take_front)
    /// whose key is below that of the ids it handed out (exact keys, no
    /// guard): the ids not run yet must go back
    /// ([`put_front`](Las::put_front)) for the pushed task to run first.
    /// Clears the mark.
    #[inline]
    pub(crate) fn take_overtaken(&mut self) -> bool {
        std::mem::take(&mut self.overtaken)
    }

    /// Charges a poll of `ns` to `group` ([`polled`](Scheduler::polled)
    /// without the `Duration`) and returns whether the group stays at
    /// level 0, so that its task, if runnable again, goes behind level 0.
    #[inline]
    pub(crate) fn charge(&mut self, group: GroupId, ns: u64) -> bool {
        let bound = self.level0_below;
        let s = self.service_mut(group);
        *s = s.saturating_add(ns);
        let stays = *s < bound;
        self.queue_time = self.queue_time.saturating_add(ns);
        stays
    }
}

/// Makes room for slab index `g` in the service of tasks' own groups and
/// in the bits of queued tasks.
#[cold]
#[inline(never)]
fn grow_tables(service: &mut Vec<u64>, bits: &mut Vec<u64>, g: usize) {
    if g >= service.len() {
        grow_service(service, g);
    }
    if g / 64 >= bits.len() {
        let len = (g / 64 + 1).max(2 * bits.len());
        bits.resize(len, 0);
    }
}

/// Makes room for slab index `g` in the service of tasks' own groups: at
/// least doubles the table, so that a slab that fills (a burst of spawns)
/// makes a few calls here, not one per task.
#[cold]
#[inline(never)]
fn grow_service(service: &mut Vec<u64>, g: usize) {
    let len = (g + 1).max(2 * service.len()).max(64);
    service.resize(len, 0);
}

impl Default for Las {
    fn default() -> Self {
        Self::new()
    }
}

impl Scheduler for Las {
    /// Inlined where the queue's scheduler is known to be a `Las` (the
    /// spawn path): a batching `Las`'s push to level 0 (every new task's,
    /// whose group has no service yet) is a push to its FIFO; any other
    /// goes out of line (`Las::push_key`).
    #[inline]
    fn push(&mut self, task: TaskKey, group: GroupId) {
        let key = self.service_ns(group);
        if self.batching && key < self.level0_below {
            if let Order::Levels {
                fifos, nonempty, ..
            } = &mut self.order
            {
                // Every entry is live when batching: no sequence number.
                fifos[0].ids.push_back(task);
                *nonempty |= 1;
                self.len += 1;
                return;
            }
        }
        self.push_key(task, key);
    }

    fn pop(&mut self) -> Option<TaskKey> {
        if let Some(g) = &self.guard {
            let limit = g.max_wait_ns;
            while let Some(&(at, seq, task)) = self.guard.as_ref().and_then(|g| g.arrivals.front())
            {
                if !self.is_live(seq, task) {
                    self.guard.as_mut().map(|g| g.arrivals.pop_front());
                    continue;
                }
                if self.queue_time - at > limit {
                    self.guard.as_mut().map(|g| g.arrivals.pop_front());
                    return Some(self.take(task));
                }
                break;
            }
        }
        loop {
            let (seq, task) = match &mut self.order {
                Order::Exact(radix) => {
                    let (_, task) = radix.pop()?;
                    if Dead::take(&mut self.dead, task) {
                        // Forgotten while queued: `forget` counted it out.
                        continue;
                    }
                    self.len -= 1;
                    let i = task.index() as usize;
                    self.queued_bits[i / 64] &= !(1 << (i % 64));
                    return Some(task);
                }
                Order::ExactSeq(radix) => {
                    let (_, (seq, task)) = radix.pop()?;
                    (seq, task)
                }
                Order::Levels {
                    fifos, nonempty, ..
                } => {
                    if *nonempty == 0 {
                        return None;
                    }
                    let l = nonempty.trailing_zeros() as usize;
                    let fifo = &mut fifos[l];
                    let task = fifo.ids.pop_front().expect("a non-empty level");
                    if fifo.ids.is_empty() {
                        *nonempty &= !(1 << l);
                    }
                    // 0 without a guard, which needs none.
                    (fifo.seqs.pop_front().unwrap_or(0), task)
                }
            };
            if self.is_live(seq, task) {
                return Some(self.take(task));
            }
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn wants_timing(&self) -> bool {
        true
    }

    fn polled(
        &mut self,
        _task: TaskKey,
        group: GroupId,
        elapsed: Option<Duration>,
        _finished: bool,
    ) {
        if let Some(d) = elapsed {
            self.charge(group, d.as_nanos().min(u64::MAX as u128) as u64);
        }
    }

    fn forget(&mut self, task: TaskKey, _group: GroupId) {
        if self.batching {
            // The entry stays until popped (see `batching`).
            return;
        }
        let i = task.index() as usize;
        if !self.seqs() {
            // Exact keys, no guard: the entry stays, skipped when it
            // surfaces.
            if self
                .queued_bits
                .get(i / 64)
                .is_some_and(|w| w & 1 << (i % 64) != 0)
            {
                self.take(task);
                self.dead.get_or_insert_default().0.insert(task);
            }
            return;
        }
        if self.queued.get(i).is_some_and(|&s| s != 0) {
            self.take(task);
        }
    }

    fn group_ended(&mut self, group: GroupId) {
        let table = if group.is_task_group() {
            &mut self.task_service
        } else {
            &mut self.group_service
        };
        if let Some(s) = table.get_mut(group.index()) {
            *s = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(i: u32) -> TaskKey {
        TaskKey::new(i, 0)
    }
    fn ms(n: u64) -> Option<Duration> {
        Some(Duration::from_millis(n))
    }

    #[test]
    fn least_attained_service_first_ties_fifo() {
        let mut s = Las::exact();
        let (a, b, c) = (GroupId::task(0), GroupId::task(1), GroupId::task(2));
        // a has 5 ms of service, b 1 ms, c none.
        s.polled(t(0), a, ms(5), false);
        s.polled(t(1), b, ms(1), false);
        s.push(t(0), a);
        s.push(t(1), b);
        s.push(t(2), c);
        s.push(t(3), GroupId::task(3));
        assert_eq!(s.len(), 4);
        let order: Vec<u32> = std::iter::from_fn(|| s.pop()).map(|x| x.index()).collect();
        // c and the fresh task 3 (0 ms) in push order, then b, then a.
        assert_eq!(order, vec![2, 3, 1, 0]);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn group_service_adds_up_and_resets_when_the_group_ends() {
        let mut s = Las::exact();
        let g = GroupId::keyed(4);
        s.polled(t(0), g, ms(2), true);
        s.polled(t(1), g, ms(3), false);
        assert_eq!(s.service(g), Duration::from_millis(5));
        // A new task of the heavy group waits behind a fresh task.
        s.push(t(2), g);
        s.push(t(3), GroupId::task(3));
        assert_eq!(s.pop(), Some(t(3)));
        assert_eq!(s.pop(), Some(t(2)));
        s.group_ended(g);
        assert_eq!(s.service(g), Duration::ZERO);
    }

    #[test]
    fn quantized_levels_are_fifo_inside_and_ordered_across() {
        assert_eq!(level(0, 100, 16), 0);
        assert_eq!(level(99, 100, 16), 0);
        assert_eq!(level(100, 100, 16), 1);
        assert_eq!(level(399, 100, 16), 2);
        assert_eq!(level(400, 100, 16), 3);
        assert_eq!(level(u64::MAX, 100, 16), 15);
        // Without a guard the structure batches: a forgotten entry stays
        // until popped (the executor skips its stale id); with one, it is
        // skipped here.
        for guarded in [false, true] {
            let mut s = Las::quantized(Duration::from_micros(100), 16);
            if guarded {
                s = s.max_wait(Duration::from_secs(3600));
            }
            assert_eq!(s.batches(), !guarded);
            // Tasks 0 and 1 at level 0 (50 us, 0 us), task 2 at level 1
            // (150 us), task 3 at level 3 (450 us).
            let us = |n| Some(Duration::from_micros(n));
            s.polled(t(0), GroupId::task(0), us(50), false);
            s.polled(t(2), GroupId::task(2), us(150), false);
            s.polled(t(3), GroupId::task(3), us(450), false);
            for i in [3, 2, 0, 1] {
                s.push(t(i), GroupId::task(i));
            }
            s.forget(t(2), GroupId::task(2));
            let order: Vec<u32> = std::iter::from_fn(|| s.pop()).map(|x| x.index()).collect();
            // Level 0 in push order (0 before 1 although 0 has more
            // service), then level 1, then level 3.
            let expected = if guarded {
                vec![0, 1, 3]
            } else {
                vec![0, 1, 2, 3]
            };
            assert_eq!(order, expected);
            assert_eq!(s.len(), 0);
        }
    }

    /// `keep_level0` charges every task of a batch whose indices run past
    /// the end of the service table, in several places and in any order
    /// (the table grows mid-batch and the loop goes on from that task):
    /// each task's service, key and level agree with a sum per task.
    #[test]
    fn level0_charges_grow_the_table_mid_batch() {
        let mut s = Las::new();
        let bound = s.level0_below;
        let mut want = std::collections::HashMap::<u32, u64>::new();
        // Indices below, at and far past the table's end, repeated.
        let rounds: [&[(u32, u64)]; 3] = [
            &[(3, 10), (70, 20), (5, 30), (4_000, 40), (2, 50)],
            &[(4_000, 1), (9_000, 2), (3, 3), (70_000, bound), (1, 4)],
            &[(70, 5), (70_001, 6), (3, 7), (9_000, 8)],
        ];
        for batch in rounds {
            let ids: Vec<Cell<TaskKey>> = batch.iter().map(|&(i, _)| Cell::new(t(i))).collect();
            let ns: Vec<Cell<u64>> = batch.iter().map(|&(_, d)| Cell::new(d)).collect();
            let mut keys = Vec::new();
            for &(i, d) in batch {
                let e = want.entry(i).or_insert(0);
                *e += d;
                keys.push(*e);
            }
            let kept = s.keep_level0(&ids, &ns);
            assert_eq!(ns.iter().map(Cell::get).collect::<Vec<_>>(), keys);
            let stay: Vec<TaskKey> = batch
                .iter()
                .zip(&keys)
                .filter(|&(_, &k)| k < bound)
                .map(|(&(i, _), _)| t(i))
                .collect();
            assert_eq!(kept, stay.len());
            let got: Vec<TaskKey> = ids[..kept].iter().map(Cell::get).collect();
            assert_eq!(got, stay, "the tasks that stay at level 0, in order");
            for (&i, &k) in &want {
                assert_eq!(s.service_ns(GroupId::task(i)), k, "task {i}");
            }
        }
        // The one task that left level 0 is queued at its level.
        assert_eq!(
            std::iter::from_fn(|| s.pop()).collect::<Vec<_>>(),
            vec![t(70_000)]
        );
    }

    /// The run loop's batch path takes level 0 in order, puts back in
    /// front, and requeues behind: the order of one pop and one push each.
    #[test]
    fn level0_batches_keep_push_order() {
        let mut s = Las::new();
        for i in 0..5 {
            s.push(t(i), GroupId::task(i));
        }
        // Task 5 is at level 2: behind every level-0 task.
        s.polled(
            t(5),
            GroupId::task(5),
            Some(Duration::from_micros(250)),
            false,
        );
        s.push(t(5), GroupId::task(5));
        let buf: Vec<Cell<TaskKey>> = (0..3).map(|_| Cell::new(t(99))).collect();
        assert_eq!(s.take_front(&buf), 3);
        let got: Vec<u32> = buf.iter().map(|c| c.get().index()).collect();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(s.len(), 3);
        // 0 and 1 ran: 0 stays at level 0 (requeued behind), 1 reaches
        // level 1 (100 us); 2 goes back in front.
        let ns = [Cell::new(1_000), Cell::new(100_000)];
        s.put_front(&buf[2..]);
        s.push_back_charged(&buf[..2], &ns);
        let order: Vec<u32> = std::iter::from_fn(|| s.pop()).map(|x| x.index()).collect();
        assert_eq!(order, vec![2, 3, 4, 0, 1, 5]);
        // Requeues that become the next batch: the ones that stay at
        // level 0 are kept, in order; the others go to their levels.
        let ids: Vec<Cell<TaskKey>> = [7, 8, 9].map(|i| Cell::new(t(i))).into();
        let ns = [Cell::new(10), Cell::new(200_000), Cell::new(20)];
        assert_eq!(s.keep_level0(&ids, &ns), 2);
        assert_eq!((ids[0].get(), ids[1].get()), (t(7), t(9)));
        assert_eq!(s.pop(), Some(t(8)), "level 2");
        assert_eq!(s.len(), 0);
        // With level 0 empty, a batch is the one task `pop` picks.
        s.push(t(5), GroupId::task(5));
        s.push(t(6), GroupId::task(6));
        s.polled(
            t(6),
            GroupId::task(6),
            Some(Duration::from_micros(150)),
            false,
        );
        assert_eq!(s.take_front(&buf), 1);
        assert_eq!(buf[0].get(), t(6), "level 1 before level 2");
    }

    #[test]
    fn forgotten_tasks_are_skipped() {
        let mut s = Las::exact();
        s.push(t(0), GroupId::task(0));
        s.push(t(1), GroupId::task(1));
        s.forget(t(0), GroupId::task(0));
        assert_eq!(s.len(), 1);
        assert_eq!(s.pop(), Some(t(1)));
        assert_eq!(s.pop(), None);
        // The slot is reused by a new task: its old heap entry stays dead.
        s.push(TaskKey::new(0, 1), GroupId::task(0));
        assert_eq!(s.pop(), Some(TaskKey::new(0, 1)));
        assert_eq!(s.pop(), None);
    }

    /// A seeded xorshift generator for the randomized tests.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// The radix heap pops by key, equal keys in push order (the order of
    /// a sort by `(key, sequence)`), whatever the mix of pushes and pops:
    /// keys in a narrow range (many ties), keys anywhere in `u64`, keys
    /// just above and below the last key popped (the binary heap of keys
    /// below it), against a sorted list.
    #[test]
    fn radix_pops_least_key_first_equal_keys_in_push_order() {
        let mut rng = Rng(0x5EED_0037);
        for case in 0..300 {
            let mut radix = Radix::default();
            let mut model: Vec<Entry<(u64, TaskKey)>> = Vec::new();
            let mut seq = 0;
            let mut last = 0u64;
            let ops = 1 + rng.below(400);
            for _ in 0..ops {
                if rng.below(3) == 0 {
                    model.sort();
                    let want = (!model.is_empty()).then(|| model.remove(0));
                    let got = radix.pop();
                    assert_eq!(got, want, "case {case}");
                    if let Some(e) = got {
                        last = e.0;
                    }
                    continue;
                }
                let key = match case % 4 {
                    0 => rng.below(8),
                    1 => rng.below(u64::MAX) << rng.below(64),
                    2 => last.saturating_add(rng.below(64)),
                    _ => last
                        .saturating_sub(rng.below(16))
                        .saturating_add(rng.below(16)),
                };
                seq += 1;
                let e = (key, (seq, t(rng.below(1000) as u32)));
                radix.push(e);
                model.push(e);
            }
            model.sort();
            for want in model {
                assert_eq!(radix.pop(), Some(want), "case {case}");
            }
            assert_eq!(radix.pop(), None);
        }
    }

    /// Tasks popped and pushed back with the key they had (polls of 0 ns,
    /// as on a still clock) keep one slot of level 0 the least for ever:
    /// its buffer stays within twice the live entries, and the order stays
    /// round robin, through single pops and through batches put back.
    #[test]
    fn a_least_slot_popped_and_pushed_for_ever_stays_bounded() {
        let mut radix: Radix<TaskKey> = Radix::default();
        for i in 0..100 {
            radix.push((7, t(i)));
        }
        let buf: Vec<Cell<TaskKey>> = (0..64).map(|_| Cell::new(t(0))).collect();
        let mut next = 0u32;
        for round in 0..20_000u32 {
            if round % 3 == 0 {
                // A batch: two polled and requeued, the rest put back.
                let (n, key) = radix.take_least(&buf);
                assert_eq!((n, key), (64, 7));
                for (j, id) in buf[..2].iter().enumerate() {
                    assert_eq!(id.get(), t((next + j as u32) % 100), "round {round}");
                    radix.push((7, id.get()));
                }
                radix.put_front(7, &buf[2..n]);
                next = (next + 2) % 100;
            } else {
                let (k, task) = radix.pop().unwrap();
                assert_eq!((k, task), (7, t(next)), "round {round}");
                radix.push((7, task));
                next = (next + 1) % 100;
            }
            assert_eq!(radix.entries, 100);
            assert!(
                radix.slots[7].len() <= 200,
                "round {round}: {}",
                radix.slots[7].len()
            );
        }
    }

    /// The radix heap of tasks (no sequence numbers) against a sorted
    /// list: pops by key, equal keys in push order, with removals of
    /// entries anywhere (the slow path of a forgotten task pushed again);
    /// and a batch it hands out ([`Radix::take_least`]) is the next
    /// entries the pops would return, all of the least key, and goes back
    /// in place ([`Radix::put_front`]).
    #[test]
    fn radix_of_tasks_pops_in_order_removes_and_takes_batches_of_the_least_key() {
        let mut rng = Rng(0x0FF3_0037);
        for case in 0..300 {
            let mut radix: Radix<TaskKey> = Radix::default();
            // (key, push number, task), sorted before use.
            let mut model: Vec<(u64, u64, TaskKey)> = Vec::new();
            let mut pushes = 0u64;
            let mut last = 0u64;
            for step in 0..400 {
                match rng.below(6) {
                    0 | 1 => {
                        model.sort();
                        let want = (!model.is_empty()).then(|| model.remove(0));
                        let got = radix.pop();
                        assert_eq!(got, want.map(|e| (e.0, e.2)), "case {case}, step {step}");
                        if let Some(e) = got {
                            last = e.0;
                        }
                    }
                    2 if !model.is_empty() => {
                        let i = rng.below(model.len() as u64) as usize;
                        let e = model.remove(i);
                        radix.remove(e.2);
                    }
                    _ => {
                        let key = match case % 3 {
                            0 => rng.below(4),
                            1 => last.saturating_add(rng.below(300)),
                            _ => last.saturating_sub(rng.below(8)) + rng.below(100),
                        };
                        pushes += 1;
                        // Distinct tasks: `remove` takes one by its task.
                        let task = TaskKey::new(pushes as u32, 0);
                        radix.push((key, task));
                        model.push((key, pushes, task));
                    }
                }
                model.sort();
                // A batch: the next entries, all of the least key (one
                // from below `base`), then put back.
                let from_low = !radix.low.is_empty();
                let buf: Vec<Cell<TaskKey>> = (0..5).map(|_| Cell::new(t(0))).collect();
                let (n, key) = radix.take_least(&buf);
                let least = model.first().map(|e| e.0);
                let ties = model.iter().take_while(|e| Some(e.0) == least).count();
                let want = if from_low { ties.min(1) } else { ties.min(5) };
                assert_eq!(n, want, "case {case}, step {step}");
                if n > 0 {
                    assert_eq!(Some(key), least, "case {case}, step {step}");
                }
                let got: Vec<TaskKey> = buf[..n].iter().map(Cell::get).collect();
                let next: Vec<TaskKey> = model.iter().take(n).map(|e| e.2).collect();
                assert_eq!(got, next, "case {case}, step {step}");
                radix.put_front(key, &buf[..n]);
            }
            model.sort();
            for want in model {
                assert_eq!(radix.pop(), Some((want.0, want.2)), "case {case}");
            }
            assert_eq!(radix.pop(), None);
            assert_eq!(radix.entries, 0);
        }
    }

    /// `Las::exact()` against a reference model (a list of `(key, push
    /// number, task)`, popped by least key, then push number; a group's
    /// service the sum of its polls, reset when it ends): random pushes,
    /// pops, polls, removals (`forget`), ends of groups, tasks of their own
    /// groups and of keyed ones, with and without a guard that never
    /// fires.
    #[test]
    fn exact_las_matches_a_reference_model() {
        let mut rng = Rng(0x1A5_0037);
        for case in 0..200 {
            let guarded = case % 2 == 1;
            let mut s = Las::exact();
            if guarded {
                s = s.max_wait(Duration::from_secs(1 << 40));
            }
            let tasks = 1 + rng.below(40) as u32;
            // Task i's group: its own, or keyed group i % 3.
            let group = |i: u32| {
                if i.is_multiple_of(4) {
                    GroupId::keyed(i % 3)
                } else {
                    GroupId::task(i)
                }
            };
            let mut service = std::collections::HashMap::<GroupId, u64>::new();
            let mut queued: Vec<(u64, u64, u32)> = Vec::new();
            let mut pushes = 0;
            for step in 0..600 {
                let i = rng.below(tasks as u64) as u32;
                let g = group(i);
                match rng.below(10) {
                    0..=3 if !queued.iter().any(|e| e.2 == i) => {
                        pushes += 1;
                        let key = service.get(&g).copied().unwrap_or(0);
                        queued.push((key, pushes, i));
                        s.push(t(i), g);
                    }
                    4..=6 => {
                        queued.sort();
                        let want = (!queued.is_empty()).then(|| queued.remove(0).2);
                        let got = s.pop().map(|k| k.index());
                        assert_eq!(got, want, "case {case}, step {step}");
                        if let Some(j) = got {
                            // Polled for 0 to 3 us, in ns steps of 250
                            // (ties are common).
                            let ns = 250 * rng.below(13);
                            *service.entry(group(j)).or_insert(0) += ns;
                            s.polled(t(j), group(j), Some(Duration::from_nanos(ns)), false);
                        }
                    }
                    7 => {
                        queued.retain(|e| e.2 != i);
                        s.forget(t(i), g);
                    }
                    8 if !queued.iter().any(|e| group(e.2) == g) => {
                        service.remove(&g);
                        s.group_ended(g);
                    }
                    _ => {}
                }
                assert_eq!(s.len(), queued.len(), "case {case}, step {step}");
                assert_eq!(
                    s.service(g),
                    Duration::from_nanos(service.get(&g).copied().unwrap_or(0))
                );
            }
            queued.sort();
            let rest: Vec<u32> = std::iter::from_fn(|| s.pop()).map(|k| k.index()).collect();
            assert_eq!(rest, queued.iter().map(|e| e.2).collect::<Vec<_>>());
        }
    }

    /// `Las::exact()` handed out in batches, as the run loop takes it
    /// (`take_front`; requeues of tasks of their own groups charged and
    /// pushed through the tail, `push_back_charged`, before the next batch
    /// and before any other push; a keyed group's task charged and pushed
    /// at once; other tasks pushed in between, some with keys below the
    /// batch's, after which the batch's rest goes back, `take_overtaken`
    /// and `put_front`; tasks that end or wait), against the reference
    /// model of one pop, one charge and one push per poll: the same tasks
    /// polled in the same order. Durations in steps of 250 ns, 0
    /// included, so that keys tie often.
    #[test]
    fn exact_las_batches_poll_in_the_order_of_one_pop_per_poll() {
        let mut rng = Rng(0xBA7C_0037);
        for case in 0..300 {
            let mut s = Las::exact();
            let tasks = 1 + rng.below(80) as u32;
            let group = |i: u32| {
                if i % 5 == 4 {
                    GroupId::keyed(i % 2)
                } else {
                    GroupId::task(i)
                }
            };
            let mut service = std::collections::HashMap::<GroupId, u64>::new();
            // The model's queue: (key, push number, task).
            let mut model: Vec<(u64, u64, u32)> = Vec::new();
            let mut idle: Vec<u32> = Vec::new();
            let mut pushes = 0u64;
            let push = |s: &mut Las,
                        model: &mut Vec<(u64, u64, u32)>,
                        pushes: &mut u64,
                        service: &std::collections::HashMap<GroupId, u64>,
                        i: u32| {
                *pushes += 1;
                model.push((service.get(&group(i)).copied().unwrap_or(0), *pushes, i));
                s.push(t(i), group(i));
            };
            for i in 0..tasks {
                push(&mut s, &mut model, &mut pushes, &service, i);
            }
            let buf: Vec<Cell<TaskKey>> = (0..64).map(|_| Cell::new(t(0))).collect();
            let tail_ids: Vec<Cell<TaskKey>> = (0..64).map(|_| Cell::new(t(0))).collect();
            let tail_ns: Vec<Cell<u64>> = (0..64).map(|_| Cell::new(0)).collect();
            let mut polls = 0;
            while polls < 2_000 {
                let mut n = s.take_front(&buf);
                if n == 0 {
                    assert!(model.is_empty(), "case {case}");
                    if idle.is_empty() {
                        break;
                    }
                    let i = idle.swap_remove(rng.below(idle.len() as u64) as usize);
                    push(&mut s, &mut model, &mut pushes, &service, i);
                    continue;
                }
                let (mut pos, mut tail) = (0, 0);
                while pos < n {
                    let id = buf[pos].get();
                    pos += 1;
                    polls += 1;
                    model.sort();
                    let want = model.remove(0);
                    assert_eq!(id, t(want.2), "case {case}, poll {polls}");
                    let i = id.index();
                    let ns = 250 * rng.below(4);
                    *service.entry(group(i)).or_insert(0) += ns;
                    match rng.below(8) {
                        0 => {
                            // Ends: charged, not pushed.
                            s.polled(id, group(i), Some(Duration::from_nanos(ns)), true);
                        }
                        1 => {
                            // Waits: charged at once.
                            s.charge(group(i), ns);
                            idle.push(i);
                        }
                        _ if !group(i).is_task_group() => {
                            // A keyed group's task: the tail first, then
                            // charged and pushed.
                            s.push_back_charged(&tail_ids[..tail], &tail_ns[..tail]);
                            tail = 0;
                            s.charge(group(i), ns);
                            pushes += 1;
                            model.push((service[&group(i)], pushes, i));
                            s.push(id, group(i));
                        }
                        _ => {
                            tail_ids[tail].set(id);
                            tail_ns[tail].set(ns);
                            tail += 1;
                            pushes += 1;
                            model.push((service[&group(i)], pushes, i));
                        }
                    }
                    if !idle.is_empty() && rng.below(4) == 0 {
                        // Another task woken: the tail first.
                        s.push_back_charged(&tail_ids[..tail], &tail_ns[..tail]);
                        tail = 0;
                        let j = idle.swap_remove(rng.below(idle.len() as u64) as usize);
                        if group(j).is_task_group() && rng.below(3) == 0 {
                            // Its group ended (its task did), and a new
                            // task took its slot, at 0.
                            service.remove(&group(j));
                            s.group_ended(group(j));
                        }
                        push(&mut s, &mut model, &mut pushes, &service, j);
                        if s.take_overtaken() {
                            s.put_front(&buf[pos..n]);
                            n = pos;
                        }
                    }
                }
                s.push_back_charged(&tail_ids[..tail], &tail_ns[..tail]);
                assert_eq!(s.len(), model.len(), "case {case}");
            }
        }
    }

    #[test]
    fn guard_serves_the_oldest_after_max_wait() {
        let mut s = Las::exact().max_wait(Duration::from_millis(10));
        let fat = GroupId::task(0);
        s.polled(t(0), fat, ms(100), false);
        s.push(t(0), fat); // waits from queue time 100 ms
                           // A stream of thin tasks, each polled for 3 ms.
        let mut served = Vec::new();
        for i in 1..=6 {
            s.push(t(i), GroupId::task(i));
            let next = s.pop().unwrap();
            served.push(next.index());
            s.polled(next, GroupId::task(next.index()), ms(3), true);
        }
        // After 4 thin polls (12 ms > 10 ms of waiting) the fat task goes first.
        assert_eq!(served, vec![1, 2, 3, 4, 0, 5]);
    }
}
