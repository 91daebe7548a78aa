//! [`OwnedTask`]: the slab's owning reference to a task cell, which makes
//! the cell and, when it lets go, leaves it complete and empty.

use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::task::Waker;

use super::cell::{join_waker_ptr, vtable, Cell, RawTask, Stage};
use super::header::{release, stage, Header, HANDLE, REF_MASK};
use crate::boundary::{self, Payload};
use crate::task::cache;
use crate::task::id::{TaskId, TaskKey};
use crate::task::schedule::Schedule;
use crate::task::state::State;

/// The slab's owning reference to a task cell. `!Send`: it lives on the
/// executor's thread with the stage it guards.
pub(crate) struct OwnedTask {
    raw: RawTask,
}

impl OwnedTask {
    /// Allocates a task cell for `future` with one reference, owned by the
    /// returned value, under the slab key `key` and a new process-unique
    /// [`TaskId`]; `keyed`: the task belongs to a keyed group (its id is
    /// kept by the slab); `handle`: a join handle will hold the cell too
    /// ([`JoinCell::adopt`](super::JoinCell::adopt) turns that part into one).
    ///
    /// # Safety
    /// `sink` comes from [`Arc::as_ptr`](std::sync::Arc::as_ptr) (so that
    /// the cell may later count a reference with
    /// `Arc::increment_strong_count`), and that `Arc` stays alive until the
    /// returned value is dropped (S2, sink outlives entries: the slab, which
    /// owns it, holds an `Arc<S>` and drops its entries first). I3 (sink)
    /// rests on this.
    pub(crate) unsafe fn new<F, S>(
        future: F,
        key: TaskKey,
        sink: NonNull<S>,
        queue: u16,
        keyed: bool,
        handle: bool,
    ) -> OwnedTask
    where
        F: Future + 'static,
        F::Output: 'static,
        S: Schedule,
    {
        let mut state = State::INITIAL;
        if keyed {
            state.set_keyed();
        }
        state.set_join_interest(handle);
        let mem = cache::allocate(Layout::new::<Cell<F>>()).cast::<Cell<F>>();
        // SAFETY: C1 (class layout): `mem` is fresh memory of at least
        // `Cell<F>`'s size and alignment (its own layout, or its class's),
        // from the cell cache or the global allocator, not shared with
        // anyone yet. The cell written here is what I5 (cell type) names: a
        // `Cell<F>` whose vtable was made for `F` and `S`. Written after the
        // allocation, so that the cell is built in place rather than on the
        // stack and copied (callgrind).
        unsafe {
            mem.as_ptr().write(Cell {
                header: Header::new(
                    vtable::<F, S>(),
                    key,
                    TaskId::next(),
                    sink.cast::<()>(),
                    queue,
                    state,
                    handle,
                ),
                join_waker: UnsafeCell::new(None),
                stage: UnsafeCell::new(Stage {
                    future: ManuallyDrop::new(future),
                }),
            })
        };
        let ptr = mem.cast::<Header>();
        OwnedTask {
            raw: RawTask { ptr },
        }
    }

    /// The non-owning pointer, valid while `self` lives.
    pub(crate) fn raw(&self) -> RawTask {
        self.raw
    }

    /// A clone of the task's waker (an owned reference), for tests that
    /// hand it to another thread.
    #[cfg(all(test, tourbillon_loom))]
    pub(crate) fn waker_clone(&self) -> std::task::Waker {
        // The unowned waker is never dropped; its clone owns a reference.
        (*ManuallyDrop::new(crate::task::waker::task_waker_unowned(self.raw.ptr))).clone()
    }

    /// Takes the joiner's waker out of the cell.
    pub(crate) fn take_join_waker(&self) -> Option<Waker> {
        // SAFETY: I6 (joiner's waker): `OwnedTask` is `!Send` and lives in
        // the slab, so this runs on the executor thread, the only one that
        // touches the joiner's waker, and `take` runs no user code while the
        // slot is borrowed; I1 (liveness): `self` owns a reference.
        unsafe { (*join_waker_ptr(self.raw.ptr)).take() }
    }

    /// Drops what the stage holds (an unfinished future, or the result of
    /// a task no join handle reads) and marks the task COMPLETE; a task
    /// dropped unfinished reads `Cancelled` to a join handle that outlives
    /// the slab. Returns the panic of the destructor.
    pub(crate) fn drop_result(&self) -> Option<Payload> {
        let header = self.header();
        let unfinished = header.stage() == stage::RUNNING;
        // SAFETY: `RawTask::drop_stage`'s `# Safety`: I1 (liveness): `self`
        // owns a reference; I2 (stage access): `OwnedTask` is `!Send`, so
        // this runs on the executor thread, and the slab calls it only for a
        // task that is not being polled (not RUNNING, S1), so no other stage
        // operation is in progress. Dropping the stage is a no-op when it
        // was consumed already.
        let payload = unsafe { self.raw.drop_stage() };
        if unfinished {
            header.set_stage(stage::CANCELLED);
        }
        header.update_state(|st| st.set_complete());
        payload
    }

