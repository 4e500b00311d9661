//! The pipeline, scenario by scenario: written once against [`Target`],
//! instantiated for every driver with [`pipeline_suite!`] (the simulator,
//! and the `acl` driver over the fake runtime library).

use runclaim::contract::{Action, Depth, ErrorKind, PoisonCause, SupportedDepth};
use runclaim::driver::abi::Program;
use runclaim::driver::{Driver, Op};
use runclaim::sim::{Fault, Kernel};
use runclaim::{Callable, Device, Input, Pipeline, RunSpec, Runner};

use super::Target;
use super::suite::cfg;

/// Generates one `#[test]` per scenario for a target expression.
#[macro_export]
macro_rules! pipeline_suite {
    ($target:expr) => {
        $crate::pipeline_suite!(@tests $target;
            pipeline_keeps_every_slot_busy_in_order_at_depth_2,
            pipeline_keeps_every_slot_busy_in_order_at_depth_16,
            pipeline_run_failure_fails_alone,
            pipeline_refused_submits_hand_the_spec_back,
            pipeline_device_fault_stops_it_until_a_drain,
            pipeline_partial_launch_quarantines_until_a_drain,
            pipeline_failed_fence_keeps_the_run_until_it_completes,
            pipeline_drain_keeps_pending_results,
            pipeline_drop_mid_stream_waits_and_frees_every_slot,
        );
    };
    (@tests $target:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::common::pipeline_suite::$name(&$target);
            }
        )*
    };
}

/// A pipeline over every slot of `runner`, replaying where the target
/// says so.
fn pipeline<'r, T: Target, D: Driver, const N: usize, Tag>(
    t: &T,
    runner: &'r Runner<'r, D, N>,
) -> Pipeline<'r, D, N, Tag>
where
    Depth<N>: SupportedDepth,
{
    let mut pipe = Pipeline::new(runner).unwrap();
    pipe.replay(t.replay());
    pipe
}

fn open<T: Target, const D: usize>(t: &T) -> Device<T::D, D>
where
    Depth<D>: SupportedDepth,
{
    Device::open(t.stepped(cfg()), t.config().max_elements(8)).unwrap()
}

/// `3x + 1`, and a program that fails with code 9.
fn callables() -> [Callable; 2] {
    [
        Callable::program("f", &Program::new().mul(3).add(1)),
        Callable::program("bad", &Program::new().add(1).fail(9)),
    ]
}

fn f(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(1)
}

/// 40 runs through a depth-`D` pipeline, every third chained on the one
/// before: every result comes back once, in order, with its values.
fn in_order<T: Target, const D: usize>(t: &T)
where
    Depth<D>: SupportedDepth,
{
    let mut dev = open::<T, D>(t);
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let inputs: Vec<Vec<u32>> = (0..40u32).map(|i| vec![i, i + 1000]).collect();
    let mut want = Vec::new();
    let mut got = Vec::new();
    let mut pipe = pipeline::<_, _, D, usize>(t, &runner);
    for (i, input) in inputs.iter().enumerate() {
        if pipe.is_full() {
            let done = pipe.complete().unwrap().unwrap();
            got.push((done.tag, done.values.to_vec()));
        }
        let chained = i % 3 == 2;
        let spec = if chained {
            RunSpec::new(code, Input::Previous)
        } else {
            RunSpec::new(code, Input::Host(input))
        };
        let before: Vec<u32> = if chained {
            want.last()
                .map(|(_, v): &(usize, Vec<u32>)| v.clone())
                .unwrap()
        } else {
            input.clone()
        };
        want.push((i, before.iter().map(|&x| f(x)).collect()));
        pipe.submit(spec, i).unwrap();
        assert!(pipe.len() <= D);
        assert_eq!(
            runner.health().in_flight,
            pipe.len(),
            "every pending run is launched"
        );
    }
    assert_eq!(pipe.len(), D, "DEPTH runs launched at once");
    // Replaying, every run went through a graph (a chained one's shape
    // is its own: its input is another slot's output).
    let stats = runner.device().stats();
    if t.replay() {
        assert_eq!(stats.replays, 40, "{stats:?}");
        assert!(stats.captures >= D as u64, "{stats:?}");
    } else {
        assert_eq!(stats.replays, 0);
    }
    while let Some(done) = pipe.complete().unwrap() {
        got.push((done.tag, done.values.to_vec()));
    }
    assert_eq!(got, want);
    drop(pipe);
    let h = runner.health();
    assert_eq!((h.in_flight, h.poisoned, h.quarantined.len()), (0, None, 0));
}

pub fn pipeline_keeps_every_slot_busy_in_order_at_depth_2<T: Target>(t: &T) {
    in_order::<T, 2>(t);
}

pub fn pipeline_keeps_every_slot_busy_in_order_at_depth_16<T: Target>(t: &T) {
    in_order::<T, 16>(t);
}

