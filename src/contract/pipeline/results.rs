//! What crosses a [`Pipeline`](super::Pipeline)'s API: what it runs
//! ([`Submit`]: a [`RunSpec`] or an owned [`Workload`]) and what it hands
//! back — a [`Completed`](crate::contract::Completed) run, a [`Rejected`] submission, an
//! [`Unfinished`] run — so that nothing submitted is ever lost.

use crate::contract::error::Error;
use crate::contract::spec::RunSpec;
use crate::contract::workload::Workload;

/// What a [`Pipeline`](super::Pipeline) runs: a [`RunSpec`] (its outputs
/// come back in [`Completed::values`](crate::contract::Completed::values)) or an owned [`Workload`] (it comes
/// back whole in [`Completed::work`](crate::contract::Completed::work), its owned host tensors holding what
/// the device wrote). Sealed.
pub trait Submit<'r>: sealed::Sealed<'r> {}

impl Submit<'_> for RunSpec<'_> {}
impl<'r> Submit<'r> for Workload<'r> {}

#[allow(
    private_interfaces,
    private_bounds,
    reason = "sealed: the trait is unnameable outside the crate, so its method (and the crate-private lane it names) cannot be called or implemented there"
)]
pub(crate) mod sealed {
    use super::{RunSpec, Workload};
    use crate::contract::error::{Error, RunId};
    use crate::contract::lane::{Lane, Source};
    use crate::contract::run::RunOf;
    use crate::contract::slot::Claim;

    /// How a submission reaches a lane, and comes back when refused.
    pub trait Sealed<'r>: Sized {
        /// `Input::Previous`: a run chained on the run launched before it.
        fn chains(&self) -> bool;
        /// Prepares and launches a run of `self` in `lane`, its claims from
        /// `src`, tagged `tag`; refused, hands both back.
        fn submit_into<K: Claim, T>(
            self,
            lane: &mut Lane<'r, K, T>,
            src: &impl Source<K>,
            tag: T,
        ) -> Result<RunId, (Error, T, Self)>;
        /// What a refused submission hands back where a finished run's
        /// workload goes (a spec, `Copy`, none).
        fn into_workload(self) -> Option<Workload<'r>>;
    }

    impl<'r> Sealed<'r> for RunSpec<'_> {
        fn chains(&self) -> bool {
            matches!(self.input, crate::Input::Previous)
        }

        #[inline]
        fn submit_into<K: Claim, T>(
            self,
            lane: &mut Lane<'r, K, T>,
            src: &impl Source<K>,
            tag: T,
        ) -> Result<RunId, (Error, T, Self)> {
            // The lane keeps nothing of a spec: its input is copied at
            // prepare.
            let port = src.port();
            lane.submit(src, tag, (), |token, ()| RunOf::prepare(port, token, self))
                .map_err(|(e, tag, ())| (e, tag, self))
        }

        fn into_workload(self) -> Option<Workload<'r>> {
            None
        }
    }

    impl<'r> Sealed<'r> for Workload<'r> {
        fn chains(&self) -> bool {
            false
        }

        #[inline]
        fn into_workload(self) -> Option<Workload<'r>> {
            Some(self)
        }

        fn submit_into<K: Claim, T>(
            self,
            lane: &mut Lane<'r, K, T>,
            src: &impl Source<K>,
            tag: T,
        ) -> Result<RunId, (Error, T, Self)> {
            // The lane keeps the workload until its run comes back.
            let port = src.port();
            lane.submit(src, tag, self, |token, work| {
                RunOf::prepare_lent(port, token, work)
            })
        }
    }
}

/// What a refused [`Pipeline::submit`](super::Pipeline::submit) hands
/// back: what was submitted — the [`RunSpec`] or the [`Workload`] — and
/// its tag. Nothing was launched.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::contract::ErrorKind;
/// let mut pipe = Pipeline::new(&runner)?;
/// let err = pipe.submit(RunSpec::new(code, Input::Host(&[])), "empty").unwrap_err();
/// assert_eq!(err.kind(), &ErrorKind::EmptyInput);
/// let back = err.into_value();
/// assert_eq!(back.tag, "empty");
/// pipe.submit(RunSpec::new(code, Input::Host(&[1])), back.tag)?; // try again with a real input
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rejected<W, T> {
    /// What was submitted.
    pub work: W,
    /// The tag, as submitted.
    pub tag: T,
}

/// What a failed [`Pipeline::complete`](super::Pipeline::complete) hands
/// back: the tag of the run that produced no result, and its workload if
/// it was a workload's run. The error names the run, its slot and why.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// use runclaim::contract::ErrorKind;
/// let runner = device.publish(&[Callable::program("bad", &Program::new().add(1).fail(9))])?;
/// let mut pipe = Pipeline::new(&runner)?;
/// pipe.submit(RunSpec::new(runner.code("bad")?, Input::Host(&[1])), 41)?;
/// let err = pipe.complete().unwrap_err();
/// assert_eq!(err.kind(), &ErrorKind::RunFailed { code: 9 });
/// assert_eq!(err.into_value().tag, 41);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Unfinished<'r, T> {
    /// The tag the run was submitted with.
    pub tag: T,
    /// Its workload (`None` for a [`RunSpec`]'s run), never lost.
    pub work: Option<Workload<'r>>,
}

/// `?` on a refused submit drops what was submitted and the tag and keeps
/// the error.
impl<W, T> From<Error<Rejected<W, T>>> for Error {
    fn from(e: Error<Rejected<W, T>>) -> Self {
        e.without_value()
    }
}

/// `?` on a failed completion drops the tag (and the workload) and keeps
/// the error.
impl<T> From<Error<Unfinished<'_, T>>> for Error {
    fn from(e: Error<Unfinished<'_, T>>) -> Self {
        e.without_value()
    }
}
