//! Proving the queue quiet and recovering: drain (which replaces faulted
//! streams), close and teardown — never destroying a stream with queued
//! work, never freeing memory a kernel may still write.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::{Device, DrainReport};
use crate::contract::error::{Action, Error, ErrorKind};
use crate::contract::inflight::Proof;
use crate::contract::slot::SlotSet;
use crate::contract::wait::{DrainWait, polled_after_ready};
use crate::driver::{Driver, DriverError};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// The end of a drain its look found quiet: with `synced` (work was
    /// queued, or the runner poisoned), every stream `faulted` replaced
    /// and the chain broken where a run could not be proven; then the
    /// queue is quiet — parked streams retired, every run done, every slot
    /// back in service, dropped buffers freed.
    pub(super) fn drained(
        &self,
        synced: bool,
        faulted: [bool; 2],
    ) -> Result<DrainReport, ErrorKind> {
        let mut st = self.lock();
        let mut report = DrainReport::default();
        if synced {
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
                    st.streams.replace_aicpu(fresh)
                } else {
                    let (fresh, epoch) = self.fresh_aicore().map_err(ErrorKind::from_driver)?;
                    st.streams.replace_aicore(fresh, epoch)
                };
                // An error-state stream may be destroyed; if the runtime
                // refuses, it is retried later, never reused.
                self.retire_stream(&mut st, old);
                report.streams_recreated += 1;
                st.stats.fault_recreations += 1;
            }
            if faulted.iter().any(|&f| f)
                || st.queue.runs().iter().any(|e| e.proof == Proof::Unproven)
            {
                st.queue.break_chain();
            }
            if faulted.iter().any(|&f| f) {
                // A graph's own streams may have faulted with them: every
                // capture is let go of, to be captured again.
                st.graphs.streams += 1;
                st.graphs.doom_all();
            }
            st.stats.drains += 1;
        }
        self.retire_parked(&mut st);
        // The queue is quiet: a launch has no replay to order behind (and
        // must not wait for a fence that never completed).
        st.graphs.queued(None);
        if synced {
            st.graphs.unsynced = false;
        }
        (report.retired, report.cleared) = st.queue.quiet();
        self.destroy_doomed(&mut st);
        // A graph whose destroy was refused may still run a replay (on its
        // own streams, which no sync here covered): its slot stays out of
        // service until a later drain destroys it, and the report says so.
        // (Empty, as it is unless a destroy failed, it allocates nothing.)
        let mut kept = SlotSet::new();
        st.graphs.doomed_slots().for_each(|slot| kept.insert(slot));
        let (quarantined, _) = st.slots.sets();
        let still = kept.iter().filter(|&s| quarantined.contains(s)).count();
        report.released = st.slots.reset_all() - still;
        for slot in kept.iter() {
            st.quarantine(slot);
        }
        report.kept = kept;
        drop(st);
        self.reclaim_buffers();
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
    /// and memory a kernel may still write is never freed). The same, with
    /// the driver's refusal, when a captured run's graph could not be
    /// destroyed (a slot [`DrainReport::kept`] out of service): a faulted
    /// replay may still run on the graph's own streams. A driver error
    /// while releasing: `None`, the rest was released.
    #[allow(
        clippy::result_large_err,
        reason = "close runs once per device; handing the device back by value is the point"
    )]
    pub fn close(mut self) -> Result<(), Error<Option<Self>>> {
        // Nothing is released until the queue is proven quiet: if it is not,
        // the device comes back untouched, to close later.
        let quiet = self
            .drain(None)
            .and_then(|_| self.stuck_graphs().map_or(Ok(()), Err));
        if let Err(k) = quiet {
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
        // A graph that could not be destroyed may still run: everything is
        // leaked on purpose, as for runs not proven complete.
        if let Some(k) = self.stuck_graphs() {
            return Err(k);
        }
        let mut st = self.lock();
        let graphs = self.release_graphs(&mut st);
        let streams = st.streams.take_all();
        let pinned = st.pins.take_all();
        drop(st);
        let mut first_err = None;
        let mut note = |r: Result<(), DriverError>| {
            if let Err(e) = r {
                first_err.get_or_insert(ErrorKind::from_driver(e));
            }
        };
        for r in graphs {
            note(r);
        }
        for s in streams {
            note(self.driver.destroy_stream(s));
        }
        for code in pinned {
            note(self.driver.release_code(code));
        }
        for p in self.free_all_buffers() {
            note(self.driver.free(p));
        }
        for r in &self.regions {
            note(self.driver.destroy_event(r.ev_aicore));
            note(self.driver.destroy_event(r.ev_fence));
            note(self.driver.free(r.region_base));
        }
        first_err.map_or(Ok(()), Err)
    }

    /// [`close`](Device::close), awaited: the queue is proven quiet without
    /// parking a thread on the device (as an awaited drain looks), then
    /// the device is released — its teardown finds nothing to wait for. An
    /// executor's thread is never blocked on the device's runs, as a
    /// `Device`'s drop would block it.
    ///
    /// ```
    /// use runclaim::{Callable, Device, DeviceConfig, Input, RunSpec};
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let mut device = Device::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
    /// {
    ///     let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    ///     let code = runner.code("f")?;
    ///     let run = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
    ///     std::mem::forget(run); // still on the device when the close starts
    /// }
    /// pollster::block_on(device.close_async())?;
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`close`](Device::close): the device comes back (`Some`) when
    /// the queue was not proven quiet within its budget.
    pub fn close_async(self) -> CloseFuture<D, DEPTH> {
        CloseFuture {
            device: Some(self),
            wait: DrainWait::new(None),
        }
    }
}

/// A device's close, awaited: what [`Device::close_async`] returns. It
/// owns the device until it resolves; dropped early, the device drops with
/// it (as a dropped device does: a bounded wait, then release). Polled
/// again after it resolved, it panics, as std's `async fn` futures do.
#[must_use = "a future does nothing unless awaited"]
pub struct CloseFuture<D: Driver, const DEPTH: usize> {
    device: Option<Device<D, DEPTH>>,
    wait: DrainWait,
}

impl<D: Driver, const DEPTH: usize> Unpin for CloseFuture<D, DEPTH> {}

impl<D: Driver, const DEPTH: usize> std::fmt::Debug for CloseFuture<D, DEPTH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloseFuture")
            .field("done", &self.device.is_none())
            .finish_non_exhaustive()
    }
}

impl<D: Driver, const DEPTH: usize> Future for CloseFuture<D, DEPTH> {
    type Output = Result<(), Error<Option<Device<D, DEPTH>>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(device) = this.device.as_mut() else {
            polled_after_ready("CloseFuture")
        };
        let quiet = match device.poll_drain(&mut this.wait, cx.waker()) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        let Some(mut device) = this.device.take() else {
            polled_after_ready("CloseFuture")
        };
        Poll::Ready(match quiet {
            Ok(_) => device
                .teardown()
                .map_err(|k| Error::new(None, Action::Close, None, None, k)),
            Err(k) => Err(Error::new(Some(device), Action::Close, None, None, k)),
        })
    }
}
