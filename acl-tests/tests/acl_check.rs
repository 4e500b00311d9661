//! The runtime check (`examples/npu_check.rs`, `driver::acl::probe`) over
//! the fake runtime library: every line holds where the fake models the
//! runtime; the lite fake's missing calls are reported unavailable, not as
//! differences; and each negative control — the fake steered in-process to
//! behave unlike the runtime in one required respect — makes exactly that
//! line differ.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::acl::{control, control_lite, lib_path, next_device};
use fake_acl::control::{
    FakeConfig, QUIRK_CALLBACK_EARLY, QUIRK_CALLBACK_OFF_THREAD, QUIRK_EVENT_COMPLETE_AT_RECORD,
    QUIRK_EVENT_SYNC_TIMEOUT_SUCCEEDS, QUIRK_EX_EVENT_NOT_READY, QUIRK_FULL_STREAM_FAILS,
    QUIRK_MEMCPY_TO_DEVICE_LOST, QUIRK_MEMSET_ASYNC_LOST, QUIRK_REPORT_WAITS_UNSUBSCRIBED,
    QUIRK_STREAM_STATUS_INVERTED,
};
use runclaim::driver::acl::probe::{self, Check, Need, ProbeConfig, Verdict};
use runclaim::driver::acl::{AclConfig, AclDriver};
use runclaim::sim::SimConfig;

/// Every line, in the order the check prints them.
const LINES: [&str; 18] = [
    "runtime",
    "symbols.required",
    "symbols.optional",
    "stream.create",
    "stream.capacity",
    "event.unrecorded",
    "event.query",
    "sync.timeout",
    "event.elapsed",
    "memory.alignment",
    "memory.copy",
    "memory.ordering",
    "callback.thread",
    "callback.report",
    "exception.callback",
    "watchdog.floor",
    "capture",
    "idle.gap",
];

/// A real-time fake device whose watchdog outlasts the check's holds (and
/// bounds how long a fill blocked on a held stream sleeps before it sees
/// the release: to the simulator's next time point, the watchdog).
fn config() -> FakeConfig {
    FakeConfig::from_sim(
        &SimConfig::default().watchdog(Duration::from_millis(500)),
        true,
    )
}

/// A fresh device of library `lib` (its control `c`), configured, with
/// `quirks`; the check's configuration for it.
fn device(lib: &str, lite: bool, quirks: u32) -> ProbeConfig {
    let c = if lite { control_lite() } else { control() };
    let id = next_device();
    c.configure(id, &config());
    c.quirks(id, quirks);
    let path: PathBuf = lib_path(lib);
    ProbeConfig::new(id).libraries(&path, &path).gap(16, 256)
}

/// The names of the required lines that differ.
fn required_differences(lines: &[Check]) -> Vec<&'static str> {
    lines
        .iter()
        .filter(|l| l.need == Need::Required && l.verdict == Verdict::Differs)
        .map(|l| l.name)
        .collect()
}

fn line<'a>(lines: &'a [Check], name: &str) -> &'a Check {
    lines.iter().find(|l| l.name == name).expect(name)
}

