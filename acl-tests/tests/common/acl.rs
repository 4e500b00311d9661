//! The `acl` driver over the fake runtime library, as a suite [`Target`]:
//! every call goes through `libloading`, the C structs and the error codes.

use std::ffi::{CString, c_char};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::Waker;
use std::time::Duration;

use fake_acl::control::{
    FakeCallbacks, FakeConfig, FakeRuntime, FakeStats, FakeTraceEntry, INJECT_CODE, INJECT_ELAPSED,
    decode_trace, encode_fault,
};
use libloading::Library;
use runclaim::DeviceConfig;
use runclaim::driver::abi::{A2a3Abi, LaunchArgs};
use runclaim::driver::acl::{AclConfig, AclDriver};
use runclaim::driver::{
    CodeHandle, Completion, DevPtr, Driver, DriverError, DriverInfo, EventId, GraphId, Notice,
    Registration, StreamId,
};
use runclaim::sim::trace::TraceEvent;
use runclaim::sim::{A2a3Model, Fault, SimConfig, SimStats};

use super::Target;

/// Where `cargo test` puts the workspace's cdylibs: next to the test binary.
pub fn lib_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let p = deps.join(format!("lib{name}.so"));
    assert!(
        p.exists(),
        "{} is missing: build the workspace (cargo test --workspace)",
        p.display()
    );
    p
}

type Configure = unsafe extern "C" fn(i32, *const FakeConfig) -> i32;
type Inject = unsafe extern "C" fn(i32, u32, u32, u64, u64) -> i32;
type Stats = unsafe extern "C" fn(i32, *mut FakeStats) -> i32;
type Trace = unsafe extern "C" fn(i32, *mut FakeTraceEntry, usize) -> isize;
type Clock = unsafe extern "C" fn(i32, *mut u64) -> i32;
type Runtime = unsafe extern "C" fn(i32, *mut FakeRuntime) -> i32;
type Release = unsafe extern "C" fn(i32) -> i32;
type SetVersion = unsafe extern "C" fn(i32, i32, i32) -> i32;
type DeviceModel = unsafe extern "C" fn(i32, *const c_char) -> i32;
type Callbacks = unsafe extern "C" fn(i32, *mut FakeCallbacks) -> i32;
type StopOnFailure = unsafe extern "C" fn(i32, u32) -> i32;
type Registrations = unsafe extern "C" fn() -> u64;
type HoldReport = unsafe extern "C" fn(i32) -> i32;
type Quirks = unsafe extern "C" fn(i32, u32) -> i32;

/// The fake's test-control functions, resolved from the same loaded library
/// the driver uses (one dlopen handle per path).
pub struct Control {
    configure: Configure,
    inject: Inject,
    stats: Stats,
    trace: Trace,
    clock: Clock,
    runtime: Runtime,
    release: Release,
    device_model: DeviceModel,
    callbacks: Callbacks,
    stop_on_failure: StopOnFailure,
    registrations: Registrations,
    hold_report: HoldReport,
    quirks: Quirks,
    /// Absent from the lite variant (an optional-symbols control).
    set_version: Option<SetVersion>,
    _lib: Library,
}

