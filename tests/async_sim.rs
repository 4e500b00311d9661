//! The awaited waits on the simulator: the async suite (real time), and
//! what only the simulator can show deterministically — a stepped device
//! moves only when driven, cancellation at every poll, the instant driver
//! and notifications that fail. (A driver without notifications of its
//! own: `the_default_notification_completes_every_awaited_run` in
//! `src/driver/mod.rs`.)

mod common;

async_suite!(common::Sim);

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Poll, Waker};
use std::time::Duration;

use common::LaunchIn;
use common::async_suite::{Counted, poll_once};
use runclaim::driver::abi::Program;
use runclaim::driver::instant::InstantDriver;
use runclaim::sim::{SimConfig, SimDriver, StepOutcome};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, Pipeline, RunSpec};

fn f(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(1)
}

fn callables() -> [Callable; 1] {
    [Callable::program("f", &Program::new().mul(3).add(1))]
}

/// Steps `sim` until `woken` counts a wake (or the device is idle), at most
/// `max` steps; the steps taken.
fn step_until_woken(sim: &SimDriver, woken: &Counted, max: u64) -> u64 {
    let before = woken.0.load(Ordering::Acquire);
    for n in 1..=max {
        let idle = sim.step() == StepOutcome::Idle;
        if woken.0.load(Ordering::Acquire) != before || idle {
            return n;
        }
    }
    max
}

/// Nothing moves on a stepped simulator unless driven: a pending fence
/// future stays pending however long the host waits, and the clock stands
/// still; the test drives it (`step`), and the future resolves.
#[test]
fn a_stepped_simulator_moves_only_when_driven() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let run = runner.launched::<0>(code, Input::Host(&[5]));
    let mut fut = run.fence_async();
    let woken = Arc::new(Counted::default());
    let waker = Waker::from(woken.clone());
    assert!(poll_once(&mut fut, &waker).is_pending());
    let t = sim.now_ticks();
    std::thread::sleep(Duration::from_millis(20));
    assert!(poll_once(&mut fut, &waker).is_pending());
    assert_eq!(sim.now_ticks(), t, "nothing drove the device");
    assert_eq!(
        woken.0.load(Ordering::Acquire),
        0,
        "woken with nothing moved"
    );
    // The driver: this test (an idle hook of an executor would do the same).
    let steps = step_until_woken(&sim, &woken, 1_000_000);
    assert!(steps < 1_000_000);
    let mut out = Outputs::<0>::new(1);
    let fenced = loop {
        match poll_once(&mut fut, &waker) {
            Poll::Ready(r) => break r.unwrap(),
            Poll::Pending => {
                sim.step();
            }
        }
    };
    fenced.finalize(&mut out).unwrap();
    assert_eq!(out.values(), &[f(5)]);
}

/// Polls `fut` with `waker` until it resolves, stepping `sim` once between
/// polls; the polls it took.
fn polls_to_finish<F: Future + Unpin>(sim: &SimDriver, fut: &mut F, waker: &Waker) -> usize {
    for n in 1.. {
        if poll_once(fut, waker).is_ready() {
            return n;
        }
        sim.step();
    }
    unreachable!()
}

/// A task that submits `n` runs through the pipeline and awaits each
/// completion when the pipeline is full; what it got back goes to `got`.
async fn submit_and_complete(
    pipe: &mut Pipeline<'_, SimDriver, 2, u32>,
    code: runclaim::CodeRef<'_>,
    n: u32,
    submitted: &RefCell<u32>,
    got: &RefCell<Vec<(u32, u32)>>,
) {
    for x in 0..n {
        if pipe.is_full() {
            let done = pipe.complete_async().await.unwrap().expect("pending");
            got.borrow_mut().push((done.tag, done.values[0]));
        }
        pipe.submit(RunSpec::new(code, Input::Host(&[x])), x)
            .unwrap();
        *submitted.borrow_mut() += 1;
    }
    while let Some(done) = pipe.complete_async().await.unwrap() {
        got.borrow_mut().push((done.tag, done.values[0]));
    }
}

