//! The stream pair's lifecycle: readied before every launch (a stale
//! AICore stream is re-created, or replaced by a fresh one ordered behind
//! it while runs are queued), created fresh with the code epoch it can
//! trust, and retired — never destroyed with queued work.

use super::Device;
use super::state::{Staleness, State};
use crate::contract::error::ErrorKind;
use crate::driver::{Driver, DriverError, StreamId};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// Destroys a stream that no longer takes work, or parks it for a later
    /// retry if the runtime refuses.
    pub(super) fn retire_stream(&self, st: &mut State<DEPTH>, stream: StreamId) {
        if self.driver.destroy_stream(stream).is_err() {
            st.streams.park(stream);
        }
    }

    /// Retires every parked stream (callers know them idle).
    pub(super) fn retire_parked(&self, st: &mut State<DEPTH>) {
        for old in st.streams.take_parked() {
            self.retire_stream(st, old);
        }
    }

    /// Creates an AICore stream and notes the code epoch it can trust: read
    /// *before* creation, so an upload racing with it counts as newer.
    pub(super) fn fresh_aicore(&self) -> Result<(StreamId, u64), DriverError> {
        let epoch = self.driver.code_epoch();
        Ok((self.driver.create_stream()?, epoch))
    }

    /// Readies the stream pair for a launch. The AICore stream is stale
    /// after this device's own publication (a new code generation) or after
    /// an upload by anyone else on the NPU since it was created (its code
    /// epoch moved). A stale stream with nothing in flight is re-created; one
    /// with runs still queued is never destroyed — a fresh stream is ordered
    /// behind it instead (it waits for the last queued AICore kernel), and
    /// the old one is parked until idle. Nothing of the run is submitted.
    pub(super) fn ready_streams(&self, st: &mut State<DEPTH>) -> Result<(), ErrorKind> {
        if st.queue.runs().is_empty() && st.streams.has_parked() {
            // Streams left busy earlier are idle now.
            self.retire_parked(st);
        }
        let staleness = st.streams.staleness(self.driver.code_epoch());
        if staleness == Staleness::Fresh {
            return Ok(());
        }
        let last = st.queue.runs().iter().last().copied();
        if staleness == Staleness::OwnPublication && last.is_some() {
            // Publication drains first: a new generation never shares the
            // queue with the old one.
            return Err(ErrorKind::broken(
                "a new code generation with runs in flight",
            ));
        }
        let (fresh, epoch) = self.fresh_aicore().map_err(ErrorKind::from_driver)?;
        if let Some(last) = last {
            // Keep stream order across the switch: the fresh stream's first
            // kernel waits for the last one queued on the old stream.
            let ordered = self
                .driver
                .stream_wait_event(fresh, self.regions[last.slot].ev_aicore);
            if let Err(e) = ordered {
                self.retire_stream(st, fresh);
                return Err(ErrorKind::from_driver(e));
            }
        }
        let old = st.streams.replace_aicore(fresh, epoch);
        st.stats.aicore_recreations += 1;
        if last.is_none() && st.graphs.unsynced {
            // A wait no run tracks is on it: given its time (bounded) before
            // the stream is retired, never destroyed busy.
            if self
                .driver
                .sync_stream(old, self.config.fence_timeout)
                .is_ok()
            {
                st.graphs.unsynced = false;
            }
        }
        if last.is_some() || st.graphs.unsynced {
            // Its queued kernels still run: never destroyed busy.
            st.streams.park(old);
        } else {
            self.retire_stream(st, old);
        }
        Ok(())
    }
}
