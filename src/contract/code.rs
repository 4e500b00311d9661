//! Code as the contract names it: a [`Callable`] (a name and its AICore
//! code) before publication, a [`CodeRef`] (a published upload, borrowed
//! from its runner) after.

use std::marker::PhantomData;

use crate::driver::CodeHandle;
use crate::driver::abi::Program;

/// A callable: a name and the AICore code it carries.
///
/// ```
/// use runclaim::Callable;
/// use runclaim::driver::abi::Program;
///
/// let c = Callable::program("scale", &Program::new().mul(3));
/// assert_eq!(c.name(), "scale");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Callable {
    name: String,
    code: Vec<u8>,
}

impl Callable {
    /// A callable with raw code bytes (validated by the driver at publish).
    pub fn new(name: impl Into<String>, code: impl Into<Vec<u8>>) -> Self {
        Callable {
            name: name.into(),
            code: code.into(),
        }
    }

    /// A callable whose code is an encoded [`Program`].
    pub fn program(name: impl Into<String>, program: &Program) -> Self {
        Callable::new(name, program.encode())
    }

    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its code bytes.
    #[must_use]
    pub fn code(&self) -> &[u8] {
        &self.code
    }
}

#[derive(Debug, Clone)]
pub(crate) struct CodeEntry {
    pub name: String,
    pub handle: CodeHandle,
}

/// A published callable, valid while its [`Runner`](super::Runner) lives.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let f = runner.code("f")?;
/// assert_eq!(runner.callables().map(|(name, _)| name).collect::<Vec<_>>(), ["f"]);
/// assert_eq!(runner.callables().next().map(|(_, c)| c), Some(f));
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CodeRef<'r> {
    pub(crate) device: u64,
    pub(crate) handle: CodeHandle,
    /// The publication it belongs to: a run of it is refused once the
    /// device has published again (a typed runner's never is: it borrows
    /// the device; a shared device's may be).
    pub(crate) publication: u64,
    _runner: PhantomData<&'r ()>,
}

impl CodeRef<'_> {
    /// The reference a runner hands out for `handle`, published on device
    /// `device`.
    pub(crate) fn new(device: u64, handle: CodeHandle, publication: u64) -> Self {
        CodeRef {
            device,
            handle,
            publication,
            _runner: PhantomData,
        }
    }

    /// Where the code is resident.
    #[must_use]
    pub fn handle(&self) -> CodeHandle {
        self.handle
    }
}
