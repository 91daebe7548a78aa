#![forbid(unsafe_code)]
//! Task and group identifiers.

use std::cell::Cell;
use std::fmt;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

/// Identifies a task, unique in the process, as tokio's `task::Id`.
///
/// What [`task::id`](crate::task::id), [`JoinHandle::id`](crate::task::JoinHandle::id),
/// [`AbortHandle::id`](crate::task::AbortHandle::id), [`JoinError::id`](crate::task::JoinError::id),
/// the stall report and the `tracing` spans give. No two tasks of one
/// process share an id, whatever executor or `Pool` core ran them, and an
/// id is never reused. Ids are not in spawn order across threads: each
/// thread takes them from a shared counter in blocks.
///
/// `Debug` prints `Id(N)`, `Display` prints `N`, as tokio's. A
/// [`Scheduler`](crate::sched::Scheduler) sees a task's [`TaskKey`]
/// instead; [`JoinHandle::key`](crate::task::JoinHandle::key) relates the two.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(NonZeroU64);

/// How many ids a thread takes from [`NEXT_BLOCK`] at once.
const BLOCK: u64 = 1024;

/// The next block of ids to hand out, counted in blocks.
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The next id of this thread's block; a multiple of [`BLOCK`] when
    /// the block is used up (0 on a thread that took none yet).
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

impl TaskId {
    /// A new id, never handed out before in this process: from this
    /// thread's block, no atomic operation but once per [`BLOCK`] ids.
    #[inline]
    pub(crate) fn next() -> TaskId {
        let taken = NEXT_ID.try_with(|n| {
            let id = n.get();
            if id % BLOCK != 0 {
                n.set(id + 1);
                id
            } else {
                let id = Self::take_block();
                n.set(id + 1);
                id
            }
        });
        // A spawn from a thread-local destructor, after this thread's
        // block is gone: a block for this id alone.
        let id = taken.unwrap_or_else(|_| Self::take_block());
        TaskId(NonZeroU64::new(id).unwrap_or(NonZeroU64::MIN))
    }

    /// The first id of a fresh block (1 in the first block: an id is
    /// never 0).
    #[cold]
    fn take_block() -> u64 {
        let block = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed);
        (block * BLOCK).max(1)
    }

    /// The id as an integer, e.g. for logs (what `Display` prints).
    pub const fn as_u64(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Id").field(&self.0).finish()
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Where a task lives in its executor: what a
/// [`Scheduler`](crate::sched::Scheduler) is given and hands back.
///
/// A slab index plus a generation: when a task ends its slot may be
/// reused, but the new occupant gets a new generation, so an old key (held
/// by a stale waker, a scheduler or a join handle) never aliases it. Keys
/// are unique among the tasks of one executor, not in the process (the
/// first task of every executor has the key `0v0`): a task's process-wide
/// id is its [`TaskId`]. [`JoinHandle::key`](crate::task::JoinHandle::key) and
/// [`AbortHandle::key`](crate::task::AbortHandle::key) give a task's key.
///
/// Both halves are packed in one integer (`index << 32 | generation`,
/// ordered as the pair `(index, generation)`): the run loop keeps a key in
/// one register, and its batches move it in one load and one store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskKey(u64);

impl TaskKey {
    pub(crate) const fn new(index: u32, generation: u32) -> Self {
        Self((index as u64) << 32 | generation as u64)
    }

    /// The slab slot of the task (reused after the task ends).
    pub const fn index(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The generation of the slot when the task was spawned.
    pub const fn generation(self) -> u32 {
        self.0 as u32
    }

    /// The key packed into one integer (`generation << 32 | index`), e.g. for logs.
    pub const fn as_u64(self) -> u64 {
        (self.generation() as u64) << 32 | self.index() as u64
    }
}

impl fmt::Debug for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskKey({}v{})", self.index(), self.generation())
    }
}

impl fmt::Display for TaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}v{}", self.index(), self.generation())
    }
}

/// Identifies the group a task belongs to, as seen by a [`Scheduler`](crate::sched::Scheduler).
///
/// A task spawned without a group is a group of its own (a *task group*); a
/// task spawned with [`spawn_in_group`](crate::Spawner::spawn_in_group)
/// belongs to the *keyed group* of that key, created on its first task and
/// ended with its last. Ids are dense: [`GroupId::index`] is a small integer,
/// unique among the live groups of the same kind, so a scheduler may keep
/// per-group state in a vector. An id may come back for a new group after the
/// scheduler was told [`group_ended`](crate::sched::Scheduler::group_ended).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(u32);

/// The kind bit: set for a task's own group. Indexes are below 2^31 (slab
/// indexes and registry slots count live tasks and groups).
const TASK_GROUP: u32 = 1 << 31;

impl GroupId {
    /// The own group of the task at slab index `index`.
    pub(crate) const fn task(index: u32) -> Self {
        Self(TASK_GROUP | index)
    }

    /// The keyed group in registry slot `slot`.
    pub(crate) const fn keyed(slot: u32) -> Self {
        Self(slot & !TASK_GROUP)
    }

    /// Whether this is a task's own group (spawned without a group key).
    pub const fn is_task_group(self) -> bool {
        self.0 & TASK_GROUP != 0
    }

    /// A dense index: the task's slab index for a task group, the registry
    /// slot for a keyed group.
    pub const fn index(self) -> usize {
        (self.0 & !TASK_GROUP) as usize
    }

    /// The id as one integer (the kind in bit 31), e.g. for logs.
    pub const fn as_u64(self) -> u64 {
        self.0 as u64
    }
}

impl fmt::Debug for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_task_group() {
            write!(f, "GroupId(task {})", self.index())
        } else {
            write!(f, "GroupId(keyed {})", self.index())
        }
    }
}
