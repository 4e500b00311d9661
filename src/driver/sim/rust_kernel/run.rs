//! The run an AICore worker computes ([`KernelRun`]), as a device model
//! hands it to a Rust kernel.

use crate::driver::abi::{ArgBlock, RunArgs, TensorArg};

/// The run an AICore worker computes: under [`RunclaimModel`](crate::driver::sim::RunclaimModel)
/// what the launch block carried — its header, and the tensors and scalars
/// of a version-2 block (none for version 1); under
/// [`A2a3Model`](crate::driver::sim::A2a3Model) the task payload the AICPU kernel
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
    /// block carries it), for a [`DeviceModel`](crate::driver::sim::DeviceModel) that
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

    /// Scalar `i` decoded as `T`
    /// ([`scalar_from_bits`](crate::driver::abi::scalar_from_bits)),
    /// `None` beyond the count.
    #[must_use]
    pub fn scalar_as<T: bytemuck::Pod>(&self, i: usize) -> Option<T> {
        self.scalar(i).map(crate::driver::abi::scalar_from_bits)
    }

    /// Scalar `i`, `None` beyond the count.
    #[must_use]
    pub fn scalar(&self, i: usize) -> Option<u64> {
        self.scalars.get(i).copied()
    }
}
