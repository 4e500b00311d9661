//! The reference runtime's a2a3 device protocol ([`A2a3Model`]): epoch
//! identity instead of host clears.
//!
//! Every offset is the a2a3 adapter's, read from the one a2a3 layout the
//! adapter writes with (`driver::abi::a2a3::layout`); the records are
//! encoded by the adapter's own record types ([`A2a3Result`],
//! [`A2a3Timing`]). What is this file's: the protocol's steps and what the
//! device refuses.

use super::replay::replayed;
use super::{AicoreLaunch, AicpuLaunch, DeviceMemory, DeviceModel, ModelError, RunEnd, Task};
use crate::driver::abi::a2a3_layout::{
    aicore_args, envelope, handshake, image, kernel_args, payload, result, tensor, timing,
};
use crate::driver::abi::{self, A2a3Result, A2a3Timing, DecodeError, Dir, TensorArg};
use crate::driver::sim::rust_kernel::KernelRun;

// The identity word leads both records: the rest of each is one write,
// then the identity.
const _: () = assert!(timing::EPOCH == 0 && result::PUBLISHED == 0);

/// The reference runtime's a2a3 device protocol: the layout of runclaim's
/// a2a3 adapter ([`A2a3Abi`](crate::driver::abi::A2a3Abi), whose docs give
/// every struct offset by offset), with the run's **epoch** as its
/// identity, so the host never clears anything between runs.
///
/// Three per-slot regions, zeroed once (when the slot is opened) and
/// never written by the host again: the **image** (a 64-byte header,
/// `block_dim` 64-byte handshake records, the task payload area), the
/// **result** region (`DeviceRunResultRegion`, 280 B) and the **timing**
/// record (80 B). Every word a run writes carries its epoch or is only
/// believed next to one that does: a word a previous run left behind
/// carries the previous epoch and is ignored.
///
/// # Launch blocks
///
/// The AICore block is `AicoreLaunchArgs` (40 bytes); the AICPU block the
/// launch envelope, `KernelArgs` in a 192-byte header, then T tensor
/// descriptors and S scalars (`192 + 128·T + 8·S` bytes, T ≤ 256, S ≤
/// 128). A block that is not exactly what the adapter writes (a field the
/// simulator does not model set, such as profiling, FFTS, registers or
/// swimlanes; a reserved or padding byte that is not 0; a count that
/// disagrees with the length; an epoch of 0; a tensor descriptor of more
/// than one dimension, host memory, an unknown direction or staged flag,
/// or a shape that is not its size over its element size) is refused at
/// launch
/// ([`DriverErrorKind::InvalidArgument`](crate::driver::DriverErrorKind::InvalidArgument)),
/// and every range the blocks name is checked: the image
/// ([`image_bytes`](A2a3Model::image_bytes)), the result and timing
/// regions, every tensor.
///
/// # The protocol
///
/// - **AICore worker** `w` (epoch `E` from its block): the kernel's start
///   stamps the image's `core_start`, then its `core_start_epoch` = `E`;
///   the worker writes its record's `core_type` = 0 (AIC),
///   `physical_core_id` = `w`, `report_epoch` = `E`, then `aicore_done` =
///   `w + 1`; waits until `task_epoch` == `E`; reads the payload at `task`
///   — inside the image, carrying `E`, its reserved bytes 0 and its
///   descriptors what the envelope's had to be, else the kernel faults —
///   and takes its tensors and scalars as its run; computes; writes `error`,
///   then `done_epoch` = `E`; waits until `release_epoch` == `E`.
/// - **AICPU kernel** (`E` = `run_result_epoch`): at its start, copies the
///   envelope's tensors and scalars into the payload area, then its header
///   (epoch `E`, the counts, the slot); waits until every report is
///   accepted — `aicore_done != 0 && report_epoch == E`, the reference's
///   `aicore_report_accepted`; dispatches each worker (`task`, then
///   `task_epoch` = `E`); waits until every `done_epoch` == `E`, the run's
///   code being the first non-zero `error`; writes the timing record, then
///   the result region; releases every worker (`release_epoch` = `E`).
///
/// # Records
///
/// - **Timing**: the run's wall from the earlier kernel start to the end,
///   in the device's ticks (`sys_cnt_hz` 50,000,000, `device_id` 0), the
///   slot, both kernels' starts, the dispatch, `block_dim` — and the epoch
///   written **last**.
/// - **Result**: `payload_bytes` 0, `verdict` 1 Ok (code 0, source 0) or 2
///   Error (the run's code, source 1 = header), the payload untouched —
///   and `published` = `E` written **last**.
///
/// ```
/// use runclaim::sim::{A2a3Model, DeviceModel, SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default().device_model(A2a3Model));
/// assert_eq!(sim.config().device_model.name(), A2a3Model.name());
/// assert_eq!(A2a3Model::image_bytes(4), 64 + 4 * 64 + 33_856);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct A2a3Model;

