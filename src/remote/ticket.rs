#![forbid(unsafe_code)]
//! A remote task's place in its queue's admission window
//! (`remote/backlog.rs`): the [`Ticket`] its future ([`Admitted`]) holds
//! until the task's first poll, and the [`Window`] it gives the place
//! back to.

use std::future::Future;
use std::pin::Pin;
use std::rc::Weak;
use std::task::{Context, Poll};

use pin_project_lite::pin_project;

/// Where a [`Ticket`] gives its place back: the executor, which frees the
/// place in its backlog's window (`Target`'s supertrait).
pub(crate) trait Window {
    /// An admitted remote task of queue `q` was polled, or dropped
    /// unpolled: its place in the queue's window is free.
    fn freed(&self, q: usize);
}

/// A remote task's place in its queue's admission window: given back when
/// it is dropped (at the task's first poll, or with the task unpolled).
/// A ticket of no executor ([`Ticket::none`]) gives back nothing.
pub(crate) struct Ticket {
    window: Option<Weak<dyn Window>>,
    queue: usize,
}

impl Ticket {
    /// The place an admitted spawn of queue `queue` took.
    pub(crate) fn new(window: Weak<dyn Window>, queue: usize) -> Self {
        Self {
            window: Some(window),
            queue,
        }
    }

    /// A ticket for a spawn that was never admitted (run at shutdown).
    pub(crate) fn none() -> Self {
        Self {
            window: None,
            queue: 0,
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // No executor left (dropped with it): nothing to give back to.
        if let Some(window) = self.window.as_ref().and_then(Weak::upgrade) {
            window.freed(self.queue);
        }
    }
}

pin_project! {
    /// The future of an admitted remote task: gives its [`Ticket`] back at
    /// its first poll, then is the task's own future.
    pub(crate) struct Admitted<F> {
        #[pin]
        future: F,
        ticket: Option<Ticket>,
    }
}

impl<F> Admitted<F> {
    pub(crate) fn new(future: F, ticket: Ticket) -> Self {
        Self {
            future,
            ticket: Some(ticket),
        }
    }
}

impl<F: Future> Future for Admitted<F> {
    type Output = F::Output;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        drop(this.ticket.take());
        this.future.poll(cx)
    }
}
