//! Stream capture: `aclmdlRICaptureBegin`, `aclmdlRICaptureGetInfo`,
//! `aclmdlRICaptureEnd`, `aclmdlRIExecuteAsync` and `aclmdlRIDestroy`,
//! forwarded to the device's simulator (its `Driver` capture methods,
//! whose rules are the runtime's; see `runclaim::sim`'s capture module).
//! Optional symbols: absent from the lite variant, so a driver that loads
//! it has no capture.
//!
//! Each rule is refused with the code the runtime returns for it — the
//! code table's `code_of`, the reverse of how the acl driver reads it —
//! and enforced where the runtime enforces it (`hicann/runtime`):
//!
//! | rule | code | where the runtime refuses |
//! |---|---|---|
//! | `AlreadyCapturing`: begin on a capturing stream | 107027 | `Context::StreamBeginCapture`, `src/runtime/feature/aclgraph/context_aclgraph.cc` (`status != RT_STREAM_CAPTURE_STATUS_NONE`) |
//! | `AlreadyCapturing`: a graph launched on a capturing stream | 107027 | `ApiErrorDecorator::ModelExecute`, `src/runtime/api/impl/api_error.cc` |
//! | `NotCapturing`: end on a stream that is not capturing | 107029 | `Context::StreamEndCapture`, `context_aclgraph.cc` (`RT_ERROR_STREAM_NOT_CAPTURED`) |
//! | `NotCapturing`: end on a stream that joined, not the origin | 107036 | `Context::StreamEndCapture` (`!IsOrigCaptureStream()`, `RT_ERROR_STREAM_CAPTURE_UNMATCHED`) |
//! | `Unjoined`: end with a joined stream not joined back | 107025 | `Context::CheckCaptureModelValidity`, `context_aclgraph.cc` (`RT_ERROR_STREAM_UNJOINED`) |
//! | `OutsideDependency`: a captured wait on an event recorded outside | 107024 | `ApiImpl::StreamWaitEvent`, `src/runtime/api/impl/api_impl.cc` (`RT_ERROR_STREAM_CAPTURE_ISOLATION`, reported as `ACL_ERROR_RT_CAPTURE_DEPENDENCY` by `src/runtime/core/src/common/errcode_manage.cc`) |
//! | `SyncWhileCapturing`: a stream sync or query | 107027 | `ApiErrorDecorator::StreamSynchronize` / `StreamQuery`, `api_error.cc` (`streams.rs`'s `stream_code`) |
//! | `SyncWhileCapturing`: an event sync or query on a captured event | 107028 | `ApiErrorDecorator::EventSynchronize` / `EventQueryStatus`, `api_error.cc` (`RT_ERROR_EVENT_CAPTURED`) |
//! | `GraphRunning`: destroy while a replay runs | 107037 | `Context::ModelDestroy`, `src/runtime/core/src/context/context.cc` (`IsCaptureModelRunning()`) |
//! | `NotCapturable` | 207000 | `rtStreamBeginCapture`, `src/runtime/api/api_c_standard_soc.cc` (a chip without ACL graphs); the simulator captures every stream, so the fake never refuses so |
//!
//! The ACL layer's own checks come first (`src/acl/aclrt_impl/model_ri.cpp`):
//! a NULL stream or graph is 100000 (`ACL_ERROR_INVALID_PARAM`), as is a
//! `aclmdlRICaptureGetInfo` with both out-pointers NULL; a mode outside
//! `aclmdlRICaptureMode` is 107000 (`ApiErrorDecorator::StreamBeginCapture`,
//! `src/runtime/feature/aclgraph/api_error_aclgraph.cc`).
//!
//! Where the fake is simpler than the runtime:
//!
//! - **Modes.** Every mode captures under the simulator's rules, which are
//!   thread-local mode's (a synchronous call on a capturing stream or a
//!   captured event, from any thread).
//! - **Status.** `aclmdlRICaptureGetInfo` answers `NONE` or `ACTIVE`: the
//!   simulator never invalidates a capture. Its model out-pointer gets
//!   NULL (the graph has no handle before the end).
//! - **Destroy.** The runtime waits up to 10 s for a running replay before
//!   it refuses; the fake waits as the simulator's `graph_destroy` does
//!   (bounded by the device watchdog, driving a stepped device while it
//!   waits), then refuses.

use std::ffi::{c_int, c_void};

use runclaim::driver::acl::codes::{AclError, Waited};
use runclaim::driver::{
    CaptureRule, Driver, DriverError, DriverErrorKind, GraphId, HandleKind, Op, StreamId,
};
use runclaim::sim::SimDriver;

use super::shim::{call, call_out, export, import, stream_of};
use super::{PARAM_INVALID, set_message};

