//! The synchronisation primitives the storage layer shares between threads.
//!
//! Everything that readers and the writer share goes through this module, so
//! that building with `RUSTFLAGS="--cfg loom"` swaps std's primitives for
//! loom's and the publication protocol can be model-checked.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard};

/// Locks a mutex, ignoring poisoning: every critical section here leaves its
/// data consistent before it can panic, so a poisoned lock holds valid data.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Read-locks an `RwLock`, ignoring poisoning (see [`lock`]).
pub(crate) fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// Write-locks an `RwLock`, ignoring poisoning (see [`lock`]).
#[cfg(not(loom))]
pub(crate) fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// Write-locks an `RwLock`, ignoring poisoning (see [`lock`]).
#[cfg(loom)]
pub(crate) fn write<T>(l: &RwLock<T>) -> loom::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}
