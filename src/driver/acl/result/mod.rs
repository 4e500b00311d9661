//! One thin function per C entry point this driver calls, as in cudarc's
//! `result` layer: each owns its API name (the `&'static str` an error
//! carries), the contract of its one `unsafe` call, and the mapping of its
//! return code — to a value, or to a [`Failed`] that carries the name, the
//! code and the runtime's message (`aclGetRecentErrMsg`, fetched right after
//! the failing call, on the same thread).
//!
//! Where a call's contract can be carried by its argument types, the
//! function is safe: a live stream, event, device range, registered program
//! or checked argument block is a token (`tokens`) made from an entry of
//! the handle table, borrowed from the table for as long as the table keeps
//! that handle alive; a destroy or free takes its handle's entry *by
//! value*, out of the table, so nothing can use it afterwards (on failure
//! it is handed back). The calls whose contract no type carries —
//! resetting a device, making a context current, finalizing ACL — are
//! `unsafe fn`s with a `# Safety` section.
//!
//! Like cudarc's `result` on its `sys`, this layer uses only the C side —
//! prototypes, constants and layouts ([`ffi`](super::ffi)), the function
//! pointers (`load`), the return codes ([`codes`]) — and what
//! sits between it and the table: the runtime's pointers (`ptr`) and the
//! tokens (`tokens`). The table uses those too, never this layer.

use std::ffi::CStr;
use std::ptr::null_mut;
use std::time::Duration;

use super::codes::{self, AclError};
use super::ffi::{
    ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
};
use super::load::Api;
use super::ptr::RtPtr;
use super::tokens::{Alloc, Span, Stream};
use crate::driver::{DriverError, DriverErrorKind, Native, Op};

mod capture;
mod kernel;
mod notify;
mod queue;

pub(super) use self::capture::{
    CaptureStatus, capture_begin, capture_end, capture_get_info, execute_async, model_destroy,
};
pub(super) use self::kernel::{
    AicpuKernel, binary_load_from_file, binary_unload, dev_binary_unregister, func_get_by_name,
    kernel_launch_with_handle_v2, launch_cpu_kernel, register_all_kernel,
};
pub(super) use self::notify::{
    Report, exception_device_id, launch_callback, process_report, set_exception_info_callback,
    subscribe_report, unsubscribe_report,
};
pub(super) use self::queue::{
    create_event_ex_with_flag, create_event_with_flag, create_stream, destroy_event,
    destroy_stream, destroy_stream_force, event_elapsed_time, event_get_timestamp,
    query_event_status, record_event, stream_query, stream_wait_event,
    synchronize_event_with_timeout, synchronize_stream_with_timeout,
};

/// A call that failed: what its code means, and the native detail (the API
/// name, the code, the runtime's message).
#[derive(Debug)]
pub(super) struct Failed {
    kind: DriverErrorKind,
    native: Native,
}

/// What every call returns.
pub(super) type AclResult<T> = Result<T, Failed>;

impl Failed {
    /// `name` returned `code`: its meaning from the code table, and the
    /// runtime's message, read now.
    fn new(api: &Api, name: &'static str, code: i32) -> Self {
        Self::as_kind(api, name, code, codes::kind_of(code))
    }

    /// As [`Failed::new`], with a meaning the call knows better than the
    /// table (a timeout with its wait, an allocation with its size).
    fn as_kind(api: &Api, name: &'static str, code: i32, kind: DriverErrorKind) -> Self {
        Failed {
            kind,
            native: Native::new(name, code, recent_err_msg(api)),
        }
    }

    /// The failure as the error of trait operation `op`.
    pub(super) fn at(self, op: Op) -> DriverError {
        DriverError::with_native(op, self.kind, self.native)
    }

    /// What the code means.
    pub(super) fn kind(&self) -> &DriverErrorKind {
        &self.kind
    }

    /// Replaces what the code means (a caller that knows more).
    pub(super) fn with_kind(mut self, kind: DriverErrorKind) -> Self {
        self.kind = kind;
        self
    }
}

