#![forbid(unsafe_code)]
//! Task queues as the user declares them: the key type ([`QueueKey`]), a
//! queue's declaration ([`QueueSpec`]: shares, scheduler, slice, latency),
//! and the key -> index map the handles look keys up in (the limits are in
//! [`config`](crate::config)).
//!
//! Declarations only: a queue's state at run time is the executor's
//! (`executor::queues`), and nothing here imports the executor.

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

use crate::sched::{QueueScheduler, RunnableFifo, Scheduler};

/// A type that can name a queue: any small copyable key, such as an enum.
///
/// Implemented for every `Copy + Eq + Hash + Debug + 'static` type.
pub trait QueueKey: Copy + Eq + Hash + Debug + 'static {}
impl<T: Copy + Eq + Hash + Debug + 'static> QueueKey for T {}

/// How a queue is declared: its shares, its scheduler, its slice.
///
/// ```
/// use std::time::Duration;
/// use tourbillon::sched::RunnableFifo;
/// use tourbillon::QueueSpec;
///
/// let spec = QueueSpec::new(8)
///     .scheduler(RunnableFifo::new())
///     .slice(Duration::from_micros(250));
/// # let _ = spec;
/// ```
pub struct QueueSpec {
    pub(crate) shares: u32,
    pub(crate) scheduler: QueueScheduler,
    pub(crate) slice: Option<Duration>,
    pub(crate) latency: Option<Duration>,
}

impl QueueSpec {
    /// A queue with `shares` (1 to [`MAX_SHARES`](crate::config::MAX_SHARES)) and a [`RunnableFifo`].
    ///
    /// When several queues have runnable tasks, queue `i` receives about
    /// `shares(i) / sum(shares)` of the thread; an idle queue costs nothing
    /// and a lone runnable queue gets all of it.
    pub fn new(shares: u32) -> Self {
        Self {
            shares,
            scheduler: QueueScheduler::Fifo(RunnableFifo::new()),
            slice: None,
            latency: None,
        }
    }

    /// The scheduler that orders this queue's runnable tasks.
    pub fn scheduler<S: Scheduler>(mut self, scheduler: S) -> Self {
        self.scheduler = QueueScheduler::from_scheduler(scheduler);
        self
    }

    /// This queue's slice (its EEVDF request): how long it runs before the
    /// executor considers switching queues. A shorter slice gives an earlier
    /// deadline (lower wake-up latency) without changing the share. Default:
    /// the builder's [`base_slice`](crate::Builder::base_slice).
    pub fn slice(mut self, slice: Duration) -> Self {
        self.slice = Some(slice);
        self
    }

    /// This queue's latency requirement for the host's I/O and timers
    /// (glommio's `Latency::Matters`): while the queue has no runnable task
    /// (its tasks wait for a socket, a timer or another wake from the host),
    /// the executor returns to its host at least every `latency`, so that a
    /// readiness the host discovers for it is seen within about `latency`
    /// plus the poll in flight. When the queue's last runnable task goes
    /// to wait while another queue is runnable, the executor returns to
    /// its host at once, before that queue's next poll: requests that
    /// arrived while the queue ran are found first, and the other queue
    /// runs only if the host had nothing for this one. Once the queue is
    /// runnable, EEVDF decides when it runs (a queue with more shares
    /// preempts at the next poll boundary).
    ///
    /// Without it, a waiting queue's I/O is discovered at the builder's
    /// [`host_yield_interval`](crate::Builder::host_yield_interval)
    /// (200 us by default) while other queues keep the thread busy.
    ///
    /// How to choose it: a request that arrives while other queues run
    /// waits up to about `latency` plus the poll in flight before its task
    /// is polled, so pick the delay a request can afford, and keep
    /// background polls short ([`yield_maybe`](crate::task::yield_maybe)) if
    /// they are longer than it: the executor returns to the host only
    /// between polls, so behind a long poll the knob changes nothing.
    /// `examples/latency_knob.rs` measures a request queue's latency
    /// with long and with short background polls, with and without the
    /// knob; the README gives its figures and what a host turn costs,
    /// with their commands, machine and date. Set it
    /// on the queue that serves requests, not on background queues: each
    /// host turn is a poll of the host's driver (an `epoll_wait` with a
    /// zero timeout under tokio), which background work pays for only
    /// while a latency-sensitive queue waits; raise the builder's interval
    /// to give background work fewer host turns the rest of the time. It
    /// only matters nested in a host runtime
    /// ([`run_until`](crate::Executor::run_until)); it must be between
    /// 1 us and 1 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tourbillon::{Builder, QueueSpec};
    ///
    /// let ex = Builder::new()
    ///     .queue_with("requests", QueueSpec::new(99).latency(Duration::from_micros(50)))
    ///     .queue("compaction", 1)
    ///     .build()
    ///     .unwrap();
    /// # let _ = ex;
    /// ```
    pub fn latency(mut self, latency: Duration) -> Self {
        self.latency = Some(latency);
        self
    }
}

impl std::fmt::Debug for QueueSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueSpec")
            .field("shares", &self.shares)
            .field("scheduler", &self.scheduler.kind())
            .field("slice", &self.slice)
            .field("latency", &self.latency)
            .finish()
    }
}

/// Maps queue keys to queue indices: a linear scan for a few queues (faster
/// than hashing), a hash map beyond.
pub(crate) struct KeyMap<K> {
    keys: Vec<K>,
    map: Option<HashMap<K, usize>>,
}

const LINEAR_SCAN_MAX: usize = 8;

impl<K: QueueKey> KeyMap<K> {
    pub(crate) fn new(keys: Vec<K>) -> Self {
        let map = (keys.len() > LINEAR_SCAN_MAX)
            .then(|| keys.iter().enumerate().map(|(i, k)| (*k, i)).collect());
        Self { keys, map }
    }

    #[inline]
    pub(crate) fn get(&self, key: &K) -> Option<usize> {
        match &self.map {
            Some(m) => m.get(key).copied(),
            None => self.keys.iter().position(|k| k == key),
        }
    }

    pub(crate) fn keys(&self) -> &[K] {
        &self.keys
    }
}
