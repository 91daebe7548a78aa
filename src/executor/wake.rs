#![forbid(unsafe_code)]
//! How the executor receives its tasks' wakes and aborts: the task core
//! calls its tasks' sink ([`Schedule`]), and the executor's sink is its
//! [`Remote`] (the inbox). On the executor's own thread while it drives, a
//! wake goes straight to the task's queue and an abort to the next poll
//! boundary. A wake on the executor's own thread between the turns of a
//! nested executor (the host's reactor, in its own turn, reporting a
//! socket ready) also goes straight to the queue, which wakes the host if
//! the queue was idle. From any other thread (or from a host turn while
//! another nested executor is the one waiting on this thread) both go
//! through the inbox, which wakes the executor's hosts.

use std::sync::Arc;

use super::context;
use crate::remote::inbox::InboxFlag;
use crate::remote::op::{Remote, RemoteOp};
use crate::task::raw::Header;
use crate::task::schedule::Schedule;

impl InboxFlag for Header {
    #[inline]
    fn mark(&self) -> bool {
        self.mark_notified()
    }
}

impl Schedule for Remote {
    /// A wake from a task's waker (any thread): straight to its queue on
    /// the executor's own thread while it runs, else through the inbox.
    #[inline]
    fn wake(&self, header: &Header) {
        let local = context::with_current_ref(|core| match core {
            Some(core)
                if std::ptr::eq(Arc::as_ptr(&core.intake.inbox), self) && core.driving.get() =>
            {
                core.wake_by_header(header);
                true
            }
            _ => false,
        });
        if !local && !waiting_wake(self, header) {
            foreign_wake(self, header);
        }
    }

    /// An abort from a join handle (the CANCELLED bit already set) or an
    /// abort handle: straight to the executor when it is the current one
    /// on this thread, else through its inbox (it then applies the abort
    /// at its next poll boundary, the same one).
    fn abort(&self, header: &Header) {
        let id = header.key;
        let local = context::with_current_ref(|core| match core {
            Some(core) if std::ptr::eq(Arc::as_ptr(&core.intake.inbox), self) => {
                core.abort(id);
                true
            }
            _ => false,
        });
        if !local {
            let _ = self.push_op(RemoteOp::Abort(id));
        }
    }
}

/// A wake on the thread of a nested executor that waits for its host (it
/// is not driving, nor shut down): straight to the task's queue, as a wake
/// inside its turn would go; the queue's activation wakes the host
/// (`Core::on_activation`). No `RefCell` of the core is borrowed then (the
/// core holds none while user code runs, and it runs none between turns).
/// `false`: not that executor's thread, or it drives or is gone.
#[inline]
fn waiting_wake(remote: &Remote, header: &Header) -> bool {
    context::with_waiting(|core| match core {
        Some(core)
            if std::ptr::eq(Arc::as_ptr(&core.intake.inbox), remote)
                && !core.driving.get()
                && !core.shutdown.get() =>
        {
            core.wake_by_header(header);
            true
        }
        _ => false,
    })
}

/// A wake from another thread, or while the executor is not driving:
/// through the inbox. Out of line and cold, so that the inbox's lock and
/// host wakes stay out of the local wake's code.
#[cold]
#[inline(never)]
fn foreign_wake(remote: &Remote, header: &Header) {
    remote.push(header.key, header);
}

/// Model checks of the cross-thread paths between the task core and the
/// inbox (run with `RUSTFLAGS="--cfg tourbillon_loom" cargo test --release
/// --lib loom`).
#[cfg(all(test, tourbillon_loom))]
mod loom_tests {
    use super::*;
    use loom::thread;
    use std::sync::atomic::Ordering;

