//! runclaim's own device protocol ([`RunclaimModel`]): the handshake and
//! records of [`abi`], one block of either version for both kernels.

use super::replay::replayed;
use super::{AicoreLaunch, AicpuLaunch, DeviceMemory, DeviceModel, ModelError, RunEnd, Task};
use crate::driver::abi::worker_word as ww;
use crate::driver::abi::{self, ArgBlock, ReplayArgs, RunArgs, StatusRecord, WallRecord, WorkArgs};
use crate::driver::sim::rust_kernel::KernelRun;

/// runclaim's device protocol, the simulator's default: the handshake,
/// device wall and status record described in [`abi`], with blocks of
/// both versions ([`ArgBlock`]) — what the
/// [`RunclaimAbi`](abi::RunclaimAbi) adapter writes.
///
/// - **Blocks.** Both kernels receive the same block: a [`RunArgs`]
///   (version 1) or a [`WorkArgs`] (version 2). At launch every range it
///   names is checked (input and output, or each tensor; the handshake,
///   wall and status records); the block's `block_dim` must be the
///   AICore launch's. The workers' run is the AICore block's
///   ([`Task::InBlock`]).
/// - **Handshake.** Every word is a `u64` that means "set for this run"
///   when it holds the run id: a region the host zeroed reads as nothing
///   reported, and zeroing it while the run is live (a stomped
///   handshake) erases reports the AICPU kernel then waits for until the
///   watchdog.
/// - **Records.** The device wall ([`WallRecord`]), then the status
///   record ([`StatusRecord`], state `DONE`).
///
/// ```
/// use runclaim::sim::{ModelHandle, RunclaimModel, SimConfig};
///
/// assert_eq!(SimConfig::default().device_model, ModelHandle::new(RunclaimModel));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RunclaimModel;

fn refused(what: &'static str) -> ModelError {
    ModelError::Refused { what }
}

/// Worker `w`'s word `off` (saturating: a launch a user's model made may
/// name any base, and an address past the top is out of bounds, not an
/// overflow).
fn word(handshake: u64, w: u32, off: usize) -> u64 {
    handshake
        .saturating_add(abi::worker_offset(w) as u64)
        .saturating_add(off as u64)
}

/// Parses an argument block of either version and checks every device
/// range it names against live memory: a version-1 block's input and
/// output, a version-2 block's tensors, and both versions' handshake,
/// wall and status records. `block_dim`: the AICore launch's.
fn decode<'b>(
    block_dim: Option<u32>,
    max_block_dim: u32,
    args: &'b [u8],
    m: &DeviceMemory<'_>,
) -> Result<ArgBlock<'b>, ModelError> {
    if ReplayArgs::is_replay(args) {
        return Err(refused("a replayable block names a block: read it first"));
    }
    let block = if args.len() >= 8 && args[4..8] == WorkArgs::VERSION.to_le_bytes() {
        let w = WorkArgs::parse(args).map_err(|e| refused(e.field))?;
        let h = w.header();
        if h.len != 0 || h.input != 0 || h.output != 0 {
            return Err(refused(
                "workload argument block has a non-zero len, input or output",
            ));
        }
        ArgBlock::Work(w)
    } else {
        ArgBlock::Run(RunArgs::from_bytes(args).map_err(|e| refused(e.field))?)
    };
    let a = *block.header();
    if a.block_dim == 0 || a.block_dim > max_block_dim {
        return Err(refused("block_dim is 0 or above the device maximum"));
    }
    if block_dim.is_some_and(|b| b != a.block_dim) {
        return Err(refused("block_dim differs from the argument block's"));
    }
    match &block {
        ArgBlock::Run(a) => {
            let bytes = a
                .len
                .checked_mul(4)
                .ok_or(refused("element count overflows"))?;
            m.check(a.input, bytes)?;
            m.check(a.output, bytes)?;
        }
        ArgBlock::Work(w) => {
            for t in w.tensors() {
                m.check(t.addr, t.bytes)?;
            }
        }
    }
    m.check(a.handshake, abi::handshake_bytes(a.block_dim) as u64)?;
    m.check(a.wall, WallRecord::SIZE as u64)?;
    m.check(a.status, StatusRecord::SIZE as u64)?;
    Ok(block)
}

impl DeviceModel for RunclaimModel {
    fn name(&self) -> &'static str {
        "runclaim"
    }

    fn decode_aicore(
        &self,
        block: &[u8],
        block_dim: u32,
        max_block_dim: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicoreLaunch, ModelError> {
        let mut buf = Vec::new();
        let block = replayed(block, mem, &mut buf)?;
        let run = KernelRun::from_block(&decode(Some(block_dim), max_block_dim, block, mem)?);
        let h = *run.header();
        Ok(AicoreLaunch {
            run: Some(run),
            ..AicoreLaunch::new(h.run_id, h.block_dim, h.handshake)
        })
    }

    fn decode_aicpu(
        &self,
        block: &[u8],
        max_block_dim: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicpuLaunch, ModelError> {
        let mut buf = Vec::new();
        let block = replayed(block, mem, &mut buf)?;
        let a = *decode(None, max_block_dim, block, mem)?.header();
        Ok(AicpuLaunch::new(
            a.run_id,
            a.slot,
            a.block_dim,
            a.handshake,
            a.status,
            a.wall,
        ))
    }

    /// Stamps `core_start` in the handshake header.
    fn aicore_start(
        &self,
        k: &AicoreLaunch,
        mem: &mut DeviceMemory<'_>,
        now: u64,
    ) -> Result<(), ModelError> {
        mem.write_u64(k.base, now)
    }

    fn report(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        mem.write_u64(word(k.base, worker, ww::AICORE_DONE), k.identity)
    }

    fn task(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<Task>, ModelError> {
        let task = mem.read_u64(word(k.base, worker, ww::TASK))?;
        Ok((task == k.identity).then_some(Task::InBlock))
    }

    fn finish(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        code: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        mem.write_u64(word(k.base, worker, ww::ERROR), u64::from(code))?;
        mem.write_u64(word(k.base, worker, ww::TASK_DONE), k.identity)
    }

    fn released(
        &self,
        k: &AicoreLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        Ok(mem.read_u64(word(k.base, worker, ww::RELEASE))? == k.identity)
    }

    fn accepted(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        Ok(mem.read_u64(word(c.base, worker, ww::AICORE_DONE))? == c.identity)
    }

    fn dispatch(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        mem.write_u64(word(c.base, worker, ww::TASK), c.identity)
    }

    fn task_done(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<u32>, ModelError> {
        if mem.read_u64(word(c.base, worker, ww::TASK_DONE))? != c.identity {
            return Ok(None);
        }
        let err = mem.read_u64(word(c.base, worker, ww::ERROR))?;
        Ok(Some(u32::try_from(err).unwrap_or(u32::MAX)))
    }

    /// The device wall, then the status record.
    fn write_records(
        &self,
        c: &AicpuLaunch,
        end: &RunEnd,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        let wall = WallRecord {
            run_id: c.identity,
            slot: c.slot,
            block_dim: c.block_dim,
            aicore_start: mem.read_u64(c.base)?,
            aicpu_start: end.aicpu_start,
            dispatched: end.dispatched,
            end: end.end,
        };
        mem.write(c.timing, &wall.to_bytes())?;
        let status = StatusRecord {
            run_id: c.identity,
            state: StatusRecord::DONE,
            code: end.code,
        };
        mem.write(c.status, &status.to_bytes())
    }

    fn release(
        &self,
        c: &AicpuLaunch,
        worker: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        mem.write_u64(word(c.base, worker, ww::RELEASE), c.identity)
    }
}
