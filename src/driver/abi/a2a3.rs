//! The reference runtime's a2a3 kernel ABI as a [`KernelAbi`]: the blocks
//! its kernels are launched with (`AicoreLaunchArgs` for the AICore, a
//! launch envelope around `KernelArgs` for the AICPU) and its
//! epoch-stamped result and timing records. See [`A2a3Abi`] for the
//! summary and [`a2a3_layout`] for every struct, offset by offset.
//!
//! The facts come from the reference runtime's public headers (simpler:
//! `kernel_args.h`, `launch_entry_args.h`, `runtime.h`,
//! `device_run_result.h`). Each struct's docs say which offsets its header
//! states, which are the natural C layout inferred from the field order and
//! types, and which fields are runclaim's own ("\[runclaim\]").

use static_assertions::const_assert_eq;

use self::a2a3_layout::{aicore_args, envelope, image, kernel_args, result, tensor, timing};
use super::adapter::{
    AbiError, AicpuBlock, BlockWriter, DevSpan, KernelAbi, Prep, RecordAt, RecordError, RegionSpec,
    RunIdentity, RunView, Shape, TensorView, Verdict,
};
use super::records::{get_u32, get_u64, put_u32, put_u64};
use super::{TICKS_PER_SEC, WallRecord};

/// Byte layout of every struct the a2a3 adapter and an a2a3 device model
/// share: the blocks, the regions, the records. All integers little-endian.
///
/// Each module is one struct: its size, the offset of each field, and, in
/// its docs, where each offset comes from — *stated* by the reference
/// runtime's public header, *inferred* (only the field order and types are
/// known, so the natural C layout of an LP64 target is used), or
/// *\[runclaim\]* (a field the reference does not have). Private `#[repr(C)]`
/// mirrors of every struct pin these numbers at compile time
/// (`size_of` and `offset_of!`).
///
/// ```
/// use runclaim::driver::abi::a2a3_layout::{envelope, kernel_args, tensor};
///
/// assert_eq!(kernel_args::SIZE, 136);
/// assert!(kernel_args::SIZE <= envelope::HEADER);
/// assert_eq!(envelope::tensor_at(1), Some(envelope::HEADER + tensor::SIZE));
/// ```
pub mod a2a3_layout {
    /// `AicoreLaunchArgs`, the AICore kernel's whole block (40 bytes).
    ///
    /// The reference header (`kernel_args.h`) states the size (40) and the
    /// field order ("mirrors `KERNEL_ENTRY(aicore_kernel)`'s parameter
    /// list"); every offset is inferred (natural C layout: 4 bytes of
    /// padding after `enable_profiling_flag`).
    ///
    /// | off | type | field | runclaim writes |
    /// |---|---|---|---|
    /// | 0 | u64 | `runtime_args` | ADDRESS of region `image` (the whole region) |
    /// | 8 | u32 | `enable_profiling_flag` | 0 |
    /// | 12 | u32 | padding | 0 |
    /// | 16 | u64 | `ffts_base_addr` | 0 |
    /// | 24 | u64 | `chip_swimlane_aicore_rotation_table` | 0 |
    /// | 32 | u64 | `report_epoch` | the run's epoch |
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::aicore_args;
    ///
    /// assert_eq!(aicore_args::REPORT_EPOCH + 8, aicore_args::SIZE);
    /// ```
    pub mod aicore_args {
        /// Bytes (stated).
        pub const SIZE: usize = 40;
        /// `runtime_args`: the image's address.
        pub const RUNTIME_ARGS: usize = 0;
        /// `enable_profiling_flag` (u32).
        pub const ENABLE_PROFILING_FLAG: usize = 8;
        /// `ffts_base_addr`.
        pub const FFTS_BASE_ADDR: usize = 16;
        /// `chip_swimlane_aicore_rotation_table`.
        pub const CHIP_SWIMLANE_AICORE_ROTATION_TABLE: usize = 24;
        /// `report_epoch`: the epoch every worker reports under.
        pub const REPORT_EPOCH: usize = 32;
    }

    /// `KernelArgs`, the first 136 bytes of the AICPU block.
    ///
    /// The reference header (`kernel_args.h`) states `runtime_args` @0,
    /// `regs` @8, `chip_swimlane_run_terminal_bank` @40, the size (136) and
    /// the alignment (8); every other offset is inferred from the header's
    /// field order (natural C layout: 14 `u64`s, 5 `u32`s, 4 bytes of
    /// padding).
    ///
    /// | off | type | field | runclaim writes |
    /// |---|---|---|---|
    /// | 0 | u64 | `runtime_args` | ADDRESS of region `image` |
    /// | 8 | u64 | `regs` | 0 |
    /// | 16 | u64 | `ffts_base_addr` | 0 |
    /// | 24 | u64 | `dump_data_base` | 0 |
    /// | 32 | u64 | `chip_swimlane_data_base` | 0 |
    /// | 40 | u64 | `chip_swimlane_run_terminal_bank` | 0 |
    /// | 48 | u64 | `pmu_data_base` | 0 |
    /// | 56 | u64 | `pmu_reg_addrs` | 0 |
    /// | 64 | u64 | `dep_gen_data_base` | 0 |
    /// | 72 | u64 | `scope_stats_data_base` | 0 |
    /// | 80 | u64 | `chip_swimlane_aicore_rotation_table` | 0 |
    /// | 88 | u64 | `device_wall_data_base` | ADDRESS of region `timing` |
    /// | 96 | u64 | `run_result_data_base` | ADDRESS of region `result` |
    /// | 104 | u64 | `run_result_epoch` | the run's epoch |
    /// | 112 | u32 | `enable_profiling_flag` | 0 |
    /// | 116 | u32 | `entry_args_offset` | [`HEADER`](crate::driver::abi::a2a3_layout::envelope::HEADER) (192) |
    /// | 120 | u32 | `entry_tensor_count` | T |
    /// | 124 | u32 | `entry_scalar_count` | S |
    /// | 128 | u32 | `entry_args_source` | [`LAUNCH_ENVELOPE`](crate::driver::abi::a2a3_layout::envelope::LAUNCH_ENVELOPE) (1) |
    /// | 132 | u32 | padding | 0 |
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::kernel_args;
    ///
    /// assert_eq!(kernel_args::ENTRY_ARGS_SOURCE + 8, kernel_args::SIZE);
    /// ```
    pub mod kernel_args {
        /// Bytes (stated).
        pub const SIZE: usize = 136;
        /// Alignment (stated).
        pub const ALIGN: usize = 8;
        /// `runtime_args`: the image's address (stated @0).
        pub const RUNTIME_ARGS: usize = 0;
        /// `regs` (stated @8).
        pub const REGS: usize = 8;
        /// `ffts_base_addr`.
        pub const FFTS_BASE_ADDR: usize = 16;
        /// `dump_data_base`.
        pub const DUMP_DATA_BASE: usize = 24;
        /// `chip_swimlane_data_base`.
        pub const CHIP_SWIMLANE_DATA_BASE: usize = 32;
        /// `chip_swimlane_run_terminal_bank` (stated @40).
        pub const CHIP_SWIMLANE_RUN_TERMINAL_BANK: usize = 40;
        /// `pmu_data_base`.
        pub const PMU_DATA_BASE: usize = 48;
        /// `pmu_reg_addrs`.
        pub const PMU_REG_ADDRS: usize = 56;
        /// `dep_gen_data_base`.
        pub const DEP_GEN_DATA_BASE: usize = 64;
        /// `scope_stats_data_base`.
        pub const SCOPE_STATS_DATA_BASE: usize = 72;
        /// `chip_swimlane_aicore_rotation_table`.
        pub const CHIP_SWIMLANE_AICORE_ROTATION_TABLE: usize = 80;
        /// `device_wall_data_base`: the timing region's address.
        pub const DEVICE_WALL_DATA_BASE: usize = 88;
        /// `run_result_data_base`: the result region's address.
        pub const RUN_RESULT_DATA_BASE: usize = 96;
        /// `run_result_epoch`: the epoch the run publishes under.
        pub const RUN_RESULT_EPOCH: usize = 104;
        /// `enable_profiling_flag` (u32).
        pub const ENABLE_PROFILING_FLAG: usize = 112;
        /// `entry_args_offset` (u32): where the entry payload starts.
        pub const ENTRY_ARGS_OFFSET: usize = 116;
        /// `entry_tensor_count` (u32).
        pub const ENTRY_TENSOR_COUNT: usize = 120;
        /// `entry_scalar_count` (u32).
        pub const ENTRY_SCALAR_COUNT: usize = 124;
        /// `entry_args_source` (u32).
        pub const ENTRY_ARGS_SOURCE: usize = 128;
    }

    /// The AICPU block: the launch envelope. [`kernel_args`](crate::driver::abi::a2a3_layout::kernel_args)
    /// in a [`HEADER`](crate::driver::abi::a2a3_layout::envelope::HEADER)-byte header, then the entry
    /// payload: T tensor descriptors ([`tensor`](crate::driver::abi::a2a3_layout::tensor), 128 bytes
    /// each), then S `u64` scalars. A block is exactly
    /// [`size`](crate::driver::abi::a2a3_layout::envelope::size)`(T, S)` bytes.
    ///
    /// The reference header (`launch_entry_args.h`) states the header size
    /// (`LAUNCH_ENVELOPE_HEADER_BYTES` = 192), `EntryArgsSource::LaunchEnvelope`
    /// = 1, the maxima (256 tensors, 128 scalars) and tensors-then-scalars.
    /// Bytes 136..192 are reserved there; runclaim uses two words:
    ///
    /// | off | type | field |
    /// |---|---|---|
    /// | 0 | 136 | `KernelArgs` |
    /// | 136 | u32 | `block_dim` \[runclaim\] |
    /// | 140 | u32 | `slot` \[runclaim\] |
    /// | 144..192 | | 0 |
    /// | 192 | 128·T | the tensors |
    /// | 192 + 128·T | 8·S | the scalars |
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::envelope;
    ///
    /// assert_eq!(envelope::size(3, 2), Some(192 + 3 * 128 + 2 * 8));
    /// assert_eq!(envelope::size(envelope::MAX_TENSORS, envelope::MAX_SCALARS), Some(envelope::MAX_SIZE));
    /// ```
    pub mod envelope {
        use super::tensor;

