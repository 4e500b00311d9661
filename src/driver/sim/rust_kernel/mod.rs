//! AICore kernels written as Rust functions, run by the simulator.
//!
//! See [`SimKernel`]; what it computes on is a [`KernelRun`] (`run.rs`),
//! what it works with a [`KernelCtx`] (`ctx.rs`).

mod ctx;
mod run;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use self::ctx::KernelCtx;
pub use self::run::KernelRun;

use super::memory::Memory;
use crate::driver::abi;

#[cfg(doc)]
use super::SimDriver;
#[cfg(doc)]
use crate::driver::FaultKind;

type KernelFn = dyn Fn(&mut KernelCtx<'_>) -> Result<(), KernelError> + Send + Sync;
type TimeFn = dyn Fn(&KernelRun) -> Duration + Send + Sync;

/// An AICore kernel written in Rust, for the simulator.
///
/// A [`SimKernel`] wraps a function that computes one worker's part of a
/// run. [`SimDriver::register_kernel`] gives it an id in that simulator and
/// returns its code image, a [`KernelCode`] (`"RCR1"` + the id), which is
/// then registered, pinned, deduplicated, published, evicted and launched
/// exactly like a [`Program`](crate::driver::abi::Program) image — stale
/// instruction caches included: after a publication, an AICore stream
/// created before it runs the *old* function at that code address.
///
/// Where it runs: each AICore worker, once the AICPU kernel has dispatched
/// its task and its compute time has passed, calls the function once with
/// its own worker index, then reports the result through the handshake as a
/// program would (so a stomped handshake still hangs the run, and armed
/// faults still apply). What it sees ([`KernelCtx`]): the run's header,
/// tensors and scalars ([`KernelRun`]; a version-1 block has no tensors or
/// scalars; under [`A2a3Model`](super::A2a3Model) they come from the task
/// payload) and bounds-checked, typed access to device memory by address
/// ([`bytemuck::Pod`] elements, host byte order — little-endian on every
/// supported host).
///
/// - An access outside every live allocation, or outside the tensor a
///   tensor-relative access names, is a kernel fault: the AICore kernel
///   faults with [`FaultKind::AicoreException`], as a program reading out
///   of range does. So does a kernel that panics or returns an error other
///   than [`KernelError::Fail`] with a non-zero code.
/// - [`KernelError::Fail`]`(code)` makes the worker's task report `code`,
///   and the run's status record carries it (the first failing worker's).
///
/// The function runs on the simulator's device thread (real time) or the
/// stepping host thread, under the simulator's lock: it must not call the
/// driver — a call into the same simulator from inside a kernel (or its
/// time function) faults the kernel instead of deadlocking on that lock.
/// Only the simulator runs these images: the
/// [`InstantDriver`](crate::driver::instant::InstantDriver) (and a real
/// device) refuse an `RCR1` image as invalid code.
///
/// # Example: `y = a·x + y` on a workload block
///
/// ```
/// use std::time::Duration;
/// use runclaim::driver::{DevPtr, Driver};
/// use runclaim::driver::abi::{self, Dir, RunArgs, StatusRecord, TensorArg, WallRecord, WorkArgs};
/// use runclaim::sim::{SimConfig, SimDriver, SimKernel};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// // y = a*x + y over f32; `a` is the first scalar (an f32).
/// let axpy = sim.register_kernel(SimKernel::new(|k| {
///     let a: f32 = k.scalar_as(0).unwrap_or(0.0);
///     let n = k.tensor(0).map_or(0, |t| t.elements());
///     let share = k.share(n);
///     let len = (share.end - share.start) as usize;
///     let (mut x, mut y) = (vec![0f32; len], vec![0f32; len]);
///     k.read_tensor(0, share.start, &mut x)?;
///     k.read_tensor(1, share.start, &mut y)?;
///     for (y, x) in y.iter_mut().zip(&x) {
///         *y += a * x;
///     }
///     k.write_tensor(1, share.start, &y)
/// }));
/// let code = sim.register_code(axpy.as_bytes())?.handle;
///
/// let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
/// let (x, y) = (sim.alloc(16)?, sim.alloc(16)?);
/// sim.copy_to_device(x, &f32s(&[1.0, 2.0, 3.0, 4.0]))?;
/// sim.copy_to_device(y, &f32s(&[10.0; 4]))?;
/// # let block_dim = 2;
/// # let hs = sim.alloc(abi::handshake_bytes(block_dim))?;
/// # sim.memset(hs, 0, abi::handshake_bytes(block_dim))?;
/// # let (wall, status) = (sim.alloc(WallRecord::SIZE)?, sim.alloc(StatusRecord::SIZE)?);
/// let header = RunArgs { run_id: 1, slot: 0, block_dim, len: 0, input: 0, output: 0,
///                        handshake: hs.raw(), wall: wall.raw(), status: status.raw() };
/// let t = |p: DevPtr, dir| TensorArg { addr: p.raw(), bytes: 16, elem_size: 4, dir, staged: false };
/// let block = WorkArgs::block(&header, &[t(x, Dir::In), t(y, Dir::InOut)],
///                             &[u64::from(2.0f32.to_bits())]).unwrap();
///
/// let (core, cpu) = (sim.create_stream()?, sim.create_stream()?);
/// sim.launch_aicore(core, code, block_dim, block.args())?;
/// sim.launch_aicpu(cpu, block.args())?;
/// sim.sync_stream(cpu, Duration::from_secs(1))?;
/// let mut out = [0u8; 16];
/// sim.copy_from_device(&mut out, y)?;
/// assert_eq!(out.to_vec(), f32s(&[12.0, 14.0, 16.0, 18.0]));
/// # let mut st = [0u8; StatusRecord::SIZE];
/// # sim.copy_from_device(&mut st, status)?;
/// # assert_eq!(StatusRecord::from_bytes(&st).unwrap().code, 0);
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
///
/// A kernel is cheap to clone (the functions are shared). With a time
/// function (real time only):
///
/// ```
/// use std::time::Duration;
/// use runclaim::sim::{KernelError, SimKernel};
///
/// // Fails every run with error code 7, and takes 1 µs per scalar in real time.
/// let k = SimKernel::new(|_| Err(KernelError::Fail(7)))
///     .time(|run| Duration::from_micros(run.scalars().len() as u64));
/// # let _ = k;
/// ```
#[derive(Clone)]
pub struct SimKernel {
    run: Arc<KernelFn>,
    time: Option<Arc<TimeFn>>,
}

impl fmt::Debug for SimKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimKernel")
            .field("timed", &self.time.is_some())
            .finish_non_exhaustive()
    }
}

