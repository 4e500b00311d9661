//! Completion notifications: the wakers that
//! [`Driver::notify_event`](crate::driver::Driver::notify_event) arms, kept
//! in the device state with their deadline, and what is due of them after
//! the simulation moved.
//!
//! Nothing here changes the simulation: arming, evaluating and taking
//! wakers read the events and streams, never step them. Wakers are handed
//! out ([`DeviceState::due_wakers`]) to be woken once the caller has
//! released the simulator's lock — a woken task may call the driver at once.

use std::collections::BTreeMap;
use std::task::Waker;
use std::time::Duration;

use super::{DeviceState, TaskKind};
use crate::driver::abi;
use crate::driver::wake::nap::Nap;
use crate::driver::{DriverErrorKind, Notice};

/// Most wakers kept for one event. An arm beyond it wakes the oldest (a
/// wake is a hint: its task looks again, and re-arms if it must), so the
/// armed set stays bounded whatever the callers do.
pub(crate) const MAX_WAKERS_PER_EVENT: usize = 64;

/// One armed waker.
struct Armed {
    waker: Waker,
    /// Host tick (the clock [`DeviceState::now`] reads) at which the waker
    /// is due even if the event is not complete; `u64::MAX`: never.
    deadline: u64,
}

/// The armed wakers, by event.
#[derive(Default)]
pub(crate) struct Notify {
    armed: BTreeMap<u64, Vec<Armed>>,
    /// Wakers already taken out of `armed` (evicted by
    /// [`MAX_WAKERS_PER_EVENT`]), woken with the next due ones.
    evicted: Vec<Waker>,
    /// Real time: the device thread's nap, while it sleeps
    /// (`driver::wake::nap`): an arm due before it ends, or a change while
    /// a waker is armed, must kick it.
    pub nap: Nap,
}

impl Notify {
    /// Whether any waker is armed (evicted ones included).
    pub fn any_armed(&self) -> bool {
        !self.armed.is_empty() || !self.evicted.is_empty()
    }

    /// Wakers armed now, over every event.
    #[cfg(test)]
    pub fn armed(&self) -> usize {
        self.armed.values().map(Vec::len).sum()
    }

    /// Takes out every waker, armed or evicted (the simulator is shutting
    /// down: they are dropped, not woken, once the lock is released).
    pub fn take_all(&mut self) -> Vec<Waker> {
        let mut all = std::mem::take(&mut self.evicted);
        all.extend(
            std::mem::take(&mut self.armed)
                .into_values()
                .flatten()
                .map(|a| a.waker),
        );
        all
    }
}

impl DeviceState {
    /// `notify_event`'s answer for `event`: [`Notice::Ready`] when its last
    /// record is complete (a never-recorded event included) or its stream
    /// faulted, nothing armed; else `waker` is armed with a deadline
    /// `within` from now on [`DeviceState::now`]'s clock, and the answer is
    /// [`Notice::Completion`]. A waker that [`Waker::will_wake`] one already
    /// armed for the event replaces it (keeping the earlier deadline).
    pub fn arm_notify(
        &mut self,
        event: u64,
        within: Duration,
        waker: &Waker,
    ) -> Result<Notice, DriverErrorKind> {
        match self.event_done(event) {
            Ok(Some(_)) => return Ok(Notice::Ready),
            Err(e) if e.is_kernel_fault() => return Ok(Notice::Ready),
            Err(other) => return Err(other),
            Ok(None) => {}
        }
        let deadline = self.deadline_after(within);
        let list = self.notify.armed.entry(event).or_default();
        if let Some(a) = list.iter_mut().find(|a| a.waker.will_wake(waker)) {
            // The same task again: one entry, whose waker is the newest
            // (`clone_from` keeps the old one when they wake the same task).
            a.waker.clone_from(waker);
            a.deadline = a.deadline.min(deadline);
            return Ok(Notice::Completion);
        }
        if list.len() >= MAX_WAKERS_PER_EVENT {
            let oldest = list.remove(0);
            self.notify.evicted.push(oldest.waker);
        }
        list.push(Armed {
            waker: waker.clone(),
            deadline,
        });
        Ok(Notice::Completion)
    }

