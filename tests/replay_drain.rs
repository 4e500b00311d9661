//! A drain after a faulted replay: the replay's AICore kernel runs on its
//! graph's own stream, which the contract's streams do not follow, and
//! hangs (its AICPU kernel faulted) until the device watchdog ends it. The
//! drain's destroy of the graph waits for it, so when the drain returns no
//! kernel of the faulted run still runs and no graph is left.
//!
//! Found by the contract suite run replaying (`tests/contract_sim.rs`,
//! `replay::kernel_fault_poisons_and_drain_recovers`): the destroy's wait
//! was bounded by one watchdog from the call, and the hung kernel had
//! started one step after it, so the drain released the slot while the
//! kernel ran, and the graph stayed.

use std::time::Duration;

use runclaim::driver::abi::Program;
use runclaim::sim::trace::{TaskTag, TraceKind};
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec, Runner};

/// Slot 0's first run, captured, faulting in its AICPU kernel: its id
/// (its error and its capture dropped).
fn faulted_replay(sim: &SimDriver, runner: &Runner<'_, SimDriver, 2>) -> u64 {
    let code = runner.code("inc").unwrap();
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicpu,
        nth: 1,
    });
    let token = runner.take_slot::<0>().unwrap();
    let prepared = runner
        .prepare(token, RunSpec::new(code, Input::Host(&[1])))
        .unwrap();
    let (run, capture) = prepared.capture().unwrap();
    let id = run.id().get();
    let err = run.fence().unwrap_err();
    assert!(
        matches!(err.kind(), runclaim::contract::ErrorKind::Fault(_)),
        "{err}"
    );
    drop((err, capture));
    id
}

/// A stepped device (2 ms watchdog), for `inc`.
fn device() -> (SimDriver, Device<SimDriver, 2>) {
    let cfg = SimConfig::default().watchdog(Duration::from_millis(2));
    let sim = SimDriver::stepped(cfg);
    let dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
    (sim, dev)
}

fn inc() -> [Callable; 1] {
    [Callable::program("inc", &Program::new().add(1))]
}

/// The next run in slot 0 computes right.
fn serves(runner: &Runner<'_, SimDriver, 2>) {
    let code = runner.code("inc").unwrap();
    let mut out = runclaim::Outputs::<0>::new(1);
    let spec = RunSpec::new(code, Input::Host(&[9]));
    runner
        .run_serial(runner.take_slot::<0>().unwrap(), spec, &mut out)
        .unwrap();
    assert_eq!(out.values(), &[10]);
}

#[test]
fn a_drain_after_a_faulted_replay_waits_for_its_graphs_kernels() {
    let (sim, mut dev) = device();
    let mut runner = dev.publish(&inc()).unwrap();
    let faulted = faulted_replay(&sim, &runner);
    let report = runner.drain().unwrap();
    let (trace, stats) = (sim.trace(), sim.stats());
    assert_eq!(report.streams_recreated, 1, "the launch (AICPU) stream");
    assert_eq!(stats.live_graphs, 0, "the drain destroyed the graph");
    let ended = trace.iter().any(|t| {
        t.run == faulted
            && matches!(
                t.what,
                TraceKind::Faulted(_) | TraceKind::Finished(TaskTag::Aicore)
            )
            && trace.iter().any(|s| {
                s.run == faulted
                    && s.stream == t.stream
                    && s.what == TraceKind::Started(TaskTag::Aicore)
            })
    });
    assert!(
        ended,
        "the faulted run's AICore kernel ended before the drain returned: {trace:#?}"
    );
    serves(&runner);
}

/// The same drain with the graph's destroy refused: the replay may still
/// run on the graph's own streams, so its slot stays quarantined (the
/// other slot is back in service); the next drain destroys the graph and
/// releases the slot. Negative control: without the quarantine, the slot
/// would be taken while its graph still exists.
#[test]
fn a_slot_whose_graph_could_not_be_destroyed_stays_quarantined_until_a_drain_destroys_it() {
    use runclaim::driver::Op;
    let (sim, mut dev) = device();
    let mut runner = dev.publish(&inc()).unwrap();
    faulted_replay(&sim, &runner);
    // Refused, and refused again when asked once more.
    for nth in 1..=2 {
        sim.inject(Fault::FailCall {
            op: Op::GraphDestroy,
            nth,
        });
    }
    let report = runner.drain().unwrap();
    assert_eq!(sim.stats().live_graphs, 1, "the destroy was refused");
    assert_eq!(
        report.kept.iter().collect::<Vec<_>>(),
        [0],
        "the report says which slot stays out"
    );
    assert_eq!(report.released, 0, "slot 0 is not counted as returned");
    assert_eq!(runner.health().quarantined.len(), 1);
    assert!(runner.take_slot::<0>().is_err(), "slot 0 is out of service");
    drop(runner.take_slot::<1>().unwrap());
    let report = runner.drain().unwrap();
    assert_eq!(sim.stats().live_graphs, 0, "the next drain destroyed it");
    assert_eq!(report.released, 1, "the slot kept for its graph, released");
    assert!(report.kept.is_empty());
    serves(&runner);
}

/// A device closed while a graph it could not destroy remains (every
/// destroy refused): a faulted replay may still run on the graph's own
/// streams, so `close` releases nothing and hands the device back, naming
/// the refusal; once the driver destroys the graph, the next close
/// releases everything. Dropped instead, the device leaks its memory.
/// Negative control: before this, close freed every allocation (live bytes
/// 0) with the graph still alive (found by an adversarial review).
#[test]
fn a_device_with_a_graph_it_could_not_destroy_is_not_released() {
    use runclaim::driver::Op;
    let refuse_destroys = |sim: &SimDriver| {
        for nth in 1..=8 {
            sim.inject(Fault::FailCall {
                op: Op::GraphDestroy,
                nth,
            });
        }
    };
    for drop_it in [false, true] {
        let (sim, mut dev) = device();
        {
            let mut runner = dev.publish(&inc()).unwrap();
            faulted_replay(&sim, &runner);
            refuse_destroys(&sim);
            assert!(!runner.drain().unwrap().kept.is_empty());
        }
        let bytes = sim.stats().live_bytes;
        assert!(bytes > 0);
        if drop_it {
            drop(dev);
            let s = sim.stats();
            assert_eq!(
                (s.live_graphs, s.live_bytes),
                (1, bytes),
                "leaked, not freed"
            );
            continue;
        }
        let e = dev.close().unwrap_err();
        assert!(e.to_string().contains("graph_destroy"), "{e}");
        let s = sim.stats();
        assert_eq!(
            (s.live_graphs, s.live_bytes),
            (1, bytes),
            "nothing released"
        );
        let dev = e.into_value().expect("the device, back");
        sim.clear_faults();
        dev.close().unwrap();
        let s = sim.stats();
        assert_eq!((s.live_graphs, s.live_bytes), (0, 0));
    }
}
