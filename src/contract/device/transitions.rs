//! The per-slot transitions behind [`Port`]: a launch — admitted, its
//! streams readied, its tensors resolved (`arguments.rs`), its blocks
//! built, its kernels and fence submitted, the run joined to the queue,
//! each step named and graded by what reached the device — and a token's
//! release; prepare and finalize are `arguments.rs`'s, the waits
//! `look.rs`'s.

use std::task::{Poll, Waker};

use super::Device;
use super::look::Fencing;
use super::state::{Release, State};
use crate::contract::code::CodeRef;
use crate::contract::error::{ErrorKind, PoisonCause, RunId};
use crate::contract::inflight::Proof;
use crate::contract::port::{How, LaunchFail, Port, RunInfo, Submitted};
use crate::contract::wait::{FenceWait, Wait};
use crate::contract::workload::Args;
use crate::driver::abi::{AbiError, LaunchArgs, WallRecord};
use crate::driver::{Driver, DriverError};

use LaunchFail::{Lost, NotSubmitted};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// The launch itself, under the state lock (see `Port::launch`): every
    /// step before the AICore kernel is queued fails with the run still
    /// prepared; every one after it leaves work on the device.
    fn launch_locked(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        args: &Args<'_, '_>,
        how: How,
    ) -> Result<Submitted, LaunchFail> {
        Self::admit(st, slot, lease)?;
        if how == How::Capture {
            // Refused before any runtime call where it cannot be.
            self.capturable().map_err(NotSubmitted)?;
        }
        self.ready_streams(st).map_err(NotSubmitted)?;
        // The slot is held: its host buffers are this run's.
        let mut host = self.block(slot);
        let len = self
            .resolve(st, slot, info, args, &mut host)
            .map_err(NotSubmitted)?;
        self.build_blocks(&mut host, slot, info.run)
            .map_err(NotSubmitted)?;
        if how != How::Launch {
            let capture = self.submit_graph(st, slot, info, &host, how)?;
            // The graph is on the stream, whole (one call): the buffers it
            // binds are marked as a launch's are.
            Self::mark(args, slot, info.run, st.queue.next_seq());
            drop(host);
            st.stats.replays += 1;
            return Self::join_queue(st, slot, lease, info, len)
                .map(|s| Submitted { capture, ..s });
        }
        let (core, cpu) = host.args();
        if !host.shared {
            self.check_aicpu_block(st, slot, info.run, cpu)?;
        }
        self.after_replay(st, slot, info)?;
        self.submit_aicore(st, slot, info, core)?;
        if st.graphs.unsynced {
            st.graphs.queued(None);
            st.graphs.unsynced = false;
        }
        // The AICore kernel is on the stream: from here on the run is on
        // the device whatever happens, and the buffers it binds are marked
        // with the sequence number it joins the queue with (lost or not).
        Self::mark(args, slot, info.run, st.queue.next_seq());
        self.submit_rest(st, slot, info.run, cpu)?;
        drop(host);
        Self::join_queue(st, slot, lease, info, len)
    }

    /// A launch behind a replay: the replay's AICore kernel ran on the
    /// graph's own stream, which the AICore stream does not follow, so the
    /// AICore stream waits for the replay's fence first (one call, only
    /// after a replay).
    fn after_replay(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        info: &RunInfo,
    ) -> Result<(), LaunchFail> {
        let Some(fence) = st.graphs.after_replay() else {
            return Ok(());
        };
        let aicore = st.streams.aicore();
        if let Err(e) = self.driver.stream_wait_event(aicore, fence) {
            return Err(NotSubmitted(self.driver_error(st, e, info.run, slot, None)));
        }
        // Queued, and tracked by no run until the AICore kernel behind it
        // is (`submit_aicore`'s success clears it).
        st.graphs.unsynced = true;
        Ok(())
    }

    /// Whether the slot may launch now: held by this lease, the runner not
    /// poisoned, room in the queue.
    fn admit(st: &State<DEPTH>, slot: usize, lease: u64) -> Result<(), LaunchFail> {
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
        Ok(())
    }

    /// A second block is checked whole before the first kernel is queued:
    /// refused now, the run comes back unlaunched.
    fn check_aicpu_block(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        run: RunId,
        cpu: LaunchArgs<'_>,
    ) -> Result<(), LaunchFail> {
        if cpu.consistent().is_err() {
            return Err(NotSubmitted(ErrorKind::Adapter(Box::new(
                AbiError::Unsupported {
                    what: "an address the AICPU block recorded is no longer in it",
                },
            ))));
        }
        self.driver
            .check_aicpu_args(cpu)
            .map_err(|e| NotSubmitted(self.driver_error(st, e, run, slot, None)))
    }

    /// Queues the AICore kernel. Refused, nothing was submitted; a fault an
    /// earlier run's own events report is that run's (the AICore stream
    /// stopped at it).
    fn submit_aicore(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        info: &RunInfo,
        core: LaunchArgs<'_>,
    ) -> Result<(), LaunchFail> {
        let aicore = st.streams.aicore();
        let Err(e) = self
            .driver
            .launch_aicore(aicore, info.code, self.config.block_dim, core)
        else {
            return Ok(());
        };
        let kind = match self.fault_ahead(st, e) {
            Ok((c, kind)) => {
                st.queue
                    .poison_with(PoisonCause::DeviceFault, c.run, c.slot);
                kind
            }
            Err(e) => self.driver_error(st, e, info.run, slot, None),
        };
        Err(NotSubmitted(kind))
    }

    /// Queues the AICPU kernel and the run's fence (an event on the AICore
    /// stream the AICPU stream waits for, then the fence event), and the
    /// completion notification behind it.
    fn submit_rest(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        run: RunId,
        cpu: LaunchArgs<'_>,
    ) -> Result<(), LaunchFail> {
        let (aicore, aicpu) = (st.streams.aicore(), st.streams.aicpu());
        let (r, d) = (&self.regions[slot], &self.driver);
        let failed = if let Err(e) = d.launch_aicpu(aicpu, cpu) {
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
            return Err(Lost(self.lost_launch(st, slot, run, cause, e)));
        }
        // The run is whole on the streams. Its completion notification
        // (a host callback behind the fence, where the driver uses one) is
        // a hint for awaiting futures only: a driver that could not queue
        // it wakes them on time instead, so a failure here changes nothing.
        if self.config.completion_callbacks {
            let _ = d.queue_notify(aicpu, r.ev_fence);
        }
        Ok(())
    }

    /// Work reached the device that no fence can observe: it stays in the
    /// set, unproven, until a drain proves the queue quiet. A device fault
    /// an earlier run's own events report is that run's: the poison names
    /// it, and this run met it.
    #[cold]
    fn lost_launch(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        run: RunId,
        cause: PoisonCause,
        e: DriverError,
    ) -> ErrorKind {
        match self.fault_ahead(st, e) {
            Ok((c, kind)) => {
                st.lost(run, slot, PoisonCause::DeviceFault, (c.run, c.slot));
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
                st.lost(run, slot, cause, (run, slot));
                if cause == PoisonCause::PartialLaunch {
                    ErrorKind::PartialLaunch(Box::new(e))
                } else {
                    ErrorKind::FenceNotRecorded(Box::new(e))
                }
            }
        }
    }

    /// The run joins the in-flight queue, and the chain moves to what it
    /// produced: its arena output, or nothing to chain on.
    fn join_queue(
        st: &mut State<DEPTH>,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        len: usize,
    ) -> Result<Submitted, LaunchFail> {
        st.stats.launched += 1;
        match st.queue.admit(info.run, slot, Proof::Pending) {
            Ok(seq) => {
                st.slots.launched(slot, lease);
                if info.chainable {
                    st.queue.chain_on(slot, len);
                } else {
                    st.queue.break_chain();
                }
                Ok(Submitted {
                    seq,
                    len,
                    capture: 0,
                })
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

    /// A launched run's token is dropped: wait (bounded, as a fence does)
    /// for its own fence, then free its slot, or quarantine it.
    fn release_in_flight(
        &self,
        mut st: std::sync::MutexGuard<'_, State<DEPTH>>,
        slot: usize,
        lease: u64,
    ) {
        let Some(entry) = st.queue.runs().iter().find(|e| e.slot == slot).copied() else {
            // In flight with no run in the set: an invariant broke.
            // The safe outcome keeps the slot out of service.
            debug_assert!(false, "slot {slot} in flight with no run in the queue");
            st.quarantine(slot);
            return;
        };
        drop(st);
        let outcome = (entry.proof == Proof::Pending).then(|| {
            let f = Fencing {
                slot,
                lease,
                run: entry.run,
                seq: entry.seq,
            };
            // This runs in `Drop`, maybe while a panic unwinds: a
            // panicking driver must not abort the process. A caught
            // panic leaves completion unproven.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.wait_fence(f, Wait::Configured, None)
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

impl<D: Driver, const DEPTH: usize> Port for Device<D, DEPTH> {
    fn device_id(&self) -> u64 {
        self.id
    }

    fn release(&self, slot: usize, lease: u64) {
        let mut st = self.lock();
        match st.slots.release(slot, lease) {
            Release::Freed | Release::Stale => {}
            Release::InFlight => self.release_in_flight(st, slot, lease),
        }
    }

    fn drop_capture(&self, id: u64) {
        self.let_go_capture(id);
    }

    fn abandon(&self, slot: usize, lease: u64) {
        self.lock().slots.abandon(slot, lease);
    }

    fn prepare(
        &self,
        slot: usize,
        lease: u64,
        code: CodeRef<'_>,
        args: Args<'_, '_>,
    ) -> Result<RunInfo, ErrorKind> {
        self.prepare_args(slot, lease, code, args)
    }

    fn launch(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        args: Args<'_, '_>,
        how: How,
    ) -> Result<Submitted, LaunchFail> {
        // The lock is held across submission: sequence order is stream order
        // even when several threads launch.
        let mut st = self.lock();
        if st.graphs.has_doomed() {
            self.destroy_doomed(&mut st);
        }
        if let Err(k) = self.end_open_capture(&mut st) {
            return Err(LaunchFail::NotSubmitted(k));
        }
        st.launching(Some((info.run, slot)));
        let r = self.launch_locked(&mut st, slot, lease, info, &args, how);
        st.launching(None);
        r
    }

    fn wait(&self, slot: usize, lease: u64, info: &RunInfo, how: Wait) -> Result<(), ErrorKind> {
        self.wait_fence(fencing(slot, lease, info), how, None)
    }

    fn poll_wait(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        wait: &mut FenceWait,
        waker: &Waker,
    ) -> Poll<Result<(), ErrorKind>> {
        self.poll_fence(fencing(slot, lease, info), wait, waker)
    }

    fn finalize(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        args: Args<'_, '_>,
    ) -> Result<WallRecord, ErrorKind> {
        self.finalize_args(slot, lease, info, args)
    }
}

/// The run a port's wait is about.
fn fencing(slot: usize, lease: u64, info: &RunInfo) -> Fencing {
    Fencing {
        slot,
        lease,
        run: info.run,
        seq: info.seq,
    }
}
