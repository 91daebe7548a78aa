//! The type-erased task cell: one heap allocation per task holding the
//! header (reference count, vtable, id, queue, state bits), the
//! joiner's waker and the stage (the future, then its result).
//!
//! This file, `waker.rs`, the poll harness in `task/slab.rs` and the cell
//! memory cache in `task/cache.rs` hold the crate's `unsafe` code (plus one
//! `_rdtsc` call in `executor/tsc.rs`). The invariants:
//!
//! * **Liveness.** The cell is freed when the reference count drops to zero
//!   and the join handle's bit is clear. The slab entry owns one reference
//!   ([`OwnedTask`]); every cloned `Waker` owns one; the join handle
//!   ([`JoinCell`]) owns the `HANDLE` bit. The waker lent to a poll (built
//!   from the header pointer) does not count: it is never dropped, and lives
//!   only while the poll holds the slab's reference.
//! * **Stage access.** The stage is read and written only on the executor's
//!   thread, by the slab or the join handle (`!Send`, made on that thread),
//!   and never by two operations at once: the slab's `RUNNING` bit excludes
//!   everything else during a poll, and the `COMPLETE` bit says the future
//!   is gone (the handle touches the stage only then, when the slab has let
//!   go of the task). Foreign threads touch only the atomics, the
//!   id and the remote handle of the header, all of which are `Sync`.
//! * **The remote.** The header points to its executor's `Remote` without
//!   counting it while the slab holds the task (the slab's `Arc` outlives
//!   its entries). When the slab gives up its reference while wakers still
//!   hold some, it first gives the cell a counted reference
//!   (`REMOTE_OWNED` in the reference-count word), which `release` drops
//!   after the cell is freed: a waker that outlives its executor always
//!   finds the `Remote` alive.
//! * **Freeing on a foreign thread.** When the last reference is a waker on
//!   another thread, the cell is freed there. By then the stage is always
//!   `Consumed` (the slab consumes it before it gives up its reference), so
//!   no `!Send` future or output is dropped off the executor's thread.

use std::alloc::Layout;
use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::future::Future;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::boundary::{self, Payload};
use crate::error::JoinError;
use crate::executor::inbox::Remote;
use crate::sync::{fence, AtomicU32};
use crate::task::cache;
use crate::task::id::TaskId;
use crate::task::state::State;

/// The part of a task that wakers may see, on any thread.
pub(crate) struct Header {
    /// Owners of the cell (the slab entry and every cloned waker) in the low
    /// 29 bits, [`HANDLE`] (the join handle holds the cell too),
    /// [`REMOTE_OWNED`], and [`NOTIFIED`] in the top bit: set by a
    /// foreign-thread wake until the executor drains it from the inbox, so
    /// that many foreign wakes before that enqueue the id once. One 32-bit
    /// word for all keeps the header, read on every poll, at 32 bytes
    /// (with `state` and `queue` beside it in one 8-byte slot).
    refs: AtomicU32,
    vtable: &'static TaskVTable,
    pub(crate) id: TaskId,
    /// The executor's thread-safe half (inbox, unparker), not counted while
    /// the slab holds the task (the slab's own `Arc` keeps it alive then: no
    /// atomic reference-count traffic per task). When the slab lets go while
    /// wakers remain, the cell takes a counted reference ([`REMOTE_OWNED`]),
    /// so that a waker that outlives the executor stays harmless.
    remote: NonNull<Remote>,
    /// The task's queue (fixed at spawn). Its group is not stored here: it
    /// is the task's own (derived from the id) unless the state says
    /// `KEYED`, and then the slab keeps it.
    pub(crate) queue: u16,
    /// The executor-side state bits ([`State`]), kept here rather than in
    /// the slab entry so that a poll reads one place, the cell it polls.
    /// Only the executor's thread touches it, with relaxed loads and stores
    /// (plain moves, no read-modify-write): an atomic only so that the
    /// header is `Sync` for wakers on other threads, which never read it.
    state: AtomicU8,
    /// What the stage holds ([`stage`] tags): executor thread only, as
    /// `state`. Kept apart from the stage's bytes so that the stage is a
    /// union whose result a join handle reads in place, typed, at a fixed
    /// offset ([`TaskVTable::stage_offset`]).
    stage: AtomicU8,
}

// Compile-time check: the header stays at 32 bytes (it is read on every
// poll and allocated with every task); loom's atomics are larger.
#[cfg(not(tourbillon_loom))]
const _: () = assert!(std::mem::size_of::<Header>() == 32);

// Compile-time check: the cell of a task whose future and output are (about)
// empty is 56 bytes: the header, the joiner's waker and an 8-byte stage
// (room for a boxed panic payload; README, "Memory per spawned task");
// loom's atomics are larger.
#[cfg(not(tourbillon_loom))]
const _: () = assert!(std::mem::size_of::<Cell<std::future::Ready<()>>>() == 56);

// SAFETY: the header's fields are atomics, plain data and the pointer to the
// `Remote`, which is `Send + Sync` and alive whenever the header is
// reachable (see `Header::remote`); nothing in it is tied to a thread.
unsafe impl Send for Header {}
// SAFETY: as above: shared access only reads plain data, uses atomics, or
// reaches the `Sync` remote.
unsafe impl Sync for Header {}

// Compile-time check: wakers may carry a header reference to any thread.
const _: () = {
    const fn assert_sync<T: Sync + Send>() {}
    assert_sync::<Header>();
};

