//! Simulated device memory as a device model sees it ([`DeviceMemory`]).

use std::fmt;

use super::ModelError;

#[cfg(doc)]
use super::DeviceModel;
#[cfg(any(test, fuzzing))]
use crate::driver::sim::memory::Owner;
use crate::driver::sim::memory::{Fault, Memory};

/// Simulated device memory as a [`DeviceModel`] sees it: bounds-checked
/// copies by device address (no pointers into it), little-endian words.
/// An access outside every live allocation is a
/// [`ModelError::OutOfBounds`] and changes nothing. A shared reference
/// reads; writing takes a mutable one (decoding, at launch, only reads).
///
/// ```
/// use runclaim::driver::abi::{RunArgs, StatusRecord, WallRecord, handshake_bytes, worker_offset};
/// use runclaim::driver::{Driver, abi::Program};
/// use runclaim::sim::protocol::{AicoreLaunch, AicpuLaunch, DeviceMemory, ModelError, RunEnd, Task};
/// use runclaim::sim::{DeviceModel, RunclaimModel, SimConfig, SimDriver};
///
/// /// runclaim's protocol, whose workers also check the word they reported.
/// #[derive(Debug)]
/// struct Checked;
///
/// impl DeviceModel for Checked {
///     fn name(&self) -> &'static str { "checked" }
///     fn report(&self, k: &AicoreLaunch, w: u32, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
///         RunclaimModel.report(k, w, mem)?;
///         let word = k.base + worker_offset(w) as u64; // aicore_done
///         assert_eq!(mem.read_u64(word)?, k.identity);
///         assert_eq!(mem.read_u64(0x10), Err(ModelError::OutOfBounds { addr: 0x10, len: 8 }));
///         Ok(())
///     }
/// #   fn decode_aicore(&self, b: &[u8], n: u32, max: u32, mem: &DeviceMemory<'_>) -> Result<AicoreLaunch, ModelError> {
/// #       RunclaimModel.decode_aicore(b, n, max, mem)
/// #   }
/// #   fn decode_aicpu(&self, b: &[u8], max: u32, mem: &DeviceMemory<'_>) -> Result<AicpuLaunch, ModelError> {
/// #       RunclaimModel.decode_aicpu(b, max, mem)
/// #   }
/// #   fn aicore_start(&self, k: &AicoreLaunch, mem: &mut DeviceMemory<'_>, now: u64) -> Result<(), ModelError> {
/// #       RunclaimModel.aicore_start(k, mem, now)
/// #   }
/// #   fn task(&self, k: &AicoreLaunch, w: u32, mem: &DeviceMemory<'_>) -> Result<Option<Task>, ModelError> {
/// #       RunclaimModel.task(k, w, mem)
/// #   }
/// #   fn finish(&self, k: &AicoreLaunch, w: u32, code: u32, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
/// #       RunclaimModel.finish(k, w, code, mem)
/// #   }
/// #   fn released(&self, k: &AicoreLaunch, w: u32, mem: &DeviceMemory<'_>) -> Result<bool, ModelError> {
/// #       RunclaimModel.released(k, w, mem)
/// #   }
/// #   fn accepted(&self, c: &AicpuLaunch, w: u32, mem: &DeviceMemory<'_>) -> Result<bool, ModelError> {
/// #       RunclaimModel.accepted(c, w, mem)
/// #   }
/// #   fn dispatch(&self, c: &AicpuLaunch, w: u32, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
/// #       RunclaimModel.dispatch(c, w, mem)
/// #   }
/// #   fn task_done(&self, c: &AicpuLaunch, w: u32, mem: &DeviceMemory<'_>) -> Result<Option<u32>, ModelError> {
/// #       RunclaimModel.task_done(c, w, mem)
/// #   }
/// #   fn write_records(&self, c: &AicpuLaunch, e: &RunEnd, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
/// #       RunclaimModel.write_records(c, e, mem)
/// #   }
/// #   fn release(&self, c: &AicpuLaunch, w: u32, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
/// #       RunclaimModel.release(c, w, mem)
/// #   }
/// }
///
/// let sim = SimDriver::stepped(SimConfig::default().device_model(Checked));
/// let code = sim.register_code(&Program::new().encode())?.handle;
/// let (core, cpu) = (sim.create_stream()?, sim.create_stream()?);
/// let hs = sim.alloc(handshake_bytes(2))?;
/// let (wall, status) = (sim.alloc(WallRecord::SIZE)?, sim.alloc(StatusRecord::SIZE)?);
/// let (x, y) = (sim.alloc(8)?, sim.alloc(8)?);
/// let run = RunArgs { run_id: 5, slot: 0, block_dim: 2, len: 2, input: x.raw(), output: y.raw(),
///                     handshake: hs.raw(), wall: wall.raw(), status: status.raw() };
/// sim.launch_aicore(core, code, 2, run.block().args())?;
/// sim.launch_aicpu(cpu, run.block().args())?;
/// sim.sync_stream(cpu, std::time::Duration::from_millis(10))?; // the asserts held
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
pub struct DeviceMemory<'a> {
    mem: &'a mut Memory,
}

