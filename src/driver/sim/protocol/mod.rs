//! The device side of a kernel ABI, as the simulated kernels follow it: a
//! [`DeviceModel`] per protocol.
//!
//! A [`KernelAbi`](crate::driver::abi::KernelAbi) decides, on the host,
//! how a run's argument blocks are laid out and where its records live.
//! The simulated device has to follow the same layout: decode the blocks
//! it is launched with, hand-shake through the same words, and write the
//! same records. A [`DeviceModel`] is that device side. The simulator runs
//! one model, chosen with [`SimConfig::device_model`](super::SimConfig::device_model)
//! (default: [`RunclaimModel`]):
//!
//! | model | blocks | handshake words say "set for this run" by | the workers' run comes from | records |
//! |---|---|---|---|---|
//! | [`RunclaimModel`] | runclaim's [`RunArgs`](crate::driver::abi::RunArgs) / [`WorkArgs`](crate::driver::abi::WorkArgs), one for both kernels | the run id (tag words; the host zeroes the region) | the AICore block | device wall, then status |
//! | [`A2a3Model`] | the reference runtime's `AicoreLaunchArgs` and `KernelArgs` launch envelope | the run's epoch (the host clears nothing) | the task payload the AICPU kernel writes into the image | timing (epoch last), then result (`published` last) |
//!
//! # What the simulator does and what a model does
//!
//! The simulator owns *when*: streams, the watchdog, the latency model,
//! stepping, the code a worker executes (a [`Program`](crate::driver::abi::Program)
//! or a [`SimKernel`](super::SimKernel)), the trace and every injected
//! fault. The model owns *what* and *where*: each method is one protocol
//! step over device memory ([`DeviceMemory`], bounds-checked), and what a
//! model knows of a run between steps is only what it decoded at launch
//! ([`AicoreLaunch`], [`AicpuLaunch`]) and what memory holds — as on the
//! device, where a kernel learns that a worker reported only by reading
//! a word.
//!
//! The AICore kernel's `block_dim` workers, each in turn:
//!
//! 1. [`report`](DeviceModel::report) (after
//!    [`aicore_start`](DeviceModel::aicore_start), once per kernel);
//! 2. wait until [`task`](DeviceModel::task) finds their task, and with it
//!    their run ([`Task`]);
//! 3. compute for the compute time, then [`finish`](DeviceModel::finish)
//!    with the task's error code;
//! 4. wait until [`released`](DeviceModel::released), and exit.
//!
//! The AICPU kernel: [`aicpu_start`](DeviceModel::aicpu_start); wait until
//! every worker's report is [`accepted`](DeviceModel::accepted);
//! [`dispatch`](DeviceModel::dispatch) every worker; wait until every
//! [`task_done`](DeviceModel::task_done) (the run's code is the first
//! non-zero one, or an armed [`Fault::RunError`](super::Fault::RunError)'s);
//! [`write_records`](DeviceModel::write_records); then
//! [`release`](DeviceModel::release) every worker.
//!
//! A method's error is a device fault of its kernel
//! ([`FaultKind::AicoreException`](crate::driver::FaultKind::AicoreException)
//! or [`AicpuException`](crate::driver::FaultKind::AicpuException)); a
//! decode error refuses the launch ([`ModelError`]). A panic in a model is
//! caught and treated as such an error, and a model must not call the
//! simulator (it runs under its lock: such a call panics, and so faults).
//!
//! User models run on the simulator only: the fake ACL library and the
//! [`InstantDriver`](crate::driver::instant::InstantDriver) know the
//! built-in protocols (the instant driver only runclaim's).
//!
//! ```
//! use runclaim::sim::{A2a3Model, ModelHandle, SimConfig, SimDriver};
//!
//! let sim = SimDriver::stepped(SimConfig::default().device_model(A2a3Model));
//! assert_eq!(sim.config().device_model, ModelHandle::builtin("a2a3").unwrap());
//! assert_eq!(SimConfig::default().device_model.name(), "runclaim");
//! ```

mod a2a3;
mod runclaim;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

pub use self::a2a3::A2a3Model;
pub use self::runclaim::RunclaimModel;

use super::memory::Memory;
use super::rust_kernel::{InKernel, KernelRun};
use crate::driver::DriverErrorKind;