/// Cancellation at every await point, deterministically: the task is
/// dropped after its `k`-th poll, for every `k` up to the polls it needs
/// to finish; then the rest is completed the blocking way. No result and
/// no tag is lost, none comes back twice, all in order.
#[test]
fn cancellation_at_every_poll_of_a_pipeline_task_loses_nothing() {
    const N: u32 = 6;
    let full = {
        let sim = SimDriver::stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        let mut pipe = Pipeline::<_, 2, u32>::new(&runner).unwrap();
        let (submitted, got) = (RefCell::new(0), RefCell::new(Vec::new()));
        let mut task = Box::pin(submit_and_complete(&mut pipe, code, N, &submitted, &got));
        polls_to_finish(&sim, &mut task, Waker::noop())
    };
    assert!(full > 2, "the task awaited something ({full} polls)");
    for k in 0..=full {
        let sim = SimDriver::stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        let mut pipe = Pipeline::<_, 2, u32>::new(&runner).unwrap();
        let (submitted, got) = (RefCell::new(0), RefCell::new(Vec::new()));
        {
            let mut task: Pin<Box<dyn Future<Output = ()>>> =
                Box::pin(submit_and_complete(&mut pipe, code, N, &submitted, &got));
            for _ in 0..k {
                if poll_once(&mut task, Waker::noop()).is_ready() {
                    break;
                }
                sim.step();
            }
        }
        while let Some(done) = pipe.complete().unwrap() {
            got.borrow_mut().push((done.tag, done.values[0]));
        }
        let n = *submitted.borrow();
        let want: Vec<_> = (0..n).map(|x| (x, f(x))).collect();
        assert_eq!(*got.borrow(), want, "cancelled after {k} polls");
        let h = runner.health();
        assert_eq!((h.in_flight, h.poisoned), (0, None), "after {k} polls");
    }
}

/// A fence future and a runner's drain, each dropped after every number of
/// polls: a run found complete gave its slot back; one not yet complete
/// was left to the device, and a drain returns its slot; nothing is
/// poisoned either way.
#[test]
fn a_fence_and_a_drain_can_be_cancelled_at_every_poll() {
    let full = {
        let sim = SimDriver::stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        let mut fut = runner.launched::<0>(code, Input::Host(&[1])).fence_async();
        polls_to_finish(&sim, &mut fut, Waker::noop())
    };
    for k in 0..=full {
        let sim = SimDriver::stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
        let mut runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        let mut fut = runner.launched::<0>(code, Input::Host(&[1])).fence_async();
        let mut resolved = None;
        for _ in 0..k {
            if let Poll::Ready(r) = poll_once(&mut fut, Waker::noop()) {
                resolved = Some(r.unwrap());
                break;
            }
            sim.step();
        }
        drop(fut);
        drop(resolved);
        // The drain, cancelled after `k` polls too, then run to the end.
        {
            let mut drain = runner.drain_async();
            for _ in 0..k {
                if poll_once(&mut drain, Waker::noop()).is_ready() {
                    break;
                }
                sim.step();
            }
        }
        // (The blocking drain drives a stepped device itself; an awaited
        // one would wait for whoever drives it.)
        runner.drain().unwrap();
        let h = runner.health();
        assert_eq!(
            (h.in_flight, h.poisoned, h.quarantined.len()),
            (0, None, 0),
            "after {k} polls"
        );
        assert!(runner.take_slot::<0>().is_ok(), "after {k} polls");
    }
}

