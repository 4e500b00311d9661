//! The claim-contract suite: scenario tests written once against
//! [`Target`], instantiated for every driver with [`contract_suite!`].

use std::time::Duration;

use runclaim::contract::{ErrorKind, ReplayRefusal, TensorDiff};
use runclaim::driver::abi::Program;
use runclaim::sim::SimConfig;
use runclaim::{Callable, Device, Input, Outputs, RunSpec};

use super::replaying::{Captures, Counts, LaunchVia, LaunchedVia};
use super::{Target, checks};

mod faults;
mod publication;

// Every scenario at `suite::NAME`, as `contract_suite!` calls them (a
// test binary without the suite uses none).
#[allow(unused_imports)]
pub use faults::*;
#[allow(unused_imports)]
pub use publication::*;

/// Generates one `#[test]` per suite function for a target expression, and
/// `every_contract_suite_function_is_listed`, which fails when a suite function
/// (`pub fn NAME<T: Target>(t: &T)` in this module's files) is missing from the list
/// below: a function left off would otherwise compile and never run.
#[macro_export]
macro_rules! contract_suite {
    ($target:expr) => {
        $crate::contract_suite!(@tests $target;
            queued_runs_are_in_flight_together,
            serial_runs_never_overlap,
            ordering_chain_a_c_b_across_a_publication,
            a_b_a_publication_recreates_the_aicore_stream_each_time,
            result_readable_while_successor_executes,
            known_run_error_fails_that_run_alone,
            records_carry_their_own_run_id,
            code_uploaded_behind_the_runner_changes_no_run,
            finalize_in_any_order,
            dropped_and_forgotten_runs_then_publish_and_drop,
            partial_launch_poisons_until_drained,
            fence_timeout_hands_the_run_back,
            hung_run_poisons_and_quarantines_until_drained,
            kernel_fault_poisons_and_drain_recovers,
            shared_device_recovers_from_faults_by_itself,
            chain_needs_a_predecessor,
            slot_tokens_are_unique,
            foreign_tokens_and_code_are_refused,
            fence_from_another_thread,
            try_fence_polls_without_waiting,
            real_time_queue_runs_correctly,
            finalize_into_a_small_buffer_hands_the_run_back,
            publication_names_are_unique_and_lookups_say_so,
        );
    };
    (@tests $target:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::common::suite::$name(&$target);
            }
        )*

        #[test]
        fn every_contract_suite_function_is_listed() {
            let listed = [$(stringify!($name)),*];
            if let Err(e) = $crate::common::listed::check($crate::common::suite::SOURCE, &listed) {
                panic!("contract_suite!: {e}");
            }
        }
    };
}

/// This module's files, for [`super::listed::check`] against `contract_suite!`'s list.
pub const SOURCE: &str = concat!(
    include_str!("mod.rs"),
    include_str!("faults.rs"),
    include_str!("publication.rs"),
);

/// Watchdog 2 ms, so a hung kernel faults after 2,000 steps.
pub fn cfg() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

fn prog_add(k: u32) -> Callable {
    Callable::program(format!("add{k}"), &Program::new().add(k))
}

fn open<T: Target>(t: &T, sim: SimConfig) -> Device<T::D, 2> {
    Device::open(t.stepped(sim), t.config().max_elements(64)).unwrap()
}

pub fn queued_runs_are_in_flight_together<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    let (mut o0, mut o1) = (Outputs::<0>::new(8), Outputs::<1>::new(8));
    let r0 = runner.launched_via::<0>(&mut caps, code, Input::Host(&[1, 2]));
    let r1 = runner.launched_via::<1>(&mut caps, code, Input::Host(&[3, 4]));
    assert_eq!(
        runner.health().in_flight,
        2,
        "both launched before either is fenced"
    );
    let (id0, id1) = (r0.id().get(), r1.id().get());
    let f0 = r0.fence().unwrap().finalize(&mut o0).unwrap();
    let f1 = r1.fence().unwrap().finalize(&mut o1).unwrap();
    assert_eq!((o0.values(), o1.values()), (&[2, 3][..], &[4, 5][..]));
    assert!(f0.seq < f1.seq);
    let trace = t.trace(runner.device().driver());
    assert_eq!(
        checks::overlapped(&trace, id0, id1),
        Some(true),
        "queued runs overlap"
    );
}

pub fn serial_runs_never_overlap<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let code = runner.code("add1").unwrap();
    let mut o0 = Outputs::<0>::new(8);
    let mut token = runner.take_slot::<0>().unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        let input = [i];
        let spec = RunSpec::new(code, Input::Host(&input));
        let done = runner.run_serial(token, spec, &mut o0).unwrap();
        assert_eq!(o0.values(), &[i + 1]);
        ids.push(done.run.get());
        token = done.token;
    }
    let trace = t.trace(runner.device().driver());
    for w in ids.windows(2) {
        assert_eq!(
            checks::overlapped(&trace, w[0], w[1]),
            Some(false),
            "serial never overlaps"
        );
    }
}

