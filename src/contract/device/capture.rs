//! A captured run's device side: the capture (the run's whole task
//! sequence recorded once into a graph, then replayed as the run's launch),
//! a replay (checked against its capture before any runtime call, the
//! run's block written into the slot's capture region, one graph launch),
//! and the graphs' destruction once no replay of them runs.
//!
//! A captured kernel's block is frozen (the runtime copies both at
//! capture), so a captured run is captured with the adapter's *replayable*
//! blocks ([`KernelAbi::replay_block`]), which name the slot's capture
//! region; before the capture and before every replay the host writes the
//! run's ordinary block there — a synchronous copy while the slot is held,
//! so it cannot land late. A replay whose write was skipped runs with the
//! last run's block: its records carry that run's id, and finalize refuses
//! them (`RecordMismatch`).
//!
//! The capture, on the AICPU stream (its origin): a record of the fork
//! event the AICore stream waits for (it joins), the AICore kernel, the
//! AICPU kernel, `ev_aicore` on the AICore stream waited for by the AICPU
//! stream (it is joined back), a device copy of the records to right
//! before the slot's arena output ([`Device::mirror`], where the arena
//! has room), the fence. Finalize reads a replay's records and output back
//! with one copy from there. No completion callback is captured: an
//! awaited replay looks at its fence on time.

use super::Device;
use super::SlotHost;
use super::abi::adapter_call;
use super::state::{Captured, Shape, SlotCapture, State};
use crate::contract::error::{ErrorKind, ReplayRefusal, TensorDiff};
use crate::contract::port::{How, LaunchFail, RunInfo};
use crate::driver::abi::{
    BlockBuf, BlockKind, Builtin, DevSpan, Home, KernelAbi, LaunchArgs, RunclaimAbi, TensorView,
};
use crate::driver::{Capabilities, DevPtr, Driver, DriverError, DriverErrorKind, EventId, GraphId};

use LaunchFail::NotSubmitted;

fn refused(r: ReplayRefusal) -> ErrorKind {
    ErrorKind::Replay(Box::new(r))
}

/// How `now` differs from what was captured, if it does.
fn differs(
    captured: &Shape,
    code: crate::driver::CodeHandle,
    host: &SlotHost,
) -> Option<ReplayRefusal> {
    if captured.code != code {
        return Some(ReplayRefusal::Code);
    }
    if captured.shared != host.shared {
        return Some(ReplayRefusal::Blocks);
    }
    let (was, now) = (&captured.tensors, &host.tensors);
    if was.len() != now.len() {
        return Some(ReplayRefusal::TensorCount {
            captured: was.len(),
            now: now.len(),
        });
    }
    if captured.scalars != host.scalars.len() {
        return Some(ReplayRefusal::ScalarCount {
            captured: captured.scalars,
            now: host.scalars.len(),
        });
    }
    was.iter()
        .zip(now)
        .position(|(a, b)| tensor_diff(a, b).is_some())
        .and_then(|index| {
            tensor_diff(&was[index], &now[index]).map(|diff| ReplayRefusal::Tensor { index, diff })
        })
}