/// A cancelled wait gives its slot back: an awaited fence dropped before
/// its run completed abandons the run, and the slot's next take reclaims
/// it once the device proves the run complete — not before (the slot is
/// still in flight), and never for a run lost to `mem::forget`, whose
/// handle may still be alive (the negative control: only a drain reclaims
/// that one).
#[test]
fn a_cancelled_fence_gives_its_slot_back_once_the_run_is_proven_complete() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
    let mut runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let mut fut = runner.launched::<0>(code, Input::Host(&[1])).fence_async();
    assert!(poll_once(&mut fut, Waker::noop()).is_pending());
    drop(fut); // cancelled: the run is abandoned, still on the device
    let e = runner.take_slot::<0>().unwrap_err();
    assert!(
        matches!(e.kind(), runclaim::contract::ErrorKind::SlotInFlight { .. }),
        "{e}"
    );
    assert_eq!(runner.health().reclaimed, 0, "not complete: not reclaimed");
    sim.run_until_idle(1_000_000).unwrap();
    let token = runner.take_slot::<0>().expect("reclaimed at the next take");
    let h = runner.health();
    assert_eq!((h.reclaimed, h.in_flight, h.poisoned), (1, 0, None));
    drop(token);
    // The negative control: a forgotten run is not reclaimed by a take.
    std::mem::forget(runner.launched::<1>(code, Input::Host(&[2])));
    sim.run_until_idle(1_000_000).unwrap();
    let e = runner.take_slot::<1>().unwrap_err();
    assert!(
        matches!(e.kind(), runclaim::contract::ErrorKind::SlotInFlight { .. }),
        "{e}"
    );
    assert_eq!(runner.health().reclaimed, 1);
    runner.drain().unwrap();
    assert!(runner.take_slot::<1>().is_ok(), "a drain reclaims it");
}

/// The instant driver completes every run at its launch: each future
/// resolves at its first poll, with a waker that could wake nothing.
#[test]
fn the_instant_driver_resolves_every_future_at_its_first_poll() {
    let mut dev = Device::<_, 2>::open(InstantDriver::new(), DeviceConfig::default()).unwrap();
    let mut runner = dev.publish(&callables()).unwrap();
    {
        let code = runner.code("f").unwrap();
        let mut fut = runner.launched::<0>(code, Input::Host(&[2])).fence_async();
        let Poll::Ready(fenced) = poll_once(&mut fut, Waker::noop()) else {
            panic!("not ready at the first poll");
        };
        let mut out = Outputs::<0>::new(1);
        fenced.unwrap().finalize(&mut out).unwrap();
        assert_eq!(out.values(), &[f(2)]);
        let mut pipe = Pipeline::<_, 2>::new(&runner).unwrap();
        pipe.submit(RunSpec::new(code, Input::Host(&[3])), ())
            .unwrap();
        let mut complete = pipe.complete_async();
        match poll_once(&mut complete, Waker::noop()) {
            Poll::Ready(done) => assert_eq!(done.unwrap().map(|d| d.values[0]), Some(f(3))),
            Poll::Pending => panic!("not ready at the first poll"),
        }
    }
    assert!(poll_once(&mut runner.drain_async(), Waker::noop()).is_ready());
}

/// The futures are `Send`: a run launched here is awaited on another
/// thread, and its fenced run comes back to be finalized here.
#[test]
fn a_fence_future_is_awaited_on_another_thread() {
    let sim = SimDriver::real_time(SimConfig::default());
    let mut dev = Device::<_, 2>::open(sim, DeviceConfig::default()).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let fut = runner.launched::<1>(code, Input::Host(&[9])).fence_async();
    let fenced = std::thread::scope(|s| s.spawn(|| pollster::block_on(fut)).join().unwrap());
    let mut out = Outputs::<1>::new(1);
    fenced.unwrap().finalize(&mut out).unwrap();
    assert_eq!(out.values(), &[f(9)]);
}

