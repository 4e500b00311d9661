//! [`Runner`]: the published code generation, and the hand that issues slot
//! tokens and prepares runs.
#![allow(
    clippy::inline_always,
    reason = "thin transition wrappers: out of line each moves a whole run and its result through memory (measured with callgrind, benches/contract.rs: 180 instructions per RunSpec cycle together)"
)]

mod future;

use std::time::Duration;

pub use self::future::DrainFuture;
use super::code::{CodeEntry, CodeRef};
use super::device::{Device, DrainReport, Health};
use super::error::{Action, Error, ErrorKind};
use super::outputs::{Finalized, Outputs};
use super::prepare::Spec;
use super::run::{Run, RunOf};
use super::slot::{Claim, ErasedToken, Slot, SlotOf, SlotToken};
use super::spec::RunSpec;
use super::states::Prepared;
use crate::driver::Driver;

/// The runs of one code generation.
///
/// A runner borrows its [`Device`] for `'p` (the publication); every token and run borrows
/// the runner. So while any of them is alive, the device cannot publish new
/// code — the AICore stream cannot be re-created under a launched run — and
/// the compiler says so.
///
/// ```compile_fail,E0499
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let a = [Callable::program("a", &Program::new().add(1))];
/// # let b = [Callable::program("b", &Program::new().mul(2))];
/// let runner = device.publish(&a).unwrap();
/// let token = runner.take_slot::<0>().unwrap();
/// let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let run = runner.prepare(token, spec).unwrap().launch().unwrap();
/// let runner_b = device.publish(&b).unwrap(); // publish while `run` is launched
/// drop(run);
/// ```
///
/// The passing twin fences and finalizes the run first:
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let a = [Callable::program("a", &Program::new().add(1))];
/// # let b = [Callable::program("b", &Program::new().mul(2))];
/// # let mut out = Outputs::<0>::new(1);
/// let runner = device.publish(&a).unwrap();
/// let token = runner.take_slot::<0>().unwrap();
/// let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let run = runner.prepare(token, spec).unwrap().launch().unwrap();
/// let done = run.fence().unwrap().finalize(&mut out).unwrap(); drop(done);
/// let runner_b = device.publish(&b).unwrap(); // nothing is launched any more
/// ```
pub struct Runner<'p, D: Driver, const DEPTH: usize = 2> {
    device: &'p Device<D, DEPTH>,
    code: Vec<CodeEntry>,
    /// The device's publication this runner is.
    publication: u64,
}

impl<D: Driver, const DEPTH: usize> std::fmt::Debug for Runner<'_, D, DEPTH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field(
                "callables",
                &self.code.iter().map(|c| &c.name).collect::<Vec<_>>(),
            )
            .field("health", &self.health())
            .finish_non_exhaustive()
    }
}

impl<'p, D: Driver, const DEPTH: usize> Runner<'p, D, DEPTH> {
    pub(crate) fn new(device: &'p Device<D, DEPTH>, code: Vec<CodeEntry>) -> Self {
        let publication = device.publication();
        Runner {
            device,
            code,
            publication,
        }
    }

