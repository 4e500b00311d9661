//! `?` into `Box<dyn std::error::Error>` or `anyhow::Error`: a runclaim
//! error hands back a value (a run, a token, a workload) that borrows the
//! runner, so it is not `'static`, and `?` cannot box it. `?` into
//! [`runclaim::Error`](crate::Error) drops the value by itself (`From`);
//! into anything else, [`WithoutValue::without_value`] drops it first.
//!
//! Why a method and not an owned error form: the handed-back values borrow
//! the runner by design (a run cannot outlive the code it runs), so an
//! error that owns them cannot be `'static` either; and no conversion can
//! happen inside `?` itself (std's `From` for `Box<dyn Error>` is blanket,
//! and the orphan rule forbids another).

use super::Error;

/// Drops a failed result's handed-back value, keeping the error (the
/// same [`Error::without_value`] does, inline): `.without_value()?`
/// propagates into `Box<dyn std::error::Error + Send + Sync>` or
/// `anyhow::Error`.
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec, WithoutValue};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
///     let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
///     let mut out = Outputs::<0>::new(4);
///     let token = runner.take_slot::<0>()?;
///     let spec = RunSpec::new(runner.code("inc")?, Input::Host(&[1]));
///     let run = runner.prepare(token, spec).without_value()?.launch().without_value()?;
///     run.fence().without_value()?.finalize(&mut out).without_value()?;
///     assert_eq!(out.values(), [2]);
///     Ok(())
/// }
/// ```
///
/// Without it, the value's borrow of the runner cannot be boxed:
///
/// ```compile_fail,E0515
/// use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
///     let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
///     let spec = RunSpec::new(runner.code("inc")?, Input::Host(&[1]));
///     runner.prepare(runner.take_slot::<0>()?, spec)?;
///     Ok(())
/// }
/// ```
pub trait WithoutValue<T> {
    /// The result, its error's handed-back value dropped (releasing what
    /// it holds: a run's slot comes back as a dropped run's does).
    ///
    /// # Errors
    /// The error it was, without its value.
    fn without_value(self) -> Result<T, Error>;
}

impl<T, V> WithoutValue<T> for Result<T, Error<V>> {
    #[inline]
    fn without_value(self) -> Result<T, Error> {
        self.map_err(Error::without_value)
    }
}
