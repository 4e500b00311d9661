//! Negative controls: every invariant checker of the property tests, shown
//! failing on a deliberately broken case — a broken driver wrapper or a
//! broken trace — next to a passing twin. A checker that cannot fail proves
//! nothing.
//!
//! The broken drivers that rewrite runclaim's argument block (`RunArgs`:
//! a shared wall or status, a lost status, a cleared live handshake) are
//! runclaim-layout-specific and run under runclaim's ABI only. Two
//! breakages never touch a block — launches reordered, a stale stream
//! handed back — and the property tests under the a2a3 ABI must catch
//! them too: those controls run under both.

mod common;

use common::LaunchIn;
use common::abi::Abi;
use common::broken::{Breakage, Broken};
use common::checks;
use common::model::{In, Op, run_case, run_case_under, sim_config};
use runclaim::contract::{ErrorKind, Health, Record};
use runclaim::driver::abi::Program;
use runclaim::driver::{Driver, StreamId};
use runclaim::sim::trace::{TaskTag, TraceEvent, TraceKind};
use runclaim::sim::{SimConfig, SimDriver, SimStats};
use runclaim::{Callable, Device, DeviceConfig, Input};

/// `run_case` on the plain simulator passes; on the broken one it fails
/// with a message containing `expect`.
fn control(ops: &[Op], how: Breakage, expect: &str) {
    run_case::<_, 2>(ops, 1, |s| s).expect("the passing twin");
    let err = run_case::<_, 2>(ops, 1, |s| Broken::new(s, how))
        .expect_err("the broken driver must be caught");
    assert!(err.contains(expect), "{how:?} caught, but as: {err}");
}

/// [`control`] under `abi`'s kernel ABI, for a breakage that leaves the
/// argument blocks alone.
fn control_under(abi: Abi, ops: &[Op], how: Breakage, expect: &str) {
    run_case_under::<_, 2>(abi, ops, 1, |s| s).expect("the passing twin");
    let err = run_case_under::<_, 2>(abi, ops, 1, |s| Broken::new(s, how))
        .expect_err("the broken driver must be caught");
    assert!(
        err.contains(expect),
        "{}: {how:?} caught, but as: {err}",
        abi.name()
    );
}

fn lifecycle(slot: usize, callable: usize, input: &In) -> Vec<Op> {
    (0..5)
        .map(|_| Op::Advance(slot, callable, input.clone(), 2))
        .collect()
}

#[test]
fn reused_stale_stream_is_caught_by_the_value_and_stale_code_checks() {
    // Run p0 (cached by the AICore stream), publish a set whose new program
    // p2 lands at p0's code address, run p2: only a fresh stream computes p2.
    let mut ops = lifecycle(0, 0, &In::Host(vec![1, 2, 3]));
    ops.push(Op::Publish(1));
    ops.extend(lifecycle(0, 1, &In::Host(vec![1, 2, 3])));
    control(&ops, Breakage::ReuseStaleStream, "executed stale code");
    control_under(
        Abi::A2a3,
        &ops,
        Breakage::ReuseStaleStream,
        "executed stale code",
    );
}

#[test]
fn shared_device_wall_is_caught_by_the_record_check() {
    use Op::*;
    let ops = vec![
        Take(0),
        Take(1),
        Prepare(0, 0, In::Host(vec![1])),
        Prepare(1, 0, In::Host(vec![2])),
        Launch(0),
        Launch(1),
        Fence(0),
        Fence(1),
        Finalize(0),
        Finalize(1),
    ];
    control(
        &ops,
        Breakage::ShareDeviceWall,
        "device-wall record carries run 2",
    );
}

#[test]
fn shared_status_record_is_caught_by_the_record_check() {
    use Op::*;
    let ops = vec![
        Take(0),
        Take(1),
        Prepare(0, 0, In::Host(vec![1])),
        Prepare(1, 0, In::Host(vec![2])),
        Launch(0),
        Launch(1),
        Fence(0),
        Fence(1),
        Finalize(0),
        Finalize(1),
    ];
    // Run 2 (slot 1) overwrote slot 0's status record after run 1 did.
    control(&ops, Breakage::ShareStatus, "status record carries run 2");
}

#[test]
fn lost_status_record_is_caught_by_the_record_check() {
    let ops = lifecycle(0, 0, &In::Host(vec![1]));
    control(
        &ops,
        Breakage::LoseStatus,
        "status record was never written",
    );
}

#[test]
fn clearing_a_live_handshake_is_caught_as_a_device_fault() {
    use Op::*;
    let ops = vec![
        Take(0),
        Prepare(0, 0, In::Host(vec![1])),
        Launch(0),
        // Let run 0's AICore workers report in (stream 1 is the AICore stream).
        StepStream(1, 5),
        Take(1),
        Prepare(1, 0, In::Host(vec![2])),
        Launch(1),
        Fence(0),
    ];
    control(&ops, Breakage::ClearLiveHandshake, "fence: device fault");
}

/// Launches two runs back to back and drops them; returns the trace and
/// the runs' ids in launch order.
fn two_runs<D: Driver + 'static>(
    abi: Abi,
    driver: D,
    sim: &SimDriver,
) -> (Vec<TraceEvent>, Vec<u64>) {
    let mut dev = Device::<_, 2>::open(driver, abi.config()).unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let r0 = runner.launched::<0>(code, Input::Host(&[1]));
    let r1 = runner.launched::<1>(code, Input::Host(&[2]));
    let ids = vec![r0.id().get(), r1.id().get()];
    drop((r0, r1));
    (sim.trace(), ids)
}

