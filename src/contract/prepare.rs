//! What a run can be prepared from — a [`RunSpec`] or a `&mut`
//! [`Workload`] — and what the prepared run keeps of it ([`Spec`]).
#![allow(
    clippy::inline_always,
    reason = "thin transition wrappers: out of line each moves a whole run and its result through memory (measured with callgrind, benches/contract.rs: 180 instructions per RunSpec cycle together)"
)]

use super::error::ErrorKind;
use super::port::{Port, RunInfo};
use super::spec::{Input, RunSpec};
use super::workload::{Bindings, Data, NoWorkload, WithWorkload, Workload, lowered, lowered_args};

/// What a run can be prepared from ([`Runner::prepare`](super::Runner::prepare)):
/// a [`RunSpec`] (one `u32` input, outputs into an
/// [`Outputs`](super::Outputs)) or a [`Workload`] (tensors and scalars).
/// Its [`Bindings`] are what the run keeps until finalize. Sealed.
///
/// ```
/// use runclaim::{Device, Prepared, Run, Runner, SlotToken};
/// use runclaim::contract::Spec;
/// use runclaim::driver::Driver;
///
/// /// Prepares whatever it is given in slot 0.
/// fn prepare0<'r, D: Driver, W: Spec>(
///     runner: &'r Runner<'r, D, 2>,
///     spec: W,
/// ) -> Result<Run<'r, Prepared, 0, W::Bindings>, runclaim::Error> {
///     Ok(runner.prepare(runner.take_slot::<0>()?, spec)?)
/// }
/// ```
pub trait Spec: sealed::Sealed {
    /// What the prepared run keeps: [`NoWorkload`] or [`WithWorkload`].
    type Bindings: Bindings;
}

impl Spec for RunSpec<'_> {
    type Bindings = NoWorkload;
}

impl<'w, 'a> Spec for &'w mut Workload<'a> {
    type Bindings = WithWorkload<'w, 'a>;
}

#[allow(
    private_interfaces,
    reason = "sealed: the trait is unnameable outside the crate, so its method (and the crate-private types it names) cannot be called or implemented there"
)]
pub(crate) mod sealed {
    use super::{
        Data, ErrorKind, Input, NoWorkload, Port, RunInfo, RunSpec, Spec, WithWorkload, Workload,
        lowered, lowered_args,
    };

    /// How each kind of spec reaches the device's one prepare: a workload
    /// with its own arguments, a `RunSpec` lowered into two tensors.
    pub trait Sealed {
        /// Prepares the run in `slot` (held with `lease`) on `port`.
        fn prepare_on(
            self,
            port: &dyn Port,
            slot: usize,
            lease: u64,
        ) -> Result<(RunInfo, <Self as Spec>::Bindings), ErrorKind>
        where
            Self: Spec;
    }

    impl Sealed for RunSpec<'_> {
        #[inline(always)]
        fn prepare_on(
            self,
            port: &dyn Port,
            slot: usize,
            lease: u64,
        ) -> Result<(RunInfo, <Self as Spec>::Bindings), ErrorKind> {
            let input = match self.input {
                Input::Host(data) => Data::ArenaIn(bytemuck::cast_slice(data)),
                Input::Previous => Data::Chained,
            };
            // The output's buffer is given at finalize.
            let mut tensors = lowered(input, &mut []);
            let info = port.prepare(slot, lease, self.code, lowered_args(&mut tensors))?;
            Ok((info, NoWorkload))
        }
    }

    impl Sealed for &mut Workload<'_> {
        #[inline]
        fn prepare_on(
            self,
            port: &dyn Port,
            slot: usize,
            lease: u64,
        ) -> Result<(RunInfo, <Self as Spec>::Bindings), ErrorKind> {
            let info = port.prepare(slot, lease, self.code, self.args())?;
            Ok((info, WithWorkload { work: self }))
        }
    }
}
