//! The non-blocking twins of `fence.rs`'s wait and `recovery.rs`'s drain,
//! for the crate's futures: one poll looks (queries, never waits), judges
//! on the driver's clock exactly as the blocking wait does, and otherwise
//! asks the driver to wake the task ([`Driver::notify_event`]).
//!
//! What a future keeps between polls is an [`AsyncWait`] (or a
//! [`DrainWait`]): when its wait began and the limit it judges against.
//! Nothing else survives a poll, so a future dropped between two polls
//! leaves the device as a poll found it.

use std::sync::atomic::Ordering;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::{Device, DrainReport, MIN_SLICE};
use crate::contract::error::ErrorKind;
use crate::contract::inflight::Proof;
use crate::contract::port::RunInfo;
use crate::contract::wait::{AsyncWait, DrainWait, FIRST_BACKOFF, Wait};
use crate::driver::{Completion, Driver, EventId, Notice, wake_after};

/// What the device learned of its driver's notifications (the first
/// answer decides; a device asks one driver).
pub(super) const NOTICE_UNKNOWN: u8 = 0;
const NOTICE_COMPLETION: u8 = 1;
const NOTICE_TIMER: u8 = 2;

/// How one look ended short of a verdict: what to arm.
#[derive(Clone, Copy)]
enum Arm {
    /// Wake the task when `event` completes or after `within`.
    Event(EventId, Duration),
    /// Nothing to wait on but time.
    Time(Duration),
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// One look at run `seq`'s fence — [`Device::wait_queued`]'s rule, in
    /// steps: complete, a fault, an overrun proven by a query after the
    /// budget ran out, the limit spent; or `Pending`, with the task's
    /// waker armed for the run's fence event and for the next time a
    /// verdict could fall (the limit, the head's budget, a look-around
    /// slice). Never blocks.
    pub(crate) fn poll_queued(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        w: &mut AsyncWait,
        waker: &Waker,
    ) -> Poll<Result<(), ErrorKind>> {
        let d = &self.driver;
        let slice_cap = self.slice_cap();
        let ev = self.regions[slot].ev_fence;
        // A driver that answers `Ready` (the event completed between the
        // query and the arming) is looked at again at once, a few times.
        for _ in 0..4 {
            if let Err(k) = self.in_flight_entry(slot, lease, info.seq) {
                return Poll::Ready(Err(k));
            }
            match d.query_event(ev) {
                Ok(Completion::Complete) => {
                    // Dated when the wait had begun: then a run behind it
                    // may be judged on the date.
                    let at = w.clock.map(|_| d.clock());
                    self.settle_complete(slot, lease, info.seq, at);
                    return Poll::Ready(Ok(()));
                }
                Ok(Completion::NotReady) => {}
                Err(e) => return Poll::Ready(Err(self.settle_error(e, info.run, slot, info.seq))),
            }
            let clock = match (w.clock.as_mut(), w.how) {
                (Some(clock), _) => clock,
                (None, Wait::Poll) => return Poll::Ready(Err(ErrorKind::NotReady)),
                (None, Wait::For(t)) => {
                    w.clock
                        .insert(self.wait_clock(info.seq, d.clock(), Some(t)))
                }
                (None, Wait::Configured) => {
                    w.clock.insert(self.wait_clock(info.seq, d.clock(), None))
                }
            };
            let unshown = w.stall.note_unshown(d.clock());
            let (slice, now) = match self.judge(info.seq, clock, unshown) {
                Ok(next) => next,
                Err(verdict) => return Poll::Ready(Err(verdict)),
            };
            let armed = self.arm(Arm::Event(ev, slice), &mut w.backoff, slice_cap, waker);
            if let Some(within) = armed {
                w.stall.note_armed(now, within);
                return Poll::Pending;
            }
        }
        // The driver kept answering `Ready` for an event its query calls
        // not ready (a driver bug): look again after a backoff, never in a
        // busy loop.
        let within = self.arm(Arm::Time(slice_cap), &mut w.backoff, slice_cap, waker);
        w.stall.note_armed(d.clock(), within.unwrap_or(MIN_SLICE));
        Poll::Pending
    }

