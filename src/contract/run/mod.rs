//! [`Run`] and its states: `Prepared → Launched → Fenced → Finalized`.
#![allow(
    clippy::inline_always,
    reason = "thin transition wrappers: out of line each moves a whole run and its result through memory (measured with callgrind, benches/contract.rs)"
)]
#![allow(
    clippy::result_large_err,
    reason = "a failed transition hands the run back by value inside the error: the rule of the crate; a workload's run adds one pointer"
)]

mod future;
mod replay;
mod run_of;

use std::fmt;
use std::time::Duration;

pub use self::future::FenceFuture;
pub(crate) use self::run_of::RunOf;
use super::error::{Action, Error, RunId};
use super::outputs::{Finalized, Outputs};
use super::slot::SlotToken;
use super::states::{Fenced, Launched, Prepared, State};
use super::wait::Wait;
use super::workload::{Bindings, NoWorkload, WithWorkload};

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
///
/// A run prepared from a [`Workload`](super::Workload) carries its
/// bindings in its type, `Run<'r, S, I, WithWorkload<'w, 'a>>`: the
/// workload's borrow, and through it the borrows of its host outputs and
/// device buffers, held until it is finalized (see
/// [`Run::<Fenced, I, WithWorkload>::finalize`](Run#method.finalize-1)).
pub struct Run<'r, S: State, const I: usize, B: Bindings = NoWorkload>(
    RunOf<S, SlotToken<'r, I>, B>,
);

impl<S: State, const I: usize, B: Bindings> fmt::Debug for Run<'_, S, I, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<S: State, const I: usize, B: Bindings> Run<'_, S, I, B> {
    /// The run's id (its tag in the device records).
    #[must_use]
    #[inline]
    pub fn id(&self) -> RunId {
        self.0.id()
    }

    /// The slot index, `I`.
    #[must_use]
    #[inline]
    pub const fn slot(&self) -> usize {
        I
    }

    /// Elements the run computes (0 for a chained run before launch).
    #[must_use]
    #[inline]
    pub fn len(&self) -> usize {
        self.0.info.len
    }

    /// `true` when the run has no elements yet (a chained run before launch).
    #[must_use]
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.info.len == 0
    }
}

impl<'r, S: State, const I: usize, B: Bindings> Run<'r, S, I, B> {
    #[inline]
    pub(crate) fn inner(&self) -> &RunOf<S, SlotToken<'r, I>, B> {
        &self.0
    }

    #[inline]
    pub(crate) fn into_inner(self) -> RunOf<S, SlotToken<'r, I>, B> {
        self.0
    }

    #[inline]
    pub(crate) fn from_inner(run: RunOf<S, SlotToken<'r, I>, B>) -> Self {
        Run(run)
    }
}

impl<'r, const I: usize, B: Bindings> Run<'r, Prepared, I, B> {
    /// The typed run around a prepared one holding slot `I`'s token.
    #[inline]
    pub(crate) fn from_prepared(run: RunOf<Prepared, SlotToken<'r, I>, B>) -> Self {
        Run(run)
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
    ///   ([`ErrorKind::PartialLaunch`](crate::contract::ErrorKind::PartialLaunch)), or a completion event could not be
    ///   recorded ([`ErrorKind::FenceNotRecorded`](crate::contract::ErrorKind::FenceNotRecorded)): execution is uncertain,
    ///   the slot is quarantined, the runner is poisoned until a drain, and
    ///   the value is `None`.
    #[allow(
        clippy::inline_always,
        reason = "a thin wrapper: called out of line, it moves the whole result through memory (~80 instructions per run, measured)"
    )]
    #[inline(always)]
    pub fn launch(self) -> Result<Run<'r, Launched, I, B>, Error<Option<Self>>> {
        self.0
            .launch()
            .map(Run)
            .map_err(|e| e.map_value(|back| back.map(Run)))
    }

    /// Abandons the prepared run and keeps its slot.
    #[must_use]
    #[inline]
    pub fn into_token(self) -> SlotToken<'r, I> {
        self.0.into_token()
    }
}

impl<'r, const I: usize, B: Bindings> Run<'r, Launched, I, B> {
    /// The launch sequence number (stream order).
    #[must_use]
    #[inline]
    pub fn seq(&self) -> u64 {
        self.0.seq()
    }