fn tensor_diff(was: &TensorView, now: &TensorView) -> Option<TensorDiff> {
    if was.dir != now.dir {
        Some(TensorDiff::Direction)
    } else if was.elem_size != now.elem_size {
        Some(TensorDiff::ElementSize)
    } else if was.home != now.home {
        Some(TensorDiff::Home)
    } else if now.home == Home::Buffer && was.span.ptr() != now.span.ptr() {
        Some(TensorDiff::Binding)
    } else if now.span.len() > was.span.len() {
        Some(TensorDiff::Larger {
            captured: was.span.len(),
            now: now.span.len(),
        })
    } else {
        None
    }
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// Submits the resolved run in `slot` as a capture (its first replay
    /// included) or as a replay of capture `id`: the capture's id.
    pub(super) fn submit_graph(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        info: &RunInfo,
        host: &SlotHost,
        how: How,
    ) -> Result<u64, LaunchFail> {
        let (core, cpu) = host.args();
        let (id, graph) = match how {
            How::Replay { device, id } => {
                let graph = self
                    .replayable(st, slot, info, host, device, id)
                    .map_err(NotSubmitted)?;
                (id, graph)
            }
            _ => (0, None),
        };
        self.check_aicpu_block_of(st, slot, info, cpu)?;
        let (region, fork) = self.capture_region(st, slot).map_err(NotSubmitted)?;
        self.write_block(st, region, core, cpu, host.shared)
            .map_err(NotSubmitted)?;
        let (id, graph) = match graph {
            Some(g) => (id, g),
            None => self.capture(st, slot, info, host, (region, fork))?,
        };
        let aicpu = st.streams.aicpu();
        if let Err(e) = self.driver.graph_launch(graph, aicpu) {
            return Err(NotSubmitted(self.refused_submission(st, slot, info, e)));
        }
        st.graphs.queued(Some(self.regions[slot].ev_fence));
        Ok(id)
    }

    /// The AICPU kernel's block is checked whole by the driver (as a
    /// launch's is) before its bytes reach the capture region.
    fn check_aicpu_block_of(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        info: &RunInfo,
        cpu: LaunchArgs<'_>,
    ) -> Result<(), LaunchFail> {
        self.driver
            .check_aicpu_args(cpu)
            .map_err(|e| NotSubmitted(self.driver_error(st, e, info.run, slot, None)))
    }

    /// The graph capture `id` replays, when this run may replay it: the
    /// driver captures, the capture is this slot's and device's, fresh,
    /// and the run's shape is the captured one.
    fn replayable(
        &self,
        st: &State<DEPTH>,
        slot: usize,
        info: &RunInfo,
        host: &SlotHost,
        device: u64,
        id: u64,
    ) -> Result<Option<GraphId>, ErrorKind> {
        if device != self.id {
            return Err(refused(ReplayRefusal::Foreign));
        }
        let c = st
            .graphs
            .get(id)
            .ok_or_else(|| refused(ReplayRefusal::Stale))?;
        if c.slot != slot {
            return Err(refused(ReplayRefusal::Foreign));
        }
        if c.epoch != self.driver.code_epoch() || c.streams != st.graphs.streams {
            return Err(refused(ReplayRefusal::Stale));
        }
        if let Some(r) = differs(&c.shape, info.code, host) {
            return Err(refused(r));
        }
        Ok(Some(c.graph))
    }

    /// The slot's capture region and fork event, made at its first
    /// capture: room for the AICore block and, apart, the AICPU block.
    /// What is made is kept at once (released at teardown), so a failure
    /// part-way leaves nothing unreleased.
    fn capture_region(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
    ) -> Result<(DevPtr, EventId), ErrorKind> {
        let mut at = if let Some(at) = st.graphs.region(slot) {
            at
        } else {
            let region = self
                .driver
                .alloc(2 * self.abi.max_block)
                .map_err(|e| self.unlaunched_error(st, e))?;
            let at = SlotCapture { region, fork: None };
            st.graphs.set_region(slot, at);
            at
        };
        let fork = if let Some(fork) = at.fork {
            fork
        } else {
            let fork = self
                .driver
                .create_event()
                .map_err(|e| self.unlaunched_error(st, e))?;
            at.fork = Some(fork);
            st.graphs.set_region(slot, at);
            fork
        };
        Ok((at.region, fork))
    }

    /// The run's ordinary blocks, into the slot's capture region (the
    /// slot is held: no replay of it reads the region now).
    fn write_block(
        &self,
        st: &mut State<DEPTH>,
        region: DevPtr,
        core: LaunchArgs<'_>,
        cpu: LaunchArgs<'_>,
        shared: bool,
    ) -> Result<(), ErrorKind> {
        #[cfg(test)]
        if skip::SKIP_WRITE.with(std::cell::Cell::get) {
            return Ok(());
        }
        let mut r = self.driver.copy_to_device(region, core.bytes());
        if !shared && r.is_ok() {
            r = self
                .driver
                .copy_to_device(region.offset(self.abi.max_block), cpu.bytes());
        }
        r.map_err(|e| self.unlaunched_error(st, e))
    }

    /// Captures the run into a new graph; nothing reaches the device (a
    /// captured task does not run), so every failure comes back
    /// unsubmitted, the capture ended and what it made destroyed.
    fn capture(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        info: &RunInfo,
        host: &SlotHost,
        (region, fork): (DevPtr, EventId),
    ) -> Result<(u64, GraphId), LaunchFail> {
        let (core, cpu) = self.replay_blocks(host, region).map_err(NotSubmitted)?;
        let graph = match self.record_capture(st, slot, info, fork, &core, &cpu) {
            Ok(g) => g,
            Err((e, open)) => {
                if open {
                    st.graphs.open = Some(st.streams.aicpu());
                }
                return Err(NotSubmitted(self.unlaunched_error(st, e)));
            }
        };
        let shape = Shape {
            code: info.code,
            tensors: host.tensors.clone(),
            scalars: host.scalars.len(),
            shared: host.shared,
        };
        let id = st.graphs.insert(Captured {
            slot,
            graph,
            shape,
            epoch: self.driver.code_epoch(),
            streams: st.graphs.streams,
        });
        st.stats.captures += 1;
        Ok((id, graph))
    }

    /// Where a captured run's graph copies the slot's records once both
    /// kernels are done, `(to, from, bytes)`: right before the slot's arena
    /// output, in the tail of its arena input (which the run no longer
    /// reads), so that one read takes a replay's records and output back.
    /// `None` when the records are not one joint range, or the input is
    /// smaller than it.
    pub(super) fn mirror(&self, slot: usize) -> Option<(DevPtr, DevPtr, usize)> {
        let (offset, bytes) = self.abi.layout.joint?;
        let half = self.config.arena_half_bytes();
        let r = &self.regions[slot];
        (bytes <= half).then(|| {
            (
                r.input.offset(half - bytes),
                r.region_base.offset(offset),
                bytes,
            )
        })
    }

    /// Whether a run can be captured at all, asked before any runtime
    /// call: the driver captures, and the adapter has a replayable form
    /// (a block built once against no region, on the host alone).
    pub(super) fn capturable(&self) -> Result<(), ErrorKind> {
        if !self
            .driver
            .info()
            .capabilities
            .contains(Capabilities::CAPTURE)
        {
            return Err(refused(ReplayRefusal::DriverCannotCapture));
        }
        let mut probe = BlockBuf::with_capacity(self.abi.max_block, 4);
        let span = DevSpan::new(DevPtr::from_raw(0), 8);
        // Only the absence of the form refuses here: anything else the
        // probe meets is the real capture's to report.
        match self.replay_block(BlockKind::Aicore, span, &mut probe) {
            Err(k @ ErrorKind::Replay(_)) => Err(k),
            _ => Ok(()),
        }
    }

    /// The adapter's replayable blocks, naming `region`: the AICore
    /// kernel's, and the AICPU kernel's (the AICore's again when it reads
    /// the same block).
    fn replay_blocks(
        &self,
        host: &SlotHost,
        region: DevPtr,
    ) -> Result<(BlockBuf, BlockBuf), ErrorKind> {
        let (core, cpu) = host.args();
        let core_span = DevSpan::new(region, core.bytes().len() as u64);
        let cpu_span = if host.shared {
            core_span
        } else {
            DevSpan::new(region.offset(self.abi.max_block), cpu.bytes().len() as u64)
        };
        let max = self.abi.max_block;
        let mut bufs = (
            BlockBuf::with_capacity(max, 4),
            BlockBuf::with_capacity(max, 4),
        );
        self.replay_block(BlockKind::Aicore, core_span, &mut bufs.0)?;
        self.replay_block(BlockKind::Aicpu, cpu_span, &mut bufs.1)?;
        Ok(bufs)
    }

    /// One kernel's replayable block into `buf`, through the adapter —
    /// runclaim's own directly, a user's through the unwind guard — an
    /// adapter without the form refused as such.
    fn replay_block(
        &self,
        kind: BlockKind,
        span: DevSpan,
        buf: &mut BlockBuf,
    ) -> Result<(), ErrorKind> {
        let written = match self.abi.get.builtin() {
            Builtin::Runclaim => RunclaimAbi.replay_block(kind, span, &mut buf.writer()),
            Builtin::User => {
                let abi = self.abi.get.get();
                adapter_call(self.id, || abi.replay_block(kind, span, &mut buf.writer()))
                    .and_then(|r| r)
            }
        };
        match written {
            Ok(()) => Ok(()),
            Err(crate::driver::abi::AbiError::Unsupported { .. }) => {
                Err(refused(ReplayRefusal::AdapterCannotReplay))
            }
            Err(e) => Err(ErrorKind::Adapter(Box::new(e))),
        }
    }

    /// The capture itself (see the module docs); ended on every way out.
    fn record_capture(
        &self,
        st: &State<DEPTH>,
        slot: usize,
        info: &RunInfo,
        fork: EventId,
        core: &BlockBuf,
        cpu: &BlockBuf,
    ) -> Result<GraphId, (DriverError, bool)> {
        let (aicore, aicpu) = (st.streams.aicore(), st.streams.aicpu());
        let (d, r) = (&self.driver, &self.regions[slot]);
        d.capture_begin(aicpu).map_err(|e| (e, false))?;
        let recorded = d
            .record_event(fork, aicpu)
            .and_then(|()| d.stream_wait_event(aicore, fork))
            .and_then(|()| d.launch_aicore(aicore, info.code, self.config.block_dim, core.args()))
            .and_then(|()| d.launch_aicpu(aicpu, cpu.args()))
            .and_then(|()| d.record_event(r.ev_aicore, aicore))
            .and_then(|()| d.stream_wait_event(aicpu, r.ev_aicore))
            .and_then(|()| match self.mirror(slot) {
                #[cfg(test)]
                Some(_) if skip::SKIP_MIRROR.with(std::cell::Cell::get) => Ok(()),
                Some((to, from, bytes)) => d.copy_async(aicpu, to, from, bytes),
                None => Ok(()),
            })
            .and_then(|()| d.record_event(r.ev_fence, aicpu));
        // A capture must end, or the streams stay capturing: a refused
        // end is asked once more (an end that did not reach the runtime);
        // refused again, the capture is left open, to be ended before the
        // next launch or drain (`end_open_capture`).
        let ended = d.capture_end(aicpu).or_else(|e| match e.kind() {
            DriverErrorKind::Capture { .. } => Err((e, false)),
            _ => d.capture_end(aicpu).map_err(|_| (e, true)),
        });
        // A task refused inside the capture is the error to report (the
        // end then refuses an unfinished capture too).
        match (recorded, ended) {
            (Ok(()), Ok(g)) => Ok(g),
            (Err(e), Ok(g)) => {
                let _ = d.graph_destroy(g);
                Err((e, false))
            }
            (Err(e), Err((_, open))) => Err((e, open)),
            (Ok(()), Err(failed)) => Err(failed),
        }
    }

    /// Ends a capture a refused end left open (its graph, if one comes,
    /// destroyed): `Err` while the driver still refuses, naming why.
    pub(super) fn end_open_capture(&self, st: &mut State<DEPTH>) -> Result<(), ErrorKind> {
        let Some(origin) = st.graphs.open else {
            return Ok(());
        };
        match self.driver.capture_end(origin) {
            Ok(g) => {
                let _ = self.driver.graph_destroy(g);
            }
            // Ended meanwhile (or the stream is gone): nothing is open.
            Err(e)
                if matches!(
                    e.kind(),
                    DriverErrorKind::Capture { .. } | DriverErrorKind::BadHandle { .. }
                ) => {}
            Err(e) => return Err(self.unlaunched_error(st, e)),
        }
        st.graphs.open = None;
        Ok(())
    }

    /// A graph launch the driver refused: nothing was queued (a fault an
    /// earlier run's events report is that run's, as for a launch).
    fn refused_submission(
        &self,
        st: &mut State<DEPTH>,
        slot: usize,
        info: &RunInfo,
        e: DriverError,
    ) -> ErrorKind {
        match self.fault_ahead(st, e) {
            Ok((c, kind)) => {
                st.queue.poison_with(
                    crate::contract::error::PoisonCause::DeviceFault,
                    c.run,
                    c.slot,
                );
                kind
            }
            Err(e) => self.driver_error(st, e, info.run, slot, None),
        }
    }
}

