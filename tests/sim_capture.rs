//! The simulator's stream capture, through the public `Driver` surface:
//! what a capture records, what its replay runs (and where), and each rule
//! it keeps, refused with the runtime's `CaptureRule`.

use std::time::Duration;

use runclaim::driver::{
    Capabilities, CaptureRule, Completion, DevPtr, Driver, DriverErrorKind, GraphId, HandleKind, Op,
};
use runclaim::sim::{Fault, SimConfig, SimDriver};

const T: Duration = Duration::from_secs(5);

fn read(sim: &SimDriver, p: DevPtr, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    sim.copy_from_device(&mut b, p).unwrap();
    b
}

fn refused(r: Result<impl std::fmt::Debug, runclaim::driver::DriverError>) -> CaptureRule {
    match r.unwrap_err().kind() {
        DriverErrorKind::Capture { rule } => *rule,
        other => panic!("expected a capture rule, got {other:?}"),
    }
}

/// Origin `a` forks to `b` through `e1` and joins back through `e2`: the
/// replay runs both branches, on the graph's own streams, and leaves `a`
/// ordered after it.
fn fork_join(sim: &SimDriver) -> (GraphId, DevPtr, [runclaim::driver::StreamId; 2]) {
    let (a, b) = (sim.create_stream().unwrap(), sim.create_stream().unwrap());
    let (e1, e2) = (sim.create_event().unwrap(), sim.create_event().unwrap());
    let p = sim.alloc(8).unwrap();
    sim.capture_begin(a).unwrap();
    sim.memset_async(a, p, 1, 4).unwrap();
    sim.record_event(e1, a).unwrap();
    sim.stream_wait_event(b, e1).unwrap(); // b joins
    sim.memset_async(b, p.offset(4), 2, 4).unwrap();
    sim.record_event(e2, b).unwrap();
    sim.stream_wait_event(a, e2).unwrap(); // and is joined back
    let g = sim.capture_end(a).unwrap();
    (g, p, [a, b])
}

#[test]
fn a_capture_records_and_its_replay_runs_every_branch() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (g, p, [a, b]) = fork_join(&sim);
    // Captured, nothing ran.
    sim.run_until_idle(1000).unwrap();
    assert_eq!(read(&sim, p, 8), [0; 8]);
    let before = sim.stats().tasks_run.get(&b).copied().unwrap_or(0);
    sim.graph_launch(g, a).unwrap();
    sim.sync_stream(a, T).unwrap();
    assert_eq!(read(&sim, p, 8), [1, 1, 1, 1, 2, 2, 2, 2]);
    // The second branch ran on the graph's stream, not on `b`.
    assert_eq!(sim.stats().tasks_run.get(&b).copied().unwrap_or(0), before);
    // A replay again, after the host cleared the memory.
    sim.memset(p, 0, 8).unwrap();
    sim.graph_launch(g, a).unwrap();
    sim.sync_stream(a, T).unwrap();
    assert_eq!(read(&sim, p, 8), [1, 1, 1, 1, 2, 2, 2, 2]);
    let stats = sim.stats();
    assert_eq!(
        (stats.captures, stats.graph_launches, stats.live_graphs),
        (1, 2, 1)
    );
    assert_eq!(stats.calls[&Op::GraphLaunch], 2);
    sim.graph_destroy(g).unwrap();
    assert_eq!(sim.stats().live_graphs, 0);
    // The graph's private streams and events are not the caller's: none
    // is counted as created, and none is left.
    let stats = sim.stats();
    assert_eq!((stats.live_streams(), stats.live_events()), (2, 2));
}

#[test]
fn a_replay_records_the_events_it_captured() {
    let sim = SimDriver::stepped(SimConfig::default());
    let a = sim.create_stream().unwrap();
    let e = sim.create_event().unwrap();
    let p = sim.alloc(4).unwrap();
    sim.capture_begin(a).unwrap();
    sim.memset_async(a, p, 9, 4).unwrap();
    sim.record_event(e, a).unwrap();
    let g = sim.capture_end(a).unwrap();
    // The capture's record is not a record: the event was never recorded.
    assert_eq!(sim.query_event(e).unwrap(), Completion::Complete);
    sim.graph_launch(g, a).unwrap();
    assert_eq!(sim.query_event(e).unwrap(), Completion::NotReady);
    sim.sync_event(e, T).unwrap();
    assert_eq!(read(&sim, p, 4), [9; 4]);
}

