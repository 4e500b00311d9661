//! What a prepared run keeps of what it was prepared from until it is
//! finalized: [`Bound`] (a workload, borrowed) or [`Simple`] (nothing),
//! and the one thing a launch asks of either — to mark the device buffers
//! the run binds.

use std::fmt;

use super::Workload;
use crate::contract::error::RunId;

/// What a run prepared from a [`Workload`] keeps until it is finalized:
/// the workload itself, borrowed (`&'w mut`), and through it the borrows of
/// its host outputs (written back at finalize) and of its device buffers.
/// It is the fourth parameter of such a run's type,
/// `Run<'r, S, I, Bound<'w, 'a>>`; a [`RunSpec`](crate::RunSpec)'s run has
/// [`Simple`] there. One pointer: a run moves through its states as
/// cheaply whatever its workload holds.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Launched, Run, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// use runclaim::contract::Bound;
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let mut y = [0u32; 2];
/// let mut work = Workload::new(runner.code("inc")?);
/// work.input(&[1u32, 2]).output(&mut y);
/// let run: Run<'_, Launched, 0, Bound<'_, '_>> = runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?;
/// drop(run.fence()?.finalize()?);
/// # Ok::<(), runclaim::Error>(())
/// ```
pub struct Bound<'w, 'a> {
    pub(crate) work: &'w mut Workload<'a>,
}

impl fmt::Debug for Bound<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bound").field("work", &self.work).finish()
    }
}

/// What a run prepared from a [`RunSpec`](crate::RunSpec) keeps: nothing
/// (its output goes into an [`Outputs`](crate::Outputs) at finalize). The
/// default fourth parameter of [`Run`](crate::Run).
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Launched, Run, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// use runclaim::contract::Simple;
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let spec = RunSpec::new(runner.code("inc")?, Input::Host(&[1]));
/// let run: Run<'_, Launched, 0, Simple> = runner.prepare(runner.take_slot::<0>()?, spec)?.launch()?;
/// let same: Run<'_, Launched, 0> = run; // `Simple` is the default
/// # drop(same);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Simple;

pub(crate) mod sealed {
    use super::{Bound, Simple, Workload};
    use crate::contract::error::RunId;

    /// What a launch asks of a run's bindings (object safe: the launch
    /// takes it as `&dyn Marks`).
    pub trait Marks {
        /// The run `run` in `slot` joins the queue with sequence number
        /// `seq`: every device buffer it binds remembers it.
        fn mark(&self, run: RunId, slot: usize, seq: u64);
    }

    impl Marks for Simple {
        #[inline]
        fn mark(&self, _: RunId, _: usize, _: u64) {}
    }

    impl Marks for Workload<'_> {
        #[inline]
        fn mark(&self, run: RunId, slot: usize, seq: u64) {
            self.mark_bound(run, slot, seq);
        }
    }

    impl Marks for Bound<'_, '_> {
        #[inline]
        fn mark(&self, run: RunId, slot: usize, seq: u64) {
            self.work.mark_bound(run, slot, seq);
        }
    }
}

/// What a run keeps of its spec: [`Simple`] or [`Bound`]. Sealed.
pub trait Bindings: sealed::Marks + Send + Sync {}
impl Bindings for Simple {}
impl Bindings for Bound<'_, '_> {}

impl Workload<'_> {
    /// The run `run` in `slot` that binds these tensors joins the queue
    /// with sequence number `seq`: every device buffer it binds remembers
    /// it.
    pub(crate) fn mark_bound(&self, run: RunId, slot: usize, seq: u64) {
        for t in self.tensors.parts().iter() {
            if let Some(core) = t.bound_core(slot) {
                core.bound_by(run, seq);
            }
        }
    }
}
