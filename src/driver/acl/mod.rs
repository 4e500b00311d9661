//! The real Ascend runtime, loaded at run time with `libloading` (CANN 8.5
//! and later, ACL 1.16+): `libascendcl.so` (or `libacl_rt.so`) for the
//! `acl*` / `aclrt*` API and `libruntime.so` for the `rt*` / `rts*` kernel
//! API. No link-time dependency: the crate builds anywhere, and loading never
//! panics.
//!
//! Layers, each using only those above it:
//! - `ffi`, `load`, [`codes`] — the C side: types, constants and layouts;
//!   library search and a function-pointer table (no logic; every missing
//!   required symbol is reported in one [`LoadError`] naming the file;
//!   libraries are never unloaded); the return codes;
//! - `ptr`, `tokens` — what the runtime hands out (`RtPtr`, and `Program`,
//!   which owns its code image), the handle table's entries and the tokens
//!   its checks return;
//! - `result` — one thin function per C entry point, which owns its API
//!   name, the contract of its `unsafe` call and its return-code mapping
//!   (errors carry the API name, the code and `aclGetRecentErrMsg()`); its
//!   handles are tokens, and it knows nothing of the table that makes them;
//! - `table` — what this driver created and has not destroyed; every handle
//!   a safe method receives is checked against it before any C call, and
//!   the check's result is the token the call takes;
//! - the [`Driver`] implementation, [`AclDriver`], with no `unsafe` of its
//!   own.
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
//! Optional, each with a fallback (those with a capability are
//! [`Capabilities`]):
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
//! | `aclrtGetDeviceCount`, `aclrtGetSocName` | — | read only by the runtime check (`examples/npu_check.rs`), which then reports them unavailable |
//! | `rtDevBinaryUnRegister` | — | registered code is kept for the process's life |
//! | `aclFinalizeReference`, `rtsBinaryUnload` | — | not called at drop |
//! | `aclrtSubscribeReport`, `aclrtUnSubscribeReport`, `aclrtLaunchCallback`, `aclrtProcessReport` | — | no completion callbacks: `notify_event` wakes on time ([`Notice::Timer`]) |
//! | `aclrtSetExceptionInfoCallback`, `aclrtGetDeviceIdFromExceptionInfo` | — | a fault wakes the awaiting futures at their deadline (without the accessor: every device's) |
//! | `aclmdlRICaptureBegin`, `aclmdlRICaptureGetInfo`, `aclmdlRICaptureEnd`, `aclmdlRIExecuteAsync`, `aclmdlRIDestroy` (all five, and `aclrtCreateEventExWithFlag`) | `CAPTURE` | the capture methods are `Unsupported` |
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
//! # Stream capture
//!
//! [`Driver::capture_begin`] and the three after it are the runtime's model
//! runtime instances (`aclmdlRI`, ACL 1.16+; not on every chip): begin is
//! `aclmdlRICaptureBegin` in thread-local mode
//! (`ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL`), followed — as `torch_npu`'s
//! graphs do — by `aclmdlRICaptureGetInfo`, which must report the stream
//! `ACTIVE` (otherwise the capture is ended again and the begin refused as
//! [`DriverErrorKind::InvalidResult`]); end is `aclmdlRICaptureEnd`, whose
//! graph (never NULL: that is an invalid result) joins the handle table; a
//! launch is one `aclmdlRIExecuteAsync`; a destroy `aclmdlRIDestroy`. Every
//! graph left is destroyed when the driver drops. A stream or graph handle
//! is checked against the table before any C call, as every handle is
//! ([`DriverErrorKind::BadHandle`] with `HandleKind::Graph` for a graph
//! this driver does not hold).
//!
//! The five symbols are optional (`torch_npu`, too, enables graphs only where
//! they resolve): [`Capabilities::CAPTURE`] is reported only when all five
//! resolved **and** the driver's events come from
//! `aclrtCreateEventExWithFlag` — a capture refuses events of
//! `aclrtCreateEventWithFlag`, so after the fallback above there is no
//! capture. Without it each capture method refuses with
//! [`DriverErrorKind::Unsupported`] before any other check, as a driver
//! without capture does.
//!
//! The runtime's refusals are [`DriverErrorKind::Capture`] with their
//! [`CaptureRule`] (the codes are in [`codes`]): beginning twice
//! (`107027`), ending a stream that is not capturing (`107029`), not the
//! capture's origin (`107036`) or whose capture an error invalidated
//! (`507903`) as `NotCapturing`, a joined stream not joined back at the
//! end (`107025`), a captured wait on an event recorded outside the
//! capture (`107024`), a graph destroyed while it runs (`107037`), a
//! stream the device cannot capture (`207000` from the begin). A
//! synchronous call on a capturing stream or a captured event — a sync, a
//! query — is `SyncWhileCapturing` (the runtime answers `107027` for a
//! stream, `107028` for an event, `107030` / `107041` for synchronous
//! copies); destroying a capturing stream is `AlreadyCapturing`. In
//! thread-local mode the capture ends on the thread that began it (another
//! gets `107038`, `ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD`).
//!
//! # Timeouts
//!
//! `aclrtSynchronize*WithTimeout` takes whole milliseconds and rejects 0
//! (107000, whatever its header says). The driver never passes 0: a zero
//! timeout is a single status query, and a timeout below a millisecond is
//! rounded up to 1 ms. A timeout above `i32::MAX` ms is clamped to it; the
//! polling fallback treats a timeout too large for a deadline as no limit.
//!
//! # Completion notifications
//!
//! [`Driver::queue_notify`] queues a host callback behind a run's fence
//! (`aclrtLaunchCallback`, `ACL_CALLBACK_NO_BLOCK`), delivered on one
//! reactor thread per device that loops `aclrtProcessReport`;
//! [`Driver::notify_event`] keeps the awaiting future's waker until that
//! callback runs, an exception report for the device comes
//! (`aclrtSetExceptionInfoCallback`, registered once per process), or its
//! deadline passes — and answers [`Notice::Timer`] where no callback is
//! queued for the event's last record. The callback's user data is an
//! integer key (nothing to free, nothing freed early); the reactor starts
//! at the first notification and ends, joined within about 100 ms, when
//! the device's last driver drops. The details, and why: the `notify`
//! module's source documentation.
//!
//! # Kernels
//!
//! The AICore kernel is launched with `rtKernelLaunchWithHandleV2` on the
//! handle `rtRegisterAllKernel` returned for the callable's code (an AICore
//! ELF), the AICPU Run kernel with `rtsLaunchCpuKernel` on a function found by
//! name in the op-info binary of [`AclConfig::aicpu_binary`]. Both receive the
//! run's argument block as host arguments, which the runtime copies at
//! launch: whatever the device's kernel ABI adapter wrote
//! ([`KernelAbi`](crate::driver::abi::KernelAbi) — runclaim's own 72-byte
//! [`RunArgs`] or a [`WorkArgs`] of up to 9,296 bytes, the a2a3 layout's
//! 40-byte AICore block and AICPU envelope of up to 33,984 bytes), at most
//! 64 KiB (the launch structs' `argsSize` is a `uint32_t`, and the public
//! headers document no smaller limit). A deployment's kernels implement
//! its adapter's protocol. Before C, the driver checks every device
//! range the block's writer recorded ([`LaunchArgs::fields`]) — each
//! tensor's `[addr, addr + bytes)` included — against this driver's live
//! allocations ([`DriverErrorKind::BadAddress`] otherwise), and refuses a
//! block that no longer holds an address where it was recorded or is longer
//! than 64 KiB as an invalid argument. It reads no field of the block's
//! layout: a block its kernels cannot decode reaches the runtime, and it
//! cannot check a launch's `block_dim` against what the block sized for
//! it (the contract passes the device's `block_dim` to both). The runtime
//! gets a private copy of the block, of exactly its length: on the stack up
//! to 9,296 bytes, on the heap above (one allocation per launch of such a
//! block). The launch structs are zero-filled (no undefined
//! padding bytes).
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
//!
//! [`Driver`]: super::Driver
//! [`Driver::capture_begin`]: super::Driver::capture_begin
//! [`Capabilities::CAPTURE`]: super::Capabilities::CAPTURE
//! [`DriverErrorKind::InvalidResult`]: super::DriverErrorKind::InvalidResult
//! [`DriverErrorKind::Unsupported`]: super::DriverErrorKind::Unsupported
//! [`DriverErrorKind::Capture`]: super::DriverErrorKind::Capture
//! [`CaptureRule`]: super::CaptureRule
//! [`Driver::create_event`]: super::Driver::create_event
//! [`Driver::queue_notify`]: super::Driver::queue_notify
//! [`Driver::notify_event`]: super::Driver::notify_event
//! [`Notice::Timer`]: super::Notice::Timer
//! [`DriverError`]: super::DriverError
//! [`DriverErrorKind::BadHandle`]: super::DriverErrorKind::BadHandle
//! [`DriverErrorKind::BadAddress`]: super::DriverErrorKind::BadAddress
//! [`Native`]: super::Native
//! [`RunArgs`]: super::abi::RunArgs
//! [`WorkArgs`]: super::abi::WorkArgs
//! [`WorkArgs::MAX_SIZE`]: super::abi::WorkArgs::MAX_SIZE
//! [`LaunchArgs::fields`]: super::abi::LaunchArgs::fields

