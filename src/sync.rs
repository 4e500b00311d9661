//! The lock and condition variable the wake protocols wait on: std's, or
//! loom's in the crate's loom build (`RUSTFLAGS="--cfg loom"`, unit tests
//! only: `.ci/loom`), where the models in `driver::wake` explore every
//! interleaving of them. Only what those protocols share goes through
//! here; every other lock of the crate is std's.

#[cfg(all(test, loom))]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(all(test, loom)))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

/// Locks `m`; a poisoned lock is taken as it is (nothing panics under the
/// locks that go through here but a waker, which is never woken under one).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(all(test, loom))]
use loom::thread;
#[cfg(not(all(test, loom)))]
use std::thread;

/// Runs `owed` on a thread of its own, named `name`, and returns at once:
/// how a last owner pays a debt that may wait (a device's runs and
/// teardown) without waiting on the thread that dropped it — which may be
/// an executor's, or a driver's callback thread whose progress that very
/// wait needs. Without a thread to spare, the spawn's refusal drops
/// `owed`, which pays it here.
pub(crate) fn pay_elsewhere(name: &str, owed: impl FnOnce() + Send + 'static) {
    let _ = thread::Builder::new().name(name.into()).spawn(owed);
}
