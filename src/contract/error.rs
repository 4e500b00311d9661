//! Contract errors. Every failure names the [`Action`] that failed, the run
//! and the slot it concerns, and what went wrong ([`ErrorKind`]); a failed
//! transition hands its value back inside the [`Error`].

use std::fmt;
use std::num::NonZeroU64;
use std::time::Duration;

use super::config::ConfigError;
use crate::driver::DriverError;

/// A run's identity: assigned at prepare, unique per device, never 0 (the
/// type says so: "no run" is `Option<RunId>`, the same size). It is the tag
/// the kernels write into the handshake, the device wall and the status
/// record.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let run = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?;
/// assert_eq!(run.id().to_string(), "#1"); // ids start at 1 and never repeat
/// assert_eq!(run.id().get(), 1);
/// assert_eq!(RunId::new(1), Some(run.id()));
/// assert_eq!(RunId::new(0), None); // no run is ever #0
/// # use runclaim::contract::RunId;
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(NonZeroU64);

impl RunId {
    /// The first id a device hands out.
    pub(crate) const FIRST: RunId = RunId(NonZeroU64::MIN);

    /// The id with this number, `None` for 0 (no run has it).
    #[must_use]
    pub const fn new(id: u64) -> Option<Self> {
        match NonZeroU64::new(id) {
            Some(n) => Some(RunId(n)),
            None => None,
        }
    }

    /// The number, as the device records carry it (never 0).
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0.get()
    }

    /// The id after this one. Ids are never reused: at one run per
    /// nanosecond, 2^64 ids last 584 years, so the last id saturates
    /// rather than wrapping to a reused one.
    #[must_use]
    pub(crate) const fn next(self) -> Self {
        RunId(self.0.saturating_add(1))
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// The contract operation that failed.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::contract::Action;
/// let err = runner.take_slot::<0>().and_then(|_t| runner.take_slot::<0>()).unwrap_err();
/// assert_eq!(err.action(), Action::TakeSlot);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// [`Device::open`](super::Device::open).
    Open,
    /// [`Device::publish`](super::Device::publish).
    Publish,
    /// [`Runner::take_slot`](super::Runner::take_slot).
    TakeSlot,
    /// [`Runner::code`](super::Runner::code): looking a callable up by name.
    Lookup,
    /// [`Runner::prepare`](super::Runner::prepare).
    Prepare,
    /// [`Run::launch`](super::Run::launch).
    Launch,
    /// [`Run::fence`](super::Run::fence) / [`Run::fence_for`](super::Run::fence_for).
    Fence,
    /// [`Run::try_fence`](super::Run::try_fence).
    TryFence,
    /// [`Run::finalize`](super::Run::finalize).
    Finalize,
    /// [`Runner::drain`](super::Runner::drain) (also inside publish and close).
    Drain,
    /// [`Device::close`](super::Device::close).
    Close,
    /// [`Device::alloc_buffer`](super::Device::alloc_buffer).
    Alloc,
    /// [`Device::read_buffer`](super::Device::read_buffer).
    Read,
    /// [`Device::write_buffer`](super::Device::write_buffer).
    Write,
    /// Refilling a [`Workload`](super::Workload) in place
    /// ([`Workload::set_scalar`](super::Workload::set_scalar) and its
    /// siblings).
    Refill,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Open => "open",
            Action::Publish => "publish",
            Action::TakeSlot => "take_slot",
            Action::Lookup => "lookup",
            Action::Prepare => "prepare",
            Action::Launch => "launch",
            Action::Fence => "fence",
            Action::TryFence => "try_fence",
            Action::Finalize => "finalize",
            Action::Drain => "drain",
            Action::Close => "close",
            Action::Alloc => "alloc",
            Action::Read => "read",
            Action::Write => "write",
            Action::Refill => "refill a workload",
        })
    }
}

