//! The states a run moves through, as types: [`Prepared`], [`Launched`],
//! [`Fenced`] (sealed: [`State`]).

mod sealed {
    pub trait Sealed {}
}

/// A run state (sealed): [`Prepared`], [`Launched`] or [`Fenced`].
///
/// ```
/// use runclaim::contract::{Launched, Prepared, State};
///
/// assert_eq!((Prepared::NAME, Launched::NAME), ("prepared", "launched"));
/// ```
pub trait State: sealed::Sealed {
    /// The state's name, for messages.
    const NAME: &'static str;
}

/// Slot taken, input uploaded into the slot's arena bank, handshake region
/// cleared, device wall and status record armed. Nothing is on a stream.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::{Prepared, Run};
/// let run: Run<'_, Prepared, 0> = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?;
/// # drop(run);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prepared;

/// The AICore kernel, the AICPU kernel and the run's fence are queued on the
/// shared stream pair.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::{Launched, Run};
/// let run: Run<'_, Launched, 0> =
///     runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// assert_eq!(run.seq(), 1);
/// # drop(run);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launched;

/// This run's own fence event was observed complete (it covers both kernels).
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::{Fenced, Run};
/// let run: Run<'_, Fenced, 0> =
///     runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?.fence()?;
/// # drop(run);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fenced;

impl sealed::Sealed for Prepared {}
impl sealed::Sealed for Launched {}
impl sealed::Sealed for Fenced {}
impl State for Prepared {
    const NAME: &'static str = "prepared";
}
impl State for Launched {
    const NAME: &'static str = "launched";
}
impl State for Fenced {
    const NAME: &'static str = "fenced";
}
