//! The instant driver's capture (opt-in, [`InstantDriver::with_capture`]):
//! a capture records the AICore kernel's code, the AICPU kernel's
//! replayable block and the device copies queued meanwhile, a replay reads
//! the run's block from the device span that block names, executes it at
//! once, then makes the copies — so the contract's cost per
//! replayed run can be timed apart from any device.

use super::{ArgBlock, Captured, Inner, InstantDriver};
use crate::driver::abi;
use crate::driver::{CaptureRule, DriverError, DriverErrorKind, GraphId, HandleKind, Op, StreamId};

impl InstantDriver {
    /// A capture here records the AICore kernel's code and the AICPU
    /// kernel's (replayable) block, launched on any stream while it is
    /// open; records and waits are no-ops, as always. None of the
    /// runtime's capture rules is checked: test those on the simulator.
    pub(super) fn begin_capture(&self, s: StreamId) -> Result<(), DriverError> {
        if !self.capture {
            return Err(DriverError::new(
                Op::CaptureBegin,
                DriverErrorKind::Unsupported,
            ));
        }
        let mut g = self.lock();
        Inner::check(&g.streams, Op::CaptureBegin, HandleKind::Stream, s.raw())?;
        if g.capturing.is_some() {
            return Err(DriverError::new(
                Op::CaptureBegin,
                DriverErrorKind::Capture {
                    rule: CaptureRule::AlreadyCapturing,
                },
            ));
        }
        g.capturing = Some((s.raw(), Captured::default()));
        Ok(())
    }

    pub(super) fn end_capture(&self, s: StreamId) -> Result<GraphId, DriverError> {
        if !self.capture {
            return Err(DriverError::new(
                Op::CaptureEnd,
                DriverErrorKind::Unsupported,
            ));
        }
        let mut g = self.lock();
        let not = DriverError::new(
            Op::CaptureEnd,
            DriverErrorKind::Capture {
                rule: CaptureRule::NotCapturing,
            },
        );
        let Some((origin, captured)) = g.capturing.take() else {
            return Err(not);
        };
        if origin != s.raw() {
            g.capturing = Some((origin, captured));
            return Err(not);
        }
        let h = g.handle();
        g.graphs.push((h, Some(captured)));
        Ok(GraphId::from_raw(h))
    }

    /// Runs the whole replay at once: the AICPU kernel's block read from
    /// the device span its replayable block names, then executed as a
    /// launch would be, then the captured copies.
    pub(super) fn launch_graph(&self, graph: GraphId, s: StreamId) -> Result<(), DriverError> {
        if !self.capture {
            return Err(DriverError::new(
                Op::GraphLaunch,
                DriverErrorKind::Unsupported,
            ));
        }
        let op = Op::GraphLaunch;
        let mut g = self.lock();
        Inner::check(&g.streams, op, HandleKind::Stream, s.raw())?;
        let bad = DriverError::new(
            op,
            DriverErrorKind::BadHandle {
                kind: HandleKind::Graph,
                raw: graph.raw(),
            },
        );
        // The replayable block, copied out of the graph (no allocation).
        let mut envelope = [0u8; abi::ReplayArgs::SIZE];
        let code = match g.graphs.iter().find(|(h, _)| *h == graph.raw()) {
            Some((
                _,
                Some(Captured {
                    code: Some(c),
                    aicpu: Some(b),
                    ..
                }),
            )) if b.len() == envelope.len() => {
                envelope.copy_from_slice(b);
                *c
            }
            Some((_, Some(_))) => {
                return Err(DriverError::new(
                    op,
                    DriverErrorKind::InvalidArgument {
                        what: "the graph holds no replayable run (both kernels, a replayable block)",
                    },
                ));
            }
            _ => return Err(bad),
        };
        let invalid = |what| DriverError::new(op, DriverErrorKind::InvalidArgument { what });
        let r = abi::ReplayArgs::from_bytes(&envelope).map_err(|e| invalid(e.field))?;
        let len = usize::try_from(r.len).map_err(|_| invalid("ReplayArgs.len"))?;
        let span = g.range(op, r.block, len)?;
        let mut scratch = std::mem::take(&mut g.scratch);
        scratch.clear();
        scratch.extend_from_slice(&g.memory[span]);
        let done = match ArgBlock::parse(&scratch) {
            Ok(block) => g.execute(&block, code),
            Err(e) => Err(invalid(e.field)),
        };
        g.scratch = scratch;
        done?;
        // The captured copies, in the order they were queued.
        let Inner { graphs, memory, .. } = &mut *g;
        if let Some((_, Some(c))) = graphs.iter().find(|(h, _)| *h == graph.raw()) {
            for &(from, to, len) in &c.copies {
                memory.copy_within(from..from + len, to);
            }
        }
        Ok(())
    }

    pub(super) fn destroy_graph(&self, graph: GraphId) -> Result<(), DriverError> {
        if !self.capture {
            return Err(DriverError::new(
                Op::GraphDestroy,
                DriverErrorKind::Unsupported,
            ));
        }
        let mut g = self.lock();
        match g.graphs.iter_mut().find(|(h, _)| *h == graph.raw()) {
            Some((_, c @ Some(_))) => {
                *c = None;
                Ok(())
            }
            _ => Err(DriverError::new(
                Op::GraphDestroy,
                DriverErrorKind::BadHandle {
                    kind: HandleKind::Graph,
                    raw: graph.raw(),
                },
            )),
        }
    }
}
