//! What a Rust kernel works with ([`KernelCtx`]): its worker, its run and
//! bounds-checked, typed access to device memory.

use std::fmt;
use std::ops::Range;

use bytemuck::Pod;

use super::{KernelError, KernelRun};
use crate::driver::abi::{self, RunArgs, TensorArg};
use crate::driver::sim::memory::Memory;

/// What a [`SimKernel`](super::SimKernel) works with: its worker, the run ([`KernelRun`],
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

impl<'a> KernelCtx<'a> {
    /// The context of worker `worker` of `run`.
    pub(super) fn new(run: &'a KernelRun, worker: u32, mem: &'a mut Memory) -> Self {
        KernelCtx { run, worker, mem }
    }

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

    /// Scalar `i` as the `T` the host gave it
    /// ([`Workload::scalar`](crate::Workload::scalar)), `None` beyond the
    /// count.
    #[must_use]
    pub fn scalar_as<T: bytemuck::Pod>(&self, i: usize) -> Option<T> {
        self.run.scalar_as(i)
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
