#![forbid(unsafe_code)]
//! Typed errors: configuration ([`BuildError`]), key lookups
//! ([`UnknownQueue`]), spawning ([`SpawnError`]), reweighting
//! ([`SharesError`]). A bounded remote spawner's `try_spawn` fails with
//! [`remote::TrySpawnError`](crate::remote::TrySpawnError) (defined here,
//! exported with the remote spawners); a task's failure,
//! [`task::JoinError`](crate::task::JoinError), is the task core's
//! (`task/join_error.rs`).

use std::error::Error;
use std::fmt;

use self::quarantine::Quarantine;

/// Why [`Builder::build`](crate::Builder::build) refused a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// No queue was declared: an executor needs at least one.
    NoQueues,
    /// A queue was declared with zero shares.
    ZeroShares {
        /// The queue's key, as `{:?}` prints it.
        queue: String,
    },
    /// A queue was declared with more than
    /// [`MAX_SHARES`](crate::config::MAX_SHARES).
    TooManyShares {
        /// The queue's key, as `{:?}` prints it.
        queue: String,
        /// The shares asked for.
        shares: u32,
    },
    /// Two queues were declared with the same key.
    DuplicateQueue {
        /// The key, as `{:?}` prints it.
        queue: String,
    },
    /// More queues than the executor supports
    /// ([`MAX_QUEUES`](crate::config::MAX_QUEUES)).
    TooManyQueues {
        /// The number of queues declared.
        count: usize,
    },
    /// [`Builder::default_queue`](crate::Builder::default_queue) names a
    /// key that no [`Builder::queue`](crate::Builder::queue) declared.
    UnknownDefaultQueue {
        /// The key, as `{:?}` prints it.
        queue: String,
    },
    /// A duration option is out of its documented range.
    InvalidOption {
        /// The option's name.
        option: &'static str,
        /// What the range is.
        reason: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoQueues => write!(
                f,
                "no queue declared: declare at least one with Builder::queue"
            ),
            BuildError::ZeroShares { queue } => {
                write!(
                    f,
                    "queue {queue} has zero shares: shares must be at least 1"
                )
            }
            BuildError::TooManyShares { queue, shares } => write!(
                f,
                "queue {queue} has {shares} shares: the maximum is {}",
                crate::config::MAX_SHARES
            ),
            BuildError::DuplicateQueue { queue } => {
                write!(f, "queue {queue} is declared twice")
            }
            BuildError::TooManyQueues { count } => write!(
                f,
                "{count} queues declared: the maximum is {}",
                crate::config::MAX_QUEUES
            ),
            BuildError::UnknownDefaultQueue { queue } => write!(
                f,
                "default_queue({queue}) names no declared queue: declare it with Builder::queue"
            ),
            BuildError::InvalidOption { option, reason } => {
                write!(f, "invalid value for {option}: {reason}")
            }
        }
    }
}

impl Error for BuildError {}

/// No queue with this key was declared in the builder.
///
/// Returned where looking a key up is all that can fail
/// ([`Executor::queue`](crate::Executor::queue),
/// [`Executor::queue_stats`](crate::Executor::queue_stats)), and carried by
/// the `UnknownQueue` variants of [`SpawnError`] and [`SharesError`], which
/// convert from it (so `?` works in a function that returns either).
///
/// The error names the key as `{:?}` prints it ([`key`](Self::key)) rather
/// than holding the key itself: it is one type whatever the key type, so
/// it converts into `Box<dyn Error + Send + Sync>` and into the other
/// errors of the crate with `?`, as tokio's errors do; the caller has the
/// key at hand anyway.
///
/// ```
/// use tourbillon::error::UnknownQueue;
/// use tourbillon::Builder;
///
/// let ex = Builder::new().queue("fg", 1).build().unwrap();
/// let err: UnknownQueue = ex.queue("bg").unwrap_err();
/// assert_eq!(err.key(), "\"bg\"");
/// assert_eq!(err.to_string(), "no queue with key \"bg\" was declared in the builder");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownQueue {
    key: Box<str>,
}

impl UnknownQueue {
    pub(crate) fn new(key: &dyn fmt::Debug) -> Self {
        Self {
            key: format!("{key:?}").into_boxed_str(),
        }
    }

