//! AICore kernels written as Rust functions, run by the simulator.
//!
//! See [`SimKernel`].

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytemuck::Pod;

use super::memory::Memory;
use crate::driver::abi::{self, ArgBlock, RunArgs, TensorArg};

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
/// // y = a*x + y over f32; `a` is the first scalar (its f32 bits).
/// let axpy = sim.register_kernel(SimKernel::new(|k| {
///     let a = f32::from_bits(k.scalar(0).unwrap_or(0) as u32);
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
        let mut ctx = KernelCtx { run, worker, mem };
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

/// The run an AICore worker computes: under [`RunclaimModel`](super::RunclaimModel)
/// what the launch block carried — its header, and the tensors and scalars
/// of a version-2 block (none for version 1); under
/// [`A2a3Model`](super::A2a3Model) the task payload the AICPU kernel
/// dispatched — its tensors and scalars, with a header holding the run's
/// epoch as `run_id`, its slot and `block_dim`, and 0 elsewhere
/// ([`KernelRun::new`]).
///
/// ```
/// use runclaim::sim::SimKernel;
///
/// // In real time, 1 µs per element of the first tensor.
/// let k = SimKernel::new(|_| Ok(()))
///     .time(|run| std::time::Duration::from_micros(run.tensor(0).map_or(0, |t| t.elements())));
/// # let _ = k;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRun {
    header: RunArgs,
    workload: bool,
    tensors: Vec<TensorArg>,
    scalars: Vec<u64>,
}

impl KernelRun {
    /// A run with these tensors and scalars (a workload run, as a version-2
    /// block carries it), for a [`DeviceModel`](super::DeviceModel) that
    /// reads the workers' run from device memory: its
    /// [`header`](Self::header) has `run_id`, `slot` and `block_dim` and
    /// every other field 0.
    ///
    /// ```
    /// use runclaim::driver::abi::{Dir, TensorArg};
    /// use runclaim::sim::KernelRun;
    ///
    /// let x = TensorArg { addr: 0x1000, bytes: 16, elem_size: 4, dir: Dir::In, staged: false };
    /// let run = KernelRun::new(7, 1, 2, vec![x], vec![9]);
    /// assert!(run.is_workload());
    /// assert_eq!((run.run_id(), run.slot(), run.block_dim()), (7, 1, 2));
    /// assert_eq!((run.tensor(0), run.scalar(0)), (Some(x), Some(9)));
    /// assert_eq!(run.header().handshake, 0);
    /// ```
    #[must_use]
    pub fn new(
        run_id: u64,
        slot: u32,
        block_dim: u32,
        tensors: Vec<TensorArg>,
        scalars: Vec<u64>,
    ) -> Self {
        KernelRun {
            header: RunArgs {
                run_id,
                slot,
                block_dim,
                len: 0,
                input: 0,
                output: 0,
                handshake: 0,
                wall: 0,
                status: 0,
            },
            workload: true,
            tensors,
            scalars,
        }
    }

    /// The parsed block (allocates only for a version-2 block).
    pub(crate) fn from_block(block: &ArgBlock<'_>) -> Self {
        match block {
            ArgBlock::Run(a) => KernelRun {
                header: *a,
                workload: false,
                tensors: Vec::new(),
                scalars: Vec::new(),
            },
            ArgBlock::Work(w) => KernelRun {
                header: *w.header(),
                workload: true,
                tensors: w.tensors().collect(),
                scalars: w.scalars().collect(),
            },
        }
    }

    /// The header (of a version-2 block: `len`, `input`, `output` are 0).
    #[must_use]
    pub fn header(&self) -> &RunArgs {
        &self.header
    }

    /// `true` for a version-2 (workload) block.
    #[must_use]
    pub fn is_workload(&self) -> bool {
        self.workload
    }

    /// The run's id.
    #[must_use]
    pub fn run_id(&self) -> u64 {
        self.header.run_id
    }

    /// The pipeline slot of the run.
    #[must_use]
    pub fn slot(&self) -> u32 {
        self.header.slot
    }

