//! The two kernels of a run as step-by-step state machines over device
//! memory, following the handshake protocol of [`abi`].
//!
//! Neither kernel trusts anything but memory: the AICPU kernel learns that a
//! worker reported only by reading its `aicore_done` word, so a host write
//! that zeroes the region mid-run (a stomped handshake) is observed exactly
//! as it would be on the device.

use std::sync::Arc;

use super::faults::FaultPlan;
use super::memory::Memory;
use super::rust_kernel::{KernelRun, SimKernel};
use crate::driver::FaultKind;
use crate::driver::abi::{self, Program, RunArgs, StatusRecord, WallRecord, worker_word as ww};

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
    /// The parsed argument block: its header, tensors and scalars.
    pub run: KernelRun,
    /// The code it executes, set when it starts.
    pub code: Option<Code>,
    /// Real time: the compute ticks of a timed Rust kernel, set when it
    /// starts (else the latency model's).
    pub kernel_ticks: Option<u64>,
    workers: Vec<Worker>,
    /// Round-robin cursor: the next worker to try.
    rr: u32,
}

fn word(handshake: u64, w: u32, off: usize) -> u64 {
    handshake + abi::worker_offset(w) as u64 + off as u64
}

impl AicoreKernel {
    pub fn new(code_index: usize, run: KernelRun) -> Self {
        AicoreKernel {
            code_index,
            workers: vec![Worker::Start; run.block_dim() as usize],
            run,
            code: None,
            kernel_ticks: None,
            rr: 0,
        }
    }

    pub fn args(&self) -> &RunArgs {
        self.run.header()
    }

    /// Kernel start: stamps `core_start` in the handshake header.
    pub fn start(&mut self, mem: &mut Memory, now: u64) -> Result<(), FaultKind> {
        mem.write_u64(self.args().handshake, now)
            .map_err(|_| FaultKind::AicoreException)
    }

    /// The elements a built-in program computes: `(input, output, len)` of
    /// a version-1 block, or derived from a version-2 block's tensors
    /// ([`Program`]'s rule).
    fn program_operands(&self) -> Option<(u64, u64, u64)> {
        if self.run.is_workload() {
            abi::work_operands(self.run.tensors().iter().copied())
        } else {
            let a = self.args();
            Some((a.input, a.output, a.len))
        }
    }

    /// Worker `w` computes its share with `program`; returns its error code.
    fn compute_program(
        &self,
        program: &Program,
        w: u32,
        mem: &mut Memory,
    ) -> Result<u32, FaultKind> {
        let e = |_| FaultKind::AicoreException;
        // No readable or no writable tensor: nothing to compute.
        let Some((input, output, len)) = self.program_operands() else {
            return Ok(program.fail_code());
        };
        let (s, end) = abi::worker_share(len, self.args().block_dim, w);
        let bytes = usize::try_from((end - s) * 4).map_err(|_| FaultKind::AicoreException)?;
        let mut buf = vec![0u8; bytes];
        mem.read(input + s * 4, &mut buf).map_err(e)?;
        for c in buf.chunks_exact_mut(4) {
            let x = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            c.copy_from_slice(&program.apply_lossy(x).to_le_bytes());
        }
        mem.write(output + s * 4, &buf).map_err(e)?;
        Ok(program.fail_code())
    }

