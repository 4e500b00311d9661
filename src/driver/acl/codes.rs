//! ACL / libruntime return codes and what they mean to the driver. One error
//! space covers both libraries (the rt* entry points return the public
//! `ACL_ERROR_RT_*` numbers), and **one table** below lists every code once:
//! its number, its header name, what the driver reads it as, and for which
//! errors the fake runtime library reports it. Every direction is derived
//! from that table — the constants on [`AclError`], [`named`] and
//! [`name_of`], [`kind_of`] (the driver reading a code) and [`code_of`]
//! (the fake writing one) — so none can drift from another.
//!
//! Every value was read from `acl_base_rt.h` and `error_codes/rt_error_codes.h`
//! of CANN 8.5 – 9.2 (identical in all of them).
//!
//! ```
//! use runclaim::driver::{DriverErrorKind, Resource};
//! use runclaim::driver::acl::codes::{AclError, Waited, code_of, kind_of, name_of};
//!
//! let kind = kind_of(AclError::ACL_ERROR_RT_NO_STREAM_RESOURCE);
//! assert_eq!(kind, DriverErrorKind::NoResource { what: Resource::Stream });
//! assert_eq!(code_of(&kind, Waited::Stream), 207_008);
//! assert_eq!(name_of(207_008), Some("ACL_ERROR_RT_NO_STREAM_RESOURCE"));
//! ```

use std::mem::discriminant;

use crate::driver::Resource;
use std::time::Duration;

use crate::driver::{CaptureRule as C, DriverErrorKind, DriverErrorKind as K, FaultKind as F};

/// What a code the runtime's own parameter check returns is read as.
const RUNTIME_PARAM: K = K::InvalidArgument {
    what: "rejected by the runtime as an invalid parameter",
};

/// A timeout or "not complete yet": the caller that knows the wait fills in
/// its duration.
const TIMEOUT: K = K::Timeout {
    waited: Duration::ZERO,
};

/// Out of device memory: the caller that knows the size fills it in.
const OOM: K = K::OutOfMemory { bytes: 0 };

/// What a code refused by a rule of stream capture is read as.
const fn capture(rule: C) -> K {
    K::Capture { rule }
}

/// One row of the table.
struct Row {
    code: i32,
    name: &'static str,
    /// What the driver reads the code as ([`kind_of`]); `Unknown` for an
    /// answer or a status some call reads itself, or a code with no more
    /// specific meaning.
    reads: K,
    /// For which errors the fake reports it ([`code_of`]).
    reported: For,
}

/// For which errors the fake runtime reports a code.
enum For {
    /// None: an alias of a code that is reported for its meaning, or an
    /// answer the fake writes where it answers so.
    None,
    /// The errors it reads as — for a fault that fault, for a resource that
    /// resource; other payloads (sizes, durations, texts) aside.
    Same,
    /// As [`For::Same`], from a call that waits on a stream or on an event.
    SameWaiting(Waited),
    /// Errors no row is reported for as [`For::Same`] which this accepts:
    /// the driver's own refusals, which no code reads as exactly.
    Also(fn(&K) -> bool),
    /// [`For::Same`], and [`For::Also`] for the errors this accepts: a code
    /// that one call reads as more than the table says (its result
    /// function knows better), reported for that meaning too.
    SameAlso(fn(&K) -> bool),
    /// Every error no other row is reported for.
    Rest,
}

/// The return codes of the ACL runtime this driver knows by name: each an
/// associated constant, named as the CANN headers spell it, whose value is
/// the `i32` an ACL call returns — what [`Native::code`] holds. The type is
/// C's `aclError` (`typedef int aclError`, the return type of every ACL
/// call) as a namespace: it has no values; its constants are plain `i32`s,
/// compared with a code or matched in a pattern.
///
/// ```
/// use runclaim::driver::Native;
/// use runclaim::driver::acl::codes::AclError;
///
/// let native = Native::new("aclrtSynchronizeStreamWithTimeout", 507_046, None);
/// let waited_too_long = match native.code {
///     AclError::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT | AclError::ACL_ERROR_RT_EVENT_SYNC_TIMEOUT => true,
///     _ => false,
/// };
/// assert!(waited_too_long);
/// assert_eq!(AclError::ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, 507_046);
/// ```
///
/// [`Native::code`]: crate::driver::Native::code
#[allow(
    clippy::empty_enums,
    reason = "a namespace for the table's constants, never a value: `!` cannot carry associated constants"
)]
pub enum AclError {}

