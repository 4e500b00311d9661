//! The `acl` driver's own behaviour through `libloading`: library search
//! errors, missing symbols, optional-capability fallbacks, every named error
//! code, and the per-thread device context.

mod common;

use std::ffi::c_void;
use std::time::Duration;

use common::LaunchIn;
use common::acl::{control, lib_path, next_device, open, open_on};
use fake_acl::control::FakeConfig;
use runclaim::contract::{ConfigError, ErrorKind as ContractError};
use runclaim::driver::abi::A2a3Abi;
use runclaim::driver::acl::codes::{AclError, kind_of, named};
use runclaim::driver::acl::{AclConfig, AclDriver, Lib, LoadError, OpenError};
use runclaim::driver::{Capabilities, Completion, Driver, DriverErrorKind};
use runclaim::sim::{A2a3Model, SimConfig};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

fn fast() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

/// The device watchdog of the real-time tests: long enough that a host
/// descheduled (or run under valgrind) between the AICore and the AICPU
/// launch of a run does not make the waiting AICore kernel time out.
const REAL_TIME_WATCHDOG: Duration = Duration::from_millis(500);

#[test]
fn failing_explicit_paths_are_errors_with_the_loaders_words_for_both_libraries() {
    let cfg = AclConfig::new(0, "x.json")
        .libraries("/nonexistent/libascendcl.so", "/nonexistent/libruntime.so");
    let err = AclDriver::open(cfg).unwrap_err();
    let OpenError::Load(LoadError::Both { ascendcl, runtime }) = &err else {
        panic!("{err}");
    };
    for (e, lib, path) in [
        (ascendcl, Lib::AscendCl, "/nonexistent/libascendcl.so"),
        (runtime, Lib::Runtime, "/nonexistent/libruntime.so"),
    ] {
        let LoadError::ExplicitPath { lib: l, attempt } = &**e else {
            panic!("{e}");
        };
        assert_eq!(
            (*l, attempt.path.to_str(), attempt.source),
            (lib, Some(path), "explicit path")
        );
        assert!(
            attempt.error.contains("No such file or directory"),
            "the loader's own words: {}",
            attempt.error
        );
    }
    let text = err.to_string();
    for p in ["/nonexistent/libascendcl.so", "/nonexistent/libruntime.so"] {
        assert!(text.contains(p), "the message names {p}: {text}");
    }
    assert!(!text.contains("dlopen failed"), "{text}");
    assert!(text.contains("no other path was tried"), "{text}");
}

#[test]
fn missing_required_symbols_are_all_listed_with_their_file() {
    // libm loads anywhere and exports none of the runtime's symbols.
    let fake = lib_path("fake_acl");
    let cfg = AclConfig::new(0, "x.json").libraries(&fake, "libm.so.6");
    let err = AclDriver::open(cfg).unwrap_err();
    let OpenError::Load(LoadError::MissingSymbols { missing }) = &err else {
        panic!("{err}");
    };
    let want = [
        "rtRegisterAllKernel",
        "rtKernelLaunchWithHandleV2",
        "rtsBinaryLoadFromFile",
        "rtsFuncGetByName",
        "rtsLaunchCpuKernel",
    ];
    assert_eq!(missing.len(), want.len(), "{missing:?}");
    for w in want {
        let m = missing.iter().find(|m| m.symbol == w).expect(w);
        assert_eq!((m.lib, m.file.to_str()), (Lib::Runtime, Some("libm.so.6")));
    }
    assert!(
        err.to_string()
            .contains("rtsLaunchCpuKernel in libm.so.6 (libruntime.so)"),
        "{err}"
    );
    // Both libraries wrong: every required symbol is reported in one error.
    let cfg = AclConfig::new(0, "x.json").libraries("libm.so.6", "libm.so.6");
    let Err(OpenError::Load(LoadError::MissingSymbols { missing })) = AclDriver::open(cfg) else {
        panic!("expected missing symbols");
    };
    assert_eq!(missing.len(), AclDriver::symbols().0.len());
}

