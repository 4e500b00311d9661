//! Device configuration and its validation at open.

use std::time::Duration;

use crate::driver::DriverInfo;
use crate::driver::abi::{self, AbiError, KernelAbi, KernelAbiRef};

/// Queue entries one run puts on its busiest stream: on the AICPU stream its
/// kernel, a wait on the AICore stream's event and its fence record — and,
/// with [`DeviceConfig::completion_callbacks`], the completion notification
/// a driver may queue behind it
/// ([`Driver::queue_notify`](crate::driver::Driver::queue_notify): the `acl`
/// driver's host callback).
pub(crate) const fn tasks_per_run(callbacks: bool) -> usize {
    if callbacks { 4 } else { 3 }
}

/// How a [`Device`](super::Device) is opened.
///
/// # Time
///
/// Runs queue: a run launched behind `k` others may legitimately wait for
/// all of them. So [`fence_timeout`](DeviceConfig::fence_timeout) is a
/// **per-run budget**, not a total: how long the device may take over *one*
/// run once every run ahead of it is complete (the run is at the *head* of
/// the queue). A run that has been at the head longer than its budget, on
/// the driver's clock ([`Driver::clock`](crate::driver::Driver::clock)), has
/// overrun — the only evidence that poisons the runner. A plain
/// [`fence`](super::Run::fence) therefore waits as long as the runs ahead
/// legitimately take: at most `(runs ahead + 1) × fence_timeout`, plus one
/// look-around slice (`fence_timeout / 8`) in which it dates what it saw —
/// and behind a run that could not be proven complete (nothing behind it
/// can be dated), one more `fence_timeout` from when it finds it.
///
/// The budget must exceed the device watchdog (else the host would give up
/// while the device still runs), and no duration may exceed
/// [`DeviceConfig::MAX_TIMEOUT`]: [`Device::open`](super::Device::open)
/// refuses such a configuration with a [`ConfigError`] naming the value, so
/// no deadline computed from it can overflow.
///
/// ```
/// use std::time::Duration;
/// use runclaim::{Device, DeviceConfig};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// // The simulator's watchdog is 100 ms: a 50 ms fence timeout would give up
/// // while the device still runs, so opening refuses it.
/// let sim = SimDriver::stepped(SimConfig::default());
/// let bad = DeviceConfig::default().fence_timeout(Duration::from_millis(50));
/// assert!(Device::<_, 2>::open(sim.clone(), bad).is_err());
/// let forever = DeviceConfig::default().fence_timeout(Duration::MAX);
/// assert!(Device::<_, 2>::open(sim.clone(), forever).is_err()); // refused, not "no limit"
/// let ok = DeviceConfig::default().fence_timeout(Duration::from_millis(150));
/// assert!(Device::<_, 2>::open(sim, ok).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceConfig {
    /// The per-run budget: how long a run at the head of the queue may take
    /// before the host calls the device hung (see [Time](#time)). Must
    /// exceed the device watchdog. Default: twice the watchdog.
    pub fence_timeout: Option<Duration>,
    /// The device's kernel watchdog. Default: what the driver reports
    /// ([`DriverInfo::watchdog`]); required when the driver does not know.
    pub device_watchdog: Option<Duration>,
    /// AICore workers per run (default 4).
    pub block_dim: u32,
    /// Elements each slot's arena holds for input and for output (default
    /// 4,096; at most [`DeviceConfig::MAX_ELEMENTS`]).
    pub max_elements: usize,
    /// Bytes of each slot's staging region, where a
    /// [`Workload`](crate::contract::Workload)'s host tensors are copied in
    /// at prepare and back at finalize (default 64 KiB; 0: no host tensors;
    /// at most [`DeviceConfig::MAX_STAGING`]). Each non-empty host tensor
    /// starts at a device address aligned to
    /// [`DeviceConfig::STAGING_ALIGN`] bytes or to its element type,
    /// whichever is larger; an empty one takes no room.
    pub staging_bytes: usize,
    /// The kernels' ABI: how their argument blocks are laid out, which
    /// per-slot regions they need, how their records are read back
    /// (default: runclaim's own, [`RunclaimAbi`](crate::driver::abi::RunclaimAbi)).
    /// See [`KernelAbi`](crate::driver::abi::KernelAbi).
    pub kernel_abi: KernelAbiRef,
    /// Queue a completion notification behind every run's fence
    /// ([`Driver::queue_notify`](crate::driver::Driver::queue_notify): the
    /// `acl` driver's host callback), so that an awaited run is woken by
    /// its own completion (default `true`). Off, a run costs one runtime
    /// call and one stream task less, and an awaited fence is woken by the
    /// driver's timer instead, backing off from 50 µs: what a program that
    /// never awaits may choose. A launch cannot know whether its run will
    /// be awaited, and a notification queued only at the first poll would
    /// sit behind the runs launched since, so it is a device-wide choice.
    pub completion_callbacks: bool,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            fence_timeout: None,
            device_watchdog: None,
            block_dim: 4,
            max_elements: 4096,
            staging_bytes: 64 << 10,
            kernel_abi: KernelAbiRef::default(),
            completion_callbacks: true,
        }
    }
}

