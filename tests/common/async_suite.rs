//! The awaited waits, scenario by scenario: written once against
//! [`Target`], instantiated with [`async_suite!`] for the simulator and for
//! the `acl` driver over the fake runtime library. Every scenario runs on a
//! **real-time** device (a stepped one moves only when driven — the
//! simulator-only tests in `tests/async_sim.rs` drive it) and awaits on one
//! executor thread (`pollster`), bounded by [`or_abort_after`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use runclaim::contract::{ErrorKind, PoisonCause};
use runclaim::driver::Op;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, SimConfig};
use runclaim::{Callable, Device, Input, Outputs, Pipeline, RunSpec};

use super::join::join_all;
use super::{LaunchIn, Target, or_abort_after};

/// Generates one `#[test]` per scenario for a target expression, and
/// `every_async_suite_function_is_listed`.
#[macro_export]
macro_rules! async_suite {
    ($target:expr) => {
        $crate::async_suite!(@tests $target;
            async_pipelines_on_two_devices_at_depth_4_on_one_thread,
            awaited_fault_is_the_fences_verdict_and_a_drain_recovers,
            awaited_overrun_names_the_hung_run,
            awaited_fence_for_runs_out_as_not_yet,
            a_dropped_pending_fence_never_waits_and_leaves_the_run_to_the_device,
            a_forgotten_future_then_the_device_dropped_is_bounded,
            cancelled_completes_lose_no_result_and_no_tag,
            a_cancelled_drain_changes_nothing_and_the_next_one_recovers,
        );
    };
    (@tests $target:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::common::async_suite::$name(&$target);
            }
        )*

        #[test]
        fn every_async_suite_function_is_listed() {
            let listed = [$(stringify!($name)),*];
            if let Err(e) = $crate::common::listed::check($crate::common::async_suite::SOURCE, &listed) {
                panic!("async_suite!: {e}");
            }
        }
    };
}

/// This file, for [`super::listed::check`] against `async_suite!`'s list.
pub const SOURCE: &str = include_str!("async_suite.rs");

/// The backstop of every scenario: generous, never a timing claim.
const BACKSTOP: Duration = Duration::from_secs(120);

/// The simulator's defaults (a 100 ms watchdog, so a 200 ms fence
/// timeout): a real-time device on a loaded machine must never fault a
/// healthy kernel, so no scenario shortens the watchdog.
fn cfg() -> SimConfig {
    SimConfig::default()
}

/// 50 ms kernels, for the scenarios whose faulting run is queued behind a
/// healthy one: its kernels start (and fault) only once that one is done,
/// well after its own launch returned — a fault met during the launch
/// would be the launch's error instead (as the contract reports it).
fn slow() -> SimConfig {
    cfg().latency(runclaim::sim::LatencyModel::default().kernel(Duration::from_millis(50)))
}

/// `3x + 1`.
fn f(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(1)
}

fn callables() -> [Callable; 1] {
    [Callable::program("f", &Program::new().mul(3).add(1))]
}

/// Wakes counted; the executor's own waker is not needed for a poll by
/// hand.
#[derive(Default)]
pub struct Counted(pub AtomicUsize);

impl Wake for Counted {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// Polls `fut` once with `waker`.
pub fn poll_once<F: Future + Unpin>(fut: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(waker))
}

/// 1,000 runs through two async pipelines, one per device, at depth 4,
/// awaited on one executor thread: every value right, every tag back once,
/// in submission order, every third run chained on the one before.
pub fn async_pipelines_on_two_devices_at_depth_4_on_one_thread<T: Target>(t: &T) {
    or_abort_after(BACKSTOP, "two async pipelines", || {
        let mut devs = [0, 1]
            .map(|_| Device::<_, 4>::open(t.real_time(cfg()), t.config().max_elements(4)).unwrap());
        let [a, b] = &mut devs;
        let runners = [
            a.publish(&callables()).unwrap(),
            b.publish(&callables()).unwrap(),
        ];
        let [ra, rb] = &runners;
        let seen = join_all(vec![
            Box::pin(pipeline_task(ra, 0)),
            Box::pin(pipeline_task(rb, 1 << 20)),
        ]);
        assert_eq!(seen, [500, 500]);
        for r in &runners {
            let h = r.health();
            assert_eq!((h.in_flight, h.poisoned), (0, None));
        }
    });
}

