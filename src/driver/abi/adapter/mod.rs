//! The kernel ABI as an adapter: how a run's argument blocks are laid out,
//! which per-slot regions its kernels need, and how its records are read
//! back — the user's, behind [`KernelAbi`]. runclaim's own layout
//! ([`RunclaimAbi`](super::RunclaimAbi)) is one implementation, the
//! reference runtime's a2a3 layout ([`A2a3Abi`](super::A2a3Abi)) another.
//!
//! An adapter writes its blocks through a [`BlockWriter`] (the block
//! module: addresses are recorded, not guessed); what it sees of a run
//! is a [`RunView`].

mod block;

pub use self::block::{AddrField, BlockBuf, BlockWriter, DevSpan, LaunchArgs};

use super::WallRecord;
use super::workload::Dir;

/// Who a run is, as its records must prove: its id and the epoch a
/// device-stamped record publishes under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RunIdentity {
    /// The run's id (unique per device, never 0).
    pub run_id: u64,
    /// The epoch the run publishes under: unique per device, never 0,
    /// increasing (today equal to the run id).
    pub epoch: u64,
    /// The slot the run occupies.
    pub slot: u32,
    /// AICore workers of the run.
    pub block_dim: u32,
}

/// Where a tensor's bytes live on the device, as runclaim placed them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Home {
    /// A host tensor staged through the slot's staging region: copied in
    /// at prepare (when the kernel reads it), back at finalize (when it
    /// writes it).
    Staging,
    /// A [`RunSpec`](crate::RunSpec) run's input or output, in the slot's
    /// arena (a chained input: the arena output of the run launched just
    /// before); copied as a staged tensor is. Its elements are `u32`.
    Arena,
    /// A device buffer, passed by address: never copied.
    Buffer,
}

/// One tensor argument, resolved: where its bytes are on the device, its
/// element size, direction, and where runclaim placed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorView {
    /// Its bytes on the device.
    pub span: DevSpan,
    /// Bytes per element.
    pub elem_size: u32,
    /// What the kernel does with it.
    pub dir: Dir,
    /// Where its bytes live.
    pub home: Home,
}

impl TensorView {
    /// `true` when the host copies the tensor (staged, or in the arena);
    /// `false` for a device buffer.
    ///
    /// ```
    /// use runclaim::driver::DevPtr;
    /// use runclaim::driver::abi::{DevSpan, Dir, Home, TensorView};
    ///
    /// let t = TensorView { span: DevSpan::new(DevPtr::from_raw(0x100), 8), elem_size: 4, dir: Dir::In, home: Home::Buffer };
    /// assert!(!t.staged());
    /// assert!(TensorView { home: Home::Arena, ..t }.staged());
    /// ```
    #[must_use]
    pub fn staged(&self) -> bool {
        self.home != Home::Buffer
    }
}

/// Everything an adapter may put in a run's blocks: its identity, this
/// slot's regions (in [`KernelAbi::regions`] order), its tensors and
/// scalars. A [`RunSpec`](crate::RunSpec) run shows as two tensors in the
/// slot's arena ([`Home::Arena`]): its input (`In`), then its output
/// (`Out`), `u32` elements, no scalars.
#[derive(Debug, Clone, Copy)]
pub struct RunView<'a> {
    identity: RunIdentity,
    regions: &'a [DevSpan],
    tensors: &'a [TensorView],
    scalars: &'a [u64],
}

impl<'a> RunView<'a> {
    /// A view (for adapters' own tests; the device makes the real ones).
    #[must_use]
    pub fn new(
        identity: RunIdentity,
        regions: &'a [DevSpan],
        tensors: &'a [TensorView],
        scalars: &'a [u64],
    ) -> Self {
        RunView {
            identity,
            regions,
            tensors,
            scalars,
        }
    }

    /// Who the run is.
    #[must_use]
    pub fn identity(&self) -> &RunIdentity {
        &self.identity
    }

    /// This slot's region `i` (declaration order), `None` beyond them.
    #[must_use]
    pub fn region(&self, i: usize) -> Option<DevSpan> {
        self.regions.get(i).copied()
    }

