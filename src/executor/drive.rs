#![forbid(unsafe_code)]
//! Driving the executor: standalone on the current thread (`block_on`,
//! which parks the thread when idle), or nested in a host runtime
//! (`run_until`, a future the host polls, returning to it every turn).
//!
//! Each driver registers its host waker with the inbox ([`HostGuard`]):
//! `block_on` its unparker for its duration, a `run_until` future the
//! waker of its latest poll from its first poll until it completes or is
//! dropped. Several `run_until` futures of one executor may be pending in
//! one host at once; the inbox wakes them all, and one that ends passes on
//! the work it leaves ([`HostGuard::end`]).
//!
//! It owns the drivers' loops, parking and host registration; what a turn
//! does is the run loop's (`Core::run_turn`).

use std::any::Any;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use pin_project_lite::pin_project;

use super::context;
use super::core::Core;
use super::run_loop::Turn;
use super::run_state::bump;
use crate::boundary::drop_payload;
use crate::remote::inbox::HostToken;
use crate::remote::op::Remote;
use crate::task::current::{self, SavedMarker};
use crate::task::join_error::{no_reactor_explanation, Panicker};

/// Marks the core as driven for the guard's life, and clears the
/// current-task marker of an enclosing poll (a task of another executor
/// that calls the driver), so that the driver's main future is polled
/// outside any task (`task::try_id` is `None` in it); restores both when
/// dropped, also on unwind.
struct DriveGuard<'a> {
    core: &'a Core,
    _enter: context::EnterGuard,
    _marker: SavedMarker,
}

impl<'a> DriveGuard<'a> {
    fn new(core: &'a Rc<Core>, nested: bool, entry: &'static str) -> Self {
        assert!(
            !core.driving.get(),
            "tourbillon: {entry} called while this executor is already running \
             (from inside one of its tasks?); a task must .await instead of blocking its own executor"
        );
        let enter = context::enter(core);
        core.driving.set(true);
        core.nested.set(nested);
        DriveGuard {
            core,
            _enter: enter,
            _marker: current::save_marker(),
        }
    }
}

impl Drop for DriveGuard<'_> {
    fn drop(&mut self) {
        self.core.driving.set(false);
        // A panic out of a scheduler may have left a run open.
        self.core.run.current.queue.set(None);
        self.core.observer.turn_ended();
    }
}

/// A driver's registration of its host waker with the inbox: made by the
/// driver's first [`set`](Self::set), ended by [`end`](Self::end) or on
/// drop (also when the driver unwinds).
pub(crate) struct HostGuard<'a> {
    core: &'a Core,
    token: Option<HostToken>,
    /// The identity (data and vtable addresses, what `Waker::will_wake`
    /// compares) of the waker registered under `token`: a host that polls
    /// with the same waker again (tokio's `block_on`, a task's waker) is
    /// recognised without the inbox's lock. Not a clone: the registration
    /// alone owns the host's waker (the executor drops it at the latest
    /// when it shuts down, even if this driver is leaked); the inbox keeps
    /// it alive while it is registered, so its addresses are not reused.
    registered: Option<(usize, usize)>,
}

impl<'a> HostGuard<'a> {
    fn new(core: &'a Core) -> Self {
        HostGuard {
            core,
            token: None,
            registered: None,
        }
    }

    /// Registers `waker` (or updates the registration): called before the
    /// driver checks for work, so that a wake after the check reaches it.
    #[inline]
    fn set(&mut self, waker: &Waker) {
        let identity = (
            waker.data() as usize,
            std::ptr::from_ref(waker.vtable()) as usize,
        );
        if self.token.is_some() && self.registered == Some(identity) {
            return;
        }
        self.core.intake.inbox.set_host(&mut self.token, waker);
        self.registered = Some(identity);
    }

    /// The driver ended: deregisters its host waker and, if the executor
    /// still has work, wakes the hosts that remain (other pending
    /// `run_until` futures). Some work reached this driver alone: its own
    /// wake after a busy turn, and the queues that became runnable while it
    /// polled its future (no host is woken for work that appears while the
    /// executor is driven).
    fn end(&mut self) {
        if let Some(token) = self.token.take() {
            self.registered = None;
            context::clear_waiting(self.core);
            self.core.intake.inbox.remove_host(token);
            if has_work(self.core) {
                // Behind the panic boundary: this also runs while unwinding.
                self.core.wake_hosts();
            }
        }
    }
}

