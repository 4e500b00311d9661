//! The real Ascend runtime, loaded at run time with `libloading` (CANN 8.5
//! and later, ACL 1.16+): `libascendcl.so` (or `libacl_rt.so`) for the
//! `acl*` / `aclrt*` API and `libruntime.so` for the `rt*` / `rts*` kernel
//! API. No link-time dependency: the crate builds anywhere, and loading never
//! panics.
//!
//! Four layers:
//! - `load` — library search and a function-pointer table (no logic); every
//!   missing required symbol is reported in one [`LoadError`] naming the
//!   file; libraries are never unloaded;
//! - `table` — what this driver created and has not destroyed; every handle
//!   a safe method receives is checked against it before any C call;
//! - thin wrappers turning return codes into [`DriverError`]s that carry the
//!   API name, the code and `aclGetRecentErrMsg()` ([`codes`]);
//! - the [`Driver`] implementation, [`AclDriver`].
//!
//! # Library search
//!
//! For each library, the first of these that loads: the explicit path in
//! [`AclConfig`] — **only** that path: if it fails, that is the error, and
//! nothing else is tried; otherwise the override variable
//! (`RUNCLAIM_LIBASCENDCL`, `RUNCLAIM_LIBRUNTIME`); `$ASCEND_HOME_PATH` then
//! `$ASCEND_TOOLKIT_HOME` (`lib64/`, `runtime/lib64/`);
//! `/usr/local/Ascend/cann` then `/usr/local/Ascend/ascend-toolkit/latest`
//! (`lib64/`, `runtime/lib64/`); the bare name (the system loader's search).
//! In each place `libascendcl.so` is tried before `libacl_rt.so`. A failure
//! lists every path tried with the loader's own message (`dlerror`); when
//! both libraries fail, both are reported.
//!
//! A library that loaded is **never unloaded**, not even when the last
//! driver is dropped: the vendor runtime runs its own threads and
//! thread-local destructors, which must never find their code unmapped.
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
//! Optional, each with a fallback (the first five are [`Capabilities`]):
//!
//! | symbol | capability | without it |
//! |---|---|---|
//! | `aclrtSynchronizeEventWithTimeout` | `EVENT_SYNC_TIMEOUT` | poll `aclrtQueryEventStatus` until the deadline |
//! | `aclrtEventGetTimestamp` | `EVENT_TIMESTAMP` | `event_timestamp` is `Unsupported` |
//! | `aclGetRecentErrMsg` | `ERROR_MESSAGE` | errors carry API and code only |
//! | `aclrtSetOpExecuteTimeOutV2` | `WATCHDOG_CONTROL` | the watchdog must be declared in `DeviceConfig` |
//! | `aclrtDestroyStreamForce` | `FORCE_DESTROY` | a faulted stream is destroyed with `aclrtDestroyStream` |
//! | `aclrtCreateEventExWithFlag` | — | events from `aclrtCreateEventWithFlag`; the driver answers for never-recorded ones |
//! | `aclrtGetCurrentContext`, `aclrtSetCurrentContext` | — | threads are bound with `aclrtSetDevice` (each counted and reset) |
//! | `aclrtGetVersion` | — | the version is not checked |
//! | `rtDevBinaryUnRegister` | — | registered code is kept for the process's life |
//! | `aclFinalizeReference`, `rtsBinaryUnload` | — | not called at drop |
//!
//! # Handles
//!
//! Every handle a method receives — stream, event, code, device address
//! with its byte range, and the device ranges inside a launch's argument
//! block — is checked against what *this* driver created and has not
//! destroyed **before any C call**. A forged, destroyed or foreign handle is
//! refused with [`DriverErrorKind::BadHandle`] or [`DriverErrorKind::BadAddress`] and no
//! [`Native`] detail (the runtime was not called). Device ranges must lie
//! inside one live allocation, and the runtime is told the true remaining
//! size of that allocation as `destMax`, so its own bound check is real.
//!
//! # Threads and device contexts
//!
//! ACL binds a device context per thread, and the last `aclrtSetDevice` on a
//! thread wins. Every call of this driver runs in this driver's context,
//! whatever else the thread did: where the runtime offers
//! `aclrtGetCurrentContext` / `aclrtSetCurrentContext`, the driver captures
//! its device's context once and restores it on any thread whose current
//! context differs (one `aclrtSetDevice` per driver in total); otherwise it
//! remembers, per thread, which driver bound it last and calls
//! `aclrtSetDevice` when that is not itself. Every successful
//! `aclrtSetDevice` is counted and gets its `aclrtResetDevice` when the
//! driver drops, so the device's reference count balances.
//!
//! # Events
//!
//! Events are created with `aclrtCreateEventExWithFlag(ACL_EVENT_SYNC |
//! ACL_EVENT_TIME_LINE)`, whose never-recorded events report complete and
//! satisfy a stream wait at once, as [`Driver::create_event`] documents.
//! Without that symbol the driver falls back to `aclrtCreateEventWithFlag`,
//! whose never-recorded events the runtime reports *not ready* (and a stream
//! wait on one would queue a device wait nothing satisfies): the driver keeps
//! a per-event "recorded" flag and answers for such an event itself.
//!
//! # Timeouts
//!
//! `aclrtSynchronize*WithTimeout` takes whole milliseconds and rejects 0
//! (107000, whatever its header says). The driver never passes 0: a zero
//! timeout is a single status query, and a timeout below a millisecond is
//! rounded up to 1 ms. A timeout above `i32::MAX` ms is clamped to it; the
//! polling fallback treats a timeout too large for a deadline as no limit.
//!
//! # Kernels
//!
//! The AICore kernel is launched with `rtKernelLaunchWithHandleV2` on the
//! handle `rtRegisterAllKernel` returned for the callable's code (an AICore
//! ELF), the AICPU Run kernel with `rtsLaunchCpuKernel` on a function found by
//! name in the op-info binary of [`AclConfig::aicpu_binary`]. Both receive the
//! [`RunArgs`] block as host arguments, which the runtime copies at launch:
//! a deployment's kernels implement the [`abi`](crate::driver::abi). The
//! launch structs are zero-filled (no undefined padding bytes).
//!
//! Each registration holds its image until it is unregistered: code is
//! unregistered (`rtDevBinaryUnRegister`) when no pin is left and this
//! driver uploads new code, and at drop; the image is freed only after its
//! unregistration succeeded — without the symbol, or if it fails, the image
//! is kept for the process's life (the runtime may hold a pointer to it).
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
mod table;