#[cfg(test)]
pub(crate) mod skip {
    std::thread_local! {
        /// A test's negative control: the next captures' and replays' block
        /// writes are skipped on this thread.
        pub(crate) static SKIP_WRITE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        /// Another: the next captures on this thread leave the records'
        /// copy out of their graph.
        pub(crate) static SKIP_MIRROR: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
}

#[cfg(test)]
mod tests {
    use super::skip::SKIP_WRITE;
    use crate::contract::{Callable, Device, DeviceConfig, ErrorKind, Input, Outputs, RunSpec};
    use crate::driver::abi::Program;
    use crate::sim::{SimConfig, SimDriver};

    /// The record check is what proves a replay ran with its own block:
    /// with the block write skipped (the negative control), the replay
    /// runs the last run's block, and its records, carrying that run's id,
    /// are refused; with the write, the same replay finalizes.
    #[test]
    fn a_replay_whose_block_write_was_skipped_is_caught_by_its_records() {
        let runclaim = (SimConfig::default(), DeviceConfig::default());
        let a2a3 = (
            SimConfig::default().device_model(crate::sim::A2a3Model),
            DeviceConfig::default().kernel_abi(crate::driver::abi::A2a3Abi),
        );
        for (sim, config) in [runclaim, a2a3] {
            skipped_write_is_caught(SimDriver::stepped(sim), config.max_elements(4));
        }
    }

