//! [`JoinCell`]: the join handle's hold on a task cell, through which it
//! reads the task's result in place and aborts it.

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::task::{Poll, Waker};

use super::cell::{join_waker_ptr, RawTask};
use super::header::{free, retain, stage, Header, HANDLE, REF_MASK};
use crate::boundary;
use crate::task::id::{TaskId, TaskKey};
use crate::task::join_error::JoinError;
use crate::task::state::State;

/// The join handle's hold on a task cell whose output is `T`: the
/// [`HANDLE`] part of its reference word. The handle reads the result in
/// the cell, where the task left it, without the slab: the slab lets go of
/// a completed task at once, and the handle frees the cell when it is the
/// last to let go. `!Send`: it lives on the executor's thread, the only one
/// that touches the state bits, the joiner's waker and the stage.
pub(crate) struct JoinCell<T> {
    ptr: NonNull<Header>,
    _output: PhantomData<fn() -> T>,
    _not_send: PhantomData<*const ()>,
}

impl<T> JoinCell<T> {
    fn header(&self) -> &Header {
        // SAFETY: I1 (liveness): the handle's bit, which `self` owns, keeps
        // the cell alive while `self` lives.
        unsafe { self.ptr.as_ref() }
    }

    /// The task's process-unique id.
    pub(crate) fn id(&self) -> TaskId {
        self.header().task_id
    }

    /// The task's key in its executor's slab.
    pub(crate) fn key(&self) -> TaskKey {
        self.header().key
    }

    /// The task's state bits.
    pub(crate) fn state(&self) -> State {
        self.header().state()
    }
}

impl<T: 'static> JoinCell<T> {
    /// Takes over the handle's part of the reference word of `raw`.
    ///
    /// # Safety
    /// `raw` is a live cell made by `OwnedTask::new::<F>` with `handle` set
    /// (I1, liveness: the handle's bit becomes the returned value's) and
    /// `F::Output == T` (what S3, output proof, asks of a reader of the
    /// result; I5, cell type), on this thread (I2, I6: the value is `!Send`
    /// and touches the stage and the joiner's waker), and no other
    /// `JoinCell` was made of it.
    pub(crate) unsafe fn adopt(raw: RawTask) -> Self {
        Self {
            ptr: raw.ptr,
            _output: PhantomData,
            _not_send: PhantomData,
        }
    }

    /// Aborts the task (the join handle's `abort`, on the executor's
    /// thread): sets its CANCELLED bit, unless it is complete or cancelled
    /// already, and then tells its sink, which drops it at the next poll
    /// boundary (or, if it is being polled, when its poll returns, seeing
    /// the bit). A complete task never reaches its sink: the executor, and
    /// with it the sink, may be gone by then.
    pub(crate) fn abort(&self) {
        let header = self.header();
        let marked = header.update_state(|st| {
            if st.is_complete() || st.is_cancelled() {
                return false;
            }
            st.set_cancelled();
            true
        });
        if marked {
            header.abort();
        }
    }

    /// A counted reference to the cell for an abort handle, which may
    /// travel to other threads.
    pub(crate) fn abort_ref(&self) -> AbortRef {
        // SAFETY: `retain`'s `# Safety`: I1 (liveness): the handle's bit
        // keeps the cell alive for the call; the new reference is owned by
        // the returned value, which gives it up once, in its `drop`.
        unsafe { retain(self.ptr) };
        AbortRef {
            ptr: self.ptr,
            // A live task is still the slab's: when the slab lets go, it
            // sees this reference and gives the cell a counted reference to
            // the sink, which then lives as long as this one. A complete
            // task's slab may have let go without one (the handle needs no
            // sink), so this reference must never reach it.
            live: !self.state().is_complete(),
        }
    }

    /// The result, if the task is complete: moved out of the cell (a second
    /// call gives `Cancelled`); else registers `waker` as the joiner's.
    #[inline]
    pub(crate) fn poll_result(&self, waker: &Waker) -> Poll<Result<T, JoinError>> {
        let st = self.state();
        if st.is_complete() && !st.is_running() {
            // SAFETY: `RawTask::take_result`'s `# Safety`: I1 (liveness):
            // the handle's bit keeps the cell alive; I2 (stage access):
            // `JoinCell` is `!Send`, so we are on the executor thread, and
            // COMPLETE and not RUNNING (S1) say the future is gone and no
            // stage operation is in progress (the slab released the task,
            // or is about to without touching the stage); `T` is the output
            // type (S3, output proof: `adopt`'s `# Safety`).
            if let Some(result) = unsafe { RawTask { ptr: self.ptr }.take_result::<T>() } {
                return Poll::Ready(result);
            }
        }
        self.set_join_waker(waker);
        Poll::Pending
    }

    /// Registers the waker of the task's joiner (kept if it would wake the
    /// same task).
    fn set_join_waker(&self, waker: &Waker) {
        // SAFETY: I6 (joiner's waker): executor thread (`JoinCell` is
        // `!Send`), the only one that touches the joiner's waker, and this
        // borrow ends before any user code runs (`will_wake` compares two
        // pointers); I1 (liveness): the handle's bit keeps the cell alive.
        let slot = unsafe { &mut *join_waker_ptr(self.ptr) };
        if slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            return;
        }
        let new = Some(waker.clone());
        // SAFETY: I6 (joiner's waker): executor thread (`JoinCell` is
        // `!Send`), and the borrow ends before user code runs: the slot is
        // borrowed anew after `waker.clone()` (which may have run user
        // code), and the old waker is dropped after the borrow ends; I1
        // (liveness): the handle's bit keeps the cell alive.
        let old = std::mem::replace(unsafe { &mut *join_waker_ptr(self.ptr) }, new);
        drop(old);
    }
}

