//! The simulator's configuration: the device's sizes, watchdog, stepping and
//! trace settings ([`SimConfig`]) and the real-time mode's latency model
//! ([`LatencyModel`]).

use std::time::Duration;

use super::protocol::ModelHandle;

/// Host- and device-side latencies of the real-time mode. All may be zero.
///
/// ```
/// use std::time::Duration;
/// use runclaim::sim::{LatencyModel, SimConfig, SimDriver};
///
/// // 50 µs kernels, everything else as the default model.
/// let model = LatencyModel::default().kernel(Duration::from_micros(50));
/// let sim = SimDriver::real_time(SimConfig::default().latency(model));
/// assert!(sim.is_real_time());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LatencyModel {
    /// Host cost of one kernel-launch call (spent by the calling thread),
    /// on top of [`per_call`](Self::per_call). A graph launch pays it
    /// once.
    pub submit: Duration,
    /// Host cost of **every** runtime call — copies, memsets, launches,
    /// records, waits, queries, notifications, graph launches and the
    /// rest — spent by the calling thread outside the simulator's lock
    /// (a launch pays it and [`submit`](Self::submit)). Zero by default:
    /// no public figure gives it for an Ascend runtime, and the reference
    /// runtime's notes only bound a small run's host side at hundreds of
    /// µs over a dozen calls. Set it to model a runtime whose calls, not
    /// the kernels, bound small runs (`docs/performance.md`).
    pub per_call: Duration,
    /// Device gap before a queued kernel starts after its predecessor on the
    /// same stream finished (or after it was queued, if later).
    pub dispatch_gap: Duration,
    /// Host wake-up after a blocking wait's condition became true.
    pub host_wake: Duration,
    /// Compute time of one run's AICore workers.
    pub kernel: Duration,
}

impl Default for LatencyModel {
    /// 10 µs submit, no per-call cost, 2 µs dispatch gap, 20 µs host
    /// wake-up, 250 µs kernel.
    fn default() -> Self {
        LatencyModel {
            submit: Duration::from_micros(10),
            per_call: Duration::ZERO,
            dispatch_gap: Duration::from_micros(2),
            host_wake: Duration::from_micros(20),
            kernel: Duration::from_micros(250),
        }
    }
}

impl LatencyModel {
    /// Sets [`LatencyModel::submit`].
    #[must_use]
    pub const fn submit(mut self, d: Duration) -> Self {
        self.submit = d;
        self
    }

    /// Sets [`LatencyModel::per_call`].
    #[must_use]
    pub const fn per_call(mut self, d: Duration) -> Self {
        self.per_call = d;
        self
    }

    /// Sets [`LatencyModel::dispatch_gap`].
    #[must_use]
    pub const fn dispatch_gap(mut self, d: Duration) -> Self {
        self.dispatch_gap = d;
        self
    }

    /// Sets [`LatencyModel::host_wake`].
    #[must_use]
    pub const fn host_wake(mut self, d: Duration) -> Self {
        self.host_wake = d;
        self
    }

    /// Sets [`LatencyModel::kernel`].
    #[must_use]
    pub const fn kernel(mut self, d: Duration) -> Self {
        self.kernel = d;
        self
    }

    /// The longest latency the simulator applies (1 s); longer ones are
    /// clamped to it, so `Duration::MAX` cannot hang a host call.
    pub const MAX: Duration = Duration::from_secs(1);

    /// Each latency clamped to [`LatencyModel::MAX`].
    #[must_use]
    pub fn clamped(self) -> Self {
        LatencyModel {
            submit: self.submit.min(Self::MAX),
            per_call: self.per_call.min(Self::MAX),
            dispatch_gap: self.dispatch_gap.min(Self::MAX),
            host_wake: self.host_wake.min(Self::MAX),
            kernel: self.kernel.min(Self::MAX),
        }
    }

    /// Every latency zero: the device runs as fast as the host can drive it.
    #[must_use]
    pub const fn zero() -> Self {
        LatencyModel {
            submit: Duration::ZERO,
            per_call: Duration::ZERO,
            dispatch_gap: Duration::ZERO,
            host_wake: Duration::ZERO,
            kernel: Duration::ZERO,
        }
    }
}

/// Configuration of the simulated device.
///
/// ```
/// use std::time::Duration;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let cfg = SimConfig::default()
///     .watchdog(Duration::from_millis(2)) // hung kernels fault after 2 ms of device time
///     .code_slots(1)                      // every new image replaces the last one
///     .seed(7);                           // a different stepped interleaving
/// assert_eq!(SimDriver::stepped(cfg.clone()).config(), cfg);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimConfig {
    /// Tasks one stream holds (default
    /// [`STREAM_CAPACITY`](crate::driver::STREAM_CAPACITY), as measured on
    /// a2a3).
    pub stream_capacity: usize,
    /// Largest `block_dim` (default 24 AICore blocks).
    pub max_block_dim: u32,
    /// Device memory size in bytes (default 256 MiB).
    pub memory_bytes: u64,
    /// Resident code images (default 16). With 1, every new image replaces
    /// the previous one at the same code address.
    pub code_slots: usize,
    /// Device watchdog: a kernel running longer faults (default 100 ms).
    pub watchdog: Duration,
    /// Device time one step represents in stepped mode (default 1 µs); a
    /// blocking wait of `t` may take up to `t / step_time` steps.
    pub step_time: Duration,
    /// Upper bound on steps of one blocking wait in stepped mode (default 10 M;
    /// at least 1: a wait always moves the device).
    pub max_wait_steps: u64,
    /// Trace ring size (default 65,536 entries; 0 disables tracing).
    pub trace_capacity: usize,
    /// Seed of the stepped-mode scheduling policy.
    pub seed: u64,
    /// Latencies of the real-time mode.
    pub latency: LatencyModel,
    /// The device protocol the kernels follow (default
    /// [`RunclaimModel`](super::RunclaimModel)): see
    /// [`device_model`](Self::device_model).
    pub device_model: ModelHandle,
    /// Whether the device can capture streams into graphs (default
    /// `true`, as an Atlas A2/A3 can). `false` models one that cannot (an
    /// Atlas training card): `Capabilities::CAPTURE` is not reported and
    /// every `capture_begin` is refused with
    /// [`CaptureRule::NotCapturable`](crate::driver::CaptureRule::NotCapturable)
    /// (the runtime's 207000).
    pub capture: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            stream_capacity: crate::driver::STREAM_CAPACITY,
            max_block_dim: 24,
            memory_bytes: 256 << 20,
            code_slots: 16,
            watchdog: Duration::from_millis(100),
            step_time: Duration::from_micros(1),
            max_wait_steps: 10_000_000,
            trace_capacity: 1 << 16,
            seed: 0x5eed,
            latency: LatencyModel::default(),
            device_model: ModelHandle::default(),
            capture: true,
        }
    }
}

