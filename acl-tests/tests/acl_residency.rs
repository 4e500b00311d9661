//! Own what you publish, on the acl driver: two
//! `AclDriver`s on one fake device id — as two components of a process
//! sharing an NPU — publish and run interleaved through `runclaim::Device`,
//! with 1 and with 16 code slots, and every value is checked. The fake
//! runtime behaves like CANN: each `rtRegisterAllKernel` is its own program
//! that holds its code until `rtDevBinaryUnRegister`, and a full code memory
//! is an error (507032), never an eviction of someone's live code.
//!
//! The negative control breaks the rule on purpose — a wrapper driver drops
//! its pins and launches without the driver's check — and the same value
//! check catches the wrong program. It relies on the runtime handing `y` the
//! handle `x` just gave up; the fake's registration table is per device (as
//! its code memory is), so that happens every time, whatever other tests
//! register on their own devices meanwhile.

mod common;

use std::ffi::c_void;
use std::time::Duration;

use common::LaunchIn;
use common::acl::{FakeAcl, control, lib_path, open, open_on};
use runclaim::contract::ErrorKind as ContractError;
use runclaim::driver::abi::{LaunchArgs, Program, RunArgs};
use runclaim::driver::{
    CodeHandle, Completion, DevPtr, Driver, DriverError, DriverErrorKind, DriverInfo, EventId,
    HandleKind, Registration, StreamId,
};
use runclaim::sim::SimConfig;
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

fn sim(slots: usize) -> SimConfig {
    SimConfig::default()
        .watchdog(Duration::from_millis(2))
        .code_slots(slots)
}

fn device<D: Driver>(d: D) -> Device<D, 2> {
    Device::open(d, DeviceConfig::default().max_elements(8)).unwrap()
}

/// Two drivers on one freshly configured fake device.
fn two_on_one(slots: usize) -> (FakeAcl, FakeAcl) {
    let a = open(&sim(slots), false);
    let b = open_on(a.device_id(), Duration::from_millis(2));
    assert_eq!(a.device_id(), b.device_id());
    (FakeAcl::new(a), FakeAcl::new(b))
}

const INPUT: [u32; 3] = [1, 2, 3];

fn x() -> Callable {
    Callable::program("x", &Program::new().add(1000))
}

/// The k-th of B's programs and what it computes.
fn other(k: u32) -> (Callable, impl Fn(u32) -> u32) {
    (
        Callable::program(format!("o{k}"), &Program::new().mul(k + 2).add(k)),
        move |v: u32| v * (k + 2) + k,
    )
}

#[test]
fn sixteen_slots_two_drivers_interleaved_every_value_checked() {
    let (a, b) = two_on_one(16);
    let id = a.device_id();
    let mut dev_a = device(a);
    let mut dev_b = device(b);
    let runner_a = dev_a.publish(&[x()]).unwrap();
    let code_x = runner_a.code("x").unwrap();
    assert_eq!(
        runner_a.serial::<0>(code_x, Input::Host(&INPUT)),
        [1001, 1002, 1003]
    );
    // B publishes and runs one program after another — more than code
    // memory holds in total — while A's runner lives; A runs between each.
    for k in 0..20u32 {
        {
            let (callable, f) = other(k);
            let runner_b = dev_b.publish(&[callable]).unwrap();
            let code = runner_b.code(&format!("o{k}")).unwrap();
            let want: Vec<u32> = INPUT.iter().map(|&v| f(v)).collect();
            assert_eq!(
                runner_b.serial::<1>(code, Input::Host(&INPUT)),
                want,
                "B's o{k}"
            );
        }
        assert_eq!(
            runner_a.serial::<0>(code_x, Input::Host(&INPUT)),
            [1001, 1002, 1003],
            "A's x after B's o{k}"
        );
        // Registering directly through A's own driver does not move x either.
        if k % 5 == 0 {
            let direct = runner_a
                .device()
                .driver()
                .register_code(&Program::new().xor(k).encode())
                .unwrap();
            assert!(direct.published);
            assert_eq!(
                runner_a.serial::<1>(code_x, Input::Host(&INPUT)),
                [1001, 1002, 1003],
                "A's x after a direct registration"
            );
        }
    }
    // Queued, not only serial: two of A's runs in flight.
    let (mut o0, mut o1) = (Outputs::<0>::new(8), Outputs::<1>::new(8));
    let r0 = runner_a.launched::<0>(code_x, Input::Host(&INPUT));
    let r1 = runner_a.launched::<1>(code_x, Input::Previous);
    r0.fence().unwrap().finalize(&mut o0).unwrap();
    r1.fence().unwrap().finalize(&mut o1).unwrap();
    assert_eq!(
        (o0.values(), o1.values()),
        (&[1001, 1002, 1003][..], &[2001, 2002, 2003][..])
    );
    let stats = control().stats(id);
    assert_eq!(stats.stale_executions, 0);
    drop(runner_a);
    drop(dev_a);
    drop(dev_b);
    let rt = control().runtime(id);
    assert_eq!(
        rt.programs_registered, rt.programs_unregistered,
        "every registration was released"
    );
}

