//! The simulator's state and its single stepping engine, shared by the
//! stepped and the real-time mode.
//!
//! A *step* of a stream performs at most one action of its head task: start
//! it (once its time gate is open), move one AICore worker or the AICPU
//! kernel one phase on, or finish a record / wait / copy / memset. Stepped
//! mode takes one step per call; real-time mode takes every step whose time
//! has come.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use super::faults::{FaultPlan, RecordFate};
use super::kernels::{AicoreKernel, AicpuKernel, KernelStep};
use super::memory::Memory;
use super::trace::{TaskTag, TraceEvent, TraceKind};
use super::{Kernel, SimConfig, SimStats, StepOutcome};
use crate::driver::abi::{self, Program, RunArgs};
use crate::driver::{
    CodeHandle, DriverErrorKind, EventId, FaultKind, HandleKind, Op, Registration, StreamId,
};

/// Code addresses: `CODE_BASE + index * CODE_STRIDE`.
const CODE_BASE: u64 = 0xc0de_0000_0000;
const CODE_STRIDE: u64 = 0x1_0000;

/// Result of stepping one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepResult {
    /// An action was performed.
    Progress,
    /// The head task waits; `Some(t)`: nothing can change before tick `t`
    /// unless another stream acts.
    Blocked(Option<u64>),
    /// No work, or the stream is faulted or unknown.
    Idle,
}

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
}

impl TaskKind {
    fn tag(&self) -> TaskTag {
        match self {
            TaskKind::Aicore(_) => TaskTag::Aicore,
            TaskKind::Aicpu(_) => TaskTag::Aicpu,
            TaskKind::Record { event, .. } => TaskTag::Record(EventId::from_raw(*event)),
            TaskKind::Wait { event, .. } => TaskTag::Wait(EventId::from_raw(*event)),
            TaskKind::Copy { .. } => TaskTag::Copy,
            TaskKind::Memset { .. } => TaskTag::Memset,
        }
    }

