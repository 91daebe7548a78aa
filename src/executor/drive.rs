#![forbid(unsafe_code)]
//! Driving the executor: standalone on the current thread (`block_on`,
//! which parks the thread when idle), or nested in a host runtime
//! (`run_until`, a future the host polls, returning to it every turn).

use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use pin_project_lite::pin_project;

use super::context;
use super::core::{bump, Core};
use super::run_loop::Turn;

/// Marks the core as driven for the guard's life; restores on unwind.
struct DriveGuard<'a> {
    core: &'a Core,
    _enter: context::EnterGuard,
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
        }
    }
}

impl Drop for DriveGuard<'_> {
    fn drop(&mut self) {
        self.core.driving.set(false);
        // A panic out of a scheduler may have left a run open.
        self.core.run.queue.set(None);
    }
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
    core.remote.set_host(&unparker);
    let mut future = pin!(future);
    let mut cx = Context::from_waker(&main_waker);
    // The previous turn was busy and nothing ran since ([`Core::run_turn`]).
    let mut follows = false;
    loop {
        if main.woken.swap(false, Ordering::AcqRel) {
            follows = false;
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
        }
        let turn = core.run_turn(follows);
        follows = turn == Turn::Busy;
        if turn == Turn::Idle && !core.attention.get() && !spin_for_wake(&main.woken, &core.remote)
        {
            // Nothing runnable: sleep until a wake (0% CPU). A wake that
            // raced with the checks above left an unpark token, so `park`
            // returns at once.
            bump(&core.counters.parks);
            thread::park();
        }
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
fn spin_for_wake(main_woken: &AtomicBool, remote: &super::inbox::Remote) -> bool {
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
    let before = core.counters.polls.get();
    let mut follows = false;
    while core.run_turn(follows) == Turn::Busy {
        follows = true;
    }
    core.counters.polls.get() - before
}

pin_project! {
    /// Future returned by [`Executor::run_until`](crate::Executor::run_until):
    /// drives the executor's tasks from inside a host runtime until the
    /// wrapped future completes.
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct RunUntil<'a, F> {
        pub(crate) core: &'a Rc<Core>,
        #[pin]
        pub(crate) future: F,
    }
}

impl<F: Future> Future for RunUntil<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let core: &Rc<Core> = this.core;
        let _guard = DriveGuard::new(core, true, "run_until");
        core.remote.set_host(cx.waker());
        if let Poll::Ready(out) = this.future.poll(cx) {
            return Poll::Ready(out);
        }
        // After the host's turn: the clock is read afresh.
        if core.run_turn(false) == Turn::Busy || core.remote.has_pending() || core.attention.get() {
            // More to do after the host's turn (its I/O and timers).
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}
