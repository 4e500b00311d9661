//! [`Device`]: owns the driver, the stream pair, the per-slot device regions
//! and the run-time bookkeeping the types cannot express (forgotten runs,
//! poisoning, quarantine). This file opens and describes a device; what it
//! does lives next to it:
//!
//! | file | owns |
//! |---|---|
//! | `open.rs` | what opening builds (streams, slot regions, host buffers) under a drop guard, and the device assembled from it |
//! | `state/` | the bookkeeping behind the lock, one part per thing it owns (slots, queue, stream pair, pins) |
//! | `report.rs` | what a device reports: stats, health, a drain's report |
//! | `transitions.rs` | the per-slot transitions behind `Port`: launch (named steps), release |
//! | `arguments.rs` | a run's arguments: the one prepare (staging host tensors, resolving the tensors) and the one finalize (copy-back) |
//! | `adapter.rs` | the calls into the kernel ABI adapter: blocks, armed regions, records read and proven |
//! | `buffers.rs` | typed device buffers: allocation, host access, freeing what no run can touch |
//! | `stream_lifecycle.rs` | the stream pair's lifecycle: readying it for a launch; creating and retiring streams |
//! | `look.rs` | the one wait: a look at a run's fence or at the queue, and the two ways to sleep on what it names (a task's waker, a thread's blocking call) |
//! | `fence.rs` | what a fence's look judges: the queue-aware time rule and its verdict; the drop of many |
//! | `faults.rs` | whom a device fault belongs to |
//! | `recovery.rs` | a drain's end, close, teardown |
//! | `publication.rs` | `Device::publish`: pins, code generations |

mod abi;
mod adapter;
mod arguments;
mod buffers;
mod capture;
mod faults;
mod fence;
mod graph_release;
mod look;
mod open;
mod publication;
mod recovery;
mod report;
mod state;
mod stream_lifecycle;
mod transitions;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use self::abi::{Abi, SlotHost};
pub use self::recovery::CloseFuture;
pub use self::report::{ContractStats, DrainReport, Health, LostCause};
use self::state::State;
use super::buffer::SharedLedger;
use super::config::{DeviceConfig, Resolved};
use super::error::{Action, Error, ErrorKind};
use super::port::Port;
use super::slot::{Depth, SupportedDepth};
use crate::driver::abi::{Builtin, DevSpan};
use crate::driver::{DevPtr, Driver, EventId};

static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// The shortest wait a fence hands the driver: a virtual clock must move.
const MIN_SLICE: Duration = Duration::from_micros(1);

/// The most per-slot regions a kernel ABI adapter may declare.
pub(crate) const MAX_REGIONS: usize = 8;

/// The largest argument block an adapter may write (1 MiB).
pub(crate) const MAX_BLOCK: usize = 1 << 20;

/// One slot's device regions and completion events: per slot by
/// construction, reachable only through slot `I`'s token.
#[derive(Debug, Clone, Copy)]
struct SlotRegions {
    input: DevPtr,
    output: DevPtr,
    /// Where a workload's host tensors are staged
    /// ([`DeviceConfig::staging_bytes`] bytes, in the slot's allocation,
    /// which open zeroes).
    staging: DevPtr,
    /// The slot's one allocation: the kernel ABI adapter's regions
    /// (`Abi::layout`) from its start, then the arena (`input`, `output`,
    /// `staging`). Freed at teardown.
    region_base: DevPtr,
    /// The kernel ABI adapter's regions, in its declaration order (the
    /// first `Abi::regions.len()` are in use).
    abi: [DevSpan; MAX_REGIONS],
    /// Recorded on the AICore stream after the run's AICore kernel.
    ev_aicore: EventId,
    /// The run's fence: recorded on the AICPU stream after its AICPU kernel
    /// and a wait on `ev_aicore`, so it completes only when both kernels have.
    ev_fence: EventId,
}