pub fn pipeline_run_failure_fails_alone<T: Target>(t: &T) {
    let mut dev = open::<T, 3>(t);
    let runner = dev.publish(&callables()).unwrap();
    let (good, bad) = (runner.code("f").unwrap(), runner.code("bad").unwrap());
    let mut pipe = pipeline::<_, _, 3, &str>(t, &runner);
    pipe.submit(RunSpec::new(good, Input::Host(&[1])), "a")
        .unwrap();
    let bad_id = pipe
        .submit(RunSpec::new(bad, Input::Host(&[1])), "b")
        .unwrap();
    pipe.submit(RunSpec::new(good, Input::Host(&[2])), "c")
        .unwrap();
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some(("a", 4))
    );
    let err = pipe.complete().unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::RunFailed { code: 9 });
    assert_eq!(err.run(), Some(bad_id));
    assert_eq!(err.into_value().tag, "b");
    // The queued successor is unaffected, and the pipeline goes on.
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some(("c", 7))
    );
    pipe.submit(RunSpec::new(good, Input::Host(&[3])), "d")
        .unwrap();
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some(("d", 10))
    );
    assert!(runner.health().poisoned.is_none());
}

pub fn pipeline_refused_submits_hand_the_spec_back<T: Target>(t: &T) {
    let mut dev = open::<T, 2>(t);
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = pipeline::<_, _, 2, u32>(t, &runner);
    // Nothing launched yet to chain from.
    let spec = RunSpec::new(code, Input::Previous);
    let err = pipe.submit(spec, 1).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::NoChainValue);
    assert_eq!((err.value().work, err.value().tag), (spec, 1));
    let long = [0u32; 9];
    let err = pipe
        .submit(RunSpec::new(code, Input::Host(&long)), 2)
        .unwrap_err();
    assert!(matches!(
        err.kind(),
        ErrorKind::InputTooLong {
            len: 9,
            capacity: 8
        }
    ));
    pipe.submit(RunSpec::new(code, Input::Host(&[1])), 3)
        .unwrap();
    pipe.submit(RunSpec::new(code, Input::Previous), 4).unwrap();
    let full = RunSpec::new(code, Input::Host(&[5]));
    let err = pipe.submit(full, 5).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::DepthExhausted { depth: 2 });
    // Refused as a submission (nothing prepared), not as a launch.
    assert_eq!(err.action(), Action::Submit);
    let back = err.into_value();
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some((3, 4))
    );
    pipe.submit(back.work, back.tag).unwrap(); // room now
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some((4, 13))
    );
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some((5, 16))
    );
    assert!(pipe.complete().unwrap().is_none());
}

pub fn pipeline_device_fault_stops_it_until_a_drain<T: Target>(t: &T) {
    let mut dev = open::<T, 2>(t);
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = pipeline::<_, _, 2, u32>(t, &runner);
    let fault = Fault::KernelFault {
        kernel: Kernel::Aicpu,
        nth: 1,
    };
    t.inject(runner.device().driver(), fault);
    pipe.submit(RunSpec::new(code, Input::Host(&[1])), 0)
        .unwrap();
    pipe.submit(RunSpec::new(code, Input::Host(&[2])), 1)
        .unwrap();
    let err = pipe.complete().unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Fault(_)), "{err}");
    assert_eq!(err.into_value().tag, 0);
    // A clear error names the poison; the spec and tag come back.
    let spec = RunSpec::new(code, Input::Host(&[3]));
    let err = pipe.submit(spec, 2).unwrap_err();
    let ErrorKind::Poisoned(poison) = err.kind() else {
        panic!("expected a poisoned runner, got {err}");
    };
    let poison = *poison;
    assert_eq!(poison.cause, PoisonCause::DeviceFault);
    assert!(err.to_string().contains("drain it to recover"), "{err}");
    assert_eq!(err.into_value().tag, 2);
    // The drain settles the successor (dropped by the faulted stream: an
    // error, kept for `complete`), proves the queue quiet, re-creates the
    // streams and takes every slot back.
    let report = pipe.drain().unwrap();
    assert!(report.cleared.is_some());
    // Launched, both kernels' streams faulted; replayed, the AICore
    // kernel ran on its graph's stream, and the AICPU stream met the fault
    // through the graph.
    assert_eq!(report.streams_recreated, if t.replay() { 1 } else { 2 });
    let err = pipe.complete().unwrap_err();
    // The fault was run 0's: the successor's error names it.
    assert!(
        matches!(err.kind(), ErrorKind::FaultAhead { run, .. } if Some(*run) == poison.run),
        "{err}"
    );
    assert_eq!(err.into_value().tag, 1);
    // And it goes on.
    pipe.submit(spec, 2).unwrap();
    pipe.submit(RunSpec::new(code, Input::Previous), 3).unwrap();
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some((2, 10))
    );
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some((3, 31))
    );
}

