//! A simulated NPU implementing [`Driver`]: the embedded default on which
//! every example, doctest and test runs without an NPU.
//!
//! It is not a mock. It behaves like the device in every way the claim
//! contract depends on, so a broken contract produces a wrong value, a hang
//! bounded by the device watchdog, or a named error:
//!
//! - **Memory** at real addresses with guard gaps; every access is
//!   bounds-checked ([`DriverErrorKind::BadAddress`]).
//! - **Ownership per driver value**: a clone of a [`SimDriver`] is another
//!   driver on the same NPU (as two `AclDriver`s on one device id are),
//!   and each value's [`Driver`] calls reach only the allocations, streams
//!   and events that value made: a copy, memset, free or launch naming
//!   another's memory is [`DriverErrorKind::BadAddress`], another's stream
//!   or event [`DriverErrorKind::BadHandle`] — so the memory of one
//!   [`Device`](crate::Device) is never what another device's launch
//!   names. Code memory, the control API and the device side are the
//!   NPU's (see [`SimDriver`], *Each value owns what it makes*).
//! - **Streams** are FIFO queues with a bounded capacity
//!   ([`STREAM_CAPACITY`](crate::driver::STREAM_CAPACITY) tasks by default,
//!   as measured on the device); kernels on different streams make
//!   progress at the same time; events complete when their stream reaches
//!   them.
//! - **Code memory** holds [`SimConfig::code_slots`] resident images with
//!   byte-for-byte dedup; a registration pins its image until released,
//!   and only unpinned images are replaced (least recently registered
//!   first). Each stream has an
//!   **instruction cache**: it keeps the images that were resident when it
//!   was created (filling an empty address on first use), so after a
//!   publication a kernel on an older stream computes with the old code — a
//!   wrong value in the same time. [`SimStats::stale_executions`] counts it.
//! - **The two kernels** follow the device side of one kernel ABI, a
//!   [`DeviceModel`] ([`SimConfig::device_model`]): AICore workers report,
//!   wait for a task, compute their share, report done and wait for
//!   release; the AICPU kernel waits for every report, dispatches, waits,
//!   writes the run's timing and status records, releases. Two models are
//!   built in: [`RunclaimModel`] (the default), runclaim's own handshake
//!   region exactly as described in [`abi`] — zeroing a live region leaves
//!   the AICPU kernel waiting until the watchdog faults it — and
//!   [`A2a3Model`], the reference runtime's a2a3 layout, whose words carry
//!   the run's epoch so the host never clears them. A model of your own
//!   runs here too (and only here).
//! - **Argument blocks** are checked at launch before anything is queued:
//!   every address the block's writer recorded
//!   ([`LaunchArgs`](abi::LaunchArgs)), then the model's decoding, which
//!   checks every device range the block names (under [`RunclaimModel`],
//!   blocks of both versions ([`abi::ArgBlock`]): a version-1 block's
//!   input and output, a version-2 block's tensors, and both versions'
//!   handshake, wall and status records). A recorded range outside this
//!   driver value's own live allocations, or a decoded one outside memory,
//!   is [`DriverErrorKind::BadAddress`]; a block the model does not decode
//!   (another protocol's included) is [`DriverErrorKind::InvalidArgument`].
//!   A built-in [`Program`](abi::Program) computes from the first
//!   readable to the first writable tensor (its documentation says
//!   exactly what); a **Rust kernel** ([`SimKernel`], registered with
//!   [`SimDriver::register_kernel`]) sees the tensors and scalars and
//!   computes what it likes, through bounds-checked access to device
//!   memory. Its code image follows the code-memory rules above, stale
//!   instruction caches included.
//! - **Faults** ([`Fault`]): fail the k-th call of an operation, fault a
//!   kernel (the stream enters a sticky error state), report a run error,
//!   an event that never completes or completes late, a lost device.
//!
//! # Two modes over one device state
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
//!
//! # Awaiting an event
//!
//! [`Driver::notify_event`] keeps the caller's [`Waker`]
//! in the device state and answers
//! [`Notice::Completion`](crate::driver::Notice::Completion) (or
//! [`Notice::Ready`](crate::driver::Notice::Ready) when the event is
//! already complete or its stream faulted; [`Driver::queue_notify`] queues
//! nothing: the simulator sees completion itself). The waker is woken once,
//! then dropped, by **whatever moves the simulation** past the event's
//! completion, its stream's fault, the event's destruction, or the
//! deadline `within` on [`Driver::clock`]; always after the simulator's
//! lock is released (a woken task may call the driver at once), and
//! **never on the thread of another [`Driver`] call**: that caller may hold
//! locks of its own that the woken task needs (the contract calls its
//! driver under its state lock), so what a driver call made due is handed
//! to the shared timer thread ([`wake_after`](crate::driver::wake_after),
//! at once):
//!
//! - **Real time**: the device thread, promptly, on itself — while a
//!   notification is armed it sleeps only until a margin before the next
//!   moment one may be due and spins the rest, so the wake follows the
//!   completion (on the host clock, [`SimDriver::tick_instant`]) by
//!   microseconds. A host call that brings the simulation up to the wall
//!   clock hands what it made due to the timer thread.
//! - **Stepped**: nothing moves unless driven, so nothing is woken unless
//!   driven — by [`SimDriver::step`], [`SimDriver::step_stream`],
//!   [`SimDriver::run_until_idle`] (on the calling thread: the one
//!   driving) or a blocking call that steps ([`Driver::sync_event`],
//!   [`Driver::sync_stream`], a submission waiting for room: through the
//!   timer thread). A deadline is virtual: it passes only as steps move the
//!   virtual clock. A future awaiting a stepped simulator completes only
//!   if someone drives it: the test itself, between polls, or the
//!   executor's idle hook (when no task is ready, call `step()` — or
//!   `run_until_idle` — and poll what was woken). An executor that parks
//!   with nothing driving the simulator parks for ever.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::task::{Wake, Waker};
//! use std::time::Duration;
//! use runclaim::driver::{Completion, Driver, Notice};
//! use runclaim::sim::{SimConfig, SimDriver};
//!
//! /// Counts its wakes.
//! struct Count(AtomicUsize);
//! impl Wake for Count {
//!     fn wake(self: Arc<Self>) {
//!         self.0.fetch_add(1, Ordering::SeqCst);
//!     }
//! }
//!
//! let sim = SimDriver::stepped(SimConfig::default());
//! let (s, e, p) = (sim.create_stream()?, sim.create_event()?, sim.alloc(64)?);
//! sim.memset_async(s, p, 7, 64)?;
//! sim.record_event(e, s)?;
//! let count = Arc::new(Count(AtomicUsize::new(0)));
//! let waker = Waker::from(count.clone());
//! assert_eq!(sim.notify_event(e, Duration::from_secs(1), &waker)?, Notice::Completion);
//! assert_eq!(count.0.load(Ordering::SeqCst), 0); // nothing moved: nothing woken
//! sim.run_until_idle(100).unwrap(); // the driver of a stepped simulator
//! assert_eq!(count.0.load(Ordering::SeqCst), 1);
//! assert_eq!(sim.query_event(e)?, Completion::Complete);
//! // Complete now: nothing is armed, look at once.
//! assert_eq!(sim.notify_event(e, Duration::from_secs(1), &waker)?, Notice::Ready);
//! # Ok::<(), runclaim::driver::DriverError>(())
//! ```