/// An NPU opened for queued runs: the driver, one AICPU + AICore stream
/// pair, `DEPTH` slots of device regions, and the code registry.
///
/// `DEPTH` (default 2, supported 2 to 16) is how many runs may be launched
/// at once. Open it, [`publish`](Device::publish) code to get a
/// [`Runner`](crate::Runner), and run through the runner.
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// let runner = device.publish(&[Callable::program("double", &Program::new().mul(2))])?;
/// let mut out = Outputs::<0>::new(4);
/// let token = runner.take_slot::<0>()?;
/// let spec = RunSpec::new(runner.code("double")?, Input::Host(&[1, 2, 3]));
/// let done = runner.run_serial(token, spec, &mut out)?;
/// assert_eq!(out.values(), &[2, 4, 6]);
/// # drop(done);
/// # Ok::<(), runclaim::Error>(())
/// ```
pub struct Device<D: Driver, const DEPTH: usize = 2> {
    id: u64,
    driver: D,
    config: Resolved,
    regions: [SlotRegions; DEPTH],
    /// The kernel ABI adapter and what it declared at open.
    abi: Abi,
    /// Host side of each slot's run: its argument blocks (built at launch),
    /// a workload's resolved tensors and scalars (at prepare), the buffer
    /// records are armed and read back through; used only by the holder of
    /// the slot's token (and its launch, under the state lock).
    blocks: [Mutex<SlotHost>; DEPTH],
    /// The device's typed buffers (shared with each buffer, whose drop
    /// hands its memory back here).
    buffers: SharedLedger,
    state: Mutex<State<DEPTH>>,
    /// What the driver's first `notify_event` answer said it can see
    /// (`look.rs`): whether awaited waits back off on time.
    notices: std::sync::atomic::AtomicU8,
    /// Runs finalized successfully (kept beside the state: a finalize
    /// takes the state lock once, to check its claim).
    finalized: AtomicU64,
    /// Set once resources are released (or deliberately leaked).
    closed: bool,
    /// Whether the runner is poisoned, mirrored by the queue for readers
    /// that do not take the lock ([`Device::is_poisoned`]).
    poisoned: Arc<std::sync::atomic::AtomicBool>,
}