/// Maps a return code: 0 is `Ok`.
fn check(api: &Api, name: &'static str, code: i32) -> AclResult<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(Failed::new(api, name, code))
    }
}

/// A timeout in whole milliseconds, as the C API takes it: rounded up, at
/// least 1 (the runtime rejects 0), at most `i32::MAX`.
fn millis(t: Duration) -> i32 {
    i32::try_from(t.as_micros().div_ceil(1000).max(1)).unwrap_or(i32::MAX)
}

/// `aclGetRecentErrMsg`: the calling thread's last error message, if the
/// runtime offers one (and it is not empty).
pub(super) fn recent_err_msg(api: &Api) -> Option<String> {
    let f = api.recent_err_msg?;
    // SAFETY: no arguments; returns NULL or a NUL-terminated string that
    // stays valid until the next call on this thread (`acl/acl_rt.h`).
    let p = unsafe { f() };
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated (above); copied at once, before
    // any other call on this thread, lossily (the runtime's text need not
    // be UTF-8).
    let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
    (!s.is_empty()).then_some(s)
}

/// `aclInit(NULL)`: a repeated initialization (`ACL_ERROR_REPEAT_INITIALIZE`)
/// is success.
pub(super) fn init(api: &Api) -> AclResult<()> {
    // SAFETY: NULL means "no configuration file" (`acl/acl_rt.h`).
    let rc = unsafe { (api.acl_init)(std::ptr::null()) };
    match rc {
        0 | AclError::ACL_ERROR_REPEAT_INITIALIZE => Ok(()),
        _ => Err(Failed::new(api, "aclInit", rc)),
    }
}

/// `aclFinalizeReference`: drops one `aclInit` reference; the runtime's
/// count left. `None` without the symbol.
///
/// # Safety
/// The caller holds an `aclInit` reference (a successful [`init`]) that it
/// gives up here, and makes no further call on the runtime for it.
pub(super) unsafe fn finalize_reference(api: &Api) -> Option<AclResult<u64>> {
    let f = api.finalize_reference?;
    let mut refs = 0u64;
    // SAFETY: `refs` is a valid out-pointer; the caller gives up its
    // reference (above).
    let rc = unsafe { f(&raw mut refs) };
    Some(check(api, "aclFinalizeReference", rc).map(|()| refs))
}

/// `aclrtGetVersion`: (major, minor, patch). `None` without the symbol.
pub(super) fn get_version(api: &Api) -> Option<AclResult<(i32, i32, i32)>> {
    let f = api.get_version?;
    let (mut major, mut minor, mut patch) = (0i32, 0i32, 0i32);
    // SAFETY: three valid out-pointers, no other argument.
    let rc = unsafe { f(&raw mut major, &raw mut minor, &raw mut patch) };
    Some(check(api, "aclrtGetVersion", rc).map(|()| (major, minor, patch)))
}

/// `aclrtSetOpExecuteTimeOutV2`: sets the op watchdog (µs) and returns what
/// the device applied. `None` without the symbol.
pub(super) fn set_op_execute_timeout(api: &Api, us: u64) -> Option<AclResult<u64>> {
    let f = api.set_op_timeout?;
    let mut actual = 0u64;
    // SAFETY: a plain value and a valid out-pointer.
    let rc = unsafe { f(us, &raw mut actual) };
    Some(check(api, "aclrtSetOpExecuteTimeOutV2", rc).map(|()| actual))
}

/// `aclrtSetDevice`: takes a reference on `device` and makes its default
/// context current on the calling thread.
pub(super) fn set_device(api: &Api, device: i32) -> AclResult<()> {
    // SAFETY: a plain integer; taking a reference invalidates nothing.
    let rc = unsafe { (api.set_device)(device) };
    check(api, "aclrtSetDevice", rc)
}