    /// The key that was looked up, as `{:?}` prints it.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for UnknownQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no queue with key {} was declared in the builder",
            self.key
        )
    }
}

impl Error for UnknownQueue {}

/// Why a task could not be spawned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpawnError {
    /// The executor has been dropped (shut down); it accepts no new task.
    Shutdown,
    /// No queue with this key was declared in the builder.
    UnknownQueue(UnknownQueue),
    /// [`spawn`](crate::spawn) was called outside any running tourbillon
    /// executor, so there is no current queue to spawn onto.
    NoExecutor,
    /// The queue is quarantined: a method of its custom
    /// [`Scheduler`](crate::sched::Scheduler) panicked
    /// [`QUARANTINE_AFTER`](crate::sched::QUARANTINE_AFTER) times in a row,
    /// and the queue takes no new task (see [`Quarantine`]).
    Quarantined(Quarantine),
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Shutdown => write!(f, "the executor is shut down: it accepts no new task"),
            SpawnError::UnknownQueue(e) => fmt::Display::fmt(e, f),
            SpawnError::NoExecutor => write!(
                f,
                "spawn called outside a running tourbillon executor: use Executor::spawn or a QueueHandle"
            ),
            SpawnError::Quarantined(why) => write!(f, "{why}; it takes no new task"),
        }
    }
}

impl Error for SpawnError {}

impl From<UnknownQueue> for SpawnError {
    fn from(e: UnknownQueue) -> Self {
        SpawnError::UnknownQueue(e)
    }
}

/// Why [`Spawner::set_shares`](crate::Spawner::set_shares) refused a
/// new weight. The queue keeps its old shares.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SharesError {
    /// No queue with this key was declared in the builder.
    UnknownQueue(UnknownQueue),
    /// Zero shares: a queue's shares must be at least 1.
    ZeroShares {
        /// The queue's key, as `{:?}` prints it.
        queue: String,
    },
    /// More than [`MAX_SHARES`](crate::config::MAX_SHARES).
    TooManyShares {
        /// The queue's key, as `{:?}` prints it.
        queue: String,
        /// The shares asked for.
        shares: u32,
    },
    /// The executor has been dropped (shut down). Checked after the shares
    /// themselves: zero or too many shares are reported as such even then.
    Shutdown,
}

impl fmt::Display for SharesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SharesError::UnknownQueue(e) => fmt::Display::fmt(e, f),
            SharesError::ZeroShares { queue } => write!(
                f,
                "cannot give queue {queue} zero shares: shares must be at least 1"
            ),
            SharesError::TooManyShares { queue, shares } => write!(
                f,
                "cannot give queue {queue} {shares} shares: the maximum is {}",
                crate::config::MAX_SHARES
            ),
            SharesError::Shutdown => write!(f, "the executor is shut down"),
        }
    }
}

impl Error for SharesError {}

impl From<UnknownQueue> for SharesError {
    fn from(e: UnknownQueue) -> Self {
        SharesError::UnknownQueue(e)
    }
}

/// `TrySpawnError`, in a crate-private module of its own so that the public
/// API has it at one path only, `remote::TrySpawnError`, next to the
/// spawner that returns it (`lib.rs` re-exports it there).
pub(crate) mod try_spawn {
    use std::error::Error;
    use std::fmt;

    use super::{SpawnError, UnknownQueue};

    /// Why [`BoundedRemoteSpawner::try_spawn`](crate::remote::BoundedRemoteSpawner::try_spawn)
    /// did not spawn: each variant hands the future back, unpolled, as tokio's
    /// `TrySendError` hands the value back.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use tourbillon::remote::TrySpawnError;
    /// use tourbillon::Builder;
    ///
    /// let ex = Builder::new().queue("jobs", 1).build().unwrap();
    /// let tx = ex.bounded_remote_spawner(NonZeroUsize::new(1).unwrap());
    /// let _first = tx.try_spawn("jobs", async { 1 }).unwrap();
    /// let err = tx.try_spawn("jobs", async { 2 }).unwrap_err();
    /// assert!(err.is_full());
    /// assert_eq!(
    ///     err.to_string(),
    ///     "the bounded remote spawner is full: its capacity is taken by tasks the executor has not polled yet"
    /// );
    /// let future = err.into_inner(); // not lost: spawn it later, or elsewhere
    /// # drop(future);
    /// ```
    #[non_exhaustive]
    pub enum TrySpawnError<F> {
        /// No room: the spawner's capacity is taken by tasks the executor has
        /// not polled yet (or senders wait for room).
        Full(F),
        /// The executor has been dropped (shut down); it accepts no new task.
        Shutdown(F),
        /// No queue with this key was declared in the builder.
        UnknownQueue(UnknownQueue, F),
    }