    #[inline]
    fn wait(self, how: Wait, action: Action) -> Result<Run<'r, Fenced, I, B>, Error<Self>> {
        self.0
            .wait(how, action)
            .map(Run)
            .map_err(|e| e.map_value(Run))
    }
    /// Waits for **this run's** fence event (never a whole-stream
    /// synchronize) as long as the runs queued ahead of it legitimately
    /// take: at most `(runs ahead + 1) ×`
    /// [`fence_timeout`](crate::DeviceConfig::fence_timeout), plus one
    /// look-around slice of `fence_timeout / 8` — and behind a run that
    /// could not be proven complete (the runner is poisoned: nothing
    /// behind it can be dated), one more `fence_timeout`. Runs may be
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
    /// [`ErrorKind::Timeout`](crate::contract::ErrorKind::Timeout) — with `overran: Some(run)` when the wait
    /// proved an overrun (naming the run; the runner is poisoned), `None`
    /// when it only ran out of time (for a plain `fence`, possible only
    /// behind a run that is already unproven);
    /// [`ErrorKind::Fault`](crate::contract::ErrorKind::Fault) for a device fault (poisons the runner).
    #[inline]
    pub fn fence(self) -> Result<Run<'r, Fenced, I, B>, Error<Self>> {
        self.wait(Wait::Configured, Action::Fence)
    }

    /// Waits for this run's fence at most `timeout` in total
    /// (`Duration::MAX`: no limit). Running out of time is only "not yet":
    /// the run comes back and nothing is poisoned — unless the wait proved
    /// an overrun, exactly as [`fence`](Run::fence) decides it.
    ///
    /// # Errors
    /// As [`fence`](Run::fence).
    #[inline]
    pub fn fence_for(self, timeout: Duration) -> Result<Run<'r, Fenced, I, B>, Error<Self>> {
        self.wait(Wait::For(timeout), Action::Fence)
    }

    /// [`fence`](Run::fence), awaited: a future that resolves as `fence`
    /// returns — the same budget and verdicts on the driver's clock —
    /// with no thread parked on the device while it waits (the driver
    /// wakes the task: see [`FenceFuture`]). `run.await` is the same.
    /// Dropping the future early never blocks: see [`FenceFuture`] for
    /// where the run goes.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    /// let mut device = Device::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// let run = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[41])))?.launch()?;
    /// let fenced = pollster::block_on(run.fence_async())?;
    /// let mut out = Outputs::<0>::new(1);
    /// fenced.finalize(&mut out)?;
    /// assert_eq!(out.values(), &[42]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[inline]
    pub fn fence_async(self) -> FenceFuture<'r, I, B> {
        FenceFuture::new(self, Wait::Configured)
    }

    /// [`fence_for`](Run::fence_for), awaited: at most `timeout` in total
    /// on the driver's clock (`Duration::MAX`: no limit); running out of
    /// time hands the run back, nothing poisoned, unless an overrun was
    /// proven — as `fence_for` decides. See [`FenceFuture`].
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// use runclaim::contract::ErrorKind;
    /// use runclaim::sim::{Fault, SimConfig, SimDriver};
    /// let sim = SimDriver::real_time(SimConfig::default());
    /// let mut device = Device::<_, 2>::open(sim.clone(), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// sim.inject(Fault::EventNeverCompletes { nth: 2 }); // this run's fence never completes
    /// let run = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
    /// let e = pollster::block_on(run.fence_for_async(Duration::from_millis(5))).unwrap_err();
    /// assert!(matches!(e.kind(), ErrorKind::Timeout { overran: None, .. }));
    /// assert!(runner.health().poisoned.is_none()); // only "not yet"
    /// std::mem::forget(e.into_value()); // (its drop would wait for it)
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[inline]
    pub fn fence_for_async(self, timeout: Duration) -> FenceFuture<'r, I, B> {
        FenceFuture::new(self, Wait::For(timeout))
    }

    /// Polls this run's fence event once. Never poisons on "not yet".
    ///
    /// # Errors
    /// [`ErrorKind::NotReady`](crate::contract::ErrorKind::NotReady) (with the run) when not complete; a fault as
    /// for [`fence`](Run::fence).
    #[inline]
    pub fn try_fence(self) -> Result<Run<'r, Fenced, I, B>, Error<Self>> {
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
    /// device produced is lost: [`ErrorKind::OutputsTooSmall`](crate::contract::ErrorKind::OutputsTooSmall) — retry with
    /// a larger buffer (`Outputs::<I>::new(err.value().len())`);
    /// [`ErrorKind::RunFailed`](crate::contract::ErrorKind::RunFailed) when the run reported an error code (this
    /// run failed; the runner is not poisoned and queued successors are
    /// unaffected); [`ErrorKind::RecordMismatch`](crate::contract::ErrorKind::RecordMismatch) /
    /// [`ErrorKind::RecordMissing`](crate::contract::ErrorKind::RecordMissing) when a record does not belong to this
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
    #[inline(always)]
    pub fn finalize(self, out: &mut Outputs<I>) -> Result<Finalized<'r, I>, Error<Self>> {
        let (run, seq) = (self.0.info.run, self.0.info.seq);
        match self.0.finalize(&mut out.raw) {
            Ok((token, wall)) => Ok(Finalized {
                token,
                run,
                seq,
                wall,
            }),
            Err(e) => Err(e.map_value(Run)),
        }
    }
}

