//! Streams and events: one function per `aclrt*` stream / event entry
//! point, each with its name and its return-code mapping ("not complete
//! yet" is an answer, a sync timeout is a timeout of the wait asked for).

use std::ptr::null_mut;
use std::time::Duration;

use super::{AclResult, Failed, check, millis};
use crate::driver::acl::codes::AclError;
use crate::driver::acl::ffi::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ACL_STREAM_STATUS_COMPLETE, ACL_STREAM_STATUS_NOT_READY,
};
use crate::driver::acl::load::Api;
use crate::driver::acl::ptr::RtPtr;
use crate::driver::acl::tokens::{Event, EventEntry, Stream, StreamEntry};
use crate::driver::{CaptureRule, Completion, DriverErrorKind};

/// A timed wait's failure: its expiry code is a timeout of `timeout`.
fn timed(api: &Api, name: &'static str, rc: i32, expiry: i32, timeout: Duration) -> Failed {
    if rc == expiry {
        Failed::as_kind(api, name, rc, DriverErrorKind::Timeout { waited: timeout })
    } else {
        Failed::new(api, name, rc)
    }
}

/// A stream sync or query's failure: `ACL_ERROR_RT_STREAM_CAPTURED` is a
/// synchronous call on a capturing stream, which the runtime refuses so
/// (`ApiErrorDecorator::StreamSynchronize` and `StreamQuery`,
/// `src/runtime/api/impl/api_error.cc` of hicann/runtime).
fn captured_stream(api: &Api, name: &'static str, rc: i32) -> Option<Failed> {
    (rc == AclError::ACL_ERROR_RT_STREAM_CAPTURED).then(|| {
        Failed::as_kind(
            api,
            name,
            rc,
            DriverErrorKind::Capture {
                rule: CaptureRule::SyncWhileCapturing,
            },
        )
    })
}

/// `aclrtCreateStream`.
pub(in crate::driver::acl) fn create_stream(api: &Api) -> AclResult<RtPtr> {
    let mut s = null_mut();
    // SAFETY: `s` is a valid out-pointer.
    let rc = unsafe { (api.create_stream)(&raw mut s) };
    // SAFETY: what the call returned, once it succeeded.
    check(api, "aclrtCreateStream", rc).map(|()| unsafe { RtPtr::from_runtime(s) })
}

/// `aclrtDestroyStream` (waits for queued work). The stream's entry, taken
/// out of the table, is consumed; on failure it is handed back.
pub(in crate::driver::acl) fn destroy_stream(
    api: &Api,
    s: StreamEntry,
) -> Result<(), (StreamEntry, Failed)> {
    // SAFETY: a live stream of this driver, taken out of the table by the
    // caller (so nothing can use or wait on it any more): destroyed once.
    let rc = unsafe { (api.destroy_stream)(s.live().ptr().get()) };
    check(api, "aclrtDestroyStream", rc).map_err(|e| (s, e))
}

/// `aclrtDestroyStreamForce` (does not wait), or [`destroy_stream`] where
/// the runtime lacks it.
pub(in crate::driver::acl) fn destroy_stream_force(
    api: &Api,
    s: StreamEntry,
) -> Result<(), (StreamEntry, Failed)> {
    let Some(force) = api.destroy_stream_force else {
        return destroy_stream(api, s);
    };
    // SAFETY: as in `destroy_stream`.
    let rc = unsafe { force(s.live().ptr().get()) };
    check(api, "aclrtDestroyStreamForce", rc).map_err(|e| (s, e))
}

/// `aclrtStreamQuery`: complete, or not yet
/// (`ACL_ERROR_RT_STREAM_NOT_COMPLETE` is an answer, not an error). A
/// capturing stream is refused (`captured_stream`).
pub(in crate::driver::acl) fn stream_query(api: &Api, s: Stream<'_>) -> AclResult<Completion> {
    let mut status = ACL_STREAM_STATUS_NOT_READY;
    // SAFETY: `status` is a valid out-pointer; a live stream of this driver
    // (the token's borrow keeps it live).
    let rc = unsafe { (api.stream_query)(s.ptr().get(), &raw mut status) };
    match rc {
        0 if status == ACL_STREAM_STATUS_COMPLETE => Ok(Completion::Complete),
        0 | AclError::ACL_ERROR_RT_STREAM_NOT_COMPLETE => Ok(Completion::NotReady),
        _ => Err(captured_stream(api, "aclrtStreamQuery", rc)
            .unwrap_or_else(|| Failed::new(api, "aclrtStreamQuery", rc))),
    }
}

/// `aclrtSynchronizeStreamWithTimeout`, in whole milliseconds rounded up
/// and at least 1 (the runtime rejects 0). Expiry is a timeout of
/// `timeout`; a capturing stream is refused (`captured_stream`).
pub(in crate::driver::acl) fn synchronize_stream_with_timeout(
    api: &Api,
    s: Stream<'_>,
    timeout: Duration,
) -> AclResult<()> {
    // SAFETY: a live stream of this driver (kept live by the token's borrow
    // of the table or of a waiter mark); a timeout of at least 1 ms.
    let rc = unsafe { (api.stream_sync_timeout)(s.ptr().get(), millis(timeout)) };
    let name = "aclrtSynchronizeStreamWithTimeout";
    match rc {
        0 => Ok(()),
        _ => Err(captured_stream(api, name, rc).unwrap_or_else(|| {
            timed(
                api,
                name,
                rc,
                AclError::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                timeout,
            )
        })),
    }
}