/// The table: every code once, ascending; [`AclError`]'s constants are
/// made from it.
macro_rules! codes {
    ($(
        $(#[doc = $doc:literal])+
        $name:ident = $code:literal => $reads:expr, $reported:expr;
    )+) => {
        impl AclError {
            $(
                $(#[doc = $doc])+
                pub const $name: i32 = $code;
            )+
        }

        const TABLE: &[Row] = &[$(Row {
            code: AclError::$name,
            name: stringify!($name),
            reads: $reads,
            reported: $reported,
        }),+];
    };
}

codes! {
    /// ACL's own parameter check refused an argument (`acl_base_rt.h`): what
    /// `aclrtProcessReport` returns for a timeout of 0 or below -1, and
    /// `aclrtLaunchCallback` for an unknown block type.
    ACL_ERROR_INVALID_PARAM = 100_000 => RUNTIME_PARAM, For::None;
    /// `aclInit` called again: treated as success.
    ACL_ERROR_REPEAT_INITIALIZE = 100_002 => K::Unknown, For::None;
    /// An invalid parameter, as the runtime's own checks report it (also what
    /// a timeout of 0 gets from `aclrtSynchronize*WithTimeout`).
    ACL_ERROR_RT_PARAM_INVALID = 107_000 => RUNTIME_PARAM, For::Also(|k| matches!(
        k,
        K::InvalidArgument { .. } | K::InvalidCode { .. } | K::BadHandle { .. } | K::BadAddress { .. }
    ));
    /// The calling thread has no device context.
    ACL_ERROR_RT_CONTEXT_NULL = 107_002 => K::NoContext, For::Same;
    /// The stream belongs to another context than the calling thread's.
    ACL_ERROR_RT_STREAM_CONTEXT = 107_003 => K::ContextMismatch, For::Same;
    /// The stream's callback subscription does not allow it ("error subscribe
    /// stream"): `aclrtSubscribeReport` of a stream that already has a
    /// subscribed thread, `aclrtUnSubscribeReport` of one that has none.
    ACL_ERROR_RT_STREAM_SUBSCRIBE = 107_011 => K::Unknown, For::None;
    /// The thread's callback subscription does not allow it ("error subscribe
    /// thread"): `aclrtProcessReport` on a thread no stream is subscribed to,
    /// `aclrtSubscribeReport` of a thread that already serves another device,
    /// `aclrtUnSubscribeReport` by another thread than the stream's.
    ACL_ERROR_RT_THREAD_SUBSCRIBE = 107_012 => K::Unknown, For::None;
    /// `aclrtLaunchCallback` on a stream no thread is subscribed to ("callback
    /// not register to stream").
    ACL_ERROR_RT_STREAM_NO_CB_REG = 107_015 => K::Unknown, For::None;
    /// Work on the stream was abandoned because of an earlier fault.
    ACL_ERROR_RT_DEVICE_TASK_ABORT = 107_022 => K::KernelFault(F::Collateral), For::Same;
    /// The stream is being aborted.
    ACL_ERROR_RT_STREAM_ABORT = 107_023 => K::KernelFault(F::Collateral), For::None;
    /// A capturing stream waited for an event recorded outside its capture
    /// ("dependency created on uncaptured work in another stream").
    ACL_ERROR_RT_CAPTURE_DEPENDENCY = 107_024 => capture(C::OutsideDependency), For::Same;
    /// A stream that joined a capture was not joined back to its origin
    /// before the end.
    ACL_ERROR_RT_STREAM_UNJOINED = 107_025 => capture(C::Unjoined), For::Same;
    /// The stream is capturing: what a capture begun on it again, a graph
    /// launched or a stream destroyed on it gets. A stream sync or query
    /// gets it too, which its result function reads as
    /// [`CaptureRule::SyncWhileCapturing`](crate::driver::CaptureRule::SyncWhileCapturing).
    ACL_ERROR_RT_STREAM_CAPTURED = 107_027 => capture(C::AlreadyCapturing), For::Same;
    /// The event's last record is in an open capture: what an event sync,
    /// query, elapsed time or timestamp on it gets.
    ACL_ERROR_RT_EVENT_CAPTURED = 107_028 => capture(C::SyncWhileCapturing), For::SameWaiting(Waited::Event);
    /// The stream is not capturing (a capture ended on it).
    ACL_ERROR_RT_STREAM_NOT_CAPTURED = 107_029 => capture(C::NotCapturing), For::Same;
    /// A synchronous call the capture mode forbids while a capture is open
    /// (a synchronous copy or memset on the capturing thread).
    ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT = 107_030 => capture(C::SyncWhileCapturing), For::None;
    /// A capture ended on a stream that joined it, not on its origin.
    ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED = 107_036 => capture(C::NotCapturing), For::None;
    /// The graph is still running: it cannot be destroyed.
    ACL_ERROR_RT_MODEL_RUNNING = 107_037 => capture(C::GraphRunning), For::Same;
    /// A capture ended on another thread than the one that began it.
    ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD = 107_038 => K::Unknown, For::None;
    /// An asynchronous call the runtime made synchronous (a copy of pageable
    /// host memory) on a capturing stream.
    ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC = 107_041 => capture(C::SyncWhileCapturing), For::SameWaiting(Waited::Stream);
    /// ACL could not allocate memory.
    ACL_ERROR_BAD_ALLOC = 200_000 => OOM, For::None;
    /// The API is not supported.
    ACL_ERROR_API_NOT_SUPPORT = 200_001 => K::Unsupported, For::None;
    /// The feature (or API) is not supported by this runtime or device. From
    /// `aclmdlRICaptureBegin`: this stream cannot be captured (its result
    /// function reads it so), which is what the fake reports for it.
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT = 207_000 => K::Unsupported, For::SameAlso(|k| matches!(
        k,
        K::Capture { rule: C::NotCapturable }
    ));
    /// A device memory allocation failed.
    ACL_ERROR_RT_MEMORY_ALLOCATION = 207_001 => OOM, For::Same;
    /// A runtime resource could not be allocated (none more specific).
    ACL_ERROR_RT_RESOURCE_ALLOC_FAIL = 207_005 => K::Unknown, For::Also(|k| matches!(k, K::NoResource { .. }));
    /// The device has no event left.
    ACL_ERROR_RT_NO_EVENT_RESOURCE = 207_007 => K::NoResource { what: Resource::Event }, For::Same;
    /// The device has no stream left.
    ACL_ERROR_RT_NO_STREAM_RESOURCE = 207_008 => K::NoResource { what: Resource::Stream }, For::Same;
    /// The device is out of memory.
    ACL_ERROR_RT_DEVICE_OOM = 207_018 => OOM, For::None;
    /// A runtime failure with no more specific code.
    ACL_ERROR_RT_INTERNAL_ERROR = 507_000 => K::Unknown, For::Rest;
    /// `rtStreamQuery`: not complete yet (not an error).
    ACL_ERROR_RT_STREAM_NOT_COMPLETE = 507_004 => TIMEOUT, For::None;
    /// `rtEventQuery`: not complete yet (not an error).
    ACL_ERROR_RT_EVENT_NOT_COMPLETE = 507_006 => TIMEOUT, For::None;
    /// `aclrtProcessReport`: no callback was due within the timeout (an
    /// answer, not an error).
    ACL_ERROR_RT_REPORT_TIMEOUT = 507_012 => K::Unknown, For::None;
    /// An AICore kernel ran past the device watchdog.
    ACL_ERROR_RT_AICORE_TIMEOUT = 507_014 => K::KernelFault(F::AicoreTimeout), For::Same;
    /// An AICore kernel raised an exception.
    ACL_ERROR_RT_AICORE_EXCEPTION = 507_015 => K::KernelFault(F::AicoreException), For::Same;
    /// An AICore kernel trapped.
    ACL_ERROR_RT_AICORE_TRAP_EXCEPTION = 507_016 => K::KernelFault(F::AicoreException), For::None;
    /// An AICPU kernel ran past the device watchdog.
    ACL_ERROR_RT_AICPU_TIMEOUT = 507_017 => K::KernelFault(F::AicpuTimeout), For::Same;
    /// An AICPU kernel raised an exception.
    ACL_ERROR_RT_AICPU_EXCEPTION = 507_018 => K::KernelFault(F::AicpuException), For::Same;
    /// `rtRegisterAllKernel`: the runtime holds as many registered programs as
    /// it can ("program register num use out").
    ACL_ERROR_RT_PROGRAM_USE_OUT = 507_032 => K::CodeMemoryFull { capacity: 0 }, For::Same;
    /// A vector-core kernel ran past the device watchdog.
    ACL_ERROR_RT_VECTOR_CORE_TIMEOUT = 507_034 => K::KernelFault(F::VectorCoreTimeout), For::Same;
    /// A vector-core kernel raised an exception.
    ACL_ERROR_RT_VECTOR_CORE_EXCEPTION = 507_035 => K::KernelFault(F::VectorCoreException), For::Same;
    /// A vector-core kernel trapped.
    ACL_ERROR_RT_VECTOR_CORE_TRAP_EXCEPTION = 507_036 => K::KernelFault(F::VectorCoreException), For::None;
    /// An AICore kernel's read out of bounds was trapped.
    ACL_ERROR_RT_AICORE_TRAP_READ_OVERFLOW = 507_042 => K::KernelFault(F::AicoreException), For::None;
    /// An AICore kernel's write out of bounds was trapped.
    ACL_ERROR_RT_AICORE_TRAP_WRITE_OVERFLOW = 507_043 => K::KernelFault(F::AicoreException), For::None;
    /// A vector-core kernel's read out of bounds was trapped.
    ACL_ERROR_RT_VECTOR_CORE_TRAP_READ_OVERFLOW = 507_044 => K::KernelFault(F::VectorCoreException), For::None;
    /// A vector-core kernel's write out of bounds was trapped.
    ACL_ERROR_RT_VECTOR_CORE_TRAP_WRITE_OVERFLOW = 507_045 => K::KernelFault(F::VectorCoreException), For::None;
    /// Stream synchronize timed out.
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT = 507_046 => TIMEOUT, For::SameWaiting(Waited::Stream);
    /// Event synchronize timed out.
    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT = 507_047 => TIMEOUT, For::SameWaiting(Waited::Event);
    /// An FFTS+ task ran past the device watchdog.
    ACL_ERROR_RT_FFTS_PLUS_TIMEOUT = 507_048 => K::KernelFault(F::FftsPlusTimeout), For::Same;
    /// An FFTS+ task raised an exception.
    ACL_ERROR_RT_FFTS_PLUS_EXCEPTION = 507_049 => K::KernelFault(F::FftsPlusException), For::Same;
    /// An FFTS+ task trapped.
    ACL_ERROR_RT_FFTS_PLUS_TRAP_EXCEPTION = 507_050 => K::KernelFault(F::FftsPlusException), For::None;
    /// The device driver failed internally: the device is lost.
    ACL_ERROR_RT_DRV_INTERNAL_ERROR = 507_899 => K::DeviceLost, For::Same;
    /// The connection to the device closed: the device is lost.
    ACL_ERROR_RT_SOCKET_CLOSE = 507_901 => K::DeviceLost, For::None;
    /// An error inside the capture invalidated it: ending it clears it
    /// without a graph, as ending a stream that is not capturing gives none.
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED = 507_903 => capture(C::NotCapturing), For::None;
}

/// The row of `code`, if the table has one.
fn row(code: i32) -> Option<&'static Row> {
    TABLE.iter().find(|r| r.code == code)
}

/// Whether two kinds are the same as far as a return code can tell: the
/// same variant, and for a fault the same fault, for a resource the same
/// resource (no code carries a size, a duration, a handle or a text).
fn same_kind(a: &K, b: &K) -> bool {
    match (a, b) {
        (K::KernelFault(x), K::KernelFault(y)) => x == y,
        (K::NoResource { what: x }, K::NoResource { what: y }) => x == y,
        (K::Capture { rule: x }, K::Capture { rule: y }) => x == y,
        _ => discriminant(a) == discriminant(b),
    }
}

/// Every code this table names, with its name, in ascending order of
/// code; the table grows as CANN adds codes.
///
/// ```
/// use runclaim::driver::acl::codes::named;
///
/// assert!(named().any(|(code, name)| code == 507_047 && name == "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT"));
/// ```
pub fn named() -> impl Iterator<Item = (i32, &'static str)> {
    TABLE.iter().map(|r| (r.code, r.name))
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
    row(code).map(|r| r.name)
}

/// What a non-zero code means: `Unknown` for a code outside the table, and
/// for one with no more specific meaning (an answer some call reads
/// itself, such as [`AclError::ACL_ERROR_RT_REPORT_TIMEOUT`]). Timeouts carry no
/// duration, `OutOfMemory` no size and `CodeMemoryFull` no capacity here;
/// the caller that knows them fills them in.
///
/// ```
/// use runclaim::driver::{DriverErrorKind, FaultKind};
/// use runclaim::driver::acl::codes::kind_of;
///
/// assert_eq!(kind_of(507_016), DriverErrorKind::KernelFault(FaultKind::AicoreException));
/// assert_eq!(kind_of(123_456), DriverErrorKind::Unknown);
/// ```
#[must_use]
pub fn kind_of(code: i32) -> DriverErrorKind {
    row(code).map_or(K::Unknown, |r| r.reads.clone())
}

/// What a call waits on when it waits: a stream (its queued work) or an
/// event (its recorded work). It decides which code a timeout is reported
/// as: `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` or `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT`.
///
/// ```
/// use runclaim::driver::acl::codes::Waited;
///
/// assert_ne!(Waited::Stream, Waited::Event);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// A stream: stream calls, and calls that are not about events.
    Stream,
    /// An event.
    Event,
}

