//! The simulated device's state (`DeviceState`), shared by the stepped
//! and the real-time mode: the clock, memory, streams, events, the tasks
//! they queue and the trace; code memory, enqueueing and the stepping
//! engine are its submodules.
//!
//! Every allocation, stream and event records its [`Owner`] (the
//! `SimDriver` value that made it); the methods a driver call reaches take
//! the caller's and refuse what another made, as a foreign handle or
//! address (`own_stream`, `own_event`, the memory's `*_as` methods).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

mod capture;
mod code;
mod enqueue;
mod notify;
mod stepping;

pub(super) use self::notify::Notify;
pub(super) use self::stepping::StepResult;

use super::faults::{FaultPlan, RecordFate};
use super::kernels::{AicoreKernel, AicpuKernel, Code};
use super::memory::{Memory, Owner};
use super::rust_kernel::SimKernel;
use super::trace::{TaskTag, TraceEvent, TraceKind};
use super::{SimConfig, SimStats};
use crate::driver::abi;
use crate::driver::{DriverErrorKind, EventId, FaultKind, HandleKind, Op, StreamId};

#[cfg(doc)]
use crate::driver::CodeHandle;

pub(crate) enum TaskKind {
    Aicore(Box<AicoreKernel>),
    Aicpu(Box<AicpuKernel>),
    Record {
        event: u64,
        generation: u64,
        fate: RecordFate,
    },
    Wait {
        event: u64,
        generation: u64,
    },
    Copy {
        dst: u64,
        src: u64,
        len: u64,
    },
    Memset {
        dst: u64,
        value: u8,
        len: u64,
    },
    /// A replay of `graph`: once started, its tasks are on the graph's
    /// streams, and it ends when every one of them recorded its end
    /// (`ends`: event and generation).
    Graph {
        graph: u64,
        ends: Vec<(u64, u64)>,
        /// The records of the graph's events, in capture order, each
        /// given its generation (and fate) when the replay was queued: an
        /// event a graph records is recorded by the graph launch, as a
        /// record call's is by its call.
        records: Vec<(u64, u64, RecordFate)>,
    },
}

impl TaskKind {
    pub(super) fn tag(&self) -> TaskTag {
        match self {
            TaskKind::Aicore(_) => TaskTag::Aicore,
            TaskKind::Aicpu(_) => TaskTag::Aicpu,
            TaskKind::Record { event, .. } => TaskTag::Record(EventId::from_raw(*event)),
            TaskKind::Wait { event, .. } => TaskTag::Wait(EventId::from_raw(*event)),
            TaskKind::Copy { .. } => TaskTag::Copy,
            TaskKind::Memset { .. } => TaskTag::Memset,
            TaskKind::Graph { .. } => TaskTag::Graph,
        }
    }

    pub(super) fn run(&self) -> u64 {
        match self {
            TaskKind::Aicore(k) => k.launch.identity,
            TaskKind::Aicpu(k) => k.launch.identity,
            _ => 0,
        }
    }

    fn is_kernel(&self) -> bool {
        matches!(self, TaskKind::Aicore(_) | TaskKind::Aicpu(_))
    }
}

pub(crate) struct Task {
    kind: TaskKind,
    enqueued: u64,
    started: Option<u64>,
    /// Run id for the trace of non-kernel tasks (the run whose kernel
    /// precedes them on the stream).
    run: u64,
}

/// What a code address holds: the bytes and decoded code (a program or a
/// Rust kernel) of one upload.
#[derive(Clone)]
pub(crate) struct Image {
    bytes: Arc<[u8]>,
    code: Code,
    /// The upload's stamp ([`CodeHandle::upload`]).
    upload: u64,
}

/// One resident image per code address.
type CodeImage = Option<Image>;

pub(crate) struct Stream {
    /// Who created it.
    owner: Owner,
    queue: VecDeque<Task>,
    /// The instruction cache: what each code address held when the stream was
    /// created (or when the stream first used an address empty at creation).
    icache: Vec<CodeImage>,
    fault: Option<FaultKind>,
    last_end: u64,
    /// Run id of the last kernel queued, for tracing non-kernel tasks.
    last_run: u64,
}

#[derive(Debug)]
pub(crate) struct Event {
    /// Who created it.
    owner: Owner,
    /// Generation of the last record enqueued (0 = never recorded).
    recorded: u64,
    /// Highest generation completed.
    completed: u64,
    /// Tick at which `completed` becomes visible.
    completed_at: u64,
    /// A fault that stopped the stream carrying record `failed.0`.
    failed: Option<(u64, FaultKind)>,
    /// The stream the last record was queued on (0 = never recorded): where
    /// an armed notification looks for it.
    stream: u64,
}

