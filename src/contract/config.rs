//! Device configuration and its validation at open.

use std::time::Duration;

use super::error::ConfigError;
use crate::driver::DriverInfo;

/// Queue entries one run puts on its busiest stream: on the AICPU stream its
/// kernel, a wait on the AICore stream's event, and its fence record.
pub(crate) const TASKS_PER_RUN: usize = 3;

/// How a [`Device`](super::Device) is opened.
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
/// let ok = DeviceConfig::default().fence_timeout(Duration::from_millis(150));
/// assert!(Device::<_, 2>::open(sim, ok).is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceConfig {
    /// How long [`Run::fence`](super::Run::fence) (and a drop, a drain, a
    /// publication) waits for a run. Must exceed the device watchdog. Default:
    /// twice the watchdog.
    pub fence_timeout: Option<Duration>,
    /// The device's kernel watchdog. Default: what the driver reports
    /// ([`DriverInfo::watchdog`]); required when the driver does not know.
    pub device_watchdog: Option<Duration>,
    /// AICore workers per run (default 4).
    pub block_dim: u32,
    /// Elements each slot's arena holds for input and for output (default 4,096).
    pub max_elements: usize,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            fence_timeout: None,
            device_watchdog: None,
            block_dim: 4,
            max_elements: 4096,
        }
    }
}

impl DeviceConfig {
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

    /// Checks the configuration against the driver and resolves defaults.
    pub(crate) fn resolve(&self, info: &DriverInfo, depth: usize) -> Result<Resolved, ConfigError> {
        let watchdog = match (self.device_watchdog, info.watchdog) {
            (Some(declared), Some(device)) if declared < device => {
                return Err(ConfigError::WatchdogBelowDevice { declared, device });
            }
            (Some(w), _) | (None, Some(w)) => w,
            (None, None) => return Err(ConfigError::WatchdogUnknown),
        };
        let fence = self.fence_timeout.unwrap_or(watchdog * 2);
        if fence <= watchdog {
            return Err(ConfigError::FenceTimeoutNotAboveWatchdog { fence, watchdog });
        }
        if self.block_dim == 0 || self.block_dim > info.max_block_dim {
            return Err(ConfigError::BlockDim {
                block_dim: self.block_dim,
                max: info.max_block_dim,
            });
        }
        if self.max_elements == 0 {
            return Err(ConfigError::ZeroCapacity);
        }
        let needed = depth * TASKS_PER_RUN;
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
        })
    }
}

/// A validated configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub fence_timeout: Duration,
    pub watchdog: Duration,
    pub block_dim: u32,
    pub max_elements: usize,
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
                needed: 9,
                capacity: 8
            })
        );
    }
}