/// The lines as the check prints them (shown with `--nocapture`).
fn show(lines: &[Check]) -> String {
    lines
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The check's lines with `quirk` on: exactly the required line `name`
/// differs (each printed, so a reader sees what the quirk changed); its
/// evidence.
fn differs_alone(quirk: u32, name: &str) -> String {
    let lines = probe::run(&device("fake_acl", false, quirk));
    eprintln!("{}\n", show(&lines));
    assert_eq!(required_differences(&lines), [name], "{}", show(&lines));
    line(&lines, name).evidence.clone()
}

#[test]
fn every_line_holds_on_the_fake() {
    let lines = probe::run(&device("fake_acl", false, 0));
    eprintln!("{}\n", show(&lines));
    let names: Vec<&str> = lines.iter().map(|l| l.name).collect();
    assert_eq!(names, LINES, "{}", show(&lines));
    for l in &lines {
        assert_eq!(l.verdict, Verdict::Ok, "{}", show(&lines));
    }
    let cap = &line(&lines, "stream.capacity").evidence;
    assert!(
        cap.contains("capacity 1792 tasks (as runclaim assumes)"),
        "{cap}"
    );
    let sync = &line(&lines, "sync.timeout").evidence;
    assert!(
        sync.contains("-> 507047") && sync.contains("-> 507046"),
        "{sync}"
    );
    let report = &line(&lines, "callback.report").evidence;
    assert!(
        report.contains("107012") && report.contains("507012"),
        "{report}"
    );
}

#[test]
fn the_lite_fake_reports_what_it_lacks_as_unavailable() {
    let lines = probe::run(&device("fake_acl_lite", true, 0));
    eprintln!("{}\n", show(&lines));
    assert_eq!(
        required_differences(&lines),
        Vec::<&str>::new(),
        "{}",
        show(&lines)
    );
    let unavailable: Vec<&str> = lines
        .iter()
        .filter(|l| l.verdict == Verdict::Unavailable)
        .map(|l| l.name)
        .collect();
    assert_eq!(
        unavailable,
        [
            "callback.thread",
            "callback.report",
            "exception.callback",
            "watchdog.floor",
            "capture"
        ],
        "{}",
        show(&lines)
    );
    let ev = &line(&lines, "event.unrecorded").evidence;
    assert!(ev.starts_with("no aclrtCreateEventExWithFlag"), "{ev}");
    let opt = &line(&lines, "symbols.optional").evidence;
    assert!(
        opt.contains("absent: aclrtSynchronizeEventWithTimeout"),
        "{opt}"
    );
}

/// Negative control: an Ex event that is not complete before its first
/// record (the runtime's is) is caught by `event.unrecorded`, and only
/// there.
#[test]
fn an_ex_event_not_ready_before_its_record_is_caught() {
    let ev = &differs_alone(QUIRK_EX_EVENT_NOT_READY, "event.unrecorded");
    assert!(ev.contains("status before a record 0"), "{ev}");
}

/// Negative control: a full stream that refuses an enqueue (the runtime's
/// blocks) is caught by `stream.capacity`, with the code.
#[test]
fn a_full_stream_that_fails_instead_of_blocking_is_caught() {
    let lines = probe::run(&device("fake_acl", false, QUIRK_FULL_STREAM_FAILS));
    eprintln!("{}\n", show(&lines));
    assert_eq!(
        required_differences(&lines),
        ["stream.capacity"],
        "{}",
        show(&lines)
    );
    let cap = &line(&lines, "stream.capacity").evidence;
    assert!(cap.contains("failed with 207008"), "{cap}");
    assert!(cap.contains("1791 queued, the next (task 1793)"), "{cap}");
}

/// Negative control: an asynchronous memset that is lost is caught by
/// `memory.ordering` (and, informationally, by `capture`).
#[test]
fn a_lost_async_memset_is_caught() {
    let lines = probe::run(&device("fake_acl", false, QUIRK_MEMSET_ASYNC_LOST));
    eprintln!("{}\n", show(&lines));
    assert_eq!(
        required_differences(&lines),
        ["memory.ordering"],
        "{}",
        show(&lines)
    );
    assert_eq!(line(&lines, "capture").verdict, Verdict::Differs);
}

/// Negative control: a stream status in the event status's numbering
/// (1 for a stream with nothing left to run) is caught by `stream.create`,
/// the one line that queries a stream, and only there.
#[test]
fn an_inverted_stream_status_is_caught() {
    let ev = &differs_alone(QUIRK_STREAM_STATUS_INVERTED, "stream.create");
    assert!(ev.contains("a new stream's status is 1"), "{ev}");
}

/// Negative control: an event that reports complete as soon as its record
/// is queued, behind a held stream (the runtime's is not ready until the
/// stream reached the record), is caught by `event.query`, and only there:
/// `event.unrecorded` queries events no record was queued for, and
/// `callback.thread` queries its events after the release, when they are
/// complete anyway.
#[test]
fn an_event_complete_before_the_stream_reached_its_record_is_caught() {
    let ev = &differs_alone(QUIRK_EVENT_COMPLETE_AT_RECORD, "event.query");
    assert!(
        ev.contains("recorded behind a held stream: status 1 (NOT_READY = 0 expected)"),
        "{ev}"
    );
}

/// Negative control: a timed event sync that runs out and returns 0 (as
/// if the event had completed) is caught by `sync.timeout`, with the code;
/// the stream's timed sync beside it still runs out with 507046.
#[test]
fn an_event_sync_timeout_that_succeeds_is_caught() {
    let lines = probe::run(&device(
        "fake_acl",
        false,
        QUIRK_EVENT_SYNC_TIMEOUT_SUCCEEDS,
    ));
    eprintln!("{}\n", show(&lines));
    assert_eq!(
        required_differences(&lines),
        ["sync.timeout"],
        "{}",
        show(&lines)
    );
    let sync = &line(&lines, "sync.timeout").evidence;
    assert!(
        sync.contains("aclrtSynchronizeEventWithTimeout 20 ms -> 0 (507047 expected)")
            && sync.contains("-> 507046"),
        "{sync}"
    );
}

/// Negative control: a host-to-device `aclrtMemcpy` that returns 0 and
/// copies nothing is caught by `memory.copy` (the only line that copies
/// from the host), at its first byte: the allocation's fresh 0xA5, not the
/// pattern's 0.
#[test]
fn a_lost_host_to_device_copy_is_caught() {
    let lines = probe::run(&device("fake_acl", false, QUIRK_MEMCPY_TO_DEVICE_LOST));
    eprintln!("{}\n", show(&lines));
    assert_eq!(
        required_differences(&lines),
        ["memory.copy"],
        "{}",
        show(&lines)
    );
    let copy = &line(&lines, "memory.copy").evidence;
    assert!(copy.contains("byte 0 differs"), "{copy}");
}

/// Negative control: completion callbacks run on a thread of the
/// runtime's own (all of them, in stream order) instead of the subscribed
/// thread are caught by `callback.thread`; `callback.report` still holds:
/// the subscribed thread's reports, given nothing, time out with 507012.
#[test]
fn callbacks_off_the_subscribed_thread_are_caught() {
    let ev = &differs_alone(QUIRK_CALLBACK_OFF_THREAD, "callback.thread");
    assert!(
        ev.contains("3 ran, NOT all on the subscribed thread, in stream order"),
        "{ev}"
    );
}

/// Negative control: completion callbacks that run as soon as they are
/// queued — on the subscribed thread, in order, but while the stream is
/// still held ahead of them — are caught by `callback.thread`, both ways it
/// looks: each ran before the release, and each found the event recorded
/// ahead of it not ready. `callback.report` still holds: the callbacks come
/// early, yet the reactor's reports with nothing due still time out, and
/// the unsubscribed report is not touched.
#[test]
fn callbacks_that_run_before_the_work_ahead_are_caught() {
    let ev = &differs_alone(QUIRK_CALLBACK_EARLY, "callback.thread");
    assert!(
        ev.contains("3 ran, all on the subscribed thread, in stream order; 3 before the release"),
        "{ev}"
    );
    assert!(
        ev.contains("as it ran: 0 (NOT_READY), 0 (NOT_READY), 0 (NOT_READY)"),
        "{ev}"
    );
}

/// The milliseconds after which `callback.report` says the unsubscribed
/// `aclrtProcessReport` answered.
fn unsubscribed_ms(report: &str) -> Option<u64> {
    let (_, rest) = report.split_once("with no subscription: ")?;
    let (_, rest) = rest.split_once(" after ")?;
    rest.split(' ').next()?.parse().ok()
}

/// Negative control: an `aclrtProcessReport` with no subscription that
/// waits out its 200 ms before answering 107012 (the runtime answers at
/// once) is caught by `callback.report`, and only there.
#[test]
fn an_unsubscribed_report_that_waits_is_caught() {
    let lines = probe::run(&device("fake_acl", false, QUIRK_REPORT_WAITS_UNSUBSCRIBED));
    eprintln!("{}\n", show(&lines));
    assert_eq!(
        required_differences(&lines),
        ["callback.report"],
        "{}",
        show(&lines)
    );
    let report = &line(&lines, "callback.report").evidence;
    assert!(report.contains("with no subscription: 107012"), "{report}");
    assert!(
        unsubscribed_ms(report).is_some_and(|ms| ms >= 100),
        "{report}"
    );
}

/// Negative control: an elapsed time that is not a number is caught by
/// `event.elapsed` (the fake's existing elapsed-time injection, armed on a
/// device a driver holds open).
#[test]
fn a_nan_elapsed_time_is_caught() {
    let cfg = device("fake_acl", false, 0);
    let path = lib_path("fake_acl");
    let d = AclDriver::open(
        AclConfig::new(cfg.acl.device_id, "fake-aicpu-op-info.json").libraries(&path, &path),
    )
    .expect("open the acl driver on the fake library");
    control().inject_elapsed(d.device_id(), f32::NAN);
    let lines = probe::run(&cfg);
    eprintln!("{}\n", show(&lines));
    assert_eq!(
        required_differences(&lines),
        ["event.elapsed"],
        "{}",
        show(&lines)
    );
    assert!(line(&lines, "event.elapsed").evidence.contains("NaN ms"));
    drop(d);
}

/// Every quirk the controls above set.
const ALL_QUIRKS: u32 = QUIRK_EX_EVENT_NOT_READY
    | QUIRK_FULL_STREAM_FAILS
    | QUIRK_MEMSET_ASYNC_LOST
    | QUIRK_STREAM_STATUS_INVERTED
    | QUIRK_EVENT_SYNC_TIMEOUT_SUCCEEDS
    | QUIRK_MEMCPY_TO_DEVICE_LOST
    | QUIRK_CALLBACK_OFF_THREAD
    | QUIRK_REPORT_WAITS_UNSUBSCRIBED
    | QUIRK_CALLBACK_EARLY
    | QUIRK_EVENT_COMPLETE_AT_RECORD;

/// Without any quirk the same device kinds hold: the controls above fail
/// for their quirk, not for their device (every quirk set, then cleared).
#[test]
fn quirks_off_again_hold() {
    let cfg = device("fake_acl", false, ALL_QUIRKS);
    control().quirks(cfg.acl.device_id, 0);
    let lines = probe::run(&cfg);
    eprintln!("{}\n", show(&lines));
    assert_eq!(
        required_differences(&lines),
        Vec::<&str>::new(),
        "{}",
        show(&lines)
    );
}

/// A runtime that is not there is one line that differs, not a panic.
#[test]
fn a_missing_runtime_is_one_line() {
    let cfg = ProbeConfig::new(0).libraries("/nowhere/libascendcl.so", "/nowhere/libruntime.so");
    let lines = probe::run(&cfg);
    eprintln!("{}\n", show(&lines));
    assert_eq!(lines.len(), 1);
    assert_eq!(
        (lines[0].name, lines[0].verdict),
        ("runtime", Verdict::Differs)
    );
    assert!(
        lines[0].evidence.contains("/nowhere/libascendcl.so"),
        "{}",
        lines[0]
    );
}
