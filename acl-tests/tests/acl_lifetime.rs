//! Lifetimes at the edges of the process, where nothing may panic: the
//! vendor runtime is never unloaded under its own threads, a driver dropped
//! from a thread-local destructor does not abort, the fake runtime's entry
//! points do not panic during thread teardown or on huge copies, and the
//! fake's real-time device threads are joined when the device is released.
//!
//! A bug here aborts the process (a panic in a thread-local destructor or in
//! an `extern "C"` function cannot unwind), so each scenario runs in a child
//! process — this test binary again, running one ignored test — and the
//! parent checks how it ended.

mod common;

use std::cell::RefCell;
use std::ffi::{c_char, c_void};
use std::process::Command;
use std::time::Duration;

use common::acl::{control, lib_path, next_device, open, open_lite};
use fake_acl::control::FakeConfig;
use runclaim::driver::Driver;
use runclaim::driver::acl::{AclConfig, AclDriver};
use runclaim::sim::SimConfig;

const CHILD: &str = "RUNCLAIM_ACL_LIFETIME_CHILD";

fn fast() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

/// Runs the ignored test `name` alone in a child process; panics with its
/// output unless it passed.
fn in_child(name: &str) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--include-ignored", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "{name} ended with {}:\n{text}",
        out.status
    );
}

/// `true` in the child process meant to run `name`.
fn is_child(name: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(name)
}

fn raw<T: Copy>(lib: &str, name: &str) -> T {
    // SAFETY: the workspace's own fake library (the driver loaded it and
    // never unloads it); callers name the C prototype's type.
    unsafe {
        let l = libloading::Library::new(lib_path(lib).as_os_str()).unwrap();
        let f = *l.get::<T>(name).unwrap();
        std::mem::forget(l);
        f
    }
}

type RawFree = unsafe extern "C" fn(*mut c_void) -> i32;
type RawErrMsg = unsafe extern "C" fn() -> *const c_char;
type RawMemcpy = unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, u32) -> i32;

// ----- never unloaded ----------------------------------------------------------

#[test]
fn the_runtime_stays_loaded_after_the_last_driver_drops() {
    in_child("child_runtime_stays_loaded");
}

#[test]
#[ignore = "runs in a child process (the_runtime_stays_loaded_after_the_last_driver_drops)"]
fn child_runtime_stays_loaded() {
    if !is_child("child_runtime_stays_loaded") {
        return;
    }
    let lite = lib_path("fake_acl_lite");
    let mapped = || {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .contains(lite.to_str().unwrap())
    };
    assert!(!mapped(), "nothing loaded the lite library yet");
    let id = next_device();
    {
        // SAFETY: the workspace's own library; the type matches fake.rs.
        // This handle is dropped at the end of the block.
        let l = unsafe { libloading::Library::new(lite.as_os_str()) }.unwrap();
        // SAFETY: as above.
        let configure = unsafe {
            *l.get::<unsafe extern "C" fn(i32, *const FakeConfig) -> i32>("runclaim_fake_configure")
                .unwrap()
        };
        let cfg = FakeConfig::from_sim(&fast(), false);
        // SAFETY: a valid pointer for the call.
        assert_eq!(unsafe { configure(id, &raw const cfg) }, 0);
    }
    let d = AclDriver::open(AclConfig::new(id, "x.json").libraries(&lite, &lite)).unwrap();
    let s = d.create_stream().unwrap();
    d.sync_stream(s, Duration::from_millis(10)).unwrap();
    d.destroy_stream(s).unwrap();
    drop(d);
    assert!(
        mapped(),
        "the runtime library was unloaded when the driver dropped"
    );
}

// ----- thread-local teardown ---------------------------------------------------

/// Dropped from a thread-local destructor, after the driver's and the fake
/// runtime's own thread-locals are gone: speaks to the runtime (a failing
/// call, its error message) and drops the driver.
struct Holder {
    driver: Option<AclDriver>,
    lib: &'static str,
}

impl Drop for Holder {
    fn drop(&mut self) {
        let free: RawFree = raw(self.lib, "aclrtFree");
        // SAFETY: a bogus device address the runtime refuses (107000); the
        // point is the fake's message slot, already destroyed.
        let rc = unsafe { free(std::ptr::without_provenance_mut(0x10)) };
        assert_ne!(rc, 0);
        if self.lib == "fake_acl" {
            let msg: RawErrMsg = raw(self.lib, "aclGetRecentErrMsg");
            // SAFETY: no arguments; the pointer is not dereferenced.
            let _ = unsafe { msg() };
        }
        drop(self.driver.take());
    }
}

thread_local! {
    static HELD: RefCell<Option<Holder>> = const { RefCell::new(None) };
}

