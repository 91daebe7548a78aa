//! The task header: the part of a task cell that wakers may see on any
//! thread (reference count, vtable, key and id, sink, queue, state bits), its
//! reference counting, and the vtable type every cell points to.

use std::any::TypeId;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::boundary::Payload;
use crate::sync::{fence, AtomicU32};
use crate::task::id::{TaskId, TaskKey};
use crate::task::state::State;

/// The part of a task that wakers may see, on any thread.
pub(crate) struct Header {
    /// Owners of the cell (the slab entry and every cloned waker) in the low
    /// 29 bits, [`HANDLE`] (the join handle holds the cell too),
    /// [`SINK_OWNED`], and [`NOTIFIED`] in the top bit: set by a
    /// foreign-thread wake until the executor drains it from the inbox, so
    /// that many foreign wakes before that enqueue the id once. One 32-bit
    /// word for all keeps the header, read on every poll, small (with
    /// `state` and `queue` beside it in one 8-byte slot).
    refs: AtomicU32,
    vtable: &'static TaskVTable,
    /// Where the task lives in its executor's slab (what its wakes, aborts
    /// and schedulers name it by).
    pub(crate) key: TaskKey,
    /// Where the task's wakes and aborts go ([`Schedule`]: the executor's
    /// thread-safe half), type-erased: the vtable's `wake`, `abort`,
    /// `retain_sink` and `release_sink` know its type. Not counted while
    /// the slab holds the task (the slab's own `Arc` keeps it alive then: no
    /// atomic reference-count traffic per task). When the slab lets go while
    /// wakers remain, the cell takes a counted reference ([`SINK_OWNED`]),
    /// so that a waker that outlives the executor stays harmless.
    pub(super) sink: NonNull<()>,
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
    /// The task's process-unique id (what `task::id()`, the handles and
    /// `JoinError` give): no poll, wake or slab lookup reads it.
    pub(crate) task_id: TaskId,
}

// Compile-time check: the header stays at 40 bytes (it is read on every
// poll and allocated with every task); loom's atomics are larger.
#[cfg(not(tourbillon_loom))]
const _: () = assert!(std::mem::size_of::<Header>() == 40);

// SAFETY: I3 (sink): the header's fields are atomics, plain data (the
// vtable, a `&'static` table; the key, queue and id) and the pointer to the
// sink, a `Schedule` (so `Send + Sync`), alive whenever the header is
// reachable; nothing in it is tied to a thread, and it has no destructor.
unsafe impl Send for Header {}
// SAFETY: I2 (stage access): through `&Header` a foreign thread reaches
// only the atomics (the reference word, and the state and stage bytes,
// atomics so that a relaxed read from another thread is no data race), the
// immutable vtable, key, queue and id, and the sink, a `Schedule` (so
// `Sync`), alive while the header is reachable (I3, sink). The stage's
// bytes and the joiner's waker are outside the header (I2, I6).
unsafe impl Sync for Header {}

// Compile-time check: wakers may carry a header reference to any thread.
const _: () = {
    const fn assert_sync<T: Sync + Send>() {}
    assert_sync::<Header>();
};

/// The "in the inbox" bit of [`Header::refs`]; the rest counts references.
const NOTIFIED: u32 = 1 << 31;
/// Set (once, by the slab when it gives up its reference while wakers
/// remain) when the cell owns a counted reference to its sink, released
/// with the cell.
pub(super) const SINK_OWNED: u32 = 1 << 30;
/// Set while the task's join handle holds the cell: an owner apart from
/// the count, so that the slab's and the wakers' releases (the count) and
/// the handle's (this bit) each tell whether they were the last without
/// the other's help. Cleared once, by the handle.
pub(super) const HANDLE: u32 = 1 << 29;
/// The reference count's bits.
pub(super) const REF_MASK: u32 = !(NOTIFIED | SINK_OWNED | HANDLE);

