//! Devices and what binds a thread to one: `aclInit` /
//! `aclFinalizeReference`, `aclrtSetDevice` / `aclrtResetDevice` (device
//! references), `aclrtGetCurrentContext` / `aclrtSetCurrentContext`,
//! `aclrtGetVersion`, `aclGetRecentErrMsg` and the op watchdog.

#[cfg(feature = "optional-symbols")]
use std::cell::Cell;
#[cfg(feature = "optional-symbols")]
use std::ffi::c_void;
use std::ffi::{c_char, c_int};

#[cfg(feature = "optional-symbols")]
use runclaim::driver::Driver;
use runclaim::driver::acl::codes::AclError;
#[cfg(feature = "optional-symbols")]
use runclaim::driver::acl::codes::Waited;

#[cfg(feature = "optional-symbols")]
use super::shim::{call_out, opaque};
#[cfg(feature = "optional-symbols")]
use super::{CONTEXT_NULL, PARAM_INVALID, PENDING, RETURNED, VERSION, set_message};
use super::{current, new_dev, release, runtime, set_current, state};

/// The ACL version the fake reports unless a test overrides it.
#[cfg(feature = "optional-symbols")]
const FAKE_VERSION: (i32, i32, i32) = (1, 17, 0);
/// Context handles: `CONTEXT_TAG | device`.
#[cfg(feature = "optional-symbols")]
const CONTEXT_TAG: u64 = 0x7c7c_0000_0000_0000;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInit(_config: *const c_char) -> c_int {
    let mut st = state();
    st.inits += 1;
    if st.inits > 1 {
        AclError::ACL_ERROR_REPEAT_INITIALIZE
    } else {
        0
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetDevice(device: i32) -> c_int {
    let mut st = state();
    if !st.devices.contains_key(&device) {
        let dev = new_dev(&st, device);
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
        call_out(actual, Waited::Stream, |_, s| {
            Ok(s.info()
                .watchdog
                .map_or(0, |w| u64::try_from(w.as_micros()).unwrap_or(u64::MAX)))
        })
    }
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

/// The device count: the fake accepts any device id, so it reports one
/// more than the highest id configured or live (at least 1).
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> c_int {
    if count.is_null() {
        set_message("NULL out-pointer");
        return PARAM_INVALID;
    }
    let st = state();
    let top = st.devices.keys().chain(st.configs.keys()).max().copied();
    drop(st);
    let n = top.map_or(1, |d| d.saturating_add(1).max(1).cast_unsigned());
    // SAFETY: non-NULL out-pointer from the caller (ACL contract).
    unsafe { count.write(n) };
    0
}

/// The `SoC` name: the fake's own, a static string.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetSocName() -> *const c_char {
    c"fake-acl (runclaim simulator)".as_ptr()
}
