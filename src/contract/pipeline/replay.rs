//! A pipeline's replay switch ([`Pipeline::replay`]): its lanes capture
//! their slots' runs and replay them (`contract/replay.rs`).

use super::Pipeline;
use crate::driver::Driver;

impl<D: Driver, const DEPTH: usize, T> Pipeline<'_, D, DEPTH, T> {
    /// Replays the pipeline's runs (`true`) or launches them (`false`, the
    /// default), with no other change to the loop: each slot's run is
    /// captured at the slot's first submission ([`Run::capture`](crate::Run::capture))
    /// and later submissions into the slot are replayed from it with one
    /// runtime call ([`Run::replay`](crate::Run::replay)); a submission
    /// whose shape differs from its slot's capture (another kernel, other
    /// tensors or scalars, a larger input, another buffer — see
    /// [`Capture`](crate::Capture)), or a capture gone stale, is
    /// **captured again** in its place. Where the driver cannot capture or
    /// the kernel ABI adapter has no replayable form, the slot's runs are
    /// launched as before. Turning replay off lets every capture go.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// let mut pipe = Pipeline::new(&runner)?;
    /// pipe.replay(true);
    /// for i in 0..10u32 {
    ///     if pipe.is_full() {
    ///         let done = pipe.complete()?.unwrap();
    ///         assert_eq!(done.values, [done.tag + 1]);
    ///     }
    ///     pipe.submit(RunSpec::new(code, Input::Host(&[i])), i)?;
    /// }
    /// while let Some(done) = pipe.complete()? {
    ///     assert_eq!(done.values, [done.tag + 1]);
    /// }
    /// drop(pipe);
    /// drop(runner);
    /// let stats = device.stats();
    /// assert_eq!((stats.captures, stats.replays), (2, 10)); // a capture's first replay counted
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    pub fn replay(&mut self, on: bool) {
        let port = self.runner.device().port();
        for lane in &mut self.lanes {
            if let Some(id) = lane.set_replay(on) {
                port.drop_capture(id);
            }
        }
    }
}
