//! Why a runner stopped launching: [`Poison`] and its [`PoisonCause`].

use std::fmt;

use super::RunId;

/// Why a runner stopped launching.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// use runclaim::contract::PoisonCause;
/// use runclaim::driver::Op;
/// use runclaim::sim::Fault;
/// runner.device().driver().inject(Fault::FailCall { op: Op::LaunchAicpu, nth: 1 });
/// let _ = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch();
/// assert_eq!(runner.health().poisoned.map(|p| p.cause), Some(PoisonCause::PartialLaunch));
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PoisonCause {
    /// The AICore kernel was queued but the AICPU launch failed: the AICore
    /// workers wait for a scheduler that never comes.
    PartialLaunch,
    /// The kernels were queued but a completion event could not be recorded:
    /// the run's completion cannot be observed.
    FenceNotRecorded,
    /// A run at the head of the queue (every run ahead of it complete)
    /// stayed incomplete for longer than its budget, the fence timeout, on
    /// the driver's clock.
    Overrun,
    /// The device reported a kernel fault or a lost device.
    DeviceFault,
    /// A panic (a driver's) interrupted a transition while it held the
    /// device's state: what reached the device is unknown. The run is the
    /// one being launched, when one was.
    Interrupted,
    /// A run's completion could not be proven — its wait failed with a
    /// driver error that is neither a fault nor a timeout, panicked, or ran
    /// out of time without a verdict (a drop or a pipeline's drop gave up
    /// on it). Nothing behind it in the queue can be dated any more, so the
    /// time rule could no longer tell a hung device: no run launches until
    /// a drain proves the queue quiet.
    Unproven,
}

impl fmt::Display for PoisonCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoisonCause::PartialLaunch => "AICore kernel queued but AICPU launch failed",
            PoisonCause::FenceNotRecorded => "completion event could not be recorded",
            PoisonCause::Overrun => "run overran its budget at the head of the queue",
            PoisonCause::DeviceFault => "device fault",
            PoisonCause::Interrupted => "a panic interrupted a transition",
            PoisonCause::Unproven => "a run's completion could not be proven",
        })
    }
}

/// The first failure that poisoned a runner: no run launches until a drain
/// ([`Runner::drain`](crate::contract::Runner::drain)) proves the queue quiet.
///
/// ```
/// use runclaim::contract::{Poison, PoisonCause};
///
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{Fault, SimConfig, SimDriver};
/// # let sim = SimDriver::stepped(SimConfig::default().watchdog(std::time::Duration::from_millis(2)));
/// # let mut device = Device::<_, 2>::open(sim.clone(), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// sim.inject(Fault::EventNeverCompletes { nth: 2 }); // the run's completion is never reported
/// let run = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// let id = run.id();
/// assert!(run.fence().is_err());
/// let p: Poison = runner.health().poisoned.unwrap();
/// assert_eq!((p.cause, p.run, p.slot), (PoisonCause::Overrun, Some(id), Some(1)));
/// assert_eq!(p.to_string(), format!("run overran its budget at the head of the queue (run {id} in slot 1)"));
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Poison {
    /// What happened.
    pub cause: PoisonCause,
    /// The run it happened to: `None` only for
    /// [`PoisonCause::Interrupted`] outside a launch (no run was being
    /// submitted when the panic struck).
    pub run: Option<RunId>,
    /// That run's slot (`None` exactly when `run` is).
    pub slot: Option<usize>,
}

impl fmt::Display for Poison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match who(self.run, self.slot) {
            Some(who) => write!(f, "{} ({who})", self.cause),
            None => write!(f, "{}", self.cause),
        }
    }
}

/// "run #r in slot s", "run #r", "slot s", or nothing.
pub(super) fn who(run: Option<RunId>, slot: Option<usize>) -> Option<String> {
    match (run, slot) {
        (Some(r), Some(s)) => Some(format!("run {r} in slot {s}")),
        (Some(r), None) => Some(format!("run {r}")),
        (None, Some(s)) => Some(format!("slot {s}")),
        (None, None) => None,
    }
}