/// 500 runs through a depth-4 pipeline on `runner`, awaited: how many came
/// back (each checked).
async fn pipeline_task<D: runclaim::driver::Driver>(
    runner: &runclaim::Runner<'_, D, 4>,
    base: u32,
) -> u32 {
    let code = runner.code("f").unwrap();
    let mut pipe = Pipeline::<_, 4, (u32, u32)>::new(runner).unwrap();
    let mut want = std::collections::VecDeque::new();
    let mut seen = 0u32;
    let mut last = 0u32;
    for i in 0..500u32 {
        if pipe.is_full() {
            let done = pipe.complete_async().await.unwrap().expect("pending");
            assert_eq!(Some(done.tag), want.pop_front(), "order");
            assert_eq!(done.values, &[done.tag.1; 4][..]);
            seen += 1;
        }
        let x = [base + i; 4];
        let (spec, expect) = if i % 3 == 2 {
            (RunSpec::new(code, Input::Previous), f(last))
        } else {
            (RunSpec::new(code, Input::Host(&x)), f(x[0]))
        };
        last = expect;
        pipe.submit(spec, (i, expect)).unwrap();
        want.push_back((i, expect));
    }
    while let Some(done) = pipe.complete_async().await.unwrap() {
        assert_eq!(Some(done.tag), want.pop_front(), "order");
        assert_eq!(done.values, &[done.tag.1; 4][..]);
        seen += 1;
    }
    seen
}

/// A fault awaited is the verdict a blocking fence gives (the runner
/// poisoned, naming the run); an awaited drain recovers, and the next
/// awaited run is right.
pub fn awaited_fault_is_the_fences_verdict_and_a_drain_recovers<T: Target>(t: &T) {
    or_abort_after(BACKSTOP, "an awaited fault", || {
        let d = t.real_time(slow());
        // The second run's AICPU kernel faults, behind a healthy first run.
        t.inject(
            &d,
            Fault::KernelFault {
                kernel: Kernel::Aicpu,
                nth: 2,
            },
        );
        let mut dev = Device::<_, 2>::open(d, t.config()).unwrap();
        let mut runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        let healthy = runner.launched::<0>(code, Input::Host(&[1]));
        let run = runner.launched::<1>(code, Input::Host(&[1]));
        let id = run.id();
        let err = pollster::block_on(run.fence_async()).unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Fault(_)), "{err}");
        let p = runner.health().poisoned.expect("poisoned");
        assert_eq!((p.cause, p.run), (PoisonCause::DeviceFault, Some(id)));
        drop(err);
        // The healthy run ahead completed before the fault: it still fences.
        drop(pollster::block_on(healthy.fence_async()));
        let report = pollster::block_on(runner.drain_async()).unwrap();
        assert!(report.cleared.is_some());
        let code = runner.code("f").unwrap();
        let run = runner.launched::<0>(code, Input::Host(&[2]));
        let mut out = Outputs::<0>::new(1);
        pollster::block_on(run.fence_async())
            .unwrap()
            .finalize(&mut out)
            .unwrap();
        assert_eq!(out.values(), &[f(2)]);
    });
}

