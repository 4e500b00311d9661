//! Stream capture through the acl driver over the fake runtime: what a
//! capture records runs only when its graph is launched, and then in the
//! captured order (two streams forked and joined by events included); each
//! rule of the runtime is refused with its `CaptureRule` and the runtime's
//! code; graph handles are checked before any C call; and a runtime
//! without the capture symbols, or whose new-mode events are refused,
//! offers no capture.

mod common;

use std::time::Duration;

use common::acl::{control, open, open_lite, open_on};
use fake_acl::control::FRESH_BYTE;
use runclaim::driver::acl::AclDriver;
use runclaim::driver::{
    Capabilities, CaptureRule, DevPtr, Driver, DriverError, DriverErrorKind, GraphId, HandleKind,
};
use runclaim::sim::SimConfig;

const SYNC: Duration = Duration::from_secs(1);
const LEN: usize = 64;

fn fast() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

fn read(d: &AclDriver, p: DevPtr) -> Vec<u8> {
    let mut b = vec![0u8; LEN];
    d.copy_from_device(&mut b, p).unwrap();
    b
}

/// `e` is the refusal of `rule`, with the runtime's `code` as its native
/// detail.
#[track_caller]
fn refused_by(e: &DriverError, rule: CaptureRule, code: i32) {
    assert_eq!(e.kind(), &DriverErrorKind::Capture { rule }, "{e}");
    assert_eq!(e.native().map(|n| n.code), Some(code), "{e}");
}

#[test]
fn a_captured_memset_and_copy_run_only_when_the_graph_is_launched_and_at_each_launch() {
    let d = open(&fast(), false);
    assert!(d.capabilities().contains(Capabilities::CAPTURE));
    assert!(d.info().capabilities.contains(Capabilities::CAPTURE));
    let s = d.create_stream().unwrap();
    let (src, dst) = (d.alloc(LEN).unwrap(), d.alloc(LEN).unwrap());
    d.capture_begin(s).unwrap();
    d.memset_async(s, src, 7, LEN).unwrap();
    d.copy_async(s, dst, src, LEN).unwrap();
    let graph = d.capture_end(s).unwrap();
    // Recorded, not run: the stream is empty and the memory untouched.
    d.sync_stream(s, SYNC).unwrap();
    assert_eq!(read(&d, dst), [FRESH_BYTE; LEN]);
    d.graph_launch(graph, s).unwrap();
    d.sync_stream(s, SYNC).unwrap();
    assert_eq!((read(&d, src), read(&d, dst)), (vec![7; LEN], vec![7; LEN]));
    // Each launch replays the whole sequence.
    d.memset(src, 0, LEN).unwrap();
    d.memset(dst, 0, LEN).unwrap();
    d.graph_launch(graph, s).unwrap();
    d.sync_stream(s, SYNC).unwrap();
    assert_eq!(read(&d, dst), [7; LEN]);
    d.graph_destroy(graph).unwrap();
    let st = control().stats(d.device_id());
    assert_eq!(
        (st.captures, st.graph_launches, st.live_graphs),
        (1, 2, 0),
        "one capture, two replays, no graph left"
    );
}

#[test]
fn two_streams_forked_and_joined_by_events_replay_in_their_captured_order() {
    let d = open(&fast(), false);
    let (s1, s2) = (d.create_stream().unwrap(), d.create_stream().unwrap());
    let (e1, e2) = (d.create_event().unwrap(), d.create_event().unwrap());
    let [set, copied, other, joined] = [(); 4].map(|()| d.alloc(LEN).unwrap());
    d.capture_begin(s1).unwrap();
    d.memset_async(s1, set, 3, LEN).unwrap();
    d.record_event(e1, s1).unwrap(); // fork: s2 joins the capture
    d.stream_wait_event(s2, e1).unwrap();
    d.copy_async(s2, copied, set, LEN).unwrap();
    d.memset_async(s2, other, 9, LEN).unwrap();
    d.record_event(e2, s2).unwrap(); // join: s1 waits for s2's last task
    d.stream_wait_event(s1, e2).unwrap();
    d.copy_async(s1, joined, copied, LEN).unwrap();
    let graph = d.capture_end(s1).unwrap();
    assert_eq!(
        read(&d, joined),
        [FRESH_BYTE; LEN],
        "nothing ran at capture"
    );
    for round in 0..2 {
        for p in [set, copied, other, joined] {
            d.memset(p, 0, LEN).unwrap();
        }
        d.graph_launch(graph, s1).unwrap();
        d.sync_stream(s1, SYNC).unwrap();
        assert_eq!(
            read(&d, copied),
            [3; LEN],
            "round {round}: s2 copied after s1's memset"
        );
        assert_eq!(read(&d, other), [9; LEN], "round {round}");
        assert_eq!(
            read(&d, joined),
            [3; LEN],
            "round {round}: s1 copied after s2's work"
        );
    }
    // The captured streams themselves hold nothing: the graph runs on its own.
    d.sync_stream(s2, SYNC).unwrap();
    d.graph_destroy(graph).unwrap();
    for e in [e1, e2] {
        d.destroy_event(e).unwrap();
    }
    for s in [s1, s2] {
        d.destroy_stream(s).unwrap();
    }
}

