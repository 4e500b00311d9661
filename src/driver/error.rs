//! Driver errors: what went wrong, in which driver operation, and — when the
//! error came from a vendor runtime — the native API name, code and message.

use std::fmt;
use std::time::Duration;

/// A driver operation: the name every [`DriverError`] carries and the key
/// fault injection uses ([`crate::sim::Fault::FailCall`]).
///
/// ```
/// use runclaim::driver::Op;
///
/// assert_eq!(Op::LaunchAicpu.to_string(), "launch_aicpu");
/// assert!(Op::ALL.contains(&Op::SyncEvent));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Op {
    /// [`Driver::alloc`](super::Driver::alloc).
    Alloc,
    /// [`Driver::free`](super::Driver::free).
    Free,
    /// [`Driver::copy_to_device`](super::Driver::copy_to_device).
    CopyToDevice,
    /// [`Driver::copy_from_device`](super::Driver::copy_from_device).
    CopyFromDevice,
    /// [`Driver::memset`](super::Driver::memset).
    Memset,
    /// [`Driver::copy_async`](super::Driver::copy_async).
    CopyAsync,
    /// [`Driver::memset_async`](super::Driver::memset_async).
    MemsetAsync,
    /// [`Driver::create_stream`](super::Driver::create_stream).
    CreateStream,
    /// [`Driver::destroy_stream`](super::Driver::destroy_stream).
    DestroyStream,
    /// [`Driver::query_stream`](super::Driver::query_stream).
    QueryStream,
    /// [`Driver::sync_stream`](super::Driver::sync_stream).
    SyncStream,
    /// [`Driver::create_event`](super::Driver::create_event).
    CreateEvent,
    /// [`Driver::destroy_event`](super::Driver::destroy_event).
    DestroyEvent,
    /// [`Driver::record_event`](super::Driver::record_event).
    RecordEvent,
    /// [`Driver::query_event`](super::Driver::query_event).
    QueryEvent,
    /// [`Driver::sync_event`](super::Driver::sync_event).
    SyncEvent,
    /// [`Driver::stream_wait_event`](super::Driver::stream_wait_event).
    StreamWaitEvent,
    /// [`Driver::event_elapsed`](super::Driver::event_elapsed).
    EventElapsed,
    /// [`Driver::event_timestamp`](super::Driver::event_timestamp).
    EventTimestamp,
    /// [`Driver::register_code`](super::Driver::register_code).
    RegisterCode,
    /// [`Driver::release_code`](super::Driver::release_code).
    ReleaseCode,
    /// [`Driver::launch_aicore`](super::Driver::launch_aicore).
    LaunchAicore,
    /// [`Driver::launch_aicpu`](super::Driver::launch_aicpu).
    LaunchAicpu,
    /// [`Driver::queue_notify`](super::Driver::queue_notify).
    QueueNotify,
    /// [`Driver::notify_event`](super::Driver::notify_event).
    NotifyEvent,
    /// Driver set-up outside the trait (loading a library, binding a device).
    Open,
    // New variants go last: the order (`Ord`) and each discriminant are
    // kept across releases.
    /// [`Driver::capture_begin`](super::Driver::capture_begin).
    CaptureBegin,
    /// [`Driver::capture_end`](super::Driver::capture_end).
    CaptureEnd,
    /// [`Driver::graph_launch`](super::Driver::graph_launch).
    GraphLaunch,
    /// [`Driver::graph_destroy`](super::Driver::graph_destroy).
    GraphDestroy,
}

impl Op {
    /// Every operation, in declaration order (for sweeps and tables).
    pub const ALL: [Op; 30] = [
        Op::Alloc,
        Op::Free,
        Op::CopyToDevice,
        Op::CopyFromDevice,
        Op::Memset,
        Op::CopyAsync,
        Op::MemsetAsync,
        Op::CreateStream,
        Op::DestroyStream,
        Op::QueryStream,
        Op::SyncStream,
        Op::CreateEvent,
        Op::DestroyEvent,
        Op::RecordEvent,
        Op::QueryEvent,
        Op::SyncEvent,
        Op::StreamWaitEvent,
        Op::EventElapsed,
        Op::EventTimestamp,
        Op::RegisterCode,
        Op::ReleaseCode,
        Op::LaunchAicore,
        Op::LaunchAicpu,
        Op::QueueNotify,
        Op::NotifyEvent,
        Op::Open,
        Op::CaptureBegin,
        Op::CaptureEnd,
        Op::GraphLaunch,
        Op::GraphDestroy,
    ];

