//! Loom models of the reactor core ([`Reactor`]), the loop the `acl`
//! driver's reactor thread runs, over a model runtime: `report` is
//! `aclrtProcessReport` (answers at once with nothing subscribed, else
//! waits until a callback is due and runs it on the calling thread, or
//! until the thread's subscriptions end), `launch` queues a callback that
//! is due at once. A timed wait never times out here, so a wake that only
//! a timeout would deliver leaves a thread asleep for good: loom reports
//! the deadlock.

use std::time::Duration;

use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

use super::task::task;
use crate::driver::wake::reactor::{Arming, Limits, Pending, Reactor, Waited};
use crate::driver::wake::wake_all;

const LIMITS: Limits = Limits {
    min: Duration::from_nanos(1),
    max: Duration::from_millis(100),
};
const STREAM: u64 = 7;
const EVENT: u64 = 9;

type Core = Reactor<u64, u64>;

#[derive(Default)]
struct Rt {
    subscribed: Vec<u64>,
    due: Vec<usize>,
    faulted: bool,
}

/// The model runtime.
#[derive(Default)]
struct Runtime {
    st: Mutex<Rt>,
    cv: Condvar,
}

impl Runtime {
    fn report(&self, core: &Core) -> Waited {
        let mut rt = self.st.lock().unwrap();
        if rt.subscribed.is_empty() {
            return Waited::Answered;
        }
        loop {
            if !rt.due.is_empty() {
                let due = std::mem::take(&mut rt.due);
                drop(rt);
                for t in due {
                    if let Some(w) = core.fired(t) {
                        wake_all(w);
                    }
                }
                return Waited::Waited;
            }
            if rt.subscribed.is_empty() {
                return Waited::Waited;
            }
            rt = self.cv.wait(rt).unwrap();
        }
    }

    #[allow(
        clippy::unnecessary_wraps,
        reason = "the shape of the runtime call Reactor::subscribe makes"
    )]
    fn subscribe(&self, s: u64) -> Result<(), ()> {
        self.st.lock().unwrap().subscribed.push(s);
        Ok(())
    }

    fn launch(&self, s: u64, ticket: usize) {
        let mut rt = self.st.lock().unwrap();
        assert!(
            rt.subscribed.contains(&s),
            "launched on an unsubscribed stream"
        );
        rt.due.push(ticket);
        drop(rt);
        self.cv.notify_all();
    }

    /// The shutdown's unsubscriptions: a waiting report returns.
    fn unsubscribe_all(&self) {
        self.st.lock().unwrap().subscribed.clear();
        self.cv.notify_all();
    }
}

fn pending(generation: u64) -> Pending {
    Pending {
        stream: STREAM,
        event: EVENT,
        generation,
    }
}

/// The reactor thread, as `Hub::run` runs it (`fixed`), or as it ran
/// before the idle wait compared the changes.
fn reactor(core: &Arc<Core>, rt: &Arc<Runtime>, fixed: bool) -> thread::JoinHandle<()> {
    let (core, rt) = (Arc::clone(core), Arc::clone(rt));
    thread::spawn(move || {
        let report = |_| rt.report(&core);
        if fixed {
            core.serve(|| 0, report, wake_all);
        } else {
            core.serve_before_fix(|| 0, report, wake_all);
        }
        wake_all(core.exit());
    })
}

/// The last driver's drop: stop, unsubscribe, join.
fn shutdown(core: &Core, rt: &Runtime, thread: thread::JoinHandle<()>) {
    let (_, woken) = core.stop();
    rt.unsubscribe_all();
    assert!(core.wait_exited(Duration::from_secs(60)));
    thread.join().unwrap();
    wake_all(woken);
}

/// A fresh device's first awaited run: `queue_notify` (subscribe, expect,
/// launch the callback) then `notify_event` (arm), while the reactor
/// thread starts with nothing subscribed. The task must be woken by the
/// callback.
fn first_run(fixed: bool) {
    let core = Arc::new(Core::new(LIMITS));
    let rt = Arc::new(Runtime::default());
    let r = reactor(&core, &rt, fixed);
    core.subscribe(STREAM, || rt.subscribe(STREAM)).unwrap();
    core.expect(1, pending(1));
    rt.launch(STREAM, 1);
    let (t, waker) = task();
    let faults = core.faults();
    match core.arm(EVENT, 1, None, faults, &waker) {
        Arming::Ready => {}
        Arming::Armed { .. } => t.wait(1),
        other => panic!("{other:?}"),
    }
    shutdown(&core, &rt, r);
}

