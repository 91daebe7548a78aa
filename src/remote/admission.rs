#![forbid(unsafe_code)]
//! What an admitted remote spawn does on the executor's thread
//! ([`SpawnOp`] for the spawner's slot, `remote/spawner.rs`): it takes the
//! future out, drops it unpolled when the spawn was aborted, the executor
//! shuts down or the queue is quarantined, and otherwise has the executor
//! store it ([`Target::spawn_detached`](super::target::Target::spawn_detached))
//! wrapped in [`Admitted`] with the spawn's [`Ticket`], publishing its id
//! to the slot and attaching the slot as the task's delivery.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::launch::Launch;
use super::op::{ExecutorTarget, SpawnOp};
use super::spawner::{take, Pending, Shared};
use super::ticket::{Admitted, Ticket};
use crate::boundary;
use crate::task::join_error::JoinError;

impl<L: Launch> SpawnOp for Shared<L::Output, Pending<L>> {
    fn queue(&self) -> usize {
        self.spawn.queue
    }

    fn run(self: Arc<Self>, target: &ExecutorTarget, ticket: Ticket) {
        let Some(future) = take(&self.spawn.future) else {
            return;
        };
        if target.is_shut_down() || self.aborted.load(Ordering::Acquire) {
            drop(ticket);
            // Aborted before it started, or the executor shuts down: the
            // future is dropped unpolled, then the handle reads Cancelled
            // (at shutdown: or the panic of the future's destructor). Two
            // calls into user code (the future's destructor, the wake of
            // the handle's waker), each behind a boundary of its own: a
            // panic of the first must not unwind through the second (a
            // panic while unwinding aborts the process).
            match boundary::drop_caught(future) {
                Some(p) if target.is_shut_down() => {
                    let id = self.task_id();
                    self.complete(Err(JoinError::panic(id, p)));
                }
                Some(p) => {
                    target.report(p);
                    self.cancel_slot();
                }
                None => self.cancel_slot(),
            }
            return;
        }
        if let Some(why) = target.quarantine_of(self.spawn.queue) {
            drop(ticket);
            // Its queue is quarantined: the future is dropped unpolled,
            // then the handle reads the quarantine's panic, each behind a
            // boundary of its own, as above.
            if let Some(p) = boundary::drop_caught(future) {
                target.report(p);
            }
            let payload: boundary::Payload = Box::new(why.task_payload());
            let id = self.task_id();
            self.complete(Err(JoinError::panic(id, payload)));
            return;
        }
        let (queue, group) = (self.spawn.queue, self.spawn.group);
        let mut future = Some(Admitted::new(future.launch(), ticket));
        let mut delivery = Some(self);
        let mut aborted = false;
        // Stores the task, then publishes its key and id to the slot and
        // attaches the slot as the task's delivery.
        let spawned = target.spawn_detached(queue, group, &mut |tasks, group| {
            let future = future.take().expect("a spawn stores its task once");
            let (oid, group) = tasks.insert(future, queue, group);
            let id = oid.id();
            let task = tasks.get(id).map(|e| e.task_id());
            let slot = delivery.take().expect("a spawn stores its task once");
            aborted = slot.started(id, task);
            tasks.set_deliver(oid, slot);
            (id, group)
        });
        match spawned {
            // `abort()` came after the check above but before the id was
            // known: the task is dropped unpolled at this boundary.
            Ok(id) if aborted => target.abort(id),
            Ok(_) => {}
            // Refused before it was stored: the future is dropped unpolled
            // and the handle reads Cancelled.
            Err(_) => {
                drop(future);
                if let Some(slot) = delivery {
                    slot.cancel_slot();
                }
            }
        }
    }

    fn cancel(self: Arc<Self>) {
        if let Some(future) = take(&self.spawn.future) {
            drop(future);
        }
        self.cancel_slot();
    }
}