impl A2a3Model {
    /// Bytes of a slot's image region for `block_dim` workers: the header,
    /// the handshake records and the largest task payload (saturating).
    ///
    /// ```
    /// use runclaim::sim::A2a3Model;
    ///
    /// assert_eq!(A2a3Model::image_bytes(1), 33_984);
    /// ```
    #[must_use]
    pub const fn image_bytes(block_dim: u32) -> u64 {
        image::bytes_u64(block_dim)
    }
}

fn refused(what: &'static str) -> ModelError {
    ModelError::Refused { what }
}

/// An offset, in device-address arithmetic.
const fn off(at: usize) -> u64 {
    at as u64
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// `true` when bytes `from..to` of `b` are all 0.
fn zero(b: &[u8], from: usize, to: usize) -> bool {
    b[from..to].iter().all(|&x| x == 0)
}

/// Worker `w`'s record word `field` (a [`handshake`] offset); saturating:
/// a launch a user's model made may name any base and worker, and an
/// address past the top is out of bounds, not an overflow.
fn record(image: u64, w: u32, field: usize) -> u64 {
    image
        .saturating_add(off(image::HEADER))
        .saturating_add(off(handshake::SIZE) * u64::from(w))
        .saturating_add(off(field))
}

/// `base + at`, saturating (as [`record`]).
fn at(base: u64, at: usize) -> u64 {
    base.saturating_add(off(at))
}

/// The task payload of a run with `block_dim` workers.
fn payload_at(image: u64, block_dim: u32) -> u64 {
    record(image, block_dim, 0)
}

/// One tensor descriptor of the envelope (or of a task payload),
/// validated (structure only): refused naming the first field that is not
/// what the adapter writes.
fn tensor(d: &[u8]) -> Result<TensorArg, ModelError> {
    let t = decode_tensor(d).map_err(|e| refused(e.field))?;
    let elements = t.elements();
    let checks = [
        (
            u64_at(d, tensor::OWNER_TASK_ID) == 0,
            "ChipTensor.owner_task_id",
        ),
        (
            u64_at(d, tensor::START_OFFSET) == 0,
            "ChipTensor.start_offset",
        ),
        (u32_at(d, tensor::VERSION) == 0, "ChipTensor.version"),
        (u32_at(d, tensor::NDIMS) == 1, "ChipTensor.ndims"),
        (d[tensor::MANUAL_DEP] == 0, "ChipTensor.manual_dep"),
        (d[tensor::IS_CONTIGUOUS] == 1, "ChipTensor.is_contiguous"),
        (
            d[tensor::ADDRESS_SPACE] == tensor::ADDRESS_SPACE_DEVICE,
            "ChipTensor.address_space",
        ),
        (u64_at(d, tensor::SHAPES) == elements, "ChipTensor.shapes"),
        (
            u64_at(d, tensor::EXTENT_ELEM_CACHE) == elements,
            "ChipTensor.extent_elem_cache",
        ),
        (u64_at(d, tensor::STRIDES) == 1, "ChipTensor.strides"),
        (
            zero(d, tensor::PADDING, tensor::SIZE),
            "ChipTensor: padding",
        ),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        Some(&(_, field)) => Err(refused(field)),
        None => Ok(t),
    }
}

/// The fields a kernel sees of one descriptor; refused, naming the field,
/// for a length that is not a descriptor's, or a direction or staged flag
/// that is not one.
pub(crate) fn decode_tensor(d: &[u8]) -> Result<TensorArg, DecodeError> {
    if d.len() != tensor::SIZE {
        return Err(DecodeError::new("ChipTensor: descriptor length", d.len()));
    }
    let staged = match u64_at(d, tensor::STAGED) {
        0 => false,
        1 => true,
        _ => return Err(DecodeError::new("ChipTensor.staged", tensor::STAGED)),
    };
    let dir = Dir::from_code(u32::from(d[tensor::DIRECTION]))
        .ok_or(DecodeError::new("ChipTensor.direction", tensor::DIRECTION))?;
    Ok(TensorArg {
        addr: u64_at(d, tensor::BUFFER_ADDR),
        bytes: u64_at(d, tensor::BUFFER_SIZE),
        elem_size: u32_at(d, tensor::DTYPE),
        dir,
        staged,
    })
}

/// The envelope's header, refused unless every word is what the adapter
/// writes; its counts, when it is.
fn envelope_counts(block: &[u8]) -> Result<(usize, usize), ModelError> {
    if block.len() < envelope::HEADER {
        return Err(refused(
            "an a2a3 AICPU block is a launch envelope of at least 192 bytes",
        ));
    }
    let (t, s) = (
        u32_at(block, kernel_args::ENTRY_TENSOR_COUNT) as usize,
        u32_at(block, kernel_args::ENTRY_SCALAR_COUNT) as usize,
    );
    let Some(size) = envelope::size(t, s) else {
        return Err(refused(
            "a2a3 AICPU block: more than 256 tensors or 128 scalars",
        ));
    };
    if block.len() != size {
        return Err(refused(
            "a2a3 AICPU block: its length is not 192 + 128 per tensor + 8 per scalar",
        ));
    }
    let checks = [
        (
            zero(block, kernel_args::REGS, kernel_args::DEVICE_WALL_DATA_BASE),
            "KernelArgs: a field the simulator does not model \
             (registers, FFTS, dumps, swimlanes, PMU) is set",
        ),
        (
            u32_at(block, kernel_args::ENABLE_PROFILING_FLAG) == 0,
            "KernelArgs.enable_profiling_flag",
        ),
        (
            zero(block, kernel_args::PADDING, kernel_args::SIZE),
            "KernelArgs: padding",
        ),
        (
            zero(block, envelope::RESERVED, envelope::HEADER),
            "launch envelope: reserved",
        ),
        (
            u32_at(block, kernel_args::ENTRY_ARGS_OFFSET) as usize == envelope::HEADER,
            "KernelArgs.entry_args_offset (the entry arguments are in the envelope at 192)",
        ),
        (
            u32_at(block, kernel_args::ENTRY_ARGS_SOURCE) == envelope::LAUNCH_ENVELOPE,
            "KernelArgs.entry_args_source (the entry arguments are in the envelope)",
        ),
    ];
    if let Some(&(_, field)) = checks.iter().find(|(ok, _)| !ok) {
        return Err(refused(field));
    }
    Ok((t, s))
}

impl DeviceModel for A2a3Model {
    fn name(&self) -> &'static str {
        "a2a3"
    }

    fn decode_aicore(
        &self,
        block: &[u8],
        block_dim: u32,
        _max_block_dim: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicoreLaunch, ModelError> {
        let mut buf = Vec::new();
        let block = replayed(block, mem, &mut buf)?;
        if block.len() != aicore_args::SIZE {
            return Err(refused(
                "an a2a3 AICore block is AicoreLaunchArgs, 40 bytes",
            ));
        }
        if !zero(
            block,
            aicore_args::ENABLE_PROFILING_FLAG,
            aicore_args::REPORT_EPOCH,
        ) {
            return Err(refused(
                "a2a3 AICore block: profiling, FFTS and swimlanes are not simulated (must be 0)",
            ));
        }
        let epoch = u64_at(block, aicore_args::REPORT_EPOCH);
        if epoch == 0 {
            return Err(refused("a2a3 AICore block: report_epoch is 0"));
        }
        let image = u64_at(block, aicore_args::RUNTIME_ARGS);
        mem.check(image, A2a3Model::image_bytes(block_dim))?;
        Ok(AicoreLaunch::new(epoch, block_dim, image))
    }

    fn decode_aicpu(
        &self,
        block: &[u8],
        max_block_dim: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicpuLaunch, ModelError> {
        let mut buf = Vec::new();
        let block = replayed(block, mem, &mut buf)?;
        let (t, _) = envelope_counts(block)?;
        let epoch = u64_at(block, kernel_args::RUN_RESULT_EPOCH);
        if epoch == 0 {
            return Err(refused("a2a3 AICPU block: run_result_epoch is 0"));
        }
        let block_dim = u32_at(block, envelope::BLOCK_DIM);
        if block_dim == 0 || block_dim > max_block_dim {
            return Err(refused("block_dim is 0 or above the device maximum"));
        }
        let descriptors = &block[envelope::HEADER..envelope::HEADER + tensor::SIZE * t];
        let tensors = descriptors
            .chunks_exact(tensor::SIZE)
            .map(tensor)
            .collect::<Result<Vec<_>, _>>()?;
        let image = u64_at(block, kernel_args::RUNTIME_ARGS);
        let timing = u64_at(block, kernel_args::DEVICE_WALL_DATA_BASE);
        let result = u64_at(block, kernel_args::RUN_RESULT_DATA_BASE);
        mem.check(image, A2a3Model::image_bytes(block_dim))?;
        mem.check(timing, off(timing::SIZE))?;
        mem.check(result, off(result::SIZE))?;
        for t in &tensors {
            mem.check(t.addr, t.bytes)?;
        }
        let slot = u32_at(block, envelope::SLOT);
        Ok(AicpuLaunch {
            data: block.to_vec(),
            ..AicpuLaunch::new(epoch, slot, block_dim, image, result, timing)
        })
    }

    /// `core_start`, then `core_start_epoch`.
    fn aicore_start(
        &self,
        k: &AicoreLaunch,
        mem: &mut DeviceMemory<'_>,
        now: u64,
    ) -> Result<(), ModelError> {
        mem.write_u64(at(k.base, image::CORE_START), now)?;
        mem.write_u64(at(k.base, image::CORE_START_EPOCH), k.identity)
    }

    fn report(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        let at = |field| record(k.base, worker, field);
        mem.write_u32(
            at(handshake::CORE_TYPE),
            handshake::CORE_TYPE_AIC.cast_unsigned(),
        )?;
        mem.write_u32(at(handshake::PHYSICAL_CORE_ID), worker)?;
        mem.write_u64(at(handshake::REPORT_EPOCH), k.identity)?;
        mem.write_u32(at(handshake::AICORE_DONE), worker + 1)
    }

    fn task(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<Task>, ModelError> {
        if mem.read_u64(record(k.base, worker, handshake::TASK_EPOCH))? != k.identity {
            return Ok(None);
        }
        let at = mem.read_u64(record(k.base, worker, handshake::TASK))?;
        let end = k.base.saturating_add(A2a3Model::image_bytes(k.block_dim));
        let outside = refused("a2a3: the dispatched task payload is outside the image");
        let inside = |len: u64| at >= k.base && at.checked_add(len).is_some_and(|e| e <= end);
        if !inside(off(payload::HEADER)) {
            return Err(outside);
        }
        let mut header = [0u8; payload::HEADER];
        mem.read(at, &mut header)?;
        if u64_at(&header, payload::EPOCH) != k.identity {
            return Err(refused(
                "a2a3: the dispatched task payload is another run's",
            ));
        }
        if !zero(&header, payload::RESERVED, payload::HEADER) {
            return Err(refused("a2a3 task payload: reserved is not 0"));
        }
        let t = u32_at(&header, payload::TENSOR_COUNT) as usize;
        let s = u32_at(&header, payload::SCALAR_COUNT) as usize;
        let Some(size) = payload::size(t, s) else {
            return Err(refused(
                "a2a3 task payload: tensor_count or scalar_count is above the maximum",
            ));
        };
        let slot = u32_at(&header, payload::SLOT);
        if !inside(off(size)) {
            return Err(outside);
        }
        let mut bytes = vec![0u8; size - payload::TENSORS];
        mem.read(self::at(at, payload::TENSORS), &mut bytes)?;
        let (ts, ss) = bytes.split_at(tensor::SIZE * t);
        // The AICPU kernel copied descriptors it validated: anything else
        // (a stale or stomped payload) is refused as the envelope's would be.
        let tensors = ts
            .chunks_exact(tensor::SIZE)
            .map(tensor)
            .collect::<Result<Vec<_>, _>>()?;
        let scalars = ss
            .chunks_exact(envelope::SCALAR_SIZE)
            .map(|c| u64_at(c, 0))
            .collect();
        Ok(Some(Task::Read(KernelRun::new(
            k.identity,
            slot,
            k.block_dim,
            tensors,
            scalars,
        ))))
    }

    /// `error`, then `done_epoch`.
    fn finish(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        code: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        // The i32 field holds the code's bits.
        mem.write_u32(record(k.base, worker, handshake::ERROR), code)?;
        mem.write_u64(record(k.base, worker, handshake::DONE_EPOCH), k.identity)
    }

    fn released(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        Ok(mem.read_u64(record(k.base, worker, handshake::RELEASE_EPOCH))? == k.identity)
    }

    /// Copies the envelope's tensors and scalars into the image's payload
    /// area, then its header (the epoch with it).
    fn aicpu_start(&self, c: &AicpuLaunch, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
        let envelope = &c.data;
        if envelope.len() < envelope::HEADER {
            return Err(refused("a2a3: the AICPU kernel has no launch envelope"));
        }
        let at = payload_at(c.base, c.block_dim);
        mem.write(
            self::at(at, payload::TENSORS),
            &envelope[envelope::HEADER..],
        )?;
        let mut header = [0u8; payload::HEADER];
        let mut put = |field: usize, b: &[u8]| header[field..field + b.len()].copy_from_slice(b);
        put(payload::EPOCH, &c.identity.to_le_bytes());
        let count = |field: usize| u32_at(envelope, field).to_le_bytes();
        put(
            payload::TENSOR_COUNT,
            &count(kernel_args::ENTRY_TENSOR_COUNT),
        );
        put(
            payload::SCALAR_COUNT,
            &count(kernel_args::ENTRY_SCALAR_COUNT),
        );
        put(payload::SLOT, &c.slot.to_le_bytes());
        mem.write(at, &header)
    }

    /// The reference's `aicore_report_accepted`: `aicore_done != 0 &&
    /// report_epoch == E`.
    fn accepted(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        Ok(
            mem.read_u32(record(c.base, worker, handshake::AICORE_DONE))? != 0
                && mem.read_u64(record(c.base, worker, handshake::REPORT_EPOCH))? == c.identity,
        )
    }

    /// `task`, then `task_epoch`.
    fn dispatch(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        mem.write_u64(
            record(c.base, worker, handshake::TASK),
            payload_at(c.base, c.block_dim),
        )?;
        mem.write_u64(record(c.base, worker, handshake::TASK_EPOCH), c.identity)
    }

    fn task_done(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<u32>, ModelError> {
        if mem.read_u64(record(c.base, worker, handshake::DONE_EPOCH))? != c.identity {
            return Ok(None);
        }
        mem.read_u32(record(c.base, worker, handshake::ERROR))
            .map(Some)
    }

    /// The timing record (its epoch last), then the result region's header
    /// (`published` last; the payload untouched).
    fn write_records(
        &self,
        c: &AicpuLaunch,
        end: &RunEnd,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        // The AICore kernel stamped its start under this epoch before any
        // worker could report (else: the AICPU kernel's start).
        let stamped = mem.read_u64(at(c.base, image::CORE_START_EPOCH))? == c.identity;
        let aicore_start = if stamped {
            mem.read_u64(at(c.base, image::CORE_START))?
        } else {
            end.aicpu_start
        };
        let start = aicore_start.min(end.aicpu_start);
        let t = A2a3Timing {
            epoch: c.identity,
            wall_ns: abi::ticks_to_nanos(end.end.saturating_sub(start)),
            run_wall_start_cycles: start,
            run_wall_end_cycles: end.end,
            sys_cnt_hz: abi::TICKS_PER_SEC,
            device_id: 0,
            slot: c.slot,
            aicore_start_cycles: aicore_start,
            aicpu_start_cycles: end.aicpu_start,
            dispatch_cycles: end.dispatched,
            block_dim: c.block_dim,
        }
        .to_bytes();
        let rest = timing::WALL_NS;
        mem.write(at(c.timing, rest), &t[rest..])?;
        mem.write_u64(c.timing, c.identity)?;
        let r = match end.code {
            0 => A2a3Result::ok(c.identity),
            // The i32 field holds the code's bits.
            code => A2a3Result::error(c.identity, code.cast_signed()),
        }
        .to_bytes();
        let rest = result::PAYLOAD_BYTES;
        mem.write(at(c.status, rest), &r[rest..result::HEADER])?;
        mem.write_u64(c.status, c.identity)
    }

    fn release(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        mem.write_u64(record(c.base, worker, handshake::RELEASE_EPOCH), c.identity)
    }
}
