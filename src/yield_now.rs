#![forbid(unsafe_code)]
//! Cooperative yielding: [`yield_now`] always, [`yield_maybe`] only when it
//! helps (cheap check: [`should_yield`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::executor::context;

/// Yields once: the task goes behind the runnable tasks of its queue.
///
/// When the executor runs nested in a host runtime (`run_until`), the task
/// waits for the next host turn (after the host polled its I/O and timers),
/// as tokio's `yield_now` does. Outside a tourbillon executor it wakes its
/// waker and returns `Pending` once, which works under any executor.
///
/// ```
/// use tourbillon::task::yield_now;
/// use tourbillon::Builder;
///
/// let ex = Builder::new().queue((), 1).build().unwrap();
/// ex.block_on(async {
///     let h = ex.spawn((), async {
///         for _ in 0..3 {
///             yield_now().await;
///         }
///     }).unwrap();
///     h.await.unwrap();
/// });
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// Future returned by [`yield_now`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        if !crate::task::waker::try_fast_yield(cx.waker()) {
            yield_slow(cx.waker());
        }
        Poll::Pending
    }
}

/// The yield of a future polled with a waker that is not its task's own
/// (inside a combinator, or outside any tourbillon executor).
#[cold]
#[inline(never)]
fn yield_slow(waker: &Waker) {
    context::with_current(|core| match core {
        Some(core) => core.yield_current(waker),
        None => waker.wake_by_ref(),
    });
}

/// Whether the running task should yield now: `true` when the current run
/// would end at this poll boundary: its queue's slice is used up while
/// another queue is runnable, the host-yield interval is spent, or a
/// waking queue is entitled to preempt it. `false` outside an executor.
///
/// It costs one clock read (a run-loop flag check is not enough, since the
/// executor does not read the clock per poll).
pub fn should_yield() -> bool {
    context::with_current(|core| core.is_some_and(|c| c.should_yield()))
}

/// Yields if [`should_yield`] says so, else returns at once: the cheap
/// cooperative check for CPU-heavy loops (glommio's `yield_if_needed`).
///
/// ```
/// use tourbillon::task::yield_maybe;
/// use tourbillon::Builder;
///
/// let ex = Builder::new().queue((), 1).build().unwrap();
/// ex.block_on(async {
///     let mut sum = 0u64;
///     for i in 0..10_000 {
///         sum += i;
///         yield_maybe().await;
///     }
///     assert_eq!(sum, 49_995_000);
/// });
/// ```
pub async fn yield_maybe() {
    if should_yield() {
        yield_now().await;
    }
}