impl Control {
    fn load(path: &Path) -> Control {
        // SAFETY: the workspace's own fake library; loading runs no foreign
        // initialisers beyond Rust's.
        let lib = unsafe { Library::new(path.as_os_str()) }.expect("load fake library");
        // SAFETY: the types match the `runclaim_fake_*` definitions in
        // fake-acl/src/fake.rs; pointers are used only while `lib` lives.
        unsafe {
            Control {
                configure: *lib.get::<Configure>("runclaim_fake_configure").unwrap(),
                inject: *lib.get::<Inject>("runclaim_fake_inject").unwrap(),
                stats: *lib.get::<Stats>("runclaim_fake_stats").unwrap(),
                trace: *lib.get::<Trace>("runclaim_fake_trace").unwrap(),
                clock: *lib.get::<Clock>("runclaim_fake_clock").unwrap(),
                runtime: *lib.get::<Runtime>("runclaim_fake_runtime").unwrap(),
                release: *lib.get::<Release>("runclaim_fake_release").unwrap(),
                device_model: *lib
                    .get::<DeviceModel>("runclaim_fake_device_model")
                    .unwrap(),
                callbacks: *lib.get::<Callbacks>("runclaim_fake_callbacks").unwrap(),
                stop_on_failure: *lib
                    .get::<StopOnFailure>("runclaim_fake_stop_on_failure")
                    .unwrap(),
                registrations: *lib
                    .get::<Registrations>("runclaim_fake_exception_registrations")
                    .unwrap(),
                hold_report: *lib.get::<HoldReport>("runclaim_fake_hold_report").unwrap(),
                quirks: *lib.get::<Quirks>("runclaim_fake_quirks").unwrap(),
                set_version: lib
                    .get::<SetVersion>("runclaim_fake_set_version")
                    .ok()
                    .map(|f| *f),
                _lib: lib,
            }
        }
    }

    pub fn configure(&self, device: i32, cfg: &FakeConfig) {
        // SAFETY: `cfg` points at a valid FakeConfig for the call.
        let rc = unsafe { (self.configure)(device, cfg) };
        assert_eq!(rc, 0);
    }

    /// Makes `device` speak the built-in protocol `name` (`None`: the
    /// default, runclaim's); the fake's return code (0, or 107000 for a
    /// name that is no built-in protocol).
    pub fn try_device_model(&self, device: i32, name: Option<&str>) -> i32 {
        let name = name.map(|n| CString::new(n).expect("no NUL in a model name"));
        let p = name.as_ref().map_or(std::ptr::null(), |n| n.as_ptr());
        // SAFETY: `p` is NULL or a NUL-terminated string alive for the call.
        unsafe { (self.device_model)(device, p) }
    }

    /// Makes `device` speak the protocol of `cfg`'s device model, which
    /// must be a built-in one: user models are simulator-only (the fake
    /// library cannot reach a Rust value of this process).
    pub fn device_model_of(&self, device: i32, cfg: &SimConfig) {
        let name = cfg.device_model.name();
        let rc = self.try_device_model(device, Some(name));
        assert_eq!(
            rc, 0,
            "the fake speaks the built-in protocols only, not {name:?} (user models are simulator-only)"
        );
    }

    pub fn inject(&self, device: i32, f: &Fault) {
        let (k, a, n, arg) = encode_fault(f);
        // SAFETY: plain values.
        let rc = unsafe { (self.inject)(device, k, a, n, arg) };
        assert_eq!(rc, 0, "{f:?}");
    }

    /// Makes the `nth` ACL call on `device` return `code`.
    pub fn inject_code(&self, device: i32, nth: u64, code: i32) {
        // SAFETY: plain values.
        let rc =
            unsafe { (self.inject)(device, INJECT_CODE, 0, nth, u64::from(code.unsigned_abs())) };
        assert_eq!(rc, 0);
    }

    /// Makes the next `aclrtEventElapsedTime` on `device` report `ms`.
    pub fn inject_elapsed(&self, device: i32, ms: f32) {
        // SAFETY: plain values.
        let rc = unsafe { (self.inject)(device, INJECT_ELAPSED, 0, 1, u64::from(ms.to_bits())) };
        assert_eq!(rc, 0);
    }

    /// Sets `device`'s quirks (`fake_acl::control::QUIRK_*` bits; 0: none):
    /// each makes it behave unlike the runtime in one respect.
    pub fn quirks(&self, device: i32, bits: u32) {
        // SAFETY: plain values.
        let rc = unsafe { (self.quirks)(device, bits) };
        assert_eq!(rc, 0);
    }

    /// What the fake runtime observed on `device`.
    pub fn runtime(&self, device: i32) -> FakeRuntime {
        let mut r = FakeRuntime::default();
        // SAFETY: `r` is a valid out-pointer.
        let rc = unsafe { (self.runtime)(device, &raw mut r) };
        assert_eq!(rc, 0);
        r
    }

