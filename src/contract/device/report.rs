//! What a device reports about itself: [`ContractStats`], [`Health`] and a
//! drain's [`DrainReport`].

use crate::contract::error::Poison;
use crate::contract::slot::SlotSet;

/// Counters of the contract itself ([`Device::stats`](super::Device::stats)).
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let mut out = Outputs::<0>::new(4);
/// runner.run_serial(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])), &mut out)?;
/// let stats = runner.device().stats();
/// assert_eq!((stats.launched, stats.fenced, stats.finalized), (1, 1, 1));
/// assert_eq!(stats.aicore_recreations, 1); // the first launch after the publication
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContractStats {
    /// Runs launched.
    pub launched: u64,
    /// Runs observed complete by a fence (or by a drop's fence).
    pub fenced: u64,
    /// Runs finalized successfully.
    pub finalized: u64,
    /// Runs whose status reported an error.
    pub run_failures: u64,
    /// Slots quarantined.
    pub quarantined: u64,
    /// Drains that proved the queue quiet.
    pub drains: u64,
    /// AICore streams re-created after a publication.
    pub aicore_recreations: u64,
    /// Streams re-created after a fault.
    pub fault_recreations: u64,
    /// Code generations started (registrations that uploaded new code).
    pub generations: u64,
    /// Slots reclaimed from abandoned runs proven complete
    /// ([`Health::reclaimed`]).
    pub reclaimed: u64,
    /// Runs captured into a graph ([`Run::capture`](crate::Run::capture)).
    pub captures: u64,
    /// Runs launched as a replay of a capture (a capture's own first
    /// replay included).
    pub replays: u64,
}

/// Why a [`SharedDevice`](crate::SharedDevice) closed itself: the
/// recovery it started after a fault could not bring the device back.
/// Every waiter was answered ([`ErrorKind::Lost`](crate::contract::ErrorKind::Lost)),
/// every submitted value handed back.
///
/// ```
/// use runclaim::contract::LostCause;
///
/// let c = LostCause::Undrained { count: 2 };
/// assert_eq!(c.to_string(), "2 run(s) still in flight after the recovery's drain budget");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostCause {
    /// The queue could not be proven quiet within the drain's budget:
    /// `count` runs were still in flight (a kernel that never ends).
    Undrained {
        /// Runs not proven complete.
        count: usize,
    },
    /// A driver call of the recovery failed (the device is lost, or a
    /// faulted stream could not be re-created): the operation, and the
    /// runtime's code where it reported one.
    Driver {
        /// The driver operation that failed.
        op: crate::driver::Op,
        /// The native code, where a vendor runtime reported one.
        code: Option<i32>,
    },
    /// After a drain, a slot could not be taken back into service.
    Slot {
        /// The slot.
        slot: usize,
    },
}

impl std::fmt::Display for LostCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LostCause::Undrained { count } => write!(
                f,
                "{count} run(s) still in flight after the recovery's drain budget"
            ),
            LostCause::Driver { op, code: Some(c) } => {
                write!(f, "the driver's {op:?} failed with code {c}")
            }
            LostCause::Driver { op, code: None } => write!(f, "the driver's {op:?} failed"),
            LostCause::Slot { slot } => write!(f, "slot {slot} could not be taken back"),
        }
    }
}

/// A snapshot of a device's run-time state.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let run = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// let h = runner.health();
/// assert_eq!((h.in_flight, h.poisoned), (1, None));
/// assert!(h.launched.contains(1) && h.quarantined.is_empty());
/// # drop(run);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// The poison, if the runner stopped launching.
    pub poisoned: Option<Poison>,
    /// Runs in flight (including unproven ones).
    pub in_flight: usize,
    /// Slots quarantined until a drain.
    pub quarantined: SlotSet,
    /// Slots in flight.
    pub launched: SlotSet,
    /// Device buffers dropped that no run can touch any more, waiting only
    /// for their free, which is lazy: at the next allocation, drain or
    /// close.
    pub buffers_awaiting_free: usize,
    /// Device buffers dropped that a run which bound them may still touch
    /// (a forgotten run not yet seen complete, or an unproven one): never
    /// freed or reused until that run is proven complete — for an unproven
    /// run, by a drain that proves the queue quiet. Once it is, each counts
    /// in [`buffers_awaiting_free`](Self::buffers_awaiting_free) until its
    /// free.
    pub buffers_quarantined: usize,
    /// Slots given back by runs whose awaited fence was dropped before it
    /// resolved: each reclaimed at a slot's next take, once the device
    /// proved the run complete (cumulative).
    pub reclaimed: u64,
    /// A [`SharedDevice`](crate::SharedDevice)'s recoveries from a fault
    /// or an overrun, each started and finished by the handle itself
    /// (cumulative; 0 for a device not shared).
    pub recoveries: u64,
    /// How long the last of them took, on the driver's clock: from the
    /// look that found the device poisoned to re-admission.
    pub last_recovery: Option<std::time::Duration>,
    /// `true` while a shared device recovers (submissions wait).
    pub recovering: bool,
    /// Why a shared device closed itself: its recovery could not prove
    /// the queue quiet or re-create its streams.
    pub lost: Option<LostCause>,
}

/// What a drain found and did.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let mut runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// // A forgotten run keeps its slot until a drain proves it complete.
/// let run = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// std::mem::forget(run);
/// let report = runner.drain()?;
/// assert_eq!((report.retired, report.cleared), (1, None));
/// assert!(runner.take_slot::<0>().is_ok());
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// In-flight entries retired (forgotten, unproven or partial runs).
    pub retired: usize,
    /// Quarantined slots returned to service.
    pub released: usize,
    /// Slots the drain kept out of service (empty unless the driver
    /// refused to destroy a captured run's graph, which may still replay on
    /// the graph's own streams): a later drain retries the destroy and
    /// returns them. [`Pipeline::new`](crate::Pipeline::new) and
    /// `take_slot` refuse such a slot as quarantined until then.
    pub kept: SlotSet,
    /// Faulted streams re-created.
    pub streams_recreated: usize,
    /// The poison cleared, if the runner was poisoned.
    pub cleared: Option<Poison>,
}
