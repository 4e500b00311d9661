//! The poison names the run that faulted, on every path — "the run that
//! overran or faulted, not a later run that met it".
//!
//! A kernel fault on run #2 leaves its stream in an error state; run #3's
//! launch then fails on that stream. The launch error says it met #2's
//! fault ([`ErrorKind::FaultAhead`]), and [`Health::poisoned`] names #2 and
//! its slot — on the AICPU stream (where #3's AICore kernel was already
//! queued, so #3 is lost and its slot quarantined) and on the AICore stream
//! (where nothing of #3 was submitted, so the prepared run comes back), on
//! the stepped and on the real-time simulator.
//!
//! Negative controls: when no earlier run reports a fault — the launch
//! call itself fails — the launch is still #3's own `PartialLaunch` /
//! `FenceNotRecorded`, naming #3.
//!
//! Every scenario runs under both built-in kernel ABIs
//! (`common::abi::each`): runclaim's layout and the a2a3 layout.
//!
//! [`Health::poisoned`]: runclaim::contract::Health

mod common;

use std::time::{Duration, Instant};

use common::abi::{Abi, each};
use runclaim::contract::{ErrorKind, PoisonCause, RunId};
use runclaim::driver::Op;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, Device, Input, Outputs, Pipeline, RunSpec};

fn cfg() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

/// Real time on a loaded host: a kernel starts 20 ms after it is queued
/// and the watchdog is 200 ms, so a preempted host thread still finishes a
/// launch (kernels, events) before its kernel can fault, and a faulted
/// run's AICore workers time out long after the next launch. What the
/// tests assert holds either way (see `launch_or_named`); the margins only
/// keep the interesting interleaving the common one.
fn real_time_cfg() -> SimConfig {
    let latency = runclaim::sim::LatencyModel::default().dispatch_gap(Duration::from_millis(20));
    SimConfig::default()
        .watchdog(Duration::from_millis(200))
        .latency(latency)
}

fn inc() -> [Callable; 1] {
    [Callable::program("inc", &Program::new().add(1))]
}

/// Drives the device until the armed kernel fault has fired: by steps on
/// the stepped simulator, by waiting on the real-time one (a generous
/// backstop, not a timing claim: the fault fires within a few kernels).
fn until_faulted(sim: &SimDriver) {
    let backstop = Instant::now() + Duration::from_secs(60);
    while sim.stats().kernel_faults == 0 {
        sim.step();
        assert!(Instant::now() < backstop, "the armed fault never fired");
        std::thread::yield_now();
    }
}

/// Run #1 launched in slot 0 and run #2 prepared in slot 1.
fn one_launched_one_prepared<'r>(
    runner: &'r runclaim::Runner<'_, SimDriver, 3>,
    code: runclaim::CodeRef<'r>,
) -> (
    runclaim::Run<'r, runclaim::Launched, 0>,
    runclaim::Run<'r, runclaim::Prepared, 1>,
) {
    let spec = |v: &'static [u32]| RunSpec::new(code, Input::Host(v));
    let r1 = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec(&[1]))
        .unwrap()
        .launch()
        .unwrap();
    let p2 = runner
        .prepare(runner.take_slot::<1>().unwrap(), spec(&[2]))
        .unwrap();
    (r1, p2)
}

