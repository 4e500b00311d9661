//! ACL / libruntime return codes and what they mean to the driver. One error
//! space covers both libraries (the rt* entry points return the public
//! `ACL_ERROR_RT_*` numbers).

use crate::driver::{ErrorKind, FaultKind};

/// `aclInit` called again: treated as success.
pub const ACL_ERROR_REPEAT_INITIALIZE: i32 = 100_002;
/// `rtStreamQuery`: not complete yet (not an error).
pub const ACL_ERROR_RT_STREAM_NOT_COMPLETE: i32 = 507_004;
/// `rtEventQuery`: not complete yet (not an error).
pub const ACL_ERROR_RT_EVENT_NOT_COMPLETE: i32 = 507_006;

/// The named codes and their meaning, for documentation and tests.
pub const NAMED: &[(i32, &str)] = &[
    (100_000, "ACL_ERROR_INVALID_PARAM"),
    (107_000, "ACL_ERROR_RT_PARAM_INVALID"),
    (107_002, "ACL_ERROR_RT_CONTEXT_NULL"),
    (107_022, "ACL_ERROR_RT_DEVICE_TASK_ABORT"),
    (200_000, "ACL_ERROR_BAD_ALLOC"),
    (200_001, "ACL_ERROR_API_NOT_SUPPORT"),
    (207_000, "ACL_ERROR_RT_FEATURE_NOT_SUPPORT"),
    (207_001, "ACL_ERROR_RT_MEMORY_ALLOCATION"),
    (507_004, "ACL_ERROR_RT_STREAM_NOT_COMPLETE"),
    (507_006, "ACL_ERROR_RT_EVENT_NOT_COMPLETE"),
    (507_014, "ACL_ERROR_RT_AICORE_TIMEOUT"),
    (507_015, "ACL_ERROR_RT_AICORE_EXCEPTION"),
    (507_017, "ACL_ERROR_RT_AICPU_TIMEOUT"),
    (507_018, "ACL_ERROR_RT_AICPU_EXCEPTION"),
    (507_035, "ACL_ERROR_RT_VECTOR_CORE_EXCEPTION"),
    (507_046, "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT"),
    (507_047, "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT"),
    (507_899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR"),
    (507_901, "ACL_ERROR_RT_SOCKET_CLOSE"),
];

/// What a non-zero code means. Timeouts carry no duration here; the caller
/// that knows the wait fills it in.
#[must_use]
pub fn kind_of(code: i32) -> ErrorKind {
    match code {
        100_000 | 107_000 => ErrorKind::InvalidArgument {
            what: "rejected by the runtime as an invalid parameter",
        },
        107_002 => ErrorKind::NoContext,
        107_022 => ErrorKind::KernelFault(FaultKind::Collateral),
        200_000 | 207_001 => ErrorKind::OutOfMemory { bytes: 0 },
        200_001 | 207_000 => ErrorKind::Unsupported,
        507_004 | 507_006 | 507_046 | 507_047 => ErrorKind::Timeout {
            waited: std::time::Duration::ZERO,
        },
        507_014 => ErrorKind::KernelFault(FaultKind::AicoreTimeout),
        507_015 => ErrorKind::KernelFault(FaultKind::AicoreException),
        507_017 => ErrorKind::KernelFault(FaultKind::AicpuTimeout),
        507_018 => ErrorKind::KernelFault(FaultKind::AicpuException),
        507_035 => ErrorKind::KernelFault(FaultKind::VectorCoreException),
        507_899 | 507_901 => ErrorKind::DeviceLost,
        _ => ErrorKind::Unknown,
    }
}

/// The code a simulated failure is reported as (the fake library's side of
/// the same table).
#[must_use]
pub fn code_of(kind: &ErrorKind, is_event: bool) -> i32 {
    match kind {
        ErrorKind::InvalidArgument { .. }
        | ErrorKind::InvalidCode { .. }
        | ErrorKind::BadHandle { .. }
        | ErrorKind::BadAddress { .. } => 107_000,
        ErrorKind::NoContext => 107_002,
        ErrorKind::OutOfMemory { .. } => 207_001,
        ErrorKind::Unsupported => 207_000,
        ErrorKind::Timeout { .. } if is_event => 507_047,
        ErrorKind::Timeout { .. } => 507_046,
        ErrorKind::KernelFault(FaultKind::AicoreTimeout) => 507_014,
        ErrorKind::KernelFault(FaultKind::AicoreException) => 507_015,
        ErrorKind::KernelFault(FaultKind::AicpuTimeout) => 507_017,
        ErrorKind::KernelFault(FaultKind::AicpuException) => 507_018,
        ErrorKind::KernelFault(FaultKind::VectorCoreException) => 507_035,
        ErrorKind::KernelFault(_) => 107_022,
        ErrorKind::DeviceLost => 507_899,
        // Injected call failures, full queues, busy streams: a generic
        // runtime failure (ACL_ERROR_RT_INTERNAL_ERROR).
        _ => 507_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_code_has_a_named_meaning() {
        for &(code, name) in NAMED {
            assert_ne!(kind_of(code), ErrorKind::Unknown, "{name} ({code})");
        }
        assert_eq!(kind_of(123_456), ErrorKind::Unknown);
        assert_eq!(kind_of(507_000), ErrorKind::Unknown);
    }

    #[test]
    fn codes_round_trip_through_both_tables() {
        for &(code, name) in NAMED {
            let k = kind_of(code);
            let back = code_of(&k, code == 507_047 || code == 507_006);
            assert_eq!(kind_of(back), k, "{name}");
        }
        assert!(
            kind_of(507_899) == ErrorKind::DeviceLost && kind_of(507_901) == ErrorKind::DeviceLost
        );
    }
}
