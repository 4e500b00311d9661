//! Code and kernels: one function per `rt*` / `rts*` entry point —
//! registering and unregistering AICore code, loading the AICPU op-info
//! binary and finding its function, and the two launches with their
//! zero-filled launch structs.
//!
//! # Host argument sizes
//!
//! Both launches take the run's argument block as *host* arguments, which
//! the runtime copies to the device at launch (`isNoNeedH2DCopy` = 0):
//! `rtArgsEx_t` / `rtAicpuArgsEx_t` carry their size as a `uint32_t
//! argsSize` (`runtime/rt_external_kernel.h`), and the public headers
//! document no smaller maximum for `rtKernelLaunchWithHandleV2` or
//! `rtsLaunchCpuKernel`. The largest block the driver passes is 64 KiB
//! (`MAX_HOST_ARGS`); runclaim's own largest is [`WorkArgs::MAX_SIZE`]
//! (9,296 bytes: 256 tensors and 128 scalars, the reference runtime's
//! limits), the a2a3 adapter's `A2a3Abi::MAX_BLOCK` (33,984 bytes).

use std::ffi::{CStr, c_void};
use std::mem::MaybeUninit;
use std::ptr::null_mut;

use static_assertions::const_assert;

use super::{AclResult, Failed, check};
use crate::driver::abi::{RunArgs, WorkArgs};
use crate::driver::acl::ffi::{
    RT_DEV_BINARY_MAGIC_ELF, RT_LOAD_BINARY_OPT_CPU_KERNEL_MODE, RT_SCHEM_MODE_BATCH, RtArgsEx,
    RtCpuKernelArgs, RtDevBinary, RtKernelLaunchCfg, RtLaunchKernelAttr, RtLoadBinaryConfig,
    RtLoadBinaryOption, RtTaskCfgInfo,
};
use crate::driver::acl::load::Api;
use crate::driver::acl::ptr::{Program, RtPtr};
use crate::driver::acl::tokens::{Args, MAX_HOST_ARGS, Stream};

/// `rtRegisterAllKernel` of an AICore ELF (`RT_DEV_BINARY_MAGIC_ELF`).
pub(in crate::driver::acl) fn register_all_kernel(
    api: &Api,
    image: Box<[u8]>,
) -> AclResult<Program> {
    let bin = RtDevBinary {
        magic: RT_DEV_BINARY_MAGIC_ELF,
        version: 0,
        data: image.as_ptr().cast(),
        length: image.len() as u64,
    };
    let mut h = null_mut();
    // SAFETY: `bin` describes `image`, readable for its length during the
    // call; the image then moves into the `Program`, which frees it only
    // after a successful unregistration (or never); `h` is a valid
    // out-pointer.
    let rc = unsafe { (api.register_all_kernel)(&raw const bin, &raw mut h) };
    check(api, "rtRegisterAllKernel", rc).map(|()| {
        // SAFETY: what the call returned, once it succeeded.
        let ptr = unsafe { RtPtr::from_runtime(h) };
        Program::new(ptr, image)
    })
}

/// `rtDevBinaryUnRegister`: the program is gone and its image freed. Handed
/// back, still registered, without the symbol or when the call fails.
pub(in crate::driver::acl) fn dev_binary_unregister(api: &Api, p: Program) -> Result<(), Program> {
    let Some(f) = api.dev_binary_unregister else {
        return Err(p);
    };
    // SAFETY: a registration from rtRegisterAllKernel, taken out of the
    // table by the caller (nothing can launch it any more): unregistered
    // once. Its image is freed only after the runtime let go of it.
    let rc = unsafe { f(p.ptr().get()) };
    if rc == 0 { Ok(()) } else { Err(p) }
}

/// A loaded AICPU op-info binary (`rtsBinaryLoadFromFile`).
#[derive(Debug)]
pub(in crate::driver::acl) struct Binary(RtPtr);

/// `rtsBinaryLoadFromFile` of an op-info JSON (CPU kernel mode 0: the JSON
/// only).
pub(in crate::driver::acl) fn binary_load_from_file(api: &Api, path: &CStr) -> AclResult<Binary> {
    let mut option = RtLoadBinaryOption {
        option_id: RT_LOAD_BINARY_OPT_CPU_KERNEL_MODE,
        value: [0; 4],
    };
    let cfg = RtLoadBinaryConfig {
        options: &raw mut option,
        num_opt: 1,
    };
    let mut bin = null_mut();
    // SAFETY: `path` is NUL-terminated and `cfg` points at one option, both
    // alive for the call; `bin` is a valid out-pointer.
    let rc = unsafe { (api.binary_load_from_file)(path.as_ptr(), &raw const cfg, &raw mut bin) };
    // SAFETY: what the call returned, once it succeeded.
    check(api, "rtsBinaryLoadFromFile", rc).map(|()| Binary(unsafe { RtPtr::from_runtime(bin) }))
}