#[test]
fn synchronous_calls_on_a_capturing_stream_or_a_captured_event_are_refused() {
    let sim = SimDriver::stepped(SimConfig::default());
    let a = sim.create_stream().unwrap();
    let e = sim.create_event().unwrap();
    sim.capture_begin(a).unwrap();
    sim.record_event(e, a).unwrap();
    let sync = CaptureRule::SyncWhileCapturing;
    assert_eq!(refused(sim.sync_stream(a, T)), sync);
    assert_eq!(refused(sim.query_stream(a)), sync);
    assert_eq!(refused(sim.sync_event(e, T)), sync);
    assert_eq!(refused(sim.query_event(e)), sync);
    assert_eq!(
        refused(sim.destroy_stream(a)),
        CaptureRule::AlreadyCapturing
    );
    assert_eq!(refused(sim.capture_begin(a)), CaptureRule::AlreadyCapturing);
    sim.capture_end(a).unwrap();
    // Ended, the stream and the event answer again.
    assert_eq!(sim.query_stream(a).unwrap(), Completion::Complete);
    assert_eq!(sim.query_event(e).unwrap(), Completion::Complete);
}

#[test]
fn a_capture_ends_only_on_its_origin_with_every_branch_joined_back() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (a, b) = (sim.create_stream().unwrap(), sim.create_stream().unwrap());
    let e1 = sim.create_event().unwrap();
    let p = sim.alloc(4).unwrap();
    assert_eq!(refused(sim.capture_end(a)), CaptureRule::NotCapturing);
    sim.capture_begin(a).unwrap();
    sim.record_event(e1, a).unwrap();
    sim.stream_wait_event(b, e1).unwrap();
    sim.memset_async(b, p, 1, 4).unwrap();
    // `b` joined: it is in the capture, not its origin.
    assert_eq!(refused(sim.capture_end(b)), CaptureRule::NotCapturing);
    assert_eq!(refused(sim.capture_end(a)), CaptureRule::Unjoined);
    // The capture ended with the refusal: neither stream captures now.
    sim.memset_async(b, p, 3, 4).unwrap();
    sim.sync_stream(b, T).unwrap();
    assert_eq!(read(&sim, p, 4), [3; 4]);
    sim.capture_begin(a).unwrap();
    sim.capture_end(a).unwrap();
}

#[test]
fn a_captured_stream_waits_only_for_what_the_capture_recorded() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (a, b) = (sim.create_stream().unwrap(), sim.create_stream().unwrap());
    let outside = sim.create_event().unwrap();
    sim.record_event(outside, b).unwrap();
    sim.capture_begin(a).unwrap();
    assert_eq!(
        refused(sim.stream_wait_event(a, outside)),
        CaptureRule::OutsideDependency
    );
    // A stream outside waiting for an event outside is untouched.
    sim.stream_wait_event(b, outside).unwrap();
    sim.capture_end(a).unwrap();
}

/// A destroy waits for a replay of the graph to finish, as
/// `aclmdlRIDestroy` does; one that cannot finish (its record never
/// completes, the watchdog far off) is refused, and the graph stays.
#[test]
fn a_destroy_waits_for_its_replay_and_refuses_one_that_does_not_finish() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (g, p, [a, _]) = fork_join(&sim);
    sim.graph_launch(g, a).unwrap();
    sim.graph_destroy(g).unwrap();
    assert_eq!(
        read(&sim, p, 8),
        [1, 1, 1, 1, 2, 2, 2, 2],
        "it ran to its end"
    );

    let mut cfg = SimConfig::default().watchdog(Duration::from_secs(60));
    cfg.max_wait_steps = 1000;
    let sim = SimDriver::stepped(cfg);
    let (g, _, [a, _]) = fork_join(&sim);
    // The replay's second record (`e2`, which the origin waits for).
    sim.inject(Fault::EventNeverCompletes { nth: 2 });
    sim.graph_launch(g, a).unwrap();
    assert_eq!(refused(sim.graph_destroy(g)), CaptureRule::GraphRunning);
    assert_eq!(sim.stats().live_graphs, 1);
}

