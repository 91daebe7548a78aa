#![forbid(unsafe_code)]
//! The executor's thread-safe half, a leaf that knows no executor (its ops
//! are a type parameter): wakes arriving while the executor is not
//! polling on its own thread (from other threads, or from a host runtime's
//! timers and I/O between two of our turns) go into a short-lock inbox, and
//! the hosts are woken: the `block_on` thread is unparked, and the host
//! runtime's waker of every pending `run_until` future is woken.
//!
//! Several drivers may wait on one executor at once: two `run_until`
//! futures polled by one host (two tasks of a `LocalSet`, two branches of a
//! `FuturesUnordered`), or a pending `run_until` while the thread is inside
//! `block_on`. Each registers its own host waker under a [`HostToken`] for
//! as long as it drives or may be woken to drive, and every wake of the
//! hosts wakes all of them: whichever of them the host polls first runs the
//! work (the others' polls find nothing and return). A driver that ends
//! deregisters; the driver passes on what only it knew of (work runnable
//! when it ended, see `drive`) by waking the hosts that remain.
//!
//! Lost-wake-up freedom: a waker pushes the id, *then* raises `pending`,
//! *then* wakes every registered host; a driver registers its host waker,
//! *then* checks `pending` before it parks (or returns `Pending` to its
//! host). Either the driver sees `pending`, or the waker sees the driver's
//! registered host waker (and `Thread::unpark` before `park` makes `park`
//! return at once). A driver stays registered until it ends, so the
//! argument holds for each driver that would wait, whatever the others do.
//!
//! Host wakers are user code (their `wake`, `clone` and `drop`), and none of
//! it runs under the inbox's locks: the registry holds each waker in an
//! `Arc`, so that a wake takes `Arc` clones under the lock and wakes them
//! after releasing it, and a waker that is replaced, deregistered or
//! cleared by `close` is taken out under the lock and dropped after it.
//! A wake may therefore still reach a host waker that was deregistered (or
//! cleared by `close`) just after the wake took its clone: a spurious wake,
//! which futures and `Thread::park` allow.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::task::Waker;

use crate::boundary;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, MutexGuard};
use crate::task::id::TaskKey;

/// A task's "already in the inbox" flag: several foreign wakes before the
/// executor drains the inbox enqueue the task once.
pub(crate) trait InboxFlag {
    /// Sets the flag; `true` if it was clear (the caller enqueues).
    fn mark(&self) -> bool;
}

