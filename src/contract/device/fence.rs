//! Waiting for a run's own fence, and what the wait proves: the
//! queue-aware time rule (a run's budget starts when it reaches the head of
//! the queue, on the driver's clock) and the "device overran" verdict.
//! (Whom a device fault belongs to is `faults.rs`.)

use std::time::Duration;

use super::look::Fencing;
use super::state::SlotState;
use super::{Device, MIN_SLICE};
use crate::contract::error::{ErrorKind, PoisonCause, RunId};
use crate::contract::inflight::{Entry, Proof};
use crate::contract::wait::{Wait, WaitClock};
use crate::driver::{Completion, Driver};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// Run `seq` in `slot`, claimed with `lease`, was observed complete at
    /// driver-clock time `at` (`None`: not dated, on the fast paths) —
    /// observed before its claim was checked: the claim is checked here,
    /// under the lock that settles it (a stale claim settles nothing). The
    /// run leaves the in-flight set, its slot goes back to its holder, and
    /// every run behind it learns that one more run ahead was done.
    // Measured: a call here is ~30 instructions of a blocking fence that
    // completes within its first sleep, and plain `#[inline]` is not taken.
    #[allow(clippy::inline_always, reason = "the blocking fence's common end")]
    #[inline(always)]
    pub(super) fn settle_checked(
        &self,
        slot: usize,
        lease: u64,
        seq: u64,
        at: Option<Duration>,
    ) -> Result<(), ErrorKind> {
        let mut st = self.lock();
        st.slots.check_in_flight(slot, lease)?;
        if !st.queue.runs().iter().any(|e| e.seq == seq) {
            return Err(st.slots.stale(slot, lease));
        }
        st.queue.complete(seq, at);
        st.slots.completed(slot, lease);
        st.stats.fenced += 1;
        Ok(())
    }

    /// The entry of the launched run `seq` holding `slot` with `lease`.
    pub(super) fn in_flight_entry(
        &self,
        slot: usize,
        lease: u64,
        seq: u64,
    ) -> Result<Entry, ErrorKind> {
        let st = self.lock();
        st.slots.check_in_flight(slot, lease)?;
        st.queue
            .runs()
            .iter()
            .find(|e| e.seq == seq)
            .copied()
            .ok_or_else(|| st.slots.stale(slot, lease))
    }

    /// How long a wait waits at most before it looks at the runs ahead
    /// again: an eighth of the fence timeout (at least [`MIN_SLICE`]).
    pub(super) fn slice_cap(&self) -> Duration {
        (self.config.fence_timeout / 8).max(MIN_SLICE)
    }

    /// The clock of a wait on run `seq` that began at `start`: `limit`, or
    /// (`None`) the queue budget — the runs ahead and this one, each its
    /// budget, plus one slice: a run the fast path did not date is dated
    /// when first looked at, up to a slice late, and a verdict must still
    /// fit.
    pub(super) fn wait_clock(
        &self,
        seq: u64,
        start: Duration,
        limit: Option<Duration>,
    ) -> WaitClock {
        let configured = limit.is_none();
        let limit = limit.unwrap_or_else(|| {
            let ahead = self.lock().queue.runs().ahead_of(seq);
            self.config
                .queue_budget(ahead)
                .saturating_add(self.slice_cap())
        });
        WaitClock {
            start,
            limit,
            // No deadline when the limit lies past the end of the clock.
            limited: start.checked_add(limit).is_some(),
            configured,
            capped: false,
        }
    }

    /// One judgement of a wait on run `seq`, for the blocking wait and the
    /// awaited one alike (`unshown`: time the driver's clock did not show):
    /// `Err` with the verdict — an overrun at the head of the queue, proven
    /// by a query after its budget ran out, or the limit spent — or `Ok`
    /// with how long to wait before judging again (at least a little, so
    /// that even a virtual clock moves on: never past a verdict, the limit,
    /// or a look-around slice) and the driver-clock time judged at.
    pub(super) fn judge(
        &self,
        seq: u64,
        clock: &mut WaitClock,
        unshown: Duration,
    ) -> Result<(Duration, Duration), ErrorKind> {
        let d = &self.driver;
        let budget = self.config.fence_timeout;
        if let Some(hung) = self.look_ahead(seq) {
            return Err(ErrorKind::Timeout {
                waited: d
                    .clock()
                    .saturating_sub(clock.start)
                    .saturating_add(unshown),
                overran: Some(hung),
            });
        }
        let now = d.clock();
        let elapsed = now.saturating_sub(clock.start).saturating_add(unshown);
        if clock.limited && elapsed >= clock.limit {
            return Err(ErrorKind::Timeout {
                waited: elapsed,
                overran: None,
            });
        }
        let head = {
            let mut st = self.lock();
            st.queue.date(now);
            st.queue.runs().head().copied()
        };
        if clock.configured
            && !clock.capped
            && head.is_some_and(|h| h.proof == Proof::Unproven && h.seq != seq)
        {
            // The head of the queue could not be proven complete (it
            // overran or faulted: the runner is poisoned). Nothing behind
            // it can be dated any more, so the rest of the queue budget
            // would prove nothing sooner: one more budget from here, then
            // "not yet" (the run comes back, or its drop quarantines the
            // slot). So runs dropped one after another behind a hung run
            // wait one budget each, not a growing queue budget each.
            clock.limit = clock.limit.min(elapsed.saturating_add(budget));
            clock.limited = clock.start.checked_add(clock.limit).is_some();
            clock.capped = true;
        }
        let mut slice = self.slice_cap();
        if clock.limited {
            slice = slice.min(clock.limit.saturating_sub(elapsed));
        }
        if let Some(verdict_at) = head
            .filter(|h| h.proof == Proof::Pending)
            .and_then(|h| h.head_since()?.checked_add(budget))
        {
            slice = slice.min(verdict_at.saturating_sub(now));
        }
        Ok((slice.max(MIN_SLICE), now))
    }

    /// Waits for every launched run still in flight, oldest first, within
    /// **one total limit** on the driver's clock — by default the queue
    /// budget `(runs in flight + 1) × fence_timeout` — and marks each run
    /// not proven complete by then as unproven, so that dropping its handle
    /// afterwards quarantines its slot at once instead of waiting again.
    /// What a drop of many runs at once (a pipeline's) waits: one bound for
    /// all of them, not one per run. Verdicts are as for a fence (an overrun
    /// at the head of the queue poisons, naming that run); nothing else is
    /// changed: completed runs go back to their handles as a fence leaves
    /// them.
    pub(crate) fn settle_in_flight(&self, limit: Option<Duration>) {
        let d = &self.driver;
        let mut queue = [None::<(Entry, u64)>; DEPTH];
        let n = {
            let st = self.lock();
            let runs = st.queue.runs();
            let pending = runs.iter().filter_map(|e| match st.slots.state(e.slot) {
                SlotState::InFlight { lease } if e.proof == Proof::Pending => Some((*e, lease)),
                _ => None,
            });
            for (q, e) in queue.iter_mut().zip(pending) {
                *q = Some(e);
            }
            runs.len()
        };
        if n == 0 {
            return;
        }
        let limit = limit.unwrap_or_else(|| self.config.queue_budget(n));
        let start = d.clock();
        // What the waits so far counted, each on its own clock (the time
        // a stalled clock did not show included): one total limit.
        let mut counted = Duration::ZERO;
        for (e, lease) in queue.iter().flatten() {
            let spent = d.clock().saturating_sub(start).max(counted);
            let left = limit.saturating_sub(spent);
            if left.is_zero() {
                break;
            }
            let f = Fencing {
                slot: e.slot,
                lease: *lease,
                run: e.run,
                seq: e.seq,
            };
            // Called from `Drop`s: a panicking driver must not abort.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.wait_fence(f, Wait::For(left), Some(&mut counted))
            }));
        }
        let mut st = self.lock();
        for (e, _) in queue.iter().flatten() {
            // A run completed meanwhile has left the set: this is a no-op.
            st.queue.unprove(e.seq, PoisonCause::Unproven);
        }
    }

    /// Queries the fences of the runs up to `seq` not yet observed
    /// complete, in stream order, records what completed, and returns the
    /// run at the head of the queue when it has overrun its budget (the
    /// runner is then poisoned, naming it).
    pub(super) fn look_ahead(&self, seq: u64) -> Option<RunId> {
        let d = &self.driver;
        // Everything undated happened before this read: a safe date.
        let now = d.clock();
        let mut queue = [None::<Entry>; DEPTH];
        {
            let mut st = self.lock();
            st.queue.date(now);
            let runs = st.queue.runs();
            let ahead = runs.iter().filter(|e| e.seq <= seq && !e.observed);
            for (q, e) in queue.iter_mut().zip(ahead) {
                *q = Some(*e);
            }
        }
        let mut done = [None::<(u64, Duration)>; DEPTH];
        let mut head = None;
        for (e, slot_done) in queue.iter().flatten().zip(done.iter_mut()) {
            if e.proof == Proof::Unproven {
                // Nothing behind a run that cannot be proven complete can be
                // dated; the runner is poisoned already (an unproven run
                // always poisons: `state/queue.rs`).
                break;
            }
            let asked = d.clock();
            match d.query_event(self.regions[e.slot].ev_fence) {
                Ok(Completion::Complete) => *slot_done = Some((e.seq, d.clock())),
                Ok(Completion::NotReady) => {
                    head = Some((*e, asked));
                    break;
                }
                // A fault ahead reaches this run's own fence too; the next
                // wait on it reports it.
                Err(_) => break,
            }
        }
        let mut st = self.lock();
        for &(seq, at) in done.iter().flatten() {
            st.queue.seen_complete(seq, at);
        }
        let (h, asked) = head?;
        // Still the head, still pending (nobody observed or judged it
        // meanwhile), and found incomplete after its budget ran out?
        let now_head = st.queue.runs().head().copied()?;
        let overran = now_head.seq == h.seq
            && now_head.proof == Proof::Pending
            && now_head
                .head_since()
                .and_then(|since| since.checked_add(self.config.fence_timeout))
                .is_some_and(|verdict_at| asked >= verdict_at);
        if !overran {
            return None;
        }
        st.queue.poison_with(PoisonCause::Overrun, h.run, h.slot);
        Some(h.run)
    }
}