/// A run whose fence never completes, awaited: the overrun verdict names
/// it (poisoning the runner) as a blocking fence would — the wake at the
/// verdict time comes from the driver, not from a completion.
pub fn awaited_overrun_names_the_hung_run<T: Target>(t: &T) {
    or_abort_after(BACKSTOP, "an awaited overrun", || {
        let d = t.real_time(cfg());
        let mut dev = Device::<_, 2>::open(d, t.config()).unwrap();
        let mut runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        // The launch's second record is its fence.
        t.inject(
            runner.device().driver(),
            Fault::EventNeverCompletes { nth: 2 },
        );
        let run = runner.launched::<0>(code, Input::Host(&[1]));
        let id = run.id();
        let err = pollster::block_on(run.fence_async()).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Timeout { overran: Some(r), .. } if *r == id),
            "{err}"
        );
        let p = runner.health().poisoned.expect("poisoned");
        assert_eq!((p.cause, p.run), (PoisonCause::Overrun, Some(id)));
        // The run is unproven: its drop quarantines at once.
        drop(err);
        assert_eq!(
            pollster::block_on(runner.drain_async()).unwrap().released,
            1
        );
        assert_eq!(runner.health().poisoned, None);
    });
}

/// `fence_for_async` running out of time is only "not yet": the run comes
/// back, nothing is poisoned, and it can be awaited again.
pub fn awaited_fence_for_runs_out_as_not_yet<T: Target>(t: &T) {
    or_abort_after(BACKSTOP, "an awaited fence_for", || {
        // 50 ms kernels: the run is not complete at the first look.
        let d = t.real_time(slow());
        let mut dev = Device::<_, 2>::open(d, t.config()).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        // A zero limit: out of time at the first look that finds the run
        // not complete.
        let run = runner.launched::<0>(code, Input::Host(&[1]));
        let e = pollster::block_on(run.fence_for_async(Duration::ZERO)).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Timeout { overran: None, .. }),
            "{e}"
        );
        let run = e.into_value();
        assert_eq!(runner.health().poisoned, None);
        let mut out = Outputs::<0>::new(1);
        pollster::block_on(run.fence_async())
            .unwrap()
            .finalize(&mut out)
            .unwrap();
        assert_eq!(out.values(), &[f(1)]);
    });
}

/// Dropping a pending fence future makes no blocking driver call (a
/// blocking run's drop would wait on its fence): the run is left to the
/// device as a forgotten run — in flight, its slot taken — until a drain
/// proves it complete.
pub fn a_dropped_pending_fence_never_waits_and_leaves_the_run_to_the_device<T: Target>(t: &T) {
    or_abort_after(BACKSTOP, "a dropped fence future", || {
        let d = t.real_time(cfg());
        let mut dev = Device::<_, 2>::open(d, t.config()).unwrap();
        let mut runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        t.inject(
            runner.device().driver(),
            Fault::EventNeverCompletes { nth: 2 },
        );
        let run = runner.launched::<0>(code, Input::Host(&[1]));
        let mut fut = run.fence_async();
        let waker = Waker::from(Arc::new(Counted::default()));
        assert!(poll_once(&mut fut, &waker).is_pending());
        let blocking = |s: &runclaim::sim::SimStats| {
            [Op::SyncEvent, Op::SyncStream].map(|op| s.calls.get(&op).copied().unwrap_or(0))
        };
        let before = blocking(&t.stats(runner.device().driver()));
        drop(fut);
        assert_eq!(
            blocking(&t.stats(runner.device().driver())),
            before,
            "the drop waited"
        );
        let h = runner.health();
        assert_eq!((h.in_flight, h.poisoned), (1, None));
        assert!(
            runner.take_slot::<0>().is_err(),
            "the forgotten run keeps its slot"
        );
        // The drain proves it (it never completes: it waits its budget and
        // reports it undrained, or the device dropped its work).
        let _ = pollster::block_on(runner.drain_async());
    });
}

/// A future forgotten with its run pending, then the runner and the device
/// dropped: bounded (the device waits for the forgotten run as for any
/// other), no panic.
pub fn a_forgotten_future_then_the_device_dropped_is_bounded<T: Target>(t: &T) {
    or_abort_after(BACKSTOP, "a forgotten future", || {
        let d = t.real_time(cfg());
        let probe = t.probe(&d);
        let mut dev = Device::<_, 2>::open(d, t.config()).unwrap();
        {
            let runner = dev.publish(&callables()).unwrap();
            let code = runner.code("f").unwrap();
            let run = runner.launched::<0>(code, Input::Host(&[1]));
            let mut fut = run.fence_async();
            let waker = Waker::from(Arc::new(Counted::default()));
            let _ = poll_once(&mut fut, &waker);
            std::mem::forget(fut);
        }
        drop(dev);
        let s = probe();
        assert_eq!(s.streams_created, s.streams_destroyed, "{s:?}");
    });
}

