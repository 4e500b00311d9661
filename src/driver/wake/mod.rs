//! The drivers' wake protocols, apart from what they wait on: each is the
//! state a waiting thread sleeps on and the rule it re-checks, under the
//! same lock, before it sleeps — every change that should wake it (an arm,
//! a subscription, a fault, a stop) — so that no such change can land
//! between its last look and its sleep and be slept through.
//!
//! | core | waiting thread | used by |
//! |---|---|---|
//! | `reactor::Reactor` | the `acl` driver's reactor (one per device) | `driver::acl`'s notifications (with the `acl` feature) |
//! | [`timer::TimerCore`] | the process-wide timer thread | [`wake_after`](super::wake_after) |
//! | [`nap::Nap`] | the real-time simulator's device thread | `driver::sim` |
//!
//! Nothing here calls C, reads a static or sleeps on a clock of its own:
//! the runtime's wait, the clock and the wakes are the caller's, passed in.
//! So each core is checked as it is used, by the loom models beside it
//! (`loom_*.rs`, in the crate's loom build, `.ci/loom`), where a timed wait
//! never times out: a wake that only a timeout would deliver leaves a
//! thread asleep for good, which loom reports as a deadlock.

pub(crate) mod nap;
// The acl driver's (and its models', which build without the feature).
#[cfg(any(feature = "acl", all(test, loom)))]
pub(crate) mod reactor;
pub(crate) mod timer;

use std::time::{Duration, Instant};

/// A point on a core's clock: the host's [`Instant`], or a model's tick.
pub(crate) trait Moment: Copy + Ord {
    /// `self + d`; `None` past the clock's end.
    #[cfg_attr(
        not(any(feature = "acl", all(test, loom))),
        allow(dead_code, reason = "the acl reactor's rounds add to a moment")
    )]
    fn after(self, d: Duration) -> Option<Self>;
    /// How long from `self` until `later` (zero when `later` is not later).
    fn until(self, later: Self) -> Duration;
}

impl Moment for Instant {
    fn after(self, d: Duration) -> Option<Self> {
        self.checked_add(d)
    }
    fn until(self, later: Self) -> Duration {
        later.saturating_duration_since(self)
    }
}

/// A model's clock: nanoseconds.
#[cfg(all(test, loom))]
impl Moment for u64 {
    fn after(self, d: Duration) -> Option<Self> {
        self.checked_add(u64::try_from(d.as_nanos()).ok()?)
    }
    fn until(self, later: Self) -> Duration {
        Duration::from_nanos(later.saturating_sub(self))
    }
}

/// Wakes each waker; a panicking one is caught, and the others are still
/// woken (so a waker cannot stop the thread that wakes it).
pub(crate) fn wake_all(wakers: Vec<std::task::Waker>) {
    for w in wakers {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
    }
}
