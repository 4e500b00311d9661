//! Stream capture: one function per `aclmdlRI*` entry point this driver
//! calls — begin, the capture's status, end into a graph (`aclmdlRI`), a
//! graph's replay and its destruction — each with its name and its
//! return-code mapping. Each is `None` without its symbol (the driver
//! checks `Capabilities::CAPTURE` first, so it never finds one missing).
//!
//! Two codes read as more than the code table says, here only:
//! `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` from `aclmdlRICaptureBegin` is a
//! stream that cannot be captured ([`CaptureRule::NotCapturable`]; the
//! runtime's `rtStreamBeginCapture`, `src/runtime/api/api_c_standard_soc.cc`,
//! returns it where the chip has no ACL graph), and the stream sync and
//! query read `ACL_ERROR_RT_STREAM_CAPTURED` as a synchronous call on a
//! capturing stream (`queue`'s `captured_stream`).

use std::ptr::null_mut;

use super::{AclResult, Failed, check};
use crate::driver::acl::codes::AclError;
use crate::driver::acl::ffi::{
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED, ACL_MODEL_RI_CAPTURE_STATUS_NONE,
};
use crate::driver::acl::load::Api;
use crate::driver::acl::ptr::RtPtr;
use crate::driver::acl::tokens::{Graph, GraphEntry, Stream};
use crate::driver::{CaptureRule, DriverErrorKind};

/// What `aclmdlRICaptureGetInfo` says of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::driver::acl) enum CaptureStatus {
    /// Not capturing.
    None,
    /// Capturing.
    Active,
    /// Capturing, but an error inside the capture invalidated it: ending
    /// it clears it without a graph.
    Invalidated,
}

/// `aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL)`: what is
/// queued on `s` from now on is captured. `ACL_ERROR_RT_FEATURE_NOT_SUPPORT`
/// is a stream that cannot be captured.
pub(in crate::driver::acl) fn capture_begin(api: &Api, s: Stream<'_>) -> Option<AclResult<()>> {
    let f = api.capture_begin?;
    // SAFETY: a live stream of this driver (the token's borrow of the table
    // keeps it live for the call); the mode is a value of the enum.
    let rc = unsafe { f(s.ptr().get(), ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL) };
    let name = "aclmdlRICaptureBegin";
    Some(match rc {
        AclError::ACL_ERROR_RT_FEATURE_NOT_SUPPORT => Err(Failed::as_kind(
            api,
            name,
            rc,
            DriverErrorKind::Capture {
                rule: CaptureRule::NotCapturable,
            },
        )),
        _ => check(api, name, rc),
    })
}

/// `aclmdlRICaptureGetInfo`: the capture status of `s` (the model out-
/// pointer is NULL, which the call allows when the status's is not). A
/// status outside the enum is an invalid result.
pub(in crate::driver::acl) fn capture_get_info(
    api: &Api,
    s: Stream<'_>,
) -> Option<AclResult<CaptureStatus>> {
    let f = api.capture_get_info?;
    let mut status = u32::MAX;
    // SAFETY: a live stream of this driver (kept live by the token's
    // borrow); `status` is a valid out-pointer, the model's is NULL.
    let rc = unsafe { f(s.ptr().get(), &raw mut status, null_mut()) };
    let name = "aclmdlRICaptureGetInfo";
    Some(check(api, name, rc).and_then(|()| match status {
        ACL_MODEL_RI_CAPTURE_STATUS_NONE => Ok(CaptureStatus::None),
        ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE => Ok(CaptureStatus::Active),
        ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED => Ok(CaptureStatus::Invalidated),
        _ => Err(Failed::as_kind(
            api,
            name,
            rc,
            DriverErrorKind::InvalidResult {
                what: "aclmdlRICaptureGetInfo reported a status outside aclmdlRICaptureStatus",
            },
        )),
    }))
}

/// `aclmdlRICaptureEnd`: the capture begun on `s`, as a graph. The capture
/// ends whatever the result. A success with a NULL graph is an invalid
/// result (code 0).
pub(in crate::driver::acl) fn capture_end(api: &Api, s: Stream<'_>) -> Option<AclResult<RtPtr>> {
    let f = api.capture_end?;
    let mut g = null_mut();
    // SAFETY: a live stream of this driver (kept live by the token's
    // borrow); `g` is a valid out-pointer.
    let rc = unsafe { f(s.ptr().get(), &raw mut g) };
    let name = "aclmdlRICaptureEnd";
    Some(check(api, name, rc).and_then(|()| {
        if g.is_null() {
            return Err(Failed::as_kind(
                api,
                name,
                rc,
                DriverErrorKind::InvalidResult {
                    what: "aclmdlRICaptureEnd succeeded without a graph",
                },
            ));
        }
        // SAFETY: what the call returned, once it succeeded: the graph the
        // capture ended into.
        Ok(unsafe { RtPtr::from_runtime(g) })
    }))
}

/// `aclmdlRIExecuteAsync`: one replay of `g` queued on `s`.
pub(in crate::driver::acl) fn execute_async(
    api: &Api,
    g: Graph<'_>,
    s: Stream<'_>,
) -> Option<AclResult<()>> {
    let f = api.execute_async?;
    // SAFETY: a live graph and a live stream of this driver, kept live for
    // the call by the tokens' borrow of the table. The replay reads no host
    // memory: the runtime copied every captured task's host arguments at
    // capture. That the device ranges its tasks name are still allocated
    // when it runs on the device is the `Driver::graph_launch` caller's
    // contract, as it is `Driver::copy_async`'s for its ranges.
    let rc = unsafe { f(g.ptr().get(), s.ptr().get()) };
    Some(check(api, "aclmdlRIExecuteAsync", rc))
}

/// `aclmdlRIDestroy`. The graph's entry, taken out of the table, is
/// consumed; on failure (a replay still running, say) it is handed back.
/// `Err(entry, None)` without the symbol.
pub(in crate::driver::acl) fn model_destroy(
    api: &Api,
    g: GraphEntry,
) -> Result<(), (GraphEntry, Option<Failed>)> {
    let Some(f) = api.model_destroy else {
        return Err((g, None));
    };
    // SAFETY: a live graph of this driver, taken out of the table by the
    // caller (nothing can launch it any more): destroyed once.
    let rc = unsafe { f(g.live().ptr().get()) };
    check(api, "aclmdlRIDestroy", rc).map_err(|e| (g, Some(e)))
}
