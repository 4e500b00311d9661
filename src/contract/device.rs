//! [`Device`]: owns the driver, the stream pair, the per-slot device regions
//! and the run-time bookkeeping the types cannot express (forgotten runs,
//! poisoning, quarantine).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::config::{DeviceConfig, Resolved};
use super::error::{Action, Error, ErrorKind, Poison, PoisonCause, Record, RunId};
use super::inflight::{Entry, InFlightSet, Proof};
use super::code::{Callable, CodeEntry, CodeRef};
use super::port::{LaunchFail, Port, RunInfo, Submitted, Wait};
use super::runner::Runner;
use super::spec::Input;
use super::slot::{Depth, SlotSet, SupportedDepth};
use crate::driver::abi::{self, RunArgs, StatusRecord, WallRecord};
use crate::driver::{CodeHandle, Completion, DevPtr, Driver, DriverError, EventId, StreamId};

static NEXT_DEVICE_ID: AtomicU64 = AtomicU64::new(1);

/// The shortest wait a fence hands the driver: a virtual clock must move.
const MIN_SLICE: Duration = Duration::from_micros(1);

/// One slot's device regions and completion events: per slot by
/// construction, reachable only through slot `I`'s token.
#[derive(Debug, Clone, Copy)]
struct SlotRegions {
    input: DevPtr,
    output: DevPtr,
    handshake: DevPtr,
    wall: DevPtr,
    status: DevPtr,
    /// Recorded on the AICore stream after the run's AICore kernel.
    ev_aicore: EventId,
    /// The run's fence: recorded on the AICPU stream after its AICPU kernel
    /// and a wait on `ev_aicore`, so it completes only when both kernels have.
    ev_fence: EventId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    /// The runner holds the slot; a token can be taken.
    Free,
    /// A token with this lease is out (alone or inside a prepared or
    /// fenced run).
    Held { lease: u64 },
    /// A launched run with this lease holds the slot.
    InFlight { lease: u64 },
    /// The slot's run could not be proven complete; only a drain frees it.
    Quarantined,
}

/// The last launched run's output: what [`Input::Previous`] reads.
#[derive(Debug, Clone, Copy)]
struct Chain {
    slot: usize,
    len: usize,
}

/// Counters of the contract itself ([`Device::stats`]).
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let mut out = Outputs::<0>::new(4);
/// runner.run_serial(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])), &mut out)?;
/// let stats = runner.device().stats();
/// assert_eq!((stats.launched, stats.fenced, stats.finalized), (1, 1, 1));
/// assert_eq!(stats.aicore_recreations, 1); // the first launch after the publication
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ContractStats {
    /// Runs launched.
    pub launched: u64,
    /// Runs observed complete by a fence (or by a drop's fence).
    pub fenced: u64,
    /// Runs finalized successfully.
    pub finalized: u64,
    /// Runs whose status reported an error.
    pub run_failures: u64,
    /// Slots quarantined.
    pub quarantined: u64,
    /// Drains that proved the queue quiet.
    pub drains: u64,
    /// AICore streams re-created after a publication.
    pub aicore_recreations: u64,
    /// Streams re-created after a fault.
    pub fault_recreations: u64,
    /// Code generations started (registrations that uploaded new code).
    pub generations: u64,
}

/// A snapshot of a device's run-time state.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// let run = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// let h = runner.health();
/// assert_eq!((h.in_flight, h.poisoned), (1, None));
/// assert!(h.launched.contains(1) && h.quarantined.is_empty());
/// # drop(run);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Health {
    /// The poison, if the runner stopped launching.
    pub poisoned: Option<Poison>,
    /// Runs in flight (including unproven ones).
    pub in_flight: usize,
    /// Slots quarantined until a drain.
    pub quarantined: SlotSet,
    /// Slots in flight.
    pub launched: SlotSet,
}

/// What a drain found and did.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let mut runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// # let code = runner.code("f")?;
/// // A forgotten run keeps its slot until a drain proves it complete.
/// let run = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
/// std::mem::forget(run);
/// let report = runner.drain()?;
/// assert_eq!((report.retired, report.cleared), (1, None));
/// assert!(runner.take_slot::<0>().is_ok());
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainReport {
    /// In-flight entries retired (forgotten, unproven or partial runs).
    pub retired: usize,
    /// Quarantined slots returned to service.
    pub released: usize,
    /// Faulted streams re-created.
    pub streams_recreated: usize,
    /// The poison cleared, if the runner was poisoned.
    pub cleared: Option<Poison>,
}

struct State<const DEPTH: usize> {
    slots: [SlotState; DEPTH],
    leases: [u64; DEPTH],
    in_flight: InFlightSet<DEPTH>,
    poison: Option<Poison>,
    next_run: u64,
    next_seq: u64,
    chain: Option<Chain>,
    aicore: StreamId,
    aicpu: StreamId,
    /// Code generation the AICore stream was created in.
    aicore_generation: u64,
    /// Current code generation: bumped by every publication.
    generation: u64,
    /// The driver's code epoch when the AICore stream was created: an upload
    /// stamped above it may be stale in that stream's instruction cache.
    aicore_epoch: u64,
    /// The uploads this device's current publication pinned (one per
    /// registration), released at the next publication and at close.
    pinned: Vec<CodeHandle>,
    /// The run being launched while the lock is held across its submission
    /// (what a panic interrupted, if one does).
    launching: Option<(RunId, usize)>,
    /// Idle streams whose destroy failed: retried at every drain and at
    /// teardown, so a refused destroy does not leak the stream for good.
    abandoned: Vec<StreamId>,
    stats: ContractStats,
}

