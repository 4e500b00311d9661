//! The real Ascend runtime, loaded at run time with `libloading` (CANN 8.5
//! and later): `libascendcl.so` for the `acl*` / `aclrt*` API and
//! `libruntime.so` for the `rt*` / `rts*` kernel API. No link-time
//! dependency: the crate builds anywhere, and loading never panics.
//!
//! Three layers:
//! - `load` — library search and a function-pointer table that owns both
//!   libraries (no logic, no globals); every missing required symbol is
//!   reported in one [`LoadError`];
//! - thin wrappers turning return codes into [`DriverError`]s that carry the
//!   API name, the code and `aclGetRecentErrMsg()` ([`codes`]);
//! - the [`Driver`] implementation, [`AclDriver`].
//!
//! # Library search
//!
//! For each library, the first of these that loads: the explicit path in
//! [`AclConfig`]; the override variable (`RUNCLAIM_LIBASCENDCL`,
//! `RUNCLAIM_LIBRUNTIME`); `$ASCEND_HOME_PATH` then `$ASCEND_TOOLKIT_HOME`
//! (`lib64/`, `runtime/lib64/`); `/usr/local/Ascend/ascend-toolkit/latest`
//! (`lib64/`, `runtime/lib64/`); the bare name (the system loader's search).
//! A failure lists every path tried with the loader's message.
//!
//! # Symbols
//!
//! Required: `aclInit`, `aclrtSetDevice`, `aclrtResetDevice`, `aclrtMalloc`,
//! `aclrtFree`, `aclrtMemcpy`, `aclrtMemcpyAsync`, `aclrtMemset`,
//! `aclrtMemsetAsync`, `aclrtCreateStream`, `aclrtDestroyStream`,
//! `aclrtStreamQuery`, `aclrtSynchronizeStreamWithTimeout`,
//! `aclrtCreateEventWithFlag`, `aclrtDestroyEvent`, `aclrtRecordEvent`,
//! `aclrtQueryEventStatus`, `aclrtStreamWaitEvent`, `aclrtEventElapsedTime`;
//! `rtRegisterAllKernel`, `rtKernelLaunchWithHandleV2`,
//! `rtsBinaryLoadFromFile`, `rtsFuncGetByName`, `rtsLaunchCpuKernel`.
//!
//! Optional, each a [`Capabilities`] flag with a fallback:
//!
//! | symbol | capability | without it |
//! |---|---|---|
//! | `aclrtSynchronizeEventWithTimeout` | `EVENT_SYNC_TIMEOUT` | poll `aclrtQueryEventStatus` until the deadline |
//! | `aclrtEventGetTimestamp` | `EVENT_TIMESTAMP` | `event_timestamp` is `Unsupported` |
//! | `aclGetRecentErrMsg` | `ERROR_MESSAGE` | errors carry API and code only |
//! | `aclrtSetOpExecuteTimeOutV2` | `WATCHDOG_CONTROL` | the watchdog must be declared in `DeviceConfig` |
//! | `aclrtDestroyStreamForce` | `FORCE_DESTROY` | a faulted stream is destroyed with `aclrtDestroyStream` |
//! | `aclFinalizeReference`, `rtsBinaryUnload` | — | not called at drop |
//!
//! # Threads
//!
//! ACL binds a device per thread (`aclrtSetDevice`). Every call this driver
//! makes from a thread that has not bound its device binds it first, so a
//! run may be launched on one thread and fenced on another.
//!
//! # Kernels
//!
//! The AICore kernel is launched with `rtKernelLaunchWithHandleV2` on the
//! handle `rtRegisterAllKernel` returned for the callable's code (an AICore
//! ELF), the AICPU Run kernel with `rtsLaunchCpuKernel` on a function found by
//! name in the op-info binary of [`AclConfig::aicpu_binary`]. Both receive the
//! [`RunArgs`] block as host arguments, which the runtime copies at launch:
//! a deployment's kernels implement the [`abi`](crate::driver::abi).
//!
//! ```no_run
//! use runclaim::driver::acl::{AclConfig, AclDriver};
//! use runclaim::{Device, DeviceConfig};
//!
//! let acl = AclDriver::open(AclConfig::new(0, "/opt/kernels/runclaim_aicpu.json"))?;
//! let device = Device::<_, 2>::open(acl, DeviceConfig::default().device_watchdog(std::time::Duration::from_secs(5)))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod codes;
mod ffi;
mod load;

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_void};
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut, without_provenance_mut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use self::load::{Attempt, Lib, LoadError};

