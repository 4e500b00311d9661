//! Loom model of a shared device's last drop on a driver's callback
//! thread: the thread that wakes tasks holds its own lock while it calls
//! a waker, and a waker may own the last handle (a task dropped when it is
//! woken, a runtime shutting down). The handle's debt — its runs' fences
//! and the device's teardown — needs that very thread to go on (the
//! teardown unsubscribes the device's streams from it), so it must be
//! paid elsewhere ([`pay_elsewhere`], what [`Inner`](super::Inner)'s drop
//! calls). The model's waits never time out: a debt paid on the callback
//! thread leaves it waiting on itself for good, which loom reports as a
//! deadlock (the negative control shows it).

use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use crate::sync::pay_elsewhere;

/// The callback thread's state: what it holds its lock over.
struct Reactor {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    /// The device's streams were unsubscribed (its teardown ran).
    unsubscribed: bool,
    /// The callback thread was told to stop.
    stop: bool,
}

impl Reactor {
    fn new() -> std::sync::Arc<Self> {
        std::sync::Arc::new(Reactor {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        })
    }

    /// The device's teardown as far as the callback thread sees it: it
    /// takes the thread's lock to unsubscribe.
    fn unsubscribe(&self) {
        self.state.lock().unwrap().unsubscribed = true;
        self.cv.notify_all();
    }

    /// Blocks until the teardown ran (no timeout: a lost one is a deadlock).
    fn wait_unsubscribed(&self) {
        let mut st = self.state.lock().unwrap();
        while !st.unsubscribed {
            st = self.cv.wait(st).unwrap();
        }
    }
}

/// The last handle: its drop owes the teardown.
struct Handle {
    reactor: std::sync::Arc<Reactor>,
    /// The pre-fix drop: pay here, on the dropping thread.
    inline: bool,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let reactor = std::sync::Arc::clone(&self.reactor);
        if self.inline {
            reactor.unsubscribe();
        } else {
            pay_elsewhere("runclaim-shared-close", move || reactor.unsubscribe());
        }
    }
}

/// A task's handle and the callback thread: the callback thread, under its
/// lock, drops the task's waker, which owns the last handle; a second
/// handle (another task's) goes at any point of that.
fn last_drop_on_the_callback_thread(name: &'static str, inline: bool) {
    super::check(name, move || {
        let reactor = Reactor::new();
        let handle = Arc::new(Handle {
            reactor: std::sync::Arc::clone(&reactor),
            inline,
        });
        let waker_owned = Arc::clone(&handle);
        let other = thread::spawn(move || drop(handle));
        let r = std::sync::Arc::clone(&reactor);
        let callback = thread::spawn(move || {
            let st = r.state.lock().unwrap();
            // The callback: a woken task's waker, owning a handle, dropped
            // while the thread holds its lock (as a reactor delivering a
            // batch of wakes does).
            drop(waker_owned);
            drop(st);
            // The thread goes on serving until told to stop.
            let mut st = r.state.lock().unwrap();
            while !st.stop && !st.unsubscribed {
                st = r.cv.wait(st).unwrap();
            }
        });
        other.join().unwrap();
        reactor.wait_unsubscribed();
        reactor.state.lock().unwrap().stop = true;
        reactor.cv.notify_all();
        callback.join().unwrap();
    });
}

#[test]
fn loom_last_drop_on_the_callback_thread_is_paid_elsewhere() {
    last_drop_on_the_callback_thread(
        "loom_last_drop_on_the_callback_thread_is_paid_elsewhere",
        false,
    );
}

/// The negative control: the debt paid on the dropping thread, which may
/// be the callback thread holding its lock — it waits on itself.
#[test]
#[ignore = "negative control: must fail with a deadlock (`.ci/loom` checks that it does)"]
fn loom_last_drop_before_fix_paid_on_the_callback_thread_deadlocks() {
    last_drop_on_the_callback_thread(
        "loom_last_drop_before_fix_paid_on_the_callback_thread_deadlocks",
        true,
    );
}
