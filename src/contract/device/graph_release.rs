//! A captured run's graph let go of: doomed, destroyed once no replay of
//! it can run, and what a device that could not destroy one may not
//! release.

use super::Device;
use super::state::{Doomed, State};
use crate::contract::error::ErrorKind;
use crate::driver::{Driver, DriverError};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// A capture is let go of: its graph destroyed once no replay of it
    /// runs (now, or at a later look at the device).
    pub(super) fn let_go_capture(&self, id: u64) {
        let mut st = self.lock();
        if let Some(d) = st.graphs.remove(id) {
            st.graphs.doom(d);
        }
        self.destroy_doomed(&mut st);
    }

    /// Destroys every doomed graph whose slot has no run in flight; the
    /// rest stay doomed, as do those the driver refused. A slot with no run
    /// in flight has no replay of its graph running — but after a fault:
    /// a replay whose AICPU kernel faulted may leave its AICore kernel
    /// running on the graph's own stream, and the destroy (under the state
    /// lock, at a drain) waits for it, bounded by the device's watchdog.
    ///
    /// Returns the last refusal, if the driver refused any.
    pub(super) fn destroy_doomed(&self, st: &mut State<DEPTH>) -> Option<DriverError> {
        if !st.graphs.has_doomed() {
            return None;
        }
        let mut refused = None;
        for d in st.graphs.take_doomed() {
            let busy = st.queue.runs().iter().any(|e| e.slot == d.slot);
            let destroyed = !busy && self.destroy_graph(d).map_err(|e| refused = Some(e)).is_ok();
            if !destroyed {
                st.graphs.doom(d);
            }
        }
        refused
    }

    /// After a drain: `Some` (why) when a graph whose destroy the driver
    /// refused is still doomed — a faulted replay may still run on its own
    /// streams, so none of the device's memory or streams may be released
    /// (its destroy asked once more first).
    pub(super) fn stuck_graphs(&self) -> Option<ErrorKind> {
        let mut st = self.lock();
        let refused = self.destroy_doomed(&mut st);
        if !st.graphs.has_doomed() {
            return None;
        }
        Some(refused.map_or_else(
            || ErrorKind::broken("a doomed graph's slot is busy after a drain"),
            ErrorKind::from_driver,
        ))
    }

    /// A refused destroy is asked once more (a refusal that did not reach
    /// the runtime, as a capture's end is): refused again, the graph stays
    /// doomed and its slot out of service ([`DrainReport::kept`](super::DrainReport::kept)).
    fn destroy_graph(&self, d: Doomed) -> Result<(), DriverError> {
        self.driver
            .graph_destroy(d.graph)
            .or_else(|_| self.driver.graph_destroy(d.graph))
    }

    /// The teardown's part: every graph destroyed, every capture region
    /// freed (the queue is quiet).
    pub(super) fn release_graphs(&self, st: &mut State<DEPTH>) -> Vec<Result<(), DriverError>> {
        st.graphs.doom_all();
        if st.graphs.has_doomed() {
            // Every run is proven complete, but a replay's tail (its
            // graph's end, after the fence) may still be on the AICPU
            // stream: a bounded wait for it, so that no graph is destroyed
            // running and no stream destroyed busy.
            let _ = self
                .driver
                .sync_stream(st.streams.aicpu(), self.config.fence_timeout);
        }
        let mut out: Vec<_> = st
            .graphs
            .take_doomed()
            .into_iter()
            .map(|d| self.destroy_graph(d))
            .collect();
        for at in st.graphs.take_regions() {
            if let Some(fork) = at.fork {
                out.push(self.driver.destroy_event(fork));
            }
            out.push(self.driver.free(at.region));
        }
        out
    }
}