/// A standalone flag, for the tests and loom models of the inbox (tasks use
/// a bit of their reference count).
#[cfg(test)]
impl InboxFlag for AtomicBool {
    fn mark(&self) -> bool {
        // `compare_exchange` rather than `swap`: equivalent here, and loom
        // models it correctly (loom 0.7 lets a store slip inside a `swap`,
        // tokio-rs/loom#254).
        self.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// The registration of one driver's host waker in an [`Inbox`]: handed out
/// by the driver's first [`Inbox::set_host`], given back with
/// [`Inbox::remove_host`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HostToken(u64);

/// The registered host wakers: usually one (one `run_until` or one
/// `block_on`), so a wake costs one `Arc` clone and no allocation.
#[derive(Debug, Default)]
struct Hosts {
    list: Vec<(HostToken, Arc<Waker>)>,
    /// The next token to hand out.
    next: u64,
}

impl Hosts {
    fn position(&self, token: HostToken) -> Option<usize> {
        self.list.iter().position(|(t, _)| *t == token)
    }
}

/// The part of an executor that wakers on any thread may reach: task ids
/// to wake, ops of type `Op` to run on the executor's thread (the executor's
/// remote spawns and aborts), and the host wakers to wake when either
/// arrives.
///
/// The fields that the executor's thread and other threads touch on every
/// remote spawn or wake (`ids`, `ops`, `pending`) each have a cache line of
/// their own, apart from each other and from the `Arc`'s counts before
/// them (which every `RemoteJoinHandle` clone changes): a spawning thread
/// pushing ops does not take the line the executor polls `pending` on.
#[derive(Debug)]
pub(crate) struct Inbox<Op> {
    ids: Line<Mutex<Vec<TaskKey>>>,
    /// Remote spawns and aborts; `closed` is checked and set under this
    /// lock, so that no op is queued after `close` drained them.
    ops: Line<Mutex<Vec<Op>>>,
    /// [`IDS`] and [`OPS`]: which queues have something for the executor.
    pending: Line<AtomicUsize>,
    /// The drivers' host wakers; `closed` is checked under this lock when
    /// one registers, and `close` empties it after setting `closed`, so that
    /// none stays registered after `close`.
    hosts: Mutex<Hosts>,
    closed: AtomicBool,
}

/// Drops a host waker let go of by the executor (a driver that ended, or
/// the executor's shutdown): its destructor is user code, and this may run
/// while unwinding, so a panic is caught and dropped.
fn drop_waker_quietly<T>(waker: Option<T>) {
    if let Some(p) = boundary::drop_caught(waker) {
        boundary::drop_payload(p);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The critical sections below run no user code and cannot panic, so
    // poisoning is impossible; recover anyway rather than propagate someone
    // else's panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The bit of `Inbox::pending` raised when `ids` has something.
const IDS: usize = 1;
/// The bit of `Inbox::pending` raised when `ops` has something.
const OPS: usize = 2;

/// A value on a cache line of its own (64 bytes, the line of the x86-64
/// and most aarch64 parts).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<Op> Default for Inbox<Op> {
    fn default() -> Self {
        Inbox {
            ids: Line::default(),
            ops: Line::default(),
            pending: Line::default(),
            hosts: Mutex::default(),
            closed: AtomicBool::default(),
        }
    }
}

impl<Op> Inbox<Op> {
    /// Queues a wake of `id`, deduplicated by the task's `notified` flag,
    /// and wakes the hosts.
    pub(crate) fn push<F: InboxFlag + ?Sized>(&self, id: TaskKey, notified: &F) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        if !notified.mark() {
            return; // already in the inbox, not yet drained
        }
        lock(&self.ids).push(id);
        self.raise_pending(IDS);
    }

    /// Raises `bit` of `pending` (its queue, [`IDS`] or [`OPS`], has
    /// something) after an id or op was queued, and wakes the hosts unless
    /// an earlier push already raised a bit: that push owes the wake (it
    /// wakes after raising), and the executor's drain, which clears the
    /// bits first and then takes the queues whose bits it cleared, takes
    /// what was queued before the bit was seen raised. So a burst of foreign
    /// wakes costs one host wake, not one each, and a drain takes only the
    /// locks of the queues that have something.
    ///
    /// The bit is read before it is set: under a stream of pushes it is
    /// usually raised already, and a plain load leaves its cache line shared
    /// with the executor, which polls it. A load that sees it raised is
    /// enough: the push before it happened under the queue's lock, which
    /// the drain takes after clearing the bit, so if the drain's clear came
    /// first, this thread's lock acquisition came after the drain's release
    /// and the load sees the clear (or a later raise).
    fn raise_pending(&self, bit: usize) {
        if self.pending.load(Ordering::Acquire) & bit == 0
            && self.pending.fetch_or(bit, Ordering::AcqRel) == 0
        {
            self.wake_host();
        }
    }

    /// Queues an op for the executor's thread and wakes the hosts. Gives the
    /// op back if the executor is shut down.
    pub(crate) fn push_op(&self, op: Op) -> Result<(), Op> {
        {
            let mut ops = lock(&self.ops);
            if self.closed.load(Ordering::Acquire) {
                return Err(op);
            }
            ops.push(op);
        }
        self.raise_pending(OPS);
        Ok(())
    }

    /// Wakes whatever drives or waits to drive the executor: every
    /// registered host waker (thread unpark, or a host runtime's waker).
    ///
    /// The wakers are cloned (`Arc` clones) under the lock and woken after
    /// it. If one of several panics, the others are still woken, and the
    /// first panic is then resumed in the caller, whichever thread it is
    /// (as a lone host waker's panic reaches it): the inbox's state is
    /// consistent at every call site, before and after the wake.
    pub(crate) fn wake_host(&self) {
        let (first, rest) = {
            let hosts = lock(&self.hosts);
            let Some(((_, first), rest)) = hosts.list.split_first() else {
                return;
            };
            // Collecting an empty iterator does not allocate.
            let rest: Vec<Arc<Waker>> = rest.iter().map(|(_, w)| w.clone()).collect();
            (first.clone(), rest)
        };
        if rest.is_empty() {
            first.wake_by_ref();
            return;
        }
        let mut panic = None;
        for w in std::iter::once(&first).chain(&rest) {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| w.wake_by_ref())) {
                panic.get_or_insert(payload);
            }
        }
        drop((first, rest));
        if let Some(payload) = panic {
            resume_unwind(payload);
        }
    }