        /// Bytes of the header, and the offset of the entry payload
        /// (`LAUNCH_ENVELOPE_HEADER_BYTES`, stated).
        pub const HEADER: usize = 192;
        /// `block_dim` (u32) \[runclaim\].
        pub const BLOCK_DIM: usize = 136;
        /// `slot` (u32) \[runclaim\].
        pub const SLOT: usize = 140;
        /// `entry_args_source` of a block carrying its arguments in the
        /// envelope (`EntryArgsSource::LaunchEnvelope`, stated).
        pub const LAUNCH_ENVELOPE: u32 = 1;
        /// Most tensors a block carries (stated).
        pub const MAX_TENSORS: usize = 256;
        /// Most scalars a block carries (stated).
        pub const MAX_SCALARS: usize = 128;
        /// Bytes per scalar.
        pub const SCALAR_SIZE: usize = 8;
        /// Bytes of the largest block: `size(MAX_TENSORS, MAX_SCALARS)`.
        pub const MAX_SIZE: usize = 33_984;

        /// Bytes of a block with `t` tensors and `s` scalars; `None` above
        /// a maximum.
        ///
        /// ```
        /// use runclaim::driver::abi::a2a3_layout::envelope;
        ///
        /// assert_eq!(envelope::size(0, 0), Some(envelope::HEADER));
        /// assert_eq!(envelope::size(257, 0), None);
        /// ```
        #[must_use]
        pub const fn size(t: usize, s: usize) -> Option<usize> {
            if t > MAX_TENSORS || s > MAX_SCALARS {
                return None;
            }
            Some(HEADER + tensor::SIZE * t + SCALAR_SIZE * s)
        }

        /// Offset of tensor `i`'s descriptor; `None` at or beyond
        /// [`MAX_TENSORS`](crate::driver::abi::a2a3_layout::envelope::MAX_TENSORS).
        ///
        /// ```
        /// use runclaim::driver::abi::a2a3_layout::envelope;
        ///
        /// assert_eq!(envelope::tensor_at(0), Some(192));
        /// assert_eq!(envelope::tensor_at(256), None);
        /// ```
        #[must_use]
        pub const fn tensor_at(i: usize) -> Option<usize> {
            if i >= MAX_TENSORS {
                return None;
            }
            Some(HEADER + tensor::SIZE * i)
        }

        /// Offset of scalar `j` in a block with `t` tensors; `None` beyond
        /// the maxima.
        ///
        /// ```
        /// use runclaim::driver::abi::a2a3_layout::envelope;
        ///
        /// assert_eq!(envelope::scalar_at(2, 1), Some(192 + 2 * 128 + 8));
        /// assert_eq!(envelope::scalar_at(2, 128), None);
        /// ```
        #[must_use]
        pub const fn scalar_at(t: usize, j: usize) -> Option<usize> {
            if t > MAX_TENSORS || j >= MAX_SCALARS {
                return None;
            }
            Some(HEADER + tensor::SIZE * t + SCALAR_SIZE * j)
        }
    }

    /// One tensor descriptor, `ChipTensor`-shaped (128 bytes, 64-aligned).
    ///
    /// The reference header (`tensor.h`) states the size (128), the
    /// alignment (64), the field order and which fields share the first
    /// cache line; the types and every offset are inferred. runclaim
    /// describes a 1-D tensor: `shapes[]` and `strides[]` are reduced to
    /// their first entry, and two fields are runclaim's own.
    ///
    /// | off | type | field | runclaim writes |
    /// |---|---|---|---|
    /// | 0 | u64 | `buffer.addr` | ADDRESS of the tensor (its span) |
    /// | 8 | u64 | `buffer.size` | bytes |
    /// | 16 | u64 | `owner_task_id` | 0 |
    /// | 24 | u64 | `start_offset` (elements) | 0 |
    /// | 32 | u32 | `version` | 0 |
    /// | 36 | u32 | `ndims` | 1 |
    /// | 40 | u32 | `dtype` | the element size in bytes (the reference's dtype codes are not public) |
    /// | 44 | u8 | `manual_dep` | 0 |
    /// | 45 | u8 | `is_contiguous` | 1 |
    /// | 46 | u8 | `address_space` | [`ADDRESS_SPACE_DEVICE`](crate::driver::abi::a2a3_layout::tensor::ADDRESS_SPACE_DEVICE) (every tensor the adapter passes is device memory) |
    /// | 47 | u8 | direction \[runclaim: the reference strips it\] | [`Dir::code`](crate::driver::abi::Dir::code): 1 In, 2 Out, 3 InOut |
    /// | 48 | u64 | `shapes[0]` | element count (bytes / element size; 0 for 0-byte elements) |
    /// | 56 | u64 | staged \[runclaim\] | 1 a staged host tensor, 0 a device buffer |
    /// | 64 | u64 | `extent_elem_cache` | element count |
    /// | 72 | u64 | `strides[0]` (elements, > 0) | 1 |
    /// | 80..128 | | padding | 0 |
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::tensor;
    ///
    /// assert_eq!(tensor::SIZE % tensor::ALIGN, 0);
    /// assert!(tensor::SHAPES < 64 && tensor::EXTENT_ELEM_CACHE == 64); // the two cache lines
    /// ```
    pub mod tensor {
        /// Bytes (stated).
        pub const SIZE: usize = 128;
        /// Alignment (stated: `alignas(64)`).
        pub const ALIGN: usize = 64;
        /// `buffer.addr`: the tensor's device address.
        pub const BUFFER_ADDR: usize = 0;
        /// `buffer.size`: its bytes.
        pub const BUFFER_SIZE: usize = 8;
        /// `owner_task_id`.
        pub const OWNER_TASK_ID: usize = 16;
        /// `start_offset` (elements).
        pub const START_OFFSET: usize = 24;
        /// `version` (u32).
        pub const VERSION: usize = 32;
        /// `ndims` (u32).
        pub const NDIMS: usize = 36;
        /// `dtype` (u32): runclaim writes the element size in bytes.
        pub const DTYPE: usize = 40;
        /// `manual_dep` (u8).
        pub const MANUAL_DEP: usize = 44;
        /// `is_contiguous` (u8).
        pub const IS_CONTIGUOUS: usize = 45;
        /// `address_space` (u8).
        pub const ADDRESS_SPACE: usize = 46;
        /// Direction (u8, [`Dir::code`](crate::driver::abi::Dir::code)) \[runclaim\].
        pub const DIRECTION: usize = 47;
        /// `shapes[0]`: the element count.
        pub const SHAPES: usize = 48;
        /// Staged (u64: 1 staged host tensor, 0 device buffer) \[runclaim\].
        pub const STAGED: usize = 56;
        /// `extent_elem_cache`: the element count.
        pub const EXTENT_ELEM_CACHE: usize = 64;
        /// `strides[0]` (elements).
        pub const STRIDES: usize = 72;
        /// `address_space` of device memory.
        pub const ADDRESS_SPACE_DEVICE: u8 = 1;
    }

    /// Region `image`: the run's device image, written only by the device.
    /// A 64-byte header, one [`handshake`](crate::driver::abi::a2a3_layout::handshake) record per
    /// AICore worker, then the task payload area ([`payload`](crate::driver::abi::a2a3_layout::payload),
    /// written by the AICPU kernel, read by the AICore workers).
    ///
    /// Its layout is runclaim's own: the reference's image is its `Runtime`
    /// descriptor, whose handshake records the workers share the same way.
    ///
    /// | off | bytes | what |
    /// |---|---|---|
    /// | 0 | u64 | `core_start_epoch`: epoch of the run whose first AICore worker stamped `core_start` |
    /// | 8 | u64 | `core_start`: device tick the AICore kernel began |
    /// | 16..64 | | reserved, 0 |
    /// | 64 + 64·w | 64 | worker `w`'s handshake record |
    /// | 64 + 64·`block_dim` | up to [`PAYLOAD_MAX`](crate::driver::abi::a2a3_layout::payload::MAX) | the task payload |
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::image;
    ///
    /// assert_eq!(image::bytes(2), Some(64 + 2 * 64 + 33_856));
    /// assert_eq!(image::payload(2), Some(192));
    /// ```
    pub mod image {
        use super::{handshake, payload};

        /// Bytes of the image header.
        pub const HEADER: usize = 64;
        /// `core_start_epoch` (u64).
        pub const CORE_START_EPOCH: usize = 0;
        /// `core_start` (u64).
        pub const CORE_START: usize = 8;

        /// Offset of worker `w`'s handshake record; `None` when it does not
        /// fit in `usize`.
        ///
        /// ```
        /// use runclaim::driver::abi::a2a3_layout::image;
        ///
        /// assert_eq!(image::worker(1), Some(128));
        /// ```
        #[must_use]
        pub const fn worker(w: u32) -> Option<usize> {
            match handshake::SIZE.checked_mul(w as usize) {
                Some(n) => HEADER.checked_add(n),
                None => None,
            }
        }

        /// Offset of the task payload in a run of `block_dim` workers
        /// (64-aligned; its device address is the workers' `task`).
        ///
        /// ```
        /// use runclaim::driver::abi::a2a3_layout::image;
        ///
        /// assert_eq!(image::payload(0), Some(64));
        /// ```
        #[must_use]
        pub const fn payload(block_dim: u32) -> Option<usize> {
            worker(block_dim)
        }

        /// Bytes of the region for `block_dim` workers; `None` when that
        /// does not fit in `usize`.
        ///
        /// ```
        /// use runclaim::driver::abi::a2a3_layout::{image, payload};
        ///
        /// assert_eq!(image::bytes(1), Some(image::HEADER + 64 + payload::MAX));
        /// ```
        #[must_use]
        pub const fn bytes(block_dim: u32) -> Option<usize> {
            match payload(block_dim) {
                Some(at) => at.checked_add(payload::MAX),
                None => None,
            }
        }
    }

