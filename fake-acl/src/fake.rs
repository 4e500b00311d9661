//! The exported C symbols. Each is a thin shim: check pointers, find the
//! calling thread's device, call the simulator, map its error back to the
//! ACL code the real runtime would return (runclaim's own table, so the two
//! directions cannot drift apart), and remember the message for
//! `aclGetRecentErrMsg`.

#![allow(
    clippy::missing_safety_doc,
    reason = "C entry points; the safety contract is the ACL API's"
)]

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr::without_provenance_mut;
use std::sync::Mutex;
use std::time::Duration;

use runclaim::driver::acl::codes::code_of;
use runclaim::driver::{CodeHandle, Completion, DevPtr, Driver, DriverError, EventId, StreamId};
use runclaim::sim::{SimConfig, SimDriver};

use super::control::{
    FakeConfig, FakeStats, FakeTraceEntry, INJECT_CODE, decode_fault, encode_trace,
};

const PARAM_INVALID: c_int = 107_000;
const CONTEXT_NULL: c_int = 107_002;
const REPEAT_INITIALIZE: c_int = 100_002;
const RT_DEV_BINARY_MAGIC_ELF: u32 = 0x4355_4245;
/// The AICPU Run kernel's name in the fake op-info binary.
const AICPU_FUNCTION: &CStr = c"runclaim_aicpu_run";

struct Dev {
    sim: SimDriver,
    /// Fake-level code injections: (calls still to pass, code).
    codes: Vec<(u64, c_int)>,
}

struct State {
    devices: BTreeMap<i32, Dev>,
    configs: BTreeMap<i32, FakeConfig>,
    inits: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    devices: BTreeMap::new(),
    configs: BTreeMap::new(),
    inits: 0,
});