mod config;
mod control;
mod device_state;
mod driver;
mod faults;
mod kernels;
mod memory;
pub mod protocol;
mod realtime;
mod rust_kernel;
mod stats;
pub mod trace;

pub use self::config::{LatencyModel, SimConfig};
pub use self::faults::{Fault, Kernel};
pub use self::protocol::{A2a3Model, DeviceModel, ModelHandle, RunclaimModel};
pub use self::rust_kernel::{KernelCode, KernelCtx, KernelError, KernelRun, SimKernel};
pub use self::stats::SimStats;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::sync::{Condvar, Mutex as StateMutex, MutexGuard};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::Instant;

use self::device_state::DeviceState;
use self::memory::Owner;
use self::realtime::device_thread;
use super::StreamId;

#[cfg(doc)]
use super::{Driver, DriverErrorKind, abi};

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

/// What moves a simulator's device clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// Only the host driving it: [`SimDriver::stepped`].
    Stepped,
    /// The wall clock, on a device thread: [`SimDriver::real_time`].
    Wall,
}

struct Shared {
    state: StateMutex<DeviceState>,
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
    /// The real-time device thread naps here (`driver::wake::nap`).
    kick: Condvar,
    /// Tests: the longest nap while a waker is armed, in ns (0: the
    /// default, 50 ms).
    #[cfg(test)]
    armed_nap_cap: AtomicU64,
    /// The next [`Owner`]: one per `SimDriver` value (each clone).
    owners: AtomicU64,
}