#[test]
fn reordered_launches_are_caught_by_the_device_order_check() {
    for abi in Abi::ALL {
        let sim = abi.stepped(sim_config(1));
        let (trace, ids) = two_runs(abi, sim.clone(), &sim);
        checks::device_order(&trace, &ids, &ids).expect("the passing twin");
        let sim = abi.stepped(sim_config(1));
        let broken = Broken::new(sim.clone(), Breakage::ReorderLaunches);
        let (trace, ids) = two_runs(abi, broken, &sim);
        let err = checks::device_order(&trace, &ids, &ids).expect_err("reordering must be caught");
        assert!(
            err.contains("Aicore kernels enqueued in order"),
            "{}: {err}",
            abi.name()
        );
    }
}

// ----- each checker on a hand-made broken case --------------------------------

fn ev(run: u64, what: TraceKind) -> TraceEvent {
    let stream = if matches!(what, TraceKind::Started(TaskTag::Aicpu)) {
        1
    } else {
        2
    };
    TraceEvent::new(0, StreamId::from_raw(stream), run, what)
}

#[test]
fn device_order_checker_fails_on_a_swap_a_skip_or_a_phantom() {
    use TraceKind::{Enqueued, Started};
    let core = |run, what| TraceEvent::new(0, StreamId::from_raw(2), run, what);
    let a = TaskTag::Aicore;
    let ok = [
        core(1, Enqueued(a)),
        core(2, Enqueued(a)),
        core(1, Started(a)),
    ];
    checks::device_order(&ok, &[1, 2], &[]).unwrap();
    // Enqueued out of launch order.
    let swapped = [core(2, Enqueued(a)), core(1, Enqueued(a))];
    assert!(checks::device_order(&swapped, &[1, 2], &[]).is_err());
    // Run 2 started although run 1, ahead of it, never did.
    let skipped = [
        core(1, Enqueued(a)),
        core(2, Enqueued(a)),
        core(2, Started(a)),
    ];
    assert!(checks::device_order(&skipped, &[1, 2], &[]).is_err());
    // A kernel that was never launched.
    let phantom = [core(9, Enqueued(a))];
    assert!(checks::device_order(&phantom, &[1, 2], &[]).is_err());
}

#[test]
fn output_checker_fails_on_one_wrong_element() {
    checks::outputs(1, &[1, 2, 3], &[1, 2, 3]).unwrap();
    assert!(checks::outputs(1, &[1, 2, 3], &[1, 2, 4]).is_err());
    assert!(checks::outputs(1, &[1, 2, 3], &[1, 2]).is_err());
}

#[test]
fn record_checker_fails_on_another_runs_record() {
    checks::own_records(&ErrorKind::RunFailed { code: 3 }).unwrap();
    let other = ErrorKind::RecordMismatch {
        record: Record::Wall,
        expected: 1,
        found: 2,
    };
    assert!(checks::own_records(&other).is_err());
    assert!(checks::own_records(&ErrorKind::RecordMissing(Record::Status)).is_err());
}

#[test]
fn stats_checkers_fail_on_stale_code_busy_destroy_and_leaks() {
    let mut s = SimStats::default();
    checks::no_stale_code(&s).unwrap();
    checks::no_busy_destroy(&s).unwrap();
    checks::no_leaks(&s).unwrap();
    s.stale_executions = 1;
    assert!(checks::no_stale_code(&s).is_err());
    s.busy_destroy_refused = 1;
    assert!(checks::no_busy_destroy(&s).is_err());
    // A real leak and a real busy destroy on the simulator.
    let sim = SimDriver::stepped(sim_config(1));
    let stream = sim.create_stream().unwrap();
    let e = sim.create_event().unwrap();
    sim.record_event(e, stream).unwrap();
    assert!(sim.destroy_stream(stream).is_err());
    assert!(checks::no_busy_destroy(&sim.stats()).is_err());
    assert!(checks::no_leaks(&sim.stats()).is_err());
}

#[test]
fn bound_checker_fails_past_its_bound() {
    checks::bounded("wait", 10, 10).unwrap();
    assert!(checks::bounded("wait", 11, 10).is_err());
}

#[test]
fn health_checker_fails_on_any_difference() {
    // A real device's health with one run in flight, nothing poisoned or
    // quarantined.
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = Device::<_, 2>::open(sim, DeviceConfig::default()).unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let run = runner.launched::<0>(runner.code("f").unwrap(), Input::Host(&[1]));
    let clean: Health = runner.health();
    drop(run);
    checks::health(&clean, false, 1, &[]).unwrap();
    assert!(checks::health(&clean, true, 1, &[]).is_err());
    assert!(checks::health(&clean, false, 0, &[]).is_err());
    assert!(checks::health(&clean, false, 1, &[0]).is_err());
}

#[test]
fn overlap_checker_tells_queued_from_serial_and_a_skipped_check_fails() {
    let queued = [
        ev(1, TraceKind::Enqueued(TaskTag::Aicpu)),
        ev(2, TraceKind::Enqueued(TaskTag::Aicore)),
        TraceEvent::new(
            0,
            StreamId::from_raw(2),
            1,
            TraceKind::Finished(TaskTag::Record(runclaim::driver::EventId::from_raw(5))),
        ),
    ];
    assert_eq!(checks::overlapped(&queued, 1, 2), Some(true));
    let serial = [queued[0], queued[2], queued[1]];
    assert_eq!(checks::overlapped(&serial, 1, 2), Some(false));
    // A trace without the runs is a skipped check: `None`, never a pass.
    assert_eq!(checks::overlapped(&[], 1, 2), None);
}
