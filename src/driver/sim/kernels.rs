//! The two kernels of a run as step-by-step state machines over device
//! memory, following the handshake protocol of the simulator's
//! [`DeviceModel`](super::DeviceModel) (runclaim's, that of [`abi`], by
//! default).
//!
//! Neither kernel trusts anything but memory: the AICPU kernel learns that a
//! worker reported only by reading its report, so a host write that zeroes
//! the region mid-run (a stomped handshake) is observed exactly as it would
//! be on the device.

use std::sync::Arc;

use super::faults::FaultPlan;
use super::memory::Memory;
use super::protocol::{
    AicoreLaunch, AicpuLaunch, DeviceMemory, ModelHandle, RunEnd, Task, guarded,
};
use super::rust_kernel::{KernelRun, SimKernel};
use crate::driver::FaultKind;
use crate::driver::abi::{self, Instr, Program};

/// What a code address holds, decoded: a built-in program or a Rust kernel.
#[derive(Clone)]
pub(crate) enum Code {
    Program(Arc<Program>),
    Rust(SimKernel),
}

/// Outcome of one kernel step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KernelStep {
    Progress,
    /// Waiting; `Some(t)`: on its own, nothing changes before tick `t`.
    Blocked(Option<u64>),
    Finished,
    Fault(FaultKind),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Worker {
    Start,
    Waiting,
    Computing { until: u64 },
    Done,
    Exited,
}

/// The AICore kernel: `block_dim` workers.
pub(crate) struct AicoreKernel {
    /// Code address index, resolved through the stream's instruction cache
    /// when the kernel starts.
    pub code_index: usize,
    /// The protocol it follows.
    model: ModelHandle,
    /// The launch, as the model decoded it.
    pub launch: AicoreLaunch,
    /// The code it executes, set when it starts.
    pub code: Option<Code>,
    /// Real time: the compute ticks of a timed Rust kernel, set when it
    /// starts (else the latency model's).
    pub kernel_ticks: Option<u64>,
    /// Real time, a timed Rust kernel, and the workers' run is read at
    /// dispatch: its compute time is asked for at the first dispatch.
    pub time_at_dispatch: bool,
    workers: Vec<Worker>,
    /// Each worker's run, when read at dispatch ([`Task::Read`]).
    runs: Vec<Option<KernelRun>>,
    /// Round-robin cursor: the next worker to try.
    rr: u32,
    /// A program's elements while a worker computes them (kept: one
    /// allocation per kernel, not per worker share).
    elems: Vec<u32>,
}

/// An AICore fault.
fn core<E>(_: E) -> FaultKind {
    FaultKind::AicoreException
}

/// An AICPU fault.
fn cpu<E>(_: E) -> FaultKind {
    FaultKind::AicpuException
}

impl AicoreKernel {
    pub fn new(code_index: usize, model: ModelHandle, launch: AicoreLaunch) -> Self {
        let n = launch.block_dim as usize;
        AicoreKernel {
            code_index,
            model,
            workers: vec![Worker::Start; n],
            runs: Vec::new(),
            launch,
            code: None,
            kernel_ticks: None,
            time_at_dispatch: false,
            rr: 0,
            elems: Vec::new(),
        }
    }

    /// Kernel start: the model's (runclaim: stamps `core_start` in the
    /// handshake header).
    pub fn start(&mut self, mem: &mut Memory, now: u64) -> Result<(), FaultKind> {
        let (model, launch) = (self.model.model(), &self.launch);
        guarded(|| model.aicore_start(launch, &mut DeviceMemory::new(mem), now)).map_err(core)
    }

    /// Worker `w` computes its share of `run` with `program`; returns its
    /// error code.
    fn compute_program(
        program: &Program,
        run: &KernelRun,
        w: u32,
        mem: &mut Memory,
        elems: &mut Vec<u32>,
    ) -> Result<u32, FaultKind> {
        // The elements: `(input, output, len)` of a version-1 block, or
        // derived from a workload run's tensors ([`Program`]'s rule).
        let operands = if run.is_workload() {
            abi::work_operands(run.tensors().iter().copied())
        } else {
            let a = run.header();
            Some((a.input, a.output, a.len))
        };
        // No readable or no writable tensor: nothing to compute.
        let Some((input, output, len)) = operands else {
            return Ok(program.fail_code());
        };
        let (s, end) = abi::worker_share(len, run.block_dim(), w);
        // A run read from device memory at dispatch names what memory
        // held: check the ranges before sizing a buffer by them.
        let n = (end - s).checked_mul(4).ok_or(FaultKind::AicoreException)?;
        let at = |base: u64| {
            s.checked_mul(4)
                .and_then(|o| base.checked_add(o))
                .ok_or(FaultKind::AicoreException)
        };
        let (src, dst) = (at(input)?, at(output)?);
        mem.check(src, n).map_err(core)?;
        mem.check(dst, n).map_err(core)?;
        elems.clear();
        elems.resize(usize::try_from(end - s).map_err(core)?, 0);
        mem.read(src, bytemuck::cast_slice_mut(elems.as_mut_slice()))
            .map_err(core)?;
        // Device memory is little-endian (a no-op on a little-endian host).
        for x in elems.iter_mut() {
            *x = u32::from_le(*x);
        }
        apply_all(program, elems);
        for x in elems.iter_mut() {
            *x = x.to_le();
        }
        mem.write(dst, bytemuck::cast_slice(elems.as_slice()))
            .map_err(core)?;
        Ok(program.fail_code())
    }

