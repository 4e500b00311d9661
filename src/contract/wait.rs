//! What a wait keeps and what its looks say: how a fence waits ([`Wait`]),
//! its clock on the driver's time ([`WaitClock`]), what a fence or a drain
//! keeps between looks ([`FenceWait`], [`DrainWait`]), what a look asks
//! its waiter to sleep on ([`Sleep`]) and what the sleep said
//! ([`Woke`]) — beside each other, below the port and the device that
//! read them.
//!
//! Every wait of the crate is one *look* (`device/look.rs`), run by one
//! of two sleepers: a task arms its waker for what the look named
//! (`Device::arm`), a thread sleeps on it with the driver's blocking call
//! (`contract/sleep.rs`); either way the next look is told what the sleep
//! said, and the one stall rule ([`Stall::woke`]) counts the time a
//! stalled clock did not show.

use std::time::{Duration, Instant};

use crate::driver::{DriverError, EventId, StreamId};

/// The first time-only wake of an awaited wait on a driver that cannot see
/// completion (`Notice::Timer`); each later one doubles, up to a
/// look-around slice.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_micros(FIRST_BACKOFF_US as u64);
const FIRST_BACKOFF_US: u32 = 50;

/// How a fence waits.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// Query once.
    Poll,
    /// Wait at most this long in total (`Duration::MAX`: no limit).
    For(Duration),
    /// Wait the queue budget: `(runs ahead + 1) × fence_timeout`.
    Configured,
}

/// A wait's clock: when it began and the limit it is judged against, on
/// the driver's clock (`Device::wait_clock`, `Device::judge`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WaitClock {
    pub(crate) start: Duration,
    pub(crate) limit: Duration,
    /// `false`: the limit lies past the end of the clock (no deadline).
    pub(crate) limited: bool,
    /// The configured queue budget (not a caller's limit): capped once
    /// behind a head that cannot be proven complete.
    pub(crate) configured: bool,
    pub(crate) capped: bool,
}

/// What a look that found no verdict asks its waiter to sleep on: `on`,
/// for at most `within`, judged at driver-clock time `at`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sleep {
    pub(crate) on: On,
    pub(crate) within: Duration,
    pub(crate) at: Duration,
    /// The place in the queue of the run it sleeps on (`u64::MAX`: a
    /// stream, behind every run). A thread sleeps once per poll: on the
    /// oldest run any of the poll's looks asked for, which completes
    /// first in stream order (`contract/sleep.rs`'s `ask`).
    pub(crate) seq: u64,
}

/// What a sleep is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum On {
    /// An event: a run's fence.
    Event(EventId),
    /// A stream (a drain's): a thread syncs it; a task wakes on `fence`,
    /// the newest fence not complete, which covers everything ahead of it
    /// — on time alone where no fence covers the work (a partial launch).
    Stream {
        stream: StreamId,
        fence: Option<EventId>,
    },
}

/// What the sleep before a look said.
#[derive(Debug, Clone)]
pub(crate) enum Woke {
    /// A task's poll, or a look no sleep came before: nothing is known of
    /// what was slept on.
    Polled,
    /// A thread slept on `on` for at most `within`; the driver's answer.
    Slept {
        on: On,
        within: Duration,
        said: Said,
    },
}

/// What a thread's blocking call said (kept small: a look reads it on
/// every poll, the failure — rare — boxed).
#[derive(Debug, Clone)]
pub(crate) enum Said {
    /// `on` completed.
    Complete,
    /// The call ran its time, `on` not complete.
    RanOut,
    /// Any other failure.
    Failed(Box<DriverError>),
}

impl Said {
    /// The driver's answer to a blocking call.
    #[inline]
    pub(crate) fn of(r: Result<(), DriverError>) -> Self {
        match r {
            Ok(()) => Said::Complete,
            Err(e) if e.is_timeout() => Said::RanOut,
            Err(e) => Said::Failed(Box::new(e)),
        }
    }
}

impl Woke {
    /// What the sleep said of `on`: `Some(Ok)` complete, `Some(Err)` a
    /// failure other than a timeout, `None` nothing (not slept on `on`, or
    /// it ran its time).
    #[inline]
    pub(crate) fn of(&self, on: On) -> Option<Result<(), &DriverError>> {
        match self {
            Woke::Slept { on: o, said, .. } if *o == on => match said {
                Said::Complete => Some(Ok(())),
                Said::RanOut => None,
                Said::Failed(e) => Some(Err(e)),
            },
            _ => None,
        }
    }

    /// `true` when the sleep was on `on` and ran its time (`on` still not
    /// complete then: no query needs to say so again).
    #[inline]
    pub(crate) fn ran_out_on(&self, on: On) -> bool {
        matches!(self, Woke::Slept { on: o, said: Said::RanOut, .. } if *o == on)
    }

    /// Time slept before a first look (a thread's sleep on a run's fence
    /// before it looks): it counts towards the wait's limit.
    #[inline]
    pub(crate) fn slept(&self) -> Duration {
        match self {
            Woke::Slept {
                within,
                said: Said::RanOut,
                ..
            } => *within,
            _ => Duration::ZERO,
        }
    }
}