#[test]
fn one_missing_required_symbol_is_named_with_the_file_loaded() {
    // The fake runtime, complete but for `aclrtStreamWaitEvent`.
    let incomplete = lib_path("fake_acl_incomplete");
    let cfg = AclConfig::new(0, "x.json").libraries(&incomplete, &incomplete);
    let err = AclDriver::open(cfg).unwrap_err();
    let OpenError::Load(LoadError::MissingSymbols { missing }) = &err else {
        panic!("{err}");
    };
    let found: Vec<_> = missing.iter().map(|m| (m.symbol, m.lib, &m.file)).collect();
    assert_eq!(
        found,
        [("aclrtStreamWaitEvent", Lib::AscendCl, &incomplete)]
    );
    assert_eq!(
        err.to_string(),
        format!(
            "missing required symbols: aclrtStreamWaitEvent in {} (libascendcl.so)",
            incomplete.display()
        )
    );
}

#[test]
fn full_library_offers_every_capability() {
    let d = open(&fast(), false);
    assert_eq!(d.capabilities(), Capabilities::all());
    assert_eq!(
        d.info().watchdog,
        Some(Duration::from_millis(2)),
        "read back from the device"
    );
    let (acl, rt) = d.library_paths();
    assert_eq!(acl, rt);
}

#[test]
fn optional_capabilities_absent_fall_back() {
    let lite = lib_path("fake_acl_lite");
    let id = next_device();
    // The lite library has its own state: configure it through its own
    // control function (it keeps the required set and the control API).
    // SAFETY: the workspace's own library; the type matches fake.rs.
    let lib = unsafe { libloading::Library::new(lite.as_os_str()) }.unwrap();
    // SAFETY: as above.
    let configure = unsafe {
        *lib.get::<unsafe extern "C" fn(i32, *const FakeConfig) -> i32>("runclaim_fake_configure")
            .unwrap()
    };
    let cfg = FakeConfig::from_sim(&fast().watchdog(REAL_TIME_WATCHDOG), true);
    // SAFETY: valid pointer for the call.
    let rc = unsafe { configure(id, &raw const cfg) };
    assert_eq!(rc, 0);
    let d = AclDriver::open(
        AclConfig::new(id, "x.json")
            .libraries(&lite, &lite)
            .op_watchdog(REAL_TIME_WATCHDOG),
    )
    .unwrap();
    assert_eq!(d.capabilities(), Capabilities::empty());
    // No aclrtSetOpExecuteTimeOutV2: the watchdog is unknown, and the
    // contract refuses to guess it…
    assert_eq!(d.info().watchdog, None);
    let d = match Device::<_, 2>::open(d, DeviceConfig::default()) {
        Err(e) => {
            assert_eq!(
                e.kind(),
                &ContractError::Config(Box::new(ConfigError::WatchdogUnknown))
            );
            AclDriver::open(AclConfig::new(id, "x.json").libraries(&lite, &lite)).unwrap()
        }
        Ok(_) => panic!("an unknown watchdog must be declared"),
    };
    // …until it is declared. Events are then waited on by polling (no
    // aclrtSynchronizeEventWithTimeout), timestamps are unsupported.
    let e = d.create_event().unwrap();
    assert_eq!(
        d.event_timestamp(e).unwrap_err().kind(),
        &DriverErrorKind::Unsupported
    );
    d.destroy_event(e).unwrap();
    let mut dev = Device::<_, 2>::open(
        d,
        DeviceConfig::default().device_watchdog(REAL_TIME_WATCHDOG),
    )
    .unwrap();
    let runner = dev
        .publish(&[Callable::program(
            "f",
            &runclaim::driver::abi::Program::new().add(5),
        )])
        .unwrap();
    let code = runner.code("f").unwrap();
    let (mut o0, mut o1) = (Outputs::<0>::new(4), Outputs::<1>::new(4));
    let r0 = runner.launched::<0>(code, Input::Host(&[1, 2]));
    let r1 = runner.launched::<1>(code, Input::Previous);
    r0.fence().unwrap().finalize(&mut o0).unwrap();
    r1.fence().unwrap().finalize(&mut o1).unwrap();
    assert_eq!((o0.values(), o1.values()), (&[6, 7][..], &[11, 12][..]));
    // Errors carry API and code, but no runtime message.
    let err = dev.driver().alloc(1 << 50).unwrap_err();
    let native = err.native().unwrap();
    assert_eq!(
        (native.api, native.code, native.message.as_deref()),
        ("aclrtMalloc", 207_001, None)
    );
    assert_eq!(err.kind(), &DriverErrorKind::OutOfMemory { bytes: 1 << 50 });
}