    /// The host tick at which `within` from now has passed, rounded up (a
    /// deadline is never early); `u64::MAX` when past the clock's end.
    fn deadline_after(&self, within: Duration) -> u64 {
        let since_origin = match self.base {
            Some(b) => b.elapsed(),
            None => Duration::from_nanos(abi::ticks_to_nanos(self.ticks)),
        };
        let Some(at) = since_origin.checked_add(within) else {
            return u64::MAX;
        };
        let per_tick = u128::from(abi::NANOS_PER_TICK);
        u64::try_from(at.as_nanos().div_ceil(per_tick)).unwrap_or(u64::MAX)
    }

    /// Whether [`due_wakers`](Self::due_wakers) would take any out now
    /// (nothing is taken).
    pub fn has_due_wakers(&self) -> bool {
        if !self.notify.evicted.is_empty() {
            return true;
        }
        if self.notify.armed.is_empty() {
            return false;
        }
        let now = self.now();
        self.notify.armed.iter().any(|(id, list)| {
            self.events
                .get(id)
                .is_none_or(|e| !matches!(e.done(e.recorded, now), Ok(None)))
                || list.iter().any(|a| a.deadline <= now)
        })
    }

    /// Takes out every waker that is due now — its event's last record
    /// completed, its stream faulted, the event was destroyed, or its
    /// deadline passed — to be woken once the lock is released. Cheap when
    /// nothing is armed.
    #[must_use = "the wakers taken out must be woken"]
    pub fn due_wakers(&mut self) -> Vec<Waker> {
        if self.notify.armed.is_empty() && self.notify.evicted.is_empty() {
            return Vec::new();
        }
        let now = self.now();
        let mut due = std::mem::take(&mut self.notify.evicted);
        let DeviceState { notify, events, .. } = self;
        notify.armed.retain(|id, list| {
            let settled = events
                .get(id)
                .is_none_or(|e| !matches!(e.done(e.recorded, now), Ok(None)));
            if settled {
                due.extend(list.drain(..).map(|a| a.waker));
                return false;
            }
            let mut i = 0;
            while i < list.len() {
                if list[i].deadline <= now {
                    due.push(list.swap_remove(i).waker);
                } else {
                    i += 1;
                }
            }
            !list.is_empty()
        });
        due
    }

    /// Real time: the host tick before which the device thread must be
    /// awake and spinning for the armed wakers, given the next gate `next`
    /// of the simulation (as [`DeviceState::advance_real_time`] returned
    /// it); `None` when nothing is armed, or nothing armed can become due
    /// at a known time.
    ///
    /// Candidates: every armed deadline; the landing time of an armed
    /// event's record that completed late ([`Fault::DelayEvent`]); and
    /// `next` when an armed event is *imminent* — its pending record has at
    /// most one kernel ahead of it on its stream, so the next gate may
    /// complete it. A record further back cannot complete at the next gate,
    /// so the device thread naps through it as when nothing is armed.
    ///
    /// [`Fault::DelayEvent`]: crate::driver::sim::Fault::DelayEvent
    pub fn wake_target(&self, next: Option<u64>) -> Option<u64> {
        if self.notify.armed.is_empty() {
            return None;
        }
        let mut target: Option<u64> = None;
        let mut earliest = |t: u64| {
            if t != u64::MAX {
                target = Some(target.map_or(t, |g| g.min(t)));
            }
        };
        let mut imminent = false;
        for (id, list) in &self.notify.armed {
            for a in list {
                earliest(a.deadline);
            }
            let Some(e) = self.events.get(id) else {
                continue;
            };
            if e.completed >= e.recorded {
                // Landed, not yet visible: a delayed record.
                earliest(e.completed_at);
            } else if !imminent {
                imminent = self.record_is_imminent(*id, e.recorded, e.stream);
            }
        }
        if imminent && let Some(g) = next {
            earliest(g);
        }
        target
    }