/// Runs #1 and #2 launched, the fault armed on #2's kernel of `kernel`;
/// once it has fired, #3 is launched: its error and the poison must name #2.
/// (`sim` speaks `abi`.)
fn third_meets_the_second_fault(sim: &SimDriver, abi: Abi, kernel: Kernel) {
    let mut dev = Device::<_, 3>::open(sim.clone(), abi.config()).unwrap();
    let mut runner = dev.publish(&inc()).unwrap();
    let code = runner.code("inc").unwrap();
    sim.inject(Fault::KernelFault { kernel, nth: 2 });
    let spec = |v: &'static [u32]| RunSpec::new(code, Input::Host(v));
    let (r1, p2) = one_launched_one_prepared(&runner, code);
    let second = p2.id();
    let r2 = match p2.launch() {
        Ok(r2) => r2,
        Err(e) => {
            // Real time only: #2's own kernel faulted before its launch
            // finished recording its fence. Then #2's launch itself meets
            // the fault — and the poison names #2 as a device fault.
            assert!(sim.is_real_time(), "stepped: #2 launches: {e}");
            assert!(matches!(e.kind(), ErrorKind::FenceNotRecorded(_)), "{e}");
            let p = runner.health().poisoned.expect("poisoned");
            assert_eq!(
                (p.cause, p.run, p.slot),
                (PoisonCause::DeviceFault, Some(second), Some(1))
            );
            return;
        }
    };
    until_faulted(sim);
    let p3 = runner
        .prepare(runner.take_slot::<2>().unwrap(), spec(&[3]))
        .unwrap();
    let third = p3.id();
    let err = p3.launch().unwrap_err();
    assert_eq!(err.run(), Some(third), "the error is #3's launch: {err}");
    assert!(
        matches!(err.kind(), ErrorKind::FaultAhead { run, slot: 1, .. } if *run == second),
        "{kernel:?}: #3's launch should say it met #2's fault: {err}"
    );
    let p = runner.health().poisoned.expect("poisoned");
    assert_eq!(
        (p.cause, p.run, p.slot),
        (PoisonCause::DeviceFault, Some(second), Some(1)),
        "{kernel:?}: the poison names the run that faulted, not #3"
    );
    match kernel {
        // #3's AICore kernel was queued before its AICPU launch failed: the
        // run is lost and its slot quarantined.
        // (In real time #2's AICore workers, never released, may also have
        // hit the watchdog by then, stopping the AICore stream too: then
        // nothing of #3 was submitted and it comes back — also right.)
        Kernel::Aicpu => {
            let real_time = sim.is_real_time();
            if err.value().is_none() {
                assert!(runner.health().quarantined.contains(2));
            } else {
                assert!(
                    real_time,
                    "stepped: #3's AICore kernel was queued, so #3 is lost"
                );
            }
        }
        // Nothing of #3 was submitted: the prepared run comes back.
        Kernel::Aicore => assert!(err.value().is_some(), "nothing was submitted"),
    }
    drop(err);
    // #2 comes back with its own fault; the poison still names it.
    let e2 = r2.fence().unwrap_err();
    assert!(matches!(e2.kind(), ErrorKind::Fault(_)), "{e2}");
    assert_eq!(runner.health().poisoned.and_then(|p| p.run), Some(second));
    drop((e2, r1));
    // A drain proves the queue quiet; the runner computes right again.
    runner.drain().unwrap();
    let code = runner.code("inc").unwrap();
    let mut out = Outputs::<2>::new(1);
    let again = RunSpec::new(code, Input::Host(&[41]));
    runner
        .run_serial(runner.take_slot::<2>().unwrap(), again, &mut out)
        .unwrap();
    assert_eq!(out.values(), &[42]);
}

#[test]
fn stepped_aicpu_fault_is_named_by_the_launch_that_meets_it() {
    each(|abi| {
        third_meets_the_second_fault(&abi.stepped(cfg()), abi, Kernel::Aicpu);
    });
}

#[test]
fn stepped_aicore_fault_is_named_by_the_launch_that_meets_it() {
    each(|abi| {
        third_meets_the_second_fault(&abi.stepped(cfg()), abi, Kernel::Aicore);
    });
}

#[test]
fn real_time_aicpu_fault_is_named_by_the_launch_that_meets_it() {
    each(|abi| {
        common::or_abort_after(Duration::from_secs(120), "real-time AICPU fault", || {
            third_meets_the_second_fault(&abi.real_time(real_time_cfg()), abi, Kernel::Aicpu);
        });
    });
}

#[test]
fn real_time_aicore_fault_is_named_by_the_launch_that_meets_it() {
    each(|abi| {
        common::or_abort_after(Duration::from_secs(120), "real-time AICore fault", || {
            third_meets_the_second_fault(&abi.real_time(real_time_cfg()), abi, Kernel::Aicore);
        });
    });
}