    /// The device.
    #[must_use]
    pub fn device(&self) -> &'p Device<D, DEPTH> {
        self.device
    }

    /// A published callable by name.
    ///
    /// # Errors
    /// [`ErrorKind::UnknownCallable`] when no callable of that name was
    /// published with this runner.
    pub fn code(&self, name: &str) -> Result<CodeRef<'_>, Error> {
        self.code
            .iter()
            .find(|c| c.name == name)
            .map(|c| self.code_ref(c))
            .ok_or_else(|| Error::plain(Action::Lookup, ErrorKind::UnknownCallable(name.into())))
    }

    /// The published callables, in publication order.
    pub fn callables(&self) -> impl Iterator<Item = (&str, CodeRef<'_>)> {
        self.code
            .iter()
            .map(|c| (c.name.as_str(), self.code_ref(c)))
    }

    fn code_ref(&self, c: &CodeEntry) -> CodeRef<'_> {
        CodeRef::new(self.device.id(), c.handle, self.publication)
    }

    /// Takes the token of slot `I`. `I >= DEPTH` does not compile:
    ///
    /// ```compile_fail,E0277
    /// # use runclaim::{Device, DeviceConfig};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
    /// let runner = device.publish(&[]).unwrap();
    /// let token = runner.take_slot::<2>(); // a depth-2 runner has slots 0 and 1
    /// ```
    ///
    /// ```
    /// # use runclaim::{Device, DeviceConfig};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
    /// let runner = device.publish(&[]).unwrap();
    /// let token = runner.take_slot::<1>(); // the last slot of a depth-2 runner
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::SlotTaken`] when the token is out;
    /// [`ErrorKind::SlotInFlight`] while a launched run holds the slot;
    /// [`ErrorKind::SlotQuarantined`] until a drain after an unproven run.
    #[inline]
    pub fn take_slot<const I: usize>(&self) -> Result<SlotToken<'_, I>, Error>
    where
        Slot<I>: SlotOf<DEPTH>,
    {
        self.take_erased(I)?.typed().map_err(|_| {
            let kind = ErrorKind::broken("take_erased(I) handed out another slot's token");
            Error::new((), Action::TakeSlot, None, Some(I), kind)
        })
    }

    /// Takes the token of slot `slot`, chosen at run time, in its erased
    /// form: what [`take_slot`](Runner::take_slot) does, with the index
    /// checked against `DEPTH` here instead of by the compiler.
    #[inline]
    pub(crate) fn take_erased(&self, slot: usize) -> Result<ErasedToken<'_>, Error> {
        let fail = |k| Error::new((), Action::TakeSlot, None, Some(slot), k);
        if slot >= DEPTH {
            return Err(fail(ErrorKind::SlotOutOfRange { slot, depth: DEPTH }));
        }
        let lease = self.device.take(slot).map_err(fail)?;
        Ok(ErasedToken::new(self.device.port(), slot, lease))
    }

    /// A host buffer for slot `I`'s outputs, sized to the arena.
    #[must_use]
    pub fn outputs<const I: usize>(&self) -> Outputs<I>
    where
        Slot<I>: SlotOf<DEPTH>,
    {
        Outputs::new(self.device.max_elements())
    }

    /// Prepares a run in slot `I` from a [`RunSpec`] or a
    /// [`Workload`](super::Workload): uploads its input (stages its host
    /// tensors and builds its argument block) into the slot's own regions,
    /// clears the slot's handshake region, arms its device wall and status
    /// record. Nothing goes on a stream.
    ///
    /// # Errors
    /// The token comes back inside the error: [`ErrorKind::EmptyInput`],
    /// [`ErrorKind::InputTooLong`], [`ErrorKind::ForeignHandle`] (a token or
    /// code of another device), [`ErrorKind::StaleToken`], or a driver
    /// error; for a workload also [`ErrorKind::TooManyTensors`],
    /// [`ErrorKind::TooManyScalars`], [`ErrorKind::StagingFull`],
    /// [`ErrorKind::BufferRange`] and [`ErrorKind::ForeignBuffer`] (the
    /// workload is dropped: its borrows end).
    #[inline(always)]
    pub fn prepare<'r, const I: usize, W: Spec>(
        &'r self,
        token: SlotToken<'r, I>,
        spec: W,
    ) -> Result<Run<'r, Prepared, I, W::Bindings>, Error<SlotToken<'r, I>>> {
        self.prepare_claim(token, spec).map(Run::from_prepared)
    }

    /// [`prepare`](Runner::prepare) for a typed or an erased token: the one
    /// implementation of both.
    #[inline(always)]
    pub(crate) fn prepare_claim<K: Claim, W: Spec>(
        &self,
        token: K,
        spec: W,
    ) -> Result<RunOf<Prepared, K, W::Bindings>, Error<K>> {
        RunOf::prepare(self.device.port(), token, spec)
    }

    /// The whole old contract in one call — prepare, launch, fence,
    /// finalize — for comparison with queued runs (the reference runtime's
    /// serial pattern: run N is finalized before run N+1 launches).
    ///
    /// # Errors
    /// The first failing transition's error; the token comes back when the
    /// slot is known quiet (`None` when the run was lost or its fence failed —
    /// then the run was dropped, which waited for it or quarantined the slot).
    pub fn run_serial<'r, const I: usize>(
        &'r self,
        token: SlotToken<'r, I>,
        spec: RunSpec<'_>,
        out: &mut Outputs<I>,
    ) -> Result<Finalized<'r, I>, Error<Option<SlotToken<'r, I>>>> {
        let run = self.prepare(token, spec).map_err(|e| e.map_value(Some))?;
        let run = run
            .launch()
            .map_err(|e| e.map_value(|r| r.map(Run::<Prepared, I>::into_token)))?;
        let run = run.fence().map_err(|e| e.map_value(|_| None))?;
        run.finalize(out)
            .map_err(|e| e.map_value(|r| Some(r.into_token())))
    }

    /// The device's run-time state.
    #[must_use]
    pub fn health(&self) -> Health {
        self.device.health()
    }

    /// Proves the queue quiet and returns every slot to service: clears the
    /// poison, releases quarantined slots, reclaims slots of forgotten runs
    /// and tokens, re-creates faulted streams. Waits at most the queue
    /// budget, `(runs in flight + 1) × fence_timeout`.
    ///
    /// Takes `&mut self`: no token or run of this runner can be alive, which
    /// is what makes reclaiming their slots sound.
    ///
    /// # Errors
    /// [`ErrorKind::Undrained`] when the streams are still busy after the
    /// timeout (the runner stays poisoned; try again later), or a driver
    /// error (e.g. a lost device).
    pub fn drain(&mut self) -> Result<DrainReport, Error> {
        self.device
            .drain(None)
            .map_err(|k| Error::plain(Action::Drain, k))
    }

    /// [`drain`](Runner::drain), awaited: resolves as `drain` returns,
    /// within the same bound, with no thread parked on the device. See
    /// [`DrainFuture`](super::DrainFuture).
    pub fn drain_async(&mut self) -> DrainFuture<'_, 'p, D, DEPTH> {
        DrainFuture::new(self, None)
    }

    /// [`drain_for`](Runner::drain_for), awaited (`Duration::MAX`: no
    /// deadline).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use runclaim::{Callable, Device, DeviceConfig};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
    /// let mut runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// let report = pollster::block_on(runner.drain_for_async(Duration::MAX))?; // nothing to wait for
    /// assert_eq!(report.retired, 0);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    pub fn drain_for_async(&mut self, timeout: Duration) -> DrainFuture<'_, 'p, D, DEPTH> {
        DrainFuture::new(self, Some(timeout))
    }

    /// [`drain`](Runner::drain) with an explicit timeout; `Duration::MAX`
    /// waits without a deadline.
    ///
    /// # Errors
    /// As [`drain`](Runner::drain).
    pub fn drain_for(&mut self, timeout: Duration) -> Result<DrainReport, Error> {
        self.device
            .drain(Some(timeout))
            .map_err(|k| Error::plain(Action::Drain, k))
    }
}