    /// Worker `w`'s handshake record, at image + [`worker`](crate::driver::abi::a2a3_layout::image::worker)`(w)`
    /// (64 bytes, 64-aligned).
    ///
    /// Bytes 0..32 are the reference's `Handshake` (`runtime.h`): its field
    /// order and `alignas(64)` are stated, and `report_epoch` @24 is
    /// stated; the other offsets are inferred. Bytes 32..64 lie in the
    /// struct's padding and are runclaim's.
    ///
    /// | off | type | field | written by |
    /// |---|---|---|---|
    /// | 0 | u32 | `aicpu_ready` (legacy; 0) | — |
    /// | 4 | u32 | `aicore_done`: w + 1 once worker w reported | AICore |
    /// | 8 | u64 | `task`: device address of the task payload | AICPU |
    /// | 16 | i32 | `core_type` (0 = AIC) | AICore |
    /// | 20 | u32 | `physical_core_id` (= w) | AICore |
    /// | 24 | u64 | `report_epoch`: the epoch the worker reported under (written before `aicore_done`) | AICore |
    /// | 32 | u64 | `task_epoch`: epoch of the dispatched task (written after `task`) \[runclaim\] | AICPU |
    /// | 40 | u64 | `done_epoch`: the worker finished the task of this epoch \[runclaim\] | AICore |
    /// | 48 | i32 | `error`: task error code, 0 = ok (written before `done_epoch`) \[runclaim\] | AICore |
    /// | 52 | u32 | reserved, 0 | |
    /// | 56 | u64 | `release_epoch`: the AICPU releases the worker \[runclaim\] | AICPU |
    ///
    /// A report is accepted only as the reference's `aicore_report_accepted`
    /// does: `aicore_done != 0 && report_epoch == epoch`. Every other word is
    /// accepted only when it equals the run's epoch; the host clears
    /// nothing, so a previous run's words carry its epoch and are ignored.
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::handshake;
    ///
    /// assert_eq!(handshake::REPORT_EPOCH, 24);
    /// assert_eq!(handshake::RELEASE_EPOCH + 8, handshake::SIZE);
    /// ```
    pub mod handshake {
        /// Bytes (the reference's `alignas(64)` struct).
        pub const SIZE: usize = 64;
        /// `aicpu_ready` (u32, legacy).
        pub const AICPU_READY: usize = 0;
        /// `aicore_done` (u32).
        pub const AICORE_DONE: usize = 4;
        /// `task` (u64).
        pub const TASK: usize = 8;
        /// `core_type` (i32).
        pub const CORE_TYPE: usize = 16;
        /// `physical_core_id` (u32).
        pub const PHYSICAL_CORE_ID: usize = 20;
        /// `report_epoch` (u64, stated @24).
        pub const REPORT_EPOCH: usize = 24;
        /// `task_epoch` (u64) \[runclaim\].
        pub const TASK_EPOCH: usize = 32;
        /// `done_epoch` (u64) \[runclaim\].
        pub const DONE_EPOCH: usize = 40;
        /// `error` (i32) \[runclaim\].
        pub const ERROR: usize = 48;
        /// `release_epoch` (u64) \[runclaim\].
        pub const RELEASE_EPOCH: usize = 56;
        /// `core_type` of an AIC core.
        pub const CORE_TYPE_AIC: i32 = 0;
    }

    /// The task payload in the image, written by the AICPU kernel before
    /// dispatch (device-internal; runclaim's own layout). Its tensors and
    /// scalars are copies of the AICPU block's entry payload.
    ///
    /// | off | type | field |
    /// |---|---|---|
    /// | 0 | u64 | `epoch` of the run |
    /// | 8 | u32 | tensor count T |
    /// | 12 | u32 | scalar count S |
    /// | 16..64 | | reserved, 0 |
    /// | 64 | 128·T | the tensors ([`tensor`](crate::driver::abi::a2a3_layout::tensor)) |
    /// | 64 + 128·T | 8·S | the scalars |
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::payload;
    ///
    /// assert_eq!(payload::size(256, 128), Some(payload::MAX));
    /// ```
    pub mod payload {
        use super::{envelope, tensor};

        /// Bytes of the payload header, and the offset of its tensors.
        pub const HEADER: usize = 64;
        /// `epoch` (u64).
        pub const EPOCH: usize = 0;
        /// Tensor count (u32).
        pub const TENSOR_COUNT: usize = 8;
        /// Scalar count (u32).
        pub const SCALAR_COUNT: usize = 12;
        /// Offset of the first tensor.
        pub const TENSORS: usize = HEADER;
        /// Bytes of the largest payload (`PAYLOAD_MAX` = 64 + 128·256 + 8·128).
        pub const MAX: usize = 33_856;

        /// Bytes of a payload with `t` tensors and `s` scalars; `None`
        /// above a maximum.
        ///
        /// ```
        /// use runclaim::driver::abi::a2a3_layout::payload;
        ///
        /// assert_eq!(payload::size(1, 1), Some(64 + 128 + 8));
        /// ```
        #[must_use]
        pub const fn size(t: usize, s: usize) -> Option<usize> {
            if t > envelope::MAX_TENSORS || s > envelope::MAX_SCALARS {
                return None;
            }
            Some(HEADER + tensor::SIZE * t + envelope::SCALAR_SIZE * s)
        }
    }

    /// Region `result`: `DeviceRunResultRegion` (280 bytes), the reference's
    /// newer layout (`device_run_result.h`). Its field order, types and
    /// size are stated; the offsets are natural (no padding).
    ///
    /// | off | type | field |
    /// |---|---|---|
    /// | 0 | u64 | `published`: the run's epoch, written and flushed LAST |
    /// | 8 | u32 | `payload_bytes` (0) |
    /// | 12 | u32 | `verdict`: 0 None, 1 Ok, 2 Error ([`A2a3Verdict`](crate::driver::abi::A2a3Verdict)) |
    /// | 16 | i32 | `completion_code` (0 on Ok; the run's error code on Error) |
    /// | 20 | u32 | `code_source`: 0 None, 1 Header, 2 ThreadRc, 3 ShutdownRc |
    /// | 24 | `u8[256]` | payload |
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::result;
    ///
    /// assert_eq!(result::PAYLOAD, result::HEADER);
    /// assert_eq!(result::HEADER + result::PAYLOAD_MAX, result::SIZE);
    /// ```
    pub mod result {
        /// Bytes of the region (stated).
        pub const SIZE: usize = 280;
        /// Bytes of the fixed header before the payload: what runclaim
        /// reads back and decodes.
        pub const HEADER: usize = 24;
        /// `published` (u64).
        pub const PUBLISHED: usize = 0;
        /// `payload_bytes` (u32).
        pub const PAYLOAD_BYTES: usize = 8;
        /// `verdict` (u32).
        pub const VERDICT: usize = 12;
        /// `completion_code` (i32).
        pub const COMPLETION_CODE: usize = 16;
        /// `code_source` (u32).
        pub const CODE_SOURCE: usize = 20;
        /// The payload.
        pub const PAYLOAD: usize = 24;
        /// Bytes of the payload.
        pub const PAYLOAD_MAX: usize = 256;
        /// `code_source`: no code (`DeviceRunCodeSource::None`).
        pub const CODE_SOURCE_NONE: u32 = 0;
        /// `code_source`: the code came from the header (the a2a3 model
        /// writes it on Error).
        pub const CODE_SOURCE_HEADER: u32 = 1;
        /// `code_source`: a thread's return code.
        pub const CODE_SOURCE_THREAD_RC: u32 = 2;
        /// `code_source`: the shutdown return code.
        pub const CODE_SOURCE_SHUTDOWN_RC: u32 = 3;
    }

    /// Region `timing` (80 bytes), `DeviceRunTiming`-shaped: the scalar
    /// fields of the reference's per-slot timing readback (its onboard
    /// device-runner header: `wall_ns`, `run_wall_start_cycles`,
    /// `run_wall_end_cycles`, `sys_cnt_hz`, `device_id`), its phase arrays
    /// reduced to the three phase starts runclaim measures, and an epoch so
    /// the record proves whose it is. Nothing here is a stated offset: the
    /// layout is runclaim's, in natural C layout.
    ///
    /// | off | type | field |
    /// |---|---|---|
    /// | 0 | u64 | `epoch` \[runclaim\] (written last) |
    /// | 8 | u64 | `wall_ns` |
    /// | 16 | u64 | `run_wall_start_cycles` (= min(AICore start, AICPU start)) |
    /// | 24 | u64 | `run_wall_end_cycles` |
    /// | 32 | u64 | `sys_cnt_hz` (the simulator writes 50,000,000) |
    /// | 40 | i32 | `device_id` (the simulator writes 0) |
    /// | 44 | u32 | `slot` \[runclaim\] |
    /// | 48 | u64 | `aicore_start_cycles` \[runclaim\] |
    /// | 56 | u64 | `aicpu_start_cycles` \[runclaim\] |
    /// | 64 | u64 | `dispatch_cycles` \[runclaim\] |
    /// | 72 | u32 | `block_dim` \[runclaim\] |
    /// | 76 | u32 | reserved, 0 |
    ///
    /// ```
    /// use runclaim::driver::abi::a2a3_layout::timing;
    ///
    /// assert_eq!(timing::BLOCK_DIM + 8, timing::SIZE);
    /// ```
    pub mod timing {
        /// Bytes.
        pub const SIZE: usize = 80;
        /// `epoch` (u64) \[runclaim\].
        pub const EPOCH: usize = 0;
        /// `wall_ns` (u64).
        pub const WALL_NS: usize = 8;
        /// `run_wall_start_cycles` (u64).
        pub const RUN_WALL_START_CYCLES: usize = 16;
        /// `run_wall_end_cycles` (u64).
        pub const RUN_WALL_END_CYCLES: usize = 24;
        /// `sys_cnt_hz` (u64).
        pub const SYS_CNT_HZ: usize = 32;
        /// `device_id` (i32).
        pub const DEVICE_ID: usize = 40;
        /// `slot` (u32) \[runclaim\].
        pub const SLOT: usize = 44;
        /// `aicore_start_cycles` (u64) \[runclaim\].
        pub const AICORE_START_CYCLES: usize = 48;
        /// `aicpu_start_cycles` (u64) \[runclaim\].
        pub const AICPU_START_CYCLES: usize = 56;
        /// `dispatch_cycles` (u64) \[runclaim\].
        pub const DISPATCH_CYCLES: usize = 64;
        /// `block_dim` (u32) \[runclaim\].
        pub const BLOCK_DIM: usize = 72;
    }
}

