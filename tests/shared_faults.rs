//! A fault on a shared device fails the run that faulted, not the device:
//! the runs queued behind it are told whose fault it was, the handle
//! recovers by itself, and no wait is left with nobody bound to wake it.
#![allow(
    clippy::many_single_char_names,
    reason = "the issue's reproduction, kept as written: s, f, a, b"
)]

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use runclaim::contract::ErrorKind;
use runclaim::driver::Op;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};

fn poll<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

/// `fut`'s output within 100 polls with a no-op waker: nothing but its
/// own looks can move it (no clock, no wake).
fn within_100_polls<F: Future + Unpin>(fut: &mut F) -> F::Output {
    for _ in 0..100 {
        if let Poll::Ready(r) = poll(fut) {
            return r;
        }
    }
    panic!("still pending after 100 polls")
}

/// A stepped simulator and a depth-2 shared device on it, `f` (add 1)
/// published.
fn device() -> (SimDriver, SharedDevice<SimDriver, 2>) {
    let sim = SimDriver::stepped(SimConfig::default());
    let s = SharedDevice::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
    s.publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    (sim, s)
}

/// [`device`], the `nth` AICore kernel to start faulting.
fn faulted(nth: u64) -> SharedDevice<SimDriver, 2> {
    let (sim, s) = device();
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicore,
        nth,
    });
    s
}

/// The reproduction of the hang: two runs fail (the first faulted, the
/// second behind it), then a submission polled with a no-op waker — so
/// nothing but its own looks can move it — must resolve, not park.
#[test]
fn a_submission_after_a_failed_fence_resolves_without_a_clock() {
    let s = faulted(1);
    let f = s.code("f").unwrap();
    let a = s.try_submit(RunSpec::new(f, Input::Host(&[1]))).unwrap();
    let b = s.try_submit(RunSpec::new(f, Input::Host(&[2]))).unwrap();
    let (ra, rb) = (a.run(), b.run());
    let ea = a.wait().unwrap_err();
    let eb = b.wait().unwrap_err();
    assert!(matches!(ea.kind(), ErrorKind::Fault(_)), "{ea}");
    assert_eq!(ea.run(), Some(ra));
    match eb.kind() {
        ErrorKind::FaultAhead { run, .. } => assert_eq!(*run, ra, "{eb}"),
        k => panic!("run {rb} behind the fault got {k}"),
    }
    let mut fut = s.submit(RunSpec::new(f, Input::Host(&[3])));
    let ticket = within_100_polls(&mut fut).unwrap();
    assert_eq!(ticket.wait().unwrap().values, [4]);
    assert_eq!(s.health().poisoned, None);
}

/// The same after a fault, blocking: `submit_blocking` recovers with the
/// device's blocking drain, and `health()` counts the recovery.
#[test]
fn a_blocking_submission_recovers_the_device_and_health_counts_it() {
    let s = faulted(1);
    let f = s.code("f").unwrap();
    let a = s
        .submit_blocking(RunSpec::new(f, Input::Host(&[1])))
        .unwrap();
    let ra = a.run();
    assert_eq!(a.wait().unwrap_err().run(), Some(ra));
    let h = s.health();
    assert!(h.poisoned.is_some_and(|p| p.run == Some(ra)), "{h:?}");
    assert_eq!(h.recoveries, 0);
    let t = s
        .submit_blocking(RunSpec::new(f, Input::Host(&[7])))
        .unwrap();
    assert_eq!(t.wait().unwrap().values, [8]);
    let h = s.health();
    assert_eq!(
        (h.poisoned, h.recoveries, h.recovering, h.lost),
        (None, 1, false, None)
    );
    assert!(h.last_recovery.is_some());
}

