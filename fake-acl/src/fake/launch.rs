//! The two kernel launches — `rtKernelLaunchWithHandleV2` (AICore, on a
//! registered program) and `rtsLaunchCpuKernel` (AICPU, on the op-info
//! binary's one function) — and `rtsBinaryLoadFromFile` /
//! `rtsFuncGetByName` / `rtsBinaryUnload`. The launch structs are the fake's
//! own mirrors of `rtArgsEx_t` and `rtCpuKernelArgs_t`, written from the CANN
//! headers independently of the driver's, so a layout mistake on either side
//! shows as a launch that fails or computes the wrong thing.
//!
//! Each launch reads exactly `argsSize` bytes of host arguments from the
//! struct's `args` pointer — a `RunArgs` block or a workload block of any
//! size — and hands them to the simulator unchanged; the simulator judges
//! them. The launch's kind and `argsSize` are recorded first
//! (`FakeRuntime::aicore_launches`, `aicpu_launches`, `last_args_size`), so
//! a test can tell a launch the driver refused from one the runtime saw.

use std::ffi::{CStr, c_char, c_int, c_void};

use runclaim::driver::abi::BlockBuf;
use runclaim::driver::acl::codes::Waited;
use runclaim::driver::{Driver, DriverError, DriverErrorKind, Op};

use super::code::program;
use super::shim::{call, host, opaque, stream_of};
use super::{PARAM_INVALID, current, note, set_message};

/// The AICPU Run kernel's name in the fake op-info binary.
const AICPU_FUNCTION: &CStr = c"runclaim_aicpu_run";

/// Mirrors `rtArgsEx_t`, padding included (as the driver fills it).
#[repr(C)]
pub struct ArgsEx {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    args_size: u32,
    tiling_addr_offset: u32,
    tiling_data_offset: u32,
    host_input_info_num: u16,
    has_tiling: u8,
    is_no_need_h2d_copy: u8,
    reserved: [u8; 4],
    pad: [u8; 4],
}

/// Mirrors `rtCpuKernelArgs_t`, padding included.
#[repr(C)]
pub struct CpuKernelArgs {
    args: *mut c_void,
    host_input_info_ptr: *mut c_void,
    kernel_offset_info_ptr: *mut c_void,
    args_size: u32,
    host_input_info_num: u16,
    kernel_offset_info_num: u16,
    so_name_addr_offset: u32,
    kernel_name_addr_offset: u32,
    is_no_need_h2d_copy: u8,
    pad0: u8,
    timeout: u16,
    reserved: u8,
    pad1: [u8; 3],
    cpu_param_head_offset: usize,
    rsv: [u32; 4],
}

const _: () = assert!(std::mem::size_of::<ArgsEx>() == 40);
const _: () = assert!(std::mem::size_of::<CpuKernelArgs>() == 72);

/// Which launch reached the runtime with host arguments.
#[derive(Clone, Copy)]
enum Launch {
    Aicore,
    Aicpu,
}

/// Records a launch whose `argsSize` bytes of host arguments were read
/// (whatever the simulator then makes of them).
fn note_launch(kind: Launch, args_size: u32) {
    if let Some(id) = current() {
        note(id, |rt| {
            match kind {
                Launch::Aicore => rt.aicore_launches += 1,
                Launch::Aicpu => rt.aicpu_launches += 1,
            }
            rt.last_args_size = u64::from(args_size);
        });
    }
}

