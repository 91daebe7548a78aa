//! The cell of one task: header, joiner's waker and stage (the future,
//! then its result) in one allocation; the functions of its vtable, made
//! per future type and sink type; and [`RawTask`], the non-owning pointer
//! through which the slab, the poll harness and the join handle reach it.

use std::alloc::Layout;
use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::header::{stage, Finish, Header, PollCode, PollFn, TaskVTable};
use crate::boundary::{self, Payload};
use crate::task::join_error::JoinError;
use crate::task::schedule::Schedule;
use crate::task::{cache, current};

/// The stage's bytes: the future, then how it ended, as the header's stage
/// tag says. `repr(C)`: every field at offset 0, so the output sits at the
/// stage's offset whatever the future's type. A panic payload is boxed once
/// more so that it takes one word (the stage of a small task is then 8
/// bytes).
#[repr(C)]
pub(super) union Stage<F: Future> {
    pub(super) future: ManuallyDrop<F>,
    output: ManuallyDrop<F::Output>,
    panic: ManuallyDrop<Box<Payload>>,
}

// Compile-time check: the cell of a task whose future and output are (about)
// empty is 64 bytes: the header, the joiner's waker and an 8-byte stage
// (room for a boxed panic payload);
// loom's atomics are larger.
#[cfg(not(tourbillon_loom))]
const _: () = assert!(std::mem::size_of::<Cell<std::future::Ready<()>>>() == 64);

/// `repr(C)` so that a pointer to the cell is a pointer to its header, and
/// the join waker sits at the same offset whatever `F` is ([`Prefix`]).
#[repr(C)]
pub(super) struct Cell<F: Future> {
    pub(super) header: Header,
    /// The waker of whoever awaits the task's join handle. Executor thread
    /// only (through the slab's [`OwnedTask`]); foreign threads never touch
    /// it.
    pub(super) join_waker: UnsafeCell<Option<Waker>>,
    pub(super) stage: UnsafeCell<Stage<F>>,
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
    pub(super) ptr: NonNull<Header>,
}

/// The joiner's waker slot of the cell at `ptr`.
pub(super) fn join_waker_ptr(ptr: NonNull<Header>) -> *mut Option<Waker> {
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
    /// mispredicted, a ping-pong round trip 20% slower. Tasks of one type lose nothing: both sites then see
    /// one target.
    ///
    /// # Safety
    /// On the executor thread; the cell is kept alive for the call; no other
    /// operation on the stage runs during the call (the slab's RUNNING bit);
    /// the stage is `Running`.
    #[inline(always)]
    pub(crate) unsafe fn poll(self, second_site: bool) -> PollCode {
        let poll = self.header().vtable().poll;
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
        unsafe { (self.header().vtable().cancel)(self.ptr) }
    }

    /// Drops the future without polling it and stores `payload` as the
    /// task's panic, which its join handle then reads. Returns the panic of
    /// the future's destructor, if it panicked (the caller's to report: the
    /// stage holds `payload` whatever the destructor did).
    ///
    /// # Safety
    /// As for [`RawTask::poll`]; the stage is `Running`.
    pub(crate) unsafe fn cancel_with(self, payload: Payload) -> Option<Payload> {
        // SAFETY: forwarded from this function's contract.
        let finish = unsafe { self.cancel() };
        let data = self.stage_ptr().cast::<Box<Payload>>();
        let destructor = if finish == Finish::Panicked {
            // SAFETY: `cancel` left a boxed payload in the stage (its tag
            // says `Panicked`), at offset 0 of the `repr(C)` stage union;
            // moved out once, and overwritten below.
            Some(*unsafe { data.read() })
        } else {
            None
        };
        // SAFETY: the stage holds nothing live (`Cancelled`, or the payload
        // just moved out); the union's `panic` field is at its offset 0,
        // which is aligned for it; exclusive access (contract).
        unsafe { data.write(Box::new(payload)) };
        self.header().set_stage(stage::PANICKED);
        destructor
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
            (header.vtable().output_type)(),
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
                Some(Err(JoinError::cancelled(header.task_id)))
            }
            stage::PANICKED => {
                header.set_stage(stage::CONSUMED);
                // SAFETY: the stage holds a boxed payload (its tag), moved
                // out once (now `Consumed`).
                let payload = unsafe { data.cast::<Box<Payload>>().read() };
                Some(Err(JoinError::panic(header.task_id, *payload)))
            }
            stage::CONSUMED => Some(Err(JoinError::cancelled(header.task_id))),
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
                .add(self.header().vtable().stage_offset)
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
        unsafe { (self.header().vtable().drop_stage)(self.ptr) }
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

/// The vtable of the cells of futures of type `F` whose sink is an `S` (a
/// constant: one static table per pair).
struct VTableOf<F, S>(std::marker::PhantomData<(F, S)>);

impl<F, S> VTableOf<F, S>
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    const VTABLE: TaskVTable = TaskVTable {
        poll: poll::<F>,
        cancel: cancel::<F>,
        drop_stage: drop_stage::<F>,
        dealloc: dealloc::<F>,
        wake: wake::<S>,
        abort: abort::<S>,
        retain_sink: retain_sink::<S>,
        release_sink: release_sink::<S>,
        stage_offset: std::mem::offset_of!(Cell<F>, stage),
        output_type: TypeId::of::<F::Output>,
    };
}