impl DeviceConfig {
    /// The longest fence timeout or watchdog a device accepts: one day. A
    /// run that may take longer is a configuration mistake, and the ceiling
    /// keeps every deadline `(DEPTH + 1) × fence_timeout` far from overflow.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

    /// The largest arena: 2³⁰ elements (4 GiB of input and 4 GiB of output
    /// per slot), so every size computed from it fits.
    pub const MAX_ELEMENTS: usize = 1 << 30;

    /// The largest staging region: 4 GiB per slot.
    pub const MAX_STAGING: usize = 1 << 32;

    /// The least alignment of a staged host tensor's device address (an
    /// element type aligned above it is aligned to its own alignment).
    pub const STAGING_ALIGN: usize = 64;

    /// Sets [`DeviceConfig::fence_timeout`].
    #[must_use]
    pub fn fence_timeout(mut self, t: Duration) -> Self {
        self.fence_timeout = Some(t);
        self
    }

    /// Sets [`DeviceConfig::device_watchdog`].
    #[must_use]
    pub fn device_watchdog(mut self, t: Duration) -> Self {
        self.device_watchdog = Some(t);
        self
    }

    /// Sets [`DeviceConfig::block_dim`].
    #[must_use]
    pub fn block_dim(mut self, n: u32) -> Self {
        self.block_dim = n;
        self
    }

    /// Sets [`DeviceConfig::max_elements`].
    #[must_use]
    pub fn max_elements(mut self, n: usize) -> Self {
        self.max_elements = n;
        self
    }

    /// Sets [`DeviceConfig::staging_bytes`].
    #[must_use]
    pub fn staging_bytes(mut self, n: usize) -> Self {
        self.staging_bytes = n;
        self
    }

