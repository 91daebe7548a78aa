#![forbid(unsafe_code)]
//! [`Schedule`]: where a task's wakes and aborts go. The task core knows no
//! executor: every task cell points to a sink of this trait (the executor's
//! thread-safe half), which its wakers and handles call from any thread.

use crate::task::raw::Header;

/// The executor side of a task, as its wakers and handles see it: an
/// object shared by all tasks of one executor, reached from any thread.
///
/// The task core calls it through the cell's vtable; the executor
/// implements it (`executor::wake`), and the task core's unit tests use a
/// sink that records what it receives.
pub(crate) trait Schedule: Send + Sync + Sized + 'static {
    /// A wake of the task whose header is `header`, from its waker on any
    /// thread (the header is alive for the call).
    fn wake(&self, header: &Header);

    /// An abort of the task whose header is `header`, from its join handle
    /// (executor thread) or an abort handle (any thread). The join handle
    /// sets the task's CANCELLED bit first; an abort handle cannot (the
    /// state bits belong to the executor's thread) and leaves it to the
    /// sink.
    fn abort(&self, header: &Header);
}
