//! The uploads this device's current publication pinned (one per
//! registration): released at the next publication and at close, never
//! while a runner of that publication may launch them.

use crate::driver::CodeHandle;

#[derive(Debug, Default)]
pub(in crate::contract::device) struct Pins(Vec<CodeHandle>);

impl Pins {
    pub(in crate::contract::device) fn pin(&mut self, code: CodeHandle) {
        self.0.push(code);
    }

    /// Every pin, to release; a refused release goes back with
    /// [`pin`](Pins::pin), to be retried.
    pub(in crate::contract::device) fn take_all(&mut self) -> Vec<CodeHandle> {
        std::mem::take(&mut self.0)
    }
}