mod capture;
pub mod codes;
mod config;
mod context;
mod driver;
mod ffi;
mod lifecycle;
mod load;
mod notify;
#[doc(hidden)]
pub mod probe;
mod ptr;
mod registry;
mod result;
mod table;
mod tokens;

/// The table's argument-block check over the allocations `allocs`
/// (`(base, bytes)`, sorted, not overlapping), for the fuzz targets: no
/// runtime is loaded or called.
#[cfg(any(test, fuzzing))]
pub(crate) fn check_run_args(
    allocs: &[(u64, usize)],
    args: crate::driver::abi::LaunchArgs<'_>,
) -> Result<(), crate::driver::DriverError> {
    table::Table::check_run_args(allocs, args)
}

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

pub use self::config::{AclConfig, AclVersion, OpenError};
pub use self::load::{Attempt, DEFAULT_ROOTS, Lib, LoadError, MissingSymbol, candidates};

// Not user API (only the driver builds an `rtDevBinary_t`), so hidden and
// outside semver; public so that a stand-in runtime checks the magic the
// driver really sends, not a copy that could drift.
#[doc(hidden)]
pub use self::ffi::RT_DEV_BINARY_MAGIC_ELF;

use self::load::Api;
use self::registry::DeviceShared;
use self::result::{AicpuKernel, Context};
use self::table::Table;
use super::Capabilities;

