//! Slots at the type level: `Slot<I>` is a slot index the compiler checks
//! against `DEPTH`, and [`SlotToken`] is the one capability to use slot `I`.

use std::fmt;
use std::mem::ManuallyDrop;

use bytemuck::Pod;

use super::buffer::{PerSlot, SlotBuffer};
use super::port::Port;

mod sealed {
    pub trait Sealed {}
}

/// Slot index `I` as a type.
///
/// ```
/// use runclaim::contract::{Slot, SlotOf};
///
/// fn below<const I: usize, const D: usize>() where Slot<I>: SlotOf<D> {}
/// below::<1, 2>(); // slot 1 of a depth-2 runner exists; below::<2, 2>() does not compile
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot<const I: usize>;

/// Implemented for `Slot<I>` exactly when `I < DEPTH`: a slot index out of
/// range is a type error (E0277), reported already by `cargo check`.
///
/// ```
/// use runclaim::contract::{Slot, SlotOf};
///
/// fn first_and_last<const D: usize>() where Slot<0>: SlotOf<D>, Slot<2>: SlotOf<D> {}
/// first_and_last::<3>();
/// ```
pub trait SlotOf<const DEPTH: usize>: sealed::Sealed {}

/// A pipeline depth as a type.
///
/// ```
/// use runclaim::contract::{Depth, SupportedDepth};
///
/// fn supported<const D: usize>() where Depth<D>: SupportedDepth {}
/// supported::<2>();
/// supported::<16>(); // Depth<1> and Depth<17> do not compile
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Depth<const N: usize>;

/// Implemented for the supported depths, `Depth<2>` through `Depth<16>`.
///
/// ```
/// use runclaim::{Device, DeviceConfig};
/// use runclaim::sim::SimDriver;
///
/// let d = Device::<_, 4>::open(SimDriver::stepped(Default::default()), DeviceConfig::default())?;
/// # drop(d);
/// # Ok::<(), runclaim::Error>(())
/// ```
pub trait SupportedDepth: sealed::Sealed {}

impl<const I: usize> sealed::Sealed for Slot<I> {}

macro_rules! depths {
    ($($n:literal: [$($i:literal)*];)*) => {$(
        impl sealed::Sealed for Depth<$n> {}
        impl SupportedDepth for Depth<$n> {}
        $(impl SlotOf<$n> for Slot<$i> {})*
    )*};
}

depths! {
    2: [0 1];
    3: [0 1 2];
    4: [0 1 2 3];
    5: [0 1 2 3 4];
    6: [0 1 2 3 4 5];
    7: [0 1 2 3 4 5 6];
    8: [0 1 2 3 4 5 6 7];
    9: [0 1 2 3 4 5 6 7 8];
    10: [0 1 2 3 4 5 6 7 8 9];
    11: [0 1 2 3 4 5 6 7 8 9 10];
    12: [0 1 2 3 4 5 6 7 8 9 10 11];
    13: [0 1 2 3 4 5 6 7 8 9 10 11 12];
    14: [0 1 2 3 4 5 6 7 8 9 10 11 12 13];
    15: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14];
    16: [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15];
}

/// The capability to use slot `I`: its arena bank, handshake region,
/// device-wall buffer and status record.
///
/// A runner issues at most one live token per slot
/// ([`Runner::take_slot`](super::Runner::take_slot)). The token moves into
/// the run it prepares and comes back at finalize, or inside an error; it is
/// neither `Clone` nor `Copy`, so two runs can never hold one slot. Dropping
/// a token returns the slot to its runner; dropping the token of a launched
/// run first waits (bounded) for that run's fence.
///
/// Each token carries a *lease*: the slot's lease advances whenever the
/// slot is reclaimed (a drain or a publication after a forgotten run), so a
/// token that outlived its lease can neither finalize nor release anything.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::contract::ErrorKind;
/// let token = runner.take_slot::<0>()?;
/// assert_eq!(runner.take_slot::<0>().unwrap_err().kind(), &ErrorKind::SlotTaken); // one at a time
/// drop(token); // the slot returns to the runner
/// let token = runner.take_slot::<0>()?;
/// assert_eq!(token.index(), 0);
/// # Ok::<(), runclaim::Error>(())
/// ```
// Inside the crate a token has an erased form, `ErasedToken`, with the slot
// index a value. The two convert losslessly: a `SlotToken<'r, I>` is an
// `ErasedToken` whose `slot` is `I` (kept in the type, so a typed token stays
// two words and a lease). The only ways to make one are
// `Runner::take_slot::<I>`, bounded by `Slot<I>: SlotOf<DEPTH>`, and
// `ErasedToken::typed::<I>`, which checks.
pub struct SlotToken<'r, const I: usize> {
    port: &'r dyn Port,
    lease: u64,
}

impl<const I: usize> SlotToken<'_, I> {
    /// The slot index, `I`.
    #[must_use]
    pub const fn index(&self) -> usize {
        I
    }

    /// The lease this token holds.
    #[must_use]
    #[inline]
    pub fn lease(&self) -> u64 {
        self.lease
    }
}

