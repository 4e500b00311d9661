//! Recovering a pipeline: its drain settles the pending runs (their
//! outcomes kept for `complete`), proves the queue quiet and takes every
//! slot back — within one total bound, blocking or awaited.

use super::{Pipeline, PipelineDrainFuture};
use crate::contract::device::DrainReport;
use std::future::Future;
use std::pin::Pin;

use crate::contract::error::Error;
use crate::contract::sleep::block_on;
use crate::driver::Driver;

impl<'r, D: Driver, const DEPTH: usize, T> Pipeline<'r, D, DEPTH, T> {
    /// Recovers from a poisoned runner, and takes every slot back into
    /// service: like [`Runner::drain`](crate::Runner::drain), for a runner whose slots are all in
    /// this pipeline.
    ///
    /// First it settles the pending runs, oldest first: each is fenced and
    /// finalized, and its result — or its error — is kept for
    /// [`complete`](Pipeline::complete), so no result the device produced
    /// is lost. Then it proves the queue quiet (clearing the poison,
    /// releasing quarantined slots, re-creating faulted streams) and takes
    /// a fresh token for every slot.
    ///
    /// All of it waits within **one total bound**, as [`Runner::drain`](crate::Runner::drain)
    /// does: `(runs in flight + 1) ×`
    /// [`fence_timeout`](crate::contract::DeviceConfig::fence_timeout) on the
    /// driver's clock, runs in flight counted when the drain starts. A
    /// pending run not proven complete when the budget is spent is settled
    /// as [`ErrorKind::Timeout`](crate::contract::ErrorKind::Timeout) (a run that overran at the head of the
    /// queue poisons the runner, as a fence would); an expired budget
    /// leaves the streams unproven: [`ErrorKind::Undrained`](crate::contract::ErrorKind::Undrained). (As for the
    /// drop, a wait asks the driver for at least 1 µs, so the last one
    /// may end that much past the bound.)
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// use runclaim::contract::ErrorKind;
    /// use runclaim::sim::{Fault, Kernel};
    /// let mut pipe = Pipeline::new(&runner)?;
    /// runner.device().driver().inject(Fault::KernelFault { kernel: Kernel::Aicpu, nth: 1 });
    /// pipe.submit(RunSpec::new(code, Input::Host(&[1])), 0)?;
    /// let err = pipe.complete().unwrap_err(); // the device faulted: runner poisoned
    /// assert!(matches!(err.kind(), ErrorKind::Fault(_)));
    /// let err = pipe.submit(RunSpec::new(code, Input::Host(&[1])), 1).unwrap_err();
    /// assert!(matches!(err.kind(), ErrorKind::Poisoned(_)));
    ///
    /// let report = pipe.drain()?; // proves the queue quiet, re-creates the faulted stream
    /// assert!(report.cleared.is_some());
    /// let again = err.into_value(); // the refused spec and tag
    /// pipe.submit(again.work, again.tag)?;
    /// assert_eq!(pipe.complete()?.map(|d| (d.tag, d.values[0])), Some((1, 2)));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Runner::drain`](crate::Runner::drain): [`ErrorKind::Undrained`](crate::contract::ErrorKind::Undrained) when the streams are
    /// still busy after the queue budget (the runner stays poisoned; the
    /// settled outcomes are kept; try again later), or a driver error. A
    /// slot whose token cannot be taken back reports why at its next
    /// submit.
    pub fn drain(&mut self) -> Result<DrainReport, Error> {
        // The awaited drain, driven on this thread (`contract/sleep.rs`):
        // one wait, within the same one total bound.
        let device = self.runner.device();
        let mut fut = self.drain_async();
        block_on(device, None, |cx| Pin::new(&mut fut).poll(cx))
    }

    /// After a drain: a fresh token for every lane's slot.
    pub(super) fn renew_lanes(&mut self) {
        let runner = self.runner;
        for lane in &mut self.lanes {
            lane.renew(&runner);
        }
    }

    /// [`drain`](Pipeline::drain), awaited: resolves as `drain` returns,
    /// within the same one total bound; cancel-safe (see
    /// [`PipelineDrainFuture`]).
    pub fn drain_async(&mut self) -> PipelineDrainFuture<'_, 'r, D, DEPTH, T> {
        PipelineDrainFuture::new(self)
    }
}