pub fn pipeline_partial_launch_quarantines_until_a_drain<T: Target>(t: &T) {
    let mut dev = open::<T, 2>(t);
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = pipeline::<_, _, 2, u32>(t, &runner);
    pipe.submit(RunSpec::new(code, Input::Host(&[1])), 0)
        .unwrap();
    let partial = Fault::FailCall {
        op: Op::LaunchAicpu,
        nth: 1,
    };
    t.inject(runner.device().driver(), partial);
    let spec = RunSpec::new(code, Input::Host(&[2]));
    let err = pipe.submit(spec, 1).unwrap_err();
    if t.replay() {
        // A capture runs nothing: the launch that failed inside it is no
        // partial launch. The spec comes back, nothing is quarantined, and
        // the next submission captures.
        assert!(matches!(err.kind(), ErrorKind::Driver(_)), "{err}");
        assert_eq!(err.value().work, spec);
        assert!(runner.health().quarantined.is_empty());
        pipe.submit(spec, 1).unwrap();
        for want in [(0, 4), (1, 7)] {
            let done = pipe.complete().unwrap().unwrap();
            assert_eq!((done.tag, done.values[0]), want);
        }
        return;
    }
    assert!(matches!(err.kind(), ErrorKind::PartialLaunch(_)), "{err}");
    assert_eq!(
        err.value().work,
        spec,
        "no result will come: the spec comes back"
    );
    assert!(runner.health().quarantined.contains(1));
    // The run launched before the failure still completes.
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some((0, 4))
    );
    // Its slot's next submit is refused while poisoned, slot 1's while
    // quarantined; nothing is pending.
    let err = pipe.submit(spec, 1).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Poisoned(_)), "{err}");
    assert!(pipe.complete().unwrap().is_none());
    let report = pipe.drain().unwrap();
    assert_eq!(report.released, 1);
    for tag in 1..=3 {
        pipe.submit(RunSpec::new(code, Input::Host(&[tag])), tag)
            .unwrap();
        let done = pipe.complete().unwrap().unwrap();
        assert_eq!((done.tag, done.values[0]), (tag, f(tag)));
    }
}

pub fn pipeline_failed_fence_keeps_the_run_until_it_completes<T: Target>(t: &T) {
    let mut dev = open::<T, 2>(t);
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = pipeline::<_, _, 2, u32>(t, &runner);
    pipe.submit(RunSpec::new(code, Input::Host(&[1])), 0)
        .unwrap();
    let refused = Fault::FailCall {
        op: Op::SyncEvent,
        nth: 1,
    };
    t.inject(runner.device().driver(), refused);
    // The fence call itself fails (not a device fault): no result, the tag
    // comes back, the run keeps its slot.
    let err = pipe.complete().unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Driver(_)), "{err}");
    assert_eq!(err.into_value().tag, 0);
    assert!(runner.health().poisoned.is_none());
    pipe.submit(RunSpec::new(code, Input::Host(&[2])), 1)
        .unwrap();
    // The next submit into that slot finds the run complete and reuses it.
    pipe.submit(RunSpec::new(code, Input::Host(&[3])), 2)
        .unwrap();
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some((1, 7))
    );
    assert_eq!(
        pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
        Some((2, 10))
    );
}

pub fn pipeline_drain_keeps_pending_results<T: Target>(t: &T) {
    let mut dev = open::<T, 3>(t);
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = pipeline::<_, _, 3, u32>(t, &runner);
    for tag in 0..3 {
        pipe.submit(RunSpec::new(code, Input::Host(&[tag])), tag)
            .unwrap();
    }
    let report = pipe.drain().unwrap();
    assert_eq!((report.retired, report.cleared), (0, None));
    assert_eq!(runner.health().in_flight, 0, "settled, not in flight");
    assert_eq!(pipe.len(), 3, "still pending: their results come back");
    for tag in 0..3 {
        assert_eq!(
            pipe.complete().unwrap().map(|d| (d.tag, d.values[0])),
            Some((tag, f(tag)))
        );
    }
    pipe.submit(RunSpec::new(code, Input::Previous), 3).unwrap();
    assert_eq!(pipe.complete().unwrap().map(|d| d.values[0]), Some(f(f(2))));
}

pub fn pipeline_drop_mid_stream_waits_and_frees_every_slot<T: Target>(t: &T) {
    let mut dev = open::<T, 4>(t);
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let driver = runner.device().driver();
    let mut pipe = pipeline::<_, _, 4, ()>(t, &runner);
    for x in 0..4 {
        pipe.submit(RunSpec::new(code, Input::Host(&[x])), ())
            .unwrap();
    }
    assert_eq!(runner.health().in_flight, 4);
    let before = t.stats(driver).steps;
    drop(pipe);
    // Each run's drop waited for its own fence: bounded, nothing quarantined.
    let fence_steps = u64::try_from(runner.device().fence_timeout().as_micros()).unwrap();
    assert!(t.stats(driver).steps - before <= 4 * fence_steps);
    let h = runner.health();
    assert_eq!((h.in_flight, h.quarantined.len(), h.poisoned), (0, 0, None));
    // Every slot is back with the runner.
    drop((
        runner.take_slot::<0>().unwrap(),
        runner.take_slot::<3>().unwrap(),
    ));
    let again = Pipeline::<_, 4>::new(&runner);
    assert!(again.is_ok());
}
