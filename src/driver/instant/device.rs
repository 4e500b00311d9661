//! The instant device's state (`Inner`): its memory and the live
//! allocations, streams, events, code and graphs, and a run's execution at
//! once (outputs, handshake words, device wall, status).

use super::BASE;
use crate::driver::abi::{self, ArgBlock, LaunchArgs, Program, StatusRecord, WallRecord};
use crate::driver::{CodeHandle, DriverError, DriverErrorKind, HandleKind, Op};

#[derive(Debug, Clone, Copy)]
pub(super) struct Block {
    pub(super) addr: u64,
    pub(super) len: u64,
    pub(super) live: bool,
}

#[derive(Debug, Default)]
pub(super) struct Inner {
    /// Backing store; `Block::addr - BASE` indexes it.
    pub(super) memory: Vec<u8>,
    pub(super) blocks: Vec<Block>,
    pub(super) streams: Vec<(u64, bool)>,
    pub(super) events: Vec<(u64, bool)>,
    pub(super) code: Vec<(Vec<u8>, Program)>,
    /// AICore launches waiting for their AICPU kernel: (run id, code index).
    pub(super) pending: Vec<(u64, usize)>,
    pub(super) next_handle: u64,
    pub(super) clock: u64,
    /// The capture open (its origin stream), and what it recorded.
    pub(super) capturing: Option<(u64, Captured)>,
    /// Graphs by handle (`None`: destroyed).
    pub(super) graphs: Vec<(u64, Option<Captured>)>,
    /// A replay's block, read from device memory (kept: no allocation
    /// per replay once it has grown).
    pub(super) scratch: Vec<u8>,
}

/// What a capture recorded: the AICore kernel's code, the AICPU kernel's
/// block (a replayable one, naming the run's block in memory), and the
/// device copies queued meanwhile (`(from, to, len)` in memory), run after
/// the kernels at a replay.
#[derive(Debug, Clone, Default)]
pub(super) struct Captured {
    pub(super) code: Option<usize>,
    pub(super) aicpu: Option<Vec<u8>>,
    pub(super) copies: Vec<(usize, usize, usize)>,
}

impl Inner {
    pub(super) fn range(
        &self,
        op: Op,
        addr: u64,
        len: usize,
    ) -> Result<std::ops::Range<usize>, DriverError> {
        let bad = || {
            DriverError::new(
                op,
                DriverErrorKind::BadAddress {
                    addr,
                    len: len as u64,
                },
            )
        };
        let b = self
            .blocks
            .iter()
            .find(|b| {
                let end = b.addr + b.len.max(1);
                b.live && addr >= b.addr && (addr < end || (len == 0 && addr == b.addr + b.len))
            })
            .ok_or_else(bad)?;
        let end = addr.checked_add(len as u64).ok_or_else(bad)?;
        if end > b.addr + b.len {
            return Err(bad());
        }
        let start = usize::try_from(addr - BASE).map_err(|_| bad())?;
        Ok(start..start + len)
    }

    pub(super) fn handle(&mut self) -> u64 {
        self.next_handle += 1;
        self.next_handle
    }

    /// The index of the upload `code` names.
    pub(super) fn code_index(&self, code: CodeHandle) -> Result<usize, DriverError> {
        usize::try_from(code.raw())
            .ok()
            .filter(|_| code.raw() == code.upload())
            .and_then(|c| c.checked_sub(1))
            .filter(|&c| c < self.code.len())
            .ok_or(DriverError::new(
                Op::LaunchAicore,
                DriverErrorKind::BadHandle {
                    kind: HandleKind::Code,
                    raw: code.raw(),
                },
            ))
    }

    pub(super) fn check(
        list: &[(u64, bool)],
        op: Op,
        kind: HandleKind,
        id: u64,
    ) -> Result<usize, DriverError> {
        list.iter()
            .position(|&(h, live)| live && h == id)
            .ok_or(DriverError::new(
                op,
                DriverErrorKind::BadHandle { kind, raw: id },
            ))
    }

    /// Checks every device range `args` names (as its writer recorded
    /// them) and that the block still holds each. Allocation-free.
    pub(super) fn check_fields(&self, op: Op, args: LaunchArgs<'_>) -> Result<(), DriverError> {
        if args.consistent().is_err() {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "an address the block's writer recorded is no longer in the block",
                },
            ));
        }
        for f in args.fields() {
            let bytes = usize::try_from(f.len).map_err(|_| {
                DriverError::new(
                    op,
                    DriverErrorKind::BadAddress {
                        addr: f.addr.raw(),
                        len: f.len,
                    },
                )
            })?;
            self.range(op, f.addr.raw(), bytes)?;
        }
        Ok(())
    }

    /// Executes a whole run: outputs, handshake words, device wall, status.
    /// The program computes what [`Program`] documents for either block
    /// version; the status carries its fail code even when it computed
    /// nothing.
    #[allow(
        clippy::many_single_char_names,
        reason = "x → y per element, over short-lived ranges"
    )]
    pub(super) fn execute(&mut self, block: &ArgBlock<'_>, code: usize) -> Result<(), DriverError> {
        let op = Op::LaunchAicpu;
        let operands = match block {
            ArgBlock::Run(a) => Some((a.input, a.output, a.len)),
            ArgBlock::Work(w) => abi::work_operands(w.tensors()),
        };
        let a = *block.header();
        // No readable or no writable tensor: nothing to compute.
        let (input, output, len) = operands.unwrap_or((a.handshake, a.handshake, 0));
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let input = self.range(op, input, len.saturating_mul(4))?;
        let output = self.range(op, output, len.saturating_mul(4))?;
        let program = &self.code[code].1;
        let status = program.fail_code();
        for i in 0..len {
            let at = input.start + 4 * i;
            let m = &self.memory;
            let x = u32::from_le_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]]);
            let y = program.apply_lossy(x);
            let o = output.start + 4 * i;
            self.memory[o..o + 4].copy_from_slice(&y.to_le_bytes());
        }
        let start = self.clock;
        self.clock += 1;
        // The whole handshake region is checked once; each word then lands
        // inside it (`handshake_bytes` is past every worker's last word).
        let hs_len = abi::handshake_bytes_checked(a.block_dim).unwrap_or(usize::MAX);
        let hs = self.range(op, a.handshake, hs_len)?;
        let handshake = &mut self.memory[hs];
        let mut put = |at: usize, v: u64| {
            if let Some(word) = handshake.get_mut(at..at + 8) {
                word.copy_from_slice(&v.to_le_bytes());
            }
        };
        put(0, start);
        for w in 0..a.block_dim {
            let base = abi::worker_offset(w);
            for off in [
                abi::worker_word::AICORE_DONE,
                abi::worker_word::TASK,
                abi::worker_word::TASK_DONE,
                abi::worker_word::RELEASE,
            ] {
                put(base + off, a.run_id);
            }
        }
        let wall = WallRecord {
            run_id: a.run_id,
            slot: a.slot,
            block_dim: a.block_dim,
            aicore_start: start,
            aicpu_start: start,
            dispatched: start,
            end: self.clock,
        };
        let r = self.range(op, a.wall, WallRecord::SIZE)?;
        self.memory[r].copy_from_slice(&wall.to_bytes());
        let st = StatusRecord {
            run_id: a.run_id,
            state: StatusRecord::DONE,
            code: status,
        };
        let r = self.range(op, a.status, StatusRecord::SIZE)?;
        self.memory[r].copy_from_slice(&st.to_bytes());
        Ok(())
    }
}
