//! The exported C symbols. Each is a thin shim: check pointers, find the
//! calling thread's device, call the simulator, map its error back to the
//! ACL code the real runtime would return (runclaim's own table, so the two
//! directions cannot drift apart), and remember the message for
//! `aclGetRecentErrMsg`.
//!
//! Where the real runtime is stricter or different than the simulator, the
//! fake models the runtime (acl-abi-audit, unsafe-audit):
//!
//! - **Device references.** Every `aclrtSetDevice` takes a reference,
//!   every `aclrtResetDevice` drops one; at 0 the device is released: its
//!   simulator is dropped (a real-time device thread is joined), its streams,
//!   events and memory are gone, and its final counters and trace stay
//!   readable through the control API. A device's simulator is created at
//!   its first `aclrtSetDevice`.
//! - **Contexts.** `aclrtGetCurrentContext` / `aclrtSetCurrentContext`
//!   switch a thread between devices without taking a reference. Stream and
//!   event handles carry their device: a stream of another device than the
//!   thread's is refused with 107003 ("stream not in current context").
//! - **Events.** `aclrtCreateEventExWithFlag` events report complete before
//!   their first record (the simulator's behaviour). `aclrtCreateEventWithFlag`
//!   ("old mode") events report *not ready* until recorded, a timed sync on
//!   one times out, and a stream wait on one queues a device wait that
//!   nothing satisfies (the stream stalls until the device watchdog faults
//!   it).
//! - **Zero timeouts.** `aclrtSynchronize*WithTimeout(x, 0)` returns 107000.
//! - **Programs.** Each `rtRegisterAllKernel` returns a distinct handle that
//!   holds (pins) its code until `rtDevBinaryUnRegister`; a handle value may
//!   be reused after unregistration, as a freed runtime object's address can
//!   be. Each device has its own registration table, as it has its own code
//!   memory: the handles a device hands out depend only on what was
//!   registered and unregistered on that device, never on what another
//!   device (another test) does meanwhile. When every code slot is held,
//!   registration fails with 507032 (`ACL_ERROR_RT_PROGRAM_USE_OUT`).
//! - **Bounds.** A synchronous device-to-device copy is checked against the
//!   device's memory size before the fake stages it; `count > destMax` is
//!   refused as the runtime does. The fake records each memory call's
//!   `destMax` / `count` for tests.
//!
//! Nothing here panics on bad input or during thread teardown.

#![allow(
    clippy::missing_safety_doc,
    reason = "C entry points; the safety contract is the ACL API's"
)]

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::ptr::without_provenance_mut;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use runclaim::driver::acl::RT_DEV_BINARY_MAGIC_ELF;
use runclaim::driver::acl::codes::{
    ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_PARAM_INVALID, code_of,
};
use runclaim::driver::{
    CodeHandle, Completion, DevPtr, Driver, DriverError, DriverErrorKind, EventId, HandleKind, Op,
    StreamId,
};
use runclaim::sim::{Fault, SimConfig, SimDriver};

use super::control::{
    FakeConfig, FakeRuntime, FakeStats, FakeTraceEntry, INJECT_CODE, INJECT_ELAPSED, decode_fault,
    encode_trace,
};

const PARAM_INVALID: c_int = ACL_ERROR_RT_PARAM_INVALID;
const CONTEXT_NULL: c_int = ACL_ERROR_RT_CONTEXT_NULL;
/// The AICPU Run kernel's name in the fake op-info binary.
const AICPU_FUNCTION: &CStr = c"runclaim_aicpu_run";
/// The ACL version the fake reports unless a test overrides it.
#[cfg(feature = "optional-symbols")]
const FAKE_VERSION: (i32, i32, i32) = (1, 17, 0);
/// Program handles: `PROGRAM_TAG | device << 16 | index`, the index into
/// the device's own registration table.
const PROGRAM_TAG: u64 = 0x5eed << 48;
/// Live registrations a device's table can hold.
const PROGRAMS_PER_DEVICE: usize = 1 << 16;
/// Context handles: `CONTEXT_TAG | device`.
#[cfg(feature = "optional-symbols")]
const CONTEXT_TAG: u64 = 0x7c7c_0000_0000_0000;

struct Dev {
    sim: SimDriver,
    /// Fake-level code injections: (calls still to pass, code).
    codes: Vec<(u64, c_int)>,
    /// Old-mode events (simulator ids) not recorded yet.
    unrecorded: BTreeSet<u64>,
    /// A simulator event whose record never completes: what an old-mode
    /// wait on a never-recorded event waits for.
    #[cfg_attr(
        feature = "omit-required",
        allow(dead_code, reason = "used by the symbol the incomplete variant omits")
    )]
    limbo: Option<EventId>,
    /// The next elapsed time to report instead of the simulator's.
    elapsed: Option<f32>,
}