/// The Ascend runtime as a [`Driver`]. See the [module documentation](self).
///
/// ```
/// use runclaim::driver::acl::{AclConfig, AclDriver};
///
/// let (required, optional) = AclDriver::symbols();
/// assert!(required.contains(&"rtKernelLaunchWithHandleV2"));
/// assert!(optional.contains(&"aclrtSynchronizeEventWithTimeout"));
/// assert!(optional.contains(&"aclrtLaunchCallback")); // completion callbacks are optional
/// // On an Ascend machine: AclDriver::open(AclConfig::new(0, "op-info.json"))?
/// # let _ = AclConfig::new(0, "x");
/// ```
///
/// [`Driver`]: super::Driver
pub struct AclDriver {
    /// Shared with the device's reactor thread (`notify`).
    api: Arc<Api>,
    instance: u64,
    device: i32,
    shared: Arc<DeviceShared>,
    /// This device's context, captured once where the runtime offers the
    /// context API (`None`: bind with `aclrtSetDevice` instead).
    ctx: Option<Context>,
    /// Successful `aclrtSetDevice` calls this driver made; each gets its
    /// `aclrtResetDevice` at drop.
    sets: AtomicU64,
    version: Option<AclVersion>,
    /// The AICPU Run kernel (`None` only while opening).
    aicpu: Option<AicpuKernel>,
    /// `aclInit` succeeded: drop gives its reference back.
    initialized: bool,
    aicpu_threads: u32,
    max_block_dim: u32,
    watchdog: Option<Duration>,
    /// The longest one wait of a reactor this driver starts
    /// ([`AclConfig::reactor_max_wait`]).
    reactor_wait: Duration,
    /// What the runtime offers as opened (`capabilities()` takes
    /// `CAPTURE` away once `ex_events` is off).
    caps: Capabilities,
    /// `aclrtCreateEventExWithFlag` is there and accepted.
    ex_events: AtomicBool,
    /// What this driver created and has not destroyed.
    table: RwLock<Table>,
}

impl AclDriver {
    /// The table, to read (nothing panics while it is locked; if something
    /// did, the table is still what this driver knows).
    fn read(&self) -> RwLockReadGuard<'_, Table> {
        self.table.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The table, to change.
    fn write(&self) -> RwLockWriteGuard<'_, Table> {
        self.table.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for AclDriver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclDriver")
            .field("device", &self.device)
            .field("ascendcl", &self.api.ascendcl_path)
            .field("runtime", &self.api.runtime_path)
            .field("version", &self.version)
            .field("capabilities", &self.capabilities())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use static_assertions::assert_impl_all;

    assert_impl_all!(AclDriver: Send, Sync);
}