/// A publication queued behind a fault recovers the device and publishes
/// (blocking and awaited).
#[test]
fn a_publication_after_a_fault_recovers_and_publishes() {
    let s = faulted(1);
    let f = s.code("f").unwrap();
    let a = s.try_submit(RunSpec::new(f, Input::Host(&[1]))).unwrap();
    a.wait().unwrap_err();
    s.publish(&[Callable::program("f", &Program::new().add(10))])
        .unwrap();
    let g = s.code("f").unwrap();
    let t = s
        .submit_blocking(RunSpec::new(g, Input::Host(&[1])))
        .unwrap();
    assert_eq!(t.wait().unwrap().values, [11]);

    let s = faulted(1);
    let f = s.code("f").unwrap();
    let a = s.try_submit(RunSpec::new(f, Input::Host(&[1]))).unwrap();
    a.wait().unwrap_err();
    let callables = [Callable::program("f", &Program::new().add(20))];
    let mut publish = s.publish_async(&callables);
    within_100_polls(&mut publish).unwrap();
    assert_eq!(s.health().recoveries, 1);
}

/// While the recovery still waits for a run in flight, `try_submit`
/// refuses with `Recovering` naming the run that poisoned the device and
/// hands the work back; `submit_blocking` waits for the recovery, which
/// settles the run in flight into its ticket. (The poison here is a
/// partial launch: the second run's AICPU launch fails after its AICore
/// kernel was queued, while the first run is still on the stepped device.)
#[test]
fn try_submit_while_recovering_is_refused_retryably() {
    let (sim, s) = device();
    let f = s.code("f").unwrap();
    let a = s.try_submit(RunSpec::new(f, Input::Host(&[1]))).unwrap();
    sim.inject(Fault::FailCall {
        op: Op::LaunchAicpu,
        nth: 1,
    });
    let partial = s
        .try_submit(RunSpec::new(f, Input::Host(&[2])))
        .unwrap_err();
    assert!(
        matches!(partial.kind(), ErrorKind::PartialLaunch(_)),
        "{partial}"
    );
    let rb = partial.run();
    let refused = s
        .try_submit(RunSpec::new(f, Input::Host(&[3])))
        .unwrap_err();
    assert_eq!(refused.kind(), &ErrorKind::Recovering { from: rb });
    assert!(s.health().recovering);
    let back = refused.into_value();
    let t = s.submit_blocking(back).unwrap();
    assert_eq!(t.wait().unwrap().values, [4]);
    assert_eq!(a.wait().unwrap().values, [2], "the run ahead completed");
    assert_eq!(s.health().recoveries, 1);
}

/// A run that overran (its fence completes past its budget) poisons the
/// device, naming itself; the next submission recovers it.
#[test]
fn an_overrun_poisons_and_the_next_submission_recovers() {
    let sim = SimDriver::stepped(SimConfig::default());
    let budget = std::time::Duration::from_secs(6);
    let config = DeviceConfig::default().fence_timeout(budget);
    sim.inject(Fault::DelayEvent {
        nth: 2,
        delay: budget + budget / 2,
    });
    let s = SharedDevice::<_, 2>::open(sim, config).unwrap();
    s.publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let f = s.code("f").unwrap();
    let a = s
        .submit_blocking(RunSpec::new(f, Input::Host(&[1])))
        .unwrap();
    let ra = a.run();
    let e = a.wait().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Timeout { overran: Some(r), .. } if *r == ra),
        "{e}"
    );
    let t = s
        .submit_blocking(RunSpec::new(f, Input::Host(&[2])))
        .unwrap();
    assert_eq!(t.wait().unwrap().values, [3]);
    assert_eq!((s.health().recoveries, s.health().poisoned), (1, None));
}

