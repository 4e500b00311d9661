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
mod device_memory;
mod handle;
mod launch;
mod replay;
mod runclaim;

#[cfg(test)]
mod tests;

pub use self::a2a3::A2a3Model;
#[cfg(any(test, fuzzing))]
pub(crate) use self::a2a3::decode_tensor;
pub use self::device_memory::DeviceMemory;
#[cfg(any(test, fuzzing))]
pub(crate) use self::device_memory::OwnedMemory;
pub use self::handle::ModelHandle;
pub use self::launch::{AicoreLaunch, AicpuLaunch, RunEnd, Task};
pub use self::runclaim::RunclaimModel;

use super::rust_kernel::InKernel;
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