/// The reference runtime's a2a3 kernel ABI: the blocks and records of its
/// newer, epoch-stamped protocol, with runclaim's additions where the
/// reference leaves the words runclaim needs unspecified (the byte layout
/// of each struct: [`a2a3_layout`]).
///
/// | region | bytes | before each run |
/// |---|---|---|
/// | 0 `image` | [`image::bytes`](a2a3_layout::image::bytes)`(block_dim)` = 64 + 64·`block_dim` + 33,856 | stamped (never written by the host) |
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

/// What the device says of a run in its result region (`DeviceRunVerdict`).
///
/// ```
/// use runclaim::driver::abi::A2a3Verdict;
///
/// assert_eq!(A2a3Verdict::from_code(A2a3Verdict::Error.code()), Some(A2a3Verdict::Error));
/// assert_eq!(A2a3Verdict::from_code(7), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum A2a3Verdict {
    /// No verdict (0): the run has not decided (or never ran).
    None,
    /// The run succeeded (1).
    Ok,
    /// The run failed (2), with its code in `completion_code`.
    Error,
}

impl A2a3Verdict {
    /// The encoded value.
    #[must_use]
    pub const fn code(self) -> u32 {
        match self {
            A2a3Verdict::None => 0,
            A2a3Verdict::Ok => 1,
            A2a3Verdict::Error => 2,
        }
    }

    /// The verdict an encoded value names, if any.
    #[must_use]
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(A2a3Verdict::None),
            1 => Some(A2a3Verdict::Ok),
            2 => Some(A2a3Verdict::Error),
            _ => None,
        }
    }
}

/// The header of the result region (`DeviceRunResultRegion` without its
/// payload), as the device writes it. The fields are the words as written,
/// not validated: [`A2a3Abi`]'s `decode_status` decides what they mean.
///
/// ```
/// use runclaim::driver::abi::{A2a3Result, A2a3Verdict};
///
/// let r = A2a3Result::error(7, 3);
/// assert_eq!((r.verdict, r.completion_code), (A2a3Verdict::Error.code(), 3));
/// let region = r.to_bytes(); // the whole 280-byte region, payload zero
/// assert_eq!(A2a3Result::from_bytes(&region), Some(r));
/// assert_eq!(A2a3Result::from_bytes(&region[..A2a3Result::HEADER]), Some(r));
/// assert_eq!(A2a3Result::from_bytes(&region[..10]), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct A2a3Result {
    /// The epoch the run published under (0: never published).
    pub published: u64,
    /// Bytes of the payload in use (runclaim's runs write 0).
    pub payload_bytes: u32,
    /// [`A2a3Verdict::code`], or whatever the device wrote.
    pub verdict: u32,
    /// 0 on Ok; the run's error code on Error.
    pub completion_code: i32,
    /// Where the code came from ([`result::CODE_SOURCE_NONE`](a2a3_layout::result::CODE_SOURCE_NONE) ..).
    pub code_source: u32,
}

impl A2a3Result {
    /// Bytes of the header (what [`A2a3Abi`] reads back).
    pub const HEADER: usize = result::HEADER;
    /// Bytes of the whole region.
    pub const SIZE: usize = result::SIZE;

    /// What a run of `epoch` that succeeded publishes (code 0, no source).
    ///
    /// ```
    /// use runclaim::driver::abi::{A2a3Result, A2a3Verdict};
    ///
    /// assert_eq!(A2a3Result::ok(4).verdict, A2a3Verdict::Ok.code());
    /// ```
    #[must_use]
    pub const fn ok(epoch: u64) -> Self {
        A2a3Result {
            published: epoch,
            payload_bytes: 0,
            verdict: A2a3Verdict::Ok.code(),
            completion_code: 0,
            code_source: result::CODE_SOURCE_NONE,
        }
    }

    /// What a run of `epoch` that failed with `code` publishes (source
    /// [`CODE_SOURCE_HEADER`](a2a3_layout::result::CODE_SOURCE_HEADER)).
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Result;
    /// use runclaim::driver::abi::a2a3_layout::result;
    ///
    /// assert_eq!(A2a3Result::error(4, 9).code_source, result::CODE_SOURCE_HEADER);
    /// ```
    #[must_use]
    pub const fn error(epoch: u64, code: i32) -> Self {
        A2a3Result {
            published: epoch,
            payload_bytes: 0,
            verdict: A2a3Verdict::Error.code(),
            completion_code: code,
            code_source: result::CODE_SOURCE_HEADER,
        }
    }

    /// Encodes the whole region (the payload zero).
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Result;
    ///
    /// let b = A2a3Result::ok(0x0102).to_bytes();
    /// assert_eq!((b.len(), b[0], b[1], b[12]), (280, 2, 1, 1));
    /// ```
    #[must_use]
    pub fn to_bytes(&self) -> [u8; result::SIZE] {
        let mut b = [0u8; result::SIZE];
        put_u64(&mut b, result::PUBLISHED, self.published);
        put_u32(&mut b, result::PAYLOAD_BYTES, self.payload_bytes);
        put_u32(&mut b, result::VERDICT, self.verdict);
        put_u32(
            &mut b,
            result::COMPLETION_CODE,
            self.completion_code.cast_unsigned(),
        );
        put_u32(&mut b, result::CODE_SOURCE, self.code_source);
        b
    }

    /// Decodes the header from the header's [`HEADER`](Self::HEADER) bytes
    /// or the whole region's [`SIZE`](Self::SIZE); `None` for any other
    /// length.
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Result;
    ///
    /// assert_eq!(A2a3Result::from_bytes(&[0; 24]), Some(A2a3Result::default()));
    /// assert_eq!(A2a3Result::from_bytes(&[0; 25]), None);
    /// ```
    #[must_use]
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        matches!(b.len(), result::HEADER | result::SIZE).then(|| A2a3Result {
            published: get_u64(b, result::PUBLISHED),
            payload_bytes: get_u32(b, result::PAYLOAD_BYTES),
            verdict: get_u32(b, result::VERDICT),
            completion_code: get_u32(b, result::COMPLETION_CODE).cast_signed(),
            code_source: get_u32(b, result::CODE_SOURCE),
        })
    }
}

/// The timing record, as the device writes it: cycle counts of the
/// device's counter (`sys_cnt_hz`), not yet converted to runclaim's ticks
/// (`A2a3Abi`'s `decode_timing` converts them into a [`WallRecord`]).
///
/// ```
/// use runclaim::driver::abi::A2a3Timing;
///
/// let t = A2a3Timing { epoch: 3, slot: 1, sys_cnt_hz: 50_000_000, run_wall_end_cycles: 900,
///                      ..A2a3Timing::default() };
/// assert_eq!(A2a3Timing::from_bytes(&t.to_bytes()), Some(t));
/// assert_eq!(A2a3Timing::from_bytes(&[0; 79]), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct A2a3Timing {
    /// The epoch of the run that wrote it (written last; 0: never written).
    pub epoch: u64,
    /// Wall time of the run in nanoseconds, as the device measured it.
    pub wall_ns: u64,
    /// When the run began (the earlier kernel start), in cycles.
    pub run_wall_start_cycles: u64,
    /// When the run's results and records were complete, in cycles.
    pub run_wall_end_cycles: u64,
    /// The counter's frequency (cycles per second).
    pub sys_cnt_hz: u64,
    /// The device.
    pub device_id: i32,
    /// The slot the run occupied.
    pub slot: u32,
    /// When the AICore kernel began, in cycles.
    pub aicore_start_cycles: u64,
    /// When the AICPU kernel began, in cycles.
    pub aicpu_start_cycles: u64,
    /// When every worker had reported and tasks were dispatched, in cycles.
    pub dispatch_cycles: u64,
    /// Workers that took part.
    pub block_dim: u32,
}

impl A2a3Timing {
    /// Bytes of the record.
    pub const SIZE: usize = timing::SIZE;

    /// Encodes the record.
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Timing;
    ///
    /// let b = A2a3Timing { block_dim: 2, ..A2a3Timing::default() }.to_bytes();
    /// assert_eq!((b.len(), b[72]), (80, 2));
    /// ```
    #[must_use]
    pub fn to_bytes(&self) -> [u8; timing::SIZE] {
        let mut b = [0u8; timing::SIZE];
        put_u64(&mut b, timing::EPOCH, self.epoch);
        put_u64(&mut b, timing::WALL_NS, self.wall_ns);
        put_u64(
            &mut b,
            timing::RUN_WALL_START_CYCLES,
            self.run_wall_start_cycles,
        );
        put_u64(
            &mut b,
            timing::RUN_WALL_END_CYCLES,
            self.run_wall_end_cycles,
        );
        put_u64(&mut b, timing::SYS_CNT_HZ, self.sys_cnt_hz);
        put_u32(&mut b, timing::DEVICE_ID, self.device_id.cast_unsigned());
        put_u32(&mut b, timing::SLOT, self.slot);
        put_u64(
            &mut b,
            timing::AICORE_START_CYCLES,
            self.aicore_start_cycles,
        );
        put_u64(&mut b, timing::AICPU_START_CYCLES, self.aicpu_start_cycles);
        put_u64(&mut b, timing::DISPATCH_CYCLES, self.dispatch_cycles);
        put_u32(&mut b, timing::BLOCK_DIM, self.block_dim);
        b
    }

