//! C types, constants and launch-struct layouts of the ACL / libruntime ABI
//! (CANN 8.5 and later), as the CANN headers declare them: `acl/acl_rt.h`,
//! `acl/acl_base_rt.h`, `runtime/rt_external_base.h`,
//! `runtime/rt_external_kernel.h`, `runtime/runtime/kernel.h` and
//! `runtime/runtime/rts/rts_kernel.h`.
//! Every layout is pinned with `static_assertions`: a field that moves is a
//! compile error, not a corrupted launch.
//!
//! The launch structs have no implicit padding: where C pads, the Rust
//! mirror has an explicit `pad*` field (asserted: each size is the sum of its
//! fields), and every struct is built from its all-zero `zeroed()` value. So
//! every byte handed to the runtime is defined — zero where no field is
//! set — and a runtime with an older layout that reads a reserved or padding
//! byte as a field reads 0 (older CANN headers declare a 40-byte
//! `rtAicpuArgsEx_t` with 16-bit name offsets, whose later fields sit where
//! today's padding is).

#![allow(
    missing_docs,
    reason = "mirrors of C declarations; the reference documents each field"
)]

use std::ffi::{c_char, c_int, c_void};
use std::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;

pub type AclError = c_int;
pub type AclrtStream = *mut c_void;
pub type AclrtEvent = *mut c_void;
pub type AclrtContext = *mut c_void;
/// `aclmdlRI`: a model runtime instance, here the graph a stream capture
/// ended into (`typedef void* aclmdlRI`, `acl/acl_rt.h`).
pub type AclmdlRI = *mut c_void;

// Memcpy kinds (aclrtMemcpyKind).
pub const ACL_MEMCPY_HOST_TO_DEVICE: u32 = 1;
pub const ACL_MEMCPY_DEVICE_TO_HOST: u32 = 2;
pub const ACL_MEMCPY_DEVICE_TO_DEVICE: u32 = 3;
/// aclrtMemMallocPolicy
pub const ACL_MEM_MALLOC_HUGE_FIRST: u32 = 0;
// Event flags.
pub const ACL_EVENT_SYNC: u32 = 0x1;
pub const ACL_EVENT_TIME_LINE: u32 = 0x8;
// aclrtStreamStatus: COMPLETE = 0, NOT_READY = 1.
pub const ACL_STREAM_STATUS_COMPLETE: u32 = 0;
pub const ACL_STREAM_STATUS_NOT_READY: u32 = 1;
// aclrtEventRecordedStatus: the REVERSE numbering — NOT_READY = 0, COMPLETE = 1.
pub const ACL_EVENT_RECORDED_STATUS_NOT_READY: u32 = 0;
pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: u32 = 1;
/// `RT_DEV_BINARY_MAGIC_ELF` (`runtime/rt_external_kernel.h`): the
/// `rtDevBinary_t` magic this driver registers AICore code with, so the one
/// a runtime must accept from it. Re-exported, hidden, as
/// `runclaim::driver::acl::RT_DEV_BINARY_MAGIC_ELF` for a stand-in runtime
/// (the workspace's fake libraries) to check against.
pub const RT_DEV_BINARY_MAGIC_ELF: u32 = 0x4355_4245;
pub const RT_SCHEM_MODE_BATCH: u8 = 1;
/// `aclrtCallbackBlockType`: the callback task does not hold back the tasks
/// queued after it.
pub const ACL_CALLBACK_NO_BLOCK: u32 = 0;
/// `aclmdlRICaptureMode`: the capture's rules apply to the capturing
/// thread only (`ACL_MODEL_RI_CAPTURE_MODE_GLOBAL` = 0 before it,
/// `_RELAXED` = 2 after it).
pub const ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL: u32 = 1;
// aclmdlRICaptureStatus: NONE = 0, ACTIVE = 1, INVALIDATED = 2.
pub const ACL_MODEL_RI_CAPTURE_STATUS_NONE: u32 = 0;
pub const ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE: u32 = 1;
pub const ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED: u32 = 2;
/// `rtLoadBinaryOption`: CPU kernel mode (0 = op-info JSON only).
pub const RT_LOAD_BINARY_OPT_CPU_KERNEL_MODE: u32 = 3;