    /// Moves one worker one phase on (round robin), or reports the earliest
    /// compute end when all are waiting.
    pub fn step(&mut self, mem: &mut Memory, now: u64, kernel_ticks: u64) -> KernelStep {
        let n = self.launch.block_dim.max(1);
        let mut gate: Option<u64> = None;
        for k in 0..n {
            let w = (self.rr + k) % n;
            match self.advance(w, mem, now, kernel_ticks) {
                Err(f) => return KernelStep::Fault(f),
                Ok(true) => {
                    self.rr = (w + 1) % n;
                    if self.workers.iter().all(|&s| s == Worker::Exited) {
                        return KernelStep::Finished;
                    }
                    return KernelStep::Progress;
                }
                Ok(false) => {
                    if let Some(Worker::Computing { until }) = self.workers.get(w as usize) {
                        let until = *until;
                        gate = Some(gate.map_or(until, |g| g.min(until)));
                    }
                }
            }
        }
        KernelStep::Blocked(gate)
    }

    /// Worker `w` was dispatched `task`: keeps a run read at dispatch and
    /// asks a timed Rust kernel for its compute time at the first one.
    fn take(&mut self, w: u32, task: Task) -> Result<(), FaultKind> {
        let Task::Read(run) = task else {
            // The model said the run is in the block: it must be.
            return self
                .launch
                .run
                .as_ref()
                .map(|_| ())
                .ok_or(FaultKind::AicoreException);
        };
        if self.time_at_dispatch {
            self.time_at_dispatch = false;
            if let Some(Code::Rust(kernel)) = &self.code {
                self.kernel_ticks = kernel.ticks(&run).map_err(core)?;
            }
        }
        if self.runs.is_empty() {
            self.runs = vec![None; self.workers.len()];
        }
        let slot = self
            .runs
            .get_mut(w as usize)
            .ok_or(FaultKind::AicoreException)?;
        *slot = Some(run);
        Ok(())
    }

    fn advance(
        &mut self,
        w: u32,
        mem: &mut Memory,
        now: u64,
        kernel_ticks: u64,
    ) -> Result<bool, FaultKind> {
        let Some(&state) = self.workers.get(w as usize) else {
            return Err(FaultKind::AicoreException);
        };
        let model = self.model.clone();
        let model = model.model();
        let next = match state {
            Worker::Start => {
                guarded(|| model.report(&self.launch, w, &mut DeviceMemory::new(mem)))
                    .map_err(core)?;
                Worker::Waiting
            }
            Worker::Waiting => {
                let Some(task) = guarded(|| model.task(&self.launch, w, &DeviceMemory::new(mem)))
                    .map_err(core)?
                else {
                    return Ok(false);
                };
                self.take(w, task)?;
                let ticks = self.kernel_ticks.unwrap_or(kernel_ticks);
                Worker::Computing {
                    until: now.saturating_add(ticks),
                }
            }
            Worker::Computing { until } if now >= until => {
                let run = self
                    .runs
                    .get(w as usize)
                    .and_then(Option::as_ref)
                    .or(self.launch.run.as_ref())
                    .ok_or(FaultKind::AicoreException)?;
                let code = match self.code.as_ref().ok_or(FaultKind::AicoreException)? {
                    Code::Program(program) => {
                        Self::compute_program(program, run, w, mem, &mut self.elems)?
                    }
                    Code::Rust(kernel) => kernel
                        .call(run, w, mem)
                        .map_err(|()| FaultKind::AicoreException)?,
                };
                guarded(|| model.finish(&self.launch, w, code, &mut DeviceMemory::new(mem)))
                    .map_err(core)?;
                Worker::Done
            }
            Worker::Done => {
                if !guarded(|| model.released(&self.launch, w, &DeviceMemory::new(mem)))
                    .map_err(core)?
                {
                    return Ok(false);
                }
                Worker::Exited
            }
            _ => return Ok(false),
        };
        self.workers[w as usize] = next;
        Ok(true)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    WaitReported,
    WaitDone,
    Release,
}

/// The AICPU Run kernel: the device-side scheduler of one run.
pub(crate) struct AicpuKernel {
    /// The protocol it follows.
    model: ModelHandle,
    /// The launch, as the model decoded it.
    pub launch: AicpuLaunch,
    pub aicpu_start: u64,
    dispatched: u64,
    phase: Phase,
}

impl AicpuKernel {
    pub fn new(model: ModelHandle, launch: AicpuLaunch) -> Self {
        AicpuKernel {
            model,
            launch,
            aicpu_start: 0,
            dispatched: 0,
            phase: Phase::WaitReported,
        }
    }