use std::cell::Cell;
use std::ffi::{CStr, CString, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut, without_provenance_mut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

pub use self::load::{Attempt, DEFAULT_ROOTS, Lib, LoadError, MissingSymbol, candidates};

use self::codes::{
    ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_RT_EVENT_NOT_COMPLETE, ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
    ACL_ERROR_RT_FEATURE_NOT_SUPPORT, ACL_ERROR_RT_STREAM_NOT_COMPLETE,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
};
use self::ffi::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, ACL_EVENT_RECORDED_STATUS_NOT_READY, ACL_EVENT_SYNC,
    ACL_EVENT_TIME_LINE, ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_STREAM_STATUS_COMPLETE,
    ACL_STREAM_STATUS_NOT_READY, RT_DEV_BINARY_MAGIC_ELF, RT_LOAD_BINARY_OPT_CPU_KERNEL_MODE,
    RT_SCHEM_MODE_BATCH, RtArgsEx, RtCpuKernelArgs, RtDevBinary, RtKernelLaunchCfg,
    RtLaunchKernelAttr, RtLoadBinaryConfig, RtLoadBinaryOption, RtTaskCfgInfo,
};
use self::load::Api;
use self::table::{Resident, Table};
use super::abi::{RunArgs, TICKS_PER_SEC};
use super::{
    Capabilities, CodeHandle, Completion, DevPtr, Driver, DriverError, DriverErrorKind, DriverInfo,
    EventId, HandleKind, Native, Op, Registration, StreamId,
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
    /// Explicit path of `libascendcl.so` / `libacl_rt.so`: the only one
    /// tried when set.
    pub ascendcl: Option<PathBuf>,
    /// Explicit path of `libruntime.so`: the only one tried when set.
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

    /// Sets explicit library paths (each then the only one tried).
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

/// An ACL version, as `aclrtGetVersion` reports it.
///
/// ```
/// use runclaim::driver::acl::AclVersion;
///
/// assert!(AclVersion::new(1, 15, 9) < AclVersion::MINIMUM);
/// assert_eq!(AclVersion::MINIMUM.to_string(), "1.16.0");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclVersion {
    /// Major version.
    pub major: i32,
    /// Minor version.
    pub minor: i32,
    /// Patch version.
    pub patch: i32,
}

impl AclVersion {
    /// The oldest version this driver supports: ACL 1.16, shipped with CANN
    /// 8.5 (the launch-struct layouts it is written against).
    pub const MINIMUM: AclVersion = AclVersion::new(1, 16, 0);

    /// `major.minor.patch`.
    #[must_use]
    pub const fn new(major: i32, minor: i32, patch: i32) -> Self {
        AclVersion {
            major,
            minor,
            patch,
        }
    }
}

impl fmt::Display for AclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
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
    /// The runtime is older than this driver supports.
    #[error(
        "the ACL runtime at {} is version {found}; runclaim needs ACL {required} (CANN 8.5) or later",
        .library.display()
    )]
    UnsupportedVersion {
        /// What `aclrtGetVersion` reported.
        found: AclVersion,
        /// The oldest supported version ([`AclVersion::MINIMUM`]).
        required: AclVersion,
        /// The library that reported it.
        library: PathBuf,
    },
}

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// What every `AclDriver` on one device id shares, for the process's life.
#[derive(Debug, Default)]
struct DeviceShared {
    /// Upload stamps ([`CodeHandle::upload`]): unique and increasing per
    /// device, across every driver instance on it.
    uploads: AtomicU64,
    /// Registrations the drivers of this process hold on the device (what
    /// a full code memory is reported as holding).
    programs: AtomicUsize,
}

fn device_shared(device: i32) -> Arc<DeviceShared> {
    static DEVICES: Mutex<Vec<(i32, Arc<DeviceShared>)>> = Mutex::new(Vec::new());
    let mut all = DEVICES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, s)) = all.iter().find(|(d, _)| *d == device) {
        return Arc::clone(s);
    }
    let s = Arc::new(DeviceShared::default());
    all.push((device, Arc::clone(&s)));
    s
}

/// Code images whose registration could not be released (no
/// `rtDevBinaryUnRegister`, or it failed): the runtime may still point at
/// them, so they live as long as the process.
static KEPT_IMAGES: Mutex<Vec<Box<[u8]>>> = Mutex::new(Vec::new());

fn keep_forever(image: Box<[u8]>) {
    KEPT_IMAGES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(image);
}

thread_local! {
    /// The driver instance that last bound this thread with `aclrtSetDevice`
    /// (0: none). No destructor, so it is readable even while the thread's
    /// other thread-locals are torn down.
    static BOUND: Cell<u64> = const { Cell::new(0) };
}

fn handle(addr: u64) -> *mut c_void {
    // Runtime handles and device addresses are opaque to Rust: never
    // dereferenced here, so they carry no provenance.
    without_provenance_mut(usize::try_from(addr).unwrap_or(usize::MAX))
}

fn addr(p: *mut c_void) -> u64 {
    p.addr() as u64
}

