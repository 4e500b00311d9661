//! The simulator's control API: what a test or an example reads and drives
//! of the simulated NPU itself, past any one driver value — counters, the
//! trace, armed faults, the streams and code resident, the clock, and
//! stepping. Every clone reaches the whole NPU here (what the [`Driver`]
//! calls refuse of another clone's, these look at freely).
//!
//! [`Driver`]: crate::driver::Driver

use std::time::{Duration, Instant};

use super::device_state::StepResult;
use super::trace::TraceEvent;
use super::{
    Fault, KernelCode, SimConfig, SimDriver, SimKernel, SimStats, StepOutcome, release_waking_here,
};
use crate::driver::{CodeHandle, StreamId, abi};

#[cfg(doc)]
use crate::driver::Driver;

impl SimDriver {
    /// `true` for [`SimDriver::real_time`].
    #[must_use]
    pub fn is_real_time(&self) -> bool {
        self.lock().is_real_time()
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> SimConfig {
        self.lock().cfg.clone()
    }

    /// A snapshot of the counters.
    #[must_use]
    pub fn stats(&self) -> SimStats {
        let core = self.lock();
        let mut s = core.stats.clone();
        s.trace_dropped = core.trace_dropped;
        s.live_bytes = core.mem.live_bytes();
        s.live_graphs = core.graphs_live() as u64;
        s
    }

    /// The trace entries still in the ring, oldest first.
    #[must_use]
    pub fn trace(&self) -> Vec<TraceEvent> {
        self.lock().trace.iter().copied().collect()
    }

    /// Empties the trace ring.
    pub fn clear_trace(&self) {
        self.lock().trace.clear();
    }

    /// Arms a fault.
    pub fn inject(&self, fault: Fault) {
        self.lock().faults.arm(fault);
    }

    /// Disarms every fault not yet triggered.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Live streams, in creation order.
    #[must_use]
    pub fn streams(&self) -> Vec<StreamId> {
        self.lock()
            .streams
            .keys()
            .map(|&k| StreamId::from_raw(k))
            .collect()
    }

    /// Tasks queued (including a running one) on `stream`; 0 for an unknown
    /// stream.
    #[must_use]
    pub fn queued(&self, stream: StreamId) -> usize {
        self.lock().queued(stream.raw())
    }

    /// The upload resident at code address `raw` now (`None` when the
    /// address is empty or not a code address).
    #[must_use]
    pub fn code_at(&self, raw: u64) -> Option<CodeHandle> {
        self.lock().code_at(raw)
    }

    /// Live pins of the upload `code` names: registrations not yet
    /// released (0 when it is no longer resident).
    #[must_use]
    pub fn code_pins(&self, code: CodeHandle) -> u64 {
        self.lock().code_pins(code)
    }

    /// Registers a Rust AICore kernel with this simulator (and every clone
    /// of it) and returns its code image, to register with
    /// [`Driver::register_code`] like any code (see [`SimKernel`]). The
    /// kernel stays known for the simulator's life; another simulator, or
    /// any other driver, refuses the image as invalid code.
    ///
    /// ```
    /// use runclaim::driver::Driver;
    /// use runclaim::sim::{SimDriver, SimKernel};
    ///
    /// let sim = SimDriver::stepped(Default::default());
    /// let code = sim.register_kernel(SimKernel::new(|_| Ok(())));
    /// let first = sim.register_code(code.as_bytes())?;
    /// let again = sim.clone().register_code(code.as_bytes())?; // a clone knows it too
    /// assert!(first.published && !again.published); // dedup, as for any code
    /// assert_eq!(first.handle, again.handle);
    /// # Ok::<(), runclaim::driver::DriverError>(())
    /// ```
    #[must_use = "the image is the only way to launch the kernel"]
    pub fn register_kernel(&self, kernel: SimKernel) -> KernelCode {
        self.lock().add_kernel(kernel)
    }

    /// The current device tick.
    #[must_use]
    pub fn now_ticks(&self) -> u64 {
        self.lock().now()
    }

    /// Real-time mode: the host [`Instant`] at which the wall clock the
    /// device follows reads device tick `ticks` — e.g. when an event whose
    /// [`event_timestamp`](Driver::event_timestamp) is `ticks` completed, on
    /// the host's clock. `None` in stepped mode, whose device time is
    /// virtual (or for a tick past the end of the host's clock).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use runclaim::driver::Driver;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let sim = SimDriver::real_time(SimConfig::default());
    /// let (s, e, p) = (sim.create_stream()?, sim.create_event()?, sim.alloc(4)?);
    /// sim.memset_async(s, p, 0, 4)?;
    /// sim.record_event(e, s)?;
    /// sim.sync_event(e, Duration::from_secs(5))?;
    /// let done = sim.tick_instant(sim.event_timestamp(e)?).expect("real time");
    /// assert!(done <= Instant::now());
    /// assert_eq!(SimDriver::stepped(SimConfig::default()).tick_instant(0), None);
    /// # Ok::<(), runclaim::driver::DriverError>(())
    /// ```
    #[must_use]
    pub fn tick_instant(&self, ticks: u64) -> Option<Instant> {
        let base = self.lock().base()?;
        base.checked_add(Duration::from_nanos(abi::ticks_to_nanos(ticks)))
    }

    /// Stepped mode: performs one device action on a stream picked by the
    /// seeded policy, and advances the device clock by one step. Real-time
    /// mode: does nothing and returns [`StepOutcome::Idle`].
    #[allow(
        clippy::must_use_candidate,
        reason = "stepping is done for its effect; the outcome is informational"
    )]
    pub fn step(&self) -> StepOutcome {
        let mut core = self.lock();
        if core.is_real_time() {
            return StepOutcome::Idle;
        }
        let out = core.policy_step();
        release_waking_here(core);
        self.notify_progress();
        out
    }

    /// Stepped mode: performs one device action on `stream` (the caller
    /// picks), and advances the device clock by one step.
    #[allow(
        clippy::must_use_candidate,
        reason = "stepping is done for its effect; the outcome is informational"
    )]
    pub fn step_stream(&self, stream: StreamId) -> StepOutcome {
        let mut core = self.lock();
        if core.is_real_time() {
            return StepOutcome::Idle;
        }
        core.tick();
        let out = match core.step_stream(stream.raw()) {
            StepResult::Progress => StepOutcome::Progressed(stream),
            StepResult::Blocked(_) => StepOutcome::Blocked(stream),
            StepResult::Idle => StepOutcome::Idle,
        };
        release_waking_here(core);
        self.notify_progress();
        out
    }

    /// Stepped mode: steps until no stream has work, at most `max_steps`.
    /// Returns the steps taken; `Err` with the steps taken when work remains.
    ///
    /// # Errors
    /// `Err(steps)` when the budget ran out with work still queued.
    pub fn run_until_idle(&self, max_steps: u64) -> Result<u64, u64> {
        let mut core = self.lock();
        if core.is_real_time() {
            return Ok(0);
        }
        let mut n = 0;
        while core.has_work() {
            if n == max_steps {
                release_waking_here(core);
                return Err(n);
            }
            core.policy_step();
            n += 1;
        }
        release_waking_here(core);
        Ok(n)
    }
}