use self::codes::{
    ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_RT_EVENT_NOT_COMPLETE, ACL_ERROR_RT_STREAM_NOT_COMPLETE,
};
use self::ffi::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, ACL_EVENT_RECORDED_STATUS_NOT_READY, ACL_EVENT_SYNC,
    ACL_EVENT_TIME_LINE, ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_STREAM_STATUS_COMPLETE,
    ACL_STREAM_STATUS_NOT_READY, RT_DEV_BINARY_MAGIC_ELF, RT_LOAD_BINARY_OPT_CPU_KERNEL_MODE,
    RT_SCHEM_MODE_BATCH, RtAicpuArgsEx, RtArgsEx, RtCpuKernelArgs, RtDevBinary, RtKernelLaunchCfg,
    RtLaunchKernelAttr, RtLoadBinaryConfig, RtLoadBinaryOption, RtTaskCfgInfo,
};
use self::load::Api;
use super::abi::{RunArgs, TICKS_PER_SEC};
use super::{
    Capabilities, CodeHandle, Completion, DevPtr, Driver, DriverError, DriverInfo, ErrorKind,
    EventId, Native, Op, Registration, StreamId,
};

/// How to load and open the runtime.
///
/// ```
/// use std::time::Duration;
/// use runclaim::driver::acl::AclConfig;
///
/// let cfg = AclConfig::new(0, "/opt/kernels/runclaim_aicpu.json")
///     .libraries("/opt/cann/lib64/libascendcl.so", "/opt/cann/lib64/libruntime.so")
///     .op_watchdog(Duration::from_secs(5));
/// assert_eq!(cfg.aicpu_function, "runclaim_aicpu_run");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AclConfig {
    /// The device (`aclrtSetDevice` id).
    pub device_id: i32,
    /// Explicit path of `libascendcl.so` (searched first).
    pub ascendcl: Option<PathBuf>,
    /// Explicit path of `libruntime.so` (searched first).
    pub runtime: Option<PathBuf>,
    /// Op-info binary holding the AICPU Run kernel (`rtsBinaryLoadFromFile`).
    pub aicpu_binary: PathBuf,
    /// The AICPU Run kernel's function name (`rtsFuncGetByName`).
    pub aicpu_function: String,
    /// AICPU threads per run (`rtsLaunchCpuKernel` block count; default 1).
    pub aicpu_threads: u32,
    /// Largest `block_dim` (default 24 AICore blocks, a2a3).
    pub max_block_dim: u32,
    /// Set the device's op watchdog to this (`aclrtSetOpExecuteTimeOutV2`)
    /// and report what the device actually applied. `None` leaves the
    /// process-wide setting alone; then declare the watchdog in
    /// [`DeviceConfig`](crate::DeviceConfig).
    pub op_watchdog: Option<Duration>,
}

impl AclConfig {
    /// Device `device_id`, AICPU kernel `runclaim_aicpu_run` in `aicpu_binary`,
    /// libraries found by the search order.
    pub fn new(device_id: i32, aicpu_binary: impl Into<PathBuf>) -> Self {
        AclConfig {
            device_id,
            ascendcl: None,
            runtime: None,
            aicpu_binary: aicpu_binary.into(),
            aicpu_function: "runclaim_aicpu_run".into(),
            aicpu_threads: 1,
            max_block_dim: 24,
            op_watchdog: None,
        }
    }

    /// Sets explicit library paths.
    #[must_use]
    pub fn libraries(mut self, ascendcl: impl Into<PathBuf>, runtime: impl Into<PathBuf>) -> Self {
        self.ascendcl = Some(ascendcl.into());
        self.runtime = Some(runtime.into());
        self
    }

    /// Sets [`AclConfig::op_watchdog`].
    #[must_use]
    pub fn op_watchdog(mut self, watchdog: Duration) -> Self {
        self.op_watchdog = Some(watchdog);
        self
    }
}