    /// Kernel start: the model's (a2a3: the task payload is written).
    pub fn start(&mut self, mem: &mut Memory) -> Result<(), FaultKind> {
        let (model, launch) = (self.model.model(), &self.launch);
        guarded(|| model.aicpu_start(launch, &mut DeviceMemory::new(mem))).map_err(cpu)
    }

    pub fn step(&mut self, mem: &mut Memory, now: u64, faults: &mut FaultPlan) -> KernelStep {
        match self.try_step(mem, now, faults) {
            Ok(s) => s,
            Err(f) => KernelStep::Fault(f),
        }
    }

    fn try_step(
        &mut self,
        mem: &mut Memory,
        now: u64,
        faults: &mut FaultPlan,
    ) -> Result<KernelStep, FaultKind> {
        let (model, c) = (self.model.model(), &self.launch);
        let mut mem = DeviceMemory::new(mem);
        let n = c.block_dim;
        match self.phase {
            Phase::WaitReported => {
                for w in 0..n {
                    if !guarded(|| model.accepted(c, w, &mem)).map_err(cpu)? {
                        return Ok(KernelStep::Blocked(None));
                    }
                }
                self.dispatched = now;
                for w in 0..n {
                    guarded(|| model.dispatch(c, w, &mut mem)).map_err(cpu)?;
                }
                self.phase = Phase::WaitDone;
                Ok(KernelStep::Progress)
            }
            Phase::WaitDone => {
                let mut code = 0u32;
                for w in 0..n {
                    match guarded(|| model.task_done(c, w, &mem)).map_err(cpu)? {
                        None => return Ok(KernelStep::Blocked(None)),
                        Some(err) if code == 0 => code = err,
                        Some(_) => {}
                    }
                }
                if let Some(c) = faults.on_status() {
                    code = c;
                }
                let end = RunEnd {
                    code,
                    aicpu_start: self.aicpu_start,
                    dispatched: self.dispatched,
                    end: now,
                };
                guarded(|| model.write_records(c, &end, &mut mem)).map_err(cpu)?;
                self.phase = Phase::Release;
                Ok(KernelStep::Progress)
            }
            Phase::Release => {
                for w in 0..n {
                    guarded(|| model.release(c, w, &mut mem)).map_err(cpu)?;
                }
                Ok(KernelStep::Finished)
            }
        }
    }
}

/// [`Program::apply_lossy`] over every element of `xs`, in place: one pass
/// per instruction up to the first `Fail` (what each element would have
/// reached on its own), so the loops vectorise.
fn apply_all(program: &Program, xs: &mut [u32]) {
    for i in program.instrs() {
        match *i {
            Instr::Add(k) => xs.iter_mut().for_each(|x| *x = x.wrapping_add(k)),
            Instr::Mul(k) => xs.iter_mut().for_each(|x| *x = x.wrapping_mul(k)),
            Instr::Xor(k) => xs.iter_mut().for_each(|x| *x ^= k),
            Instr::Fail(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::apply_all;
    use crate::driver::abi::Program;

    /// The whole-slice pass writes what each element reaches on its own,
    /// through a `Fail` too (where every element stops).
    #[test]
    fn applying_a_program_to_a_slice_matches_each_element_on_its_own() {
        let programs = [
            Program::new(),
            Program::new().add(1),
            Program::new().mul(3).add(7).xor(0xdead_beef),
            Program::new().add(5).fail(9).mul(1000).add(1),
            Program::new().fail(2).add(1),
            Program::new()
                .mul(u32::MAX)
                .add(u32::MAX)
                .xor(1)
                .mul(0x9e37_79b9),
        ];
        let xs: Vec<u32> = (0..300u32)
            .map(|i| i.wrapping_mul(0x0100_0193) ^ (i << 7))
            .chain([0, 1, u32::MAX, u32::MAX - 1])
            .collect();
        for p in &programs {
            let mut all = xs.clone();
            apply_all(p, &mut all);
            let each: Vec<u32> = xs.iter().map(|&x| p.apply_lossy(x)).collect();
            assert_eq!(all, each, "{p:?}");
        }
    }
}
