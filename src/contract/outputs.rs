//! What a run hands back: the slot's host [`Outputs`] buffer and the
//! [`Finalized`] record.

use std::fmt;

use super::config::ConfigError;
use super::error::{ErrorKind, RunId};
use super::slot::SlotToken;
use crate::driver::abi::WallRecord;

/// A finalized run: its records, and the slot token back.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let mut out = Outputs::<0>::new(1);
/// let done = runner
///     .prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?
///     .launch()?.fence()?.finalize(&mut out)?;
/// assert_eq!((done.wall.run_id, done.wall.slot), (done.run.get(), 0)); // validated to be this run's
/// let next = runner.prepare(done.token, RunSpec::new(code, Input::Host(&[2])))?; // the slot, again
/// # drop(next);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Finalized<'r, const I: usize> {
    /// The slot, ready for the next run.
    pub token: SlotToken<'r, I>,
    /// The run.
    pub run: RunId,
    /// Its launch sequence number.
    pub seq: u64,
    /// Its device-wall record (validated to be this run's).
    pub wall: WallRecord,
}

/// Slot `I`'s host buffer for outputs. Allocated once and reused, so
/// finalizing allocates nothing.
///
/// ```
/// use runclaim::Outputs;
///
/// let out = Outputs::<0>::new(1024);
/// assert_eq!(out.capacity(), 1024);
/// assert!(out.values().is_empty()); // nothing finalized into it yet
/// ```
// An `ErasedOutputs` whose `slot` is `I`: the typed buffer is the erased
// one with the index promised by the type.
#[derive(Clone, PartialEq, Eq)]
pub struct Outputs<const I: usize> {
    pub(super) raw: ErasedOutputs,
}

impl<const I: usize> Outputs<I> {
    /// A buffer for up to `capacity` elements, at most
    /// [`DeviceConfig::MAX_ELEMENTS`](crate::DeviceConfig::MAX_ELEMENTS) (a
    /// larger request is clamped: no run is larger). Never panics or
    /// aborts: when the host cannot allocate it, the buffer is empty
    /// ([`capacity`](Outputs::capacity) 0) and a finalize into it reports
    /// `OutputsTooSmall`; [`try_new`](Outputs::try_new) says so at once.
    ///
    /// ```
    /// use runclaim::Outputs;
    ///
    /// assert_eq!(Outputs::<0>::new(4).capacity(), 4);
    /// ```
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Outputs {
            raw: ErasedOutputs::new(I, capacity),
        }
    }

    /// A buffer for exactly `capacity` elements.
    ///
    /// # Errors
    /// [`ErrorKind::Config`] (`ArenaTooLarge`) above
    /// [`DeviceConfig::MAX_ELEMENTS`](crate::DeviceConfig::MAX_ELEMENTS);
    /// [`ErrorKind::HostOutOfMemory`] when the host cannot allocate it.
    ///
    /// ```
    /// use runclaim::Outputs;
    ///
    /// assert!(Outputs::<0>::try_new(usize::MAX).is_err()); // refused, nothing allocated
    /// assert_eq!(Outputs::<0>::try_new(8)?.capacity(), 8);
    /// # Ok::<(), runclaim::contract::ErrorKind>(())
    /// ```
    pub fn try_new(capacity: usize) -> Result<Self, ErrorKind> {
        ErasedOutputs::try_new(I, capacity).map(|raw| Outputs { raw })
    }

    /// Elements it can hold.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.raw.values.len()
    }

    /// The last finalized run's outputs (empty after a failed finalize).
    #[must_use]
    #[inline]
    pub fn values(&self) -> &[u32] {
        self.raw.values()
    }

    /// The run the values belong to.
    #[must_use]
    pub fn run(&self) -> Option<RunId> {
        self.raw.run
    }
}

impl<const I: usize> fmt::Debug for Outputs<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Outputs")
            .field("slot", &I)
            .field("capacity", &self.capacity())
            .field("run", &self.raw.run)
            .field("values", &self.values())
            .finish()
    }
}

/// A slot's outputs buffer with the slot index a value: what
/// [`Outputs<I>`](Outputs) is with its `I` erased. An erased run finalizes
/// only into the buffer of its own slot (checked: the erased form of the
/// E0308 a typed run gets for another slot's buffer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ErasedOutputs {
    slot: usize,
    pub(super) values: Vec<u32>,
    pub(super) len: usize,
    pub(super) run: Option<RunId>,
}

impl ErasedOutputs {
    /// Slot `slot`'s buffer for up to `capacity` elements (clamped, never
    /// failing: see [`Outputs::new`]).
    pub(crate) fn new(slot: usize, capacity: usize) -> Self {
        Self::try_new(slot, capacity.min(crate::DeviceConfig::MAX_ELEMENTS)).unwrap_or(
            ErasedOutputs {
                slot,
                values: Vec::new(),
                len: 0,
                run: None,
            },
        )
    }

    fn try_new(slot: usize, capacity: usize) -> Result<Self, ErrorKind> {
        let max = crate::DeviceConfig::MAX_ELEMENTS;
        if capacity > max {
            return Err(ConfigError::ArenaTooLarge {
                max_elements: capacity,
                max,
            }
            .into());
        }
        let mut values = Vec::new();
        values
            .try_reserve_exact(capacity)
            .map_err(|_| ErrorKind::HostOutOfMemory {
                bytes: capacity.saturating_mul(4),
            })?;
        values.resize(capacity, 0);
        Ok(ErasedOutputs {
            slot,
            values,
            len: 0,
            run: None,
        })
    }

    /// The slot whose runs finalize into it.
    #[inline]
    pub(super) fn slot(&self) -> usize {
        self.slot
    }

    /// The last finalized run's outputs.
    #[inline]
    pub(crate) fn values(&self) -> &[u32] {
        &self.values[..self.len]
    }
}
