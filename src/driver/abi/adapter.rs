//! The kernel ABI as an adapter: how a run's argument blocks are laid out,
//! which per-slot regions its kernels need, and how its records are read
//! back — the user's, behind [`KernelAbi`]. runclaim's own layout
//! ([`RunclaimAbi`](super::RunclaimAbi)) is one implementation, the
//! reference runtime's a2a3 layout ([`A2a3Abi`](super::A2a3Abi)) another.
//!
//! # Addresses are recorded, not guessed
//!
//! An adapter writes its blocks through a [`BlockWriter`]: integers with
//! [`put_u32`](BlockWriter::put_u32) / [`put_u64`](BlockWriter::put_u64),
//! device addresses only with [`put_addr`](BlockWriter::put_addr), which
//! takes a [`DevSpan`] and records it. A driver receives the bytes together
//! with every recorded address ([`LaunchArgs`]) and checks each range, and
//! that the block still holds it where it was written, before C. Every
//! address runclaim gives an adapter (its regions, its tensors) is a
//! [`DevSpan`], which offers no integer accessor: the way to put one in a
//! block is `put_addr`, and both built-in adapters record every address
//! they write. What this protects against is a *mistake* — a freed or
//! foreign region, a tensor past its buffer, an integer written over an
//! address — not an adapter that means harm: an adapter is trusted code,
//! like the kernels it describes. An address written as an integer (it
//! can be recovered, from a span's `Debug` or a recorded [`AddrField`])
//! is an integer to the driver, which cannot tell a hand-made number from
//! a count and does not try.
//!
//! ```
//! use runclaim::driver::DevPtr;
//! use runclaim::driver::abi::{BlockBuf, DevSpan};
//!
//! let mut buf = BlockBuf::with_capacity(64, 4);
//! let mut w = buf.writer();
//! let at = w.grow(16)?; // 16 zeroed bytes
//! w.put_u64(at, 7)?;
//! w.put_addr(at + 8, DevSpan::new(DevPtr::from_raw(0x1000), 32))?;
//! let args = buf.args();
//! assert_eq!(args.bytes().len(), 16);
//! assert_eq!(args.fields().len(), 1); // the driver checks 0x1000..0x1020
//! assert_eq!((args.fields()[0].at, args.fields()[0].addr.raw(), args.fields()[0].len), (8, 0x1000, 32));
//! assert!(args.consistent());
//! # Ok::<(), runclaim::driver::abi::AbiError>(())
//! ```

use super::WallRecord;
use super::workload::Dir;
use crate::driver::DevPtr;

/// A device range runclaim hands an adapter: where it starts and how many
/// bytes it spans. It offers no integer accessor: write it with
/// [`BlockWriter::put_addr`], which records it for the driver.
///
/// ```
/// use runclaim::driver::DevPtr;
/// use runclaim::driver::abi::DevSpan;
///
/// let s = DevSpan::new(DevPtr::from_raw(0x100), 64);
/// assert_eq!(s.len(), 64);
/// let tail = s.sub(48, 16).unwrap();
/// assert_eq!(tail.len(), 16);
/// assert!(s.sub(48, 17).is_none()); // past the end
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevSpan {
    ptr: DevPtr,
    len: u64,
}

impl DevSpan {
    /// The `len` bytes from `ptr`. Any span may be made: what a block names
    /// is checked by the driver, whoever made it.
    #[must_use]
    pub const fn new(ptr: DevPtr, len: u64) -> Self {
        DevSpan { ptr, len }
    }

    /// Bytes spanned.
    #[must_use]
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// `true` for an empty span.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `len` bytes `offset` bytes in, `None` unless they lie inside.
    #[must_use]
    pub fn sub(&self, offset: u64, len: u64) -> Option<DevSpan> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then(|| DevSpan {
            ptr: DevPtr::from_raw(self.ptr.raw().wrapping_add(offset)),
            len,
        })
    }

    pub(crate) const fn ptr(&self) -> DevPtr {
        self.ptr
    }
}

impl std::fmt::Debug for DevSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DevSpan({:#x}, {} bytes)", self.ptr.raw(), self.len)
    }
}

/// One device address an argument block names, as its writer recorded it:
/// the byte offset of the little-endian `u64` that holds it, and the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrField {
    /// Offset of the address inside the block.
    pub at: usize,
    /// The address.
    pub addr: DevPtr,
    /// Bytes from `addr` the kernels may touch.
    pub len: u64,
}

/// An argument block as a [`Driver`](crate::driver::Driver) receives it:
/// its bytes and every device address its writer recorded. Made only by a
/// [`BlockBuf`]; the driver checks every [`AddrField`] (its range, and that
/// the bytes still hold it: [`consistent`](LaunchArgs::consistent)) before
/// C.
#[derive(Debug, Clone, Copy)]
pub struct LaunchArgs<'a> {
    bytes: &'a [u8],
    fields: &'a [AddrField],
}