#[test]
fn every_named_code_maps_to_its_meaning() {
    let d = open(&fast(), false);
    let c = control();
    for (code, name) in named() {
        match code {
            // "Not complete yet" is an answer, not an error.
            507_004 => {
                let s = d.create_stream().unwrap();
                c.inject_code(d.device_id(), 1, code);
                assert_eq!(d.query_stream(s).unwrap(), Completion::NotReady, "{name}");
                d.destroy_stream(s).unwrap();
            }
            507_006 => {
                let e = d.create_event().unwrap();
                c.inject_code(d.device_id(), 1, code);
                assert_eq!(d.query_event(e).unwrap(), Completion::NotReady, "{name}");
                d.destroy_event(e).unwrap();
            }
            _ => {
                c.inject_code(d.device_id(), 1, code);
                let err = d.alloc(64).unwrap_err();
                let native = err.native().expect("native detail");
                assert_eq!((native.api, native.code), ("aclrtMalloc", code), "{name}");
                assert_eq!(
                    native.message.as_deref(),
                    Some(format!("injected error code {code}").as_str()),
                    "aclGetRecentErrMsg reaches the error"
                );
                let want = match kind_of(code) {
                    DriverErrorKind::OutOfMemory { .. } => {
                        DriverErrorKind::OutOfMemory { bytes: 64 }
                    }
                    k => k,
                };
                // `Unknown` only for the answers and statuses some call
                // reads itself (a repeated `aclInit`, a report wait that
                // timed out, the subscription codes) and the generic
                // internal error.
                assert_eq!(err.kind(), &want, "{name} ({code})");
            }
        }
    }
    // A code outside the table keeps its number and is Unknown.
    c.inject_code(d.device_id(), 1, 123_456);
    let err = d.alloc(64).unwrap_err();
    assert_eq!(
        (err.kind(), err.native().unwrap().code),
        (&DriverErrorKind::Unknown, 123_456)
    );
}

#[test]
fn timeouts_and_faults_round_trip_through_their_codes() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let e = d.create_event().unwrap();
    control().inject(
        d.device_id(),
        &runclaim::sim::Fault::EventNeverCompletes { nth: 1 },
    );
    d.record_event(e, s).unwrap();
    let err = d.sync_event(e, Duration::from_millis(3)).unwrap_err();
    assert_eq!(
        err.kind(),
        &DriverErrorKind::Timeout {
            waited: Duration::from_millis(3)
        }
    );
    assert_eq!(err.native().unwrap().code, 507_047);
    // A kernel fault on the stream: 507018 from the AICPU exception.
    control().inject_code(d.device_id(), 1, 507_018);
    let err = d.sync_stream(s, Duration::from_millis(1)).unwrap_err();
    assert!(err.is_device_fault());
}

#[test]
fn each_thread_is_bound_to_the_device_before_its_first_call() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    // The fake refuses calls from a thread with no device bound (107002),
    // like the runtime; the driver binds every new thread first.
    let lib = lib_path("fake_acl");
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                // SAFETY: the workspace's own library; types match fake.rs.
                let raw = unsafe { libloading::Library::new(lib.as_os_str()) }.unwrap();
                // SAFETY: as above.
                let query = unsafe {
                    *raw.get::<unsafe extern "C" fn(*mut std::ffi::c_void, *mut u32) -> i32>(
                        "aclrtStreamQuery",
                    )
                    .unwrap()
                };
                let mut status = 0;
                // SAFETY: `status` is a valid out-pointer; the handle is the
                // driver's stream.
                let rc = unsafe {
                    query(
                        std::ptr::without_provenance_mut(usize::try_from(s.raw()).unwrap()),
                        &raw mut status,
                    )
                };
                assert_eq!(rc, 107_002, "an unbound thread has no context");
                assert_eq!(kind_of(rc), DriverErrorKind::NoContext);
                // Through the driver the same query works: it binds first.
                assert_eq!(d.query_stream(s).unwrap(), Completion::Complete);
            })
            .join()
            .unwrap();
    });
}

// ----- the fake and the driver as the real runtime behaves -------------------

/// A C symbol of a fake library, for tests that speak to the "runtime"
/// directly (as another component of the process would).
fn raw_symbol<T: Copy>(lib: &str, name: &str) -> T {
    // SAFETY: the workspace's own fake library (already loaded by the
    // driver: same handle); callers name the type of the symbol's C
    // prototype. The library is never unloaded while the process runs (the
    // driver keeps it), so the copied pointer stays valid.
    unsafe {
        let l = libloading::Library::new(lib_path(lib).as_os_str()).unwrap();
        let f = *l.get::<T>(name).unwrap();
        std::mem::forget(l);
        f
    }
}