pub fn result_readable_while_successor_executes<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    let mut o0 = Outputs::<0>::new(8);
    let r0 = runner.launched_via::<0>(&mut caps, code, Input::Host(&[10]));
    let r1 = runner.launched_via::<1>(&mut caps, code, Input::Previous);
    let done = r0.fence().unwrap().finalize(&mut o0).unwrap();
    assert_eq!(o0.values(), &[11], "run N read back");
    // Run N+1 has not completed: polling hands it back not ready.
    let r1 = match r1.try_fence() {
        Err(e) => {
            assert_eq!(e.kind(), &ErrorKind::NotReady);
            e.into_value()
        }
        Ok(_) => panic!("the successor cannot have finished: nothing drove it"),
    };
    // The slot of N is reusable while N+1 runs.
    let r2 = runner
        .prepare(done.token, RunSpec::new(code, Input::Previous))
        .unwrap()
        .launch_via(&mut caps)
        .unwrap();
    let mut o1 = Outputs::<1>::new(8);
    r1.fence().unwrap().finalize(&mut o1).unwrap();
    r2.fence().unwrap().finalize(&mut o0).unwrap();
    assert_eq!((o1.values(), o0.values()), (&[12][..], &[13][..]));
    // Replaying: slot 0's third run replays the capture of its first,
    // chained on slot 1's output where the capture had a host input.
    let replaying = Counts::replaying(2, 1, 0);
    caps.expect(runner.device().stats(), replaying);
}

pub fn records_carry_their_own_run_id<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    let (mut o0, mut o1) = (Outputs::<0>::new(8), Outputs::<1>::new(8));
    let (mut t0, mut t1) = (
        runner.take_slot::<0>().unwrap(),
        runner.take_slot::<1>().unwrap(),
    );
    for i in 0..6u32 {
        // Slot 0's input grows at the fourth run (replaying: larger than
        // its capture, so captured again; the new graph's records too are
        // each run's own).
        let x = [i, i + 50];
        let grown = if i < 3 { 1 } else { 2 };
        let r0 = runner
            .prepare(t0, RunSpec::new(code, Input::Host(&x[..grown])))
            .unwrap()
            .launch_via(&mut caps)
            .unwrap();
        let r1 = runner
            .prepare(t1, RunSpec::new(code, Input::Host(&[i + 100])))
            .unwrap()
            .launch_via(&mut caps)
            .unwrap();
        let (id0, id1) = (r0.id(), r1.id());
        let f1 = r1.fence().unwrap().finalize(&mut o1).unwrap();
        let f0 = r0.fence().unwrap().finalize(&mut o0).unwrap();
        assert_eq!((f0.wall.run_id, f0.wall.slot), (id0.get(), 0));
        assert_eq!((f1.wall.run_id, f1.wall.slot), (id1.get(), 1));
        assert_eq!((o0.run(), o1.run()), (Some(id0), Some(id1)));
        assert_eq!(o0.values()[0], i + 1);
        assert!(f0.wall.end <= f1.wall.dispatched, "slot 0's run ran first");
        t0 = f0.token;
        t1 = f1.token;
    }
    // Replaying: each slot's first run captured, slot 0's again when it
    // grew; every other run replayed.
    let replaying = Counts::replaying(3, 9, 1);
    caps.expect(runner.device().stats(), replaying);
    if t.replay() {
        let larger = TensorDiff::Larger {
            captured: 4,
            now: 8,
        };
        let grew = ReplayRefusal::Tensor {
            index: 0,
            diff: larger,
        };
        assert_eq!(caps.refusals(), [grew]);
    }
}

