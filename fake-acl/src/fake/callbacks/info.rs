//! The exception-info accessors (`aclrtGet*FromExceptionInfo`).

use super::ExceptionInfo;

/// Reads one field of an exception info; 0xFFFFFFFF for NULL, as the
/// header documents.
///
/// # Safety
/// `info` is NULL or the info the runtime handed to the exception callback,
/// during that call.
unsafe fn field(info: *const ExceptionInfo, f: impl FnOnce(&ExceptionInfo) -> u32) -> u32 {
    if info.is_null() {
        return u32::MAX;
    }
    // SAFETY: non-NULL and valid for the call (the caller's contract).
    f(unsafe { &*info })
}

/// `uint32_t aclrtGetDeviceIdFromExceptionInfo(const aclrtExceptionInfo*)`.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceIdFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    // SAFETY: forwarded (the ACL contract of the accessor).
    unsafe { field(info, |i| i.device_id) }
}

/// `uint32_t aclrtGetStreamIdFromExceptionInfo(const aclrtExceptionInfo*)`:
/// the simulator's stream id.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetStreamIdFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    // SAFETY: forwarded (the ACL contract of the accessor).
    unsafe { field(info, |i| i.stream_id) }
}

/// `uint32_t aclrtGetTaskIdFromExceptionInfo(const aclrtExceptionInfo*)`
/// (always 0: the simulator has no task ids).
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetTaskIdFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    // SAFETY: forwarded (the ACL contract of the accessor).
    unsafe { field(info, |i| i.task_id) }
}

/// `uint32_t aclrtGetErrorCodeFromExceptionInfo(const aclrtExceptionInfo*)`.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetErrorCodeFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    // SAFETY: forwarded (the ACL contract of the accessor).
    unsafe { field(info, |i| i.retcode) }
}
