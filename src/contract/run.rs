//! [`Run`] and its states: `Prepared → Launched → Fenced → Finalized`.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use super::error::{Action, Error, ErrorKind, RunId};
use super::outputs::{Finalized, Outputs};
use super::port::{LaunchFail, RunInfo, Wait};
use super::slot::SlotToken;
use super::states::{Fenced, Launched, Prepared, State};

/// A run in slot `I`, in state `S`.
///
/// Transitions consume the run and return it in its next state; a failed
/// transition returns it (or its token) inside the [`Error`]. Which
/// transitions exist is decided by the state, at compile time:
///
/// - launching the same prepared run twice does not compile (it moved):
///
/// ```compile_fail,E0382
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let prepared = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap();
/// let first = prepared.launch().unwrap();
/// let second = prepared.launch().unwrap(); // `prepared` was moved by the first launch
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let prepared = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap();
/// let first = prepared.launch().unwrap();
/// let second = runner.prepare(runner.take_slot::<1>().unwrap(), spec).unwrap().launch().unwrap();
/// ```
///
/// - finalizing before the fence does not compile (a launched run has no
///   `finalize`):
///
/// ```compile_fail,E0599
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// # let mut out = Outputs::<0>::new(1);
/// let launched = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap().launch().unwrap();
/// let done = launched.finalize(&mut out);
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// # let mut out = Outputs::<0>::new(1);
/// let launched = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap().launch().unwrap();
/// let done = launched.fence().unwrap().finalize(&mut out);
/// ```
///
/// - a run in slot 0 takes only slot 0's outputs buffer (and slot 0's token):
///
/// ```compile_fail,E0308
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let mut out1 = Outputs::<1>::new(1);
/// let fenced = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap().launch().unwrap().fence().unwrap();
/// let done = fenced.finalize(&mut out1); // slot 1's buffer for a slot-0 run
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let mut out0 = Outputs::<0>::new(1);
/// let fenced = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap().launch().unwrap().fence().unwrap();
/// let done = fenced.finalize(&mut out0);
/// ```
///
/// The slot index is part of the token's type too, so a slot-1 token
/// cannot stand in where a slot-0 run's token is expected:
///
/// ```compile_fail,E0308
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec, SlotToken};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let token: SlotToken<'_, 0> = runner.take_slot::<1>().unwrap();
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec, SlotToken};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let token: SlotToken<'_, 0> = runner.take_slot::<0>().unwrap();
/// ```
///
/// - a token that moved into a run cannot be used again:
///
/// ```compile_fail,E0382
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let token = runner.take_slot::<0>().unwrap();
/// let a = runner.prepare(token, spec).unwrap();
/// let b = runner.prepare(token, spec).unwrap(); // `token` moved into `a`
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let token = runner.take_slot::<0>().unwrap();
/// let a = runner.prepare(token, spec).unwrap();
/// let b = runner.prepare(a.into_token(), spec).unwrap(); // abandon `a`, reuse its slot
/// ```
///
/// What the types cannot express is checked at run time: a run that was
/// dropped while launched is waited for; one forgotten with
/// [`std::mem::forget`] stays in the device's in-flight set and keeps its
/// slot until a drain or publication proves it complete; a device fault or
/// a fence that outlasts the watchdog poisons the runner.
pub struct Run<'r, S: State, const I: usize> {
    token: SlotToken<'r, I>,
    info: RunInfo,
    _state: PhantomData<S>,
}

impl<S: State, const I: usize> fmt::Debug for Run<'_, S, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("state", &S::NAME)
            .field("run", &self.info.run)
            .field("slot", &I)
            .field("seq", &self.info.seq)
            .field("len", &self.info.len)
            .finish()
    }
}

impl<'r, S: State, const I: usize> Run<'r, S, I> {
    fn into_state<T: State>(self) -> Run<'r, T, I> {
        Run {
            token: self.token,
            info: self.info,
            _state: PhantomData,
        }
    }

    /// The run's id (its tag in the device records).
    #[must_use]
    pub fn id(&self) -> RunId {
        self.info.run
    }

    /// The slot index, `I`.
    #[must_use]
    pub const fn slot(&self) -> usize {
        I
    }

    /// Elements the run computes (0 for a chained run before launch).
    #[must_use]
    pub fn len(&self) -> usize {
        self.info.len
    }

    /// `true` when the run has no elements yet (a chained run before launch).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.info.len == 0
    }

    fn fail<T>(value: T, action: Action, run: RunId, kind: ErrorKind) -> Error<T> {
        Error::new(value, action, Some(run), Some(I), kind)
    }
}

impl<'r, const I: usize> Run<'r, Prepared, I> {
    pub(crate) fn new(token: SlotToken<'r, I>, info: RunInfo) -> Self {
        Run {
            token,
            info,
            _state: PhantomData,
        }
    }

