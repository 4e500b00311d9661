//! Fault attribution: which run a device fault belongs to. A kernel fault
//! poisons the runner naming the run that faulted — the first run in
//! stream order whose own events report it — not a later run that met it
//! (a collateral abort, a launch onto a faulted stream).

use super::Device;
use super::state::State;
use crate::contract::error::{ErrorKind, PoisonCause, RunId};
use crate::driver::{Driver, DriverError};

/// The run a fault belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Culprit {
    pub(super) run: RunId,
    pub(super) slot: usize,
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// The first run in flight (launched before `before`, when given) not
    /// yet observed complete whose own events — its AICore event or its
    /// fence — report a device fault: the run `e` belongs to. `None` when
    /// `e` is no kernel fault or no such run reports one.
    pub(super) fn culprit(
        &self,
        st: &State<DEPTH>,
        e: &DriverError,
        before: Option<u64>,
    ) -> Option<Culprit> {
        if !e.is_kernel_fault() {
            return None;
        }
        st.queue
            .runs()
            .iter()
            .filter(|x| before.is_none_or(|b| x.seq < b) && !x.observed)
            .find(|x| {
                // Either event: a fault on the AICore stream reaches the
                // run's AICore event at once, its fence (on the AICPU
                // stream) only later.
                let r = &self.regions[x.slot];
                [r.ev_aicore, r.ev_fence].into_iter().any(|ev| {
                    self.driver
                        .query_event(ev)
                        .is_err_and(|q| q.is_device_fault())
                })
            })
            .map(|x| Culprit {
                run: x.run,
                slot: x.slot,
            })
    }

    /// `e` is a fault an earlier run caused (its own events report it):
    /// that run, and the [`ErrorKind::FaultAhead`] an operation that met it
    /// reports. `e` comes back when no earlier run reports it. Poisons
    /// nothing: the caller knows what else the failure cost.
    pub(super) fn fault_ahead(
        &self,
        st: &State<DEPTH>,
        e: DriverError,
    ) -> Result<(Culprit, ErrorKind), DriverError> {
        match self.culprit(st, &e, None) {
            Some(c) => Ok((
                c,
                ErrorKind::FaultAhead {
                    run: c.run,
                    slot: c.slot,
                    error: Box::new(e),
                },
            )),
            None => Err(e),
        }
    }

    /// Classifies a driver error met while handling `run` in `slot`: a
    /// device fault poisons the runner, attributed to its culprit among the
    /// runs launched before `before` (`None`: any run in flight), else to
    /// `run`. Returns the kind to report: a fault that is another run's is
    /// [`ErrorKind::FaultAhead`] naming that run, never `run`'s own
    /// [`ErrorKind::Fault`] (a run queued behind a fault meets it on its
    /// own events too: its kernels never ran).
    pub(super) fn driver_error(
        &self,
        st: &mut State<DEPTH>,
        e: DriverError,
        run: RunId,
        slot: usize,
        before: Option<u64>,
    ) -> ErrorKind {
        if e.is_device_fault() {
            let c = self
                .culprit(st, &e, before)
                .unwrap_or(Culprit { run, slot });
            st.queue
                .poison_with(PoisonCause::DeviceFault, c.run, c.slot);
            if c.run != run {
                return ErrorKind::FaultAhead {
                    run: c.run,
                    slot: c.slot,
                    error: Box::new(e),
                };
            }
        }
        ErrorKind::from_driver(e)
    }

    /// A driver error met while preparing a run, before anything of it
    /// reached a stream: a device fault is an earlier run's (its culprit),
    /// or nobody's that the device can name (a lost device) — never the
    /// run being prepared, which the caller never got.
    pub(super) fn unlaunched_error(&self, st: &mut State<DEPTH>, e: DriverError) -> ErrorKind {
        if e.is_device_fault() {
            match self.culprit(st, &e, None) {
                Some(c) => st
                    .queue
                    .poison_with(PoisonCause::DeviceFault, c.run, c.slot),
                None => st.queue.poison_unattributed(PoisonCause::DeviceFault),
            }
        }
        ErrorKind::from_driver(e)
    }

    /// A wait for run `seq` failed with `e` (not a timeout).
    pub(super) fn settle_error(
        &self,
        e: DriverError,
        run: RunId,
        slot: usize,
        seq: u64,
    ) -> ErrorKind {
        let mut st = self.lock();
        let fault = e.is_device_fault();
        // Attributed first: the poison names the run that faulted.
        let kind = self.driver_error(&mut st, e, run, slot, Some(seq));
        if fault {
            // A faulted stream completes nothing queued behind the fault.
            st.queue.unprove(seq, PoisonCause::DeviceFault);
        }
        kind
    }
}