#[test]
fn synchronous_calls_on_a_capturing_stream_or_a_captured_event_are_refused() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let e = d.create_event().unwrap();
    d.capture_begin(s).unwrap();
    d.record_event(e, s).unwrap();
    // The runtime answers 107027 for a stream, 107028 for an event.
    for r in [
        d.sync_stream(s, SYNC),
        d.sync_stream(s, Duration::ZERO),
        d.query_stream(s).map(drop),
    ] {
        refused_by(&r.unwrap_err(), CaptureRule::SyncWhileCapturing, 107_027);
    }
    for r in [d.sync_event(e, SYNC), d.query_event(e).map(drop)] {
        refused_by(&r.unwrap_err(), CaptureRule::SyncWhileCapturing, 107_028);
    }
    // A capturing stream cannot be destroyed either; the capture goes on.
    let err = d.destroy_stream(s).unwrap_err();
    assert_eq!(
        err.kind(),
        &DriverErrorKind::Capture {
            rule: CaptureRule::AlreadyCapturing
        }
    );
    let g = d.capture_end(s).unwrap();
    d.sync_stream(s, SYNC).unwrap();
    d.graph_destroy(g).unwrap();
    d.destroy_stream(s).unwrap();
}

#[test]
fn begin_twice_end_without_a_capture_and_launch_on_a_capturing_stream_are_refused() {
    let d = open(&fast(), false);
    let (s, t) = (d.create_stream().unwrap(), d.create_stream().unwrap());
    refused_by(
        &d.capture_end(s).unwrap_err(),
        CaptureRule::NotCapturing,
        107_029,
    );
    d.capture_begin(s).unwrap();
    refused_by(
        &d.capture_begin(s).unwrap_err(),
        CaptureRule::AlreadyCapturing,
        107_027,
    );
    let buf = d.alloc(LEN).unwrap();
    d.memset_async(s, buf, 1, LEN).unwrap();
    let graph = d.capture_end(s).unwrap();
    d.capture_begin(t).unwrap();
    refused_by(
        &d.graph_launch(graph, t).unwrap_err(),
        CaptureRule::AlreadyCapturing,
        107_027,
    );
    let empty = d.capture_end(t).unwrap();
    for graph in [graph, empty] {
        d.graph_destroy(graph).unwrap();
    }
}

#[test]
fn ending_on_a_joined_stream_or_with_one_unjoined_is_refused() {
    let d = open(&fast(), false);
    let (s1, s2) = (d.create_stream().unwrap(), d.create_stream().unwrap());
    let (e1, e2) = (d.create_event().unwrap(), d.create_event().unwrap());
    let a = d.alloc(LEN).unwrap();
    d.capture_begin(s1).unwrap();
    d.record_event(e1, s1).unwrap();
    d.stream_wait_event(s2, e1).unwrap();
    d.memset_async(s2, a, 5, LEN).unwrap();
    // Only the origin ends a capture (107036); the capture goes on.
    refused_by(
        &d.capture_end(s2).unwrap_err(),
        CaptureRule::NotCapturing,
        107_036,
    );
    // s2's memset is not joined back to s1: the end is refused, and the
    // capture is over either way.
    refused_by(
        &d.capture_end(s1).unwrap_err(),
        CaptureRule::Unjoined,
        107_025,
    );
    for s in [s1, s2] {
        d.sync_stream(s, SYNC).unwrap();
    }
    // Joined back, the same capture ends into a graph.
    d.capture_begin(s1).unwrap();
    d.record_event(e1, s1).unwrap();
    d.stream_wait_event(s2, e1).unwrap();
    d.memset_async(s2, a, 5, LEN).unwrap();
    d.record_event(e2, s2).unwrap();
    d.stream_wait_event(s1, e2).unwrap();
    let g = d.capture_end(s1).unwrap();
    d.graph_launch(g, s1).unwrap();
    d.sync_stream(s1, SYNC).unwrap();
    assert_eq!(read(&d, a), [5; LEN]);
    d.graph_destroy(g).unwrap();
}