impl<'a> LaunchArgs<'a> {
    /// The block's bytes (what the kernel receives).
    #[must_use]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Every device address the block names.
    #[must_use]
    pub fn fields(&self) -> &'a [AddrField] {
        self.fields
    }

    /// `true` when every recorded address is still in the block where it
    /// was written (an integer written over an address afterwards makes it
    /// `false`: a driver refuses such a block).
    #[must_use]
    pub fn consistent(&self) -> bool {
        self.fields.iter().all(|f| {
            f.at.checked_add(8)
                .and_then(|end| self.bytes.get(f.at..end))
                .is_some_and(|b| b == f.addr.raw().to_le_bytes())
        })
    }
}

/// Host storage for one argument block and its recorded addresses,
/// reused run after run (no allocation per run below its capacities).
///
/// A block with no addresses can be made from bytes
/// ([`from_bytes`](BlockBuf::from_bytes)), to hand a driver a block its
/// device must refuse; it names nothing, so the driver checks nothing.
#[derive(Debug, Clone, Default)]
pub struct BlockBuf {
    bytes: Vec<u8>,
    capacity: usize,
    fields: Vec<AddrField>,
}

impl BlockBuf {
    /// Storage for blocks of up to `bytes` bytes naming up to `fields`
    /// addresses without allocating (more addresses allocate; more bytes
    /// are refused by the writer).
    #[must_use]
    pub fn with_capacity(bytes: usize, fields: usize) -> Self {
        BlockBuf {
            bytes: Vec::with_capacity(bytes),
            capacity: bytes,
            fields: Vec::with_capacity(fields),
        }
    }

    /// [`with_capacity`](Self::with_capacity), `None` when the host cannot
    /// reserve it (never an abort).
    pub(crate) fn try_with_capacity(bytes: usize, fields: usize) -> Option<Self> {
        let mut b = Vec::new();
        b.try_reserve_exact(bytes).ok()?;
        let mut f = Vec::new();
        f.try_reserve_exact(fields).ok()?;
        Some(BlockBuf {
            bytes: b,
            capacity: bytes,
            fields: f,
        })
    }

    /// A block of exactly `bytes`, naming no address.
    #[must_use]
    pub fn from_bytes(bytes: &[u8]) -> Self {
        BlockBuf {
            bytes: bytes.to_vec(),
            capacity: bytes.len(),
            fields: Vec::new(),
        }
    }

    /// A copy of a block with its recorded addresses (for a driver that
    /// holds a launch to submit later, or wraps another driver).
    #[must_use]
    pub fn copy_of(args: LaunchArgs<'_>) -> Self {
        BlockBuf {
            bytes: args.bytes.to_vec(),
            capacity: args.bytes.len(),
            fields: args.fields.to_vec(),
        }
    }

    /// Starts a new block (the previous one is cleared).
    pub fn writer(&mut self) -> BlockWriter<'_> {
        self.bytes.clear();
        self.fields.clear();
        BlockWriter { buf: self }
    }

    /// The block written last, for a driver.
    #[must_use]
    pub fn args(&self) -> LaunchArgs<'_> {
        LaunchArgs {
            bytes: &self.bytes,
            fields: &self.fields,
        }
    }

    /// The most bytes a block may have.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Writes one argument block: grow it by zeroed bytes, then put integers
/// and addresses at offsets inside it (little-endian). Every address put
/// is recorded for the driver. Nothing here panics: a write outside the
/// block or past the capacity is an [`AbiError`].
#[derive(Debug)]
pub struct BlockWriter<'b> {
    buf: &'b mut BlockBuf,
}

