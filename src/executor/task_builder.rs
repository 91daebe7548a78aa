#![forbid(unsafe_code)]
//! `TaskBuilder`: spawn with options (a name, a group), as tokio's
//! `task::Builder`. It collects the options and hands the spawn to the
//! spawn path (`spawning`); it creates nothing itself.
//!
//! [`spawn_local`], the one local spawn with every option, is here too:
//! every local spawn entry point (`Executor`, `Spawner`, `QueueHandle`,
//! `TaskBuilder`, the free `spawn` and `try_spawn`, their
//! `spawn_in_group` forms) is one call of it, with what it has (a queue
//! lookup, a group, a name) and `None` for the rest.

use std::fmt;
use std::future::Future;
use std::rc::Rc;

use super::core::Core;
use super::core::Spawn;
use crate::error::{SpawnError, UnknownQueue};
use crate::task::join::JoinHandle;

/// Spawns one task with options: a name (shown in stall reports) and a
/// group (see [`Spawner::spawn_in_group`](crate::Spawner::spawn_in_group)).
/// Get one from [`Spawner::task`](crate::Spawner::task),
/// [`Spawner::task`](crate::Spawner::task) or
/// [`QueueHandle::task`](crate::QueueHandle::task).
///
/// ```
/// use tourbillon::Builder;
///
/// let ex = Builder::new().queue("io", 1).build().unwrap();
/// let h = ex
///     .task("io")
///     .name("flush segment 7")
///     .group(7)
///     .spawn(async { 7 })
///     .unwrap();
/// assert_eq!(ex.block_on(h).unwrap(), 7);
///
/// // An unknown queue is reported when spawning.
/// assert!(ex.task("nope").spawn(async {}).is_err());
/// ```
#[must_use = "a TaskBuilder does nothing until `spawn` is called"]
pub struct TaskBuilder<'a> {
    core: &'a Rc<Core>,
    queue: Result<usize, UnknownQueue>,
    group: Option<u64>,
    name: Option<Rc<str>>,
}

impl<'a> TaskBuilder<'a> {
    pub(crate) fn new(core: &'a Rc<Core>, queue: Result<usize, UnknownQueue>) -> Self {
        Self {
            core,
            queue,
            group: None,
            name: None,
        }
    }

    /// Names the task: the name appears in [`Stall`](crate::stats::Stall)
    /// reports and in the [timeline](crate::timeline).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(Rc::from(name));
        self
    }

    /// Puts the task in the keyed group `group` (by default a task is a
    /// group of its own).
    pub fn group(mut self, group: u64) -> Self {
        self.group = Some(group);
        self
    }

    /// Spawns `future` with these options.
    pub fn spawn<F>(self, future: F) -> Result<JoinHandle<F::Output>, SpawnError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        spawn_local(self.core, self.queue, self.group, self.name, future)
    }
}

/// Spawns `future` with a local join handle onto `queue` (the caller's
/// lookup of its queue: an unknown key fails here), in the keyed group
/// `group` (a group of its own if `None`), named `name`: the one local
/// spawn, which every local entry point calls.
#[inline(always)]
pub(crate) fn spawn_local<F>(
    core: &Core,
    queue: Result<usize, UnknownQueue>,
    group: Option<u64>,
    name: Option<Rc<str>>,
    future: F,
) -> Result<JoinHandle<F::Output>, SpawnError>
where
    F: Future + 'static,
    F::Output: 'static,
{
    core.spawn_task(Spawn {
        queue: queue?,
        group,
        name,
        future,
    })
}

impl fmt::Debug for TaskBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskBuilder")
            .field("queue", &self.queue)
            .field("group", &self.group)
            .field("name", &self.name)
            .finish()
    }
}