    #[test]
    fn loom_abort_and_wake_racing_executor_drop() {
        // Another thread holds a clone of a task's waker and the task's id:
        // it wakes the task, sends an abort op and a spawn op (as a remote
        // join handle's `abort()` and a remote spawner do), and drops the
        // waker, while the executor thread shuts down: closes the inbox
        // (dropping the ops it returns) and drops the task slab. The ops
        // are each either refused (dropped by the sender) or returned by
        // `close`, never run; the spawn op is dropped exactly once; the
        // cell is freed exactly once; the counted reference to the remote
        // taken for the waker is given back.
        use crate::task::raw::deallocs;
        use crate::task::slab::TaskSlab;
        use std::sync::atomic::AtomicUsize as StdCount;

        static OP_DROPS: StdCount = StdCount::new(0);
        struct Tracked;
        impl Drop for Tracked {
            fn drop(&mut self) {
                OP_DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }

        loom::model(|| {
            let before = deallocs();
            let drops_before = OP_DROPS.load(Ordering::SeqCst);
            let remote = std::sync::Arc::new(Remote::default());
            let mut slab = TaskSlab::new(remote.clone());
            let (oid, _) = slab.insert(std::future::pending::<()>(), 0, None);
            let id = oid.id();
            let waker = slab.waker_clone(id);
            let r2 = remote.clone();
            let t = thread::spawn(move || {
                waker.wake_by_ref();
                let abort = r2.push_op(RemoteOp::Abort(id)).is_err();
                let tracked = Tracked;
                let spawn = crate::remote::spawner::spawn_op(async move {
                    let _t = tracked;
                    panic!("a spawn op ran after shutdown");
                });
                let spawn = r2.push_op(spawn).is_err();
                drop(waker);
                abort as usize + spawn as usize
            });
            // `Core::shutdown`: the inbox first, then the tasks.
            let ops = remote.close();
            let returned = ops.len();
            drop(ops);
            drop(slab);
            let refused = t.join().unwrap();
            assert_eq!(refused + returned, 2, "an op neither refused nor returned");
            assert_eq!(OP_DROPS.load(Ordering::SeqCst) - drops_before, 1);
            assert_eq!(deallocs() - before, 1, "freed once");
            let mut out = Vec::new();
            let mut late = Vec::new();
            remote.drain_into(&mut out, Some(&mut late));
            assert!(late.is_empty(), "an op queued after close");
            assert!(out.len() <= 1);
            assert_eq!(
                std::sync::Arc::strong_count(&remote),
                1,
                "the cell's reference to the remote was not given back"
            );
        });
    }

    #[test]
    fn loom_join_handle_and_foreign_waker_let_go_once() {
        // A task with a join handle, and a clone of its waker on another
        // thread that wakes and drops it, while the executor shuts down
        // (drops the unfinished future, lets go of the task) and the
        // handle reads `Cancelled` and drops. The three owners (slab, the
        // waker's count, the handle's bit) let go in any order: the cell is
        // freed exactly once, by the last, and the counted reference to the
        // remote taken for the waker is given back.
        use crate::task::raw::deallocs;
        use crate::task::slab::TaskSlab;
        use std::task::Poll;

        loom::model(|| {
            let before = deallocs();
            let remote = std::sync::Arc::new(Remote::default());
            let mut slab = TaskSlab::new(remote.clone());
            let (cell, _) = slab.insert_joined(std::future::pending::<u32>(), 0, None);
            let waker = slab.waker_clone(cell.key());
            let t = thread::spawn(move || {
                waker.wake_by_ref();
                drop(waker);
            });
            drop(slab);
            match cell.poll_result(std::task::Waker::noop()) {
                Poll::Ready(Err(e)) => assert!(e.is_cancelled()),
                other => panic!("expected Cancelled, got {other:?}"),
            }
            drop(cell);
            t.join().unwrap();
            assert_eq!(deallocs() - before, 1, "freed once");
            assert_eq!(
                std::sync::Arc::strong_count(&remote),
                1,
                "the cell's reference to the remote was not given back"
            );
        });
    }

    #[test]
    fn loom_task_waker_refcount_and_inbox_bit() {
        // The real task cell in a real slab: a waker clone on another thread
        // wakes (the inbox bit in the reference-count word) and is dropped,
        // while the executor drains the inbox, clears the bit and drops the
        // slab (a shutdown). The cell is freed exactly once, by whichever
        // side lets go last; the future is dropped exactly once, on the
        // executor's thread; the counted reference to the remote that the
        // cell takes when the slab lets go before the waker is given back.
        use crate::task::raw::deallocs;
        use crate::task::slab::TaskSlab;
        use std::sync::atomic::AtomicUsize as StdCount;

        static FUTURE_DROPS: StdCount = StdCount::new(0);
        struct Tracked;
        impl Drop for Tracked {
            fn drop(&mut self) {
                FUTURE_DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }

        loom::model(|| {
            let before = deallocs();
            let drops_before = FUTURE_DROPS.load(Ordering::SeqCst);
            let remote = std::sync::Arc::new(Remote::default());
            let mut slab = TaskSlab::new(remote.clone());
            let tracked = Tracked;
            let (id, _) = slab.insert(
                async move {
                    let _t = tracked;
                    std::future::pending::<()>().await
                },
                0,
                None,
            );
            let id = id.id();
            let waker = slab.waker_clone(id);
            let t = thread::spawn(move || {
                waker.wake_by_ref();
                waker.wake(); // a second wake before the drain: merged
            });
            let mut out = Vec::new();
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            for id in out.drain(..) {
                slab.clear_remote_notified(id);
            }
            drop(slab); // drops the future here, then gives up the reference
            t.join().unwrap();
            assert_eq!(FUTURE_DROPS.load(Ordering::SeqCst) - drops_before, 1);
            assert_eq!(deallocs() - before, 1, "freed once");
            remote.drain_into(&mut out, Some(&mut Vec::new()));
            assert!(out.len() <= 1, "two wakes enqueued the task twice");
            assert_eq!(
                std::sync::Arc::strong_count(&remote),
                1,
                "the cell's reference to the remote was not given back"
            );
        });
    }
}