/// `rtDevBinary_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RtDevBinary {
    pub magic: u32,
    pub version: u32,
    pub data: *const c_void,
    pub length: u64,
}

/// `rtHostInputInfo_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RtHostInputInfo {
    pub addr_offset: u32,
    pub data_offset: u32,
}

/// `rtArgsEx_t` (CANN ≥ 8.5: 32-bit tiling offsets).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RtArgsEx {
    pub args: *mut c_void,
    pub host_input_info_ptr: *mut RtHostInputInfo,
    pub args_size: u32,
    pub tiling_addr_offset: u32,
    pub tiling_data_offset: u32,
    pub host_input_info_num: u16,
    pub has_tiling: u8,
    pub is_no_need_h2d_copy: u8,
    pub reserved: [u8; 4],
    /// C's tail padding, made explicit.
    pub pad: [u8; 4],
}

impl RtArgsEx {
    /// Every byte zero (NULL pointers).
    #[must_use]
    pub const fn zeroed() -> Self {
        RtArgsEx {
            args: std::ptr::null_mut(),
            host_input_info_ptr: std::ptr::null_mut(),
            args_size: 0,
            tiling_addr_offset: 0,
            tiling_data_offset: 0,
            host_input_info_num: 0,
            has_tiling: 0,
            is_no_need_h2d_copy: 0,
            reserved: [0; 4],
            pad: [0; 4],
        }
    }
}

/// `rtAicpuArgsEx_t` (CANN ≥ 8.5: 32-bit name offsets).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RtAicpuArgsEx {
    pub args: *mut c_void,
    pub host_input_info_ptr: *mut RtHostInputInfo,
    pub kernel_offset_info_ptr: *mut RtHostInputInfo,
    pub args_size: u32,
    pub host_input_info_num: u16,
    pub kernel_offset_info_num: u16,
    pub so_name_addr_offset: u32,
    pub kernel_name_addr_offset: u32,
    pub is_no_need_h2d_copy: bool,
    /// C's padding before `timeout`, made explicit.
    pub pad0: u8,
    pub timeout: u16,
    pub reserved: u8,
    /// C's tail padding, made explicit.
    pub pad1: [u8; 3],
}

impl RtAicpuArgsEx {
    /// Every byte zero (NULL pointers, `false`).
    #[must_use]
    pub const fn zeroed() -> Self {
        RtAicpuArgsEx {
            args: std::ptr::null_mut(),
            host_input_info_ptr: std::ptr::null_mut(),
            kernel_offset_info_ptr: std::ptr::null_mut(),
            args_size: 0,
            host_input_info_num: 0,
            kernel_offset_info_num: 0,
            so_name_addr_offset: 0,
            kernel_name_addr_offset: 0,
            is_no_need_h2d_copy: false,
            pad0: 0,
            timeout: 0,
            reserved: 0,
            pad1: [0; 3],
        }
    }
}

/// `rtCpuKernelArgs_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RtCpuKernelArgs {
    pub base_args: RtAicpuArgsEx,
    pub cpu_param_head_offset: usize,
    pub rsv: [u32; 4],
}

impl RtCpuKernelArgs {
    /// Every byte zero.
    #[must_use]
    pub const fn zeroed() -> Self {
        RtCpuKernelArgs {
            base_args: RtAicpuArgsEx::zeroed(),
            cpu_param_head_offset: 0,
            rsv: [0; 4],
        }
    }
}

/// `rtTaskCfgInfo_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RtTaskCfgInfo {
    pub qos: u8,
    pub part_id: u8,
    pub schem_mode: u8,
    pub d2d_cross_flag: bool,
    pub block_dim_offset: u32,
    pub dumpflag: u8,
    pub never_timeout: u8,
    pub enable_profiling: u8,
    pub rev: u8,
    pub local_memory_size: u32,
}

/// `rtLaunchKernelAttr_t`: an id and a 16-byte, 4-aligned value union.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RtLaunchKernelAttr {
    pub id: u32,
    pub value: [u32; 4],
}

