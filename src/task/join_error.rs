#![forbid(unsafe_code)]
//! [`JoinError`]: why a task did not produce its output (cancelled or
//! panicked).

use std::any::Any;
use std::error::Error;
use std::fmt;

use sync_wrapper::SyncWrapper;

use super::id::TaskId;
use crate::boundary::panic_message;

/// A task did not produce its output: it was cancelled or it panicked.
///
/// Returned by awaiting a [`JoinHandle`](crate::task::JoinHandle). `Send` and
/// `Sync`, as tokio's (it fits `anyhow::Error` and `io::Error::other`):
/// the panic payload is reached by value only ([`into_panic`](Self::into_panic)).
///
/// # Tokio's "no reactor" panic
///
/// A task that uses a tokio timer or socket (or `tokio::spawn`) where no
/// tokio runtime is entered, such as under [`Executor::block_on`], which has
/// no reactor, panics in tokio with "there is no reactor running, must be
/// called from the context of a Tokio 1.x runtime". When a task's panic
/// message contains tokio's "no reactor running" or "must be called from
/// the context of a Tokio", its payload here is replaced by a `String` that
/// starts with `tourbillon:`, says to run the executor inside a tokio
/// runtime with `rt.block_on(ex.run_until(fut))`, and ends with tokio's own
/// message. Every other payload is the task's own, unchanged. The main
/// future of `block_on` / `run_until` gets the same explanation: the
/// driver panics with it. (With
/// [`PanicPolicy::Propagate`](crate::config::PanicPolicy::Propagate) the panic that
/// resumes out of `block_on` / `run_until` carries tokio's payload as it
/// is.)
///
/// [`Executor::block_on`]: crate::Executor::block_on
pub struct JoinError {
    id: TaskId,
    repr: Repr,
}

enum Repr {
    Cancelled,
    /// The payload, reached only by value (so that a `JoinError` is `Sync`
    /// whatever the payload's type, as tokio's is), and its message, read
    /// when the error is made, for `Display` and `Debug`.
    Panic {
        payload: SyncWrapper<Box<dyn Any + Send + 'static>>,
        message: Option<Box<str>>,
    },
}

impl JoinError {
    pub(crate) fn cancelled(id: TaskId) -> Self {
        Self {
            id,
            repr: Repr::Cancelled,
        }
    }

    pub(crate) fn panic(id: TaskId, payload: Box<dyn Any + Send>) -> Self {
        let payload = explain_missing_reactor(payload);
        let message = panic_message(payload.as_ref()).map(Box::from);
        Self {
            id,
            repr: Repr::Panic {
                payload: SyncWrapper::new(payload),
                message,
            },
        }
    }

    /// The task was aborted, or dropped when its executor shut down.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked (with [`PanicPolicy::Catch`](crate::config::PanicPolicy::Catch)).
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic { .. })
    }

    /// The id of the task.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// The panic payload.
    ///
    /// # Panics
    /// If the error is not a panic (see [`JoinError::is_panic`]).
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic()
            .expect("`JoinError` reason is not a panic.")
    }

    /// The panic payload, or the error itself if the task was cancelled.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic { payload, .. } => Ok(payload.into_inner()),
            Repr::Cancelled => Err(self),
        }
    }
}

/// Parts of tokio's panic message when a timer, socket or spawn is used
/// where no tokio runtime is entered ("there is no reactor running, must be
/// called from the context of a Tokio 1.x runtime"); either one is enough.
const TOKIO_NO_REACTOR: [&str; 2] = [
    "no reactor running",
    "must be called from the context of a Tokio",
];

/// What [`explain_missing_reactor`] puts before tokio's message, after
/// the words that say who panicked.
const NO_REACTOR_HINT: &str = "used a tokio timer or socket where no tokio runtime is entered; \
Executor::block_on has no reactor: run the executor inside a tokio runtime with \
`rt.block_on(ex.run_until(fut))` so that tokio timers and sockets work in its tasks and its main \
future (async-io's `block_on(ex.run_until(fut))` serves async-io's own timers and sockets, not \
tokio's)";

/// Who panicked, for [`no_reactor_explanation`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Panicker {
    /// A task (its `JoinError`).
    Task,
    /// The main future of `block_on` or `run_until`.
    MainFuture,
}

/// If `payload` is tokio's "no reactor" panic, the `String` that explains
/// it: `tourbillon: <who> <hint>. tokio's panic: <tokio's message>`;
/// `None` for any other payload (one that already starts with
/// `tourbillon:` included).
#[cold]
pub(crate) fn no_reactor_explanation(payload: &(dyn Any + Send), who: Panicker) -> Option<String> {
    let m = panic_message(payload)?;
    if m.starts_with("tourbillon:") || !TOKIO_NO_REACTOR.iter().any(|s| m.contains(s)) {
        return None;
    }
    let who = match who {
        Panicker::Task => "the task",
        Panicker::MainFuture => "the main future of block_on / run_until",
    };
    Some(format!(
        "tourbillon: {who} {NO_REACTOR_HINT}. tokio's panic: {m}"
    ))
}

/// Replaces tokio's "no reactor" panic payload by a `String` that says
/// which host to use (see [`JoinError`]); any other payload is returned as
/// it is.
#[cold]
fn explain_missing_reactor(payload: Box<dyn Any + Send>) -> Box<dyn Any + Send> {
    match no_reactor_explanation(payload.as_ref(), Panicker::Task) {
        Some(explained) => Box::new(explained),
        None => payload,
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "task {} was cancelled", self.id),
            Repr::Panic { message, .. } => match message {
                Some(m) => write!(f, "task {} panicked with message {m:?}", self.id),
                None => write!(f, "task {} panicked", self.id),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "JoinError::Cancelled({:?})", self.id),
            Repr::Panic { message, .. } => match message {
                Some(m) => write!(f, "JoinError::Panic({:?}, {m:?}, ...)", self.id),
                None => write!(f, "JoinError::Panic({:?}, ...)", self.id),
            },
        }
    }
}

impl Error for JoinError {}