impl SimKernel {
    /// A kernel that runs `f` once per AICore worker of every launch.
    #[must_use]
    pub fn new(
        f: impl Fn(&mut KernelCtx<'_>) -> Result<(), KernelError> + Send + Sync + 'static,
    ) -> Self {
        SimKernel {
            run: Arc::new(f),
            time: None,
        }
    }

    /// Real-time mode: each worker's compute time is `g(run)` instead of the
    /// fixed [`LatencyModel::kernel`](super::LatencyModel::kernel) (capped at
    /// [`LatencyModel::MAX`](super::LatencyModel::MAX)); `g` is called once
    /// per launch, when the AICore kernel starts — or, where the workers'
    /// run is read at dispatch ([`A2a3Model`](super::A2a3Model)), when
    /// the first worker is dispatched. Stepped mode ignores
    /// latencies, this one included. A time beyond the device watchdog
    /// makes the run time out, as on the device.
    #[must_use]
    pub fn time(mut self, g: impl Fn(&KernelRun) -> Duration + Send + Sync + 'static) -> Self {
        self.time = Some(Arc::new(g));
        self
    }

    /// Runs the kernel for worker `worker`; `Ok(code)` is the task's error
    /// code (0: success), `Err(())` a kernel fault.
    pub(crate) fn call(&self, run: &KernelRun, worker: u32, mem: &mut Memory) -> Result<u32, ()> {
        let mut ctx = KernelCtx::new(run, worker, mem);
        // A panicking kernel is a faulting kernel: it must not poison the
        // simulator's lock or unwind through the device thread. A kernel
        // that calls the simulator (which holds its lock now) panics at the
        // call instead of deadlocking: see `InKernel`.
        let _inside = InKernel::enter();
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.run)(&mut ctx)));
        match out {
            Ok(Ok(())) => Ok(0),
            Ok(Err(KernelError::Fail(code))) if code != 0 => Ok(code),
            _ => Err(()),
        }
    }

    /// The compute time of `run` in ticks, `None` without a time function;
    /// `Err(())` when the function panicked.
    pub(crate) fn ticks(&self, run: &KernelRun) -> Result<Option<u64>, ()> {
        let Some(g) = &self.time else {
            return Ok(None);
        };
        let _inside = InKernel::enter();
        let d =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g(run))).map_err(|_| ())?;
        Ok(Some(abi::duration_to_ticks(
            d.min(super::LatencyModel::MAX),
        )))
    }
}

