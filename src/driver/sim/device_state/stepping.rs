//! The single stepping engine, shared by the stepped and the real-time mode.
//!
//! A *step* of a stream performs at most one action of its head task: start
//! it (once its time gate is open), move one AICore worker or the AICPU
//! kernel one phase on, or finish a record / wait / copy / memset. Stepped
//! mode takes one step per call; real-time mode takes every step whose time
//! has come.

use std::collections::BTreeMap;

use super::{DeviceState, Event, Stream, Task, TaskKind};
use crate::driver::abi;
use crate::driver::sim::faults::FaultPlan;
use crate::driver::sim::kernels::{Code, KernelStep};
use crate::driver::sim::memory::Memory;
use crate::driver::sim::trace::TraceKind;
use crate::driver::sim::{Kernel, StepOutcome};
use crate::driver::{FaultKind, StreamId};

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

impl DeviceState {
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
        // Every copy, memset, query and wait advances first: the id list is
        // the state's own scratch, refilled rather than allocated each time.
        let mut ids = std::mem::take(&mut self.step_ids);
        ids.clear();
        ids.extend(self.streams.keys().copied());
        let r = self.advance_streams(&ids);
        self.step_ids = ids;
        r
    }

    /// [`advance_real_time`](Self::advance_real_time) over the streams
    /// `ids`: every step whose time has come, gate to gate, up to the wall
    /// clock.
    fn advance_streams(&mut self, ids: &[u64]) -> (bool, Option<u64>) {
        let mut any = false;
        loop {
            let mut moved = false;
            let mut gate: Option<u64> = None;
            for &id in ids {
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

    /// One action on stream `id`: start its head task once its time gate
    /// opens, else move the task on ([`act`]) and settle what that did —
    /// progress, a block the watchdog may end, the task done, a fault.
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
        let watchdog = self.watchdog(&head.kind, started);
        let kernel_ticks = if self.is_real_time() {
            abi::duration_to_ticks(self.cfg.latency.kernel)
        } else {
            0
        };
        let out = {
            let DeviceState {
                streams,
                mem,
                events,
                faults,
                ..
            } = self;
            let Some(head) = streams.get_mut(&id).and_then(|s| s.queue.front_mut()) else {
                return StepResult::Idle;
            };
            act(&mut head.kind, mem, events, faults, now, kernel_ticks)
        };
        match out {
            KernelStep::Progress => StepResult::Progress,
            KernelStep::Blocked(gate) => match watchdog {
                Some(w) if now >= w.at => {
                    self.fault_stream(id, w.kind);
                    StepResult::Progress
                }
                Some(w) => StepResult::Blocked(Some(gate.map_or(w.at, |g| g.min(w.at)))),
                None => StepResult::Blocked(gate),
            },
            KernelStep::Finished => self.finish_head(id, now),
            KernelStep::Fault(kind) => {
                self.fault_stream(id, kind);
                StepResult::Progress
            }
        }
    }

    /// The device watchdog over a task started at `started`, if it covers
    /// the task: kernels and stream waits. A wait on an event that never
    /// completes ends the stream's work, like a task timeout on the device,
    /// instead of blocking it for good.
    fn watchdog(&self, kind: &TaskKind, started: u64) -> Option<Watchdog> {
        let kind = match kind {
            TaskKind::Aicore(_) => FaultKind::AicoreTimeout,
            TaskKind::Aicpu(_) => FaultKind::AicpuTimeout,
            TaskKind::Wait { .. } => FaultKind::Collateral,
            // A replay is as long as its tasks, each under its own watchdog.
            _ => return None,
        };
        let at = started.saturating_add(abi::duration_to_ticks(self.cfg.watchdog));
        Some(Watchdog { kind, at })
    }

    /// Stream `id`'s head task finished at `now`: off the queue, counted
    /// and traced.
    fn finish_head(&mut self, id: u64, now: u64) -> StepResult {
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

    /// Starts the head task of stream `id` at `now`.
    fn start_head(&mut self, id: u64, now: u64) -> StepResult {
        if let Some(graph) = self.head_graph(id) {
            return self.start_graph(id, graph, now);
        }
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
                        // A Rust kernel's time function sets its compute
                        // time (real time only: stepped mode ignores
                        // latencies); a panicking one faults the kernel.
                        // A run read at dispatch is timed at the first.
                        if let Code::Rust(kernel) = &img.code
                            && self.base.is_some()
                        {
                            match &k.launch.run {
                                Some(run) => match kernel.ticks(run) {
                                    Ok(t) => k.kernel_ticks = t,
                                    Err(()) => fault = Some(FaultKind::AicoreException),
                                },
                                None => k.time_at_dispatch = true,
                            }
                        }
                        k.code = Some(img.code.clone());
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
                } else if let Err(f) = k.start(&mut self.mem) {
                    fault = Some(f);
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
    pub(super) fn fault_stream(&mut self, id: u64, kind: FaultKind) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        s.fault = Some(kind);
        let run = s.queue.front().map_or(0, |t| t.run);
        for t in s.queue.drain(..) {
            // A record dropped reports the fault, as does every record of
            // a replay dropped before it started.
            let records = match t.kind {
                TaskKind::Record {
                    event, generation, ..
                } => vec![(event, generation)],
                TaskKind::Graph { records, .. } => {
                    records.into_iter().map(|(e, g, _)| (e, g)).collect()
                }
                _ => continue,
            };
            for (event, generation) in records {
                if let Some(e) = self.events.get_mut(&event) {
                    let fg = e.failed.map_or(0, |(g, _)| g);
                    e.failed = Some((fg.max(generation), kind));
                }
            }
        }
        self.stats.kernel_faults += 1;
        self.push_trace(id, run, TraceKind::Faulted(kind));
    }
}

/// When a started task's watchdog fires, and the fault it raises.
#[derive(Debug, Clone, Copy)]
struct Watchdog {
    kind: FaultKind,
    at: u64,
}

/// One action of a started task at `now`, on the device's memory and
/// events: a kernel moved one phase on, a record landed, a wait checked, a
/// copy or memset done (a bad range faults it).
fn act(
    kind: &mut TaskKind,
    mem: &mut Memory,
    events: &mut BTreeMap<u64, Event>,
    faults: &mut FaultPlan,
    now: u64,
    kernel_ticks: u64,
) -> KernelStep {
    match kind {
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
                Ok(None) if e.completed >= *generation => KernelStep::Blocked(Some(e.completed_at)),
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
        TaskKind::Graph { ends, .. } => {
            for &(event, generation) in ends.iter() {
                let Some(e) = events.get(&event) else {
                    continue;
                };
                match e.done(generation, now) {
                    Ok(Some(_)) => {}
                    Ok(None) if e.completed >= generation => {
                        return KernelStep::Blocked(Some(e.completed_at));
                    }
                    Ok(None) => return KernelStep::Blocked(None),
                    Err(_) => return KernelStep::Fault(FaultKind::Collateral),
                }
            }
            KernelStep::Finished
        }
    }
}
