//! Stream capture on the runtime's model runtime instances (`aclmdlRI`):
//! the four capture methods of [`AclDriver`]'s `Driver` impl. Every stream
//! and graph handle is checked against the table before any C call; the
//! calls are the `result` layer's (`result/capture.rs`).
//!
//! - **begin**: `aclmdlRICaptureBegin(stream, THREAD_LOCAL)`, then
//!   `aclmdlRICaptureGetInfo`, which must say `ACTIVE` (`torch_npu`'s
//!   `NPUGraph::capture_begin` asserts the same). Anything else is refused,
//!   and a capture that did begin is ended again (its graph, if any,
//!   destroyed), so the stream is not left capturing.
//! - **end**: `aclmdlRICaptureEnd(stream)`; the graph it returns goes into
//!   the table.
//! - **launch**: `aclmdlRIExecuteAsync(graph, stream)`.
//! - **destroy**: `aclmdlRIDestroy(graph)`, with the graph out of the table
//!   and the table unlocked: the runtime waits (up to 10 s, polling) for a
//!   running replay before it refuses with `ACL_ERROR_RT_MODEL_RUNNING`
//!   (`Context::ModelDestroy`, `src/runtime/core/src/context/context.cc`),
//!   and no other call of this driver waits on that. On failure the graph
//!   goes back.
//!
//! Without the five symbols, or (for begin) without
//! `aclrtCreateEventExWithFlag` events, each refuses with
//! [`DriverErrorKind::Unsupported`] before anything else, as a driver
//! without capture does (the trait's defaults).

use std::sync::atomic::Ordering;

use super::AclDriver;
use super::result::{self, CaptureStatus};
use super::tokens::{GraphEntry, Stream};
use crate::driver::{Capabilities, DriverError, DriverErrorKind, GraphId, Op, StreamId};

fn unsupported(op: Op) -> DriverError {
    DriverError::new(op, DriverErrorKind::Unsupported)
}

impl AclDriver {
    /// A graph can be ended, launched and destroyed: the runtime exports
    /// all five capture symbols (`Capabilities::CAPTURE` as opened).
    fn has_graphs(&self, op: Op) -> Result<(), DriverError> {
        if self.caps.contains(Capabilities::CAPTURE) {
            Ok(())
        } else {
            Err(unsupported(op))
        }
    }

    /// A capture can begin: the symbols, and this driver's events come
    /// from `aclrtCreateEventExWithFlag` (see `AclDriver::capabilities`).
    pub(super) fn can_capture(&self) -> bool {
        self.caps.contains(Capabilities::CAPTURE) && self.ex_events.load(Ordering::Acquire)
    }

    pub(super) fn capture_begin_impl(&self, stream: StreamId) -> Result<(), DriverError> {
        let op = Op::CaptureBegin;
        if !self.can_capture() {
            return Err(unsupported(op));
        }
        let t = self.read();
        let s = t.stream(op, stream.raw())?.live();
        self.bind(op)?;
        result::capture_begin(&self.api, s)
            .ok_or_else(|| unsupported(op))?
            .map_err(|f| f.at(op))?;
        let refused = |what| DriverError::new(op, DriverErrorKind::InvalidResult { what });
        let refusal = match result::capture_get_info(&self.api, s) {
            Some(Ok(CaptureStatus::Active)) => return Ok(()),
            // Nothing began: nothing to end.
            Some(Ok(CaptureStatus::None)) => {
                return Err(refused(
                    "aclmdlRICaptureGetInfo: the stream is not capturing after aclmdlRICaptureBegin",
                ));
            }
            Some(Ok(CaptureStatus::Invalidated)) => {
                refused("aclmdlRICaptureGetInfo: the capture was invalidated as soon as it began")
            }
            Some(Err(f)) => f.at(op),
            None => unsupported(op),
        };
        self.abandon_capture(s);
        Err(refusal)
    }

    /// Ends a capture begun on `s` that this driver will not hand out
    /// (best effort): its graph, if the end made one, is destroyed.
    fn abandon_capture(&self, s: Stream<'_>) {
        if let Some(Ok(g)) = result::capture_end(&self.api, s) {
            // A graph nobody has seen, so nothing runs it: on failure it is
            // left to the device's reset.
            let _ = result::model_destroy(&self.api, GraphEntry::new(g));
        }
    }

    pub(super) fn capture_end_impl(&self, stream: StreamId) -> Result<GraphId, DriverError> {
        let op = Op::CaptureEnd;
        self.has_graphs(op)?;
        let t = self.read();
        let s = t.stream(op, stream.raw())?.live();
        self.bind(op)?;
        let g = result::capture_end(&self.api, s)
            .ok_or_else(|| unsupported(op))?
            .map_err(|f| f.at(op))?;
        drop(t);
        // Nobody knows the handle before it is returned: no call can look
        // for it between the two locks.
        self.write().insert_graph(g);
        Ok(GraphId::from_raw(g.raw()))
    }

    pub(super) fn graph_launch_impl(
        &self,
        graph: GraphId,
        stream: StreamId,
    ) -> Result<(), DriverError> {
        let op = Op::GraphLaunch;
        self.has_graphs(op)?;
        let t = self.read();
        let g = t.graph(op, graph.raw())?.live();
        let s = t.stream(op, stream.raw())?.live();
        self.bind(op)?;
        result::execute_async(&self.api, g, s)
            .ok_or_else(|| unsupported(op))?
            .map_err(|f| f.at(op))
    }

    pub(super) fn graph_destroy_impl(&self, graph: GraphId) -> Result<(), DriverError> {
        let op = Op::GraphDestroy;
        self.has_graphs(op)?;
        // Out of the table (nothing can launch it meanwhile), and the lock
        // released before the call: see the module documentation.
        let g = self.write().take_graph(op, graph.raw())?;
        if let Err(e) = self.bind(op) {
            self.write().put_back_graph(g);
            return Err(e);
        }
        result::model_destroy(&self.api, g).map_err(|(g, f)| {
            self.write().put_back_graph(g);
            f.map_or_else(|| unsupported(op), |f| f.at(op))
        })
    }

    /// Destroys every graph this driver still holds (at drop; best effort).
    pub(super) fn destroy_graphs(&self) {
        let graphs = self.write().take_graphs();
        for g in graphs {
            let _ = result::model_destroy(&self.api, g);
        }
    }
}