/// Negative control: no earlier run faulted — #3's own launch call fails
/// (its AICPU launch, or the record of its fence). The error and the
/// poison are #3's own, as before.
fn third_fails_on_its_own(sim: &SimDriver, abi: Abi, op: Op, nth: u64, cause: PoisonCause) {
    let mut dev = Device::<_, 3>::open(sim.clone(), abi.config()).unwrap();
    let runner = dev.publish(&inc()).unwrap();
    let code = runner.code("inc").unwrap();
    let spec = |v: &'static [u32]| RunSpec::new(code, Input::Host(v));
    let (r1, p2) = one_launched_one_prepared(&runner, code);
    let r2 = p2.launch().unwrap();
    sim.inject(Fault::FailCall { op, nth });
    let p3 = runner
        .prepare(runner.take_slot::<2>().unwrap(), spec(&[3]))
        .unwrap();
    let third = p3.id();
    let err = p3.launch().unwrap_err();
    match cause {
        PoisonCause::PartialLaunch => {
            assert!(matches!(err.kind(), ErrorKind::PartialLaunch(_)), "{err}");
        }
        _ => assert!(
            matches!(err.kind(), ErrorKind::FenceNotRecorded(_)),
            "{err}"
        ),
    }
    let p = runner.health().poisoned.expect("poisoned");
    assert_eq!((p.cause, p.run, p.slot), (cause, Some(third), Some(2)));
    // The runs ahead are healthy and complete with the right values.
    let mut o0 = Outputs::<0>::new(1);
    let mut o1 = Outputs::<1>::new(1);
    r1.fence().unwrap().finalize(&mut o0).unwrap();
    r2.fence().unwrap().finalize(&mut o1).unwrap();
    assert_eq!((o0.values(), o1.values()), (&[2][..], &[3][..]));
}

#[test]
fn negative_control_stepped_a_launch_that_fails_itself_is_its_own_partial_launch() {
    each(|abi| {
        let sim = abi.stepped(cfg());
        // Counted from arming: #3's AICPU launch is the first.
        third_fails_on_its_own(&sim, abi, Op::LaunchAicpu, 1, PoisonCause::PartialLaunch);
    });
}

#[test]
fn negative_control_stepped_a_fence_that_fails_itself_is_its_own() {
    each(|abi| {
        let sim = abi.stepped(cfg());
        // Counted from arming: #3's first event record.
        third_fails_on_its_own(&sim, abi, Op::RecordEvent, 1, PoisonCause::FenceNotRecorded);
    });
}

#[test]
fn negative_control_real_time_a_launch_that_fails_itself_is_its_own_partial_launch() {
    each(|abi| {
        common::or_abort_after(Duration::from_secs(120), "real-time control", || {
            let sim = abi.real_time(real_time_cfg());
            third_fails_on_its_own(&sim, abi, Op::LaunchAicpu, 1, PoisonCause::PartialLaunch);
        });
    });
}

/// The user's report, through a real-time pipeline: an AICPU fault armed
/// on the 21st run. However the host and device interleave (a later submit
/// may meet the fault before `complete` reaches #21), the poison names #21
/// and its slot, and every run before it comes back with its value.
#[test]
fn real_time_pipeline_poison_names_the_faulted_run_not_a_later_submit() {
    each(|abi| {
        common::or_abort_after(Duration::from_secs(120), "real-time pipeline", || {
            let sim = abi.real_time(real_time_cfg());
            let mut dev = Device::<_, 3>::open(sim.clone(), abi.config()).unwrap();
            let runner = dev.publish(&inc()).unwrap();
            let code = runner.code("inc").unwrap();
            sim.inject(Fault::KernelFault {
                kernel: Kernel::Aicpu,
                nth: 21,
            });
            let faulted = RunId::new(21).unwrap();
            let inputs: Vec<[u32; 1]> = (0..40).map(|i| [i]).collect();
            let mut pipe = Pipeline::new(&runner).unwrap();
            let mut good = 0u32;
            for input in &inputs {
                if pipe.is_full() {
                    match pipe.complete() {
                        Ok(Some(done)) => {
                            assert_eq!(done.values, &[done.tag + 1]);
                            good += 1;
                        }
                        Ok(None) => unreachable!("a full pipeline has runs"),
                        Err(_) => break,
                    }
                }
                if pipe
                    .submit(RunSpec::new(code, Input::Host(input)), input[0])
                    .is_err()
                {
                    break;
                }
            }
            let p = runner
                .health()
                .poisoned
                .expect("the fault poisoned the runner");
            assert_eq!(
                (p.cause, p.run, p.slot),
                (PoisonCause::DeviceFault, Some(faulted), Some(2)),
                "the poison names #21 (slot 20 % 3), not a later run that met it"
            );
            // The rest come back in order: the good ones before #21, then
            // failures (each exactly once).
            loop {
                match pipe.complete() {
                    Ok(Some(done)) => {
                        assert_eq!(done.values, &[done.tag + 1]);
                        assert!(done.tag < 20, "run with tag {} after the fault", done.tag);
                        good += 1;
                    }
                    Ok(None) => break,
                    Err(e) => assert!(e.into_value().tag >= 20),
                }
            }
            assert_eq!(good, 20, "every run before #21 came back right");
        });
    });
}

