//! The one wait: a *look* at a run's fence or at the queue decides a
//! verdict, or what to sleep on and for how long; the overrun judgement
//! (`fence.rs`) and the one stall rule ([`Stall::woke`]) live in it. Two
//! sleepers run looks to their end, each telling the next look what its
//! sleep said:
//!
//! - a task ([`Device::poll_look`]): arms its waker for what the look
//!   named ([`Driver::notify_event`], or on time, backing off, where the
//!   driver cannot see completion) and returns `Pending`;
//! - a thread ([`Device::wait_fence`], [`Device::drain`], and every
//!   blocking form above them): the same poll, driven by
//!   `contract/sleep.rs`'s `block_on`, which sleeps in the driver's own
//!   blocking call on what the look named ([`Sleeps`] below). A blocking
//!   fence sleeps on the run's fence *before* its first look, so a run
//!   that completes within a slice costs one call.
//!
//! What a wait keeps between looks is a [`FenceWait`] or a [`DrainWait`];
//! nothing else survives a look, so a future dropped between two polls
//! leaves the device as a look found it.
//!
//! [`Stall::woke`]: crate::contract::wait::Stall::woke

use std::sync::atomic::Ordering;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::{Device, DrainReport, MIN_SLICE};
use crate::contract::error::{ErrorKind, RunId};
use crate::contract::inflight::Proof;
use crate::contract::sleep::{self, Sleeps, block_on};
use crate::contract::wait::{Backoff, DrainWait, FenceWait, On, Said, Sleep, Wait, Waits, Woke};
use crate::driver::{Completion, Driver, EventId, Notice, StreamId, wake_after};

/// What the device learned of its driver's notifications (the first
/// answer decides; a device asks one driver).
pub(super) const NOTICE_UNKNOWN: u8 = 0;
const NOTICE_COMPLETION: u8 = 1;
const NOTICE_TIMER: u8 = 2;

/// What one look found: a verdict, or what to sleep on.
pub(super) enum Look<T, E = ErrorKind> {
    Done(Result<T, E>),
    Sleep(Sleep),
}

/// The launched run a fence look is about: its slot and claim, identity
/// and place in the queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fencing {
    pub(crate) slot: usize,
    pub(crate) lease: u64,
    pub(crate) run: RunId,
    pub(crate) seq: u64,
}

impl<D: Driver, const DEPTH: usize> Sleeps for Device<D, DEPTH> {
    #[inline]
    fn sleep(&self, s: Sleep) -> Woke {
        let within = s.within.max(MIN_SLICE);
        let said = Said::of(match s.on {
            On::Event(ev) => self.driver.sync_event(ev, within),
            On::Stream { stream, .. } => self.driver.sync_stream(stream, within),
        });
        Woke::Slept {
            on: s.on,
            within,
            said,
        }
    }

    fn backstop(&self) -> Duration {
        self.slice_cap()
    }
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// Runs `look` once for a task (or a thread's poll, see
    /// `contract/sleep.rs`): its verdict, or `Pending` with the waker armed
    /// for what it named. A driver that answers `Ready` to the arming (the
    /// event completed between the look and the arming) is looked at again
    /// at once, a few times, then on time: never a busy loop.
    pub(super) fn poll_look<W: Waits, T, E>(
        &self,
        w: &mut W,
        waker: &Waker,
        look: impl FnMut(&mut W, &Woke) -> Look<T, E>,
    ) -> Poll<Result<T, E>> {
        self.poll_look_after(w, waker, sleep::woke(waker), look)
    }

    /// [`poll_look`](Self::poll_look), its first look told `woke`.
    fn poll_look_after<W: Waits, T, E>(
        &self,
        w: &mut W,
        waker: &Waker,
        mut woke: Woke,
        mut look: impl FnMut(&mut W, &Woke) -> Look<T, E>,
    ) -> Poll<Result<T, E>> {
        for _ in 0..4 {
            let s = match look(w, &woke) {
                Look::Done(r) => return Poll::Ready(r),
                Look::Sleep(s) => s,
            };
            let cap = self.slice_cap();
            if let Some(within) = self.arm(s, &mut w.sleeping().backoff, cap, waker) {
                w.sleeping().stall.note_armed(s.at, within);
                return Poll::Pending;
            }
            woke = Woke::Polled;
        }
        let cap = self.slice_cap();
        let within = arm_time(cap, &mut w.sleeping().backoff, cap, waker);
        w.sleeping().stall.note_armed(self.driver.clock(), within);
        Poll::Pending
    }

