//! The reference runtime's a2a3 device protocol ([`A2a3Model`]): epoch
//! identity instead of host clears.
//!
//! Layouts from the reference runtime's public headers (simpler,
//! `kernel_args.h`, `device_run_result.h`, `runtime.h`): `KernelArgs` and
//! `AicoreLaunchArgs`, the `Handshake` record with its `report_epoch`,
//! `DeviceRunResultRegion` and `DeviceRunTiming`. Where only the order and
//! types of fields are known, the natural C layout is used (marked
//! "inferred" below); words runclaim adds are marked "runclaim".

use super::{AicoreLaunch, AicpuLaunch, DeviceMemory, DeviceModel, ModelError, RunEnd, Task};
use crate::driver::abi::{self, Dir, TensorArg};
use crate::driver::sim::rust_kernel::KernelRun;

/// The image header: `core_start_epoch`, `core_start`, reserved.
const IMAGE_HEADER: u64 = 64;
/// One worker's handshake record (`alignas(64)`).
const RECORD: u64 = 64;
/// The task payload's header: epoch, counts, reserved.
const PAYLOAD_HEADER: u64 = PAYLOAD_HEADER_BYTES as u64;
const PAYLOAD_HEADER_BYTES: usize = 64;
/// One `ChipTensor`-shaped descriptor.
const TENSOR: usize = 128;
const MAX_TENSORS: u32 = 256;
const MAX_SCALARS: u32 = 128;
/// The largest task payload: 33,856 bytes.
const PAYLOAD_MAX: u64 =
    PAYLOAD_HEADER + TENSOR as u64 * MAX_TENSORS as u64 + 8 * MAX_SCALARS as u64;
/// `AicoreLaunchArgs`.
const AICORE_BLOCK: usize = 40;
/// `LAUNCH_ENVELOPE_HEADER_BYTES`: `KernelArgs` (136 B) and the reserved
/// rest of the header.
const ENVELOPE_HEADER: usize = 192;
/// `entry_args_source = LaunchEnvelope`.
const SOURCE_ENVELOPE: u32 = 1;
/// `DeviceRunResultRegion`.
const RESULT_BYTES: u64 = 280;
/// The timing record.
const TIMING_BYTES: u64 = TIMING as u64;
const TIMING: usize = 80;

/// Image header offsets.
mod image {
    pub const CORE_START_EPOCH: u64 = 0;
    pub const CORE_START: u64 = 8;
}

/// Handshake record offsets (0..32 the reference's `Handshake`).
mod hs {
    /// `u32` `aicore_done`: `w + 1` once worker `w` reported.
    pub const AICORE_DONE: u64 = 4;
    /// `u64` `task`: the task payload's address.
    pub const TASK: u64 = 8;
    /// `i32` `core_type` (0 = AIC).
    pub const CORE_TYPE: u64 = 16;
    /// `u32` `physical_core_id`.
    pub const PHYSICAL_CORE_ID: u64 = 20;
    /// `u64` `report_epoch` (stated @24).
    pub const REPORT_EPOCH: u64 = 24;
    /// `u64` `task_epoch` [runclaim].
    pub const TASK_EPOCH: u64 = 32;
    /// `u64` `done_epoch` [runclaim].
    pub const DONE_EPOCH: u64 = 40;
    /// `i32` `error` [runclaim].
    pub const ERROR: u64 = 48;
    /// `u64` `release_epoch` [runclaim].
    pub const RELEASE_EPOCH: u64 = 56;
}

/// Task payload offsets.
mod payload {
    pub const EPOCH: u64 = 0;
    pub const TENSORS: u64 = 8;
    pub const SCALARS: u64 = 12;
    /// `u32` slot [simulator: reserved in the shared layout, 0 there].
    pub const SLOT: u64 = 16;
}