impl<const DEPTH: usize> State<DEPTH> {
    fn poison(&mut self, cause: PoisonCause, run: RunId, slot: usize) {
        if self.poison.is_none() {
            self.poison = Some(Poison { cause, run, slot });
        }
    }

    fn quarantine(&mut self, slot: usize) {
        if self.slots[slot] != SlotState::Quarantined {
            self.slots[slot] = SlotState::Quarantined;
            self.stats.quarantined += 1;
        }
    }

    fn check_held(&self, slot: usize, lease: u64) -> Result<(), ErrorKind> {
        match self.slots[slot] {
            SlotState::Held { lease: l } if l == lease => Ok(()),
            _ => Err(self.stale(slot, lease)),
        }
    }

    fn stale(&self, slot: usize, lease: u64) -> ErrorKind {
        ErrorKind::StaleToken {
            token: lease,
            current: self.leases[slot],
        }
    }
}

/// An NPU opened for queued runs: the driver, one AICPU + AICore stream
/// pair, `DEPTH` slots of device regions, and the code registry.
///
/// `DEPTH` (default 2, supported 2 to 16) is how many runs may be launched
/// at once. Open it, [`publish`](Device::publish) code to get a
/// [`Runner`], and run through the runner.
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
    /// Host staging buffer of each slot (`max_elements * 4` bytes), used only
    /// by the holder of the slot's token, so never contended.
    staging: [Mutex<Vec<u8>>; DEPTH],
    state: Mutex<State<DEPTH>>,
    /// Set once resources are released (or deliberately leaked).
    closed: bool,
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

/// Device resources created so far, released in reverse if open fails.
struct Building<'d, D: Driver> {
    driver: &'d D,
    memory: Vec<DevPtr>,
    events: Vec<EventId>,
    streams: Vec<StreamId>,
}

impl<D: Driver> Building<'_, D> {
    fn alloc(&mut self, bytes: usize) -> Result<DevPtr, DriverError> {
        let p = self.driver.alloc(bytes)?;
        self.memory.push(p);
        Ok(p)
    }

    fn event(&mut self) -> Result<EventId, DriverError> {
        let e = self.driver.create_event()?;
        self.events.push(e);
        Ok(e)
    }

    fn stream(&mut self) -> Result<StreamId, DriverError> {
        let s = self.driver.create_stream()?;
        self.streams.push(s);
        Ok(s)
    }

    fn undo(self) {
        // Nothing was submitted yet: every resource is idle and may go.
        for s in self.streams {
            let _ = self.driver.destroy_stream(s);
        }
        for e in self.events {
            let _ = self.driver.destroy_event(e);
        }
        for p in self.memory {
            let _ = self.driver.free(p);
        }
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
        let config = match config.resolve(&driver.info(), DEPTH) {
            Ok(c) => c,
            Err(e) => return Err(Error::new(driver, Action::Open, None, None, e.into())),
        };
        match Self::build(&driver, config) {
            Ok(parts) => Ok(Self::assemble(driver, config, parts)),
            Err(kind) => Err(Error::new(driver, Action::Open, None, None, kind)),
        }
    }
}

