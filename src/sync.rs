#![forbid(unsafe_code)]
//! The synchronisation primitives of the cross-thread wake path, swapped for
//! loom's model-checked versions under `--cfg tourbillon_loom` (a crate-
//! specific cfg, so that dependencies such as tokio build as usual).

#[cfg(tourbillon_loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize};
#[cfg(tourbillon_loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};

#[cfg(not(tourbillon_loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize};
#[cfg(not(tourbillon_loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};