impl SimConfig {
    /// Sets [`SimConfig::watchdog`].
    #[must_use]
    pub fn watchdog(mut self, watchdog: Duration) -> Self {
        self.watchdog = watchdog;
        self
    }

    /// Sets [`SimConfig::code_slots`].
    #[must_use]
    pub fn code_slots(mut self, slots: usize) -> Self {
        self.code_slots = slots;
        self
    }

    /// Sets [`SimConfig::stream_capacity`].
    #[must_use]
    pub fn stream_capacity(mut self, capacity: usize) -> Self {
        self.stream_capacity = capacity;
        self
    }

    /// Sets [`SimConfig::capture`].
    ///
    /// ```
    /// use runclaim::driver::{Capabilities, CaptureRule, Driver, DriverErrorKind};
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let sim = SimDriver::stepped(SimConfig::default().capture(false));
    /// assert!(!sim.info().capabilities.contains(Capabilities::CAPTURE));
    /// let s = sim.create_stream()?;
    /// let e = sim.capture_begin(s).unwrap_err();
    /// assert_eq!(*e.kind(), DriverErrorKind::Capture { rule: CaptureRule::NotCapturable });
    /// # Ok::<(), runclaim::driver::DriverError>(())
    /// ```
    #[must_use]
    pub fn capture(mut self, on: bool) -> Self {
        self.capture = on;
        self
    }

    /// Sets [`SimConfig::seed`].
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets [`SimConfig::latency`]. Each latency is clamped to
    /// [`LatencyModel::MAX`]: a model, never a hang.
    #[must_use]
    pub fn latency(mut self, latency: LatencyModel) -> Self {
        self.latency = latency;
        self
    }

    /// Sets [`SimConfig::trace_capacity`].
    #[must_use]
    pub fn trace_capacity(mut self, entries: usize) -> Self {
        self.trace_capacity = entries;
        self
    }

    /// Sets [`SimConfig::max_block_dim`].
    #[must_use]
    pub fn max_block_dim(mut self, max: u32) -> Self {
        self.max_block_dim = max;
        self
    }

    /// Sets [`SimConfig::device_model`]: the protocol of the kernel ABI
    /// the simulated kernels follow — how they decode their launch
    /// blocks, hand-shake and write the run's records
    /// ([`DeviceModel`](super::DeviceModel)). A built-in
    /// ([`RunclaimModel`](super::RunclaimModel), the default, or
    /// [`A2a3Model`](super::A2a3Model)) or your own. A launch whose block
    /// the model does not decode is refused with
    /// [`DriverErrorKind::InvalidArgument`](crate::driver::DriverErrorKind::InvalidArgument)
    /// (or `BadAddress` for a range outside memory), before anything is
    /// queued.
    ///
    /// ```
    /// use runclaim::driver::{Driver, DriverErrorKind};
    /// use runclaim::driver::abi::{Program, RunArgs, StatusRecord, WallRecord, handshake_bytes};
    /// use runclaim::sim::{A2a3Model, SimConfig, SimDriver};
    ///
    /// let sim = SimDriver::stepped(SimConfig::default().device_model(A2a3Model));
    /// assert_eq!(sim.config().device_model.name(), "a2a3");
    /// let code = sim.register_code(&Program::new().encode())?.handle;
    /// let s = sim.create_stream()?;
    /// // runclaim's own block, every range it names live, is not an a2a3 block.
    /// let hs = sim.alloc(handshake_bytes(1))?;
    /// let (wall, status) = (sim.alloc(WallRecord::SIZE)?, sim.alloc(StatusRecord::SIZE)?);
    /// let run = RunArgs { run_id: 1, slot: 0, block_dim: 1, len: 0, input: hs.raw(), output: hs.raw(),
    ///                     handshake: hs.raw(), wall: wall.raw(), status: status.raw() };
    /// let e = sim.launch_aicore(s, code, 1, run.block().args()).unwrap_err();
    /// assert!(matches!(e.kind(), DriverErrorKind::InvalidArgument { .. }));
    /// assert_eq!(sim.queued(s), 0);
    /// # Ok::<(), runclaim::driver::DriverError>(())
    /// ```
    #[must_use]
    pub fn device_model(mut self, model: impl Into<ModelHandle>) -> Self {
        self.device_model = model.into();
        self
    }
}