/// Why a runner stopped launching.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::contract::PoisonCause;
/// use runclaim::driver::Op;
/// use runclaim::sim::Fault;
/// runner.device().driver().inject(Fault::FailCall { op: Op::LaunchAicpu, nth: 1 });
/// let _ = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch();
/// assert_eq!(runner.health().poisoned.map(|p| p.cause), Some(PoisonCause::PartialLaunch));
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PoisonCause {
    /// The AICore kernel was queued but the AICPU launch failed: the AICore
    /// workers wait for a scheduler that never comes.
    PartialLaunch,
    /// The kernels were queued but a completion event could not be recorded:
    /// the run's completion cannot be observed.
    FenceNotRecorded,
    /// A run at the head of the queue (every run ahead of it complete)
    /// stayed incomplete for longer than its budget, the fence timeout, on
    /// the driver's clock.
    Overrun,
    /// The device reported a kernel fault or a lost device.
    DeviceFault,
    /// A panic (a driver's) interrupted a transition while it held the
    /// device's state: what reached the device is unknown. The run is the
    /// one being launched, when one was.
    Interrupted,
    /// A run's completion could not be proven — its wait failed with a
    /// driver error that is neither a fault nor a timeout, panicked, or ran
    /// out of time without a verdict (a drop or a pipeline's drop gave up
    /// on it). Nothing behind it in the queue can be dated any more, so the
    /// time rule could no longer tell a hung device: no run launches until
    /// a drain proves the queue quiet.
    Unproven,
}

impl fmt::Display for PoisonCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoisonCause::PartialLaunch => "AICore kernel queued but AICPU launch failed",
            PoisonCause::FenceNotRecorded => "completion event could not be recorded",
            PoisonCause::Overrun => "run overran its budget at the head of the queue",
            PoisonCause::DeviceFault => "device fault",
            PoisonCause::Interrupted => "a panic interrupted a transition",
            PoisonCause::Unproven => "a run's completion could not be proven",
        })
    }
}

/// The first failure that poisoned a runner: no run launches until a drain
/// ([`Runner::drain`](super::Runner::drain)) proves the queue quiet.
///
/// ```
/// use runclaim::contract::{Poison, PoisonCause};
///
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{Fault, SimConfig, SimDriver};
/// # let sim = SimDriver::stepped(SimConfig::default().watchdog(std::time::Duration::from_millis(2)));
/// # let mut device = Device::<_, 2>::open(sim.clone(), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// sim.inject(Fault::EventNeverCompletes { nth: 2 }); // the run's completion is never reported
/// let run = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// let id = run.id();
/// assert!(run.fence().is_err());
/// let p: Poison = runner.health().poisoned.unwrap();
/// assert_eq!((p.cause, p.run, p.slot), (PoisonCause::Overrun, Some(id), Some(1)));
/// assert_eq!(p.to_string(), format!("run overran its budget at the head of the queue (run {id} in slot 1)"));
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Poison {
    /// What happened.
    pub cause: PoisonCause,
    /// The run it happened to: `None` only for
    /// [`PoisonCause::Interrupted`] outside a launch (no run was being
    /// submitted when the panic struck).
    pub run: Option<RunId>,
    /// That run's slot (`None` exactly when `run` is).
    pub slot: Option<usize>,
}

impl fmt::Display for Poison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match who(self.run, self.slot) {
            Some(who) => write!(f, "{} ({who})", self.cause),
            None => write!(f, "{}", self.cause),
        }
    }
}

/// "run #r in slot s", "run #r", "slot s", or nothing.
fn who(run: Option<RunId>, slot: Option<usize>) -> Option<String> {
    match (run, slot) {
        (Some(r), Some(s)) => Some(format!("run {r} in slot {s}")),
        (Some(r), None) => Some(format!("run {r}")),
        (None, Some(s)) => Some(format!("slot {s}")),
        (None, None) => None,
    }
}

/// Which device record a [`ErrorKind::RecordMismatch`] concerns.
///
/// ```
/// use runclaim::contract::{ErrorKind, Record};
///
/// let k = ErrorKind::RecordMismatch { record: Record::Wall, expected: 3, found: 4 };
/// assert_eq!(k.to_string(), "device-wall record carries run 4, expected 3");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Record {
    /// The status record.
    Status,
    /// The device-wall record.
    Wall,
}

impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Record::Status => "status",
            Record::Wall => "device-wall",
        })
    }
}