    /// Sets [`DeviceConfig::kernel_abi`].
    ///
    /// ```
    /// use runclaim::{Device, DeviceConfig};
    /// use runclaim::driver::abi::A2a3Abi;
    /// use runclaim::sim::{A2a3Model, SimConfig, SimDriver};
    ///
    /// // The simulated device must speak the same protocol.
    /// let sim = SimDriver::stepped(SimConfig::default().device_model(A2a3Model));
    /// let device = Device::<_, 2>::open(sim, DeviceConfig::default().kernel_abi(A2a3Abi))?;
    /// # drop(device);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn kernel_abi(mut self, abi: impl KernelAbi) -> Self {
        self.kernel_abi = KernelAbiRef::new(abi);
        self
    }

    /// Sets [`completion_callbacks`](DeviceConfig::completion_callbacks).
    ///
    /// ```
    /// use runclaim::{Device, DeviceConfig};
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// // A program that never awaits a run: no notification per run.
    /// let config = DeviceConfig::default().completion_callbacks(false);
    /// let device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), config)?;
    /// # drop(device);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn completion_callbacks(mut self, on: bool) -> Self {
        self.completion_callbacks = on;
        self
    }

    /// Checks the configuration against the driver and resolves defaults.
    /// Every sum and product is checked; nothing here can panic.
    pub(crate) fn resolve(&self, info: &DriverInfo, depth: usize) -> Result<Resolved, ConfigError> {
        let (watchdog, fence) = self.resolve_times(info)?;
        self.check_sizes(info)?;
        let needed = depth.saturating_mul(tasks_per_run(self.completion_callbacks));
        if needed > info.stream_capacity {
            return Err(ConfigError::QueueTooShallow {
                needed,
                capacity: info.stream_capacity,
            });
        }
        Ok(Resolved {
            fence_timeout: fence,
            watchdog,
            block_dim: self.block_dim,
            max_elements: self.max_elements,
            staging_bytes: self.staging_bytes,
            completion_callbacks: self.completion_callbacks,
        })
    }

    /// The times of [`resolve`](Self::resolve): the watchdog (declared, or
    /// the driver's; never below the driver's) and the fence timeout
    /// (given, or twice the watchdog; above it), none above
    /// [`MAX_TIMEOUT`](Self::MAX_TIMEOUT).
    fn resolve_times(&self, info: &DriverInfo) -> Result<(Duration, Duration), ConfigError> {
        let too_long = |what, value: Duration| {
            (value > Self::MAX_TIMEOUT).then_some(ConfigError::TooLong {
                what,
                value,
                max: Self::MAX_TIMEOUT,
            })
        };
        if let Some(e) = self
            .device_watchdog
            .and_then(|w| too_long("device_watchdog", w))
        {
            return Err(e);
        }
        if let Some(e) = self
            .fence_timeout
            .and_then(|f| too_long("fence_timeout", f))
        {
            return Err(e);
        }
        let watchdog = match (self.device_watchdog, info.watchdog) {
            (Some(declared), Some(device)) if declared < device => {
                return Err(ConfigError::WatchdogBelowDevice { declared, device });
            }
            (Some(w), _) | (None, Some(w)) => w,
            (None, None) => return Err(ConfigError::WatchdogUnknown),
        };
        if let Some(e) = too_long("the driver's watchdog", watchdog) {
            return Err(e);
        }
        let fence = if let Some(f) = self.fence_timeout {
            f
        } else {
            let twice = watchdog.saturating_mul(2);
            if let Some(e) = too_long("fence_timeout (default: twice the watchdog)", twice) {
                return Err(e);
            }
            twice
        };
        if fence <= watchdog {
            return Err(ConfigError::FenceTimeoutNotAboveWatchdog { fence, watchdog });
        }
        Ok((watchdog, fence))
    }

    /// The sizes of [`resolve`](Self::resolve): `block_dim` within the
    /// driver's maximum (and its handshake's size representable), the
    /// arena neither empty nor above its ceiling, the staging buffer within
    /// its own.
    fn check_sizes(&self, info: &DriverInfo) -> Result<(), ConfigError> {
        if self.block_dim == 0 || self.block_dim > info.max_block_dim {
            return Err(ConfigError::BlockDim {
                block_dim: self.block_dim,
                max: info.max_block_dim,
            });
        }
        if abi::handshake_bytes_checked(self.block_dim).is_none() {
            return Err(ConfigError::BlockDim {
                block_dim: self.block_dim,
                max: info.max_block_dim,
            });
        }
        if self.max_elements == 0 {
            return Err(ConfigError::ZeroCapacity);
        }
        if self.max_elements > Self::MAX_ELEMENTS {
            return Err(ConfigError::ArenaTooLarge {
                max_elements: self.max_elements,
                max: Self::MAX_ELEMENTS,
            });
        }
        if self.staging_bytes > Self::MAX_STAGING {
            return Err(ConfigError::StagingTooLarge {
                bytes: self.staging_bytes,
                max: Self::MAX_STAGING,
            });
        }
        Ok(())
    }
}

/// A configuration the device refuses to open with.
///
/// ```
/// use std::time::Duration;
/// use runclaim::contract::{ConfigError, ErrorKind};
/// use runclaim::{Device, DeviceConfig};
/// use runclaim::sim::SimDriver;
///
/// let cfg = DeviceConfig::default().block_dim(100);
/// let err = Device::<_, 2>::open(SimDriver::stepped(Default::default()), cfg).unwrap_err();
/// assert_eq!(err.kind(), &ErrorKind::Config(Box::new(ConfigError::BlockDim { block_dim: 100, max: 24 })));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The host would give up on a fence while the device still runs.
    #[error("fence timeout {fence:?} must exceed the device watchdog {watchdog:?}")]
    FenceTimeoutNotAboveWatchdog {
        /// The configured fence timeout.
        fence: Duration,
        /// The device watchdog.
        watchdog: Duration,
    },
    /// The declared watchdog is shorter than the one the driver reports.
    #[error("declared watchdog {declared:?} is below the device's {device:?}")]
    WatchdogBelowDevice {
        /// Declared in the configuration.
        declared: Duration,
        /// Reported by the driver.
        device: Duration,
    },
    /// Neither the configuration nor the driver knows the watchdog.
    #[error("the device watchdog is unknown: declare it in the configuration")]
    WatchdogUnknown,
    /// `block_dim` is 0 or above the driver's maximum.
    #[error("block_dim {block_dim} is outside 1..={max}")]
    BlockDim {
        /// Requested.
        block_dim: u32,
        /// The driver's maximum.
        max: u32,
    },
    /// The arena capacity is 0.
    #[error("arena capacity must be at least one element")]
    ZeroCapacity,
    /// The arena capacity is above [`DeviceConfig::MAX_ELEMENTS`](super::DeviceConfig::MAX_ELEMENTS).
    #[error("max_elements {max_elements} is above the largest arena of {max} elements")]
    ArenaTooLarge {
        /// Requested.
        max_elements: usize,
        /// The ceiling.
        max: usize,
    },
    /// The staging region is above [`DeviceConfig::MAX_STAGING`](super::DeviceConfig::MAX_STAGING).
    #[error("staging_bytes {bytes} is above the largest staging region of {max} bytes")]
    StagingTooLarge {
        /// Requested.
        bytes: usize,
        /// The ceiling.
        max: usize,
    },
    /// A duration is above [`DeviceConfig::MAX_TIMEOUT`](super::DeviceConfig::MAX_TIMEOUT).
    #[error("{what} {value:?} is above the ceiling of {max:?}")]
    TooLong {
        /// Which setting.
        what: &'static str,
        /// Its value.
        value: Duration,
        /// The ceiling.
        max: Duration,
    },
    /// `DEPTH` runs would not fit in a stream queue (admission must never
    /// reach a blocking enqueue).
    #[error("depth needs {needed} queue entries per stream, the device holds {capacity}")]
    QueueTooShallow {
        /// Entries needed per stream.
        needed: usize,
        /// Stream capacity.
        capacity: usize,
    },
    /// The kernel ABI adapter cannot serve this device (its regions, its
    /// records or its block size).
    #[error("kernel ABI {adapter:?}: {error}")]
    Adapter {
        /// The adapter's name.
        adapter: &'static str,
        /// What is wrong.
        error: AbiError,
    },
}