/// The code a simulated failure is reported as (the fake library's side of
/// the same table), by a call that waits on `waited`: the row reported for
/// what it reads as, else one reported for the driver's own refusals of
/// that kind, else `ACL_ERROR_RT_INTERNAL_ERROR` (injected call failures,
/// full queues, busy streams, unusable results).
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
    let same = |r: &&Row| match r.reported {
        For::Same | For::SameAlso(_) => same_kind(&r.reads, kind),
        For::SameWaiting(w) => w == waited && same_kind(&r.reads, kind),
        For::None | For::Also(_) | For::Rest => false,
    };
    let also = |r: &&Row| matches!(r.reported, For::Also(accepts) | For::SameAlso(accepts) if accepts(kind));
    let rest = |r: &&Row| matches!(r.reported, For::Rest);
    TABLE
        .iter()
        .find(same)
        .or_else(|| TABLE.iter().find(also))
        .or_else(|| TABLE.iter().find(rest))
        .map_or(AclError::ACL_ERROR_RT_INTERNAL_ERROR, |r| r.code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::HandleKind;

    /// The wait a row is reported for (a stream where it does not matter).
    fn waited(r: &Row) -> Waited {
        match r.reported {
            For::SameWaiting(w) => w,
            _ if r.code == AclError::ACL_ERROR_RT_EVENT_NOT_COMPLETE => Waited::Event,
            _ => Waited::Stream,
        }
    }

    #[test]
    fn every_row_round_trips() {
        for r in TABLE {
            let what = format!("{} ({})", r.name, r.code);
            // Code → name, code → kind: the row.
            assert_eq!(name_of(r.code), Some(r.name), "{what}");
            assert_eq!(kind_of(r.code), r.reads, "{what}");
            // Kind → code → kind: what it reads as comes back, through
            // this code where it is the one reported, else through the
            // code its meaning is reported as.
            let back = code_of(&r.reads, waited(r));
            assert!(same_kind(&kind_of(back), &r.reads), "{what} → {back}");
            assert_eq!(kind_of(back), r.reads, "{what} → {back}");
            if matches!(
                r.reported,
                For::Same | For::SameWaiting(_) | For::SameAlso(_)
            ) {
                assert_eq!(back, r.code, "{what} is the code of its meaning");
            }
        }
    }

    #[test]
    fn the_table_is_ascending_and_names_each_code_once() {
        for w in TABLE.windows(2) {
            assert!(w[0].code < w[1].code, "{} before {}", w[0].name, w[1].name);
        }
        let mut names: Vec<_> = named().map(|(_, n)| n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len());
        assert!(TABLE.iter().all(|r| r.name.starts_with("ACL_ERROR_")));
    }

    #[test]
    fn every_meaning_is_reported_as_one_code_that_reads_back_as_it() {
        // Exactly one row is reported for each meaning (per wait), so the
        // order of the rows decides nothing.
        for r in TABLE {
            for w in [Waited::Stream, Waited::Event] {
                let reporting = TABLE
                    .iter()
                    .filter(|x| match x.reported {
                        For::Same | For::SameAlso(_) => same_kind(&x.reads, &r.reads),
                        For::SameWaiting(v) => v == w && same_kind(&x.reads, &r.reads),
                        _ => false,
                    })
                    .count();
                assert!(reporting <= 1, "{}: {reporting} rows", r.name);
            }
        }
        assert_eq!(
            TABLE
                .iter()
                .filter(|r| matches!(r.reported, For::Rest))
                .count(),
            1
        );
        // Every fault, and the driver's own refusals, which no code reads
        // as exactly.
        for f in [
            F::AicoreTimeout,
            F::AicoreException,
            F::AicpuTimeout,
            F::AicpuException,
            F::VectorCoreException,
            F::Collateral,
            F::VectorCoreTimeout,
            F::FftsPlusTimeout,
            F::FftsPlusException,
        ] {
            let k = K::KernelFault(f);
            assert_eq!(kind_of(code_of(&k, Waited::Stream)), k, "{f}");
        }
        for k in [
            K::BadHandle {
                kind: HandleKind::Event,
                raw: 7,
            },
            K::BadAddress { addr: 1, len: 2 },
            K::InvalidCode { what: "not an ELF" },
            K::InvalidArgument { what: "block_dim" },
        ] {
            assert_eq!(
                code_of(&k, Waited::Event),
                AclError::ACL_ERROR_RT_PARAM_INVALID,
                "{k}"
            );
        }
        assert_eq!(
            code_of(
                &K::NoResource {
                    what: Resource::CallbackThread(crate::driver::ThreadTrouble::Spawn)
                },
                Waited::Stream
            ),
            AclError::ACL_ERROR_RT_RESOURCE_ALLOC_FAIL
        );
        for k in [
            K::QueueFull { capacity: 1 },
            K::StreamBusy { queued: None },
            K::InvalidResult { what: "NaN" },
            K::Injected { nth: 1 },
            K::Unknown,
        ] {
            assert_eq!(
                code_of(&k, Waited::Stream),
                AclError::ACL_ERROR_RT_INTERNAL_ERROR,
                "{k}"
            );
        }
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
            assert!(name_of(code).is_some(), "{code} is in the table");
            assert_ne!(kind_of(code), K::Unknown, "{code}");
        }
        assert_eq!(kind_of(207_018), K::OutOfMemory { bytes: 0 });
        assert_eq!(kind_of(507_034), K::KernelFault(F::VectorCoreTimeout));
        assert_eq!(kind_of(123_456), K::Unknown);
        assert_eq!(kind_of(507_000), K::Unknown);
        assert!(kind_of(507_899) == K::DeviceLost && kind_of(507_901) == K::DeviceLost);
    }

    #[test]
    fn every_capture_rule_is_reported_as_the_runtimes_code_and_reads_back() {
        // The code the fake reports for each rule (by what the call waits
        // on), as the runtime returns it (`rt_error_codes.h`).
        for (rule, stream, event) in [
            (C::OutsideDependency, 107_024, 107_024),
            (C::Unjoined, 107_025, 107_025),
            (C::AlreadyCapturing, 107_027, 107_027),
            (C::NotCapturing, 107_029, 107_029),
            (C::NotCapturable, 207_000, 207_000),
            (C::SyncWhileCapturing, 107_041, 107_028),
            (C::GraphRunning, 107_037, 107_037),
        ] {
            let k = K::Capture { rule };
            assert_eq!(code_of(&k, Waited::Stream), stream, "{rule:?}");
            assert_eq!(code_of(&k, Waited::Event), event, "{rule:?}");
        }
        // And what the driver reads each capture code as (207000 is read as
        // `NotCapturable` by `aclmdlRICaptureBegin`'s result function only,
        // 107027 as `SyncWhileCapturing` by the stream sync and query).
        for (code, rule) in [
            (107_024, C::OutsideDependency),
            (107_025, C::Unjoined),
            (107_027, C::AlreadyCapturing),
            (107_028, C::SyncWhileCapturing),
            (107_029, C::NotCapturing),
            (107_030, C::SyncWhileCapturing),
            (107_036, C::NotCapturing),
            (107_037, C::GraphRunning),
            (107_041, C::SyncWhileCapturing),
            (507_903, C::NotCapturing),
        ] {
            assert_eq!(kind_of(code), K::Capture { rule }, "{code}");
        }
        assert_eq!(kind_of(207_000), K::Unsupported);
        assert_eq!(code_of(&K::Unsupported, Waited::Stream), 207_000);
        assert_eq!(
            name_of(107_038),
            Some("ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD")
        );
    }
}