thread_local! {
    static CURRENT: Cell<Option<i32>> = const { Cell::new(None) };
    /// The message of the last failure on this thread, not yet fetched.
    static PENDING: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// The message last returned by aclGetRecentErrMsg (kept alive).
    #[cfg(feature = "optional-symbols")]
    static RETURNED: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn set_message(m: &str) {
    let c = CString::new(m.replace('\0', " ")).unwrap_or_default();
    PENDING.with(|p| *p.borrow_mut() = Some(c));
}

fn new_sim(cfg: Option<&FakeConfig>) -> SimDriver {
    match cfg {
        Some(c) if c.real_time == 1 => SimDriver::real_time(c.to_sim()),
        Some(c) => SimDriver::stepped(c.to_sim()),
        None if std::env::var("RUNCLAIM_FAKE_MODE").as_deref() == Ok("realtime") => {
            SimDriver::real_time(SimConfig::default())
        }
        None => SimDriver::stepped(SimConfig::default()),
    }
}

/// The byte C's memset stores: the value converted to `unsigned char`.
fn memset_byte(value: i32) -> u8 {
    value.to_le_bytes()[0]
}

fn stream(p: *mut c_void) -> StreamId {
    StreamId::from_raw(p.addr() as u64)
}

fn event(p: *mut c_void) -> EventId {
    EventId::from_raw(p.addr() as u64)
}

fn opaque(v: u64) -> *mut c_void {
    without_provenance_mut(usize::try_from(v).unwrap_or(usize::MAX))
}

/// Runs `f` on the calling thread's device, mapping the result to a code.
fn call(is_event: bool, f: impl FnOnce(&SimDriver) -> Result<(), DriverError>) -> c_int {
    let Some(id) = CURRENT.get() else {
        set_message("no device is bound to this thread (call aclrtSetDevice first)");
        return CONTEXT_NULL;
    };
    let sim = {
        let mut st = state();
        let Some(dev) = st.devices.get_mut(&id) else {
            set_message(&format!("device {id} was reset"));
            return CONTEXT_NULL;
        };
        let mut injected = None;
        dev.codes.retain_mut(|(left, code)| {
            *left -= 1;
            if *left == 0 {
                injected.get_or_insert(*code);
                false
            } else {
                true
            }
        });
        if let Some(code) = injected {
            set_message(&format!("injected error code {code}"));
            return code;
        }
        dev.sim.clone()
    };
    match f(&sim) {
        Ok(()) => 0,
        Err(e) => {
            set_message(&e.to_string());
            code_of(e.kind(), is_event)
        }
    }
}

/// `call` with an out-pointer that must not be NULL.
unsafe fn call_out<T>(
    out: *mut T,
    is_event: bool,
    f: impl FnOnce(&SimDriver) -> Result<T, DriverError>,
) -> c_int {
    if out.is_null() {
        set_message("NULL out-pointer");
        return PARAM_INVALID;
    }
    call(is_event, |sim| {
        let v = f(sim)?;
        // SAFETY: `out` is non-NULL (checked above) and, per the ACL API,
        // points at writable storage for one `T`.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// Host bytes at `p`, or `None` for NULL.
///
/// # Safety
/// A non-NULL `p` must be readable for `len` bytes for `'a`.
unsafe fn host<'a>(p: *const c_void, len: usize) -> Option<&'a [u8]> {
    // SAFETY: forwarded to the caller.
    (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

// ----- acl* ------------------------------------------------------------------

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInit(_config: *const c_char) -> c_int {
    let mut st = state();
    st.inits += 1;
    if st.inits > 1 { REPEAT_INITIALIZE } else { 0 }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetDevice(device: i32) -> c_int {
    let mut st = state();
    if !st.devices.contains_key(&device) {
        let sim = new_sim(st.configs.get(&device));
        st.devices.insert(
            device,
            Dev {
                sim,
                codes: Vec::new(),
            },
        );
    }
    CURRENT.set(Some(device));
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtResetDevice(_device: i32) -> c_int {
    // The device stays alive: other threads may still be bound to it.
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMalloc(ptr: *mut *mut c_void, size: usize, _policy: u32) -> c_int {
    // SAFETY: `ptr` is the caller's out-pointer (ACL contract).
    unsafe { call_out(ptr, false, |s| s.alloc(size).map(|p| opaque(p.raw()))) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFree(ptr: *mut c_void) -> c_int {
    call(false, |s| s.free(DevPtr::from_raw(ptr.addr() as u64)))
}

/// Kinds: 0 host→host, 1 host→device, 2 device→host, 3 device→device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
) -> c_int {
    if count == 0 {
        return 0;
    }
    if count > dest_max || dst.is_null() || src.is_null() {
        set_message("bad memcpy arguments");
        return PARAM_INVALID;
    }
    call(false, |s| match kind {
        1 => {
            // SAFETY: host source readable for `count` bytes (ACL contract).
            let data = unsafe { host(src, count) }.unwrap_or_default();
            s.copy_to_device(DevPtr::from_raw(dst.addr() as u64), data)
        }
        2 => {
            // SAFETY: host destination writable for `count` <= destMax bytes.
            let out = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), count) };
            s.copy_from_device(out, DevPtr::from_raw(src.addr() as u64))
        }
        3 => {
            let mut tmp = vec![0u8; count];
            s.copy_from_device(&mut tmp, DevPtr::from_raw(src.addr() as u64))?;
            s.copy_to_device(DevPtr::from_raw(dst.addr() as u64), &tmp)
        }
        _ => Err(DriverError::new(
            runclaim::driver::Op::CopyToDevice,
            runclaim::driver::ErrorKind::InvalidArgument {
                what: "memcpy kind",
            },
        )),
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
    stm: *mut c_void,
) -> c_int {
    if kind != 3 || count > dest_max {
        set_message("the fake supports device-to-device async copies only");
        return PARAM_INVALID;
    }
    call(false, |s| {
        s.copy_async(
            stream(stm),
            DevPtr::from_raw(dst.addr() as u64),
            DevPtr::from_raw(src.addr() as u64),
            count,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemset(
    ptr: *mut c_void,
    max: usize,
    value: i32,
    count: usize,
) -> c_int {
    if count > max {
        return PARAM_INVALID;
    }
    call(false, |s| {
        s.memset(
            DevPtr::from_raw(ptr.addr() as u64),
            memset_byte(value),
            count,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemsetAsync(
    ptr: *mut c_void,
    max: usize,
    value: i32,
    count: usize,
    stm: *mut c_void,
) -> c_int {
    if count > max {
        return PARAM_INVALID;
    }
    call(false, |s| {
        s.memset_async(
            stream(stm),
            DevPtr::from_raw(ptr.addr() as u64),
            memset_byte(value),
            count,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stm: *mut *mut c_void) -> c_int {
    // SAFETY: `stm` is the caller's out-pointer (ACL contract).
    unsafe { call_out(stm, false, |s| s.create_stream().map(|id| opaque(id.raw()))) }
}

/// Like the real runtime, destroying a stream with queued work waits for it
/// first. The simulator counts the attempt (`busy_destroy_refused`), so a
/// test still sees that a busy stream reached destroy.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyStream(stm: *mut c_void) -> c_int {
    call(false, |s| match s.destroy_stream(stream(stm)) {
        Err(e) if matches!(e.kind(), runclaim::driver::ErrorKind::StreamBusy { .. }) => {
            s.sync_stream(stream(stm), Duration::from_secs(30))?;
            s.destroy_stream(stream(stm))
        }
        r => r,
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamQuery(stm: *mut c_void, status: *mut u32) -> c_int {
    // SAFETY: `status` is the caller's out-pointer. 0 = COMPLETE, 1 = NOT_READY.
    unsafe {
        call_out(status, false, |s| {
            s.query_stream(stream(stm))
                .map(|c| u32::from(c == Completion::NotReady))
        })
    }
}

fn timeout_of(ms: i32) -> Option<Duration> {
    match ms {
        -1 => Some(Duration::from_secs(3600)),
        ms if ms < -1 => None,
        ms => Some(Duration::from_millis(u64::from(ms.unsigned_abs()))),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeStreamWithTimeout(
    stm: *mut c_void,
    timeout: i32,
) -> c_int {
    let Some(t) = timeout_of(timeout) else {
        return PARAM_INVALID;
    };
    call(false, |s| s.sync_stream(stream(stm), t))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(evt: *mut *mut c_void, _flag: u32) -> c_int {
    // SAFETY: `evt` is the caller's out-pointer (ACL contract).
    unsafe { call_out(evt, true, |s| s.create_event().map(|id| opaque(id.raw()))) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyEvent(evt: *mut c_void) -> c_int {
    call(true, |s| s.destroy_event(event(evt)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRecordEvent(evt: *mut c_void, stm: *mut c_void) -> c_int {
    call(true, |s| s.record_event(event(evt), stream(stm)))
}

/// The recorded-status enum: `NOT_READY` = 0, `COMPLETE` = 1 (the reverse of
/// the stream status).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryEventStatus(evt: *mut c_void, status: *mut u32) -> c_int {
    // SAFETY: `status` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(status, true, |s| {
            s.query_event(event(evt))
                .map(|c| u32::from(c == Completion::Complete))
        })
    }
}

#[cfg(not(feature = "omit-required"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamWaitEvent(stm: *mut c_void, evt: *mut c_void) -> c_int {
    call(true, |s| s.stream_wait_event(stream(stm), event(evt)))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> c_int {
    // SAFETY: `ms` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(ms, true, |s| {
            s.event_elapsed(event(start), event(end))
                .map(|d| d.as_secs_f32() * 1000.0)
        })
    }
}

// ----- optional acl* -----------------------------------------------------------

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeEventWithTimeout(evt: *mut c_void, timeout: i32) -> c_int {
    let Some(t) = timeout_of(timeout) else {
        return PARAM_INVALID;
    };
    call(true, |s| s.sync_event(event(evt), t))
}

/// Device uptime in µs.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventGetTimestamp(evt: *mut c_void, ts: *mut u64) -> c_int {
    use runclaim::driver::abi::TICKS_PER_SEC;
    // SAFETY: `ts` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(ts, true, |s| {
            s.event_timestamp(event(evt))
                .map(|ticks| ticks / (TICKS_PER_SEC / 1_000_000))
        })
    }
}

/// Returns and clears this thread's last error message; the pointer stays
/// valid until the next call on this thread.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    let msg = PENDING.with(|p| p.borrow_mut().take());
    RETURNED.with(|r| {
        let mut r = r.borrow_mut();
        *r = msg;
        r.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
    })
}

/// The simulated device's watchdog is fixed at configuration; report it as
/// what the device applied (the real device floors the request too).
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetOpExecuteTimeOutV2(_timeout_us: u64, actual: *mut u64) -> c_int {
    // SAFETY: `actual` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(actual, false, |s| {
            Ok(s.info()
                .watchdog
                .map_or(0, |w| u64::try_from(w.as_micros()).unwrap_or(u64::MAX)))
        })
    }
}

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyStreamForce(stm: *mut c_void) -> c_int {
    call(false, |s| s.destroy_stream(stream(stm)))
}

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclFinalizeReference(refs: *mut u64) -> c_int {
    let mut st = state();
    st.inits = st.inits.saturating_sub(1);
    if !refs.is_null() {
        // SAFETY: non-NULL out-pointer from the caller.
        unsafe { refs.write(u64::from(st.inits)) };
    }
    0
}

// ----- rt* / rts* --------------------------------------------------------------

/// Mirrors `rtDevBinary_t`.
#[repr(C)]
pub struct DevBinary {
    magic: u32,
    version: u32,
    data: *const c_void,
    length: u64,
}

/// Mirrors the head of `rtArgsEx_t` (args @0, argsSize @16).
#[repr(C)]
pub struct ArgsEx {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    args_size: u32,
}

/// Mirrors the head of `rtCpuKernelArgs_t` (baseArgs.args @0, argsSize @24).
#[repr(C)]
pub struct CpuKernelArgs {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    kernel_offset_info_ptr: *mut c_void,
    args_size: u32,
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtRegisterAllKernel(
    bin: *const DevBinary,
    handle: *mut *mut c_void,
) -> c_int {
    if bin.is_null() {
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtDevBinary_t (rt contract).
    let bin = unsafe { &*bin };
    if bin.magic != RT_DEV_BINARY_MAGIC_ELF {
        set_message(&format!("unsupported binary magic {:#x}", bin.magic));
        return PARAM_INVALID;
    }
    let Ok(len) = usize::try_from(bin.length) else {
        return PARAM_INVALID;
    };
    // SAFETY: `data` readable for `length` bytes (rt contract); NULL refused.
    let Some(code) = (unsafe { host(bin.data, len) }) else {
        return PARAM_INVALID;
    };
    // SAFETY: `handle` is the caller's out-pointer (rt contract).
    unsafe {
        call_out(handle, false, |s| {
            // This fake does not pin: registered code may be evicted by a
            // later registration, as the simulator's LRU decides.
            let r = s.register_code(code)?;
            s.release_code(r.handle)?;
            Ok(opaque(r.handle.raw()))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtKernelLaunchWithHandleV2(
    hdl: *mut c_void,
    _tiling_key: u64,
    block_dim: u32,
    args: *mut ArgsEx,
    _sm_desc: *mut c_void,
    stm: *mut c_void,
    _cfg: *const c_void,
) -> c_int {
    if args.is_null() {
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtArgsEx_t (rt contract).
    let a = unsafe { &*args };
    // SAFETY: `args` readable for `argsSize` bytes (rt contract); NULL refused.
    let Some(blob) = (unsafe { host(a.args, a.args_size as usize) }) else {
        return PARAM_INVALID;
    };
    call(false, |s| {
        // Whatever is resident at the address now runs.
        let code = s
            .code_at(hdl.addr() as u64)
            .unwrap_or(CodeHandle::from_raw(hdl.addr() as u64, 0));
        s.launch_aicore(stream(stm), code, block_dim, blob)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsBinaryLoadFromFile(
    path: *const c_char,
    _cfg: *const c_void,
    handle: *mut *mut c_void,
) -> c_int {
    if path.is_null() || handle.is_null() {
        return PARAM_INVALID;
    }
    // The fake's op-info binary is any path: there is one AICPU kernel.
    // SAFETY: non-NULL out-pointer (rt contract).
    unsafe { handle.write(opaque(0xb1)) };
    0
}

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsBinaryUnload(_handle: *mut c_void) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsFuncGetByName(
    _bin: *mut c_void,
    name: *const c_char,
    func: *mut *mut c_void,
) -> c_int {
    if name.is_null() || func.is_null() {
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, NUL-terminated (rt contract).
    if unsafe { CStr::from_ptr(name) } != AICPU_FUNCTION {
        set_message("no such AICPU function");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL out-pointer (rt contract).
    unsafe { func.write(opaque(0xf1)) };
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsLaunchCpuKernel(
    _func: *mut c_void,
    _block_dim: u32,
    stm: *mut c_void,
    _cfg: *const c_void,
    args: *mut CpuKernelArgs,
) -> c_int {
    if args.is_null() {
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtCpuKernelArgs_t (rt contract).
    let a = unsafe { &*args };
    // SAFETY: `args` readable for `argsSize` bytes (rt contract); NULL refused.
    let Some(blob) = (unsafe { host(a.args, a.args_size as usize) }) else {
        return PARAM_INVALID;
    };
    call(false, |s| s.launch_aicpu(stream(stm), blob))
}

// ----- test control ----------------------------------------------------------

/// Configures device `device` afresh (any existing one is replaced).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_configure(device: i32, cfg: *const FakeConfig) -> c_int {
    if cfg.is_null() {
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at a FakeConfig (control contract).
    let cfg = unsafe { *cfg };
    let mut st = state();
    st.configs.insert(device, cfg);
    st.devices.insert(
        device,
        Dev {
            sim: new_sim(Some(&cfg)),
            codes: Vec::new(),
        },
    );
    0
}

/// Arms a simulator fault, or (kind [`INJECT_CODE`]) makes the `nth` ACL
/// call on the device return `arg` as its code.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_inject(
    device: i32,
    kind: u32,
    a: u32,
    nth: u64,
    arg: u64,
) -> c_int {
    let mut st = state();
    let Some(dev) = st.devices.get_mut(&device) else {
        return CONTEXT_NULL;
    };
    if kind == INJECT_CODE {
        dev.codes
            .push((nth.max(1), c_int::try_from(arg).unwrap_or(c_int::MAX)));
        return 0;
    }
    match decode_fault(kind, a, nth, arg) {
        Some(f) => {
            dev.sim.inject(f);
            0
        }
        None => PARAM_INVALID,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_stats(device: i32, out: *mut FakeStats) -> c_int {
    let st = state();
    let Some(dev) = st.devices.get(&device) else {
        return CONTEXT_NULL;
    };
    if out.is_null() {
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL out-pointer (control contract).
    unsafe { out.write(FakeStats::from_sim(&dev.sim.stats())) };
    0
}

/// The device's clock in nanoseconds (`Driver::clock` of its simulator:
/// virtual time in stepped mode), for a test driver that must judge waits on
/// the fake device's own clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_clock(device: i32, out_ns: *mut u64) -> c_int {
    let sim = {
        let st = state();
        let Some(dev) = st.devices.get(&device) else {
            return CONTEXT_NULL;
        };
        dev.sim.clone()
    };
    if out_ns.is_null() {
        return PARAM_INVALID;
    }
    let ns = u64::try_from(sim.clock().as_nanos()).unwrap_or(u64::MAX);
    // SAFETY: non-NULL out-pointer (control contract).
    unsafe { out_ns.write(ns) };
    0
}

/// Copies up to `cap` trace entries (oldest first); returns how many, or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_trace(
    device: i32,
    out: *mut FakeTraceEntry,
    cap: usize,
) -> isize {
    let st = state();
    let Some(dev) = st.devices.get(&device) else {
        return -1;
    };
    if out.is_null() {
        return -1;
    }
    let trace = dev.sim.trace();
    let n = trace.len().min(cap);
    for (i, t) in trace.iter().take(n).enumerate() {
        // SAFETY: `out` is writable for `cap` entries (control contract) and
        // `i < n <= cap`.
        unsafe { out.add(i).write(encode_trace(t)) };
    }
    isize::try_from(n).unwrap_or(-1)
}
