//! The reference runtime's a2a3 kernel ABI as a [`KernelAbi`]: the blocks
//! its kernels are launched with (`AicoreLaunchArgs` for the AICore, a
//! launch envelope around `KernelArgs` for the AICPU) and its
//! epoch-stamped result and timing records. See [`A2a3Abi`] for the
//! summary and every struct, offset by offset.
//!
//! The layout is defined once, in `layout.rs`, as field lists the offsets
//! are computed from; this adapter and the simulator's a2a3 device model
//! both read it. The records' host types are in `record.rs`.

pub(crate) mod layout;
mod record;

#[cfg(test)]
mod tests;

use static_assertions::const_assert_eq;

pub use self::record::{A2a3Result, A2a3Timing, A2a3Verdict};

use self::layout::{aicore_args, envelope, image, kernel_args, result, tensor, timing};
use super::adapter::{
    AbiError, AicpuBlock, BlockKind, BlockWriter, DevSpan, KernelAbi, Prep, RecordAt, RecordError,
    RegionSpec, RunIdentity, RunView, Shape, TensorView, Verdict,
};
use super::{TICKS_PER_SEC, WallRecord};

/// The reference runtime's a2a3 kernel ABI: the blocks and records of its
/// newer, epoch-stamped protocol, with runclaim's additions where the
/// reference leaves the words runclaim needs unspecified (the byte layout
/// of each struct: [below](#byte-layout)).
///
/// | region | bytes | before each run |
/// |---|---|---|
/// | 0 `image` | 64 + 64·`block_dim` + 33,856 | stamped (never written by the host) |
/// | 1 `result` | [`RESULT_SIZE`](Self::RESULT_SIZE) (280) | stamped |
/// | 2 `timing` | [`TIMING_SIZE`](Self::TIMING_SIZE) (80) | stamped |
///
/// | block | bytes | addresses it names |
/// |---|---|---|
/// | AICore | `AicoreLaunchArgs`, [`AICORE_ARGS_SIZE`](Self::AICORE_ARGS_SIZE) (40) | the image |
/// | AICPU | `KernelArgs` in a [`ENVELOPE_HEADER`](Self::ENVELOPE_HEADER)-byte (192) header, then T tensors of [`TENSOR_SIZE`](Self::TENSOR_SIZE) (128) and S `u64` scalars | image, timing, result, each tensor |
///
/// **Identity instead of clears.** The host never writes a region after
/// open (zeroed once then): the run's [`RunIdentity::epoch`] travels in
/// both blocks (`report_epoch`, `run_result_epoch`) and the device stamps
/// it into every word it means for this run, so a word a previous run left
/// behind carries that run's epoch and is ignored. The records read back
/// are the result region's 24-byte header ([`A2a3Result`]) and the timing
/// record ([`A2a3Timing`]); each is accepted only under this run's epoch.
/// Epoch 0 is refused: under it the reference accepts any worker's report.
///
/// A [`RunSpec`](crate::RunSpec) run travels as the two tensors the
/// device shows it as, in the slot's arena: its input (`In`) then its
/// output (`Out`), 4-byte elements, staged, and no scalars.
///
/// ```
/// use runclaim::driver::DevPtr;
/// use runclaim::driver::abi::{A2a3Abi, AicpuBlock, BlockBuf, DevSpan, KernelAbi, RunIdentity,
///                             RunView, Shape};
///
/// let abi = A2a3Abi;
/// let mut regions = Vec::new();
/// abi.regions(&Shape::new(2, 2), &mut regions)?;
/// let names: Vec<_> = regions.iter().map(|r| r.name).collect();
/// assert_eq!(names, ["image", "result", "timing"]);
///
/// // One slot's regions, at made-up device addresses.
/// let spans: Vec<_> = regions.iter().zip([0x10_000, 0x20_000, 0x30_000])
///     .map(|(r, a)| DevSpan::new(DevPtr::from_raw(a), r.bytes as u64)).collect();
/// let id = RunIdentity { run_id: 5, epoch: 5, slot: 1, block_dim: 2 };
/// let run = RunView::new(id, &spans, &[], &[42]);
/// let mut buf = BlockBuf::with_capacity(abi.max_block_bytes(), 8);
/// assert_eq!(abi.aicpu_block(&run, &mut buf.writer())?, AicpuBlock::Written);
/// assert_eq!(buf.args().bytes().len(), A2a3Abi::ENVELOPE_HEADER + 8); // no tensor, one scalar
/// assert_eq!(buf.args().fields().len(), 3); // image, timing, result
/// # Ok::<(), runclaim::driver::abi::AbiError>(())
/// ```
#[doc = include_str!("layout.md")]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct A2a3Abi;

