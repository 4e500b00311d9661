//! The loom models' task: a waker that counts its wakes, and a wait for
//! them that never times out (so a wake that never comes is loom's
//! deadlock, not a delay).

use std::task::{Wake, Waker};

use loom::sync::{Condvar, Mutex};

/// A task's waker: counts its wakes; the task waits for them.
pub(super) struct Task {
    woken: Mutex<usize>,
    cv: Condvar,
}

impl Wake for Task {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        *self.woken.lock().unwrap() += 1;
        self.cv.notify_all();
    }
}

/// A task and its waker.
pub(super) fn task() -> (std::sync::Arc<Task>, Waker) {
    let t = std::sync::Arc::new(Task {
        woken: Mutex::new(0),
        cv: Condvar::new(),
    });
    (std::sync::Arc::clone(&t), Waker::from(t))
}

impl Task {
    /// Blocks until woken `n` times in all (for good, if nobody does).
    pub(super) fn wait(&self, n: usize) {
        let mut w = self.woken.lock().unwrap();
        while *w < n {
            w = self.cv.wait(w).unwrap();
        }
    }

    /// How many times it was woken so far.
    pub(super) fn woken(&self) -> usize {
        *self.woken.lock().unwrap()
    }
}
