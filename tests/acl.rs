//! The `acl` driver's own behaviour through `libloading`: library search
//! errors, missing symbols, optional-capability fallbacks, every named error
//! code, and the per-thread device context.

mod common;

use std::time::Duration;

use common::LaunchIn;
use common::acl::{control, lib_path, next_device, open};
use fake_acl::control::FakeConfig;
use runclaim::contract::{ConfigError, ErrorKind as ContractError};
use runclaim::driver::acl::codes::{NAMED, kind_of};
use runclaim::driver::acl::{AclConfig, AclDriver, Lib, LoadError, MissingSymbol, OpenError};
use runclaim::driver::{Capabilities, Completion, Driver, ErrorKind};
use runclaim::sim::SimConfig;
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs};

fn fast() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

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
    assert_eq!(
        missing,
        &[MissingSymbol {
            symbol: "aclrtStreamWaitEvent",
            lib: Lib::AscendCl,
            file: incomplete.clone(),
        }]
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
    let cfg = FakeConfig::from_sim(&fast(), true);
    // SAFETY: valid pointer for the call.
    let rc = unsafe { configure(id, &raw const cfg) };
    assert_eq!(rc, 0);
    let d = AclDriver::open(
        AclConfig::new(id, "x.json")
            .libraries(&lite, &lite)
            .op_watchdog(Duration::from_millis(2)),
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
        &ErrorKind::Unsupported
    );
    d.destroy_event(e).unwrap();
    let mut dev = Device::<_, 2>::open(
        d,
        DeviceConfig::default().device_watchdog(Duration::from_millis(2)),
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
    assert_eq!(err.kind(), &ErrorKind::OutOfMemory { bytes: 1 << 50 });
}

#[test]
fn every_named_code_maps_to_its_meaning() {
    let d = open(&fast(), false);
    let c = control();
    for &(code, name) in NAMED {
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
                    ErrorKind::OutOfMemory { .. } => ErrorKind::OutOfMemory { bytes: 64 },
                    k => k,
                };
                assert_eq!(err.kind(), &want, "{name} ({code})");
                assert_ne!(err.kind(), &ErrorKind::Unknown, "{name}");
            }
        }
    }
    // A code outside the table keeps its number and is Unknown.
    c.inject_code(d.device_id(), 1, 123_456);
    let err = d.alloc(64).unwrap_err();
    assert_eq!(
        (err.kind(), err.native().unwrap().code),
        (&ErrorKind::Unknown, 123_456)
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
        &ErrorKind::Timeout {
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
                assert_eq!(kind_of(rc), ErrorKind::NoContext);
                // Through the driver the same query works: it binds first.
                assert_eq!(d.query_stream(s).unwrap(), Completion::Complete);
            })
            .join()
            .unwrap();
    });
}