/// Counts a launch struct whose reserved or padding bytes are not zero.
fn check_reserved(clean: bool) {
    if !clean && let Some(id) = current() {
        note(id, |rt| rt.dirty_launch_structs += 1);
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtKernelLaunchWithHandleV2(
    hdl: *mut c_void,
    _tiling_key: u64,
    block_dim: u32,
    args: *mut ArgsEx,
    _sm_desc: *mut c_void,
    stm: *mut c_void,
    _cfg: *const c_void,
) -> c_int {
    if args.is_null() {
        set_message("NULL argsInfo");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtArgsEx_t (rt contract); the driver
    // initialises every byte (padding is an explicit field there).
    let a = unsafe { &*args };
    check_reserved(
        a.reserved == [0; 4]
            && a.pad == [0; 4]
            && a.host_input_info_ptr.is_null()
            && a.host_input_info_num == 0,
    );
    // SAFETY: `args` readable for `argsSize` bytes (rt contract); NULL refused.
    let Some(blob) = (unsafe { host(a.args, a.args_size as usize) }) else {
        set_message("NULL args");
        return PARAM_INVALID;
    };
    note_launch(Launch::Aicore, a.args_size);
    let Some((device, code)) = program(hdl.addr() as u64) else {
        set_message(&format!(
            "unknown or unregistered program handle {:#x}",
            hdl.addr()
        ));
        return PARAM_INVALID;
    };
    call(Waited::Stream, |id, s| {
        if device != id {
            return Err(DriverError::new(
                Op::LaunchAicore,
                DriverErrorKind::InvalidArgument {
                    what: "the program was registered on another device (a fake limitation)",
                },
            ));
        }
        // The device receives bytes: its simulator decodes and checks them
        // as the device would (the host driver checked the ranges).
        let block = BlockBuf::from_bytes(blob);
        s.launch_aicore(
            stream_of(id, Op::LaunchAicore, stm)?,
            code,
            block_dim,
            block.args(),
        )
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsBinaryLoadFromFile(
    path: *const c_char,
    _cfg: *const c_void,
    handle: *mut *mut c_void,
) -> c_int {
    if path.is_null() || handle.is_null() {
        set_message("NULL argument");
        return PARAM_INVALID;
    }
    // The fake's op-info binary is any path: there is one AICPU kernel.
    // SAFETY: non-NULL out-pointer (rt contract).
    unsafe { handle.write(opaque(0xb1)) };
    0
}

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsBinaryUnload(_handle: *mut c_void) -> c_int {
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsFuncGetByName(
    _bin: *mut c_void,
    name: *const c_char,
    func: *mut *mut c_void,
) -> c_int {
    if name.is_null() || func.is_null() {
        set_message("NULL argument");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, NUL-terminated (rt contract).
    if unsafe { CStr::from_ptr(name) } != AICPU_FUNCTION {
        set_message("no such AICPU function");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL out-pointer (rt contract).
    unsafe { func.write(opaque(0xf1)) };
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn rtsLaunchCpuKernel(
    _func: *mut c_void,
    _block_dim: u32,
    stm: *mut c_void,
    _cfg: *const c_void,
    args: *mut CpuKernelArgs,
) -> c_int {
    if args.is_null() {
        set_message("NULL argsInfo");
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at an rtCpuKernelArgs_t (rt contract); the
    // driver initialises every byte (padding is an explicit field there).
    let a = unsafe { &*args };
    check_reserved(
        a.pad0 == 0
            && a.reserved == 0
            && a.pad1 == [0; 3]
            && a.rsv == [0; 4]
            && a.cpu_param_head_offset == 0
            && a.host_input_info_ptr.is_null()
            && a.kernel_offset_info_ptr.is_null()
            && a.host_input_info_num == 0
            && a.kernel_offset_info_num == 0
            && a.so_name_addr_offset == 0
            && a.kernel_name_addr_offset == 0
            && a.is_no_need_h2d_copy == 0
            && a.timeout == 0,
    );
    // SAFETY: `args` readable for `argsSize` bytes (rt contract); NULL refused.
    let Some(blob) = (unsafe { host(a.args, a.args_size as usize) }) else {
        set_message("NULL args");
        return PARAM_INVALID;
    };
    note_launch(Launch::Aicpu, a.args_size);
    call(Waited::Stream, |id, s| {
        let block = BlockBuf::from_bytes(blob);
        s.launch_aicpu(stream_of(id, Op::LaunchAicpu, stm)?, block.args())
    })
}
