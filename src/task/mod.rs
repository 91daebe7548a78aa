//! Tasks: identity, storage, state and the type-erased cell.
//!
//! # Reference types
//!
//! * [`TaskId`](id::TaskId): slab index + generation. Held by schedulers,
//!   join handles and inbox entries; never dangles (a stale id simply finds
//!   no entry, or an entry of another generation).
//! * `TaskEntry` (`slab.rs`): the executor's record of a live task, the
//!   owner of one reference to the task cell.
//! * `JoinCell` (`raw.rs`), inside `JoinHandle`: the join handle's hold on
//!   the cell, where a completed task leaves its result.
//! * `OwnedTask` / `RawTask` (`raw.rs`): an owning / a borrowed pointer to
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
//! 2. `slab::poll_task` sets RUNNING, releases the slab, polls.
//! 3. `poll_task` clears RUNNING; the task waits for a wake.
//! 4. A wake (`Core::wake_by_header` from the task's waker on the executor's
//!    thread, `TaskSlab::wake` for a wake drained from the inbox; both apply
//!    `State::transition_to_scheduled`) on a RUNNING task sets NOTIFIED;
//!    `poll_task` turns it into SCHEDULED and the run loop pushes it behind
//!    the queued tasks.
//! 5. `TaskSlab::complete`: the future was dropped in place and the result
//!    stored; the join waker is woken.
//! 6. The entry leaves the slab (its generation is bumped): a detached
//!    task's result is dropped; else the cell stays with the join handle,
//!    whose `JoinCell::poll_result` moves the result out, and whose drop
//!    frees the cell if it lets go last.
//! 7. A wake (as in 4) on an idle task sets SCHEDULED; the caller pushes it.
//! 8. `TaskSlab::abort` sets CANCELLED; at the next poll boundary
//!    `slab::cancel_idle` drops the future unpolled (tokio's documented rule:
//!    an idle aborted task is shut down without running again).
//!
//! # Safety
//!
//! In the task machinery, `unsafe` is confined to `raw.rs` (the cell and
//! its vtable), `slab.rs` (the calls that touch a stage, each guarded by
//! the bits above), `cache.rs` (raw memory for cells: allocation and the
//! per-thread free lists) and `crate::waker`. The invariants are listed at
//! the top of `raw.rs`, `slab.rs` and `cache.rs`. The only other `unsafe` of the crate is the
//! `rdtsc` intrinsic call in `executor/tsc.rs`.

pub(crate) mod cache;
pub(crate) mod group;
pub(crate) mod id;
pub(crate) mod raw;
pub(crate) mod slab;
pub(crate) mod state;