/// A validated configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The per-run budget.
    pub fence_timeout: Duration,
    pub watchdog: Duration,
    pub block_dim: u32,
    pub max_elements: usize,
    pub staging_bytes: usize,
    /// Queue a completion notification behind every run's fence.
    pub completion_callbacks: bool,
}

impl Resolved {
    /// Bytes of one arena half (input or output): fits, by validation.
    pub fn arena_half_bytes(&self) -> usize {
        self.max_elements * 4
    }

    /// Offset of the staging region in a slot's arena: after
    /// both halves, at a multiple of [`DeviceConfig::STAGING_ALIGN`]
    /// (8 GiB at most: fits, by validation).
    pub fn staging_offset(&self) -> usize {
        (2 * self.arena_half_bytes()).next_multiple_of(DeviceConfig::STAGING_ALIGN)
    }

    /// Bytes of a slot's arena: both halves, then staging (in the slot's
    /// one allocation, after the kernel ABI regions).
    pub fn arena_bytes(&self) -> usize {
        self.staging_offset() + self.staging_bytes
    }

    /// The default wait for a run with `ahead` runs ahead of it:
    /// `(ahead + 1) × fence_timeout` (bounded by validation and `DEPTH`;
    /// saturating all the same).
    pub fn queue_budget(&self, ahead: usize) -> Duration {
        let n = u32::try_from(ahead.saturating_add(1)).unwrap_or(u32::MAX);
        self.fence_timeout.saturating_mul(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Capabilities;

    fn info(watchdog: Option<Duration>) -> DriverInfo {
        DriverInfo {
            max_block_dim: 24,
            stream_capacity: 8,
            watchdog,
            capabilities: Capabilities::empty(),
        }
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn inverted_timeouts_are_rejected() {
        let c = DeviceConfig::default().fence_timeout(S);
        assert_eq!(
            c.resolve(&info(Some(S * 2)), 2),
            Err(ConfigError::FenceTimeoutNotAboveWatchdog {
                fence: S,
                watchdog: S * 2
            })
        );
        assert_eq!(
            DeviceConfig::default()
                .fence_timeout(S)
                .resolve(&info(Some(S)), 2)
                .unwrap_err(),
            ConfigError::FenceTimeoutNotAboveWatchdog {
                fence: S,
                watchdog: S
            },
            "equal is not above"
        );
        let r = DeviceConfig::default().resolve(&info(Some(S)), 2).unwrap();
        assert_eq!((r.fence_timeout, r.watchdog), (S * 2, S));
    }

    #[test]
    fn watchdog_must_be_known_and_not_understated() {
        assert_eq!(
            DeviceConfig::default().resolve(&info(None), 2),
            Err(ConfigError::WatchdogUnknown)
        );
        assert!(
            DeviceConfig::default()
                .device_watchdog(S)
                .resolve(&info(None), 2)
                .is_ok()
        );
        assert_eq!(
            DeviceConfig::default()
                .device_watchdog(S)
                .resolve(&info(Some(S * 3)), 2),
            Err(ConfigError::WatchdogBelowDevice {
                declared: S,
                device: S * 3
            })
        );
    }

    #[test]
    fn extreme_durations_are_refused_naming_the_value() {
        let i = info(Some(S));
        let max = DeviceConfig::MAX_TIMEOUT;
        let day_and_a_bit = max + Duration::from_nanos(1);
        for (cfg, what) in [
            (
                DeviceConfig::default().fence_timeout(Duration::MAX),
                "fence_timeout",
            ),
            (
                DeviceConfig::default().fence_timeout(day_and_a_bit),
                "fence_timeout",
            ),
            (
                DeviceConfig::default().device_watchdog(Duration::MAX),
                "device_watchdog",
            ),
            (
                // a watchdog above MAX / 2 used to panic computing `watchdog * 2`
                DeviceConfig::default().device_watchdog(Duration::MAX / 2 + S),
                "device_watchdog",
            ),
            (
                DeviceConfig::default().device_watchdog(max),
                "fence_timeout (default: twice the watchdog)",
            ),
        ] {
            match cfg.resolve(&i, 2) {
                Err(ConfigError::TooLong {
                    what: w, max: m, ..
                }) => {
                    assert_eq!((w, m), (what, max));
                }
                other => panic!("{cfg:?}: {other:?}"),
            }
        }
        // The driver's own watchdog is checked too.
        assert!(matches!(
            DeviceConfig::default().resolve(&info(Some(Duration::MAX)), 2),
            Err(ConfigError::TooLong { .. })
        ));
        // The ceiling itself is allowed.
        let r = DeviceConfig::default()
            .device_watchdog(max / 2)
            .resolve(&info(None), 2)
            .unwrap();
        assert_eq!(r.fence_timeout, max);
        assert_eq!(
            r.queue_budget(15),
            max * 16,
            "no overflow at the deepest queue"
        );
        assert_eq!(r.queue_budget(usize::MAX), max.saturating_mul(u32::MAX));
    }

    #[test]
    fn extreme_sizes_are_refused() {
        let i = info(Some(S));
        assert_eq!(
            DeviceConfig::default()
                .max_elements(usize::MAX)
                .resolve(&i, 2),
            Err(ConfigError::ArenaTooLarge {
                max_elements: usize::MAX,
                max: DeviceConfig::MAX_ELEMENTS
            })
        );
        let r = DeviceConfig::default()
            .max_elements(DeviceConfig::MAX_ELEMENTS)
            .resolve(&i, 2)
            .unwrap();
        assert_eq!(r.arena_half_bytes(), 4 << 30);
        assert_eq!(
            DeviceConfig::default()
                .staging_bytes(usize::MAX)
                .resolve(&i, 2),
            Err(ConfigError::StagingTooLarge {
                bytes: usize::MAX,
                max: DeviceConfig::MAX_STAGING
            })
        );
        let big = DeviceConfig::default()
            .max_elements(DeviceConfig::MAX_ELEMENTS)
            .staging_bytes(DeviceConfig::MAX_STAGING)
            .resolve(&i, 2)
            .unwrap();
        assert_eq!(big.staging_offset(), 8 << 30);
        assert_eq!(big.arena_bytes(), (8 << 30) + (4 << 30));
        let odd = DeviceConfig::default()
            .max_elements(3)
            .resolve(&i, 2)
            .unwrap();
        assert_eq!(odd.staging_offset(), 64, "24 bytes of arena, staging at 64");
        let tiny = DriverInfo {
            stream_capacity: 0,
            ..info(Some(S))
        };
        assert!(matches!(
            DeviceConfig::default().resolve(&tiny, usize::MAX),
            Err(ConfigError::QueueTooShallow { .. })
        ));
    }

    #[test]
    fn shapes_are_checked() {
        let i = info(Some(S));
        assert!(matches!(
            DeviceConfig::default().block_dim(0).resolve(&i, 2),
            Err(ConfigError::BlockDim { .. })
        ));
        assert!(matches!(
            DeviceConfig::default().block_dim(25).resolve(&i, 2),
            Err(ConfigError::BlockDim { .. })
        ));
        assert_eq!(
            DeviceConfig::default().max_elements(0).resolve(&i, 2),
            Err(ConfigError::ZeroCapacity)
        );
        assert_eq!(
            DeviceConfig::default().resolve(&i, 3),
            Err(ConfigError::QueueTooShallow {
                needed: 12,
                capacity: 8
            })
        );
    }
}
