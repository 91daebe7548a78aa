//! The task waker: one static `RawWakerVTable` whose data pointer is the task
//! cell's header.
//!
//! * Each poll lends the task a waker built from its header pointer (two
//!   words on the stack): no allocation and no reference-count change per
//!   poll. Only `clone` (a future keeping the
//!   waker, e.g. a timer or a channel) and the drop of a clone touch the
//!   atomic count, and not on the executor's thread during a poll of one of
//!   its tasks when they can pair up: there a clone given up (dropped, or
//!   consumed by `wake`) leaves its reference counted as the task's credit
//!   (`task::current::keep_credit`), and the next clone takes it back
//!   (`take_credit`), so that a channel's take, wake and register again
//!   costs no atomic read-modify-write.
//! * One static table (not one per future type) so that `Waker::will_wake`
//!   recognises two wakers of the same task (the yield fast path relies on
//!   it).
//! * `wake` hands the task to its sink ([`Schedule`](super::schedule::Schedule),
//!   through the cell's vtable): the executor's, which applies it at once on
//!   its own thread while it runs and otherwise queues it in its inbox and
//!   wakes its host. A waker whose task ended, or whose executor is gone,
//!   does nothing.

use std::ptr::NonNull;
use std::task::{RawWaker, RawWakerVTable, Waker};

use crate::task::current;
use crate::task::raw::{self, Header};

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

/// Builds a task's waker without taking a reference: the caller must never
/// drop it (it is lent to a poll inside `ManuallyDrop`) and must keep the
/// task alive while it is used.
pub(crate) fn task_waker_unowned(header: NonNull<Header>) -> Waker {
    // SAFETY: what `Waker::from_raw` asks of the vtable's functions holds
    // for a task header's address (I5, cell type) kept alive by the caller
    // (I1, liveness): `clone` adds a reference, `drop` gives one up, `wake*`
    // only read the header's `Sync` fields, all from any thread (I2). I1:
    // this waker owns no reference, and callers never drop it, so it never
    // gives up a reference it does not own.
    unsafe { Waker::from_raw(RawWaker::new(header.as_ptr() as *const (), &VTABLE)) }
}

/// Whether `waker` is a task waker of this crate (by vtable address).
#[inline]
fn is_task_waker(waker: &Waker) -> bool {
    std::ptr::eq(waker.vtable(), &VTABLE)
}

/// `yield_now` fast path: if `waker` is the own waker of the task this
/// thread is polling, record the yield (the run loop requeues or defers the
/// task after the poll) and return `true`. No executor lookup, no slab
/// access: two thread-local reads and a pointer comparison.
#[inline]
pub(crate) fn try_fast_yield(waker: &Waker) -> bool {
    let polling = current::polling();
    if !polling.is_null() && waker.data() == polling && is_task_waker(waker) {
        current::mark_yielded();
        true
    } else {
        false
    }
}

/// The wakers' `clone`: a new waker of the same task, owning a reference
/// (a new one, or the one the task's credit kept counted).
///
/// # Safety
/// `RawWakerVTable`'s requirement: `ptr` is the data of a live waker built
/// on [`VTABLE`], so a task header's address (I5, cell type), and that
/// waker's reference keeps the cell alive for the call (I1, liveness: an
/// owned waker's own, or for the waker lent to a poll the slab's, which the
/// task's RUNNING bit keeps, S1).
unsafe fn clone(ptr: *const ()) -> RawWaker {
    // SAFETY: `header_ref`'s `# Safety`: a header's address (I5) kept alive
    // by the cloned waker's reference (I1), this function's `# Safety`.
    let header = unsafe { raw::header_ref(ptr) };
    if !current::take_credit(header) {
        // SAFETY: `retain`'s `# Safety`: I1 (liveness): the waker being
        // cloned keeps the header alive for the call; the new reference is
        // the returned waker's, given up once by its `drop_waker` (or kept
        // as the task's credit, which is I1's count too). A header's address
        // is not null.
        unsafe { raw::retain(NonNull::new_unchecked(ptr as *mut Header)) };
    }
    RawWaker::new(ptr, &VTABLE)
}

/// The wakers' `wake`: wakes the task and gives up the consumed waker's
/// reference.
///
/// # Safety
/// `RawWakerVTable`'s requirement: `ptr` is the data of a live owned waker
/// (a clone: the waker lent to a poll is never consumed) built on
/// [`VTABLE`], so a task header's address (I5, cell type), consumed by
/// this call: its counted reference (I1, liveness) is the caller's to give
/// up, and keeps the cell and its sink (I3, sink) alive until then.
unsafe fn wake(ptr: *const ()) {
    /// Gives up the consumed waker's reference when the wake returns, and
    /// also if it unwinds (a custom scheduler's `push` is behind the
    /// executor's panic boundary, but the reference must not depend on it).
    struct Release(*const ());
    impl Drop for Release {
        fn drop(&mut self) {
            // SAFETY: `drop_waker`'s `# Safety`: I1 (liveness): `wake`
            // consumes an owned waker (its `# Safety`) and with it its
            // counted reference, given up once, here, after the last use.
            unsafe { drop_waker(self.0) };
        }
    }
    let _release = Release(ptr);
    // SAFETY: `wake_by_ref`'s `# Safety`: `ptr` is the data of a live owned
    // waker (this function's `# Safety`), whose reference (I1) `_release`
    // gives up only after this call.
    unsafe { wake_by_ref(ptr) };
}

/// The wakers' `wake_by_ref`: sends a wake of the task to its sink.
///
/// # Safety
/// `RawWakerVTable`'s requirement: `ptr` is the data of a live waker built
/// on [`VTABLE`], so a task header's address (I5, cell type), whose
/// reference keeps the cell alive for the call (I1, liveness: an owned
/// waker's own, or for the waker lent to a poll the slab's, S1), and with
/// it the sink (I3, sink).
unsafe fn wake_by_ref(ptr: *const ()) {
    // SAFETY: `header_ref`'s `# Safety`: a header's address (I5) kept alive
    // for this call by the waker being woken (I1), this function's
    // `# Safety`.
    let header = unsafe { raw::header_ref(ptr) };
    header.wake();
}

/// The wakers' `drop`: gives up the dropped waker's reference (or keeps it
/// counted as the task's credit).
///
/// # Safety
/// `RawWakerVTable`'s requirement: `ptr` is the data of an owned waker (a
/// clone) built on [`VTABLE`], so a task header's address (I5, cell type),
/// being dropped: it owns a counted reference (I1, liveness), given up
/// here, and is not used afterwards. The waker lent to a poll, which owns
/// none, is never dropped (it lives in a `ManuallyDrop`).
unsafe fn drop_waker(ptr: *const ()) {
    // SAFETY: `header_ref`'s `# Safety`: a header's address (I5) whose
    // reference, owned by the waker being dropped (I1, this function's
    // `# Safety`), keeps it alive until it is given up below.
    let header = unsafe { raw::header_ref(ptr) };
    if current::keep_credit(header) {
        // The reference stays counted, for the task's next clone.
        return;
    }
    // SAFETY: `release`'s `# Safety`: I1 (liveness): the dropped waker owns
    // one counted reference (this function's `# Safety`), given up here,
    // once; the header is not used after. A header's address is not null.
    unsafe { raw::release(NonNull::new_unchecked(ptr as *mut Header)) };
}
