//! The type-erased task cell: one heap allocation per task holding the
//! header (reference count, vtable, id, sink, queue, state bits), the
//! joiner's waker and the stage (the future, then its result).
//!
//! * `header.rs`: the [`Header`], its reference word and the vtable type;
//! * `cell.rs`: the cell's layout, its vtable functions (poll, cancel, drop,
//!   free, and the sink's wake and abort) and [`RawTask`];
//! * `owned.rs`: [`OwnedTask`], the slab's reference, which makes the cell;
//! * `join_cell.rs`: [`JoinCell`], the join handle's hold on the cell, and
//!   [`AbortRef`], an abort handle's.
//!
//! This module, `task/waker.rs`, the poll harness (`task/harness.rs`), the
//! slab's insertion (`task/slab.rs`) and the cell memory cache
//! (`task/cache.rs`) hold the task core's `unsafe` code. The invariants,
//! named so that every `# Safety` section and `SAFETY:` comment can cite
//! them (the slab's are S1 to S3 in `task/slab.rs`, the cell cache's C1
//! and C2 in `task/cache.rs`):
//!
//! * **I1 (liveness).** The cell is freed when the reference count drops to
//!   zero and the join handle's bit is clear. The slab entry owns one reference
//!   ([`OwnedTask`]); every cloned `Waker` and every [`AbortRef`] owns one; the
//!   join handle ([`JoinCell`]) owns the `HANDLE` bit. The waker lent to a poll
//!   (built from the header pointer) does not count: it is never dropped, and
//!   lives only while the poll holds the slab's reference. A waker given up on
//!   the executor's thread during a poll of one of its tasks (dropped, or
//!   consumed by `wake`) may leave its reference counted for the task's next
//!   clone there (the `CREDIT` state bit, one at most, only while the slab
//!   holds the task); the slab gives it back when it lets go. So the count may
//!   exceed the owners by one while the slab holds the task, never falls short
//!   of them, and reaches zero only after the slab let go.
//! * **I2 (stage access).** The stage is read and written only on the
//!   executor's thread, by the slab or the join handle (`!Send`, made on that
//!   thread), and never by two operations at once: the slab's `RUNNING` bit
//!   excludes everything else during a poll, and the `COMPLETE` bit says the
//!   future is gone (the handle touches the stage only then, when the slab has
//!   let go of the task). Foreign threads touch only the atomics, the id and
//!   the sink of the header, all of which are `Sync`.
//! * **I3 (sink).** The header points to its executor's sink (a
//!   [`Schedule`](crate::task::schedule::Schedule): where wakes and aborts
//!   go) without counting it while the slab holds the task (the slab's
//!   `Arc` outlives its entries). When the slab gives up its reference while
//!   wakers still hold some, it first gives the cell a counted reference
//!   (`SINK_OWNED` in the reference-count word), which `free` drops after
//!   the cell is freed: a waker that outlives its executor always finds the
//!   sink alive.
//! * **I4 (foreign-thread free).** When the last reference is a waker or
//!   an abort handle on another thread, the cell is freed there. By then the
//!   stage is always `Consumed` (the slab or the join handle consumes it
//!   before giving up its reference), so no `!Send` future or output is
//!   dropped off the executor's thread.
//! * **I5 (cell type).** A header pointer points to a `Cell<F>` made by
//!   `OwnedTask::new::<F, S>` (`repr(C)`, the header first, so the pointer
//!   is the cell's; the joiner's waker at the same offset whatever `F`,
//!   `Prefix`), allocated by `cache::allocate` with
//!   `Layout::new::<Cell<F>>()`; its vtable is the one made for that `F`
//!   and for `S`, the type of its sink, and its stage starts at the
//!   vtable's `stage_offset`. So a vtable function may treat the pointer
//!   as a `Cell<F>` and the sink as an `S`.
//! * **I6 (joiner's waker).** The joiner's waker slot is read and written
//!   only on the executor's thread (by the slab's [`OwnedTask`], the poll
//!   harness and the [`JoinCell`], all tied to that thread), and no borrow
//!   of it lives across user code (a waker's `clone` or `drop`).

mod cell;
mod header;
mod join_cell;
mod owned;

#[cfg(all(test, tourbillon_loom))]
pub(crate) use cell::deallocs;
pub(crate) use cell::RawTask;
pub(crate) use header::{header_ref, release, retain, Finish, Header, PollCode};
pub(crate) use join_cell::{AbortRef, JoinCell};
pub(crate) use owned::OwnedTask;
