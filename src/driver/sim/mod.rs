//! A simulated NPU implementing [`Driver`]: the embedded default on which
//! every example, doctest and test runs without an NPU.
//!
//! It is not a mock. It behaves like the device in every way the claim
//! contract depends on, so a broken contract produces a wrong value, a hang
//! bounded by the device watchdog, or a named error:
//!
//! - **Memory** at real addresses with guard gaps; every access is
//!   bounds-checked ([`DriverErrorKind::BadAddress`]).
//! - **Streams** are FIFO queues with a bounded capacity (1,792 tasks by
//!   default, as measured on the device); kernels on different streams make
//!   progress at the same time; events complete when their stream reaches
//!   them.
//! - **Code memory** holds [`SimConfig::code_slots`] resident images with
//!   content-hash dedup and LRU replacement. Each stream has an
//!   **instruction cache**: it keeps the images that were resident when it
//!   was created (filling an empty address on first use), so after a
//!   publication a kernel on an older stream computes with the old code — a
//!   wrong value in the same time. [`SimStats::stale_executions`] counts it.
//! - **The two kernels** hand-shake through the run's handshake region
//!   exactly as described in [`abi`]: AICore workers report,
//!   wait for a task, compute their share with the program, report done and
//!   wait for release; the AICPU kernel waits for every report, dispatches,
//!   waits, writes the device-wall and status records, releases. Zeroing a
//!   live region leaves the AICPU kernel waiting until the watchdog faults it.
//! - **Faults** ([`Fault`]): fail the k-th call of an operation, fault a
//!   kernel (the stream enters a sticky error state), report a run error,
//!   an event that never completes or completes late, a lost device.
//!
//! # Two modes over one core
//!
//! - [`SimDriver::stepped`]: the device advances only when driven — by
//!   [`SimDriver::step`] (a seeded policy picks the stream),
//!   [`SimDriver::step_stream`] (the caller picks), or a blocking wait, which
//!   drives the device until its condition holds or its step budget
//!   ([`SimConfig::step_time`] per step, capped by
//!   [`SimConfig::max_wait_steps`]) runs out. Same seed, same calls → same
//!   trace. Latencies are ignored; one step is one device action.
//! - [`SimDriver::real_time`]: the device advances against the wall clock
//!   with a [`LatencyModel`] (host submit cost per kernel, device dispatch
//!   gap, host wake-up after a blocking wait, kernel duration). Device
//!   timestamps are **model time**: the device clock moves from one model
//!   time point to the next (a dispatch gap ends, a kernel's compute ends)
//!   and never runs ahead of the wall clock, so a task can never start before
//!   the host queued it, and host-side delays show as device idle time — but
//!   the simulator's own scheduling jitter does not. Every host call brings
//!   the simulation up to the wall clock before it looks ("whoever looks,
//!   advances"), and a background device thread keeps it moving when nobody
//!   looks. (One thread for all streams, not one per stream: on a 2-core
//!   machine three spinning threads would measure the OS scheduler, not the
//!   model.)
//!
//! ```
//! use runclaim::driver::{Completion, Driver};
//! use runclaim::sim::{SimConfig, SimDriver};
//!
//! let sim = SimDriver::stepped(SimConfig::default());
//! let s = sim.create_stream()?;
//! let e = sim.create_event()?;
//! let buf = sim.alloc(16)?;
//! sim.memset_async(s, buf, 0xab, 16)?;
//! sim.record_event(e, s)?;
//! assert_eq!(sim.query_event(e)?, Completion::NotReady); // nothing stepped yet
//! sim.sync_event(e, std::time::Duration::from_millis(1))?; // drives the device
//! let mut out = [0u8; 16];
//! sim.copy_from_device(&mut out, buf)?;
//! assert_eq!(out, [0xab; 16]);
//! # Ok::<(), runclaim::driver::DriverError>(())
//! ```

mod config;
mod core;
mod faults;
mod kernels;
mod memory;
mod stats;
pub mod trace;

