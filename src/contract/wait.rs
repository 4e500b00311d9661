//! What a wait keeps: how a fence waits ([`Wait`]), its clock on the
//! driver's time ([`WaitClock`]), and what an awaited fence or drain keeps
//! between polls ([`AsyncWait`], [`DrainWait`]) — beside each other, below
//! the port and the device that read them.

use std::time::{Duration, Instant};

/// The first time-only wake of an awaited wait on a driver that cannot see
/// completion (`Notice::Timer`); each later one doubles, up to a
/// look-around slice.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_micros(50);

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

/// What an awaited fence keeps between polls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AsyncWait {
    pub(crate) how: Wait,
    /// The wait's clock (`fence.rs`), from the first poll that found the
    /// run not complete; `None` until then.
    pub(crate) clock: Option<WaitClock>,
    /// The next time-only wake, for a driver that cannot see completion.
    pub(crate) backoff: Duration,
    pub(crate) stall: Stall,
}

/// Time the driver's clock did not show (see `wait_queued`): a wake asked
/// for after `t` that came with the clock standing still — although the
/// host's time passed `t` — counts as `t`, so a stalled clock delays a
/// verdict but never keeps a future pending for ever.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stall {
    /// The last arming: the driver's clock then, the host's, and the time
    /// asked for.
    pub(crate) armed: Option<(Duration, Instant, Duration)>,
    pub(crate) unshown: Duration,
}

impl Stall {
    /// At a poll, the driver's clock now `clock`: the unshown time so far.
    pub(crate) fn note_unshown(&mut self, clock: Duration) -> Duration {
        if let Some((at, host, within)) = self.armed.take()
            && clock <= at
            && host.elapsed() >= within
        {
            self.unshown = self.unshown.saturating_add(within);
        }
        self.unshown
    }

    /// After arming for `within` at driver-clock time `clock`.
    pub(crate) fn note_armed(&mut self, clock: Duration, within: Duration) {
        self.armed = Some((clock, Instant::now(), within));
    }
}

impl AsyncWait {
    /// A wait of `how` (`Wait::Poll` behaves as one look).
    pub(crate) const fn new(how: Wait) -> Self {
        AsyncWait {
            how,
            clock: None,
            backoff: FIRST_BACKOFF,
            stall: Stall {
                armed: None,
                unshown: Duration::ZERO,
            },
        }
    }
}

/// What an awaited drain keeps between polls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DrainWait {
    /// `None`: the queue budget, fixed at the first poll.
    pub(crate) timeout: Option<Duration>,
    pub(crate) start: Option<(Duration, Duration, usize)>,
    pub(crate) backoff: Duration,
    pub(crate) stall: Stall,
}

impl DrainWait {
    /// A drain waiting at most `timeout` (`None`: the queue budget).
    pub(crate) const fn new(timeout: Option<Duration>) -> Self {
        DrainWait {
            timeout,
            start: None,
            backoff: FIRST_BACKOFF,
            stall: Stall {
                armed: None,
                unshown: Duration::ZERO,
            },
        }
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