    impl<F> TrySpawnError<F> {
        /// The future that was not spawned.
        pub fn into_inner(self) -> F {
            match self {
                TrySpawnError::Full(f) | TrySpawnError::Shutdown(f) => f,
                TrySpawnError::UnknownQueue(_, f) => f,
            }
        }

        /// Whether the spawner was full (trying again later may succeed).
        pub fn is_full(&self) -> bool {
            matches!(self, TrySpawnError::Full(_))
        }

        /// Whether the executor is shut down.
        pub fn is_shutdown(&self) -> bool {
            matches!(self, TrySpawnError::Shutdown(_))
        }
    }

    impl<F> fmt::Debug for TrySpawnError<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                TrySpawnError::Full(_) => f.write_str("Full(..)"),
                TrySpawnError::Shutdown(_) => f.write_str("Shutdown(..)"),
                TrySpawnError::UnknownQueue(e, _) => {
                    f.debug_tuple("UnknownQueue").field(e).field(&"..").finish()
                }
            }
        }
    }

    impl<F> fmt::Display for TrySpawnError<F> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                TrySpawnError::Full(_) => write!(
                    f,
                    "the bounded remote spawner is full: its capacity is taken by tasks the executor has not polled yet"
                ),
                TrySpawnError::Shutdown(_) => fmt::Display::fmt(&SpawnError::Shutdown, f),
                TrySpawnError::UnknownQueue(e, _) => fmt::Display::fmt(e, f),
            }
        }
    }

    impl<F> Error for TrySpawnError<F> {}
}

/// `Quarantine`, in a crate-private module of its own so that the public
/// API has it at one path only, `sched::Quarantine`, next to the
/// schedulers whose panics cause it (`sched/mod.rs` re-exports it there).
pub(crate) mod quarantine {
    use std::fmt;

    /// Why a queue was quarantined: a method of its custom [`Scheduler`](crate::sched::Scheduler)
    /// panicked [`QUARANTINE_AFTER`](crate::sched::QUARANTINE_AFTER) times in a row.
    /// Read it in
    /// [`QueueStats::quarantine`](crate::stats::QueueStats::quarantine) and
    /// [`SpawnError::Quarantined`](crate::error::SpawnError::Quarantined).
    ///
    /// Its `Display` is the message of the quarantine:
    ///
    /// ```text
    /// queue "jobs" quarantined: its scheduler's `pop` panicked 3 times in a row (last panic: "index out of bounds")
    /// ```
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[non_exhaustive]
    pub struct Quarantine {
        /// The queue's key, as `{:?}` prints it.
        pub queue: String,
        /// The method that kept panicking: `"push"`, `"pop"`, `"len"`,
        /// `"wants_timing"`, `"polled"`, `"forget"` or `"group_ended"`.
        pub method: &'static str,
        /// Its panics in a row ([`QUARANTINE_AFTER`](crate::sched::QUARANTINE_AFTER)).
        pub panics: u32,
        /// The message of the last of them, if its payload is a string.
        pub message: Option<String>,
    }

    impl fmt::Display for Quarantine {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "queue {} quarantined: its scheduler's `{}` panicked {} times in a row",
                self.queue, self.method, self.panics
            )?;
            match &self.message {
                Some(m) => write!(f, " (last panic: {m:?})"),
                None => write!(f, " (last panic: a payload that is not a string)"),
            }
        }
    }

    impl Quarantine {
        /// The panic payload of a task that the quarantine ended.
        pub(crate) fn task_payload(&self) -> String {
            format!("tourbillon: {self}; the task was dropped unfinished")
        }
    }
}