/// `KernelArgs` offsets (in the envelope).
mod ka {
    pub const RUNTIME_ARGS: usize = 0;
    /// `regs` up to `chip_swimlane_aicore_rotation_table`: all 0.
    pub const ZERO_FROM: usize = 8;
    pub const ZERO_TO: usize = 88;
    pub const DEVICE_WALL: usize = 88;
    pub const RUN_RESULT: usize = 96;
    pub const RUN_RESULT_EPOCH: usize = 104;
    pub const ENABLE_PROFILING: usize = 112;
    pub const ENTRY_ARGS_OFFSET: usize = 116;
    pub const ENTRY_TENSORS: usize = 120;
    pub const ENTRY_SCALARS: usize = 124;
    pub const ENTRY_SOURCE: usize = 128;
    pub const PADDING: usize = 132;
    /// [runclaim, in the envelope's reserved bytes]
    pub const BLOCK_DIM: usize = 136;
    /// [runclaim]
    pub const SLOT: usize = 140;
    pub const RESERVED_FROM: usize = 144;
}

/// `ChipTensor`-shaped descriptor offsets (types inferred).
mod ct {
    pub const ADDR: usize = 0;
    pub const SIZE: usize = 8;
    pub const OWNER_TASK_ID: usize = 16;
    pub const START_OFFSET: usize = 24;
    pub const VERSION: usize = 32;
    pub const NDIMS: usize = 36;
    pub const DTYPE: usize = 40;
    pub const MANUAL_DEP: usize = 44;
    pub const IS_CONTIGUOUS: usize = 45;
    pub const ADDRESS_SPACE: usize = 46;
    pub const DIRECTION: usize = 47;
    pub const SHAPE0: usize = 48;
    pub const STAGED: usize = 56;
    pub const EXTENT: usize = 64;
    pub const STRIDE0: usize = 72;
    pub const PADDING: usize = 80;
}

