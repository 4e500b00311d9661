//! The `acl` driver's reactor as a protocol: what its thread knows (the
//! streams subscribed to it, the callbacks expected, the wakers armed per
//! event record), its loop, and the rule that keeps it from sleeping
//! through a change.
//!
//! The thread loops: [`begin`](Reactor::begin) a round (its wait: to the
//! nearest armed deadline, within the limits), wait in the runtime
//! (`aclrtProcessReport`, the caller's), and when the runtime answered at
//! once instead (nothing subscribed yet, or a failure) wait on the core's
//! condition variable — unless a change came since the round began. A
//! change is whatever must not wait for the round to end: a subscription
//! (the runtime now has something to wait for) and the stop. Each bumps a
//! counter under the lock the round read it under, and the idle wait
//! compares it under that lock before it sleeps: a change that landed
//! between the runtime's answer and the idle wait is seen, not slept
//! through for the round's whole wait.
//!
//! What the runtime's wait cannot see is handed elsewhere: a deadline
//! earlier than the round's end goes to the timer as well
//! ([`Arming::Armed`]), and a fault report, whose exception callback runs on
//! a thread of the runtime's, wakes the armed wakers itself. A fault
//! report that came after the caller looked at its event (its query found
//! it not complete) but before it armed is caught by the fault counter the
//! caller read first ([`Reactor::faults`]): such an arm is not kept, its
//! waker is to be woken at once ([`Arming::Faulted`]).

#![cfg_attr(
    not(feature = "acl"),
    allow(
        dead_code,
        reason = "the loom build, without the acl feature, models part of it"
    )
)]

use std::collections::BTreeMap;
use std::task::Waker;
use std::time::Duration;

use super::Moment;
use crate::sync::{Condvar, Mutex, MutexGuard, lock};

/// Wakers kept per event (distinct tasks awaiting one fence).
pub(crate) const MAX_WAKERS: usize = 4;

/// One ticket's meaning: the callback queued behind `event`'s record
/// `generation` on `stream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    /// The stream (the driver's raw id).
    pub stream: u64,
    /// The event (the driver's raw id).
    pub event: u64,
    /// Which record of the event.
    pub generation: u64,
}

/// A waker kept for an event's record.
struct Armed<T> {
    generation: u64,
    waker: Waker,
    deadline: Option<T>,
}

/// What the reactor knows of one event.
struct Note<T> {
    /// The last generation a callback was queued for (0: none).
    queued: u64,
    /// The last generation whose callback ran (0: none).
    fired: u64,
    armed: Vec<Armed<T>>,
}

impl<T> Default for Note<T> {
    fn default() -> Self {
        Note {
            queued: 0,
            fired: 0,
            armed: Vec::new(),
        }
    }
}

/// Everything behind the reactor's lock.
struct State<T, K> {
    /// Streams subscribed to the reactor's thread.
    subscribed: Vec<K>,
    pending: BTreeMap<usize, Pending>,
    events: BTreeMap<u64, Note<T>>,
    /// When the current round's wait ends (`None`: between rounds).
    waits_until: Option<T>,
    /// Bumped by every change an idle reactor must not sleep through.
    changes: u64,
    /// Bumped by every fault report.
    faults: u64,
    stop: bool,
    /// The thread has ended (or never got going).
    exited: bool,
}

impl<T, K> State<T, K> {
    fn take_armed(&mut self) -> Vec<Waker> {
        self.events
            .values_mut()
            .flat_map(|n| n.armed.drain(..))
            .map(|a| a.waker)
            .collect()
    }

    /// The wakers armed for `event` up to `generation`, taken out.
    fn take_for(&mut self, event: u64, generation: u64) -> Vec<Waker> {
        let Some(note) = self.events.get_mut(&event) else {
            return Vec::new();
        };
        let (due, keep): (Vec<Armed<T>>, Vec<Armed<T>>) = note
            .armed
            .drain(..)
            .partition(|a| a.generation <= generation);
        note.armed = keep;
        due.into_iter().map(|a| a.waker).collect()
    }

    /// A ticket is no longer expected: its record has no callback queued.
    fn unqueue(&mut self, p: Pending) -> Vec<Waker> {
        if let Some(note) = self.events.get_mut(&p.event)
            && note.queued == p.generation
        {
            note.queued = 0;
        }
        self.take_for(p.event, p.generation)
    }
}

