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
    // SAFETY: I5 (cell type): every `Cell<F>` starts with the fields of
    // `Prefix` (both `repr(C)`), so the slot is found without `F`; the
    // callers hold the cell alive (I1, liveness: the slab's `OwnedTask` or
    // the join handle's bit). Only the place is computed here: reading and
    // writing it is the callers', under I6 (joiner's waker).
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
    /// On the executor's thread; the cell is alive for the call (I1,
    /// liveness: the slab's reference, which the task's RUNNING bit keeps,
    /// S1); no other operation on the stage runs during the call (I2, stage
    /// access: the caller holds RUNNING, S1); the stage is `Running`.
    #[inline(always)]
    pub(crate) unsafe fn poll(self, second_site: bool) -> PollCode {
        let poll = self.header().vtable().poll;
        if second_site {
            // SAFETY: `poll_at_second_site`'s `# Safety`: `poll` is this
            // cell's vtable `poll` (I5, cell type), called under this
            // function's guarantees (I1, I2 under S1, stage `Running`).
            unsafe { poll_at_second_site(poll, self.ptr) }
        } else {
            // SAFETY: `PollFn`'s `# Safety`: this cell's vtable `poll` (I5,
            // cell type), called under this function's guarantees (I1, I2
            // under S1, stage `Running`).
            unsafe { poll(self.ptr) }
        }
    }

    /// Drops the future without polling it and stores `JoinError::Cancelled`
    /// (or the panic of the future's destructor).
    ///
    /// # Safety
    /// On the executor's thread, the cell alive for the call (I1,
    /// liveness), the stage to the caller alone for the call (I2, stage
    /// access: the poll harness holding RUNNING, or the slab, for a task
    /// that is not RUNNING, S1); the stage is `Running`.
    pub(crate) unsafe fn cancel(self) -> Finish {
        // SAFETY: the vtable's `cancel` (its `# Safety`): this cell's own
        // (I5, cell type), called under this function's guarantees (I1, I2
        // under S1, stage `Running`).
        unsafe { (self.header().vtable().cancel)(self.ptr) }
    }

    /// Drops the future without polling it and stores `payload` as the
    /// task's panic, which its join handle then reads. Returns the panic of
    /// the future's destructor, if it panicked (the caller's to report: the
    /// stage holds `payload` whatever the destructor did).
    ///
    /// # Safety
    /// As for [`RawTask::poll`]: on the executor's thread, the cell alive
    /// for the call (I1, liveness), the stage to the caller alone for the
    /// call (I2, stage access: the caller holds RUNNING, S1); the stage is
    /// `Running`.
    pub(crate) unsafe fn cancel_with(self, payload: Payload) -> Option<Payload> {
        // SAFETY: `RawTask::cancel`'s `# Safety` is this function's (I1, I2
        // under S1, stage `Running`).
        let finish = unsafe { self.cancel() };
        let data = self.stage_ptr().cast::<Box<Payload>>();
        let destructor = if finish == Finish::Panicked {
            // SAFETY: I2 (stage access): the stage is ours alone (this
            // function's `# Safety`), and `cancel` left a boxed payload in
            // it (its tag says `Panicked`), at offset 0 of the `repr(C)`
            // stage union (I5, cell type); moved out once, and overwritten
            // below.
            Some(*unsafe { data.read() })
        } else {
            None
        };
        // SAFETY: I2 (stage access): the stage is ours alone (this
        // function's `# Safety`) and holds nothing live (`Cancelled`, or the
        // payload just moved out); the union's `panic` field is at its
        // offset 0, which is aligned for it (I5, cell type).
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
    /// On the executor's thread, the cell alive for the call (I1,
    /// liveness), no other stage operation in progress (I2, stage access:
    /// the task is COMPLETE and not RUNNING, S1), the stage finished
    /// (`Finished`, `Cancelled` or `Panicked`), and `T` the task's output
    /// type (S3, output proof: the caller holds the task's `OutputId<T>`,
    /// or its `JoinCell<T>`, which `TaskSlab::insert_joined` makes with the
    /// future's output type; debug builds check it).
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
                // SAFETY: I2 (stage access): the stage is ours alone (this
                // function's `# Safety`) and holds the output (its tag), a
                // `T` (S3, output proof), at offset 0 of the `repr(C)` stage
                // union (I5, cell type), which is aligned for it; it is moved
                // out once (now `Consumed`).
                Some(Ok(unsafe { data.cast::<T>().read() }))
            }
            stage::CANCELLED => {
                header.set_stage(stage::CONSUMED);
                Some(Err(JoinError::cancelled(header.task_id)))
            }
            stage::PANICKED => {
                header.set_stage(stage::CONSUMED);
                // SAFETY: I2 (stage access): the stage is ours alone and
                // holds a boxed payload (its tag) at offset 0 of the stage
                // union (I5, cell type), moved out once (now `Consumed`).
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
        // SAFETY: the vtable's `stage_offset` (its `# Safety`): I5 (cell
        // type): it is the offset of the stage in the `Cell<F>` this vtable
        // belongs to, so the sum stays inside the cell's allocation; the
        // callers (the `unsafe` methods above) hold the cell alive (I1,
        // liveness) and have the stage to themselves (I2).
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
    /// On the executor's thread, the cell alive for the call (I1,
    /// liveness), no other stage operation in progress (I2, stage access:
    /// the slab, holding RUNNING or for a task that is not RUNNING, S1; or
    /// the join handle, for a COMPLETE task that is not RUNNING).
    pub(crate) unsafe fn drop_stage(self) -> Option<Payload> {
        // SAFETY: the vtable's `drop_stage` (its `# Safety`): this cell's
        // own (I5, cell type), called under this function's guarantees (I1,
        // I2).
        unsafe { (self.header().vtable().drop_stage)(self.ptr) }
    }

    /// Moves a panic payload out of a `Panicked` stage, leaving a
    /// placeholder payload for the join handle.
    ///
    /// # Safety
    /// On the executor's thread, the cell alive for the call (I1,
    /// liveness), no other stage operation in progress (I2, stage access:
    /// the caller holds RUNNING, S1).
    pub(crate) unsafe fn take_panic(self) -> Option<Box<dyn Any + Send>> {
        if self.header().stage() != stage::PANICKED {
            return None;
        }
        // SAFETY: I2 (stage access): the stage is ours alone (this
        // function's `# Safety`) and holds a boxed payload (its tag) at
        // offset 0 of the stage union (I5, cell type); the borrow ends
        // before any user code runs (the payloads are only moved).
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
    /// On the executor's thread (I6, joiner's waker: the only one that
    /// touches the joiner's waker), the cell alive for the call (I1,
    /// liveness).
    pub(crate) unsafe fn take_join_waker(self) -> Option<Waker> {
        // SAFETY: I1 (liveness): the cell is alive (this function's
        // `# Safety`); I5 (cell type): every `Cell<F>` starts with the fields
        // of `Prefix` (both `repr(C)`); I6 (joiner's waker): executor thread,
        // and `take` runs no user code while the slot is borrowed.
        unsafe { (*(*self.ptr.cast::<Prefix>().as_ptr()).join_waker.get()).take() }
    }

    fn header(&self) -> &Header {
        // SAFETY: I1 (liveness): every caller of `RawTask`'s `unsafe` methods,
        // the only users of this one, keeps the cell alive for the call (their
        // `# Safety`); the header is immutable apart from its atomics.
        unsafe { self.ptr.as_ref() }
    }

    /// The header, for a caller that keeps the cell alive otherwise (the
    /// poll harness between its two slab borrows: RUNNING keeps the entry).
    ///
    /// # Safety
    /// The cell stays alive for `'a` (I1, liveness: e.g. the slab's
    /// reference, which the task's RUNNING bit keeps, S1).
    #[inline]
    pub(crate) unsafe fn header_unbound<'a>(self) -> &'a Header {
        // SAFETY: I1 (liveness): the caller keeps the cell alive for `'a`
        // (this function's `# Safety`).
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
/// The header's sink is an `S` (I5, cell type: its vtable was made for
/// `S`), alive for `'_` (I3, sink: the slab's `Arc` keeps it while the slab
/// holds the task, the cell's counted reference after, `SINK_OWNED`), and
/// whoever calls this holds or borrows a reference to the cell (I1).
unsafe fn sink_of<S: Schedule>(header: &Header) -> &S {
    // SAFETY: I5 (cell type) and I3 (sink), as this function's `# Safety`
    // states: the pointer is to a live `S`.
    unsafe { header.sink.cast::<S>().as_ref() }
}

/// The vtable's `wake` for a sink of type `S`.
///
/// # Safety
/// The vtable's `wake` field's: `header` is the header of a cell whose
/// vtable was made for `S` (I5, cell type), and its sink is alive for the
/// call (I3, sink).
unsafe fn wake<S: Schedule>(header: &Header) {
    // SAFETY: `sink_of`'s `# Safety` is this function's (I5: the sink is an
    // `S`; I3: alive; the header is borrowed, so its cell is alive, I1).
    unsafe { sink_of::<S>(header) }.wake(header)
}

/// The vtable's `abort` for a sink of type `S`.
///
/// # Safety
/// The vtable's `abort` field's: `header` is the header of a cell whose
/// vtable was made for `S` (I5, cell type), and its sink is alive for the
/// call (I3, sink).
unsafe fn abort<S: Schedule>(header: &Header) {
    // SAFETY: `sink_of`'s `# Safety` is this function's (I5: the sink is an
    // `S`; I3: alive; the header is borrowed, so its cell is alive, I1).
    unsafe { sink_of::<S>(header) }.abort(header)
}

/// The vtable's `retain_sink` for a sink of type `S`.
///
/// # Safety
/// The vtable's `retain_sink` field's: `sink` is `Arc::<S>::as_ptr` of an
/// `Arc` (I5, cell type) of which a strong reference is alive for the call
/// (S2, sink outlives entries).
unsafe fn retain_sink<S: Schedule>(sink: NonNull<()>) {
    // SAFETY: `Arc::increment_strong_count`'s conditions: the pointer came
    // from `Arc::<S>::as_ptr` (I5) and its `Arc` is alive (S2: the slab
    // holds it while it drops its entries; this function's `# Safety`).
    unsafe { Arc::increment_strong_count(sink.cast::<S>().as_ptr() as *const S) }
}

/// The vtable's `release_sink` for a sink of type `S`.
///
/// # Safety
/// The vtable's `release_sink` field's: `sink` is `Arc::<S>::as_ptr` of an
/// `Arc` (I5, cell type), and the caller gives up, once, the counted
/// reference `retain_sink` took (the cell's `SINK_OWNED` one, I3, sink).
unsafe fn release_sink<S: Schedule>(sink: NonNull<()>) {
    // SAFETY: `Arc::decrement_strong_count`'s conditions: the pointer came
    // from `Arc::<S>::as_ptr` (I5), and the strong reference given up is the
    // one `retain_sink` took for the cell (I3, sink: `SINK_OWNED`), given up
    // once, by `header::free` (this function's `# Safety`).
    unsafe { Arc::decrement_strong_count(sink.cast::<S>().as_ptr() as *const S) }
}

/// The stage of the cell at `ptr`.
///
/// # Safety
/// The cell is a live `Cell<F>` (I1, liveness; I5, cell type), and the
/// caller has the stage to itself for the returned pointer's use (I2, stage
/// access: on the executor's thread, the slab holding RUNNING or for a task
/// that is not RUNNING, S1, or the join handle of a COMPLETE task).
unsafe fn stage_of<F: Future>(ptr: NonNull<Header>) -> *mut Stage<F> {
    // SAFETY: I5 (cell type): `Cell<F>` is `repr(C)` with the header first,
    // and the header pointer came from a `Cell<F>` allocation of this
    // vtable's `F`; the cell is alive (I1; this function's `# Safety`).
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
/// The cell at `ptr` is a live `Cell<F>` (I1, liveness; I5, cell type)
/// whose stage is the caller's alone for the call (I2, stage access: on the
/// executor's thread, the slab holding RUNNING or for a task that is not
/// RUNNING, S1, or the join handle of a COMPLETE task).
unsafe fn drop_stage_catching<F: Future>(ptr: NonNull<Header>) -> Result<(), Payload> {
    // SAFETY: I1 (liveness): the cell is alive (this function's `# Safety`).
    let header = unsafe { ptr.as_ref() };
    // SAFETY: `stage_of`'s `# Safety` is this function's (I1, I5, I2).
    let data = unsafe { stage_of::<F>(ptr) };
    let tag = header.stage();
    // `Consumed` before the destructor runs: if it panics, unwinding drops
    // the rest of the value, and nothing drops it again.
    header.set_stage(stage::CONSUMED);
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: I2 (stage access): the stage is ours alone for the call,
        // and the tag says which field holds a live value; it is dropped
        // once, in place (the tag is `Consumed` already).
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
/// As for [`drop_stage_catching`]: a live `Cell<F>` at `ptr` (I1, I5),
/// whose stage is the caller's alone for the call (I2, stage access); the
/// stage is `Consumed`.
unsafe fn store_panic<F: Future>(ptr: NonNull<Header>, payload: Payload) {
    // SAFETY: `stage_of`'s `# Safety` is this function's (I1, I5, I2); the
    // stage holds nothing (`Consumed`), so writing a field overwrites
    // nothing live; the header is alive (I1).
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
/// `poll` is the vtable's `poll` of the cell at `ptr` (I5, cell type),
/// under the guarantees of [`RawTask::poll`]: executor thread, the cell
/// alive (I1), the stage the caller's alone (I2: RUNNING held, S1) and
/// `Running`.
#[inline(never)]
unsafe fn poll_at_second_site(poll: PollFn, ptr: NonNull<Header>) -> PollCode {
    // SAFETY: `PollFn`'s `# Safety`: `poll` is this cell's (I5), called
    // under this function's guarantees (I1, I2 under S1, stage `Running`).
    unsafe { poll(ptr) }
}

/// The vtable's `poll` for a future of type `F`.
///
/// # Safety
/// [`PollFn`]'s: `ptr` is the header of a live `Cell<F>` (I1, liveness; I5,
/// cell type), on the executor's thread, with the stage the caller's alone
/// for the call (I2, stage access: RUNNING held, S1); the stage is
/// `Running`.
unsafe fn poll<F: Future>(ptr: NonNull<Header>) -> PollCode {
    // SAFETY: I1 (liveness): the cell is alive; `stage_of`'s `# Safety` is
    // this function's (I1, I5, I2).
    let (header, data) = unsafe { (ptr.as_ref(), stage_of::<F>(ptr)) };
    if header.stage() != stage::RUNNING {
        debug_assert!(false, "polled a task whose future is gone");
        return PollCode::OUTPUT;
    }
    // The task's waker, lent to this poll: built from the header pointer
    // and the static vtable (two words, no allocation, no reference-count
    // change); it owns no reference, so it is never dropped.
    let waker = ManuallyDrop::new(crate::task::waker::task_waker_unowned(ptr));
    // SAFETY: I2 (stage access): the stage holds the future (tag
    // `RUNNING`), ours alone for the call. It lives in the heap cell and is
    // never moved: it is dropped in place by `drop_stage_catching` before
    // the cell is freed (I4), so pinning it is sound.
    let future = unsafe { Pin::new_unchecked(&mut *(*data).future) };
    let mut cx = Context::from_waker(&waker);
    match catch_unwind(AssertUnwindSafe(|| future.poll(&mut cx))) {
        Ok(Poll::Pending) => PollCode::PENDING,
        // SAFETY: `store_output`'s `# Safety`: a live `Cell<F>` (I1, I5)
        // whose stage is ours alone (I2, this function's `# Safety`) and
        // holds the future, which returned `Ready`; executor thread.
        Ok(Poll::Ready(output)) => unsafe { store_output::<F>(ptr, output) },
        // SAFETY: `store_poll_panic`'s `# Safety`: a live `Cell<F>` (I1, I5)
        // whose stage is ours alone (I2, this function's `# Safety`) and
        // holds the future, which panicked; executor thread.
        Err(payload) => unsafe { store_poll_panic::<F>(ptr, payload) },
    }
}

/// The end of a poll that returned `Ready`: drops the future in place and
/// stores its output. Out of line, so that the pending path of
/// [`poll`] saves no registers (in the headline workload's yields, saving
/// them costs 11 instructions per poll; callgrind).
///
/// # Safety
/// A live `Cell<F>` at `ptr` (I1, liveness; I5, cell type) whose stage
/// holds the future, which returned `Ready`; the stage the caller's alone
/// (I2, stage access: RUNNING held, S1); executor thread.
#[inline(never)]
unsafe fn store_output<F: Future>(ptr: NonNull<Header>, output: F::Output) -> PollCode {
    // SAFETY: `drop_stage_catching`'s `# Safety` is this function's (I1,
    // I5, I2); the future is dropped in place before the result is written.
    match unsafe { drop_stage_catching::<F>(ptr) } {
        Ok(()) => {
            // SAFETY: `stage_of`'s `# Safety` is this function's (I1, I5,
            // I2); the stage is `Consumed` (nothing live to overwrite).
            unsafe { (*stage_of::<F>(ptr)).output = ManuallyDrop::new(output) };
            // SAFETY: I1 (liveness): the cell is alive (this function's
            // `# Safety`).
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
            // SAFETY: `store_panic`'s `# Safety`: a live `Cell<F>` whose
            // stage is ours alone (I1, I5, I2: this function's `# Safety`),
            // `Consumed` since `drop_stage_catching` returned.
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
/// A live `Cell<F>` at `ptr` (I1, liveness; I5, cell type) whose stage
/// holds the future, which panicked; the stage the caller's alone (I2,
/// stage access: RUNNING held, S1); executor thread.
#[cold]
#[inline(never)]
unsafe fn store_poll_panic<F: Future>(ptr: NonNull<Header>, payload: Payload) -> PollCode {
    // SAFETY: `drop_stage_catching`'s `# Safety` is this function's (I1,
    // I5, I2).
    if let Err(second) = unsafe { drop_stage_catching::<F>(ptr) } {
        boundary::drop_payload(second);
    }
    // SAFETY: `store_panic`'s `# Safety`: a live `Cell<F>` whose stage is
    // ours alone (I1, I5, I2: this function's `# Safety`), `Consumed` since
    // `drop_stage_catching` returned.
    unsafe { store_panic::<F>(ptr, payload) };
    PollCode::PANICKED
}

/// The vtable's `cancel` for a future of type `F`.
///
/// # Safety
/// The vtable's `cancel` field's: `ptr` is the header of a live `Cell<F>`
/// (I1, liveness; I5, cell type), on the executor's thread, with the stage
/// the caller's alone for the call (I2, stage access: the poll harness
/// holding RUNNING, or the slab, for a task that is not RUNNING, S1); the
/// stage is `Running`.
unsafe fn cancel<F: Future>(ptr: NonNull<Header>) -> Finish {
    // SAFETY: I1 (liveness): the cell is alive (this function's
    // `# Safety`).
    let _id = current::dropping(unsafe { ptr.as_ref() }.task_id);
    // SAFETY: `drop_stage_catching`'s `# Safety` is this function's (I1,
    // I5, I2).
    match unsafe { drop_stage_catching::<F>(ptr) } {
        Ok(()) => {
            // SAFETY: I1 (liveness): the cell is alive (this function's
            // `# Safety`).
            unsafe { ptr.as_ref() }.set_stage(stage::CANCELLED);
            Finish::Output
        }
        Err(payload) => {
            // SAFETY: `store_panic`'s `# Safety`: a live `Cell<F>` whose
            // stage is ours alone (I1, I5, I2: this function's `# Safety`),
            // `Consumed` since `drop_stage_catching` returned.
            unsafe { store_panic::<F>(ptr, payload) };
            Finish::Panicked
        }
    }
}

/// The vtable's `drop_stage` for a future of type `F`.
///
/// # Safety
/// The vtable's `drop_stage` field's: `ptr` is the header of a live
/// `Cell<F>` (I1, liveness; I5, cell type), on the executor's thread, with
/// the stage the caller's alone for the call (I2, stage access: the slab,
/// holding RUNNING or for a task that is not RUNNING, S1; or the join
/// handle, for a COMPLETE task that is not RUNNING).
unsafe fn drop_stage<F: Future>(ptr: NonNull<Header>) -> Option<Payload> {
    // SAFETY: I1 (liveness): the cell is alive (this function's
    // `# Safety`).
    let header = unsafe { ptr.as_ref() };
    if header.stage() == stage::CONSUMED {
        return None;
    }
    let _id = current::dropping(header.task_id);
    // SAFETY: `drop_stage_catching`'s `# Safety` is this function's (I1,
    // I5, I2).
    unsafe { drop_stage_catching::<F>(ptr) }.err()
}

/// The vtable's `dealloc` for a future of type `F`.
///
/// # Safety
/// The vtable's `dealloc` field's: `ptr` is the header of a `Cell<F>` (I5,
/// cell type) whose last reference the caller gave up, synchronised with
/// every earlier release (I1, liveness); its stage holds nothing (I4,
/// foreign-thread free); nobody uses `ptr` afterwards.
unsafe fn dealloc<F: Future>(ptr: NonNull<Header>) {
    let cell = ptr.cast::<Cell<F>>();
    // SAFETY: I1 (liveness): the last reference is gone (this function's
    // `# Safety`), so we own the `Cell<F>` that `OwnedTask::new` wrote (I5,
    // cell type). I4 (foreign-thread free): its stage holds nothing
    // (`Consumed` or `Cancelled`: the slab or the join handle empties it
    // before letting go), and a stage union has no destructor anyway, so
    // dropping the cell drops no future or output here, whatever thread
    // this is; it drops the joiner's waker if one is left (a `Waker` is
    // `Send`). The counted sink reference, if the cell owns one, is given
    // up by `header::free` (I3, sink).
    unsafe {
        debug_assert!(matches!(
            ptr.as_ref().stage(),
            stage::CONSUMED | stage::CANCELLED
        ));
        ptr::drop_in_place(cell.as_ptr())
    };
    // SAFETY: `cache::release`'s `# Safety`: the memory came from
    // `cache::allocate` with this layout (I5, cell type), its contents were
    // just dropped, and nothing refers to it any more (I1: the last
    // reference is gone).
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
