//! The device's calls into the kernel ABI adapter: a run's identity, its
//! two argument blocks built at launch, its regions prepared before it,
//! its records read back and proven to be its own — runclaim's own adapter
//! called directly, a user's through the trait object and an unwind guard.

use super::abi::{RegionLayout, adapter_call};
use super::{Device, SlotHost};
use crate::contract::error::{ErrorKind, Record, RunId};
use crate::contract::port::RunInfo;
use crate::driver::abi::{
    AicpuBlock, Builtin, KernelAbi, Prep, RecordAt, RecordError, RunIdentity, RunView, RunclaimAbi,
    Verdict, WallRecord,
};
use crate::driver::{Driver, DriverError};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// Who `run` in `slot` is, as its blocks and records say.
    pub(super) fn identity(&self, slot: usize, run: RunId) -> RunIdentity {
        #[allow(clippy::cast_possible_truncation, reason = "slot < DEPTH <= 16")]
        RunIdentity {
            run_id: run.get(),
            epoch: run.get(),
            slot: slot as u32,
            block_dim: self.config.block_dim,
        }
    }

    /// Builds the run's two argument blocks through the adapter, from the
    /// tensors and scalars prepare resolved into `host` (a chained input
    /// fixed at launch).
    pub(super) fn build_blocks(
        &self,
        host: &mut SlotHost,
        slot: usize,
        run: RunId,
    ) -> Result<(), ErrorKind> {
        let regions = &self.regions[slot].abi[..self.abi.regions.len()];
        let SlotHost {
            aicore,
            aicpu,
            tensors,
            scalars,
            shared,
            ..
        } = host;
        let view = RunView::new(self.identity(slot, run), regions, tensors, scalars);
        let e = |err| ErrorKind::Adapter(Box::new(err));
        // runclaim's own directly (static dispatch: it cannot panic), a
        // user's through the trait object and the unwind guard.
        let cpu = match self.abi.get.builtin() {
            Builtin::Runclaim => RunclaimAbi
                .aicore_block(&view, &mut aicore.writer())
                .and_then(|()| RunclaimAbi.aicpu_block(&view, &mut aicpu.writer())),
            Builtin::User => {
                let abi = self.abi.get.get();
                adapter_call(self.id, || {
                    abi.aicore_block(&view, &mut aicore.writer())
                        .and_then(|()| abi.aicpu_block(&view, &mut aicpu.writer()))
                })
                .and_then(|r| r)
            }
        };
        *shared = cpu.map_err(e)? == AicpuBlock::Same;
        Ok(())
    }

    /// Prepares the slot's adapter regions for `run` (the slot is held:
    /// nothing in flight on it): zeroes what the adapter says is zeroed,
    /// writes what it arms, leaves what the device stamps. Where the
    /// layout allows, one copy of an image of the prepared span does it
    /// all, and carries `input` (the run's arena input, which lies right
    /// after the span) when it is small: `Ok(true)` when it did.
    pub(super) fn arm_records(
        &self,
        slot: usize,
        run: RunId,
        input: &[u8],
    ) -> Result<bool, ErrorKind> {
        let Some((from, bytes)) = self.abi.layout.arm else {
            self.arm_each(slot, run)?;
            return Ok(false);
        };
        let r = &self.regions[slot];
        let id = self.identity(slot, run);
        let after = r.region_base.offset(self.abi.layout.bytes);
        let joined = !input.is_empty()
            && input.len() <= RegionLayout::JOINT_DATA
            && after.raw() == r.input.raw();
        let n = bytes + if joined { input.len() } else { 0 };
        let mut host = self.block(slot);
        let Some(image) = host.scratch.get_mut(..n) else {
            return Err(ErrorKind::broken("a slot's scratch smaller than its image"));
        };
        image[..bytes].fill(0);
        for (i, spec) in self.abi.regions.iter().enumerate() {
            if spec.prep == Prep::Armed {
                let at = self.abi.layout.offset(i) - from;
                self.arm_one(i, &id, &mut image[at..at + spec.bytes])?;
            }
        }
        if joined {
            image[bytes..].copy_from_slice(input);
        }
        let copied = self
            .driver
            .copy_to_device(r.region_base.offset(from), image);
        drop(host);
        copied.map_err(|err| self.unlaunched_error(&mut self.lock(), err))?;
        Ok(joined)
    }

    /// [`arm_records`](Self::arm_records) region by region: one memset
    /// per run of zeroed regions, one copy per armed region.
    fn arm_each(&self, slot: usize, run: RunId) -> Result<(), ErrorKind> {
        let r = &self.regions[slot];
        let d = &self.driver;
        let id = self.identity(slot, run);
        let e = |err: DriverError| self.unlaunched_error(&mut self.lock(), err);
        // The zeroed regions, coalesced: one memset per run of them.
        for &(offset, bytes) in self.abi.layout.zeroes() {
            d.memset(r.region_base.offset(offset), 0, bytes)
                .map_err(e)?;
        }
        for (i, spec) in self.abi.regions.iter().enumerate() {
            if spec.prep != Prep::Armed {
                continue;
            }
            let span = r.abi[i];
            // A small region is armed from the stack; a larger one
            // through the slot's scratch buffer (its token is held).
            let mut small = [0u8; SMALL_RECORD];
            let mut host;
            let bytes = if spec.bytes <= SMALL_RECORD {
                &mut small[..spec.bytes]
            } else {
                host = self.block(slot);
                let b = &mut host.scratch[..spec.bytes];
                b.fill(0);
                b
            };
            self.arm_one(i, &id, bytes)?;
            d.copy_to_device(span.ptr(), bytes).map_err(e)?;
        }
        Ok(())
    }

    /// The adapter arms region `i` for run `id` into `bytes` (zeroed).
    /// Not armed, the run could not prove its record, so it must not run.
    fn arm_one(&self, i: usize, id: &RunIdentity, bytes: &mut [u8]) -> Result<(), ErrorKind> {
        let armed = match self.abi.get.builtin() {
            Builtin::Runclaim => RunclaimAbi.arm(i, id, bytes),
            Builtin::User => {
                let abi = self.abi.get.get();
                adapter_call(self.id, || abi.arm(i, id, bytes)).and_then(|r| r)
            }
        };
        armed.map_err(|err| ErrorKind::Adapter(Box::new(err)))
    }

    /// Reads one record back: into `small` when it fits, else into the
    /// slot's scratch buffer (its token is held), then `decode`s it.
    fn read_record<T>(
        &self,
        slot: usize,
        info: &RunInfo,
        at: RecordAt,
        record: Record,
        decode: impl FnOnce(&[u8]) -> Result<T, RecordError>,
    ) -> Result<T, ErrorKind> {
        let mut small = [0u8; SMALL_RECORD];
        let mut host;
        let bytes = if at.bytes <= SMALL_RECORD {
            &mut small[..at.bytes]
        } else {
            host = self.block(slot);
            &mut host.scratch[..at.bytes]
        };
        let src = self.regions[slot].abi[at.region].ptr().offset(at.offset);
        if let Err(err) = self.driver.copy_from_device(bytes, src) {
            return Err(self.driver_error(&mut self.lock(), err, info.run, slot, Some(info.seq)));
        }
        match decode(bytes) {
            Ok(v) => Ok(v),
            Err(err) => Err(record_error(record, err)),
        }
    }

    /// Reads the slot's status and timing records back (or takes them
    /// from `read`, the joint range already read with a replay's output)
    /// and checks that both are this run's and the run succeeded; returns
    /// the wall.
    pub(super) fn check_records(
        &self,
        slot: usize,
        info: &RunInfo,
        read: Option<&[u8]>,
    ) -> Result<WallRecord, ErrorKind> {
        let id = self.identity(slot, info.run);
        let user = self.abi.get.get();
        let panicked = RecordError::Malformed {
            what: "the kernel ABI adapter panicked decoding it",
        };
        // The verdict as a code (0: succeeded), a plain word to carry.
        let code = |v: Verdict| match v {
            Verdict::Succeeded => 0,
            Verdict::Failed { code } => code,
        };
        let status = |b: &[u8]| match self.abi.get.builtin() {
            Builtin::Runclaim => RunclaimAbi.decode_status(&id, b).map(code),
            Builtin::User => adapter_call(self.id, || user.decode_status(&id, b))
                .unwrap_or(Err(panicked))
                .map(code),
        };
        let timing = |b: &[u8]| match self.abi.get.builtin() {
            Builtin::Runclaim => RunclaimAbi.decode_timing(&id, b),
            Builtin::User => {
                adapter_call(self.id, || user.decode_timing(&id, b)).unwrap_or(Err(panicked))
            }
        };
        let (failed, wall) = if let Some((offset, bytes)) = self.abi.layout.joint {
            // Both records close together: one copy reads them.
            let mut buf = [0u8; RegionLayout::JOINT_READ];
            let joint = if let Some(read) = read {
                read
            } else {
                let joint = &mut buf[..bytes.min(RegionLayout::JOINT_READ)];
                let src = self.regions[slot].region_base.offset(offset);
                if let Err(err) = self.driver.copy_from_device(joint, src) {
                    let mut st = self.lock();
                    return Err(self.driver_error(&mut st, err, info.run, slot, Some(info.seq)));
                }
                joint
            };
            let of = |r: RecordAt| {
                let at = self.abi.layout.record(r).saturating_sub(offset);
                joint.get(at..at.saturating_add(r.bytes)).unwrap_or(&[])
            };
            let failed =
                status(of(self.abi.status)).map_err(|e| record_error(Record::Status, e))?;
            (
                failed,
                timing(of(self.abi.timing)).map_err(|e| record_error(Record::Wall, e))?,
            )
        } else {
            let failed = self.read_record(slot, info, self.abi.status, Record::Status, status)?;
            (
                failed,
                self.read_record(slot, info, self.abi.timing, Record::Wall, timing)?,
            )
        };
        // Whatever the adapter decoded, the wall it hands out names this
        // run and this slot.
        if wall.run_id != info.run.get() || wall.slot as usize != slot {
            return Err(ErrorKind::RecordMismatch {
                record: Record::Wall,
                expected: info.run.get(),
                found: wall.run_id,
            });
        }
        if failed != 0 {
            self.lock().stats.run_failures += 1;
            return Err(ErrorKind::RunFailed { code: failed });
        }
        Ok(wall)
    }
}

/// What a record that is not this run's result is, as the contract says it
/// (out of line: the common path moves no error).
#[cold]
#[inline(never)]
fn record_error(record: Record, err: RecordError) -> ErrorKind {
    match err {
        RecordError::Mismatch { expected, found } => ErrorKind::RecordMismatch {
            record,
            expected,
            found,
        },
        RecordError::Missing => ErrorKind::RecordMissing(record),
        RecordError::Malformed { what } => ErrorKind::RecordMalformed { record, what },
    }
}

/// Records and armed regions up to this size go through the stack.
const SMALL_RECORD: usize = 128;