    /// The tensors, in argument order.
    #[must_use]
    pub fn tensors(&self) -> &'a [TensorView] {
        self.tensors
    }

    /// The scalars, in argument order.
    #[must_use]
    pub fn scalars(&self) -> &'a [u64] {
        self.scalars
    }
}

/// What the host does with a region before each run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prep {
    /// Zeroed by the host before each run (one memset).
    Zeroed,
    /// Written by the host before each run with what
    /// [`KernelAbi::arm`] puts in it (one H2D copy).
    Armed,
    /// Never touched by the host after open (zeroed once then): the
    /// device stamps it, and its records prove whose they are by epoch.
    Stamped,
}

/// One per-slot region a kernel pair needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RegionSpec {
    /// Its name, for errors and docs.
    pub name: &'static str,
    /// Its size (at least 1).
    pub bytes: usize,
    /// What the host does with it before each run.
    pub prep: Prep,
}

/// Where a record lives: bytes `offset..offset + bytes` of region `region`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordAt {
    /// The region (declaration order).
    pub region: usize,
    /// Offset inside it.
    pub offset: usize,
    /// Bytes read back.
    pub bytes: usize,
}

/// What a status record says of a run that proved it is this run's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The run succeeded.
    Succeeded,
    /// The run failed with a known, non-zero code.
    Failed {
        /// The run's error code.
        code: u32,
    },
}

/// Why a record read back is not this run's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RecordError {
    /// The record carries another run's identity (a previous run's, left
    /// in a region the host does not clear).
    #[error("the record is run {found}'s, not run {expected}'s")]
    Mismatch {
        /// The identity this run expected.
        expected: u64,
        /// The identity the record carries.
        found: u64,
    },
    /// The record is this run's, but not complete (the run never wrote it).
    #[error("the record was never completed")]
    Missing,
    /// The record does not decode.
    #[error("the record is malformed: {what}")]
    Malformed {
        /// What is wrong.
        what: &'static str,
    },
}

/// Why an adapter could not build a block or describe its regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum AbiError {
    /// The block would exceed its capacity ([`KernelAbi::max_block_bytes`]).
    #[error("the argument block needs {needed} bytes, its capacity is {capacity}")]
    BlockFull {
        /// Bytes the block would need.
        needed: usize,
        /// Its capacity.
        capacity: usize,
    },
    /// A write outside the bytes grown so far.
    #[error("a write of {len} bytes at offset {at} is outside the {block}-byte block")]
    OutOfBlock {
        /// Where.
        at: usize,
        /// How many bytes.
        len: usize,
        /// The block's length.
        block: usize,
    },
    /// An alignment that is not a power of two.
    #[error("alignment {align} is not a power of two")]
    BadAlign {
        /// The alignment asked for.
        align: usize,
    },
    /// A region the adapter needs is missing from the view.
    #[error("region {index} is not one of this run's regions")]
    NoRegion {
        /// The region index.
        index: usize,
    },
    /// The adapter cannot carry this run.
    #[error("the adapter cannot carry this run: {what}")]
    Unsupported {
        /// What it cannot carry.
        what: &'static str,
    },
}

/// Which kernel a block is for ([`KernelAbi::replay_block`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockKind {
    /// The AICore kernel's.
    Aicore,
    /// The AICPU kernel's.
    Aicpu,
}

/// What the AICPU kernel receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AicpuBlock {
    /// The AICore block, unchanged (built once).
    Same,
    /// The block [`KernelAbi::aicpu_block`] wrote.
    Written,
}

/// The shape of a device, as an adapter sizes its regions for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Shape {
    /// AICore workers per run.
    pub block_dim: u32,
    /// Slots (`DEPTH`).
    pub depth: usize,
}

impl Shape {
    /// A shape (for adapters' own tests).
    #[must_use]
    pub const fn new(block_dim: u32, depth: usize) -> Self {
        Shape { block_dim, depth }
    }
}

