//! A shared device's recovery from a fault or an overrun, started and
//! finished by the handle itself: a barrier at the head of the arrivals,
//! like a publication's, that settles every run in flight into its ticket,
//! proves the queue quiet (re-creating faulted streams) and takes every
//! slot back — or, when the device cannot be brought back, closes it with
//! every waiter answered.
//!
//! **Who moves it.** The handle has no thread. The recovery is advanced by
//! the look of the head arrival (a submission, a publication, a close):
//! each look settles what it can and arms the looker's waker on what is
//! left (a lane's fence, the drain's newest fence, or a time slice), so the
//! head is always armed on the device while it waits; every arrival
//! behind it is woken in turn when the head leaves (`Hub::leave`). A
//! blocking head drains with the device's blocking drain, outside the
//! lock.
//!
//! **Its bound.** The runs in flight settle by their fences' own rules
//! (the queue budget, at most `(DEPTH + 1) × fence_timeout` on the
//! driver's clock, one more `fence_timeout` behind a head that cannot be
//! proven complete), then the drain waits at most `(runs in flight + 1) ×
//! fence_timeout`: a recovery ends within about `2 × (DEPTH + 1) ×
//! fence_timeout`, past which the device is closed as lost
//! ([`LostCause::Undrained`]).

use std::sync::Arc;
use std::task::Waker;

use super::claim::Cell;
use super::hub::{Hub, Recovery};
use crate::contract::device::{DrainReport, LostCause};
use crate::contract::error::ErrorKind;
use crate::contract::lane::Lane;
use crate::contract::slot::{Depth, SupportedDepth};
use crate::contract::wait::DrainWait;
use crate::driver::Driver;

/// What one look at the recovery found.
pub(super) enum Look {
    /// Nothing to recover (or the recovery just finished): admit.
    Clear,
    /// Runs still settling or the queue not yet quiet; the looker's waker
    /// is armed on the device.
    Waiting,
    /// The device could not be brought back: it is closed.
    Lost(LostCause),
}

impl<D: Driver, const DEPTH: usize> Hub<D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// `true` when the device must recover before it admits anything: it
    /// is poisoned, or a lane's slot is held by a run whose fence failed
    /// (or was lost in a partial launch) — which only a drain frees.
    pub(super) fn needs_recovery(&self, cell: &Cell<D, DEPTH>) -> bool {
        self.recovery.is_some()
            || self.lanes.iter().any(Lane::is_stuck)
            || cell.device.is_poisoned()
    }

    /// One look at the recovery, by the head arrival: started here when
    /// the device needs one, then advanced as far as it goes without
    /// blocking (a blocking looker's thread sleeps on what the looks
    /// named once the lock is released: `contract/sleep.rs`).
    #[inline]
    pub(super) fn look_recovery(&mut self, cell: &Arc<Cell<D, DEPTH>>, waker: &Waker) -> Look {
        if self.needs_recovery(cell) {
            self.advance_recovery(cell, waker)
        } else {
            Look::Clear
        }
    }

    /// [`look_recovery`](Self::look_recovery) where the device needs one
    /// ([`needs_recovery`](Self::needs_recovery)).
    pub(super) fn advance_recovery(&mut self, cell: &Arc<Cell<D, DEPTH>>, waker: &Waker) -> Look {
        let mut r = match self.recovery.take() {
            Some(r) => r,
            None => Recovery {
                start: cell.device.driver().clock(),
                poison: cell.device.poison(),
                waits: [None; DEPTH],
                drain: DrainWait::new(None),
            },
        };
        // Every run in flight settles into its ticket first: the faulted
        // one with its fault, those behind it with theirs (`FaultAhead`,
        // naming it) or their own results.
        let settled = self.settle_owing(&mut r.waits, waker);
        if !settled {
            self.recovery = Some(r);
            return Look::Waiting;
        }
        let drained = match cell.device.poll_drain(&mut r.drain, waker) {
            std::task::Poll::Pending => {
                self.recovery = Some(r);
                return Look::Waiting;
            }
            std::task::Poll::Ready(drained) => drained,
        };
        self.recovery = Some(r);
        self.finish_recovery(cell, drained)
    }

    /// The recovery's drain answered: on success the lanes take fresh
    /// claims and admission resumes ([`Look::Clear`]); otherwise the
    /// device is closed as lost, every waiter woken to learn it.
    pub(super) fn finish_recovery(
        &mut self,
        cell: &Arc<Cell<D, DEPTH>>,
        drained: Result<DrainReport, ErrorKind>,
    ) -> Look {
        let Some(r) = self.recovery.take() else {
            return Look::Clear;
        };
        if let Err(kind) = drained {
            return self.lose(lost_cause(&kind));
        }
        // The drain reset every slot: the lanes' claims are stale.
        self.renew(cell);
        if let Some(slot) = self.lanes.iter().position(|l| !l.is_free()) {
            return self.lose(LostCause::Slot { slot });
        }
        self.recoveries += 1;
        let took = cell.device.driver().clock().saturating_sub(r.start);
        self.last_recovery = Some(took);
        Look::Clear
    }

    /// The device cannot be brought back: closed, with `cause` for
    /// `health()` and every arrival woken to be refused.
    fn lose(&mut self, cause: LostCause) -> Look {
        self.lost = Some(cause);
        self.closed = true;
        self.wake_all();
        Look::Lost(cause)
    }

    /// What a refused arrival is told once the device is closed: the
    /// cause, when it closed itself.
    pub(super) fn closed_kind(&self) -> ErrorKind {
        self.lost.map_or(ErrorKind::Closed, ErrorKind::Lost)
    }

    /// What a `try_submit` that found the device recovering is told.
    pub(super) fn recovering_kind(&self) -> Option<ErrorKind> {
        self.recovery.as_ref().map(|r| ErrorKind::Recovering {
            from: r.poison.and_then(|p| p.run),
        })
    }
}

/// Why a failed drain lost the device.
fn lost_cause(kind: &ErrorKind) -> LostCause {
    match kind {
        ErrorKind::Undrained { count, .. } => LostCause::Undrained { count: *count },
        k => match k.driver_error() {
            Some(e) => LostCause::Driver {
                op: e.op(),
                code: e.native().map(|n| n.code),
            },
            None => LostCause::Undrained { count: 0 },
        },
    }
}