/// `rtKernelLaunchCfg_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RtKernelLaunchCfg {
    pub attrs: *mut RtLaunchKernelAttr,
    pub num_attrs: usize,
}

/// `rtLoadBinaryOption_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RtLoadBinaryOption {
    pub option_id: u32,
    pub value: [u32; 4],
}

/// `rtLoadBinaryConfig_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RtLoadBinaryConfig {
    pub options: *mut RtLoadBinaryOption,
    pub num_opt: usize,
}

// Layouts as computed with gcc against the CANN 8.5 / 9.x headers (LP64).
const_assert_eq!(size_of::<RtDevBinary>(), 24);
const_assert_eq!(offset_of!(RtDevBinary, data), 8);
const_assert_eq!(offset_of!(RtDevBinary, length), 16);
const_assert_eq!(size_of::<RtArgsEx>(), 40);
const_assert_eq!(offset_of!(RtArgsEx, args_size), 16);
const_assert_eq!(offset_of!(RtArgsEx, tiling_addr_offset), 20);
const_assert_eq!(offset_of!(RtArgsEx, tiling_data_offset), 24);
const_assert_eq!(offset_of!(RtArgsEx, host_input_info_num), 28);
const_assert_eq!(offset_of!(RtArgsEx, has_tiling), 30);
const_assert_eq!(offset_of!(RtArgsEx, is_no_need_h2d_copy), 31);
const_assert_eq!(size_of::<RtAicpuArgsEx>(), 48);
const_assert_eq!(offset_of!(RtAicpuArgsEx, args_size), 24);
const_assert_eq!(offset_of!(RtAicpuArgsEx, host_input_info_num), 28);
const_assert_eq!(offset_of!(RtAicpuArgsEx, kernel_offset_info_num), 30);
const_assert_eq!(offset_of!(RtAicpuArgsEx, so_name_addr_offset), 32);
const_assert_eq!(offset_of!(RtAicpuArgsEx, kernel_name_addr_offset), 36);
const_assert_eq!(offset_of!(RtAicpuArgsEx, is_no_need_h2d_copy), 40);
const_assert_eq!(offset_of!(RtAicpuArgsEx, timeout), 42);
const_assert_eq!(offset_of!(RtAicpuArgsEx, reserved), 44);
const_assert_eq!(size_of::<RtCpuKernelArgs>(), 72);
const_assert_eq!(offset_of!(RtCpuKernelArgs, cpu_param_head_offset), 48);
const_assert_eq!(size_of::<RtTaskCfgInfo>(), 16);
const_assert_eq!(offset_of!(RtTaskCfgInfo, schem_mode), 2);
const_assert_eq!(offset_of!(RtTaskCfgInfo, block_dim_offset), 4);
const_assert_eq!(offset_of!(RtTaskCfgInfo, dumpflag), 8);
const_assert_eq!(offset_of!(RtTaskCfgInfo, local_memory_size), 12);
const_assert_eq!(size_of::<RtLaunchKernelAttr>(), 20);
const_assert_eq!(size_of::<RtKernelLaunchCfg>(), 16);
const_assert_eq!(size_of::<RtLoadBinaryOption>(), 20);
const_assert_eq!(size_of::<RtLoadBinaryConfig>(), 16);
const_assert_eq!(offset_of!(RtAicpuArgsEx, pad0), 41);
const_assert_eq!(offset_of!(RtAicpuArgsEx, pad1), 45);
const_assert_eq!(offset_of!(RtArgsEx, pad), 36);

// No implicit padding anywhere: each size is the sum of its fields' sizes,
// so every byte handed to the runtime belongs to a field and is initialised.
const P: usize = size_of::<*mut c_void>();
const_assert_eq!(size_of::<RtDevBinary>(), 4 + 4 + P + 8);
const_assert_eq!(size_of::<RtArgsEx>(), 2 * P + 3 * 4 + 2 + 1 + 1 + 4 + 4);
const_assert_eq!(
    size_of::<RtAicpuArgsEx>(),
    3 * P + 4 + 2 + 2 + 4 + 4 + 1 + 1 + 2 + 1 + 3
);
const_assert_eq!(
    size_of::<RtCpuKernelArgs>(),
    size_of::<RtAicpuArgsEx>() + size_of::<usize>() + 16
);
const_assert_eq!(size_of::<RtTaskCfgInfo>(), 4 + 4 + 4 + 4);
const_assert_eq!(size_of::<RtLaunchKernelAttr>(), 4 + 16);
const_assert_eq!(size_of::<RtKernelLaunchCfg>(), P + size_of::<usize>());
const_assert_eq!(size_of::<RtLoadBinaryOption>(), 4 + 16);
const_assert_eq!(size_of::<RtLoadBinaryConfig>(), P + size_of::<usize>());

