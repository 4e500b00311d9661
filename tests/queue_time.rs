//! Time that knows the queue.
//!
//! - A healthy queue never poisons itself: every run of a deep real-time
//!   queue can be fenced, last first, with the default configuration.
//! - "The device overran" is judged on the driver's clock: a host thread
//!   preempted for far longer than the watchdog never poisons a stepped
//!   (virtual-time) device — and the same wait judged on the host's clock
//!   (a broken driver) does, which is what the test would catch.
//! - A run that really overruns still poisons, attributed to that run, and a
//!   drain recovers.
//! - No deadline or configuration arithmetic panics: `Duration::MAX` and
//!   `usize::MAX` settings are refused with a `ConfigError` naming the value,
//!   or mean "no limit" where a call takes a wait.
//! - `Drop` survives unwinding: panics with runs launched (the user's, or a
//!   driver's inside a wait or a launch) neither abort nor hang, and the
//!   device drops in bounded time.
//!
//! Every scenario with a device runs under both built-in kernel ABIs
//! (`common::abi::each`): runclaim's layout and the a2a3 layout.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::LaunchIn;
use common::abi::{Abi, each};
use common::hooked::{Hooked, Hooks};
use runclaim::contract::{ConfigError, ErrorKind, PoisonCause};
use runclaim::driver::abi::Program;
use runclaim::driver::{Driver, Op};
use runclaim::sim::{Fault, Kernel, LatencyModel, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

const MS: Duration = Duration::from_millis(1);

/// A real-time watchdog where no test means to reach it: a host preempted
/// between a run's two kernel submissions for less than this (minus the
/// kernel) cannot fault the run's AICore kernel.
const SLACK: Duration = Duration::from_secs(2);

/// A depth-2 device on a stepped simulator (2 ms watchdog), both speaking
/// `abi`, whose host side can be made to misbehave; the hooks and the
/// simulator come back too.
fn hooked(abi: Abi) -> (Device<Hooked, 2>, Arc<Hooks>, SimDriver) {
    let hooked = Hooked::new(abi.stepped(SimConfig::default().watchdog(2 * MS)));
    let (hooks, sim) = (Arc::clone(&hooked.hooks), hooked.sim.clone());
    let dev = Device::open(hooked, abi.config()).unwrap();
    (dev, hooks, sim)
}

fn inc() -> [Callable; 1] {
    [Callable::program("inc", &Program::new().add(1))]
}

/// A real-time device speaking `abi` whose kernels take `kernel` under a
/// `watchdog`.
fn real_time(abi: Abi, watchdog: Duration, kernel: Duration) -> SimDriver {
    abi.real_time(
        SimConfig::default()
            .watchdog(watchdog)
            .latency(LatencyModel::default().kernel(kernel)),
    )
}

/// Launches one run per listed slot, each chained on the one before, then
/// fences them **last first** and checks every value: run `k` computes
/// `1 + (k + 1)`.
macro_rules! fence_last_first {
    ($runner:expr, $code:expr, [$($run:ident = $i:literal),+]) => {{
        let runner = &$runner;
        let mut first = true;
        $(
            let input = if first { Input::Host(&[1]) } else { Input::Previous };
            first = false;
            let $run = runner.launched::<$i>($code, input);
        )+
        let _ = first;
        let mut results = Vec::new();
        fence_last_first!(@rev runner, results, [$($run = $i),+]);
        results.sort_unstable();
        results
    }};
    (@rev $runner:ident, $results:ident, [$run:ident = $i:literal $(, $rest:ident = $j:literal)*]) => {
        fence_last_first!(@rev $runner, $results, [$($rest = $j),*]);
        let fenced = $run
            .fence()
            .unwrap_or_else(|e| panic!("fence of slot {}: {e}; health {:?}", $i, $runner.health()));
        let mut out = Outputs::<$i>::new(1);
        fenced.finalize(&mut out).unwrap();
        $results.push(($i, out.values()[0]));
    };
    (@rev $runner:ident, $results:ident, []) => {};
}

/// Depth 4, watchdog 250 ms, every kernel 150 ms (60 %): the last run waits
/// behind three others (~600 ms, more than the 500 ms default budget), and
/// must be fenced, not called hung.
///
/// (Real time leaves one margin to the host: the first run's AICore kernel
/// starts at once and waits for its AICPU kernel's dispatch, so a host
/// preempted between the two submissions for longer than watchdog − kernel
/// faults it, as on the device. That margin is 100 ms here; it was 20 ms.) Before the queue-aware rule this
/// poisoned the runner and quarantined slot 3.
#[test]
fn healthy_depth4_queue_fenced_last_first_never_poisons() {
    each(|abi| {
        let mut dev =
            Device::<_, 4>::open(real_time(abi, 250 * MS, 150 * MS), abi.config()).unwrap();
        let runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        let results = fence_last_first!(runner, code, [a = 0, b = 1, c = 2, d = 3]);
        assert_eq!(results, [(0, 2), (1, 3), (2, 4), (3, 5)]);
        let h = runner.health();
        assert_eq!((h.poisoned, h.quarantined.len()), (None, 0));
    });
}

/// Depth 8, watchdog 150 ms, kernels 45 ms (30 %): eight runs queued, the
/// last fenced first (it waits ~360 ms behind seven others; the default
/// per-run budget is 300 ms). The host's margin (above) is 105 ms.
#[test]
fn healthy_depth8_queue_fenced_last_first_never_poisons() {
    each(|abi| {
        let mut dev =
            Device::<_, 8>::open(real_time(abi, 150 * MS, 45 * MS), abi.config()).unwrap();
        let runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        let results = fence_last_first!(
            runner,
            code,
            [a = 0, b = 1, c = 2, d = 3, e = 4, f = 5, g = 6, h = 7]
        );
        let want: Vec<_> = (0..8).map(|i| (i, u32::try_from(i).unwrap() + 2)).collect();
        assert_eq!(results, want);
        assert_eq!(runner.health().poisoned, None);
    });
}

/// The negative control of the two above: the same queue with kernels that
/// really exceed the watchdog poisons — attributed to the first run, the one
/// that overran, not to the run being fenced — and a drain recovers.
#[test]
fn kernels_past_the_watchdog_poison_attributed_to_the_run_that_overran() {
    each(|abi| {
        let sim = real_time(abi, 20 * MS, 30 * MS);
        let mut dev = Device::<_, 4>::open(sim.clone(), abi.config()).unwrap();
        let mut runner = dev.publish(&inc()).unwrap();
        {
            let code = runner.code("inc").unwrap();
            let first = runner.launched::<0>(code, Input::Host(&[1]));
            let r1 = runner.launched::<1>(code, Input::Previous);
            let r2 = runner.launched::<2>(code, Input::Previous);
            let last = runner.launched::<3>(code, Input::Previous);
            let first_id = first.id();
            let err = last.fence().unwrap_err();
            // The last run met the first's fault: its error names that run.
            assert!(
                matches!(err.kind(), ErrorKind::FaultAhead { run, slot: 0, .. } if *run == first_id),
                "{err}"
            );
            assert_eq!(
                runner.health().poisoned.map(|p| (p.cause, p.run, p.slot)),
                Some((PoisonCause::DeviceFault, Some(first_id), Some(0))),
                "the poison names the run that overran"
            );
            drop((first, r1, r2, err));
        }
        let report = runner.drain().unwrap();
        assert!(report.cleared.is_some() && report.streams_recreated > 0);
        drop(runner);
        // Healthy kernels run again on the recovered device.
        let mut dev2 = Device::<_, 2>::open(real_time(abi, SLACK, MS), abi.config()).unwrap();
        let r = dev2.publish(&inc()).unwrap();
        assert_eq!(
            r.serial::<0>(r.code("inc").unwrap(), Input::Host(&[9])),
            [10]
        );
    });
}

/// A run whose completion the device never reports (a lost fence event)
/// overruns its budget at the head of the queue: that run, and only that
/// run, is named — a run behind it that completes is fenced normally.
#[test]
fn a_lost_fence_poisons_naming_its_own_run_only() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default().watchdog(2 * MS));
        let mut dev = Device::<_, 3>::open(sim.clone(), abi.config()).unwrap();
        let mut runner = dev.publish(&inc()).unwrap();
        {
            let code = runner.code("inc").unwrap();
            let ok0 = runner.launched::<0>(code, Input::Host(&[1]));
            // Run 1's fence is its launch's second record: records 3 and 4 are
            // run 1's (run 0 made records 1 and 2).
            sim.inject(Fault::EventNeverCompletes { nth: 2 });
            let lost = runner.launched::<1>(code, Input::Host(&[5]));
            let after = runner.launched::<2>(code, Input::Host(&[7]));
            let lost_id = lost.id();
            // The run behind the lost one completes: fenced, nothing poisoned.
            let mut out = Outputs::<2>::new(1);
            after.fence().unwrap().finalize(&mut out).unwrap();
            assert_eq!(out.values(), &[8]);
            assert_eq!(runner.health().poisoned, None);
            ok0.fence().unwrap();
            let err = lost.fence().unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::Timeout { overran: Some(r), .. } if *r == lost_id),
                "{err}"
            );
            assert_eq!(
                runner.health().poisoned.map(|p| (p.cause, p.run, p.slot)),
                Some((PoisonCause::Overrun, Some(lost_id), Some(1)))
            );
        }
        assert_eq!(runner.drain().unwrap().released, 1);
        assert_eq!(
            runner.serial::<1>(runner.code("inc").unwrap(), Input::Host(&[1])),
            [2]
        );
    });
}