/// A driver whose notification fails, every time: the future falls back
/// to the shared timer and completes all the same. (The negative control:
/// without the fallback, nothing would ever wake it.)
#[test]
fn a_failing_notification_falls_back_to_the_timer() {
    common::or_abort_after(Duration::from_secs(120), "a failing notify", || {
        // 20 ms kernels: every run is still pending at its first poll.
        let latency = runclaim::sim::LatencyModel::default().kernel(Duration::from_millis(20));
        let sim = SimDriver::real_time(SimConfig::default().latency(latency));
        let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        // Every one of the next 500 notifications fails.
        for nth in 1..=500 {
            sim.inject(runclaim::sim::Fault::FailCall {
                op: runclaim::driver::Op::NotifyEvent,
                nth,
            });
        }
        for x in 0..5u32 {
            let run = runner.launched::<0>(code, Input::Host(&[x]));
            let mut out = Outputs::<0>::new(1);
            pollster::block_on(run.fence_async())
                .unwrap()
                .finalize(&mut out)
                .unwrap();
            assert_eq!(out.values(), &[f(x)]);
        }
        let failed = sim
            .stats()
            .calls
            .get(&runclaim::driver::Op::NotifyEvent)
            .copied();
        assert!(
            failed.is_some_and(|n| (5..500).contains(&n)),
            "{failed:?} notifications"
        );
        sim.clear_faults();
    });
}

/// A waker that calls its device (`health`) when woken, and counts.
struct Health(&'static Device<SimDriver, 2>, Counted);

impl std::task::Wake for Health {
    fn wake(self: Arc<Self>) {
        let _ = self.0.health();
        self.1.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// A waker that calls its device (`health`), woken while a blocking drain
/// holds the device's state lock and drives the simulator: the simulator
/// hands it to the timer thread instead of waking it on the draining
/// thread, so the drain completes and the waker then runs. (Woken inline,
/// the waker would wait for the lock its own thread holds: a deadlock.)
#[test]
fn a_waker_that_calls_its_device_during_a_blocking_drain_does_not_deadlock() {
    use runclaim::driver::Driver as _;
    common::or_abort_after(Duration::from_secs(60), "a re-entrant waker", || {
        let sim = SimDriver::stepped(SimConfig::default());
        let dev: &'static mut Device<SimDriver, 2> = Box::leak(Box::new(
            Device::open(sim.clone(), DeviceConfig::default()).unwrap(),
        ));
        let mut runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        // A forgotten run: the drain must step the device to prove it.
        std::mem::forget(runner.launched::<0>(code, Input::Host(&[1])));
        // An event of our own behind some work, completing as the drain
        // steps the device; a waker armed on it that calls the device.
        let (s, e) = (sim.create_stream().unwrap(), sim.create_event().unwrap());
        let buf = sim.alloc(64).unwrap();
        for _ in 0..4 {
            sim.memset_async(s, buf, 1, 64).unwrap();
        }
        sim.record_event(e, s).unwrap();
        let health = Arc::new(Health(runner.device(), Counted::default()));
        let waker = Waker::from(health.clone());
        assert_eq!(
            sim.notify_event(e, Duration::from_secs(3600), &waker)
                .unwrap(),
            runclaim::driver::Notice::Completion
        );
        runner.drain().unwrap();
        assert_eq!(
            sim.query_event(e).unwrap(),
            runclaim::driver::Completion::Complete
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while health.1.0.load(Ordering::Acquire) == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(health.1.0.load(Ordering::Acquire), 1, "the waker ran once");
    });
}

/// The same in real time, with two such wakers falling due (at their
/// deadlines) while a blocking drain waits 30 ms for a forgotten run: the
/// first, woken on the device thread, waits for the drain's lock; the
/// draining thread moves the simulator itself meanwhile and must not wake
/// the second on itself. (It did: the drain then deadlocked, every time.)
#[test]
fn wakers_that_call_their_device_during_a_real_time_drain_do_not_deadlock() {
    use runclaim::driver::Driver as _;
    common::or_abort_after(
        Duration::from_secs(60),
        "re-entrant wakers in real time",
        || {
            let latency = runclaim::sim::LatencyModel::default().kernel(Duration::from_millis(30));
            let sim = SimDriver::real_time(SimConfig::default().latency(latency));
            let dev: &'static mut Device<SimDriver, 2> = Box::leak(Box::new(
                Device::open(sim.clone(), DeviceConfig::default()).unwrap(),
            ));
            let mut runner = dev.publish(&callables()).unwrap();
            let code = runner.code("f").unwrap();
            std::mem::forget(runner.launched::<0>(code, Input::Host(&[1])));
            let (s, e) = (sim.create_stream().unwrap(), sim.create_event().unwrap());
            sim.inject(runclaim::sim::Fault::EventNeverCompletes { nth: 1 });
            sim.record_event(e, s).unwrap();
            let wakers: Vec<_> = [5, 10]
                .map(|ms| {
                    let h = Arc::new(Health(runner.device(), Counted::default()));
                    let w = Waker::from(h.clone());
                    sim.notify_event(e, Duration::from_millis(ms), &w).unwrap();
                    h
                })
                .into();
            runner.drain().unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while wakers.iter().any(|h| h.1.0.load(Ordering::Acquire) == 0)
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(wakers.iter().all(|h| h.1.0.load(Ordering::Acquire) == 1));
            sim.clear_faults();
        },
    );
}

