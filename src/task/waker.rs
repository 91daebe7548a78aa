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
    // SAFETY: the vtable's functions uphold the `RawWaker` contract for a
    // pointer to a live task header: `clone` adds a reference, `drop` gives
    // one up, `wake*` only read the header's `Sync` fields. Callers never drop
    // this copy, so it never gives up a reference it does not own.
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

unsafe fn clone(ptr: *const ()) -> RawWaker {
    // SAFETY: `ptr` is the data of a live waker of ours, whose reference (or,
    // for the waker lent to a poll, the slab's reference) keeps the header
    // alive.
    let header = unsafe { raw::header_ref(ptr) };
    if !current::take_credit(header) {
        // SAFETY: as above.
        unsafe { raw::retain(NonNull::new_unchecked(ptr as *mut Header)) };
    }
    RawWaker::new(ptr, &VTABLE)
}

unsafe fn wake(ptr: *const ()) {
    /// Gives up the consumed waker's reference when the wake returns, and
    /// also if it unwinds (a custom scheduler's `push` is behind the
    /// executor's panic boundary, but the reference must not depend on it).
    struct Release(*const ());
    impl Drop for Release {
        fn drop(&mut self) {
            // SAFETY: `wake` consumes the waker and with it its reference,
            // given up once, here.
            unsafe { drop_waker(self.0) };
        }
    }
    let _release = Release(ptr);
    // SAFETY: `ptr` is the data of a live owned waker, whose reference
    // `_release` gives up only after this call.
    unsafe { wake_by_ref(ptr) };
}

unsafe fn wake_by_ref(ptr: *const ()) {
    // SAFETY: the waker being woken keeps the header alive for this call.
    let header = unsafe { raw::header_ref(ptr) };
    header.wake();
}

unsafe fn drop_waker(ptr: *const ()) {
    // SAFETY: an owned waker (a clone) is being dropped: its reference keeps
    // the header alive until it is given up below.
    let header = unsafe { raw::header_ref(ptr) };
    if current::keep_credit(header) {
        // The reference stays counted, for the task's next clone.
        return;
    }
    // SAFETY: it owns one reference, given up here. The header's own copy
    // is never dropped.
    unsafe { raw::release(NonNull::new_unchecked(ptr as *mut Header)) };
}
