#![forbid(unsafe_code)]
//! Spawn groups: user keys (a connection, a tenant, a request id) mapped to
//! dense [`GroupId`]s, with a count of live tasks per group. A group is
//! created by its first task and freed with its last, so memory is bounded
//! by the live groups. Tasks spawned without a key are groups of their own
//! and never enter the registry.

use std::collections::HashMap;

use slab::Slab;

use super::id::GroupId;

struct Keyed {
    key: u64,
    live: u32,
}

/// The keyed groups of one executor.
#[derive(Default)]
pub(crate) struct Groups {
    by_key: HashMap<u64, u32>,
    slots: Slab<Keyed>,
}

impl Groups {
    /// A new task joins the group `key` (created if it has no live task).
    pub(crate) fn join(&mut self, key: u64) -> GroupId {
        let slot = match self.by_key.get(&key) {
            Some(&slot) => slot,
            None => {
                let slot = self.slots.insert(Keyed { key, live: 0 }) as u32;
                self.by_key.insert(key, slot);
                slot
            }
        };
        self.slots[slot as usize].live += 1;
        GroupId::keyed(slot)
    }

    /// A task of `group` ended; `true` if that was the group's last task
    /// (the group is gone: schedulers must be told).
    pub(crate) fn leave(&mut self, group: GroupId) -> bool {
        if group.is_task_group() {
            return true;
        }
        let slot = group.index();
        let Some(g) = self.slots.get_mut(slot) else {
            return false;
        };
        g.live -= 1;
        if g.live > 0 {
            return false;
        }
        let g = self.slots.remove(slot);
        self.by_key.remove(&g.key);
        true
    }

    /// Keyed groups alive.
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_live_while_they_have_tasks() {
        let mut g = Groups::default();
        let a = g.join(7);
        let b = g.join(7);
        assert_eq!(a, b);
        let c = g.join(8);
        assert_ne!(a, c);
        assert_eq!(g.len(), 2);
        assert!(!g.leave(a));
        assert!(g.leave(b), "the last task ends the group");
        assert_eq!(g.len(), 1);
        assert!(g.leave(GroupId::task(3)), "a task group ends with its task");
        assert!(g.leave(c));
        assert_eq!(g.len(), 0);
        assert!(g.by_key.is_empty());
    }
}