/// A driver whose clock stands still (and whose waits time out at once):
/// an awaited fence still ends — with a timeout, after its budget on the
/// host's time — as a blocking fence does; it never stays pending for
/// ever. (The negative control: without counting the wakes the clock did
/// not show, this hangs.)
#[test]
fn an_awaited_fence_ends_when_the_drivers_clock_stands_still() {
    common::or_abort_after(Duration::from_secs(60), "a frozen clock", || {
        let sim = SimDriver::real_time(SimConfig::default().watchdog(Duration::from_millis(50)));
        let hooked = common::hooked::Hooked::new(sim.clone());
        let hooks = hooked.hooks.clone();
        let config = DeviceConfig::default().fence_timeout(Duration::from_millis(100));
        let mut dev = Device::<_, 2>::open(hooked, config).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let code = runner.code("f").unwrap();
        sim.inject(runclaim::sim::Fault::EventNeverCompletes { nth: 2 });
        let run = runner.launched::<0>(code, Input::Host(&[1]));
        hooks.frozen.store(true, Ordering::SeqCst);
        let e = pollster::block_on(run.fence_async()).unwrap_err();
        assert!(
            matches!(e.kind(), runclaim::contract::ErrorKind::Timeout { .. }),
            "{e}"
        );
        hooks.frozen.store(false, Ordering::SeqCst);
        std::mem::forget(e.into_value());
    });
}

/// A driver that panics in `query_event` while a pending fence future is
/// dropped: the drop makes no blocking call (the run is not moved into
/// the panicking look, so no launched run's drop waits on its fence while
/// unwinding) and leaves the run to the device.
#[test]
fn dropping_a_pending_fence_with_a_panicking_driver_never_waits() {
    let sim = SimDriver::real_time(SimConfig::default());
    let hooked = common::hooked::Hooked::new(sim.clone());
    let hooks = hooked.hooks.clone();
    let mut dev = Device::<_, 2>::open(hooked, DeviceConfig::default()).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    sim.inject(runclaim::sim::Fault::EventNeverCompletes { nth: 2 });
    let mut fut = runner.launched::<0>(code, Input::Host(&[1])).fence_async();
    assert!(poll_once(&mut fut, Waker::noop()).is_pending());
    let syncs = || {
        let c = sim.stats().calls;
        [
            runclaim::driver::Op::SyncEvent,
            runclaim::driver::Op::SyncStream,
        ]
        .map(|op| c.get(&op).copied().unwrap_or(0))
    };
    let before = syncs();
    *hooks.panic_in.lock().unwrap() = Some(runclaim::driver::Op::QueryEvent);
    hooks.armed.store(true, Ordering::SeqCst);
    drop(fut);
    hooks.armed.store(false, Ordering::SeqCst);
    assert_eq!(syncs(), before, "the drop waited on the driver");
    assert_eq!(
        runner.health().in_flight,
        1,
        "the run was left to the device"
    );
    sim.clear_faults();
}