    /// Registers `waker` as the host waker of the driver that holds
    /// `token`; a driver without one (`None`, its first call) is registered
    /// anew and its token stored in `token`. An unchanged waker (`will_wake`)
    /// costs a lock and a comparison; a changed one is cloned, and the one
    /// it replaces dropped, with no lock held. After `close` nothing is
    /// registered (the executor is gone).
    pub(crate) fn set_host(&self, token: &mut Option<HostToken>, waker: &Waker) {
        if let Some(t) = *token {
            let hosts = lock(&self.hosts);
            if let Some(i) = hosts.position(t) {
                if hosts.list[i].1.will_wake(waker) {
                    return;
                }
            }
        }
        let new = Arc::new(waker.clone());
        // What to drop once the lock is released: the replaced waker, or
        // the new one if the executor closed.
        let spare = {
            let mut hosts = lock(&self.hosts);
            if self.closed.load(Ordering::Acquire) {
                Some(new)
            } else if let Some(i) = token.and_then(|t| hosts.position(t)) {
                Some(std::mem::replace(&mut hosts.list[i].1, new))
            } else {
                let t = HostToken(hosts.next);
                hosts.next += 1;
                hosts.list.push((t, new));
                *token = Some(t);
                None
            }
        };
        drop(spare);
    }

    /// Deregisters the host waker registered under `token` (its driver
    /// ended), dropping it with no lock held.
    pub(crate) fn remove_host(&self, token: HostToken) {
        let removed = {
            let mut hosts = lock(&self.hosts);
            hosts.position(token).map(|i| hosts.list.swap_remove(i))
        };
        drop_waker_quietly(removed);
    }

    /// Whether the executor is gone (`close` ran): ops are refused.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether wakes are waiting in the inbox.
    #[inline]
    pub(crate) fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) != 0
    }

    /// Whether foreign wakes are waiting in the inbox.
    #[inline]
    pub(crate) fn has_wakes(&self) -> bool {
        self.pending.load(Ordering::Acquire) & IDS != 0
    }

    /// Moves the queued ids into `out` and, given `ops`, the queued ops
    /// into it. Without `ops`, the ops stay queued and their bit raised
    /// (`has_pending` stays true until a drain takes them; pushes meanwhile
    /// wake no host, since the bit is up).
    ///
    /// The executor drains into an empty `ops` (its batch of the previous
    /// drain, run and emptied, with its room): the queue and the batch are
    /// swapped under the contended lock, the queued ops are not copied, and
    /// the pushes that follow find the batch's room without reallocating.
    pub(crate) fn drain_into(&self, out: &mut Vec<TaskKey>, ops: Option<&mut Vec<Op>>) {
        let mask = if ops.is_some() { IDS | OPS } else { IDS };
        let mut bits = self.pending.load(Ordering::Acquire);
        while bits & mask != 0 {
            match self.pending.compare_exchange(
                bits,
                bits & !mask,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => bits = now,
            }
        }
        if bits & IDS != 0 {
            out.append(&mut lock(&self.ids));
        }
        if let Some(ops) = ops.filter(|_| bits & OPS != 0) {
            let mut queued = lock(&self.ops);
            if ops.is_empty() {
                std::mem::swap(ops, &mut *queued);
            } else {
                ops.append(&mut queued);
            }
        }
    }

    /// The executor is gone: later wakes and ops are refused, and the host
    /// wakers are deregistered (and dropped, with no lock held). Returns the
    /// ops that were waiting, for the caller to drop (with no lock held:
    /// dropping a spawn op resolves its join handle to cancelled).
    pub(crate) fn close(&self) -> Vec<Op> {
        let ops = {
            let mut ops = lock(&self.ops);
            self.closed.store(true, Ordering::Release);
            std::mem::take(&mut *ops)
        };
        lock(&self.ids).clear();
        let hosts = std::mem::take(&mut lock(&self.hosts).list);
        for host in hosts {
            drop_waker_quietly(Some(host));
        }
        ops
    }
}

