//! The per-slot transitions behind [`Port`]: prepare (write the slot's
//! regions), launch (submit on the shared stream pair), wait, finalize
//! (read back and validate), and a token's release.

use super::state::{Release, State};

use std::task::{Poll, Waker};

use super::Device;
use super::SlotHost;
use super::awaiting::AsyncWait;
use crate::contract::code::CodeRef;
use crate::contract::error::RunId;
use crate::contract::error::{ErrorKind, PoisonCause, Record};
use crate::contract::inflight::Proof;
use crate::contract::port::{LaunchFail, Port, RunInfo, Submitted, Wait};
use crate::contract::spec::Input;
use crate::contract::workload::Workload;
use crate::contract::workload::sealed::Sealed as Marks;
use crate::driver::abi::{
    AbiError, AicpuBlock, Builtin, DevSpan, Dir, KernelAbi, Prep, RecordAt, RecordError, RunArgs,
    RunIdentity, RunView, RunclaimAbi, SimpleIo, TensorView, V1Block, Verdict, WallRecord,
};
use crate::driver::{CodeHandle, Driver, DriverError};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// The launch itself, under the state lock (see `Port::launch`).
    #[allow(
        clippy::too_many_lines,
        reason = "one submission under one lock: what reached the device, and how each failure is graded, reads top to bottom"
    )]
    pub(super) fn launch_locked(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        bound: &dyn Marks,
    ) -> Result<Submitted, LaunchFail> {
        use LaunchFail::{Lost, NotSubmitted};
        st.slots.check_held(slot, lease).map_err(NotSubmitted)?;
        if let Some(p) = st.queue.poison() {
            return Err(NotSubmitted(ErrorKind::Poisoned(p)));
        }
        if st.queue.runs().is_full() {
            // The slot being launched is held, not in flight: at most
            // DEPTH - 1 runs can be.
            return Err(NotSubmitted(ErrorKind::broken(
                "a launch found DEPTH runs in flight while holding a slot",
            )));
        }
        self.ready_streams(st).map_err(NotSubmitted)?;
        let r = &self.regions[slot];
        let (input, len) = if info.chained {
            let c = st
                .queue
                .chain()
                .ok_or(NotSubmitted(ErrorKind::NoChainValue))?;
            (self.regions[c.slot].output, c.len)
        } else {
            (r.input, info.len)
        };
        // The blocks are built here, where the chained input is known, into
        // the slot's host buffers (the slot is held: they are this run's) —
        // or, for a `RunSpec` run under runclaim's own layout, its 72-byte
        // block on the stack (the same encoding: `RunclaimAbi`'s).
        let simple = (!bound.is_workload()).then(|| SimpleIo {
            input: DevSpan::new(input, len as u64 * 4),
            output: DevSpan::new(r.output, len as u64 * 4),
            len: len as u64,
        });
        let v1;
        let mut host;
        let (aicore_args, aicpu_args, shared) = match simple {
            Some(io) if self.abi.get.builtin() == Builtin::Runclaim => {
                v1 = V1Block::new(&self.v1_args(slot, info.run, io));
                (v1.args(), v1.args(), true)
            }
            _ => {
                host = self.block(slot);
                self.build_blocks(&mut host, slot, info.run, simple)
                    .map_err(NotSubmitted)?;
                let core = host.aicore.args();
                let cpu = if host.shared { core } else { host.aicpu.args() };
                (core, cpu, host.shared)
            }
        };
        let (aicore, aicpu) = (st.streams.aicore(), st.streams.aicpu());
        let d = &self.driver;
        if !shared {
            // A second block is checked whole before the first kernel is
            // queued: refused now, the run comes back unlaunched.
            if !aicpu_args.consistent() {
                return Err(NotSubmitted(ErrorKind::Adapter(Box::new(
                    AbiError::Unsupported {
                        what: "an address the AICPU block recorded is no longer in it",
                    },
                ))));
            }
            if let Err(e) = d.check_aicpu_args(aicpu_args) {
                return Err(NotSubmitted(self.driver_error(st, e, info.run, slot, None)));
            }
        }
        if let Err(e) = d.launch_aicore(aicore, info.code, self.config.block_dim, aicore_args) {
            // Nothing was submitted. A fault an earlier run's own events
            // report is that run's (the AICore stream stopped at it).
            let kind = match self.fault_ahead(st, e) {
                Ok((c, kind)) => {
                    st.queue
                        .poison_with(PoisonCause::DeviceFault, c.run, c.slot);
                    kind
                }
                Err(e) => self.driver_error(st, e, info.run, slot, None),
            };
            return Err(NotSubmitted(kind));
        }
        // The AICore kernel is on the stream: from here on the run is on
        // the device whatever happens, and the buffers it binds are marked
        // with the sequence number it joins the queue with (lost or not).
        bound.mark(info.run, slot, st.queue.next_seq());
        let failed = if let Err(e) = d.launch_aicpu(aicpu, aicpu_args) {
            Some((PoisonCause::PartialLaunch, e))
        } else if let Err(e) = d
            .record_event(r.ev_aicore, aicore)
            .and_then(|()| d.stream_wait_event(aicpu, r.ev_aicore))
            .and_then(|()| d.record_event(r.ev_fence, aicpu))
        {
            Some((PoisonCause::FenceNotRecorded, e))
        } else {
            None
        };
        if let Some((cause, e)) = failed {
            // Work reached the device that no fence can observe: it stays
            // in the set, unproven, until a drain proves the queue quiet.
            // A device fault an earlier run's own events report is that
            // run's: the poison names it, and this run met it.
            let kind = match self.fault_ahead(st, e) {
                Ok((c, kind)) => {
                    st.lost(info.run, slot, PoisonCause::DeviceFault, (c.run, c.slot));
                    kind
                }
                Err(e) => {
                    // No earlier run reports it. A device fault met after this
                    // run's AICPU kernel was queued (recording its fence) is
                    // this run's own kernel faulting: poisoned as the fault it
                    // is. Otherwise the launch failed on its own.
                    let cause = if cause == PoisonCause::FenceNotRecorded && e.is_device_fault() {
                        PoisonCause::DeviceFault
                    } else {
                        cause
                    };
                    st.lost(info.run, slot, cause, (info.run, slot));
                    if cause == PoisonCause::PartialLaunch {
                        ErrorKind::PartialLaunch(Box::new(e))
                    } else {
                        ErrorKind::FenceNotRecorded(Box::new(e))
                    }
                }
            };
            return Err(Lost(kind));
        }
        // The run is whole on the streams. Its completion notification
        // (a host callback behind the fence, where the driver uses one) is
        // a hint for awaiting futures only: a driver that could not queue
        // it wakes them on time instead, so a failure here changes nothing.
        let _ = d.queue_notify(aicpu, r.ev_fence);
        st.stats.launched += 1;
        match st.queue.admit(info.run, slot, Proof::Pending) {
            Ok(seq) => {
                st.slots.launched(slot, lease);
                if bound.is_workload() {
                    // A workload leaves no `u32` output to chain on.
                    st.queue.break_chain();
                } else {
                    st.queue.chain_on(slot, len);
                }
                Ok(Submitted { seq, len })
            }
            Err(kind) => {
                // Unreachable (the set had room, the sequence is fresh): the
                // run is on the device but untracked, so its slot may never
                // be reused before a drain.
                st.quarantine(slot);
                st.queue.poison_with(PoisonCause::Unproven, info.run, slot);
                Err(Lost(kind))
            }
        }
    }
}

