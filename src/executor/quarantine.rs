#![forbid(unsafe_code)]
//! The quarantine of a queue whose custom scheduler keeps panicking
//! ([`QUARANTINE_AFTER`](crate::sched::QUARANTINE_AFTER) panics in a row of
//! one of its methods; see `src/sched/guarded.rs`).
//!
//! The scheduler stops calling the user's code at once and tells the panic
//! sink; the driver settles the quarantine at the end of its turn
//! ([`Core::run_turn`]), where no run is in progress, no task is being
//! polled and no borrow is held: the queue leaves the EEVDF runnable set
//! for good, its scheduler is dropped, its tasks end (their join handles
//! read the quarantine's panic `JoinError`), and so do the remote spawns
//! that wait for it in the remote backlog. From then on a local spawn onto
//! it is refused ([`SpawnError::Quarantined`]) and a remote one ends as
//! its tasks did.

use super::core::Core;
use crate::boundary;
use crate::error::quarantine::Quarantine;
use crate::error::SpawnError;
use crate::task::harness::end_idle_with;

impl Core {
    /// Settles every quarantine the schedulers asked for (the sink's
    /// request, [`PanicSink::take_quarantine`](crate::boundary::PanicSink::take_quarantine)).
    /// Returns whether there was one. Ending tasks runs user code
    /// (destructors, wakers), which may quarantine another queue: settled
    /// in the same call.
    #[cold]
    #[inline(never)]
    pub(crate) fn settle_quarantines(&self) -> bool {
        let mut any = false;
        while self.panics.take_quarantine() {
            any = true;
            loop {
                let taken = {
                    let mut qs = self.queues.borrow_mut();
                    qs.list
                        .iter_mut()
                        .enumerate()
                        .find_map(|(q, st)| st.sched.take_quarantined().map(|t| (q, t)))
                };
                let Some((q, (why, scheduler))) = taken else {
                    break;
                };
                self.quarantine_queue(q, why);
                // The user's scheduler: its destructor is user code.
                if let Some(p) = boundary::drop_caught(scheduler) {
                    self.panics.report(p);
                }
                self.end_quarantined_tasks(q);
            }
        }
        any
    }

    /// Marks queue `q` quarantined (refusing spawns from here on) and takes
    /// it out of the EEVDF runnable set: it is never placed again (its
    /// scheduler is empty for good).
    fn quarantine_queue(&self, q: usize, why: Quarantine) {
        let latency = {
            let mut qs = self.queues.borrow_mut();
            qs.list[q].quarantine = Some(Box::new(why));
            if qs.eevdf.ents[q].runnable {
                qs.eevdf.depart(q);
            }
            qs.list[q].latency_ns.is_some()
        };
        self.any_quarantine.set(true);
        if latency {
            // A latency-sensitive queue left: the host interval may change.
            self.update_host_interval();
        }
    }

    /// Ends every task of quarantined queue `q` unpolled, and the remote
    /// spawns that wait for it in the backlog. Passes until none is left:
    /// a destructor or a waker may wake a task of the queue, never add one
    /// (spawns onto it are refused).
    fn end_quarantined_tasks(&self, q: usize) {
        let payload = self
            .quarantine_of(q)
            .expect("tourbillon bug: ending the tasks of a queue that is not quarantined")
            .task_payload();
        let propagate = self.panics.propagates();
        loop {
            let ids = self.tasks.borrow().ids_in_queue(q);
            let mut ended_any = false;
            for id in ids {
                let ended = end_idle_with(&self.tasks, id, propagate, || Box::new(payload.clone()));
                if let Some((done, destructor)) = ended {
                    ended_any = true;
                    // The future's destructor is not the task's result here:
                    // a panic of other user code.
                    if let Some(p) = destructor {
                        self.panics.report(p);
                    }
                    self.finish(id, done, None, false);
                }
            }
            if !ended_any {
                break;
            }
        }
        self.intake.end_line(self, q);
    }

    /// Why queue `q` is quarantined, if it is.
    pub(crate) fn quarantine_of(&self, q: usize) -> Option<Quarantine> {
        if !self.any_quarantine.get() {
            return None;
        }
        self.queues.borrow().list[q].quarantine.as_deref().cloned()
    }

    /// The refusal of a local spawn onto queue `q`, if it is quarantined.
    #[cold]
    #[inline(never)]
    pub(crate) fn refuse_quarantined(&self, q: usize) -> Result<(), SpawnError> {
        match self.quarantine_of(q) {
            Some(why) => Err(SpawnError::Quarantined(why)),
            None => Ok(()),
        }
    }
}