/// How long one round waits at most and at least.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The shortest wait (the runtime rejects 0).
    pub min: Duration,
    /// The longest: the bound of a shutdown, and of any wake the rule
    /// missed.
    pub max: Duration,
}

/// One round of the loop: what it saw of the changes, and its wait.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Round {
    seen: u64,
    /// How long the round waits.
    pub wait: Duration,
}

/// What the runtime's wait did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// It waited (callbacks ran, or its time passed).
    Waited,
    /// It answered at once (nothing subscribed, or a failure): the round
    /// waits on the core instead.
    Answered,
}

/// What [`Reactor::arm`] did with a waker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arming {
    /// The record's callback ran: nothing kept, look now.
    Ready,
    /// Nothing kept: no callback is queued for that record, the reactor is
    /// ending, or the event has its fill of wakers — the caller's timer
    /// stands in.
    Timer,
    /// Kept, woken by the record's callback or at the deadline;
    /// `timer_too`: the deadline falls before the round's wait ends, so
    /// the caller arms its timer as well (an extra wake is a hint).
    Armed {
        /// Also arm the timer.
        timer_too: bool,
    },
    /// A fault report came since the caller read [`Reactor::faults`]: its
    /// look may predate the fault, whose report wakes nobody armed later.
    /// Nothing kept; the caller wakes the waker at once (it looks again).
    Faulted,
}

/// Why [`Reactor::subscribe`] failed.
#[derive(Debug)]
pub(crate) enum SubscribeError<E> {
    /// The reactor is stopping.
    Ending,
    /// The runtime refused.
    Runtime(E),
}

/// A reactor's protocol state, over the clock `T` and the runtime's stream
/// handles `K` (see the module documentation).
pub(crate) struct Reactor<T, K> {
    state: Mutex<State<T, K>>,
    /// The thread waits here when the runtime cannot wait for it; a
    /// shutdown waits here for the thread to end.
    wake: Condvar,
    limits: Limits,
}

impl<T: Moment, K: Copy + Eq> Reactor<T, K> {
    /// A reactor whose rounds wait within `limits`.
    pub(crate) fn new(limits: Limits) -> Self {
        Reactor {
            state: Mutex::new(State {
                subscribed: Vec::new(),
                pending: BTreeMap::new(),
                events: BTreeMap::new(),
                waits_until: None,
                changes: 0,
                faults: 0,
                stop: false,
                exited: false,
            }),
            wake: Condvar::new(),
            limits,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T, K>> {
        lock(&self.state)
    }

    /// The reactor thread's loop, until stopped: `report` is the runtime's
    /// wait for the round's time, `now` the clock, `wake` wakes (on this
    /// thread) the wakers whose deadline passed.
    pub(crate) fn serve(
        &self,
        now: impl Fn() -> T,
        report: impl FnMut(Duration) -> Waited,
        wake: impl Fn(Vec<Waker>),
    ) {
        self.serve_with(now, report, wake, Self::idle);
    }

    /// The loop as it was before the idle wait compared the changes: the
    /// models' negative control.
    #[cfg(all(test, loom))]
    pub(crate) fn serve_before_fix(
        &self,
        now: impl Fn() -> T,
        report: impl FnMut(Duration) -> Waited,
        wake: impl Fn(Vec<Waker>),
    ) {
        self.serve_with(now, report, wake, Self::idle_before_fix);
    }

    fn serve_with(
        &self,
        now: impl Fn() -> T,
        mut report: impl FnMut(Duration) -> Waited,
        wake: impl Fn(Vec<Waker>),
        idle: fn(&Self, Round),
    ) {
        while let Some(round) = self.begin(now()) {
            if report(round.wait) == Waited::Answered {
                idle(self, round);
            }
            wake(self.expired(now()));
        }
    }

    /// Begins a round at `now`: its wait runs to the nearest armed
    /// deadline, within the limits. `None` once stopped.
    fn begin(&self, now: T) -> Option<Round> {
        let mut st = self.lock();
        if st.stop {
            return None;
        }
        let nearest = st
            .events
            .values()
            .flat_map(|n| n.armed.iter().filter_map(|a| a.deadline))
            .min();
        let wait = nearest
            .map_or(self.limits.max, |d| now.until(d))
            .clamp(self.limits.min, self.limits.max);
        st.waits_until = now.after(wait);
        Some(Round {
            seen: st.changes,
            wait,
        })
    }

    /// The round's wait on the core (the runtime answered at once): none
    /// when a change came since the round began, else until one does or
    /// the round's time passes.
    fn idle(&self, round: Round) {
        let st = self.lock();
        if st.stop || st.changes != round.seen {
            return;
        }
        drop(
            self.wake
                .wait_timeout(st, round.wait)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g),
        );
    }

    /// The idle wait that looked at the stop alone (a subscription that
    /// came between the runtime's answer and this wait was slept through).
    #[cfg(all(test, loom))]
    fn idle_before_fix(&self, round: Round) {
        let st = self.lock();
        if st.stop {
            return;
        }
        drop(
            self.wake
                .wait_timeout(st, round.wait)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g),
        );
    }