/// The device side of one kernel ABI: how the simulated kernels decode
/// their launch blocks, hand-shake, find the workers' run and write the
/// run's records (the [module docs](self) give the order of the steps).
///
/// Every step reads and writes only [`DeviceMemory`]; a model keeps no
/// state of its own between steps (take `&self`, keep what the kernels
/// need in the decoded launch). Methods must not block or call the
/// simulator; none should panic (a panic is caught: a fault, or a refused
/// launch).
///
/// # Example: runclaim's protocol, refusing odd run ids
///
/// ```
/// use runclaim::driver::{Driver, DriverErrorKind};
/// use runclaim::driver::abi::{Program, RunArgs, StatusRecord, WallRecord, handshake_bytes};
/// use runclaim::sim::protocol::{AicoreLaunch, AicpuLaunch, DeviceMemory, ModelError, RunEnd, Task};
/// use runclaim::sim::{DeviceModel, RunclaimModel, SimConfig, SimDriver};
///
/// #[derive(Debug)]
/// struct EvenRuns;
///
/// impl DeviceModel for EvenRuns {
///     fn name(&self) -> &'static str { "even runs" }
///     fn decode_aicore(&self, block: &[u8], block_dim: u32, max_block_dim: u32,
///                      mem: &DeviceMemory<'_>) -> Result<AicoreLaunch, ModelError> {
///         let k = RunclaimModel.decode_aicore(block, block_dim, max_block_dim, mem)?;
///         if k.identity % 2 == 1 {
///             return Err(ModelError::Refused { what: "odd run ids are refused" });
///         }
///         Ok(k)
///     }
///     // The rest is runclaim's.
///     fn decode_aicpu(&self, b: &[u8], max: u32, mem: &DeviceMemory<'_>) -> Result<AicpuLaunch, ModelError> {
///         RunclaimModel.decode_aicpu(b, max, mem)
///     }
///     fn aicore_start(&self, k: &AicoreLaunch, mem: &mut DeviceMemory<'_>, now: u64) -> Result<(), ModelError> {
///         RunclaimModel.aicore_start(k, mem, now)
///     }
///     fn report(&self, k: &AicoreLaunch, w: u32, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
///         RunclaimModel.report(k, w, mem)
///     }
///     fn task(&self, k: &AicoreLaunch, w: u32, mem: &DeviceMemory<'_>) -> Result<Option<Task>, ModelError> {
///         RunclaimModel.task(k, w, mem)
///     }
///     fn finish(&self, k: &AicoreLaunch, w: u32, code: u32, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
///         RunclaimModel.finish(k, w, code, mem)
///     }
///     fn released(&self, k: &AicoreLaunch, w: u32, mem: &DeviceMemory<'_>) -> Result<bool, ModelError> {
///         RunclaimModel.released(k, w, mem)
///     }
///     fn accepted(&self, c: &AicpuLaunch, w: u32, mem: &DeviceMemory<'_>) -> Result<bool, ModelError> {
///         RunclaimModel.accepted(c, w, mem)
///     }
///     fn dispatch(&self, c: &AicpuLaunch, w: u32, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
///         RunclaimModel.dispatch(c, w, mem)
///     }
///     fn task_done(&self, c: &AicpuLaunch, w: u32, mem: &DeviceMemory<'_>) -> Result<Option<u32>, ModelError> {
///         RunclaimModel.task_done(c, w, mem)
///     }
///     fn write_records(&self, c: &AicpuLaunch, end: &RunEnd, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
///         RunclaimModel.write_records(c, end, mem)
///     }
///     fn release(&self, c: &AicpuLaunch, w: u32, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
///         RunclaimModel.release(c, w, mem)
///     }
/// }
///
/// let sim = SimDriver::stepped(SimConfig::default().device_model(EvenRuns));
/// assert_eq!(sim.config().device_model.name(), "even runs");
/// let code = sim.register_code(&Program::new().add(1).encode())?.handle;
/// let (core, cpu) = (sim.create_stream()?, sim.create_stream()?);
/// let (x, y) = (sim.alloc(4)?, sim.alloc(4)?);
/// let hs = sim.alloc(handshake_bytes(1))?;
/// let (wall, status) = (sim.alloc(WallRecord::SIZE)?, sim.alloc(StatusRecord::SIZE)?);
/// let run = |run_id| RunArgs { run_id, slot: 0, block_dim: 1, len: 1, input: x.raw(), output: y.raw(),
///                               handshake: hs.raw(), wall: wall.raw(), status: status.raw() };
/// let odd = sim.launch_aicore(core, code, 1, run(1).block().args()).unwrap_err();
/// assert!(matches!(odd.kind(), DriverErrorKind::InvalidArgument { what: "odd run ids are refused" }));
/// sim.copy_to_device(x, &41u32.to_le_bytes())?;
/// sim.launch_aicore(core, code, 1, run(2).block().args())?;
/// sim.launch_aicpu(cpu, run(2).block().args())?;
/// sim.sync_stream(cpu, std::time::Duration::from_millis(10))?;
/// let mut out = [0u8; 4];
/// sim.copy_from_device(&mut out, y)?;
/// assert_eq!(u32::from_le_bytes(out), 42);
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
pub trait DeviceModel: Send + Sync + 'static {
    /// A short name (for errors, docs and [`ModelHandle`]'s equality).
    fn name(&self) -> &'static str;

    // ----- launch: the host side ---------------------------------------

    /// Decodes an AICore launch block, launched with `block_dim` workers
    /// (already checked to be `1..=max_block_dim`). The driver has checked
    /// every address the block's writer recorded; check here what the
    /// kernels will touch that the block names (with
    /// [`DeviceMemory::check`]), since a block may also come with no
    /// recorded addresses at all. The returned launch's
    /// [`block_dim`](AicoreLaunch::block_dim) must be `block_dim`.
    ///
    /// # Errors
    /// [`ModelError::Refused`] for a block this protocol does not decode
    /// (the launch fails with
    /// [`DriverErrorKind::InvalidArgument`]); [`ModelError::OutOfBounds`]
    /// for a range outside memory (`BadAddress`). Nothing is queued.
    fn decode_aicore(
        &self,
        block: &[u8],
        block_dim: u32,
        max_block_dim: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicoreLaunch, ModelError>;

    /// Decodes an AICPU launch block, as
    /// [`decode_aicore`](Self::decode_aicore); the returned launch's
    /// [`block_dim`](AicpuLaunch::block_dim) must be `1..=max_block_dim`.
    ///
    /// # Errors
    /// As [`decode_aicore`](Self::decode_aicore).
    fn decode_aicpu(
        &self,
        block: &[u8],
        max_block_dim: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicpuLaunch, ModelError>;

    // ----- the AICore workers ------------------------------------------

    /// The AICore kernel starts at device tick `now` (once, before any
    /// worker reports). Default: nothing.
    ///
    /// # Errors
    /// A fault of the AICore kernel.
    fn aicore_start(
        &self,
        k: &AicoreLaunch,
        mem: &mut DeviceMemory<'_>,
        now: u64,
    ) -> Result<(), ModelError> {
        let _ = (k, mem, now);
        Ok(())
    }

    /// Worker `worker` reports in.
    ///
    /// # Errors
    /// A fault of the AICore kernel.
    fn report(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError>;

    /// Worker `worker` looks for its task: `None` while none is
    /// dispatched; else where its run is ([`Task`]).
    ///
    /// # Errors
    /// A fault of the AICore kernel (a task that is not this run's, a
    /// payload outside its region).
    fn task(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<Task>, ModelError>;

    /// Worker `worker` finished its task with error code `code` (0: ok).
    ///
    /// # Errors
    /// A fault of the AICore kernel.
    fn finish(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        code: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError>;

    /// `true` once worker `worker` is released (it exits).
    ///
    /// # Errors
    /// A fault of the AICore kernel.
    fn released(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError>;

    // ----- the AICPU kernel --------------------------------------------

    /// The AICPU kernel starts (before it looks at any report). Default:
    /// nothing.
    ///
    /// # Errors
    /// A fault of the AICPU kernel.
    fn aicpu_start(&self, c: &AicpuLaunch, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
        let _ = (c, mem);
        Ok(())
    }

    /// `true` when worker `worker`'s report is this run's.
    ///
    /// # Errors
    /// A fault of the AICPU kernel.
    fn accepted(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError>;

    /// Dispatches worker `worker`'s task (every report was accepted).
    ///
    /// # Errors
    /// A fault of the AICPU kernel.
    fn dispatch(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError>;

    /// `Some(code)` once worker `worker` finished this run's task with
    /// error code `code` (0: ok); `None` before.
    ///
    /// # Errors
    /// A fault of the AICPU kernel.
    fn task_done(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<u32>, ModelError>;

    /// Writes the run's records (status and timing, in the protocol's
    /// order) for a run that ended as `end` says.
    ///
    /// # Errors
    /// A fault of the AICPU kernel.
    fn write_records(
        &self,
        c: &AicpuLaunch,
        end: &RunEnd,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError>;

    /// Releases worker `worker` (the records are written).
    ///
    /// # Errors
    /// A fault of the AICPU kernel.
    fn release(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError>;
}

/// Why a [`DeviceModel`] step failed: at launch, the launch is refused;
/// on the device, the kernel faults.
///
/// ```
/// use runclaim::sim::protocol::ModelError;
///
/// let e = ModelError::OutOfBounds { addr: 0x10, len: 8 };
/// assert_eq!(e.to_string(), "access of 8 bytes at 0x10 outside device memory");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// An access (or a range a block names) outside every live allocation:
    /// [`DriverErrorKind::BadAddress`] at launch.
    #[error("access of {len} bytes at {addr:#x} outside device memory")]
    OutOfBounds {
        /// First byte.
        addr: u64,
        /// Bytes.
        len: u64,
    },
    /// What the protocol does not allow (a block it does not decode, a
    /// record that is not this run's):
    /// [`DriverErrorKind::InvalidArgument`] at launch.
    #[error("{what}")]
    Refused {
        /// What is wrong.
        what: &'static str,
    },
}

impl ModelError {
    /// The launch error this decode error is.
    pub(crate) fn at_launch(self) -> DriverErrorKind {
        match self {
            ModelError::OutOfBounds { addr, len } => DriverErrorKind::BadAddress { addr, len },
            ModelError::Refused { what } => DriverErrorKind::InvalidArgument { what },
        }
    }
}

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

fn oob(f: super::memory::Fault) -> ModelError {
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

/// An AICore launch as a [`DeviceModel`] decoded it: what its workers
/// need for the kernel's life.
///
/// ```
/// use runclaim::sim::protocol::AicoreLaunch;
///
/// let k = AicoreLaunch::new(7, 2, 0x1_0000_0000); // run 7's words, 2 workers, the handshake
/// assert_eq!((k.identity, k.block_dim, k.base), (7, 2, 0x1_0000_0000));
/// assert!(k.run.is_none()); // read at dispatch, unless the block carries it
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AicoreLaunch {
    /// The identity the run's words carry (runclaim: the run id; a2a3:
    /// the epoch); also the run the trace names. Never 0.
    pub identity: u64,
    /// Workers (the launch's `block_dim`).
    pub block_dim: u32,
    /// Where the run's handshake lives (runclaim: the handshake region;
    /// a2a3: the image).
    pub base: u64,
    /// The workers' run, when the block carries it ([`Task::InBlock`]).
    pub run: Option<KernelRun>,
    /// Whatever else of the block the model keeps (empty for both
    /// built-ins).
    pub data: Vec<u8>,
}

impl AicoreLaunch {
    /// A launch whose run is read at dispatch (no [`run`](Self::run), no
    /// [`data`](Self::data)).
    #[must_use]
    pub fn new(identity: u64, block_dim: u32, base: u64) -> Self {
        AicoreLaunch {
            identity,
            block_dim,
            base,
            run: None,
            data: Vec::new(),
        }
    }
}

/// An AICPU launch as a [`DeviceModel`] decoded it.
///
/// ```
/// use runclaim::sim::protocol::AicpuLaunch;
///
/// let c = AicpuLaunch::new(7, 1, 2, 0x1000, 0x2000, 0x3000); // run 7, slot 1, 2 workers
/// assert_eq!((c.base, c.status, c.timing), (0x1000, 0x2000, 0x3000));
/// assert!(c.data.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AicpuLaunch {
    /// The identity the run's words carry (as
    /// [`AicoreLaunch::identity`]). Never 0.
    pub identity: u64,
    /// The slot the run occupies.
    pub slot: u32,
    /// Workers to wait for.
    pub block_dim: u32,
    /// Where the run's handshake lives.
    pub base: u64,
    /// Where the status (result) record lives.
    pub status: u64,
    /// Where the timing (device-wall) record lives.
    pub timing: u64,
    /// Whatever else of the block the model keeps (runclaim: nothing;
    /// a2a3: the whole launch envelope, as the AICPU kernel receives it).
    pub data: Vec<u8>,
}

impl AicpuLaunch {
    /// A launch (with no [`data`](Self::data)).
    #[must_use]
    pub fn new(
        identity: u64,
        slot: u32,
        block_dim: u32,
        base: u64,
        status: u64,
        timing: u64,
    ) -> Self {
        AicpuLaunch {
            identity,
            slot,
            block_dim,
            base,
            status,
            timing,
            data: Vec::new(),
        }
    }
}

/// Where a dispatched worker's run is ([`DeviceModel::task`]).
///
/// ```
/// use runclaim::sim::KernelRun;
/// use runclaim::sim::protocol::Task;
///
/// let read = Task::Read(KernelRun::new(7, 0, 1, Vec::new(), vec![3]));
/// assert!(matches!(read, Task::Read(r) if r.scalar(0) == Some(3)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Task {
    /// In the launch block: [`AicoreLaunch::run`] (a launch without one
    /// faults).
    InBlock,
    /// Read from device memory at dispatch.
    Read(KernelRun),
}

/// How a run ended, for [`DeviceModel::write_records`]: its code and the
/// device ticks the AICPU kernel saw (the AICore kernel's start is in
/// memory, where it stamped it).
///
/// ```
/// use runclaim::sim::protocol::RunEnd;
///
/// let end = RunEnd::new(0, 10, 12, 40);
/// assert_eq!((end.code, end.aicpu_start, end.dispatched, end.end), (0, 10, 12, 40));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RunEnd {
    /// The run's code: 0 = success; else the first worker's non-zero
    /// error code, or an armed [`Fault::RunError`](super::Fault::RunError)'s.
    pub code: u32,
    /// When the AICPU kernel started.
    pub aicpu_start: u64,
    /// When the tasks were dispatched.
    pub dispatched: u64,
    /// Now: every task is done.
    pub end: u64,
}

impl RunEnd {
    /// An end (for models' own tests).
    #[must_use]
    pub const fn new(code: u32, aicpu_start: u64, dispatched: u64, end: u64) -> Self {
        RunEnd {
            code,
            aicpu_start,
            dispatched,
            end,
        }
    }
}

/// The [`DeviceModel`] a simulator runs, shared ([`SimConfig::device_model`](super::SimConfig::device_model)).
///
/// Cheap to clone. Two handles are **equal when their models' names are**
/// (so `SimConfig`'s equality compares models by name: give a model of
/// your own a name of its own). The default is [`RunclaimModel`].
///
/// ```
/// use runclaim::sim::{A2a3Model, ModelHandle, RunclaimModel};
///
/// assert_eq!(ModelHandle::default(), ModelHandle::new(RunclaimModel));
/// assert_eq!(ModelHandle::builtin("a2a3"), Some(ModelHandle::new(A2a3Model)));
/// assert_ne!(ModelHandle::new(A2a3Model), ModelHandle::default());
/// assert_eq!(format!("{:?}", ModelHandle::default()), "ModelHandle(\"runclaim\")");
/// assert!(ModelHandle::builtin("mine").is_none()); // only the built-ins by name
/// ```
#[derive(Clone)]
pub struct ModelHandle {
    model: Arc<dyn DeviceModel>,
}

impl ModelHandle {
    /// A handle on `model`.
    #[must_use]
    pub fn new(model: impl DeviceModel) -> Self {
        ModelHandle {
            model: Arc::new(model),
        }
    }

    /// A handle on a shared model.
    #[must_use]
    pub fn from_arc(model: Arc<dyn DeviceModel>) -> Self {
        ModelHandle { model }
    }

    /// A built-in model by name: `"runclaim"` ([`RunclaimModel`]) or
    /// `"a2a3"` ([`A2a3Model`]).
    #[must_use]
    pub fn builtin(name: &str) -> Option<Self> {
        match name {
            "runclaim" => Some(ModelHandle::new(RunclaimModel)),
            "a2a3" => Some(ModelHandle::new(A2a3Model)),
            _ => None,
        }
    }

    /// The model's name.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.model.name()
    }

    /// The model.
    #[must_use]
    pub fn model(&self) -> &dyn DeviceModel {
        &*self.model
    }
}

impl Default for ModelHandle {
    fn default() -> Self {
        ModelHandle::new(RunclaimModel)
    }
}

impl fmt::Debug for ModelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ModelHandle").field(&self.name()).finish()
    }
}

impl PartialEq for ModelHandle {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ModelHandle {}

impl<M: DeviceModel> From<M> for ModelHandle {
    fn from(model: M) -> Self {
        ModelHandle::new(model)
    }
}

impl From<Arc<dyn DeviceModel>> for ModelHandle {
    fn from(model: Arc<dyn DeviceModel>) -> Self {
        ModelHandle::from_arc(model)
    }
}

/// Runs one model step: a panic in the model is caught and becomes an
/// error (it must neither unwind through the device thread nor poison
/// the simulator's lock), and a model calling the simulator panics at the
/// call instead of deadlocking on the lock its caller holds.
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T, ModelError>) -> Result<T, ModelError> {
    let _inside = InKernel::enter();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(Err(ModelError::Refused {
        what: "the device model panicked",
    }))
}
