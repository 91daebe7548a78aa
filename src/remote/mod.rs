#![forbid(unsafe_code)]
//! Cross-thread intake: everything by which other threads reach an
//! executor, and how that work enters it.
//!
//! * [`RemoteSpawner`] submits `Send` futures to an executor's queues from
//!   any thread; [`RemoteJoinHandle`] awaits or aborts such a task
//!   (`spawner.rs`). [`BoundedRemoteSpawner`] does the same with a
//!   capacity: at most that many of its tasks wait for their first poll
//!   (`bounded.rs`, its semaphore in `gate.rs`). The launch forms (a
//!   future, or a `Send` closure that makes one on the executor's thread)
//!   are `launch.rs`.
//! * What they send is a [`RemoteOp`](op::RemoteOp) in the executor's
//!   inbox (`inbox.rs`, a short-lock queue generic over its ops, which
//!   also carries foreign wakes and unparks the executor; `op.rs`).
//! * On the executor's thread, at each poll boundary, the [`Intake`](intake::Intake)
//!   takes the inbox's wakes and ops, and makes tasks of the spawns that
//!   their queue's admission window lets in; the others wait in the
//!   remote backlog (`backlog.rs`, rule T9 of docs/design.md).
//!
//! The layer reaches the executor only through [`Target`](target::Target)
//! (`target.rs`), which the executor implements; it imports nothing of
//! the executor. A remote spawn's walk: `spawner.rs` (`RemoteSpawner::spawn`,
//! `submit`) → `inbox.rs` (`Inbox::push_op`) → `intake.rs`
//! (`Intake::at_boundary`, on the executor's thread) → `backlog.rs` (the
//! window, the line, the `Ticket`) → `spawner.rs` (`SpawnOp::run`) →
//! `Target::spawn_detached`; at the task's first poll its `Ticket`
//! (`ticket.rs`) gives its place in the window back.

pub(crate) mod backlog;
pub(crate) mod bounded;
pub(crate) mod gate;
pub(crate) mod inbox;
pub(crate) mod intake;
pub(crate) mod launch;
pub(crate) mod op;
pub(crate) mod spawner;
pub(crate) mod target;
pub(crate) mod ticket;

pub use self::bounded::{BoundedRemoteSpawner, SpawnWait};
pub use self::spawner::{RemoteJoinHandle, RemoteSpawner};
pub use crate::error::TrySpawnError;