fn drop_in_tls_teardown(lib: &'static str) {
    std::thread::spawn(move || {
        // Registered first, so destroyed last: after every thread-local the
        // driver or the fake runtime registers below.
        HELD.with(|h| drop(h.borrow_mut().take()));
        let d = if lib == "fake_acl" {
            open(&fast(), false)
        } else {
            open_lite(&fast(), false)
        };
        let s = d.create_stream().unwrap();
        d.destroy_stream(s).unwrap();
        // Make the fake runtime register its message thread-locals now.
        let free: RawFree = raw(lib, "aclrtFree");
        // SAFETY: a bogus address, refused.
        let _ = unsafe { free(std::ptr::without_provenance_mut(0x10)) };
        if lib == "fake_acl" {
            let msg: RawErrMsg = raw(lib, "aclGetRecentErrMsg");
            // SAFETY: no arguments.
            let _ = unsafe { msg() };
        }
        HELD.with(|h| {
            *h.borrow_mut() = Some(Holder {
                driver: Some(d),
                lib,
            });
        });
    })
    .join()
    .unwrap();
}

#[test]
fn a_driver_dropped_during_thread_local_teardown_does_not_abort() {
    in_child("child_drop_in_tls_teardown");
}

#[test]
#[ignore = "runs in a child process (a_driver_dropped_during_thread_local_teardown_does_not_abort)"]
fn child_drop_in_tls_teardown() {
    if !is_child("child_drop_in_tls_teardown") {
        return;
    }
    drop_in_tls_teardown("fake_acl");
    drop_in_tls_teardown("fake_acl_lite");
}

// ----- the fake's synchronous device-to-device copy --------------------------

#[test]
fn a_huge_device_to_device_copy_is_refused_not_an_abort() {
    in_child("child_huge_d2d_copy");
}

#[test]
#[ignore = "runs in a child process (a_huge_device_to_device_copy_is_refused_not_an_abort)"]
fn child_huge_d2d_copy() {
    if !is_child("child_huge_d2d_copy") {
        return;
    }
    let d = open(&fast(), false);
    let p = d.alloc(64).unwrap();
    let memcpy: RawMemcpy = raw("fake_acl", "aclrtMemcpy");
    let h = std::ptr::without_provenance_mut::<c_void>(usize::try_from(p.raw()).unwrap());
    for count in [usize::MAX / 2, 1 << 40, 65] {
        // SAFETY: device-to-device (kind 3): no host memory is touched; the
        // runtime must refuse the sizes.
        let rc = unsafe { memcpy(h, count, h.cast_const(), count, 3) };
        assert_ne!(rc, 0, "{count}");
    }
    // SAFETY: as above, a copy that fits.
    assert_eq!(unsafe { memcpy(h, 64, h.cast_const(), 32, 3) }, 0);
}

// ----- real-time device threads joined ----------------------------------------

/// Threads of this process. (The child runs one test, on one thread, and
/// starts no other: every further thread is a simulated device's. The
/// device threads' names are not visible in `/proc`, so they are counted.)
fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn real_time_device_threads_are_joined_when_the_device_is_released() {
    in_child("child_device_threads_joined");
}

#[test]
#[ignore = "runs in a child process (real_time_device_threads_are_joined_when_the_device_is_released)"]
fn child_device_threads_joined() {
    if !is_child("child_device_threads_joined") {
        return;
    }
    let base = threads();
    // Waits (bounded) until exactly `n` device threads are left: a joined
    // thread may linger in /proc for a moment after its join returned.
    let device_threads_settle_at = |n: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let now = threads() - base;
            if now == n || std::time::Instant::now() >= deadline {
                return now;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    // The last reference (the driver's reset) releases the device.
    let one = open(&fast(), true);
    let id = one.device_id();
    let stream = one.create_stream().unwrap();
    one.sync_stream(stream, Duration::from_millis(100)).unwrap();
    one.destroy_stream(stream).unwrap();
    assert_eq!(device_threads_settle_at(1), 1);
    drop(one);
    assert_eq!(
        device_threads_settle_at(0),
        0,
        "joined when the last reference went"
    );
    assert_eq!(control().runtime(id).releases, 1);
    // Two drivers: the device lives until both are gone.
    let a = open(&fast(), true);
    let b = common::acl::open_on(a.device_id(), Duration::from_millis(2));
    drop(a);
    assert_eq!(device_threads_settle_at(1), 1, "B still holds the device");
    b.sync_stream(b.create_stream().unwrap(), Duration::from_millis(100))
        .unwrap();
    drop(b);
    assert_eq!(device_threads_settle_at(0), 0);
    // Or on a control call, whatever the references.
    let third = open(&fast(), true);
    assert_eq!(device_threads_settle_at(1), 1);
    assert!(control().release(third.device_id()));
    assert_eq!(device_threads_settle_at(0), 0, "joined on the control call");
    drop(third); // its resets find nothing left to release
}