impl A2a3Abi {
    /// Region index of the image.
    pub const IMAGE: usize = 0;
    /// Region index of the result region.
    pub const RESULT: usize = 1;
    /// Region index of the timing record.
    pub const TIMING: usize = 2;
    /// Most tensors a run carries.
    pub const MAX_TENSORS: usize = envelope::MAX_TENSORS;
    /// Most scalars a run carries.
    pub const MAX_SCALARS: usize = envelope::MAX_SCALARS;
    /// Bytes of the largest AICPU block (256 tensors, 128 scalars), the
    /// adapter's [`max_block_bytes`](KernelAbi::max_block_bytes).
    pub const MAX_BLOCK: usize = envelope::MAX_SIZE;
    /// Bytes of the AICore block (`AicoreLaunchArgs`).
    pub const AICORE_ARGS_SIZE: usize = aicore_args::SIZE;
    /// Bytes of `KernelArgs`.
    pub const KERNEL_ARGS_SIZE: usize = kernel_args::SIZE;
    /// Bytes of the AICPU block's header (where its entry payload starts).
    pub const ENVELOPE_HEADER: usize = envelope::HEADER;
    /// Bytes of one tensor descriptor.
    pub const TENSOR_SIZE: usize = tensor::SIZE;
    /// Bytes of the result region.
    pub const RESULT_SIZE: usize = result::SIZE;
    /// Bytes of the timing record.
    pub const TIMING_SIZE: usize = timing::SIZE;
}

/// `entry_args_offset`: the envelope header's size, as the `u32` it is
/// written as.
#[allow(
    clippy::cast_possible_truncation,
    reason = "192: the assertion below proves nothing is cut"
)]
const ENTRY_ARGS_OFFSET: u32 = envelope::HEADER as u32;
const_assert_eq!(ENTRY_ARGS_OFFSET as usize, envelope::HEADER);

/// `cycles` of a `hz` counter in runclaim's ticks ([`TICKS_PER_SEC`]),
/// rounded down, saturating (`hz` is not 0).
fn cycles_to_ticks(cycles: u64, hz: u64) -> u64 {
    let ticks = u128::from(cycles) * u128::from(TICKS_PER_SEC) / u128::from(hz.max(1));
    u64::try_from(ticks).unwrap_or(u64::MAX)
}

/// The run's epoch; 0 is refused (the reference accepts any worker's
/// report under it, and a zeroed region would read as published).
fn epoch(run: &RunView<'_>) -> Result<u64, AbiError> {
    match run.identity().epoch {
        0 => Err(AbiError::Unsupported {
            what: "epoch 0 (the a2a3 layout accepts any record under it)",
        }),
        e => Ok(e),
    }
}

/// Region `index` of the run, the whole span, refused when it is smaller
/// than the `need` bytes the device will touch (`None`: a size that does
/// not fit in `usize`).
fn region(run: &RunView<'_>, index: usize, need: Option<usize>) -> Result<DevSpan, AbiError> {
    let span = run.region(index).ok_or(AbiError::NoRegion { index })?;
    match need {
        Some(n) if span.len() >= n as u64 => Ok(span),
        _ => Err(AbiError::Unsupported {
            what: "a region is smaller than the a2a3 layout needs",
        }),
    }
}

/// Writes tensor `t`'s descriptor at `at` (zeroed bytes already grown).
fn write_tensor(w: &mut BlockWriter<'_>, at: usize, t: &TensorView) -> Result<(), AbiError> {
    let bytes = t.span.len();
    let elems = match t.elem_size {
        0 => 0,
        e => bytes / u64::from(e),
    };
    let [dir, ..] = t.dir.code().to_le_bytes();
    w.put_addr(at + tensor::BUFFER_ADDR, t.span)?;
    w.put_u64(at + tensor::BUFFER_SIZE, bytes)?;
    w.put_u32(at + tensor::NDIMS, 1)?;
    w.put_u32(at + tensor::DTYPE, t.elem_size)?;
    w.put_bytes(at + tensor::IS_CONTIGUOUS, &[1])?;
    w.put_bytes(at + tensor::ADDRESS_SPACE, &[tensor::ADDRESS_SPACE_DEVICE])?;
    w.put_bytes(at + tensor::DIRECTION, &[dir])?;
    w.put_u64(at + tensor::SHAPES, elems)?;
    w.put_u64(at + tensor::STAGED, u64::from(t.staged()))?;
    w.put_u64(at + tensor::EXTENT_ELEM_CACHE, elems)?;
    w.put_u64(at + tensor::STRIDES, 1)
}