    /// Decodes a record; `None` unless `b` is [`SIZE`](Self::SIZE) bytes.
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Timing;
    ///
    /// assert_eq!(A2a3Timing::from_bytes(&[0; 80]), Some(A2a3Timing::default()));
    /// ```
    #[must_use]
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        (b.len() == timing::SIZE).then(|| A2a3Timing {
            epoch: get_u64(b, timing::EPOCH),
            wall_ns: get_u64(b, timing::WALL_NS),
            run_wall_start_cycles: get_u64(b, timing::RUN_WALL_START_CYCLES),
            run_wall_end_cycles: get_u64(b, timing::RUN_WALL_END_CYCLES),
            sys_cnt_hz: get_u64(b, timing::SYS_CNT_HZ),
            device_id: get_u32(b, timing::DEVICE_ID).cast_signed(),
            slot: get_u32(b, timing::SLOT),
            aicore_start_cycles: get_u64(b, timing::AICORE_START_CYCLES),
            aicpu_start_cycles: get_u64(b, timing::AICPU_START_CYCLES),
            dispatch_cycles: get_u64(b, timing::DISPATCH_CYCLES),
            block_dim: get_u32(b, timing::BLOCK_DIM),
        })
    }
}

/// `entry_args_offset`: the envelope header's size, as the `u32` it is written as.
const ENTRY_ARGS_OFFSET: u32 = 192;
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
    // manual_dep, is_contiguous, address_space, direction
    w.put_bytes(
        at + tensor::MANUAL_DEP,
        &[0, 1, tensor::ADDRESS_SPACE_DEVICE, dir],
    )?;
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
        let first_scalar = at + envelope::HEADER + tensor::SIZE * tensors.len();
        for (i, t) in tensors.iter().enumerate() {
            write_tensor(w, at + envelope::HEADER + tensor::SIZE * i, t)?;
        }
        for (j, &v) in scalars.iter().enumerate() {
            w.put_u64(first_scalar + envelope::SCALAR_SIZE * j, v)?;
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
        match (A2a3Verdict::from_code(r.verdict), r.completion_code) {
            (Some(A2a3Verdict::Ok), 0) => Ok(Verdict::Succeeded),
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

// Every size, from its field list (holds on any target).
const_assert_eq!(aicore_args::SIZE, 8 + 4 + 4 + 8 + 8 + 8);
const_assert_eq!(kernel_args::SIZE, 14 * 8 + 5 * 4 + 4);
const_assert_eq!(envelope::HEADER, kernel_args::SIZE + 4 + 4 + 48);
const_assert_eq!(tensor::SIZE, 4 * 8 + 3 * 4 + 4 + 4 * 8 + 48);
const_assert_eq!(image::HEADER, 8 + 8 + 48);
const_assert_eq!(
    a2a3_layout::handshake::SIZE,
    4 + 4 + 8 + 4 + 4 + 8 + 8 + 8 + 4 + 4 + 8
);
const_assert_eq!(a2a3_layout::payload::HEADER, 8 + 4 + 4 + 48);
const_assert_eq!(result::SIZE, 8 + 4 + 4 + 4 + 4 + result::PAYLOAD_MAX);
const_assert_eq!(result::HEADER, result::SIZE - result::PAYLOAD_MAX);
const_assert_eq!(timing::SIZE, 5 * 8 + 4 + 4 + 3 * 8 + 4 + 4);
// The maxima: 64 + 128·256 + 8·128 and 192 + 128·256 + 8·128.
const_assert_eq!(
    a2a3_layout::payload::MAX,
    a2a3_layout::payload::HEADER
        + tensor::SIZE * envelope::MAX_TENSORS
        + envelope::SCALAR_SIZE * envelope::MAX_SCALARS
);
const_assert_eq!(
    envelope::MAX_SIZE,
    envelope::HEADER
        + tensor::SIZE * envelope::MAX_TENSORS
        + envelope::SCALAR_SIZE * envelope::MAX_SCALARS
);
// The envelope header holds KernelArgs (stated: sizeof <= LAUNCH_ENVELOPE_HEADER_BYTES)
// and is a multiple of the tensors' alignment (its payload leads with them).
const_assert_eq!(envelope::HEADER % tensor::ALIGN, 0);
const_assert_eq!(image::HEADER % a2a3_layout::handshake::SIZE, 0);

/// `#[repr(C)]` mirrors of every struct, in the field order and with the
/// types of the layout tables, so the compiler checks each stated offset
/// and each natural-layout inference: `size_of` and `offset_of!` of the
/// mirror equal the constants. The device is an LP64 target (`u64`
/// aligned to 8), so the mirrors are checked on 64-bit targets, where
/// `repr(C)` lays them out as the device's C compiler does. They are never
/// used to write bytes: addresses reach a block only through
/// [`BlockWriter::put_addr`].
#[cfg(target_pointer_width = "64")]
#[allow(
    dead_code,
    reason = "layout mirrors: only their sizes and offsets are read"
)]
mod mirror {
    use core::mem::{align_of, offset_of, size_of};

    use static_assertions::const_assert_eq;

    use super::a2a3_layout::{
        aicore_args, envelope, handshake, image, kernel_args, payload, result, tensor, timing,
    };

    #[repr(C)]
    struct AicoreLaunchArgs {
        runtime_args: u64,
        enable_profiling_flag: u32,
        ffts_base_addr: u64,
        chip_swimlane_aicore_rotation_table: u64,
        report_epoch: u64,
    }
    const_assert_eq!(size_of::<AicoreLaunchArgs>(), aicore_args::SIZE);
    const_assert_eq!(
        offset_of!(AicoreLaunchArgs, runtime_args),
        aicore_args::RUNTIME_ARGS
    );
    const_assert_eq!(
        offset_of!(AicoreLaunchArgs, enable_profiling_flag),
        aicore_args::ENABLE_PROFILING_FLAG
    );
    const_assert_eq!(
        offset_of!(AicoreLaunchArgs, ffts_base_addr),
        aicore_args::FFTS_BASE_ADDR
    );
    const_assert_eq!(
        offset_of!(AicoreLaunchArgs, chip_swimlane_aicore_rotation_table),
        aicore_args::CHIP_SWIMLANE_AICORE_ROTATION_TABLE
    );
    const_assert_eq!(
        offset_of!(AicoreLaunchArgs, report_epoch),
        aicore_args::REPORT_EPOCH
    );

    #[repr(C)]
    struct KernelArgs {
        runtime_args: u64,
        regs: u64,
        ffts_base_addr: u64,
        dump_data_base: u64,
        chip_swimlane_data_base: u64,
        chip_swimlane_run_terminal_bank: u64,
        pmu_data_base: u64,
        pmu_reg_addrs: u64,
        dep_gen_data_base: u64,
        scope_stats_data_base: u64,
        chip_swimlane_aicore_rotation_table: u64,
        device_wall_data_base: u64,
        run_result_data_base: u64,
        run_result_epoch: u64,
        enable_profiling_flag: u32,
        entry_args_offset: u32,
        entry_tensor_count: u32,
        entry_scalar_count: u32,
        entry_args_source: u32,
    }
    const_assert_eq!(size_of::<KernelArgs>(), kernel_args::SIZE);
    const_assert_eq!(align_of::<KernelArgs>(), kernel_args::ALIGN);
    const_assert_eq!(
        offset_of!(KernelArgs, runtime_args),
        kernel_args::RUNTIME_ARGS
    );
    const_assert_eq!(offset_of!(KernelArgs, regs), kernel_args::REGS);
    const_assert_eq!(
        offset_of!(KernelArgs, ffts_base_addr),
        kernel_args::FFTS_BASE_ADDR
    );
    const_assert_eq!(
        offset_of!(KernelArgs, dump_data_base),
        kernel_args::DUMP_DATA_BASE
    );
    const_assert_eq!(
        offset_of!(KernelArgs, chip_swimlane_data_base),
        kernel_args::CHIP_SWIMLANE_DATA_BASE
    );
    const_assert_eq!(
        offset_of!(KernelArgs, chip_swimlane_run_terminal_bank),
        kernel_args::CHIP_SWIMLANE_RUN_TERMINAL_BANK
    );
    const_assert_eq!(
        offset_of!(KernelArgs, pmu_data_base),
        kernel_args::PMU_DATA_BASE
    );
    const_assert_eq!(
        offset_of!(KernelArgs, pmu_reg_addrs),
        kernel_args::PMU_REG_ADDRS
    );
    const_assert_eq!(
        offset_of!(KernelArgs, dep_gen_data_base),
        kernel_args::DEP_GEN_DATA_BASE
    );
    const_assert_eq!(
        offset_of!(KernelArgs, scope_stats_data_base),
        kernel_args::SCOPE_STATS_DATA_BASE
    );
    const_assert_eq!(
        offset_of!(KernelArgs, chip_swimlane_aicore_rotation_table),
        kernel_args::CHIP_SWIMLANE_AICORE_ROTATION_TABLE
    );
    const_assert_eq!(
        offset_of!(KernelArgs, device_wall_data_base),
        kernel_args::DEVICE_WALL_DATA_BASE
    );
    const_assert_eq!(
        offset_of!(KernelArgs, run_result_data_base),
        kernel_args::RUN_RESULT_DATA_BASE
    );
    const_assert_eq!(
        offset_of!(KernelArgs, run_result_epoch),
        kernel_args::RUN_RESULT_EPOCH
    );
    const_assert_eq!(
        offset_of!(KernelArgs, enable_profiling_flag),
        kernel_args::ENABLE_PROFILING_FLAG
    );
    const_assert_eq!(
        offset_of!(KernelArgs, entry_args_offset),
        kernel_args::ENTRY_ARGS_OFFSET
    );
    const_assert_eq!(
        offset_of!(KernelArgs, entry_tensor_count),
        kernel_args::ENTRY_TENSOR_COUNT
    );
    const_assert_eq!(
        offset_of!(KernelArgs, entry_scalar_count),
        kernel_args::ENTRY_SCALAR_COUNT
    );
    const_assert_eq!(
        offset_of!(KernelArgs, entry_args_source),
        kernel_args::ENTRY_ARGS_SOURCE
    );