pub fn finalize_in_any_order<T: Target>(t: &T) {
    let mut dev = Device::<_, 3>::open(t.stepped(cfg()), t.config()).unwrap();
    let runner = dev.publish(&[prog_add(5)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add5").unwrap();
    let r0 = runner.launched_via::<0>(&mut caps, code, Input::Host(&[0]));
    let r1 = runner.launched_via::<1>(&mut caps, code, Input::Previous);
    let r2 = runner.launched_via::<2>(&mut caps, code, Input::Previous);
    assert_eq!(runner.health().in_flight, 3);
    let (mut o0, mut o1, mut o2) = (
        Outputs::<0>::new(1),
        Outputs::<1>::new(1),
        Outputs::<2>::new(1),
    );
    let f2 = r2.fence().unwrap();
    let f0 = r0.fence().unwrap();
    let f1 = r1.fence().unwrap();
    f1.finalize(&mut o1).unwrap();
    f2.finalize(&mut o2).unwrap();
    f0.finalize(&mut o0).unwrap();
    assert_eq!(
        (o0.values(), o1.values(), o2.values()),
        (&[5][..], &[10][..], &[15][..])
    );
}

pub fn dropped_and_forgotten_runs_then_publish_and_drop<T: Target>(t: &T) {
    let drv = t.stepped(cfg());
    let mut dev = Device::<_, 2>::open(drv, t.config()).unwrap();
    {
        let runner = dev.publish(&[prog_add(1)]).unwrap();
        let mut caps = Captures::new(t);
        let code = runner.code("add1").unwrap();
        let dropped = runner.launched_via::<0>(&mut caps, code, Input::Host(&[1]));
        let forgotten = runner.launched_via::<1>(&mut caps, code, Input::Host(&[2]));
        drop(dropped); // waits for its own fence, then frees slot 0
        assert!(
            runner.take_slot::<0>().is_ok(),
            "a dropped launched run frees its slot"
        );
        std::mem::forget(forgotten); // ends the borrow; the device still knows
        let err = runner.take_slot::<1>().unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::SlotInFlight { .. }),
            "{err}"
        );
        assert_eq!(runner.health().in_flight, 1);
    }
    // Publication waits for the forgotten run and reclaims its slot.
    let runner = dev.publish(&[prog_add(2)]).unwrap();
    let mut caps = Captures::new(t);
    assert_eq!(runner.health().in_flight, 0);
    let mut o1 = Outputs::<1>::new(1);
    let code = runner.code("add2").unwrap();
    runner
        .run_serial(
            runner.take_slot::<1>().unwrap(),
            RunSpec::new(code, Input::Host(&[1])),
            &mut o1,
        )
        .unwrap();
    assert_eq!(o1.values(), &[3]);
    // Forget a launched run once more, then close the device: it drains the
    // forgotten run before releasing anything.
    let r = runner.launched_via::<0>(&mut caps, code, Input::Host(&[1]));
    std::mem::forget(r);
    // A capture borrows the runner: it goes first (its graph is destroyed
    // once the forgotten run is proven done, at the latest by the close).
    drop(caps);
    let stats = t.probe(dev.driver());
    dev.close().unwrap();
    let s = stats();
    assert_eq!(
        s.busy_destroy_refused, 0,
        "no stream with queued work was destroyed"
    );
    assert_eq!(
        (
            s.live_streams(),
            s.live_events(),
            s.live_allocations(),
            s.live_graphs
        ),
        (0, 0, 0, 0)
    );
}

pub fn chain_needs_a_predecessor<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    let err = runner
        .prepare(
            runner.take_slot::<0>().unwrap(),
            RunSpec::new(code, Input::Previous),
        )
        .unwrap()
        .launch_via(&mut caps)
        .unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::NoChainValue);
    let prepared = err
        .into_value()
        .expect("nothing was submitted: the run comes back");
    drop(prepared);
    assert!(runner.health().poisoned.is_none());
    assert!(
        runner.take_slot::<0>().is_ok(),
        "dropping a prepared run frees its slot"
    );
}

pub fn slot_tokens_are_unique<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let t0 = runner.take_slot::<0>().unwrap();
    assert_eq!(
        runner.take_slot::<0>().unwrap_err().kind(),
        &ErrorKind::SlotTaken
    );
    let lease = t0.lease();
    drop(t0);
    let t0 = runner.take_slot::<0>().unwrap();
    assert!(t0.lease() > lease, "every issue is a new lease");
    let code = runner.code("add1").unwrap();
    let empty = runner
        .prepare(t0, RunSpec::new(code, Input::Host(&[])))
        .unwrap_err();
    assert_eq!(empty.kind(), &ErrorKind::EmptyInput);
    let long = vec![0u32; 65];
    let err = runner
        .prepare(empty.into_value(), RunSpec::new(code, Input::Host(&long)))
        .unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::InputTooLong {
            len: 65,
            capacity: 64
        }
    );
    assert!(matches!(
        runner.code("nope").unwrap_err().kind(),
        ErrorKind::UnknownCallable(_)
    ));
}

pub fn foreign_tokens_and_code_are_refused<T: Target>(t: &T) {
    let mut d1 = open(t, cfg());
    let mut d2 = open(t, cfg());
    let r1 = d1.publish(&[prog_add(1)]).unwrap();
    let r2 = d2.publish(&[prog_add(1)]).unwrap();
    let c1 = r1.code("add1").unwrap();
    let c2 = r2.code("add1").unwrap();
    let err = r2
        .prepare(
            r1.take_slot::<0>().unwrap(),
            RunSpec::new(c2, Input::Host(&[1])),
        )
        .unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::ForeignHandle,
        "another device's token"
    );
    let err = r2
        .prepare(
            r2.take_slot::<0>().unwrap(),
            RunSpec::new(c1, Input::Host(&[1])),
        )
        .unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::ForeignHandle,
        "another device's code"
    );
}

