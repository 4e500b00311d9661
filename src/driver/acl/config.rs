//! How an [`AclDriver`](super::AclDriver) is opened: its configuration
//! [`AclConfig`], the runtime's [`AclVersion`], and why opening failed
//! ([`OpenError`]).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::LoadError;
use crate::driver::DriverError;

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
    /// The longest one wait of the device's reactor (`None`: 100 ms):
    /// tests only, see [`AclConfig::reactor_max_wait`].
    pub(super) reactor_wait: Option<Duration>,
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
            reactor_wait: None,
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

    /// Tests only (hidden, outside semver): the longest one wait of the
    /// device's reactor thread — one `aclrtProcessReport`, or one wait for a
    /// subscription — instead of 100 ms, for the reactor this driver starts
    /// (clamped to at least 1 ms). A test that sets it far beyond its own
    /// patience proves that a wake came from what should cause it (a
    /// subscription, a callback), not from the reactor's timeout. It also
    /// bounds how long the last driver's drop waits for the reactor (at
    /// most 2 s, then the thread is left detached).
    #[doc(hidden)]
    #[must_use]
    pub fn reactor_max_wait(mut self, wait: Duration) -> Self {
        self.reactor_wait = Some(wait);
        self
    }

    /// The reactor's longest wait: 100 ms, or what a test set (at least
    /// the runtime's 1 ms).
    pub(super) fn reactor_wait(&self) -> Duration {
        self.reactor_wait
            .map_or(super::notify::MAX_WAIT, |w| w.max(super::notify::MIN_WAIT))
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
///
/// [`AclDriver::open`]: super::AclDriver::open
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