/// A host thread preempted for 20 ms inside every wait — ten times the
/// 2 ms watchdog — never makes a healthy stepped device look hung: device
/// time is virtual and only moves with the device.
#[test]
fn a_preempted_host_never_poisons_a_virtual_time_device() {
    each(|abi| {
        let (mut dev, hooks, sim) = hooked(abi);
        let runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        *hooks.preempted.lock().unwrap() = 20 * MS;
        // The fence becomes visible 3 ms (virtual) late: within the 4 ms budget.
        sim.inject(Fault::DelayEvent {
            nth: 2,
            delay: 3 * MS,
        });
        let run = runner.launched::<0>(code, Input::Host(&[1]));
        // A short wait is only "not yet", however long the host was away.
        let err = run.fence_for(Duration::from_micros(5)).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Timeout { overran: None, .. }),
            "{err}"
        );
        let fenced = err.into_value().fence().unwrap();
        let mut out = Outputs::<0>::new(1);
        fenced.finalize(&mut out).unwrap();
        assert_eq!(out.values(), &[2]);
        assert_eq!(runner.health().poisoned, None);
    });
}

/// An explicit limit bounds the wait from its very first slice:
/// `fence_for(5 µs)` on a run the device needs about 60 µs for is "not yet"
/// after about 5 µs of driver time — it does not ask the driver for the
/// `fence_timeout / 8` slice a configured fence starts with.
#[test]
fn an_explicit_limit_bounds_even_the_first_slice() {
    each(|abi| {
        let (mut dev, _, sim) = hooked(abi);
        let runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        let run = runner.launched::<0>(code, Input::Host(&[1]));
        let before = sim.clock();
        let err = run.fence_for(Duration::from_micros(5)).unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Timeout { overran: None, .. }),
            "{err}"
        );
        let waited = sim.clock().saturating_sub(before);
        assert!(
            waited < Duration::from_micros(20),
            "asked the driver for {waited:?}"
        );
        let mut out = Outputs::<0>::new(1);
        err.into_value()
            .fence()
            .unwrap()
            .finalize(&mut out)
            .unwrap();
        assert_eq!(out.values(), &[2]);
    });
}