/// `aclrtResetDevice`: drops one reference on `device`; at the last one the
/// runtime releases the device's streams, events, memory and programs.
///
/// # Safety
/// The caller gives up one reference it took with [`set_device`]; when it
/// may be the last, no handle of the device is used afterwards.
pub(super) unsafe fn reset_device(api: &Api, device: i32) -> AclResult<()> {
    // SAFETY: a plain integer; what the reset may release is not used
    // again (the caller's contract).
    let rc = unsafe { (api.reset_device)(device) };
    check(api, "aclrtResetDevice", rc)
}

/// A device's context, captured from the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Context(RtPtr);

/// `aclrtGetCurrentContext`: the calling thread's current context. `None`
/// without the symbol.
pub(super) fn get_current_context(api: &Api) -> Option<AclResult<Context>> {
    let f = api.get_current_context?;
    let mut ctx = null_mut();
    // SAFETY: `ctx` is a valid out-pointer.
    let rc = unsafe { f(&raw mut ctx) };
    Some(check(api, "aclrtGetCurrentContext", rc).map(|()| {
        // SAFETY: what the call returned, and it succeeded.
        Context(unsafe { RtPtr::from_runtime(ctx) })
    }))
}

/// `aclrtSetCurrentContext`: makes `ctx` current on the calling thread.
/// `None` without the symbol.
///
/// # Safety
/// `ctx` came from [`get_current_context`] of this runtime, for a device on
/// which the caller still holds a reference ([`set_device`] not yet reset).
pub(super) unsafe fn set_current_context(api: &Api, ctx: Context) -> Option<AclResult<()>> {
    let f = api.set_current_context?;
    // SAFETY: a live context of this runtime (the caller's contract).
    let rc = unsafe { f(ctx.0.get()) };
    Some(check(api, "aclrtSetCurrentContext", rc))
}

/// `aclrtMalloc` (huge pages first): `bytes` of device memory. Out of
/// memory reports the size asked for.
pub(super) fn malloc(api: &Api, bytes: usize) -> AclResult<RtPtr> {
    let mut p = null_mut();
    // SAFETY: `p` is a valid out-pointer; size and policy by value.
    let rc = unsafe { (api.malloc)(&raw mut p, bytes, ACL_MEM_MALLOC_HUGE_FIRST) };
    match rc {
        // SAFETY: what the call returned, and it succeeded.
        0 => Ok(unsafe { RtPtr::from_runtime(p) }),
        _ => Err(match codes::kind_of(rc) {
            DriverErrorKind::OutOfMemory { .. } => Failed::as_kind(
                api,
                "aclrtMalloc",
                rc,
                DriverErrorKind::OutOfMemory {
                    bytes: bytes as u64,
                },
            ),
            _ => Failed::new(api, "aclrtMalloc", rc),
        }),
    }
}

/// One synchronous `aclrtMemcpy`: host memory and a device range of this
/// driver, in either direction.
pub(super) enum HostCopy<'a, 't> {
    /// Host → device: `src` into the range.
    ToDevice {
        /// The destination range.
        dst: Span<'t>,
        /// The bytes.
        src: &'a [u8],
    },
    /// Device → host: the range into `dst`.
    ToHost {
        /// The host buffer.
        dst: &'a mut [u8],
        /// The source range.
        src: Span<'t>,
    },
}

/// `aclrtMemcpy`, host ↔ device. The device side is the range the span
/// names (its allocation's remaining size is `destMax`); at most the
/// span's length is copied, and at most the host buffer's.
pub(super) fn memcpy(api: &Api, copy: HostCopy<'_, '_>) -> AclResult<()> {
    let rc = match copy {
        HostCopy::ToDevice { dst, src } => {
            let count = src.len().min(dst.len());
            // SAFETY: `src` is readable for `count` bytes during this
            // synchronous call; the destination is a live allocation of this
            // driver (the span borrows the table that keeps it live) with
            // `room` bytes left from `dst`, which is `destMax`, so the
            // runtime's own bound check refuses any overrun.
            unsafe {
                (api.memcpy)(
                    dst.ptr().get(),
                    dst.room(),
                    src.as_ptr().cast(),
                    count,
                    ACL_MEMCPY_HOST_TO_DEVICE,
                )
            }
        }
        HostCopy::ToHost { dst, src } => {
            let count = dst.len().min(src.len());
            // SAFETY: `dst` is writable for `dst.len()` bytes (`destMax`)
            // during this synchronous call; `count` bytes from `src` lie in
            // one live allocation of this driver (the span's length was
            // checked against it, and the span keeps it live).
            unsafe {
                (api.memcpy)(
                    dst.as_mut_ptr().cast(),
                    dst.len(),
                    src.ptr().get(),
                    count,
                    ACL_MEMCPY_DEVICE_TO_HOST,
                )
            }
        }
    };
    check(api, "aclrtMemcpy", rc)
}

