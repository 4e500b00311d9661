//! A prepared run launched by capture or by replay ([`Capture`]).

use super::Run;
use crate::contract::capture::Capture;
use crate::contract::error::Error;
use crate::contract::port::How;
use crate::contract::states::{Launched, Prepared};
use crate::contract::workload::Bindings;

/// A captured run, launched, and its slot's capture.
type Captured<'r, const I: usize, B> = (Run<'r, Launched, I, B>, Capture<'r, I>);

impl<'r, const I: usize, B: Bindings> Run<'r, Prepared, I, B> {
    /// Launches the run by **capturing** it: its whole task sequence is
    /// recorded into a graph, which is then replayed once as this run —
    /// the run is launched, as [`launch`](Run::launch) would — and kept as
    /// slot `I`'s [`Capture`], to [`replay`](Run::replay) later runs of the
    /// same shape with one runtime call each.
    ///
    /// ```
    /// use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let code = runner.code("inc")?;
    /// let mut out = Outputs::<0>::new(4);
    /// let spec = RunSpec::new(code, Input::Host(&[1, 2, 3, 4]));
    /// let (run, capture) = runner.prepare(runner.take_slot::<0>()?, spec)?.capture()?;
    /// let mut token = run.fence()?.finalize(&mut out)?.token;
    /// assert_eq!(out.values(), [2, 3, 4, 5]);
    /// for i in 0..3 {
    ///     let x = [i, i, i, i]; // new host inputs every replay
    ///     let run = runner.prepare(token, RunSpec::new(code, Input::Host(&x)))?.replay(&capture)?;
    ///     token = run.fence()?.finalize(&mut out)?.token;
    ///     assert_eq!(out.values(), [i + 1; 4]);
    /// }
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`launch`](Run::launch); and, with the run handed back,
    /// [`ErrorKind::Replay`](crate::contract::ErrorKind::Replay) when the
    /// driver cannot capture or the kernel ABI adapter has no replayable
    /// form. A capture that fails part-way reached nothing on the device
    /// (captured tasks do not run): the run comes back.
    pub fn capture(self) -> Result<Captured<'r, I, B>, Error<Option<Self>>> {
        let port = self.0.token().port_ref();
        match self.0.launch_how(None, How::Capture) {
            Ok((run, id)) => Ok((Run(run), Capture::new(port, id))),
            Err(e) => Err(e.map_value(|back| back.map(Run))),
        }
    }

    /// Launches the run as a **replay** of `capture`: one runtime call for
    /// the whole graph, after the run's block is written to the slot's
    /// capture region (the run's id, its tensors and scalars — host inputs
    /// and scalars may differ from the capture's). See [`Capture`] for
    /// what must match, checked before any runtime call.
    ///
    /// # Errors
    /// As [`launch`](Run::launch); and, with the run handed back,
    /// [`ErrorKind::Replay`](crate::contract::ErrorKind::Replay) naming
    /// what differs from the capture, or why it cannot be replayed.
    pub fn replay(
        self,
        capture: &Capture<'r, I>,
    ) -> Result<Run<'r, Launched, I, B>, Error<Option<Self>>> {
        let (device, id) = capture.key();
        match self.0.launch_how(None, How::Replay { device, id }) {
            Ok((run, _)) => Ok(Run(run)),
            Err(e) => Err(e.map_value(|back| back.map(Run))),
        }
    }
}
