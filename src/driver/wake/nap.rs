//! The real-time simulator's device thread, as a protocol: its nap as the
//! wakers' side sees it, and the rule of when a change owes it a kick.
//!
//! The thread plans its nap under the simulator's lock — from the
//! simulation's own timeline (the next gate) and the armed wakers' wake
//! target — and sleeps on the `kick` condition variable with that lock
//! released only by the wait itself, its nap noted here ([`doze`]) for as
//! long as it sleeps. So a change made under the lock either comes before
//! the plan (and is planned for) or finds the nap noted, and then owes a
//! kick, made once the lock is released:
//!
//! - an arm whose wake target falls before the nap ends
//!   ([`Nap::sleeps_past`]);
//! - a change the plan could not foresee while a waker is armed
//!   ([`Nap::owes_kick`]): a submission, which may let an armed record
//!   complete sooner than the timeline the thread planned on said (an
//!   AICPU kernel waiting for the workers of an AICore kernel launched
//!   after it), a destroyed event, a shutdown.
//!
//! A change that makes a waker due at once (a destroyed event, a host's
//! wait that moved the simulation) kicks whatever the nap.

use std::time::Duration;

use crate::sync::{Condvar, MutexGuard};

/// The device thread's nap, kept in the state the simulator's lock guards.
#[derive(Debug, Default)]
pub(crate) struct Nap {
    /// The host tick the nap ends at, while the thread sleeps.
    until: Option<u64>,
}

impl Nap {
    /// Whether the thread sleeps now.
    pub(crate) fn asleep(&self) -> bool {
        self.until.is_some()
    }

    /// Whether an arm whose wake target is `target` (host ticks) owes the
    /// thread a kick: it sleeps, and would wake later than `margin` before
    /// the target.
    pub(crate) fn sleeps_past(&self, target: Option<u64>, margin: u64) -> bool {
        match (self.until, target) {
            (Some(until), Some(t)) => until.saturating_add(margin) > t,
            _ => false,
        }
    }

    /// Whether a change the thread's plan could not foresee owes it a
    /// kick: it sleeps while a waker is armed (`armed`).
    pub(crate) fn owes_kick(&self, armed: bool) -> bool {
        armed && self.until.is_some()
    }
}

/// Sleeps the device thread on `kick` for at most `dur` (until a kick),
/// its nap noted as ending at host tick `until` in the `Nap` that `nap`
/// finds in the guarded state, for exactly as long as the lock is released
/// by the wait.
pub(crate) fn doze<'a, S>(
    kick: &Condvar,
    mut guard: MutexGuard<'a, S>,
    nap: fn(&mut S) -> &mut Nap,
    until: u64,
    dur: Duration,
) -> MutexGuard<'a, S> {
    nap(&mut guard).until = Some(until);
    let mut guard = kick
        .wait_timeout(guard, dur)
        .map_or_else(|e| e.into_inner().0, |(g, _)| g);
    nap(&mut guard).until = None;
    guard
}