    #[repr(C)]
    struct EnvelopeHeader {
        kernel_args: KernelArgs,
        block_dim: u32,
        slot: u32,
        reserved: [u8; 48],
    }
    const_assert_eq!(size_of::<EnvelopeHeader>(), envelope::HEADER);
    const_assert_eq!(offset_of!(EnvelopeHeader, block_dim), envelope::BLOCK_DIM);
    const_assert_eq!(offset_of!(EnvelopeHeader, slot), envelope::SLOT);

    #[repr(C)]
    struct BufferHandle {
        addr: u64,
        size: u64,
    }

    #[repr(C, align(64))]
    struct ChipTensor {
        buffer: BufferHandle,
        owner_task_id: u64,
        start_offset: u64,
        version: u32,
        ndims: u32,
        dtype: u32,
        manual_dep: u8,
        is_contiguous: u8,
        address_space: u8,
        direction: u8,
        shapes: [u64; 1],
        staged: u64,
        extent_elem_cache: u64,
        strides: [u64; 1],
    }
    const_assert_eq!(size_of::<ChipTensor>(), tensor::SIZE);
    const_assert_eq!(align_of::<ChipTensor>(), tensor::ALIGN);
    const_assert_eq!(
        offset_of!(ChipTensor, buffer) + offset_of!(BufferHandle, addr),
        tensor::BUFFER_ADDR
    );
    const_assert_eq!(
        offset_of!(ChipTensor, buffer) + offset_of!(BufferHandle, size),
        tensor::BUFFER_SIZE
    );
    const_assert_eq!(offset_of!(ChipTensor, owner_task_id), tensor::OWNER_TASK_ID);
    const_assert_eq!(offset_of!(ChipTensor, start_offset), tensor::START_OFFSET);
    const_assert_eq!(offset_of!(ChipTensor, version), tensor::VERSION);
    const_assert_eq!(offset_of!(ChipTensor, ndims), tensor::NDIMS);
    const_assert_eq!(offset_of!(ChipTensor, dtype), tensor::DTYPE);
    const_assert_eq!(offset_of!(ChipTensor, manual_dep), tensor::MANUAL_DEP);
    const_assert_eq!(offset_of!(ChipTensor, is_contiguous), tensor::IS_CONTIGUOUS);
    const_assert_eq!(offset_of!(ChipTensor, address_space), tensor::ADDRESS_SPACE);
    const_assert_eq!(offset_of!(ChipTensor, direction), tensor::DIRECTION);
    const_assert_eq!(offset_of!(ChipTensor, shapes), tensor::SHAPES);
    const_assert_eq!(offset_of!(ChipTensor, staged), tensor::STAGED);
    const_assert_eq!(
        offset_of!(ChipTensor, extent_elem_cache),
        tensor::EXTENT_ELEM_CACHE
    );
    const_assert_eq!(offset_of!(ChipTensor, strides), tensor::STRIDES);

    #[repr(C)]
    struct ImageHeader {
        core_start_epoch: u64,
        core_start: u64,
        reserved: [u64; 6],
    }
    const_assert_eq!(size_of::<ImageHeader>(), image::HEADER);
    const_assert_eq!(
        offset_of!(ImageHeader, core_start_epoch),
        image::CORE_START_EPOCH
    );
    const_assert_eq!(offset_of!(ImageHeader, core_start), image::CORE_START);

    #[repr(C, align(64))]
    struct Handshake {
        aicpu_ready: u32,
        aicore_done: u32,
        task: u64,
        core_type: i32,
        physical_core_id: u32,
        report_epoch: u64,
        task_epoch: u64,
        done_epoch: u64,
        error: i32,
        reserved: u32,
        release_epoch: u64,
    }
    const_assert_eq!(size_of::<Handshake>(), handshake::SIZE);
    const_assert_eq!(offset_of!(Handshake, aicpu_ready), handshake::AICPU_READY);
    const_assert_eq!(offset_of!(Handshake, aicore_done), handshake::AICORE_DONE);
    const_assert_eq!(offset_of!(Handshake, task), handshake::TASK);
    const_assert_eq!(offset_of!(Handshake, core_type), handshake::CORE_TYPE);
    const_assert_eq!(
        offset_of!(Handshake, physical_core_id),
        handshake::PHYSICAL_CORE_ID
    );
    const_assert_eq!(offset_of!(Handshake, report_epoch), handshake::REPORT_EPOCH);
    const_assert_eq!(offset_of!(Handshake, task_epoch), handshake::TASK_EPOCH);
    const_assert_eq!(offset_of!(Handshake, done_epoch), handshake::DONE_EPOCH);
    const_assert_eq!(offset_of!(Handshake, error), handshake::ERROR);
    const_assert_eq!(
        offset_of!(Handshake, release_epoch),
        handshake::RELEASE_EPOCH
    );

    #[repr(C)]
    struct PayloadHeader {
        epoch: u64,
        tensor_count: u32,
        scalar_count: u32,
        reserved: [u64; 6],
    }
    const_assert_eq!(size_of::<PayloadHeader>(), payload::HEADER);
    const_assert_eq!(offset_of!(PayloadHeader, epoch), payload::EPOCH);
    const_assert_eq!(
        offset_of!(PayloadHeader, tensor_count),
        payload::TENSOR_COUNT
    );
    const_assert_eq!(
        offset_of!(PayloadHeader, scalar_count),
        payload::SCALAR_COUNT
    );

    #[repr(C)]
    struct DeviceRunResultRegion {
        published: u64,
        payload_bytes: u32,
        verdict: u32,
        completion_code: i32,
        code_source: u32,
        payload: [u8; result::PAYLOAD_MAX],
    }
    const_assert_eq!(size_of::<DeviceRunResultRegion>(), result::SIZE);
    const_assert_eq!(
        offset_of!(DeviceRunResultRegion, published),
        result::PUBLISHED
    );
    const_assert_eq!(
        offset_of!(DeviceRunResultRegion, payload_bytes),
        result::PAYLOAD_BYTES
    );
    const_assert_eq!(offset_of!(DeviceRunResultRegion, verdict), result::VERDICT);
    const_assert_eq!(
        offset_of!(DeviceRunResultRegion, completion_code),
        result::COMPLETION_CODE
    );
    const_assert_eq!(
        offset_of!(DeviceRunResultRegion, code_source),
        result::CODE_SOURCE
    );
    const_assert_eq!(offset_of!(DeviceRunResultRegion, payload), result::PAYLOAD);

    #[repr(C)]
    struct DeviceRunTiming {
        epoch: u64,
        wall_ns: u64,
        run_wall_start_cycles: u64,
        run_wall_end_cycles: u64,
        sys_cnt_hz: u64,
        device_id: i32,
        slot: u32,
        aicore_start_cycles: u64,
        aicpu_start_cycles: u64,
        dispatch_cycles: u64,
        block_dim: u32,
        reserved: u32,
    }
    const_assert_eq!(size_of::<DeviceRunTiming>(), timing::SIZE);
    const_assert_eq!(offset_of!(DeviceRunTiming, epoch), timing::EPOCH);
    const_assert_eq!(offset_of!(DeviceRunTiming, wall_ns), timing::WALL_NS);
    const_assert_eq!(
        offset_of!(DeviceRunTiming, run_wall_start_cycles),
        timing::RUN_WALL_START_CYCLES
    );
    const_assert_eq!(
        offset_of!(DeviceRunTiming, run_wall_end_cycles),
        timing::RUN_WALL_END_CYCLES
    );
    const_assert_eq!(offset_of!(DeviceRunTiming, sys_cnt_hz), timing::SYS_CNT_HZ);
    const_assert_eq!(offset_of!(DeviceRunTiming, device_id), timing::DEVICE_ID);
    const_assert_eq!(offset_of!(DeviceRunTiming, slot), timing::SLOT);
    const_assert_eq!(
        offset_of!(DeviceRunTiming, aicore_start_cycles),
        timing::AICORE_START_CYCLES
    );
    const_assert_eq!(
        offset_of!(DeviceRunTiming, aicpu_start_cycles),
        timing::AICPU_START_CYCLES
    );
    const_assert_eq!(
        offset_of!(DeviceRunTiming, dispatch_cycles),
        timing::DISPATCH_CYCLES
    );
    const_assert_eq!(offset_of!(DeviceRunTiming, block_dim), timing::BLOCK_DIM);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::DevPtr;
    use crate::driver::abi::Dir;
    use crate::driver::abi::adapter::{BlockBuf, Home};

    const IMAGE_AT: u64 = 0x10_000;
    const RESULT_AT: u64 = 0x20_000;
    const TIMING_AT: u64 = 0x30_000;

    fn id() -> RunIdentity {
        RunIdentity {
            run_id: 9,
            epoch: 9,
            slot: 1,
            block_dim: 2,
        }
    }

    fn span(addr: u64, len: usize) -> DevSpan {
        DevSpan::new(DevPtr::from_raw(addr), len as u64)
    }

    /// One slot's regions for `block_dim` 2, sized as `regions` says.
    fn regions() -> [DevSpan; 3] {
        let mut specs = Vec::new();
        A2a3Abi.regions(&Shape::new(2, 2), &mut specs).unwrap();
        [
            span(IMAGE_AT, specs[0].bytes),
            span(RESULT_AT, specs[1].bytes),
            span(TIMING_AT, specs[2].bytes),
        ]
    }

