//! Loom model of a shared device's admission after a failed fence — the
//! protocol of `submit.rs` and `recovery.rs`, as a model (the hub's lock
//! is std's and the hub needs a device and its driver, which a loom model
//! cannot run; the protocol is small enough to state whole, as
//! `loom_last_drop.rs` states its own).
//!
//! Two threads. A ticket's task settles the one lane's run, whose fence
//! fails: the lane is left stuck (its slot held by the orphaned run) and
//! the device poisoned; the settle wakes the head arrival (`Hub::collect`
//! → `wake_head`). A submission is the head arrival: under the lock it
//! looks — a free lane is taken; a stuck lane or a poisoned device starts
//! a recovery, which this look finishes (on the stepped simulator the
//! faulted streams are quiet at once); a lane that owes a result is waited
//! for, the waker armed (the condvar: only the settle notifies it). The
//! model's waits never time out, so a submission parked with nothing armed
//! is a deadlock. The negative control is the protocol before the fix: a
//! stuck lane was neither free nor owed, so the look parked on it.

use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// The one lane, as the hub sees it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// A launched run owes its ticket a result.
    Owes,
    /// Its fence failed: the orphaned run holds the slot.
    Stuck,
    Free,
}

struct Hub {
    state: Mutex<(Lane, bool)>,
    /// The head arrival's waker.
    head: Condvar,
}

fn admission_after_a_failed_fence(name: &'static str, recovers: bool) {
    super::check(name, move || {
        let hub = Arc::new(Hub {
            state: Mutex::new((Lane::Owes, false)),
            head: Condvar::new(),
        });
        let h = Arc::clone(&hub);
        let ticket = thread::spawn(move || {
            // The ticket's look: the fence fails, the device is poisoned,
            // the lane keeps the orphan; the head is woken.
            let mut st = h.state.lock().unwrap();
            *st = (Lane::Stuck, true);
            drop(st);
            h.head.notify_all();
        });
        // The submission: the head arrival's looks.
        let mut st = hub.state.lock().unwrap();
        loop {
            let (lane, poisoned) = *st;
            if lane == Lane::Free && !poisoned {
                break; // admitted
            }
            if recovers && (lane == Lane::Stuck || poisoned) {
                // The recovery: settle (nothing owed), drain, renew.
                *st = (Lane::Free, false);
                continue;
            }
            if !recovers && lane == Lane::Free {
                break;
            }
            // Before the fix a stuck lane landed here too, with nothing
            // left to notify the waker.
            st = hub.head.wait(st).unwrap();
        }
        drop(st);
        ticket.join().unwrap();
    });
}

#[test]
fn loom_admission_after_a_failed_fence_recovers() {
    admission_after_a_failed_fence("loom_admission_after_a_failed_fence_recovers", true);
}

/// The negative control: the hub before the fix parks the head on a stuck
/// lane — the reproduction's hang, as loom's deadlock.
#[test]
#[ignore = "negative control: must fail with a deadlock (`.ci/loom` checks that it does)"]
fn loom_admission_before_fix_parks_on_a_stuck_lane() {
    admission_after_a_failed_fence("loom_admission_before_fix_parks_on_a_stuck_lane", false);
}