pub use self::config::{LatencyModel, SimConfig};
pub use self::faults::{Fault, Kernel};
pub use self::stats::SimStats;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use self::core::{Core, StepResult};
use self::trace::TraceEvent;
use super::{
    CodeHandle, Completion, DevPtr, Driver, DriverError, DriverErrorKind, DriverInfo, EventId, Op,
    Registration, StreamId,
};

#[cfg(doc)]
use super::abi;

/// The result of one device step (stepped mode).
///
/// ```
/// use runclaim::driver::Driver;
/// use runclaim::sim::{SimDriver, StepOutcome};
///
/// let sim = SimDriver::stepped(Default::default());
/// assert_eq!(sim.step(), StepOutcome::Idle); // no work
/// let (s, p) = (sim.create_stream()?, sim.alloc(4)?);
/// sim.memset_async(s, p, 0, 4)?;
/// assert_eq!(sim.step_stream(s), StepOutcome::Progressed(s)); // the memset starts
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepOutcome {
    /// The stream performed an action.
    Progressed(StreamId),
    /// The stream's head task is waiting (on the other stream or on time).
    Blocked(StreamId),
    /// No stream had work (or the simulator is in real-time mode).
    Idle,
}

struct Shared {
    core: Mutex<Core>,
    /// Bumped by the real-time device thread after every batch of progress,
    /// so waiting hosts can spin on it without taking the lock.
    epoch: AtomicU64,
    /// Device tick before which nothing can change on its own (the earliest
    /// time gate), `u64::MAX` when none: lets waiters sleep instead of spin.
    next_gate: AtomicU64,
    /// Hosts blocked on `progress`: the device thread signals only if any.
    waiters: AtomicUsize,
    /// Hosts wait here for device progress.
    progress: Condvar,
    /// The real-time device thread waits here for submissions.
    kick: Condvar,
}

impl Shared {
    fn notify_progress(&self) {
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.progress.notify_all();
        }
    }
}

struct Handle {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Even when a panic poisoned the lock, the device thread must learn
        // to stop: else the join below would wait for ever.
        self.shared
            .core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .shutdown = true;
        self.shared.kick.notify_all();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            // A panicking device thread has already reported; nothing to add.
            let _ = t.join();
        }
    }
}

/// The simulated NPU. Cheap to clone: clones share one device, so a test can
/// keep a handle for [`stats`](SimDriver::stats), [`inject`](SimDriver::inject)
/// and stepping while a [`Device`](crate::Device) owns another.
///
/// ```
/// use runclaim::{Device, DeviceConfig};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let device = Device::<_, 2>::open(sim.clone(), DeviceConfig::default())?; // a clone shares the device
/// assert_eq!(sim.stats().live_streams(), 2); // the device's stream pair
/// # drop(device);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Clone)]
pub struct SimDriver {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for SimDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimDriver")
            .field("real_time", &self.is_real_time())
            .finish_non_exhaustive()
    }
}

impl SimDriver {
    /// A deterministic device that advances only when driven.
    #[must_use]
    pub fn stepped(config: SimConfig) -> Self {
        SimDriver::build(config, false)
    }

    /// A device that advances on its own thread against the wall clock with
    /// `config.latency`.
    #[must_use]
    pub fn real_time(config: SimConfig) -> Self {
        SimDriver::build(config, true)
    }

    fn build(mut config: SimConfig, real_time: bool) -> Self {
        config.latency = config.latency.clamped();
        let shared = Arc::new(Shared {
            core: Mutex::new(Core::new(config, real_time.then(Instant::now))),
            epoch: AtomicU64::new(0),
            next_gate: AtomicU64::new(u64::MAX),
            waiters: AtomicUsize::new(0),
            progress: Condvar::new(),
            kick: Condvar::new(),
        });
        let thread = real_time.then(|| {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("runclaim-sim-device".into())
                .spawn(move || device_thread(&shared))
        });
        // Without a device thread the real-time sim cannot progress; report
        // that through every wait (a timeout) rather than panicking here.
        let thread = thread.and_then(Result::ok);
        SimDriver {
            handle: Arc::new(Handle {
                shared,
                thread: Mutex::new(thread),
            }),
        }
    }