/// A device whose recovery fails (the device is lost: every call fails)
/// closes itself: every waiter is answered with the cause, the work
/// handed back, and `health()` says why.
#[test]
fn a_device_that_cannot_recover_closes_itself_with_the_cause() {
    let (sim, s) = device();
    let f = s.code("f").unwrap();
    let a = s.try_submit(RunSpec::new(f, Input::Host(&[1]))).unwrap();
    sim.inject(Fault::DeviceLost { nth: 1 });
    assert!(a.wait().is_err());
    let mut fut = s.submit(RunSpec::new(f, Input::Host(&[2])));
    let e = within_100_polls(&mut fut).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Lost(_)), "{e}");
    let back = e.into_value();
    let h = s.health();
    assert!(h.lost.is_some(), "{h:?}");
    assert!(s.is_closed());
    let again = s.submit_blocking(back).unwrap_err();
    assert!(matches!(again.kind(), ErrorKind::Lost(_)), "{again}");
}

/// The same rule in a typed pipeline: the run behind the fault is told
/// whose fault it was; a drain recovers.
#[test]
fn a_pipeline_run_behind_a_fault_names_the_culprit() {
    use runclaim::{Device, Pipeline};
    let sim = SimDriver::stepped(SimConfig::default());
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicore,
        nth: 1,
    });
    let mut device = Device::<_, 2>::open(sim, DeviceConfig::default()).unwrap();
    let runner = device
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = Pipeline::new(&runner).unwrap();
    let ra = pipe
        .submit(RunSpec::new(code, Input::Host(&[1])), 0)
        .unwrap();
    pipe.submit(RunSpec::new(code, Input::Host(&[2])), 1)
        .unwrap();
    let first = pipe.complete().map(|_| ()).unwrap_err();
    assert!(matches!(first.kind(), ErrorKind::Fault(_)), "{first}");
    let second = pipe.complete().map(|_| ()).unwrap_err();
    assert!(
        matches!(second.kind(), ErrorKind::FaultAhead { run, .. } if *run == ra),
        "{second}"
    );
    pipe.drain().unwrap();
    pipe.submit(RunSpec::new(code, Input::Host(&[5])), 2)
        .unwrap();
    assert_eq!(pipe.complete().unwrap().map(|d| d.values[0]), Some(6));
}

/// A submission dropped while it advances a recovery takes nothing with
/// it: the recovery stays at the head, and the next submission finishes it.
#[test]
fn a_submission_cancelled_mid_recovery_leaves_it_to_the_next() {
    let (sim, shared) = device();
    let code = shared.code("f").unwrap();
    let first = shared
        .try_submit(RunSpec::new(code, Input::Host(&[1])))
        .unwrap();
    sim.inject(Fault::FailCall {
        op: Op::LaunchAicpu,
        nth: 1,
    });
    let partial = shared.try_submit(RunSpec::new(code, Input::Host(&[2])));
    assert!(partial.is_err());
    let mut cancelled = shared.submit(RunSpec::new(code, Input::Host(&[3])));
    assert!(
        poll(&mut cancelled).is_pending(),
        "the run ahead is not complete yet"
    );
    assert!(shared.health().recovering);
    drop(cancelled);
    let next = shared
        .submit_blocking(RunSpec::new(code, Input::Host(&[4])))
        .unwrap();
    assert_eq!(next.wait().unwrap().values, [5]);
    assert_eq!(first.wait().unwrap().values, [2]);
    let h = shared.health();
    assert_eq!((h.recoveries, h.recovering, h.poisoned), (1, false, None));
}

/// `run` passes a collateral error through as it is, never retrying: the
/// run behind a faulted one resolves to `FaultAhead` naming it, and the
/// device launched nothing more for it.
#[test]
fn run_passes_a_collateral_error_through_unretried() {
    let s = faulted(1);
    let f = s.code("f").unwrap();
    let a = s.try_submit(RunSpec::new(f, Input::Host(&[1]))).unwrap();
    let ra = a.run();
    let behind = s.run_blocking(RunSpec::new(f, Input::Host(&[2])));
    let e = behind.unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::FaultAhead { run, .. } if *run == ra),
        "{e}"
    );
    assert_eq!(e.collateral(), Some(Some(ra)));
    assert_eq!(s.stats().launched, 2, "no retry");
    assert!(matches!(a.wait().unwrap_err().kind(), ErrorKind::Fault(_)));
}
