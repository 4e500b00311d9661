//! Loom models of the device thread's nap ([`Nap`], [`doze`]) against the
//! changes that owe it a kick, over a model device: one armed record that
//! completes either when the thread looks after a kick (a submission let
//! it finish) or never on its own — a nap never ends by its timeout here,
//! so a change that does not kick leaves the thread, and the task awaiting
//! the record, asleep for good: loom reports the deadlock.

use std::task::Waker;
use std::time::Duration;

use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use super::task::task;
use crate::driver::wake::nap::{Nap, doze};
use crate::driver::wake::wake_all;
use crate::sync::lock;

/// What the simulator's lock guards, reduced to the protocol.
#[derive(Default)]
struct Device {
    nap: Nap,
    armed: Vec<Waker>,
    /// The armed record completed (the device thread sees it when it looks).
    done: bool,
    shutdown: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<Device>,
    kick: Condvar,
}

/// The device thread: wakes what is due, else naps (planned under the
/// lock, as `device_thread` plans it).
fn device_thread(shared: &Arc<Shared>) -> thread::JoinHandle<()> {
    let shared = Arc::clone(shared);
    thread::spawn(move || {
        loop {
            let mut d = lock(&shared.state);
            if d.shutdown {
                return;
            }
            if d.done && !d.armed.is_empty() {
                let due = std::mem::take(&mut d.armed);
                drop(d);
                wake_all(due);
                continue;
            }
            let nap = Duration::from_millis(50);
            drop(doze(&shared.kick, d, |d| &mut d.nap, 1_000, nap));
        }
    })
}

/// `notify_event`: the record not complete, the waker is armed, and the
/// thread kicked when it sleeps past the arm's target (now: tick 0).
fn arm(shared: &Shared, waker: &Waker) -> bool {
    let mut d = lock(&shared.state);
    if d.done {
        return false;
    }
    d.armed.push(waker.clone());
    let kick = d.nap.sleeps_past(Some(0), 0);
    drop(d);
    if kick {
        shared.kick.notify_all();
    }
    true
}

/// A submission that lets the armed record complete (the workers of the
/// AICPU kernel ahead of it): `fixed`, the kick it owes while a waker is
/// armed; otherwise none (as before the fix).
fn submit(shared: &Shared, fixed: bool) {
    let mut d = lock(&shared.state);
    d.done = true;
    let kick = fixed && d.nap.owes_kick(!d.armed.is_empty());
    drop(d);
    if kick {
        shared.kick.notify_all();
    }
}

/// The simulator's drop: the thread ends, the armed wakers are dropped.
fn shut_down(shared: &Shared, th: thread::JoinHandle<()>) {
    let mut d = lock(&shared.state);
    d.shutdown = true;
    let armed = std::mem::take(&mut d.armed);
    drop(d);
    drop(armed);
    shared.kick.notify_all();
    th.join().unwrap();
}

fn arm_then_submission(fixed: bool) {
    let shared = Arc::new(Shared::default());
    let th = device_thread(&shared);
    let (t, waker) = task();
    let submitter = {
        let shared = Arc::clone(&shared);
        thread::spawn(move || submit(&shared, fixed))
    };
    if arm(&shared, &waker) {
        t.wait(1);
    }
    submitter.join().unwrap();
    shut_down(&shared, th);
}

#[test]
fn loom_nap_an_armed_record_a_submission_completes_is_woken() {
    super::check(
        "loom_nap_an_armed_record_a_submission_completes_is_woken",
        || {
            arm_then_submission(true);
        },
    );
}

/// The negative control: a submission that owes no kick (as before the
/// fix) leaves the napping thread to its nap's end.
#[test]
#[ignore = "negative control: must fail with a deadlock (.ci/loom runs it)"]
fn loom_nap_before_fix_a_submission_leaves_the_thread_napping() {
    super::check(
        "loom_nap_before_fix_a_submission_leaves_the_thread_napping",
        || {
            arm_then_submission(false);
        },
    );
}

/// The simulator's drop ends a napping thread, whatever it was doing.
#[test]
fn loom_nap_a_shutdown_ends_the_thread() {
    super::check("loom_nap_a_shutdown_ends_the_thread", || {
        let shared = Arc::new(Shared::default());
        let th = device_thread(&shared);
        let (_t, waker) = task();
        arm(&shared, &waker);
        shut_down(&shared, th);
    });
}

/// Arm versus destroy: a task arms on one thread while the simulator is
/// dropped on another. Whichever comes first, the device thread ends (a
/// nap the drop did not kick would be loom's deadlock), and once the
/// device is gone no clone of the task's waker is left behind.
#[test]
fn loom_nap_an_arm_racing_the_drop_ends_the_thread_and_keeps_no_waker() {
    super::check(
        "loom_nap_an_arm_racing_the_drop_ends_the_thread_and_keeps_no_waker",
        || {
            let shared = Arc::new(Shared::default());
            let th = device_thread(&shared);
            let (t, waker) = task();
            let armer = {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    arm(&shared, &waker);
                })
            };
            shut_down(&shared, th);
            armer.join().unwrap();
            drop(shared);
            assert_eq!(
                std::sync::Arc::strong_count(&t),
                1,
                "a waker outlived the device"
            );
        },
    );
}