    /// The number of AICore workers.
    #[must_use]
    pub fn block_dim(&self) -> u32 {
        self.header.block_dim
    }

    /// The tensors, in argument order.
    #[must_use]
    pub fn tensors(&self) -> &[TensorArg] {
        &self.tensors
    }

    /// Tensor `i`, `None` beyond the count.
    #[must_use]
    pub fn tensor(&self, i: usize) -> Option<TensorArg> {
        self.tensors.get(i).copied()
    }

    /// The scalars, in argument order.
    #[must_use]
    pub fn scalars(&self) -> &[u64] {
        &self.scalars
    }

    /// Scalar `i`, `None` beyond the count.
    #[must_use]
    pub fn scalar(&self, i: usize) -> Option<u64> {
        self.scalars.get(i).copied()
    }
}

/// What a [`SimKernel`] works with: its worker, the run ([`KernelRun`],
/// also reachable through the forwarding methods), and device memory.
///
/// Every access is bounds-checked and copies (no pointers into device
/// memory): [`read`](Self::read) / [`write`](Self::write) by device
/// address, [`read_tensor`](Self::read_tensor) /
/// [`write_tensor`](Self::write_tensor) by tensor and element index, which
/// also check that the range lies inside the tensor. Elements are any
/// [`bytemuck::Pod`] type, in host byte order (a zero-sized element type
/// makes a zero-byte access, still checked against memory).
///
/// ```
/// use runclaim::sim::{KernelError, SimKernel};
///
/// // Worker w writes w+1 into its share of the first tensor's u32 elements.
/// let fill = SimKernel::new(|k| {
///     let Some(t) = k.tensor(0) else { return Err(KernelError::Fail(1)) };
///     let share = k.share(t.bytes / 4);
///     let values = vec![k.worker() + 1; (share.end - share.start) as usize];
///     k.write_tensor::<u32>(0, share.start, &values)?;
///     // The same bytes, by address.
///     let mut back = vec![0u32; values.len()];
///     k.read(t.addr + share.start * 4, &mut back)?;
///     if back == values { Ok(()) } else { Err(KernelError::Fail(2)) }
/// });
/// # let _ = fill; // launched as in SimKernel's example
/// ```
pub struct KernelCtx<'a> {
    run: &'a KernelRun,
    worker: u32,
    mem: &'a mut Memory,
}

impl fmt::Debug for KernelCtx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelCtx")
            .field("run", self.run)
            .field("worker", &self.worker)
            .finish_non_exhaustive()
    }
}