    /// Releases `device` now (joins its real-time thread); `false` when it
    /// was not live.
    pub fn release(&self, device: i32) -> bool {
        // SAFETY: plain value.
        unsafe { (self.release)(device) == 0 }
    }

    /// What the fake saw of `device`'s host callbacks.
    pub fn callbacks(&self, device: i32) -> FakeCallbacks {
        let mut c = FakeCallbacks::default();
        // SAFETY: `c` is a valid out-pointer.
        let rc = unsafe { (self.callbacks)(device, &raw mut c) };
        assert_eq!(rc, 0);
        c
    }

    /// Stop-on-failure for `device`: callbacks queued behind a fault never
    /// run.
    pub fn stop_on_failure(&self, device: i32, on: bool) {
        // SAFETY: plain values.
        let rc = unsafe { (self.stop_on_failure)(device, u32::from(on)) };
        assert_eq!(rc, 0);
    }

    /// Sets the report gate for `device`: its next `aclrtProcessReport`
    /// that finds no stream subscribed to its thread is held until the next
    /// `aclrtLaunchCallback` on the device (counted in
    /// [`callbacks`](Self::callbacks): `held_reports`, `holding`).
    pub fn hold_report(&self, device: i32) {
        // SAFETY: a plain value.
        let rc = unsafe { (self.hold_report)(device) };
        assert_eq!(rc, 0);
    }

    /// `aclrtSetExceptionInfoCallback` calls in this process.
    pub fn exception_registrations(&self) -> u64 {
        // SAFETY: no arguments.
        unsafe { (self.registrations)() }
    }

    /// Makes `aclrtGetVersion` report `v` on the calling thread (`None`:
    /// the default).
    pub fn set_version(&self, v: Option<(i32, i32, i32)>) {
        let (a, b, c) = v.unwrap_or((-1, 0, 0));
        let set = self.set_version.expect("the full fake library");
        // SAFETY: plain values.
        let rc = unsafe { set(a, b, c) };
        assert_eq!(rc, 0);
    }

    pub fn stats(&self, device: i32) -> SimStats {
        let mut s = FakeStats::default();
        // SAFETY: `s` is a valid out-pointer.
        let rc = unsafe { (self.stats)(device, &raw mut s) };
        assert_eq!(rc, 0);
        s.to_sim()
    }

    /// The fake device's own clock (virtual time when stepped).
    pub fn clock(&self, device: i32) -> Duration {
        let mut ns = 0u64;
        // SAFETY: `ns` is a valid out-pointer.
        let rc = unsafe { (self.clock)(device, &raw mut ns) };
        assert_eq!(rc, 0);
        Duration::from_nanos(ns)
    }

    pub fn trace(&self, device: i32) -> Vec<TraceEvent> {
        let mut buf = vec![FakeTraceEntry::default(); 1 << 16];
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { (self.trace)(device, buf.as_mut_ptr(), buf.len()) };
        buf.truncate(usize::try_from(n).expect("device exists"));
        buf.iter().filter_map(decode_trace).collect()
    }
}

/// The control API of the full fake library (loaded once).
pub fn control() -> Arc<Control> {
    static C: OnceLock<Arc<Control>> = OnceLock::new();
    Arc::clone(C.get_or_init(|| Arc::new(Control::load(&lib_path("fake_acl")))))
}

/// The control API of the lite fake library (no optional symbols; its own
/// state, separate from the full library's).
pub fn control_lite() -> Arc<Control> {
    static C: OnceLock<Arc<Control>> = OnceLock::new();
    Arc::clone(C.get_or_init(|| Arc::new(Control::load(&lib_path("fake_acl_lite")))))
}