/// What is left of a released device: its last counters, trace and clock.
struct Retired {
    stats: FakeStats,
    trace: Vec<FakeTraceEntry>,
    clock_ns: u64,
}

/// One `rtRegisterAllKernel` registration: the simulator code it pins.
type Program = CodeHandle;

struct State {
    devices: BTreeMap<i32, Dev>,
    configs: BTreeMap<i32, FakeConfig>,
    runtime: BTreeMap<i32, FakeRuntime>,
    retired: BTreeMap<i32, Retired>,
    /// Each device's registrations by index; `None` = free (reused lowest
    /// first). A device's table outlives its reset, as the programs do.
    programs: BTreeMap<i32, Vec<Option<Program>>>,
    inits: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    devices: BTreeMap::new(),
    configs: BTreeMap::new(),
    runtime: BTreeMap::new(),
    retired: BTreeMap::new(),
    programs: BTreeMap::new(),
    inits: 0,
});

thread_local! {
    static CURRENT: Cell<Option<i32>> = const { Cell::new(None) };
    /// The message of the last failure on this thread, not yet fetched.
    static PENDING: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// The message last returned by aclGetRecentErrMsg (kept alive).
    #[cfg(feature = "optional-symbols")]
    static RETURNED: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// A test's override of what aclrtGetVersion reports on this thread.
    #[cfg(feature = "optional-symbols")]
    static VERSION: Cell<Option<(i32, i32, i32)>> = const { Cell::new(None) };
}

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn current() -> Option<i32> {
    // A `const` Cell without a destructor: readable during teardown too.
    CURRENT.try_with(Cell::get).ok().flatten()
}

fn set_current(device: Option<i32>) {
    let _ = CURRENT.try_with(|c| c.set(device));
}

/// Remembers `m` for `aclGetRecentErrMsg`. During thread teardown, once the
/// message slot is gone, the message is dropped (never a panic).
fn set_message(m: &str) {
    let c = CString::new(m.replace('\0', " ")).unwrap_or_default();
    let _ = PENDING.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            *p = Some(c);
        }
    });
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

fn new_dev(cfg: Option<&FakeConfig>) -> Dev {
    Dev {
        sim: new_sim(cfg),
        codes: Vec::new(),
        unrecorded: BTreeSet::new(),
        limbo: None,
        elapsed: None,
    }
}

/// The byte C's memset stores: the value converted to `unsigned char`.
fn memset_byte(value: i32) -> u8 {
    value.to_le_bytes()[0]
}

fn opaque(v: u64) -> *mut c_void {
    without_provenance_mut(usize::try_from(v).unwrap_or(usize::MAX))
}

fn tag(device: i32) -> u64 {
    u64::from(device.cast_unsigned()) + 1
}

/// A simulator stream or event id as a handle of `device`.
fn export(device: i32, id: u64) -> *mut c_void {
    opaque((tag(device) << 32) | (id & 0xffff_ffff))
}

/// The simulator id inside a handle, if the handle belongs to `device`.
fn import(device: i32, p: *mut c_void) -> Option<u64> {
    let raw = p.addr() as u64;
    (raw >> 32 == tag(device)).then_some(raw & 0xffff_ffff)
}

fn stream_of(device: i32, op: Op, p: *mut c_void) -> Result<StreamId, DriverError> {
    match import(device, p) {
        Some(id) => Ok(StreamId::from_raw(id)),
        // A handle of another device: not in the thread's context.
        None if p.addr() as u64 >> 32 != 0 => {
            Err(DriverError::new(op, DriverErrorKind::ContextMismatch))
        }
        None => Err(DriverError::new(
            op,
            DriverErrorKind::BadHandle {
                kind: HandleKind::Stream,
                raw: p.addr() as u64,
            },
        )),
    }
}

fn event_of(device: i32, op: Op, p: *mut c_void) -> Result<EventId, DriverError> {
    import(device, p)
        .map(EventId::from_raw)
        .ok_or(DriverError::new(
            op,
            DriverErrorKind::BadHandle {
                kind: HandleKind::Event,
                raw: p.addr() as u64,
            },
        ))
}

fn dev_ptr(p: *const c_void) -> DevPtr {
    DevPtr::from_raw(p.addr() as u64)
}

fn runtime(st: &mut State, device: i32) -> &mut FakeRuntime {
    st.runtime.entry(device).or_default()
}

/// The calling thread's device (the injection countdowns advance here).
fn enter() -> Result<(i32, SimDriver), c_int> {
    let Some(id) = current() else {
        set_message("no device is bound to this thread (call aclrtSetDevice first)");
        return Err(CONTEXT_NULL);
    };
    let mut st = state();
    runtime(&mut st, id).calls += 1;
    let Some(dev) = st.devices.get_mut(&id) else {
        set_message(&format!("device {id} was reset"));
        return Err(CONTEXT_NULL);
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
        return Err(code);
    }
    Ok((id, dev.sim.clone()))
}