#[cfg(all(test, not(tourbillon_loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The inbox alone, with ops of its own.
    type Remote = Inbox<()>;

    #[test]
    fn wakes_are_deduplicated_until_drained() {
        let r = Remote::default();
        let flag = AtomicBool::new(false);
        let id = TaskKey::new(3, 1);
        r.push(id, &flag);
        r.push(id, &flag);
        let mut out = vec![];
        r.drain_into(&mut out, Some(&mut vec![]));
        assert_eq!(out, vec![id]);
        assert!(!r.has_pending());
        let _ = flag.compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire);
        r.push(id, &flag);
        out.clear();
        r.drain_into(&mut out, Some(&mut vec![]));
        assert_eq!(out, vec![id]);
    }

    /// A host waker that counts its wakes (the `Arc`'s strong count tells
    /// how many clones of it are alive).
    #[derive(Default)]
    struct Count(std::sync::atomic::AtomicUsize);
    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    impl Count {
        fn get(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn every_registered_host_is_woken_until_it_is_removed() {
        let r = Remote::default();
        let (a, b) = (Arc::new(Count::default()), Arc::new(Count::default()));
        let (wa, wb) = (Waker::from(a.clone()), Waker::from(b.clone()));
        let (mut ta, mut tb) = (None, None);
        r.set_host(&mut ta, &wa);
        r.set_host(&mut tb, &wb);
        assert_ne!(ta, tb);
        // Registering the same waker again keeps the one clone.
        r.set_host(&mut ta, &wa);
        assert_eq!(Arc::strong_count(&a), 3, "test's, waker's, registry's");
        r.wake_host();
        assert_eq!((a.get(), b.get()), (1, 1));
        r.remove_host(tb.unwrap());
        assert_eq!(Arc::strong_count(&b), 2, "the registry let go of it");
        r.wake_host();
        assert_eq!((a.get(), b.get()), (2, 1));
        // A new waker under the same token replaces the old one.
        r.set_host(&mut ta, &wb);
        assert_eq!(Arc::strong_count(&a), 2);
        r.wake_host();
        assert_eq!((a.get(), b.get()), (2, 2));
        assert!(r.close().is_empty());
        assert_eq!(Arc::strong_count(&b), 2, "close let go of it");
        // Nothing registers or is woken after close.
        let mut tc = None;
        r.set_host(&mut tc, &wa);
        assert_eq!(tc, None);
        assert_eq!(Arc::strong_count(&a), 2);
        r.wake_host();
        assert_eq!((a.get(), b.get()), (2, 2));
    }

    #[test]
    fn a_panicking_host_waker_does_not_skip_the_others() {
        struct Panics;
        impl std::task::Wake for Panics {
            fn wake(self: Arc<Self>) {
                panic!("host waker panics");
            }
        }
        let r = Remote::default();
        let c = Arc::new(Count::default());
        let (wp, wc) = (Waker::from(Arc::new(Panics)), Waker::from(c.clone()));
        let (mut tp, mut tc) = (None, None);
        // The panicking one first: the other is still woken after it.
        r.set_host(&mut tp, &wp);
        r.set_host(&mut tc, &wc);
        let caught = std::panic::catch_unwind(AssertUnwindSafe(|| r.wake_host()));
        assert!(caught.is_err(), "the panic reaches the caller");
        assert_eq!(c.get(), 1);
        // Nothing is poisoned or left behind.
        r.remove_host(tp.unwrap());
        r.wake_host();
        assert_eq!(c.get(), 2);
        assert_eq!(Arc::strong_count(&c), 3);
        drop(r.close());
        assert_eq!(Arc::strong_count(&c), 2);
    }

    #[test]
    fn closed_inbox_ignores_wakes() {
        let r = Arc::new(Remote::default());
        assert!(r.close().is_empty());
        r.push(TaskKey::new(0, 0), &AtomicBool::new(false));
        assert!(!r.has_pending());
    }
}

/// Model checks of the cross-thread wake path (run with
/// `RUSTFLAGS="--cfg tourbillon_loom" cargo test --release --lib loom`).
#[cfg(all(test, tourbillon_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;
    use std::task::Wake;

    /// An op of the models: an executor's remote abort (the id is what the
    /// executor would read).
    #[derive(Debug)]
    struct Abort(#[allow(dead_code)] TaskKey);
    type Remote = Inbox<Abort>;

    /// A host waker that records that it was woken (the `block_on` thread
    /// would be unparked, or the host runtime would re-poll `run_until`).
    struct Flag(Arc<AtomicBool>);
    impl Wake for Flag {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn loom_foreign_wake_is_never_lost() {
        // The executor registers its host waker, drains the inbox and, if
        // nothing is pending, would park. A wake from another thread races
        // with that. No lost wake-up: either the executor sees the id (now,
        // or as still pending when it re-checks), or the waking thread wakes
        // the host it registered.
        loom::model(|| {
            let remote = Arc::new(Remote::default());
            let flag = Arc::new(AtomicBool::new(false));
            let woken = Arc::new(AtomicBool::new(false));
            let (r2, f2) = (remote.clone(), flag.clone());
            let t = thread::spawn(move || r2.push(TaskKey::new(1, 0), &*f2));

            let host = std::task::Waker::from(std::sync::Arc::new(Flag(woken.clone())));
            remote.set_host(&mut None, &host);
            let mut out = Vec::new();
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            let would_park = out.is_empty() && !remote.has_pending();
            t.join().unwrap();

            if would_park {
                assert!(
                    woken.load(Ordering::SeqCst),
                    "the executor would park and nobody wakes it"
                );
            }
            // Whatever happened, the id is delivered exactly once.
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            assert_eq!(out, vec![TaskKey::new(1, 0)]);
        });
    }

    #[test]
    fn loom_two_foreign_wakes_one_host_wake_none_lost() {
        // Two threads wake two tasks while the executor drains and decides
        // whether to park. A push that finds `pending` already raised skips
        // the host wake; whatever the interleaving, both ids are drained
        // exactly once, and if the executor would park with an id still
        // queued, the host was woken (an unpark token).
        loom::model(|| {
            let remote = Arc::new(Remote::default());
            let (_flag, woken, host) = host();
            remote.set_host(&mut None, &host);
            let ts: Vec<_> = (0..2u32)
                .map(|i| {
                    let r = remote.clone();
                    thread::spawn(move || r.push(TaskKey::new(i, 0), &AtomicBool::new(false)))
                })
                .collect();
            let mut out = Vec::new();
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            let would_park = out.len() < 2 && !remote.has_pending();
            for t in ts {
                t.join().unwrap();
            }
            if would_park {
                assert!(
                    woken.load(Ordering::SeqCst),
                    "the executor would park with a wake queued and no host wake"
                );
            }
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            out.sort();
            assert_eq!(out, vec![TaskKey::new(0, 0), TaskKey::new(1, 0)]);
        });
    }

    #[test]
    fn loom_a_drain_of_wakes_alone_leaves_the_ops_pending() {
        // The executor takes the wakes alone (its remote backlog is long)
        // while one thread wakes a task and another sends two ops. The ops
        // stay queued and `has_pending` stays true until a drain takes
        // them, so the executor cannot park on them unseen; a later full
        // drain takes both, in order; every wake is taken exactly once.
        loom::model(|| {
            let remote = Arc::new(Remote::default());
            let (_flag, woken, host) = host();
            remote.set_host(&mut None, &host);
            let r1 = remote.clone();
            let waking =
                thread::spawn(move || r1.push(TaskKey::new(1, 0), &AtomicBool::new(false)));
            let r2 = remote.clone();
            let sending = thread::spawn(move || {
                r2.push_op(Abort(TaskKey::new(2, 0))).is_ok()
                    && r2.push_op(Abort(TaskKey::new(3, 0))).is_ok()
            });
            let mut out = Vec::new();
            remote.drain_into(&mut out, None);
            let would_park = out.is_empty() && !remote.has_pending();
            waking.join().unwrap();
            assert!(sending.join().unwrap());
            assert!(remote.has_pending(), "two ops queued and not drained");
            if would_park {
                assert!(
                    woken.load(Ordering::SeqCst),
                    "a wake queued and no host wake"
                );
            }
            remote.drain_into(&mut out, None);
            assert_eq!(out, vec![TaskKey::new(1, 0)]);
            let mut ops = Vec::new();
            remote.drain_into(&mut out, Some(&mut ops));
            assert_eq!(out.len(), 1);
            assert_eq!(ops.len(), 2);
            assert!(matches!(ops[0], Abort(id) if id == TaskKey::new(2, 0)));
            assert!(!remote.has_pending());
        });
    }

    #[test]
    fn loom_a_wake_and_an_op_racing_a_drain_none_lost() {
        // One thread wakes a task (the ids queue), another sends an op (the
        // ops queue), while the executor drains and decides whether to
        // park. Each queue has a bit of `pending`; whatever the
        // interleaving, the id and the op are each drained exactly once,
        // and if the executor would park with either still queued, the host
        // was woken.
        loom::model(|| {
            let remote = Arc::new(Remote::default());
            let (_flag, woken, host) = host();
            remote.set_host(&mut None, &host);
            let r1 = remote.clone();
            let waking =
                thread::spawn(move || r1.push(TaskKey::new(1, 0), &AtomicBool::new(false)));
            let r2 = remote.clone();
            let sending = thread::spawn(move || r2.push_op(Abort(TaskKey::new(2, 0))).is_ok());
            let (mut out, mut ops) = (Vec::new(), Vec::new());
            remote.drain_into(&mut out, Some(&mut ops));
            let would_park = (out.is_empty() || ops.is_empty()) && !remote.has_pending();
            waking.join().unwrap();
            assert!(sending.join().unwrap());
            if would_park {
                assert!(
                    woken.load(Ordering::SeqCst),
                    "the executor would park with a wake or an op queued and no host wake"
                );
            }
            remote.drain_into(&mut out, Some(&mut ops));
            assert_eq!(out, vec![TaskKey::new(1, 0)]);
            assert_eq!(ops.len(), 1);
        });
    }

    #[test]
    fn loom_concurrent_wakes_enqueue_once_until_drained() {
        // Two threads wake the same task; whatever the interleaving, the id
        // is queued at most once before the executor drains it, and a wake
        // after the drain is not lost.
        loom::model(|| {
            let remote = Arc::new(Remote::default());
            let flag = Arc::new(AtomicBool::new(false));
            let ts: Vec<_> = (0..2)
                .map(|_| {
                    let (r, f) = (remote.clone(), flag.clone());
                    thread::spawn(move || r.push(TaskKey::new(1, 0), &*f))
                })
                .collect();
            for t in ts {
                t.join().unwrap();
            }
            let mut out = Vec::new();
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            assert_eq!(out.len(), 1, "two wakes before a drain enqueue once");
            let _ = flag.compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire);
            let (r, f) = (remote.clone(), flag.clone());
            let late = thread::spawn(move || r.push(TaskKey::new(1, 0), &*f));
            late.join().unwrap();
            out.clear();
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            assert_eq!(out.len(), 1, "a wake after the drain is queued again");
        });
    }

    /// A host for the models of the host list: its waker, the flag its wake
    /// sets, and the `Arc` behind the waker, whose strong count is 2 (this
    /// `Arc` and the waker) once every clone the inbox took was dropped.
    fn host() -> (std::sync::Arc<Flag>, Arc<AtomicBool>, std::task::Waker) {
        let woken = Arc::new(AtomicBool::new(false));
        let flag = std::sync::Arc::new(Flag(woken.clone()));
        let waker = std::task::Waker::from(flag.clone());
        (flag, woken, waker)
    }

    #[test]
    fn loom_host_list_wake_racing_drivers_coming_and_going() {
        // Two drivers are registered (two pending `run_until` futures). A
        // foreign wake races with one of them ending (deregistering) and
        // with a third registering, draining the inbox and deciding
        // whether to wait. No lost wake-up: the driver registered
        // throughout is woken, and the new one is woken if it would wait
        // with the id undrained. Then `close` (the executor's drop) lets go
        // of every registered waker, each exactly once, and later wakes
        // reach none.
        loom::model(|| {
            let remote = Arc::new(Remote::default());
            let (a, a_woken, wa) = host();
            let (b, _, wb) = host();
            let (c, c_woken, wc) = host();
            let (mut ta, mut tb) = (None, None);
            remote.set_host(&mut ta, &wa);
            remote.set_host(&mut tb, &wb);
            let tb = tb.unwrap();

            let r1 = remote.clone();
            let waking =
                thread::spawn(move || r1.push(TaskKey::new(1, 0), &AtomicBool::new(false)));
            let r2 = remote.clone();
            let leaving = thread::spawn(move || r2.remove_host(tb));

            let mut tc = None;
            remote.set_host(&mut tc, &wc);
            let mut out = Vec::new();
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            let would_wait = out.is_empty() && !remote.has_pending();
            waking.join().unwrap();
            leaving.join().unwrap();

            assert!(
                a_woken.load(Ordering::SeqCst),
                "a registered driver missed the wake"
            );
            if would_wait {
                assert!(
                    c_woken.load(Ordering::SeqCst),
                    "the new driver would wait and nobody wakes it"
                );
            }
            assert_eq!(std::sync::Arc::strong_count(&b), 2, "b kept after it left");
            drop(remote.close());
            for h in [&a, &b, &c] {
                assert_eq!(std::sync::Arc::strong_count(h), 2, "a host waker kept");
            }
            a_woken.store(false, Ordering::SeqCst);
            c_woken.store(false, Ordering::SeqCst);
            remote.push(TaskKey::new(2, 0), &AtomicBool::new(false));
            remote.wake_host();
            assert!(!a_woken.load(Ordering::SeqCst) && !c_woken.load(Ordering::SeqCst));
        });
    }

    #[test]
    fn loom_host_list_close_racing_a_wake_and_a_registration() {
        // The executor is dropped (`close`) while a foreign thread queues
        // an op and a driver registers. The op is either refused or
        // returned by `close`, never both or neither; a refused op wakes
        // no host; a registration that comes after `close` is refused; every
        // waker the inbox took is dropped exactly once; and no wake after
        // `close` reaches a host.
        loom::model(|| {
            let remote = Arc::new(Remote::default());
            let (a, a_woken, wa) = host();
            let (b, b_woken, wb) = host();
            let mut ta = None;
            remote.set_host(&mut ta, &wa);

            let r1 = remote.clone();
            let op = thread::spawn(move || r1.push_op(Abort(TaskKey::new(3, 0))).is_ok());
            let (r2, wb2) = (remote.clone(), wb.clone());
            let registering = thread::spawn(move || {
                let mut tb = None;
                r2.set_host(&mut tb, &wb2);
                tb
            });

            let ops = remote.close();
            let accepted = op.join().unwrap();
            let _ = registering.join().unwrap();
            assert_eq!(accepted, ops.len() == 1, "op accepted {accepted}, {ops:?}");
            drop(ops);
            if !accepted {
                assert!(
                    !a_woken.load(Ordering::SeqCst) && !b_woken.load(Ordering::SeqCst),
                    "a refused op woke a host"
                );
            }
            for h in [&a, &b] {
                assert_eq!(std::sync::Arc::strong_count(h), 2, "a host waker kept");
            }
            a_woken.store(false, Ordering::SeqCst);
            b_woken.store(false, Ordering::SeqCst);
            assert!(remote.push_op(Abort(TaskKey::new(4, 0))).is_err());
            remote.wake_host();
            assert!(!a_woken.load(Ordering::SeqCst) && !b_woken.load(Ordering::SeqCst));
        });
    }

    #[test]
    fn loom_wake_after_close_is_dropped() {
        // A waker that outlives the executor: its wake races with shutdown
        // and never touches a freed host waker or leaves ids behind.
        loom::model(|| {
            let remote = Arc::new(Remote::default());
            let flag = Arc::new(AtomicBool::new(false));
            let (r2, f2) = (remote.clone(), flag.clone());
            let t = thread::spawn(move || r2.push(TaskKey::new(1, 0), &*f2));
            let _ = remote.close();
            t.join().unwrap();
            let mut out = Vec::new();
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            assert!(out.len() <= 1);
        });
    }
}
