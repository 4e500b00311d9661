//! What every entry point is built from: stream and event handles that
//! carry their device, entering the calling thread's device (where injected
//! codes fire), running a simulator call and mapping its error to the ACL
//! code, out-pointers, and host buffers handed in by C.

use std::ffi::{c_int, c_void};
use std::ptr::without_provenance_mut;
use std::sync::Arc;

use runclaim::driver::acl::codes::{Waited, code_of};
use runclaim::driver::{DevPtr, DriverError, DriverErrorKind, EventId, HandleKind, Op, StreamId};
use runclaim::sim::SimDriver;

use super::{CONTEXT_NULL, PARAM_INVALID, current, runtime, set_message, state};

pub(super) fn opaque(v: u64) -> *mut c_void {
    without_provenance_mut(usize::try_from(v).unwrap_or(usize::MAX))
}

pub(super) fn tag(device: i32) -> u64 {
    u64::from(device.cast_unsigned()) + 1
}

/// A simulator stream or event id as a handle of `device`.
pub(super) fn export(device: i32, id: u64) -> *mut c_void {
    opaque((tag(device) << 32) | (id & 0xffff_ffff))
}

/// The simulator id inside a handle, if the handle belongs to `device`.
pub(super) fn import(device: i32, p: *mut c_void) -> Option<u64> {
    let raw = p.addr() as u64;
    (raw >> 32 == tag(device)).then_some(raw & 0xffff_ffff)
}

pub(super) fn stream_of(device: i32, op: Op, p: *mut c_void) -> Result<StreamId, DriverError> {
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

pub(super) fn event_of(device: i32, op: Op, p: *mut c_void) -> Result<EventId, DriverError> {
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

pub(super) fn dev_ptr(p: *const c_void) -> DevPtr {
    DevPtr::from_raw(p.addr() as u64)
}

/// The calling thread's device (the injection countdowns advance here).
pub(super) fn enter() -> Result<(i32, Arc<SimDriver>), c_int> {
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
    Ok((id, Arc::clone(&dev.sim)))
}

/// How an entry point reports a simulator error: the code table's
/// [`code_of`], or a call's own reading where the runtime answers that call
/// otherwise.
pub(super) type Coder = fn(&DriverErrorKind, Waited) -> c_int;

/// Runs `f` on the calling thread's device, mapping the result to a code
/// (a timeout as the sync timeout of what the call waited on).
pub(super) fn call(
    waited: Waited,
    f: impl FnOnce(i32, &SimDriver) -> Result<(), DriverError>,
) -> c_int {
    call_coded(waited, code_of, f)
}

/// [`call`], its errors reported by `coder`.
pub(super) fn call_coded(
    waited: Waited,
    coder: Coder,
    f: impl FnOnce(i32, &SimDriver) -> Result<(), DriverError>,
) -> c_int {
    let (id, sim) = match enter() {
        Ok(x) => x,
        Err(code) => return code,
    };
    match f(id, &sim) {
        Ok(()) => 0,
        Err(e) => {
            set_message(&e.to_string());
            coder(e.kind(), waited)
        }
    }
}

/// `call` with an out-pointer that must not be NULL.
pub(super) unsafe fn call_out<T>(
    out: *mut T,
    waited: Waited,
    f: impl FnOnce(i32, &SimDriver) -> Result<T, DriverError>,
) -> c_int {
    // SAFETY: `out` is NULL or writable for one `T`: this function's own
    // contract (the ACL API's), passed on.
    unsafe { call_out_coded(out, waited, code_of, f) }
}

/// [`call_out`], its errors reported by `coder`.
pub(super) unsafe fn call_out_coded<T>(
    out: *mut T,
    waited: Waited,
    coder: Coder,
    f: impl FnOnce(i32, &SimDriver) -> Result<T, DriverError>,
) -> c_int {
    if out.is_null() {
        set_message("NULL out-pointer");
        return PARAM_INVALID;
    }
    call_coded(waited, coder, |id, sim| {
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
pub(super) unsafe fn host<'a>(p: *const c_void, len: usize) -> Option<&'a [u8]> {
    if p.is_null() || isize::try_from(len).is_err() {
        return None;
    }
    // SAFETY: forwarded to the caller; non-NULL, `len` ≤ isize::MAX.
    Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}
