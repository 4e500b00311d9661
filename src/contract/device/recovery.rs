//! Proving the queue quiet and recovering: drain, close and teardown, and
//! the stream pair's re-creation (after a publication, a fault, or another
//! owner's upload) — never destroying a stream with queued work.

use std::time::Duration;

use super::state::{SlotState, State};
use super::{Device, DrainReport, MIN_SLICE};
use crate::contract::error::{Action, Error, ErrorKind};
use crate::contract::inflight::Proof;
use crate::driver::{Driver, DriverError, StreamId};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// Proves the queue quiet and returns every slot to service.
    ///
    /// Callers hold exclusive access to the device or its runner, so no
    /// token, prepared, launched or fenced run is alive: anything still in
    /// the in-flight set was forgotten, lost in a partial launch, or is
    /// unproven; a `Held` slot's token was forgotten.
    ///
    /// `timeout`: `None` waits the queue budget, `(in flight + 1) ×
    /// fence_timeout`; `Some(Duration::MAX)` waits without a deadline.
    pub(crate) fn drain(&self, timeout: Option<Duration>) -> Result<DrainReport, ErrorKind> {
        let mut st = self.lock();
        let mut report = DrainReport::default();
        let needs_sync = !st.in_flight.is_empty() || st.poison.is_some();
        if needs_sync {
            let timeout = timeout.unwrap_or_else(|| self.config.queue_budget(st.in_flight.len()));
            let d = &self.driver;
            let deadline = d.clock().checked_add(timeout);
            let mut faulted = [false; 2];
            for (i, s) in [st.aicpu, st.aicore].into_iter().enumerate() {
                let left = deadline.map_or(Duration::MAX, |dl| dl.saturating_sub(d.clock()));
                match self.driver.sync_stream(s, left.max(MIN_SLICE)) {
                    Ok(()) => {}
                    Err(e) if e.is_timeout() => {
                        return Err(ErrorKind::Undrained {
                            count: st.in_flight.len(),
                            waited: timeout,
                        });
                    }
                    Err(e)
                        if matches!(e.kind(), crate::driver::DriverErrorKind::KernelFault(_)) =>
                    {
                        faulted[i] = true;
                    }
                    Err(e) => return Err(ErrorKind::from_driver(e)),
                }
            }
            // A faulted stream runs nothing more: replace it.
            for (i, f) in faulted.into_iter().enumerate() {
                if !f {
                    continue;
                }
                let old = if i == 0 {
                    let fresh = self
                        .driver
                        .create_stream()
                        .map_err(ErrorKind::from_driver)?;
                    std::mem::replace(&mut st.aicpu, fresh)
                } else {
                    let (fresh, epoch) = self.fresh_aicore().map_err(ErrorKind::from_driver)?;
                    st.aicore_generation = st.generation;
                    st.aicore_epoch = epoch;
                    std::mem::replace(&mut st.aicore, fresh)
                };
                // An error-state stream may be destroyed; if the runtime
                // refuses, it is retried later, never reused.
                self.retire_stream(&mut st, old);
                report.streams_recreated += 1;
                st.stats.fault_recreations += 1;
            }
            if faulted.iter().any(|&f| f) || st.in_flight.iter().any(|e| e.proof == Proof::Unproven)
            {
                st.chain = None;
            }
            st.stats.drains += 1;
        }
        let abandoned = std::mem::take(&mut st.abandoned);
        for old in abandoned {
            self.retire_stream(&mut st, old);
        }
        report.retired = st.in_flight.len();
        st.in_flight.clear();
        for s in &mut st.slots {
            if *s == SlotState::Quarantined {
                report.released += 1;
            }
            *s = SlotState::Free;
        }
        report.cleared = st.poison.take();
        Ok(report)
    }

    /// Drains and releases every device resource, reporting what could not
    /// be released. Dropping the device does the same, silently.
    ///
    /// # Errors
    /// [`ErrorKind::Undrained`] when runs could not be proven complete
    /// within the queue budget: nothing was released and the device comes
    /// back (`Some`), to close later — or to drop, which leaks its streams
    /// and memory on purpose (a stream with queued work is never destroyed,
    /// and memory a kernel may still write is never freed). A driver error
    /// while releasing: `None`, the rest was released.
    #[allow(
        clippy::result_large_err,
        reason = "close runs once per device; handing the device back by value is the point"
    )]
    pub fn close(mut self) -> Result<(), Error<Option<Self>>> {
        // Nothing is released until the queue is proven quiet: if it is not,
        // the device comes back untouched, to close later.
        if let Err(k) = self.drain(None) {
            return Err(Error::new(Some(self), Action::Close, None, None, k));
        }
        self.teardown()
            .map_err(|k| Error::new(None, Action::Close, None, None, k))
    }

    pub(super) fn teardown(&mut self) -> Result<(), ErrorKind> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.drain(None)?;
        let mut st = self.lock();
        let mut streams = std::mem::take(&mut st.abandoned);
        streams.extend([st.aicore, st.aicpu]);
        let pinned = std::mem::take(&mut st.pinned);
        drop(st);
        let mut first_err = None;
        let mut note = |r: Result<(), DriverError>| {
            if let Err(e) = r {
                first_err.get_or_insert(ErrorKind::from_driver(e));
            }
        };
        for s in streams {
            note(self.driver.destroy_stream(s));
        }
        for code in pinned {
            note(self.driver.release_code(code));
        }
        for r in &self.regions {
            note(self.driver.destroy_event(r.ev_aicore));
            note(self.driver.destroy_event(r.ev_fence));
            note(self.driver.free(r.input));
            note(self.driver.free(r.handshake));
            note(self.driver.free(r.wall));
            note(self.driver.free(r.status));
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Destroys a stream that no longer takes work, or keeps it for a later
    /// retry if the runtime refuses.
    pub(super) fn retire_stream(&self, st: &mut State<DEPTH>, stream: StreamId) {
        if self.driver.destroy_stream(stream).is_err() {
            st.abandoned.push(stream);
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
    /// the old one is retired once idle. Nothing of the run is submitted.
    pub(super) fn ready_streams(&self, st: &mut State<DEPTH>) -> Result<(), ErrorKind> {
        if st.in_flight.is_empty() && !st.abandoned.is_empty() {
            // Streams left busy earlier are idle now.
            for old in std::mem::take(&mut st.abandoned) {
                self.retire_stream(st, old);
            }
        }
        let own = st.aicore_generation != st.generation;
        let foreign = self.driver.code_epoch() > st.aicore_epoch;
        if !own && !foreign {
            return Ok(());
        }
        let last = st.in_flight.iter().last().copied();
        if own && last.is_some() {
            // Unreachable through the API (publication drains first), kept
            // as a guard: a new generation never shares the queue.
            return Err(ErrorKind::broken(
                "a new code generation with runs in flight (publication drains first)",
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
        let old = std::mem::replace(&mut st.aicore, fresh);
        st.aicore_generation = st.generation;
        st.aicore_epoch = epoch;
        st.stats.aicore_recreations += 1;
        if last.is_some() {
            // Its queued kernels still run: never destroyed busy, it is
            // retired once idle (a launch that finds nothing in flight, a
            // drain, teardown), and never reused.
            st.abandoned.push(old);
        } else {
            self.retire_stream(st, old);
        }
        Ok(())
    }
}