/// The "in the inbox" bit of [`Header::refs`]; the rest counts references.
const NOTIFIED: u32 = 1 << 31;
/// Set (once, by the slab when it gives up its reference while wakers
/// remain) when the cell owns a counted reference to its `Remote`, released
/// with the cell.
const REMOTE_OWNED: u32 = 1 << 30;
/// Set while the task's [`JoinCell`] (its join handle) holds the cell: an
/// owner apart from the count, so that the slab's and the wakers' releases
/// (the count) and the handle's (this bit) each tell whether they were the
/// last without the other's help. Cleared once, by the handle.
const HANDLE: u32 = 1 << 29;
const REF_MASK: u32 = !(NOTIFIED | REMOTE_OWNED | HANDLE);

impl crate::executor::inbox::InboxFlag for Header {
    fn mark(&self) -> bool {
        // A compare-exchange loop rather than `fetch_or`: loom models it
        // correctly (see `InboxFlag for AtomicBool`).
        let mut cur = self.refs.load(Ordering::Acquire);
        loop {
            if cur & NOTIFIED != 0 {
                return false;
            }
            match self.refs.compare_exchange_weak(
                cur,
                cur | NOTIFIED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }
}

impl Header {
    /// The executor's thread-safe half.
    #[inline]
    pub(crate) fn remote(&self) -> &Remote {
        // SAFETY: whoever reaches the header holds or borrows a reference to
        // the cell: the slab's (and while the slab holds the task, the
        // slab's `Arc<Remote>` keeps the remote alive: `TaskSlab` drops its
        // entries before its `Arc`) or a waker's. When the slab gives up its
        // reference while wakers remain, `OwnedTask::release_ref` first
        // gives the cell a counted reference (`REMOTE_OWNED`), dropped only
        // when the cell is freed, after the last waker.
        unsafe { self.remote.as_ref() }
    }

    /// The executor-side state bits (executor thread only).
    #[inline]
    pub(crate) fn state(&self) -> State {
        State::from_bits(self.state.load(Ordering::Relaxed))
    }

    /// Replaces the executor-side state bits (executor thread only).
    #[inline]
    pub(crate) fn set_state(&self, state: State) {
        self.state.store(state.bits(), Ordering::Relaxed)
    }

    /// What the stage holds (executor thread only).
    #[inline]
    fn stage(&self) -> u8 {
        self.stage.load(Ordering::Relaxed)
    }

    /// Records what the stage holds (executor thread only).
    #[inline]
    fn set_stage(&self, tag: u8) {
        self.stage.store(tag, Ordering::Relaxed)
    }

    /// Applies `f` to the state bits (executor thread only).
    #[inline]
    pub(crate) fn update_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.state();
        let r = f(&mut st);
        self.set_state(st);
        r
    }

    /// Records that the cell owns a counted reference to its remote (slab
    /// only, once, before it gives up its own reference).
    fn set_remote_owned(&self) {
        // A compare-exchange loop rather than `fetch_or` (see `mark`).
        let mut cur = self.refs.load(Ordering::Acquire);
        while cur & REMOTE_OWNED == 0 {
            match self.refs.compare_exchange_weak(
                cur,
                cur | REMOTE_OWNED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// Clears the "in the inbox" bit, before the executor applies the wake
    /// (so that a foreign wake after this point enqueues again).
    pub(crate) fn clear_notified(&self) {
        let mut cur = self.refs.load(Ordering::Acquire);
        while cur & NOTIFIED != 0 {
            match self.refs.compare_exchange_weak(
                cur,
                cur & !NOTIFIED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }
}

/// What a poll ended with, when the future is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// The future returned `Ready`; the stage holds its output.
    Output,
    /// The future panicked; the stage holds the payload.
    Panicked,
}

/// What a poll returned: `Pending`, or how the future ended. A byte with
/// constants rather than a `Poll<Finish>`: the run loop polls through two
/// call sites ([`RawTask::poll`]) and tests the byte where the two results
/// meet, which the compiler does not re-check as it does an enum made of
/// a returned byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PollCode(u8);

impl PollCode {
    /// The future returned `Pending`.
    pub(crate) const PENDING: PollCode = PollCode(0);
    /// The future returned `Ready`; the stage holds its output.
    const OUTPUT: PollCode = PollCode(1);
    /// The future panicked; the stage holds the payload.
    const PANICKED: PollCode = PollCode(2);

    /// How the future ended; not for `PENDING`.
    pub(crate) fn finish(self) -> Finish {
        debug_assert_ne!(self, PollCode::PENDING);
        if self == PollCode::OUTPUT {
            Finish::Output
        } else {
            Finish::Panicked
        }
    }
}

struct TaskVTable {
    poll: PollFn,
    cancel: unsafe fn(NonNull<Header>) -> Finish,
    drop_stage: unsafe fn(NonNull<Header>) -> Option<Payload>,
    dealloc: unsafe fn(NonNull<Header>),
    /// Where the stage starts in the cell: a join handle, which knows the
    /// output type but not the future's, reads the result there in place
    /// (no call, and no result written field by field into the caller's
    /// memory and read back whole: a store-forwarding stall per join on
    /// the machines measured; perf, PROFILING.md "Findings").
    stage_offset: usize,
    output_type: fn() -> TypeId,
}

/// The tags of [`Header::stage`]: what the stage's bytes hold.
mod stage {
    /// The future (pinned: dropped in place, never moved).
    pub(super) const RUNNING: u8 = 0;
    /// The future's output.
    pub(super) const FINISHED: u8 = 1;
    /// Nothing: the future was dropped unpolled (`abort`); the join handle
    /// reads `JoinError::Cancelled`.
    pub(super) const CANCELLED: u8 = 2;
    /// A boxed panic payload.
    pub(super) const PANICKED: u8 = 3;
    /// Nothing: the result was read, or dropped.
    pub(super) const CONSUMED: u8 = 4;
}

/// The stage's bytes: the future, then how it ended, as the header's stage
/// tag says. `repr(C)`: every field at offset 0, so the output sits at the
/// stage's offset whatever the future's type. A panic payload is boxed once
/// more so that it takes one word (the stage of a small task is then 8
/// bytes).
#[repr(C)]
union Stage<F: Future> {
    future: ManuallyDrop<F>,
    output: ManuallyDrop<F::Output>,
    panic: ManuallyDrop<Box<Payload>>,
}

/// `repr(C)` so that a pointer to the cell is a pointer to its header, and
/// the join waker sits at the same offset whatever `F` is ([`Prefix`]).
#[repr(C)]
struct Cell<F: Future> {
    header: Header,
    /// The waker of whoever awaits the task's join handle. Executor thread
    /// only (through the slab's [`OwnedTask`]); foreign threads never touch
    /// it.
    join_waker: UnsafeCell<Option<Waker>>,
    stage: UnsafeCell<Stage<F>>,
}

/// The part of every `Cell<F>` that does not depend on `F`: `repr(C)` with
/// the same leading fields, so its field offsets are the cell's.
#[repr(C)]
struct Prefix {
    header: Header,
    join_waker: UnsafeCell<Option<Waker>>,
}

/// A non-owning pointer to a task cell. Every method is `unsafe`: the caller
/// must hold a reference (normally through the slab entry) for the call.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct RawTask {
    ptr: NonNull<Header>,
}

/// The slab's owning reference to a task cell. `!Send`: it lives on the
/// executor's thread with the stage it guards.
pub(crate) struct OwnedTask {
    raw: RawTask,
}

impl OwnedTask {
    /// Allocates a task cell for `future` with one reference, owned by the
    /// returned value; `keyed`: the task belongs to a keyed group (its id is
    /// kept by the slab); `handle`: a join handle will hold the cell too
    /// ([`JoinCell::adopt`] turns that part into one).
    ///
    /// # Safety
    /// `remote` comes from [`Arc::as_ptr`] (so that the cell may later count
    /// a reference with `Arc::increment_strong_count`), and that `Arc`
    /// stays alive until the returned value is dropped (the slab, which
    /// owns it, holds an `Arc<Remote>` and drops its entries first).
    pub(crate) unsafe fn new<F>(
        future: F,
        id: TaskId,
        remote: NonNull<Remote>,
        queue: u16,
        keyed: bool,
        handle: bool,
    ) -> OwnedTask
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        let mut state = State::INITIAL;
        if keyed {
            state.set_keyed();
        }
        state.set_join_interest(handle);
        let mem = cache::allocate(Layout::new::<Cell<F>>()).cast::<Cell<F>>();
        // SAFETY: `mem` is fresh memory for a `Cell<F>` (its layout, from the
        // cell cache or the global allocator), not shared with anyone yet.
        // Written after the allocation, so that the cell is built in place
        // rather than on the stack and copied (callgrind; PROFILING.md).
        unsafe {
            mem.as_ptr().write(Cell {
                header: Header {
                    refs: AtomicU32::new(if handle { 1 | HANDLE } else { 1 }),
                    vtable: vtable::<F>(),
                    id,
                    remote,
                    queue,
                    state: AtomicU8::new(state.bits()),
                    stage: AtomicU8::new(stage::RUNNING),
                },
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
        (*ManuallyDrop::new(crate::waker::task_waker_unowned(self.raw.ptr))).clone()
    }

    /// Takes the joiner's waker out of the cell.
    pub(crate) fn take_join_waker(&self) -> Option<Waker> {
        // SAFETY: `OwnedTask` is `!Send` and lives in the slab, so this runs
        // on the executor thread, the only one that touches the joiner's
        // waker; `self` keeps the cell alive; `take` runs no user code.
        unsafe { (*join_waker_ptr(self.raw.ptr)).take() }
    }

    /// Drops what the stage holds (an unfinished future, or the result of
    /// a task no join handle reads) and marks the task COMPLETE; a task
    /// dropped unfinished reads `Cancelled` to a join handle that outlives
    /// the slab. Returns the panic of the destructor.
    pub(crate) fn drop_result(&self) -> Option<Payload> {
        let header = self.header();
        let unfinished = header.stage() == stage::RUNNING;
        // SAFETY: `OwnedTask` is `!Send`, so this runs on the executor
        // thread; the slab calls it only for a task that is not being polled
        // (not RUNNING), so no other stage operation is in progress.
        // Dropping the stage is a no-op when it was consumed already.
        let payload = unsafe { self.raw.drop_stage() };
        if unfinished {
            header.set_stage(stage::CANCELLED);
        }
        header.update_state(|st| st.set_complete());
        payload
    }

    /// The header (id, remote handle).
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: `self` owns a reference, so the header is alive for `&self`.
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
        // with it the slab's `Arc<Remote>`, so the cell takes a counted
        // reference for them before the slab lets go. A count of 1 is the
        // slab's alone, and no one can add one without holding a reference.
        let header = self.header();
        let cur = header.refs.load(Ordering::Acquire);
        if cur & REF_MASK == 1 {
            if cur & HANDLE == 0 {
                // Ours alone (the common case without a handle): free the
                // cell now. No waker holds it, so it has no counted
                // `Remote` either (only this function, once per cell, gives
                // it one).
                let dealloc = header.vtable.dealloc;
                // SAFETY: that was the last reference (the Acquire load
                // pairs with the Release decrements of wakers that let go
                // before); nobody else can reach the cell.
                unsafe { dealloc(self.raw.ptr) };
                return;
            }
            // The join handle holds the cell besides us, and no waker does:
            // the handle lives on this thread and is not running now, and
            // no other thread holds a reference through which it could
            // touch the word, so a plain store gives ours up. The handle
            // needs no `Remote` once the task is complete (the slab lets go
            // only then), so the cell takes no counted one.
            header.refs.store(cur - 1, Ordering::Release);
            return;
        }
        // SAFETY: the slab's `Arc<Remote>` is alive while it drops its
        // entries (`OwnedTask::new`'s contract), so the count is >= 1.
        unsafe { Arc::increment_strong_count(header.remote.as_ptr() as *const Remote) };
        header.set_remote_owned();
        // SAFETY: we own one reference and give it up here, once (`drop`
        // and `release_keep_stage` are exclusive).
        unsafe { release(self.raw.ptr) };
    }
}

impl Drop for OwnedTask {
    /// The slab drops an entry whose stage its join handle will not read:
    /// a detached task's result, or a task dropped unfinished (shutdown).
    ///
    /// Whatever state the task is in, the slab's reference ends with the
    /// task COMPLETE: a join handle never reaches the executor through a
    /// complete task (`JoinCell::remote_if_live`), so a handle that
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
        // SAFETY: the handle's bit keeps the cell alive while `self` lives.
        unsafe { self.ptr.as_ref() }
    }

    /// The task's id.
    pub(crate) fn id(&self) -> TaskId {
        self.header().id
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
    /// and `F::Output == T`, on this thread, and no other `JoinCell` was
    /// made of it.
    pub(crate) unsafe fn adopt(raw: RawTask) -> Self {
        Self {
            ptr: raw.ptr,
            _output: PhantomData,
            _not_send: PhantomData,
        }
    }

    /// The executor's thread-safe half, while the task is not complete
    /// (the executor, and with it the `Remote`, lives until then).
    pub(crate) fn remote_if_live(&self) -> Option<&Remote> {
        (!self.state().is_complete()).then(|| self.header().remote())
    }

    /// Sets the CANCELLED bit of a live task (`abort`), unless it is
    /// complete or cancelled already; `true` if it set it.
    pub(crate) fn mark_cancelled(&self) -> bool {
        self.header().update_state(|st| {
            if st.is_complete() || st.is_cancelled() {
                return false;
            }
            st.set_cancelled();
            true
        })
    }

    /// The result, if the task is complete: moved out of the cell (a second
    /// call gives `Cancelled`); else registers `waker` as the joiner's.
    #[inline]
    pub(crate) fn poll_result(&self, waker: &Waker) -> Poll<Result<T, JoinError>> {
        let st = self.state();
        if st.is_complete() && !st.is_running() {
            // SAFETY: `JoinCell` is `!Send`, so we are on the executor
            // thread; COMPLETE and not RUNNING: the future is gone and no
            // stage operation is in progress (the slab released the task,
            // or is about to without touching the stage); `T` is the output
            // type (`adopt`'s contract).
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
        // SAFETY: executor thread (`!Send`), the only one that touches the
        // joiner's waker; the reference into the cell ends before any user
        // code runs (the clone is made first, the old waker dropped after).
        let slot = unsafe { &mut *join_waker_ptr(self.ptr) };
        if slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            return;
        }
        let new = Some(waker.clone());
        // SAFETY: as above; `waker.clone()` may have run user code, so the
        // slot is borrowed anew.
        let old = std::mem::replace(unsafe { &mut *join_waker_ptr(self.ptr) }, new);
        drop(old);
    }
}

impl<T> Drop for JoinCell<T> {
    /// The handle lets go: a task still running is detached (its output is
    /// dropped when it completes); the unread result of a completed one is
    /// dropped here. The cell is freed if nothing else holds it.
    fn drop(&mut self) {
        // SAFETY: the handle's bit keeps the cell alive until `release`
        // below; `!Send`: executor thread.
        let header = unsafe { self.ptr.as_ref() };
        let st = header.update_state(|st| {
            st.set_join_interest(false);
            *st
        });
        // SAFETY: executor thread, the only one that touches the joiner's
        // waker; dropped after the last use of the cell below.
        let join_waker = unsafe { (*join_waker_ptr(self.ptr)).take() };
        if st.is_complete() && !st.is_running() && header.stage() != stage::CONSUMED {
            // SAFETY: executor thread; complete and not running: no stage
            // operation in progress. Dropping an unread result (it may run
            // user code, which cannot reach this cell's stage). Its panic
            // is dropped: the handle's owner let go of the result.
            if let Some(p) = unsafe { RawTask { ptr: self.ptr }.drop_stage() } {
                boundary::drop_payload(p);
            }
        }
        let cur = header.refs.load(Ordering::Acquire);
        if cur & REF_MASK == 0 {
            // The slab let go and no waker holds the cell: nobody else can
            // reach it. The common case: a task joined after it completed.
            // SAFETY: the last owner, synchronised by the Acquire load with
            // the Release of the slab's and the wakers' releases.
            unsafe { free(self.ptr) };
        } else {
            // A compare-exchange loop rather than `fetch_and` (see `mark`).
            let mut cur = cur;
            loop {
                match header.refs.compare_exchange_weak(
                    cur,
                    cur & !HANDLE,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break,
                    Err(now) => cur = now,
                }
            }
            if cur & REF_MASK == 0 {
                // The last waker let go between the load and the exchange.
                // SAFETY: we were the last owner (AcqRel synchronises).
                unsafe { free(self.ptr) };
            }
        }
        drop(join_waker);
    }
}

/// The joiner's waker slot of the cell at `ptr`.
fn join_waker_ptr(ptr: NonNull<Header>) -> *mut Option<Waker> {
    // SAFETY: callers hold the cell alive; every `Cell<F>` starts with the
    // fields of `Prefix` (both `repr(C)`).
    unsafe { (*ptr.cast::<Prefix>().as_ptr()).join_waker.get() }
}

impl RawTask {
    /// The header's address (the data pointer of the task's wakers).
    pub(crate) fn header_addr(self) -> *const () {
        self.ptr.as_ptr() as *const ()
    }

    /// Polls the future once with the task's own waker, through the first
    /// or the second of two indirect call sites (`second_site`).
    ///
    /// The run loop alternates the two from poll to poll. Two tasks of
    /// different types polled in turn (a request and its reply, a ping and
    /// its pong) then each have a call site of their own, whose target
    /// never changes, instead of sharing one whose target changes at every
    /// poll. On the machines measured, the CPU's indirect branch predictor
    /// sometimes fails on the shared site for long stretches: every poll
    /// mispredicted, a ping-pong round trip 20% slower (PROFILING.md,
    /// finding 12). Tasks of one type lose nothing: both sites then see
    /// one target.
    ///
    /// # Safety
    /// On the executor thread; the cell is kept alive for the call; no other
    /// operation on the stage runs during the call (the slab's RUNNING bit);
    /// the stage is `Running`.
    #[inline(always)]
    pub(crate) unsafe fn poll(self, second_site: bool) -> PollCode {
        let poll = self.header().vtable.poll;
        if second_site {
            // SAFETY: forwarded from this function's contract.
            unsafe { poll_at_second_site(poll, self.ptr) }
        } else {
            // SAFETY: forwarded from this function's contract.
            unsafe { poll(self.ptr) }
        }
    }

    /// Drops the future without polling it and stores `JoinError::Cancelled`
    /// (or the panic of the future's destructor).
    ///
    /// # Safety
    /// As for [`RawTask::poll`]; the stage is `Running`.
    pub(crate) unsafe fn cancel(self) -> Finish {
        // SAFETY: forwarded from this function's contract.
        unsafe { (self.header().vtable.cancel)(self.ptr) }
    }

    /// Moves the result out of the stage (leaving it `Consumed`): the
    /// output, or the cancellation or panic as a [`JoinError`]. Inlined into
    /// the join handle's poll, typed: the result goes to the caller in
    /// registers where it fits.
    ///
    /// # Safety
    /// On the executor thread, the cell alive, no other stage operation in
    /// progress, the stage finished (`Finished`, `Cancelled` or `Panicked`),
    /// and `T` the task's output type (the caller holds the task's
    /// `OutputId<T>`, which only the slab's `insert` of the future makes;
    /// debug builds check it).
    #[inline]
    pub(crate) unsafe fn take_result<T: 'static>(self) -> Option<Result<T, JoinError>> {
        let header = self.header();
        debug_assert_eq!(
            (header.vtable.output_type)(),
            TypeId::of::<T>(),
            "tourbillon bug: join handle type does not match its task"
        );
        let data = self.stage_ptr();
        match header.stage() {
            stage::FINISHED => {
                header.set_stage(stage::CONSUMED);
                // SAFETY: the stage holds the output (its tag), a `T`
                // (contract), at offset 0 of the `repr(C)` stage union, which
                // is aligned for it; it is moved out once (now `Consumed`).
                Some(Ok(unsafe { data.cast::<T>().read() }))
            }
            stage::CANCELLED => {
                header.set_stage(stage::CONSUMED);
                Some(Err(JoinError::cancelled(header.id)))
            }
            stage::PANICKED => {
                header.set_stage(stage::CONSUMED);
                // SAFETY: the stage holds a boxed payload (its tag), moved
                // out once (now `Consumed`).
                let payload = unsafe { data.cast::<Box<Payload>>().read() };
                Some(Err(JoinError::panic(header.id, *payload)))
            }
            stage::CONSUMED => Some(Err(JoinError::cancelled(header.id))),
            _ => {
                // Not finished: leave it untouched (a crate bug; the caller
                // checks COMPLETE first). A running future is pinned: never
                // moved.
                debug_assert!(false, "take_result on an unfinished task");
                None
            }
        }
    }

    /// The stage's address (its union's fields all start there).
    fn stage_ptr(self) -> *mut u8 {
        // SAFETY: callers hold the cell alive; `stage_offset` is the offset
        // of the stage in the `Cell<F>` this vtable belongs to, so the sum
        // stays inside the cell's allocation.
        unsafe {
            self.ptr
                .cast::<u8>()
                .as_ptr()
                .add(self.header().vtable.stage_offset)
        }
    }

    /// Drops whatever the stage holds (future or result), leaving it
    /// consumed; no-op if consumed. Returns the panic of a destructor.
    ///
    /// # Safety
    /// On the executor thread, the cell alive, no other stage operation in
    /// progress.
    pub(crate) unsafe fn drop_stage(self) -> Option<Payload> {
        // SAFETY: forwarded from this function's contract.
        unsafe { (self.header().vtable.drop_stage)(self.ptr) }
    }

    /// Moves a panic payload out of a `Panicked` stage, leaving a
    /// placeholder payload for the join handle.
    ///
    /// # Safety
    /// On the executor thread, the cell alive, no other stage operation in
    /// progress.
    pub(crate) unsafe fn take_panic(self) -> Option<Box<dyn Any + Send>> {
        if self.header().stage() != stage::PANICKED {
            return None;
        }
        // SAFETY: the stage holds a boxed payload (its tag) at offset 0 of
        // the stage union; exclusive access (contract).
        let payload = unsafe { &mut *self.stage_ptr().cast::<Box<Payload>>() };
        Some(std::mem::replace(
            &mut **payload,
            Box::new(
                "the panic payload was propagated out of the executor (PanicPolicy::Propagate)",
            ),
        ))
    }

    /// Takes the joiner's waker out of the cell.
    ///
    /// # Safety
    /// On the executor thread (the only one that touches the joiner's
    /// waker), the cell alive for the call.
    pub(crate) unsafe fn take_join_waker(self) -> Option<Waker> {
        // SAFETY: the cell is alive (contract); every `Cell<F>` starts with
        // the fields of `Prefix` (both `repr(C)`); `take` runs no user code.
        unsafe { (*(*self.ptr.cast::<Prefix>().as_ptr()).join_waker.get()).take() }
    }

    fn header(&self) -> &Header {
        // SAFETY: every caller of the `unsafe` methods above guarantees the
        // cell is alive; the header is immutable apart from its atomics.
        unsafe { self.ptr.as_ref() }
    }

    /// The header, for a caller that keeps the cell alive otherwise (the
    /// poll harness between its two slab borrows: RUNNING keeps the entry).
    ///
    /// # Safety
    /// The cell stays alive for `'a`.
    #[inline]
    pub(crate) unsafe fn header_unbound<'a>(self) -> &'a Header {
        // SAFETY: the caller keeps the cell alive for `'a`.
        unsafe { self.ptr.as_ref() }
    }
}

/// Adds a reference (a waker clone).
///
/// # Safety
/// `ptr` points to a live task header, kept alive by a reference the caller
/// holds or borrows.
pub(crate) unsafe fn retain(ptr: NonNull<Header>) {
    // SAFETY: the header is alive per the contract.
    let old = unsafe { ptr.as_ref() }.refs.fetch_add(1, Ordering::Relaxed);
    if old & REF_MASK > REF_MASK / 2 {
        // Same policy as `Arc`: a reference count this large means wakers
        // are being leaked in a loop; aborting beats an overflow.
        std::process::abort();
    }
}

/// Gives up one reference, freeing the cell if it was the last.
///
/// # Safety
/// The caller owns one reference to the live header at `ptr` and does not use
/// `ptr` afterwards.
pub(crate) unsafe fn release(ptr: NonNull<Header>) {
    // SAFETY: the caller's reference keeps the header alive until this
    // decrement.
    let header = unsafe { ptr.as_ref() };
    // Fast path: a count of 1 without the handle's bit is our own reference
    // alone, and no one can add one without holding a reference, so no
    // atomic read-modify-write is needed (the Acquire load pairs with the
    // Release decrements of other owners).
    let last = |refs: u32| refs & REF_MASK == 1 && refs & HANDLE == 0;
    if !last(header.refs.load(Ordering::Acquire)) {
        if !last(header.refs.fetch_sub(1, Ordering::Release)) {
            return;
        }
        // Synchronise with every other release before freeing (as `Arc`
        // does).
        fence(Ordering::Acquire);
    }
    // SAFETY: that was the last reference.
    unsafe { free(ptr) };
}

/// Frees the cell at `ptr`, and the counted `Remote` it may own.
///
/// # Safety
/// The caller gave up the last reference (count and handle) and
/// synchronised with every earlier release.
unsafe fn free(ptr: NonNull<Header>) {
    // SAFETY: the caller was the last owner: the cell is alive and ours.
    let header = unsafe { ptr.as_ref() };
    let owned_remote =
        (header.refs.load(Ordering::Relaxed) & REMOTE_OWNED != 0).then_some(header.remote);
    let dealloc = header.vtable.dealloc;
    // SAFETY: that was the last reference; nobody else can reach the cell.
    unsafe { dealloc(ptr) };
    if let Some(remote) = owned_remote {
        // SAFETY: the counted reference the slab gave the cell
        // (`OwnedTask::release_ref`), given up once, with the cell.
        unsafe { Arc::decrement_strong_count(remote.as_ptr() as *const Remote) };
    }
}

/// Borrows the header behind a waker's data pointer.
///
/// # Safety
/// `ptr` came from a waker built by `crate::waker` whose reference (owned or
/// borrowed) is alive for `'a`.
pub(crate) unsafe fn header_ref<'a>(ptr: *const ()) -> &'a Header {
    // SAFETY: per the contract, `ptr` is a live `Header`.
    unsafe { &*(ptr as *const Header) }
}

/// The vtable of the cells of futures of type `F` (a constant: one static
/// table per type).
struct VTableOf<F>(std::marker::PhantomData<F>);

impl<F> VTableOf<F>
where
    F: Future + 'static,
    F::Output: 'static,
{
    const VTABLE: TaskVTable = TaskVTable {
        poll: poll::<F>,
        cancel: cancel::<F>,
        drop_stage: drop_stage::<F>,
        dealloc: dealloc::<F>,
        stage_offset: std::mem::offset_of!(Cell<F>, stage),
        output_type: TypeId::of::<F::Output>,
    };
}

fn vtable<F>() -> &'static TaskVTable
where
    F: Future + 'static,
    F::Output: 'static,
{
    &VTableOf::<F>::VTABLE
}

/// The stage of the cell at `ptr`.
///
/// # Safety
/// The cell is a live `Cell<F>`, and the caller has exclusive access to the
/// stage for the returned pointer's use (executor thread, slab bits).
unsafe fn stage_of<F: Future>(ptr: NonNull<Header>) -> *mut Stage<F> {
    // SAFETY: `Cell<F>` is `repr(C)` with the header first, and the header
    // pointer came from a `Cell<F>` allocation of this vtable's `F`.
    unsafe { (*ptr.cast::<Cell<F>>().as_ptr()).stage.get() }
}

/// Drops what the stage holds in place (futures are pinned: never moved
/// before drop) and leaves it `Consumed`, catching a panicking destructor.
///
/// # Safety
/// The cell at `ptr` is a live `Cell<F>` whose stage is exclusively
/// accessed for the call (executor thread, slab bits).
unsafe fn drop_stage_catching<F: Future>(ptr: NonNull<Header>) -> Result<(), Payload> {
    // SAFETY: the header is alive (contract).
    let header = unsafe { ptr.as_ref() };
    // SAFETY: a live `Cell<F>` (contract).
    let data = unsafe { stage_of::<F>(ptr) };
    let tag = header.stage();
    // `Consumed` before the destructor runs: if it panics, unwinding drops
    // the rest of the value, and nothing drops it again.
    header.set_stage(stage::CONSUMED);
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the tag says which field holds a live value; it is
        // dropped once, in place.
        unsafe {
            match tag {
                stage::RUNNING => ManuallyDrop::drop(&mut (*data).future),
                stage::FINISHED => ManuallyDrop::drop(&mut (*data).output),
                stage::PANICKED => ManuallyDrop::drop(&mut (*data).panic),
                _ => {}
            }
        }
    }))
}

/// Stores a panic payload in a `Consumed` stage.
///
/// # Safety
/// As for [`drop_stage_catching`]; the stage is `Consumed`.
unsafe fn store_panic<F: Future>(ptr: NonNull<Header>, payload: Payload) {
    // SAFETY: a live `Cell<F>`, exclusive stage access (contract); the stage
    // holds nothing, so writing a field overwrites nothing live.
    unsafe {
        (*stage_of::<F>(ptr)).panic = ManuallyDrop::new(Box::new(payload));
        ptr.as_ref().set_stage(stage::PANICKED);
    }
}

/// The second indirect call site of [`RawTask::poll`]: a function of its
/// own so that the compiler cannot merge it with the first (two calls of
/// one function pointer in the two arms of a branch become one call).
///
/// # Safety
/// `poll` is the vtable's `poll` of the cell at `ptr`, under the contract of
/// [`RawTask::poll`].
#[inline(never)]
unsafe fn poll_at_second_site(poll: PollFn, ptr: NonNull<Header>) -> PollCode {
    // SAFETY: forwarded from this function's contract.
    unsafe { poll(ptr) }
}

type PollFn = unsafe fn(NonNull<Header>) -> PollCode;

unsafe fn poll<F: Future>(ptr: NonNull<Header>) -> PollCode {
    // SAFETY: the caller (`RawTask::poll`) guarantees a live cell of this `F`
    // and exclusive stage access for the call.
    let (header, data) = unsafe { (ptr.as_ref(), stage_of::<F>(ptr)) };
    if header.stage() != stage::RUNNING {
        debug_assert!(false, "polled a task whose future is gone");
        return PollCode::OUTPUT;
    }
    // The task's waker, lent to this poll: built from the header pointer
    // and the static vtable (two words, no allocation, no reference-count
    // change); it owns no reference, so it is never dropped.
    let waker = ManuallyDrop::new(crate::waker::task_waker_unowned(ptr));
    // SAFETY: the stage holds the future (tag `RUNNING`), exclusively ours
    // for the call. It lives in the heap cell and is never moved: it is
    // dropped in place by `drop_stage_catching` before the cell is freed.
    let future = unsafe { Pin::new_unchecked(&mut *(*data).future) };
    let mut cx = Context::from_waker(&waker);
    match catch_unwind(AssertUnwindSafe(|| future.poll(&mut cx))) {
        Ok(Poll::Pending) => PollCode::PENDING,
        // SAFETY: exclusive stage access (this function's contract); the
        // future returned `Ready`.
        Ok(Poll::Ready(output)) => unsafe { store_output::<F>(ptr, output) },
        // SAFETY: as above; the future panicked.
        Err(payload) => unsafe { store_poll_panic::<F>(ptr, payload) },
    }
}

/// The end of a poll that returned `Ready`: drops the future in place and
/// stores its output. Out of line, so that the pending path of
/// [`poll`] saves no registers (callgrind: the headline's yields paid 11
/// instructions per poll for the saves of this path).
///
/// # Safety
/// A live `Cell<F>` at `ptr` whose stage holds the future, which returned
/// `Ready`; exclusive stage access; executor thread.
#[inline(never)]
unsafe fn store_output<F: Future>(ptr: NonNull<Header>, output: F::Output) -> PollCode {
    // SAFETY: exclusive stage access (contract); the future is dropped in
    // place before the result is written.
    match unsafe { drop_stage_catching::<F>(ptr) } {
        Ok(()) => {
            // SAFETY: the stage is `Consumed` (nothing to overwrite).
            unsafe { (*stage_of::<F>(ptr)).output = ManuallyDrop::new(output) };
            // SAFETY: a live cell (contract).
            unsafe { ptr.as_ref() }.set_stage(stage::FINISHED);
            PollCode::OUTPUT
        }
        Err(payload) => {
            // The future's destructor panicked: its panic is the task's.
            // The output's destructor is user code too; a second panic is
            // dropped (the first payload is the one to report).
            if let Some(second) = boundary::drop_caught(output) {
                boundary::drop_payload(second);
            }
            // SAFETY: the stage is `Consumed`.
            unsafe { store_panic::<F>(ptr, payload) };
            PollCode::PANICKED
        }
    }
}

/// The end of a poll that panicked: drops the future in place (a second
/// panic from its destructor is swallowed: the first payload is the one to
/// report) and stores the payload.
///
/// # Safety
/// A live `Cell<F>` at `ptr` whose stage holds the future, which panicked;
/// exclusive stage access; executor thread.
#[cold]
#[inline(never)]
unsafe fn store_poll_panic<F: Future>(ptr: NonNull<Header>, payload: Payload) -> PollCode {
    // SAFETY: exclusive stage access (contract).
    if let Err(second) = unsafe { drop_stage_catching::<F>(ptr) } {
        boundary::drop_payload(second);
    }
    // SAFETY: the stage is `Consumed`.
    unsafe { store_panic::<F>(ptr, payload) };
    PollCode::PANICKED
}

unsafe fn cancel<F: Future>(ptr: NonNull<Header>) -> Finish {
    // SAFETY: the caller (`RawTask::cancel`) guarantees a live cell of this
    // `F` and exclusive stage access.
    match unsafe { drop_stage_catching::<F>(ptr) } {
        Ok(()) => {
            // SAFETY: as above.
            unsafe { ptr.as_ref() }.set_stage(stage::CANCELLED);
            Finish::Output
        }
        Err(payload) => {
            // SAFETY: the stage is `Consumed`.
            unsafe { store_panic::<F>(ptr, payload) };
            Finish::Panicked
        }
    }
}

unsafe fn drop_stage<F: Future>(ptr: NonNull<Header>) -> Option<Payload> {
    // SAFETY: the caller (`RawTask::drop_stage`) guarantees a live cell of
    // this `F` and exclusive stage access.
    if unsafe { ptr.as_ref() }.stage() == stage::CONSUMED {
        return None;
    }
    // SAFETY: as above.
    unsafe { drop_stage_catching::<F>(ptr) }.err()
}

unsafe fn dealloc<F: Future>(ptr: NonNull<Header>) {
    let cell = ptr.cast::<Cell<F>>();
    // SAFETY: the last reference is gone, so we own the `Cell<F>` that
    // `OwnedTask::new` wrote. Its stage holds nothing (`Consumed` or
    // `Cancelled`: the slab or the join handle empties it before letting
    // go), and a stage union has no destructor anyway, so dropping the cell
    // drops no future or output here, whatever thread this is; it drops the
    // joiner's waker if one is left (a `Waker` is `Send`). The remote's
    // reference, if the cell owns one, is given up by `release`.
    unsafe {
        debug_assert!(matches!(
            ptr.as_ref().stage(),
            stage::CONSUMED | stage::CANCELLED
        ));
        ptr::drop_in_place(cell.as_ptr())
    };
    // SAFETY: the memory came from `cache::allocate` with this layout, its
    // contents were just dropped, and nothing refers to it any more.
    unsafe { cache::release(cell.cast::<u8>(), Layout::new::<Cell<F>>()) };
    #[cfg(all(test, tourbillon_loom))]
    DEALLOCS.with(|n| n.set(n.get() + 1));
}

#[cfg(all(test, tourbillon_loom))]
std::thread_local! {
    /// Cells freed, counted for the loom models (exactly once per task).
    /// Per OS thread: loom runs a model's threads on the test's own OS
    /// thread, and the test harness runs tests on different ones, so one
    /// model never counts another's cells (a shared counter did, when two
    /// models ran at once in CI).
    pub(crate) static DEALLOCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Cells freed on this thread so far (loom models).
#[cfg(all(test, tourbillon_loom))]
pub(crate) fn deallocs() -> usize {
    DEALLOCS.with(std::cell::Cell::get)
}