    fn shared(&self) -> &Shared {
        &self.handle.shared
    }

    /// Real-time mode: brings the simulation up to the wall clock under the
    /// caller's lock (a no-op in stepped mode).
    fn advance(&self, core: &mut MutexGuard<'_, Core>) {
        if core.is_real_time() {
            let (moved, next) = core.advance_real_time();
            self.shared()
                .next_gate
                .store(next.unwrap_or(u64::MAX), Ordering::Release);
            if moved {
                self.shared().epoch.fetch_add(1, Ordering::Release);
                self.notify_progress();
            }
        }
    }

    /// Wakes hosts blocked on device progress, if any (a futex wake is a
    /// syscall; most of the time nobody is blocked).
    fn notify_progress(&self) {
        self.shared().notify_progress();
    }

    fn lock(&self) -> MutexGuard<'_, Core> {
        // A poisoned lock means a panic inside the simulator, which is a bug
        // in it; the state is still consistent enough to report from.
        self.shared()
            .core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

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

    /// The current device tick.
    #[must_use]
    pub fn now_ticks(&self) -> u64 {
        self.lock().now()
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
        drop(core);
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
        drop(core);
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
                return Err(n);
            }
            core.policy_step();
            n += 1;
        }
        Ok(n)
    }

    // ----- shared implementation of the Driver calls --------------------

    /// Runs `f` under the lock after charging the call and applying injected
    /// call faults.
    fn call<T>(
        &self,
        op: Op,
        f: impl FnOnce(&mut Core) -> Result<T, DriverErrorKind>,
    ) -> Result<T, DriverError> {
        let mut core = self.lock();
        core.begin_call(op).map_err(|k| DriverError::new(op, k))?;
        self.advance(&mut core);
        let r = f(&mut core).map_err(|k| DriverError::new(op, k));
        drop(core);
        self.notify_progress();
        r
    }

    /// A submission: pays the model's host submit cost (real time), then
    /// waits for room on the stream like a device enqueue would, bounded.
    fn submit(
        &self,
        op: Op,
        stream: u64,
        kernel: bool,
        f: impl FnOnce(&mut Core) -> Result<(), DriverErrorKind>,
    ) -> Result<(), DriverError> {
        let mut core = self.lock();
        core.begin_call(op).map_err(|k| DriverError::new(op, k))?;
        if kernel && core.is_real_time() {
            let cost = core.cfg.latency.submit;
            drop(core);
            spin_for(cost);
            core = self.lock();
        }
        core.check_stream(stream)
            .map_err(|k| DriverError::new(op, k))?;
        let capacity = core.cfg.stream_capacity;
        if core.queued(stream) >= capacity {
            // A real enqueue would block this thread; wait (bounded) instead.
            core.stats.blocked_enqueues += 1;
            let room = |c: &Core| c.queued(stream) < capacity || c.check_stream(stream).is_err();
            core = self
                .wait(core, Duration::from_secs(10), room)
                .map_err(|_| DriverError::new(op, DriverErrorKind::QueueFull { capacity }))?;
            core.check_stream(stream)
                .map_err(|k| DriverError::new(op, k))?;
        }
        let r = f(&mut core).map_err(|k| DriverError::new(op, k));
        // The published gate predates this task: until the device thread has
        // seen it, nobody may sleep on the old gate.
        self.shared().next_gate.store(0, Ordering::Release);
        drop(core);
        r
    }

    /// Waits until `cond` holds: stepped mode drives the device (budget from
    /// `timeout`), real-time mode waits for the device thread. Returns the
    /// guard, or (having released it) the time waited on expiry.
    fn wait<'a>(
        &'a self,
        mut core: MutexGuard<'a, Core>,
        timeout: Duration,
        mut cond: impl FnMut(&Core) -> bool,
    ) -> Result<MutexGuard<'a, Core>, Duration> {
        if !core.is_real_time() {
            let step = core.cfg.step_time.max(Duration::from_nanos(1));
            // A positive wait takes at least one step, so that the virtual
            // clock moves even when the wait is shorter than a step.
            let budget = u64::try_from(timeout.as_nanos() / step.as_nanos())
                .unwrap_or(u64::MAX)
                .max(u64::from(!timeout.is_zero()))
                .min(core.cfg.max_wait_steps);
            let mut steps = 0;
            while !cond(&core) {
                if steps >= budget {
                    return Err(step.saturating_mul(u32::try_from(steps).unwrap_or(u32::MAX)));
                }
                core.policy_step();
                steps += 1;
            }
            return Ok(core);
        }
        let start = Instant::now();
        // `None`: the wait has no deadline (it would lie past the clock's end).
        let deadline = start.checked_add(timeout);
        let spin_until = start + Duration::from_millis(2);
        loop {
            // Whoever looks advances: the simulation is determined by time, so
            // a waiting host need not depend on the device thread's timing.
            self.advance(&mut core);
            if cond(&core) {
                return Ok(core);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(now - start);
            }
            let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now));
            if now < spin_until {
                // Spin on the progress epoch, not the lock: the device thread
                // must not queue behind a polling host. Re-check at least every
                // 50 µs for conditions that depend on time alone.
                let gate = self.shared().next_gate.load(Ordering::Acquire);
                let until_gate = gate.saturating_sub(core.now());
                // Far from the next device event: sleep through most of it
                // (sleep overshoots by ~100 µs on small VMs), leaving the CPU
                // to the device thread; any device progress wakes us early.
                let far = Duration::from_nanos(super::abi::ticks_to_nanos(until_gate.min(1 << 40)));
                if gate != u64::MAX && far > SLEEP_THRESHOLD {
                    // Nothing happens on its own before the gate, and a new
                    // submission resets it; so a plain sleep, which wakes no
                    // one and takes no lock.
                    let nap = far.saturating_sub(SLEEP_MARGIN).min(left);
                    drop(core);
                    std::thread::sleep(nap);
                    core = self.lock();
                    continue;
                }
                let seen = self.shared().epoch.load(Ordering::Acquire);
                let gate_at = core.base().filter(|_| gate != u64::MAX).and_then(|b| {
                    b.checked_add(Duration::from_nanos(super::abi::ticks_to_nanos(gate)))
                });
                drop(core);
                let recheck = Instant::now() + Duration::from_micros(50);
                loop {
                    let t = Instant::now();
                    if self.shared().epoch.load(Ordering::Acquire) != seen
                        || t >= recheck
                        || gate_at.is_some_and(|g| t >= g)
                    {
                        break;
                    }
                    std::hint::spin_loop();
                    std::thread::yield_now();
                }
                core = self.lock();
            } else {
                let left = left.min(Duration::from_millis(1));
                self.shared().waiters.fetch_add(1, Ordering::AcqRel);
                core = self
                    .shared()
                    .progress
                    .wait_timeout(core, left)
                    .map_or_else(|e| e.into_inner().0, |(g, _)| g);
                self.shared().waiters.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// After a blocking wait observed completion at device tick `at`, the
    /// host wakes `host_wake` later (real-time mode).
    fn host_wake(core: MutexGuard<'_, Core>, at: u64) {
        if !core.is_real_time() {
            return;
        }
        let target = at.saturating_add(super::abi::duration_to_ticks(core.cfg.latency.host_wake));
        let base = core.base();
        drop(core);
        let deadline = base
            .and_then(|b| b.checked_add(Duration::from_nanos(super::abi::ticks_to_nanos(target))));
        if let Some(deadline) = deadline {
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
        }
    }

    fn blocking(
        &self,
        op: Op,
        timeout: Duration,
        done: impl Fn(&Core) -> Result<Option<u64>, DriverErrorKind>,
    ) -> Result<(), DriverError> {
        let mut core = self.lock();
        core.begin_call(op).map_err(|k| DriverError::new(op, k))?;
        let cond = |c: &Core| !matches!(done(c), Ok(None));
        core = match self.wait(core, timeout, cond) {
            Ok(c) => c,
            Err(waited) => {
                return Err(DriverError::new(op, DriverErrorKind::Timeout { waited }));
            }
        };
        match done(&core) {
            Ok(Some(at)) => {
                Self::host_wake(core, at);
                Ok(())
            }
            Ok(None) => Err(DriverError::new(
                op,
                DriverErrorKind::Timeout { waited: timeout },
            )),
            Err(k) => Err(DriverError::new(op, k)),
        }
    }
}

