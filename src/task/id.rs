#![forbid(unsafe_code)]
//! Task and group identifiers.

use std::fmt;

/// Identifies a task for its whole life.
///
/// A `TaskId` is a slab index plus a generation: when a task ends its slot
/// may be reused, but the new occupant gets a new generation, so an old id
/// (held by a stale waker, a scheduler or a join handle) never aliases it.
///
/// Both halves are packed in one integer (`index << 32 | generation`,
/// ordered as the pair `(index, generation)`): the run loop keeps an id in
/// one register, and its batches move it in one load and one store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(u64);

impl TaskId {
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

    /// The id packed into one integer (`generation << 32 | index`), e.g. for logs.
    pub const fn as_u64(self) -> u64 {
        (self.generation() as u64) << 32 | self.index() as u64
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({}v{})", self.index(), self.generation())
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}v{}", self.index(), self.generation())
    }
}

/// Identifies the group a task belongs to, as seen by a [`Scheduler`](crate::sched::Scheduler).
///
/// A task spawned without a group is a group of its own (a *task group*); a
/// task spawned with [`spawn_in_group`](crate::Executor::spawn_in_group)
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