/// A kernel pair's ABI: the argument blocks, the per-slot regions, the
/// records. Implement it for your kernels; runclaim calls it from the
/// device under its own rules (it decides *when* regions are written and
/// records are read; the adapter decides *what* and *where*).
///
/// Called on the launch path: no method should allocate or block, and none
/// may call a device (runclaim may hold the device's lock: such a call
/// panics there). Every method returns its failures; a panic is caught —
/// at open the device is refused, at run time the run fails.
///
/// An adapter over runclaim's own layout that also counts the verdicts it
/// decodes (a user adapter speaks its own layout, and on the simulator
/// comes with a [`DeviceModel`](crate::sim::DeviceModel) for it):
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use runclaim::driver::abi::*;
/// use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// #[derive(Default)]
/// struct Counted(AtomicU64);
///
/// impl KernelAbi for Counted {
///     fn name(&self) -> &'static str { "counted" }
///     fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
///         RunclaimAbi.regions(shape, out) // handshake, wall, status
///     }
///     fn max_block_bytes(&self) -> usize { RunclaimAbi.max_block_bytes() }
///     fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
///         RunclaimAbi.aicore_block(run, w) // addresses through put_addr
///     }
///     fn aicpu_block(&self, _: &RunView<'_>, _: &mut BlockWriter<'_>) -> Result<AicpuBlock, AbiError> {
///         Ok(AicpuBlock::Same) // both kernels get the AICore block
///     }
///     fn arm(&self, region: usize, id: &RunIdentity, bytes: &mut [u8]) -> Result<(), AbiError> {
///         RunclaimAbi.arm(region, id, bytes)
///     }
///     fn status_record(&self) -> RecordAt { RunclaimAbi.status_record() }
///     fn timing_record(&self) -> RecordAt { RunclaimAbi.timing_record() }
///     fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError> {
///         let v = RunclaimAbi.decode_status(id, bytes)?; // proves it is `id`'s
///         self.0.fetch_add(1, Ordering::Relaxed);
///         Ok(v)
///     }
///     fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError> {
///         RunclaimAbi.decode_timing(id, bytes)
///     }
/// }
///
/// let sim = SimDriver::stepped(SimConfig::default()); // its device speaks runclaim's protocol
/// let mut device = Device::<_, 2>::open(sim, DeviceConfig::default().kernel_abi(Counted::default()))?;
/// let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let mut out = Outputs::<0>::new(1);
/// let spec = RunSpec::new(runner.code("inc")?, Input::Host(&[41]));
/// runner.run_serial(runner.take_slot::<0>()?, spec, &mut out)?;
/// assert_eq!(out.values(), &[42]);
/// # Ok::<(), runclaim::Error>(())
/// ```
pub trait KernelAbi: Send + Sync + 'static {
    /// A short name for errors and docs.
    fn name(&self) -> &'static str;

    /// The per-slot regions (one allocation each per slot, made at open).
    ///
    /// # Errors
    /// [`AbiError::Unsupported`] for a shape the adapter cannot serve.
    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError>;

    /// The largest block either method writes (the capacity of each
    /// slot's block buffers).
    fn max_block_bytes(&self) -> usize;

    /// Writes the AICore kernel's block.
    ///
    /// # Errors
    /// What the writer returns, or [`AbiError::Unsupported`].
    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError>;

    /// Writes the AICPU kernel's block, or says it is the AICore's.
    ///
    /// # Errors
    /// As [`aicore_block`](Self::aicore_block).
    fn aicpu_block(
        &self,
        run: &RunView<'_>,
        w: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError>;

    /// Fills an [`Armed`](Prep::Armed) region's host image for a run
    /// (`bytes` is the region's size, zeroed).
    ///
    /// # Errors
    /// [`AbiError::Unsupported`] (the default: an adapter without armed
    /// regions).
    fn arm(&self, region: usize, id: &RunIdentity, bytes: &mut [u8]) -> Result<(), AbiError> {
        let _ = (region, id, bytes);
        Err(AbiError::Unsupported {
            what: "no region of this adapter is armed",
        })
    }

    /// Writes the **replayable form** of one kernel's block: a block that
    /// carries no per-run value, only `args` — the device span where the
    /// host writes, before each replay, the block
    /// [`aicore_block`](Self::aicore_block) (or, for
    /// [`BlockKind::Aicpu`] when it wrote one,
    /// [`aicpu_block`](Self::aicpu_block)) wrote for that run. A captured
    /// run's blocks are frozen at capture (the runtime copies both), so
    /// this is the block a captured run is captured with; the device must
    /// read the run's block from `args` when the kernel runs.
    ///
    /// # Errors
    /// [`AbiError::Unsupported`] (the default: this adapter's runs launch,
    /// and cannot be replayed).
    fn replay_block(
        &self,
        kernel: BlockKind,
        args: DevSpan,
        w: &mut BlockWriter<'_>,
    ) -> Result<(), AbiError> {
        let _ = (kernel, args, w);
        Err(AbiError::Unsupported {
            what: "this kernel ABI has no replayable form",
        })
    }

    /// Where the status (result) record lives.
    fn status_record(&self) -> RecordAt;

    /// Where the timing record lives.
    fn timing_record(&self) -> RecordAt;

    /// Decodes the status record read back after the run's fence.
    ///
    /// # Errors
    /// A [`RecordError`] unless the record proves it is `id`'s and
    /// complete.
    fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError>;

    /// Decodes the timing record into a [`WallRecord`] in device ticks
    /// ([`TICKS_PER_SEC`](super::TICKS_PER_SEC)).
    ///
    /// # Errors
    /// As [`decode_status`](Self::decode_status).
    fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError>;
}