/// Runs `f` on the calling thread's device, mapping the result to a code.
fn call(is_event: bool, f: impl FnOnce(i32, &SimDriver) -> Result<(), DriverError>) -> c_int {
    let (id, sim) = match enter() {
        Ok(x) => x,
        Err(code) => return code,
    };
    match f(id, &sim) {
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
    f: impl FnOnce(i32, &SimDriver) -> Result<T, DriverError>,
) -> c_int {
    if out.is_null() {
        set_message("NULL out-pointer");
        return PARAM_INVALID;
    }
    call(is_event, |id, sim| {
        let v = f(id, sim)?;
        // SAFETY: `out` is non-NULL (checked above) and, per the ACL API,
        // points at writable storage for one `T`.
        unsafe { out.write(v) };
        Ok(())
    })
}

/// Host bytes at `p`, or `None` for NULL or a length no slice can have.
///
/// # Safety
/// A non-NULL `p` must be readable for `len` bytes for `'a`.
unsafe fn host<'a>(p: *const c_void, len: usize) -> Option<&'a [u8]> {
    if p.is_null() || isize::try_from(len).is_err() {
        return None;
    }
    // SAFETY: forwarded to the caller; non-NULL, `len` ≤ isize::MAX.
    Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// Runs `f` on the device's fake-level record, if the device is live.
fn with_dev<R>(device: i32, f: impl FnOnce(&mut Dev) -> R) -> Option<R> {
    state().devices.get_mut(&device).map(f)
}

fn note(device: i32, f: impl FnOnce(&mut FakeRuntime)) {
    f(runtime(&mut state(), device));
}

/// Releases `device`: snapshots it, drops its simulator (joining a
/// real-time device thread once the last clone is gone) outside the lock.
fn release(st: &mut State, device: i32) -> Option<Dev> {
    let dev = st.devices.remove(&device)?;
    let trace = dev.sim.trace().iter().map(encode_trace).collect();
    st.retired.insert(
        device,
        Retired {
            stats: FakeStats::from_sim(&dev.sim.stats()),
            trace,
            clock_ns: u64::try_from(dev.sim.clock().as_nanos()).unwrap_or(u64::MAX),
        },
    );
    let rt = runtime(st, device);
    rt.releases += 1;
    rt.live = 0;
    Some(dev)
}

// ----- acl* ------------------------------------------------------------------

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInit(_config: *const c_char) -> c_int {
    let mut st = state();
    st.inits += 1;
    if st.inits > 1 {
        ACL_ERROR_REPEAT_INITIALIZE
    } else {
        0
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetDevice(device: i32) -> c_int {
    let mut st = state();
    if !st.devices.contains_key(&device) {
        let dev = new_dev(st.configs.get(&device));
        st.devices.insert(device, dev);
        st.retired.remove(&device);
    }
    let rt = runtime(&mut st, device);
    rt.set_device += 1;
    rt.live = 1;
    drop(st);
    set_current(Some(device));
    0
}

/// Drops one reference; the last one releases the device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtResetDevice(device: i32) -> c_int {
    let mut st = state();
    let rt = runtime(&mut st, device);
    if rt.reset_device >= rt.set_device {
        rt.unbalanced_resets += 1;
        return 0;
    }
    rt.reset_device += 1;
    let last = rt.reset_device == rt.set_device;
    let released = if last { release(&mut st, device) } else { None };
    drop(st);
    if last && current() == Some(device) {
        set_current(None);
    }
    // Dropped here, outside the lock: joins a real-time device thread.
    drop(released);
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMalloc(ptr: *mut *mut c_void, size: usize, _policy: u32) -> c_int {
    // SAFETY: `ptr` is the caller's out-pointer (ACL contract).
    unsafe { call_out(ptr, false, |_, s| s.alloc(size).map(|p| opaque(p.raw()))) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFree(ptr: *mut c_void) -> c_int {
    call(false, |_, s| s.free(dev_ptr(ptr)))
}

fn note_mem(api: u64, dest_max: usize, count: usize) {
    if let Some(id) = current() {
        note(id, |rt| {
            rt.last_mem_api = api;
            rt.last_dest_max = dest_max as u64;
            rt.last_count = count as u64;
        });
    }
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
    note_mem(1, dest_max, count);
    if count == 0 {
        return 0;
    }
    if count > dest_max || dst.is_null() || src.is_null() {
        set_message("bad memcpy arguments (count above destMax, or a NULL pointer)");
        return PARAM_INVALID;
    }
    if isize::try_from(count).is_err() {
        set_message("memcpy count above isize::MAX");
        return PARAM_INVALID;
    }
    call(false, |_, s| match kind {
        1 => {
            // SAFETY: host source readable for `count` bytes (ACL contract);
            // NULL and over-long lengths refused above.
            let data = unsafe { host(src, count) }.unwrap_or_default();
            s.copy_to_device(dev_ptr(dst), data)
        }
        2 => {
            // SAFETY: host destination writable for `count` <= destMax bytes
            // (ACL contract); NULL and over-long lengths refused above.
            let out = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), count) };
            s.copy_from_device(out, dev_ptr(src))
        }
        3 => {
            // Staged through the host: never more than the device holds, and
            // a staging buffer that cannot be had is an error, not an abort.
            let too_big = DriverError::new(
                Op::CopyAsync,
                DriverErrorKind::BadAddress {
                    addr: src.addr() as u64,
                    len: count as u64,
                },
            );
            if count as u64 > s.config().memory_bytes {
                return Err(too_big);
            }
            let mut tmp = Vec::new();
            if tmp.try_reserve_exact(count).is_err() {
                return Err(DriverError::new(
                    Op::CopyAsync,
                    DriverErrorKind::OutOfMemory {
                        bytes: count as u64,
                    },
                ));
            }
            tmp.resize(count, 0);
            s.copy_from_device(&mut tmp, dev_ptr(src))?;
            s.copy_to_device(dev_ptr(dst), &tmp)
        }
        _ => Err(DriverError::new(
            Op::CopyToDevice,
            DriverErrorKind::InvalidArgument {
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
    note_mem(2, dest_max, count);
    if kind != 3 || count > dest_max {
        set_message("the fake supports device-to-device async copies within destMax only");
        return PARAM_INVALID;
    }
    call(false, |id, s| {
        s.copy_async(
            stream_of(id, Op::CopyAsync, stm)?,
            dev_ptr(dst),
            dev_ptr(src),
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
    note_mem(3, max, count);
    if count > max {
        set_message("memset count above maxCount");
        return PARAM_INVALID;
    }
    call(false, |_, s| {
        s.memset(dev_ptr(ptr), memset_byte(value), count)
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
    note_mem(4, max, count);
    if count > max {
        set_message("memset count above maxCount");
        return PARAM_INVALID;
    }
    call(false, |id, s| {
        s.memset_async(
            stream_of(id, Op::MemsetAsync, stm)?,
            dev_ptr(ptr),
            memset_byte(value),
            count,
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stm: *mut *mut c_void) -> c_int {
    // SAFETY: `stm` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(stm, false, |id, s| {
            s.create_stream().map(|st| export(id, st.raw()))
        })
    }
}

/// Like the real runtime, destroying a stream with queued work waits for it
/// first. The simulator counts the attempt (`busy_destroy_refused`), so a
/// test still sees that a busy stream reached destroy.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyStream(stm: *mut c_void) -> c_int {
    call(false, |id, s| {
        let st = stream_of(id, Op::DestroyStream, stm)?;
        match s.destroy_stream(st) {
            Err(e) if matches!(e.kind(), DriverErrorKind::StreamBusy { .. }) => {
                s.sync_stream(st, Duration::from_secs(30))?;
                s.destroy_stream(st)
            }
            r => r,
        }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamQuery(stm: *mut c_void, status: *mut u32) -> c_int {
    // SAFETY: `status` is the caller's out-pointer. 0 = COMPLETE, 1 = NOT_READY.
    unsafe {
        call_out(status, false, |id, s| {
            s.query_stream(stream_of(id, Op::QueryStream, stm)?)
                .map(|c| u32::from(c == Completion::NotReady))
        })
    }
}

/// The runtime's reading of a timeout: -1 forever, ≥ 1 ms; 0 and anything
/// below -1 are invalid (the header's "0 = check now" is not what the
/// runtime does).
fn timeout_of(ms: i32) -> Option<Duration> {
    match ms {
        -1 => Some(Duration::from_secs(3600)),
        ms if ms < 1 => None,
        ms => Some(Duration::from_millis(u64::from(ms.unsigned_abs()))),
    }
}

fn refuse_timeout(ms: i32) -> c_int {
    set_message(&format!(
        "timeout {ms} is invalid: -1 (forever) or at least 1 ms"
    ));
    if ms == 0
        && let Some(id) = current()
    {
        note(id, |rt| rt.zero_timeouts += 1);
    }
    PARAM_INVALID
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeStreamWithTimeout(
    stm: *mut c_void,
    timeout: i32,
) -> c_int {
    let Some(t) = timeout_of(timeout) else {
        return refuse_timeout(timeout);
    };
    call(false, |id, s| {
        s.sync_stream(stream_of(id, Op::SyncStream, stm)?, t)
    })
}

/// Old mode: not ready until its first record.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(evt: *mut *mut c_void, _flag: u32) -> c_int {
    // SAFETY: `evt` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(evt, true, |id, s| {
            let e = s.create_event()?;
            with_dev(id, |d| d.unrecorded.insert(e.raw()));
            Ok(export(id, e.raw()))
        })
    }
}

/// New mode: complete before its first record.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(evt: *mut *mut c_void, _flag: u32) -> c_int {
    // SAFETY: `evt` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(evt, true, |id, s| {
            s.create_event().map(|e| export(id, e.raw()))
        })
    }
}

fn unrecorded(device: i32, e: EventId) -> bool {
    with_dev(device, |d| d.unrecorded.contains(&e.raw())).unwrap_or(false)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyEvent(evt: *mut c_void) -> c_int {
    call(true, |id, s| {
        let e = event_of(id, Op::DestroyEvent, evt)?;
        s.destroy_event(e)?;
        with_dev(id, |d| d.unrecorded.remove(&e.raw()));
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRecordEvent(evt: *mut c_void, stm: *mut c_void) -> c_int {
    call(true, |id, s| {
        let e = event_of(id, Op::RecordEvent, evt)?;
        s.record_event(e, stream_of(id, Op::RecordEvent, stm)?)?;
        with_dev(id, |d| d.unrecorded.remove(&e.raw()));
        Ok(())
    })
}

/// The recorded-status enum: `NOT_READY` = 0, `COMPLETE` = 1 (the reverse of
/// the stream status).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryEventStatus(evt: *mut c_void, status: *mut u32) -> c_int {
    // SAFETY: `status` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(status, true, |id, s| {
            let e = event_of(id, Op::QueryEvent, evt)?;
            if unrecorded(id, e) {
                return Ok(0);
            }
            s.query_event(e)
                .map(|c| u32::from(c == Completion::Complete))
        })
    }
}

/// The simulator event a wait on a never-recorded old-mode event waits
/// for: recorded once, with the simulator's "never completes" fault armed
/// for exactly that record, on a stream of its own.
#[cfg_attr(
    feature = "omit-required",
    allow(dead_code, reason = "used by the symbol the incomplete variant omits")
)]
fn limbo(device: i32, s: &SimDriver) -> Result<EventId, DriverError> {
    if let Some(Some(e)) = with_dev(device, |d| d.limbo) {
        return Ok(e);
    }
    let stream = s.create_stream()?;
    let e = s.create_event()?;
    s.inject(Fault::EventNeverCompletes { nth: 1 });
    s.record_event(e, stream)?;
    with_dev(device, |d| d.limbo = Some(e));
    Ok(e)
}

#[cfg(not(feature = "omit-required"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamWaitEvent(stm: *mut c_void, evt: *mut c_void) -> c_int {
    call(true, |id, s| {
        let st = stream_of(id, Op::StreamWaitEvent, stm)?;
        let e = event_of(id, Op::StreamWaitEvent, evt)?;
        if unrecorded(id, e) {
            // Old mode: the device waits for a record that never comes.
            note(id, |rt| rt.unsatisfiable_waits += 1);
            return s.stream_wait_event(st, limbo(id, s)?);
        }
        s.stream_wait_event(st, e)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> c_int {
    // SAFETY: `ms` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(ms, true, |id, s| {
            let (a, b) = (
                event_of(id, Op::EventElapsed, start)?,
                event_of(id, Op::EventElapsed, end)?,
            );
            let d = s.event_elapsed(a, b)?;
            let injected = with_dev(id, |dev| dev.elapsed.take()).flatten();
            Ok(injected.unwrap_or(d.as_secs_f32() * 1000.0))
        })
    }
}

// ----- optional acl* -----------------------------------------------------------

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeEventWithTimeout(evt: *mut c_void, timeout: i32) -> c_int {
    let Some(t) = timeout_of(timeout) else {
        return refuse_timeout(timeout);
    };
    call(true, |id, s| {
        let e = event_of(id, Op::SyncEvent, evt)?;
        if unrecorded(id, e) {
            // Never completes: the wait runs out.
            return Err(DriverError::new(
                Op::SyncEvent,
                DriverErrorKind::Timeout { waited: t },
            ));
        }
        s.sync_event(e, t)
    })
}

/// Device uptime in µs.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventGetTimestamp(evt: *mut c_void, ts: *mut u64) -> c_int {
    use runclaim::driver::abi::TICKS_PER_SEC;
    // SAFETY: `ts` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(ts, true, |id, s| {
            s.event_timestamp(event_of(id, Op::EventTimestamp, evt)?)
                .map(|ticks| ticks / (TICKS_PER_SEC / 1_000_000))
        })
    }
}

/// Returns and clears this thread's last error message; the pointer stays
/// valid until the next call on this thread. NULL when there is none — and
/// during thread teardown, once the thread's message slots are gone.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    let msg = PENDING
        .try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.take()))
        .ok()
        .flatten();
    RETURNED
        .try_with(|r| match r.try_borrow_mut() {
            Ok(mut r) => {
                *r = msg;
                r.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
            }
            Err(_) => std::ptr::null(),
        })
        .unwrap_or(std::ptr::null())
}