/// `rtsBinaryUnload`: the binary, and every function found in it, is gone
/// (consumed). `None` without the symbol.
#[allow(
    clippy::needless_pass_by_value,
    reason = "taken by value so that nothing can use the binary after its unload"
)]
pub(in crate::driver::acl) fn binary_unload(api: &Api, bin: Binary) -> Option<AclResult<()>> {
    let f = api.binary_unload?;
    // SAFETY: a binary from rtsBinaryLoadFromFile, unloaded once (consumed
    // here); a function found in it went with the `AicpuKernel` the binary
    // was taken from, so none is launched afterwards.
    let rc = unsafe { f(bin.0.get()) };
    Some(check(api, "rtsBinaryUnload", rc))
}

/// The AICPU Run kernel: a function of a loaded binary, with the binary.
#[derive(Debug)]
pub(in crate::driver::acl) struct AicpuKernel {
    bin: Binary,
    func: RtPtr,
}

impl AicpuKernel {
    /// The binary, to unload (the function goes with it).
    pub(in crate::driver::acl) fn into_binary(self) -> Binary {
        self.bin
    }
}

/// `rtsFuncGetByName`: the function `name` of `bin`. On failure the binary
/// is handed back.
pub(in crate::driver::acl) fn func_get_by_name(
    api: &Api,
    bin: Binary,
    name: &CStr,
) -> Result<AicpuKernel, (Binary, Failed)> {
    let mut f = null_mut();
    // SAFETY: a loaded binary; `name` is NUL-terminated and alive for the
    // call; `f` is a valid out-pointer.
    let rc = unsafe { (api.func_get_by_name)(bin.0.get(), name.as_ptr(), &raw mut f) };
    match check(api, "rtsFuncGetByName", rc) {
        Ok(()) => Ok(AicpuKernel {
            bin,
            // SAFETY: what the call returned, and it succeeded.
            func: unsafe { RtPtr::from_runtime(f) },
        }),
        Err(e) => Err((bin, e)),
    }
}

/// Blocks up to this size are copied on the stack (runclaim's own: a
/// `WorkArgs` block is at most this); a larger one (a big a2a3 envelope)
/// on the heap, one allocation per launch.
const STACK_ARGS: usize = WorkArgs::MAX_SIZE;

/// The runtime's own copy of a validated argument block. The launch
/// structs' `args` is a `void*` (the headers do not promise the runtime
/// only reads through it), so the runtime is handed this private, writable
/// copy, never the caller's shared bytes. Only its first `size` bytes are
/// initialised; the runtime reads exactly `argsSize` = `size` of them.
#[allow(
    clippy::large_enum_variant,
    reason = "the stack copy is the point: it lives for one launch call"
)]
enum HostArgs {
    /// On the stack (no allocation per launch).
    Stack {
        buf: [MaybeUninit<u8>; STACK_ARGS],
        size: u32,
    },
    /// On the heap: exactly the block.
    Heap(Vec<u8>),
}

// Both built-in adapters' blocks fit the copy, and its length the launch
// structs' `u32`.
const_assert!(RunArgs::SIZE <= STACK_ARGS);
const_assert!(WorkArgs::MAX_SIZE <= MAX_HOST_ARGS);
const_assert!(crate::driver::abi::A2a3Abi::MAX_BLOCK <= MAX_HOST_ARGS);
const_assert!(MAX_HOST_ARGS <= u32::MAX as usize);