/// Timeout in whole milliseconds for the C API: rounded up, at least 1 (the
/// runtime rejects 0), at most `i32::MAX`.
fn millis(t: Duration) -> i32 {
    i32::try_from(t.as_micros().div_ceil(1000).max(1)).unwrap_or(i32::MAX)
}

/// An elapsed time the runtime reported, in ms, as a `Duration`.
fn elapsed_of(ms: f32) -> Result<Duration, &'static str> {
    if ms.is_nan() {
        return Err("elapsed time is NaN");
    }
    if ms < 0.0 {
        return Err("elapsed time is negative (end recorded before start?)");
    }
    Duration::try_from_secs_f64(f64::from(ms) / 1000.0)
        .map_err(|_| "elapsed time is infinite or too large")
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
    shared: Arc<DeviceShared>,
    /// This device's context, captured once where the runtime offers the
    /// context API (0: bind with `aclrtSetDevice` instead).
    ctx: u64,
    /// Successful `aclrtSetDevice` calls this driver made; each gets its
    /// `aclrtResetDevice` at drop.
    sets: AtomicU64,
    version: Option<AclVersion>,
    aicpu_bin: u64,
    aicpu_func: u64,
    aicpu_threads: u32,
    max_block_dim: u32,
    watchdog: Option<Duration>,
    caps: Capabilities,
    /// `aclrtCreateEventExWithFlag` is there and accepted.
    ex_events: AtomicBool,
    /// What this driver created and has not destroyed.
    table: RwLock<Table>,
}

impl fmt::Debug for AclDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclDriver")
            .field("device", &self.device)
            .field("ascendcl", &self.api.ascendcl_path)
            .field("runtime", &self.api.runtime_path)
            .field("version", &self.version)
            .field("capabilities", &self.caps)
            .finish_non_exhaustive()
    }
}