impl Drop for HostGuard<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

/// Whether a driver would find something to do: runnable or activated
/// queues, aborts, foreign wakes, deferred yields. A `RefCell` borrowed
/// elsewhere (a driver dropped from inside a task's destructor) counts as
/// work: the cost of a wrong guess is one spurious host poll.
fn has_work(core: &Core) -> bool {
    core.attention.get()
        || core.intake.inbox.has_pending()
        || core
            .queues
            .try_borrow()
            .map_or(true, |qs| qs.eevdf.runnable_count() > 0)
        || core.deferred.try_borrow().map_or(true, |d| !d.is_empty())
        || core
            .deferred_wakers
            .try_borrow()
            .map_or(true, |w| !w.is_empty())
}

/// Wakes the `block_on` thread for executor work (foreign wakes).
struct Unparker(Thread);

impl Wake for Unparker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// The waker of `block_on`'s main future: flags it, then unparks.
struct MainWaker {
    woken: AtomicBool,
    thread: Thread,
}

impl Wake for MainWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

pub(crate) fn block_on<F: Future>(core: &Rc<Core>, future: F) -> F::Output {
    let _guard = DriveGuard::new(core, false, "block_on");
    let main = Arc::new(MainWaker {
        woken: AtomicBool::new(true),
        thread: thread::current(),
    });
    let main_waker = Waker::from(main.clone());
    let unparker = Waker::from(Arc::new(Unparker(thread::current())));
    // Dropped before `_guard` (declared after it): `end` may wake other
    // hosts, which their runtime polls once `block_on` has returned.
    let mut host = HostGuard::new(core);
    host.set(&unparker);
    let mut future = pin!(future);
    let mut cx = Context::from_waker(&main_waker);
    // The previous turn was busy and nothing ran since ([`Core::run_turn`]).
    let mut follows = false;
    loop {
        // Loaded before the swap: a turn that ends with the main future not
        // woken (a busy executor's usual case) pays no atomic
        // read-modify-write.
        if main.woken.load(Ordering::Acquire) && main.woken.swap(false, Ordering::AcqRel) {
            follows = false;
            if let Poll::Ready(out) = poll_main(core, future.as_mut(), &mut cx) {
                return out;
            }
        }
        let turn = core.run_turn(follows);
        follows = turn == Turn::Busy;
        if turn == Turn::Idle {
            wake_if_drained(core);
        }
        if turn == Turn::Idle
            && !core.attention.get()
            && !spin_for_wake(&main.woken, &core.intake.inbox)
        {
            // Nothing runnable: sleep until a wake (0% CPU). A wake that
            // raced with the checks above left an unpark token, so `park`
            // returns at once.
            bump(&core.run.counters.parks);
            thread::park();
        }
    }
}

/// Polls a driver's main future. A panic of it resumes out of the driver
/// unchanged, except tokio's "no reactor" panic (a tokio timer or socket
/// with no tokio runtime entered), which panics again with a `String` that
/// says to nest the executor in a tokio runtime (the explanation a task's
/// `JoinError` gives), so that the panic hook prints it too.
#[inline(always)]
fn poll_main<F: Future>(core: &Core, future: Pin<&mut F>, cx: &mut Context<'_>) -> Poll<F::Output> {
    // The tasks it spawns or wakes are stamped with one clock reading.
    core.observer.main_poll();
    let poll = panic::catch_unwind(AssertUnwindSafe(|| future.poll(cx)));
    core.observer.turn_ended();
    match poll {
        Ok(poll) => poll,
        Err(payload) => explain_main_panic(payload),
    }
}

#[cold]
#[inline(never)]
fn explain_main_panic(payload: Box<dyn Any + Send>) -> ! {
    match no_reactor_explanation(payload.as_ref(), Panicker::MainFuture) {
        Some(explained) => {
            drop_payload(payload);
            panic::panic_any(explained)
        }
        None => panic::resume_unwind(payload),
    }
}

/// Spins of the idle executor before it parks (each a `spin_loop` hint and
/// two atomic loads; a few microseconds in all). A wake from another thread
/// that arrives within them is taken without the futex round trip of
/// `park`/`unpark`; the spin is bounded, so an idle executor still sleeps at
/// 0% CPU.
const PARK_SPINS: u32 = 200;

