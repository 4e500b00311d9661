//! The thread's way to sleep: every blocking wait of the crate is its
//! awaited twin's poll, driven on the calling thread by [`block_on`].
//! Where a look would arm a task's waker for an event, a poll on this
//! thread's sleeper records the sleep instead ([`ask`]); `block_on` then
//! makes the driver's blocking call on it (`sync_event`, `sync_stream`),
//! and its answer feeds the next look ([`woke`]). So a blocking fence
//! sleeps in the runtime's own wait and costs no extra query, and a
//! stepped simulator is driven by the wait as a real device is waited on.
//!
//! A poll that parks on something no look names (a shared device's
//! arrivals, its tickets) registered this thread's waker where it parks;
//! whoever wakes the parked (the hub, a ticket's settler) unparks the
//! thread. A bounded park stands behind it: a missed wake would make a
//! blocking call slow, never hung.

use std::cell::Cell;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use super::wait::{Sleep, Woke};

/// What makes a thread's sleeps: the driver's blocking calls.
pub(crate) trait Sleeps {
    /// Sleeps on `sleep.on` for at most `sleep.within` (on a stepped
    /// simulator, driving the device meanwhile): what the driver said.
    fn sleep(&self, sleep: Sleep) -> Woke;
    /// The longest park on a wake no sleep names.
    fn backstop(&self) -> Duration;
}

/// Wakes the parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A thread's sleeper: its waker, the sleep its last poll asked for, and
/// what the last sleep said.
struct Sleeper {
    waker: Waker,
    asked: Cell<Option<Sleep>>,
    answer: Cell<Option<Woke>>,
}

impl Sleeper {
    fn new() -> Self {
        Sleeper {
            waker: Waker::from(Arc::new(Unpark(thread::current()))),
            asked: Cell::new(None),
            answer: Cell::new(None),
        }
    }
}

thread_local! {
    // One per thread, made at its first blocking wait: a blocking wait
    // allocates nothing after that.
    static SLEEPER: Sleeper = Sleeper::new();
    // How many `block_on`s this thread is inside: while none, no waker
    // is the sleeper's, and a task's poll need not reach the sleeper
    // (a constant-initialised local, read without a lazy-init check).
    static DRIVING: Cell<u32> = const { Cell::new(0) };
}

/// `true` while this thread is inside a [`block_on`].
#[inline]
fn driving() -> bool {
    DRIVING.try_with(|d| d.get() != 0).unwrap_or(false)
}

/// Runs `f` with this thread's sleeper, or — while the thread's locals
/// are being destroyed (a blocking wait in another local's `Drop`) — with
/// one of its own, which no look recognises: its polls arm the driver's
/// notifications and park, as a task's would.
fn with_sleeper<T>(f: impl FnOnce(&Sleeper) -> T) -> T {
    if SLEEPER.try_with(|_| ()).is_ok() {
        // Just seen alive, on this thread: `with` finds it.
        SLEEPER.with(f)
    } else {
        f(&Sleeper::new())
    }
}

/// `true` when `waker` is this thread's sleeper's (a poll driven by
/// [`block_on`]): `sleep` is recorded for it, in place of an arming. A
/// thread makes one sleep per poll: of the sleeps a poll's looks ask for,
/// the one on the oldest run (lowest `seq`; the first asked among equals),
/// which in stream order completes first — a wait for any of them (a
/// submission waiting for a lane) must not sleep past it.
#[inline]
pub(crate) fn ask(waker: &Waker, sleep: Sleep) -> bool {
    driving() && ask_driven(waker, sleep)
}

/// [`ask`] on a thread inside a [`block_on`].
fn ask_driven(waker: &Waker, sleep: Sleep) -> bool {
    SLEEPER
        .try_with(|s| {
            let ours = waker.will_wake(&s.waker);
            if ours && s.asked.get().is_none_or(|a| sleep.seq < a.seq) {
                s.asked.set(Some(sleep));
            }
            ours
        })
        .unwrap_or(false)
}

/// What the sleep before this poll said, when `waker` is this thread's
/// sleeper's; [`Woke::Polled`] otherwise (a task's wake says nothing).
#[inline]
pub(crate) fn woke(waker: &Waker) -> Woke {
    if driving() {
        woke_driven(waker)
    } else {
        Woke::Polled
    }
}

/// [`woke`] on a thread inside a [`block_on`].
fn woke_driven(waker: &Waker) -> Woke {
    SLEEPER
        .try_with(|s| {
            if !waker.will_wake(&s.waker) {
                return None;
            }
            // Every look of the poll hears it (each takes what is about
            // its own event): read, and kept until the next sleep.
            let answer = s.answer.take();
            s.answer.set(answer.clone());
            answer
        })
        .ok()
        .flatten()
        .unwrap_or(Woke::Polled)
}

/// A [`block_on`] in progress on a sleeper: the record of the wait it is
/// nested in (if any), put back as it ends — returned or unwound.
struct Driving<'s> {
    sleeper: &'s Sleeper,
    outer: (Option<Sleep>, Option<Woke>),
}

impl<'s> Driving<'s> {
    fn enter(sleeper: &'s Sleeper) -> Self {
        // A `Cell` without a destructor: always reachable.
        let _ = DRIVING.try_with(|d| d.set(d.get().saturating_add(1)));
        Driving {
            sleeper,
            outer: (sleeper.asked.take(), sleeper.answer.take()),
        }
    }
}

