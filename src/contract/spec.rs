//! What a run computes: a [`RunSpec`] — a published callable and its
//! [`Input`].

use super::code::CodeRef;

/// Where a run's input comes from.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let (mut out0, mut out1) = (Outputs::<0>::new(2), Outputs::<1>::new(2));
/// let a = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1, 2])))?.launch()?;
/// let b = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(code, Input::Previous))?.launch()?;
/// a.fence()?.finalize(&mut out0)?;
/// b.fence()?.finalize(&mut out1)?;
/// assert_eq!(out1.values(), &[3, 4]); // (x + 1) + 1
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input<'a> {
    /// Host elements, uploaded into the slot's arena at prepare.
    Host(&'a [u32]),
    /// The output of the run launched just before this one (in stream
    /// order, fixed at launch): the device reads it in stream order, after
    /// that run's AICore kernel wrote it, so runs can be chained while both
    /// are in flight.
    Previous,
}

/// What to run: a published callable and its input.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let input = [5, 6];
/// let spec = RunSpec::new(code, Input::Host(&input)); // Copy: reuse it freely
/// let a = runner.prepare(runner.take_slot::<0>()?, spec)?;
/// let b = runner.prepare(runner.take_slot::<1>()?, spec)?;
/// # drop((a, b));
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpec<'a> {
    pub(crate) code: CodeRef<'a>,
    pub(crate) input: Input<'a>,
}

impl<'a> RunSpec<'a> {
    /// A run of `code` on `input`.
    #[must_use]
    pub fn new(code: CodeRef<'a>, input: Input<'a>) -> Self {
        RunSpec { code, input }
    }
}