/// The vtable of the cells of futures of type `F` whose sink is an `S`.
pub(super) fn vtable<F, S>() -> &'static TaskVTable
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    &VTableOf::<F, S>::VTABLE
}

/// The sink of the cell whose header is `header`.
///
/// # Safety
/// The header's sink is an `S` (its vtable was made for `S`), alive: the
/// slab's `Arc` keeps it while the slab holds the task, the cell's counted
/// reference after (`SINK_OWNED`), and whoever calls this holds or borrows
/// a reference to the cell.
unsafe fn sink_of<S: Schedule>(header: &Header) -> &S {
    // SAFETY: per the contract.
    unsafe { header.sink.cast::<S>().as_ref() }
}

unsafe fn wake<S: Schedule>(header: &Header) {
    // SAFETY: called through the vtable made for `S` (`Header::wake`).
    unsafe { sink_of::<S>(header) }.wake(header)
}

unsafe fn abort<S: Schedule>(header: &Header) {
    // SAFETY: called through the vtable made for `S` (`Header::abort`).
    unsafe { sink_of::<S>(header) }.abort(header)
}

unsafe fn retain_sink<S: Schedule>(sink: NonNull<()>) {
    // SAFETY: the sink came from `Arc::<S>::as_ptr` and its `Arc` is alive
    // (`OwnedTask::new`'s contract: the slab holds it).
    unsafe { Arc::increment_strong_count(sink.cast::<S>().as_ptr() as *const S) }
}

unsafe fn release_sink<S: Schedule>(sink: NonNull<()>) {
    // SAFETY: gives up the counted reference `retain_sink` took, once (the
    // cell's `SINK_OWNED` reference, in `header::free`).
    unsafe { Arc::decrement_strong_count(sink.cast::<S>().as_ptr() as *const S) }
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
/// `task::id()` gives the task's id in the destructor: inside the task's
/// poll (its end, [`store_output`] and [`store_poll_panic`]) from the poll
/// marker, elsewhere ([`cancel`], [`drop_stage`]) from the marker of
/// [`current::dropping`].
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
    let waker = ManuallyDrop::new(crate::task::waker::task_waker_unowned(ptr));
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
/// [`poll`] saves no registers (in the headline workload's yields, saving
/// them costs 11 instructions per poll; callgrind).
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
    let _id = current::dropping(unsafe { ptr.as_ref() }.task_id);
    // SAFETY: as above.
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
    let header = unsafe { ptr.as_ref() };
    if header.stage() == stage::CONSUMED {
        return None;
    }
    let _id = current::dropping(header.task_id);
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