impl<T> Drop for JoinCell<T> {
    /// The handle lets go: a task still running is detached (its output is
    /// dropped when it completes); the unread result of a completed one is
    /// dropped here. The cell is freed if nothing else holds it.
    fn drop(&mut self) {
        // SAFETY: I1 (liveness): the handle's bit keeps the cell alive until
        // it is given up below; `!Send`: executor thread.
        let header = unsafe { self.ptr.as_ref() };
        let st = header.update_state(|st| {
            st.set_join_interest(false);
            *st
        });
        // SAFETY: I6 (joiner's waker): executor thread (`!Send`), the only
        // one that touches the joiner's waker; `take` runs no user code, and
        // the waker is dropped after the last use of the cell below. I1: the
        // handle's bit keeps the cell alive.
        let join_waker = unsafe { (*join_waker_ptr(self.ptr)).take() };
        if st.is_complete() && !st.is_running() && header.stage() != stage::CONSUMED {
            // SAFETY: `RawTask::drop_stage`'s `# Safety`: I1 (liveness): the
            // handle's bit keeps the cell alive; I2 (stage access): executor
            // thread, and COMPLETE and not RUNNING (S1): no stage operation
            // in progress. Dropping an unread result (it may run user code,
            // which cannot reach this cell's stage). Its panic is dropped:
            // the handle's owner let go of the result.
            if let Some(p) = unsafe { RawTask { ptr: self.ptr }.drop_stage() } {
                boundary::drop_payload(p);
            }
        }
        let cur = header.refs().load(Ordering::Acquire);
        if cur & REF_MASK == 0 {
            // The slab let go and no waker holds the cell: nobody else can
            // reach it. The common case: a task joined after it completed.
            // SAFETY: `free`'s `# Safety`: I1 (liveness): a count of zero
            // with our bit set makes us the last owner, synchronised by the
            // Acquire load with the Release of the slab's and the wakers'
            // releases; the stage holds nothing (`Consumed` or `Cancelled`,
            // I4: dropped just above if it held a result).
            unsafe { free(self.ptr) };
        } else {
            let cur = header.update_refs(|cur| Some(cur & !HANDLE));
            if cur & REF_MASK == 0 {
                // The last waker let go between the load and the exchange.
                // SAFETY: `free`'s `# Safety`: I1 (liveness): the count is
                // zero and our bit is now clear, so we were the last owner
                // (the AcqRel exchange synchronises with every earlier
                // release); the stage holds nothing (I4).
                unsafe { free(self.ptr) };
            }
        }
        drop(join_waker);
    }
}

/// A counted reference to a task cell that only aborts the task or reads
/// whether it ended: what an abort handle holds. `Send + Sync`: it touches
/// only the header's `Sync` parts (and the state bits through a relaxed
/// load, which on another thread may lag behind the executor's thread).
pub(crate) struct AbortRef {
    ptr: NonNull<Header>,
    /// Made while the task was live: the sink is kept alive for this
    /// reference (see [`JoinCell::abort_ref`]), so aborts may reach it.
    live: bool,
}

// SAFETY: an `AbortRef` owns one counted reference to the cell (I1,
// liveness), like a waker, and reaches only the header, which is
// `Send + Sync`; releasing it on any thread is what wakers do: the cell is
// freed there only when its stage holds nothing (I4, foreign-thread free),
// and its aborts reach a sink kept alive for it (I3, sink: `live`).
unsafe impl Send for AbortRef {}
// SAFETY: I2 (stage access): `&AbortRef` reaches only the header's `Sync`
// parts (its atomics, id, key and sink), never the stage or the joiner's
// waker, so sharing it across threads shares nothing tied to the
// executor's thread; its aborts reach a sink kept alive for it (I3).
unsafe impl Sync for AbortRef {}

impl AbortRef {
    fn header(&self) -> &Header {
        // SAFETY: I1 (liveness): `self` owns a counted reference, so the
        // header is alive while `self` is.
        unsafe { self.ptr.as_ref() }
    }

    /// The task's process-unique id.
    pub(crate) fn id(&self) -> TaskId {
        self.header().task_id
    }

    /// The task's key in its executor's slab.
    pub(crate) fn key(&self) -> TaskKey {
        self.header().key
    }

    /// Whether the task has ended, as last seen from this thread.
    pub(crate) fn is_finished(&self) -> bool {
        self.header().state().is_complete()
    }

    /// Sends an abort of the task to its sink, from any thread: on the
    /// executor's own thread it is applied at once, from any other it goes
    /// through the executor's inbox (an ended task, or an executor that is
    /// gone, ignores it).
    pub(crate) fn abort(&self) {
        if self.live {
            self.header().abort();
        }
    }
}

impl Clone for AbortRef {
    fn clone(&self) -> Self {
        // SAFETY: `retain`'s `# Safety`: I1 (liveness): `self` owns a
        // reference, so the header is alive; the new reference is owned by
        // the clone, which gives it up once, in its `drop`.
        unsafe { retain(self.ptr) };
        AbortRef {
            ptr: self.ptr,
            live: self.live,
        }
    }
}

impl Drop for AbortRef {
    fn drop(&mut self) {
        // SAFETY: `release`'s `# Safety`: I1 (liveness): `self` owns one
        // counted reference, given up once, here; `ptr` is not used after.
        unsafe { super::header::release(self.ptr) };
    }
}
