#![forbid(unsafe_code)]
//! What other threads send an executor: [`RemoteOp`]s in its inbox
//! ([`Remote`]), done on the executor's thread at a poll boundary
//! (`remote/intake.rs`).

use super::inbox::Inbox;
use super::spawner::RemoteSpawn;
use super::target::Target;
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
pub(crate) type Call = Box<dyn FnOnce(&dyn Target) + Send>;

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