impl Header {
    /// Builds the header of a new cell: one reference (the slab's), plus
    /// the join handle's bit when `handle`.
    #[inline(always)]
    pub(super) fn new(
        vtable: &'static TaskVTable,
        key: TaskKey,
        task_id: TaskId,
        sink: NonNull<()>,
        queue: u16,
        state: State,
        handle: bool,
    ) -> Header {
        Header {
            refs: AtomicU32::new(if handle { 1 | HANDLE } else { 1 }),
            vtable,
            key,
            sink,
            queue,
            state: AtomicU8::new(state.bits()),
            stage: AtomicU8::new(stage::RUNNING),
            task_id,
        }
    }

    /// The cell's vtable.
    #[inline]
    pub(super) fn vtable(&self) -> &'static TaskVTable {
        self.vtable
    }

    /// The reference word ([`NOTIFIED`], [`SINK_OWNED`], [`HANDLE`] and the
    /// count).
    #[inline]
    pub(super) fn refs(&self) -> &AtomicU32 {
        &self.refs
    }

    /// Applies `f` to the reference word atomically while it returns
    /// `Some(new)`; returns the word `f` last saw (unchanged when `f`
    /// returned `None`). A compare-exchange loop rather than `fetch_or` or
    /// `fetch_and`: loom models it correctly (loom 0.7 lets a store slip
    /// inside a read-modify-write, tokio-rs/loom#254).
    #[inline]
    pub(super) fn update_refs(&self, f: impl Fn(u32) -> Option<u32>) -> u32 {
        let mut cur = self.refs.load(Ordering::Acquire);
        while let Some(new) = f(cur) {
            match self
                .refs
                .compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return cur,
                Err(now) => cur = now,
            }
        }
        cur
    }

    /// Sets the "in the inbox" bit; `true` if it was clear (the caller
    /// enqueues the id: several foreign wakes before the executor drains
    /// its inbox enqueue the task once).
    pub(crate) fn mark_notified(&self) -> bool {
        let seen = self.update_refs(|cur| (cur & NOTIFIED == 0).then_some(cur | NOTIFIED));
        seen & NOTIFIED == 0
    }

    /// Clears the "in the inbox" bit, before the executor applies the wake
    /// (so that a foreign wake after this point enqueues again).
    pub(crate) fn clear_notified(&self) {
        self.update_refs(|cur| (cur & NOTIFIED != 0).then_some(cur & !NOTIFIED));
    }

    /// Records that the cell owns a counted reference to its sink (slab
    /// only, once, before it gives up its own reference).
    pub(super) fn set_sink_owned(&self) {
        self.update_refs(|cur| (cur & SINK_OWNED == 0).then_some(cur | SINK_OWNED));
    }

    /// The reference count (tests).
    #[cfg(test)]
    pub(crate) fn ref_count(&self) -> u32 {
        self.refs.load(Ordering::Acquire) & REF_MASK
    }

    /// Whether `other` belongs to the same executor (the same sink).
    #[inline]
    pub(crate) fn same_sink(&self, other: &Header) -> bool {
        self.sink == other.sink
    }

    /// Gives back the reference a task's wakers left counted
    /// ([`State`]'s CREDIT bit), if any: executor thread only, while the
    /// slab still holds the task (so the count stays above zero).
    #[inline]
    pub(super) fn settle_credit(&self) {
        let st = self.state();
        if st.has_credit() {
            let mut st = st;
            st.set_credit(false);
            self.set_state(st);
            self.refs.fetch_sub(1, Ordering::Release);
        }
    }

    /// Sends a wake of this task to its sink (the waker's `wake`, any
    /// thread): only the task's wakers call it, whose reference (or, for
    /// the waker lent to a poll, the slab's) keeps the sink alive (I3,
    /// sink).
    #[inline]
    pub(crate) fn wake(&self) {
        // SAFETY: the vtable's `wake` (its `# Safety`): this header is the
        // one of the cell this vtable was made for (I5, cell type), and its
        // sink is alive for the call (I3, sink): a waker's reference, or the
        // slab's while it holds the task, keeps it.
        unsafe { (self.vtable.wake)(self) }
    }

    /// Sends an abort of this task to its sink (any thread). Only while the
    /// sink is alive (I3, sink): the callers, `JoinCell::abort` and
    /// `AbortRef::abort`, call it only for a task that was live (not
    /// COMPLETE) when their reference was made.
    pub(crate) fn abort(&self) {
        // SAFETY: the vtable's `abort` (its `# Safety`): this header is the
        // one of the cell this vtable was made for (I5, cell type), and its
        // sink is alive (I3, sink): the slab still holds the task (a join
        // handle aborts only a task that is not COMPLETE), or the cell owns
        // a counted reference to the sink (an abort handle made while the
        // task was live aborts only then: `AbortRef::live`).
        unsafe { (self.vtable.abort)(self) }
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

    /// Applies `f` to the state bits (executor thread only).
    #[inline]
    pub(crate) fn update_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut st = self.state();
        let r = f(&mut st);
        self.set_state(st);
        r
    }

    /// What the stage holds (executor thread only).
    #[inline]
    pub(super) fn stage(&self) -> u8 {
        self.stage.load(Ordering::Relaxed)
    }

    /// Records what the stage holds (executor thread only).
    #[inline]
    pub(super) fn set_stage(&self, tag: u8) {
        self.stage.store(tag, Ordering::Relaxed)
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
/// call sites (`RawTask::poll`) and tests the byte where the two results
/// meet, which the compiler does not re-check as it does an enum made of
/// a returned byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PollCode(u8);

impl PollCode {
    /// The future returned `Pending`.
    pub(crate) const PENDING: PollCode = PollCode(0);
    /// The future returned `Ready`; the stage holds its output.
    pub(super) const OUTPUT: PollCode = PollCode(1);
    /// The future panicked; the stage holds the payload.
    pub(super) const PANICKED: PollCode = PollCode(2);

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

/// The functions of one cell type (a future type and a sink type): one
/// static table per pair.
pub(super) struct TaskVTable {
    /// Polls the future once with the task's own (lent) waker; stores its
    /// output, or its panic, in the stage when it ends.
    ///
    /// # Safety
    /// As [`PollFn`]: `ptr` is the header of a live cell of this vtable
    /// (I1, liveness; I5, cell type), the call runs on the executor's
    /// thread with the stage to itself (I2, stage access: the poll harness
    /// holds RUNNING, S1), and the stage is `Running`.
    pub(super) poll: PollFn,
    /// Drops the future unpolled, in place, and leaves the stage
    /// `Cancelled` (or `Panicked`, with the panic of the future's
    /// destructor).
    ///
    /// # Safety
    /// `ptr` is the header of a live cell of this vtable (I1, I5), on the
    /// executor's thread, with the stage to the caller alone for the call
    /// (I2, stage access: the poll harness holding RUNNING, or the slab,
    /// for a task that is not RUNNING, S1), and the stage is `Running`.
    pub(super) cancel: unsafe fn(NonNull<Header>) -> Finish,
    /// Drops whatever the stage holds (the future, the output or a panic)
    /// and leaves it `Consumed`; returns the panic of a destructor.
    ///
    /// # Safety
    /// `ptr` is the header of a live cell of this vtable (I1, I5), on the
    /// executor's thread, with the stage to the caller alone for the call
    /// (I2, stage access: the slab, holding RUNNING or for a task that is
    /// not RUNNING, S1; or the join handle, for a COMPLETE task that is not
    /// RUNNING).
    pub(super) drop_stage: unsafe fn(NonNull<Header>) -> Option<Payload>,
    /// Drops the cell (its joiner's waker; the stage has no destructor)
    /// and gives its memory back to the cell cache. Does not give up the
    /// counted sink reference the cell may own: `free` does, after.
    ///
    /// # Safety
    /// `ptr` is the header of a cell of this vtable (I5) whose last
    /// reference (the count and the handle's bit, I1) the caller gave up,
    /// synchronised with every earlier release: nobody else reaches the
    /// cell, and nobody uses `ptr` afterwards. Its stage holds nothing
    /// (`Consumed` or `Cancelled`, I4), so the call may run on any thread.
    pub(super) dealloc: unsafe fn(NonNull<Header>),
    /// `Schedule::wake` of the sink.
    ///
    /// # Safety
    /// The header is the one of a cell of this vtable (I5: the sink is of
    /// the type the function casts it to), and the sink is alive for the
    /// call (I3, sink): the caller holds or borrows a reference to the cell
    /// that keeps it (a waker's, or the slab's while it holds the task).
    pub(super) wake: unsafe fn(&Header),
    /// `Schedule::abort` of the sink.
    ///
    /// # Safety
    /// As for `wake`: the header is the one of a cell of this vtable (I5),
    /// and the sink is alive for the call (I3, sink). A join handle's bit
    /// alone does not keep it: the slab may let go of a COMPLETE task
    /// without giving its cell a counted reference to the sink.
    pub(super) abort: unsafe fn(&Header),
    /// Adds a counted reference to the sink (`Arc::increment_strong_count`).
    ///
    /// # Safety
    /// `sink` is the sink of a cell of this vtable (the header's `sink`:
    /// `Arc::as_ptr` of an `Arc` of the type the vtable was made for, I5),
    /// and a strong reference to that `Arc` is alive for the call (S2, sink
    /// outlives entries: the slab's own, while the slab holds the task).
    pub(super) retain_sink: unsafe fn(NonNull<()>),
    /// Gives up a counted reference to the sink.
    ///
    /// # Safety
    /// `sink` is the sink of a cell of this vtable (I5), and the caller
    /// gives up a counted reference that `retain_sink` took: the cell's
    /// `SINK_OWNED` one (I3, sink), once, when the cell is freed; the
    /// caller does not use the sink afterwards.
    pub(super) release_sink: unsafe fn(NonNull<()>),
    /// Where the stage starts in the cell: a join handle, which knows the
    /// output type but not the future's, reads the result there in place
    /// (no call, and no result written field by field into the caller's
    /// memory and read back whole: a store-forwarding stall per join).
    ///
    /// # Safety
    /// A plain number; using it is what needs care. Added to the header
    /// pointer of a cell of this vtable (I5), it gives the stage's address
    /// inside the cell's allocation; the cell must be alive while that
    /// address is used (I1), and reading or writing there needs the stage
    /// to the caller alone, on the executor's thread (I2, stage access),
    /// and the stage's tag ([`Header::stage`]) to say what it holds.
    pub(super) stage_offset: usize,
    /// The `TypeId` of the future's output: what debug builds compare with
    /// the type a join handle reads the result as
    /// (`RawTask::take_result`).
    ///
    /// # Safety
    /// None needed: a safe function that reads nothing of the cell.
    pub(super) output_type: fn() -> TypeId,
}

/// A cell's poll function.
///
/// # Safety
/// `ptr` is the header of a live cell (I1, liveness) of the vtable the
/// function belongs to (I5, cell type); the call runs on the executor's
/// thread, and no other operation on the stage runs during it (I2, stage
/// access: the poll harness holds the task's RUNNING bit, S1); the stage is
/// `Running`.
pub(super) type PollFn = unsafe fn(NonNull<Header>) -> PollCode;

/// The tags of [`Header::stage`]: what the stage's bytes hold.
pub(super) mod stage {
    /// The future (pinned: dropped in place, never moved).
    pub(in crate::task::raw) const RUNNING: u8 = 0;
    /// The future's output.
    pub(in crate::task::raw) const FINISHED: u8 = 1;
    /// Nothing: the future was dropped unpolled (`abort`); the join handle
    /// reads `JoinError::Cancelled`.
    pub(in crate::task::raw) const CANCELLED: u8 = 2;
    /// A boxed panic payload.
    pub(in crate::task::raw) const PANICKED: u8 = 3;
    /// Nothing: the result was read, or dropped.
    pub(in crate::task::raw) const CONSUMED: u8 = 4;
}

/// Adds a reference (a waker clone, an abort handle).
///
/// # Safety
/// `ptr` is the header of a live cell, kept alive for the call by a
/// reference the caller holds or borrows (I1, liveness: a waker's, the
/// slab's for the waker lent to a poll, the join handle's bit or an abort
/// handle's). The new reference is the caller's, to give up once with
/// [`release`].
pub(crate) unsafe fn retain(ptr: NonNull<Header>) {
    // SAFETY: I1 (liveness): the reference the caller holds or borrows
    // (this function's `# Safety`) keeps the header alive for this call.
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
/// The caller owns one counted reference to the live cell at `ptr` (I1,
/// liveness: a waker's, an abort handle's or the slab's), gives it up here
/// and does not use `ptr` afterwards. (If it is the last, the cell's stage
/// holds nothing by then, I4, so this may run on any thread.)
pub(crate) unsafe fn release(ptr: NonNull<Header>) {
    // SAFETY: I1 (liveness): the reference the caller owns (this function's
    // `# Safety`) keeps the header alive until the decrement below.
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
    // SAFETY: `free`'s `# Safety`: the count reached zero with the handle's
    // bit clear, so by I1 (liveness) that was the last reference, and the
    // Acquire load (or the fence) synchronised with every earlier release.
    unsafe { free(ptr) };
}

/// Frees the cell at `ptr`, and the counted sink reference it may own.
///
/// # Safety
/// `ptr` is the header of a cell (I5, cell type) whose last reference
/// (the count and the handle's bit, I1, liveness) the caller gave up,
/// synchronised with every earlier release; nobody uses `ptr` afterwards.
pub(super) unsafe fn free(ptr: NonNull<Header>) {
    // SAFETY: I1 (liveness): the caller gave up the last reference (this
    // function's `# Safety`), so the cell is still allocated and nobody
    // else reaches it.
    let header = unsafe { ptr.as_ref() };
    let owned_sink = (header.refs.load(Ordering::Relaxed) & SINK_OWNED != 0).then_some(header.sink);
    let vtable = header.vtable;
    let dealloc = vtable.dealloc;
    // SAFETY: the vtable's `dealloc` (its `# Safety`): the vtable is this
    // cell's (I5, cell type); the last reference is gone and synchronised
    // (I1, this function's `# Safety`); the stage holds nothing (I4,
    // foreign-thread free).
    unsafe { dealloc(ptr) };
    if let Some(sink) = owned_sink {
        // SAFETY: the vtable's `release_sink` (its `# Safety`): `SINK_OWNED`
        // says the cell owns the counted reference the slab took for it
        // (I3, sink; `OwnedTask::release_ref`), of this vtable's sink type
        // (I5); given up once, here, with the cell.
        unsafe { (vtable.release_sink)(sink) };
    }
}

/// Borrows the header behind a waker's data pointer.
///
/// # Safety
/// `ptr` is the address of a task header (the data pointer of a waker
/// built by `task::waker`, or `RawTask::header_addr`: I5, cell type), and
/// a reference that keeps the cell alive (I1, liveness: the waker's own,
/// or the slab's while a poll of the task runs, S1) lasts for `'a`.
pub(crate) unsafe fn header_ref<'a>(ptr: *const ()) -> &'a Header {
    // SAFETY: I1 (liveness): `ptr` is a header's address kept alive for
    // `'a` by the caller's reference (this function's `# Safety`).
    unsafe { &*(ptr as *const Header) }
}
