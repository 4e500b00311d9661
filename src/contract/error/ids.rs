//! Identities the errors name: a run's ([`RunId`]) and a device buffer's
//! ([`BufferId`]).

use std::fmt;
use std::num::NonZeroU64;

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