/// The bounded spin before parking: `true` as soon as the main future was
/// woken or a foreign wake is pending.
fn spin_for_wake(main_woken: &AtomicBool, remote: &Remote) -> bool {
    for _ in 0..PARK_SPINS {
        if main_woken.load(Ordering::Acquire) || remote.has_pending() {
            return true;
        }
        std::hint::spin_loop();
    }
    main_woken.load(Ordering::Acquire) || remote.has_pending()
}

/// Runs turns until no task is runnable; returns the number of polls.
pub(crate) fn run_until_stalled(core: &Rc<Core>) -> u64 {
    let _guard = DriveGuard::new(core, false, "run_until_stalled");
    let before = core.run.counters.polls.get();
    let mut follows = false;
    while core.run_turn(follows) == Turn::Busy {
        follows = true;
    }
    core.run.counters.polls.get() - before
}

pin_project! {
    /// Future returned by [`Executor::run_until`](crate::Executor::run_until):
    /// drives the executor's tasks from inside a host runtime until the
    /// wrapped future completes.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct RunUntil<'a, F> {
        core: &'a Rc<Core>,
        #[pin]
        future: F,
        // After `future`, so dropped after it: the registration ends once
        // the future is gone, and `HostGuard::end` sees the work its drop
        // left (tasks it woke or spawned) for the other hosts.
        host: HostGuard<'a>,
    }
}

impl<'a, F> RunUntil<'a, F> {
    pub(crate) fn new(core: &'a Rc<Core>, future: F) -> Self {
        RunUntil {
            core,
            future,
            host: HostGuard::new(core),
        }
    }
}

impl<F: Future> Future for RunUntil<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let core: &Rc<Core> = this.core;
        let _guard = DriveGuard::new(core, true, "run_until");
        this.host.set(cx.waker());
        // The unit of tokio's budget that the turn's task polls start from
        // (`crate::coop`), taken before the future spends any.
        #[cfg(feature = "tokio")]
        let start = crate::coop::HostStart::take();
        if let Poll::Ready(out) = poll_main(core, this.future, cx) {
            this.host.end();
            return Poll::Ready(out);
        }
        // After the host's turn: the clock is read afresh.
        #[cfg(feature = "tokio")]
        let turn = crate::coop::in_turn(&core.task_budget, start, || core.run_turn(false));
        #[cfg(not(feature = "tokio"))]
        let turn = core.run_turn(false);
        if turn == Turn::Busy || core.intake.inbox.has_pending() || core.attention.get() {
            // More to do after the host's turn (its I/O and timers).
            cx.waker().wake_by_ref();
        } else {
            wake_if_drained(core);
        }
        // The host's reactor, in its turn on this thread, then wakes the
        // tasks straight into their queues (`executor::wake`).
        context::set_waiting(core);
        Poll::Pending
    }
}

/// Future returned by [`Executor::drained`](crate::Executor::drained):
/// completes once no task of the executor is alive and no remote spawn
/// waits in its inbox or its remote backlog. It drives nothing itself: it
/// is polled as (part of) the main future of `block_on` or `run_until`,
/// whose driver wakes it when it finds nothing runnable and no task alive.
/// Any number may wait at once.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Drained<'a> {
    core: &'a Core,
}

impl<'a> Drained<'a> {
    pub(crate) fn new(core: &'a Core) -> Self {
        Drained { core }
    }
}

impl Future for Drained<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.core.tasks.borrow().len() == 0 && self.core.intake.is_idle() {
            return Poll::Ready(());
        }
        let mut wakers = self.core.drained_wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl std::fmt::Debug for Drained<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drained").finish_non_exhaustive()
    }
}

/// Wakes the waiting [`Drained`] futures if no task is alive (called by
/// the drivers when a turn found nothing runnable).
fn wake_if_drained(core: &Core) {
    let wakers = match core.drained_wakers.try_borrow_mut() {
        Ok(mut wakers) if !wakers.is_empty() => {
            if core.tasks.try_borrow().map_or(true, |t| t.len() > 0) || !core.intake.is_idle() {
                return;
            }
            std::mem::take(&mut *wakers)
        }
        _ => return,
    };
    for w in wakers {
        // The host's or `block_on`'s waker: user code.
        core.panics.check(crate::boundary::call(|| w.wake()));
    }
}