type RawCreateEvent = unsafe extern "C" fn(*mut *mut c_void, u32) -> i32;
type RawQueryEvent = unsafe extern "C" fn(*mut c_void, *mut u32) -> i32;
type RawStreamWait = unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32;
type RawSyncTimeout = unsafe extern "C" fn(*mut c_void, i32) -> i32;

fn ptr(raw: u64) -> *mut c_void {
    std::ptr::without_provenance_mut(usize::try_from(raw).unwrap())
}

#[test]
fn events_are_complete_before_their_first_record() {
    // aclrtCreateEventExWithFlag: what the trait documents, natively.
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let e = d.create_event().unwrap();
    assert_eq!(d.query_event(e).unwrap(), Completion::Complete);
    d.sync_event(e, Duration::from_millis(5)).unwrap();
    d.stream_wait_event(s, e).unwrap(); // waits for nothing
    let p = d.alloc(64).unwrap();
    d.memset_async(s, p, 7, 64).unwrap();
    d.sync_stream(s, Duration::from_millis(50)).unwrap();
    let rt = control().runtime(d.device_id());
    assert_eq!(rt.unsatisfiable_waits, 0);
    assert!(d.optional_symbols().contains(&"aclrtCreateEventExWithFlag"));
}

#[test]
fn without_the_new_call_events_fall_back_and_the_driver_answers_for_unrecorded_ones() {
    // The lite runtime only has aclrtCreateEventWithFlag, whose events the
    // runtime reports NOT_READY until recorded, and a stream wait on one
    // would never be satisfied.
    let d = common::acl::open_lite(&fast(), false);
    let s = d.create_stream().unwrap();
    let e = d.create_event().unwrap();
    assert_eq!(d.query_event(e).unwrap(), Completion::Complete);
    d.sync_event(e, Duration::from_secs(3600)).unwrap();
    d.stream_wait_event(s, e).unwrap();
    let p = d.alloc(64).unwrap();
    d.memset_async(s, p, 7, 64).unwrap();
    d.sync_stream(s, Duration::from_millis(50))
        .expect("the stream did not stall behind an unsatisfiable wait");
    // Once recorded, the runtime answers.
    d.record_event(e, s).unwrap();
    d.sync_stream(s, Duration::from_millis(50)).unwrap();
    assert_eq!(d.query_event(e).unwrap(), Completion::Complete);
    d.stream_wait_event(s, e).unwrap();
    d.sync_stream(s, Duration::from_millis(50)).unwrap();
    let rt = common::acl::control_lite().runtime(d.device_id());
    assert_eq!(rt.unsatisfiable_waits, 0, "never asked the runtime to wait");
    // Elapsed time and timestamps of a never-recorded event are refused
    // before the runtime sees them.
    let fresh = d.create_event().unwrap();
    let err = d.event_elapsed(fresh, e).unwrap_err();
    assert!(err.native().is_none(), "{err}");
}

#[test]
fn the_fake_runtime_models_both_event_calls() {
    // Spoken to directly, on a thread the driver bound: old mode reports
    // NOT_READY before the first record and a stream wait on it is not
    // satisfied until the event is recorded (here it never is: the device
    // watchdog ends it); new mode is complete.
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let create: RawCreateEvent = raw_symbol("fake_acl", "aclrtCreateEventWithFlag");
    let create_ex: RawCreateEvent = raw_symbol("fake_acl", "aclrtCreateEventExWithFlag");
    let query: RawQueryEvent = raw_symbol("fake_acl", "aclrtQueryEventStatus");
    let wait: RawStreamWait = raw_symbol("fake_acl", "aclrtStreamWaitEvent");
    let (mut old, mut new) = (std::ptr::null_mut(), std::ptr::null_mut());
    let (mut so, mut sn) = (9u32, 9u32);
    // SAFETY: valid out-pointers; handles from the same runtime.
    unsafe {
        assert_eq!(create(&raw mut old, 0x9), 0);
        assert_eq!(create_ex(&raw mut new, 0x9), 0);
        assert_eq!(query(old, &raw mut so), 0);
        assert_eq!(query(new, &raw mut sn), 0);
    }
    assert_eq!((so, sn), (0, 1), "NOT_READY = 0, COMPLETE = 1");
    // SAFETY: the driver's live stream and the event above.
    assert_eq!(unsafe { wait(ptr(s.raw()), old) }, 0);
    assert_eq!(control().runtime(d.device_id()).unsatisfiable_waits, 1);
    let err = d.sync_stream(s, Duration::from_millis(50)).unwrap_err();
    assert!(err.is_device_fault(), "the watchdog ended the wait: {err}");
}