/// The negative control of the test above: the same wait judged on the
/// host's clock (a driver that reports it for a virtual-time device) takes
/// the preempted host for a hung device and poisons a healthy run.
#[test]
fn judged_on_host_time_the_same_wait_poisons_a_healthy_run() {
    each(|abi| {
        let (mut dev, hooks, sim) = hooked(abi);
        let runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        hooks.host_clock.store(true, Ordering::SeqCst);
        *hooks.preempted.lock().unwrap() = 20 * MS;
        sim.inject(Fault::DelayEvent {
            nth: 2,
            delay: 3 * MS,
        });
        let run = runner.launched::<0>(code, Input::Host(&[1]));
        let err = run.fence().unwrap_err();
        assert!(
            matches!(
                err.kind(),
                ErrorKind::Timeout {
                    overran: Some(_),
                    ..
                }
            ),
            "host time stood in for device time, so the check must fire: {err}"
        );
    });
}

#[test]
fn extreme_configurations_are_refused_naming_the_value() {
    each(|abi| {
        let open = |cfg: DeviceConfig| {
            Device::<_, 2>::open(abi.stepped(SimConfig::default()), cfg)
                .map(drop)
                .unwrap_err()
                .kind()
                .clone()
        };
        let too_long = |k: &ErrorKind, name: &str| matches!(k, ErrorKind::Config(c) if matches!(**c, ConfigError::TooLong { what, .. } if what == name));
        let k = open(abi.config().fence_timeout(Duration::MAX));
        assert!(too_long(&k, "fence_timeout"), "{k}");
        assert!(k.to_string().contains("fence_timeout"), "{k}");
        let k = open(abi.config().device_watchdog(Duration::MAX / 2 + MS));
        assert!(too_long(&k, "device_watchdog"), "{k}");
        let k = open(abi.config().max_elements(usize::MAX));
        assert!(
            matches!(&k, ErrorKind::Config(c) if matches!(**c, ConfigError::ArenaTooLarge { max_elements: usize::MAX, .. })),
            "{k}"
        );
        // A device whose own watchdog is unbounded.
        let sim = abi.stepped(SimConfig::default().watchdog(Duration::MAX));
        let k = Device::<_, 2>::open(sim, abi.config())
            .map(drop)
            .unwrap_err()
            .kind()
            .clone();
        assert!(too_long(&k, "the driver's watchdog"), "{k}");
    });
}