/// The simulated device's watchdog is fixed at configuration; report it as
/// what the device applied (the real device floors the request too).
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetOpExecuteTimeOutV2(_timeout_us: u64, actual: *mut u64) -> c_int {
    // SAFETY: `actual` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(actual, false, |_, s| {
            Ok(s.info()
                .watchdog
                .map_or(0, |w| u64::try_from(w.as_micros()).unwrap_or(u64::MAX)))
        })
    }
}

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyStreamForce(stm: *mut c_void) -> c_int {
    call(false, |id, s| {
        s.destroy_stream(stream_of(id, Op::DestroyStream, stm)?)
    })
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

/// The ACL version: 1.17.0, or what `runclaim_fake_set_version` set on
/// this thread.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetVersion(
    major: *mut i32,
    minor: *mut i32,
    patch: *mut i32,
) -> c_int {
    if major.is_null() || minor.is_null() || patch.is_null() {
        set_message("NULL out-pointer");
        return PARAM_INVALID;
    }
    let (a, b, c) = VERSION
        .try_with(Cell::get)
        .ok()
        .flatten()
        .unwrap_or(FAKE_VERSION);
    // SAFETY: three non-NULL out-pointers from the caller (ACL contract).
    unsafe {
        major.write(a);
        minor.write(b);
        patch.write(c);
    }
    0
}