    /// The `Driver` method name, e.g. `"launch_aicpu"`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Op::Alloc => "alloc",
            Op::Free => "free",
            Op::CopyToDevice => "copy_to_device",
            Op::CopyFromDevice => "copy_from_device",
            Op::Memset => "memset",
            Op::CopyAsync => "copy_async",
            Op::MemsetAsync => "memset_async",
            Op::CreateStream => "create_stream",
            Op::DestroyStream => "destroy_stream",
            Op::QueryStream => "query_stream",
            Op::SyncStream => "sync_stream",
            Op::CreateEvent => "create_event",
            Op::DestroyEvent => "destroy_event",
            Op::RecordEvent => "record_event",
            Op::QueryEvent => "query_event",
            Op::SyncEvent => "sync_event",
            Op::StreamWaitEvent => "stream_wait_event",
            Op::EventElapsed => "event_elapsed",
            Op::EventTimestamp => "event_timestamp",
            Op::RegisterCode => "register_code",
            Op::ReleaseCode => "release_code",
            Op::LaunchAicore => "launch_aicore",
            Op::LaunchAicpu => "launch_aicpu",
            Op::QueueNotify => "queue_notify",
            Op::NotifyEvent => "notify_event",
            Op::CaptureBegin => "capture_begin",
            Op::CaptureEnd => "capture_end",
            Op::GraphLaunch => "graph_launch",
            Op::GraphDestroy => "graph_destroy",
            Op::Open => "open",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which kind of handle a [`DriverErrorKind::BadHandle`] refers to.
///
/// ```
/// use runclaim::driver::{Driver, DriverErrorKind, HandleKind, StreamId};
/// use runclaim::sim::SimDriver;
///
/// let err = SimDriver::stepped(Default::default()).destroy_stream(StreamId::from_raw(42)).unwrap_err();
/// assert!(matches!(err.kind(), DriverErrorKind::BadHandle { kind: HandleKind::Stream, raw: 42 }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HandleKind {
    /// A [`StreamId`](super::StreamId).
    Stream,
    /// An [`EventId`](super::EventId).
    Event,
    /// A [`CodeHandle`](super::CodeHandle).
    Code,
    /// A [`GraphId`](super::GraphId).
    Graph,
}

impl fmt::Display for HandleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HandleKind::Stream => "stream",
            HandleKind::Event => "event",
            HandleKind::Code => "code",
            HandleKind::Graph => "graph",
        })
    }
}

/// Which kernel faulted, and how (the ACL kernel-fault codes: 507014–507018,
/// 507034–507036, 507042–507045, 507048–507050, and the collateral 107022 /
/// 107023).
///
/// ```
/// # #[cfg(feature = "acl")] {
/// use runclaim::driver::{DriverErrorKind, FaultKind};
/// use runclaim::driver::acl::codes::kind_of;
///
/// assert_eq!(kind_of(507_018), DriverErrorKind::KernelFault(FaultKind::AicpuException));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// An AICore kernel ran past the device watchdog (507014).
    AicoreTimeout,
    /// An AICore kernel raised an exception (507015), a trap (507016) or a
    /// trapped out-of-bounds access (507042 / 507043).
    AicoreException,
    /// An AICPU kernel ran past the device watchdog (507017).
    AicpuTimeout,
    /// An AICPU kernel raised an exception (507018).
    AicpuException,
    /// A vector-core exception (507035), trap (507036) or trapped
    /// out-of-bounds access (507044 / 507045).
    VectorCoreException,
    /// Work on this stream was abandoned because of an earlier fault (107022),
    /// or the stream is being aborted (107023).
    Collateral,
    /// A vector-core kernel ran past the device watchdog (507034).
    VectorCoreTimeout,
    /// An FFTS+ task ran past the device watchdog (507048).
    FftsPlusTimeout,
    /// An FFTS+ task raised an exception or trap (507049 / 507050).
    FftsPlusException,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FaultKind::AicoreTimeout => "AICore timeout",
            FaultKind::AicoreException => "AICore exception",
            FaultKind::AicpuTimeout => "AICPU timeout",
            FaultKind::AicpuException => "AICPU exception",
            FaultKind::VectorCoreException => "vector-core exception",
            FaultKind::Collateral => "collateral abort after an earlier fault",
            FaultKind::VectorCoreTimeout => "vector-core timeout",
            FaultKind::FftsPlusTimeout => "FFTS+ timeout",
            FaultKind::FftsPlusException => "FFTS+ exception",
        })
    }
}

