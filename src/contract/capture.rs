//! [`Capture`]: a slot's run captured once into a graph, replayed as the
//! launch of later runs in that slot ([`Run::capture`](crate::Run::capture),
//! [`Run::replay`](crate::Run::replay)).

use std::fmt;

use super::port::Port;

/// Slot `I`'s captured run: the graph a run's whole task sequence was
/// captured into (both kernels, the cross-stream ordering, the fence), so
/// that a later run in slot `I` is launched with **one** runtime call
/// ([`Run::replay`](crate::Run::replay)) instead of one per task.
///
/// A replay is a run like any other — `Prepared → Launched → Fenced →
/// Finalized`, its own fence, its own records proven to be its own (the
/// run's id reaches the kernels through the slot's capture region, written
/// before each replay), its own finalize and copy-back.
///
/// # What the types enforce
///
/// - **A capture borrows the runner**, so the code it captured stays the
///   code it runs: publishing while one exists does not compile.
///
/// ```compile_fail,E0499
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let callables = [Callable::program("a", &Program::new().add(1))];
/// let runner = device.publish(&callables).unwrap();
/// let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let prepared = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap();
/// let (run, capture) = prepared.capture().unwrap();
/// drop(run.fence().unwrap());
/// let again = device.publish(&callables); // the capture still borrows the runner
/// drop(capture);
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let callables = [Callable::program("a", &Program::new().add(1))];
/// {
///     let runner = device.publish(&callables).unwrap();
///     let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
///     let prepared = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap();
///     let (run, capture) = prepared.capture().unwrap();
///     drop(run.fence().unwrap());
///     drop(capture);
/// }
/// let again = device.publish(&callables).unwrap(); // the capture is gone first
/// ```
///
/// - **A slot's capture replays only in that slot** (`Capture<'_, 1>` for a
///   slot-0 run is a type error):
///
/// ```compile_fail,E0308
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let (run, in_slot_1) = runner.prepare(runner.take_slot::<1>().unwrap(), spec).unwrap().capture().unwrap();
/// drop(run.fence().unwrap());
/// let replayed = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap().replay(&in_slot_1);
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let (run, in_slot_1) = runner.prepare(runner.take_slot::<1>().unwrap(), spec).unwrap().capture().unwrap();
/// let token = run.fence().unwrap().into_token();
/// let replayed = runner.prepare(token, spec).unwrap().replay(&in_slot_1).unwrap();
/// ```
///
/// - **A replay is launched once** (the prepared run moved into it):
///
/// ```compile_fail,E0382
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let (run, capture) = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap().capture().unwrap();
/// let prepared = runner.prepare(run.fence().unwrap().into_token(), spec).unwrap();
/// let first = prepared.replay(&capture).unwrap();
/// let second = prepared.replay(&capture); // `prepared` was moved by the first replay
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("a", &Program::new().add(1))]).unwrap();
/// # let spec = RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1]));
/// let (run, capture) = runner.prepare(runner.take_slot::<0>().unwrap(), spec).unwrap().capture().unwrap();
/// let prepared = runner.prepare(run.fence().unwrap().into_token(), spec).unwrap();
/// let first = prepared.replay(&capture).unwrap();
/// let prepared = runner.prepare(first.fence().unwrap().into_token(), spec).unwrap();
/// let second = prepared.replay(&capture).unwrap(); // a new prepared run each time
/// ```
///
/// # What is checked at run time
///
/// Refused before any runtime call, the prepared run handed back inside an
/// [`ErrorKind::Replay`](crate::contract::ErrorKind::Replay) naming what
/// differs ([`ReplayRefusal`](crate::contract::ReplayRefusal)): a replay
/// of another kernel, another number of tensors or scalars, a tensor of
/// another direction, element size or home, larger than at capture, or a
/// device buffer bound to another range; a capture made stale by a
/// recovery or by code uploaded on the NPU since; a driver that cannot
/// capture, or a kernel ABI adapter with no replayable form. Host inputs
/// and scalars may change with every replay.
///
/// Dropping a capture destroys its graph once its slot has no run in
/// flight (so no replay of it runs), at the latest at the next drain.
pub struct Capture<'r, const I: usize> {
    port: &'r dyn Port,
    id: u64,
}

impl<'r, const I: usize> Capture<'r, I> {
    pub(crate) fn new(port: &'r dyn Port, id: u64) -> Self {
        Capture { port, id }
    }

    /// The device it belongs to and its id there.
    pub(crate) fn key(&self) -> (u64, u64) {
        (self.port.device_id(), self.id)
    }

    /// The slot index, `I`.
    #[must_use]
    pub const fn slot(&self) -> usize {
        I
    }
}

impl<const I: usize> Drop for Capture<'_, I> {
    fn drop(&mut self) {
        self.port.drop_capture(self.id);
    }
}

impl<const I: usize> fmt::Debug for Capture<'_, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capture")
            .field("slot", &I)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
