//! The contract suite's fault scenarios: a run's own error, a partial
//! launch, a fence timeout, a hung run, a kernel fault — each poisons or
//! fails what it must and a drain (or a shared device by itself) recovers.

use std::time::Duration;

use runclaim::contract::{ErrorKind, PoisonCause};
use runclaim::driver::Op;
use runclaim::sim::{Fault, Kernel};
use runclaim::{Input, Outputs, RunSpec};

use super::super::replaying::{self, Captures, Counts, LaunchVia, LaunchedVia};
use super::super::{LaunchIn, Target};
use super::{cfg, open, prog_add};

pub fn known_run_error_fails_that_run_alone<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    t.inject(
        runner.device().driver(),
        Fault::RunError { nth: 1, code: 42 },
    );
    let (mut o0, mut o1) = (Outputs::<0>::new(8), Outputs::<1>::new(8));
    let bad = runner.launched_via::<0>(&mut caps, code, Input::Host(&[1]));
    let good = runner.launched_via::<1>(&mut caps, code, Input::Host(&[7]));
    let bad_id = bad.id();
    let err = bad.fence().unwrap().finalize(&mut o0).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::RunFailed { code: 42 });
    assert_eq!((err.run(), err.slot()), (Some(bad_id), Some(0)));
    assert!(o0.values().is_empty());
    let token0 = err.into_value().into_token();
    assert!(
        runner.health().poisoned.is_none(),
        "a known run error does not poison"
    );
    good.fence().unwrap().finalize(&mut o1).unwrap();
    assert_eq!(
        o1.values(),
        &[8],
        "the queued successor completes correctly"
    );
    // The failed run's slot is usable at once (replaying, its capture
    // replays: the failure was the run's, not the graph's).
    let again = runner.prepare(token0, RunSpec::new(code, Input::Host(&[2])));
    let again = again
        .unwrap()
        .launch_via(&mut caps)
        .unwrap()
        .fence()
        .unwrap();
    again.finalize(&mut o0).unwrap();
    assert_eq!(o0.values(), &[3]);
    let replaying = Counts::replaying(2, 1, 0);
    caps.expect(runner.device().stats(), replaying);
}

pub fn partial_launch_poisons_until_drained<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    if t.replay() {
        return replaying::a_failed_capture_call_reaches_nothing(t, &mut dev);
    }
    let mut runner = dev.publish(&[prog_add(1)]).unwrap();
    {
        let mut caps = Captures::new(t);
        let code = runner.code("add1").unwrap();
        t.inject(
            runner.device().driver(),
            Fault::FailCall {
                op: Op::LaunchAicpu,
                nth: 1,
            },
        );
        let err = runner
            .prepare(
                runner.take_slot::<0>().unwrap(),
                RunSpec::new(code, Input::Host(&[1])),
            )
            .unwrap()
            .launch_via(&mut caps)
            .unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::PartialLaunch(_)), "{err}");
        assert!(err.value().is_none(), "the run is gone");
        let h = runner.health();
        assert_eq!(
            h.poisoned.map(|p| p.cause),
            Some(PoisonCause::PartialLaunch)
        );
        assert!(h.quarantined.contains(0));
        // No further launch while poisoned; the prepared run comes back.
        let err = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                RunSpec::new(code, Input::Host(&[1])),
            )
            .unwrap()
            .launch_via(&mut caps)
            .unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Poisoned(_)));
        assert!(err.value().is_some());
        assert!(matches!(
            runner.take_slot::<0>().unwrap_err().kind(),
            ErrorKind::SlotQuarantined { .. }
        ));
    }
    // The orphaned AICore kernel ends at the device watchdog; the drain sees
    // the queue quiet, re-creates the faulted stream and releases the slot.
    let report = runner.drain().unwrap();
    assert_eq!(report.released, 1);
    assert!(report.cleared.is_some());
    assert!(runner.health().poisoned.is_none());
    let code = runner.code("add1").unwrap();
    assert_eq!(runner.serial::<0>(code, Input::Host(&[4])), [5]);
}

pub fn fence_timeout_hands_the_run_back<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    // The run's fence (its second record launched, its third captured)
    // becomes visible 3 ms late: longer than a 1 ms wait, shorter than the
    // configured 4 ms fence timeout.
    t.inject(
        runner.device().driver(),
        Fault::DelayEvent {
            nth: replaying::fence_record(t),
            delay: Duration::from_millis(3),
        },
    );
    let run = runner.launched_via::<0>(&mut caps, code, Input::Host(&[1; 8]));
    // A wait shorter than the watchdog: not yet, and nothing is poisoned.
    let err = run.fence_for(Duration::from_millis(1)).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Timeout { overran: None, .. }),
        "{err}"
    );
    assert!(runner.health().poisoned.is_none());
    let mut o = Outputs::<0>::new(8);
    err.into_value().fence().unwrap().finalize(&mut o).unwrap();
    assert_eq!(o.values(), &[2; 8]);
}

