#![forbid(unsafe_code)]
//! What other threads send an executor: [`RemoteOp`]s in its inbox
//! ([`Remote`]), done on the executor's thread at a poll boundary
//! (`remote/intake.rs`). A spawn travels type-erased ([`RemoteSpawn`]);
//! its typed half is `remote/spawner.rs`'s.

use std::sync::Arc;

use super::inbox::Inbox;
use super::target::Target;
use super::ticket::Ticket;
use crate::task::id::TaskKey;

/// Work sent to the executor from another thread, done on the executor's
/// thread at a poll boundary (a spawn joins its queue's line of the remote
/// backlog there, `remote/backlog.rs`).
pub(crate) enum RemoteOp {
    /// A remote spawn: its (`Send`) future, queue and result slot.
    Spawn(RemoteSpawn),
    /// A remote `abort()` (a remote join handle's or an abort handle's).
    Abort(TaskKey),
    /// A call on the executor's thread at a poll boundary, outside any
    /// task (the pool's control: shares, stats).
    Call(Call),
}

/// A call on the executor's thread ([`RemoteOp::Call`]).
pub(crate) type Call = Box<dyn FnOnce(&ExecutorTarget) + Send>;

/// The executor, as remote work reaches it.
pub(crate) type ExecutorTarget = dyn Target<Remote>;

impl std::fmt::Debug for RemoteOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteOp::Spawn(_) => f.write_str("Spawn"),
            RemoteOp::Abort(id) => f.debug_tuple("Abort").field(id).finish(),
            RemoteOp::Call(_) => f.write_str("Call"),
        }
    }
}

/// The executor's thread-safe half: its inbox, which its tasks' wakers and
/// handles reach from any thread (the tasks' sink, `executor/wake.rs`).
pub(crate) type Remote = Inbox<RemoteOp>;

/// A remote spawn as the executor runs it (implemented by the spawner's
/// typed slot, `remote/spawner.rs`).
pub(crate) trait SpawnOp: Send + Sync {
    /// The queue the task is for.
    fn queue(&self) -> usize;
    /// Spawns the task on the executor's thread, at a poll boundary; its
    /// future holds `ticket` until its first poll.
    fn run(self: Arc<Self>, target: &ExecutorTarget, ticket: Ticket);
    /// Drops the future unpolled: the handle reads `Cancelled`.
    fn cancel(self: Arc<Self>);
}

/// A spawn op in the inbox. Dropped without running (refused at
/// submission, or left in the inbox of an executor that closed without
/// running it), it drops its future and its handle reads `Cancelled`.
pub(crate) struct RemoteSpawn(Option<Arc<dyn SpawnOp>>);

impl RemoteSpawn {
    /// The op of `spawn`.
    pub(crate) fn new(spawn: Arc<dyn SpawnOp>) -> Self {
        Self(Some(spawn))
    }

    /// The queue the task is for.
    pub(crate) fn queue(&self) -> usize {
        self.0.as_ref().map_or(0, |op| op.queue())
    }

    /// Runs the spawn on the executor's thread; the task's future holds
    /// `ticket` until its first poll.
    pub(crate) fn run(mut self, target: &ExecutorTarget, ticket: Ticket) {
        if let Some(op) = self.0.take() {
            op.run(target, ticket);
        }
    }

    /// A spawn op of no task (the backlog's tests).
    #[cfg(test)]
    pub(crate) fn empty() -> Self {
        Self(None)
    }
}

impl Drop for RemoteSpawn {
    fn drop(&mut self) {
        if let Some(op) = self.0.take() {
            op.cancel();
        }
    }
}