/// Host waits longer than this sleep (for all but [`SLEEP_MARGIN`]) rather
/// than spin, leaving the CPU to the device thread.
const SLEEP_THRESHOLD: Duration = Duration::from_micros(300);
/// Longest the device thread sleeps with nothing due.
const DEVICE_IDLE_NAP: Duration = Duration::from_millis(1);
/// Shortest device-thread nap (sleeps overshoot anyway).
const DEVICE_MIN_NAP: Duration = Duration::from_micros(50);
/// How much of a long wait is spun rather than slept: covers the ~100 µs a
/// sleep overshoots on a small VM.
const SLEEP_MARGIN: Duration = Duration::from_micros(200);

/// Busy-waits `d` on the calling thread (the modelled host cost of a call).
fn spin_for(d: Duration) {
    if d.is_zero() {
        return;
    }
    // A cost past the clock's end would never be paid in full anyway.
    let Some(end) = Instant::now().checked_add(d) else {
        return;
    };
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// The real-time device thread: keeps the simulation moving when no host is
/// looking (hosts advance it themselves whenever they look). Device time is
/// model time, so when this thread runs late nothing observable changes; it
/// therefore sleeps to the next gate rather than spin, and needs no wake-up
/// on submissions.
fn device_thread(shared: &Shared) {
    let lock = || {
        shared
            .core
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    loop {
        let mut core = lock();
        if core.shutdown {
            return;
        }
        let (progressed, next) = core.advance_real_time();
        shared
            .next_gate
            .store(next.unwrap_or(u64::MAX), Ordering::Release);
        if progressed {
            shared.epoch.fetch_add(1, Ordering::Release);
            shared.notify_progress();
        }
        let now = core.now();
        let nap = next.map_or(DEVICE_IDLE_NAP, |t| {
            Duration::from_nanos(super::abi::ticks_to_nanos(t.saturating_sub(now)))
                .clamp(DEVICE_MIN_NAP, DEVICE_IDLE_NAP)
        });
        // Woken early only by shutdown.
        let _ = shared.kick.wait_timeout(core, nap);
    }
}

impl Driver for SimDriver {
    fn info(&self) -> DriverInfo {
        let core = self.lock();
        DriverInfo {
            max_block_dim: core.cfg.max_block_dim,
            stream_capacity: core.cfg.stream_capacity,
            watchdog: Some(core.cfg.watchdog),
            capabilities: super::Capabilities::EVENT_SYNC_TIMEOUT
                | super::Capabilities::EVENT_TIMESTAMP
                | super::Capabilities::WATCHDOG_CONTROL,
        }
    }

    fn alloc(&self, bytes: usize) -> Result<DevPtr, DriverError> {
        self.call(Op::Alloc, |c| c.alloc(bytes as u64).map(DevPtr::from_raw))
    }

    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        self.call(Op::Free, |c| c.free(ptr.raw()))
    }

    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        self.call(Op::CopyToDevice, |c| c.write(dst.raw(), src))
    }

    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        self.call(Op::CopyFromDevice, |c| c.read(src.raw(), dst))
    }

    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
        self.call(Op::Memset, |c| c.fill(dst.raw(), value, len as u64))
    }

    fn copy_async(
        &self,
        stream: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        self.submit(Op::CopyAsync, stream.raw(), false, |c| {
            c.enqueue_copy(stream.raw(), dst.raw(), src.raw(), len as u64)
        })
    }

    fn memset_async(
        &self,
        stream: StreamId,
        dst: DevPtr,
        value: u8,
        len: usize,
    ) -> Result<(), DriverError> {
        self.submit(Op::MemsetAsync, stream.raw(), false, |c| {
            c.enqueue_memset(stream.raw(), dst.raw(), value, len as u64)
        })
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        self.call(Op::CreateStream, |c| {
            Ok(StreamId::from_raw(c.create_stream()))
        })
    }

    fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        self.call(Op::DestroyStream, |c| c.destroy_stream(stream.raw()))
    }

    fn query_stream(&self, stream: StreamId) -> Result<Completion, DriverError> {
        self.call(Op::QueryStream, |c| {
            c.stream_done(stream.raw()).map(|d| {
                if d.is_some() {
                    Completion::Complete
                } else {
                    Completion::NotReady
                }
            })
        })
    }

    fn sync_stream(&self, stream: StreamId, timeout: Duration) -> Result<(), DriverError> {
        self.blocking(Op::SyncStream, timeout, |c| c.stream_done(stream.raw()))
    }

    fn create_event(&self) -> Result<EventId, DriverError> {
        self.call(Op::CreateEvent, |c| Ok(EventId::from_raw(c.create_event())))
    }

    fn destroy_event(&self, event: EventId) -> Result<(), DriverError> {
        self.call(Op::DestroyEvent, |c| c.destroy_event(event.raw()))
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), DriverError> {
        self.submit(Op::RecordEvent, stream.raw(), false, |c| {
            c.enqueue_record(event.raw(), stream.raw())
        })
    }

    fn query_event(&self, event: EventId) -> Result<Completion, DriverError> {
        self.call(Op::QueryEvent, |c| {
            c.event_done(event.raw()).map(|d| {
                if d.is_some() {
                    Completion::Complete
                } else {
                    Completion::NotReady
                }
            })
        })
    }

    fn sync_event(&self, event: EventId, timeout: Duration) -> Result<(), DriverError> {
        self.blocking(Op::SyncEvent, timeout, |c| c.event_done(event.raw()))
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        self.submit(Op::StreamWaitEvent, stream.raw(), false, |c| {
            c.enqueue_wait(stream.raw(), event.raw())
        })
    }

    fn event_elapsed(&self, start: EventId, end: EventId) -> Result<Duration, DriverError> {
        self.call(Op::EventElapsed, |c| {
            let a = c.event_time(start.raw())?;
            let b = c.event_time(end.raw())?;
            Ok(Duration::from_nanos(super::abi::ticks_to_nanos(
                b.saturating_sub(a),
            )))
        })
    }

    fn event_timestamp(&self, event: EventId) -> Result<u64, DriverError> {
        self.call(Op::EventTimestamp, |c| c.event_time(event.raw()))
    }

    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        self.call(Op::RegisterCode, |c| c.register_code(code))
    }

    fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
        self.call(Op::ReleaseCode, |c| c.release_code(code))
    }

    fn code_epoch(&self) -> u64 {
        self.lock().code_epoch()
    }

    /// Stepped mode: the virtual device time (steps × `step_time`), so a
    /// host thread preempted between steps never makes the device look
    /// slow. Real-time mode: the host's monotonic clock, which the device
    /// follows.
    fn clock(&self) -> Duration {
        let core = self.lock();
        if core.is_real_time() {
            drop(core);
            super::host_clock()
        } else {
            Duration::from_nanos(super::abi::ticks_to_nanos(core.now()))
        }
    }

    fn launch_aicore(
        &self,
        stream: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: &[u8],
    ) -> Result<(), DriverError> {
        self.submit(Op::LaunchAicore, stream.raw(), true, |c| {
            c.enqueue_aicore(stream.raw(), code, block_dim, args)
        })
    }

    fn launch_aicpu(&self, stream: StreamId, args: &[u8]) -> Result<(), DriverError> {
        self.submit(Op::LaunchAicpu, stream.raw(), true, |c| {
            c.enqueue_aicpu(stream.raw(), args)
        })
    }
}