/// What went wrong, independent of which driver reported it.
///
/// ```
/// use runclaim::driver::{Driver, DriverErrorKind};
/// use runclaim::sim::SimDriver;
///
/// let sim = SimDriver::stepped(Default::default());
/// assert_eq!(
///     sim.alloc(0).unwrap_err().kind(),
///     &DriverErrorKind::InvalidArgument { what: "allocation size is 0" }
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DriverErrorKind {
    /// The handle is unknown, or was destroyed.
    #[error("unknown or destroyed {kind} handle {raw:#x}")]
    BadHandle {
        /// Which kind of handle.
        kind: HandleKind,
        /// Its raw value.
        raw: u64,
    },
    /// The device address range is not inside one live allocation.
    #[error("device range {addr:#x}+{len} is not inside a live allocation")]
    BadAddress {
        /// First byte of the range.
        addr: u64,
        /// Length of the range in bytes.
        len: u64,
    },
    /// An argument is out of range or malformed.
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// Which argument, and what is wrong with it.
        what: &'static str,
    },
    /// The code image is not a valid kernel for this driver.
    #[error("invalid code image: {what}")]
    InvalidCode {
        /// What is wrong with it.
        what: &'static str,
    },
    /// New code would only fit by evicting code another registration still
    /// pins ([`Driver::register_code`](super::Driver::register_code)).
    #[error("device code memory is full: all {capacity} image(s) are pinned by live registrations")]
    CodeMemoryFull {
        /// Images code memory holds.
        capacity: usize,
    },
    /// Device memory is exhausted.
    #[error("out of device memory ({bytes} bytes requested)")]
    OutOfMemory {
        /// The request that failed.
        bytes: u64,
    },
    /// A bounded wait expired before its condition held (507046 / 507047).
    /// The device keeps working: a timeout cancels nothing.
    #[error("timed out after {waited:?}")]
    Timeout {
        /// How long the driver waited.
        waited: Duration,
    },
    /// The stream's task queue is full. A real device would block the calling
    /// thread instead; the simulator reports it after its step budget.
    #[error("stream queue full ({capacity} tasks)")]
    QueueFull {
        /// The stream's capacity.
        capacity: usize,
    },
    /// A stream with queued work may not be destroyed; synchronize it first.
    #[error("stream still has {} queued task(s)", queued.map_or_else(|| "some".to_owned(), |n| n.to_string()))]
    StreamBusy {
        /// Tasks still queued, where the driver can count them (the
        /// simulator can; a vendor runtime only says "not complete":
        /// `None`).
        queued: Option<usize>,
    },
    /// The calling thread has no device context (107002).
    #[error("calling thread has no device context")]
    NoContext,
    /// The handle belongs to another device context than the calling
    /// thread's (107003, "stream not in current context").
    #[error("the handle belongs to another device context than the calling thread's")]
    ContextMismatch,
    /// The device has no resource of this kind left (207007 events, 207008
    /// streams).
    #[error("the device has no {what} left")]
    NoResource {
        /// Which resource.
        what: Resource,
    },
    /// The runtime reported success but returned a value the driver cannot
    /// use (a non-finite or negative elapsed time, for example).
    #[error("the runtime returned an unusable result: {what}")]
    InvalidResult {
        /// What was wrong with it.
        what: &'static str,
    },
    /// A kernel on the stream faulted; the stream is in an error state and
    /// later work on it fails.
    #[error("{0}")]
    KernelFault(FaultKind),
    /// The device is in a sticky failure state (507899 / 507901): every call
    /// fails until the device is reset.
    #[error("device lost; a device reset is required")]
    DeviceLost,
    /// The driver, or the loaded runtime, does not offer this operation.
    #[error("not supported by this driver")]
    Unsupported,
    /// A stream capture's rule refused the call ([`CaptureRule`]).
    #[error("refused by stream capture: {rule}")]
    Capture {
        /// Which rule.
        rule: CaptureRule,
    },
    /// A failure injected by the simulator's fault plan.
    #[error("injected failure (call #{nth} of this operation)")]
    Injected {
        /// Which call of the operation failed (1-based, counted from injection).
        nth: u64,
    },
    /// A native error code with no more specific meaning.
    #[error("runtime error")]
    Unknown,
}