    fn run(&self) -> u64 {
        match self {
            TaskKind::Aicore(k) => k.args.run_id,
            TaskKind::Aicpu(k) => k.args.run_id,
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

/// What a code address holds: the bytes and decoded program of one upload.
#[derive(Clone)]
pub(crate) struct Image {
    bytes: Arc<[u8]>,
    program: Arc<Program>,
    /// The upload's stamp ([`CodeHandle::upload`]).
    upload: u64,
}

/// One resident image per code address.
type CodeImage = Option<Image>;

pub(crate) struct Stream {
    queue: VecDeque<Task>,
    /// The instruction cache: what each code address held when the stream was
    /// created (or when the stream first used an address empty at creation).
    icache: Vec<CodeImage>,
    fault: Option<FaultKind>,
    last_end: u64,
    /// Run id of the last kernel queued, for tracing non-kernel tasks.
    last_run: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Event {
    /// Generation of the last record enqueued (0 = never recorded).
    recorded: u64,
    /// Highest generation completed.
    completed: u64,
    /// Tick at which `completed` becomes visible.
    completed_at: u64,
    /// A fault that stopped the stream carrying record `failed.0`.
    failed: Option<(u64, FaultKind)>,
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

pub(crate) struct Core {
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
    events: BTreeMap<u64, Event>,
    code: Vec<CodeImage>,
    code_lru: Vec<u64>,
    /// Live pins per code address (registrations not yet released).
    code_pins: Vec<u64>,
    /// Stamp of the latest upload (0 before any).
    uploads: u64,
    pub faults: FaultPlan,
    pub stats: SimStats,
    pub trace: VecDeque<TraceEvent>,
    pub trace_dropped: u64,
    next_handle: u64,
    rng: u64,
}

impl Core {
    pub fn new(cfg: SimConfig, base: Option<Instant>) -> Self {
        let slots = cfg.code_slots.max(1);
        Core {
            mem: Memory::new(cfg.memory_bytes),
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15,
            trace: VecDeque::with_capacity(cfg.trace_capacity.min(1 << 16)),
            cfg,
            base,
            ticks: 0,
            vclock: 0,
            shutdown: false,
            streams: BTreeMap::new(),
            events: BTreeMap::new(),
            code: vec![None; slots],
            code_lru: vec![0; slots],
            code_pins: vec![0; slots],
            uploads: 0,
            faults: FaultPlan::default(),
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
        if self.cfg.trace_capacity == 0 {
            return;
        }
        if self.trace.len() == self.cfg.trace_capacity {
            self.trace.pop_front();
            self.trace_dropped += 1;
        }
        // Host actions are stamped in host time, device actions in device
        // time; in real-time mode the trace order is the order of record.
        let tick = match what {
            TraceKind::Enqueued(_)
            | TraceKind::StreamCreated
            | TraceKind::StreamDestroyed
            | TraceKind::Published(_) => self.now(),
            _ => self.dev(),
        };
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

    pub fn alloc(&mut self, bytes: u64) -> Result<u64, DriverErrorKind> {
        if bytes == 0 {
            return Err(DriverErrorKind::InvalidArgument {
                what: "allocation size is 0",
            });
        }
        let p = self
            .mem
            .alloc(bytes)
            .ok_or(DriverErrorKind::OutOfMemory { bytes })?;
        self.stats.allocations += 1;
        Ok(p)
    }

    pub fn free(&mut self, ptr: u64) -> Result<(), DriverErrorKind> {
        if self.mem.free(ptr) {
            self.stats.frees += 1;
            Ok(())
        } else {
            Err(DriverErrorKind::BadAddress { addr: ptr, len: 0 })
        }
    }

    pub fn write(&mut self, dst: u64, src: &[u8]) -> Result<(), DriverErrorKind> {
        self.mem.write(dst, src).map_err(bad)
    }

    pub fn read(&self, src: u64, dst: &mut [u8]) -> Result<(), DriverErrorKind> {
        self.mem.read(src, dst).map_err(bad)
    }

    pub fn fill(&mut self, dst: u64, value: u8, len: u64) -> Result<(), DriverErrorKind> {
        self.mem.fill(dst, value, len).map_err(bad)
    }

    // ----- streams --------------------------------------------------------

    pub fn create_stream(&mut self) -> u64 {
        let id = self.handle();
        self.streams.insert(
            id,
            Stream {
                queue: VecDeque::new(),
                icache: self.code.clone(),
                fault: None,
                last_end: 0,
                last_run: 0,
            },
        );
        self.stats.streams_created += 1;
        self.stats
            .tasks_run
            .entry(StreamId::from_raw(id))
            .or_insert(0);
        self.push_trace(id, 0, TraceKind::StreamCreated);
        id
    }

    pub fn check_stream(&self, id: u64) -> Result<(), DriverErrorKind> {
        let s = self.streams.get(&id).ok_or(DriverErrorKind::BadHandle {
            kind: HandleKind::Stream,
            raw: id,
        })?;
        match s.fault {
            Some(kind) => Err(DriverErrorKind::KernelFault(kind)),
            None => Ok(()),
        }
    }

    pub fn destroy_stream(&mut self, id: u64) -> Result<(), DriverErrorKind> {
        let s = self.streams.get(&id).ok_or(DriverErrorKind::BadHandle {
            kind: HandleKind::Stream,
            raw: id,
        })?;
        if s.fault.is_none() && !s.queue.is_empty() {
            self.stats.busy_destroy_refused += 1;
            return Err(DriverErrorKind::StreamBusy {
                queued: s.queue.len(),
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

    pub fn create_event(&mut self) -> u64 {
        let id = self.handle();
        self.events.insert(id, Event::default());
        self.stats.events_created += 1;
        id
    }

    pub fn destroy_event(&mut self, id: u64) -> Result<(), DriverErrorKind> {
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

    // ----- enqueue ----------------------------------------------------------

    fn enqueue(&mut self, stream: u64, kind: TaskKind) -> Result<(), DriverErrorKind> {
        self.check_stream(stream)?;
        let now = self.now();
        let tag = kind.tag();
        let s = self
            .streams
            .get_mut(&stream)
            .ok_or(DriverErrorKind::BadHandle {
                kind: HandleKind::Stream,
                raw: stream,
            })?;
        let run = if kind.is_kernel() {
            s.last_run = kind.run();
            kind.run()
        } else {
            s.last_run
        };
        s.queue.push_back(Task {
            kind,
            enqueued: now,
            started: None,
            run,
        });
        let depth = s.queue.len();
        self.stats.max_queue_depth = self.stats.max_queue_depth.max(depth);
        self.push_trace(stream, run, TraceKind::Enqueued(tag));
        Ok(())
    }

    pub fn enqueue_copy(
        &mut self,
        stream: u64,
        dst: u64,
        src: u64,
        len: u64,
    ) -> Result<(), DriverErrorKind> {
        self.mem.check(src, len).map_err(bad)?;
        self.mem.check(dst, len).map_err(bad)?;
        self.enqueue(stream, TaskKind::Copy { dst, src, len })
    }

    pub fn enqueue_memset(
        &mut self,
        stream: u64,
        dst: u64,
        value: u8,
        len: u64,
    ) -> Result<(), DriverErrorKind> {
        self.mem.check(dst, len).map_err(bad)?;
        self.enqueue(stream, TaskKind::Memset { dst, value, len })
    }

    pub fn enqueue_record(&mut self, event: u64, stream: u64) -> Result<(), DriverErrorKind> {
        self.event(event)?;
        self.check_stream(stream)?;
        let fate = self.faults.on_record(abi::duration_to_ticks);
        let generation = match self.events.get_mut(&event) {
            Some(e) => {
                e.recorded += 1;
                e.recorded
            }
            None => 0,
        };
        self.enqueue(
            stream,
            TaskKind::Record {
                event,
                generation,
                fate,
            },
        )
    }

    pub fn enqueue_wait(&mut self, stream: u64, event: u64) -> Result<(), DriverErrorKind> {
        let generation = self.event(event)?.recorded;
        self.enqueue(stream, TaskKind::Wait { event, generation })
    }

    fn decode_args(&self, block_dim: Option<u32>, args: &[u8]) -> Result<RunArgs, DriverErrorKind> {
        if args.len() != RunArgs::SIZE {
            return Err(DriverErrorKind::InvalidArgument {
                what: "argument block is not RunArgs::SIZE bytes",
            });
        }
        let a = RunArgs::from_bytes(args).ok_or(DriverErrorKind::InvalidArgument {
            what: "argument block has a bad magic, version or run id",
        })?;
        if a.block_dim == 0 || a.block_dim > self.cfg.max_block_dim {
            return Err(DriverErrorKind::InvalidArgument {
                what: "block_dim is 0 or above the device maximum",
            });
        }
        if block_dim.is_some_and(|b| b != a.block_dim) {
            return Err(DriverErrorKind::InvalidArgument {
                what: "block_dim differs from the argument block's",
            });
        }
        let bytes = a
            .len
            .checked_mul(4)
            .ok_or(DriverErrorKind::InvalidArgument {
                what: "element count overflows",
            })?;
        let m = &self.mem;
        m.check(a.input, bytes).map_err(bad)?;
        m.check(a.output, bytes).map_err(bad)?;
        m.check(a.handshake, abi::handshake_bytes(a.block_dim) as u64)
            .map_err(bad)?;
        m.check(a.wall, abi::WallRecord::SIZE as u64).map_err(bad)?;
        m.check(a.status, abi::StatusRecord::SIZE as u64)
            .map_err(bad)?;
        Ok(a)
    }

    pub fn enqueue_aicore(
        &mut self,
        stream: u64,
        code: CodeHandle,
        block_dim: u32,
        args: &[u8],
    ) -> Result<(), DriverErrorKind> {
        if block_dim == 0 || block_dim > self.cfg.max_block_dim {
            return Err(DriverErrorKind::InvalidArgument {
                what: "block_dim is 0 or above the device maximum",
            });
        }
        let index = self.code_index(code)?;
        let args = self.decode_args(Some(block_dim), args)?;
        self.enqueue(
            stream,
            TaskKind::Aicore(Box::new(AicoreKernel::new(index, args))),
        )
    }

    pub fn enqueue_aicpu(&mut self, stream: u64, args: &[u8]) -> Result<(), DriverErrorKind> {
        let args = self.decode_args(None, args)?;
        self.enqueue(stream, TaskKind::Aicpu(Box::new(AicpuKernel::new(args))))
    }

    // ----- code memory ------------------------------------------------------

    /// The code address index of `handle`, if it names the upload resident
    /// there now: an evicted or replaced upload is refused, so a launch can
    /// never run code that replaced what it registered.
    fn code_index(&self, handle: CodeHandle) -> Result<usize, DriverErrorKind> {
        let bad = DriverErrorKind::BadHandle {
            kind: HandleKind::Code,
            raw: handle.raw(),
        };
        let off = handle.raw().checked_sub(CODE_BASE).ok_or(bad.clone())?;
        if off % CODE_STRIDE != 0 {
            return Err(bad);
        }
        let i = usize::try_from(off / CODE_STRIDE).map_err(|_| bad.clone())?;
        match self.code.get(i) {
            Some(Some(img)) if img.upload == handle.upload() => Ok(i),
            _ => Err(bad),
        }
    }

    fn code_handle(&self, i: usize) -> CodeHandle {
        let upload = self.code[i].as_ref().map_or(0, |img| img.upload);
        CodeHandle::from_raw(CODE_BASE + i as u64 * CODE_STRIDE, upload)
    }

    /// The stamp of the latest upload.
    pub fn code_epoch(&self) -> u64 {
        self.uploads
    }

    /// Registers and pins `code`: a dedup hit on resident bytes, or an
    /// upload into a free address or the least recently registered
    /// *unpinned* one. Pinned code is never replaced.
    pub fn register_code(&mut self, code: &[u8]) -> Result<Registration, DriverErrorKind> {
        let program =
            Program::decode(code).map_err(|e| DriverErrorKind::InvalidCode { what: e.as_str() })?;
        let stamp = self.stats.registrations + 1;
        if let Some(i) = self
            .code
            .iter()
            .position(|c| c.as_ref().is_some_and(|img| *img.bytes == *code))
        {
            self.stats.registrations += 1;
            self.code_lru[i] = stamp;
            self.code_pins[i] += 1;
            self.stats.dedup_hits += 1;
            return Ok(Registration {
                handle: self.code_handle(i),
                published: false,
            });
        }
        let free = self.code.iter().position(Option::is_none);
        let i = free
            .or_else(|| {
                (0..self.code.len())
                    .filter(|&i| self.code_pins[i] == 0)
                    .min_by_key(|&i| self.code_lru[i])
            })
            .ok_or(DriverErrorKind::CodeMemoryFull {
                capacity: self.code.len(),
            })?;
        self.stats.registrations += 1;
        self.uploads += 1;
        self.code[i] = Some(Image {
            bytes: Arc::from(code),
            program: Arc::new(program),
            upload: self.uploads,
        });
        self.code_lru[i] = stamp;
        self.code_pins[i] = 1;
        self.stats.publications += 1;
        let handle = self.code_handle(i);
        self.push_trace(0, 0, TraceKind::Published(handle));
        Ok(Registration {
            handle,
            published: true,
        })
    }

    /// Releases one pin of `handle`'s upload.
    pub fn release_code(&mut self, handle: CodeHandle) -> Result<(), DriverErrorKind> {
        let i = self.code_index(handle)?;
        if self.code_pins[i] == 0 {
            return Err(DriverErrorKind::InvalidArgument {
                what: "code is not pinned (released more often than registered)",
            });
        }
        self.code_pins[i] -= 1;
        Ok(())
    }

    /// The upload resident at code address `raw` now, if any.
    pub fn code_at(&self, raw: u64) -> Option<CodeHandle> {
        let off = raw.checked_sub(CODE_BASE)?;
        if off % CODE_STRIDE != 0 {
            return None;
        }
        let i = usize::try_from(off / CODE_STRIDE).ok()?;
        self.code.get(i)?.as_ref()?;
        Some(self.code_handle(i))
    }

    /// Live pins of the upload `handle` names (0 when not resident).
    pub fn code_pins(&self, handle: CodeHandle) -> u64 {
        self.code_index(handle).map_or(0, |i| self.code_pins[i])
    }

    // ----- stepping ---------------------------------------------------------

    /// Stepped mode: one policy-chosen action, one tick of device time.
    pub fn policy_step(&mut self) -> StepOutcome {
        self.tick();
        let busy: Vec<u64> = self
            .streams
            .iter()
            .filter(|(_, s)| s.fault.is_none() && !s.queue.is_empty())
            .map(|(&id, _)| id)
            .collect();
        if busy.is_empty() {
            return StepOutcome::Idle;
        }
        // xorshift64*: deterministic for a given seed and call sequence.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let id = busy[usize::try_from(r % busy.len() as u64).unwrap_or(0)];
        match self.step_stream(id) {
            StepResult::Progress => StepOutcome::Progressed(StreamId::from_raw(id)),
            StepResult::Blocked(_) => StepOutcome::Blocked(StreamId::from_raw(id)),
            StepResult::Idle => StepOutcome::Idle,
        }
    }

    /// Real-time mode: performs every action whose time has come, across all
    /// streams, in model time: the device clock moves from gate to gate (a
    /// dispatch gap, a compute end, a watchdog) up to the wall clock, so the
    /// stamps do not depend on when this thread got the CPU. Returns whether
    /// anything moved and the next gate beyond the wall clock, if any.
    pub fn advance_real_time(&mut self) -> (bool, Option<u64>) {
        let ids: Vec<u64> = self.streams.keys().copied().collect();
        let mut any = false;
        loop {
            let mut moved = false;
            let mut gate: Option<u64> = None;
            for &id in &ids {
                loop {
                    match self.step_stream(id) {
                        StepResult::Progress => moved = true,
                        StepResult::Blocked(Some(t)) => {
                            gate = Some(gate.map_or(t, |g| g.min(t)));
                            break;
                        }
                        StepResult::Blocked(None) | StepResult::Idle => break,
                    }
                }
            }
            any |= moved;
            if moved {
                continue;
            }
            let wall = self.now();
            match gate {
                // The next model time point has passed: catch up to it.
                Some(g) if g <= wall => self.vclock = self.vclock.max(g),
                // Nothing can happen before `g` (or before the host acts):
                // device time passes up to now.
                _ => {
                    self.vclock = self.vclock.max(wall);
                    return (any, gate);
                }
            }
        }
    }

    fn ready_at(&self, s: &Stream, head: &Task) -> u64 {
        let gap = if head.kind.is_kernel() && self.is_real_time() {
            abi::duration_to_ticks(self.cfg.latency.dispatch_gap)
        } else {
            0
        };
        head.enqueued.max(s.last_end).saturating_add(gap)
    }

    /// One action on stream `id`.
    #[allow(
        clippy::too_many_lines,
        reason = "one match over task kinds; split, the borrows of the stream, memory and events would scatter"
    )]
    pub fn step_stream(&mut self, id: u64) -> StepResult {
        let now = self.dev();
        let Some(s) = self.streams.get(&id).filter(|s| s.fault.is_none()) else {
            return StepResult::Idle;
        };
        let Some(head) = s.queue.front() else {
            return StepResult::Idle;
        };
        let Some(started) = head.started else {
            let ready = self.ready_at(s, head);
            if now < ready {
                return StepResult::Blocked(Some(ready));
            }
            return self.start_head(id, now);
        };
        // The device watchdog covers kernels and stream waits: a wait on an
        // event that never completes ends the stream's work, like a task
        // timeout on the device, instead of blocking it for good.
        let timeout_kind = match head.kind {
            TaskKind::Aicore(_) => Some(FaultKind::AicoreTimeout),
            TaskKind::Aicpu(_) => Some(FaultKind::AicpuTimeout),
            TaskKind::Wait { .. } => Some(FaultKind::Collateral),
            _ => None,
        };
        let watchdog = started.saturating_add(abi::duration_to_ticks(self.cfg.watchdog));
        let kernel_ticks = if self.is_real_time() {
            abi::duration_to_ticks(self.cfg.latency.kernel)
        } else {
            0
        };
        let out = {
            let Core {
                streams,
                mem,
                events,
                faults,
                ..
            } = self;
            let Some(head) = streams.get_mut(&id).and_then(|s| s.queue.front_mut()) else {
                return StepResult::Idle;
            };
            match &mut head.kind {
                TaskKind::Aicore(k) => k.step(mem, now, kernel_ticks),
                TaskKind::Aicpu(k) => k.step(mem, now, faults),
                TaskKind::Record {
                    event,
                    generation,
                    fate,
                } => {
                    if let Some(e) = events.get_mut(event)
                        && !fate.never
                        && e.completed < *generation
                    {
                        e.completed = *generation;
                        e.completed_at = now.saturating_add(fate.delay_ticks);
                    }
                    KernelStep::Finished
                }
                TaskKind::Wait { event, generation } => match events.get(event) {
                    None => KernelStep::Finished,
                    Some(e) => match e.done(*generation, now) {
                        Ok(Some(_)) => KernelStep::Finished,
                        // A delayed record: nothing changes before it lands.
                        Ok(None) if e.completed >= *generation => {
                            KernelStep::Blocked(Some(e.completed_at))
                        }
                        Ok(None) => KernelStep::Blocked(None),
                        Err(_) => KernelStep::Fault(FaultKind::Collateral),
                    },
                },
                TaskKind::Copy { dst, src, len } => match mem.copy(*dst, *src, *len) {
                    Ok(()) => KernelStep::Finished,
                    Err(_) => KernelStep::Fault(FaultKind::AicoreException),
                },
                TaskKind::Memset { dst, value, len } => match mem.fill(*dst, *value, *len) {
                    Ok(()) => KernelStep::Finished,
                    Err(_) => KernelStep::Fault(FaultKind::AicoreException),
                },
            }
        };
        match out {
            KernelStep::Progress => StepResult::Progress,
            KernelStep::Blocked(gate) => match timeout_kind {
                Some(kind) if now >= watchdog => {
                    self.fault_stream(id, kind);
                    StepResult::Progress
                }
                Some(_) => StepResult::Blocked(Some(gate.map_or(watchdog, |g| g.min(watchdog)))),
                None => StepResult::Blocked(gate),
            },
            KernelStep::Finished => {
                let Some(s) = self.streams.get_mut(&id) else {
                    return StepResult::Idle;
                };
                let Some(task) = s.queue.pop_front() else {
                    return StepResult::Idle;
                };
                s.last_end = now;
                *self
                    .stats
                    .tasks_run
                    .entry(StreamId::from_raw(id))
                    .or_insert(0) += 1;
                self.push_trace(id, task.run, TraceKind::Finished(task.kind.tag()));
                StepResult::Progress
            }
            KernelStep::Fault(kind) => {
                self.fault_stream(id, kind);
                StepResult::Progress
            }
        }
    }

    /// Starts the head task of stream `id` at `now`.
    fn start_head(&mut self, id: u64, now: u64) -> StepResult {
        let Some(s) = self.streams.get_mut(&id) else {
            return StepResult::Idle;
        };
        let Some(head) = s.queue.front_mut() else {
            return StepResult::Idle;
        };
        head.started = Some(now);
        let (tag, run) = (head.kind.tag(), head.run);
        let mut stale = false;
        let mut fault = None;
        match &mut head.kind {
            TaskKind::Aicore(k) => {
                self.stats.aicore_kernels += 1;
                // Instruction fetch through the stream's cache; an address that
                // was empty when the stream was created is filled now.
                let cached = &mut s.icache[k.code_index];
                if cached.is_none() {
                    cached.clone_from(&self.code[k.code_index]);
                }
                match cached {
                    Some(img) => {
                        stale = self.code[k.code_index]
                            .as_ref()
                            .is_none_or(|now| now.bytes != img.bytes);
                        k.program = Some(Arc::clone(&img.program));
                    }
                    None => fault = Some(FaultKind::AicoreException),
                }
                if self.faults.on_kernel_start(Kernel::Aicore) {
                    fault = Some(FaultKind::AicoreException);
                } else if let Err(f) = k.start(&mut self.mem, now) {
                    fault = Some(f);
                }
            }
            TaskKind::Aicpu(k) => {
                self.stats.aicpu_kernels += 1;
                k.aicpu_start = now;
                if self.faults.on_kernel_start(Kernel::Aicpu) {
                    fault = Some(FaultKind::AicpuException);
                }
            }
            _ => {}
        }
        self.push_trace(id, run, TraceKind::Started(tag));
        if stale {
            self.stats.stale_executions += 1;
            self.push_trace(id, run, TraceKind::StaleCode);
        }
        if let Some(kind) = fault {
            self.fault_stream(id, kind);
        }
        StepResult::Progress
    }

    /// Puts the stream into a sticky error state: queued work is dropped and
    /// events recorded behind the fault report it.
    fn fault_stream(&mut self, id: u64, kind: FaultKind) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        s.fault = Some(kind);
        let run = s.queue.front().map_or(0, |t| t.run);
        for t in s.queue.drain(..) {
            if let TaskKind::Record {
                event, generation, ..
            } = t.kind
                && let Some(e) = self.events.get_mut(&event)
            {
                let fg = e.failed.map_or(0, |(g, _)| g);
                e.failed = Some((fg.max(generation), kind));
            }
        }
        self.stats.kernel_faults += 1;
        self.push_trace(id, run, TraceKind::Faulted(kind));
    }
}

fn bad(f: super::memory::Fault) -> DriverErrorKind {
    DriverErrorKind::BadAddress {
        addr: f.addr,
        len: f.len,
    }
}