impl<D: Driver, const DEPTH: usize> std::fmt::Debug for Device<D, DEPTH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("depth", &DEPTH)
            .field("health", &self.health())
            .finish_non_exhaustive()
    }
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// Opens the device: validates `config` against the driver, creates the
    /// stream pair, allocates every slot's regions and completion events.
    ///
    /// # Errors
    /// The driver comes back inside the error, to retry with another
    /// configuration: [`ErrorKind::Config`] for an invalid configuration
    /// (e.g. a fence timeout not above the device watchdog);
    /// [`ErrorKind::Driver`] when the device refuses a resource (everything
    /// created so far is released first); [`ErrorKind::HostOutOfMemory`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use runclaim::{Device, DeviceConfig};
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let too_short = DeviceConfig::default().fence_timeout(Duration::from_millis(1));
    /// let err = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), too_short).unwrap_err();
    /// let device = Device::<_, 2>::open(err.into_value(), DeviceConfig::default())?; // the same driver
    /// # drop(device);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[allow(
        clippy::needless_pass_by_value,
        reason = "configurations are built inline and handed over, like std's builders"
    )]
    pub fn open(driver: D, config: DeviceConfig) -> Result<Self, Error<D>> {
        let resolved = config
            .resolve(&driver.info(), DEPTH)
            .and_then(|c| Ok((c, Abi::declare(config.kernel_abi.clone(), &c, DEPTH)?)));
        let (config, abi) = match resolved {
            Ok(c) => c,
            Err(e) => return Err(Error::new(driver, Action::Open, None, None, e.into())),
        };
        match Self::build(&driver, config, &abi) {
            Ok(parts) => Ok(Self::assemble(driver, config, abi, parts)),
            Err(kind) => Err(Error::new(driver, Action::Open, None, None, kind)),
        }
    }
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    fn lock(&self) -> MutexGuard<'_, State<DEPTH>> {
        // An adapter calling its device while the device calls it (maybe
        // holding this lock): refused loudly, never a deadlock. The panic
        // is caught where the adapter was called, and that run fails.
        if self.abi.get.builtin() == Builtin::User {
            refuse_reentry(self.id);
        }
        self.state.lock().unwrap_or_else(|poisoned| {
            // A panic (a driver's, or a bug) interrupted a transition while
            // it held the state: what reached the device is unknown. The
            // guard is recovered — nothing hangs — and the runner poisoned,
            // so that only a drain, which proves the queue quiet and resets
            // every slot, lets runs launch again.
            let mut st = poisoned.into_inner();
            self.state.clear_poison();
            st.interrupted();
            st
        })
    }

    /// The driver, for inspection (a simulator's statistics, faults to
    /// inject) and for resources of your own.
    ///
    /// **The trust boundary.** The device's own resources — its two
    /// streams, its events, the slot regions and the code it pinned — are
    /// the contract's. The device hands out none of their handles except a
    /// callable's [`CodeHandle`](crate::driver::CodeHandle) (for
    /// diagnostics). What you may do through the driver without breaking
    /// the contract:
    ///
    /// - create, use and destroy **your own** streams, events, allocations;
    /// - register code: it can never evict or replace code a live
    ///   publication pinned (a registration that would have to is refused
    ///   with `CodeMemoryFull`), and an upload newer than the device's
    ///   AICore stream makes that stream stale for it, so a later
    ///   publication of the same bytes re-creates the stream.
    ///
    /// What happens if you reach the device's resources anyway (a pin you
    /// release, a handle you forge): every driver validates every handle and
    /// range, so it is never undefined behaviour; a destroyed stream or
    /// event, a freed region, evicted code fail the device's next
    /// transition with an error — never a run of other code. Rewriting the
    /// *contents* of the device's memory by a forged address is outside the
    /// contract, as a second process writing the NPU's memory would be.
    ///
    /// ```
    /// use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
    /// use runclaim::driver::Driver;
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let sim = SimDriver::stepped(SimConfig::default().code_slots(1));
    /// let mut device = Device::<_, 2>::open(sim, DeviceConfig::default())?;
    /// let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// // The one code slot holds the runner's pinned code: no eviction.
    /// assert!(runner.device().driver().register_code(&Program::new().mul(2).encode()).is_err());
    /// let mut out = Outputs::<0>::new(1);
    /// runner.run_serial(runner.take_slot::<0>()?, RunSpec::new(runner.code("f")?, Input::Host(&[1])), &mut out)?;
    /// assert_eq!(out.values(), &[2]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The fence timeout in force.
    #[must_use]
    pub fn fence_timeout(&self) -> Duration {
        self.config.fence_timeout
    }

    /// The device watchdog the fence timeout was checked against.
    #[must_use]
    pub fn watchdog(&self) -> Duration {
        self.config.watchdog
    }

    /// Elements each slot's arena holds.
    #[must_use]
    pub fn max_elements(&self) -> usize {
        self.config.max_elements
    }

    /// Bytes of each slot's staging region for host tensors.
    #[must_use]
    pub fn staging_bytes(&self) -> usize {
        self.config.staging_bytes
    }

    /// AICore workers per run.
    #[must_use]
    pub fn block_dim(&self) -> u32 {
        self.config.block_dim
    }

    /// The run-time state: poison, in-flight runs, quarantined slots.
    #[must_use]
    pub fn health(&self) -> Health {
        let dropped = self.dropped_buffers();
        let st = self.lock();
        let (quarantined, launched) = st.slots.sets();
        Health {
            reclaimed: st.stats.reclaimed,
            poisoned: st.queue.poison(),
            in_flight: st.queue.runs().len(),
            quarantined,
            launched,
            buffers_awaiting_free: dropped.awaiting_free,
            buffers_quarantined: dropped.quarantined,
            recoveries: 0,
            last_recovery: None,
            recovering: false,
            lost: None,
        }
    }

    /// The poison, if the device stopped launching (what
    /// [`health`](Self::health) reports, for a caller that needs only it).
    pub(crate) fn poison(&self) -> Option<crate::contract::error::Poison> {
        self.lock().queue.poison()
    }

    /// `true` while the runner is poisoned, read without the device's lock
    /// (the queue writes it under the lock wherever the poison changes):
    /// what a shared device's admission asks of every submission.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Counters of the contract itself.
    #[must_use]
    pub fn stats(&self) -> ContractStats {
        let mut stats = self.lock().stats;
        stats.finalized = self.finalized.load(Ordering::Relaxed);
        stats
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn port(&self) -> &dyn Port {
        self
    }

    pub(crate) fn take(&self, slot: usize) -> Result<u64, ErrorKind> {
        let mut st = self.lock();
        if let Some(lease) = st.slots.abandoned(slot) {
            self.reclaim(&mut st, slot, lease);
        }
        st.slots.take(slot).map_err(|busy| st.busy(slot, busy))
    }

    /// An abandoned run's slot back, if the run's own fence is complete
    /// now: the same proof a fence takes, never an earlier one (a run
    /// judged unproven stays for a drain).
    fn reclaim(&self, st: &mut State<DEPTH>, slot: usize, lease: u64) {
        let Some(e) = st.queue.runs().iter().find(|e| e.slot == slot).copied() else {
            return;
        };
        if e.proof != crate::contract::inflight::Proof::Pending {
            return;
        }
        let fence = self.driver.query_event(self.regions[slot].ev_fence);
        if let Ok(crate::driver::Completion::Complete) = fence {
            st.queue.complete(e.seq, None);
            st.slots.free(slot, lease);
            st.stats.reclaimed += 1;
        }
    }

    fn block(&self, slot: usize) -> MutexGuard<'_, SlotHost> {
        self.blocks[slot]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Panics when `device`'s own user adapter is running on this thread
/// (see `Device::lock`).
#[cold]
#[inline(never)]
fn refuse_reentry(device: u64) {
    assert!(
        !abi::in_adapter_of(device),
        "a kernel ABI adapter called into its device from inside an adapter method"
    );
}

impl<D: Driver, const DEPTH: usize> Drop for Device<D, DEPTH> {
    fn drop(&mut self) {
        // Best effort: drain within the queue budget, then release. What
        // cannot be proven idle is leaked, never destroyed under the device.
        // A panicking driver must not abort the process from here.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.teardown()));
    }
}

/// `?` on a failed [`Device::open`](Device::open) drops the driver.
impl<D: Driver> From<Error<D>> for Error {
    fn from(e: Error<D>) -> Self {
        e.without_value()
    }
}

/// `?` on a failed [`Device::close`](Device::close) drops the device
/// (which leaks what it could not prove idle).
impl<D: Driver, const DEPTH: usize> From<Error<Option<Device<D, DEPTH>>>> for Error {
    fn from(e: Error<Option<Device<D, DEPTH>>>) -> Self {
        e.without_value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimConfig, SimDriver};
    use static_assertions::assert_impl_all;

    assert_impl_all!(Device<SimDriver, 2>: Send, Sync);

    #[test]
    fn failed_open_releases_what_it_created() {
        let sim = SimDriver::stepped(SimConfig::default());
        sim.inject(crate::sim::Fault::FailCall {
            op: crate::driver::Op::CreateEvent,
            nth: 3,
        });
        let err = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap_err();
        assert_eq!(err.action(), Action::Open);
        let s = sim.stats();
        assert_eq!(s.live_streams(), 0);
        assert_eq!(s.live_events(), 0);
        assert_eq!(s.live_allocations(), 0);
    }

    #[test]
    fn a_publication_that_fails_midway_still_starts_a_code_generation() {
        use crate::driver::abi::Program;
        use crate::{Callable, Input, Outputs, RunSpec};
        let sim = SimDriver::stepped(
            SimConfig::default()
                .code_slots(1)
                .watchdog(std::time::Duration::from_millis(2)),
        );
        let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
        let a = Callable::program("a", &Program::new().add(1));
        let b = Callable::program("b", &Program::new().mul(10));
        let c = Callable::program("c", &Program::new().xor(3));
        let mut out = Outputs::<0>::new(1);
        {
            // The AICore stream caches A at the one code address.
            let r = dev.publish(std::slice::from_ref(&a)).unwrap();
            let spec = RunSpec::new(r.code("a").unwrap(), Input::Host(&[5]));
            r.run_serial(r.take_slot::<0>().unwrap(), spec, &mut out)
                .unwrap();
            assert_eq!(out.values(), &[6]);
        }
        // B uploads (replacing A at that address), then C's registration fails.
        sim.inject(crate::sim::Fault::FailCall {
            op: crate::driver::Op::RegisterCode,
            nth: 2,
        });
        assert!(dev.publish(&[b.clone(), c]).is_err());
        // Publishing B again is a dedup hit; the stream must still be fresh.
        let r = dev.publish(&[b]).unwrap();
        let spec = RunSpec::new(r.code("b").unwrap(), Input::Host(&[5]));
        r.run_serial(r.take_slot::<0>().unwrap(), spec, &mut out)
            .unwrap();
        assert_eq!(out.values(), &[50], "a stale AICore stream would compute A");
        assert_eq!(sim.stats().stale_executions, 0);
    }

    #[test]
    fn drop_releases_everything() {
        let sim = SimDriver::stepped(SimConfig::default());
        let d = Device::<_, 3>::open(sim.clone(), DeviceConfig::default()).unwrap();
        let s = sim.stats();
        assert_eq!(s.live_streams(), 2);
        assert_eq!(s.live_events(), 6);
        assert_eq!(s.live_allocations(), 3); // one per slot: its regions and arena
        drop(d);
        let s = sim.stats();
        assert_eq!(
            (s.live_streams(), s.live_events(), s.live_allocations()),
            (0, 0, 0)
        );
    }
}