impl KernelAbi for A2a3Abi {
    fn name(&self) -> &'static str {
        "a2a3"
    }

    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
        let image = image::bytes(shape.block_dim).ok_or(AbiError::Unsupported {
            what: "block_dim overflows the a2a3 image size",
        })?;
        out.extend([
            RegionSpec {
                name: "image",
                bytes: image,
                prep: Prep::Stamped,
            },
            RegionSpec {
                name: "result",
                bytes: result::SIZE,
                prep: Prep::Stamped,
            },
            RegionSpec {
                name: "timing",
                bytes: timing::SIZE,
                prep: Prep::Stamped,
            },
        ]);
        Ok(())
    }

    /// A [`ReplayArgs`](super::ReplayArgs) naming `args`, for either
    /// kernel (each reads its own block there). The form is runclaim's
    /// envelope: the simulator's [`A2a3Model`](crate::sim::A2a3Model)
    /// reads it; the reference runtime's kernels would have to be built
    /// to.
    fn replay_block(
        &self,
        kernel: BlockKind,
        args: DevSpan,
        w: &mut BlockWriter<'_>,
    ) -> Result<(), AbiError> {
        let _ = kernel;
        let at = w.grow(super::ReplayArgs::SIZE)?;
        let r = super::ReplayArgs {
            block: 0,
            len: args.len(),
        };
        w.put_bytes(at, &r.to_bytes())?;
        w.put_addr(at + 8, args)
    }

    fn max_block_bytes(&self) -> usize {
        Self::MAX_BLOCK
    }

    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
        let epoch = epoch(run)?;
        let image = region(run, Self::IMAGE, image::bytes(run.identity().block_dim))?;
        let at = w.grow(aicore_args::SIZE)?;
        w.put_addr(at + aicore_args::RUNTIME_ARGS, image)?;
        w.put_u64(at + aicore_args::REPORT_EPOCH, epoch)
    }

    fn aicpu_block(
        &self,
        run: &RunView<'_>,
        w: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError> {
        let id = run.identity();
        let epoch = epoch(run)?;
        let image = region(run, Self::IMAGE, image::bytes(id.block_dim))?;
        let result = region(run, Self::RESULT, Some(result::SIZE))?;
        let timing = region(run, Self::TIMING, Some(timing::SIZE))?;
        let (tensors, scalars) = (run.tensors(), run.scalars());
        if tensors.len() > Self::MAX_TENSORS {
            return Err(AbiError::Unsupported {
                what: "more than 256 tensors (A2a3Abi::MAX_TENSORS)",
            });
        }
        if scalars.len() > Self::MAX_SCALARS {
            return Err(AbiError::Unsupported {
                what: "more than 128 scalars (A2a3Abi::MAX_SCALARS)",
            });
        }
        let count = |n: usize| {
            u32::try_from(n).map_err(|_| AbiError::Unsupported {
                what: "a count that does not fit in u32",
            })
        };
        let (t, s) = (count(tensors.len())?, count(scalars.len())?);
        let size = envelope::size(tensors.len(), scalars.len()).ok_or(AbiError::Unsupported {
            what: "a block above the a2a3 maxima",
        })?;
        let at = w.grow(size)?;
        w.put_addr(at + kernel_args::RUNTIME_ARGS, image)?;
        w.put_addr(at + kernel_args::DEVICE_WALL_DATA_BASE, timing)?;
        w.put_addr(at + kernel_args::RUN_RESULT_DATA_BASE, result)?;
        w.put_u64(at + kernel_args::RUN_RESULT_EPOCH, epoch)?;
        w.put_u32(at + kernel_args::ENTRY_ARGS_OFFSET, ENTRY_ARGS_OFFSET)?;
        w.put_u32(at + kernel_args::ENTRY_TENSOR_COUNT, t)?;
        w.put_u32(at + kernel_args::ENTRY_SCALAR_COUNT, s)?;
        w.put_u32(
            at + kernel_args::ENTRY_ARGS_SOURCE,
            envelope::LAUNCH_ENVELOPE,
        )?;
        w.put_u32(at + envelope::BLOCK_DIM, id.block_dim)?;
        w.put_u32(at + envelope::SLOT, id.slot)?;
        let beyond = AbiError::Unsupported {
            what: "an argument beyond the a2a3 maxima",
        };
        for (i, t) in tensors.iter().enumerate() {
            write_tensor(w, at + envelope::tensor_at(i).ok_or(beyond)?, t)?;
        }
        for (j, &v) in scalars.iter().enumerate() {
            let scalar = envelope::scalar_at(tensors.len(), j).ok_or(beyond)?;
            w.put_u64(at + scalar, v)?;
        }
        Ok(AicpuBlock::Written)
    }

    /// The result region's 24-byte header: the decode reads nothing else
    /// (the payload is unused by runclaim's runs), and `published`, which
    /// proves the record is this run's, is in it.
    fn status_record(&self) -> RecordAt {
        RecordAt {
            region: Self::RESULT,
            offset: 0,
            bytes: result::HEADER,
        }
    }

    fn timing_record(&self) -> RecordAt {
        RecordAt {
            region: Self::TIMING,
            offset: 0,
            bytes: timing::SIZE,
        }
    }

    fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError> {
        let r = A2a3Result::from_bytes(bytes).ok_or(RecordError::Malformed {
            what: "an a2a3 result record is its 24-byte header or the 280-byte region",
        })?;
        if id.epoch == 0 || r.published != id.epoch {
            return Err(RecordError::Mismatch {
                expected: id.epoch,
                found: r.published,
            });
        }
        if r.payload_bytes as usize > result::SIZE - result::HEADER {
            return Err(RecordError::Malformed {
                what: "A2a3Result.payload_bytes is above the 256-byte payload",
            });
        }
        if r.code_source > result::CODE_SOURCE_SHUTDOWN_RC {
            return Err(RecordError::Malformed {
                what: "A2a3Result.code_source is not a DeviceRunCodeSource",
            });
        }
        match (A2a3Verdict::from_code(r.verdict), r.completion_code) {
            (Some(A2a3Verdict::Ok), 0) if r.code_source == result::CODE_SOURCE_NONE => {
                Ok(Verdict::Succeeded)
            }
            (Some(A2a3Verdict::Ok), 0) => Err(RecordError::Malformed {
                what: "A2a3Result.code_source: verdict Ok with a code source",
            }),
            (Some(A2a3Verdict::Ok), _) => Err(RecordError::Malformed {
                what: "verdict Ok with a non-zero completion code",
            }),
            (Some(A2a3Verdict::Error), 0) => Err(RecordError::Malformed {
                what: "verdict Error with completion code 0",
            }),
            (Some(A2a3Verdict::Error), code) => Ok(Verdict::Failed {
                code: code.cast_unsigned(),
            }),
            (Some(A2a3Verdict::None), _) => Err(RecordError::Missing),
            (None, _) => Err(RecordError::Malformed {
                what: "an unknown verdict",
            }),
        }
    }

    fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError> {
        let t = A2a3Timing::from_bytes(bytes).ok_or(RecordError::Malformed {
            what: "an a2a3 timing record is 80 bytes",
        })?;
        if id.epoch == 0 || t.epoch != id.epoch || t.slot != id.slot {
            return Err(RecordError::Mismatch {
                expected: id.epoch,
                found: t.epoch,
            });
        }
        if bytes[timing::RESERVED..timing::SIZE]
            .iter()
            .any(|&b| b != 0)
        {
            return Err(RecordError::Malformed {
                what: "A2a3Timing.reserved is not 0",
            });
        }
        if t.sys_cnt_hz == 0 {
            return Err(RecordError::Malformed {
                what: "a timing record with sys_cnt_hz 0",
            });
        }
        let ticks = |c| cycles_to_ticks(c, t.sys_cnt_hz);
        Ok(WallRecord {
            run_id: id.run_id,
            slot: t.slot,
            block_dim: t.block_dim,
            aicore_start: ticks(t.aicore_start_cycles),
            aicpu_start: ticks(t.aicpu_start_cycles),
            dispatched: ticks(t.dispatch_cycles),
            end: ticks(t.run_wall_end_cycles),
        })
    }
}
