#![forbid(unsafe_code)]
//! Task and group identifiers.

use std::fmt;

/// Identifies a task for its whole life.
///
/// A `TaskId` is a slab index plus a generation: when a task ends its slot
/// may be reused, but the new occupant gets a new generation, so an old id
/// (held by a stale waker, a scheduler or a join handle) never aliases it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId {
    index: u32,
    generation: u32,
}

impl TaskId {
    pub(crate) const fn new(index: u32, generation: u32) -> Self {
        Self { index, generation }
    }

    /// The slab slot of the task (reused after the task ends).
    pub const fn index(self) -> u32 {
        self.index
    }

    /// The generation of the slot when the task was spawned.
    pub const fn generation(self) -> u32 {
        self.generation
    }

    /// The id packed into one integer (`generation << 32 | index`), e.g. for logs.
    pub const fn as_u64(self) -> u64 {
        (self.generation as u64) << 32 | self.index as u64
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TaskId({}v{})", self.index, self.generation)
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}v{}", self.index, self.generation)
    }
}

/// Identifies the group a task belongs to, as seen by a [`Scheduler`](crate::Scheduler).
///
/// A task spawned without a group is a group of its own. Group ids are
/// assigned by the executor and are never reused while the executor lives,
/// so a scheduler may key per-group state by them and drop that state when it
/// is told the group ended.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct GroupId(u64);

impl GroupId {
    pub(crate) const fn new(raw: u64) -> Self {
        Self(raw)
    }

    /// The id as an integer (unique within one executor).
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}