/// A shared handle to a [`KernelAbi`], as a
/// [`DeviceConfig`](crate::DeviceConfig) holds it: cheap to clone, and two
/// handles are equal when their adapters' [`name`](KernelAbi::name)s are
/// (asked once, here) — so give your adapter its own name, not a built-in's
/// (nothing in runclaim acts on the equality; a `DeviceConfig`'s does).
///
/// ```
/// use runclaim::driver::abi::{A2a3Abi, KernelAbiRef, RunclaimAbi};
///
/// let a = KernelAbiRef::new(A2a3Abi);
/// assert_eq!(a.name(), "a2a3");
/// assert_eq!(KernelAbiRef::default(), KernelAbiRef::new(RunclaimAbi)); // the default
/// assert_ne!(a, KernelAbiRef::default());
/// ```
#[derive(Clone)]
pub struct KernelAbiRef(std::sync::Arc<dyn KernelAbi>, Builtin, &'static str);

/// Which built-in adapter a [`KernelAbiRef`] holds, if any: the device
/// calls a built-in directly (no virtual call, inlined), a user's adapter
/// through the trait object. The same code either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    Runclaim,
    User,
}

impl KernelAbiRef {
    /// A handle to `abi`.
    pub fn new<A: KernelAbi>(abi: A) -> Self {
        let builtin = if std::any::TypeId::of::<A>() == std::any::TypeId::of::<super::RunclaimAbi>()
        {
            Builtin::Runclaim
        } else {
            Builtin::User
        };
        let name = abi.name();
        KernelAbiRef(std::sync::Arc::new(abi), builtin, name)
    }

    /// Which built-in this is (crate-private: the device's fast path).
    pub(crate) fn builtin(&self) -> Builtin {
        self.1
    }

    /// The adapter's name.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.2
    }

    /// The adapter.
    #[must_use]
    pub fn get(&self) -> &dyn KernelAbi {
        &*self.0
    }
}

impl Default for KernelAbiRef {
    /// runclaim's own layout ([`RunclaimAbi`](super::RunclaimAbi)).
    fn default() -> Self {
        KernelAbiRef::new(super::RunclaimAbi)
    }
}

impl PartialEq for KernelAbiRef {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for KernelAbiRef {}

impl std::fmt::Debug for KernelAbiRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KernelAbiRef({:?})", self.name())
    }
}