impl AclDriver {
    /// Loads the runtime, checks its version (where `aclrtGetVersion`
    /// exists), initializes ACL (`aclInit`; a repeated init is fine), binds
    /// the device on this thread, applies the op watchdog if configured, and
    /// loads the AICPU Run kernel.
    ///
    /// # Errors
    /// [`OpenError::Load`] with every path tried or every missing symbol;
    /// [`OpenError::UnsupportedVersion`] below ACL 1.16;
    /// [`OpenError::Runtime`] when a set-up call fails.
    #[allow(
        clippy::needless_pass_by_value,
        reason = "configurations are built inline and handed over, like std's builders"
    )]
    pub fn open(config: AclConfig) -> Result<Self, OpenError> {
        let env = |k: &str| std::env::var_os(k);
        let acl = load::open(Lib::AscendCl, config.ascendcl.as_deref(), &env);
        let rt = load::open(Lib::Runtime, config.runtime.as_deref(), &env);
        let api = match (acl, rt) {
            (Ok(acl), Ok(rt)) => Api::resolve(acl, rt)?,
            (Err(a), Err(r)) => {
                return Err(LoadError::Both {
                    ascendcl: Box::new(a),
                    runtime: Box::new(r),
                }
                .into());
            }
            (Err(e), Ok(_)) | (Ok(_), Err(e)) => return Err(e.into()),
        };
        let version = Self::check_version(&api)?;
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
        let ex_events = AtomicBool::new(api.create_event_ex.is_some());
        let instance = NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed);
        let mut d = AclDriver {
            api,
            instance,
            device: config.device_id,
            shared: device_shared(config.device_id),
            ctx: 0,
            sets: AtomicU64::new(0),
            version,
            aicpu_bin: 0,
            aicpu_func: 0,
            aicpu_threads: config.aicpu_threads.max(1),
            max_block_dim: config.max_block_dim,
            watchdog: None,
            caps,
            ex_events,
            table: RwLock::new(Table::new(instance)),
        };
        // From here on, a failure drops `d`, whose `Drop` balances what was
        // done so far (resets, finalize reference).
        // SAFETY: aclInit accepts NULL for "no config file".
        let rc = unsafe { (d.api.acl_init)(null()) };
        if rc != 0 && rc != ACL_ERROR_REPEAT_INITIALIZE {
            return Err(d.fail(Op::Open, "aclInit", rc).into());
        }
        d.set_device(Op::Open)?;
        d.ctx = d.capture_context()?;
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

    /// Reads the ACL version where `aclrtGetVersion` exists and refuses one
    /// below [`AclVersion::MINIMUM`]. A runtime without the symbol, or whose
    /// call fails, is not checked here (the required `rts*` symbols already
    /// date it to CANN 8.5 or later).
    fn check_version(api: &Api) -> Result<Option<AclVersion>, OpenError> {
        let Some(get) = api.get_version else {
            return Ok(None);
        };
        let (mut major, mut minor, mut patch) = (0i32, 0i32, 0i32);
        // SAFETY: three valid out-pointers for the call; no other argument.
        let rc = unsafe { get(&raw mut major, &raw mut minor, &raw mut patch) };
        if rc != 0 {
            return Ok(None);
        }
        let found = AclVersion::new(major, minor, patch);
        if found < AclVersion::MINIMUM {
            return Err(OpenError::UnsupportedVersion {
                found,
                required: AclVersion::MINIMUM,
                library: api.ascendcl_path.clone(),
            });
        }
        Ok(Some(found))
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

    /// The ACL version the runtime reported (`None` without
    /// `aclrtGetVersion`).
    #[must_use]
    pub fn acl_version(&self) -> Option<AclVersion> {
        self.version
    }

    /// The optional symbols the loaded runtime exports.
    #[must_use]
    pub fn optional_symbols(&self) -> Vec<&'static str> {
        self.api.present_optional()
    }

    /// Where the two libraries were loaded from.
    #[must_use]
    pub fn library_paths(&self) -> (&Path, &Path) {
        (&self.api.ascendcl_path, &self.api.runtime_path)
    }

    /// Names of the required and optional symbols.
    #[must_use]
    pub fn symbols() -> (&'static [&'static str], &'static [&'static str]) {
        (load::Api::REQUIRED, load::Api::OPTIONAL)
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

    /// A failure whose kind the caller knows better than the code table
    /// (a timeout with its wait, an allocation with its size).
    fn fail_as(&self, op: Op, api: &'static str, code: i32, kind: DriverErrorKind) -> DriverError {
        let native = Native {
            api,
            code,
            message: self.recent_message(),
        };
        DriverError::with_native(op, kind, native)
    }

    // ----- locks ------------------------------------------------------------

    fn read(&self) -> RwLockReadGuard<'_, Table> {
        // Nothing panics while the table is locked; if something did, the
        // table is still what this driver knows.
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }

    // ----- device context ---------------------------------------------------

    /// `aclrtSetDevice` on this thread, counted for the reset at drop.
    fn set_device(&self, op: Op) -> Result<(), DriverError> {
        // SAFETY: plain integer argument.
        let rc = unsafe { (self.api.set_device)(self.device) };
        self.check(op, "aclrtSetDevice", rc)?;
        self.sets.fetch_add(1, Ordering::AcqRel);
        // Without a destructor this thread-local is readable even during
        // thread teardown; if it is not, the next call simply binds again.
        let _ = BOUND.try_with(|b| b.set(self.instance));
        Ok(())
    }

    /// The context `aclrtSetDevice` just made current, where the runtime
    /// offers the context API (0 otherwise).
    fn capture_context(&self) -> Result<u64, DriverError> {
        let (Some(get), Some(_)) = (self.api.get_current_context, self.api.set_current_context)
        else {
            return Ok(0);
        };
        let mut ctx = null_mut();
        // SAFETY: `ctx` is a valid out-pointer.
        let rc = unsafe { get(&raw mut ctx) };
        self.check(Op::Open, "aclrtGetCurrentContext", rc)?;
        Ok(addr(ctx))
    }

    /// Makes this driver's device context current on the calling thread.
    ///
    /// With the context API: compares the thread's current context with the
    /// captured one and restores it when they differ (whoever changed it).
    /// Without: trusts the thread's record of which driver bound it last,
    /// and calls `aclrtSetDevice` when that is not this one.
    fn bind(&self, op: Op) -> Result<(), DriverError> {
        if self.ctx != 0
            && let (Some(get), Some(set)) =
                (self.api.get_current_context, self.api.set_current_context)
        {
            let mut cur = null_mut();
            // SAFETY: `cur` is a valid out-pointer.
            let rc = unsafe { get(&raw mut cur) };
            if rc == 0 && addr(cur) == self.ctx {
                return Ok(());
            }
            // SAFETY: a context captured from this runtime; the device it
            // belongs to is not reset while this driver holds its reference
            // (`sets` > 0 until drop).
            let rc = unsafe { set(handle(self.ctx)) };
            return self.check(op, "aclrtSetCurrentContext", rc);
        }
        if BOUND.try_with(Cell::get) == Ok(self.instance) {
            return Ok(());
        }
        self.set_device(op)
    }

    // ----- queries without the lock's bookkeeping ---------------------------

    fn query_event_raw(&self, op: Op, event: u64) -> Result<Completion, DriverError> {
        let mut status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
        // SAFETY: `status` is a valid out-pointer; the event was validated
        // against the table by the caller, who keeps it from being destroyed
        // (read lock or waiter mark) for the call.
        let rc = unsafe { (self.api.query_event_status)(handle(event), &raw mut status) };
        match rc {
            0 if status == ACL_EVENT_RECORDED_STATUS_COMPLETE => Ok(Completion::Complete),
            0 | ACL_ERROR_RT_EVENT_NOT_COMPLETE => Ok(Completion::NotReady),
            _ => Err(self.fail(op, "aclrtQueryEventStatus", rc)),
        }
    }

    fn query_stream_raw(&self, op: Op, stream: u64) -> Result<Completion, DriverError> {
        let mut status = ACL_STREAM_STATUS_NOT_READY;
        // SAFETY: `status` is a valid out-pointer; the stream was validated
        // by the caller, who keeps it from being destroyed for the call.
        let rc = unsafe { (self.api.stream_query)(handle(stream), &raw mut status) };
        match rc {
            0 if status == ACL_STREAM_STATUS_COMPLETE => Ok(Completion::Complete),
            0 | ACL_ERROR_RT_STREAM_NOT_COMPLETE => Ok(Completion::NotReady),
            _ => Err(self.fail(op, "aclrtStreamQuery", rc)),
        }
    }

    fn block_dim_ok(&self, op: Op, block_dim: u32) -> Result<(), DriverError> {
        if block_dim == 0 || block_dim > self.max_block_dim {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "block_dim is 0 or above the device maximum",
                },
            ));
        }
        Ok(())
    }

    // ----- code ---------------------------------------------------------------

    /// Unregisters a registration and frees its image once the runtime let
    /// go of it; without `rtDevBinaryUnRegister`, or when it fails, the image
    /// is kept for the process's life instead. Returns whether it was
    /// unregistered. The caller holds the write lock and a bound thread.
    fn unregister(&self, r: Resident) -> bool {
        let released = self.api.dev_binary_unregister.is_some_and(|unregister| {
            // SAFETY: `r.raw` came from rtRegisterAllKernel and is
            // unregistered once: the entry was taken out of the table.
            let rc = unsafe { unregister(handle(r.raw)) };
            rc == 0
        });
        if released {
            self.shared.programs.fetch_sub(1, Ordering::AcqRel);
            drop(r.image);
        } else {
            keep_forever(r.image);
        }
        released
    }
}