/// What [`Device::open`] builds before the device exists.
type Parts<const DEPTH: usize> = (
    StreamId,
    StreamId,
    u64,
    [SlotRegions; DEPTH],
    [Mutex<Vec<u8>>; DEPTH],
);

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// Creates the device's resources; on failure, releases what it made.
    fn build(driver: &D, config: Resolved) -> Result<Parts<DEPTH>, ErrorKind> {
        let mut b = Building {
            driver,
            memory: Vec::new(),
            events: Vec::new(),
            streams: Vec::new(),
        };
        let built = (|| -> Result<_, DriverError> {
            let aicpu = b.stream()?;
            let aicore_epoch = driver.code_epoch();
            let aicore = b.stream()?;
            let elems = config.arena_half_bytes();
            let mut regions = Vec::with_capacity(DEPTH);
            for _ in 0..DEPTH {
                let arena = b.alloc(2 * elems)?;
                regions.push(SlotRegions {
                    input: arena,
                    output: arena.offset(elems),
                    handshake: b.alloc(abi::handshake_bytes(config.block_dim))?,
                    wall: b.alloc(WallRecord::SIZE)?,
                    status: b.alloc(StatusRecord::SIZE)?,
                    ev_aicore: b.event()?,
                    ev_fence: b.event()?,
                });
            }
            Ok((aicpu, aicore, aicore_epoch, regions))
        })();
        let (aicpu, aicore, aicore_epoch, regions) = match built {
            Ok(x) => x,
            Err(e) => {
                b.undo();
                return Err(ErrorKind::from_driver(e));
            }
        };
        // Host staging: a failed host allocation is an error, never an abort.
        let mut staging = Vec::with_capacity(DEPTH);
        for _ in 0..DEPTH {
            let mut buf = Vec::new();
            if buf.try_reserve_exact(config.arena_half_bytes()).is_err() {
                b.undo();
                return Err(ErrorKind::HostOutOfMemory {
                    bytes: config.arena_half_bytes(),
                });
            }
            buf.resize(config.arena_half_bytes(), 0);
            staging.push(Mutex::new(buf));
        }
        let (Ok(regions), Ok(staging)) = (
            <[SlotRegions; DEPTH]>::try_from(regions),
            <[Mutex<Vec<u8>>; DEPTH]>::try_from(staging),
        ) else {
            b.undo();
            return Err(ErrorKind::DepthExhausted(DEPTH));
        };
        drop(b);
        Ok((aicpu, aicore, aicore_epoch, regions, staging))
    }

    fn assemble(driver: D, config: Resolved, parts: Parts<DEPTH>) -> Self {
        let (aicpu, aicore, aicore_epoch, regions, staging) = parts;
        Device {
            id: NEXT_DEVICE_ID.fetch_add(1, Ordering::Relaxed),
            config,
            regions,
            staging,
            state: Mutex::new(State {
                slots: [SlotState::Free; DEPTH],
                leases: [0; DEPTH],
                in_flight: InFlightSet::new(),
                poison: None,
                next_run: 1,
                next_seq: 1,
                chain: None,
                aicore,
                aicpu,
                aicore_generation: 0,
                generation: 0,
                aicore_epoch,
                pinned: Vec::new(),
                launching: None,
                abandoned: Vec::new(),
                stats: ContractStats::default(),
            }),
            driver,
            closed: false,
        }
    }

    /// Registers `callables` and returns the [`Runner`] for them.
    ///
    /// If any callable's code was not already resident, this starts a new
    /// **code generation**: the AICore stream is marked stale and re-created
    /// before the next launch, so no kernel runs stale instructions.
    ///
    /// Publication is a drain barrier, enforced twice:
    /// - at compile time: it takes `&mut self`, and every runner, token and
    ///   run borrows the device, so publishing while a run is alive does not
    ///   compile;
    /// - at run time: runs hidden from the borrow checker by
    ///   [`std::mem::forget`] are still in the in-flight set; publication
    ///   waits (at most the fence timeout) until they are proven complete and
    ///   refuses otherwise. It never destroys a stream with queued work.
    ///
    /// # Errors
    /// [`ErrorKind::DuplicateCallable`] when two callables share a name;
    /// [`ErrorKind::Undrained`] when forgotten runs are still in flight;
    /// [`ErrorKind::CodeDoesNotFit`] when the callables do not fit in device
    /// code memory next to the code other live publications pin;
    /// [`ErrorKind::Driver`] for a refused registration.
    pub fn publish(&mut self, callables: &[Callable]) -> Result<Runner<'_, D, DEPTH>, Error> {
        // Refused before anything happens: `code(name)` must name one callable.
        for (i, c) in callables.iter().enumerate() {
            if callables[..i].iter().any(|p| p.name() == c.name()) {
                return Err(Error::plain(
                    Action::Publish,
                    ErrorKind::DuplicateCallable(c.name().into()),
                ));
            }
        }
        self.drain(None)
            .map_err(|k| Error::plain(Action::Publish, k))?;
        let mut st = self.lock();
        // The last publication's runner is gone (this borrow is exclusive)
        // and nothing is in flight: its code may go.
        for code in std::mem::take(&mut st.pinned) {
            // A refused release keeps the pin, to be retried at the next
            // publication and at close (meanwhile the code stays resident).
            if self.driver.release_code(code).is_err() {
                st.pinned.push(code);
            }
        }
        let mut entries = Vec::with_capacity(callables.len());
        for c in callables {
            let r = self.driver.register_code(c.code()).map_err(|e| {
                let kind = match e.kind() {
                    crate::driver::DriverErrorKind::CodeMemoryFull { capacity } => {
                        ErrorKind::CodeDoesNotFit {
                            capacity: *capacity,
                        }
                    }
                    _ => ErrorKind::from_driver(e),
                };
                Error::plain(Action::Publish, kind)
            })?;
            st.pinned.push(r.handle);
            // New code may be stale in the AICore stream's instruction
            // cache: uploaded now (a publication), or uploaded by anyone
            // else on the NPU after the stream was created (a dedup hit on
            // it). Either starts a new code generation at once, before a
            // later registration can fail and return early.
            if r.published || r.handle.upload() > st.aicore_epoch {
                st.generation += 1;
            }
            if r.published {
                st.stats.generations += 1;
            }
            entries.push(CodeEntry {
                name: c.name().to_owned(),
                handle: r.handle,
            });
        }
        drop(st);
        Ok(Runner::new(self, entries))
    }
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    fn lock(&self) -> MutexGuard<'_, State<DEPTH>> {
        self.state.lock().unwrap_or_else(|poisoned| {
            // A panic (a driver's, or a bug) interrupted a transition while
            // it held the state: what reached the device is unknown. The
            // guard is recovered — nothing hangs — and the runner poisoned,
            // so that only a drain, which proves the queue quiet and resets
            // every slot, lets runs launch again.
            let mut st = poisoned.into_inner();
            self.state.clear_poison();
            let (run, slot) = st.launching.unwrap_or((RunId(0), 0));
            st.poison(PoisonCause::Interrupted, run, slot);
            st.chain = None;
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

    /// AICore workers per run.
    #[must_use]
    pub fn block_dim(&self) -> u32 {
        self.config.block_dim
    }

    /// The run-time state: poison, in-flight runs, quarantined slots.
    #[must_use]
    pub fn health(&self) -> Health {
        let st = self.lock();
        let mut quarantined = SlotSet::new();
        let mut launched = SlotSet::new();
        for (i, s) in st.slots.iter().enumerate() {
            match s {
                SlotState::Quarantined => quarantined.insert(i),
                SlotState::InFlight { .. } => launched.insert(i),
                _ => {}
            }
        }
        Health {
            poisoned: st.poison,
            in_flight: st.in_flight.len(),
            quarantined,
            launched,
        }
    }

    /// Counters of the contract itself.
    #[must_use]
    pub fn stats(&self) -> ContractStats {
        self.lock().stats
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn port(&self) -> &dyn Port {
        self
    }

    pub(crate) fn take(&self, slot: usize) -> Result<u64, ErrorKind> {
        let mut st = self.lock();
        match st.slots[slot] {
            SlotState::Free => {
                st.leases[slot] += 1;
                let lease = st.leases[slot];
                st.slots[slot] = SlotState::Held { lease };
                Ok(lease)
            }
            SlotState::Held { .. } => Err(ErrorKind::SlotTaken),
            SlotState::InFlight { .. } | SlotState::Quarantined => {
                let run = st
                    .in_flight
                    .iter()
                    .find(|e| e.slot == slot)
                    .map_or(RunId(0), |e| e.run);
                Err(if st.slots[slot] == SlotState::Quarantined {
                    ErrorKind::SlotQuarantined { run }
                } else {
                    ErrorKind::SlotInFlight { run }
                })
            }
        }
    }

    /// Proves the queue quiet and returns every slot to service.
    ///
    /// Callers hold exclusive access to the device or its runner, so no
    /// token, prepared, launched or fenced run is alive: anything still in
    /// the in-flight set was forgotten, lost in a partial launch, or is
    /// unproven; a `Held` slot's token was forgotten.
    ///
    /// `timeout`: `None` waits the queue budget, `(in flight + 1) ×
    /// fence_timeout`; `Some(Duration::MAX)` waits without a deadline.
    pub(crate) fn drain(&self, timeout: Option<Duration>) -> Result<DrainReport, ErrorKind> {
        let mut st = self.lock();
        let mut report = DrainReport::default();
        let needs_sync = !st.in_flight.is_empty() || st.poison.is_some();
        if needs_sync {
            let timeout = timeout.unwrap_or_else(|| self.config.queue_budget(st.in_flight.len()));
            let d = &self.driver;
            let deadline = d.clock().checked_add(timeout);
            let mut faulted = [false; 2];
            for (i, s) in [st.aicpu, st.aicore].into_iter().enumerate() {
                let left = deadline.map_or(Duration::MAX, |dl| dl.saturating_sub(d.clock()));
                match self.driver.sync_stream(s, left.max(MIN_SLICE)) {
                    Ok(()) => {}
                    Err(e) if e.is_timeout() => {
                        return Err(ErrorKind::Undrained {
                            count: st.in_flight.len(),
                            waited: timeout,
                        });
                    }
                    Err(e)
                        if matches!(e.kind(), crate::driver::DriverErrorKind::KernelFault(_)) =>
                    {
                        faulted[i] = true;
                    }
                    Err(e) => return Err(ErrorKind::from_driver(e)),
                }
            }
            // A faulted stream runs nothing more: replace it.
            for (i, f) in faulted.into_iter().enumerate() {
                if !f {
                    continue;
                }
                let old = if i == 0 {
                    let fresh = self
                        .driver
                        .create_stream()
                        .map_err(ErrorKind::from_driver)?;
                    std::mem::replace(&mut st.aicpu, fresh)
                } else {
                    let (fresh, epoch) = self.fresh_aicore().map_err(ErrorKind::from_driver)?;
                    st.aicore_generation = st.generation;
                    st.aicore_epoch = epoch;
                    std::mem::replace(&mut st.aicore, fresh)
                };
                // An error-state stream may be destroyed; if the runtime
                // refuses, it is retried later, never reused.
                self.retire_stream(&mut st, old);
                report.streams_recreated += 1;
                st.stats.fault_recreations += 1;
            }
            if faulted.iter().any(|&f| f) || st.in_flight.iter().any(|e| e.proof == Proof::Unproven)
            {
                st.chain = None;
            }
            st.stats.drains += 1;
        }
        let abandoned = std::mem::take(&mut st.abandoned);
        for old in abandoned {
            self.retire_stream(&mut st, old);
        }
        report.retired = st.in_flight.len();
        st.in_flight.clear();
        for s in &mut st.slots {
            if *s == SlotState::Quarantined {
                report.released += 1;
            }
            *s = SlotState::Free;
        }
        report.cleared = st.poison.take();
        Ok(report)
    }

    /// Drains and releases every device resource, reporting what could not
    /// be released. Dropping the device does the same, silently.
    ///
    /// # Errors
    /// [`ErrorKind::Undrained`] when runs could not be proven complete
    /// within the queue budget: nothing was released and the device comes
    /// back (`Some`), to close later — or to drop, which leaks its streams
    /// and memory on purpose (a stream with queued work is never destroyed,
    /// and memory a kernel may still write is never freed). A driver error
    /// while releasing: `None`, the rest was released.
    #[allow(
        clippy::result_large_err,
        reason = "close runs once per device; handing the device back by value is the point"
    )]
    pub fn close(mut self) -> Result<(), Error<Option<Self>>> {
        // Nothing is released until the queue is proven quiet: if it is not,
        // the device comes back untouched, to close later.
        if let Err(k) = self.drain(None) {
            return Err(Error::new(Some(self), Action::Close, None, None, k));
        }
        self.teardown()
            .map_err(|k| Error::new(None, Action::Close, None, None, k))
    }

    fn teardown(&mut self) -> Result<(), ErrorKind> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.drain(None)?;
        let mut st = self.lock();
        let mut streams = std::mem::take(&mut st.abandoned);
        streams.extend([st.aicore, st.aicpu]);
        let pinned = std::mem::take(&mut st.pinned);
        drop(st);
        let mut first_err = None;
        let mut note = |r: Result<(), DriverError>| {
            if let Err(e) = r {
                first_err.get_or_insert(ErrorKind::from_driver(e));
            }
        };
        for s in streams {
            note(self.driver.destroy_stream(s));
        }
        for code in pinned {
            note(self.driver.release_code(code));
        }
        for r in &self.regions {
            note(self.driver.destroy_event(r.ev_aicore));
            note(self.driver.destroy_event(r.ev_fence));
            note(self.driver.free(r.input));
            note(self.driver.free(r.handshake));
            note(self.driver.free(r.wall));
            note(self.driver.free(r.status));
        }
        first_err.map_or(Ok(()), Err)
    }

    fn staging(&self, slot: usize) -> MutexGuard<'_, Vec<u8>> {
        self.staging[slot]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Destroys a stream that no longer takes work, or keeps it for a later
    /// retry if the runtime refuses.
    fn retire_stream(&self, st: &mut State<DEPTH>, stream: StreamId) {
        if self.driver.destroy_stream(stream).is_err() {
            st.abandoned.push(stream);
        }
    }

    /// Creates an AICore stream and notes the code epoch it can trust: read
    /// *before* creation, so an upload racing with it counts as newer.
    fn fresh_aicore(&self) -> Result<(StreamId, u64), DriverError> {
        let epoch = self.driver.code_epoch();
        Ok((self.driver.create_stream()?, epoch))
    }

    /// Readies the stream pair for a launch. The AICore stream is stale
    /// after this device's own publication (a new code generation) or after
    /// an upload by anyone else on the NPU since it was created (its code
    /// epoch moved). A stale stream with nothing in flight is re-created; one
    /// with runs still queued is never destroyed — a fresh stream is ordered
    /// behind it instead (it waits for the last queued AICore kernel), and
    /// the old one is retired once idle. Nothing of the run is submitted.
    fn ready_streams(&self, st: &mut State<DEPTH>) -> Result<(), ErrorKind> {
        if st.in_flight.is_empty() && !st.abandoned.is_empty() {
            // Streams left busy earlier are idle now.
            for old in std::mem::take(&mut st.abandoned) {
                self.retire_stream(st, old);
            }
        }
        let own = st.aicore_generation != st.generation;
        let foreign = self.driver.code_epoch() > st.aicore_epoch;
        if !own && !foreign {
            return Ok(());
        }
        let last = st.in_flight.iter().last().copied();
        if own && last.is_some() {
            // Unreachable through the API (publication drains first), kept
            // as a guard: a new generation never shares the queue.
            return Err(ErrorKind::DepthExhausted(st.in_flight.len()));
        }
        let (fresh, epoch) = self.fresh_aicore().map_err(ErrorKind::from_driver)?;
        if let Some(last) = last {
            // Keep stream order across the switch: the fresh stream's first
            // kernel waits for the last one queued on the old stream.
            let ordered = self
                .driver
                .stream_wait_event(fresh, self.regions[last.slot].ev_aicore);
            if let Err(e) = ordered {
                self.retire_stream(st, fresh);
                return Err(ErrorKind::from_driver(e));
            }
        }
        let old = std::mem::replace(&mut st.aicore, fresh);
        st.aicore_generation = st.generation;
        st.aicore_epoch = epoch;
        st.stats.aicore_recreations += 1;
        // Destroyed now if idle; else (queued runs, or a refusal) retried
        // later, never reused.
        self.retire_stream(st, old);
        Ok(())
    }

    /// The launch itself, under the state lock (see `Port::launch`).
    fn launch_locked(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        lease: u64,
        info: &RunInfo,
    ) -> Result<Submitted, LaunchFail> {
        use LaunchFail::{Lost, NotSubmitted};
        st.check_held(slot, lease).map_err(NotSubmitted)?;
        if let Some(p) = st.poison {
            return Err(NotSubmitted(ErrorKind::Poisoned(p)));
        }
        if st.in_flight.is_full() {
            return Err(NotSubmitted(ErrorKind::DepthExhausted(st.in_flight.len())));
        }
        self.ready_streams(st).map_err(NotSubmitted)?;
        let r = &self.regions[slot];
        let (input, len) = if info.chained {
            let c = st.chain.ok_or(NotSubmitted(ErrorKind::NoChainValue))?;
            (self.regions[c.slot].output, c.len)
        } else {
            (r.input, info.len)
        };
        #[allow(clippy::cast_possible_truncation, reason = "slot < DEPTH <= 16")]
        let slot_u32 = slot as u32;
        let args = RunArgs {
            run_id: info.run.0,
            slot: slot_u32,
            block_dim: self.config.block_dim,
            len: len as u64,
            input: input.raw(),
            output: r.output.raw(),
            handshake: r.handshake.raw(),
            wall: r.wall.raw(),
            status: r.status.raw(),
        }
        .to_bytes();
        let (aicore, aicpu) = (st.aicore, st.aicpu);
        let d = &self.driver;
        if let Err(e) = d.launch_aicore(aicore, info.code, self.config.block_dim, &args) {
            return Err(NotSubmitted(self.driver_error(
                st,
                e,
                info.run,
                slot,
                u64::MAX,
            )));
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        let mut entry = Entry {
            seq,
            run: info.run,
            slot,
            proof: Proof::Pending,
            launched_at: None,
            ahead_done_at: Duration::ZERO,
            ahead_undated: false,
            observed: false,
        };
        let lost = if let Err(e) = d.launch_aicpu(aicpu, &args) {
            Some((
                PoisonCause::PartialLaunch,
                ErrorKind::PartialLaunch(Box::new(e)),
            ))
        } else if let Err(e) = d
            .record_event(r.ev_aicore, aicore)
            .and_then(|()| d.stream_wait_event(aicpu, r.ev_aicore))
            .and_then(|()| d.record_event(r.ev_fence, aicpu))
        {
            Some((
                PoisonCause::FenceNotRecorded,
                ErrorKind::FenceNotRecorded(Box::new(e)),
            ))
        } else {
            None
        };
        st.stats.launched += 1;
        if let Some((cause, kind)) = lost {
            // Work reached the device that no fence can observe: keep it in
            // the set as unproven until a drain proves the queue quiet.
            entry.proof = Proof::Unproven;
            let _ = st.in_flight.push(entry);
            st.quarantine(slot);
            st.poison(cause, info.run, slot);
            st.chain = None;
            return Err(Lost(kind));
        }
        // `is_full` was checked above and the sequence is fresh.
        let _ = st.in_flight.push(entry);
        st.slots[slot] = SlotState::InFlight { lease };
        st.chain = Some(Chain { slot, len });
        Ok(Submitted { seq, len })
    }

    /// Run `seq` in `slot` was observed complete at driver-clock time `at`
    /// (`None`: not dated, on the fast paths): it leaves the in-flight set,
    /// its slot goes back to its holder, and every run behind it learns that
    /// one more run ahead was done.
    fn settle_complete(&self, slot: usize, lease: u64, seq: u64, at: Option<Duration>) {
        let mut st = self.lock();
        st.in_flight.observed(seq, at);
        st.in_flight.remove(seq);
        if st.slots[slot] == (SlotState::InFlight { lease }) {
            st.slots[slot] = SlotState::Held { lease };
        }
        st.stats.fenced += 1;
    }

    /// A wait for run `seq` failed with `e` (not a timeout).
    fn settle_error(&self, e: DriverError, run: RunId, slot: usize, seq: u64) -> ErrorKind {
        let mut st = self.lock();
        if e.is_device_fault()
            && let Some(entry) = st.in_flight.get_mut(seq)
        {
            // A faulted stream completes nothing queued behind the fault.
            entry.proof = Proof::Unproven;
        }
        self.driver_error(&mut st, e, run, slot, seq)
    }

    /// Classifies a driver error met while handling `run` in `slot`. A
    /// device fault poisons the runner and breaks the chain (what the device
    /// holds is no longer known), attributed to the run that faulted: a
    /// kernel fault met by a later run (a collateral abort, a launch on a
    /// faulted stream) belongs to the first run queued before `before` whose
    /// own fence reports the fault; only when none does is it `run`'s.
    fn driver_error(
        &self,
        st: &mut State<DEPTH>,
        e: DriverError,
        run: RunId,
        slot: usize,
        before: u64,
    ) -> ErrorKind {
        if e.is_device_fault() {
            let culprit = if matches!(e.kind(), crate::driver::DriverErrorKind::KernelFault(_)) {
                st.in_flight
                    .iter()
                    .filter(|x| x.seq < before && !x.observed)
                    .find(|x| {
                        self.driver
                            .query_event(self.regions[x.slot].ev_fence)
                            .is_err_and(|q| q.is_device_fault())
                    })
                    .map(|x| (x.run, x.slot, x.seq))
            } else {
                None
            };
            let (run, slot) = match culprit {
                Some((r, s, seq)) => {
                    if let Some(x) = st.in_flight.get_mut(seq) {
                        x.proof = Proof::Unproven;
                    }
                    (r, s)
                }
                None => (run, slot),
            };
            st.poison(PoisonCause::DeviceFault, run, slot);
            st.chain = None;
        }
        ErrorKind::from_driver(e)
    }

    /// The entry of the launched run `seq` holding `slot` with `lease`.
    fn in_flight_entry(&self, slot: usize, lease: u64, seq: u64) -> Result<Entry, ErrorKind> {
        let st = self.lock();
        if st.slots[slot] != (SlotState::InFlight { lease }) {
            return Err(st.stale(slot, lease));
        }
        st.in_flight
            .iter()
            .find(|e| e.seq == seq)
            .copied()
            .ok_or_else(|| st.stale(slot, lease))
    }

    /// Polls run `seq`'s fence once; never poisons on "not yet".
    fn poll(&self, slot: usize, lease: u64, info: &RunInfo) -> Result<(), ErrorKind> {
        self.in_flight_entry(slot, lease, info.seq)?;
        match self.driver.query_event(self.regions[slot].ev_fence) {
            Ok(Completion::Complete) => {
                self.settle_complete(slot, lease, info.seq, None);
                Ok(())
            }
            Ok(Completion::NotReady) => Err(ErrorKind::NotReady),
            Err(e) => Err(self.settle_error(e, info.run, slot, info.seq)),
        }
    }

    /// Waits for run `seq`'s own fence — at most `limit`, or, by default,
    /// the queue budget `(runs ahead + 1) × fence_timeout` plus one slice —
    /// and decides, on the driver's clock, whether the device overran.
    ///
    /// The rule: a run may take `fence_timeout` **once it is at the head of
    /// the queue** (every run ahead of it observed complete). The wait
    /// watches the runs ahead of this one by querying their own fences
    /// (streams are FIFO, so they complete first); when the head has been
    /// at the head for longer than its budget *and* a query made after that
    /// point still finds it incomplete, that run — not necessarily this
    /// one — overran: it is marked unproven and the runner poisoned, naming
    /// it. Waiting behind others never counts against a run, and how long
    /// the host thread was away never counts at all: every time is read
    /// from [`Driver::clock`] and every verdict rests on a query made after
    /// the time it claims.
    fn wait_queued(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        limit: Option<Duration>,
    ) -> Result<(), ErrorKind> {
        let d = &self.driver;
        let budget = self.config.fence_timeout;
        // Wake up now and then to look at the runs ahead.
        let slice_cap = (budget / 8).max(MIN_SLICE);
        let ev = self.regions[slot].ev_fence;
        self.in_flight_entry(slot, lease, info.seq)?;
        // The common case first, with no bookkeeping: the run completes
        // within one slice. (A slice never outlasts a verdict by more than
        // itself, and never exceeds an explicit limit.)
        let first = limit.map_or(slice_cap, |t| t.min(slice_cap)).max(MIN_SLICE);
        match d.sync_event(ev, first) {
            Ok(()) => {
                self.settle_complete(slot, lease, info.seq, None);
                return Ok(());
            }
            Err(e) if e.is_timeout() => {}
            Err(e) => return Err(self.settle_error(e, info.run, slot, info.seq)),
        }
        // The first slice counts towards the limit.
        let start = d.clock().saturating_sub(first);
        let limit = limit.unwrap_or_else(|| {
            // The runs ahead and this one, each its budget — plus one slice:
            // a run the fast path did not date is dated when first looked
            // at, up to a slice late, and a verdict must still fit.
            let ahead = self.lock().in_flight.ahead_of(info.seq);
            self.config.queue_budget(ahead).saturating_add(slice_cap)
        });
        // `None`: no deadline (a limit past the end of the clock).
        let deadline = start.checked_add(limit);
        loop {
            if let Some(hung) = self.look_ahead(info.seq) {
                return Err(ErrorKind::Timeout {
                    waited: d.clock().saturating_sub(start),
                    overran: Some(hung),
                });
            }
            let now = d.clock();
            if deadline.is_some_and(|dl| now >= dl) {
                return Err(ErrorKind::Timeout {
                    waited: now.saturating_sub(start),
                    overran: None,
                });
            }
            self.in_flight_entry(slot, lease, info.seq)?;
            let head = {
                let mut st = self.lock();
                st.in_flight.date(now);
                st.in_flight.head().copied()
            };
            let mut slice = slice_cap;
            if let Some(dl) = deadline {
                slice = slice.min(dl.saturating_sub(now));
            }
            if let Some(verdict_at) = head
                .filter(|h| h.proof == Proof::Pending)
                .and_then(|h| h.head_since()?.checked_add(budget))
            {
                slice = slice.min(verdict_at.saturating_sub(now));
            }
            // At least a little, so that even a virtual clock moves on.
            match d.sync_event(ev, slice.max(MIN_SLICE)) {
                Ok(()) => {
                    self.settle_complete(slot, lease, info.seq, Some(d.clock()));
                    return Ok(());
                }
                Err(e) if e.is_timeout() => {}
                Err(e) => return Err(self.settle_error(e, info.run, slot, info.seq)),
            }
        }
    }

    /// Queries the fences of the runs up to `seq` not yet observed
    /// complete, in stream order, records what completed, and returns the
    /// run at the head of the queue when it has overrun its budget (the
    /// runner is then poisoned, naming it).
    fn look_ahead(&self, seq: u64) -> Option<RunId> {
        let d = &self.driver;
        // Everything undated happened before this read: a safe date.
        let now = d.clock();
        self.lock().in_flight.date(now);
        let mut queue = [None::<Entry>; DEPTH];
        for (q, e) in queue.iter_mut().zip(
            self.lock()
                .in_flight
                .iter()
                .filter(|e| e.seq <= seq && !e.observed),
        ) {
            *q = Some(*e);
        }
        let mut done = [None::<(u64, Duration)>; DEPTH];
        let mut head = None;
        for (e, slot_done) in queue.iter().flatten().zip(done.iter_mut()) {
            if e.proof == Proof::Unproven {
                // Nothing behind a run that cannot be proven complete can be
                // dated; the runner is poisoned already.
                break;
            }
            let asked = d.clock();
            match d.query_event(self.regions[e.slot].ev_fence) {
                Ok(Completion::Complete) => *slot_done = Some((e.seq, d.clock())),
                Ok(Completion::NotReady) => {
                    head = Some((*e, asked));
                    break;
                }
                // A fault ahead reaches this run's own fence too; the next
                // wait on it reports it.
                Err(_) => break,
            }
        }
        let mut st = self.lock();
        for &(seq, at) in done.iter().flatten() {
            if st.in_flight.iter().any(|e| e.seq == seq) {
                st.in_flight.observed(seq, Some(at));
            }
        }
        let (h, asked) = head?;
        // Still the head, still pending (nobody observed or judged it
        // meanwhile), and found incomplete after its budget ran out?
        let now_head = st.in_flight.head().copied()?;
        let overran = now_head.seq == h.seq
            && now_head.proof == Proof::Pending
            && now_head
                .head_since()
                .and_then(|since| since.checked_add(self.config.fence_timeout))
                .is_some_and(|verdict_at| asked >= verdict_at);
        if !overran {
            return None;
        }
        st.poison(PoisonCause::Overrun, h.run, h.slot);
        st.chain = None;
        if let Some(entry) = st.in_flight.get_mut(h.seq) {
            entry.proof = Proof::Unproven;
        }
        Some(h.run)
    }
}