/// The calling thread's context: its device's default context.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetCurrentContext(ctx: *mut *mut c_void) -> c_int {
    if ctx.is_null() {
        set_message("NULL out-pointer");
        return PARAM_INVALID;
    }
    let Some(id) = current() else {
        set_message("no context is current on this thread");
        return CONTEXT_NULL;
    };
    // SAFETY: non-NULL out-pointer from the caller (ACL contract).
    unsafe { ctx.write(opaque(CONTEXT_TAG | u64::from(id.cast_unsigned()))) };
    0
}

/// Makes a context current; its device must not have been reset.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetCurrentContext(ctx: *mut c_void) -> c_int {
    let raw = ctx.addr() as u64;
    if raw & CONTEXT_TAG != CONTEXT_TAG {
        set_message("not a context handle");
        return PARAM_INVALID;
    }
    let id = u32::try_from(raw & 0xffff_ffff).unwrap_or(0).cast_signed();
    let mut st = state();
    if !st.devices.contains_key(&id) {
        drop(st);
        set_message(&format!("the context's device {id} was reset"));
        return PARAM_INVALID;
    }
    runtime(&mut st, id).context_sets += 1;
    drop(st);
    set_current(Some(id));
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

/// Mirrors `rtArgsEx_t`, padding included (as the driver fills it).
#[repr(C)]
pub struct ArgsEx {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    args_size: u32,
    tiling_addr_offset: u32,
    tiling_data_offset: u32,
    host_input_info_num: u16,
    has_tiling: u8,
    is_no_need_h2d_copy: u8,
    reserved: [u8; 4],
    pad: [u8; 4],
}