/// What went wrong in a contract operation.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::contract::ErrorKind;
/// let err = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Previous))?
///     .launch()
///     .unwrap_err(); // nothing launched yet to chain from
/// assert_eq!(err.kind(), &ErrorKind::NoChainValue);
/// assert!(err.value().is_some(), "nothing was submitted: the prepared run comes back");
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(Box<ConfigError>),
    /// A driver call failed (not a device fault, not a timeout).
    #[error("driver call failed: {0}")]
    Driver(Box<DriverError>),
    /// The device reported a fault; the runner is poisoned.
    #[error("device fault: {0}")]
    Fault(Box<DriverError>),
    /// The runner is poisoned and launches nothing until drained.
    #[error("runner is poisoned: {0}; drain it to recover")]
    Poisoned(Poison),
    /// The AICore kernel was queued but the AICPU launch failed. The run is
    /// gone (its slot is quarantined) and the runner is poisoned.
    #[error(
        "AICore kernel queued but AICPU launch failed ({0}); runner poisoned, slot quarantined"
    )]
    PartialLaunch(Box<DriverError>),
    /// Both kernels were queued but a completion event could not be
    /// recorded. The run is gone (its slot is quarantined) and the runner
    /// is poisoned.
    #[error(
        "kernels queued but the completion event failed ({0}); runner poisoned, slot quarantined"
    )]
    FenceNotRecorded(Box<DriverError>),
    /// This operation met a device fault that an earlier run caused (that
    /// run's own events report it): the runner is poisoned naming that run,
    /// [`Health::poisoned`](super::Health) says so. A launch that meets it
    /// after its AICore kernel was queued loses its run (its slot is
    /// quarantined), as a partial launch does.
    #[error("met the device fault of run {run} in slot {slot} ({error}); runner poisoned")]
    FaultAhead {
        /// The run that faulted.
        run: RunId,
        /// Its slot.
        slot: usize,
        /// The driver error this operation got.
        error: Box<DriverError>,
    },
    /// The slot's token is already out.
    #[error("slot token already taken")]
    SlotTaken,
    /// The slot is held by a launched run (possibly forgotten).
    #[error("slot is in flight with run {}; drain to reclaim it if that run was forgotten", or_unknown(*.run))]
    SlotInFlight {
        /// The run holding it (`None` if the device no longer knows it).
        run: Option<RunId>,
    },
    /// The slot's last run could not be proven complete.
    #[error("slot is quarantined: run {} could not be proven complete; drain to recover", or_unknown(*.run))]
    SlotQuarantined {
        /// The unproven run (`None` when the run that left the slot
        /// unproven is no longer tracked, e.g. a panic interrupted it).
        run: Option<RunId>,
    },
    /// The token's lease is not the slot's current lease.
    #[error("stale token (lease {token}, slot now on lease {current})")]
    StaleToken {
        /// The token's lease.
        token: u64,
        /// The slot's lease.
        current: u64,
    },
    /// A token or code reference from another device.
    #[error("token or code reference belongs to another device")]
    ForeignHandle,
    /// No callable of that name was published.
    #[error("no callable named {0:?} in this publication")]
    UnknownCallable(Box<str>),
    /// Two callables of one publication share a name.
    #[error("two callables are named {0:?}; names in a publication must be unique")]
    DuplicateCallable(Box<str>),
    /// The callables do not fit in device code memory next to the code
    /// that live publications (this device's or others' on the same NPU)
    /// pin.
    #[error(
        "the published callables do not fit in device code memory ({capacity} images, the rest pinned by live publications)"
    )]
    CodeDoesNotFit {
        /// Images device code memory holds.
        capacity: usize,
    },
    /// A host buffer could not be allocated.
    #[error("host memory exhausted ({bytes} bytes requested)")]
    HostOutOfMemory {
        /// The request that failed.
        bytes: usize,
    },
    /// The input is empty.
    #[error("input is empty")]
    EmptyInput,
    /// The input is longer than the slot's arena.
    #[error("input of {len} elements exceeds the arena capacity of {capacity}")]
    InputTooLong {
        /// Input length.
        len: usize,
        /// Arena capacity in elements.
        capacity: usize,
    },
    /// [`Input::Previous`](super::Input::Previous) with no valid previous
    /// output (none launched yet, or the chain was broken by a fault).
    #[error("no previous run output to chain from")]
    NoChainValue,
    /// The outputs buffer is smaller than the run's output.
    #[error("outputs buffer holds {capacity} elements, the run produced {len}")]
    OutputsTooSmall {
        /// Elements produced.
        len: usize,
        /// Buffer capacity.
        capacity: usize,
    },
    /// The run completed and reported an error code: this run failed, the
    /// runner is not poisoned.
    #[error("run completed with error code {code}")]
    RunFailed {
        /// The code from the run's status record.
        code: u32,
    },
    /// A device record carries another run's id.
    #[error("{record} record carries run {found}, expected {expected}")]
    RecordMismatch {
        /// Which record.
        record: Record,
        /// This run.
        expected: u64,
        /// What the record says.
        found: u64,
    },
    /// The run is complete but its status record was never completed.
    #[error("{0} record was never written")]
    RecordMissing(Record),
    /// A device record did not decode (the kernel ABI adapter's verdict).
    #[error("{record} record is malformed: {what}")]
    RecordMalformed {
        /// Which record.
        record: Record,
        /// What is wrong with it.
        what: &'static str,
    },
    /// The kernel ABI adapter could not build the run's argument blocks;
    /// nothing was submitted.
    #[error("the kernel ABI adapter could not build the run's blocks: {0}")]
    Adapter(Box<crate::driver::abi::AbiError>),
    /// The run's completion was not observed within the wait.
    #[error("not complete after {waited:?}{}", overran_suffix(*.overran))]
    Timeout {
        /// How long the wait lasted, on the driver's clock.
        waited: Duration,
        /// `Some(run)` when this wait proved that `run` (this run or one
        /// ahead of it) overran its budget at the head of the queue: the
        /// runner is poisoned, and [`Health::poisoned`](super::Health)
        /// names the run and its slot. `None`: only "not yet".
        overran: Option<RunId>,
    },
    /// [`Run::try_fence`](super::Run::try_fence): not complete yet.
    #[error("not complete yet")]
    NotReady,
    /// Runs still in flight could not be drained in time.
    #[error("{count} run(s) still in flight after {waited:?}")]
    Undrained {
        /// Runs not proven complete.
        count: usize,
        /// How long the drain waited.
        waited: Duration,
    },
    /// [`Pipeline::submit`](super::Pipeline::submit): `depth` runs are
    /// pending already; [`complete`](super::Pipeline::complete) one first.
    #[error("all {depth} slots hold pending runs; complete one first")]
    DepthExhausted {
        /// The pipeline's depth.
        depth: usize,
    },
    /// A slot index chosen at run time is not below the depth.
    #[error("slot {slot} does not exist at depth {depth}")]
    SlotOutOfRange {
        /// The index asked for.
        slot: usize,
        /// The depth.
        depth: usize,
    },
    /// A bug in runclaim: one of its own invariants did not hold. The
    /// operation was refused in the safe direction (nothing freed or
    /// reused that the device may still touch). Debug builds panic here
    /// instead; please report it.
    #[error("internal invariant broken: {0}; this is a runclaim bug, please report it")]
    InvariantBroken(&'static str),
    /// A workload binds more tensors than a run carries.
    #[error("{count} tensors bound; a run carries at most {max}")]
    TooManyTensors {
        /// Tensors bound.
        count: usize,
        /// The limit ([`WorkArgs::MAX_TENSORS`](crate::driver::abi::WorkArgs::MAX_TENSORS)).
        max: usize,
    },
    /// A workload passes more scalars than a run carries.
    #[error("{count} scalars passed; a run carries at most {max}")]
    TooManyScalars {
        /// Scalars passed.
        count: usize,
        /// The limit ([`WorkArgs::MAX_SCALARS`](crate::driver::abi::WorkArgs::MAX_SCALARS)).
        max: usize,
    },
    /// A host tensor does not fit in the slot's staging region.
    #[error(
        "host tensor {tensor} of {bytes} bytes does not fit in the {capacity}-byte staging region after the host tensors before it"
    )]
    StagingFull {
        /// The tensor's index in the workload.
        tensor: usize,
        /// Its size.
        bytes: usize,
        /// The region's size ([`DeviceConfig::staging_bytes`](super::DeviceConfig::staging_bytes)).
        capacity: usize,
    },
    /// A bound slice of a device buffer is not inside the buffer.
    #[error("tensor {tensor}: its slice is not inside {buffer} of {len} elements")]
    BufferRange {
        /// The tensor's index in the workload.
        tensor: usize,
        /// The buffer.
        buffer: BufferId,
        /// The buffer's length.
        len: usize,
    },
    /// A host read or write of a device buffer is not inside the buffer.
    #[error("an access up to element {end} is not inside {buffer} of {len} elements")]
    AccessRange {
        /// The buffer.
        buffer: BufferId,
        /// One past the last element asked for (saturating).
        end: usize,
        /// The buffer's length.
        len: usize,
    },
    /// The buffer belongs to another device.
    #[error("{buffer} belongs to another device")]
    ForeignBuffer {
        /// The buffer.
        buffer: BufferId,
    },
    /// A run that bound the buffer could not be proven complete: the host
    /// may not read or write it (the device may still), and its memory
    /// stays quarantined.
    #[error("{buffer} is bound by run {run}, which could not be proven complete")]
    BufferBusy {
        /// The buffer.
        buffer: BufferId,
        /// The latest run that bound it.
        run: RunId,
    },
    /// A buffer of this shape cannot be allocated: no elements, a
    /// zero-sized element type, or a size that overflows.
    #[error("a buffer of {len} elements of {elem_size} bytes cannot be allocated")]
    InvalidBuffer {
        /// Elements asked for.
        len: usize,
        /// `size_of` the element type.
        elem_size: usize,
    },
    /// A refill names a tensor the workload does not have.
    #[error("the workload has {count} tensors: there is no tensor {index}")]
    NoTensor {
        /// The index asked for.
        index: usize,
        /// Tensors the workload has.
        count: usize,
    },
    /// A refill names a scalar the workload does not have.
    #[error("the workload has {count} scalars: there is no scalar {index}")]
    NoScalar {
        /// The index asked for.
        index: usize,
        /// Scalars the workload has.
        count: usize,
    },
    /// A refill would change what a tensor is: its kind (a host input, a
    /// host output, a device buffer, …) or its element type.
    #[error("tensor {tensor} is {is}: a refill keeps what a tensor is")]
    TensorMismatch {
        /// The tensor's index in the workload.
        tensor: usize,
        /// What it is ("a host input", …, or "of another element type").
        is: &'static str,
    },
}

