//! What every wrapper is made of: handles and addresses for C, timeouts in
//! whole milliseconds, the table's locks, return codes turned into
//! [`DriverError`]s with the runtime's message, and raw status queries.

use std::ffi::{CStr, c_void};
use std::ptr::without_provenance_mut;
use std::sync::{PoisonError, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use super::AclDriver;
use super::codes::{self, ACL_ERROR_RT_EVENT_NOT_COMPLETE, ACL_ERROR_RT_STREAM_NOT_COMPLETE};
use super::ffi::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ACL_STREAM_STATUS_COMPLETE, ACL_STREAM_STATUS_NOT_READY,
};
use super::table::Table;
use crate::driver::{Completion, DriverError, DriverErrorKind, Native, Op};

pub(super) fn handle(addr: u64) -> *mut c_void {
    // Runtime handles and device addresses are opaque to Rust: never
    // dereferenced here, so they carry no provenance.
    without_provenance_mut(usize::try_from(addr).unwrap_or(usize::MAX))
}

pub(super) fn addr(p: *mut c_void) -> u64 {
    p.addr() as u64
}

/// Timeout in whole milliseconds for the C API: rounded up, at least 1 (the
/// runtime rejects 0), at most `i32::MAX`.
pub(super) fn millis(t: Duration) -> i32 {
    i32::try_from(t.as_micros().div_ceil(1000).max(1)).unwrap_or(i32::MAX)
}

/// An elapsed time the runtime reported, in ms, as a `Duration`.
pub(super) fn elapsed_of(ms: f32) -> Result<Duration, &'static str> {
    if ms.is_nan() {
        return Err("elapsed time is NaN");
    }
    if ms < 0.0 {
        return Err("elapsed time is negative (end recorded before start?)");
    }
    Duration::try_from_secs_f64(f64::from(ms) / 1000.0)
        .map_err(|_| "elapsed time is infinite or too large")
}

impl AclDriver {
    /// The runtime's last error message on this thread, if it offers one.
    fn recent_message(&self) -> Option<String> {
        let f = self.api.recent_err_msg?;
        // SAFETY: no arguments; returns NULL or a NUL-terminated string that
        // stays valid until the next call on this thread. It is copied at once.
        let p = unsafe { f() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-NULL and NUL-terminated per the API contract (above).
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        (!s.is_empty()).then_some(s)
    }

    pub(super) fn fail(&self, op: Op, api: &'static str, code: i32) -> DriverError {
        let native = Native {
            api,
            code,
            message: self.recent_message(),
        };
        DriverError::with_native(op, codes::kind_of(code), native)
    }

    pub(super) fn check(&self, op: Op, api: &'static str, code: i32) -> Result<(), DriverError> {
        if code == 0 {
            Ok(())
        } else {
            Err(self.fail(op, api, code))
        }
    }

    /// A failure whose kind the caller knows better than the code table
    /// (a timeout with its wait, an allocation with its size).
    pub(super) fn fail_as(
        &self,
        op: Op,
        api: &'static str,
        code: i32,
        kind: DriverErrorKind,
    ) -> DriverError {
        let native = Native {
            api,
            code,
            message: self.recent_message(),
        };
        DriverError::with_native(op, kind, native)
    }

    // ----- locks ------------------------------------------------------------

    pub(super) fn read(&self) -> RwLockReadGuard<'_, Table> {
        // Nothing panics while the table is locked; if something did, the
        // table is still what this driver knows.
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    // ----- queries without the lock's bookkeeping ---------------------------

    pub(super) fn query_event_raw(&self, op: Op, event: u64) -> Result<Completion, DriverError> {
        let mut status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
        // SAFETY: `status` is a valid out-pointer; the event was validated
        // against the table by the caller, who keeps it from being destroyed
        // (read lock or waiter mark) for the call.
        let rc = unsafe { (self.api.query_event_status)(handle(event), &raw mut status) };
        match rc {
            0 if status == ACL_EVENT_RECORDED_STATUS_COMPLETE => Ok(Completion::Complete),
            0 | ACL_ERROR_RT_EVENT_NOT_COMPLETE => Ok(Completion::NotReady),
            _ => Err(self.fail(op, "aclrtQueryEventStatus", rc)),
        }
    }

    pub(super) fn query_stream_raw(&self, op: Op, stream: u64) -> Result<Completion, DriverError> {
        let mut status = ACL_STREAM_STATUS_NOT_READY;
        // SAFETY: `status` is a valid out-pointer; the stream was validated
        // by the caller, who keeps it from being destroyed for the call.
        let rc = unsafe { (self.api.stream_query)(handle(stream), &raw mut status) };
        match rc {
            0 if status == ACL_STREAM_STATUS_COMPLETE => Ok(Completion::Complete),
            0 | ACL_ERROR_RT_STREAM_NOT_COMPLETE => Ok(Completion::NotReady),
            _ => Err(self.fail(op, "aclrtStreamQuery", rc)),
        }
    }

    pub(super) fn block_dim_ok(&self, op: Op, block_dim: u32) -> Result<(), DriverError> {
        if block_dim == 0 || block_dim > self.max_block_dim {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "block_dim is 0 or above the device maximum",
                },
            ));
        }
        Ok(())
    }
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

    #[test]
    fn elapsed_times_from_the_runtime_never_panic() {
        assert_eq!(elapsed_of(1.5), Ok(Duration::from_micros(1500)));
        assert_eq!(elapsed_of(0.0), Ok(Duration::ZERO));
        for bad in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1.0,
            f32::MAX,
            f32::MIN,
        ] {
            assert!(elapsed_of(bad).is_err(), "{bad}");
        }
        assert!(elapsed_of(1e15).is_ok(), "large but representable");
    }
}