/// `complete_async` cancelled after one poll, again and again: no result
/// and no tag is lost; every run comes back exactly once, in order.
pub fn cancelled_completes_lose_no_result_and_no_tag<T: Target>(t: &T) {
    or_abort_after(BACKSTOP, "cancelled completes", || {
        // 5 ms kernels: the oldest run is still running at most first
        // looks, so completes are cancelled (counted below).
        let latency = runclaim::sim::LatencyModel::default().kernel(Duration::from_millis(5));
        let sim = t.real_time(cfg().latency(latency));
        let mut dev = Device::<_, 4>::open(sim, t.config()).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        let mut pipe = Pipeline::<_, 4, u32>::new(&runner).unwrap();
        let waker = Waker::from(Arc::new(Counted::default()));
        let mut back = Vec::new();
        let mut cancelled = 0;
        for x in 0..40u32 {
            if pipe.is_full() {
                loop {
                    let mut fut = pipe.complete_async();
                    if let Poll::Ready(r) = poll_once(&mut fut, &waker) {
                        let done = r.unwrap().expect("pending");
                        assert_eq!(done.values, &[f(done.tag)]);
                        back.push(done.tag);
                        break;
                    }
                    cancelled += 1;
                    drop(fut);
                    std::thread::yield_now();
                }
            }
            pipe.submit(RunSpec::new(code, Input::Host(&[x])), x)
                .unwrap();
        }
        while let Some(done) = pollster::block_on(pipe.complete_async()).unwrap() {
            assert_eq!(done.values, &[f(done.tag)]);
            back.push(done.tag);
        }
        assert_eq!(back, (0..40).collect::<Vec<_>>());
        // Cancellations happened (how many depends on the machine): the
        // scenario tested what it names.
        assert!(cancelled > 0, "no complete was ever cancelled");
    });
}

/// A drain cancelled while pending changes nothing (the runner stays
/// poisoned, the pending results stay); the next drain recovers and the
/// settled outcomes come back from `complete`.
pub fn a_cancelled_drain_changes_nothing_and_the_next_one_recovers<T: Target>(t: &T) {
    or_abort_after(BACKSTOP, "a cancelled drain", || {
        let d = t.real_time(slow());
        t.inject(
            &d,
            Fault::KernelFault {
                kernel: Kernel::Aicpu,
                nth: 2,
            },
        );
        let mut dev = Device::<_, 2>::open(d, t.config()).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        let mut pipe = Pipeline::<_, 2, u32>::new(&runner).unwrap();
        pipe.submit(RunSpec::new(code, Input::Host(&[1])), 1)
            .unwrap();
        pipe.submit(RunSpec::new(code, Input::Host(&[2])), 2)
            .unwrap();
        let waker = Waker::from(Arc::new(Counted::default()));
        {
            let mut drain = pipe.drain_async();
            let _ = poll_once(&mut drain, &waker);
        }
        let report = pollster::block_on(pipe.drain_async()).unwrap();
        assert!(report.cleared.is_some(), "{report:?}");
        let first = pollster::block_on(pipe.complete_async())
            .unwrap()
            .expect("kept");
        assert_eq!((first.tag, first.values[0]), (1, f(1)));
        let second = pollster::block_on(pipe.complete_async()).unwrap_err();
        assert!(matches!(second.kind(), ErrorKind::Fault(_)), "{second}");
        assert_eq!(second.into_value().tag, 2);
        assert!(pollster::block_on(pipe.complete_async()).unwrap().is_none());
        pipe.submit(RunSpec::new(code, Input::Host(&[3])), 3)
            .unwrap();
        let again = pollster::block_on(pipe.complete_async())
            .unwrap()
            .expect("pending");
        assert_eq!(again.values[0], f(3));
    });
}