impl<D: Driver, const DEPTH: usize> Port for Device<D, DEPTH> {
    fn device_id(&self) -> u64 {
        self.id
    }

    fn release(&self, slot: usize, lease: u64) {
        let mut st = self.lock();
        match st.slots.release(slot, lease) {
            Release::Freed | Release::Stale => {}
            Release::InFlight => {
                // A launched run is being dropped: wait for its own fence.
                let Some(entry) = st.queue.runs().iter().find(|e| e.slot == slot).copied() else {
                    // In flight with no run in the set: an invariant broke.
                    // The safe outcome keeps the slot out of service.
                    debug_assert!(false, "slot {slot} in flight with no run in the queue");
                    st.quarantine(slot);
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
                    st.slots.free(slot, lease);
                } else {
                    // Any failure — even a driver error that is neither fault
                    // nor timeout — leaves completion unproven.
                    st.queue.unprove(entry.seq, PoisonCause::Unproven);
                    st.quarantine(slot);
                }
            }
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
            st.slots.check_held(slot, lease)?;
            st.new_run()
        };
        // The slot is ours alone (held lease, nothing in flight on it), so its
        // regions may be written synchronously.
        let r = &self.regions[slot];
        let d = &self.driver;
        let e = |err: DriverError| self.unlaunched_error(&mut self.lock(), err);
        if let Input::Host(data) = input {
            let mut staging = self.staging(slot);
            let bytes = &mut staging[..data.len() * 4];
            for (c, v) in bytes.chunks_exact_mut(4).zip(data) {
                c.copy_from_slice(&v.to_le_bytes());
            }
            d.copy_to_device(r.input, bytes).map_err(e)?;
        }
        self.arm_records(slot, run)?;
        Ok(RunInfo {
            run,
            seq: 0,
            len,
            code: code.handle,
            chained: matches!(input, Input::Previous),
        })
    }

