//! The `acl` driver over the fake runtime library, as a suite [`Target`]:
//! every call goes through `libloading`, the C structs and the error codes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};

use fake_acl::control::{
    FakeConfig, FakeStats, FakeTraceEntry, INJECT_CODE, decode_trace, encode_fault,
};
use libloading::Library;
use runclaim::driver::acl::{AclConfig, AclDriver};
use runclaim::sim::{Fault, SimConfig, SimStats, TraceEvent};

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

/// The fake's test-control functions, resolved from the same loaded library
/// the driver uses (one dlopen handle per path).
pub struct Control {
    configure: Configure,
    inject: Inject,
    stats: Stats,
    trace: Trace,
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
                _lib: lib,
            }
        }
    }

    pub fn configure(&self, device: i32, cfg: &FakeConfig) {
        // SAFETY: `cfg` points at a valid FakeConfig for the call.
        let rc = unsafe { (self.configure)(device, cfg) };
        assert_eq!(rc, 0);
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

    pub fn stats(&self, device: i32) -> SimStats {
        let mut s = FakeStats::default();
        // SAFETY: `s` is a valid out-pointer.
        let rc = unsafe { (self.stats)(device, &raw mut s) };
        assert_eq!(rc, 0);
        s.to_sim()
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

/// A fresh device id per test device.
pub fn next_device() -> i32 {
    static NEXT: AtomicI32 = AtomicI32::new(100);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Opens an `AclDriver` on a freshly configured fake device.
pub fn open(cfg: &SimConfig, real_time: bool) -> AclDriver {
    let id = next_device();
    control().configure(id, &FakeConfig::from_sim(cfg, real_time));
    let path = lib_path("fake_acl");
    let acl = AclConfig::new(id, "fake-aicpu-op-info.json")
        .libraries(&path, &path)
        .op_watchdog(cfg.watchdog);
    AclDriver::open(acl).expect("open the acl driver on the fake library")
}

/// The acl driver over the fake library.
pub struct Acl;

impl Target for Acl {
    type D = AclDriver;
    fn stepped(&self, cfg: SimConfig) -> AclDriver {
        open(&cfg, false)
    }
    fn real_time(&self, cfg: SimConfig) -> AclDriver {
        open(&cfg, true)
    }
    fn inject(&self, d: &AclDriver, f: Fault) {
        control().inject(d.device_id(), &f);
    }
    fn stats(&self, d: &AclDriver) -> SimStats {
        control().stats(d.device_id())
    }
    fn trace(&self, d: &AclDriver) -> Vec<TraceEvent> {
        control().trace(d.device_id())
    }
    fn probe(&self, d: &AclDriver) -> Box<dyn Fn() -> SimStats> {
        let (c, id) = (control(), d.device_id());
        Box::new(move || c.stats(id))
    }
}
