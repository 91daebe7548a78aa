#![forbid(unsafe_code)]
//! The futures of a pool's submissions: [`PoolSpawn`] waits for room in a
//! core's cross-core queue and gives the task's handle; [`Submit`] also
//! awaits the task's output (Seastar's `submit_to`). Either may carry a
//! timeout. A pool task is the core's ordinary task, made there by the
//! submitted closure (`Make`), and counted in its core's load while it
//! lives ([`Tracked`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pin_project_lite::pin_project;

use super::error::SubmitError;
use super::timer::{Sleep, Timer};
use crate::remote::bounded::Wait;
use crate::remote::launch::{Launch, Make};
use crate::remote::spawner::RemoteJoinHandle;

/// One task counted in a core's load, from its submission until it ends
/// (or is dropped unrun).
pub(crate) struct LoadGuard(Arc<AtomicUsize>);

impl LoadGuard {
    pub(crate) fn new(load: &Arc<AtomicUsize>) -> Self {
        load.fetch_add(1, Ordering::Relaxed);
        LoadGuard(load.clone())
    }
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A launch counted in its core's load.
pub(crate) struct Tracked<L> {
    pub(crate) launch: L,
    pub(crate) guard: LoadGuard,
}

pin_project! {
    /// A task's future that holds its load guard.
    pub(crate) struct Guarded<F> {
        #[pin]
        future: F,
        guard: LoadGuard,
    }
}

impl<F: Future> Future for Guarded<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().future.poll(cx)
    }
}

impl<L: Launch> Launch for Tracked<L> {
    type Output = L::Output;
    type Future = Guarded<L::Future>;

    fn launch(self) -> Self::Future {
        Guarded {
            future: self.launch.launch(),
            guard: self.guard,
        }
    }
}

/// What a pool submission carries: the closure, counted in the load.
pub(crate) type Job<C> = Tracked<Make<C>>;

/// Future returned by [`PoolHandle::spawn_on`](super::PoolHandle::spawn_on) and
/// [`PoolHandle::spawn`](super::PoolHandle::spawn): waits for room in the core's
/// cross-core queue, submits the closure, and resolves to the task's
/// [`RemoteJoinHandle`](crate::remote::RemoteJoinHandle) (`Send`: await it on any
/// thread). Dropping it before it resolves drops the closure, never run.
#[must_use = "futures do nothing unless you `.await` or poll them: nothing is submitted until then"]
pub struct PoolSpawn<'a, C> {
    state: State<'a, C>,
    timer: &'a Arc<Timer>,
    deadline: Option<Sleep>,
}

enum State<'a, C> {
    Waiting(Wait<'a, Job<C>>),
    Failed(Option<SubmitError>),
}

impl<'a, C> PoolSpawn<'a, C> {
    pub(crate) fn waiting(wait: Wait<'a, Job<C>>, timer: &'a Arc<Timer>) -> Self {
        PoolSpawn {
            state: State::Waiting(wait),
            timer,
            deadline: None,
        }
    }

    pub(crate) fn failed(e: SubmitError, timer: &'a Arc<Timer>) -> Self {
        PoolSpawn {
            state: State::Failed(Some(e)),
            timer,
            deadline: None,
        }
    }

    /// Gives up waiting for room after `timeout` (from this call):
    /// [`SubmitError::Timeout`], the closure dropped, never run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.deadline = Some(Sleep::new(self.timer.clone(), deadline(timeout)));
        self
    }
}

/// `timeout` from now (far in the future if that overflows).
fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 100))
}

impl<C, Fut> Future for PoolSpawn<'_, C>
where
    C: FnOnce() -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    type Output = Result<RemoteJoinHandle<Fut::Output>, SubmitError>;

    /// # Panics
    /// When polled again after it returned `Ready`.
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let wait = match &mut this.state {
            State::Failed(e) => {
                return Poll::Ready(Err(e
                    .take()
                    .expect("PoolSpawn polled after it returned Ready")))
            }
            State::Waiting(w) => w,
        };
        if let Poll::Ready(r) = wait.poll_wait(cx) {
            return Poll::Ready(r.map_err(SubmitError::from));
        }
        if let Some(d) = &mut this.deadline {
            if Pin::new(d).poll(cx).is_ready() {
                wait.give_up();
                this.state = State::Failed(None);
                return Poll::Ready(Err(SubmitError::Timeout));
            }
        }
        Poll::Pending
    }
}

impl<C> fmt::Debug for PoolSpawn<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("PoolSpawn");
        match &self.state {
            State::Waiting(w) => d.field("wait", w),
            State::Failed(e) => d.field("failed", e),
        };
        d.field("timeout", &self.deadline.is_some()).finish()
    }
}

/// Future returned by [`PoolHandle::submit_to`](super::PoolHandle::submit_to): submits
/// the closure to a core (waiting for room), then awaits the task's
/// output. With [`timeout`](Self::timeout), the whole submission has a
/// deadline: a task still running then is aborted. Dropping it before the
/// task is submitted drops the closure, never run; dropping it after
/// detaches the task (it runs on).
#[must_use = "futures do nothing unless you `.await` or poll them: nothing is submitted until then"]
pub struct Submit<'a, C, T> {
    spawn: Option<PoolSpawn<'a, C>>,
    handle: Option<RemoteJoinHandle<T>>,
    deadline: Option<Sleep>,
}

impl<'a, C, T> Submit<'a, C, T> {
    pub(crate) fn new(spawn: PoolSpawn<'a, C>) -> Self {
        Submit {
            spawn: Some(spawn),
            handle: None,
            deadline: None,
        }
    }

    /// Gives up after `timeout` (from this call), waiting for room or for
    /// the task: [`SubmitError::Timeout`]. A closure not yet submitted is
    /// dropped, never run; a submitted task is aborted.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        let timer = self
            .spawn
            .as_ref()
            .map(|s| s.timer.clone())
            .expect("timeout is set before the first poll");
        self.deadline = Some(Sleep::new(timer, deadline(timeout)));
        self
    }
}

impl<C, Fut> Future for Submit<'_, C, Fut::Output>
where
    C: FnOnce() -> Fut + Send + 'static,
    Fut: Future + 'static,
    Fut::Output: Send + 'static,
{
    type Output = Result<Fut::Output, SubmitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Some(spawn) = &mut this.spawn {
            match Pin::new(spawn).poll(cx) {
                Poll::Ready(Ok(h)) => {
                    this.spawn = None;
                    this.handle = Some(h);
                }
                Poll::Ready(Err(e)) => {
                    this.spawn = None;
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => {}
            }
        }
        if let Some(h) = &mut this.handle {
            if let Poll::Ready(r) = Pin::new(h).poll(cx) {
                this.handle = None;
                return Poll::Ready(r.map_err(SubmitError::Join));
            }
        }
        if let Some(d) = &mut this.deadline {
            if Pin::new(d).poll(cx).is_ready() {
                if let Some(h) = this.handle.take() {
                    h.abort();
                }
                this.spawn = None;
                return Poll::Ready(Err(SubmitError::Timeout));
            }
        }
        Poll::Pending
    }
}

impl<C, T> fmt::Debug for Submit<'_, C, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Submit")
            .field("spawn", &self.spawn)
            .field("handle", &self.handle)
            .field("timeout", &self.deadline.is_some())
            .finish()
    }
}