#[test]
fn a_captured_wait_on_an_event_recorded_outside_the_capture_is_refused() {
    let d = open(&fast(), false);
    let (s1, s2) = (d.create_stream().unwrap(), d.create_stream().unwrap());
    let e = d.create_event().unwrap();
    d.record_event(e, s2).unwrap();
    d.capture_begin(s1).unwrap();
    refused_by(
        &d.stream_wait_event(s1, e).unwrap_err(),
        CaptureRule::OutsideDependency,
        107_024,
    );
    let g = d.capture_end(s1).unwrap();
    d.graph_destroy(g).unwrap();
}

#[test]
fn a_destroy_waits_for_a_replay_of_the_graph_to_finish() {
    // Stepped: the device moves only when a wait drives it, so the replay
    // is still on the graph's streams when the destroy comes; the destroy
    // waits for it, as `aclmdlRIDestroy` does (`Context::ModelDestroy`).
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let a = d.alloc(LEN).unwrap();
    d.capture_begin(s).unwrap();
    d.memset_async(s, a, 2, LEN).unwrap();
    let g = d.capture_end(s).unwrap();
    d.graph_launch(g, s).unwrap();
    d.graph_destroy(g).unwrap();
    assert_eq!(read(&d, a), [2; LEN]);
}

#[test]
fn the_runtimes_feature_refusal_at_begin_is_a_stream_that_cannot_be_captured() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    control().inject_code(d.device_id(), 1, 207_000);
    let err = d.capture_begin(s).unwrap_err();
    refused_by(&err, CaptureRule::NotCapturable, 207_000);
    assert_eq!(err.native().unwrap().api, "aclmdlRICaptureBegin");
    // Nothing began.
    d.sync_stream(s, SYNC).unwrap();
}

#[test]
fn a_begin_whose_status_cannot_be_read_is_ended_again_and_refused() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    // The second call after the begin's own: aclmdlRICaptureGetInfo.
    control().inject_code(d.device_id(), 2, 507_000);
    let err = d.capture_begin(s).unwrap_err();
    let native = err.native().unwrap();
    assert_eq!(
        (native.api, native.code),
        ("aclmdlRICaptureGetInfo", 507_000)
    );
    // The capture did begin, and was ended: the stream is usable, and
    // captures again.
    d.sync_stream(s, SYNC).unwrap();
    d.capture_begin(s).unwrap();
    let g = d.capture_end(s).unwrap();
    d.graph_destroy(g).unwrap();
    let st = control().stats(d.device_id());
    assert_eq!(
        (st.captures, st.live_graphs),
        (2, 0),
        "the abandoned graph is gone too"
    );
}

/// Runs `f`, which must fail without reaching the runtime, and returns its
/// error's kind.
fn refused_before_c<T: std::fmt::Debug>(
    d: &AclDriver,
    f: impl FnOnce() -> Result<T, DriverError>,
) -> DriverErrorKind {
    let before = control().runtime(d.device_id()).calls;
    let err = f().expect_err("refused");
    assert!(err.native().is_none(), "the runtime was called: {err}");
    assert_eq!(
        control().runtime(d.device_id()).calls,
        before,
        "the fake saw a call"
    );
    err.kind().clone()
}