fn or_unknown(run: Option<RunId>) -> String {
    run.map_or_else(|| "(unknown)".to_owned(), |r| r.to_string())
}

fn overran_suffix(run: Option<RunId>) -> String {
    run.map(|r| format!("; run {r} overran its budget at the head of the queue; runner poisoned"))
        .unwrap_or_default()
}

impl ErrorKind {
    /// An invariant of runclaim's own did not hold: a panic in debug
    /// builds (tests find it), the refusal in release.
    #[track_caller]
    pub(crate) fn broken(what: &'static str) -> Self {
        debug_assert!(false, "runclaim invariant broken: {what}");
        ErrorKind::InvariantBroken(what)
    }

    /// Classifies a driver error: device faults become [`ErrorKind::Fault`].
    pub(crate) fn from_driver(e: DriverError) -> Self {
        if e.is_device_fault() {
            ErrorKind::Fault(Box::new(e))
        } else {
            ErrorKind::Driver(Box::new(e))
        }
    }

    /// The driver error behind this one, if any.
    #[must_use]
    pub fn driver_error(&self) -> Option<&DriverError> {
        match self {
            ErrorKind::Driver(e)
            | ErrorKind::Fault(e)
            | ErrorKind::PartialLaunch(e)
            | ErrorKind::FenceNotRecorded(e)
            | ErrorKind::FaultAhead { error: e, .. } => Some(e),
            _ => None,
        }
    }
}