    /// Queues the run: AICore kernel, then AICPU kernel, then its fence — a
    /// completion event on the AICore stream, which the AICPU stream waits
    /// for before recording the run's fence event. Does **not** wait for the run before it; at most
    /// `DEPTH` runs are launched at once (one per slot); launch order is
    /// stream order. A stale AICore stream (after a publication) is re-created
    /// first — only possible with nothing in flight.
    ///
    /// # Errors
    /// Graded by what reached the device:
    /// - nothing was submitted (poisoned runner, no chain value, the AICore
    ///   launch refused): the prepared run comes back, `Some(run)`;
    /// - the AICore kernel was queued but the AICPU launch failed
    ///   ([`ErrorKind::PartialLaunch`]), or a completion event could not be
    ///   recorded ([`ErrorKind::FenceNotRecorded`]): execution is uncertain,
    ///   the slot is quarantined, the runner is poisoned until a drain, and
    ///   the value is `None`.
    pub fn launch(mut self) -> Result<Run<'r, Launched, I>, Error<Option<Self>>> {
        let run = self.info.run;
        match self.token.port.launch(I, self.token.lease, &self.info) {
            Ok(l) => {
                self.info.seq = l.seq;
                self.info.len = l.len;
                Ok(self.into_state())
            }
            Err(LaunchFail::NotSubmitted(k)) => Err(Self::fail(Some(self), Action::Launch, run, k)),
            Err(LaunchFail::Lost(k)) => Err(Self::fail(None, Action::Launch, run, k)),
        }
    }

    /// Abandons the prepared run and keeps its slot.
    #[must_use]
    pub fn into_token(self) -> SlotToken<'r, I> {
        self.token
    }
}

impl<'r, const I: usize> Run<'r, Launched, I> {
    /// The launch sequence number (stream order).
    #[must_use]
    pub fn seq(&self) -> u64 {
        self.info.seq
    }

    fn wait(self, how: Wait, action: Action) -> Result<Run<'r, Fenced, I>, Error<Self>> {
        let run = self.info.run;
        match self.token.port.wait(I, self.token.lease, &self.info, how) {
            Ok(()) => Ok(self.into_state()),
            Err(k) => Err(Self::fail(self, action, run, k)),
        }
    }

    /// Waits for **this run's** fence event (never a whole-stream
    /// synchronize) as long as the runs queued ahead of it legitimately
    /// take: at most `(runs ahead + 1) ×`
    /// [`fence_timeout`](crate::DeviceConfig::fence_timeout), plus one
    /// look-around slice of `fence_timeout / 8`. Runs may be
    /// fenced in any order; in a healthy queue (every kernel under the
    /// device watchdog) this returns the run [`Fenced`], wherever it is in
    /// the queue.
    ///
    /// **What counts as a hang.** `fence_timeout` is a per-run budget: the
    /// time the device may take over one run once every run ahead of it is
    /// complete (the run is at the *head* of the queue). While waiting, the
    /// fence watches the runs ahead through their own fences; a run that
    /// has been at the head longer than its budget — measured on the
    /// driver's clock ([`Driver::clock`](crate::driver::Driver::clock)),
    /// never on how long this thread was away, and confirmed by a query made
    /// after the budget ran out — has **overrun**. That run (this one or
    /// one ahead) is marked unproven and the runner poisoned, naming it.
    /// Waiting behind other runs never counts against a run.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 3>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// let a = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
    /// let b = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(code, Input::Previous))?.launch()?;
    /// let c = runner.prepare(runner.take_slot::<2>()?, RunSpec::new(code, Input::Previous))?.launch()?;
    /// let c = c.fence()?; // the last first: it waits for the two ahead of it
    /// let (b, a) = (b.fence()?, a.fence()?);
    /// let mut out = Outputs::<2>::new(1);
    /// c.finalize(&mut out)?;
    /// assert_eq!(out.values(), &[4]);
    /// # drop((a, b));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// The launched run comes back inside the error:
    /// [`ErrorKind::Timeout`] — with `overran: Some(run)` when the wait
    /// proved an overrun (naming the run; the runner is poisoned), `None`
    /// when it only ran out of time (for a plain `fence`, possible only
    /// behind a run that is already unproven);
    /// [`ErrorKind::Fault`] for a device fault (poisons the runner).
    pub fn fence(self) -> Result<Run<'r, Fenced, I>, Error<Self>> {
        self.wait(Wait::Configured, Action::Fence)
    }

    /// Waits for this run's fence at most `timeout` in total
    /// (`Duration::MAX`: no limit). Running out of time is only "not yet":
    /// the run comes back and nothing is poisoned — unless the wait proved
    /// an overrun, exactly as [`fence`](Run::fence) decides it.
    ///
    /// # Errors
    /// As [`fence`](Run::fence).
    pub fn fence_for(self, timeout: Duration) -> Result<Run<'r, Fenced, I>, Error<Self>> {
        self.wait(Wait::For(timeout), Action::Fence)
    }

    /// Polls this run's fence event once. Never poisons on "not yet".
    ///
    /// # Errors
    /// [`ErrorKind::NotReady`] (with the run) when not complete; a fault as
    /// for [`fence`](Run::fence).
    pub fn try_fence(self) -> Result<Run<'r, Fenced, I>, Error<Self>> {
        self.wait(Wait::Poll, Action::TryFence)
    }
}