    fn prepare_work(
        &self,
        slot: usize,
        lease: u64,
        work: &mut Workload<'_>,
    ) -> Result<RunInfo, ErrorKind> {
        self.prepare_workload(slot, lease, work)
    }

    fn launch(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        bound: &dyn Marks,
    ) -> Result<Submitted, LaunchFail> {
        // The lock is held across submission: sequence order is stream order
        // even when several threads launch.
        let mut st = self.lock();
        st.launching(Some((info.run, slot)));
        let r = self.launch_locked(&mut st, slot, lease, info, bound);
        st.launching(None);
        r
    }

    fn wait(&self, slot: usize, lease: u64, info: &RunInfo, how: Wait) -> Result<(), ErrorKind> {
        match how {
            Wait::Poll => self.poll(slot, lease, info),
            Wait::For(t) => self.wait_queued(slot, lease, info, Some(t)),
            Wait::Configured => self.wait_queued(slot, lease, info, None),
        }
    }

    fn poll_wait(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        wait: &mut AsyncWait,
        waker: &Waker,
    ) -> Poll<Result<(), ErrorKind>> {
        self.poll_queued(slot, lease, info, wait, waker)
    }

    fn finalize_work(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        work: &mut Workload<'_>,
    ) -> Result<WallRecord, ErrorKind> {
        self.finalize_workload(slot, lease, info, work)
    }