/// The longest accepted fence timeout, and `Duration::MAX` where a call
/// takes a wait, never overflow a deadline: in a real-time fence, a drain, a
/// publication and a drop that each meet a forgotten run.
#[test]
fn the_largest_waits_never_overflow() {
    each(|abi| {
        let cfg = abi
            .config()
            .device_watchdog(DeviceConfig::MAX_TIMEOUT / 2)
            .fence_timeout(DeviceConfig::MAX_TIMEOUT);
        let mut dev = Device::<_, 2>::open(real_time(abi, SLACK, MS), cfg).unwrap();
        {
            let mut runner = dev.publish(&inc()).unwrap();
            let code = runner.code("inc").unwrap();
            let run = runner.launched::<0>(code, Input::Host(&[1]));
            let fenced = run.fence_for(Duration::MAX).unwrap();
            drop(fenced);
            std::mem::forget(runner.launched::<1>(code, Input::Host(&[1])));
            runner.drain_for(Duration::MAX).unwrap();
            let code = runner.code("inc").unwrap();
            let run = runner.launched::<0>(code, Input::Host(&[1]));
            run.fence().unwrap();
            std::mem::forget(runner.launched::<1>(code, Input::Host(&[1])));
        }
        // Publication drains the forgotten run first.
        let runner = dev.publish(&inc()).unwrap();
        std::mem::forget(runner.launched::<1>(runner.code("inc").unwrap(), Input::Host(&[1])));
        drop(dev); // and so does dropping the device
    });
}