#[test]
fn forged_destroyed_and_foreign_graphs_are_refused_before_any_call() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let bad = |raw| DriverErrorKind::BadHandle {
        kind: HandleKind::Graph,
        raw,
    };
    let forged = GraphId::from_raw(0xdead_beef);
    assert_eq!(
        refused_before_c(&d, || d.graph_launch(forged, s)),
        bad(0xdead_beef)
    );
    assert_eq!(
        refused_before_c(&d, || d.graph_destroy(forged)),
        bad(0xdead_beef)
    );
    d.capture_begin(s).unwrap();
    let g = d.capture_end(s).unwrap();
    // Another driver on the same device does not hold it.
    let other = open_on(d.device_id(), fast().watchdog);
    let t = other.create_stream().unwrap();
    assert_eq!(
        refused_before_c(&other, || other.graph_launch(g, t)),
        bad(g.raw())
    );
    assert_eq!(
        refused_before_c(&other, || other.graph_destroy(g)),
        bad(g.raw())
    );
    d.graph_destroy(g).unwrap();
    assert_eq!(refused_before_c(&d, || d.graph_launch(g, s)), bad(g.raw()));
    assert_eq!(refused_before_c(&d, || d.graph_destroy(g)), bad(g.raw()));
    // A stream the driver does not hold is refused the same way.
    let d2 = open(&fast(), false);
    let g2 = {
        let s2 = d2.create_stream().unwrap();
        d2.capture_begin(s2).unwrap();
        d2.capture_end(s2).unwrap()
    };
    assert!(matches!(
        refused_before_c(&d2, || d2.graph_launch(g2, s)),
        DriverErrorKind::BadHandle {
            kind: HandleKind::Stream,
            ..
        }
    ));
    assert!(matches!(
        refused_before_c(&d2, || d2.capture_begin(s)),
        DriverErrorKind::BadHandle {
            kind: HandleKind::Stream,
            ..
        }
    ));
}

#[test]
fn graphs_left_are_destroyed_when_the_driver_drops() {
    let d = open(&fast(), false);
    let id = d.device_id();
    let s = d.create_stream().unwrap();
    for _ in 0..3 {
        d.capture_begin(s).unwrap();
        let _ = d.capture_end(s).unwrap();
    }
    assert_eq!(control().stats(id).live_graphs, 3);
    // Another driver keeps the device (and its counters) alive.
    let keep = open_on(id, fast().watchdog);
    drop(d);
    assert_eq!(control().stats(id).live_graphs, 0);
    drop(keep);
}

fn unsupported(e: &DriverError) {
    assert_eq!(e.kind(), &DriverErrorKind::Unsupported, "{e}");
    assert!(e.native().is_none(), "{e}");
}

#[test]
fn without_the_capture_symbols_there_is_no_capture() {
    // The lite library exports no optional symbol, these five included.
    let d = open_lite(&fast(), false);
    assert!(!d.capabilities().contains(Capabilities::CAPTURE));
    assert!(!d.info().capabilities.contains(Capabilities::CAPTURE));
    assert!(
        d.optional_symbols()
            .iter()
            .all(|s| !s.starts_with("aclmdlRI"))
    );
    let s = d.create_stream().unwrap();
    let g = GraphId::from_raw(1);
    unsupported(&d.capture_begin(s).unwrap_err());
    unsupported(&d.capture_end(s).unwrap_err());
    unsupported(&d.graph_launch(g, s).unwrap_err());
    unsupported(&d.graph_destroy(g).unwrap_err());
    // The stream is none the worse.
    d.sync_stream(s, SYNC).unwrap();
    // The full library has all five.
    let full = open(&fast(), false);
    let (_, optional) = AclDriver::symbols();
    for name in [
        "aclmdlRICaptureBegin",
        "aclmdlRICaptureGetInfo",
        "aclmdlRICaptureEnd",
        "aclmdlRIExecuteAsync",
        "aclmdlRIDestroy",
    ] {
        assert!(optional.contains(&name), "{name} is optional");
        assert!(full.optional_symbols().contains(&name), "{name}");
    }
}

#[test]
fn without_new_mode_events_there_is_no_capture() {
    // A runtime that exports aclrtCreateEventExWithFlag but refuses it: the
    // driver falls back to old-mode events, which a capture refuses.
    let d = open(&fast(), false);
    assert!(d.capabilities().contains(Capabilities::CAPTURE));
    control().inject_code(d.device_id(), 1, 207_000);
    let e = d.create_event().unwrap();
    assert!(!d.capabilities().contains(Capabilities::CAPTURE));
    assert!(!d.info().capabilities.contains(Capabilities::CAPTURE));
    let s = d.create_stream().unwrap();
    unsupported(&d.capture_begin(s).unwrap_err());
    d.destroy_event(e).unwrap();
}