    /// Arms `waker` for `s`: a thread's sleeper records it (it sleeps
    /// exactly what was asked); a task's waker is armed for the event,
    /// shortened to the backoff where the driver wakes on time only, or on
    /// time alone for a stream no fence covers. The time asked for;
    /// `None`: the driver answered [`Notice::Ready`] (look again now).
    fn arm(
        &self,
        s: Sleep,
        backoff: &mut Backoff,
        cap: Duration,
        waker: &Waker,
    ) -> Option<Duration> {
        if sleep::ask(waker, s) {
            return Some(s.within);
        }
        let ev = match s.on {
            On::Event(ev)
            | On::Stream {
                fence: Some(ev), ..
            } => ev,
            On::Stream { fence: None, .. } => return Some(arm_time(s.within, backoff, cap, waker)),
        };
        let within = if self.notices.load(Ordering::Relaxed) == NOTICE_COMPLETION {
            s.within
        } else {
            shorten(s.within, backoff, cap)
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

    /// One look at `run`'s fence: complete, a fault, an overrun proven
    /// by a query after the budget ran out (`judge`), the limit spent; or
    /// a sleep on the run's fence event until the next time a verdict
    /// could fall (the limit, the head's budget, a look-around slice).
    /// What the sleep before said replaces the query it answers.
    pub(super) fn look_fence(&self, run: Fencing, w: &mut FenceWait, woke: &Woke) -> Look<()> {
        let d = &self.driver;
        let ev = self.regions[run.slot].ev_fence;
        let on = On::Event(ev);
        // Dated when the wait had begun: a run behind it may be judged on
        // the date.
        let at = |w: &FenceWait| w.clock.map(|_| d.clock());
        // What the sleep before said of the fence, or else a query's
        // answer — unless the sleep ran its time on it (still not
        // complete then). Looking at the slot's fence is harmless whoever
        // it is recorded for: the claim is checked as the run settles.
        let said = match woke.of(on) {
            Some(r) => Some(r.map_err(Clone::clone)),
            None if woke.ran_out_on(on) => None,
            None => match d.query_event(ev) {
                Ok(Completion::Complete) => Some(Ok(())),
                Ok(Completion::NotReady) => None,
                Err(e) => Some(Err(e)),
            },
        };
        match said {
            Some(Ok(())) => {
                return Look::Done(self.settle_checked(run.slot, run.lease, run.seq, at(w)));
            }
            Some(Err(e)) => {
                return Look::Done(match self.in_flight_entry(run.slot, run.lease, run.seq) {
                    Ok(_) => Err(self.settle_error(e, run.run, run.slot, run.seq)),
                    Err(k) => Err(k),
                });
            }
            None => {}
        }
        if let Err(k) = self.in_flight_entry(run.slot, run.lease, run.seq) {
            return Look::Done(Err(k));
        }
        let clock = match (w.clock.as_mut(), w.how) {
            (Some(clock), _) => clock,
            (None, Wait::Poll) => return Look::Done(Err(ErrorKind::NotReady)),
            (None, how) => {
                // A sleep before the first look counts towards the limit.
                let start = d.clock().saturating_sub(woke.slept());
                let limit = match how {
                    Wait::For(t) => Some(t),
                    _ => None,
                };
                w.clock.insert(self.wait_clock(run.seq, start, limit))
            }
        };
        let unshown = w.sleeping.stall.woke(d.clock(), woke);
        match self.judge(run.seq, clock, unshown) {
            Ok((within, at)) => Look::Sleep(Sleep {
                on,
                within,
                at,
                seq: run.seq,
            }),
            Err(verdict) => Look::Done(Err(verdict)),
        }
    }

    /// One look at the run `seq` a buffer's last binder may be, for a
    /// wait that only *observes* it (`buffers.rs`'s `quiet`): complete,
    /// or observed so, is `Ok` (it is marked seen through, never settled:
    /// its holder finds it as it left it); unproven, an overrun at the head
    /// of the queue (judged as a fence judges it) or the limit spent is
    /// `Err(())`, the buffer busy; otherwise a sleep on its fence.
    pub(super) fn look_quiet(&self, seq: u64, w: &mut FenceWait, woke: &Woke) -> Look<(), ()> {
        let d = &self.driver;
        let entry = {
            let st = self.lock();
            st.queue.runs().iter().find(|e| e.seq == seq).copied()
        };
        let Some(e) = entry.filter(|e| !e.observed) else {
            return Look::Done(Ok(()));
        };
        let on = On::Event(self.regions[e.slot].ev_fence);
        match woke.of(on) {
            Some(Ok(())) => {
                self.lock().queue.seen_through(seq, d.clock());
                return Look::Done(Ok(()));
            }
            // A fault: the run's own fence (or a drain) reports it; the
            // buffer stays busy until then.
            Some(Err(_)) => return Look::Done(Err(())),
            None => {}
        }
        if e.proof == Proof::Unproven || self.look_ahead(seq).is_some() {
            return Look::Done(Err(()));
        }
        let now = d.clock();
        let limit = match w.how {
            Wait::For(t) => t,
            _ => Duration::MAX,
        };
        let clock = *w
            .clock
            .get_or_insert_with(|| self.wait_clock(seq, now, Some(limit)));
        let elapsed = now
            .saturating_sub(clock.start)
            .saturating_add(w.sleeping.stall.woke(now, woke));
        if clock.limited && elapsed >= clock.limit {
            return Look::Done(Err(()));
        }
        let within = self
            .slice_cap()
            .min(clock.limit.saturating_sub(elapsed))
            .max(MIN_SLICE);
        Look::Sleep(Sleep {
            on,
            within,
            at: now,
            seq,
        })
    }

    /// Waits for run `f`'s own fence on this thread, as `how` says: first
    /// a sleep on the run's fence of at most a look-around slice (within
    /// the limit), then the fence's look after each sleep — the awaited
    /// poll, driven by `block_on`. `Wait::Poll` is a single look. The
    /// time the wait counted against its limit is added to `counted`, if
    /// given (a `Pipeline`'s drop sums its waits').
    pub(crate) fn wait_fence(
        &self,
        f: Fencing,
        how: Wait,
        counted: Option<&mut Duration>,
    ) -> Result<(), ErrorKind> {
        let cap = self.slice_cap();
        let within = match how {
            Wait::Poll => None,
            Wait::For(t) => Some(t.min(cap).max(MIN_SLICE)),
            Wait::Configured => Some(cap),
        };
        let first = match within {
            None => Woke::Polled,
            Some(within) => {
                let ev = self.regions[f.slot].ev_fence;
                match self.driver.sync_event(ev, within) {
                    // The look's answer to "complete" (no clock yet, so
                    // not dated), without building what it reads.
                    Ok(()) => return self.settle_checked(f.slot, f.lease, f.seq, None),
                    said => Woke::Slept {
                        on: On::Event(ev),
                        within,
                        said: Said::of(said),
                    },
                }
            }
        };
        self.wait_fence_after(f, how, &first, counted)
    }

    /// [`wait_fence`](Self::wait_fence) past its first sleep, which said
    /// `first`: the first look here hears it (a run that completed within
    /// it settles with no other call, and nothing of the thread's sleeper
    /// is touched); otherwise the look's sleep is the thread loop's first.
    /// Kept out of line: the common blocking fence ends in its first sleep.
    #[inline(never)]
    fn wait_fence_after(
        &self,
        f: Fencing,
        how: Wait,
        first: &Woke,
        counted: Option<&mut Duration>,
    ) -> Result<(), ErrorKind> {
        let mut w = FenceWait::new(how);
        let r = match self.look_fence(f, &mut w, first) {
            Look::Done(r) => r,
            Look::Sleep(next) => {
                w.sleeping.stall.note_armed(next.at, next.within);
                block_on(self, Some(next), |cx| {
                    self.poll_look(&mut w, cx.waker(), |w, woke| self.look_fence(f, w, woke))
                })
            }
        };
        if let Some(counted) = counted {
            *counted = counted.saturating_add(w.counted(self.driver.clock()));
        }
        r
    }

    /// Sleeps one look-around slice on slot `slot`'s fence, whoever it is
    /// recorded for — what a thread waiting for the slot's run sleeps on
    /// before its first look — for a wait that keeps the answer itself
    /// (`FenceWait::told`): `Some(true)` the
    /// fence is complete, `Some(false)` it ran its time; `None` no answer
    /// to keep (no such slot, or a failure, which the look finds again).
    pub(crate) fn fence_slice(&self, slot: usize) -> Option<bool> {
        let ev = self.regions.get(slot)?.ev_fence;
        match self.driver.sync_event(ev, self.slice_cap()) {
            Ok(()) => Some(true),
            Err(e) if e.is_timeout() => Some(false),
            Err(_) => None,
        }
    }

    /// What a drain's look needs of the state, under one lock: whether it
    /// must sync at all, the runs in flight, the streams (AICPU first) and
    /// the newest fence not yet seen complete. A capture left open keeps
    /// its streams from answering: it is ended first, or the drain reports
    /// why it cannot be.
    fn drain_view(&self) -> Result<(bool, usize, [StreamId; 2], Option<EventId>), ErrorKind> {
        let mut st = self.lock();
        self.end_open_capture(&mut st)?;
        let runs = st.queue.runs();
        let fence: Option<EventId> = runs
            .iter()
            .filter(|e| e.proof == Proof::Pending && !e.observed)
            .last()
            .map(|e| self.regions[e.slot].ev_fence);
        Ok((
            !runs.is_empty() || st.queue.poison().is_some() || st.graphs.unsynced,
            runs.len(),
            [st.streams.aicpu(), st.streams.aicore()],
            fence,
        ))
    }

    /// One look at the queue for a drain: both streams quiet (or stopped
    /// on a fault) — then the drain's work is done ([`Device::drained`]) —
    /// or [`ErrorKind::Undrained`] once the limit is spent; otherwise a
    /// sleep on the first stream not proven quiet (a task wakes on the
    /// newest fence not complete, which covers everything ahead of it, or
    /// on time where no fence covers the work: a partial launch).
    pub(super) fn look_drain(&self, w: &mut DrainWait, woke: &Woke) -> Look<DrainReport> {
        let d = &self.driver;
        let (needs_sync, in_flight, streams, fence) = match self.drain_view() {
            Ok(view) => view,
            Err(k) => return Look::Done(Err(k)),
        };
        if !needs_sync {
            return Look::Done(self.drained(false, [false; 2]));
        }
        let (start, limit, count) = *w.start.get_or_insert_with(|| {
            let limit = w
                .timeout
                .unwrap_or_else(|| self.config.queue_budget(in_flight));
            (d.clock(), limit, in_flight)
        });
        // The streams in order, each looked at once it is the first not
        // proven quiet: what a sleep on it said, or a query.
        let mut busy = None;
        for (i, stream) in streams.into_iter().enumerate() {
            if w.quiet[i] {
                continue;
            }
            let on = On::Stream { stream, fence };
            let said = match woke.of(on) {
                Some(Ok(())) => Ok(Completion::Complete),
                Some(Err(e)) => Err(e.clone()),
                None if woke.ran_out_on(on) => Ok(Completion::NotReady),
                None => d.query_stream(stream),
            };
            match said {
                Ok(Completion::Complete) => w.quiet[i] = true,
                // A faulted stream runs nothing more: the drain replaces it.
                Err(e) if e.is_kernel_fault() => {
                    w.quiet[i] = true;
                    w.faulted[i] = true;
                }
                Err(e) => return Look::Done(Err(ErrorKind::from_driver(e))),
                Ok(Completion::NotReady) => {
                    busy = Some(on);
                    break;
                }
            }
        }
        let Some(on) = busy else {
            return Look::Done(self.drained(true, w.faulted));
        };
        let now = d.clock();
        let elapsed = now
            .saturating_sub(start)
            .saturating_add(w.sleeping.stall.woke(now, woke));
        if start.checked_add(limit).is_some() && elapsed >= limit {
            return Look::Done(Err(ErrorKind::Undrained {
                count,
                waited: elapsed,
            }));
        }
        let within = self
            .slice_cap()
            .min(limit.saturating_sub(elapsed))
            .max(MIN_SLICE);
        Look::Sleep(Sleep {
            on,
            within,
            at: now,
            seq: u64::MAX,
        })
    }

    /// Proves the queue quiet — waiting at most `timeout` (`None`: the
    /// queue budget, `(in flight + 1) × fence_timeout`;
    /// `Some(Duration::MAX)`: without a deadline) — and returns every slot
    /// to service: the drain's look, driven on this thread.
    ///
    /// Callers hold exclusive access to the device or its runner, so no
    /// token, prepared, launched or fenced run is alive: anything still in
    /// the in-flight set was forgotten, lost in a partial launch, or is
    /// unproven; a `Held` slot's token was forgotten.
    pub(crate) fn drain(&self, timeout: Option<Duration>) -> Result<DrainReport, ErrorKind> {
        let mut w = DrainWait::new(timeout);
        block_on(self, None, |cx| {
            self.poll_look(&mut w, cx.waker(), |w, woke| self.look_drain(w, woke))
        })
    }

    /// The drain's look for a future: `Ready` with [`Device::drain`]'s
    /// answer, or `Pending` with `waker` armed.
    pub(crate) fn poll_drain(
        &self,
        w: &mut DrainWait,
        waker: &Waker,
    ) -> Poll<Result<DrainReport, ErrorKind>> {
        self.poll_look(w, waker, |w, woke| self.look_drain(w, woke))
    }

    /// The fence's look for a future: `Ready` with its verdict, or
    /// `Pending` with `waker` armed.
    pub(crate) fn poll_fence(
        &self,
        f: Fencing,
        w: &mut FenceWait,
        waker: &Waker,
    ) -> Poll<Result<(), ErrorKind>> {
        if let Some(complete) = w.told.take() {
            return self.poll_fence_told(f, w, waker, complete);
        }
        self.poll_look(w, waker, |w, woke| self.look_fence(f, w, woke))
    }

    /// [`poll_fence`](Self::poll_fence) after the wait's owner slept one
    /// slice on the run's fence itself (a blocking ticket): complete, the
    /// run settles; otherwise the first look is told the sleep ran its
    /// time (no query needs to say so again).
    fn poll_fence_told(
        &self,
        f: Fencing,
        w: &mut FenceWait,
        waker: &Waker,
        complete: bool,
    ) -> Poll<Result<(), ErrorKind>> {
        if complete {
            // The look's answer to "complete", without building what it
            // reads (as `wait_fence`'s first sleep).
            let at = w.clock.map(|_| self.driver.clock());
            return Poll::Ready(self.settle_checked(f.slot, f.lease, f.seq, at));
        }
        let woke = Woke::Slept {
            on: On::Event(self.regions[f.slot].ev_fence),
            within: self.slice_cap(),
            said: Said::RanOut,
        };
        self.poll_look_after(w, waker, woke, |w, woke| self.look_fence(f, w, woke))
    }
}

/// `within`, shortened to the backoff (which doubles, up to `cap`).
fn shorten(within: Duration, backoff: &mut Backoff, cap: Duration) -> Duration {
    backoff.shorten(within, cap).max(MIN_SLICE)
}

/// Arms `waker` on time alone, backing off: the time asked for.
fn arm_time(within: Duration, backoff: &mut Backoff, cap: Duration, waker: &Waker) -> Duration {
    let within = shorten(within, backoff, cap);
    wake_after(within, waker);
    within
}
