//! Device memory: `aclrtMalloc` / `aclrtFree`, the synchronous copy and
//! memset, and their asynchronous (device-to-device) forms. Each call's
//! `destMax` / `count` is recorded for tests.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use runclaim::driver::acl::codes::{AclError, Waited};
use runclaim::driver::{Driver, DriverError, DriverErrorKind, Op};

use super::shim::{call, call_out, dev_ptr, host, opaque, stream_of};
use super::{PARAM_INVALID, current, note, quirk, set_message, with_dev};
use crate::control::{
    FRESH_BYTE, QUIRK_FULL_STREAM_FAILS, QUIRK_MEMCPY_TO_DEVICE_LOST, QUIRK_MEMSET_ASYNC_LOST,
};

/// The byte C's memset stores: the value converted to `unsigned char`.
fn memset_byte(value: i32) -> u8 {
    value.to_le_bytes()[0]
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMalloc(ptr: *mut *mut c_void, size: usize, _policy: u32) -> c_int {
    // SAFETY: `ptr` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(ptr, Waited::Stream, |_, s| {
            let p = s.alloc(size)?;
            if let Err(e) = s.memset(p, FRESH_BYTE, size) {
                let _ = s.free(p);
                return Err(e);
            }
            Ok(opaque(p.raw()))
        })
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtFree(ptr: *mut c_void) -> c_int {
    call(Waited::Stream, |_, s| s.free(dev_ptr(ptr)))
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
    call(Waited::Stream, |id, s| match kind {
        1 if quirk(id, QUIRK_MEMCPY_TO_DEVICE_LOST) => Ok(()),
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
    if let Some(id) = current()
        && quirk(id, QUIRK_FULL_STREAM_FAILS)
        && full(id, stm)
    {
        set_message("the stream is full");
        return AclError::ACL_ERROR_RT_NO_STREAM_RESOURCE;
    }
    call(Waited::Stream, |id, s| {
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
    call(Waited::Stream, |_, s| {
        s.memset(dev_ptr(ptr), memset_byte(value), count)
    })
}

/// Whether stream `stm` of `device` holds as many tasks as it can (for
/// [`QUIRK_FULL_STREAM_FAILS`], which `aclrtMemcpyAsync` and
/// `aclrtMemsetAsync` honour).
fn full(device: i32, stm: *mut c_void) -> bool {
    let Some(sim) = with_dev(device, |d| Arc::clone(&d.sim)) else {
        return false;
    };
    stream_of(device, Op::MemsetAsync, stm)
        .is_ok_and(|st| sim.queued(st) >= sim.config().stream_capacity)
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
    if let Some(id) = current() {
        if quirk(id, QUIRK_MEMSET_ASYNC_LOST) {
            return 0;
        }
        if quirk(id, QUIRK_FULL_STREAM_FAILS) && full(id, stm) {
            set_message("the stream is full");
            return AclError::ACL_ERROR_RT_NO_STREAM_RESOURCE;
        }
    }
    call(Waited::Stream, |id, s| {
        s.memset_async(
            stream_of(id, Op::MemsetAsync, stm)?,
            dev_ptr(ptr),
            memset_byte(value),
            count,
        )
    })
}