#[test]
fn loom_reactor_a_subscription_is_never_slept_through() {
    super::check("loom_reactor_a_subscription_is_never_slept_through", || {
        first_run(true);
    });
}

/// The negative control: the idle wait as it was, looking at the stop
/// alone. Loom finds the interleaving — the runtime answers "nothing
/// subscribed", the subscription lands, the reactor sleeps — and reports
/// the deadlock a timed wait hid as a 100 ms delay.
#[test]
#[ignore = "negative control: must fail with a deadlock (.ci/loom runs it)"]
fn loom_reactor_before_fix_sleeps_through_a_subscription() {
    super::check(
        "loom_reactor_before_fix_sleeps_through_a_subscription",
        || first_run(false),
    );
}

/// A fault under stop-on-failure (its callback never runs) reported by
/// the runtime's exception callback, on a thread of its own, while a task
/// looks at its event (not complete) and arms. `early`: the fault counter
/// is read before the look, as `notify_event` does; otherwise at the arm
/// (what comparing nothing amounts to).
fn fault_while_arming(early: bool) {
    let core = Arc::new(Core::new(LIMITS));
    let rt = Arc::new(Runtime::default());
    core.subscribe(STREAM, || rt.subscribe(STREAM)).unwrap();
    core.expect(1, pending(1));
    let fault = {
        let (core, rt) = (Arc::clone(&core), Arc::clone(&rt));
        thread::spawn(move || {
            rt.st.lock().unwrap().faulted = true;
            wake_all(core.fault());
        })
    };
    let (t, waker) = task();
    let mut faults = core.faults();
    let faulted = rt.st.lock().unwrap().faulted;
    if !faulted {
        if !early {
            faults = core.faults();
        }
        match core.arm(EVENT, 1, None, faults, &waker) {
            Arming::Faulted => waker.wake_by_ref(),
            Arming::Armed { .. } => {}
            other => panic!("{other:?}"),
        }
        t.wait(1);
    }
    fault.join().unwrap();
}

#[test]
fn loom_reactor_a_fault_report_is_never_missed_by_an_arm() {
    super::check(
        "loom_reactor_a_fault_report_is_never_missed_by_an_arm",
        || fault_while_arming(true),
    );
}

/// The negative control: an arm that compares nothing keeps a waker the
/// fault report has already passed by.
#[test]
#[ignore = "negative control: must fail with a deadlock (.ci/loom runs it)"]
fn loom_reactor_an_arm_blind_to_faults_misses_the_report() {
    super::check(
        "loom_reactor_an_arm_blind_to_faults_misses_the_report",
        || fault_while_arming(false),
    );
}

/// A deadline: while the task is armed, the reactor's round ends by it,
/// or the arm said to hand it to the timer as well.
#[test]
fn loom_reactor_a_deadline_is_never_past_the_rounds_end_unseen() {
    super::check(
        "loom_reactor_a_deadline_is_never_past_the_rounds_end_unseen",
        || {
            let core = Arc::new(Core::new(LIMITS));
            let rt = Arc::new(Runtime::default());
            core.subscribe(STREAM, || rt.subscribe(STREAM)).unwrap();
            core.expect(1, pending(1));
            let r = reactor(&core, &rt, true);
            let (_t, waker) = task();
            let deadline = 10;
            match core.arm(EVENT, 1, Some(deadline), core.faults(), &waker) {
                Arming::Armed { timer_too: true } => {}
                Arming::Armed { timer_too: false } => {
                    let w = core.waits_until();
                    assert!(w.is_none_or(|w| w <= deadline), "the round ends at {w:?}");
                }
                other => panic!("{other:?}"),
            }
            shutdown(&core, &rt, r);
        },
    );
}

/// The stop ends a reactor that waits for a subscription.
#[test]
fn loom_reactor_a_stop_ends_an_idle_reactor() {
    super::check("loom_reactor_a_stop_ends_an_idle_reactor", || {
        let core = Arc::new(Core::new(LIMITS));
        let rt = Arc::new(Runtime::default());
        let r = reactor(&core, &rt, true);
        shutdown(&core, &rt, r);
    });
}
