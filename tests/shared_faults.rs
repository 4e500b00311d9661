//! A fault on a shared device fails the run that faulted, not the device:
//! the runs queued behind it are told whose fault it was, the handle
//! recovers by itself, and no wait is left with nobody bound to wake it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use runclaim::contract::ErrorKind;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};

fn poll<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

fn faulted(nth: u64) -> SharedDevice<SimDriver, 2> {
    let sim = SimDriver::stepped(SimConfig::default());
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicore,
        nth,
    });
    let s = SharedDevice::<_, 2>::open(sim, DeviceConfig::default()).unwrap();
    s.publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
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
    let mut ready = None;
    for _ in 0..100 {
        if let Poll::Ready(r) = poll(&mut fut) {
            ready = Some(r);
            break;
        }
    }
    let ticket = ready.expect("the submission stayed pending").unwrap();
    assert_eq!(ticket.wait().unwrap().values, [4]);
    assert_eq!(s.health().poisoned, None);
}