/// `aclrtCallback`: `void (*)(void* userData)`. Declared as the safe
/// function type this driver passes (a safe function pointer coerces to
/// the C one; the ABI is the same).
pub type AclrtCallback = extern "C" fn(user_data: *mut c_void);
/// `aclrtExceptionInfoCallback`: `void (*)(aclrtExceptionInfo*)`, the info
/// opaque (read through its accessors).
pub type AclrtExceptionInfoCallback = extern "C" fn(info: *mut c_void);

// Function-pointer types, one per C prototype used (`acl/acl_rt.h`,
// `runtime/rt_external_kernel.h`, `runtime/runtime/kernel.h`,
// `runtime/runtime/rts/rts_kernel.h`).
pub type FnAclInit = unsafe extern "C" fn(config: *const c_char) -> AclError;
pub type FnAclFinalizeReference = unsafe extern "C" fn(ref_count: *mut u64) -> AclError;
pub type FnAclGetRecentErrMsg = unsafe extern "C" fn() -> *const c_char;
pub type FnSetDevice = unsafe extern "C" fn(device: i32) -> AclError;
pub type FnMalloc =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, policy: u32) -> AclError;
pub type FnFree = unsafe extern "C" fn(ptr: *mut c_void) -> AclError;
pub type FnMemcpy = unsafe extern "C" fn(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
) -> AclError;
pub type FnMemcpyAsync = unsafe extern "C" fn(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
    stream: AclrtStream,
) -> AclError;
pub type FnMemset =
    unsafe extern "C" fn(ptr: *mut c_void, max: usize, value: i32, count: usize) -> AclError;
pub type FnMemsetAsync = unsafe extern "C" fn(
    ptr: *mut c_void,
    max: usize,
    value: i32,
    count: usize,
    stream: AclrtStream,
) -> AclError;
pub type FnCreateStream = unsafe extern "C" fn(stream: *mut AclrtStream) -> AclError;
pub type FnStream = unsafe extern "C" fn(stream: AclrtStream) -> AclError;
pub type FnStreamQuery = unsafe extern "C" fn(stream: AclrtStream, status: *mut u32) -> AclError;
pub type FnStreamSyncTimeout =
    unsafe extern "C" fn(stream: AclrtStream, timeout_ms: i32) -> AclError;
pub type FnGetVersion =
    unsafe extern "C" fn(major: *mut i32, minor: *mut i32, patch: *mut i32) -> AclError;
pub type FnGetCurrentContext = unsafe extern "C" fn(context: *mut AclrtContext) -> AclError;
pub type FnSetCurrentContext = unsafe extern "C" fn(context: AclrtContext) -> AclError;
pub type FnCreateEventWithFlag =
    unsafe extern "C" fn(event: *mut AclrtEvent, flag: u32) -> AclError;
pub type FnEvent = unsafe extern "C" fn(event: AclrtEvent) -> AclError;
pub type FnRecordEvent = unsafe extern "C" fn(event: AclrtEvent, stream: AclrtStream) -> AclError;
pub type FnQueryEventStatus = unsafe extern "C" fn(event: AclrtEvent, status: *mut u32) -> AclError;
pub type FnEventSyncTimeout = unsafe extern "C" fn(event: AclrtEvent, timeout_ms: i32) -> AclError;
pub type FnStreamWaitEvent =
    unsafe extern "C" fn(stream: AclrtStream, event: AclrtEvent) -> AclError;
pub type FnEventElapsed =
    unsafe extern "C" fn(ms: *mut f32, start: AclrtEvent, end: AclrtEvent) -> AclError;