/// A dropped run whose wait failed (a driver error that is neither a fault
/// nor a timeout) cannot be proven complete. That poisons the runner,
/// naming it: nothing behind it could be dated, so without the poison a
/// hung run launched behind it was never judged (every fence "not yet",
/// no poison). After a drain the
/// time rule judges a hung run again.
#[test]
fn an_unproven_dropped_run_poisons_so_a_hang_behind_it_cannot_hide() {
    each(|abi| {
        let sim = abi.stepped(cfg());
        let mut dev = Device::<_, 2>::open(sim.clone(), abi.config()).unwrap();
        let mut runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        let spec = RunSpec::new(code, Input::Host(&[1]));
        let r0 = runner
            .prepare(runner.take_slot::<0>().unwrap(), spec)
            .unwrap()
            .launch()
            .unwrap();
        let first = r0.id();
        sim.inject(Fault::FailCall {
            op: Op::SyncEvent,
            nth: 1,
        });
        drop(r0);
        let h = runner.health();
        let p = h.poisoned.expect("an unproven run poisons");
        assert_eq!(
            (p.cause, p.run, p.slot),
            (PoisonCause::Unproven, Some(first), Some(0))
        );
        assert!(h.quarantined.contains(0));
        let refused = runner
            .prepare(runner.take_slot::<1>().unwrap(), spec)
            .unwrap()
            .launch()
            .unwrap_err();
        assert!(
            matches!(refused.kind(), ErrorKind::Poisoned(_)),
            "{refused}"
        );
        drop(refused);
        runner.drain().unwrap();
        // The time rule works again: a hung run at the head is judged.
        let code = runner.code("inc").unwrap();
        sim.inject(Fault::EventNeverCompletes { nth: 2 });
        let r1 = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                RunSpec::new(code, Input::Host(&[1])),
            )
            .unwrap()
            .launch()
            .unwrap();
        let hung = r1.id();
        let err = r1.fence().unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Timeout { overran: Some(r), .. } if *r == hung),
            "{err}"
        );
        let p = runner.health().poisoned.expect("poisoned");
        assert_eq!((p.cause, p.run), (PoisonCause::Overrun, Some(hung)));
    });
}

/// A device lost while a run is being prepared is nobody's run's fault
/// that the device can name: the poison names no run (it used to name the
/// id the failed prepare had drawn, which the caller never saw).
#[test]
fn a_device_lost_during_prepare_poisons_without_naming_an_unseen_run() {
    each(|abi| {
        let sim = abi.stepped(cfg());
        let mut dev = Device::<_, 2>::open(sim.clone(), abi.config()).unwrap();
        let runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        sim.inject(Fault::DeviceLost { nth: 1 });
        let err = runner
            .prepare(
                runner.take_slot::<0>().unwrap(),
                RunSpec::new(code, Input::Host(&[1])),
            )
            .unwrap_err();
        assert_eq!(err.run(), None);
        assert!(matches!(err.kind(), ErrorKind::Fault(_)), "{err}");
        let p = runner.health().poisoned.expect("a lost device poisons");
        assert_eq!(
            (p.cause, p.run, p.slot),
            (PoisonCause::DeviceFault, None, None)
        );
        assert_eq!(p.to_string(), "device fault");
    });
}