/// The reference runtime's a2a3 device protocol: the layout of runclaim's
/// a2a3 adapter, with the run's **epoch** as its identity, so the host
/// never clears anything between runs.
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
/// - **AICore**: `AicoreLaunchArgs`, 40 bytes: `runtime_args` (the image,
///   @0), `enable_profiling_flag` (u32 @8, 0), padding (@12, 0),
///   `ffts_base_addr` (@16, 0), `chip_swimlane_aicore_rotation_table`
///   (@24, 0), `report_epoch` (@32, the epoch, never 0). `block_dim` is
///   the launch's.
/// - **AICPU**: the launch envelope, `192 + 128·T + 8·S` bytes:
///   `KernelArgs` — `runtime_args` (@0, the image), `regs` …
///   `chip_swimlane_aicore_rotation_table` (@8..88, all 0),
///   `device_wall_data_base` (@88, timing), `run_result_data_base` (@96,
///   result), `run_result_epoch` (@104, the epoch), `enable_profiling_flag`
///   (u32 @112, 0), `entry_args_offset` (u32 @116, 192), the tensor and
///   scalar counts `T` ≤ 256 and `S` ≤ 128 (u32 @120, @124),
///   `entry_args_source` (u32 @128, 1 = launch envelope), padding (@132,
///   0) — then runclaim's `block_dim` (u32 @136) and slot (u32 @140), 0 to
///   192; then `T` 128-byte `ChipTensor`-shaped descriptors and `S` `u64`
///   scalars.
/// - **Tensor descriptor** (types inferred): `buffer.addr` (@0),
///   `buffer.size` (@8), `owner_task_id` (@16, 0), `start_offset` (@24,
///   0), `version` (u32 @32, 0), `ndims` (u32 @36, 1), `dtype` (u32 @40:
///   the element size in bytes), `manual_dep` (u8 @44, 0),
///   `is_contiguous` (u8 @45, 1), `address_space` (u8 @46, 1 = device),
///   direction (u8 @47, [`Dir::code`]), `shapes[0]` (@48, the element
///   count `size / dtype`), `staged` (@56, 0 or 1), `extent_elem_cache`
///   (@64, the element count), `strides[0]` (@72, 1), 0 to 128.
///
/// A block that is not exactly this (a field the simulator does not model
/// set, such as profiling, FFTS or swimlanes; a count that disagrees with
/// the length; an epoch of 0) is refused at launch
/// ([`DriverErrorKind::InvalidArgument`](crate::driver::DriverErrorKind::InvalidArgument)),
/// and every range the blocks name is checked: the image
/// ([`image_bytes`](A2a3Model::image_bytes)), the result and timing
/// regions, every tensor.
///
/// # The protocol
///
/// Worker `w`'s handshake record is at `image + 64 + 64·w`: `aicore_done`
/// (u32 @4), `task` (@8), `core_type` (i32 @16), `physical_core_id` (u32
/// @20), `report_epoch` (@24), then runclaim's `task_epoch` (@32),
/// `done_epoch` (@40), `error` (i32 @48) and `release_epoch` (@56). The
/// task payload is at `image + 64 + 64·block_dim`.
///
/// - **AICore worker** `w` (epoch `E` from its block): the kernel's start
///   stamps the image's `core_start` (@8), then its `core_start_epoch`
///   (@0) = `E`; the worker writes `core_type` = 0, `physical_core_id` =
///   `w`, `report_epoch` = `E`, then `aicore_done` = `w + 1`; waits until
///   `task_epoch` == `E`; reads the payload at `task` — inside the image
///   and carrying `E`, else the kernel faults — and takes its tensors and
///   scalars as its run; computes; writes `error`, then `done_epoch` =
///   `E`; waits until `release_epoch` == `E`.
/// - **AICPU kernel** (`E` = `run_result_epoch`): at its start, copies the
///   envelope's tensors and scalars into the payload area (tensors and
///   scalars, then its header: epoch `E` @0, `T` @8, `S` @12 and, a
///   simulator extension in the reserved bytes, the slot @16); waits until
///   every report is accepted — `aicore_done != 0 && report_epoch == E`,
///   the reference's `aicore_report_accepted`; dispatches each worker
///   (`task`, then `task_epoch` = `E`); waits until every `done_epoch` ==
///   `E`, the run's code being the first non-zero `error`; writes the
///   timing record, then the result region; releases every worker
///   (`release_epoch` = `E`).
///
/// # Records
///
/// - **Timing** (80 B): `wall_ns` (@8), `run_wall_start_cycles` (@16, the
///   earlier kernel start), `run_wall_end_cycles` (@24), `sys_cnt_hz`
///   (@32, 50,000,000), `device_id` (i32 @40, 0), then runclaim's slot
///   (u32 @44), `aicore_start_cycles` (@48), `aicpu_start_cycles` (@56),
///   `dispatch_cycles` (@64), `block_dim` (u32 @72) — and the epoch (@0)
///   written **last**.
/// - **Result** (280 B): `payload_bytes` (u32 @8, 0), `verdict` (u32 @12:
///   1 Ok, 2 Error), `completion_code` (i32 @16: 0, or the run's code),
///   `code_source` (u32 @20: 0 on Ok, 1 = header on Error), the payload
///   (@24, untouched) — and `published` (@0) = `E` written **last**.
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
        IMAGE_HEADER
            .saturating_add(RECORD.saturating_mul(block_dim as u64))
            .saturating_add(PAYLOAD_MAX)
    }
}