/// Mirrors `rtCpuKernelArgs_t`, padding included.
#[repr(C)]
pub struct CpuKernelArgs {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    kernel_offset_info_ptr: *mut c_void,
    args_size: u32,
    host_input_info_num: u16,
    kernel_offset_info_num: u16,
    so_name_addr_offset: u32,
    kernel_name_addr_offset: u32,
    is_no_need_h2d_copy: u8,
    pad0: u8,
    timeout: u16,
    reserved: u8,
    pad1: [u8; 3],
    cpu_param_head_offset: usize,
    rsv: [u32; 4],
}

const _: () = assert!(std::mem::size_of::<ArgsEx>() == 40);
const _: () = assert!(std::mem::size_of::<CpuKernelArgs>() == 72);

fn program_handle(device: i32, index: usize) -> u64 {
    PROGRAM_TAG | (u64::from(device.cast_unsigned()) << 16) | index as u64
}

/// The device and table index a program handle names (whether that entry
/// is live is the table's business).
fn program_slot(raw: u64) -> Option<(i32, usize)> {
    if raw & !((1 << 48) - 1) != PROGRAM_TAG {
        return None;
    }
    let device = u32::try_from((raw >> 16) & 0xffff_ffff).ok()?.cast_signed();
    let index = usize::try_from(raw & 0xffff).ok()?;
    Some((device, index))
}