/// Time the driver's clock did not show: a sleep asked for `t` that ran
/// its time while the clock stood still counts as `t`, so a stalled clock
/// delays a verdict but never keeps a wait — or a `Drop` — going for ever.
/// A clock that moves at all is trusted. Who says the sleep ran its time:
/// the driver's blocking call (a timeout) for a thread; the host's clock
/// for a task (a waker may fire early).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stall {
    /// The last sleep asked for: the driver's clock then, the host's, and
    /// the time asked for.
    armed: Option<(Duration, Instant, Duration)>,
    pub(crate) unshown: Duration,
}

impl Stall {
    /// At a look after `woke`, the driver's clock now `clock`: the unshown
    /// time so far.
    pub(crate) fn woke(&mut self, clock: Duration, woke: &Woke) -> Duration {
        if let Some((at, host, within)) = self.armed.take() {
            // The host's time passed it, or the driver's blocking call
            // ran at least that long by its own word.
            let ran = host.elapsed() >= within
                || matches!(woke, Woke::Slept { within: slept, said: Said::RanOut, .. }
                    if *slept >= within);
            if clock <= at && ran {
                self.unshown = self.unshown.saturating_add(within);
            }
        }
        self.unshown
    }

    /// After asking for a sleep of `within` at driver-clock time `clock`.
    pub(crate) fn note_armed(&mut self, clock: Duration, within: Duration) {
        self.armed = Some((clock, Instant::now(), within));
    }
}

/// What every wait keeps for its sleeper: the next time-only wake of a
/// task on a driver that cannot see completion, and the stall rule's
/// record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sleeping {
    pub(crate) backoff: Backoff,
    pub(crate) stall: Stall,
}

/// The next time-only wake, in whole microseconds (a wait is copied with
/// the futures that hold it: four bytes, not a `Duration`'s sixteen).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Backoff(u32);

impl Backoff {
    /// `within`, shortened to the backoff; the backoff doubles, up to
    /// `cap` (at least [`FIRST_BACKOFF`]).
    pub(crate) fn shorten(&mut self, within: Duration, cap: Duration) -> Duration {
        let now = Duration::from_micros(u64::from(self.0));
        let next = now.saturating_mul(2).min(cap.max(FIRST_BACKOFF));
        self.0 = u32::try_from(next.as_micros()).unwrap_or(u32::MAX);
        within.min(now)
    }
}

impl Sleeping {
    const NEW: Sleeping = Sleeping {
        backoff: Backoff(FIRST_BACKOFF_US),
        stall: Stall {
            armed: None,
            unshown: Duration::ZERO,
        },
    };
}

/// A wait a look advances: what its sleeper reaches.
pub(crate) trait Waits {
    fn sleeping(&mut self) -> &mut Sleeping;
}

/// What a fence keeps between looks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FenceWait {
    pub(crate) how: Wait,
    /// The wait's clock (`fence.rs`), from the first look that found the
    /// run not complete; `None` until then.
    pub(crate) clock: Option<WaitClock>,
    pub(crate) sleeping: Sleeping,
    /// What its owner's sleep of one look-around slice on the run's own
    /// fence, before a poll, said (a blocking ticket's first sleep), for
    /// the next look: `true` complete, `false` it ran its time (a failure
    /// is not kept: the look finds it again). One byte: a wait is copied
    /// with the futures that hold it.
    pub(crate) told: Option<bool>,
}

impl FenceWait {
    /// A wait of `how` (`Wait::Poll` behaves as one look).
    pub(crate) const fn new(how: Wait) -> Self {
        FenceWait {
            how,
            clock: None,
            sleeping: Sleeping::NEW,
            told: None,
        }
    }
}

impl FenceWait {
    /// The time the wait counted against its limit by driver-clock time
    /// `now`: since its clock began, with what a stalled clock did not
    /// show (zero when it never needed a clock).
    pub(crate) fn counted(&self, now: Duration) -> Duration {
        self.clock.map_or(Duration::ZERO, |c| {
            now.saturating_sub(c.start)
                .saturating_add(self.sleeping.stall.unshown)
        })
    }
}

impl Waits for FenceWait {
    #[inline]
    fn sleeping(&mut self) -> &mut Sleeping {
        &mut self.sleeping
    }
}

/// What a drain keeps between looks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DrainWait {
    /// `None`: the queue budget, fixed at the first look.
    pub(crate) timeout: Option<Duration>,
    /// From the first look that found work queued: when the drain began,
    /// its limit, and how many runs were in flight then.
    pub(crate) start: Option<(Duration, Duration, usize)>,
    /// Per stream (AICPU, AICore): proven quiet, and found faulted.
    pub(crate) quiet: [bool; 2],
    pub(crate) faulted: [bool; 2],
    pub(crate) sleeping: Sleeping,
}

impl DrainWait {
    /// A drain waiting at most `timeout` (`None`: the queue budget).
    pub(crate) const fn new(timeout: Option<Duration>) -> Self {
        DrainWait {
            timeout,
            start: None,
            quiet: [false; 2],
            faulted: [false; 2],
            sleeping: Sleeping::NEW,
        }
    }
}

impl Waits for DrainWait {
    #[inline]
    fn sleeping(&mut self) -> &mut Sleeping {
        &mut self.sleeping
    }
}

/// A future of this crate polled again after it resolved: a caller's bug,
/// reported as std's `async fn` futures report it (wrap the future in a
/// fusing adapter, e.g. `futures::future::FutureExt::fuse`, to poll it in a
/// `select!` loop).
#[cold]
#[track_caller]
pub(crate) fn polled_after_ready(what: &str) -> ! {
    panic!("`{what}` polled after it resolved")
}
