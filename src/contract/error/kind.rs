//! What went wrong: [`ErrorKind`], and the [`Record`] a record error
//! concerns.

use std::fmt;
use std::time::Duration;

use super::{BufferId, Poison, RunId};
use crate::contract::config::ConfigError;
use crate::driver::DriverError;

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
    /// [`Health::poisoned`](crate::contract::Health) says so. A launch that meets it
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
    /// [`Input::Previous`](crate::contract::Input::Previous) with no valid previous
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
        /// runner is poisoned, and [`Health::poisoned`](crate::contract::Health)
        /// names the run and its slot. `None`: only "not yet".
        overran: Option<RunId>,
    },
    /// [`Run::try_fence`](crate::contract::Run::try_fence): not complete yet.
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
    /// [`Pipeline::submit`](crate::contract::Pipeline::submit): `depth` runs are
    /// pending already; [`complete`](crate::contract::Pipeline::complete) one first.
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
        "host tensor {tensor} of {bytes} bytes does not fit in the {capacity}-byte staging region after the host tensors before it (raise DeviceConfig::staging_bytes, or keep the tensor in a DeviceBuffer)"
    )]
    StagingFull {
        /// The tensor's index in the workload.
        tensor: usize,
        /// Its size.
        bytes: usize,
        /// The region's size ([`DeviceConfig::staging_bytes`](crate::contract::DeviceConfig::staging_bytes)).
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
    /// The callable was published by a publication the device has since
    /// replaced (a shared device's code reference, kept across a
    /// republication): its code may be gone.
    #[error("the callable belongs to a publication the device has replaced")]
    CodeRepublished,
    /// `Input::Previous` through a device many tasks share: "the run
    /// launched before" would be another task's.
    #[error("a shared device does not chain on the previous run: it may be another task's")]
    ChainAcrossTasks,
    /// The shared device was closed: it takes no new run.
    #[error("the shared device is closed")]
    Closed,
    /// A shared device is recovering from a fault or an overrun (it
    /// settles the runs in flight, proves the queue quiet, re-creates
    /// faulted streams): [`try_submit`](crate::SharedDevice::try_submit)
    /// refused, the work handed back. Retryable: submit again, or
    /// [`submit`](crate::SharedDevice::submit), which waits for the
    /// recovery.
    #[error("the shared device is recovering{}; submit again", recovering_suffix(*.from))]
    Recovering {
        /// The run whose fault or overrun poisoned the device, where the
        /// poison names one ([`Health::poisoned`](crate::contract::Health)
        /// has the whole poison).
        from: Option<RunId>,
    },
    /// The shared device could not recover from a fault and closed
    /// itself; [`Health::lost`](crate::contract::Health) says why.
    #[error("the shared device closed itself: its recovery failed ({0})")]
    Lost(crate::contract::LostCause),
    /// A device buffer is still shared (bound by a submitted run, or held
    /// elsewhere): the host may not read or write it until it is the only
    /// holder.
    #[error("{buffer} is still shared: bound by a run, or held elsewhere")]
    BufferShared {
        /// The buffer.
        buffer: BufferId,
    },
    /// A refill or an access ([`Workload::get`](crate::Workload::get) and
    /// its siblings) names a tensor the workload does not have.
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
    /// A refill would change what a tensor is — its kind (a host input, a
    /// host output, a device buffer, …) or its element type — or an access
    /// ([`Workload::get`](crate::Workload::get) and its siblings) asks a
    /// tensor for what it is not (an owned host tensor, of element type
    /// `T`).
    #[error(
        "tensor {tensor} is {is}: a refill keeps what a tensor is, an access asks for what it is"
    )]
    TensorMismatch {
        /// The tensor's index in the workload.
        tensor: usize,
        /// What it is ("a host input", …, or "of another element type").
        is: &'static str,
    },
    /// A [`TensorId`](crate::TensorId) or [`OwnedId`](crate::OwnedId)
    /// given to a workload other than the one that handed it out: refused
    /// whatever tensor of this workload its index would name.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::contract::ErrorKind;
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let (mut a, mut b) = (Workload::new(runner.code("inc")?), Workload::new(runner.code("inc")?));
    /// let ya = a.add_owned(vec![1u32], Dir::InOut);
    /// b.add_owned(vec![2u32], Dir::InOut);
    /// let err = b.get(ya).unwrap_err(); // `b` has a `u32` tensor 0, but not `a`'s
    /// assert_eq!(err.kind(), &ErrorKind::ForeignTensor { tensor: 0 });
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[error("the id of tensor {tensor} is another workload's")]
    ForeignTensor {
        /// The index the id carries.
        tensor: usize,
    },
    /// A capture or replay was refused before any runtime call
    /// ([`ReplayRefusal`](super::ReplayRefusal) says why and what differs).
    #[error("replay refused: {0}")]
    Replay(Box<super::ReplayRefusal>),
}

fn or_unknown(run: Option<RunId>) -> String {
    run.map_or_else(|| "(unknown)".to_owned(), |r| r.to_string())
}

fn recovering_suffix(run: Option<RunId>) -> String {
    run.map(|r| format!(" from the fault of run {r}"))
        .unwrap_or_default()
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

static_assertions::const_assert!(size_of::<ErrorKind>() <= 32);

impl From<ConfigError> for ErrorKind {
    fn from(e: ConfigError) -> Self {
        ErrorKind::Config(Box::new(e))
    }
}