impl HostArgs {
    /// Copies `args` (at most [`MAX_HOST_ARGS`] bytes: [`Args`] is made
    /// only from a block the table checked is no longer).
    fn new(args: Args<'_>) -> Self {
        let src = args.bytes();
        let n = src.len().min(MAX_HOST_ARGS);
        debug_assert_eq!(n, src.len());
        if n > STACK_ARGS {
            return HostArgs::Heap(src[..n].to_vec());
        }
        let mut buf = [MaybeUninit::uninit(); STACK_ARGS];
        for (d, &b) in buf[..n].iter_mut().zip(&src[..n]) {
            d.write(b);
        }
        #[allow(
            clippy::cast_possible_truncation,
            reason = "n <= STACK_ARGS <= u32::MAX (asserted above)"
        )]
        let size = n as u32;
        HostArgs::Stack { buf, size }
    }

    /// The block's length, as the launch structs carry it.
    fn size(&self) -> u32 {
        match self {
            HostArgs::Stack { size, .. } => *size,
            #[allow(
                clippy::cast_possible_truncation,
                reason = "at most MAX_HOST_ARGS <= u32::MAX bytes (asserted above)"
            )]
            HostArgs::Heap(v) => v.len() as u32,
        }
    }

    /// Where the runtime reads the block (valid while `self` lives).
    fn ptr(&mut self) -> *mut c_void {
        match self {
            HostArgs::Stack { buf, .. } => buf.as_mut_ptr().cast(),
            HostArgs::Heap(v) => v.as_mut_ptr().cast(),
        }
    }
}

/// `rtKernelLaunchWithHandleV2`: `code` on `block_dim` AICore blocks on
/// stream `s`, with `args` as host arguments (the runtime copies them),
/// tiling key 0, no shared-memory descriptor, batch scheduling.
pub(in crate::driver::acl) fn kernel_launch_with_handle_v2(
    api: &Api,
    code: &Program,
    block_dim: u32,
    args: Args<'_>,
    s: Stream<'_>,
) -> AclResult<()> {
    let mut blob = HostArgs::new(args);
    let mut ex = RtArgsEx::zeroed();
    ex.args = blob.ptr();
    ex.args_size = blob.size();
    let cfg = RtTaskCfgInfo {
        schem_mode: RT_SCHEM_MODE_BATCH,
        ..RtTaskCfgInfo::default()
    };
    // SAFETY: `ex` is fully initialised (no padding: see ffi) and points at
    // `blob`, a local copy whose first `args_size` bytes are the validated
    // block (initialised, alive for the call, writable should the runtime
    // patch its input; the runtime copies it to the device because
    // isNoNeedH2DCopy = 0, and every device range in it — each tensor's
    // included — lies in a live allocation of this driver: `Args` is made
    // only by the table's check and borrows the table); `cfg` is alive for the call;
    // smDesc may be NULL; `code` is a registration the table holds and `s`
    // a live stream of this driver, both kept live by their borrows.
    let rc = unsafe {
        (api.kernel_launch_v2)(
            code.ptr().get(),
            0,
            block_dim,
            &raw mut ex,
            null_mut(),
            s.ptr().get(),
            &raw const cfg,
        )
    };
    check(api, "rtKernelLaunchWithHandleV2", rc)
}

/// `rtsLaunchCpuKernel`: the AICPU Run kernel on `threads` AICPU threads on
/// stream `s`, with `args` as host arguments (the runtime copies them).
pub(in crate::driver::acl) fn launch_cpu_kernel(
    api: &Api,
    kernel: &AicpuKernel,
    threads: u32,
    args: Args<'_>,
    s: Stream<'_>,
) -> AclResult<()> {
    let mut blob = HostArgs::new(args);
    let mut cpu = RtCpuKernelArgs::zeroed();
    cpu.base_args.args = blob.ptr();
    cpu.base_args.args_size = blob.size();
    // The runtime wants attribute storage even for zero attributes.
    let mut attr = RtLaunchKernelAttr::default();
    let cfg = RtKernelLaunchCfg {
        attrs: &raw mut attr,
        num_attrs: 0,
    };
    // SAFETY: `cpu` is fully initialised (no padding: see ffi) and its
    // `args` points at `blob`, a local copy whose first `args_size` bytes
    // are the validated block (initialised, alive for the call, writable;
    // copied by the runtime; its device ranges, each tensor's included,
    // checked by the table, which `Args` borrows); `cfg`
    // and `attr` are alive for the call; the function is one of a binary
    // this driver holds loaded (`kernel` is consumed by its unload); `s` is
    // a live stream of this driver.
    let rc = unsafe {
        (api.launch_cpu_kernel)(
            kernel.func.get(),
            threads,
            s.ptr().get(),
            &raw const cfg,
            &raw mut cpu,
        )
    };
    check(api, "rtsLaunchCpuKernel", rc)
}