/// The runtime sends a wait on an old-mode event that is not recorded yet
/// to the device, on the hardware id it gave the event at creation, and a
/// later record of the event sets that id (hicann/runtime:
/// `ApiImpl::EventCreate` in `src/runtime/api/impl/api_impl.cc`,
/// `Event::WaitSendCheck` and `Event::Record` in
/// `src/runtime/core/src/event/event.cc`): the record releases the wait. The
/// runtime check holds streams this way.
#[test]
fn an_old_mode_wait_is_released_by_the_events_next_record() {
    let d = open(&fast().watchdog(Duration::from_secs(5)), true);
    let (held, other) = (d.create_stream().unwrap(), d.create_stream().unwrap());
    let create: RawCreateEvent = raw_symbol("fake_acl", "aclrtCreateEventWithFlag");
    let wait: RawStreamWait = raw_symbol("fake_acl", "aclrtStreamWaitEvent");
    let record: RawStreamWait = raw_symbol("fake_acl", "aclrtRecordEvent");
    let mut old = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the driver's live stream.
    unsafe {
        assert_eq!(create(&raw mut old, 0x1), 0);
        assert_eq!(wait(ptr(held.raw()), old), 0);
    }
    let marker = d.create_event().unwrap();
    d.record_event(marker, held).unwrap();
    // Held: the work behind the wait does not run…
    let err = d.sync_stream(held, Duration::from_millis(30)).unwrap_err();
    assert!(
        matches!(err.kind(), DriverErrorKind::Timeout { .. }),
        "{err}"
    );
    assert_eq!(d.query_event(marker).unwrap(), Completion::NotReady);
    // …until the event is recorded, here on another stream.
    // SAFETY: the event above (its argument order is `aclrtRecordEvent`'s:
    // event, stream) and the driver's live stream.
    assert_eq!(unsafe { record(old, ptr(other.raw())) }, 0);
    d.sync_stream(held, Duration::from_secs(2)).unwrap();
    assert_eq!(d.query_event(marker).unwrap(), Completion::Complete);
}

#[test]
fn device_references_balance_when_the_driver_drops() {
    for lite in [false, true] {
        let (d, c) = if lite {
            (
                common::acl::open_lite(&fast(), false),
                common::acl::control_lite(),
            )
        } else {
            (open(&fast(), false), control())
        };
        let id = d.device_id();
        let s = d.create_stream().unwrap();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| d.query_stream(s).unwrap());
            }
        });
        d.destroy_stream(s).unwrap();
        drop(d);
        let rt = c.runtime(id);
        assert_eq!(
            (rt.set_device, rt.reset_device, rt.unbalanced_resets),
            (if lite { 5 } else { 1 }, if lite { 5 } else { 1 }, 0),
            "lite {lite}: one reference per aclrtSetDevice, each reset"
        );
        assert_eq!((rt.releases, rt.live), (1, 0), "the last reset released it");
        if !lite {
            assert!(rt.context_sets >= 4, "other threads switched context");
        }
    }
}

#[test]
fn zero_timeouts_are_refused_by_the_runtime_and_never_sent() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let e = d.create_event().unwrap();
    d.record_event(e, s).unwrap();
    let sync_stream: RawSyncTimeout = raw_symbol("fake_acl", "aclrtSynchronizeStreamWithTimeout");
    let sync_event: RawSyncTimeout = raw_symbol("fake_acl", "aclrtSynchronizeEventWithTimeout");
    // SAFETY: the driver's live stream and event, on a bound thread.
    unsafe {
        assert_eq!(sync_stream(ptr(s.raw()), 0), 107_000);
        assert_eq!(sync_event(ptr(e.raw()), 0), 107_000);
        assert_eq!(sync_stream(ptr(s.raw()), -2), 107_000);
        assert_eq!(sync_stream(ptr(s.raw()), 1), 0);
    }
    assert_eq!(control().runtime(d.device_id()).zero_timeouts, 2);
    for t in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999),
    ] {
        d.sync_stream(s, t).unwrap();
        d.sync_event(e, t).unwrap();
    }
    assert_eq!(
        control().runtime(d.device_id()).zero_timeouts,
        2,
        "the driver never passed 0"
    );
}