/// A destroyed graph, or another clone's, is refused as a bad handle.
#[test]
fn a_destroyed_or_foreign_graph_is_refused() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (g, _, [a, _]) = fork_join(&sim);
    let other = sim.clone();
    let s = other.create_stream().unwrap();
    assert!(matches!(
        other.graph_launch(g, s).unwrap_err().kind(),
        DriverErrorKind::BadHandle {
            kind: HandleKind::Graph,
            ..
        }
    ));
    assert!(other.graph_destroy(g).is_err());
    sim.graph_destroy(g).unwrap();
    for r in [sim.graph_launch(g, a), sim.graph_destroy(g)] {
        assert!(matches!(
            r.unwrap_err().kind(),
            DriverErrorKind::BadHandle {
                kind: HandleKind::Graph,
                ..
            }
        ));
    }
}

#[test]
fn capture_calls_take_injected_failures() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (g, _, [a, _]) = fork_join(&sim);
    sim.inject(Fault::FailCall {
        op: Op::GraphLaunch,
        nth: 1,
    });
    let e = sim.graph_launch(g, a).unwrap_err();
    assert_eq!(e.op(), Op::GraphLaunch);
    assert!(matches!(e.kind(), DriverErrorKind::Injected { .. }));
    // Refused whole: nothing was queued.
    assert_eq!(sim.query_stream(a).unwrap(), Completion::Complete);
    sim.graph_launch(g, a).unwrap();
    sim.sync_stream(a, T).unwrap();
}

#[test]
fn a_driver_without_capture_refuses_every_capture_call_and_a_box_forwards_them() {
    let d: Box<dyn Driver> = Box::new(runclaim::driver::instant::InstantDriver::new());
    let s = d.create_stream().unwrap();
    for (op, r) in [
        (Op::CaptureBegin, d.capture_begin(s)),
        (Op::CaptureEnd, d.capture_end(s).map(drop)),
        (Op::GraphLaunch, d.graph_launch(GraphId::from_raw(1), s)),
        (Op::GraphDestroy, d.graph_destroy(GraphId::from_raw(1))),
    ] {
        let e = r.unwrap_err();
        assert_eq!((e.op(), e.kind()), (op, &DriverErrorKind::Unsupported));
    }
    assert!(!d.info().capabilities.contains(Capabilities::CAPTURE));
    let sim: Box<dyn Driver> = Box::new(SimDriver::stepped(SimConfig::default()));
    assert!(sim.info().capabilities.contains(Capabilities::CAPTURE));
    let s = sim.create_stream().unwrap();
    sim.capture_begin(s).unwrap();
    let g = sim.capture_end(s).unwrap();
    sim.graph_launch(g, s).unwrap();
    sim.sync_stream(s, T).unwrap();
    sim.graph_destroy(g).unwrap();
}

/// A device that cannot capture (an Atlas training card): no
/// `Capabilities::CAPTURE`, every begin refused as `NotCapturable`, and
/// the contract's capture refused before any runtime call.
#[test]
fn a_device_that_cannot_capture_refuses_and_the_contract_asks_nothing() {
    let sim = SimDriver::stepped(SimConfig::default().capture(false));
    assert!(!sim.info().capabilities.contains(Capabilities::CAPTURE));
    let s = sim.create_stream().unwrap();
    assert_eq!(refused(sim.capture_begin(s)), CaptureRule::NotCapturable);
    let mut dev =
        runclaim::Device::<_, 2>::open(sim.clone(), runclaim::DeviceConfig::default()).unwrap();
    let runner = dev
        .publish(&[runclaim::Callable::program(
            "f",
            &runclaim::driver::abi::Program::new().add(1),
        )])
        .unwrap();
    let spec = runclaim::RunSpec::new(runner.code("f").unwrap(), runclaim::Input::Host(&[1]));
    let prepared = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap();
    let before = sim.stats().total_calls();
    let e = prepared.capture().unwrap_err();
    assert!(
        matches!(e.kind(), runclaim::contract::ErrorKind::Replay(r)
            if **r == runclaim::contract::ReplayRefusal::DriverCannotCapture),
        "{:?}",
        e.kind()
    );
    assert_eq!(sim.stats().total_calls(), before, "no runtime call");
}