impl Shared {
    fn next_owner(&self) -> Owner {
        Owner(self.owners.fetch_add(1, Ordering::Relaxed))
    }

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
        let mut core = self
            .shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        core.shutdown = true;
        // Nobody can look at an event of this simulator any more: the armed
        // wakers are dropped, not woken — outside the lock, as dropping one
        // may run its task's destructors.
        let armed = core.notify.take_all();
        drop(core);
        drop(armed);
        self.shared.kick.notify_all();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            // The last clone can be dropped on the device thread itself (by
            // a waker it woke, whose task held it): joining itself would
            // panic. It stops on its own, having seen `shutdown`.
            if t.thread().id() != std::thread::current().id() {
                // A panicking device thread has already reported; nothing to add.
                let _ = t.join();
            }
        }
    }
}

impl SimDriver {
    /// Releases the simulator's lock at the end of a [`Driver`] call. The
    /// wakers the simulation made due ([`DeviceState::due_wakers`]) are
    /// never woken on the caller's thread, which may hold locks of its own
    /// that a woken task needs (the contract calls its driver under its
    /// state lock): in real time they stay armed for the device thread,
    /// which wakes them on itself (kicked, should it nap); stepped, they go
    /// to the shared timer thread ([`wake_after`](crate::driver::wake_after),
    /// at once).
    fn release(&self, mut core: MutexGuard<'_, DeviceState>) {
        if core.is_real_time() {
            let due = core.has_due_wakers();
            drop(core);
            if due {
                self.shared().kick.notify_all();
            }
            return;
        }
        let due = core.due_wakers();
        drop(core);
        for w in due {
            crate::driver::wake_after(std::time::Duration::ZERO, &w);
        }
    }
}

/// Releases the lock and wakes what is due right here: for the control
/// calls that drive a stepped device (`step`, `step_stream`,
/// `run_until_idle`) — the caller is the one driving — and for the device
/// thread.
fn release_waking_here(mut core: MutexGuard<'_, DeviceState>) {
    let due = core.due_wakers();
    drop(core);
    wake_all(due);
}

/// Wakes each waker; one that panics does not stop the others (nor the
/// device thread).
fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
    }
}

/// The simulated NPU, through one driver value. Cheap to clone: clones
/// share one device, so a test can keep a handle for
/// [`stats`](SimDriver::stats), [`inject`](SimDriver::inject) and stepping
/// while a [`Device`](crate::Device) owns another.
///
/// ```
/// use runclaim::{Device, DeviceConfig};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let device = Device::<_, 2>::open(sim.clone(), DeviceConfig::default())?; // a clone: the same NPU
/// assert_eq!(sim.stats().live_streams(), 2); // the device's stream pair
/// # drop(device);
/// # Ok::<(), runclaim::Error>(())
/// ```
///
/// # Each value owns what it makes
///
/// A clone is another driver on the same NPU, as a second
/// `AclDriver` (the `acl` driver) opened on the same device
/// id is. Each `SimDriver` value owns the allocations, streams and events
/// its [`Driver`] calls made, and those calls accept only its own: a
/// copy, memset or free, and every range a launch's argument blocks
/// record ([`LaunchArgs::fields`](abi::LaunchArgs::fields), both kernels'),
/// must lie inside a live allocation of this value, or the call fails with
/// [`DriverErrorKind::BadAddress`] before anything is queued; a stream or
/// event of another value is a [`DriverErrorKind::BadHandle`]. So two
/// devices opened on clones of one simulator cannot reach each other's
/// memory through a driver call, whatever their adapters write. To share
/// what a value owns, share the value itself (`&SimDriver`,
/// `Arc<SimDriver>`), not a clone of it. Code is the NPU's (registrations
/// are deduplicated and pinned across every clone, see
/// [`register_code`](Driver::register_code)), and so is the control API
/// (counters, trace, faults, stepping); the device side — the kernels and
/// the [`DeviceModel`] — reaches all memory, as a device does.
///
/// ```
/// use std::sync::Arc;
/// use runclaim::driver::{Driver, DriverErrorKind, HandleKind};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let other = sim.clone(); // a second driver on the same NPU
/// let (p, s) = (sim.alloc(64)?, sim.create_stream()?);
/// sim.copy_to_device(p, &[1; 64])?; // its own
/// let err = other.copy_to_device(p, &[2; 64]).unwrap_err();
/// assert!(matches!(err.kind(), DriverErrorKind::BadAddress { .. })); // not the clone's
/// assert!(other.free(p).is_err());
/// let err = other.memset_async(s, other.alloc(64)?, 0, 64).unwrap_err();
/// assert!(matches!(err.kind(), DriverErrorKind::BadHandle { kind: HandleKind::Stream, .. }));
/// assert_eq!(other.stats().live_allocations(), 2); // the control API sees the NPU
/// let shared = Arc::new(sim); // shared, not cloned: one owner
/// Arc::clone(&shared).free(p)?;
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
pub struct SimDriver {
    handle: Arc<Handle>,
    /// What this value's driver calls made, and may name.
    owner: Owner,
}

