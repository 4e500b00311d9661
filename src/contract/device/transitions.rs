//! The per-slot transitions behind [`Port`]: prepare (write the slot's
//! regions), launch (submit on the shared stream pair), wait, finalize
//! (read back and validate), and a token's release.

use super::state::{Release, State};

use super::Device;
use crate::contract::code::CodeRef;
use crate::contract::error::RunId;
use crate::contract::error::{ErrorKind, PoisonCause, Record};
use crate::contract::inflight::Proof;
use crate::contract::port::{LaunchFail, Port, RunInfo, Submitted, Wait};
use crate::contract::spec::Input;
use crate::contract::workload::Workload;
use crate::contract::workload::sealed::Sealed as Marks;
use crate::driver::abi::{self, RunArgs, StatusRecord, WallRecord, WorkArgs};
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
        #[allow(clippy::cast_possible_truncation, reason = "slot < DEPTH <= 16")]
        let slot_u32 = slot as u32;
        // A workload's block was built at prepare (the slot is held: its
        // block buffer is this run's); a RunSpec's is built here.
        let simple;
        let block;
        let args: &[u8] = if bound.is_workload() {
            block = self.block(slot);
            workload_block(&block)
        } else {
            simple = RunArgs {
                run_id: info.run.get(),
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
            &simple
        };
        // Stopgap until the device builds blocks through its adapter.
        let pack = match abi::ArgBlock::parse(args) {
            Some(abi::ArgBlock::Run(a)) => a.block(),
            Some(abi::ArgBlock::Work(w)) => {
                let t: Vec<_> = w.tensors().collect();
                let s: Vec<_> = w.scalars().collect();
                WorkArgs::block(w.header(), &t, &s).unwrap_or_default()
            }
            None => abi::BlockBuf::default(),
        };
        let args = pack.args();
        let (aicore, aicpu) = (st.streams.aicore(), st.streams.aicpu());
        let d = &self.driver;
        if let Err(e) = d.launch_aicore(aicore, info.code, self.config.block_dim, args) {
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
        let failed = if let Err(e) = d.launch_aicpu(aicpu, args) {
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

/// The workload block prepare built at the front of a slot's block
/// buffer, by the counts in its header (the launch validates nothing here:
/// the driver checks every block it is given).
fn workload_block(buf: &[u8]) -> &[u8] {
    let count = |at: usize| {
        buf.get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, |b| u32::from_le_bytes(b) as usize)
    };
    let size = WorkArgs::size(count(RunArgs::SIZE), count(RunArgs::SIZE + 4));
    &buf[..size.min(buf.len())]
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
        self.arm_records(slot, run).map_err(e)?;
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
    /// Clears the slot's handshake region and device wall and arms its
    /// status record for `run` (the slot is held: nothing in flight on it).
    pub(super) fn arm_records(&self, slot: usize, run: RunId) -> Result<(), DriverError> {
        let r = &self.regions[slot];
        let d = &self.driver;
        d.memset(r.handshake, 0, abi::handshake_bytes(self.config.block_dim))?;
        d.memset(r.wall, 0, WallRecord::SIZE)?;
        let armed = StatusRecord {
            run_id: run.get(),
            state: StatusRecord::ARMED,
            code: 0,
        };
        d.copy_to_device(r.status, &armed.to_bytes())
    }

    /// Reads the slot's status record and device wall back and checks that
    /// both are this run's and the run succeeded; returns the wall.
    pub(super) fn check_records(
        &self,
        slot: usize,
        info: &RunInfo,
    ) -> Result<WallRecord, ErrorKind> {
        let r = &self.regions[slot];
        let e = |err: DriverError| {
            self.driver_error(&mut self.lock(), err, info.run, slot, Some(info.seq))
        };
        let mut raw = [0u8; StatusRecord::SIZE];
        self.driver
            .copy_from_device(&mut raw, r.status)
            .map_err(e)?;
        let status = StatusRecord::from_bytes(&raw)
            .ok_or_else(|| ErrorKind::broken("a status record of its own size did not decode"))?;
        if status.run_id != info.run.get() {
            return Err(ErrorKind::RecordMismatch {
                record: Record::Status,
                expected: info.run.get(),
                found: status.run_id,
            });
        }
        if status.state != StatusRecord::DONE {
            return Err(ErrorKind::RecordMissing(Record::Status));
        }
        let mut raw = [0u8; WallRecord::SIZE];
        self.driver.copy_from_device(&mut raw, r.wall).map_err(e)?;
        let wall = WallRecord::from_bytes(&raw)
            .ok_or_else(|| ErrorKind::broken("a wall record of its own size did not decode"))?;
        if wall.run_id != info.run.get() || wall.slot as usize != slot {
            return Err(ErrorKind::RecordMismatch {
                record: Record::Wall,
                expected: info.run.get(),
                found: wall.run_id,
            });
        }
        if status.code != 0 {
            self.lock().stats.run_failures += 1;
            return Err(ErrorKind::RunFailed { code: status.code });
        }
        Ok(wall)
    }
}