impl<'r, const I: usize> Run<'r, Fenced, I> {
    /// Reads the slot's status record, device wall and outputs back,
    /// validates that both records carry this run's id, and hands the slot
    /// token back. Runs may be finalized in any order.
    ///
    /// # Errors
    /// The **fenced run** comes back inside the error, so nothing the
    /// device produced is lost: [`ErrorKind::OutputsTooSmall`] — retry with
    /// a larger buffer (`Outputs::<I>::new(err.value().len())`);
    /// [`ErrorKind::RunFailed`] when the run reported an error code (this
    /// run failed; the runner is not poisoned and queued successors are
    /// unaffected); [`ErrorKind::RecordMismatch`] /
    /// [`ErrorKind::RecordMissing`] when a record does not belong to this
    /// run; a driver error when a read-back failed. Take the slot back with
    /// [`into_token`](Run::into_token), or drop the run to free it.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// use runclaim::contract::ErrorKind;
    /// let fenced = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1, 2, 3])))?
    ///     .launch()?.fence()?;
    /// let err = fenced.finalize(&mut Outputs::<0>::new(2)).unwrap_err(); // one element short
    /// assert_eq!(err.kind(), &ErrorKind::OutputsTooSmall { len: 3, capacity: 2 });
    /// let mut bigger = Outputs::<0>::new(3);
    /// err.into_value().finalize(&mut bigger)?; // the same run, finalized again
    /// assert_eq!(bigger.values(), &[2, 3, 4]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    pub fn finalize(self, out: &mut Outputs<I>) -> Result<Finalized<'r, I>, Error<Self>> {
        let info = self.info;
        match self
            .token
            .port
            .finalize(I, self.token.lease, &info, &mut out.values)
        {
            Ok(wall) => {
                out.len = info.len;
                out.run = Some(info.run);
                Ok(Finalized {
                    token: self.token,
                    run: info.run,
                    seq: info.seq,
                    wall,
                })
            }
            Err(k) => {
                out.len = 0;
                out.run = None;
                Err(Self::fail(self, Action::Finalize, info.run, k))
            }
        }
    }

    /// Gives up on reading the run back and keeps its slot. The run is
    /// complete (it was fenced), so the slot is free for the next run.
    #[must_use]
    pub fn into_token(self) -> SlotToken<'r, I> {
        self.token
    }
}

/// `?` on a failed transition drops the handed-back value (a launched run's
/// drop waits, bounded, for its fence) and keeps the error.
impl<'r, S: State, const I: usize> From<Error<Run<'r, S, I>>> for Error {
    fn from(e: Error<Run<'r, S, I>>) -> Self {
        e.without_value()
    }
}

/// `?` on a failed launch drops the prepared run, if it came back.
impl<'r, S: State, const I: usize> From<Error<Option<Run<'r, S, I>>>> for Error {
    fn from(e: Error<Option<Run<'r, S, I>>>) -> Self {
        e.without_value()
    }
}

/// `?` on a failed prepare or finalize drops the token (freeing the slot).
impl<'r, const I: usize> From<Error<SlotToken<'r, I>>> for Error {
    fn from(e: Error<SlotToken<'r, I>>) -> Self {
        e.without_value()
    }
}

/// `?` on a failed serial run drops the token, if it came back.
impl<'r, const I: usize> From<Error<Option<SlotToken<'r, I>>>> for Error {
    fn from(e: Error<Option<SlotToken<'r, I>>>) -> Self {
        e.without_value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(SlotToken<'static, 0>: Send, Sync);
    assert_not_impl_any!(SlotToken<'static, 0>: Clone, Copy);
    assert_impl_all!(Run<'static, Prepared, 0>: Send, Sync);
    assert_impl_all!(Run<'static, Launched, 1>: Send, Sync);
    assert_impl_all!(Run<'static, Fenced, 0>: Send, Sync);
    assert_not_impl_any!(Run<'static, Launched, 0>: Clone, Copy);
    assert_not_impl_any!(Finalized<'static, 0>: Clone, Copy);
    assert_impl_all!(Outputs<0>: Send, Sync, Clone);
}