impl Clone for SimDriver {
    /// Another driver on the same simulated NPU: it shares the device (its
    /// memory, streams, code, clock, faults and trace), and owns nothing
    /// yet — the allocations, streams and events of `self` are foreign to
    /// its [`Driver`] calls, and its own are foreign to `self`'s (see
    /// [`SimDriver`]). Share `self` (`&`, `Arc`) to share what it owns.
    ///
    /// ```
    /// use runclaim::driver::Driver;
    /// use runclaim::sim::SimDriver;
    ///
    /// let sim = SimDriver::stepped(Default::default());
    /// let p = sim.alloc(8)?;
    /// assert!(sim.clone().copy_from_device(&mut [0; 8], p).is_err()); // a clone's, not its own
    /// sim.copy_from_device(&mut [0; 8], p)?;
    /// # Ok::<(), runclaim::driver::DriverError>(())
    /// ```
    fn clone(&self) -> Self {
        SimDriver {
            handle: Arc::clone(&self.handle),
            owner: self.shared().next_owner(),
        }
    }
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
        SimDriver::build(config, Clock::Stepped)
    }

    /// A device that advances on its own thread against the wall clock with
    /// `config.latency`.
    #[must_use]
    pub fn real_time(config: SimConfig) -> Self {
        SimDriver::build(config, Clock::Wall)
    }

    fn build(mut config: SimConfig, clock: Clock) -> Self {
        let real_time = clock == Clock::Wall;
        config.latency = config.latency.clamped();
        // A blocking wait takes at least one step, or a stepped device
        // could never move while the host waits.
        config.max_wait_steps = config.max_wait_steps.max(1);
        let shared = Arc::new(Shared {
            state: StateMutex::new(DeviceState::new(config, real_time.then(Instant::now))),
            epoch: AtomicU64::new(0),
            next_gate: AtomicU64::new(u64::MAX),
            waiters: AtomicUsize::new(0),
            progress: Condvar::new(),
            kick: Condvar::new(),
            #[cfg(test)]
            armed_nap_cap: AtomicU64::new(0),
            owners: AtomicU64::new(1),
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
        let owner = shared.next_owner();
        SimDriver {
            handle: Arc::new(Handle {
                shared,
                thread: Mutex::new(thread),
            }),
            owner,
        }
    }

    fn shared(&self) -> &Shared {
        &self.handle.shared
    }

    /// Wakes hosts blocked on device progress, if any (a futex wake is a
    /// syscall; most of the time nobody is blocked).
    fn notify_progress(&self) {
        self.shared().notify_progress();
    }

    fn lock(&self) -> MutexGuard<'_, DeviceState> {
        // A kernel function calling the simulator would wait on the lock its
        // own caller holds, for ever. It panics here instead, inside the
        // kernel's `catch_unwind`: the kernel faults, nothing hangs.
        assert!(
            !rust_kernel::in_kernel(),
            "a simulator kernel called the simulator (kernels must not call the driver)"
        );
        // A poisoned lock means a panic inside the simulator, which is a bug
        // in it; the state is still consistent enough to report from.
        self.shared()
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