pub fn fence_from_another_thread<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    let run = runner.launched_via::<1>(&mut caps, code, Input::Host(&[41]));
    let values = std::thread::scope(|s| {
        s.spawn(move || {
            let mut o = Outputs::<1>::new(1);
            run.fence().unwrap().finalize(&mut o).unwrap();
            o.values().to_vec()
        })
        .join()
        .unwrap()
    });
    assert_eq!(values, vec![42]);
}

pub fn try_fence_polls_without_waiting<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    let mut run = runner.launched_via::<0>(&mut caps, code, Input::Host(&[1]));
    let mut polls = 0;
    let fenced = loop {
        match run.try_fence() {
            Ok(f) => break f,
            Err(e) => {
                assert_eq!(e.kind(), &ErrorKind::NotReady);
                run = e.into_value();
                polls += 1;
                assert!(polls < 10_000, "never completed");
                // Poll with a short wait so a stepped device advances.
                run = match run.fence_for(Duration::from_micros(1)) {
                    Ok(f) => break f,
                    Err(e) => e.into_value(),
                };
            }
        }
    };
    assert!(polls >= 1, "the first poll found it not ready");
    let mut o = Outputs::<0>::new(1);
    fenced.finalize(&mut o).unwrap();
    assert_eq!(o.values(), &[2]);
}

pub fn real_time_queue_runs_correctly<T: Target>(t: &T) {
    let lat = runclaim::sim::LatencyModel::default().kernel(Duration::from_micros(100));
    // A watchdog no healthy run comes near: each run's AICore kernel waits
    // for its AICPU kernel's dispatch, and a host preempted between the two
    // submissions for longer than the watchdog would fault it.
    let drv = t.real_time(
        SimConfig::default()
            .latency(lat)
            .watchdog(Duration::from_secs(2)),
    );
    let mut dev = Device::<_, 2>::open(drv, t.config()).unwrap();
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    let (mut o0, mut o1) = (Outputs::<0>::new(4), Outputs::<1>::new(4));
    let (mut t0, mut t1) = (
        runner.take_slot::<0>().unwrap(),
        runner.take_slot::<1>().unwrap(),
    );
    for i in (0..40u32).step_by(2) {
        let r0 = runner
            .prepare(t0, RunSpec::new(code, Input::Host(&[i])))
            .unwrap()
            .launch_via(&mut caps)
            .unwrap();
        let r1 = runner
            .prepare(t1, RunSpec::new(code, Input::Previous))
            .unwrap()
            .launch_via(&mut caps)
            .unwrap();
        t0 = r0.fence().unwrap().finalize(&mut o0).unwrap().token;
        t1 = r1.fence().unwrap().finalize(&mut o1).unwrap().token;
        assert_eq!((o0.values(), o1.values()), (&[i + 1][..], &[i + 2][..]));
    }
    let replaying = Counts::replaying(2, 38, 0);
    caps.expect(runner.device().stats(), replaying);
}

/// A finalize into a buffer that is too small hands the *fenced run* back:
/// the values are still on the device, and a retry with a bigger buffer
/// gets them. (Before, the token came back and the results were lost.)
pub fn finalize_into_a_small_buffer_hands_the_run_back<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(10)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add10").unwrap();
    let fenced = runner
        .launched_via::<0>(&mut caps, code, Input::Host(&[1, 2, 3, 4]))
        .fence()
        .unwrap();
    let id = fenced.id();
    let mut small = Outputs::<0>::new(3);
    let err = fenced.finalize(&mut small).unwrap_err();
    assert_eq!(
        err.kind(),
        &ErrorKind::OutputsTooSmall {
            len: 4,
            capacity: 3
        }
    );
    assert_eq!(
        (err.action(), err.run(), err.slot()),
        (runclaim::contract::Action::Finalize, Some(id), Some(0))
    );
    assert!(small.values().is_empty(), "nothing half-written is shown");
    let fenced = err.into_value();
    assert_eq!(fenced.id(), id, "the same run comes back");
    let mut big = Outputs::<0>::new(4);
    let done = fenced.finalize(&mut big).unwrap();
    assert_eq!(big.values(), &[11, 12, 13, 14]);
    assert_eq!(done.run, id);
    // Giving up on a fenced run frees its slot for the next run.
    let fenced = runner
        .launched_via::<1>(&mut caps, code, Input::Host(&[5]))
        .fence()
        .unwrap();
    let token = fenced.into_token();
    let again = runner
        .run_serial(
            token,
            RunSpec::new(code, Input::Host(&[6])),
            &mut Outputs::<1>::new(1),
        )
        .unwrap();
    drop((done, again));
}