impl DriverErrorKind {
    /// `true` for a kernel fault on a stream ([`KernelFault`](Self::KernelFault),
    /// any [`FaultKind`]); a lost device is not one.
    ///
    /// ```
    /// use runclaim::driver::{DriverErrorKind, FaultKind};
    ///
    /// assert!(DriverErrorKind::KernelFault(FaultKind::AicoreTimeout).is_kernel_fault());
    /// assert!(!DriverErrorKind::DeviceLost.is_kernel_fault());
    /// ```
    #[must_use]
    pub fn is_kernel_fault(&self) -> bool {
        matches!(self, DriverErrorKind::KernelFault(_))
    }
}

/// A resource a device can run out of ([`DriverErrorKind::NoResource`]).
///
/// ```
/// use runclaim::driver::{DriverErrorKind, Resource};
/// let k = DriverErrorKind::NoResource { what: Resource::Stream };
/// assert_eq!(k.to_string(), "the device has no stream left");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Resource {
    /// An event (207007).
    #[error("event")]
    Event,
    /// A stream (207008).
    #[error("stream")]
    Stream,
    /// A handle for a registered program (a simulated runtime's table is
    /// full).
    #[error("program handle")]
    ProgramHandle,
    /// The thread that runs the device's host callbacks, and why not.
    #[error("callback thread ({0})")]
    CallbackThread(ThreadTrouble),
}

/// A rule of stream capture ([`DriverErrorKind::Capture`]): what the
/// runtime refuses while a stream captures, or of a capture that cannot
/// close. Each names the runtime's code (`rt_error_codes.h`).
///
/// ```
/// use runclaim::driver::{CaptureRule, Driver, DriverErrorKind};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let s = sim.create_stream()?;
/// sim.capture_begin(s)?;
/// let e = sim.sync_stream(s, std::time::Duration::from_millis(1)).unwrap_err();
/// assert_eq!(*e.kind(), DriverErrorKind::Capture { rule: CaptureRule::SyncWhileCapturing });
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum CaptureRule {
    /// The stream is capturing already, or is destroyed while it captures
    /// (107027).
    #[error("the stream is capturing already")]
    AlreadyCapturing,
    /// The stream is not capturing (107029), or is not the one its capture
    /// began on (107036).
    #[error("the stream is not the origin of a capture")]
    NotCapturing,
    /// This stream (or this device) cannot be captured (207000 from a
    /// begin).
    #[error("this stream cannot be captured")]
    NotCapturable,
    /// A synchronous call (a wait, a query) named a capturing stream
    /// (107027 from the runtime) or an event recorded in a capture
    /// (107028); an asynchronous call the runtime would turn synchronous
    /// (107041).
    #[error("a synchronous call named a capturing stream or a captured event")]
    SyncWhileCapturing,
    /// A stream that joined the capture was not joined back to its origin
    /// before the end (107025).
    #[error("a stream that joined the capture was not joined back")]
    Unjoined,
    /// A captured stream waited for an event recorded outside the capture
    /// (107024).
    #[error("a captured stream waited for an event recorded outside the capture")]
    OutsideDependency,
    /// The graph is still running, and cannot be destroyed (107037).
    #[error("the graph is still running")]
    GraphRunning,
}

/// Why a device's callback thread is not there ([`Resource::CallbackThread`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ThreadTrouble {
    /// The host refused to spawn it.
    #[error("could not be spawned")]
    Spawn,
    /// It started, but the runtime was given no id to subscribe it by.
    #[error("no thread id")]
    NoId,
    /// It did not come up.
    #[error("did not start")]
    NotStarted,
    /// It is shutting down (the device is being released).
    #[error("ending")]
    Ending,
    /// An earlier start failed: the device stays without one.
    #[error("an earlier start failed")]
    Broken,
}

