//! What a shared device keeps under its lock ([`Hub`]): one lane per slot
//! (the pipeline's lanes, holding claims on the device), the arrivals
//! waiting to be admitted in order, the outcomes settled for tickets not
//! yet polled, and the wakers to tell.

use std::collections::VecDeque;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::claim::{ArcClaim, Cell};
use crate::contract::code::CodeEntry;
use crate::contract::completed::{Completed, Delivery, ValuePool, Values};
use crate::contract::device::LostCause;
use crate::contract::error::{Action, Poison};
use crate::contract::lane::Lane;
use crate::contract::wait::{DrainWait, FenceWait, Wait};
use crate::driver::Driver;

/// One slot of a shared device: a pipeline lane whose runs are tagged with
/// their ticket's id.
pub(super) type SharedLane<D, const DEPTH: usize> = Lane<'static, ArcClaim<D, DEPTH>, u64>;

/// Someone waiting to be admitted: a submission, a publication, a close.
struct Arrival {
    id: u64,
    waker: Option<Waker>,
}

/// A recovery under way (`recovery.rs` moves it): when it started, what it clears, and its own
/// looks at the lanes and at the queue.
pub(super) struct Recovery<const DEPTH: usize> {
    /// The driver's clock when the first look found the device poisoned.
    pub(super) start: Duration,
    /// The poison it clears (`None`: a run could not be proven complete
    /// without poisoning the device).
    pub(super) poison: Option<Poison>,
    pub(super) waits: [Option<FenceWait>; DEPTH],
    pub(super) drain: DrainWait,
}

/// The shared device's state under its lock.
pub(super) struct Hub<D: Driver, const DEPTH: usize> {
    pub(super) lanes: [SharedLane<D, DEPTH>; DEPTH],
    /// Arrivals in order: only the head is admitted.
    arrivals: VecDeque<Arrival>,
    /// Outcomes settled for tickets that have not taken them yet.
    done: Vec<(u64, Delivery)>,
    /// Spare buffers for a `RunSpec` run's values, which outlive its lane.
    values: Arc<ValuePool>,
    /// Wakers of the tickets whose run is pending.
    ticket_wakers: Vec<(u64, Waker)>,
    /// Tickets dropped before their run settled: their outcome is dropped
    /// when it comes.
    dropped: Vec<u64>,
    next_id: u64,
    pub(super) closed: bool,
    /// The current publication's callables, and its number.
    pub(super) code: Vec<CodeEntry>,
    pub(super) publication: u64,
    /// The recovery under way, if any (`recovery.rs`): nothing is
    /// admitted until it ends.
    pub(super) recovery: Option<Recovery<DEPTH>>,
    /// Recoveries finished, and how long the last took (driver clock).
    pub(super) recoveries: u64,
    pub(super) last_recovery: Option<Duration>,
    /// Why the device closed itself, if it did.
    pub(super) lost: Option<LostCause>,
}

impl<D: Driver, const DEPTH: usize> Hub<D, DEPTH> {
    pub(super) fn new(lanes: [SharedLane<D, DEPTH>; DEPTH]) -> Self {
        Hub {
            lanes,
            arrivals: VecDeque::new(),
            done: Vec::new(),
            values: Arc::default(),
            ticket_wakers: Vec::new(),
            dropped: Vec::new(),
            next_id: 1,
            closed: false,
            code: Vec::new(),
            publication: 0,
            recovery: None,
            recoveries: 0,
            last_recovery: None,
            lost: None,
        }
    }

    /// A new arrival's id, at the back of the queue.
    pub(super) fn arrive(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.arrivals.push_back(Arrival { id, waker: None });
        id
    }

    /// `true` when `id` is the arrival to admit next.
    pub(super) fn is_head(&self, id: u64) -> bool {
        self.arrivals.front().is_some_and(|a| a.id == id)
    }

    /// `id` waits: `waker` is woken when it may be admitted.
    pub(super) fn wait_turn(&mut self, id: u64, waker: &Waker) {
        if let Some(a) = self.arrivals.iter_mut().find(|a| a.id == id) {
            match &mut a.waker {
                Some(w) if w.will_wake(waker) => {}
                w => *w = Some(waker.clone()),
            }
        }
    }

    /// `id` leaves the queue (admitted, refused or cancelled); the next
    /// arrival is woken.
    pub(super) fn leave(&mut self, id: u64) {
        let was_head = self.is_head(id);
        self.arrivals.retain(|a| a.id != id);
        if was_head {
            self.wake_head();
        }
    }

    /// Wakes the arrival to admit next (a lane may have come free).
    pub(super) fn wake_head(&mut self) {
        if let Some(w) = self.arrivals.front_mut().and_then(|a| a.waker.take()) {
            w.wake();
        }
    }

    /// Wakes every arrival (the device closed: each learns it).
    pub(super) fn wake_all(&mut self) {
        for a in &mut self.arrivals {
            if let Some(w) = a.waker.take() {
                w.wake();
            }
        }
    }

    /// A lane a submission can take now, if any.
    pub(super) fn free_lane(&self) -> Option<usize> {
        self.lanes.iter().position(Lane::is_free)
    }

    /// The lane that owes `ticket`'s result, if any.
    pub(super) fn lane_of(&self, ticket: u64) -> Option<usize> {
        (0..DEPTH).find(|&i| self.lanes[i].owed_tag() == Some(&ticket))
    }