/// A simulator configured with absurd latencies and watchdog neither
/// panics nor hangs a host call: latencies are clamped to
/// `LatencyModel::MAX`, waits saturate.
#[test]
fn the_simulator_survives_extreme_settings() {
    each(|abi| {
        let sim = abi.real_time(
            SimConfig::default()
                .watchdog(20 * MS)
                .latency(LatencyModel::zero().kernel(Duration::MAX)),
        );
        assert_eq!(sim.config().latency.kernel, LatencyModel::MAX);
        let mut dev = Device::<_, 2>::open(sim.clone(), abi.config()).unwrap();
        let runner = dev.publish(&inc()).unwrap();
        let run = runner.launched::<0>(runner.code("inc").unwrap(), Input::Host(&[1]));
        // A one-second kernel under a 20 ms watchdog: the device faults it.
        assert!(matches!(
            run.fence().unwrap_err().kind(),
            ErrorKind::Fault(_)
        ));
        // Blocking calls with unbounded timeouts on idle or unknown resources.
        let s = sim.create_stream().unwrap();
        sim.sync_stream(s, Duration::MAX).unwrap();
        let stepped = abi.stepped(SimConfig::default().watchdog(Duration::MAX));
        let e = stepped.create_event().unwrap();
        stepped.sync_event(e, Duration::MAX).unwrap();
    });
}

/// The user's own panic while runs are launched: unwinding drops them,
/// each waits (bounded) for its fence, the process survives, the device is
/// still usable and drops in bounded time. With the default budget and with
/// the largest accepted one.
#[test]
fn a_user_panic_with_runs_launched_unwinds_cleanly() {
    each(|abi| {
        for cfg in [
            abi.config(),
            abi.config().fence_timeout(DeviceConfig::MAX_TIMEOUT),
        ] {
            let sim = abi.stepped(SimConfig::default().watchdog(2 * MS));
            let mut dev = Device::<_, 2>::open(sim.clone(), cfg).unwrap();
            let runner = dev.publish(&inc()).unwrap();
            let code = runner.code("inc").unwrap();
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let _a = runner.launched::<0>(code, Input::Host(&[1]));
                let _b = runner.launched::<1>(code, Input::Previous);
                panic!("the user's own panic");
            }));
            assert!(outcome.is_err());
            let h = runner.health();
            assert_eq!((h.in_flight, h.poisoned, h.quarantined.len()), (0, None, 0));
            assert_eq!(runner.serial::<0>(code, Input::Host(&[4])), [5]);
            drop(runner);
            drop(dev);
            assert_eq!(sim.stats().live_streams(), 0, "released");
        }
    });
}

/// A panic while the device cannot prove a run complete (its fence event
/// is lost): the unwinding drop waits the bounded queue budget, quarantines
/// the slot, and the process survives; a drain recovers.
#[test]
fn a_panic_over_a_hung_run_quarantines_and_survives() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default().watchdog(2 * MS));
        let mut dev = Device::<_, 2>::open(sim.clone(), abi.config()).unwrap();
        let mut runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        sim.inject(Fault::EventNeverCompletes { nth: 2 });
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let _hung = runner.launched::<0>(code, Input::Host(&[1]));
            panic!("while the run cannot complete");
        }));
        assert!(outcome.is_err());
        assert!(runner.health().quarantined.contains(0));
        runner.drain().unwrap();
        let code = runner.code("inc").unwrap();
        assert_eq!(runner.serial::<0>(code, Input::Host(&[1])), [2]);
    });
}

/// A driver that panics inside a fence's wait: the panic reaches the
/// caller, the run dropped during the unwinding waits again — the driver
/// panics again, inside `Drop`, while unwinding — and still the process
/// does not abort: the slot is quarantined, a drain recovers.
#[test]
fn a_driver_panic_inside_drop_while_unwinding_does_not_abort() {
    each(|abi| {
        let (mut dev, hooks, _) = hooked(abi);
        let mut runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        *hooks.panic_in.lock().unwrap() = Some(Op::SyncEvent);
        hooks.armed.store(true, Ordering::SeqCst);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let run = runner.launched::<0>(code, Input::Host(&[1]));
            let _ = run.fence();
        }));
        assert!(outcome.is_err(), "the driver's panic reaches the caller");
        hooks.armed.store(false, Ordering::SeqCst);
        assert!(runner.health().quarantined.contains(0));
        runner.drain().unwrap();
        let code = runner.code("inc").unwrap();
        assert_eq!(runner.serial::<0>(code, Input::Host(&[1])), [2]);
    });
}