/// The native detail of an error reported by a vendor runtime.
///
/// ```
/// use runclaim::driver::{DriverError, DriverErrorKind, Native, Op};
///
/// let e = DriverError::with_native(
///     Op::SyncEvent,
///     DriverErrorKind::Timeout { waited: std::time::Duration::from_millis(5) },
///     Native::new("aclrtSynchronizeEventWithTimeout", 507_047, None),
/// );
/// assert_eq!(e.native().map(|n| n.code), Some(507_047));
/// assert!(e.to_string().contains("aclrtSynchronizeEventWithTimeout returned 507047"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Native {
    /// The C function that failed, e.g. `"aclrtSynchronizeEventWithTimeout"`.
    pub api: &'static str,
    /// The integer it returned (for the `acl` driver, compared with the
    /// constants of `driver::acl::codes::AclError`, named as the CANN
    /// headers name them).
    pub code: i32,
    /// `aclGetRecentErrMsg()` right after the failure, when available.
    pub message: Option<String>,
}

impl Native {
    /// What the runtime said (for driver implementers).
    #[must_use]
    pub const fn new(api: &'static str, code: i32, message: Option<String>) -> Self {
        Native { api, code, message }
    }
}

impl fmt::Display for Native {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} returned {}", self.api, self.code)?;
        if let Some(m) = &self.message {
            write!(f, ": {m}")?;
        }
        Ok(())
    }
}

/// An error from a [`Driver`](super::Driver) call.
///
/// It names the operation ([`Op`]), what went wrong ([`DriverErrorKind`]) and, for
/// the `acl` driver, the native API, code and message ([`Native`]).
///
/// ```
/// use runclaim::driver::{Driver, DevPtr, DriverErrorKind, Op};
/// use runclaim::sim::SimDriver;
///
/// let sim = SimDriver::stepped(Default::default());
/// let err = sim.copy_to_device(DevPtr::from_raw(0xdead_0000), &[1, 2, 3]).unwrap_err();
/// assert_eq!(err.op(), Op::CopyToDevice);
/// assert!(matches!(err.kind(), DriverErrorKind::BadAddress { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op}: {kind}{}", native_suffix(.native.as_deref()))]
pub struct DriverError {
    op: Op,
    /// Not a `source()`: the message already says it (see
    /// [`kind`](DriverError::kind)).
    kind: DriverErrorKind,
    native: Option<Box<Native>>,
}

fn native_suffix(native: Option<&Native>) -> String {
    native.map(|n| format!(" ({n})")).unwrap_or_default()
}

impl DriverError {
    /// An error of `kind` in operation `op`.
    #[must_use]
    pub fn new(op: Op, kind: DriverErrorKind) -> Self {
        DriverError {
            op,
            kind,
            native: None,
        }
    }

    /// An error carrying the native API detail.
    #[must_use]
    pub fn with_native(op: Op, kind: DriverErrorKind, native: Native) -> Self {
        DriverError {
            op,
            kind,
            native: Some(Box::new(native)),
        }
    }

    /// The driver operation that failed.
    #[must_use]
    pub fn op(&self) -> Op {
        self.op
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &DriverErrorKind {
        &self.kind
    }

    /// The native API, code and message, when a vendor runtime reported it.
    #[must_use]
    pub fn native(&self) -> Option<&Native> {
        self.native.as_deref()
    }

    /// `true` for a bounded wait that expired: the work may still complete.
    #[must_use]
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, DriverErrorKind::Timeout { .. })
    }

    /// `true` for a kernel fault on a stream: the stream is in an error state
    /// and later work on it fails, until the stream is replaced (a lost
    /// device is [`is_device_fault`](Self::is_device_fault), not this).
    ///
    /// ```
    /// use runclaim::driver::{DriverError, DriverErrorKind, FaultKind, Op};
    ///
    /// let fault = DriverError::new(
    ///     Op::SyncEvent,
    ///     DriverErrorKind::KernelFault(FaultKind::AicpuException),
    /// );
    /// assert!(fault.is_kernel_fault() && fault.is_device_fault());
    /// let lost = DriverError::new(Op::SyncEvent, DriverErrorKind::DeviceLost);
    /// assert!(!lost.is_kernel_fault() && lost.is_device_fault());
    /// ```
    #[must_use]
    pub fn is_kernel_fault(&self) -> bool {
        self.kind.is_kernel_fault()
    }

    /// `true` when the device reported a fault: a kernel fault on a stream or
    /// a lost device. Work in flight on the faulted stream will not complete.
    #[must_use]
    pub fn is_device_fault(&self) -> bool {
        matches!(
            self.kind,
            DriverErrorKind::KernelFault(_) | DriverErrorKind::DeviceLost
        )
    }
}