    /// The wakers whose deadline is past at `now`, taken out; the round is
    /// over.
    fn expired(&self, now: T) -> Vec<Waker> {
        let mut st = self.lock();
        st.waits_until = None;
        let mut out = Vec::new();
        for note in st.events.values_mut() {
            let (due, keep): (Vec<Armed<T>>, Vec<Armed<T>>) = note
                .armed
                .drain(..)
                .partition(|a| a.deadline.is_some_and(|d| d <= now));
            note.armed = keep;
            out.extend(due.into_iter().map(|a| a.waker));
        }
        out
    }

    /// The thread is ending: every waker still armed, taken out (to wake),
    /// and whoever waits for the end is told.
    pub(crate) fn exit(&self) -> Vec<Waker> {
        let woken = {
            let mut st = self.lock();
            st.exited = true;
            st.waits_until = None;
            st.take_armed()
        };
        self.wake.notify_all();
        woken
    }

    /// Waits for the thread's [`exit`](Self::exit), at most `limit`;
    /// whether it came.
    pub(crate) fn wait_exited(&self, limit: Duration) -> bool {
        let start = std::time::Instant::now();
        let mut st = self.lock();
        while !st.exited {
            let left = limit.saturating_sub(start.elapsed());
            if left.is_zero() {
                return false;
            }
            st = self
                .wake
                .wait_timeout(st, left)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
        true
    }

    /// Subscribes `key` with `subscribe` (the runtime's call, made under
    /// the lock so that two launches do not both subscribe), unless it is
    /// already: a change the thread is told of.
    pub(crate) fn subscribe<E>(
        &self,
        key: K,
        subscribe: impl FnOnce() -> Result<(), E>,
    ) -> Result<(), SubscribeError<E>> {
        let mut st = self.lock();
        if st.subscribed.contains(&key) {
            return Ok(());
        }
        if st.stop {
            return Err(SubscribeError::Ending);
        }
        subscribe().map_err(SubscribeError::Runtime)?;
        st.subscribed.push(key);
        st.changes = st.changes.wrapping_add(1);
        drop(st);
        self.wake.notify_all();
        Ok(())
    }

    /// Notes the callback `ticket` stands for, before it is queued.
    pub(crate) fn expect(&self, ticket: usize, p: Pending) {
        let mut st = self.lock();
        st.pending.insert(ticket, p);
        let note = st.events.entry(p.event).or_default();
        note.queued = note.queued.max(p.generation);
    }

    /// The callback `ticket` could not be queued: nothing is expected of
    /// it; whoever was armed for its record, taken out to look again.
    pub(crate) fn cancel(&self, ticket: usize) -> Vec<Waker> {
        let mut st = self.lock();
        match st.pending.remove(&ticket) {
            Some(p) => st.unqueue(p),
            None => Vec::new(),
        }
    }

    /// The callback `ticket` ran: its record is complete; its wakers,
    /// taken out. `None` when the ticket is not this reactor's (or no
    /// longer expected).
    pub(crate) fn fired(&self, ticket: usize) -> Option<Vec<Waker>> {
        let mut st = self.lock();
        let p = st.pending.remove(&ticket)?;
        let note = st.events.get_mut(&p.event)?;
        note.fired = note.fired.max(p.generation);
        Some(st.take_for(p.event, p.generation))
    }

    /// The fault reports so far: read before the look at an event that
    /// precedes an [`arm`](Self::arm).
    pub(crate) fn faults(&self) -> u64 {
        self.lock().faults
    }

    /// A fault report: every armed waker, taken out (to wake); an arm whose
    /// caller looked before it is refused ([`Arming::Faulted`]).
    pub(crate) fn fault(&self) -> Vec<Waker> {
        let mut st = self.lock();
        st.faults = st.faults.wrapping_add(1);
        st.take_armed()
    }

    /// Arms `waker` for `event`'s record `generation` until `deadline`
    /// (`None`: none), the caller having read `faults` before it looked
    /// at the event (see [`Arming`]). A waker that `will_wake` one already
    /// armed for the event replaces it.
    pub(crate) fn arm(
        &self,
        event: u64,
        generation: u64,
        deadline: Option<T>,
        faults: u64,
        waker: &Waker,
    ) -> Arming {
        let mut st = self.lock();
        if st.stop || st.exited {
            return Arming::Timer;
        }
        if st.faults != faults {
            return Arming::Faulted;
        }
        let waits_until = st.waits_until;
        let Some(note) = st.events.get_mut(&event) else {
            return Arming::Timer;
        };
        if note.fired >= generation {
            return Arming::Ready;
        }
        if note.queued != generation {
            return Arming::Timer;
        }
        if let Some(a) = note.armed.iter_mut().find(|a| a.waker.will_wake(waker)) {
            a.generation = generation;
            a.deadline = deadline;
        } else if note.armed.len() < MAX_WAKERS {
            note.armed.push(Armed {
                generation,
                waker: waker.clone(),
                deadline,
            });
        } else {
            return Arming::Timer;
        }
        // The thread looks at deadlines when its round ends: one before
        // that goes to the timer as well.
        let timer_too = matches!((deadline, waits_until), (Some(d), Some(w)) if d < w);
        Arming::Armed { timer_too }
    }

    /// Ends the subscription of `key` (raw id `raw`; about to be
    /// destroyed): its callbacks are no longer expected. Whether it was
    /// subscribed, and the wakers armed for its callbacks (to wake).
    pub(crate) fn forget_stream(&self, key: K, raw: u64) -> (bool, Vec<Waker>) {
        let mut st = self.lock();
        let Some(i) = st.subscribed.iter().position(|&s| s == key) else {
            return (false, Vec::new());
        };
        st.subscribed.swap_remove(i);
        let gone: Vec<Pending> = st
            .pending
            .values()
            .filter(|p| p.stream == raw)
            .copied()
            .collect();
        st.pending.retain(|_, p| p.stream != raw);
        let mut woken = Vec::new();
        for p in gone {
            woken.extend(st.unqueue(p));
        }
        (true, woken)
    }

    /// The last callback still expected on `stream`, if any.
    pub(crate) fn last_pending(&self, stream: u64) -> Option<Pending> {
        let st = self.lock();
        st.pending
            .values()
            .rev()
            .find(|p| p.stream == stream)
            .copied()
    }

    /// Forgets a destroyed event; its wakers (to wake).
    pub(crate) fn forget_event(&self, event: u64) -> Vec<Waker> {
        self.lock()
            .events
            .remove(&event)
            .map(|n| n.armed.into_iter().map(|a| a.waker).collect())
            .unwrap_or_default()
    }

    /// Stops the reactor: nothing more is expected, nothing more can be
    /// subscribed, and the thread is told (a change). The streams still
    /// subscribed (to unsubscribe) and every armed waker (to wake).
    pub(crate) fn stop(&self) -> (Vec<K>, Vec<Waker>) {
        let out = {
            let mut st = self.lock();
            st.stop = true;
            st.changes = st.changes.wrapping_add(1);
            st.pending.clear();
            (std::mem::take(&mut st.subscribed), st.take_armed())
        };
        self.wake.notify_all();
        out
    }

    /// Every armed waker, taken out.
    pub(crate) fn take_armed(&self) -> Vec<Waker> {
        self.lock().take_armed()
    }

    /// When the current round's wait ends (`None`: between rounds).
    #[cfg(all(test, loom))]
    pub(crate) fn waits_until(&self) -> Option<T> {
        self.lock().waits_until
    }
}