/// `aclrtMemset`: the span's bytes set to `value`; `maxCount` is what its
/// allocation has left.
pub(super) fn memset(api: &Api, dst: Span<'_>, value: u8) -> AclResult<()> {
    // SAFETY: the range lies in one live allocation of this driver, kept
    // live by the span's borrow of the table; maxCount is that
    // allocation's remaining size, so the runtime refuses an overrun.
    let rc = unsafe { (api.memset)(dst.ptr().get(), dst.room(), i32::from(value), dst.len()) };
    check(api, "aclrtMemset", rc)
}

/// `aclrtFree`: the allocation, taken out of the table, is freed; on
/// failure it is handed back (still allocated).
pub(super) fn free(api: &Api, a: Alloc) -> Result<(), (Alloc, Failed)> {
    // SAFETY: the start of a live allocation of this driver, which the
    // caller took out of the table (no span of it can be made any more), so
    // it is freed once and never used afterwards.
    let rc = unsafe { (api.free)(a.ptr().get()) };
    check(api, "aclrtFree", rc).map_err(|e| (a, e))
}

/// `aclrtMemcpyAsync`, device to device on stream `s`: `src`'s length into
/// `dst` (at most `dst`'s length), `destMax` what `dst`'s allocation has
/// left.
pub(super) fn memcpy_async(
    api: &Api,
    s: Stream<'_>,
    dst: Span<'_>,
    src: Span<'_>,
) -> AclResult<()> {
    let count = src.len().min(dst.len());
    // SAFETY: a live stream and two ranges in live allocations of this
    // driver (the tokens borrow the table that keeps them live for the
    // call); destMax is the destination allocation's remaining size. No
    // host memory is involved. That the ranges stay allocated until the
    // copy ran on the device is the `Driver::copy_async` caller's contract.
    let rc = unsafe {
        (api.memcpy_async)(
            dst.ptr().get(),
            dst.room(),
            src.ptr().get(),
            count,
            ACL_MEMCPY_DEVICE_TO_DEVICE,
            s.ptr().get(),
        )
    };
    check(api, "aclrtMemcpyAsync", rc)
}

/// `aclrtMemsetAsync` on stream `s`: the span's bytes set to `value`.
pub(super) fn memset_async(api: &Api, s: Stream<'_>, dst: Span<'_>, value: u8) -> AclResult<()> {
    // SAFETY: a live stream and a range in a live allocation of this driver
    // (kept live for the call by the tokens' borrow); maxCount is the
    // allocation's remaining size.
    let rc = unsafe {
        (api.memset_async)(
            dst.ptr().get(),
            dst.room(),
            i32::from(value),
            dst.len(),
            s.ptr().get(),
        )
    };
    check(api, "aclrtMemsetAsync", rc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_up_and_clamp() {
        assert_eq!(millis(Duration::ZERO), 1, "never 0: the runtime rejects it");
        assert_eq!(millis(Duration::from_nanos(1)), 1);
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_micros(1001)), 2);
        assert_eq!(millis(Duration::from_secs(5)), 5000);
        assert_eq!(millis(Duration::from_secs(u64::MAX / 2)), i32::MAX);
        assert_eq!(millis(Duration::MAX), i32::MAX);
    }
}