impl Drop for AclDriver {
    fn drop(&mut self) {
        // Best effort, errors ignored: a drop cannot report them, and
        // nothing here panics (the table lock is poison-tolerant, the
        // thread-local has no destructor).
        let bound = self.bind(Op::Open).is_ok();
        let code = std::mem::take(&mut self.write().code);
        for r in code {
            if bound {
                self.unregister(r);
            } else {
                keep_forever(r.image);
            }
        }
        if bound
            && let Some(unload) = self.api.binary_unload
            && self.aicpu_bin != 0
        {
            // SAFETY: the handle came from rtsBinaryLoadFromFile and is
            // unloaded once; `aicpu_func` (derived from it) is not used again.
            let _ = unsafe { unload(handle(self.aicpu_bin)) };
        }
        // One reset per successful set: the device's reference count
        // balances, whichever threads the sets were made on.
        for _ in 0..self.sets.load(Ordering::Acquire) {
            // SAFETY: plain integer argument.
            let _ = unsafe { (self.api.reset_device)(self.device) };
        }
        if let Some(fin) = self.api.finalize_reference {
            let mut refs = 0u64;
            // SAFETY: `refs` is a valid out-pointer.
            let _ = unsafe { fin(&raw mut refs) };
        }
        // The libraries stay loaded (see `load`): the runtime's own threads
        // and destructors may still run after this.
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
        if bytes == 0 {
            return Err(DriverError::new(
                Op::Alloc,
                DriverErrorKind::InvalidArgument {
                    what: "allocation size is 0",
                },
            ));
        }
        self.bind(Op::Alloc)?;
        let mut p = null_mut();
        // SAFETY: `p` is a valid out-pointer; size and policy by value.
        let rc = unsafe { (self.api.malloc)(&raw mut p, bytes, ACL_MEM_MALLOC_HUGE_FIRST) };
        if rc != 0 {
            let kind = match codes::kind_of(rc) {
                DriverErrorKind::OutOfMemory { .. } => DriverErrorKind::OutOfMemory {
                    bytes: bytes as u64,
                },
                k => k,
            };
            return Err(self.fail_as(Op::Alloc, "aclrtMalloc", rc, kind));
        }
        self.write().insert_alloc(addr(p), bytes);
        Ok(DevPtr::from_raw(addr(p)))
    }

    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        let mut t = self.write();
        t.check_free(Op::Free, ptr.raw())?;
        self.bind(Op::Free)?;
        // SAFETY: `ptr` is the start of a live allocation of this driver
        // (checked above), freed once: the write lock is held until it is
        // out of the table, so no other call can use it meanwhile.
        let rc = unsafe { (self.api.free)(handle(ptr.raw())) };
        self.check(Op::Free, "aclrtFree", rc)?;
        t.remove_alloc(ptr.raw());
        Ok(())
    }

    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        let t = self.read();
        let room = t.range(Op::CopyToDevice, dst.raw(), src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.bind(Op::CopyToDevice)?;
        // SAFETY: `src` is readable for `src.len()` bytes for the duration of
        // this synchronous copy; `[dst, dst + src.len())` lies in one live
        // allocation of this driver, which stays live (read lock) for the
        // call, and destMax is what that allocation has left from `dst`.
        let rc = unsafe {
            (self.api.memcpy)(
                handle(dst.raw()),
                room,
                src.as_ptr().cast(),
                src.len(),
                ACL_MEMCPY_HOST_TO_DEVICE,
            )
        };
        self.check(Op::CopyToDevice, "aclrtMemcpy", rc)
    }

    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        let t = self.read();
        t.range(Op::CopyFromDevice, src.raw(), dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.bind(Op::CopyFromDevice)?;
        // SAFETY: `dst` is writable for `dst.len()` bytes (destMax) for the
        // duration of this synchronous copy; `[src, src + dst.len())` lies in
        // one live allocation, kept live by the read lock.
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
        let t = self.read();
        let room = t.range(Op::Memset, dst.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(Op::Memset)?;
        // SAFETY: `[dst, dst + len)` lies in one live allocation (kept live
        // by the read lock); maxCount is what it has left from `dst`.
        let rc = unsafe { (self.api.memset)(handle(dst.raw()), room, i32::from(value), len) };
        self.check(Op::Memset, "aclrtMemset", rc)
    }

    fn copy_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        let t = self.read();
        t.stream(Op::CopyAsync, s.raw())?;
        let room = t.range(Op::CopyAsync, dst.raw(), len)?;
        t.range(Op::CopyAsync, src.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(Op::CopyAsync)?;
        // SAFETY: device-to-device on a live stream of this driver: both
        // ranges lie in live allocations (checked, kept live for the call);
        // destMax is what the destination allocation has left. Nothing on the
        // host is read or written. That the ranges stay live until the copy
        // ran on the device is the caller's contract (Driver::copy_async).
        let rc = unsafe {
            (self.api.memcpy_async)(
                handle(dst.raw()),
                room,
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
        let t = self.read();
        t.stream(Op::MemsetAsync, s.raw())?;
        let room = t.range(Op::MemsetAsync, dst.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(Op::MemsetAsync)?;
        // SAFETY: a live stream and a range inside one live allocation, both
        // of this driver (checked, kept live for the call); maxCount is what
        // the allocation has left from `dst`.
        let rc = unsafe {
            (self.api.memset_async)(
                handle(dst.raw()),
                room,
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
        self.write().insert_stream(addr(s));
        Ok(StreamId::from_raw(addr(s)))
    }

    fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        let mut t = self.write();
        t.check_destroy_stream(Op::DestroyStream, stream.raw())?;
        self.bind(Op::DestroyStream)?;
        // aclrtDestroyStream would wait for queued work; the trait refuses it
        // instead, and never syncs an error-state stream before destroying it.
        let destroy = match self.query_stream_raw(Op::DestroyStream, stream.raw()) {
            Ok(Completion::NotReady) => {
                return Err(DriverError::new(
                    Op::DestroyStream,
                    DriverErrorKind::StreamBusy { queued: 1 },
                ));
            }
            Ok(Completion::Complete) => (self.api.destroy_stream, "aclrtDestroyStream"),
            Err(_) => match self.api.destroy_stream_force {
                Some(f) => (f, "aclrtDestroyStreamForce"),
                None => (self.api.destroy_stream, "aclrtDestroyStream"),
            },
        };
        // SAFETY: a live stream of this driver that nobody waits on (checked
        // under the write lock, held until it is out of the table), so it is
        // destroyed once and never used afterwards.
        let rc = unsafe { (destroy.0)(handle(stream.raw())) };
        self.check(Op::DestroyStream, destroy.1, rc)?;
        t.remove_stream(stream.raw());
        Ok(())
    }

    fn query_stream(&self, stream: StreamId) -> Result<Completion, DriverError> {
        let t = self.read();
        t.stream(Op::QueryStream, stream.raw())?;
        self.bind(Op::QueryStream)?;
        self.query_stream_raw(Op::QueryStream, stream.raw())
    }

    fn sync_stream(&self, stream: StreamId, timeout: Duration) -> Result<(), DriverError> {
        let t = self.read();
        if timeout.is_zero() {
            t.stream(Op::SyncStream, stream.raw())?;
            self.bind(Op::SyncStream)?;
            return match self.query_stream_raw(Op::SyncStream, stream.raw())? {
                Completion::Complete => Ok(()),
                Completion::NotReady => Err(DriverError::new(
                    Op::SyncStream,
                    DriverErrorKind::Timeout { waited: timeout },
                )),
            };
        }
        // Blocking: mark the stream waited on (so it cannot be destroyed)
        // instead of holding the lock while the device works.
        let _waiting = t.wait_stream(Op::SyncStream, stream.raw())?;
        drop(t);
        self.bind(Op::SyncStream)?;
        // SAFETY: a live stream of this driver, kept live by the waiter mark;
        // the timeout is at least 1 ms (the runtime rejects 0).
        let rc = unsafe { (self.api.stream_sync_timeout)(handle(stream.raw()), millis(timeout)) };
        match rc {
            0 => Ok(()),
            ACL_ERROR_RT_STREAM_SYNC_TIMEOUT => Err(self.fail_as(
                Op::SyncStream,
                "aclrtSynchronizeStreamWithTimeout",
                rc,
                DriverErrorKind::Timeout { waited: timeout },
            )),
            _ => Err(self.fail(Op::SyncStream, "aclrtSynchronizeStreamWithTimeout", rc)),
        }
    }

    fn create_event(&self) -> Result<EventId, DriverError> {
        self.bind(Op::CreateEvent)?;
        let flags = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE;
        let mut e = null_mut();
        if let Some(create_ex) = self.api.create_event_ex
            && self.ex_events.load(Ordering::Acquire)
        {
            // SAFETY: `e` is a valid out-pointer. SYNC: usable in
            // aclrtStreamWaitEvent; TIME_LINE: timestamps and elapsed time.
            let rc = unsafe { create_ex(&raw mut e, flags) };
            match rc {
                0 => {
                    self.write().insert_event(addr(e), false);
                    return Ok(EventId::from_raw(addr(e)));
                }
                // A runtime that exports the call but does not support it:
                // use the old one from now on.
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT | 200_001 => {
                    self.ex_events.store(false, Ordering::Release);
                }
                _ => return Err(self.fail(Op::CreateEvent, "aclrtCreateEventExWithFlag", rc)),
            }
        }
        // SAFETY: as above.
        let rc = unsafe { (self.api.create_event)(&raw mut e, flags) };
        self.check(Op::CreateEvent, "aclrtCreateEventWithFlag", rc)?;
        self.write().insert_event(addr(e), true);
        Ok(EventId::from_raw(addr(e)))
    }

    fn destroy_event(&self, event: EventId) -> Result<(), DriverError> {
        let mut t = self.write();
        t.check_destroy_event(Op::DestroyEvent, event.raw())?;
        self.bind(Op::DestroyEvent)?;
        // SAFETY: a live event of this driver that nobody waits on (checked
        // under the write lock, held until it is out of the table).
        let rc = unsafe { (self.api.destroy_event)(handle(event.raw())) };
        self.check(Op::DestroyEvent, "aclrtDestroyEvent", rc)?;
        t.remove_event(event.raw());
        Ok(())
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), DriverError> {
        let t = self.read();
        let e = t.event(Op::RecordEvent, event.raw())?;
        t.stream(Op::RecordEvent, stream.raw())?;
        self.bind(Op::RecordEvent)?;
        // SAFETY: a live event and a live stream of this driver, kept live
        // by the read lock for the call.
        let rc = unsafe { (self.api.record_event)(handle(event.raw()), handle(stream.raw())) };
        self.check(Op::RecordEvent, "aclrtRecordEvent", rc)?;
        e.recorded.store(true, Ordering::Release);
        Ok(())
    }

    fn query_event(&self, event: EventId) -> Result<Completion, DriverError> {
        let t = self.read();
        if t.event(Op::QueryEvent, event.raw())?.unrecorded_legacy() {
            // The runtime would say NOT_READY for ever; the trait says a
            // never-recorded event is complete.
            return Ok(Completion::Complete);
        }
        self.bind(Op::QueryEvent)?;
        self.query_event_raw(Op::QueryEvent, event.raw())
    }

    fn sync_event(&self, event: EventId, timeout: Duration) -> Result<(), DriverError> {
        let t = self.read();
        let e = t.event(Op::SyncEvent, event.raw())?;
        if e.unrecorded_legacy() {
            return Ok(());
        }
        let not_yet =
            || DriverError::new(Op::SyncEvent, DriverErrorKind::Timeout { waited: timeout });
        // Blocking: mark the event waited on instead of holding the lock.
        let _waiting = Table::wait_event(e);
        drop(t);
        self.bind(Op::SyncEvent)?;
        match self.api.event_sync_timeout {
            _ if timeout.is_zero() => match self.query_event_raw(Op::SyncEvent, event.raw())? {
                Completion::Complete => Ok(()),
                Completion::NotReady => Err(not_yet()),
            },
            Some(sync) => {
                // SAFETY: a live event of this driver, kept live by the
                // waiter mark; the timeout is at least 1 ms.
                let rc = unsafe { sync(handle(event.raw()), millis(timeout)) };
                match rc {
                    0 => Ok(()),
                    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT => Err(self.fail_as(
                        Op::SyncEvent,
                        "aclrtSynchronizeEventWithTimeout",
                        rc,
                        DriverErrorKind::Timeout { waited: timeout },
                    )),
                    _ => Err(self.fail(Op::SyncEvent, "aclrtSynchronizeEventWithTimeout", rc)),
                }
            }
            // Fallback without the timed sync: poll until the deadline (a
            // timeout too large for a deadline means no limit).
            None => {
                let deadline = Instant::now().checked_add(timeout);
                loop {
                    if self.query_event_raw(Op::SyncEvent, event.raw())? == Completion::Complete {
                        return Ok(());
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(not_yet());
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        }
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        let t = self.read();
        t.stream(Op::StreamWaitEvent, stream.raw())?;
        if t.event(Op::StreamWaitEvent, event.raw())?
            .unrecorded_legacy()
        {
            // Nothing captured, nothing to wait for. Asking the runtime would
            // queue a device wait that no record ever satisfies.
            return Ok(());
        }
        self.bind(Op::StreamWaitEvent)?;
        // SAFETY: a live stream and a live event of this driver, kept live
        // by the read lock for the call.
        let rc = unsafe { (self.api.stream_wait_event)(handle(stream.raw()), handle(event.raw())) };
        self.check(Op::StreamWaitEvent, "aclrtStreamWaitEvent", rc)
    }

    fn event_elapsed(&self, start: EventId, end: EventId) -> Result<Duration, DriverError> {
        let t = self.read();
        let recorded = t.event(Op::EventElapsed, start.raw())?.recorded()
            && t.event(Op::EventElapsed, end.raw())?.recorded();
        if !recorded {
            return Err(DriverError::new(
                Op::EventElapsed,
                DriverErrorKind::InvalidArgument {
                    what: "event was never recorded",
                },
            ));
        }
        self.bind(Op::EventElapsed)?;
        let mut ms = 0f32;
        // SAFETY: `ms` is a valid out-pointer; two live events of this
        // driver, kept live by the read lock.
        let rc = unsafe {
            (self.api.event_elapsed)(&raw mut ms, handle(start.raw()), handle(end.raw()))
        };
        self.check(Op::EventElapsed, "aclrtEventElapsedTime", rc)?;
        elapsed_of(ms).map_err(|what| {
            DriverError::new(Op::EventElapsed, DriverErrorKind::InvalidResult { what })
        })
    }

    fn event_timestamp(&self, event: EventId) -> Result<u64, DriverError> {
        let t = self.read();
        let e = t.event(Op::EventTimestamp, event.raw())?;
        let Some(f) = self.api.event_timestamp else {
            return Err(DriverError::new(
                Op::EventTimestamp,
                DriverErrorKind::Unsupported,
            ));
        };
        if !e.recorded() {
            return Err(DriverError::new(
                Op::EventTimestamp,
                DriverErrorKind::InvalidArgument {
                    what: "event was never recorded",
                },
            ));
        }
        self.bind(Op::EventTimestamp)?;
        let mut us = 0u64;
        // SAFETY: `us` is a valid out-pointer; a live event of this driver.
        let rc = unsafe { f(handle(event.raw()), &raw mut us) };
        self.check(Op::EventTimestamp, "aclrtEventGetTimestamp", rc)?;
        // Device uptime in µs → ticks of the 50 MHz counter.
        Ok(us.saturating_mul(TICKS_PER_SEC / 1_000_000))
    }

    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        let mut t = self.write();
        if let Some(r) = t.code.iter_mut().find(|r| *r.image == *code) {
            r.pins += 1;
            return Ok(Registration {
                handle: CodeHandle::from_raw(r.raw, r.upload),
                published: false,
            });
        }
        self.bind(Op::RegisterCode)?;
        // New code: first let go of this driver's unpinned registrations
        // (the trait lets unpinned code be evicted by a later registration),
        // so code memory holds only what someone still pins.
        let (unpinned, pinned): (Vec<_>, Vec<_>) = std::mem::take(&mut t.code)
            .into_iter()
            .partition(|r| r.pins == 0);
        t.code = pinned;
        for r in unpinned {
            self.unregister(r);
        }
        // The image lives as long as its registration (the runtime may keep
        // a pointer to it instead of a copy).
        let image: Box<[u8]> = code.into();
        let bin = RtDevBinary {
            magic: RT_DEV_BINARY_MAGIC_ELF,
            version: 0,
            data: image.as_ptr().cast(),
            length: image.len() as u64,
        };
        let mut h = null_mut();
        // SAFETY: `bin` describes `image`, readable for its length during the
        // call and kept alive until the registration is released (or for
        // the process's life); `h` is a valid out-pointer.
        let rc = unsafe { (self.api.register_all_kernel)(&raw const bin, &raw mut h) };
        if rc != 0 {
            let kind = match codes::kind_of(rc) {
                // The runtime does not say how much it holds: report what
                // the drivers of this process hold on the device (a lower
                // bound when other components register code too).
                DriverErrorKind::CodeMemoryFull { .. } => DriverErrorKind::CodeMemoryFull {
                    capacity: self.shared.programs.load(Ordering::Acquire),
                },
                k => k,
            };
            return Err(self.fail_as(Op::RegisterCode, "rtRegisterAllKernel", rc, kind));
        }
        self.shared.programs.fetch_add(1, Ordering::AcqRel);
        let raw = addr(h);
        let upload = self.shared.uploads.fetch_add(1, Ordering::AcqRel) + 1;
        t.code.push(Resident {
            raw,
            upload,
            image,
            pins: 1,
        });
        Ok(Registration {
            handle: CodeHandle::from_raw(raw, upload),
            published: true,
        })
    }

    fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
        let mut t = self.write();
        let i = t
            .code
            .iter()
            .position(|r| r.raw == code.raw() && r.upload == code.upload())
            .ok_or_else(|| {
                DriverError::new(
                    Op::ReleaseCode,
                    DriverErrorKind::BadHandle {
                        kind: HandleKind::Code,
                        raw: code.raw(),
                    },
                )
            })?;
        let r = &mut t.code[i];
        if r.pins == 0 {
            return Err(DriverError::new(
                Op::ReleaseCode,
                DriverErrorKind::InvalidArgument {
                    what: "code is not pinned (released more often than registered)",
                },
            ));
        }
        // Unpinned code stays registered and launchable until this driver
        // uploads new code or drops.
        r.pins -= 1;
        Ok(())
    }

    fn code_epoch(&self) -> u64 {
        self.shared.uploads.load(Ordering::Acquire)
    }

    fn launch_aicore(
        &self,
        s: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: &[u8],
    ) -> Result<(), DriverError> {
        let op = Op::LaunchAicore;
        let t = self.read();
        t.stream(op, s.raw())?;
        // Only an upload this driver registered and still holds launches:
        // a forged handle, another driver's, or one whose registration was
        // released and replaced never reaches C.
        t.code(op, code.raw(), code.upload())?;
        self.block_dim_ok(op, block_dim)?;
        let mut blob = t.run_args(op, args, Some(block_dim))?;
        self.bind(op)?;
        let mut ex = RtArgsEx::zeroed();
        ex.args = blob.as_mut_ptr().cast();
        ex.args_size = RunArgs::SIZE_U32;
        let cfg = RtTaskCfgInfo {
            schem_mode: RT_SCHEM_MODE_BATCH,
            ..RtTaskCfgInfo::default()
        };
        // SAFETY: `ex` is fully initialised (no padding: see ffi) and points
        // at `blob` (72 bytes, alive for the call; the runtime copies it to
        // the device because isNoNeedH2DCopy = 0, and every device range in
        // it lies in a live allocation of this driver); `cfg` is alive for
        // the call; smDesc may be NULL; the code handle is a live
        // registration and the stream a live stream of this driver, kept
        // live by the read lock.
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
        self.check(op, "rtKernelLaunchWithHandleV2", rc)
    }

    fn launch_aicpu(&self, s: StreamId, args: &[u8]) -> Result<(), DriverError> {
        let op = Op::LaunchAicpu;
        let t = self.read();
        t.stream(op, s.raw())?;
        let mut blob = t.run_args(op, args, None)?;
        self.bind(op)?;
        let mut cpu = RtCpuKernelArgs::zeroed();
        cpu.base_args.args = blob.as_mut_ptr().cast();
        cpu.base_args.args_size = RunArgs::SIZE_U32;
        let mut attr = RtLaunchKernelAttr::default();
        let cfg = RtKernelLaunchCfg {
            attrs: &raw mut attr,
            num_attrs: 0,
        };
        // SAFETY: `cpu` is fully initialised (no padding: see ffi) and
        // `cpu.base_args.args` points at `blob` (alive for the call; copied
        // by the runtime; its device ranges checked); `cfg` and `attr` are
        // alive for the call; the function handle came from
        // rtsFuncGetByName; the stream is a live stream of this driver.
        let rc = unsafe {
            (self.api.launch_cpu_kernel)(
                handle(self.aicpu_func),
                self.aicpu_threads,
                handle(s.raw()),
                &raw const cfg,
                &raw mut cpu,
            )
        };
        self.check(op, "rtsLaunchCpuKernel", rc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use static_assertions::assert_impl_all;

    assert_impl_all!(AclDriver: Send, Sync);

    #[test]
    fn millis_round_up_and_clamp() {
        assert_eq!(millis(Duration::ZERO), 1, "never 0: the runtime rejects it");
        assert_eq!(millis(Duration::from_nanos(1)), 1);
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_micros(1001)), 2);
        assert_eq!(millis(Duration::from_secs(5)), 5000);
        assert_eq!(millis(Duration::from_secs(u64::MAX / 2)), i32::MAX);
        assert_eq!(millis(Duration::MAX), i32::MAX);
    }

    #[test]
    fn elapsed_times_from_the_runtime_never_panic() {
        assert_eq!(elapsed_of(1.5), Ok(Duration::from_micros(1500)));
        assert_eq!(elapsed_of(0.0), Ok(Duration::ZERO));
        for bad in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1.0,
            f32::MAX,
            f32::MIN,
        ] {
            assert!(elapsed_of(bad).is_err(), "{bad}");
        }
        assert!(elapsed_of(1e15).is_ok(), "large but representable");
    }

    #[test]
    fn missing_libraries_are_reported_not_panicked() {
        let cfg = AclConfig::new(0, "/nonexistent.json")
            .libraries("/nonexistent/a.so", "/nonexistent/b.so");
        match AclDriver::open(cfg) {
            Err(OpenError::Load(LoadError::Both { ascendcl, runtime })) => {
                assert!(matches!(*ascendcl, LoadError::ExplicitPath { .. }));
                assert!(matches!(*runtime, LoadError::ExplicitPath { .. }));
            }
            other => panic!("expected both explicit paths to fail, got {other:?}"),
        }
    }
}