impl Drop for Driving<'_> {
    fn drop(&mut self) {
        self.sleeper.asked.set(self.outer.0.take());
        self.sleeper.answer.set(self.outer.1.take());
        let _ = DRIVING.try_with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// Drives `poll` to its end on this thread: `first` (a run's own fence)
/// slept on before the first poll, then, after each `Pending`, the sleep
/// the poll asked for — or, with none asked, a park until the poll's
/// waker is woken (at most `by.backstop()`).
///
/// Re-entrant: a blocking wait inside a poll (a run's drop) keeps the
/// outer wait's record aside and puts it back, also when a poll panics.
pub(crate) fn block_on<S: Sleeps + ?Sized, T>(
    by: &S,
    first: Option<Sleep>,
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> T {
    // The value is put here, not returned through the thread-local's
    // closures: a future's output (a workload handed back) is a kilobyte,
    // and each frame it is returned through would copy it.
    let mut out = None;
    with_sleeper(|s| {
        let _driving = Driving::enter(s);
        let mut cx = Context::from_waker(&s.waker);
        if let Some(first) = first {
            s.answer.set(Some(by.sleep(first)));
        }
        loop {
            if let Poll::Ready(r) = poll(&mut cx) {
                out = Some(r);
                break;
            }
            // A poll that did not look leaves the last answer unread: it
            // says nothing of the next sleep.
            s.answer.set(None);
            match s.asked.take() {
                Some(sleep) => s.answer.set(Some(by.sleep(sleep))),
                None => thread::park_timeout(by.backstop()),
            }
        }
    });
    match out {
        Some(r) => r,
        // The loop above ends only with a value.
        None => unreachable!("runclaim: a blocking wait ended without its value"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::wait::On;
    use crate::driver::EventId;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting(AtomicUsize);

    impl Sleeps for Counting {
        fn sleep(&self, sleep: Sleep) -> Woke {
            self.0.fetch_add(1, Ordering::Relaxed);
            Woke::Slept {
                on: sleep.on,
                within: sleep.within,
                said: crate::contract::wait::Said::Complete,
            }
        }
        fn backstop(&self) -> Duration {
            Duration::from_millis(1)
        }
    }

    fn sleep_on(raw: u64) -> Sleep {
        Sleep {
            on: On::Event(EventId::from_raw(raw)),
            within: Duration::from_millis(1),
            at: Duration::ZERO,
            seq: raw,
        }
    }

    /// A poll on this thread's sleeper asks, and the next poll hears what
    /// the sleep said; a nested wait leaves the outer one's record as it
    /// was.
    #[test]
    fn a_poll_asks_and_the_next_poll_hears_the_answer() {
        let by = Counting(AtomicUsize::new(0));
        let mut polls = 0;
        let heard = block_on(&by, None, |cx| {
            polls += 1;
            let w = woke(cx.waker());
            if polls == 1 {
                assert!(matches!(w, Woke::Polled));
                assert!(ask(cx.waker(), sleep_on(7)));
                // A wait inside the poll (a drop): its own record.
                let inner = block_on(&by, Some(sleep_on(9)), |cx| {
                    Poll::Ready(
                        woke(cx.waker())
                            .of(On::Event(EventId::from_raw(9)))
                            .is_some_and(|r| r.is_ok()),
                    )
                });
                assert!(inner);
                return Poll::Pending;
            }
            Poll::Ready(w)
        });
        assert_eq!(polls, 2);
        assert!(matches!(
            heard.of(On::Event(EventId::from_raw(7))),
            Some(Ok(()))
        ));
        assert_eq!(by.0.load(Ordering::Relaxed), 2);
    }

    /// A poll that panics inside a nested wait leaves the outer wait's
    /// record as it was, and the thread no longer driving once both end.
    #[test]
    fn a_panicking_inner_wait_puts_the_outer_record_back() {
        let by = Counting(AtomicUsize::new(0));
        let heard = block_on(&by, Some(sleep_on(3)), |cx| {
            let inner = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                block_on(&by, Some(sleep_on(4)), |_| -> Poll<()> {
                    panic!("a drop's wait")
                });
            }));
            assert!(inner.is_err());
            assert!(driving());
            Poll::Ready(woke(cx.waker()))
        });
        assert!(matches!(
            heard.of(On::Event(EventId::from_raw(3))),
            Some(Ok(()))
        ));
        assert!(!driving());
        // Outside any wait, even this thread's sleeper hears nothing.
        SLEEPER.with(|s| assert!(matches!(woke(&s.waker), Woke::Polled)));
    }

    /// Of the sleeps one poll asks for, the thread sleeps on the oldest
    /// run's (the first asked among equals).
    #[test]
    fn a_poll_sleeps_on_the_oldest_run_it_asked_for() {
        let by = Counting(AtomicUsize::new(0));
        let mut polls = 0;
        let heard = block_on(&by, None, |cx| {
            polls += 1;
            if polls == 1 {
                for raw in [8, 5, 9, 5] {
                    assert!(ask(cx.waker(), sleep_on(raw)));
                }
                return Poll::Pending;
            }
            Poll::Ready(woke(cx.waker()))
        });
        assert!(heard.of(On::Event(EventId::from_raw(5))).is_some());
        assert!(heard.of(On::Event(EventId::from_raw(9))).is_none());
        assert_eq!(by.0.load(Ordering::Relaxed), 1);
    }

    /// Negative control: a waker that is not this thread's sleeper's is
    /// never asked for a sleep, and hears nothing.
    #[test]
    fn another_waker_is_not_the_sleeper() {
        assert!(!ask(Waker::noop(), sleep_on(1)));
        assert!(matches!(woke(Waker::noop()), Woke::Polled));
    }
}
