//! A runner's drain, awaited ([`DrainFuture`]): it looks and wakes by the
//! rules of `run/future.rs`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::Runner;
use crate::contract::DrainReport;
use crate::contract::error::{Action, Error, ErrorKind};
use crate::contract::wait::{DrainWait, polled_after_ready};
use crate::driver::Driver;

/// A runner's drain, awaited: what [`Runner::drain_async`] and
/// [`Runner::drain_for_async`] return. It resolves as [`Runner::drain`]
/// returns, within the same bound.
///
/// It changes nothing until it resolves: dropping it early leaves the
/// runner as it was (still poisoned, if it was), and the next drain starts
/// over. Polled again after it resolved, it panics, as std's `async fn`
/// futures do.
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let mut device = Device::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
/// let mut runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let code = runner.code("inc")?;
/// let run = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// std::mem::forget(run); // its slot is kept until a drain proves it complete
/// let report = pollster::block_on(runner.drain_async())?;
/// assert_eq!(report.retired, 1);
/// assert!(runner.take_slot::<0>().is_ok());
/// # Ok::<(), runclaim::Error>(())
/// ```
#[must_use = "a future does nothing unless awaited"]
pub struct DrainFuture<'a, 'p, D: Driver, const DEPTH: usize> {
    runner: &'a mut Runner<'p, D, DEPTH>,
    wait: DrainWait,
    done: bool,
}

impl<'a, 'p, D: Driver, const DEPTH: usize> DrainFuture<'a, 'p, D, DEPTH> {
    pub(crate) fn new(runner: &'a mut Runner<'p, D, DEPTH>, timeout: Option<Duration>) -> Self {
        DrainFuture {
            runner,
            wait: DrainWait::new(timeout),
            done: false,
        }
    }
}

impl<D: Driver, const DEPTH: usize> std::fmt::Debug for DrainFuture<'_, '_, D, DEPTH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainFuture")
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<D: Driver, const DEPTH: usize> Future for DrainFuture<'_, '_, D, DEPTH> {
    type Output = Result<DrainReport, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.done {
            polled_after_ready("DrainFuture");
        }
        match this.runner.device().poll_drain(&mut this.wait, cx.waker()) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                this.done = true;
                Poll::Ready(r.map_err(|k: ErrorKind| Error::plain(Action::Drain, k)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimDriver;
    use static_assertions::assert_impl_all;

    assert_impl_all!(DrainFuture<'static, 'static, SimDriver, 2>: Send, Sync, Unpin);
}