    /// Moves one worker one phase on (round robin), or reports the earliest
    /// compute end when all are waiting.
    pub fn step(&mut self, mem: &mut Memory, now: u64, kernel_ticks: u64) -> KernelStep {
        let n = self.args().block_dim.max(1);
        let kernel_ticks = self.kernel_ticks.unwrap_or(kernel_ticks);
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

    fn advance(
        &mut self,
        w: u32,
        mem: &mut Memory,
        now: u64,
        kernel_ticks: u64,
    ) -> Result<bool, FaultKind> {
        let a = *self.args();
        let tag = a.run_id;
        let e = |_| FaultKind::AicoreException;
        let Some(&state) = self.workers.get(w as usize) else {
            return Err(FaultKind::AicoreException);
        };
        let next = match state {
            Worker::Start => {
                mem.write_u64(word(a.handshake, w, ww::AICORE_DONE), tag)
                    .map_err(e)?;
                Worker::Waiting
            }
            Worker::Waiting if mem.read_u64(word(a.handshake, w, ww::TASK)).map_err(e)? == tag => {
                Worker::Computing {
                    until: now.saturating_add(kernel_ticks),
                }
            }
            Worker::Computing { until } if now >= until => {
                let code = match self.code.as_ref().ok_or(FaultKind::AicoreException)? {
                    Code::Program(program) => self.compute_program(program, w, mem)?,
                    Code::Rust(kernel) => kernel
                        .call(&self.run, w, mem)
                        .map_err(|()| FaultKind::AicoreException)?,
                };
                mem.write_u64(word(a.handshake, w, ww::ERROR), u64::from(code))
                    .map_err(e)?;
                mem.write_u64(word(a.handshake, w, ww::TASK_DONE), tag)
                    .map_err(e)?;
                Worker::Done
            }
            Worker::Done if mem.read_u64(word(a.handshake, w, ww::RELEASE)).map_err(e)? == tag => {
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
    pub args: RunArgs,
    pub aicpu_start: u64,
    dispatched: u64,
    phase: Phase,
}

impl AicpuKernel {
    pub fn new(args: RunArgs) -> Self {
        AicpuKernel {
            args,
            aicpu_start: 0,
            dispatched: 0,
            phase: Phase::WaitReported,
        }
    }

    fn all(&self, mem: &Memory, off: usize) -> Result<bool, FaultKind> {
        let a = &self.args;
        for w in 0..a.block_dim {
            if mem
                .read_u64(word(a.handshake, w, off))
                .map_err(|_| FaultKind::AicpuException)?
                != a.run_id
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn set_all(&self, mem: &mut Memory, off: usize) -> Result<(), FaultKind> {
        let a = &self.args;
        for w in 0..a.block_dim {
            mem.write_u64(word(a.handshake, w, off), a.run_id)
                .map_err(|_| FaultKind::AicpuException)?;
        }
        Ok(())
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
        let a = self.args;
        let e = |_| FaultKind::AicpuException;
        match self.phase {
            Phase::WaitReported => {
                if !self.all(mem, ww::AICORE_DONE)? {
                    return Ok(KernelStep::Blocked(None));
                }
                self.dispatched = now;
                self.set_all(mem, ww::TASK)?;
                self.phase = Phase::WaitDone;
                Ok(KernelStep::Progress)
            }
            Phase::WaitDone => {
                if !self.all(mem, ww::TASK_DONE)? {
                    return Ok(KernelStep::Blocked(None));
                }
                let mut code = 0u32;
                for w in 0..a.block_dim {
                    let err = mem.read_u64(word(a.handshake, w, ww::ERROR)).map_err(e)?;
                    if code == 0 {
                        code = u32::try_from(err).unwrap_or(u32::MAX);
                    }
                }
                if let Some(c) = faults.on_status() {
                    code = c;
                }
                let wall = WallRecord {
                    run_id: a.run_id,
                    slot: a.slot,
                    block_dim: a.block_dim,
                    aicore_start: mem.read_u64(a.handshake).map_err(e)?,
                    aicpu_start: self.aicpu_start,
                    dispatched: self.dispatched,
                    end: now,
                };
                mem.write(a.wall, &wall.to_bytes()).map_err(e)?;
                let status = StatusRecord {
                    run_id: a.run_id,
                    state: StatusRecord::DONE,
                    code,
                };
                mem.write(a.status, &status.to_bytes()).map_err(e)?;
                self.phase = Phase::Release;
                Ok(KernelStep::Progress)
            }
            Phase::Release => {
                self.set_all(mem, ww::RELEASE)?;
                Ok(KernelStep::Finished)
            }
        }
    }
}