impl<'r, const I: usize> SlotToken<'r, I> {
    /// The port the slot belongs to, for as long as the token's borrow.
    pub(crate) fn port_ref(&self) -> &'r dyn Port {
        self.port
    }
}

impl<const I: usize> fmt::Debug for SlotToken<'_, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotToken")
            .field("slot", &I)
            .field("lease", &self.lease)
            .finish()
    }
}

/// Releases the slot: the same release an erased token's drop makes.
impl<const I: usize> Drop for SlotToken<'_, I> {
    fn drop(&mut self) {
        self.port.release(I, self.lease);
    }
}

/// A slot token with the slot index a value: what a [`SlotToken`] is with
/// its `I` erased, so that tokens of different slots have one type (the
/// pipeline keeps `DEPTH` of them in an array). Crate-private, like its
/// only constructor (`Runner::take_erased`, which checks the index against
/// `DEPTH`); it turns back into a typed token only through
/// [`typed`](ErasedToken::typed), which checks the index against `I`.
/// Dropping it releases the slot, exactly as dropping a typed token does.
pub(crate) struct ErasedToken<'r> {
    port: &'r dyn Port,
    slot: usize,
    lease: u64,
}

impl<'r> ErasedToken<'r> {
    /// The token of `slot` on `lease`, issued by `port`. The caller has
    /// checked `slot < DEPTH` and taken the lease from the device.
    #[inline]
    pub(crate) fn new(port: &'r dyn Port, slot: usize, lease: u64) -> Self {
        ErasedToken { port, slot, lease }
    }

    /// This token as slot `I`'s, or itself back when it is another slot's.
    #[inline]
    pub(crate) fn typed<const I: usize>(self) -> Result<SlotToken<'r, I>, Self> {
        if self.slot != I {
            return Err(self);
        }
        // The slot is released once, by the typed token.
        let raw = ManuallyDrop::new(self);
        Ok(SlotToken {
            port: raw.port,
            lease: raw.lease,
        })
    }
}

impl fmt::Debug for ErasedToken<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ErasedToken")
            .field("slot", &self.slot)
            .field("lease", &self.lease)
            .finish()
    }
}

impl Drop for ErasedToken<'_> {
    fn drop(&mut self) {
        self.port.release(self.slot, self.lease);
    }
}

/// A claim on one slot, typed or erased: what a run holds, so that one
/// implementation of every transition serves `Run<'r, S, I>` (holding a
/// `SlotToken<'r, I>`, whose slot is the constant `I`) and the erased run
/// (holding an `ErasedToken`, whose slot is a value).
pub(crate) trait Claim {
    /// The slot index (for a typed token, the constant `I`).
    fn slot(&self) -> usize;

    /// The lease held.
    fn lease(&self) -> u64;

    /// The port the slot belongs to.
    fn port(&self) -> &dyn Port;
}

impl Claim for ErasedToken<'_> {
    #[inline]
    fn slot(&self) -> usize {
        self.slot
    }

    #[inline]
    fn lease(&self) -> u64 {
        self.lease
    }

    #[inline]
    fn port(&self) -> &dyn Port {
        self.port
    }
}

impl<const I: usize> Claim for SlotToken<'_, I> {
    #[inline]
    fn slot(&self) -> usize {
        I
    }

    #[inline]
    fn lease(&self) -> u64 {
        self.lease
    }

    #[inline]
    fn port(&self) -> &dyn Port {
        self.port
    }
}

/// A set of slot indices (for health reports).
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let run = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// let launched = runner.health().launched;
/// assert_eq!(launched.iter().collect::<Vec<_>>(), [1]);
/// # drop(run);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SlotSet(u32);

impl SlotSet {
    /// The empty set.
    #[must_use]
    pub const fn new() -> Self {
        SlotSet(0)
    }

    pub(crate) fn insert(&mut self, slot: usize) {
        self.0 |= 1 << slot;
    }

    /// Whether `slot` is in the set.
    #[must_use]
    pub fn contains(&self, slot: usize) -> bool {
        slot < 32 && self.0 & (1 << slot) != 0
    }

    /// Number of slots in the set.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// The slots, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..32).filter(|&i| self.contains(i))
    }
}

impl fmt::Debug for SlotSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

/// Per-slot buffers are reached through slot tokens: here, after the
/// tokens, so that `buffer.rs` needs nothing of slots.
impl<T: Pod> PerSlot<T> {
    /// Slot `I`'s buffer, for the holder of slot `I`'s token (which no
    /// launched run holds; a run of slot `I` forgotten after binding it is
    /// still waited for by the host access itself). `None` for a token of
    /// another device.
    pub fn of<const I: usize>(&mut self, token: &SlotToken<'_, I>) -> Option<SlotBuffer<'_, T, I>> {
        let device = self.buffers.first()?.core().device;
        if token.port().device_id() != device {
            return None;
        }
        Some(SlotBuffer {
            buffer: self.buffers.get_mut(I)?,
        })
    }
}