impl<'r, const I: usize, B: Bindings> Run<'r, Fenced, I, B> {
    /// Gives up on reading the run back and keeps its slot. The run is
    /// complete (it was fenced), so the slot is free for the next run (a
    /// workload's host outputs are left as they were: nothing is copied
    /// back).
    #[must_use]
    #[inline]
    pub fn into_token(self) -> SlotToken<'r, I> {
        self.0.into_token()
    }
}

impl<'r, const I: usize> Run<'r, Fenced, I, WithWorkload<'_, '_>> {
    /// Reads the slot's status record and device wall back, validates that
    /// both carry this run's id, and — only if the run succeeded — copies
    /// each host output ([`Dir::Out`](crate::driver::abi::Dir::Out),
    /// [`Dir::InOut`](crate::driver::abi::Dir::InOut)) back from the slot's
    /// staging region into the slice the [`Workload`](super::Workload)
    /// borrowed: exactly one device-to-host copy per such tensor. Then the
    /// borrows end and the token comes back.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// use runclaim::contract::ErrorKind;
    /// let runner = device.publish(&[Callable::program("bad", &Program::new().add(1).fail(5))])?;
    /// let mut y = [7u32; 2];
    /// let mut work = Workload::new(runner.code("bad")?);
    /// work.input(&[1u32, 2]).output(&mut y);
    /// let err = runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize().unwrap_err();
    /// assert_eq!(err.kind(), &ErrorKind::RunFailed { code: 5 });
    /// drop(err);
    /// assert_eq!(y, [7, 7]); // a failed run copies nothing back
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// The fenced run comes back inside the error, its borrows still held:
    /// [`ErrorKind::RunFailed`](crate::contract::ErrorKind::RunFailed) and [`ErrorKind::RecordMismatch`](crate::contract::ErrorKind::RecordMismatch) /
    /// [`ErrorKind::RecordMissing`](crate::contract::ErrorKind::RecordMissing) (found before any copy-back: nothing is
    /// copied back), or a driver error of a read-back — which may fail
    /// midway through the copy-back, leaving the host outputs before the
    /// failing one written and the rest untouched; finalizing the run again
    /// copies them all.
    #[inline(always)]
    pub fn finalize(self) -> Result<Finalized<'r, I>, Error<Self>> {
        let (run, seq) = (self.0.info.run, self.0.info.seq);
        match self.0.finalize_bound() {
            Ok((token, wall)) => Ok(Finalized {
                token,
                run,
                seq,
                wall,
            }),
            Err(e) => Err(e.map_value(Run)),
        }
    }
}

/// `?` on a failed transition drops the handed-back value (a launched run's
/// drop waits, bounded, for its fence) and keeps the error.
impl<'r, S: State, const I: usize, B: Bindings> From<Error<Run<'r, S, I, B>>> for Error {
    #[inline]
    fn from(e: Error<Run<'r, S, I, B>>) -> Self {
        e.without_value()
    }
}

/// `?` on a failed launch drops the prepared run, if it came back.
impl<'r, S: State, const I: usize, B: Bindings> From<Error<Option<Run<'r, S, I, B>>>> for Error {
    #[inline]
    fn from(e: Error<Option<Run<'r, S, I, B>>>) -> Self {
        e.without_value()
    }
}

/// `?` on a failed prepare or finalize drops the token (freeing the slot).
impl<'r, const I: usize> From<Error<SlotToken<'r, I>>> for Error {
    #[inline]
    fn from(e: Error<SlotToken<'r, I>>) -> Self {
        e.without_value()
    }
}

/// `?` on a failed serial run drops the token, if it came back.
impl<'r, const I: usize> From<Error<Option<SlotToken<'r, I>>>> for Error {
    #[inline]
    fn from(e: Error<Option<SlotToken<'r, I>>>) -> Self {
        e.without_value()
    }
}

#[cfg(test)]
mod tests;