/// Opens an `AclDriver` on a freshly configured device of the lite fake
/// library (no optional symbols: every fallback path).
pub fn open_lite(cfg: &SimConfig, real_time: bool) -> AclDriver {
    let id = next_device();
    control_lite().configure(id, &FakeConfig::from_sim(cfg, real_time));
    control_lite().device_model_of(id, cfg);
    let path = lib_path("fake_acl_lite");
    let acl = AclConfig::new(id, "fake-aicpu-op-info.json").libraries(&path, &path);
    AclDriver::open(acl).expect("open the acl driver on the lite fake library")
}

/// A fresh device id per test device.
pub fn next_device() -> i32 {
    static NEXT: AtomicI32 = AtomicI32::new(100);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Opens an `AclDriver` on a freshly configured fake device, speaking the
/// protocol of `cfg`'s device model (a built-in one).
pub fn open(cfg: &SimConfig, real_time: bool) -> AclDriver {
    open_with(cfg, real_time, |acl| acl)
}

/// [`open`], the driver's configuration adjusted by `adjust`.
pub fn open_with(
    cfg: &SimConfig,
    real_time: bool,
    adjust: impl FnOnce(AclConfig) -> AclConfig,
) -> AclDriver {
    let id = next_device();
    control().configure(id, &FakeConfig::from_sim(cfg, real_time));
    control().device_model_of(id, cfg);
    let path = lib_path("fake_acl");
    let acl = AclConfig::new(id, "fake-aicpu-op-info.json")
        .libraries(&path, &path)
        .op_watchdog(cfg.watchdog);
    AclDriver::open(adjust(acl)).expect("open the acl driver on the fake library")
}

/// The `acl` driver on a fake device, judged on the fake device's clock.
///
/// A real NPU runs in host time, so `AclDriver` keeps the host clock
/// (`Driver::clock`'s default). The fake's stepped devices run in virtual
/// time instead: this wrapper reports that clock, and forwards every other
/// call to the `AclDriver` unchanged.
pub struct FakeAcl {
    /// The driver under test.
    pub acl: AclDriver,
    control: Arc<Control>,
}

impl FakeAcl {
    /// The fake device id.
    pub fn device_id(&self) -> i32 {
        self.acl.device_id()
    }
}

macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&self, $($arg: $ty),*) -> $ret { self.acl.$name($($arg),*) })*
    };
}