    fn finalize(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        out: &mut [u32],
    ) -> Result<WallRecord, ErrorKind> {
        self.lock().slots.check_held(slot, lease)?;
        if out.len() < info.len {
            return Err(ErrorKind::OutputsTooSmall {
                len: info.len,
                capacity: out.len(),
            });
        }
        let wall = self.check_records(slot, info)?;
        let r = &self.regions[slot];
        let e = |err: DriverError| {
            self.driver_error(&mut self.lock(), err, info.run, slot, Some(info.seq))
        };
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

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// Who `run` in `slot` is, as its blocks and records say.
    fn identity(&self, slot: usize, run: RunId) -> RunIdentity {
        #[allow(clippy::cast_possible_truncation, reason = "slot < DEPTH <= 16")]
        RunIdentity {
            run_id: run.get(),
            epoch: run.get(),
            slot: slot as u32,
            block_dim: self.config.block_dim,
        }
    }

    /// A `RunSpec` run's version-1 block under runclaim's own layout, as
    /// `RunclaimAbi::aicore_block` writes it.
    fn v1_args(&self, slot: usize, run: RunId, io: SimpleIo) -> RunArgs {
        let id = self.identity(slot, run);
        let region = |i: usize| self.regions[slot].abi[i].ptr().raw();
        RunArgs {
            run_id: id.run_id,
            slot: id.slot,
            block_dim: id.block_dim,
            len: io.len,
            input: io.input.ptr().raw(),
            output: io.output.ptr().raw(),
            handshake: region(RunclaimAbi::HANDSHAKE),
            wall: region(RunclaimAbi::WALL),
            status: region(RunclaimAbi::STATUS),
        }
    }

    /// Builds the run's two argument blocks through the adapter. `simple`:
    /// a `RunSpec` run's input and output (shown to the adapter as two
    /// tensors too); otherwise the workload's tensors and scalars prepare
    /// resolved into `host`.
    fn build_blocks(
        &self,
        host: &mut SlotHost,
        slot: usize,
        run: RunId,
        simple: Option<SimpleIo>,
    ) -> Result<(), ErrorKind> {
        let regions = &self.regions[slot].abi[..self.abi.regions.len()];
        let io;
        let SlotHost {
            aicore,
            aicpu,
            tensors,
            scalars,
            shared,
            ..
        } = host;
        let (tensors, scalars): (&[TensorView], &[u64]) = match simple {
            Some(s) => {
                let view = |span, dir| TensorView {
                    span,
                    elem_size: 4,
                    dir,
                    staged: true,
                };
                io = [view(s.input, Dir::In), view(s.output, Dir::Out)];
                (&io, &[])
            }
            None => (tensors, scalars),
        };
        let view = RunView::new(self.identity(slot, run), regions, tensors, scalars, simple);
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
    /// writes what it arms, leaves what the device stamps.
    pub(super) fn arm_records(&self, slot: usize, run: RunId) -> Result<(), ErrorKind> {
        let r = &self.regions[slot];
        let d = &self.driver;
        let id = self.identity(slot, run);
        let e = |err: DriverError| self.unlaunched_error(&mut self.lock(), err);
        for (i, spec) in self.abi.regions.iter().enumerate() {
            let span = r.abi[i];
            match spec.prep {
                Prep::Stamped => {}
                Prep::Zeroed => d.memset(span.ptr(), 0, spec.bytes).map_err(e)?,
                Prep::Armed => {
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
                    // Not armed: the run could not prove its record, so it
                    // must not run.
                    let armed = match self.abi.get.builtin() {
                        Builtin::Runclaim => RunclaimAbi.arm(i, &id, bytes),
                        Builtin::User => {
                            let abi = self.abi.get.get();
                            adapter_call(self.id, || abi.arm(i, &id, bytes)).and_then(|r| r)
                        }
                    };
                    armed.map_err(|err| ErrorKind::Adapter(Box::new(err)))?;
                    d.copy_to_device(span.ptr(), bytes).map_err(e)?;
                }
            }
        }
        Ok(())
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

    /// Reads the slot's status and timing records back and checks that
    /// both are this run's and the run succeeded; returns the wall.
    pub(super) fn check_records(
        &self,
        slot: usize,
        info: &RunInfo,
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
        let failed = self.read_record(slot, info, self.abi.status, Record::Status, status)?;
        let wall = self.read_record(slot, info, self.abi.timing, Record::Wall, |b| {
            match self.abi.get.builtin() {
                Builtin::Runclaim => RunclaimAbi.decode_timing(&id, b),
                Builtin::User => {
                    adapter_call(self.id, || user.decode_timing(&id, b)).unwrap_or(Err(panicked))
                }
            }
        })?;
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

/// Calls into the adapter: a panic there (the adapter's bug) fails this
/// run — nothing submitted, or the record refused — instead of unwinding
/// through the device's bookkeeping.
///
/// While a device's user adapter runs, its thread is marked with the
/// device: a call back into that device from inside it (its state lock
/// may be held) panics there — caught here, failing the run — instead of
/// deadlocking. `device` 0: no device yet (at open).
pub(super) fn adapter_call<T>(device: u64, f: impl FnOnce() -> T) -> Result<T, AbiError> {
    let outer = IN_ADAPTER.with(|a| a.replace(device));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    IN_ADAPTER.with(|a| a.set(outer));
    r.map_err(|_| AbiError::Unsupported {
        what: "the kernel ABI adapter panicked (or called its device)",
    })
}

thread_local! {
    /// The device whose user adapter runs on this thread (0: none; see
    /// `adapter_call`). `Copy` data, no destructor: always accessible.
    static IN_ADAPTER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// `true` while device `device`'s user adapter runs on this thread.
pub(super) fn in_adapter_of(device: u64) -> bool {
    IN_ADAPTER.with(std::cell::Cell::get) == device
}