pub type FnEventTimestamp =
    unsafe extern "C" fn(event: AclrtEvent, timestamp: *mut u64) -> AclError;
pub type FnSetOpTimeout = unsafe extern "C" fn(timeout_us: u64, actual_us: *mut u64) -> AclError;
pub type FnGetDeviceCount = unsafe extern "C" fn(count: *mut u32) -> AclError;
pub type FnGetSocName = unsafe extern "C" fn() -> *const c_char;
pub type FnRegisterAllKernel =
    unsafe extern "C" fn(bin: *const RtDevBinary, handle: *mut *mut c_void) -> AclError;
pub type FnKernelLaunchWithHandleV2 = unsafe extern "C" fn(
    handle: *mut c_void,
    tiling_key: u64,
    block_dim: u32,
    args: *mut RtArgsEx,
    sm_desc: *mut c_void,
    stream: AclrtStream,
    cfg: *const RtTaskCfgInfo,
) -> AclError;
pub type FnBinaryLoadFromFile = unsafe extern "C" fn(
    path: *const c_char,
    cfg: *const RtLoadBinaryConfig,
    handle: *mut *mut c_void,
) -> AclError;
pub type FnBinaryUnload = unsafe extern "C" fn(handle: *mut c_void) -> AclError;
/// `rtDevBinaryUnRegister(void* hdl)` (deprecated in 9.x, still exported).
pub type FnDevBinaryUnRegister = unsafe extern "C" fn(handle: *mut c_void) -> AclError;
pub type FnFuncGetByName =
    unsafe extern "C" fn(bin: *mut c_void, name: *const c_char, func: *mut *mut c_void) -> AclError;
pub type FnLaunchCpuKernel = unsafe extern "C" fn(
    func: *mut c_void,
    block_dim: u32,
    stream: AclrtStream,
    cfg: *const RtKernelLaunchCfg,
    args: *mut RtCpuKernelArgs,
) -> AclError;
/// `aclrtSubscribeReport` / `aclrtUnSubscribeReport(uint64_t threadId,
/// aclrtStream stream)`.
pub type FnSubscribeReport = unsafe extern "C" fn(thread_id: u64, stream: AclrtStream) -> AclError;
/// `aclrtProcessReport(int32_t timeout)`.
pub type FnProcessReport = unsafe extern "C" fn(timeout_ms: i32) -> AclError;
/// `aclrtLaunchCallback(aclrtCallback fn, void* userData,
/// aclrtCallbackBlockType blockType, aclrtStream stream)`.
pub type FnLaunchCallback = unsafe extern "C" fn(
    callback: AclrtCallback,
    user_data: *mut c_void,
    block_type: u32,
    stream: AclrtStream,
) -> AclError;
/// `aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback)`.
pub type FnSetExceptionInfoCallback =
    unsafe extern "C" fn(callback: AclrtExceptionInfoCallback) -> AclError;
/// `uint32_t aclrtGetDeviceIdFromExceptionInfo(const aclrtExceptionInfo*)`
/// (0xFFFFFFFF for NULL).
pub type FnExceptionInfoField = unsafe extern "C" fn(info: *const c_void) -> u32;
/// `aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode)`.
pub type FnCaptureBegin = unsafe extern "C" fn(stream: AclrtStream, mode: u32) -> AclError;
/// `aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus*
/// status, aclmdlRI* modelRI)` (either out-pointer may be NULL, not both).
pub type FnCaptureGetInfo =
    unsafe extern "C" fn(stream: AclrtStream, status: *mut u32, model: *mut AclmdlRI) -> AclError;
/// `aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI)`.
pub type FnCaptureEnd = unsafe extern "C" fn(stream: AclrtStream, model: *mut AclmdlRI) -> AclError;
/// `aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream)`.
pub type FnExecuteAsync = unsafe extern "C" fn(model: AclmdlRI, stream: AclrtStream) -> AclError;
/// `aclmdlRIDestroy(aclmdlRI modelRI)`.
pub type FnModelDestroy = unsafe extern "C" fn(model: AclmdlRI) -> AclError;