/// Why [`AclDriver::open`] failed.
///
/// ```
/// use runclaim::driver::acl::{AclConfig, AclDriver, OpenError};
///
/// let cfg = AclConfig::new(0, "op.json").libraries("/nowhere/a.so", "/nowhere/b.so");
/// match AclDriver::open(cfg) {
///     Err(OpenError::Load(e)) => println!("cannot load the runtime: {e}"),
///     Err(OpenError::Runtime(e)) => println!("a set-up call failed: {e}"),
///     Err(e) => println!("{e}"),
///     Ok(_) => unreachable!("no runtime at /nowhere"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// A library was not found, or lacks required symbols.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A runtime call during set-up failed.
    #[error(transparent)]
    Runtime(#[from] DriverError),
    /// A path or name cannot be passed to C (interior NUL, not UTF-8).
    #[error("{0} cannot be passed to the runtime (NUL byte or not UTF-8)")]
    BadString(&'static str),
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// Upload stamps ([`CodeHandle::upload`]): one counter for the process, so
/// stamps increase across every `AclDriver` sharing a device.
static UPLOADS: AtomicU64 = AtomicU64::new(0);

/// One registration the runtime holds.
struct Resident {
    /// The runtime's handle.
    raw: u64,
    /// Its upload stamp.
    upload: u64,
    /// The image, kept alive while registered.
    image: Vec<u8>,
}

thread_local! {
    /// Driver instances whose device this thread has bound.
    static BOUND: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

fn handle(addr: u64) -> *mut c_void {
    // Runtime handles and device addresses are opaque to Rust: never
    // dereferenced here, so they carry no provenance.
    without_provenance_mut(usize::try_from(addr).unwrap_or(usize::MAX))
}

fn addr(p: *mut c_void) -> u64 {
    p.addr() as u64
}

/// Timeout in whole milliseconds for the C API, rounded up, at least 1.
fn millis(t: Duration) -> i32 {
    i32::try_from(t.as_micros().div_ceil(1000).max(1)).unwrap_or(i32::MAX)
}

/// The Ascend runtime as a [`Driver`]. See the [module documentation](self).
///
/// ```
/// use runclaim::driver::acl::{AclConfig, AclDriver};
///
/// let (required, optional) = AclDriver::symbols();
/// assert!(required.contains(&"rtKernelLaunchWithHandleV2"));
/// assert!(optional.contains(&"aclrtSynchronizeEventWithTimeout"));
/// // On an Ascend machine: AclDriver::open(AclConfig::new(0, "op-info.json"))?
/// # let _ = AclConfig::new(0, "x");
/// ```
pub struct AclDriver {
    api: Api,
    instance: u64,
    device: i32,
    aicpu_bin: u64,
    aicpu_func: u64,
    aicpu_threads: u32,
    max_block_dim: u32,
    watchdog: Option<Duration>,
    caps: Capabilities,
    /// Code resident at each handle the runtime returned, with its upload
    /// stamp: registering bytes found here is a dedup hit; a handle
    /// returned again holds new code (a new upload).
    code: Mutex<Vec<Resident>>,
}

impl std::fmt::Debug for AclDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclDriver")
            .field("device", &self.device)
            .field("ascendcl", &self.api.ascendcl_path)
            .field("runtime", &self.api.runtime_path)
            .field("capabilities", &self.caps)
            .finish_non_exhaustive()
    }
}

impl AclDriver {
    /// Loads the runtime, initializes ACL (`aclInit`; a repeated init is
    /// fine), binds the device on this thread, applies the op watchdog if
    /// configured, and loads the AICPU Run kernel.
    ///
    /// # Errors
    /// [`OpenError::Load`] with every path tried or every missing symbol;
    /// [`OpenError::Runtime`] when a set-up call fails.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "configurations are built inline and handed over, like std's builders"
    )]
    pub fn open(config: AclConfig) -> Result<Self, OpenError> {
        let env = |k: &str| std::env::var_os(k);
        let acl = load::open(Lib::AscendCl, config.ascendcl.as_deref(), &env)?;
        let rt = load::open(Lib::Runtime, config.runtime.as_deref(), &env)?;
        let api = Api::resolve(acl, rt)?;
        let mut caps = Capabilities::empty();
        caps.set(
            Capabilities::EVENT_SYNC_TIMEOUT,
            api.event_sync_timeout.is_some(),
        );
        caps.set(Capabilities::EVENT_TIMESTAMP, api.event_timestamp.is_some());
        caps.set(Capabilities::ERROR_MESSAGE, api.recent_err_msg.is_some());
        caps.set(Capabilities::WATCHDOG_CONTROL, api.set_op_timeout.is_some());
        caps.set(
            Capabilities::FORCE_DESTROY,
            api.destroy_stream_force.is_some(),
        );
        let path = config
            .aicpu_binary
            .to_str()
            .and_then(|p| CString::new(p).ok())
            .ok_or(OpenError::BadString("aicpu_binary"))?;
        let func = CString::new(config.aicpu_function.as_str())
            .map_err(|_| OpenError::BadString("aicpu_function"))?;
        let mut d = AclDriver {
            api,
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            device: config.device_id,
            aicpu_bin: 0,
            aicpu_func: 0,
            aicpu_threads: config.aicpu_threads.max(1),
            max_block_dim: config.max_block_dim,
            watchdog: None,
            caps,
            code: Mutex::new(Vec::new()),
        };
        // SAFETY: aclInit accepts NULL for "no config file".
        let rc = unsafe { (d.api.acl_init)(null()) };
        if rc != 0 && rc != ACL_ERROR_REPEAT_INITIALIZE {
            return Err(d.fail(Op::Open, "aclInit", rc).into());
        }
        d.bind(Op::Open)?;
        if let (Some(w), Some(set)) = (config.op_watchdog, d.api.set_op_timeout) {
            let mut actual = 0u64;
            let us = u64::try_from(w.as_micros()).unwrap_or(u64::MAX);
            // SAFETY: `actual` is a valid out-pointer for the call.
            let rc = unsafe { set(us, &raw mut actual) };
            d.check(Op::Open, "aclrtSetOpExecuteTimeOutV2", rc)?;
            d.watchdog = Some(Duration::from_micros(actual.max(us)));
        }
        let mut option = RtLoadBinaryOption {
            option_id: RT_LOAD_BINARY_OPT_CPU_KERNEL_MODE,
            value: [0; 4],
        };
        let cfg = RtLoadBinaryConfig {
            options: &raw mut option,
            num_opt: 1,
        };
        let mut bin = null_mut();
        // SAFETY: `path` is a NUL-terminated string and `cfg` points at one
        // option, both alive for the call; `bin` is a valid out-pointer.
        let rc =
            unsafe { (d.api.binary_load_from_file)(path.as_ptr(), &raw const cfg, &raw mut bin) };
        d.check(Op::Open, "rtsBinaryLoadFromFile", rc)?;
        d.aicpu_bin = addr(bin);
        let mut f = null_mut();
        // SAFETY: `bin` came from rtsBinaryLoadFromFile; `func` is a
        // NUL-terminated string alive for the call; `f` a valid out-pointer.
        let rc = unsafe { (d.api.func_get_by_name)(bin, func.as_ptr(), &raw mut f) };
        d.check(Op::Open, "rtsFuncGetByName", rc)?;
        d.aicpu_func = addr(f);
        Ok(d)
    }

    /// The device id.
    #[must_use]
    pub fn device_id(&self) -> i32 {
        self.device
    }

    /// The optional features the loaded runtime offers.
    #[must_use]
    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// Where the two libraries were loaded from.
    #[must_use]
    pub fn library_paths(&self) -> (&Path, &Path) {
        (&self.api.ascendcl_path, &self.api.runtime_path)
    }

    /// Names of the required and optional symbols.
    #[must_use]
    pub fn symbols() -> (&'static [&'static str], &'static [&'static str]) {
        (Api::REQUIRED, Api::OPTIONAL)
    }

    /// The runtime's last error message on this thread, if it offers one.
    fn recent_message(&self) -> Option<String> {
        let f = self.api.recent_err_msg?;
        // SAFETY: no arguments; returns NULL or a NUL-terminated string that
        // stays valid until the next call on this thread. It is copied at once.
        let p = unsafe { f() };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-NULL and NUL-terminated per the API contract (above).
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        (!s.is_empty()).then_some(s)
    }

    fn fail(&self, op: Op, api: &'static str, code: i32) -> DriverError {
        let native = Native {
            api,
            code,
            message: self.recent_message(),
        };
        DriverError::with_native(op, codes::kind_of(code), native)
    }

    fn check(&self, op: Op, api: &'static str, code: i32) -> Result<(), DriverError> {
        if code == 0 {
            Ok(())
        } else {
            Err(self.fail(op, api, code))
        }
    }

    /// A timeout code with the wait that expired.
    fn timed_out(&self, op: Op, api: &'static str, code: i32, waited: Duration) -> DriverError {
        let e = self.fail(op, api, code);
        let native = e.native().cloned().unwrap_or(Native {
            api,
            code,
            message: None,
        });
        DriverError::with_native(op, ErrorKind::Timeout { waited }, native)
    }

    /// Binds this thread to the device, once per thread and driver.
    fn bind(&self, op: Op) -> Result<(), DriverError> {
        if BOUND.with(|b| b.borrow().contains(&self.instance)) {
            return Ok(());
        }
        // SAFETY: plain integer argument.
        let rc = unsafe { (self.api.set_device)(self.device) };
        self.check(op, "aclrtSetDevice", rc)?;
        BOUND.with(|b| b.borrow_mut().push(self.instance));
        Ok(())
    }

    fn query_event_raw(&self, event: EventId) -> Result<Completion, DriverError> {
        let mut status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
        // SAFETY: `status` is a valid out-pointer; the event handle is opaque.
        let rc = unsafe { (self.api.query_event_status)(handle(event.raw()), &raw mut status) };
        match rc {
            0 if status == ACL_EVENT_RECORDED_STATUS_COMPLETE => Ok(Completion::Complete),
            0 | ACL_ERROR_RT_EVENT_NOT_COMPLETE => Ok(Completion::NotReady),
            _ => Err(self.fail(Op::QueryEvent, "aclrtQueryEventStatus", rc)),
        }
    }

    fn query_stream_raw(&self, stream: StreamId) -> Result<Completion, DriverError> {
        let mut status = ACL_STREAM_STATUS_NOT_READY;
        // SAFETY: `status` is a valid out-pointer; the stream handle is opaque.
        let rc = unsafe { (self.api.stream_query)(handle(stream.raw()), &raw mut status) };
        match rc {
            0 if status == ACL_STREAM_STATUS_COMPLETE => Ok(Completion::Complete),
            0 | ACL_ERROR_RT_STREAM_NOT_COMPLETE => Ok(Completion::NotReady),
            _ => Err(self.fail(Op::QueryStream, "aclrtStreamQuery", rc)),
        }
    }

    fn check_args(op: Op, args: &[u8]) -> Result<[u8; RunArgs::SIZE], DriverError> {
        <[u8; RunArgs::SIZE]>::try_from(args).map_err(|_| {
            DriverError::new(
                op,
                ErrorKind::InvalidArgument {
                    what: "argument block is not RunArgs::SIZE bytes",
                },
            )
        })
    }
}