/// A driver that panics in the middle of a launch (AICore kernel queued,
/// AICPU launch never returns) while the device's state is locked: the lock
/// is recovered — nothing hangs — and the runner is poisoned, naming the
/// interrupted run, until a drain proves the queue quiet.
#[test]
fn a_driver_panic_mid_launch_poisons_instead_of_hanging() {
    each(|abi| {
        let (mut dev, hooks, _) = hooked(abi);
        let mut runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        *hooks.panic_in.lock().unwrap() = Some(Op::LaunchAicpu);
        hooks.armed.store(true, Ordering::SeqCst);
        let prepared = runner
            .prepare(
                runner.take_slot::<0>().unwrap(),
                RunSpec::new(code, Input::Host(&[1])),
            )
            .unwrap();
        let id = prepared.id();
        let panicked = catch_unwind(AssertUnwindSafe(|| prepared.launch().map(drop))).is_err();
        assert!(panicked);
        hooks.armed.store(false, Ordering::SeqCst);
        let poison = runner.health().poisoned.expect("poisoned");
        assert_eq!(
            (poison.cause, poison.run, poison.slot),
            (PoisonCause::Interrupted, Some(id), Some(0))
        );
        let err = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                RunSpec::new(code, Input::Host(&[1])),
            )
            .unwrap()
            .launch()
            .unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Poisoned(_)), "{err}");
        drop(err);
        // The orphaned AICore kernel faults on the device's watchdog; the drain
        // replaces its stream and returns every slot.
        runner.drain().unwrap();
        let code = runner.code("inc").unwrap();
        assert_eq!(runner.serial::<0>(code, Input::Host(&[1])), [2]);
        assert_eq!(runner.serial::<1>(code, Input::Host(&[2])), [3]);
    });
}

/// Kernel faults met by a later run are attributed to the run that
/// faulted: run 1's AICore kernel raises, run 2 (behind it) is the one
/// fenced.
#[test]
fn a_fault_met_by_a_later_run_names_the_run_that_faulted() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default().watchdog(2 * MS));
        let mut dev = Device::<_, 3>::open(sim.clone(), abi.config()).unwrap();
        let mut runner = dev.publish(&inc()).unwrap();
        {
            let code = runner.code("inc").unwrap();
            let r0 = runner.launched::<0>(code, Input::Host(&[1]));
            r0.fence().unwrap();
            sim.inject(Fault::KernelFault {
                kernel: Kernel::Aicore,
                nth: 1,
            });
            let r1 = runner.launched::<1>(code, Input::Host(&[1]));
            let r2 = runner.launched::<2>(code, Input::Host(&[1]));
            let faulty = r1.id();
            let err = r2.fence().unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::FaultAhead { run, slot: 1, .. } if *run == faulty),
                "{err}"
            );
            let p = runner.health().poisoned.unwrap();
            assert_eq!(
                (p.cause, p.run, p.slot),
                (PoisonCause::DeviceFault, Some(faulty), Some(1))
            );
            drop((r1, err));
        }
        runner.drain().unwrap();
    });
}