#[test]
fn a_library_that_is_not_one_is_reported_in_the_loaders_words() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let empty = dir.join("acl-empty.so");
    let junk = dir.join("acl-junk.so");
    std::fs::write(&empty, b"").unwrap();
    std::fs::write(&junk, [0x5a_u8; 4096]).unwrap();
    let fake = lib_path("fake_acl");
    for (path, words) in [(&empty, "file too short"), (&junk, "invalid ELF header")] {
        let cfg = AclConfig::new(0, "x.json").libraries(path, &fake);
        let err = AclDriver::open(cfg).unwrap_err();
        // Only the explicit path was tried: no fall-through to the
        // environment or the default install.
        let OpenError::Load(LoadError::ExplicitPath { lib, attempt }) = &err else {
            panic!("{err:?}");
        };
        assert_eq!((*lib, &attempt.path), (Lib::AscendCl, path));
        assert!(attempt.error.contains(words), "{}", attempt.error);
        assert!(err.to_string().contains(words), "{err}");
        assert!(!err.to_string().contains("dlopen failed"), "{err}");
    }
}

#[test]
fn old_runtimes_are_refused_with_what_was_found_and_needed() {
    use runclaim::driver::acl::AclVersion;
    let c = control();
    let id = next_device();
    c.configure(id, &FakeConfig::from_sim(&fast(), false));
    let fake = lib_path("fake_acl");
    let cfg = || AclConfig::new(id, "x.json").libraries(&fake, &fake);
    c.set_version(Some((1, 15, 2)));
    let err = AclDriver::open(cfg()).unwrap_err();
    c.set_version(None);
    let OpenError::UnsupportedVersion {
        found, required, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(
        (*found, *required),
        (AclVersion::new(1, 15, 2), AclVersion::MINIMUM)
    );
    let text = err.to_string();
    assert!(text.contains("1.15.2") && text.contains("1.16.0"), "{text}");
    assert_eq!(
        c.runtime(id).set_device,
        0,
        "refused before any device call"
    );
    c.set_version(Some((1, 16, 0)));
    let d = AclDriver::open(cfg());
    c.set_version(None);
    assert_eq!(d.unwrap().acl_version(), Some(AclVersion::new(1, 16, 0)));
    // Without aclrtGetVersion the version is unknown, not refused.
    assert_eq!(common::acl::open_lite(&fast(), false).acl_version(), None);
}

#[test]
fn launch_structs_reach_the_runtime_zero_filled() {
    let mut dev = Device::<_, 2>::open(
        open(&fast(), false),
        DeviceConfig::default().max_elements(8),
    )
    .unwrap();
    let id = dev.driver().device_id();
    let runner = dev
        .publish(&[Callable::program(
            "f",
            &runclaim::driver::abi::Program::new().add(1),
        )])
        .unwrap();
    let code = runner.code("f").unwrap();
    assert_eq!(runner.serial::<0>(code, Input::Host(&[1, 2])), [2, 3]);
    assert_eq!(runner.serial::<1>(code, Input::Host(&[5])), [6]);
    let s = control().stats(id);
    assert_eq!((s.aicore_kernels, s.aicpu_kernels), (2, 2));
    assert_eq!(control().runtime(id).dirty_launch_structs, 0);
}

#[test]
fn the_acl_guides_search_order_is_the_drivers() {
    // The search order is documented in the acl guide (docs/acl.md, shipped
    // as `runclaim::guide::acl`), which the README points to.
    let readme = include_str!("../../docs/acl.md");
    let env = |k: &str| {
        (k.starts_with("ASCEND") || k.starts_with("RUNCLAIM"))
            .then(|| std::ffi::OsString::from(format!("${k}")))
    };
    let mut places: Vec<String> = Vec::new();
    for (path, _) in runclaim::driver::acl::candidates(Lib::AscendCl, None, &env) {
        let dir = path
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if !places.contains(&dir) {
            places.push(dir);
        }
    }
    for place in places.iter().filter(|p| !p.is_empty()) {
        let place = place.replace("$RUNCLAIM_LIBASCENDCL", "RUNCLAIM_LIBASCENDCL");
        let root = place
            .trim_end_matches("/lib64")
            .trim_end_matches("/runtime/lib64")
            .trim_end_matches("/runtime");
        assert!(readme.contains(root), "docs/acl.md names {root}");
    }
    for name in Lib::AscendCl.file_names() {
        assert!(readme.contains(name), "docs/acl.md names {name}");
    }
    let order = [
        "$ASCEND_HOME_PATH",
        "/usr/local/Ascend/cann",
        "/usr/local/Ascend/ascend-toolkit/latest",
    ];
    // In the guide's search-order list: the setup section before it names
    // an install directory too (`source /usr/local/Ascend/cann/set_env.sh`).
    let list = &readme[readme
        .find("**Search order**")
        .expect("the search-order list")..];
    let at: Vec<usize> = order.iter().map(|o| list.find(o).expect(o)).collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "docs/acl.md lists {order:?} in order"
    );
}