impl Drop for AclDriver {
    fn drop(&mut self) {
        // Best effort, errors ignored: a drop cannot report them.
        if self.bind(Op::Open).is_err() {
            return;
        }
        if let Some(unload) = self.api.binary_unload
            && self.aicpu_bin != 0
        {
            // SAFETY: the handle came from rtsBinaryLoadFromFile and is
            // unloaded once.
            let _ = unsafe { unload(handle(self.aicpu_bin)) };
        }
        // SAFETY: plain integer argument; balances this thread's bind.
        let _ = unsafe { (self.api.reset_device)(self.device) };
        BOUND.with(|b| b.borrow_mut().retain(|&i| i != self.instance));
        if let Some(fin) = self.api.finalize_reference {
            let mut refs = 0u64;
            // SAFETY: `refs` is a valid out-pointer.
            let _ = unsafe { fin(&raw mut refs) };
        }
    }
}

impl Driver for AclDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            max_block_dim: self.max_block_dim,
            stream_capacity: 1792,
            watchdog: self.watchdog,
            capabilities: self.caps,
        }
    }

    fn alloc(&self, bytes: usize) -> Result<DevPtr, DriverError> {
        self.bind(Op::Alloc)?;
        if bytes == 0 {
            return Err(DriverError::new(
                Op::Alloc,
                ErrorKind::InvalidArgument {
                    what: "allocation size is 0",
                },
            ));
        }
        let mut p = null_mut();
        // SAFETY: `p` is a valid out-pointer; size and policy by value.
        let rc = unsafe { (self.api.malloc)(&raw mut p, bytes, ACL_MEM_MALLOC_HUGE_FIRST) };
        match self.check(Op::Alloc, "aclrtMalloc", rc) {
            Ok(()) => Ok(DevPtr::from_raw(addr(p))),
            Err(e) if matches!(e.kind(), ErrorKind::OutOfMemory { .. }) => {
                Err(DriverError::with_native(
                    Op::Alloc,
                    ErrorKind::OutOfMemory {
                        bytes: bytes as u64,
                    },
                    e.native().cloned().unwrap_or(Native {
                        api: "aclrtMalloc",
                        code: rc,
                        message: None,
                    }),
                ))
            }
            Err(e) => Err(e),
        }
    }

    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        self.bind(Op::Free)?;
        // SAFETY: the runtime validates the device address.
        let rc = unsafe { (self.api.free)(handle(ptr.raw())) };
        self.check(Op::Free, "aclrtFree", rc)
    }

    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        self.bind(Op::CopyToDevice)?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: `src` is readable for `src.len()` bytes for the duration of
        // this synchronous copy; the runtime validates the device range.
        let rc = unsafe {
            (self.api.memcpy)(
                handle(dst.raw()),
                src.len(),
                src.as_ptr().cast(),
                src.len(),
                ACL_MEMCPY_HOST_TO_DEVICE,
            )
        };
        self.check(Op::CopyToDevice, "aclrtMemcpy", rc)
    }

    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        self.bind(Op::CopyFromDevice)?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: `dst` is writable for `dst.len()` bytes (destMax) for the
        // duration of this synchronous copy; the runtime validates `src`.
        let rc = unsafe {
            (self.api.memcpy)(
                dst.as_mut_ptr().cast(),
                dst.len(),
                handle(src.raw()),
                dst.len(),
                ACL_MEMCPY_DEVICE_TO_HOST,
            )
        };
        self.check(Op::CopyFromDevice, "aclrtMemcpy", rc)
    }

    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
        self.bind(Op::Memset)?;
        // SAFETY: device range validated by the runtime; values by value.
        let rc = unsafe { (self.api.memset)(handle(dst.raw()), len, i32::from(value), len) };
        self.check(Op::Memset, "aclrtMemset", rc)
    }

    fn copy_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        self.bind(Op::CopyAsync)?;
        // SAFETY: device-to-device: both ranges are device addresses the
        // runtime validates; nothing on the host is read or written.
        let rc = unsafe {
            (self.api.memcpy_async)(
                handle(dst.raw()),
                len,
                handle(src.raw()),
                len,
                ACL_MEMCPY_DEVICE_TO_DEVICE,
                handle(s.raw()),
            )
        };
        self.check(Op::CopyAsync, "aclrtMemcpyAsync", rc)
    }

    fn memset_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        value: u8,
        len: usize,
    ) -> Result<(), DriverError> {
        self.bind(Op::MemsetAsync)?;
        // SAFETY: device range validated by the runtime; values by value.
        let rc = unsafe {
            (self.api.memset_async)(
                handle(dst.raw()),
                len,
                i32::from(value),
                len,
                handle(s.raw()),
            )
        };
        self.check(Op::MemsetAsync, "aclrtMemsetAsync", rc)
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        self.bind(Op::CreateStream)?;
        let mut s = null_mut();
        // SAFETY: `s` is a valid out-pointer.
        let rc = unsafe { (self.api.create_stream)(&raw mut s) };
        self.check(Op::CreateStream, "aclrtCreateStream", rc)?;
        Ok(StreamId::from_raw(addr(s)))
    }

    fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        self.bind(Op::DestroyStream)?;
        // aclrtDestroyStream would wait for queued work; the trait refuses it
        // instead, and never syncs an error-state stream before destroying it.
        let destroy = match self.query_stream_raw(stream) {
            Ok(Completion::NotReady) => {
                return Err(DriverError::new(
                    Op::DestroyStream,
                    ErrorKind::StreamBusy { queued: 1 },
                ));
            }
            Ok(Completion::Complete) => (self.api.destroy_stream, "aclrtDestroyStream"),
            Err(_) => match self.api.destroy_stream_force {
                Some(f) => (f, "aclrtDestroyStreamForce"),
                None => (self.api.destroy_stream, "aclrtDestroyStream"),
            },
        };
        // SAFETY: the handle came from aclrtCreateStream and is destroyed once.
        let rc = unsafe { (destroy.0)(handle(stream.raw())) };
        self.check(Op::DestroyStream, destroy.1, rc)
    }

    fn query_stream(&self, stream: StreamId) -> Result<Completion, DriverError> {
        self.bind(Op::QueryStream)?;
        self.query_stream_raw(stream)
    }

    fn sync_stream(&self, stream: StreamId, timeout: Duration) -> Result<(), DriverError> {
        self.bind(Op::SyncStream)?;
        if timeout.is_zero() {
            return match self.query_stream_raw(stream)? {
                Completion::Complete => Ok(()),
                Completion::NotReady => Err(DriverError::new(
                    Op::SyncStream,
                    ErrorKind::Timeout { waited: timeout },
                )),
            };
        }
        // SAFETY: opaque handle and a timeout by value.
        let rc = unsafe { (self.api.stream_sync_timeout)(handle(stream.raw()), millis(timeout)) };
        match rc {
            0 => Ok(()),
            507_046 => Err(self.timed_out(
                Op::SyncStream,
                "aclrtSynchronizeStreamWithTimeout",
                rc,
                timeout,
            )),
            _ => Err(self.fail(Op::SyncStream, "aclrtSynchronizeStreamWithTimeout", rc)),
        }
    }

    fn create_event(&self) -> Result<EventId, DriverError> {
        self.bind(Op::CreateEvent)?;
        let mut e = null_mut();
        // SAFETY: `e` is a valid out-pointer. SYNC: usable in
        // aclrtStreamWaitEvent; TIME_LINE: timestamps and elapsed time.
        let rc =
            unsafe { (self.api.create_event)(&raw mut e, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE) };
        self.check(Op::CreateEvent, "aclrtCreateEventWithFlag", rc)?;
        Ok(EventId::from_raw(addr(e)))
    }

    fn destroy_event(&self, event: EventId) -> Result<(), DriverError> {
        self.bind(Op::DestroyEvent)?;
        // SAFETY: the handle came from aclrtCreateEventWithFlag.
        let rc = unsafe { (self.api.destroy_event)(handle(event.raw())) };
        self.check(Op::DestroyEvent, "aclrtDestroyEvent", rc)
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), DriverError> {
        self.bind(Op::RecordEvent)?;
        // SAFETY: opaque handles by value.
        let rc = unsafe { (self.api.record_event)(handle(event.raw()), handle(stream.raw())) };
        self.check(Op::RecordEvent, "aclrtRecordEvent", rc)
    }

    fn query_event(&self, event: EventId) -> Result<Completion, DriverError> {
        self.bind(Op::QueryEvent)?;
        self.query_event_raw(event)
    }

    fn sync_event(&self, event: EventId, timeout: Duration) -> Result<(), DriverError> {
        self.bind(Op::SyncEvent)?;
        let not_yet = || DriverError::new(Op::SyncEvent, ErrorKind::Timeout { waited: timeout });
        match self.api.event_sync_timeout {
            _ if timeout.is_zero() => match self.query_event_raw(event)? {
                Completion::Complete => Ok(()),
                Completion::NotReady => Err(not_yet()),
            },
            Some(sync) => {
                // SAFETY: opaque handle and a timeout by value.
                let rc = unsafe { sync(handle(event.raw()), millis(timeout)) };
                match rc {
                    0 => Ok(()),
                    507_047 => Err(self.timed_out(
                        Op::SyncEvent,
                        "aclrtSynchronizeEventWithTimeout",
                        rc,
                        timeout,
                    )),
                    _ => Err(self.fail(Op::SyncEvent, "aclrtSynchronizeEventWithTimeout", rc)),
                }
            }
            // Fallback without the timed sync: poll until the deadline.
            None => {
                let deadline = Instant::now() + timeout;
                loop {
                    if self.query_event_raw(event)? == Completion::Complete {
                        return Ok(());
                    }
                    if Instant::now() >= deadline {
                        return Err(not_yet());
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        }
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        self.bind(Op::StreamWaitEvent)?;
        // SAFETY: opaque handles by value.
        let rc = unsafe { (self.api.stream_wait_event)(handle(stream.raw()), handle(event.raw())) };
        self.check(Op::StreamWaitEvent, "aclrtStreamWaitEvent", rc)
    }

    fn event_elapsed(&self, start: EventId, end: EventId) -> Result<Duration, DriverError> {
        self.bind(Op::EventElapsed)?;
        let mut ms = 0f32;
        // SAFETY: `ms` is a valid out-pointer; opaque handles.
        let rc = unsafe {
            (self.api.event_elapsed)(&raw mut ms, handle(start.raw()), handle(end.raw()))
        };
        self.check(Op::EventElapsed, "aclrtEventElapsedTime", rc)?;
        Ok(Duration::from_secs_f64(f64::from(ms.max(0.0)) / 1000.0))
    }

    fn event_timestamp(&self, event: EventId) -> Result<u64, DriverError> {
        self.bind(Op::EventTimestamp)?;
        let Some(f) = self.api.event_timestamp else {
            return Err(DriverError::new(Op::EventTimestamp, ErrorKind::Unsupported));
        };
        let mut us = 0u64;
        // SAFETY: `us` is a valid out-pointer; opaque handle.
        let rc = unsafe { f(handle(event.raw()), &raw mut us) };
        self.check(Op::EventTimestamp, "aclrtEventGetTimestamp", rc)?;
        // Device uptime in µs → ticks of the 50 MHz counter.
        Ok(us.saturating_mul(TICKS_PER_SEC / 1_000_000))
    }

    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        self.bind(Op::RegisterCode)?;
        let mut resident = self.code.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = resident.iter().find(|r| r.image == code) {
            return Ok(Registration {
                handle: CodeHandle::from_raw(r.raw, r.upload),
                published: false,
            });
        }
        // Keep the image alive for as long as it is resident.
        let image = code.to_vec();
        let bin = RtDevBinary {
            magic: RT_DEV_BINARY_MAGIC_ELF,
            version: 0,
            data: image.as_ptr().cast(),
            length: image.len() as u64,
        };
        let mut h = null_mut();
        // SAFETY: `bin` describes `image`, readable for its length during the
        // call (and kept alive afterwards); `h` is a valid out-pointer.
        let rc = unsafe { (self.api.register_all_kernel)(&raw const bin, &raw mut h) };
        self.check(Op::RegisterCode, "rtRegisterAllKernel", rc)?;
        // A handle handed out again now holds this image, not its old one.
        let h = addr(h);
        let upload = UPLOADS.fetch_add(1, Ordering::Relaxed) + 1;
        resident.retain(|r| r.raw != h);
        resident.push(Resident {
            raw: h,
            upload,
            image,
        });
        Ok(Registration {
            handle: CodeHandle::from_raw(h, upload),
            published: true,
        })
    }

    fn code_epoch(&self) -> u64 {
        UPLOADS.load(Ordering::Relaxed)
    }

    fn launch_aicore(
        &self,
        s: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: &[u8],
    ) -> Result<(), DriverError> {
        self.bind(Op::LaunchAicore)?;
        let mut blob = Self::check_args(Op::LaunchAicore, args)?;
        // Only an upload this driver registered and still holds launches:
        // a forged handle, or one whose image was replaced, never reaches C.
        let known = self
            .code
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|r| r.raw == code.raw() && r.upload == code.upload());
        if !known {
            return Err(DriverError::new(
                Op::LaunchAicore,
                ErrorKind::BadHandle {
                    kind: super::HandleKind::Code,
                    raw: code.raw(),
                },
            ));
        }
        if block_dim == 0 || block_dim > self.max_block_dim {
            return Err(DriverError::new(
                Op::LaunchAicore,
                ErrorKind::InvalidArgument {
                    what: "block_dim is 0 or above the device maximum",
                },
            ));
        }
        let mut ex = RtArgsEx {
            args: blob.as_mut_ptr().cast(),
            host_input_info_ptr: null_mut(),
            args_size: RunArgs::SIZE_U32,
            tiling_addr_offset: 0,
            tiling_data_offset: 0,
            host_input_info_num: 0,
            has_tiling: 0,
            is_no_need_h2d_copy: 0,
            reserved: [0; 4],
        };
        let cfg = RtTaskCfgInfo {
            schem_mode: RT_SCHEM_MODE_BATCH,
            ..RtTaskCfgInfo::default()
        };
        // SAFETY: `ex.args` points at `blob` (72 bytes, alive for the call;
        // the runtime copies it to the device because isNoNeedH2DCopy = 0);
        // `cfg` is alive for the call; smDesc may be NULL; handles opaque.
        let rc = unsafe {
            (self.api.kernel_launch_v2)(
                handle(code.raw()),
                0,
                block_dim,
                &raw mut ex,
                null_mut(),
                handle(s.raw()),
                &raw const cfg,
            )
        };
        self.check(Op::LaunchAicore, "rtKernelLaunchWithHandleV2", rc)
    }

    fn launch_aicpu(&self, s: StreamId, args: &[u8]) -> Result<(), DriverError> {
        self.bind(Op::LaunchAicpu)?;
        let mut blob = Self::check_args(Op::LaunchAicpu, args)?;
        let mut cpu = RtCpuKernelArgs {
            base_args: RtAicpuArgsEx {
                args: blob.as_mut_ptr().cast(),
                host_input_info_ptr: null_mut(),
                kernel_offset_info_ptr: null_mut(),
                args_size: RunArgs::SIZE_U32,
                host_input_info_num: 0,
                kernel_offset_info_num: 0,
                so_name_addr_offset: 0,
                kernel_name_addr_offset: 0,
                is_no_need_h2d_copy: false,
                timeout: 0,
                reserved: 0,
            },
            cpu_param_head_offset: 0,
            rsv: [0; 4],
        };
        let mut attr = RtLaunchKernelAttr::default();
        let cfg = RtKernelLaunchCfg {
            attrs: &raw mut attr,
            num_attrs: 0,
        };
        // SAFETY: `cpu.base_args.args` points at `blob` (alive for the call;
        // copied by the runtime); `cfg` and `attr` are alive for the call;
        // the function handle came from rtsFuncGetByName.
        let rc = unsafe {
            (self.api.launch_cpu_kernel)(
                handle(self.aicpu_func),
                self.aicpu_threads,
                handle(s.raw()),
                &raw const cfg,
                &raw mut cpu,
            )
        };
        self.check(Op::LaunchAicpu, "rtsLaunchCpuKernel", rc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use static_assertions::assert_impl_all;

    assert_impl_all!(AclDriver: Send, Sync);

    #[test]
    fn millis_round_up_and_clamp() {
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_micros(1001)), 2);
        assert_eq!(millis(Duration::from_secs(5)), 5000);
        assert_eq!(millis(Duration::from_secs(u64::MAX / 2)), i32::MAX);
    }

    #[test]
    fn missing_libraries_are_reported_not_panicked() {
        let cfg = AclConfig::new(0, "/nonexistent.json")
            .libraries("/nonexistent/a.so", "/nonexistent/b.so");
        match AclDriver::open(cfg) {
            Err(OpenError::Load(LoadError::NotFound { lib, attempts })) => {
                assert_eq!(lib, Lib::AscendCl);
                assert!(!attempts.is_empty());
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
    }
}