pub fn hung_run_poisons_and_quarantines_until_drained<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let mut runner = dev.publish(&[prog_add(1)]).unwrap();
    {
        let mut caps = Captures::new(t);
        let code = runner.code("add1").unwrap();
        // The AICPU stream's completion record never completes.
        t.inject(
            runner.device().driver(),
            Fault::EventNeverCompletes {
                nth: replaying::fence_record(t),
            },
        );
        let run = runner.launched_via::<0>(&mut caps, code, Input::Host(&[1]));
        let id = run.id();
        let err = run.fence().unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Timeout { overran: Some(r), .. } if *r == id),
            "{err}"
        );
        assert_eq!(
            runner.health().poisoned.map(|p| (p.cause, p.run, p.slot)),
            Some((PoisonCause::Overrun, Some(id), Some(0))),
            "attributed to the hung run"
        );
        drop(err); // dropping the unproven run quarantines its slot at once
        assert!(runner.health().quarantined.contains(0));
        // Slot 1 is fine, but nothing launches while poisoned.
        let err = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                RunSpec::new(code, Input::Host(&[1])),
            )
            .unwrap()
            .launch_via(&mut caps)
            .unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Poisoned(_)));
    }
    // The streams themselves are quiet: a drain proves it, and no slot stays
    // blocked for good.
    let r = runner.drain().unwrap();
    assert_eq!((r.released, r.retired), (1, 1));
    let code = runner.code("add1").unwrap();
    assert_eq!(runner.serial::<0>(code, Input::Host(&[1])), [2]);
}

/// A shared device through this driver, one run in three faulting (an
/// injected AICore or AICPU fault): each faulted run fails naming itself,
/// a run behind it names it (`collateral`), the device recovers by itself
/// at the next submission, and every other run's value is right.
pub fn shared_device_recovers_from_faults_by_itself<T: Target>(t: &T) {
    let shared =
        runclaim::SharedDevice::<_, 2>::open(t.stepped(cfg()), t.config().max_elements(64))
            .unwrap();
    shared.publish(&[prog_add(1)]).unwrap();
    shared.replay(t.replay());
    let code = shared.code("add1").unwrap();
    let (mut right, mut own, mut resubmitted) = (0, 0, 0);
    for k in 0..12u32 {
        if k % 3 == 1 {
            let kernel = if k % 2 == 0 {
                Kernel::Aicore
            } else {
                Kernel::Aicpu
            };
            t.inject(
                shared_driver(&shared),
                Fault::KernelFault { kernel, nth: 1 },
            );
        }
        let input = [k];
        loop {
            let ticket = shared
                .submit_blocking(RunSpec::new(code, Input::Host(&input)))
                .unwrap_or_else(|e| panic!("run {k}: submission refused: {e}"));
            let run = ticket.run();
            match ticket.wait() {
                Ok(done) => {
                    assert_eq!(done.values, [k + 1], "run {k}");
                    right += 1;
                    break;
                }
                Err(e) if e.collateral().is_some() => resubmitted += 1,
                Err(e) => {
                    assert_eq!(e.run(), Some(run), "an own fault names its run: {e}");
                    assert!(matches!(e.kind(), ErrorKind::Fault(_)), "{e}");
                    own += 1;
                    break;
                }
            }
        }
    }
    assert_eq!((right + own, own), (12, 4), "resubmitted {resubmitted}");
    let h = shared.health();
    assert_eq!(h.recoveries, 4, "{h:?}");
    assert_eq!((h.poisoned, h.lost), (None, None));
    let s = shared.stats();
    if t.replay() {
        // Every run replayed; each recovery let every graph go, so a run
        // after it captured again; the rest replayed a held capture.
        assert_eq!(s.replays, s.launched, "{s:?}");
        assert!(s.captures > h.recoveries && s.captures < s.replays, "{s:?}");
    } else {
        assert_eq!((s.captures, s.replays), (0, 0), "{s:?}");
    }
}

/// The driver behind a shared device (its faults are armed through it).
fn shared_driver<D: runclaim::driver::Driver>(s: &runclaim::SharedDevice<D, 2>) -> &D {
    s.driver()
}

pub fn kernel_fault_poisons_and_drain_recovers<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let mut runner = dev.publish(&[prog_add(1)]).unwrap();
    {
        let mut caps = Captures::new(t);
        let code = runner.code("add1").unwrap();
        t.inject(
            runner.device().driver(),
            Fault::KernelFault {
                kernel: Kernel::Aicpu,
                nth: 1,
            },
        );
        let r0 = runner.launched_via::<0>(&mut caps, code, Input::Host(&[1]));
        let r1 = runner.launched_via::<1>(&mut caps, code, Input::Host(&[2]));
        let e0 = r0.fence().unwrap_err();
        assert!(matches!(e0.kind(), ErrorKind::Fault(_)), "{e0}");
        let e1 = r1.fence().unwrap_err();
        // The successor was dropped by the faulted stream: its error names
        // the run that faulted, never the fault as its own.
        assert!(
            matches!(e1.kind(), ErrorKind::FaultAhead { run, .. } if Some(*run) == e0.run()),
            "{e1}"
        );
        assert_eq!(
            runner.health().poisoned.map(|p| p.cause),
            Some(PoisonCause::DeviceFault)
        );
        drop((e0, e1));
        assert_eq!(runner.health().quarantined.len(), 2);
    }
    let report = runner.drain().unwrap();
    if t.replay() {
        // The kernels ran on their graphs' own streams: the faulted replay
        // faulted the AICPU stream it was queued on, and the AICore stream
        // held nothing. Every graph is let go of with the faulted streams.
        assert_eq!(report.streams_recreated, 1, "the AICPU stream alone");
        let graphs = t.stats(runner.device().driver()).live_graphs;
        assert_eq!(
            graphs, 0,
            "the drain waited for the graphs and destroyed them"
        );
    } else {
        assert_eq!(
            report.streams_recreated, 2,
            "both streams faulted (AICore by watchdog)"
        );
    }
    let code = runner.code("add1").unwrap();
    assert_eq!(runner.serial::<1>(code, Input::Host(&[9])), [10]);
}