impl Event {
    /// `Ok(Some(tick))` when generation `g` is complete at `now`.
    fn done(&self, g: u64, now: u64) -> Result<Option<u64>, DriverErrorKind> {
        if g == 0 {
            return Ok(Some(0));
        }
        if let Some((fg, kind)) = self.failed
            && fg >= g
        {
            return Err(DriverErrorKind::KernelFault(kind));
        }
        Ok((self.completed >= g && self.completed_at <= now).then_some(self.completed_at))
    }
}

pub(crate) struct DeviceState {
    pub cfg: SimConfig,
    base: Option<Instant>,
    /// Stepped mode: the device clock, advanced one step at a time.
    ticks: u64,
    /// Real-time mode: the device's model clock, never ahead of the wall
    /// clock. Device actions are stamped with it, so when the device thread
    /// runs late (descheduled by the OS) it catches up at the model's time
    /// points instead of recording its own lateness as device idle time.
    vclock: u64,
    pub shutdown: bool,
    pub mem: Memory,
    pub streams: BTreeMap<u64, Stream>,
    /// Scratch for a real-time advance: the ids of the streams it steps
    /// (kept, so that the advance every host call makes allocates nothing).
    step_ids: Vec<u64>,
    events: BTreeMap<u64, Event>,
    code: Vec<CodeImage>,
    code_lru: Vec<u64>,
    /// Live pins per code address (registrations not yet released).
    code_pins: Vec<u64>,
    /// Stamp of the latest upload (0 before any).
    uploads: u64,
    /// The Rust kernels registered on this simulator, by id.
    kernels: HashMap<u64, SimKernel>,
    pub faults: FaultPlan,
    /// Open stream captures and the graphs they ended into.
    captures: capture::Captures,
    /// The wakers armed by `notify_event`.
    pub notify: Notify,
    pub stats: SimStats,
    pub trace: VecDeque<TraceEvent>,
    pub trace_dropped: u64,
    next_handle: u64,
    rng: u64,
}

/// The trace's buffer, room for `capacity` entries (at most 65,536 up
/// front). In real time its memory is written once here: the pages a
/// trace fills are otherwise first touched by the host calls and device
/// steps that record into it, a page fault every ~85 entries (~6 runs),
/// paid inside the timing the simulator models.
fn trace_buffer(capacity: usize, real_time: bool) -> VecDeque<TraceEvent> {
    let room = capacity.min(1 << 16);
    let mut trace = VecDeque::with_capacity(room);
    if real_time {
        let blank = TraceEvent::new(0, StreamId::from_raw(0), 0, TraceKind::StreamCreated);
        trace.resize(room, blank);
        trace.clear();
    }
    trace
}

impl DeviceState {
    pub fn new(cfg: SimConfig, base: Option<Instant>) -> Self {
        let slots = cfg.code_slots.max(1);
        DeviceState {
            mem: Memory::new(cfg.memory_bytes),
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15,
            trace: trace_buffer(cfg.trace_capacity, base.is_some()),
            cfg,
            base,
            ticks: 0,
            vclock: 0,
            shutdown: false,
            streams: BTreeMap::new(),
            step_ids: Vec::new(),
            events: BTreeMap::new(),
            code: vec![None; slots],
            code_lru: vec![0; slots],
            code_pins: vec![0; slots],
            uploads: 0,
            kernels: HashMap::new(),
            faults: FaultPlan::default(),
            captures: capture::Captures::default(),
            notify: Notify::default(),
            stats: SimStats::default(),
            trace_dropped: 0,
            next_handle: 1,
        }
    }

    // ----- clock ----------------------------------------------------------

    pub fn is_real_time(&self) -> bool {
        self.base.is_some()
    }

    pub fn base(&self) -> Option<Instant> {
        self.base
    }

    /// Host time: what a host call observes and stamps (enqueues,
    /// completion checks). Stepped mode has one clock for both.
    pub fn now(&self) -> u64 {
        match self.base {
            Some(b) => abi::duration_to_ticks(b.elapsed()),
            None => self.ticks,
        }
    }

    /// Device time: what device actions are stamped with.
    fn dev(&self) -> u64 {
        if self.base.is_some() {
            self.vclock
        } else {
            self.ticks
        }
    }

