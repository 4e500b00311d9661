//! What a prepared run keeps of what it was prepared from until it is
//! finalized, named for what it holds: [`WithWorkload`] (its workload,
//! borrowed) or [`NoWorkload`] (nothing: a `RunSpec`'s run), and the one
//! thing a launch asks of either — the arguments the run was prepared from.
#![allow(
    clippy::inline_always,
    reason = "thin transition wrappers: out of line each moves a whole run and its result through memory (measured with callgrind, benches/contract.rs: 180 instructions per RunSpec cycle together)"
)]

use std::fmt;

use super::Workload;

/// What a run prepared from a [`Workload`] keeps until it is finalized:
/// the workload itself, borrowed (`&'w mut`), and through it the borrows of
/// its host outputs (written back at finalize) and of its device buffers.
/// It is the fourth parameter of such a run's type,
/// `Run<'r, S, I, WithWorkload<'w, 'a>>`; a [`RunSpec`](crate::RunSpec)'s
/// run has [`NoWorkload`] there. One pointer: a run moves through its
/// states as cheaply whatever its workload holds.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Launched, Run, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// use runclaim::contract::WithWorkload;
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let mut y = [0u32; 2];
/// let mut work = Workload::new(runner.code("inc")?);
/// work.input(&[1u32, 2]).output(&mut y);
/// let run: Run<'_, Launched, 0, WithWorkload<'_, '_>> = runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?;
/// drop(run.fence()?.finalize()?);
/// # Ok::<(), runclaim::Error>(())
/// ```
pub struct WithWorkload<'w, 'a> {
    pub(crate) work: &'w mut Workload<'a>,
}

impl fmt::Debug for WithWorkload<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithWorkload")
            .field("work", &self.work)
            .finish()
    }
}

/// What a run prepared from a [`RunSpec`](crate::RunSpec) keeps: no
/// workload, nothing at all (its input is on the device from prepare on,
/// its output goes into an [`Outputs`](crate::Outputs) at finalize). The
/// default fourth parameter of [`Run`](crate::Run).
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Launched, Run, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// use runclaim::contract::NoWorkload;
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let spec = RunSpec::new(runner.code("inc")?, Input::Host(&[1]));
/// let run: Run<'_, Launched, 0, NoWorkload> = runner.prepare(runner.take_slot::<0>()?, spec)?.launch()?;
/// let same: Run<'_, Launched, 0> = run; // `NoWorkload` is the default
/// # drop(same);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoWorkload;

#[allow(
    private_interfaces,
    private_bounds,
    reason = "sealed: the trait is unnameable outside the crate, so its method (and the crate-private arguments it names) cannot be called or implemented there"
)]
pub(crate) mod sealed {
    use super::{NoWorkload, WithWorkload};
    use crate::contract::workload::{Args, Data, lowered, lowered_args};

    /// What a launch asks of a run's bindings: the arguments the run was
    /// prepared from.
    pub trait Launch {
        /// Calls `f` with the run's arguments: a workload's own, or a
        /// `RunSpec`'s lowered again (`chained`: its input is the previous
        /// run's output).
        fn with_args<R>(&mut self, chained: bool, f: impl FnOnce(Args<'_, '_>) -> R) -> R;
    }

    impl Launch for NoWorkload {
        #[inline(always)]
        fn with_args<R>(&mut self, chained: bool, f: impl FnOnce(Args<'_, '_>) -> R) -> R {
            let input = if chained {
                Data::Chained
            } else {
                Data::ArenaIn(&[])
            };
            let mut tensors = lowered(input, &mut []);
            f(lowered_args(&mut tensors))
        }
    }

    impl Launch for WithWorkload<'_, '_> {
        #[inline]
        fn with_args<R>(&mut self, _: bool, f: impl FnOnce(Args<'_, '_>) -> R) -> R {
            f(self.work.args())
        }
    }
}

/// What a run keeps of its spec: [`NoWorkload`] or [`WithWorkload`]. Sealed.
pub trait Bindings: sealed::Launch + Send + Sync {}
impl Bindings for NoWorkload {}
impl Bindings for WithWorkload<'_, '_> {}