    /// Whether record `generation` of `event` is queued on `stream` with at
    /// most one kernel ahead of it.
    fn record_is_imminent(&self, event: u64, generation: u64, stream: u64) -> bool {
        let Some(s) = self.streams.get(&stream) else {
            return false;
        };
        let mut kernels = 0;
        for t in &s.queue {
            match &t.kind {
                TaskKind::Record {
                    event: e,
                    generation: g,
                    ..
                } if *e == event && *g == generation => return true,
                k if k.is_kernel() => {
                    kernels += 1;
                    if kernels > 1 {
                        return false;
                    }
                }
                _ => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Wake, Waker};
    use std::time::Duration;

    use super::MAX_WAKERS_PER_EVENT;
    use crate::driver::sim::{Fault, SimConfig, SimDriver};
    use crate::driver::{Driver, Notice};

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn count() -> Arc<Count> {
        Arc::new(Count(AtomicUsize::new(0)))
    }

    /// A stepped simulator with one event recorded behind a record that
    /// never completes: every arm stays armed until its deadline.
    fn pending() -> (SimDriver, crate::driver::EventId) {
        let sim = SimDriver::stepped(SimConfig::default());
        let (s, e) = (sim.create_stream().unwrap(), sim.create_event().unwrap());
        sim.inject(Fault::EventNeverCompletes { nth: 1 });
        sim.record_event(e, s).unwrap();
        (sim, e)
    }

    fn armed(sim: &SimDriver) -> usize {
        sim.lock().notify.armed()
    }

    #[test]
    fn re_arming_the_same_task_keeps_one_entry_and_its_earliest_deadline() {
        let (sim, e) = pending();
        let c = count();
        let w = Waker::from(c.clone());
        assert_eq!(
            sim.notify_event(e, Duration::from_micros(5), &w),
            Ok(Notice::Completion)
        );
        for _ in 0..10_000 {
            // A clone wakes the same task: `will_wake` holds.
            let again = w.clone();
            sim.notify_event(e, Duration::from_secs(3600), &again)
                .unwrap();
        }
        assert_eq!(armed(&sim), 1);
        // Negative control: a second task is a second entry.
        let other = count();
        sim.notify_event(e, Duration::from_secs(3600), &Waker::from(other.clone()))
            .unwrap();
        assert_eq!(armed(&sim), 2);
        // The earliest deadline (5 µs) was kept: 5 steps of 1 µs are due.
        for _ in 0..5 {
            assert_eq!(c.0.load(Ordering::SeqCst), 0);
            sim.step();
        }
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert_eq!(other.0.load(Ordering::SeqCst), 0);
        assert_eq!(armed(&sim), 1);
    }

    #[test]
    fn distinct_wakers_are_bounded_per_event_and_the_evicted_are_woken() {
        let (sim, e) = pending();
        let counts: Vec<Arc<Count>> = (0..10_000).map(|_| count()).collect();
        for c in &counts {
            sim.notify_event(e, Duration::from_secs(3600), &Waker::from(c.clone()))
                .unwrap();
            assert!(armed(&sim) <= MAX_WAKERS_PER_EVENT);
        }
        assert_eq!(armed(&sim), MAX_WAKERS_PER_EVENT);
        let kept = counts.len() - MAX_WAKERS_PER_EVENT;
        // The oldest were woken once (on the timer thread: never on the
        // arming caller's) and let go; the newest are still kept.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while counts[..kept]
            .iter()
            .any(|c| c.0.load(Ordering::SeqCst) == 0 || Arc::strong_count(c) > 1)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        for (i, c) in counts.iter().enumerate() {
            let (wakes, held) = (c.0.load(Ordering::SeqCst), Arc::strong_count(c));
            if i < kept {
                assert_eq!((wakes, held), (1, 1), "waker {i}");
            } else {
                assert_eq!((wakes, held), (0, 2), "waker {i}");
            }
        }
    }

    #[test]
    fn deadlines_round_up_and_never_overflow() {
        let (sim, e) = pending();
        let core = sim.lock();
        // 1 ns is one tick (20 ns) away, never 0; past the end is never.
        assert_eq!(core.deadline_after(Duration::from_nanos(1)), core.now() + 1);
        assert_eq!(core.deadline_after(Duration::MAX), u64::MAX);
        drop(core);
        let c = count();
        sim.notify_event(e, Duration::MAX, &Waker::from(c.clone()))
            .unwrap();
        sim.run_until_idle(10).unwrap();
        for _ in 0..1000 {
            sim.step();
        }
        assert_eq!(c.0.load(Ordering::SeqCst), 0);
        assert_eq!(armed(&sim), 1);
    }
}
