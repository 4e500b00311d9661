//! Streams: `aclrtCreateStream`, `aclrtDestroyStream` (waits for queued
//! work, as the runtime does) and `aclrtDestroyStreamForce`,
//! `aclrtStreamQuery`, and `aclrtSynchronizeStreamWithTimeout` with the
//! runtime's reading of a timeout (shared with the event sync). The query
//! and the sync of a capturing stream answer as the runtime does
//! ([`stream_code`]).

use std::ffi::{c_int, c_void};
use std::time::Duration;

use runclaim::driver::acl::codes::{AclError, Waited, code_of};
use runclaim::driver::{CaptureRule, Completion, Driver, DriverErrorKind, Op};

use super::shim::{call, call_coded, call_out, call_out_coded, export, stream_of};
use super::{PARAM_INVALID, current, note, quirk, set_message};
use crate::control::QUIRK_STREAM_STATUS_INVERTED;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stm: *mut *mut c_void) -> c_int {
    // SAFETY: `stm` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(stm, Waited::Stream, |id, s| {
            s.create_stream().map(|st| export(id, st.raw()))
        })
    }
}

/// Like the real runtime, destroying a stream with queued work waits for it
/// first. The simulator counts the attempt (`busy_destroy_refused`), so a
/// test still sees that a busy stream reached destroy.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyStream(stm: *mut c_void) -> c_int {
    call(Waited::Stream, |id, s| {
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

/// The code of a stream sync or query: the runtime refuses one on a
/// capturing stream with `ACL_ERROR_RT_STREAM_CAPTURED` — not the
/// `ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC` the code table reports for
/// [`CaptureRule::SyncWhileCapturing`] — in `ApiErrorDecorator::StreamSynchronize`
/// and `ApiErrorDecorator::StreamQuery` (`src/runtime/api/impl/api_error.cc`
/// of hicann/runtime: `stm->IsCapturing()`, `RT_ERROR_STREAM_CAPTURED`).
pub(super) fn stream_code(kind: &DriverErrorKind, waited: Waited) -> c_int {
    match kind {
        DriverErrorKind::Capture {
            rule: CaptureRule::SyncWhileCapturing,
        } => AclError::ACL_ERROR_RT_STREAM_CAPTURED,
        _ => code_of(kind, waited),
    }
}

/// 0 = `COMPLETE`, 1 = `NOT_READY` (the reverse under
/// [`QUIRK_STREAM_STATUS_INVERTED`]).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamQuery(stm: *mut c_void, status: *mut u32) -> c_int {
    // SAFETY: `status` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out_coded(status, Waited::Stream, stream_code, |id, s| {
            let ready = if quirk(id, QUIRK_STREAM_STATUS_INVERTED) {
                Completion::Complete
            } else {
                Completion::NotReady
            };
            s.query_stream(stream_of(id, Op::QueryStream, stm)?)
                .map(|c| u32::from(c == ready))
        })
    }
}

/// The runtime's reading of a timeout: -1 forever, ≥ 1 ms; 0 and anything
/// below -1 are invalid (the header's "0 = check now" is not what the
/// runtime does).
pub(super) fn timeout_of(ms: i32) -> Option<Duration> {
    match ms {
        -1 => Some(Duration::from_secs(3600)),
        ms if ms < 1 => None,
        ms => Some(Duration::from_millis(u64::from(ms.unsigned_abs()))),
    }
}

pub(super) fn refuse_timeout(ms: i32) -> c_int {
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
    call_coded(Waited::Stream, stream_code, |id, s| {
        s.sync_stream(stream_of(id, Op::SyncStream, stm)?, t)
    })
}

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyStreamForce(stm: *mut c_void) -> c_int {
    call(Waited::Stream, |id, s| {
        s.destroy_stream(stream_of(id, Op::DestroyStream, stm)?)
    })
}