    /// Stepped mode: one step of device time passes.
    pub fn tick(&mut self) {
        self.ticks = self
            .ticks
            .saturating_add(abi::duration_to_ticks(self.cfg.step_time).max(1));
        self.stats.steps += 1;
    }

    fn handle(&mut self) -> u64 {
        let h = self.next_handle;
        self.next_handle += 1;
        h
    }

    fn push_trace(&mut self, stream: u64, run: u64, what: TraceKind) {
        // Host actions are stamped in host time, device actions in device
        // time; in real-time mode the trace order is the order of record.
        let tick = match what {
            TraceKind::Enqueued(_)
            | TraceKind::StreamCreated
            | TraceKind::StreamDestroyed
            | TraceKind::Published(_) => self.now(),
            _ => self.dev(),
        };
        self.push_trace_at(tick, stream, run, what);
    }

    /// [`push_trace`](Self::push_trace) stamped `tick`: an enqueue stamps
    /// its entry with the tick it stamped the task with (one clock read,
    /// and the two agree).
    fn push_trace_at(&mut self, tick: u64, stream: u64, run: u64, what: TraceKind) {
        if self.cfg.trace_capacity == 0 {
            return;
        }
        if self.trace.len() == self.cfg.trace_capacity {
            self.trace.pop_front();
            self.trace_dropped += 1;
        }
        self.trace.push_back(TraceEvent {
            tick,
            stream: StreamId::from_raw(stream),
            run,
            what,
        });
    }

    /// Counts the call and applies call faults.
    pub fn begin_call(&mut self, op: Op) -> Result<(), DriverErrorKind> {
        *self.stats.calls.entry(op).or_insert(0) += 1;
        self.faults.on_call(op)
    }

    // ----- memory ---------------------------------------------------------

    pub fn alloc(&mut self, owner: Owner, bytes: u64) -> Result<u64, DriverErrorKind> {
        if bytes == 0 {
            return Err(DriverErrorKind::InvalidArgument {
                what: "allocation size is 0",
            });
        }
        let p = self
            .mem
            .alloc(bytes, owner)
            .ok_or(DriverErrorKind::OutOfMemory { bytes })?;
        self.stats.allocations += 1;
        Ok(p)
    }

    /// Frees `owner`'s allocation at `ptr`; anything else (another
    /// owner's included) is a bad address, and nothing is freed.
    pub fn free(&mut self, owner: Owner, ptr: u64) -> Result<(), DriverErrorKind> {
        if self.mem.free_as(owner, ptr) {
            self.stats.frees += 1;
            Ok(())
        } else {
            Err(DriverErrorKind::BadAddress { addr: ptr, len: 0 })
        }
    }

    pub fn write(&mut self, owner: Owner, dst: u64, src: &[u8]) -> Result<(), DriverErrorKind> {
        self.mem.write_as(owner, dst, src).map_err(bad)
    }

    pub fn read(&self, owner: Owner, src: u64, dst: &mut [u8]) -> Result<(), DriverErrorKind> {
        self.mem.read_as(owner, src, dst).map_err(bad)
    }

    pub fn fill(
        &mut self,
        owner: Owner,
        dst: u64,
        value: u8,
        len: u64,
    ) -> Result<(), DriverErrorKind> {
        self.mem.fill_as(owner, dst, value, len).map_err(bad)
    }

    // ----- streams --------------------------------------------------------

    pub fn create_stream(&mut self, owner: Owner) -> u64 {
        self.create_stream_of(owner, false)
    }

    pub fn check_stream(&self, id: u64) -> Result<(), DriverErrorKind> {
        self.check_stream_of(None, id)
    }

    /// [`check_stream`](Self::check_stream) of a stream `owner` created
    /// (another owner's is a bad handle), in the same one lookup.
    pub fn check_own_stream(&self, owner: Owner, id: u64) -> Result<(), DriverErrorKind> {
        self.check_stream_of(Some(owner), id)
    }

    fn check_stream_of(&self, owner: Option<Owner>, id: u64) -> Result<(), DriverErrorKind> {
        let s = self
            .streams
            .get(&id)
            .filter(|s| owner.is_none_or(|o| o == s.owner))
            .ok_or(DriverErrorKind::BadHandle {
                kind: HandleKind::Stream,
                raw: id,
            })?;
        match s.fault {
            Some(kind) => Err(DriverErrorKind::KernelFault(kind)),
            None => Ok(()),
        }
    }