/// `Device::close` proves the queue quiet before releasing anything; when it
/// cannot, the device comes back untouched, to close later.
#[test]
fn a_close_that_cannot_drain_hands_the_device_back() {
    each(|abi| {
        let (mut dev, hooks, sim) = hooked(abi);
        let runner = dev.publish(&inc()).unwrap();
        std::mem::forget(runner.launched::<0>(runner.code("inc").unwrap(), Input::Host(&[1])));
        drop(runner);
        hooks.stall.store(true, Ordering::SeqCst);
        let err = dev.close().unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Undrained { count: 1, .. }),
            "{err}"
        );
        let dev = err
            .into_value()
            .expect("nothing was released: the device comes back");
        assert_eq!(sim.stats().live_streams(), 2);
        hooks.stall.store(false, Ordering::SeqCst);
        dev.close().map_err(runclaim::Error::without_value).unwrap();
        let s = sim.stats();
        assert_eq!(
            (s.live_streams(), s.live_events(), s.live_allocations()),
            (0, 0, 0)
        );
    });
}

/// A driver whose clock does not move across a timed-out wait (a virtual
/// clock that only moves with device progress, on a device that makes
/// none) cannot hang a fence or a drop: every wait is also bounded by what
/// it asked the driver for (unbounded, `fence_for(10 ms)` and the drop of a
/// launched run spun for ever).
#[test]
fn a_frozen_driver_clock_cannot_hang_a_fence_or_a_drop() {
    each(|abi| {
        let (mut dev, hooks, _) = hooked(abi);
        let runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        hooks.frozen.store(true, Ordering::SeqCst);
        let run = runner.launched::<0>(code, Input::Host(&[1]));
        common::or_abort_after(
            Duration::from_secs(120),
            "a fence on a frozen clock",
            || {
                let err = run.fence_for(10 * MS).unwrap_err();
                assert!(
                    matches!(err.kind(), ErrorKind::Timeout { overran: None, waited } if *waited >= 10 * MS),
                    "{err}"
                );
                let err = err.into_value().fence().unwrap_err();
                assert!(
                    matches!(err.kind(), ErrorKind::Timeout { overran: None, .. }),
                    "{err}"
                );
                drop(err); // the drop waits, bounded, then quarantines
            },
        );
        assert!(runner.health().quarantined.contains(0));
        // A simulator told to take no step per wait still takes one.
        let mut cfg = SimConfig::default().watchdog(2 * MS);
        cfg.max_wait_steps = 0;
        let mut dev = Device::<_, 2>::open(abi.stepped(cfg), abi.config()).unwrap();
        let r = dev.publish(&inc()).unwrap();
        assert_eq!(
            r.serial::<0>(r.code("inc").unwrap(), Input::Host(&[1])),
            [2]
        );
    });
}

/// A fault on the AICore stream met by a later launch names the run that
/// faulted (whose AICore event reports it at once), not the run that met it
/// — which was never submitted. (A culprit search that looked only at
/// fences missed it: the AICPU stream reports a fault later.)
#[test]
fn a_launch_refused_by_an_earlier_fault_names_the_earlier_run() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = Device::<_, 4>::open(sim.clone(), abi.config()).unwrap();
        let runner = dev.publish(&inc()).unwrap();
        let code = runner.code("inc").unwrap();
        sim.inject(Fault::KernelFault {
            kernel: Kernel::Aicore,
            nth: 1,
        });
        let a = runner.launched::<0>(code, Input::Host(&[1]));
        for _ in 0..5 {
            sim.step();
        }
        let err = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                RunSpec::new(code, Input::Host(&[1])),
            )
            .unwrap()
            .launch()
            .unwrap_err();
        assert!(err.value().is_some(), "nothing of run B was submitted");
        let p = runner.health().poisoned.expect("poisoned");
        assert_eq!(
            (p.cause, p.run, p.slot),
            (PoisonCause::DeviceFault, Some(a.id()), Some(0)),
            "the poison names the run that faulted"
        );
        drop((err, a));
    });
}

/// Output buffers of absurd sizes are clamped or refused, never a panic
/// or an abort (`Outputs::new(usize::MAX)` once panicked).
#[test]
fn absurd_output_buffers_are_refused_not_fatal() {
    assert!(Outputs::<0>::try_new(usize::MAX).is_err());
    assert!(Outputs::<0>::try_new(DeviceConfig::MAX_ELEMENTS + 1).is_err());
    assert_eq!(Outputs::<0>::new(0).capacity(), 0);
}