/// `aclrtCreateEventWithFlag` ("old mode": not ready until its first
/// record).
pub(in crate::driver::acl) fn create_event_with_flag(api: &Api, flags: u32) -> AclResult<RtPtr> {
    let mut e = null_mut();
    // SAFETY: `e` is a valid out-pointer; the flags by value.
    let rc = unsafe { (api.create_event)(&raw mut e, flags) };
    // SAFETY: what the call returned, once it succeeded.
    check(api, "aclrtCreateEventWithFlag", rc).map(|()| unsafe { RtPtr::from_runtime(e) })
}

/// `aclrtCreateEventExWithFlag` (complete before its first record). `None`
/// without the symbol.
pub(in crate::driver::acl) fn create_event_ex_with_flag(
    api: &Api,
    flags: u32,
) -> Option<AclResult<RtPtr>> {
    let f = api.create_event_ex?;
    let mut e = null_mut();
    // SAFETY: `e` is a valid out-pointer; the flags by value.
    let rc = unsafe { f(&raw mut e, flags) };
    // SAFETY: what the call returned, once it succeeded.
    Some(check(api, "aclrtCreateEventExWithFlag", rc).map(|()| unsafe { RtPtr::from_runtime(e) }))
}

/// `aclrtDestroyEvent`. The event's entry, taken out of the table, is
/// consumed; on failure it is handed back.
pub(in crate::driver::acl) fn destroy_event(
    api: &Api,
    e: EventEntry,
) -> Result<(), (EventEntry, Failed)> {
    // SAFETY: a live event of this driver, taken out of the table by the
    // caller (nothing can use or wait on it any more): destroyed once.
    let rc = unsafe { (api.destroy_event)(e.live().ptr().get()) };
    check(api, "aclrtDestroyEvent", rc).map_err(|f| (e, f))
}

/// `aclrtRecordEvent`: `e` captures the work queued on `s` so far.
pub(in crate::driver::acl) fn record_event(
    api: &Api,
    e: Event<'_>,
    s: Stream<'_>,
) -> AclResult<()> {
    // SAFETY: a live event and a live stream of this driver, kept live by
    // the tokens' borrow of the table.
    let rc = unsafe { (api.record_event)(e.ptr().get(), s.ptr().get()) };
    check(api, "aclrtRecordEvent", rc)
}

/// `aclrtQueryEventStatus`: complete, or not yet. Its numbering is the
/// reverse of the stream status's; `ACL_ERROR_RT_EVENT_NOT_COMPLETE` is an
/// answer too.
pub(in crate::driver::acl) fn query_event_status(api: &Api, e: Event<'_>) -> AclResult<Completion> {
    let mut status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    // SAFETY: `status` is a valid out-pointer; a live event of this driver.
    let rc = unsafe { (api.query_event_status)(e.ptr().get(), &raw mut status) };
    match rc {
        0 if status == ACL_EVENT_RECORDED_STATUS_COMPLETE => Ok(Completion::Complete),
        0 | AclError::ACL_ERROR_RT_EVENT_NOT_COMPLETE => Ok(Completion::NotReady),
        _ => Err(Failed::new(api, "aclrtQueryEventStatus", rc)),
    }
}

/// `aclrtSynchronizeEventWithTimeout`, in whole milliseconds as the stream
/// sync. `None` without the symbol.
pub(in crate::driver::acl) fn synchronize_event_with_timeout(
    api: &Api,
    e: Event<'_>,
    timeout: Duration,
) -> Option<AclResult<()>> {
    let f = api.event_sync_timeout?;
    // SAFETY: a live event of this driver (kept live by the token's borrow
    // of the table or of a waiter mark); a timeout of at least 1 ms.
    let rc = unsafe { f(e.ptr().get(), millis(timeout)) };
    let name = "aclrtSynchronizeEventWithTimeout";
    Some(match rc {
        0 => Ok(()),
        _ => Err(timed(
            api,
            name,
            rc,
            AclError::ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
            timeout,
        )),
    })
}

/// `aclrtStreamWaitEvent`: work queued on `s` from now waits for `e`.
pub(in crate::driver::acl) fn stream_wait_event(
    api: &Api,
    s: Stream<'_>,
    e: Event<'_>,
) -> AclResult<()> {
    // SAFETY: a live stream and a live event of this driver, kept live by
    // the tokens' borrow of the table.
    let rc = unsafe { (api.stream_wait_event)(s.ptr().get(), e.ptr().get()) };
    check(api, "aclrtStreamWaitEvent", rc)
}

/// `aclrtEventElapsedTime`: milliseconds from `start` to `end`, as the
/// runtime reports them (not yet checked to be a duration).
pub(in crate::driver::acl) fn event_elapsed_time(
    api: &Api,
    start: Event<'_>,
    end: Event<'_>,
) -> AclResult<f32> {
    let mut ms = 0f32;
    // SAFETY: `ms` is a valid out-pointer; two live events of this driver.
    let rc = unsafe { (api.event_elapsed)(&raw mut ms, start.ptr().get(), end.ptr().get()) };
    check(api, "aclrtEventElapsedTime", rc).map(|()| ms)
}

/// `aclrtEventGetTimestamp`: the device's uptime in µs when `e` completed.
/// `None` without the symbol.
pub(in crate::driver::acl) fn event_get_timestamp(
    api: &Api,
    e: Event<'_>,
) -> Option<AclResult<u64>> {
    let f = api.event_timestamp?;
    let mut us = 0u64;
    // SAFETY: `us` is a valid out-pointer; a live event of this driver.
    let rc = unsafe { f(e.ptr().get(), &raw mut us) };
    Some(check(api, "aclrtEventGetTimestamp", rc).map(|()| us))
}
