//! Completion notifications: how a [`Driver`](super::Driver) wakes a task
//! that awaits an event, instead of a thread that blocks on it.
//!
//! Two driver calls make it up:
//!
//! - [`Driver::queue_notify`](super::Driver::queue_notify), made by the
//!   contract at launch, right after a run's fence record: a driver that
//!   learns of completion through a stream task (the `acl` driver's host
//!   callback) queues it there. The default queues nothing.
//! - [`Driver::notify_event`](super::Driver::notify_event), made by an
//!   awaiting future that found its event not complete: the driver keeps
//!   the [`Waker`] and wakes it once the event completes or its stream
//!   faults, or once the given time has passed, whichever comes first, and
//!   says with a [`Notice`] which of these it can see.
//!
//! The default [`notify_event`](super::Driver::notify_event) cannot see
//! completion: a driver need not be `'static`, so no helper thread may call
//! it. It hands the waker to [`wake_after`]'s process-wide timer thread and
//! answers [`Notice::Timer`]; the awaiting future then looks again when the
//! timer fires, backing off, so a driver that implements neither call still
//! completes every future (later than one that notifies).
//!
//! A wake is a hint, never a verdict: whoever is woken queries the event
//! again, so a spurious or early wake costs a query and nothing else.

use std::sync::OnceLock;
use std::task::Waker;
use std::time::{Duration, Instant};

use super::wake::timer::TimerCore;

/// What [`Driver::notify_event`](super::Driver::notify_event) arranged.
///
/// ```
/// use std::task::Waker;
/// use std::time::Duration;
/// use runclaim::driver::{Driver, Notice};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let never_recorded = sim.create_event()?;
/// // A never-recorded event is complete: nothing to wait for.
/// let notice = sim.notify_event(never_recorded, Duration::from_millis(1), Waker::noop())?;
/// assert_eq!(notice, Notice::Ready);
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Notice {
    /// The event is complete, or its stream faulted, already: nothing was
    /// armed and the waker will not be woken for it — look now.
    Ready,
    /// Armed: the waker is woken once the event completes or its stream
    /// faults, and at the latest once the time asked for has passed.
    Completion,
    /// Armed on time only: the waker is woken once the time asked for has
    /// passed (the driver cannot see the event complete). The caller looks
    /// again then, and should ask for short times first.
    Timer,
}

/// Wakes `waker` once `after` has passed on the host's monotonic clock, from
/// one process-wide timer thread: the default of
/// [`Driver::notify_event`](super::Driver::notify_event), public for drivers
/// that want the same fallback for some events.
///
/// The thread starts at the first call and lives as long as the process,
/// asleep (no CPU) whenever nothing is armed. A waker that
/// [`will_wake`](Waker::will_wake) the same task as one already armed
/// keeps a single entry, at the earlier of the two times: what is armed is
/// bounded by the tasks waiting, not by how often they poll. A time past the end of the
/// clock is never reached: nothing is armed for it. If the thread cannot be
/// started, the waker is woken at once (the caller looks again: a busy
/// loop, never a lost wake).
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::task::{Wake, Waker};
/// use std::time::{Duration, Instant};
///
/// struct Flag(AtomicBool, std::thread::Thread);
/// impl Wake for Flag {
///     fn wake(self: Arc<Self>) {
///         self.0.store(true, Ordering::Release);
///         self.1.unpark();
///     }
/// }
/// let flag = Arc::new(Flag(AtomicBool::new(false), std::thread::current()));
/// let start = Instant::now();
/// runclaim::driver::wake_after(Duration::from_millis(2), &Waker::from(flag.clone()));
/// while !flag.0.load(Ordering::Acquire) {
///     std::thread::park();
/// }
/// assert!(start.elapsed() >= Duration::from_millis(2));
/// ```
pub fn wake_after(after: Duration, waker: &Waker) {
    let Some(at) = Instant::now().checked_add(after) else {
        return;
    };
    match timer() {
        Some(timer) => timer.arm(at, waker),
        None => waker.wake_by_ref(),
    }
}

/// The process-wide timer (the core, `driver::wake::timer`), its thread
/// started at the first call (`None` if the thread could not be started).
fn timer() -> Option<&'static TimerCore<Instant>> {
    static TIMER: OnceLock<Option<&'static TimerCore<Instant>>> = OnceLock::new();
    *TIMER.get_or_init(|| {
        let timer: &'static TimerCore<Instant> = Box::leak(Box::new(TimerCore::new()));
        std::thread::Builder::new()
            .name("runclaim-timer".into())
            .spawn(move || timer.run(Instant::now))
            .ok()
            .map(|_| timer)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }

    #[test]
    fn a_task_re_arming_keeps_one_entry_at_its_earliest_time() {
        let task = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(task.clone());
        for _ in 0..10_000 {
            wake_after(Duration::from_secs(3600), &waker);
        }
        // One clone kept (plus ours and the test's): not 10,000.
        assert!(
            Arc::strong_count(&task) <= 3,
            "{}",
            Arc::strong_count(&task)
        );
        // An earlier time replaces the later one, and fires.
        wake_after(Duration::from_millis(1), &waker);
        let deadline = Instant::now() + Duration::from_secs(20);
        while task.0.load(Ordering::Acquire) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(task.0.load(Ordering::Acquire), 1);
        assert_eq!(Arc::strong_count(&task), 2, "nothing left armed for it");
    }

    #[test]
    fn wakes_each_armed_waker_once_and_arms_nothing_past_the_clock() {
        let a = Arc::new(Count(AtomicUsize::new(0)));
        let b = Arc::new(Count(AtomicUsize::new(0)));
        let never = Arc::new(Count(AtomicUsize::new(0)));
        wake_after(Duration::from_millis(30), &Waker::from(b.clone()));
        wake_after(Duration::ZERO, &Waker::from(a.clone()));
        wake_after(Duration::MAX, &Waker::from(never.clone()));
        let deadline = Instant::now() + Duration::from_secs(20);
        while b.0.load(Ordering::Acquire) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(a.0.load(Ordering::Acquire), 1);
        assert_eq!(b.0.load(Ordering::Acquire), 1);
        assert_eq!(never.0.load(Ordering::Acquire), 0);
        // Nothing armed for `Duration::MAX`: the waker was not even kept.
        assert_eq!(Arc::strong_count(&never), 1);
    }
}