#[test]
fn one_slot_two_drivers_a_full_code_memory_is_an_error_not_an_eviction() {
    let (a, b) = two_on_one(1);
    let id = a.device_id();
    let mut dev_a = device(a);
    let mut dev_b = device(b);
    {
        let runner_a = dev_a.publish(&[x()]).unwrap();
        let code_x = runner_a.code("x").unwrap();
        assert_eq!(
            runner_a.serial::<0>(code_x, Input::Host(&INPUT)),
            [1001, 1002, 1003]
        );
        for k in 0..3 {
            let err = dev_b.publish(&[other(k).0]).map(|_| ()).unwrap_err();
            assert_eq!(
                err.kind(),
                &ContractError::CodeDoesNotFit { capacity: 1 },
                "B's publication while A holds the only slot: {err}"
            );
            assert_eq!(
                runner_a.serial::<1>(code_x, Input::Host(&INPUT)),
                [1001, 1002, 1003],
                "A's x is still A's x"
            );
        }
        // A's own next publication needs the slot too: A's runner must go
        // first, and then A's old code makes room for A's new code.
    }
    {
        let (callable, f) = other(7);
        let runner_a = dev_a.publish(&[callable]).unwrap();
        let code = runner_a.code("o7").unwrap();
        let want: Vec<u32> = INPUT.iter().map(|&v| f(v)).collect();
        assert_eq!(runner_a.serial::<0>(code, Input::Host(&INPUT)), want);
    }
    // Once A closes, B's publication fits.
    dev_a.close().unwrap();
    let runner_b = dev_b.publish(&[x()]).unwrap();
    let code = runner_b.code("x").unwrap();
    assert_eq!(
        runner_b.serial::<0>(code, Input::Host(&INPUT)),
        [1001, 1002, 1003]
    );
    // And a third driver on the device is refused while B holds it.
    let mut dev_c = device(FakeAcl::new(open_on(id, Duration::from_millis(2))));
    assert!(dev_c.publish(&[other(1).0]).is_err());
    assert_eq!(
        runner_b.serial::<1>(code, Input::Host(&INPUT)),
        [1001, 1002, 1003]
    );
    assert_eq!(control().stats(id).stale_executions, 0);
}

// ----- negative control ------------------------------------------------------

/// `rtKernelLaunchWithHandleV2`, called around the driver's check.
type RawLaunch = unsafe extern "C" fn(
    *mut c_void,
    u64,
    u32,
    *mut RawArgsEx,
    *mut c_void,
    *mut c_void,
    *const c_void,
) -> i32;

/// `rtArgsEx_t` (40 bytes, every byte a field).
#[repr(C)]
struct RawArgsEx {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    args_size: u32,
    tiling: [u32; 2],
    rest: [u8; 12],
}

/// A driver that breaks the residency rule on purpose: it drops the pin of
/// every registration at once (so the runtime may let the code go), and —
/// with `unchecked` — launches a `CodeHandle`'s raw value without asking the
/// driver whether it still names that upload.
struct Tamper {
    inner: FakeAcl,
    unchecked: Option<RawLaunch>,
}

macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&self, $($arg: $ty),*) -> $ret { self.inner.$name($($arg),*) })*
    };
}