// ----- no panics on FFI-facing paths -----------------------------------------

#[test]
fn polling_an_event_with_an_unbounded_timeout_does_not_panic() {
    // The lite runtime has no timed event sync: the driver polls. A
    // deadline past the end of time means no deadline.
    let d = common::acl::open_lite(&fast().watchdog(REAL_TIME_WATCHDOG), true);
    let s = d.create_stream().unwrap();
    let e = d.create_event().unwrap();
    d.record_event(e, s).unwrap();
    d.sync_event(e, Duration::MAX).unwrap();
    d.sync_event(e, Duration::from_secs(u64::MAX)).unwrap();
}

#[test]
fn odd_elapsed_times_from_the_runtime_are_errors_not_panics() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let (a, b) = (d.create_event().unwrap(), d.create_event().unwrap());
    d.record_event(a, s).unwrap();
    d.record_event(b, s).unwrap();
    d.sync_stream(s, Duration::from_millis(50)).unwrap();
    control().inject_elapsed(d.device_id(), 1.5);
    assert_eq!(d.event_elapsed(a, b).unwrap(), Duration::from_micros(1500));
    for ms in [f32::INFINITY, f32::NAN, -3.0, f32::MAX, f32::NEG_INFINITY] {
        control().inject_elapsed(d.device_id(), ms);
        let err = d.event_elapsed(a, b).unwrap_err();
        assert!(
            matches!(err.kind(), DriverErrorKind::InvalidResult { .. }),
            "{ms}: {err}"
        );
    }
}

// ----- the kernel protocol a fake device speaks ------------------------------

type RawDeviceModel = unsafe extern "C" fn(i32, *const std::ffi::c_char) -> i32;

/// One `RunSpec` run of `inc` on a device opened over `d` with `config`:
/// its output, or why it failed.
fn inc_once<D: Driver + 'static>(d: D, config: DeviceConfig) -> Result<Vec<u32>, ContractError> {
    let mut dev = Device::<_, 2>::open(d, config).unwrap();
    let runner = dev
        .publish(&[Callable::program(
            "inc",
            &runclaim::driver::abi::Program::new().add(1),
        )])
        .unwrap();
    let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1, 2]));
    let mut out = Outputs::<0>::new(2);
    match runner.run_serial(runner.take_slot::<0>().unwrap(), spec, &mut out) {
        Ok(_) => Ok(out.values().to_vec()),
        Err(e) => Err(e.kind().clone()),
    }
}

fn a2a3() -> DeviceConfig {
    DeviceConfig::default().kernel_abi(A2a3Abi)
}

/// Whether `r` is the launch refused by the fake device as an invalid
/// parameter (107000): a block of a protocol it does not speak.
fn refused_by_the_fake(r: &Result<Vec<u32>, ContractError>) -> bool {
    matches!(r, Err(ContractError::Driver(e))
        if e.native().map(|n| n.code) == Some(AclError::ACL_ERROR_RT_PARAM_INVALID))
}