impl BlockWriter<'_> {
    /// Bytes written so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.buf.bytes.len()
    }

    /// `true` before the first [`grow`](Self::grow).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buf.bytes.is_empty()
    }

    /// Appends `n` zeroed bytes and returns the offset of the first.
    ///
    /// # Errors
    /// [`AbiError::BlockFull`] when the block would exceed its capacity.
    pub fn grow(&mut self, n: usize) -> Result<usize, AbiError> {
        let at = self.len();
        match at.checked_add(n) {
            Some(end) if end <= self.buf.capacity => {
                self.buf.bytes.resize(end, 0);
                Ok(at)
            }
            _ => Err(AbiError::BlockFull {
                needed: at.saturating_add(n),
                capacity: self.buf.capacity,
            }),
        }
    }

    /// Pads with zeroes to a multiple of `align` (a power of two; others
    /// are refused) and returns the new length.
    ///
    /// # Errors
    /// [`AbiError::BadAlign`], or [`AbiError::BlockFull`].
    pub fn align_to(&mut self, align: usize) -> Result<usize, AbiError> {
        if !align.is_power_of_two() {
            return Err(AbiError::BadAlign { align });
        }
        let pad = self.len().wrapping_neg() & (align - 1);
        self.grow(pad)?;
        Ok(self.len())
    }

    fn slot(&mut self, at: usize, len: usize) -> Result<&mut [u8], AbiError> {
        let block = self.buf.bytes.len();
        at.checked_add(len)
            .and_then(|end| self.buf.bytes.get_mut(at..end))
            .ok_or(AbiError::OutOfBlock { at, len, block })
    }

    /// The grown bytes `at..at + len`, to encode in place (crate-private:
    /// addresses written this way must be recorded with `record_addr`).
    pub(crate) fn bytes_mut(&mut self, at: usize, len: usize) -> Result<&mut [u8], AbiError> {
        self.slot(at, len)
    }

    /// The little-endian `u64` at `at`, if grown.
    pub(crate) fn word(&self, at: usize) -> Option<u64> {
        let b = self.buf.bytes.get(at..at.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// Puts bytes at `at`.
    ///
    /// # Errors
    /// [`AbiError::OutOfBlock`] unless `at..at + b.len()` was grown.
    pub fn put_bytes(&mut self, at: usize, b: &[u8]) -> Result<(), AbiError> {
        self.slot(at, b.len())?.copy_from_slice(b);
        Ok(())
    }

    /// Puts a `u32` at `at`.
    ///
    /// # Errors
    /// As [`put_bytes`](Self::put_bytes).
    pub fn put_u32(&mut self, at: usize, v: u32) -> Result<(), AbiError> {
        self.put_bytes(at, &v.to_le_bytes())
    }

    /// Puts an `i32` at `at`.
    ///
    /// # Errors
    /// As [`put_bytes`](Self::put_bytes).
    pub fn put_i32(&mut self, at: usize, v: i32) -> Result<(), AbiError> {
        self.put_bytes(at, &v.to_le_bytes())
    }

    /// Puts a `u64` at `at`.
    ///
    /// # Errors
    /// As [`put_bytes`](Self::put_bytes).
    pub fn put_u64(&mut self, at: usize, v: u64) -> Result<(), AbiError> {
        self.put_bytes(at, &v.to_le_bytes())
    }

    /// Records `span` as the address the block already holds at `at` (the
    /// caller wrote its bytes: a block encoded whole). A wrong record is
    /// refused by the driver ([`LaunchArgs::consistent`]).
    pub(crate) fn record_addr(&mut self, at: usize, span: DevSpan) {
        debug_assert!(
            self.buf.bytes.get(at..at + 8) == Some(&span.ptr.raw().to_le_bytes()[..]),
            "record_addr: the block does not hold the address"
        );
        self.buf.fields.push(AddrField {
            at,
            addr: span.ptr,
            len: span.len,
        });
    }

    /// Records `fields` as addresses the block already holds (see
    /// [`record_addr`](Self::record_addr)).
    pub(crate) fn record_addrs(&mut self, fields: &[AddrField]) {
        debug_assert!(
            fields.iter().all(
                |f| self.buf.bytes.get(f.at..f.at + 8) == Some(&f.addr.raw().to_le_bytes()[..])
            ),
            "record_addrs: the block does not hold the addresses"
        );
        self.buf.fields.extend_from_slice(fields);
    }

    /// Puts `span`'s address as a `u64` at `at` and records it: the driver
    /// checks the whole span before the kernel can touch it.
    ///
    /// # Errors
    /// As [`put_bytes`](Self::put_bytes).
    pub fn put_addr(&mut self, at: usize, span: DevSpan) -> Result<(), AbiError> {
        self.put_u64(at, span.ptr.raw())?;
        self.buf.fields.push(AddrField {
            at,
            addr: span.ptr,
            len: span.len,
        });
        Ok(())
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_refuses_what_is_outside_the_block() {
        let mut buf = BlockBuf::with_capacity(16, 1);
        let mut w = buf.writer();
        assert_eq!(
            w.put_u32(0, 1),
            Err(AbiError::OutOfBlock {
                at: 0,
                len: 4,
                block: 0
            })
        );
        assert_eq!(w.grow(12), Ok(0));
        assert!(w.put_u64(8, 1).is_err());
        assert!(w.put_u64(usize::MAX, 1).is_err());
        assert_eq!(w.align_to(8), Ok(16));
        assert_eq!(
            w.grow(1),
            Err(AbiError::BlockFull {
                needed: 17,
                capacity: 16
            })
        );
        assert_eq!(w.grow(usize::MAX).map_err(|_| ()), Err(()));
        assert_eq!(w.align_to(3), Err(AbiError::BadAlign { align: 3 }));
        assert!(buf.args().fields().is_empty());
    }

    #[test]
    fn an_integer_written_over_an_address_makes_the_block_inconsistent() {
        let mut buf = BlockBuf::with_capacity(16, 1);
        let mut w = buf.writer();
        w.grow(16).unwrap();
        w.put_addr(8, DevSpan::new(DevPtr::from_raw(0x40), 8))
            .unwrap();
        assert!(buf.args().consistent());
        let mut w = buf.writer(); // a new block forgets the old addresses
        w.grow(16).unwrap();
        assert!(buf.args().fields().is_empty());
        let mut w = buf.writer();
        w.grow(16).unwrap();
        w.put_addr(8, DevSpan::new(DevPtr::from_raw(0x40), 8))
            .unwrap();
        w.put_u64(8, 0x80).unwrap(); // the negative control
        assert!(!buf.args().consistent());
    }
}