thread_local! {
    static IN_KERNEL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as running a kernel function (or its time function)
/// under the simulator's lock, until dropped — also when the function
/// panics.
pub(crate) struct InKernel(bool);

impl InKernel {
    pub(crate) fn enter() -> Self {
        InKernel(IN_KERNEL.with(|k| k.replace(true)))
    }
}

impl Drop for InKernel {
    fn drop(&mut self) {
        IN_KERNEL.with(|k| k.set(self.0));
    }
}

/// `true` while this thread runs a kernel function under the simulator's
/// lock: a simulator call from there would deadlock on that lock.
pub(crate) fn in_kernel() -> bool {
    IN_KERNEL.with(std::cell::Cell::get)
}

/// The code image of a [`SimKernel`] registered with
/// [`SimDriver::register_kernel`]: [`KernelCode::MAGIC`] followed by the
/// kernel's id (little-endian `u64`, unique in the process). Register it
/// with [`Driver::register_code`](crate::driver::Driver::register_code) on
/// the same simulator (or one of its clones), or hand it to a
/// [`Callable`](crate::Callable); any other driver refuses it as invalid
/// code.
///
/// ```
/// use runclaim::Callable;
/// use runclaim::driver::Driver;
/// use runclaim::sim::{KernelCode, SimDriver, SimKernel};
///
/// let sim = SimDriver::stepped(Default::default());
/// let code = sim.register_kernel(SimKernel::new(|_| Ok(())));
/// assert_eq!(&code.as_bytes()[..4], b"RCR1");
/// assert_eq!(KernelCode::from_bytes(code.as_bytes()), Some(code));
/// assert!(sim.register_code(code.as_bytes())?.published);
/// let callable = Callable::new("noop", code); // a code image like any other
/// assert_eq!(callable.code(), code.as_bytes());
/// // Another simulator never registered that kernel.
/// let other = SimDriver::stepped(Default::default());
/// assert!(other.register_code(code.as_bytes()).is_err());
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelCode {
    bytes: [u8; KernelCode::SIZE],
}

impl KernelCode {
    /// First four bytes of every Rust kernel image.
    pub const MAGIC: [u8; 4] = *b"RCR1";
    /// Bytes of an image: the magic and the id.
    pub const SIZE: usize = 12;

    /// A fresh id, never handed out before in this process.
    pub(crate) fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut bytes = [0u8; Self::SIZE];
        bytes[..4].copy_from_slice(&Self::MAGIC);
        bytes[4..].copy_from_slice(&id.to_le_bytes());
        KernelCode { bytes }
    }

    /// The kernel's id.
    #[must_use]
    pub fn id(&self) -> u64 {
        let mut id = [0u8; 8];
        id.copy_from_slice(&self.bytes[4..]);
        u64::from_le_bytes(id)
    }

    /// The image bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The image `code` is, if it is one ([`SIZE`](Self::SIZE) bytes
    /// starting with [`MAGIC`](Self::MAGIC)); whether a simulator knows its
    /// id is another matter.
    #[must_use]
    pub fn from_bytes(code: &[u8]) -> Option<Self> {
        let bytes: [u8; Self::SIZE] = code.try_into().ok()?;
        (bytes[..4] == Self::MAGIC).then_some(KernelCode { bytes })
    }
}

impl AsRef<[u8]> for KernelCode {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl From<KernelCode> for Vec<u8> {
    fn from(code: KernelCode) -> Self {
        code.bytes.to_vec()
    }
}

/// Why a [`SimKernel`] stopped.
///
/// ```
/// use runclaim::sim::KernelError;
///
/// let e = KernelError::OutOfBounds { addr: 0x10, len: 4 };
/// assert_eq!(e.to_string(), "access of 4 bytes at 0x10 outside device memory");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The task fails with this error code, which the run's status record
    /// reports. A code of 0 would report success: the kernel faults instead.
    #[error("task failed with code {0}")]
    Fail(u32),
    /// An access outside every live allocation: the kernel faults.
    #[error("access of {len} bytes at {addr:#x} outside device memory")]
    OutOfBounds {
        /// First byte of the access.
        addr: u64,
        /// Its length in bytes.
        len: u64,
    },
    /// A tensor-relative access beyond the run's tensors or outside its
    /// tensor: the kernel faults.
    #[error("access of {len} bytes at byte {offset} of tensor {index}, outside it")]
    OutsideTensor {
        /// The tensor's index in the run.
        index: usize,
        /// Byte offset of the access in the tensor (saturated).
        offset: u64,
        /// Its length in bytes (saturated).
        len: u64,
    },
}

#[cfg(test)]
mod tests;