impl fmt::Debug for DeviceMemory<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceMemory")
            .field("live_bytes", &self.mem.live_bytes())
            .finish_non_exhaustive()
    }
}

fn oob(f: Fault) -> ModelError {
    ModelError::OutOfBounds {
        addr: f.addr,
        len: f.len,
    }
}

impl<'a> DeviceMemory<'a> {
    pub(crate) fn new(mem: &'a mut Memory) -> Self {
        DeviceMemory { mem }
    }

    /// `Ok` when `addr..addr + len` lies inside one live allocation.
    ///
    /// # Errors
    /// [`ModelError::OutOfBounds`] when it does not.
    pub fn check(&self, addr: u64, len: u64) -> Result<(), ModelError> {
        self.mem.check(addr, len).map_err(oob)
    }

    /// Reads `out.len()` bytes at `addr`.
    ///
    /// # Errors
    /// [`ModelError::OutOfBounds`] (nothing is read).
    pub fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.mem.read(addr, out).map_err(oob)
    }

    /// Writes `data` at `addr`.
    ///
    /// # Errors
    /// [`ModelError::OutOfBounds`] (nothing is written).
    pub fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), ModelError> {
        self.mem.write(addr, data).map_err(oob)
    }

    /// Reads the little-endian `u32` at `addr`.
    ///
    /// # Errors
    /// [`ModelError::OutOfBounds`].
    pub fn read_u32(&self, addr: u64) -> Result<u32, ModelError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads the little-endian `u64` at `addr`.
    ///
    /// # Errors
    /// [`ModelError::OutOfBounds`].
    pub fn read_u64(&self, addr: u64) -> Result<u64, ModelError> {
        self.mem.read_u64(addr).map_err(oob)
    }

    /// Writes `v` little-endian at `addr`.
    ///
    /// # Errors
    /// [`ModelError::OutOfBounds`] (nothing is written).
    pub fn write_u32(&mut self, addr: u64, v: u32) -> Result<(), ModelError> {
        self.write(addr, &v.to_le_bytes())
    }

    /// Writes `v` little-endian at `addr`.
    ///
    /// # Errors
    /// [`ModelError::OutOfBounds`] (nothing is written).
    pub fn write_u64(&mut self, addr: u64, v: u64) -> Result<(), ModelError> {
        self.mem.write_u64(addr, v).map_err(oob)
    }
}

/// Simulated device memory owned outside a simulator, for the fuzz
/// targets and tests that drive a [`DeviceModel`] by hand.
#[cfg(any(test, fuzzing))]
#[derive(Debug)]
pub(crate) struct OwnedMemory(Memory);

#[cfg(any(test, fuzzing))]
impl OwnedMemory {
    /// Memory of at most `limit` live bytes.
    pub(crate) fn new(limit: u64) -> Self {
        OwnedMemory(Memory::new(limit))
    }

    /// Allocates `len` zeroed bytes; `None` at the limit.
    pub(crate) fn alloc(&mut self, len: u64) -> Option<u64> {
        self.0.alloc(len, Owner(1))
    }

    /// The memory as a device model sees it.
    pub(crate) fn device(&mut self) -> DeviceMemory<'_> {
        DeviceMemory::new(&mut self.0)
    }
}
