#![forbid(unsafe_code)]
//! What a remote submission carries to the executor's thread ([`Launch`]):
//! a `Send` future, spawned as it is, or a `Send` closure ([`Make`]) that
//! builds the task's future there, so that the future itself need not be
//! `Send` (it holds `Rc`s, `RefCell`s, thread-locals of the target
//! thread). The closure runs at the task's first poll ([`Lazy`]): a panic
//! of it is the task's panic, handled as any poll's.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

/// What crosses threads in a remote spawn: turned into the task's future
/// on the executor's thread. `launch` runs no user code (it moves values).
pub(crate) trait Launch: Send + 'static {
    /// The task's output, sent back to the submitting thread.
    type Output: Send + 'static;
    /// The task's future, on the executor's thread.
    type Future: Future<Output = Self::Output> + 'static;
    /// The task's future.
    fn launch(self) -> Self::Future;
}

impl<F> Launch for F
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = F::Output;
    type Future = F;

    fn launch(self) -> F {
        self
    }
}

/// A `Send` closure that builds a task's future on the executor's thread.
pub(crate) struct Make<C>(pub(crate) C);

impl<C, Fut> Launch for Make<C>
where
    C: FnOnce() -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    type Output = Fut::Output;
    type Future = Lazy<C, Fut>;

    fn launch(self) -> Lazy<C, Fut> {
        Lazy::Make { make: Some(self.0) }
    }
}

pin_project! {
    /// A task's future made by its first poll: the closure, then the
    /// future it returned.
    #[project = LazyProj]
    pub(crate) enum Lazy<C, F> {
        Make { make: Option<C> },
        Run { #[pin] future: F },
    }
}

impl<C, F> Future for Lazy<C, F>
where
    C: FnOnce() -> F,
    F: Future,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if let LazyProj::Make { make } = self.as_mut().project() {
            let make = make.take().expect("a Lazy future is made once");
            // If `make` panics, the task ends in this poll (a panicked
            // task is not polled again), with no closure left to drop.
            let future = make();
            self.set(Lazy::Run { future });
        }
        match self.project() {
            LazyProj::Run { future } => future.poll(cx),
            LazyProj::Make { .. } => unreachable!("made above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Waker;

    #[test]
    fn a_made_future_need_not_be_send_and_runs_the_closure_once() {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        // The closure is Send; the future it returns holds an Rc.
        let make = Make(move || {
            seen.fetch_add(1, Ordering::SeqCst);
            let local = Rc::new(41);
            async move {
                crate::yield_now::yield_now().await;
                *local + 1
            }
        });
        let mut fut = Box::pin(make.launch());
        assert_eq!(calls.load(Ordering::SeqCst), 0, "launch runs no user code");
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Pending);
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(42));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_send_future_launches_as_itself() {
        let fut = async { 7 };
        let mut fut = Box::pin(Launch::launch(fut));
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(7));
    }
}
