//! Host callbacks: subscribing a stream to a thread, queuing a callback on
//! a stream, processing the reports on the subscribed thread, and the
//! process's exception-info callback (`acl/acl_rt.h`). Every function is
//! `None` where the runtime lacks its symbol.

use std::ffi::c_void;
use std::time::Duration;

use super::{AclResult, check, millis};
use crate::driver::acl::codes::AclError;
use crate::driver::acl::ffi::{ACL_CALLBACK_NO_BLOCK, AclrtCallback, AclrtExceptionInfoCallback};
use crate::driver::acl::load::Api;
use crate::driver::acl::ptr::RtPtr;
use crate::driver::acl::tokens::Stream;

/// What one `aclrtProcessReport` said.
#[derive(Debug)]
pub(in crate::driver::acl) enum Report {
    /// Callbacks ran on this thread (0).
    Ran,
    /// None was due within the timeout (`ACL_ERROR_RT_REPORT_TIMEOUT`).
    TimedOut,
    /// No stream is subscribed to this thread
    /// (`ACL_ERROR_RT_THREAD_SUBSCRIBE`): the call returns at once.
    NotSubscribed,
    /// Any other code (the reactor waits and tries again; nobody to tell).
    Failed,
}

/// `aclrtSubscribeReport`: the callbacks of `s` run on the thread whose
/// `pthread_t` is `thread`, inside its `aclrtProcessReport` calls.
pub(in crate::driver::acl) fn subscribe_report(
    api: &Api,
    thread: u64,
    s: Stream<'_>,
) -> Option<AclResult<()>> {
    let f = api.subscribe_report?;
    // SAFETY: a live stream of this driver (the token's borrow keeps it
    // live for the call); the thread id is a plain integer the runtime only
    // keys the subscription by.
    let rc = unsafe { f(thread, s.ptr().get()) };
    Some(check(api, "aclrtSubscribeReport", rc))
}

/// `aclrtUnSubscribeReport`: ends the subscription of `s` to `thread`.
///
/// # Safety
/// `s` is a stream of this runtime that has not been destroyed, on a
/// device that is not released (the caller's reference keeps it), and the
/// calling thread is bound to that device.
pub(in crate::driver::acl) unsafe fn unsubscribe_report(
    api: &Api,
    thread: u64,
    s: RtPtr,
) -> Option<AclResult<()>> {
    let f = api.unsubscribe_report?;
    // SAFETY: a live stream handle (the caller's contract); the thread id
    // is a plain integer.
    let rc = unsafe { f(thread, s.get()) };
    Some(check(api, "aclrtUnSubscribeReport", rc))
}

/// `aclrtLaunchCallback(callback, key, ACL_CALLBACK_NO_BLOCK, s)`: once
/// everything queued on `s` so far completed, the runtime calls `callback`
/// with `key` on the thread subscribed to `s`. The callback never holds
/// back the tasks queued after it.
pub(in crate::driver::acl) fn launch_callback(
    api: &Api,
    s: Stream<'_>,
    callback: AclrtCallback,
    key: usize,
) -> Option<AclResult<()>> {
    let f = api.launch_callback?;
    // SAFETY: a live stream of this driver (the token's borrow keeps it
    // live for the call). `callback` is a safe function: it is sound for
    // whatever pointer it receives, whenever it runs. The user data is an
    // integer carried in a pointer without provenance, never dereferenced
    // (by the runtime or the callback), so nothing it names can be freed
    // early or must be reclaimed.
    let rc = unsafe {
        f(
            callback,
            std::ptr::without_provenance_mut(key),
            ACL_CALLBACK_NO_BLOCK,
            s.ptr().get(),
        )
    };
    Some(check(api, "aclrtLaunchCallback", rc))
}

/// `aclrtProcessReport`: waits up to `timeout` (whole milliseconds, at
/// least 1: the runtime rejects 0) for callbacks of the streams subscribed
/// to the calling thread, and runs them on it.
pub(in crate::driver::acl) fn process_report(api: &Api, timeout: Duration) -> Option<Report> {
    let f = api.process_report?;
    // SAFETY: a timeout of at least 1 ms; the callbacks it runs are this
    // driver's safe trampoline (or another component's, under their own
    // contract with the runtime).
    let rc = unsafe { f(millis(timeout)) };
    Some(match rc {
        0 => Report::Ran,
        AclError::ACL_ERROR_RT_REPORT_TIMEOUT => Report::TimedOut,
        AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE => Report::NotSubscribed,
        _ => Report::Failed,
    })
}

/// `aclrtSetExceptionInfoCallback`: `callback` becomes the process's
/// exception-info callback (it replaces any other: the runtime keeps one
/// per process).
pub(in crate::driver::acl) fn set_exception_info_callback(
    api: &Api,
    callback: AclrtExceptionInfoCallback,
) -> Option<AclResult<()>> {
    let f = api.set_exception_info_callback?;
    // SAFETY: `callback` is a safe function, sound for whatever pointer it
    // receives on whichever thread; it only reads the info through
    // `exception_device_id`.
    let rc = unsafe { f(callback) };
    Some(check(api, "aclrtSetExceptionInfoCallback", rc))
}

/// `aclrtGetDeviceIdFromExceptionInfo`: the device an exception report is
/// about (`None` without the symbol, or when the runtime does not say:
/// 0xFFFFFFFF). Reads the info only: no error message is fetched.
///
/// # Safety
/// `info` is the pointer the runtime handed to the exception-info
/// callback, and the call is made during that callback.
pub(in crate::driver::acl) unsafe fn exception_device_id(
    api: &Api,
    info: *mut c_void,
) -> Option<u32> {
    let f = api.exception_device_id?;
    // SAFETY: the runtime's own info, valid during its callback (the
    // caller's contract); the accessor only reads it.
    let id = unsafe { f(info.cast_const()) };
    (id != u32::MAX).then_some(id)
}
