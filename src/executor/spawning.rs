#![forbid(unsafe_code)]
//! The spawn path, implemented once. Every local entry point (`Executor`,
//! `Spawner`, `QueueHandle`, `TaskBuilder`, the free `spawn` and
//! `try_spawn`) describes its task as a [`Spawn`] and hands it to
//! [`Core::spawn_task`], which returns a local join handle; the op a
//! `RemoteSpawner` sends runs `Target::spawn_detached` (`remote/target.rs`,
//! implemented in `executor/core.rs`) on the executor's thread, and
//! attaches its own delivery. Both store the task and queue it in one step
//! ([`Core::insert_and_queue`]).
//!
//! It owns the creation of tasks; it does not look queue keys up (the
//! handles do), and it runs nothing: a new task waits for the run loop.

use std::future::Future;
use std::rc::Rc;

use super::core::Core;
use crate::error::SpawnError;
use crate::remote::op::Remote;
use crate::task::id::{GroupId, TaskKey};
use crate::task::join::JoinHandle;
use crate::task::slab::TaskSlab;

/// A task to spawn: the queue it goes to (an index), its keyed group (a
/// group of its own if `None`), its name (for stall reports) and its
/// future.
#[must_use = "a `Spawn` spawns nothing until `Core::spawn_task` takes it"]
pub(crate) struct Spawn<F> {
    pub(crate) queue: usize,
    pub(crate) group: Option<u64>,
    pub(crate) name: Option<Rc<str>>,
    pub(crate) future: F,
}

impl Core {
    /// Spawns `spawn` with a local join handle: where every local spawn
    /// entry point ends.
    pub(crate) fn spawn_task<F>(&self, spawn: Spawn<F>) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let Spawn {
            queue,
            group,
            name,
            future,
        } = spawn;
        self.insert_and_queue(queue, group, name, |tasks, group| {
            let (cell, group) = tasks.insert_joined(future, queue, group);
            let id = cell.key();
            (JoinHandle::new(cell), id, group)
        })
    }

    /// Stores a new task with `insert` (which returns what the caller gets,
    /// the task's id and its group) and queues it on queue `q`; refused
    /// once the executor shut down, or onto a quarantined queue.
    #[inline(always)]
    pub(super) fn insert_and_queue<R>(
        &self,
        q: usize,
        group: Option<u64>,
        name: Option<Rc<str>>,
        insert: impl FnOnce(&mut TaskSlab<Remote>, Option<GroupId>) -> (R, TaskKey, GroupId),
    ) -> Result<R, SpawnError> {
        if self.shutdown.get() {
            return Err(SpawnError::Shutdown);
        }
        if self.any_quarantine.get() {
            self.refuse_quarantined(q)?;
        }
        let group = group.map(|key| self.groups.borrow_mut().join(key));
        let (spawned, id, group) = {
            let mut tasks = self.tasks.borrow_mut();
            let (spawned, id, group) = insert(&mut tasks, group);
            if let Some(name) = name {
                tasks.set_name(id, name);
            }
            if self.cfg.latency {
                tasks.set_ready(id, self.now_ns());
            }
            (spawned, id, group)
        };
        let activated = {
            let mut qs = self.queues.borrow_mut();
            qs.list[q].counters.spawned += 1;
            self.push_to(&mut qs, q, id, group)
        };
        if activated {
            self.on_activation();
        }
        Ok(spawned)
    }
}
