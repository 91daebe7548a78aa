#![forbid(unsafe_code)]
//! Spawning from other threads: `Send` futures onto an executor's
//! queues, from any thread.
//!
//! [`Executor::remote_spawner`](crate::Executor::remote_spawner) gives a
//! [`RemoteSpawner`]: `Send + Sync` and clonable, it spawns onto any
//! queue by key, and its [`RemoteJoinHandle`] can be awaited on any
//! thread. For backpressure,
//! [`Executor::bounded_remote_spawner`](crate::Executor::bounded_remote_spawner)
//! gives a [`BoundedRemoteSpawner`]: at most `capacity` of its tasks wait
//! for their first poll at any time; its `spawn(..).await` ([`SpawnWait`])
//! waits for room, and its `try_spawn` returns [`TrySpawnError::Full`]
//! with the future (tokio's `mpsc::Sender` `send` and `try_send`).
//!
//! The executor takes remote spawns at its poll boundaries, in arrival
//! order per queue, and makes them tasks while fewer than 64 remote tasks
//! of their queue wait for their first poll (rule T9 of docs/design.md).

// The layer, file by file: the handles (`spawner.rs`, `bounded.rs` with its
// semaphore `gate.rs`, the launch forms `launch.rs`); what they send, a
// `RemoteOp` (`op.rs`) in the executor's inbox (`inbox.rs`, a short-lock
// queue generic over its ops, which also carries foreign wakes and unparks
// the executor); on the executor's thread at each poll boundary, the
// `Intake` (`intake.rs`) takes the inbox's wakes and ops and makes tasks of
// the spawns their queue's admission window lets in, the others waiting in
// the remote backlog (`backlog.rs`); a remote task holds its place in the
// window with a `Ticket` (`ticket.rs`) until its first poll; what an
// admitted spawn does is `admission.rs`. The layer
// reaches the executor only through `Target` (`target.rs`), which
// `executor/core.rs` implements; it imports nothing of the executor.
//
// A remote spawn's walk enters each file once: `spawner.rs`
// (`RemoteSpawner::spawn`, `submit`) -> `op.rs` -> `inbox.rs`
// (`Inbox::push_op`) -> `intake.rs` (`Intake::at_boundary`, on the
// executor's thread) -> `backlog.rs` (the window, the line) -> `ticket.rs`
// (`Ticket::new`) -> `admission.rs` (`SpawnOp::run`) -> `target.rs`
// (`Target::spawn_detached`, the executor stores the task).

pub(crate) mod admission;
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
pub use crate::error::try_spawn::TrySpawnError;