    /// `Ok` when stream `id` is live and `owner` created it; a bad handle
    /// otherwise (another owner's stream is as foreign as a forged one).
    pub fn own_stream(&self, owner: Owner, id: u64) -> Result<(), DriverErrorKind> {
        match self.streams.get(&id) {
            Some(s) if s.owner == owner => Ok(()),
            _ => Err(DriverErrorKind::BadHandle {
                kind: HandleKind::Stream,
                raw: id,
            }),
        }
    }

    pub fn destroy_stream(&mut self, owner: Owner, id: u64) -> Result<(), DriverErrorKind> {
        self.own_stream(owner, id)?;
        let s = self.streams.get(&id).ok_or(DriverErrorKind::BadHandle {
            kind: HandleKind::Stream,
            raw: id,
        })?;
        if self.capturing(id).is_some() {
            return Err(DriverErrorKind::Capture {
                rule: crate::driver::CaptureRule::AlreadyCapturing,
            });
        }
        if s.fault.is_none() && !s.queue.is_empty() {
            self.stats.busy_destroy_refused += 1;
            return Err(DriverErrorKind::StreamBusy {
                queued: Some(s.queue.len()),
            });
        }
        self.streams.remove(&id);
        self.stats.streams_destroyed += 1;
        self.push_trace(id, 0, TraceKind::StreamDestroyed);
        Ok(())
    }

    pub fn queued(&self, id: u64) -> usize {
        self.streams.get(&id).map_or(0, |s| s.queue.len())
    }

    /// `Ok(Some(tick))` when the stream is drained, `Ok(None)` while busy,
    /// `Err` when faulted or unknown.
    pub fn stream_done(&self, id: u64) -> Result<Option<u64>, DriverErrorKind> {
        self.check_stream(id)?;
        let s = &self.streams[&id];
        Ok(s.queue.is_empty().then_some(s.last_end))
    }

    pub fn has_work(&self) -> bool {
        self.streams
            .values()
            .any(|s| s.fault.is_none() && !s.queue.is_empty())
    }

    // ----- events ---------------------------------------------------------

    pub fn create_event(&mut self, owner: Owner) -> u64 {
        self.create_event_of(owner, false)
    }

    /// A new event of `owner`; `private` for a graph's (not counted).
    fn create_event_of(&mut self, owner: Owner, private: bool) -> u64 {
        let id = self.handle();
        self.events.insert(
            id,
            Event {
                owner,
                recorded: 0,
                completed: 0,
                completed_at: 0,
                failed: None,
                stream: 0,
            },
        );
        if !private {
            self.stats.events_created += 1;
        }
        id
    }

    /// `Ok` when event `id` is live and `owner` created it; a bad handle
    /// otherwise.
    pub fn own_event(&self, owner: Owner, id: u64) -> Result<(), DriverErrorKind> {
        match self.events.get(&id) {
            Some(e) if e.owner == owner => Ok(()),
            _ => Err(DriverErrorKind::BadHandle {
                kind: HandleKind::Event,
                raw: id,
            }),
        }
    }

    pub fn destroy_event(&mut self, owner: Owner, id: u64) -> Result<(), DriverErrorKind> {
        self.own_event(owner, id)?;
        self.events.remove(&id).ok_or(DriverErrorKind::BadHandle {
            kind: HandleKind::Event,
            raw: id,
        })?;
        self.stats.events_destroyed += 1;
        Ok(())
    }

    fn event(&self, id: u64) -> Result<&Event, DriverErrorKind> {
        self.events.get(&id).ok_or(DriverErrorKind::BadHandle {
            kind: HandleKind::Event,
            raw: id,
        })
    }

    /// `Ok(Some(tick))` when the last record is complete.
    pub fn event_done(&self, id: u64) -> Result<Option<u64>, DriverErrorKind> {
        let e = self.event(id)?;
        e.done(e.recorded, self.now())
    }

    pub fn event_time(&self, id: u64) -> Result<u64, DriverErrorKind> {
        match self.event_done(id)? {
            Some(t) if self.event(id)?.recorded > 0 => Ok(t),
            _ => Err(DriverErrorKind::InvalidArgument {
                what: "event has no completed record",
            }),
        }
    }
}

fn bad(f: super::memory::Fault) -> DriverErrorKind {
    DriverErrorKind::BadAddress {
        addr: f.addr,
        len: f.len,
    }
}
