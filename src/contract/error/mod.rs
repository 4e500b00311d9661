//! Contract errors. Every failure names the [`Action`] that failed, the run
//! and the slot it concerns, and what went wrong ([`ErrorKind`]); a failed
//! transition hands its value back inside the [`Error`].
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | `Error<T>` (a failure that hands its value back) and `Action` |
//! | `kind.rs` | `ErrorKind`, `Record` |
//! | `poison.rs` | `Poison`, `PoisonCause` |
//! | `ids.rs` | `RunId`, `BufferId` |
//! | `replay.rs` | `ReplayRefusal`, `TensorDiff`: why a capture or replay was refused |

mod ids;
mod kind;
mod plain;
mod poison;
mod replay;

use std::fmt;

pub use self::ids::{BufferId, RunId};
pub use self::kind::{ErrorKind, Record};
pub use self::plain::WithoutValue;
use self::poison::who;
pub use self::poison::{Poison, PoisonCause};
pub use self::replay::{ReplayRefusal, TensorDiff};

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
// New variants go last: a variant's discriminant is kept across releases.
pub enum Action {
    /// [`Device::open`](crate::contract::Device::open).
    Open,
    /// [`Device::publish`](crate::contract::Device::publish).
    Publish,
    /// [`Runner::take_slot`](crate::contract::Runner::take_slot).
    TakeSlot,
    /// [`Runner::code`](crate::contract::Runner::code): looking a callable up by name.
    Lookup,
    /// [`Runner::prepare`](crate::contract::Runner::prepare).
    Prepare,
    /// [`Run::launch`](crate::contract::Run::launch).
    Launch,
    /// [`Run::fence`](crate::contract::Run::fence) / [`Run::fence_for`](crate::contract::Run::fence_for).
    Fence,
    /// [`Run::try_fence`](crate::contract::Run::try_fence).
    TryFence,
    /// [`Run::finalize`](crate::contract::Run::finalize).
    Finalize,
    /// [`Runner::drain`](crate::contract::Runner::drain) (also inside publish and close).
    Drain,
    /// [`Device::close`](crate::contract::Device::close).
    Close,
    /// [`Device::alloc_buffer`](crate::contract::Device::alloc_buffer).
    Alloc,
    /// [`Device::read_buffer`](crate::contract::Device::read_buffer).
    Read,
    /// [`Device::write_buffer`](crate::contract::Device::write_buffer).
    Write,
    /// Refilling a [`Workload`](crate::contract::Workload) in place
    /// ([`Workload::set_scalar`](crate::contract::Workload::set_scalar) and its
    /// siblings).
    Refill,
    /// Reading or taking a [`Workload`](crate::contract::Workload)'s owned
    /// host tensor ([`Workload::get`](crate::contract::Workload::get),
    /// [`get_mut`](crate::contract::Workload::get_mut),
    /// [`take`](crate::contract::Workload::take)).
    Access,
    /// A submission refused before its run was prepared or launched:
    /// [`Pipeline::submit`](crate::contract::Pipeline::submit) with every
    /// lane owing a result, [`SharedDevice::submit`](crate::contract::SharedDevice::submit)
    /// and its siblings refused by the device's state (closed, lost,
    /// recovering, every slot busy for a try). A submission's own prepare
    /// or launch reports [`Prepare`](Action::Prepare) or
    /// [`Launch`](Action::Launch).
    Submit,
    /// [`Run::capture`](crate::contract::Run::capture).
    Capture,
    /// [`Run::replay`](crate::contract::Run::replay).
    Replay,
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
            Action::Capture => "capture",
            Action::Replay => "replay",
            Action::Submit => "submit",
            Action::Fence => "fence",
            Action::TryFence => "try_fence",
            Action::Finalize => "finalize",
            Action::Drain => "drain",
            Action::Close => "close",
            Action::Alloc => "alloc",
            Action::Read => "read",
            Action::Write => "write",
            Action::Refill => "refill a workload",
            Action::Access => "access a workload's tensor",
        })
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
    /// Not a `source()`: the message already says it (a chain printer
    /// such as anyhow's `{:#}` would print it twice); [`kind`](Error::kind)
    /// reaches it by type.
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

    /// The run whose fault or overrun this error is collateral damage of,
    /// when that is another run than [`run`](Self::run): the operation
    /// met a fault ahead of it ([`ErrorKind::FaultAhead`]), waited behind a
    /// run that overran ([`ErrorKind::Timeout`] naming another run), or was
    /// refused while a shared device recovered from one
    /// ([`ErrorKind::Recovering`], `None` inside when the poison names no
    /// run). What to do with it: submit the same work again — the fault
    /// was not this work's. `None`: this error is this run's own (or no
    /// run's), and retrying the same work would fail the same way.
    ///
    /// ```
    /// use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
    ///
    /// let sim = SimDriver::stepped(SimConfig::default());
    /// sim.inject(Fault::KernelFault { kernel: Kernel::Aicore, nth: 1 });
    /// let mut device = Device::<_, 2>::open(sim, DeviceConfig::default())?;
    /// let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// let code = runner.code("f")?;
    /// let mut pipe = Pipeline::new(&runner)?;
    /// let first = pipe.submit(RunSpec::new(code, Input::Host(&[1])), 0)?;
    /// pipe.submit(RunSpec::new(code, Input::Host(&[2])), 1)?;
    /// let own = pipe.complete().map(|_| ()).unwrap_err();
    /// assert_eq!(own.collateral(), None); // the faulting run: its own fault
    /// let behind = pipe.complete().map(|_| ()).unwrap_err();
    /// assert_eq!(behind.collateral(), Some(Some(first))); // resubmit it
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn collateral(&self) -> Option<Option<RunId>> {
        match &self.kind {
            ErrorKind::FaultAhead { run, .. }
            | ErrorKind::Timeout {
                overran: Some(run), ..
            } if Some(*run) != self.run => Some(Some(*run)),
            ErrorKind::Recovering { from } => Some(*from),
            _ => None,
        }
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
