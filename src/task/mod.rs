//! The task core: identity, state, the type-erased cell, wakers, join and
//! abort handles, storage and the poll harness (crate-private; the public
//! `tourbillon::task` module re-exports its public items).
//!
//! # What this layer may touch
//!
//! It imports nothing from the executor, the queues or the schedulers: a
//! task reaches its executor only through its sink (`schedule::Schedule`,
//! called by its wakers and handles), and a poll reaches it only through the
//! `harness::PollScope` the run loop passes in. Below it are only the crate's leaves (`boundary`,
//! `error`, `sync`). Its unit tests (`harness.rs`) run it with a recording
//! sink and no executor.
//!
//! # Reference types
//!
//! * `TaskKey` (`id.rs`): slab index + generation. Held by schedulers,
//!   join handles and inbox entries; never dangles (a stale key simply finds
//!   no entry, or an entry of another generation).
//! * `TaskId` (`id.rs`): the task's process-unique id, kept in the cell's
//!   header, taken from a per-thread block of a global counter at spawn;
//!   what the public API shows. No lookup goes by it.
//! * `TaskEntry` (`slab.rs`): the executor's record of a live task, the
//!   owner of one reference to the task cell.
//! * `JoinCell` (`raw/join_cell.rs`), inside `JoinHandle`: the join handle's hold on
//!   the cell, where a completed task leaves its result.
//! * `AbortRef` (`raw/join_cell.rs`), inside `AbortHandle`: a counted
//!   reference that may travel to any thread, and only aborts.
//! * `OwnedTask` / `RawTask` (`raw/`): an owning / a borrowed pointer to
//!   the heap cell that holds the header (id, queue, group, state bits), the
//!   joiner's waker and the future or its result. Cell memory comes from a
//!   per-thread cache of freed cells (`cache.rs`).
//! * `Waker`: a waker built from the header pointer is lent to every poll;
//!   clones own a reference each and may travel to any thread.
//!
//! # State bits (`state.rs`, in the header, executor thread only)
//!
//! `SCHEDULED` (in a scheduler or the deferred list), `RUNNING` (being
//! polled: the lock on the stage and the entry), `NOTIFIED` (woken during
//! its poll), `COMPLETE` (future gone, result stored or consumed),
//! `JOIN_INTEREST` (a join handle lives), `CANCELLED` (aborted).
//!
//! # Life cycle
//!
//! ```text
//!            spawn (1)
//!               |
//!               v        pop + poll_task (2)        Pending, not woken (3)
//!  +-------> SCHEDULED ----------------------> RUNNING ------------------> idle
//!  |            ^                              |   |                        |
//!  |            | woken during poll (4)        |   | Ready / panic /        |
//!  |            +------------------------------+   | cancelled (5)          |
//!  |                                               v                        |
//!  |                                           COMPLETE, removed (6)
//!  |                                               |    (result kept for the handle)
//!  +--------------- wake (7) ----------------------|------------------------+
//!                                  abort while idle/queued: cancel_idle (8)
//! ```
//!
//! 1. `TaskSlab::insert` + push to the queue's scheduler.
//! 2. `harness::poll_task` sets RUNNING (`State::transition_to_running`),
//!    releases the slab, polls.
//! 3. `poll_task` clears RUNNING (`State::transition_to_idle`); the task
//!    waits for a wake.
//! 4. A wake (the waker calls its sink, `Schedule::wake`; the executor's
//!    sink applies `State::transition_to_scheduled` at once on its own
//!    thread, or after draining its inbox) on a RUNNING task sets NOTIFIED;
//!    `poll_task` turns it into SCHEDULED and the run loop pushes it behind
//!    the queued tasks.
//! 5. `harness::complete` (`State::transition_to_complete`): the future was
//!    dropped in place and the result stored; the join waker is woken.
//! 6. The entry leaves the slab (its generation is bumped): a detached
//!    task's result is dropped; else the cell stays with the join handle,
//!    whose `JoinCell::poll_result` moves the result out, and whose drop
//!    frees the cell if it lets go last.
//! 7. A wake (as in 4) on an idle task sets SCHEDULED; the caller pushes it.
//! 8. `TaskSlab::abort` sets CANCELLED (`State::transition_to_cancelled`);
//!    at the next poll boundary `harness::cancel_idle` drops the future
//!    unpolled (tokio's documented rule:
//!    an idle aborted task is shut down without running again).
//!
//! # Safety
//!
//! In the task machinery, `unsafe` is confined to `raw/` (the cell and its
//! vtable), `harness.rs` (the calls that touch a stage, each guarded by the
//! bits above), `slab.rs` (making a cell), `cache.rs` (raw memory for
//! cells: allocation and the per-thread free lists), `current.rs` (the id of the polled task) and
//! `waker.rs`. The
//! invariants are listed at the top of `raw/mod.rs`, `slab.rs` and
//! `cache.rs`. The only other `unsafe` of the crate is the `rdtsc`
//! intrinsic call of the clock (`clock/tsc.rs`). Every other module says
//! `#![forbid(unsafe_code)]`.

pub(crate) mod cache;
pub(crate) mod current;
pub(crate) mod group;
pub(crate) mod harness;
pub(crate) mod id;
pub(crate) mod join;
pub(crate) mod join_error;
pub(crate) mod raw;
pub(crate) mod schedule;
pub(crate) mod slab;
pub(crate) mod state;
pub(crate) mod waker;
