//! [`Device::publish`]: a new code generation and its [`Runner`]. Its own
//! file, after `runner.rs` in the import order, so that the device never
//! names the runner (the device's side of a publication — drain, pins,
//! generations — is `device/publication.rs`).

use super::code::Callable;
use super::device::Device;
use super::error::Error;
use super::runner::Runner;
use super::slot::{Depth, SupportedDepth};
use crate::driver::Driver;

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// Registers `callables` and returns the [`Runner`] for them.
    ///
    /// If any callable's code was not already resident, this starts a new
    /// **code generation**: the AICore stream is marked stale and re-created
    /// before the next launch, so no kernel runs stale instructions.
    ///
    /// Publication is a drain barrier, enforced twice:
    /// - at compile time: it takes `&mut self`, and every runner, token and
    ///   run borrows the device, so publishing while a run is alive does not
    ///   compile;
    /// - at run time: runs hidden from the borrow checker by
    ///   [`std::mem::forget`] are still in the in-flight set; publication
    ///   waits (at most `(in flight + 1) × fence_timeout`) until they are proven complete and
    ///   refuses otherwise. It never destroys a stream with queued work.
    ///
    /// # Errors
    /// [`ErrorKind::DuplicateCallable`](super::ErrorKind::DuplicateCallable) when two callables share a name;
    /// [`ErrorKind::Undrained`](super::ErrorKind::Undrained) when forgotten runs are still in flight;
    /// [`ErrorKind::CodeDoesNotFit`](super::ErrorKind::CodeDoesNotFit) when the callables do not fit in device
    /// code memory next to the code other live publications pin;
    /// [`ErrorKind::Driver`](super::ErrorKind::Driver) for a refused registration.
    pub fn publish(&mut self, callables: &[Callable]) -> Result<Runner<'_, D, DEPTH>, Error> {
        let entries = self.register(callables)?;
        Ok(Runner::new(self, entries))
    }
}