impl Driver for FakeAcl {
    forward! {
        info() -> DriverInfo;
        alloc(bytes: usize) -> Result<DevPtr, DriverError>;
        free(ptr: DevPtr) -> Result<(), DriverError>;
        copy_to_device(dst: DevPtr, src: &[u8]) -> Result<(), DriverError>;
        copy_from_device(dst: &mut [u8], src: DevPtr) -> Result<(), DriverError>;
        memset(dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError>;
        copy_async(s: StreamId, dst: DevPtr, src: DevPtr, len: usize) -> Result<(), DriverError>;
        memset_async(s: StreamId, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError>;
        create_stream() -> Result<StreamId, DriverError>;
        destroy_stream(s: StreamId) -> Result<(), DriverError>;
        query_stream(s: StreamId) -> Result<Completion, DriverError>;
        sync_stream(s: StreamId, t: Duration) -> Result<(), DriverError>;
        create_event() -> Result<EventId, DriverError>;
        destroy_event(e: EventId) -> Result<(), DriverError>;
        record_event(e: EventId, s: StreamId) -> Result<(), DriverError>;
        query_event(e: EventId) -> Result<Completion, DriverError>;
        sync_event(e: EventId, t: Duration) -> Result<(), DriverError>;
        stream_wait_event(s: StreamId, e: EventId) -> Result<(), DriverError>;
        event_elapsed(a: EventId, b: EventId) -> Result<Duration, DriverError>;
        event_timestamp(e: EventId) -> Result<u64, DriverError>;
        register_code(code: &[u8]) -> Result<Registration, DriverError>;
        release_code(code: CodeHandle) -> Result<(), DriverError>;
        code_epoch() -> u64;
        launch_aicore(s: StreamId, c: CodeHandle, b: u32, a: LaunchArgs<'_>) -> Result<(), DriverError>;
        launch_aicpu(s: StreamId, a: LaunchArgs<'_>) -> Result<(), DriverError>;
        capture_begin(s: StreamId) -> Result<(), DriverError>;
        capture_end(s: StreamId) -> Result<GraphId, DriverError>;
        graph_launch(g: GraphId, s: StreamId) -> Result<(), DriverError>;
        graph_destroy(g: GraphId) -> Result<(), DriverError>;
    }

    fn clock(&self) -> Duration {
        self.control.clock(self.acl.device_id())
    }

    // The completion notifications, forwarded too: the contract's launches
    // queue the driver's host callbacks on the fake.
    fn queue_notify(&self, s: StreamId, e: EventId) -> Result<(), DriverError> {
        self.acl.queue_notify(s, e)
    }

    fn notify_event(&self, e: EventId, within: Duration, w: &Waker) -> Result<Notice, DriverError> {
        self.acl.notify_event(e, within, w)
    }
}

impl FakeAcl {
    /// Wraps a driver opened on the full fake library.
    pub fn new(acl: AclDriver) -> Self {
        FakeAcl {
            acl,
            control: control(),
        }
    }
}

/// Opens another `AclDriver` on the (already configured) fake device `id`:
/// two drivers sharing one device, as two processes' components would.
pub fn open_on(id: i32, watchdog: Duration) -> AclDriver {
    let path = lib_path("fake_acl");
    let acl = AclConfig::new(id, "fake-aicpu-op-info.json")
        .libraries(&path, &path)
        .op_watchdog(watchdog);
    AclDriver::open(acl).expect("open the acl driver on the fake library")
}

/// The acl driver over the fake library.
pub struct Acl;

impl Target for Acl {
    type D = FakeAcl;
    fn stepped(&self, cfg: SimConfig) -> FakeAcl {
        FakeAcl {
            acl: open(&cfg, false),
            control: control(),
        }
    }
    fn real_time(&self, cfg: SimConfig) -> FakeAcl {
        FakeAcl {
            acl: open(&cfg, true),
            control: control(),
        }
    }
    fn inject(&self, d: &FakeAcl, f: Fault) {
        control().inject(d.device_id(), &f);
    }
    fn stats(&self, d: &FakeAcl) -> SimStats {
        control().stats(d.device_id())
    }
    fn trace(&self, d: &FakeAcl) -> Vec<TraceEvent> {
        control().trace(d.device_id())
    }
    fn probe(&self, d: &FakeAcl) -> Box<dyn Fn() -> SimStats> {
        let (c, id) = (control(), d.device_id());
        Box::new(move || c.stats(id))
    }
}

/// The acl driver over the fake library, the fake device speaking the
/// reference runtime's a2a3 protocol (`A2a3Model`), and devices opened
/// with the matching adapter (`A2a3Abi`): every block the adapter writes
/// goes through the acl driver's address check, `libloading` and the C
/// launch structs to the fake's device, which decodes it.
pub struct AclA2a3;

impl Target for AclA2a3 {
    type D = FakeAcl;
    fn stepped(&self, cfg: SimConfig) -> FakeAcl {
        Acl.stepped(cfg.device_model(A2a3Model))
    }
    fn real_time(&self, cfg: SimConfig) -> FakeAcl {
        Acl.real_time(cfg.device_model(A2a3Model))
    }
    fn inject(&self, d: &FakeAcl, f: Fault) {
        Acl.inject(d, f);
    }
    fn stats(&self, d: &FakeAcl) -> SimStats {
        Acl.stats(d)
    }
    fn trace(&self, d: &FakeAcl) -> Vec<TraceEvent> {
        Acl.trace(d)
    }
    fn probe(&self, d: &FakeAcl) -> Box<dyn Fn() -> SimStats> {
        Acl.probe(d)
    }
    fn config(&self) -> DeviceConfig {
        DeviceConfig::default().kernel_abi(A2a3Abi)
    }
}
