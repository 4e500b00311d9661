//! ACL / libruntime return codes and what they mean to the driver. One error
//! space covers both libraries (the rt* entry points return the public
//! `ACL_ERROR_RT_*` numbers), and one table covers both directions: the
//! driver reads codes with [`kind_of`], the fake runtime library writes them
//! with [`code_of`], so the two cannot drift apart.
//!
//! Every value was read from `acl_base_rt.h` and `error_codes/rt_error_codes.h`
//! of CANN 8.5 – 9.2 (identical in all of them).

use crate::driver::{DriverErrorKind, FaultKind};

/// `aclInit` called again: treated as success.
pub const ACL_ERROR_REPEAT_INITIALIZE: i32 = 100_002;
/// An invalid parameter, as the runtime's own checks report it (also what
/// a timeout of 0 gets from `aclrtSynchronize*WithTimeout`).
pub const ACL_ERROR_RT_PARAM_INVALID: i32 = 107_000;
/// The calling thread has no device context.
pub const ACL_ERROR_RT_CONTEXT_NULL: i32 = 107_002;
/// The stream belongs to another context than the calling thread's.
pub const ACL_ERROR_RT_STREAM_CONTEXT: i32 = 107_003;
/// The feature (or API) is not supported by this runtime or device.
pub const ACL_ERROR_RT_FEATURE_NOT_SUPPORT: i32 = 207_000;
/// `rtStreamQuery`: not complete yet (not an error).
pub const ACL_ERROR_RT_STREAM_NOT_COMPLETE: i32 = 507_004;
/// `rtEventQuery`: not complete yet (not an error).
pub const ACL_ERROR_RT_EVENT_NOT_COMPLETE: i32 = 507_006;
/// Stream synchronize timed out.
pub const ACL_ERROR_RT_STREAM_SYNC_TIMEOUT: i32 = 507_046;
/// Event synchronize timed out.
pub const ACL_ERROR_RT_EVENT_SYNC_TIMEOUT: i32 = 507_047;
/// `rtRegisterAllKernel`: the runtime holds as many registered programs as
/// it can ("program register num use out").
pub const ACL_ERROR_RT_PROGRAM_USE_OUT: i32 = 507_032;
/// ACL's own parameter check refused an argument (`acl_base_rt.h`): what
/// `aclrtProcessReport` returns for a timeout of 0 or below -1, and
/// `aclrtLaunchCallback` for an unknown block type.
pub const ACL_ERROR_INVALID_PARAM: i32 = 100_000;
/// The stream's callback subscription does not allow it ("error subscribe
/// stream"): `aclrtSubscribeReport` of a stream that already has a
/// subscribed thread, `aclrtUnSubscribeReport` of one that has none.
pub const ACL_ERROR_RT_STREAM_SUBSCRIBE: i32 = 107_011;
/// The thread's callback subscription does not allow it ("error subscribe
/// thread"): `aclrtProcessReport` on a thread no stream is subscribed to,
/// `aclrtSubscribeReport` of a thread that already serves another device,
/// `aclrtUnSubscribeReport` by another thread than the stream's.
pub const ACL_ERROR_RT_THREAD_SUBSCRIBE: i32 = 107_012;
/// `aclrtLaunchCallback` on a stream no thread is subscribed to ("callback
/// not register to stream").
pub const ACL_ERROR_RT_STREAM_NO_CB_REG: i32 = 107_015;
/// `aclrtProcessReport`: no callback was due within the timeout (an
/// answer, not an error).
pub const ACL_ERROR_RT_REPORT_TIMEOUT: i32 = 507_012;

