#![forbid(unsafe_code)]
//! [`Target`]: the executor as the intake sees it, the one interface
//! through which remote work reaches the executor's state. The executor
//! (`executor/core.rs`) implements it; nothing in `remote/` knows the
//! executor's types.

use std::rc::Weak;

use super::ticket::Window;
use crate::boundary::Payload;
use crate::error::quarantine::Quarantine;
use crate::error::{SharesError, SpawnError};
use crate::stats::ExecutorStats;
use crate::task::id::{GroupId, TaskKey};
use crate::task::schedule::Schedule;
use crate::task::slab::TaskSlab;
use crate::timeline::Timeline;

/// Stores a new task in the slab (of tasks whose sink is `S`): given the
/// slab and the task's keyed group (if any), returns the task's key and
/// group.
pub(crate) type Insert<'a, S> =
    &'a mut dyn FnMut(&mut TaskSlab<S>, Option<GroupId>) -> (TaskKey, GroupId);

/// What remote work asks of the executor, on the executor's thread, at a
/// poll boundary (or at its shutdown). `S` is the sink of the executor's
/// tasks (its inbox, `remote/op.rs`'s `Remote`). A ticket's place goes
/// back through the supertrait [`Window`].
pub(crate) trait Target<S: Schedule>: Window {
    /// A wake from another thread, taken from the inbox.
    fn wake_foreign(&self, key: TaskKey);
    /// An abort from another thread (or of a task whose abort came before
    /// its spawn).
    fn abort(&self, key: TaskKey);
    /// A panic of user code run for remote work: to the panic sink.
    fn report(&self, payload: Payload);
    /// Whether the executor shut down (a spawn run now drops its future).
    fn is_shut_down(&self) -> bool;
    /// Why queue `q` is quarantined, if it is.
    fn quarantine_of(&self, q: usize) -> Option<Quarantine>;
    /// Spawns a task without a join handle on queue `q` (in keyed group
    /// `group`, if any): `insert` stores it; queued as any spawn.
    fn spawn_detached(
        &self,
        q: usize,
        group: Option<u64>,
        insert: Insert<'_, S>,
    ) -> Result<TaskKey, SpawnError>;
    /// The executor's window, for what outlives a boundary (a remote
    /// task's admission ticket).
    fn window(&self) -> Weak<dyn Window>;
    /// `Spawner::set_shares` (the pool's control).
    fn set_shares(&self, q: usize, shares: u32) -> Result<(), SharesError>;
    /// `Executor::stats` (the pool's control).
    fn stats(&self) -> ExecutorStats;
    /// `Executor::take_timeline` (the pool's control).
    fn take_timeline(&self) -> Option<Timeline>;
}