impl<D: Driver, const DEPTH: usize> Port for Device<D, DEPTH> {
    fn device_id(&self) -> u64 {
        self.id
    }

    fn release(&self, slot: usize, lease: u64) {
        let mut st = self.lock();
        match st.slots[slot] {
            SlotState::Held { lease: l } if l == lease => st.slots[slot] = SlotState::Free,
            SlotState::InFlight { lease: l } if l == lease => {
                // A launched run is being dropped: wait for its own fence.
                let Some(entry) = st.in_flight.iter().find(|e| e.slot == slot).copied() else {
                    st.slots[slot] = SlotState::Free;
                    return;
                };
                drop(st);
                let outcome = (entry.proof == Proof::Pending).then(|| {
                    let info = RunInfo {
                        run: entry.run,
                        seq: entry.seq,
                        len: 0,
                        code: CodeHandle::from_raw(0, 0),
                        chained: false,
                    };
                    // This runs in `Drop`, maybe while a panic unwinds: a
                    // panicking driver must not abort the process. A caught
                    // panic leaves completion unproven.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.wait_queued(slot, lease, &info, None)
                    }))
                    .unwrap_or(Err(ErrorKind::NotReady))
                });
                let mut st = self.lock();
                if let Some(Ok(())) = outcome {
                    st.slots[slot] = SlotState::Free;
                } else {
                    // Any failure — even a driver error that is neither fault
                    // nor timeout — leaves completion unproven.
                    if let Some(e) = st.in_flight.get_mut(entry.seq) {
                        e.proof = Proof::Unproven;
                    }
                    st.quarantine(slot);
                }
            }
            _ => {}
        }
    }

    fn prepare(
        &self,
        slot: usize,
        lease: u64,
        code: CodeRef<'_>,
        input: Input<'_>,
    ) -> Result<RunInfo, ErrorKind> {
        if code.device != self.id {
            return Err(ErrorKind::ForeignHandle);
        }
        let len = match input {
            Input::Host([]) => return Err(ErrorKind::EmptyInput),
            Input::Host(d) if d.len() > self.config.max_elements => {
                return Err(ErrorKind::InputTooLong {
                    len: d.len(),
                    capacity: self.config.max_elements,
                });
            }
            Input::Host(d) => d.len(),
            Input::Previous => 0,
        };
        let run = {
            let mut st = self.lock();
            st.check_held(slot, lease)?;
            let run = RunId(st.next_run);
            st.next_run += 1;
            run
        };
        // The slot is ours alone (held lease, nothing in flight on it), so its
        // regions may be written synchronously.
        let r = &self.regions[slot];
        let d = &self.driver;
        let e = |err: DriverError| self.driver_error(&mut self.lock(), err, run, slot, u64::MAX);
        if let Input::Host(data) = input {
            let mut staging = self.staging(slot);
            let bytes = &mut staging[..data.len() * 4];
            for (c, v) in bytes.chunks_exact_mut(4).zip(data) {
                c.copy_from_slice(&v.to_le_bytes());
            }
            d.copy_to_device(r.input, bytes).map_err(e)?;
        }
        d.memset(r.handshake, 0, abi::handshake_bytes(self.config.block_dim))
            .map_err(e)?;
        d.memset(r.wall, 0, WallRecord::SIZE).map_err(e)?;
        let armed = StatusRecord {
            run_id: run.0,
            state: StatusRecord::ARMED,
            code: 0,
        };
        d.copy_to_device(r.status, &armed.to_bytes()).map_err(e)?;
        Ok(RunInfo {
            run,
            seq: 0,
            len,
            code: code.handle,
            chained: matches!(input, Input::Previous),
        })
    }

    fn launch(&self, slot: usize, lease: u64, info: &RunInfo) -> Result<Submitted, LaunchFail> {
        // The lock is held across submission: sequence order is stream order
        // even when several threads launch.
        let mut st = self.lock();
        st.launching = Some((info.run, slot));
        let r = self.launch_locked(&mut st, slot, lease, info);
        st.launching = None;
        r
    }

    fn wait(&self, slot: usize, lease: u64, info: &RunInfo, how: Wait) -> Result<(), ErrorKind> {
        match how {
            Wait::Poll => self.poll(slot, lease, info),
            Wait::For(t) => self.wait_queued(slot, lease, info, Some(t)),
            Wait::Configured => self.wait_queued(slot, lease, info, None),
        }
    }

    fn finalize(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        out: &mut [u32],
    ) -> Result<WallRecord, ErrorKind> {
        self.lock().check_held(slot, lease)?;
        if out.len() < info.len {
            return Err(ErrorKind::OutputsTooSmall {
                len: info.len,
                capacity: out.len(),
            });
        }
        let r = &self.regions[slot];
        let e =
            |err: DriverError| self.driver_error(&mut self.lock(), err, info.run, slot, info.seq);
        let mut raw = [0u8; StatusRecord::SIZE];
        self.driver
            .copy_from_device(&mut raw, r.status)
            .map_err(e)?;
        let status = StatusRecord::from_bytes(&raw).unwrap_or_default();
        if status.run_id != info.run.0 {
            return Err(ErrorKind::RecordMismatch {
                record: Record::Status,
                expected: info.run.0,
                found: status.run_id,
            });
        }
        if status.state != StatusRecord::DONE {
            return Err(ErrorKind::RecordMissing(Record::Status));
        }
        let mut raw = [0u8; WallRecord::SIZE];
        self.driver.copy_from_device(&mut raw, r.wall).map_err(e)?;
        let wall = WallRecord::from_bytes(&raw).unwrap_or_default();
        if wall.run_id != info.run.0 || wall.slot as usize != slot {
            return Err(ErrorKind::RecordMismatch {
                record: Record::Wall,
                expected: info.run.0,
                found: wall.run_id,
            });
        }
        if status.code != 0 {
            self.lock().stats.run_failures += 1;
            return Err(ErrorKind::RunFailed { code: status.code });
        }
        let mut staging = self.staging(slot);
        let bytes = &mut staging[..info.len * 4];
        self.driver.copy_from_device(bytes, r.output).map_err(e)?;
        for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
            *o = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        }
        drop(staging);
        self.lock().stats.finalized += 1;
        Ok(wall)
    }
}

impl<D: Driver, const DEPTH: usize> Drop for Device<D, DEPTH> {
    fn drop(&mut self) {
        // Best effort: drain within the queue budget, then release. What
        // cannot be proven idle is leaked, never destroyed under the device.
        // A panicking driver must not abort the process from here.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.teardown()));
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
        assert_eq!(s.live_allocations(), 12);
        drop(d);
        let s = sim.stats();
        assert_eq!(
            (s.live_streams(), s.live_events(), s.live_allocations()),
            (0, 0, 0)
        );
    }
}