    /// Arms the task's waker: for `what`, shortened to the backoff where
    /// the driver wakes on time only (or nothing but time is armed); the
    /// time asked for. `None`: the driver answered [`Notice::Ready`] (look
    /// again now).
    fn arm(
        &self,
        what: Arm,
        backoff: &mut Duration,
        cap: Duration,
        waker: &Waker,
    ) -> Option<Duration> {
        let mut short = |within: Duration| {
            let ask = within.min(*backoff).max(MIN_SLICE);
            *backoff = backoff.saturating_mul(2).min(cap.max(FIRST_BACKOFF));
            ask
        };
        let (ev, within) = match what {
            Arm::Event(ev, within) => {
                if self.notices.load(Ordering::Relaxed) == NOTICE_COMPLETION {
                    (ev, within)
                } else {
                    (ev, short(within))
                }
            }
            // Time alone: always backing off.
            Arm::Time(within) => {
                let within = short(within);
                wake_after(within, waker);
                return Some(within);
            }
        };
        match self.driver.notify_event(ev, within, waker) {
            Ok(Notice::Ready) => None,
            Ok(Notice::Completion) => {
                self.notices.store(NOTICE_COMPLETION, Ordering::Relaxed);
                Some(within)
            }
            answer => {
                // On time only (or the driver could not arm at all: the
                // shared timer then stands in for it).
                if answer.is_err() {
                    wake_after(within, waker);
                }
                self.notices.store(NOTICE_TIMER, Ordering::Relaxed);
                Some(within)
            }
        }
    }

    /// One look at the queue for an awaited drain: `Ready` with
    /// [`Device::drain`]'s answer once both streams are quiet (or stopped
    /// on a fault) — the blocking drain then finds nothing to wait for —
    /// or with [`ErrorKind::Undrained`] once the limit is spent; otherwise
    /// `Pending`, armed for the newest run's fence that is not complete.
    pub(crate) fn poll_drain(
        &self,
        w: &mut DrainWait,
        waker: &Waker,
    ) -> Poll<Result<DrainReport, ErrorKind>> {
        let d = &self.driver;
        let slice_cap = self.slice_cap();
        let (needs_sync, in_flight, streams, fences) = {
            let st = self.lock();
            let runs = st.queue.runs();
            let mut fences = [None::<EventId>; DEPTH];
            for (f, e) in fences.iter_mut().zip(
                runs.iter()
                    .filter(|e| e.proof == Proof::Pending && !e.observed),
            ) {
                *f = Some(self.regions[e.slot].ev_fence);
            }
            (
                !runs.is_empty() || st.queue.poison().is_some(),
                runs.len(),
                [st.streams.aicpu(), st.streams.aicore()],
                fences,
            )
        };
        if !needs_sync {
            return Poll::Ready(self.drain(Some(MIN_SLICE)));
        }
        let (start, limit, count) = *w.start.get_or_insert_with(|| {
            let limit = w
                .timeout
                .unwrap_or_else(|| self.config.queue_budget(in_flight));
            (d.clock(), limit, in_flight)
        });
        let mut quiet = true;
        for s in streams {
            match d.query_stream(s) {
                Ok(Completion::Complete) => {}
                Ok(Completion::NotReady) => quiet = false,
                Err(e) if e.is_kernel_fault() => {}
                Err(e) => return Poll::Ready(Err(ErrorKind::from_driver(e))),
            }
        }
        if quiet {
            // Nothing is left to wait for: the blocking drain only looks.
            return Poll::Ready(self.drain(Some(MIN_SLICE)));
        }
        let now = d.clock();
        let elapsed = now
            .saturating_sub(start)
            .saturating_add(w.stall.note_unshown(now));
        if start.checked_add(limit).is_some() && elapsed >= limit {
            return Poll::Ready(Err(ErrorKind::Undrained {
                count,
                waited: elapsed,
            }));
        }
        let within = slice_cap.min(limit.saturating_sub(elapsed)).max(MIN_SLICE);
        // The newest fence not complete covers everything ahead of it;
        // work no fence covers (a partial launch) is looked at on time only.
        let armed = fences
            .iter()
            .rev()
            .flatten()
            .find_map(|ev| self.arm(Arm::Event(*ev, within), &mut w.backoff, slice_cap, waker))
            .or_else(|| self.arm(Arm::Time(within), &mut w.backoff, slice_cap, waker));
        w.stall.note_armed(now, armed.unwrap_or(MIN_SLICE));
        Poll::Pending
    }
}
