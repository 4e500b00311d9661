//! What a [`Driver`](super::Driver) reports: [`Completion`] of a query,
//! [`Registration`] of code, and the device's [`DriverInfo`] with its
//! [`Capabilities`].

use std::time::Duration;

use super::CodeHandle;

/// The answer of a non-blocking query.
///
/// ```
/// use runclaim::driver::{Completion, Driver};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let e = sim.create_event()?;
/// assert_eq!(sim.query_event(e)?, Completion::Complete); // never recorded
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Completion {
    /// Everything captured has finished.
    Complete,
    /// Work is still queued or running.
    NotReady,
}

/// The result of [`Driver::register_code`].
///
/// ```
/// use runclaim::driver::{Driver, Registration};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let first: Registration = sim.register_code(&Program::new().mul(2).encode())?;
/// let again = sim.register_code(&Program::new().mul(2).encode())?;
/// assert!(first.published && !again.published); // a dedup hit is no publication
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
///
/// [`Driver::register_code`]: super::Driver::register_code
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Registration {
    /// Where the code is resident.
    pub handle: CodeHandle,
    /// `true` when new code was uploaded (a *publication*: AICore streams
    /// created before it may run stale instructions); `false` for a dedup hit
    /// on code that was already resident.
    pub published: bool,
}

impl Registration {
    /// A registration of `handle`, `published` when new code was uploaded
    /// (for driver implementers).
    #[must_use]
    pub const fn new(handle: CodeHandle, published: bool) -> Self {
        Registration { handle, published }
    }
}

bitflags::bitflags! {
    /// Optional driver features. A missing capability has a documented
    /// fallback wherever the contract relies on it.
    ///
    /// ```
    /// use runclaim::driver::{Capabilities, Driver};
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let caps = SimDriver::stepped(SimConfig::default()).info().capabilities;
    /// assert!(caps.contains(Capabilities::EVENT_SYNC_TIMEOUT | Capabilities::EVENT_TIMESTAMP));
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Capabilities: u32 {
        /// `sync_event` honours its timeout natively
        /// (`aclrtSynchronizeEventWithTimeout`). Without it the driver polls
        /// `query_event` until the deadline.
        const EVENT_SYNC_TIMEOUT = 1 << 0;
        /// `event_timestamp` is available (`aclrtEventGetTimestamp`).
        const EVENT_TIMESTAMP = 1 << 1;
        /// Failures carry the runtime's last error message (`aclGetRecentErrMsg`).
        const ERROR_MESSAGE = 1 << 2;
        /// The device watchdog was set and read back (`aclrtSetOpExecuteTimeOutV2`).
        const WATCHDOG_CONTROL = 1 << 3;
        /// Streams can be destroyed without waiting (`aclrtDestroyStreamForce`).
        const FORCE_DESTROY = 1 << 4;
        /// Streams can be captured into graphs and the graphs replayed
        /// ([`Driver::capture_begin`](super::Driver::capture_begin) and the
        /// three after it; `aclmdlRICapture*` / `aclmdlRIExecuteAsync`).
        const CAPTURE = 1 << 5;
    }
}

/// Tasks one stream of an Ascend device holds before an enqueue blocks the
/// calling thread: 1,792, as measured on an a2a3 device (the runtime does
/// not report it). The acl driver reports it as its
/// [`DriverInfo::stream_capacity`], and it is the simulator's default
/// ([`SimConfig::stream_capacity`](crate::sim::SimConfig::stream_capacity))
/// and the instant driver's.
///
/// ```
/// use runclaim::driver::{Driver, STREAM_CAPACITY};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// assert_eq!(sim.info().stream_capacity, STREAM_CAPACITY);
/// assert_eq!(STREAM_CAPACITY, 1792);
/// ```
pub const STREAM_CAPACITY: usize = 1792;

/// Static facts about a driver's device.
///
/// ```
/// use runclaim::driver::{Driver, DriverInfo, STREAM_CAPACITY};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let info: DriverInfo = SimDriver::stepped(SimConfig::default()).info();
/// assert_eq!((info.max_block_dim, info.stream_capacity), (24, STREAM_CAPACITY));
/// assert!(info.watchdog.is_some());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverInfo {
    /// Largest `block_dim` an AICore launch accepts.
    pub max_block_dim: u32,
    /// Tasks one stream can hold before an enqueue would block.
    pub stream_capacity: usize,
    /// The device's own kernel watchdog, when known: a kernel running longer
    /// faults. Host fence timeouts must exceed it.
    pub watchdog: Option<Duration>,
    /// Optional features.
    pub capabilities: Capabilities,
}

impl DriverInfo {
    /// Facts of a device that takes up to `max_block_dim` AICore blocks per
    /// launch and `stream_capacity` tasks per stream, with no known
    /// watchdog and no optional capability (for driver implementers; set the
    /// rest with [`watchdog`](DriverInfo::watchdog) and
    /// [`capabilities`](DriverInfo::capabilities)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use runclaim::driver::{Capabilities, DriverInfo, STREAM_CAPACITY};
    ///
    /// let info = DriverInfo::new(24, STREAM_CAPACITY)
    ///     .watchdog(Duration::from_secs(5))
    ///     .capabilities(Capabilities::EVENT_SYNC_TIMEOUT);
    /// assert_eq!(info.watchdog, Some(Duration::from_secs(5)));
    /// ```
    #[must_use]
    pub const fn new(max_block_dim: u32, stream_capacity: usize) -> Self {
        DriverInfo {
            max_block_dim,
            stream_capacity,
            watchdog: None,
            capabilities: Capabilities::empty(),
        }
    }

    /// Sets [`DriverInfo::watchdog`].
    #[must_use]
    pub const fn watchdog(mut self, watchdog: Duration) -> Self {
        self.watchdog = Some(watchdog);
        self
    }

    /// Sets [`DriverInfo::capabilities`].
    #[must_use]
    pub const fn capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }
}