    /// Shutdown: cancels an unfinished task in place. Its future is
    /// dropped and its result is `Cancelled`, or the panic of the future's
    /// destructor (`JoinError::is_panic`), for its join handle or its
    /// remote delivery to read; the task is then COMPLETE. Returns `false`
    /// (and does nothing) for a task whose future is gone already.
    pub(crate) fn cancel_in_place(&self) -> bool {
        let header = self.header();
        if header.stage() != stage::RUNNING {
            return false;
        }
        // SAFETY: `RawTask::cancel`'s `# Safety`: I1 (liveness): `self` owns
        // a reference; I2 (stage access): `OwnedTask` is `!Send`, so this
        // runs on the executor thread, and the slab calls it only for a task
        // that is not being polled (not RUNNING, S1), so no other stage
        // operation is in progress; the stage is `Running` (checked above).
        let _finish = unsafe { self.raw.cancel() };
        header.update_state(|st| st.set_complete());
        true
    }

    /// The header (key, id, sink).
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: I1 (liveness): `self` owns a reference, so the header is
        // alive for `&self`.
        unsafe { self.raw.ptr.as_ref() }
    }
}

impl OwnedTask {
    /// Gives up the slab's reference to a completed task whose join handle
    /// lives: the result stays in the cell for the handle, which now holds
    /// the cell alone (with the wakers still around, if any).
    pub(crate) fn release_keep_stage(self) {
        debug_assert!(self.header().state().is_complete());
        let this = ManuallyDrop::new(self);
        this.release_ref();
    }

    /// Gives up the slab's reference to a task no join handle reads: drops
    /// its stage ([`drop_result`](Self::drop_result)) and returns the panic
    /// of the destructor, for the caller to report.
    pub(crate) fn release(self) -> Option<Payload> {
        let this = ManuallyDrop::new(self);
        let payload = this.drop_result();
        this.release_ref();
        payload
    }

    /// Gives up the slab's reference (once: from `drop` or
    /// `release_keep_stage`).
    #[inline]
    fn release_ref(&self) {
        // Wakers hold references too: they may outlive the executor, and
        // with it the slab's `Arc` of the sink, so the cell takes a counted
        // reference for them before the slab lets go. A count of 1 is the
        // slab's alone, and no one can add one without holding a reference.
        let header = self.header();
        // `OwnedTask` is `!Send`: executor thread. The task is COMPLETE, so
        // no credit is kept after this.
        header.settle_credit();
        let cur = header.refs().load(Ordering::Acquire);
        if cur & REF_MASK == 1 {
            if cur & HANDLE == 0 {
                // Ours alone (the common case without a handle): free the
                // cell now. No waker holds it, so it has no counted
                // sink reference either (only this function, once per cell, gives
                // it one).
                let dealloc = header.vtable().dealloc;
                // SAFETY: the vtable's `dealloc` (its `# Safety`): I1
                // (liveness): that was the last reference (the Acquire load
                // pairs with the Release decrements of wakers that let go
                // before), so nobody else can reach the cell; I4: its stage
                // holds nothing (`drop` and `release` dropped it through
                // `drop_result`; `release_keep_stage` runs only while the
                // handle's bit is set); the vtable is the cell's own (I5).
                unsafe { dealloc(self.raw.ptr) };
                return;
            }
            // The join handle holds the cell besides us, and no waker does:
            // the handle lives on this thread and is not running now, and
            // no other thread holds a reference through which it could
            // touch the word, so a plain store gives ours up. The handle
            // needs no sink once the task is complete (the slab lets go
            // only then), so the cell takes no counted one.
            header.refs().store(cur - 1, Ordering::Release);
            return;
        }
        // SAFETY: the vtable's `retain_sink` (its `# Safety`): the header's
        // sink, of the vtable's sink type (I5, cell type), whose `Arc` the
        // slab keeps alive while it drops its entries (S2, sink outlives
        // entries; `OwnedTask::new`'s `# Safety`), so the count is >= 1.
        unsafe { (header.vtable().retain_sink)(header.sink) };
        header.set_sink_owned();
        // SAFETY: `release`'s `# Safety`: I1 (liveness): we own the slab's
        // reference and give it up here, once (`drop`, `release` and
        // `release_keep_stage` are exclusive: each consumes `self` or runs
        // in its destructor), and use the cell no more.
        unsafe { release(self.raw.ptr) };
    }
}

impl Drop for OwnedTask {
    /// The slab drops an entry whose stage its join handle will not read:
    /// a detached task's result, or a task dropped unfinished (shutdown).
    ///
    /// Whatever state the task is in, the slab's reference ends with the
    /// task COMPLETE: a join handle never reaches the executor through a
    /// complete task (`JoinCell::abort`), so a handle that
    /// outlives the executor cannot reach its freed memory.
    fn drop(&mut self) {
        let payload = self.drop_result();
        if let Some(p) = payload {
            // Nobody to report to: the slab drops the entry at shutdown, or
            // after it dropped the result through `drop_result` itself.
            boundary::drop_payload(p);
        }
        self.release_ref();
    }
}