    fn u8_at(b: &[u8], at: usize) -> u8 {
        b[at]
    }

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    fn aicpu(view: &RunView<'_>) -> Result<BlockBuf, AbiError> {
        let mut buf = BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 8);
        assert_eq!(
            A2a3Abi.aicpu_block(view, &mut buf.writer())?,
            AicpuBlock::Written
        );
        Ok(buf)
    }

    /// The bytes of tensor `i` of a block at every offset the layout
    /// names: (addr, size, ndims, dtype, [`manual_dep`, contiguous, space,
    /// dir], shapes, staged, extent, strides), and every other byte zero.
    fn tensor_words(b: &[u8], i: usize) -> (u64, u64, u32, u32, [u8; 4], u64, u64, u64, u64) {
        let at = envelope::tensor_at(i).unwrap();
        let d = &b[at..at + tensor::SIZE];
        assert_eq!(u64_at(d, tensor::OWNER_TASK_ID), 0);
        assert_eq!(u64_at(d, tensor::START_OFFSET), 0);
        assert_eq!(u32_at(d, tensor::VERSION), 0);
        assert!(d[80..].iter().all(|&x| x == 0), "padding is zero");
        (
            u64_at(d, tensor::BUFFER_ADDR),
            u64_at(d, tensor::BUFFER_SIZE),
            u32_at(d, tensor::NDIMS),
            u32_at(d, tensor::DTYPE),
            [
                u8_at(d, tensor::MANUAL_DEP),
                u8_at(d, tensor::IS_CONTIGUOUS),
                u8_at(d, tensor::ADDRESS_SPACE),
                u8_at(d, tensor::DIRECTION),
            ],
            u64_at(d, tensor::SHAPES),
            u64_at(d, tensor::STAGED),
            u64_at(d, tensor::EXTENT_ELEM_CACHE),
            u64_at(d, tensor::STRIDES),
        )
    }

    /// The `KernelArgs` words every block shares, checked at their offsets,
    /// with every other header byte zero.
    fn check_header(b: &[u8], t: u32, s: u32) {
        assert_eq!(u64_at(b, 0), IMAGE_AT); // runtime_args
        assert_eq!(u64_at(b, 88), TIMING_AT); // device_wall_data_base
        assert_eq!(u64_at(b, 96), RESULT_AT); // run_result_data_base
        assert_eq!(u64_at(b, 104), 9); // run_result_epoch
        assert_eq!(u32_at(b, 112), 0); // enable_profiling_flag
        assert_eq!(u32_at(b, 116), 192); // entry_args_offset
        assert_eq!(u32_at(b, 120), t); // entry_tensor_count
        assert_eq!(u32_at(b, 124), s); // entry_scalar_count
        assert_eq!(u32_at(b, 128), 1); // entry_args_source = LaunchEnvelope
        assert_eq!(u32_at(b, 132), 0); // padding
        assert_eq!(u32_at(b, 136), 2); // block_dim
        assert_eq!(u32_at(b, 140), 1); // slot
        for off in (8..88).step_by(8) {
            assert_eq!(u64_at(b, off), 0, "KernelArgs word at {off} is 0");
        }
        assert!(b[144..192].iter().all(|&x| x == 0));
    }

    #[test]
    fn regions_are_stamped_and_sized_per_block_dim() {
        let mut specs = Vec::new();
        A2a3Abi.regions(&Shape::new(3, 2), &mut specs).unwrap();
        let got: Vec<_> = specs.iter().map(|r| (r.name, r.bytes, r.prep)).collect();
        assert_eq!(
            got,
            [
                ("image", 64 + 64 * 3 + 33_856, Prep::Stamped),
                ("result", 280, Prep::Stamped),
                ("timing", 80, Prep::Stamped),
            ]
        );
        assert_eq!(A2a3Abi.name(), "a2a3");
        assert_eq!(image::payload(3), Some(256));
        assert_eq!(image::worker(0), Some(64));
        #[cfg(target_pointer_width = "64")]
        assert_eq!(
            image::bytes(u32::MAX),
            Some(64 + 64 * (u32::MAX as usize) + 33_856)
        );
        #[cfg(not(target_pointer_width = "64"))]
        assert!(
            A2a3Abi
                .regions(&Shape::new(u32::MAX, 1), &mut specs)
                .is_err()
        );
    }

    #[test]
    fn the_aicore_block_names_the_whole_image_and_the_epoch() {
        let regions = regions();
        let view = RunView::new(id(), &regions, &[], &[]);
        let mut buf = BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 8);
        A2a3Abi.aicore_block(&view, &mut buf.writer()).unwrap();
        let args = buf.args();
        let b = args.bytes();
        assert_eq!(b.len(), 40);
        assert_eq!(u64_at(b, 0), IMAGE_AT); // runtime_args
        assert_eq!(u32_at(b, 8), 0); // enable_profiling_flag
        assert_eq!(u32_at(b, 12), 0); // padding
        assert_eq!(u64_at(b, 16), 0); // ffts_base_addr
        assert_eq!(u64_at(b, 24), 0); // rotation table
        assert_eq!(u64_at(b, 32), 9); // report_epoch
        assert_eq!(args.fields().len(), 1);
        let f = args.fields()[0];
        assert_eq!(
            (f.at, f.addr.raw(), f.len),
            (0, IMAGE_AT, (64 + 64 * 2 + 33_856) as u64)
        );
        assert!(args.consistent());
    }

    #[test]
    fn a_workload_block_carries_its_tensors_and_scalars_at_every_offset() {
        let regions = regions();
        let tensors = [
            TensorView {
                span: span(0x8000, 64),
                elem_size: 4,
                dir: Dir::In,
                home: Home::Staging,
            },
            TensorView {
                span: span(0x9000, 48),
                elem_size: 2,
                dir: Dir::Out,
                home: Home::Buffer,
            },
            TensorView {
                span: span(0xa000, 24),
                elem_size: 8,
                dir: Dir::InOut,
                home: Home::Staging,
            },
        ];
        let view = RunView::new(id(), &regions, &tensors, &[5, u64::MAX]);
        let buf = aicpu(&view).unwrap();
        let args = buf.args();
        let b = args.bytes();
        assert_eq!(b.len(), 192 + 3 * 128 + 2 * 8);
        check_header(b, 3, 2);
        assert_eq!(
            tensor_words(b, 0),
            (0x8000, 64, 1, 4, [0, 1, 1, 1], 16, 1, 16, 1)
        );
        assert_eq!(
            tensor_words(b, 1),
            (0x9000, 48, 1, 2, [0, 1, 1, 2], 24, 0, 24, 1)
        );
        assert_eq!(
            tensor_words(b, 2),
            (0xa000, 24, 1, 8, [0, 1, 1, 3], 3, 1, 3, 1)
        );
        assert_eq!(u64_at(b, 192 + 3 * 128), 5);
        assert_eq!(u64_at(b, 192 + 3 * 128 + 8), u64::MAX);
        let fields: Vec<_> = args
            .fields()
            .iter()
            .map(|f| (f.at, f.addr.raw(), f.len))
            .collect();
        assert_eq!(
            fields,
            [
                (0, IMAGE_AT, regions[0].len()),
                (88, TIMING_AT, 80),
                (96, RESULT_AT, 280),
                (192, 0x8000, 64),
                (320, 0x9000, 48),
                (448, 0xa000, 24),
            ]
        );
        assert!(args.consistent());
    }

    #[test]
    fn a_runspec_run_travels_as_its_two_arena_tensors() {
        let regions = regions();
        let t = |addr, dir| TensorView {
            span: span(addr, 12),
            elem_size: 4,
            dir,
            home: Home::Arena,
        };
        let tensors = [t(0x4000, Dir::In), t(0x5000, Dir::Out)];
        let view = RunView::new(id(), &regions, &tensors, &[]);
        let buf = aicpu(&view).unwrap();
        let args = buf.args();
        let b = args.bytes();
        assert_eq!(b.len(), 192 + 2 * 128);
        check_header(b, 2, 0);
        assert_eq!(
            tensor_words(b, 0),
            (0x4000, 12, 1, 4, [0, 1, 1, 1], 3, 1, 3, 1)
        );
        assert_eq!(
            tensor_words(b, 1),
            (0x5000, 12, 1, 4, [0, 1, 1, 2], 3, 1, 3, 1)
        );
        let fields: Vec<_> = args
            .fields()
            .iter()
            .map(|f| (f.at, f.addr.raw(), f.len))
            .collect();
        assert_eq!(
            fields,
            [
                (0, IMAGE_AT, regions[0].len()),
                (88, TIMING_AT, 80),
                (96, RESULT_AT, 280),
                (192, 0x4000, 12),
                (320, 0x5000, 12),
            ]
        );
        assert!(args.consistent());
    }

    #[test]
    fn counts_above_the_maxima_are_refused_and_the_largest_block_fits_exactly() {
        let regions = regions();
        let t = TensorView {
            span: span(0x8000, 4),
            elem_size: 4,
            dir: Dir::In,
            home: Home::Buffer,
        };
        let tensors = vec![t; 257];
        let scalars = vec![1u64; 129];
        let view = RunView::new(id(), &regions, &tensors, &scalars[..128]);
        assert!(matches!(aicpu(&view), Err(AbiError::Unsupported { .. })));
        let view = RunView::new(id(), &regions, &tensors[..256], &scalars);
        assert!(matches!(aicpu(&view), Err(AbiError::Unsupported { .. })));

        let view = RunView::new(id(), &regions, &tensors[..256], &scalars[..128]);
        let buf = aicpu(&view).unwrap();
        assert_eq!(buf.args().bytes().len(), A2a3Abi.max_block_bytes());
        assert_eq!(A2a3Abi.max_block_bytes(), 192 + 128 * 256 + 8 * 128);
        assert_eq!(buf.args().fields().len(), 3 + 256);
        assert!(buf.args().consistent());
        let mut small = BlockBuf::with_capacity(A2a3Abi.max_block_bytes() - 1, 8);
        assert_eq!(
            A2a3Abi.aicpu_block(&view, &mut small.writer()),
            Err(AbiError::BlockFull {
                needed: A2a3Abi.max_block_bytes(),
                capacity: A2a3Abi.max_block_bytes() - 1
            })
        );
    }

    #[test]
    fn missing_short_regions_and_epoch_0_are_refused() {
        let regions = regions();
        let mut buf = BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 8);
        let view = RunView::new(id(), &regions[..2], &[], &[]);
        assert_eq!(
            A2a3Abi.aicpu_block(&view, &mut buf.writer()),
            Err(AbiError::NoRegion { index: 2 })
        );
        // An image sized for 2 workers cannot serve 3.
        let three = RunIdentity {
            block_dim: 3,
            ..id()
        };
        let view = RunView::new(three, &regions, &[], &[]);
        assert!(matches!(
            A2a3Abi.aicore_block(&view, &mut buf.writer()),
            Err(AbiError::Unsupported { .. })
        ));
        let short = [regions[0], span(RESULT_AT, 24), regions[2]];
        let view = RunView::new(id(), &short, &[], &[]);
        assert!(matches!(
            A2a3Abi.aicpu_block(&view, &mut buf.writer()),
            Err(AbiError::Unsupported { .. })
        ));
        let zero = RunIdentity { epoch: 0, ..id() };
        let view = RunView::new(zero, &regions, &[], &[]);
        assert!(A2a3Abi.aicore_block(&view, &mut buf.writer()).is_err());
        assert!(A2a3Abi.aicpu_block(&view, &mut buf.writer()).is_err());
    }

    #[test]
    fn a_zero_size_element_describes_zero_elements() {
        let regions = regions();
        let t = TensorView {
            span: span(0x8000, 0),
            elem_size: 0,
            dir: Dir::In,
            home: Home::Buffer,
        };
        let tensors = [t];
        let view = RunView::new(id(), &regions, &tensors, &[]);
        let buf = aicpu(&view).unwrap();
        assert_eq!(
            tensor_words(buf.args().bytes(), 0),
            (0x8000, 0, 1, 0, [0, 1, 1, 1], 0, 0, 0, 1)
        );
    }

    #[test]
    fn the_records_are_at_their_offsets() {
        let st = A2a3Abi.status_record();
        assert_eq!((st.region, st.offset, st.bytes), (A2a3Abi::RESULT, 0, 24));
        let tm = A2a3Abi.timing_record();
        assert_eq!((tm.region, tm.offset, tm.bytes), (A2a3Abi::TIMING, 0, 80));

        let r = A2a3Result {
            published: 0x0102_0304_0506_0708,
            payload_bytes: 5,
            verdict: 2,
            completion_code: -3,
            code_source: 1,
        };
        let b = r.to_bytes();
        assert_eq!(u64_at(&b, 0), 0x0102_0304_0506_0708);
        assert_eq!(u32_at(&b, 8), 5);
        assert_eq!(u32_at(&b, 12), 2);
        assert_eq!(u32_at(&b, 16), (-3i32).cast_unsigned());
        assert_eq!(u32_at(&b, 20), 1);
        assert!(b[24..].iter().all(|&x| x == 0));
        assert_eq!(A2a3Result::from_bytes(&b[..24]), Some(r));

        let t = A2a3Timing {
            epoch: 1,
            wall_ns: 2,
            run_wall_start_cycles: 3,
            run_wall_end_cycles: 4,
            sys_cnt_hz: 5,
            device_id: -6,
            slot: 7,
            aicore_start_cycles: 8,
            aicpu_start_cycles: 9,
            dispatch_cycles: 10,
            block_dim: 11,
        };
        let b = t.to_bytes();
        let words: Vec<u64> = [0, 8, 16, 24, 32, 48, 56, 64]
            .iter()
            .map(|&o| u64_at(&b, o))
            .collect();
        assert_eq!(words, [1, 2, 3, 4, 5, 8, 9, 10]);
        assert_eq!(u32_at(&b, 40), (-6i32).cast_unsigned());
        assert_eq!(u32_at(&b, 44), 7);
        assert_eq!(u32_at(&b, 72), 11);
        assert_eq!(u32_at(&b, 76), 0);
        assert_eq!(A2a3Timing::from_bytes(&b), Some(t));
    }

    /// The result header a device would leave for `r`.
    fn header(r: A2a3Result) -> Vec<u8> {
        r.to_bytes()[..A2a3Result::HEADER].to_vec()
    }

    #[test]
    fn decode_status_accepts_only_this_epochs_complete_verdict() {
        let abi = A2a3Abi;
        let id = id();
        assert_eq!(
            abi.decode_status(&id, &header(A2a3Result::ok(9))),
            Ok(Verdict::Succeeded)
        );
        assert_eq!(
            abi.decode_status(&id, &header(A2a3Result::error(9, 3))),
            Ok(Verdict::Failed { code: 3 })
        );
        assert_eq!(
            abi.decode_status(&id, &header(A2a3Result::error(9, -1))),
            Ok(Verdict::Failed { code: u32::MAX })
        );
        // The whole region decodes as its header does.
        assert_eq!(
            abi.decode_status(&id, &A2a3Result::ok(9).to_bytes()),
            Ok(Verdict::Succeeded)
        );
        // The previous run's record, left in the region.
        assert_eq!(
            abi.decode_status(&id, &header(A2a3Result::ok(8))),
            Err(RecordError::Mismatch {
                expected: 9,
                found: 8
            })
        );
        // A region never published (zeroed at open).
        assert_eq!(
            abi.decode_status(&id, &[0; 24]),
            Err(RecordError::Mismatch {
                expected: 9,
                found: 0
            })
        );
        let none = A2a3Result {
            verdict: A2a3Verdict::None.code(),
            ..A2a3Result::ok(9)
        };
        assert_eq!(
            abi.decode_status(&id, &header(none)),
            Err(RecordError::Missing)
        );
        let garbage = A2a3Result {
            verdict: 0x4747,
            ..A2a3Result::ok(9)
        };
        assert!(matches!(
            abi.decode_status(&id, &header(garbage)),
            Err(RecordError::Malformed { .. })
        ));
        let ok_with_code = A2a3Result {
            completion_code: 4,
            ..A2a3Result::ok(9)
        };
        assert!(matches!(
            abi.decode_status(&id, &header(ok_with_code)),
            Err(RecordError::Malformed { .. })
        ));
        assert!(matches!(
            abi.decode_status(&id, &header(A2a3Result::error(9, 0))),
            Err(RecordError::Malformed { .. })
        ));
        assert!(matches!(
            abi.decode_status(&id, &[0; 23]),
            Err(RecordError::Malformed { .. })
        ));
        // Under epoch 0 even a zeroed region is not this run's.
        let zero = RunIdentity { epoch: 0, ..id };
        assert!(abi.decode_status(&zero, &[0; 24]).is_err());
    }

    fn timing(epoch: u64, slot: u32, hz: u64) -> A2a3Timing {
        A2a3Timing {
            epoch,
            wall_ns: 12_000,
            run_wall_start_cycles: 100,
            run_wall_end_cycles: 700,
            sys_cnt_hz: hz,
            device_id: 0,
            slot,
            aicore_start_cycles: 100,
            aicpu_start_cycles: 104,
            dispatch_cycles: 120,
            block_dim: 2,
        }
    }

    #[test]
    fn decode_timing_converts_cycles_to_ticks_under_this_epoch_and_slot() {
        let abi = A2a3Abi;
        let id = id();
        let at_50 = abi
            .decode_timing(&id, &timing(9, 1, 50_000_000).to_bytes())
            .unwrap();
        assert_eq!(
            at_50,
            WallRecord {
                run_id: 9,
                slot: 1,
                block_dim: 2,
                aicore_start: 100,
                aicpu_start: 104,
                dispatched: 120,
                end: 700,
            }
        );
        let at_100 = abi
            .decode_timing(&id, &timing(9, 1, 100_000_000).to_bytes())
            .unwrap();
        assert_eq!(
            (
                at_100.aicore_start,
                at_100.aicpu_start,
                at_100.dispatched,
                at_100.end
            ),
            (50, 52, 60, 350)
        );
        assert!(matches!(
            abi.decode_timing(&id, &timing(9, 1, 0).to_bytes()),
            Err(RecordError::Malformed { .. })
        ));
        assert_eq!(
            abi.decode_timing(&id, &timing(8, 1, 50_000_000).to_bytes()),
            Err(RecordError::Mismatch {
                expected: 9,
                found: 8
            })
        );
        assert_eq!(
            abi.decode_timing(&id, &timing(9, 0, 50_000_000).to_bytes()),
            Err(RecordError::Mismatch {
                expected: 9,
                found: 9
            })
        );
        assert_eq!(
            abi.decode_timing(&id, &[0; 80]),
            Err(RecordError::Mismatch {
                expected: 9,
                found: 0
            })
        );
        assert!(matches!(
            abi.decode_timing(&id, &[0; 48]),
            Err(RecordError::Malformed { .. })
        ));
        let max = A2a3Timing {
            run_wall_end_cycles: u64::MAX,
            ..timing(9, 1, 1)
        };
        let w = abi.decode_timing(&id, &max.to_bytes()).unwrap();
        assert_eq!(w.end, u64::MAX); // saturated, no panic
        assert_eq!(w.aicore_start, 100 * 50_000_000);
    }

    /// A decoder with the epoch check left out: it reads the verdict of
    /// whatever run last published in the region.
    fn decode_status_without_epoch(bytes: &[u8]) -> Result<Verdict, RecordError> {
        let r = A2a3Result::from_bytes(bytes).ok_or(RecordError::Malformed { what: "size" })?;
        match A2a3Verdict::from_code(r.verdict) {
            Some(A2a3Verdict::Ok) => Ok(Verdict::Succeeded),
            Some(A2a3Verdict::Error) => Ok(Verdict::Failed {
                code: r.completion_code.cast_unsigned(),
            }),
            _ => Err(RecordError::Missing),
        }
    }

    #[test]
    fn negative_control_a_decoder_without_the_epoch_check_accepts_the_previous_run() {
        // Run 8 succeeded and published; run 9 then faulted before
        // publishing, so the region the host never clears still holds run
        // 8's record.
        let left_behind = header(A2a3Result::ok(8));
        assert_eq!(
            decode_status_without_epoch(&left_behind),
            Ok(Verdict::Succeeded),
            "the broken decoder takes run 8's success for run 9's"
        );
        assert_eq!(
            A2a3Abi.decode_status(&id(), &left_behind),
            Err(RecordError::Mismatch {
                expected: 9,
                found: 8
            })
        );
    }
}