    /// A replay's records are read from the copy its graph made next to
    /// its output: a graph without that copy (the negative control) is
    /// refused by its records at its first finalize — the bytes there are
    /// no record of this run — while the same capture with it finalizes.
    #[test]
    fn a_graph_without_the_records_copy_is_caught_by_its_records() {
        use super::skip::SKIP_MIRROR;
        for skip in [false, true] {
            let sim = SimDriver::stepped(SimConfig::default());
            let config = DeviceConfig::default().max_elements(64);
            let mut dev = Device::<_, 2>::open(sim, config).unwrap();
            let runner = dev
                .publish(&[Callable::program("f", &Program::new().add(1))])
                .unwrap();
            let code = runner.code("f").unwrap();
            let mut out = Outputs::<0>::new(64);
            let spec = RunSpec::new(code, Input::Host(&[1]));
            SKIP_MIRROR.with(|s| s.set(skip));
            let captured = runner
                .prepare(runner.take_slot::<0>().unwrap(), spec)
                .unwrap()
                .capture();
            SKIP_MIRROR.with(|s| s.set(false));
            let (run, capture) = captured.unwrap();
            let done = run.fence().unwrap().finalize(&mut out);
            if skip {
                let e = done.unwrap_err();
                assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::RecordMismatch { .. }
                            | ErrorKind::RecordMissing(_)
                            | ErrorKind::RecordMalformed { .. }
                    ),
                    "{:?}",
                    e.kind()
                );
            } else {
                drop(done.unwrap());
                assert_eq!(out.values(), [2]);
            }
            drop(capture);
        }
    }

    fn skipped_write_is_caught(sim: SimDriver, config: DeviceConfig) {
        let mut dev = Device::<_, 2>::open(sim, config).unwrap();
        let runner = dev
            .publish(&[Callable::program("f", &Program::new().add(1))])
            .unwrap();
        let code = runner.code("f").unwrap();
        let mut out = Outputs::<0>::new(4);
        let spec = RunSpec::new(code, Input::Host(&[1]));
        let (run, capture) = runner
            .prepare(runner.take_slot::<0>().unwrap(), spec)
            .unwrap()
            .capture()
            .unwrap();
        let token = run.fence().unwrap().finalize(&mut out).unwrap().token;
        let replay = |token, skip: bool, out: &mut Outputs<0>| {
            SKIP_WRITE.with(|s| s.set(skip));
            let run = runner
                .prepare(token, RunSpec::new(code, Input::Host(&[7])))
                .unwrap()
                .replay(&capture)
                .unwrap();
            SKIP_WRITE.with(|s| s.set(false));
            run.fence().unwrap().finalize(out)
        };
        let token = replay(token, false, &mut out).unwrap().token;
        assert_eq!(out.values(), [8]);
        let e = replay(token, true, &mut out).unwrap_err();
        // runclaim's records carry the last run's id; a2a3's its epoch.
        assert!(
            matches!(
                e.kind(),
                ErrorKind::RecordMismatch { .. } | ErrorKind::RecordMissing(_)
            ),
            "{:?}",
            e.kind()
        );
    }
}
