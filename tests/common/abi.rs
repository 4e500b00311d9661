//! The kernel ABI a test opens its device with — runclaim's own layout or
//! the reference runtime's a2a3 layout — and the simulator that speaks it.
//!
//! A scenario that says something about the contract (not about runclaim's
//! byte layout) takes an [`Abi`] and runs under both: the simulator follows
//! the matching device model ([`SimConfig::device_model`]) and the device
//! is opened with the matching adapter ([`DeviceConfig::kernel_abi`]).
//! [`Abi::Runclaim`] changes nothing: the configurations the tests used
//! before.

use runclaim::DeviceConfig;
use runclaim::driver::abi::A2a3Abi;
use runclaim::sim::{A2a3Model, SimConfig, SimDriver};

/// A built-in kernel ABI, on both sides: host adapter and device model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Abi {
    /// runclaim's own layout (the default): per-run records armed or
    /// cleared by the host.
    Runclaim,
    /// The a2a3 layout: epoch-stamped regions the host zeroes once, at open.
    A2a3,
}

impl Abi {
    /// Both, runclaim's first.
    pub const ALL: [Abi; 2] = [Abi::Runclaim, Abi::A2a3];

    /// `cfg` with the device model that speaks this ABI.
    #[must_use]
    pub fn sim(self, cfg: SimConfig) -> SimConfig {
        match self {
            Abi::Runclaim => cfg,
            Abi::A2a3 => cfg.device_model(A2a3Model),
        }
    }

    /// A stepped simulator speaking this ABI.
    #[must_use]
    pub fn stepped(self, cfg: SimConfig) -> SimDriver {
        SimDriver::stepped(self.sim(cfg))
    }

    /// A real-time simulator speaking this ABI.
    #[must_use]
    pub fn real_time(self, cfg: SimConfig) -> SimDriver {
        SimDriver::real_time(self.sim(cfg))
    }

    /// `cfg` with this ABI's adapter.
    #[must_use]
    pub fn with(self, cfg: DeviceConfig) -> DeviceConfig {
        match self {
            Abi::Runclaim => cfg,
            Abi::A2a3 => cfg.kernel_abi(A2a3Abi),
        }
    }

    /// The default device configuration with this ABI's adapter.
    #[must_use]
    pub fn config(self) -> DeviceConfig {
        self.with(DeviceConfig::default())
    }

    /// The name, for messages.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Abi::Runclaim => "runclaim",
            Abi::A2a3 => "a2a3",
        }
    }
}

/// Runs `scenario` under each ABI, runclaim's first. A failure says which
/// ABI it failed under, then goes on unwinding (the test fails as before).
pub fn each(scenario: impl Fn(Abi)) {
    for abi in Abi::ALL {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(abi)));
        if let Err(panic) = ran {
            eprintln!(
                "(the scenario above failed under the {} kernel ABI)",
                abi.name()
            );
            std::panic::resume_unwind(panic);
        }
    }
}