static NEXT_BUFFER_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A device buffer's identity: unique in the process, named by the errors
/// of host access and binding.
///
/// ```
/// # use runclaim::{Device, DeviceConfig};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// let a = device.alloc_buffer::<f32>(4)?;
/// let b = device.alloc_buffer::<f32>(4)?;
/// assert_ne!(a.id(), b.id());
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BufferId(NonZeroU64);

impl BufferId {
    /// The smallest id (no buffer has it unless ids wrapped).
    pub(crate) const MIN: BufferId = BufferId(NonZeroU64::MIN);

    pub(crate) fn fresh() -> Self {
        let n = NEXT_BUFFER_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        BufferId(NonZeroU64::new(n).unwrap_or(NonZeroU64::MIN))
    }

    /// The id as a number (never 0).
    #[must_use]
    pub fn get(self) -> u64 {
        self.0.get()
    }
}

impl fmt::Display for BufferId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "buffer {}", self.0)
    }
}

// Errors carry runs back by value: the kind stays four words.
static_assertions::const_assert!(size_of::<ErrorKind>() <= 32);

impl From<ConfigError> for ErrorKind {
    fn from(e: ConfigError) -> Self {
        ErrorKind::Config(Box::new(e))
    }
}

/// A contract error: which [`Action`] failed, for which run and slot, and
/// why — with the value the action consumed handed back (`T = ()` where
/// there is none).
///
/// Use [`into_value`](Error::into_value) to recover the value (a prepared
/// run to retry, a token to reuse). `?` converts an `Error<T>` into a plain
/// [`Error`] by dropping the value (a launched run's drop waits, bounded, for
/// its fence); [`without_value`](Error::without_value) does the same
/// explicitly, e.g. for `Box<dyn std::error::Error>`.
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// use runclaim::contract::ErrorKind;
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let code = runner.code("inc")?;
/// let token = runner.take_slot::<0>()?;
/// // An empty input is refused; the token comes back inside the error.
/// let err = runner.prepare(token, RunSpec::new(code, Input::Host(&[]))).unwrap_err();
/// assert_eq!(err.kind(), &ErrorKind::EmptyInput);
/// assert_eq!(err.slot(), Some(0));
/// let token = err.into_value();
/// let run = runner.prepare(token, RunSpec::new(code, Input::Host(&[1])))?;
/// # drop(run);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(thiserror::Error)]
#[error("{action}{}: {kind}", subject(self.run(), self.slot()))]
pub struct Error<T = ()> {
    value: T,
    action: Action,
    /// Kept narrow because errors carry runs back by value: an
    /// `Option<RunId>` is one word.
    run: Option<RunId>,
    /// Slot index, `u32::MAX` = none.
    slot: u32,
    #[source]
    kind: ErrorKind,
}