/// `aclmdlRICaptureStatus`.
const STATUS_NONE: u32 = 0;
const STATUS_ACTIVE: u32 = 1;
/// `ACL_MODEL_RI_CAPTURE_MODE_RELAXED`, the last `aclmdlRICaptureMode`.
const MODE_RELAXED: u32 = 2;

/// The ACL layer's refusal of a NULL argument (`ACL_REQUIRES_NOT_NULL_WITH_INPUT_REPORT`).
fn null(what: &str) -> c_int {
    set_message(&format!("{what} must not be NULL"));
    AclError::ACL_ERROR_INVALID_PARAM
}

/// The graph a handle of `device` names.
fn graph_of(device: i32, op: Op, p: *mut c_void) -> Result<GraphId, DriverError> {
    import(device, p)
        .map(GraphId::from_raw)
        .ok_or(DriverError::new(
            op,
            DriverErrorKind::BadHandle {
                kind: HandleKind::Graph,
                raw: p.addr() as u64,
            },
        ))
}

/// Whether `s` captures: the simulator refuses a query of a capturing
/// stream (and only of one: it checks that before anything else of the
/// stream but its owner). The query is one simulator call, counted as
/// such.
fn capturing(sim: &SimDriver, s: StreamId) -> Result<bool, DriverError> {
    match sim.query_stream(s) {
        Err(e) if matches!(e.kind(), DriverErrorKind::Capture { .. }) => Ok(true),
        Err(e) if matches!(e.kind(), DriverErrorKind::BadHandle { .. }) => Err(e),
        _ => Ok(false),
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICaptureBegin(stm: *mut c_void, mode: u32) -> c_int {
    if stm.is_null() {
        return null("stream");
    }
    if mode > MODE_RELAXED {
        set_message(&format!(
            "capture mode {mode} is not an aclmdlRICaptureMode"
        ));
        return PARAM_INVALID;
    }
    call(Waited::Stream, |id, s| {
        s.capture_begin(stream_of(id, Op::CaptureBegin, stm)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICaptureGetInfo(
    stm: *mut c_void,
    status: *mut u32,
    model: *mut *mut c_void,
) -> c_int {
    if stm.is_null() {
        return null("stream");
    }
    if status.is_null() && model.is_null() {
        return null("status and modelRI (both)");
    }
    let mut answer = STATUS_NONE;
    let rc = call(Waited::Stream, |id, s| {
        let st = stream_of(id, Op::QueryStream, stm)?;
        if capturing(s, st)? {
            answer = STATUS_ACTIVE;
        }
        Ok(())
    });
    if rc == 0 {
        if !status.is_null() {
            // SAFETY: non-NULL, and per the ACL API writable for one status.
            unsafe { status.write(answer) };
        }
        if !model.is_null() {
            // SAFETY: non-NULL, and per the ACL API writable for one handle.
            unsafe { model.write(std::ptr::null_mut()) };
        }
    }
    rc
}

/// A failed end's code: a `NotCapturing` end on a stream that still
/// captures is one that joined the capture, not its origin (107036).
fn end_code(sim: &SimDriver, id: i32, stm: *mut c_void, e: &DriverError) -> Option<c_int> {
    let not_capturing = DriverErrorKind::Capture {
        rule: CaptureRule::NotCapturing,
    };
    if e.kind() != &not_capturing {
        return None;
    }
    let st = stream_of(id, Op::CaptureEnd, stm).ok()?;
    capturing(sim, st)
        .ok()?
        .then_some(AclError::ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICaptureEnd(stm: *mut c_void, model: *mut *mut c_void) -> c_int {
    if stm.is_null() {
        return null("stream");
    }
    let mut unmatched = None;
    // SAFETY: `model` is the caller's out-pointer (ACL contract; NULL is
    // refused).
    let rc = unsafe {
        call_out(model, Waited::Stream, |id, s| {
            s.capture_end(stream_of(id, Op::CaptureEnd, stm)?)
                .map(|g| export(id, g.raw()))
                .inspect_err(|e| unmatched = end_code(s, id, stm, e))
        })
    };
    unmatched.unwrap_or(rc)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIExecuteAsync(model: *mut c_void, stm: *mut c_void) -> c_int {
    if model.is_null() {
        return null("modelRI");
    }
    call(Waited::Stream, |id, s| {
        let g = graph_of(id, Op::GraphLaunch, model)?;
        s.graph_launch(g, stream_of(id, Op::GraphLaunch, stm)?)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIDestroy(model: *mut c_void) -> c_int {
    if model.is_null() {
        return null("modelRI");
    }
    call(Waited::Stream, |id, s| {
        s.graph_destroy(graph_of(id, Op::GraphDestroy, model)?)
    })
}