/// The live registration `raw` names: its device and code.
fn program(raw: u64) -> Option<(i32, Program)> {
    let (device, i) = program_slot(raw)?;
    let code = state().programs.get(&device)?.get(i).copied().flatten()?;
    Some((device, code))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtRegisterAllKernel(
    bin: *const DevBinary,
    handle: *mut *mut c_void,
) -> c_int {
    if bin.is_null() {
        set_message("NULL binary");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtDevBinary_t (rt contract).
    let bin = unsafe { &*bin };
    if bin.magic != RT_DEV_BINARY_MAGIC_ELF {
        set_message(&format!("unsupported binary magic {:#x}", bin.magic));
        return PARAM_INVALID;
    }
    let Ok(len) = usize::try_from(bin.length) else {
        set_message("binary length does not fit the address space");
        return PARAM_INVALID;
    };
    // SAFETY: `data` readable for `length` bytes (rt contract); NULL and
    // over-long lengths refused.
    let Some(code) = (unsafe { host(bin.data, len) }) else {
        set_message("NULL binary data");
        return PARAM_INVALID;
    };
    // SAFETY: `handle` is the caller's out-pointer (rt contract).
    unsafe {
        call_out(handle, false, |id, s| {
            // The registration holds (pins) its code until unregistered; the
            // simulator copies the image.
            let r = s.register_code(code)?;
            let mut st = state();
            let table = st.programs.entry(id).or_default();
            let i = match table.iter().position(Option::is_none) {
                Some(i) => i,
                None if table.len() < PROGRAMS_PER_DEVICE => {
                    table.push(None);
                    table.len() - 1
                }
                None => {
                    drop(st);
                    let _ = s.release_code(r.handle);
                    return Err(DriverError::new(
                        Op::RegisterCode,
                        DriverErrorKind::NoResource {
                            what: "program handle",
                        },
                    ));
                }
            };
            table[i] = Some(r.handle);
            runtime(&mut st, id).programs_registered += 1;
            Ok(opaque(program_handle(id, i)))
        })
    }
}

/// Releases a registration: its code is no longer held (a later
/// registration may replace it), and its handle may be handed out again.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtDevBinaryUnRegister(hdl: *mut c_void) -> c_int {
    let raw = hdl.addr() as u64;
    let mut st = state();
    let taken = program_slot(raw).and_then(|(device, i)| {
        let code = st.programs.get_mut(&device)?.get_mut(i)?.take()?;
        Some((device, code))
    });
    let Some((device, code)) = taken else {
        drop(st);
        set_message(&format!("unknown program handle {raw:#x}"));
        return PARAM_INVALID;
    };
    runtime(&mut st, device).programs_unregistered += 1;
    // Programs outlive a device reset; a released device has no code left.
    let sim = st.devices.get(&device).map(|d| d.sim.clone());
    drop(st);
    if let Some(sim) = sim {
        let _ = sim.release_code(code);
    }
    0
}

/// Counts a launch struct whose reserved or padding bytes are not zero.
fn check_reserved(clean: bool) {
    if !clean && let Some(id) = current() {
        note(id, |rt| rt.dirty_launch_structs += 1);
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
        set_message("NULL argsInfo");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtArgsEx_t (rt contract); the driver
    // initialises every byte (padding is an explicit field there).
    let a = unsafe { &*args };
    check_reserved(
        a.reserved == [0; 4]
            && a.pad == [0; 4]
            && a.host_input_info_ptr.is_null()
            && a.host_input_info_num == 0,
    );
    // SAFETY: `args` readable for `argsSize` bytes (rt contract); NULL refused.
    let Some(blob) = (unsafe { host(a.args, a.args_size as usize) }) else {
        set_message("NULL args");
        return PARAM_INVALID;
    };
    let Some((device, code)) = program(hdl.addr() as u64) else {
        set_message(&format!(
            "unknown or unregistered program handle {:#x}",
            hdl.addr()
        ));
        return PARAM_INVALID;
    };
    call(false, |id, s| {
        if device != id {
            return Err(DriverError::new(
                Op::LaunchAicore,
                DriverErrorKind::InvalidArgument {
                    what: "the program was registered on another device (a fake limitation)",
                },
            ));
        }
        s.launch_aicore(stream_of(id, Op::LaunchAicore, stm)?, code, block_dim, blob)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsBinaryLoadFromFile(
    path: *const c_char,
    _cfg: *const c_void,
    handle: *mut *mut c_void,
) -> c_int {
    if path.is_null() || handle.is_null() {
        set_message("NULL argument");
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
        set_message("NULL argument");
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
        set_message("NULL argsInfo");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtCpuKernelArgs_t (rt contract); the
    // driver initialises every byte (padding is an explicit field there).
    let a = unsafe { &*args };
    check_reserved(
        a.pad0 == 0
            && a.reserved == 0
            && a.pad1 == [0; 3]
            && a.rsv == [0; 4]
            && a.cpu_param_head_offset == 0
            && a.host_input_info_ptr.is_null()
            && a.kernel_offset_info_ptr.is_null()
            && a.host_input_info_num == 0
            && a.kernel_offset_info_num == 0
            && a.so_name_addr_offset == 0
            && a.kernel_name_addr_offset == 0
            && a.is_no_need_h2d_copy == 0
            && a.timeout == 0,
    );
    // SAFETY: `args` readable for `argsSize` bytes (rt contract); NULL refused.
    let Some(blob) = (unsafe { host(a.args, a.args_size as usize) }) else {
        set_message("NULL args");
        return PARAM_INVALID;
    };
    call(false, |id, s| {
        s.launch_aicpu(stream_of(id, Op::LaunchAicpu, stm)?, blob)
    })
}

// ----- test control ----------------------------------------------------------

/// Configures device `device` afresh: a live device gets a new simulator at
/// once (keeping its references); otherwise the configuration applies at
/// the device's next `aclrtSetDevice`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_configure(device: i32, cfg: *const FakeConfig) -> c_int {
    if cfg.is_null() {
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at a FakeConfig (control contract).
    let cfg = unsafe { *cfg };
    let mut st = state();
    st.configs.insert(device, cfg);
    st.retired.remove(&device);
    let old = if let Some(dev) = st.devices.get_mut(&device) {
        Some(std::mem::replace(dev, new_dev(Some(&cfg))))
    } else {
        st.runtime.remove(&device);
        None
    };
    drop(st);
    drop(old);
    0
}

/// Releases device `device` now, whatever its references: its simulator is
/// dropped (a real-time device thread joined); counters and trace stay
/// readable. 0, or 107002 when the device is not live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_release(device: i32) -> c_int {
    let released = release(&mut state(), device);
    if released.is_none() {
        return CONTEXT_NULL;
    }
    drop(released);
    0
}

/// Arms a simulator fault, or (kind [`INJECT_CODE`]) makes the `nth` ACL
/// call on the device return `arg` as its code, or (kind
/// [`INJECT_ELAPSED`]) makes the next elapsed time the `f32` of bits `arg`.
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
    match kind {
        INJECT_CODE => {
            dev.codes
                .push((nth.max(1), c_int::try_from(arg).unwrap_or(c_int::MAX)));
            return 0;
        }
        INJECT_ELAPSED => {
            dev.elapsed = Some(f32::from_bits(u32::try_from(arg).unwrap_or(0)));
            return 0;
        }
        _ => {}
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
    if out.is_null() {
        return PARAM_INVALID;
    }
    let st = state();
    let stats = match (st.devices.get(&device), st.retired.get(&device)) {
        (Some(dev), _) => FakeStats::from_sim(&dev.sim.stats()),
        (None, Some(r)) => r.stats,
        (None, None) => return CONTEXT_NULL,
    };
    // SAFETY: non-NULL out-pointer (control contract).
    unsafe { out.write(stats) };
    0
}

/// What the fake runtime observed on `device` ([`FakeRuntime`]); zeros for a
/// device it never saw.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_runtime(device: i32, out: *mut FakeRuntime) -> c_int {
    if out.is_null() {
        return PARAM_INVALID;
    }
    let rt = state().runtime.get(&device).copied().unwrap_or_default();
    // SAFETY: non-NULL out-pointer (control contract).
    unsafe { out.write(rt) };
    0
}

/// Makes `aclrtGetVersion` report `major.minor.patch` on the calling thread
/// (a negative `major` restores the default, 1.17.0).
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_set_version(major: i32, minor: i32, patch: i32) -> c_int {
    let v = (major >= 0).then_some((major, minor, patch));
    let _ = VERSION.try_with(|c| c.set(v));
    0
}

/// The device's clock in nanoseconds (`Driver::clock` of its simulator:
/// virtual time in stepped mode), for a test driver that must judge waits on
/// the fake device's own clock. A released device reports its last clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_clock(device: i32, out_ns: *mut u64) -> c_int {
    if out_ns.is_null() {
        return PARAM_INVALID;
    }
    let sim = {
        let st = state();
        match (st.devices.get(&device), st.retired.get(&device)) {
            (Some(dev), _) => dev.sim.clone(),
            (None, Some(r)) => {
                // SAFETY: non-NULL out-pointer (control contract).
                unsafe { out_ns.write(r.clock_ns) };
                return 0;
            }
            (None, None) => return CONTEXT_NULL,
        }
    };
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
    if out.is_null() {
        return -1;
    }
    let st = state();
    let trace: Vec<FakeTraceEntry> = match (st.devices.get(&device), st.retired.get(&device)) {
        (Some(dev), _) => dev.sim.trace().iter().map(encode_trace).collect(),
        (None, Some(r)) => r.trace.clone(),
        (None, None) => return -1,
    };
    drop(st);
    let n = trace.len().min(cap);
    for (i, t) in trace.into_iter().take(n).enumerate() {
        // SAFETY: `out` is writable for `cap` entries (control contract) and
        // `i < n <= cap`.
        unsafe { out.add(i).write(t) };
    }
    isize::try_from(n).unwrap_or(-1)
}