    /// One look at lane `i`'s run (`wait`: the looker's own wait): once its
    /// verdict is in, its outcome goes to its ticket and the lane is free.
    pub(super) fn settle(&mut self, i: usize, wait: &mut FenceWait, waker: &Waker) -> Poll<()> {
        if self.lanes[i].poll_settle(wait, waker).is_pending() {
            return Poll::Pending;
        }
        self.collect(i);
        Poll::Ready(())
    }

    /// One look at every owing lane's run (`waits`: the looker's own wait
    /// per lane): each whose verdict is in goes to its ticket. `true` once
    /// no lane owes a result.
    pub(super) fn settle_owing(
        &mut self,
        waits: &mut [Option<FenceWait>; DEPTH],
        waker: &Waker,
    ) -> bool {
        let mut settled = true;
        for (i, wait) in waits.iter_mut().enumerate() {
            if !self.lanes[i].owes() {
                continue;
            }
            let w = wait.get_or_insert_with(|| FenceWait::new(Wait::Configured));
            if self.settle(i, w, waker).is_ready() {
                *wait = None;
            } else {
                settled = false;
            }
        }
        settled
    }

    /// Lane `i`'s outcome, if it owes one, to its ticket (or dropped with
    /// it); a lane came free: the next arrival is woken.
    pub(super) fn collect(&mut self, i: usize) {
        let Some((stub, outcome)) = self.lanes[i].complete() else {
            return;
        };
        // The values first, before the workload moves (a kilobyte: built
        // into the delivery in one move).
        let values = match (&outcome, self.lanes[i].has_work()) {
            (Ok(_), false) => Values::pooled(self.lanes[i].values(), &self.values),
            _ => Values::EMPTY,
        };
        let work = self.lanes[i].take_work();
        let id = stub.tag;
        let delivery = match outcome {
            Ok(wall) => Ok(Completed {
                tag: (),
                run: stub.run,
                seq: stub.seq,
                wall,
                values,
                work,
                lent: std::marker::PhantomData,
            }),
            Err(e) => Err(e.map_value(|()| work)),
        };
        if let Some(k) = self.dropped.iter().position(|&d| d == id) {
            self.dropped.swap_remove(k);
        } else {
            self.done.push((id, delivery));
            if let Some(k) = self.ticket_wakers.iter().position(|(t, _)| *t == id) {
                self.ticket_wakers.swap_remove(k).1.wake();
            }
        }
        self.wake_head();
    }

    /// `ticket`'s outcome, if it was settled.
    pub(super) fn take_done(&mut self, ticket: u64) -> Option<Delivery> {
        let k = self.done.iter().position(|(t, _)| *t == ticket)?;
        Some(self.done.swap_remove(k).1)
    }

    /// `ticket` waits for its run: `waker` is woken when another looker
    /// settles it.
    pub(super) fn wait_ticket(&mut self, ticket: u64, waker: &Waker) {
        match self.ticket_wakers.iter_mut().find(|(t, _)| *t == ticket) {
            Some((_, w)) if w.will_wake(waker) => {}
            Some((_, w)) => w.clone_from(waker),
            None => self.ticket_wakers.push((ticket, waker.clone())),
        }
    }

    /// `ticket` looks for itself: no waker of its to wake.
    pub(super) fn unwait_ticket(&mut self, ticket: u64) {
        if let Some(k) = self.ticket_wakers.iter().position(|(t, _)| *t == ticket) {
            self.ticket_wakers.swap_remove(k);
        }
    }

    /// `ticket` was dropped before it resolved: its outcome, settled or
    /// to come, is dropped. Its run is looked at once (never waited for):
    /// complete, its lane is free at once; otherwise the lane is taken
    /// back by the next submission that looks at it.
    pub(super) fn drop_ticket(&mut self, ticket: u64) {
        self.ticket_wakers.retain(|(t, _)| *t != ticket);
        if self.take_done(ticket).is_some() {
            return;
        }
        if let Some(i) = self.lane_of(ticket) {
            self.dropped.push(ticket);
            self.reclaim(i);
        }
    }

    /// Lane `i`'s run, if its ticket was dropped and the run is complete:
    /// finalized, its outcome dropped, the lane free.
    fn reclaim(&mut self, i: usize) {
        if self.lanes[i].settle_if_done() {
            self.collect(i);
        }
    }

    /// Every lane whose ticket was dropped, looked at once: those whose
    /// runs are complete are free again (what a submission does before it
    /// takes a lane, so a dropped ticket's slot comes back at the next
    /// submission once its run is complete, not only when every slot is
    /// busy).
    pub(super) fn reclaim_dropped(&mut self) {
        for k in (0..self.dropped.len()).rev() {
            let Some(&ticket) = self.dropped.get(k) else {
                continue;
            };
            if let Some(i) = self.lane_of(ticket) {
                self.reclaim(i);
            }
        }
    }

    /// After a drain or a publication reset every slot: fresh claims.
    pub(super) fn renew(&mut self, cell: &Arc<Cell<D, DEPTH>>)
    where
        crate::contract::slot::Depth<DEPTH>: crate::contract::slot::SupportedDepth,
    {
        for lane in &mut self.lanes {
            lane.renew(cell);
        }
    }
}

/// The action a refused admission names.
pub(super) const SUBMIT: Action = Action::Submit;