/// All three fake variants export the whole control API with the same C
/// signatures — `runclaim_fake_device_model` included, and
/// `runclaim_fake_set_version` and the capture symbols where the optional
/// symbols are — and the
/// device-model hook takes the built-in protocols' names only (NULL: the
/// default), refusing any other with 107000.
#[test]
fn every_variant_exports_the_control_api_and_the_model_hook_takes_builtin_names() {
    for lib in ["fake_acl", "fake_acl_lite", "fake_acl_incomplete"] {
        // SAFETY: the workspace's own library; symbols are only looked up
        // (and the device-model hook called with its C prototype) while
        // `l` is alive.
        unsafe {
            let l = libloading::Library::new(lib_path(lib).as_os_str()).unwrap();
            for name in [
                "runclaim_fake_configure",
                "runclaim_fake_device_model",
                "runclaim_fake_inject",
                "runclaim_fake_stats",
                "runclaim_fake_runtime",
                "runclaim_fake_clock",
                "runclaim_fake_trace",
                "runclaim_fake_release",
            ] {
                assert!(
                    l.get::<unsafe extern "C" fn()>(name).is_ok(),
                    "{lib}: {name}"
                );
            }
            assert_eq!(
                l.get::<unsafe extern "C" fn()>("runclaim_fake_set_version")
                    .is_ok(),
                lib != "fake_acl_lite",
                "{lib}: runclaim_fake_set_version"
            );
            // The capture symbols are optional ones too.
            for name in [
                "aclmdlRICaptureBegin",
                "aclmdlRICaptureGetInfo",
                "aclmdlRICaptureEnd",
                "aclmdlRIExecuteAsync",
                "aclmdlRIDestroy",
            ] {
                assert_eq!(
                    l.get::<unsafe extern "C" fn()>(name).is_ok(),
                    lib != "fake_acl_lite",
                    "{lib}: {name}"
                );
            }
            let hook = *l
                .get::<RawDeviceModel>("runclaim_fake_device_model")
                .unwrap();
            let id = next_device();
            for (name, rc) in [
                (Some(c"a2a3"), 0),
                (Some(c"runclaim"), 0),
                (None, 0),
                (Some(c"A2A3"), AclError::ACL_ERROR_RT_PARAM_INVALID),
                (Some(c""), AclError::ACL_ERROR_RT_PARAM_INVALID),
                (Some(c"even runs"), AclError::ACL_ERROR_RT_PARAM_INVALID),
            ] {
                let p = name.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
                assert_eq!(hook(id, p), rc, "{lib}: {name:?}");
            }
        }
    }
}

/// The model is a setting of its own: chosen before the device opens, it
/// survives a reconfiguration, the device speaks it (its adapter's runs
/// compute, the other adapter's are refused at launch by the fake), and it
/// stays across a release until changed; NULL restores runclaim's.
#[test]
fn a_fake_device_speaks_the_protocol_its_model_hook_chose() {
    let c = control();
    let id = next_device();
    let cfg = FakeConfig::from_sim(&fast(), false);
    c.configure(id, &cfg);
    assert_eq!(c.try_device_model(id, Some("a2a3")), 0);
    c.configure(id, &cfg);
    let watchdog = fast().watchdog;
    assert_eq!(inc_once(open_on(id, watchdog), a2a3()), Ok(vec![2, 3]));
    assert!(c.release(id) || c.runtime(id).live == 0);
    let r = inc_once(open_on(id, watchdog), DeviceConfig::default());
    assert!(refused_by_the_fake(&r), "still a2a3 after a release: {r:?}");
    assert_eq!(c.try_device_model(id, None), 0);
    assert_eq!(
        inc_once(open_on(id, watchdog), DeviceConfig::default()),
        Ok(vec![2, 3])
    );
    let r = inc_once(open_on(id, watchdog), a2a3());
    assert!(refused_by_the_fake(&r), "runclaim's again: {r:?}");
    // A name that is not a built-in protocol changes nothing.
    assert_eq!(
        c.try_device_model(id, Some("nope")),
        AclError::ACL_ERROR_RT_PARAM_INVALID
    );
    assert_eq!(
        inc_once(open_on(id, watchdog), DeviceConfig::default()),
        Ok(vec![2, 3])
    );
}

/// The lite library (no optional symbols: every fallback path) speaks
/// a2a3 too, and so runs the a2a3 adapter's blocks. (Its events are
/// polled, which does not step a stepped device: a real-time one, with the
/// real-time tests' watchdog.)
#[test]
fn the_lite_library_speaks_a2a3_too() {
    let cfg = fast().watchdog(REAL_TIME_WATCHDOG).device_model(A2a3Model);
    let config = |c: DeviceConfig| c.device_watchdog(cfg.watchdog);
    let d = common::acl::open_lite(&cfg, true);
    assert_eq!(inc_once(d, config(a2a3())), Ok(vec![2, 3]));
    let d = common::acl::open_lite(&cfg, true);
    let r = inc_once(d, config(DeviceConfig::default()));
    assert!(refused_by_the_fake(&r), "{r:?}");
}
