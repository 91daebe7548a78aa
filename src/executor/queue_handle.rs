#![forbid(unsafe_code)]
//! `QueueHandle`: spawn into one queue without looking its key up. A
//! handle only: it describes the spawn and hands it to the spawn path
//! (`spawning`), and changes shares through `Core`.

use std::fmt;
use std::future::Future;
use std::rc::Rc;

use super::core::Core;
use super::task_builder::{spawn_local, TaskBuilder};
use crate::error::{SharesError, SpawnError};
use crate::task::join::JoinHandle;

/// A cheap, clonable handle to one queue of an executor (`!Send`, like the
/// executor). Get one with [`Executor::queue`](crate::Executor::queue).
/// Spawning through it after the executor was dropped gives
/// [`SpawnError::Shutdown`].
#[derive(Clone)]
pub struct QueueHandle {
    pub(crate) core: Rc<Core>,
    pub(crate) index: usize,
}

impl QueueHandle {
    /// Spawns `future` onto this queue.
    pub fn spawn<F>(&self, future: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        spawn_local(&self.core, Ok(self.index), None, None, future)
    }

    /// Spawns `future` onto this queue in the group `group` (see
    /// [`Spawner::spawn_in_group`](crate::Spawner::spawn_in_group)).
    pub fn spawn_in_group<F>(
        &self,
        group: u64,
        future: F,
    ) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        spawn_local(&self.core, Ok(self.index), Some(group), None, future)
    }

    /// A [`TaskBuilder`] to spawn onto this queue with a name or a group.
    pub fn task(&self) -> TaskBuilder<'_> {
        TaskBuilder::new(&self.core, Ok(self.index))
    }

    /// Changes this queue's shares (see
    /// [`Spawner::set_shares`](crate::Spawner::set_shares)).
    pub fn set_shares(&self, shares: u32) -> Result<(), SharesError> {
        self.core.set_shares(self.index, shares)
    }

    /// The queue's index in declaration order.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl fmt::Debug for QueueHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueHandle")
            .field("index", &self.index)
            .finish()
    }
}