fn refused(what: &'static str) -> ModelError {
    ModelError::Refused { what }
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

/// Worker `w`'s record word `off`.
fn record(image: u64, w: u32, off: u64) -> u64 {
    image + IMAGE_HEADER + RECORD * u64::from(w) + off
}

/// The task payload of a run with `block_dim` workers.
fn payload_at(image: u64, block_dim: u32) -> u64 {
    image + IMAGE_HEADER + RECORD * u64::from(block_dim)
}

/// One tensor descriptor of the envelope, validated (structure only).
fn tensor(d: &[u8]) -> Result<TensorArg, ModelError> {
    let bad = refused("a tensor descriptor does not follow the a2a3 layout (ChipTensor)");
    let bytes = u64_at(d, ct::SIZE);
    let elem_size = u32_at(d, ct::DTYPE);
    let elements = match elem_size {
        0 => 0,
        e => bytes / u64::from(e),
    };
    let zero = |from: usize, to: usize| d[from..to].iter().all(|&b| b == 0);
    let ok = u64_at(d, ct::OWNER_TASK_ID) == 0
        && u64_at(d, ct::START_OFFSET) == 0
        && u32_at(d, ct::VERSION) == 0
        && u32_at(d, ct::NDIMS) == 1
        && d[ct::MANUAL_DEP] == 0
        && d[ct::IS_CONTIGUOUS] == 1
        && d[ct::ADDRESS_SPACE] == 1
        && u64_at(d, ct::SHAPE0) == elements
        && u64_at(d, ct::EXTENT) == elements
        && u64_at(d, ct::STRIDE0) == 1
        && zero(ct::PADDING, TENSOR);
    if !ok {
        return Err(bad);
    }
    decode_tensor(d).ok_or(bad)
}

/// The fields a kernel sees of one descriptor; `None` for a direction or
/// staged flag that is not one.
fn decode_tensor(d: &[u8]) -> Option<TensorArg> {
    let staged = match u64_at(d, ct::STAGED) {
        0 => false,
        1 => true,
        _ => return None,
    };
    Some(TensorArg {
        addr: u64_at(d, ct::ADDR),
        bytes: u64_at(d, ct::SIZE),
        elem_size: u32_at(d, ct::DTYPE),
        dir: Dir::from_code(u32::from(d[ct::DIRECTION]))?,
        staged,
    })
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
        if block.len() != AICORE_BLOCK {
            return Err(refused(
                "an a2a3 AICore block is AicoreLaunchArgs, 40 bytes",
            ));
        }
        if block[8..32].iter().any(|&b| b != 0) {
            return Err(refused(
                "a2a3 AICore block: profiling, FFTS and swimlanes are not simulated (must be 0)",
            ));
        }
        let epoch = u64_at(block, 32);
        if epoch == 0 {
            return Err(refused("a2a3 AICore block: report_epoch is 0"));
        }
        let image = u64_at(block, 0);
        mem.check(image, A2a3Model::image_bytes(block_dim))?;
        Ok(AicoreLaunch::new(epoch, block_dim, image))
    }

    fn decode_aicpu(
        &self,
        block: &[u8],
        max_block_dim: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicpuLaunch, ModelError> {
        if block.len() < ENVELOPE_HEADER {
            return Err(refused(
                "an a2a3 AICPU block is a launch envelope of at least 192 bytes",
            ));
        }
        let (t, s) = (
            u32_at(block, ka::ENTRY_TENSORS),
            u32_at(block, ka::ENTRY_SCALARS),
        );
        if t > MAX_TENSORS || s > MAX_SCALARS {
            return Err(refused(
                "a2a3 AICPU block: more than 256 tensors or 128 scalars",
            ));
        }
        let entries = TENSOR * t as usize + 8 * s as usize;
        if block.len() != ENVELOPE_HEADER + entries {
            return Err(refused(
                "a2a3 AICPU block: its length is not 192 + 128 per tensor + 8 per scalar",
            ));
        }
        let zero = |from: usize, to: usize| block[from..to].iter().all(|&b| b == 0);
        if !zero(ka::ZERO_FROM, ka::ZERO_TO)
            || u32_at(block, ka::ENABLE_PROFILING) != 0
            || u32_at(block, ka::PADDING) != 0
            || !zero(ka::RESERVED_FROM, ENVELOPE_HEADER)
        {
            return Err(refused(
                "a2a3 AICPU block: a KernelArgs field the simulator does not model is set \
                 (registers, dumps, swimlanes, PMU, profiling) or a reserved byte is not 0",
            ));
        }
        if u32_at(block, ka::ENTRY_ARGS_OFFSET) as usize != ENVELOPE_HEADER
            || u32_at(block, ka::ENTRY_SOURCE) != SOURCE_ENVELOPE
        {
            return Err(refused(
                "a2a3 AICPU block: the entry arguments are not in the launch envelope at 192",
            ));
        }
        let epoch = u64_at(block, ka::RUN_RESULT_EPOCH);
        if epoch == 0 {
            return Err(refused("a2a3 AICPU block: run_result_epoch is 0"));
        }
        let block_dim = u32_at(block, ka::BLOCK_DIM);
        if block_dim == 0 || block_dim > max_block_dim {
            return Err(refused("block_dim is 0 or above the device maximum"));
        }
        let mut tensors = Vec::with_capacity(t as usize);
        for d in block[ENVELOPE_HEADER..ENVELOPE_HEADER + TENSOR * t as usize].chunks_exact(TENSOR)
        {
            tensors.push(tensor(d)?);
        }
        let image = u64_at(block, ka::RUNTIME_ARGS);
        let (timing, result) = (
            u64_at(block, ka::DEVICE_WALL),
            u64_at(block, ka::RUN_RESULT),
        );
        mem.check(image, A2a3Model::image_bytes(block_dim))?;
        mem.check(timing, TIMING_BYTES)?;
        mem.check(result, RESULT_BYTES)?;
        for t in &tensors {
            mem.check(t.addr, t.bytes)?;
        }
        Ok(AicpuLaunch {
            data: block.to_vec(),
            ..AicpuLaunch::new(
                epoch,
                u32_at(block, ka::SLOT),
                block_dim,
                image,
                result,
                timing,
            )
        })
    }

    /// `core_start`, then `core_start_epoch`.
    fn aicore_start(
        &self,
        k: &AicoreLaunch,
        mem: &mut DeviceMemory<'_>,
        now: u64,
    ) -> Result<(), ModelError> {
        mem.write_u64(k.base + image::CORE_START, now)?;
        mem.write_u64(k.base + image::CORE_START_EPOCH, k.identity)
    }

    fn report(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        let at = |off| record(k.base, worker, off);
        mem.write_u32(at(hs::CORE_TYPE), 0)?;
        mem.write_u32(at(hs::PHYSICAL_CORE_ID), worker)?;
        mem.write_u64(at(hs::REPORT_EPOCH), k.identity)?;
        mem.write_u32(at(hs::AICORE_DONE), worker + 1)
    }

    fn task(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<Task>, ModelError> {
        if mem.read_u64(record(k.base, worker, hs::TASK_EPOCH))? != k.identity {
            return Ok(None);
        }
        let at = mem.read_u64(record(k.base, worker, hs::TASK))?;
        let end = k.base.saturating_add(A2a3Model::image_bytes(k.block_dim));
        let outside = refused("a2a3: the dispatched task payload is outside the image");
        let inside = |len: u64| at >= k.base && at.checked_add(len).is_some_and(|e| e <= end);
        if !inside(PAYLOAD_HEADER) {
            return Err(outside);
        }
        if mem.read_u64(at + payload::EPOCH)? != k.identity {
            return Err(refused(
                "a2a3: the dispatched task payload is another run's",
            ));
        }
        let (t, s) = (
            mem.read_u32(at + payload::TENSORS)?,
            mem.read_u32(at + payload::SCALARS)?,
        );
        if t > MAX_TENSORS || s > MAX_SCALARS {
            return Err(refused(
                "a2a3: the task payload's counts are above the maximum",
            ));
        }
        let slot = mem.read_u32(at + payload::SLOT)?;
        let len = TENSOR as u64 * u64::from(t) + 8 * u64::from(s);
        if !inside(PAYLOAD_HEADER + len) {
            return Err(outside);
        }
        let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
        mem.read(at + PAYLOAD_HEADER, &mut bytes)?;
        let (ts, ss) = bytes.split_at(TENSOR * t as usize);
        let tensors = ts
            .chunks_exact(TENSOR)
            .map(decode_tensor)
            .collect::<Option<Vec<_>>>()
            .ok_or(refused(
                "a2a3: a tensor of the task payload does not decode",
            ))?;
        let scalars = ss.chunks_exact(8).map(|c| u64_at(c, 0)).collect();
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
        mem.write_u32(record(k.base, worker, hs::ERROR), code)?;
        mem.write_u64(record(k.base, worker, hs::DONE_EPOCH), k.identity)
    }

    fn released(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        Ok(mem.read_u64(record(k.base, worker, hs::RELEASE_EPOCH))? == k.identity)
    }

    /// Copies the envelope's tensors and scalars into the image's payload
    /// area, then its header (the epoch with it).
    fn aicpu_start(&self, c: &AicpuLaunch, mem: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
        let envelope = &c.data;
        if envelope.len() < ENVELOPE_HEADER {
            return Err(refused("a2a3: the AICPU kernel has no launch envelope"));
        }
        let at = payload_at(c.base, c.block_dim);
        mem.write(at + PAYLOAD_HEADER, &envelope[ENVELOPE_HEADER..])?;
        let mut header = [0u8; PAYLOAD_HEADER_BYTES];
        header[0..8].copy_from_slice(&c.identity.to_le_bytes());
        header[8..16].copy_from_slice(&envelope[ka::ENTRY_TENSORS..ka::ENTRY_SCALARS + 4]);
        header[16..20].copy_from_slice(&c.slot.to_le_bytes());
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
        Ok(mem.read_u32(record(c.base, worker, hs::AICORE_DONE))? != 0
            && mem.read_u64(record(c.base, worker, hs::REPORT_EPOCH))? == c.identity)
    }

    /// `task`, then `task_epoch`.
    fn dispatch(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        mem.write_u64(
            record(c.base, worker, hs::TASK),
            payload_at(c.base, c.block_dim),
        )?;
        mem.write_u64(record(c.base, worker, hs::TASK_EPOCH), c.identity)
    }

    fn task_done(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<u32>, ModelError> {
        if mem.read_u64(record(c.base, worker, hs::DONE_EPOCH))? != c.identity {
            return Ok(None);
        }
        mem.read_u32(record(c.base, worker, hs::ERROR)).map(Some)
    }

    /// The timing record (its epoch last), then the result region
    /// (`published` last).
    fn write_records(
        &self,
        c: &AicpuLaunch,
        end: &RunEnd,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        // The AICore kernel stamped its start under this epoch before any
        // worker could report (else: the AICPU kernel's start).
        let aicore_start = if mem.read_u64(c.base + image::CORE_START_EPOCH)? == c.identity {
            mem.read_u64(c.base + image::CORE_START)?
        } else {
            end.aicpu_start
        };
        let start = aicore_start.min(end.aicpu_start);
        let mut t = [0u8; TIMING];
        let mut put = |at: usize, b: &[u8]| t[at..at + b.len()].copy_from_slice(b);
        put(
            8,
            &abi::ticks_to_nanos(end.end.saturating_sub(start)).to_le_bytes(),
        );
        put(16, &start.to_le_bytes());
        put(24, &end.end.to_le_bytes());
        put(32, &abi::TICKS_PER_SEC.to_le_bytes());
        put(40, &0i32.to_le_bytes());
        put(44, &c.slot.to_le_bytes());
        put(48, &aicore_start.to_le_bytes());
        put(56, &end.aicpu_start.to_le_bytes());
        put(64, &end.dispatched.to_le_bytes());
        put(72, &c.block_dim.to_le_bytes());
        mem.write(c.timing + 8, &t[8..])?;
        mem.write_u64(c.timing, c.identity)?;
        // payload_bytes, verdict, completion_code (the code's bits),
        // code_source.
        let (verdict, source) = if end.code == 0 { (1u32, 0u32) } else { (2, 1) };
        let mut r = [0u8; 16];
        r[4..8].copy_from_slice(&verdict.to_le_bytes());
        r[8..12].copy_from_slice(&end.code.to_le_bytes());
        r[12..16].copy_from_slice(&source.to_le_bytes());
        mem.write(c.status + 8, &r)?;
        mem.write_u64(c.status, c.identity)
    }

    fn release(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        mem.write_u64(record(c.base, worker, hs::RELEASE_EPOCH), c.identity)
    }
}