impl Driver for Tamper {
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
        release_code(code: CodeHandle) -> Result<(), DriverError>;
        code_epoch() -> u64;
        clock() -> Duration;
        launch_aicpu(s: StreamId, a: LaunchArgs<'_>) -> Result<(), DriverError>;
    }

    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        let r = self.inner.register_code(code)?;
        self.inner.release_code(r.handle)?;
        Ok(r)
    }

    fn launch_aicore(
        &self,
        s: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverError> {
        let Some(launch) = self.unchecked else {
            return self.inner.launch_aicore(s, code, block_dim, args);
        };
        let mut blob = <[u8; RunArgs::SIZE]>::try_from(args.bytes()).unwrap();
        let mut ex = RawArgsEx {
            args: blob.as_mut_ptr().cast(),
            host_input_info_ptr: std::ptr::null_mut(),
            args_size: RunArgs::SIZE_U32,
            tiling: [0; 2],
            rest: [0; 12],
        };
        let h = |raw: u64| std::ptr::without_provenance_mut(usize::try_from(raw).unwrap());
        // SAFETY: the fake library's own launch; `ex` and `blob` are alive
        // for the call, the stream is the driver's own. The code handle is
        // exactly what this wrapper does not check — the fake validates
        // its own program table, so a stale value is at worst another
        // program, never undefined behaviour.
        let rc = unsafe {
            launch(
                h(code.raw()),
                0,
                block_dim,
                &raw mut ex,
                std::ptr::null_mut(),
                h(s.raw()),
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "the runtime launched whatever the handle names now");
        Ok(())
    }
}

/// Publishes `x` then `y` through a pin-dropping driver: registering `y`
/// lets `x`'s registration go, and the runtime hands `y` the same handle
/// value `x` had. Returns what running `x` did.
fn run_x_after_y(unchecked: bool) -> Result<Vec<u32>, runclaim::Error> {
    let unchecked = unchecked.then(|| {
        // SAFETY: the workspace's own fake library (already loaded by the
        // driver, never unloaded); the type matches rtKernelLaunchWithHandleV2.
        unsafe {
            let l = libloading::Library::new(lib_path("fake_acl").as_os_str()).unwrap();
            let f = *l.get::<RawLaunch>("rtKernelLaunchWithHandleV2").unwrap();
            std::mem::forget(l);
            f
        }
    });
    let inner = FakeAcl::new(open(&sim(16), false));
    let mut dev = device(Tamper { inner, unchecked });
    let y = Callable::program("y", &Program::new().mul(7));
    let runner = dev.publish(&[x(), y]).unwrap();
    let (cx, cy) = (runner.code("x").unwrap(), runner.code("y").unwrap());
    assert_eq!(
        cx.handle().raw(),
        cy.handle().raw(),
        "the runtime reused x's released handle for y"
    );
    assert_ne!(cx.handle().upload(), cy.handle().upload());
    let mut out = Outputs::<0>::new(8);
    runner.run_serial(
        runner.take_slot::<0>().unwrap(),
        RunSpec::new(cx, Input::Host(&INPUT)),
        &mut out,
    )?;
    Ok(out.values().to_vec())
}

#[test]
fn negative_control_without_the_check_a_wrong_program_runs_and_the_values_say_so() {
    let expected_x = vec![1001, 1002, 1003];
    // The check disabled: x's launch runs y — in the same time, without an
    // error. Only the value check catches it.
    let got = run_x_after_y(true).expect("nothing reports the wrong program");
    assert_ne!(got, expected_x, "the value check catches the wrong program");
    assert_eq!(got, [7, 14, 21], "it ran y");
    // The check enabled, pins still dropped: the launch is refused — an
    // error, never a wrong value.
    let err = run_x_after_y(false).unwrap_err();
    let driver = err.kind().driver_error().expect("a driver error");
    assert!(
        matches!(
            driver.kind(),
            DriverErrorKind::BadHandle {
                kind: HandleKind::Code,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        driver.native().is_none(),
        "refused before the runtime: {err}"
    );
}

// ----- what the negative control relies on -----------------------------------

/// `rtDevBinary_t`, the test's own mirror.
#[repr(C)]
struct RawDevBinary {
    magic: u32,
    version: u32,
    data: *const c_void,
    length: u64,
}

type RawRegister = unsafe extern "C" fn(*const RawDevBinary, *mut *mut c_void) -> i32;
type RawUnregister = unsafe extern "C" fn(*mut c_void) -> i32;

/// A C symbol of the full fake library (loaded by the drivers already,
/// never unloaded).
fn raw_symbol<T: Copy>(name: &str) -> T {
    // SAFETY: the workspace's own fake library; callers name the type of the
    // symbol's C prototype. The library stays loaded for the process (the
    // driver keeps it), so the copied pointer stays valid.
    unsafe {
        let l = libloading::Library::new(lib_path("fake_acl").as_os_str()).unwrap();
        let f = *l.get::<T>(name).unwrap();
        std::mem::forget(l);
        f
    }
}

#[test]
fn a_freed_program_handle_is_the_next_one_its_device_hands_out_whatever_other_devices_register() {
    // The interleaving that made the negative control flaky, made on
    // purpose: between device A's unregistration and its next registration,
    // device B registers code. B must not take the handle A freed.
    let register: RawRegister = raw_symbol("rtRegisterAllKernel");
    let unregister: RawUnregister = raw_symbol("rtDevBinaryUnRegister");
    let image = Program::new().add(1).encode();
    let bin = RawDevBinary {
        magic: runclaim::driver::acl::RT_DEV_BINARY_MAGIC_ELF,
        version: 0,
        data: image.as_ptr().cast(),
        length: image.len() as u64,
    };
    let reg = || {
        let mut h = std::ptr::null_mut();
        // SAFETY: `bin` describes `image`, alive for the call; `h` is a valid
        // out-pointer; the thread is bound to a device (below).
        assert_eq!(unsafe { register(&raw const bin, &raw mut h) }, 0);
        h
    };
    let a = open(&sim(16), false);
    let b = open(&sim(16), false);
    // Each driver call makes its own device current on this thread.
    let on_a = || a.free(a.alloc(8).unwrap()).unwrap();
    let on_b = || b.free(b.alloc(8).unwrap()).unwrap();
    on_a();
    let first = reg();
    // SAFETY: a live registration of this runtime, unregistered once.
    assert_eq!(unsafe { unregister(first) }, 0);
    on_b();
    let other = reg();
    on_a();
    let again = reg();
    assert_eq!(again, first, "device A handed out the handle it freed");
    assert_ne!(other, first, "device B has handles of its own");
    // SAFETY: live registrations, each unregistered once.
    unsafe {
        assert_eq!(unregister(again), 0);
        on_b();
        assert_eq!(unregister(other), 0);
    }
}