/// The named codes and their meaning (see [`named`]).
const NAMED: &[(i32, &str)] = &[
    (100_000, "ACL_ERROR_INVALID_PARAM"),
    (107_000, "ACL_ERROR_RT_PARAM_INVALID"),
    (107_002, "ACL_ERROR_RT_CONTEXT_NULL"),
    (107_003, "ACL_ERROR_RT_STREAM_CONTEXT"),
    (107_022, "ACL_ERROR_RT_DEVICE_TASK_ABORT"),
    (107_023, "ACL_ERROR_RT_STREAM_ABORT"),
    (200_000, "ACL_ERROR_BAD_ALLOC"),
    (200_001, "ACL_ERROR_API_NOT_SUPPORT"),
    (207_000, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT"),
    (207_001, "ACL_ERROR_RT_MEMORY_ALLOCATION"),
    (207_007, "ACL_ERROR_RT_NO_EVENT_RESOURCE"),
    (207_008, "ACL_ERROR_RT_NO_STREAM_RESOURCE"),
    (207_018, "ACL_ERROR_RT_DEVICE_OOM"),
    (507_004, "ACL_ERROR_RT_STREAM_NOT_COMPLETE"),
    (507_006, "ACL_ERROR_RT_EVENT_NOT_COMPLETE"),
    (507_014, "ACL_ERROR_RT_AICORE_TIMEOUT"),
    (507_015, "ACL_ERROR_RT_AICORE_EXCEPTION"),
    (507_016, "ACL_ERROR_RT_AICORE_TRAP_EXCEPTION"),
    (507_017, "ACL_ERROR_RT_AICPU_TIMEOUT"),
    (507_018, "ACL_ERROR_RT_AICPU_EXCEPTION"),
    (507_032, "ACL_ERROR_RT_PROGRAM_USE_OUT"),
    (507_034, "ACL_ERROR_RT_VECTOR_CORE_TIMEOUT"),
    (507_035, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION"),
    (507_036, "ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION"),
    (507_042, "ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW"),
    (507_043, "ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW"),
    (507_044, "ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW"),
    (507_045, "ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW"),
    (507_046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"),
    (507_047, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT"),
    (507_048, "ACL_ERROR_RT_FFTS_PLUS_TIMEOUT"),
    (507_049, "ACL_ERROR_RT_FFTS_PLUS_EXCEPTION"),
    (507_050, "ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION"),
    (507_899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR"),
    (507_901, "ACL_ERROR_RT_SOCKET_CLOSE"),
];

/// Every code this table names, with its name, in ascending order of
/// code; the table grows as CANN adds codes.
///
/// ```
/// use runclaim::driver::acl::codes::named;
///
/// assert!(named().any(|(code, name)| code == 507_047 && name == "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT"));
/// ```
pub fn named() -> impl Iterator<Item = (i32, &'static str)> {
    NAMED.iter().copied()
}

/// The name of a code this table names, if it has one.
///
/// ```
/// use runclaim::driver::acl::codes::name_of;
///
/// assert_eq!(name_of(207_018), Some("ACL_ERROR_RT_DEVICE_OOM"));
/// assert_eq!(name_of(1), None);
/// ```
#[must_use]
pub fn name_of(code: i32) -> Option<&'static str> {
    NAMED.iter().find(|&&(c, _)| c == code).map(|&(_, n)| n)
}

/// What a non-zero code means. Timeouts carry no duration and
/// `CodeMemoryFull` no capacity here; the caller that knows them fills them
/// in.
#[must_use]
pub fn kind_of(code: i32) -> DriverErrorKind {
    match code {
        100_000 | 107_000 => DriverErrorKind::InvalidArgument {
            what: "rejected by the runtime as an invalid parameter",
        },
        107_002 => DriverErrorKind::NoContext,
        107_003 => DriverErrorKind::ContextMismatch,
        107_022 | 107_023 => DriverErrorKind::KernelFault(FaultKind::Collateral),
        200_000 | 207_001 | 207_018 => DriverErrorKind::OutOfMemory { bytes: 0 },
        200_001 | 207_000 => DriverErrorKind::Unsupported,
        207_007 => DriverErrorKind::NoResource { what: "event" },
        207_008 => DriverErrorKind::NoResource { what: "stream" },
        507_004 | 507_006 | 507_046 | 507_047 => DriverErrorKind::Timeout {
            waited: std::time::Duration::ZERO,
        },
        507_014 => DriverErrorKind::KernelFault(FaultKind::AicoreTimeout),
        507_015 | 507_016 | 507_042 | 507_043 => {
            DriverErrorKind::KernelFault(FaultKind::AicoreException)
        }
        507_017 => DriverErrorKind::KernelFault(FaultKind::AicpuTimeout),
        507_018 => DriverErrorKind::KernelFault(FaultKind::AicpuException),
        507_032 => DriverErrorKind::CodeMemoryFull { capacity: 0 },
        507_034 => DriverErrorKind::KernelFault(FaultKind::VectorCoreTimeout),
        507_035 | 507_036 | 507_044 | 507_045 => {
            DriverErrorKind::KernelFault(FaultKind::VectorCoreException)
        }
        507_048 => DriverErrorKind::KernelFault(FaultKind::FftsPlusTimeout),
        507_049 | 507_050 => DriverErrorKind::KernelFault(FaultKind::FftsPlusException),
        507_899 | 507_901 => DriverErrorKind::DeviceLost,
        _ => DriverErrorKind::Unknown,
    }
}

/// What a call waits on when it waits: a stream (its queued work) or an
/// event (its recorded work). It decides which code a timeout is reported
/// as: `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` or `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// A stream: stream calls, and calls that are not about events.
    Stream,
    /// An event.
    Event,
}

/// The code a simulated failure is reported as (the fake library's side of
/// the same table), by a call that waits on `waited`.
///
/// ```
/// use runclaim::driver::DriverErrorKind;
/// use runclaim::driver::acl::codes::{Waited, code_of};
///
/// let timeout = DriverErrorKind::Timeout { waited: std::time::Duration::ZERO };
/// assert_eq!(code_of(&timeout, Waited::Stream), 507_046);
/// assert_eq!(code_of(&timeout, Waited::Event), 507_047);
/// ```
#[must_use]
pub fn code_of(kind: &DriverErrorKind, waited: Waited) -> i32 {
    match kind {
        DriverErrorKind::InvalidArgument { .. }
        | DriverErrorKind::InvalidCode { .. }
        | DriverErrorKind::BadHandle { .. }
        | DriverErrorKind::BadAddress { .. } => ACL_ERROR_RT_PARAM_INVALID,
        DriverErrorKind::NoContext => ACL_ERROR_RT_CONTEXT_NULL,
        DriverErrorKind::ContextMismatch => ACL_ERROR_RT_STREAM_CONTEXT,
        DriverErrorKind::OutOfMemory { .. } => 207_001,
        DriverErrorKind::NoResource { what: "event" } => 207_007,
        DriverErrorKind::NoResource { what: "stream" } => 207_008,
        // ACL_ERROR_RT_RESOURCE_ALLOC_FAIL
        DriverErrorKind::NoResource { .. } => 207_005,
        DriverErrorKind::Unsupported => ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        DriverErrorKind::CodeMemoryFull { .. } => ACL_ERROR_RT_PROGRAM_USE_OUT,
        DriverErrorKind::Timeout { .. } if waited == Waited::Event => {
            ACL_ERROR_RT_EVENT_SYNC_TIMEOUT
        }
        DriverErrorKind::Timeout { .. } => ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
        DriverErrorKind::KernelFault(FaultKind::AicoreTimeout) => 507_014,
        DriverErrorKind::KernelFault(FaultKind::AicoreException) => 507_015,
        DriverErrorKind::KernelFault(FaultKind::AicpuTimeout) => 507_017,
        DriverErrorKind::KernelFault(FaultKind::AicpuException) => 507_018,
        DriverErrorKind::KernelFault(FaultKind::VectorCoreTimeout) => 507_034,
        DriverErrorKind::KernelFault(FaultKind::VectorCoreException) => 507_035,
        DriverErrorKind::KernelFault(FaultKind::FftsPlusTimeout) => 507_048,
        DriverErrorKind::KernelFault(FaultKind::FftsPlusException) => 507_049,
        DriverErrorKind::KernelFault(_) => 107_022,
        DriverErrorKind::DeviceLost => 507_899,
        // Injected call failures, full queues, busy streams, unusable
        // results: a generic runtime failure (ACL_ERROR_RT_INTERNAL_ERROR).
        _ => 507_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_has_a_named_meaning() {
        for &(code, name) in NAMED {
            assert_ne!(kind_of(code), DriverErrorKind::Unknown, "{name} ({code})");
        }
        assert_eq!(kind_of(123_456), DriverErrorKind::Unknown);
        assert_eq!(kind_of(507_000), DriverErrorKind::Unknown);
    }

    #[test]
    fn fault_and_resource_codes_of_the_headers_are_named_and_not_unknown() {
        // Kernel-fault, trap, FFTS+, abort, context and resource codes of
        // `acl/error_codes/rt_error_codes.h`: each has a name and a meaning
        // other than `Unknown`.
        for code in [
            207_018, 507_034, 507_016, 507_036, 507_042, 507_043, 507_044, 507_045, 507_048,
            507_049, 507_050, 107_023, 107_003, 207_007, 207_008,
        ] {
            assert!(name_of(code).is_some(), "{code} is in NAMED");
            assert_ne!(kind_of(code), DriverErrorKind::Unknown, "{code}");
        }
        assert_eq!(kind_of(207_018), DriverErrorKind::OutOfMemory { bytes: 0 });
        assert_eq!(
            kind_of(507_034),
            DriverErrorKind::KernelFault(FaultKind::VectorCoreTimeout)
        );
    }

    #[test]
    fn codes_round_trip_through_both_tables() {
        for &(code, name) in NAMED {
            let k = kind_of(code);
            let waited = if code == 507_047 || code == 507_006 {
                Waited::Event
            } else {
                Waited::Stream
            };
            let back = code_of(&k, waited);
            assert_eq!(kind_of(back), k, "{name}");
        }
        assert!(
            kind_of(507_899) == DriverErrorKind::DeviceLost
                && kind_of(507_901) == DriverErrorKind::DeviceLost
        );
    }
}
