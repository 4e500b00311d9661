//! Loom models of the timer core ([`TimerCore`]) that
//! [`wake_after`](crate::driver::wake_after) arms: its thread against
//! arms, re-arms and its own expiry. The model's clock stands at 0: an
//! entry at 0 is due, one later never is (its timed wait never times out
//! here), so an arm that is due must wake the thread — a missed
//! notification leaves it asleep for good, which loom reports as a
//! deadlock.

use loom::sync::Arc;
use loom::thread;

use super::task::task;
use crate::driver::wake::timer::TimerCore;

fn start(timer: &Arc<TimerCore<u64>>) -> thread::JoinHandle<()> {
    let t = Arc::clone(timer);
    thread::spawn(move || t.run(|| 0))
}

fn stop(timer: &TimerCore<u64>, thread: thread::JoinHandle<()>) {
    timer.close();
    thread.join().unwrap();
}

/// A task armed for later re-arms for now, while the timer sleeps towards
/// the later time (or is about to): its later entry goes, the timer is
/// woken for the earlier one, the task is woken once, nothing stays armed.
#[test]
fn loom_timer_a_re_arm_for_an_earlier_time_wakes_the_timer() {
    super::check(
        "loom_timer_a_re_arm_for_an_earlier_time_wakes_the_timer",
        || {
            let timer = Arc::new(TimerCore::<u64>::new());
            let (a, wa) = task();
            timer.arm(5, &wa);
            let th = start(&timer);
            timer.arm(0, &wa);
            a.wait(1);
            assert_eq!(a.woken(), 1, "one entry per task");
            assert_eq!(timer.armed(), 0);
            stop(&timer, th);
        },
    );
}

/// The negative control: an arm that does not tell the thread it became
/// the earliest leaves the timer asleep towards the later entry.
#[test]
#[ignore = "negative control: must fail with a deadlock (.ci/loom runs it)"]
fn loom_timer_an_arm_that_tells_nobody_is_slept_through() {
    super::check(
        "loom_timer_an_arm_that_tells_nobody_is_slept_through",
        || {
            let timer = Arc::new(TimerCore::<u64>::new());
            let (a, wa) = task();
            let (_late, wl) = task();
            timer.arm(5, &wl);
            let th = start(&timer);
            timer.arm_silently(0, &wa);
            a.wait(1);
            stop(&timer, th);
        },
    );
}

/// Two tasks arm for now from two threads while the timer runs: both are
/// woken.
#[test]
fn loom_timer_concurrent_arms_are_all_woken() {
    super::check("loom_timer_concurrent_arms_are_all_woken", || {
        let timer = Arc::new(TimerCore::<u64>::new());
        let th = start(&timer);
        let other = {
            let timer = Arc::clone(&timer);
            thread::spawn(move || {
                let (b, wb) = task();
                timer.arm(0, &wb);
                b.wait(1);
            })
        };
        let (a, wa) = task();
        timer.arm(0, &wa);
        a.wait(1);
        other.join().unwrap();
        stop(&timer, th);
    });
}

/// A task re-arms for now while the timer takes its due entry out and
/// wakes it: the re-arm is either folded into the entry still armed (one
/// wake, after it) or armed anew (a second wake) — never lost.
#[test]
fn loom_timer_a_re_arm_racing_its_expiry_is_never_lost() {
    super::check(
        "loom_timer_a_re_arm_racing_its_expiry_is_never_lost",
        || {
            let timer = Arc::new(TimerCore::<u64>::new());
            let (a, wa) = task();
            timer.arm(0, &wa);
            let th = start(&timer);
            let before = a.woken();
            timer.arm(0, &wa);
            // A wake comes after this point: the first entry's, if the re-arm
            // found it still armed, else the re-arm's own.
            a.wait(before + 1);
            stop(&timer, th);
        },
    );
}

/// An entry for later is kept, not woken, while an entry for now is.
#[test]
fn loom_timer_a_later_entry_waits_and_an_earlier_one_does_not() {
    super::check(
        "loom_timer_a_later_entry_waits_and_an_earlier_one_does_not",
        || {
            let timer = Arc::new(TimerCore::<u64>::new());
            let th = start(&timer);
            let (late, wl) = task();
            let (now, wn) = task();
            timer.arm(5, &wl);
            timer.arm(0, &wn);
            now.wait(1);
            assert_eq!(late.woken(), 0);
            assert_eq!(timer.armed(), 1);
            stop(&timer, th);
        },
    );
}