impl KernelCtx<'_> {
    /// This worker's index, `0..block_dim`.
    #[must_use]
    pub fn worker(&self) -> u32 {
        self.worker
    }

    /// The run.
    #[must_use]
    pub fn run(&self) -> &KernelRun {
        self.run
    }

    /// The argument block's header.
    #[must_use]
    pub fn header(&self) -> &RunArgs {
        self.run.header()
    }

    /// The number of workers.
    #[must_use]
    pub fn block_dim(&self) -> u32 {
        self.run.block_dim()
    }

    /// The run's id.
    #[must_use]
    pub fn run_id(&self) -> u64 {
        self.run.run_id()
    }

    /// The run's pipeline slot.
    #[must_use]
    pub fn slot(&self) -> u32 {
        self.run.slot()
    }

    /// The run's tensors.
    #[must_use]
    pub fn tensors(&self) -> &[TensorArg] {
        self.run.tensors()
    }

    /// Tensor `i`, `None` beyond the count.
    #[must_use]
    pub fn tensor(&self, i: usize) -> Option<TensorArg> {
        self.run.tensor(i)
    }

    /// The run's scalars.
    #[must_use]
    pub fn scalars(&self) -> &[u64] {
        self.run.scalars()
    }

    /// Scalar `i`, `None` beyond the count.
    #[must_use]
    pub fn scalar(&self, i: usize) -> Option<u64> {
        self.run.scalar(i)
    }

    /// This worker's share of `len` elements
    /// ([`abi::worker_share`]): the shares of all workers cover `0..len`
    /// exactly once.
    #[must_use]
    pub fn share(&self, len: u64) -> Range<u64> {
        let (start, end) = abi::worker_share(len, self.block_dim(), self.worker);
        start..end
    }

    /// Reads `out.len()` elements at device address `addr`.
    ///
    /// # Errors
    /// [`KernelError::OutOfBounds`] when the range is not inside one live
    /// allocation (nothing is read).
    pub fn read<T: Pod>(&self, addr: u64, out: &mut [T]) -> Result<(), KernelError> {
        let len = std::mem::size_of_val(out) as u64;
        let oob = KernelError::OutOfBounds { addr, len };
        let bytes = bytemuck::try_cast_slice_mut::<T, u8>(out).map_err(|_| oob)?;
        self.mem.read(addr, bytes).map_err(|_| oob)
    }

    /// Writes `data` at device address `addr`.
    ///
    /// # Errors
    /// [`KernelError::OutOfBounds`] when the range is not inside one live
    /// allocation (nothing is written).
    pub fn write<T: Pod>(&mut self, addr: u64, data: &[T]) -> Result<(), KernelError> {
        let len = std::mem::size_of_val(data) as u64;
        let oob = KernelError::OutOfBounds { addr, len };
        let bytes = bytemuck::try_cast_slice::<T, u8>(data).map_err(|_| oob)?;
        self.mem.write(addr, bytes).map_err(|_| oob)
    }

    /// The device address of elements `first..first + n` of tensor `index`
    /// (elements of `T`), if that range lies inside the tensor.
    fn tensor_range<T>(&self, index: usize, first: u64, n: usize) -> Result<u64, KernelError> {
        let size = std::mem::size_of::<T>() as u64;
        let offset = first.saturating_mul(size);
        let len = (n as u64).saturating_mul(size);
        let outside = KernelError::OutsideTensor { index, offset, len };
        let t = self.tensor(index).ok_or(outside)?;
        let end = first
            .checked_mul(size)
            .and_then(|o| o.checked_add(len))
            .ok_or(outside)?;
        if end > t.bytes {
            return Err(outside);
        }
        t.addr.checked_add(offset).ok_or(outside)
    }

    /// Reads elements `first..first + out.len()` of tensor `index`
    /// (indices in elements of `T`).
    ///
    /// # Errors
    /// [`KernelError::OutsideTensor`] when there is no such tensor or the
    /// range is not inside it; [`KernelError::OutOfBounds`] when the tensor
    /// is not in live memory.
    pub fn read_tensor<T: Pod>(
        &self,
        index: usize,
        first: u64,
        out: &mut [T],
    ) -> Result<(), KernelError> {
        let addr = self.tensor_range::<T>(index, first, out.len())?;
        self.read(addr, out)
    }

    /// Writes `data` as elements `first..first + data.len()` of tensor
    /// `index` (indices in elements of `T`).
    ///
    /// # Errors
    /// As for [`read_tensor`](Self::read_tensor).
    pub fn write_tensor<T: Pod>(
        &mut self,
        index: usize,
        first: u64,
        data: &[T],
    ) -> Result<(), KernelError> {
        let addr = self.tensor_range::<T>(index, first, data.len())?;
        self.write(addr, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::abi::{Dir, WorkArgs};

    fn run_with(tensors: &[TensorArg], scalars: &[u64]) -> KernelRun {
        let header = RunArgs {
            run_id: 3,
            slot: 1,
            block_dim: 2,
            len: 0,
            input: 0,
            output: 0,
            handshake: 0,
            wall: 0,
            status: 0,
        };
        let mut b = vec![0; WorkArgs::size(tensors.len(), scalars.len())];
        WorkArgs::encode(&mut b, &header, tensors.iter().copied(), scalars).unwrap();
        KernelRun::from_block(&ArgBlock::parse(&b).unwrap())
    }

    #[test]
    fn tensor_access_is_checked_against_the_tensor_and_memory() {
        let mut mem = Memory::new(1 << 20);
        let a = mem.alloc(64, crate::driver::sim::memory::Owner(1)).unwrap();
        // Tensor 0 is the first 16 bytes of a 64-byte allocation; tensor 1
        // names unmapped memory.
        let t0 = TensorArg {
            addr: a,
            bytes: 16,
            elem_size: 4,
            dir: Dir::InOut,
            staged: false,
        };
        let t1 = TensorArg {
            addr: 0x10,
            bytes: 8,
            ..t0
        };
        let run = run_with(&[t0, t1], &[9]);
        let mut ctx = KernelCtx {
            run: &run,
            worker: 1,
            mem: &mut mem,
        };
        assert_eq!(
            (ctx.run_id(), ctx.slot(), ctx.block_dim(), ctx.scalar(0)),
            (3, 1, 2, Some(9))
        );
        assert_eq!(ctx.share(5), 3..5);
        ctx.write_tensor::<u32>(0, 2, &[7, 8]).unwrap();
        let mut back = [0u32; 4];
        ctx.read_tensor(0, 0, &mut back).unwrap();
        assert_eq!(back, [0, 0, 7, 8]);
        // Inside the allocation but past the tensor: refused.
        assert_eq!(
            ctx.write_tensor::<u32>(0, 3, &[1, 2]),
            Err(KernelError::OutsideTensor {
                index: 0,
                offset: 12,
                len: 8
            })
        );
        assert!(
            ctx.read_tensor::<u32>(2, 0, &mut [0]).is_err(),
            "no tensor 2"
        );
        assert!(ctx.read_tensor::<u32>(0, u64::MAX, &mut [0]).is_err());
        assert!(matches!(
            ctx.read_tensor::<u32>(1, 0, &mut [0]),
            Err(KernelError::OutOfBounds { addr: 0x10, len: 4 })
        ));
        // By address: the rest of the allocation is reachable, past it not.
        ctx.write::<u64>(a + 56, &[1]).unwrap();
        assert!(ctx.write::<u64>(a + 60, &[1]).is_err());
        // Zero-sized elements: a zero-byte access, checked like any other.
        ctx.read::<()>(a, &mut [()]).unwrap();
        ctx.read_tensor::<()>(0, 9, &mut [()]).unwrap();
        assert!(ctx.read::<()>(0x10, &mut [()]).is_err());
    }

    #[test]
    fn kernel_results_map_to_codes_and_faults() {
        let mut mem = Memory::new(1 << 20);
        let run = run_with(&[], &[]);
        let call = |k: SimKernel, mem: &mut Memory| k.call(&run, 0, mem);
        assert_eq!(call(SimKernel::new(|_| Ok(())), &mut mem), Ok(0));
        assert_eq!(
            call(SimKernel::new(|_| Err(KernelError::Fail(7))), &mut mem),
            Ok(7)
        );
        assert_eq!(
            call(SimKernel::new(|_| Err(KernelError::Fail(0))), &mut mem),
            Err(())
        );
        assert_eq!(
            call(SimKernel::new(|k| k.write::<u8>(0x10, &[1])), &mut mem),
            Err(())
        );
        assert_eq!(
            call(SimKernel::new(|_| panic!("kernel bug")), &mut mem),
            Err(())
        );
        let timed = SimKernel::new(|_| Ok(())).time(|_| Duration::from_secs(5));
        assert_eq!(
            timed.ticks(&run),
            Ok(Some(abi::duration_to_ticks(Duration::from_secs(1)))),
            "capped at LatencyModel::MAX"
        );
        assert_eq!(SimKernel::new(|_| Ok(())).ticks(&run), Ok(None));
    }

    #[test]
    fn images_round_trip_and_ids_are_unique() {
        let (a, b) = (KernelCode::fresh(), KernelCode::fresh());
        assert_ne!(a.id(), b.id());
        assert_eq!(KernelCode::from_bytes(a.as_bytes()), Some(a));
        assert_eq!(KernelCode::from_bytes(&a.as_bytes()[..11]), None);
        assert_eq!(KernelCode::from_bytes(b"RCK1\0\0\0\0\0\0\0\0"), None);
        assert_eq!(Vec::from(a), a.as_bytes().to_vec());
    }
}