fn subject(run: Option<RunId>, slot: Option<usize>) -> String {
    match who(run, slot) {
        Some(who) if run.is_some() => format!(" of {who}"),
        Some(who) => format!(" in {who}"),
        None => String::new(),
    }
}

impl<T> fmt::Debug for Error<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("action", &self.action)
            .field("run", &self.run())
            .field("slot", &self.slot())
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Error<()> {
    /// An error with no value to hand back.
    pub(crate) fn plain(action: Action, kind: impl Into<ErrorKind>) -> Self {
        Error::new((), action, None, None, kind.into())
    }
}

impl<T> Error<T> {
    pub(crate) fn new(
        value: T,
        action: Action,
        run: Option<RunId>,
        slot: Option<usize>,
        kind: ErrorKind,
    ) -> Self {
        Error {
            value,
            action,
            run,
            slot: slot.and_then(|s| u32::try_from(s).ok()).unwrap_or(u32::MAX),
            kind,
        }
    }

    /// The action that failed.
    #[must_use]
    pub fn action(&self) -> Action {
        self.action
    }

    /// The run concerned, when there was one.
    #[must_use]
    pub fn run(&self) -> Option<RunId> {
        self.run
    }

    /// The slot concerned, when there was one.
    #[must_use]
    pub fn slot(&self) -> Option<usize> {
        (self.slot != u32::MAX).then_some(self.slot as usize)
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The value handed back.
    #[must_use]
    pub fn value(&self) -> &T {
        &self.value
    }

    /// Takes the value handed back.
    #[must_use]
    pub fn into_value(self) -> T {
        self.value
    }

    /// Replaces the handed-back value.
    #[must_use]
    pub fn map_value<U>(self, f: impl FnOnce(T) -> U) -> Error<U> {
        let (value, e) = self.into_parts();
        let (run, slot) = (e.run(), e.slot());
        Error::new(f(value), e.action, run, slot, e.kind)
    }

    /// Splits into the value and the error without it.
    #[must_use]
    pub fn into_parts(self) -> (T, Error) {
        let (run, slot) = (self.run(), self.slot());
        let Error {
            value,
            action,
            kind,
            ..
        } = self;
        (value, Error::new((), action, run, slot, kind))
    }

    /// Drops the handed-back value (releasing what it holds) and keeps the
    /// error, e.g. to propagate it with `?`.
    #[must_use]
    pub fn without_value(self) -> Error {
        self.into_parts().1
    }
}
