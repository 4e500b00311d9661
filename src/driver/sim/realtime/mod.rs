//! How hosts wait for the device and how real time moves it: blocking waits
//! (stepped mode drives the device instead), catching the simulation up to
//! the wall clock, the real-time device thread, and host-cost spinning.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::device_state::DeviceState;
use super::{Shared, SimDriver, wake_all};
use crate::driver::abi;
use crate::driver::wake::nap::doze;
use crate::sync::MutexGuard;

impl SimDriver {
    /// Real-time mode: brings the simulation up to the wall clock under the
    /// caller's lock (a no-op in stepped mode).
    pub(super) fn advance(&self, core: &mut MutexGuard<'_, DeviceState>) {
        if core.is_real_time() {
            let (moved, next) = core.advance_real_time();
            self.shared()
                .next_gate
                .store(next.unwrap_or(u64::MAX), Ordering::Release);
            if moved {
                self.shared().epoch.fetch_add(1, Ordering::Release);
                self.notify_progress();
            }
        }
    }

    /// Waits until `cond` holds: stepped mode drives the device (budget from
    /// `timeout`), real-time mode waits for the device thread. Returns the
    /// guard, or (having released it) the time waited on expiry.
    pub(super) fn wait<'a>(
        &'a self,
        core: MutexGuard<'a, DeviceState>,
        timeout: Duration,
        cond: impl FnMut(&DeviceState) -> bool,
    ) -> Result<MutexGuard<'a, DeviceState>, Duration> {
        if core.is_real_time() {
            self.wait_real_time(core, timeout, cond)
        } else {
            self.wait_stepped(core, timeout, cond)
        }
    }

    /// A stepped wait: a budget of steps (`timeout` over the step time,
    /// capped by the configuration), each one policy step of the device.
    fn wait_stepped<'a>(
        &'a self,
        mut core: MutexGuard<'a, DeviceState>,
        timeout: Duration,
        mut cond: impl FnMut(&DeviceState) -> bool,
    ) -> Result<MutexGuard<'a, DeviceState>, Duration> {
        let step = core.cfg.step_time.max(Duration::from_nanos(1));
        // A positive wait takes at least one step, so that the virtual
        // clock moves even when the wait is shorter than a step.
        let budget = u64::try_from(timeout.as_nanos() / step.as_nanos())
            .unwrap_or(u64::MAX)
            .max(u64::from(!timeout.is_zero()))
            .min(core.cfg.max_wait_steps);
        let mut steps = 0;
        while !cond(&core) {
            if steps >= budget {
                // The steps taken moved the simulation: what they made
                // due is woken.
                self.release(core);
                return Err(step.saturating_mul(u32::try_from(steps).unwrap_or(u32::MAX)));
            }
            core.policy_step();
            steps += 1;
        }
        Ok(core)
    }

    /// A real-time wait: a wall-clock deadline (none past the clock's end);
    /// its first 2 ms spin toward the device's next gate
    /// ([`spin_toward_gate`](Self::spin_toward_gate)), then it sleeps on
    /// the progress condition 1 ms at most at a time.
    fn wait_real_time<'a>(
        &'a self,
        mut core: MutexGuard<'a, DeviceState>,
        timeout: Duration,
        mut cond: impl FnMut(&DeviceState) -> bool,
    ) -> Result<MutexGuard<'a, DeviceState>, Duration> {
        let start = Instant::now();
        // `None`: the wait has no deadline (it would lie past the clock's end).
        let deadline = start.checked_add(timeout);
        let spin_until = start + Duration::from_millis(2);
        loop {
            // Whoever looks advances: the simulation is determined by time, so
            // a waiting host need not depend on the device thread's timing.
            self.advance(&mut core);
            if cond(&core) {
                return Ok(core);
            }
            // What this host's advance made due is the device thread's to
            // wake (never woken here: this host may hold its own locks).
            if core.has_due_wakers() {
                self.shared().kick.notify_all();
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(now - start);
            }
            let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now));
            core = if now < spin_until {
                self.spin_toward_gate(core, left)
            } else {
                let left = left.min(Duration::from_millis(1));
                self.shared().waiters.fetch_add(1, Ordering::AcqRel);
                let core = self
                    .shared()
                    .progress
                    .wait_timeout(core, left)
                    .map_or_else(|e| e.into_inner().0, |(g, _)| g);
                self.shared().waiters.fetch_sub(1, Ordering::AcqRel);
                core
            };
        }
    }

    /// One look of a real-time wait's first milliseconds, toward the
    /// device's next gate, at most `left` of the wait: far from it, a
    /// plain sleep through most of the way; near it, a spin on the progress
    /// epoch (not the lock: the device thread must not queue behind a
    /// polling host) for at most 50 µs, for conditions that depend on time
    /// alone. Returns the lock, taken again.
    fn spin_toward_gate<'a>(
        &'a self,
        core: MutexGuard<'a, DeviceState>,
        left: Duration,
    ) -> MutexGuard<'a, DeviceState> {
        let gate = self.shared().next_gate.load(Ordering::Acquire);
        let until_gate = gate.saturating_sub(core.now());
        // Far from the next device event: sleep through most of it
        // (sleep overshoots by ~100 µs on small VMs), leaving the CPU
        // to the device thread; any device progress wakes us early.
        let far = Duration::from_nanos(abi::ticks_to_nanos(until_gate.min(1 << 40)));
        if gate != u64::MAX && far > SLEEP_THRESHOLD {
            // Nothing happens on its own before the gate, and a new
            // submission resets it; so a plain sleep, which wakes no
            // one and takes no lock.
            let nap = far.saturating_sub(SLEEP_MARGIN).min(left);
            drop(core);
            std::thread::sleep(nap);
            return self.lock();
        }
        let seen = self.shared().epoch.load(Ordering::Acquire);
        let gate_at = core
            .base()
            .filter(|_| gate != u64::MAX)
            .and_then(|b| b.checked_add(Duration::from_nanos(abi::ticks_to_nanos(gate))));
        drop(core);
        let recheck = Instant::now() + Duration::from_micros(50);
        loop {
            let t = Instant::now();
            if self.shared().epoch.load(Ordering::Acquire) != seen
                || t >= recheck
                || gate_at.is_some_and(|g| t >= g)
            {
                break;
            }
            std::hint::spin_loop();
            std::thread::yield_now();
        }
        self.lock()
    }

    /// After a blocking wait observed completion at device tick `at`, the
    /// host wakes `host_wake` later (real-time mode).
    pub(super) fn host_wake(&self, core: MutexGuard<'_, DeviceState>, at: u64) {
        if !core.is_real_time() {
            self.release(core);
            return;
        }
        let target = at.saturating_add(abi::duration_to_ticks(core.cfg.latency.host_wake));
        let base = core.base();
        self.release(core);
        let deadline =
            base.and_then(|b| b.checked_add(Duration::from_nanos(abi::ticks_to_nanos(target))));
        if let Some(deadline) = deadline {
            while Instant::now() < deadline {
                std::hint::spin_loop();
            }
        }
    }

    /// Real time: whether the device thread is asleep past the moment it
    /// must be spinning for the armed wakers (a notification just armed may
    /// have moved that moment earlier): then it must be kicked.
    pub(super) fn device_sleeps_past_target(&self, core: &DeviceState) -> bool {
        if !core.notify.nap.asleep() {
            return false;
        }
        let next = self.shared().next_gate.load(Ordering::Acquire);
        let next = (next != u64::MAX).then_some(next);
        core.notify
            .nap
            .sleeps_past(core.wake_target(next), abi::duration_to_ticks(SLEEP_MARGIN))
    }
}

/// Host waits longer than this sleep (for all but [`SLEEP_MARGIN`]) rather
/// than spin, leaving the CPU to the device thread.
const SLEEP_THRESHOLD: Duration = Duration::from_micros(300);
/// Longest the device thread sleeps with nothing due.
const DEVICE_IDLE_NAP: Duration = Duration::from_millis(1);
/// Longest the device thread sleeps towards the next gate while a waker
/// is armed (a bound, in case a gate moves without a kick).
const ARMED_NAP_CAP: Duration = Duration::from_millis(50);
/// Shortest device-thread nap (sleeps overshoot anyway).
const DEVICE_MIN_NAP: Duration = Duration::from_micros(50);
/// How much of a long wait is spun rather than slept: covers the ~100 µs a
/// sleep overshoots on a small VM (p50 ~100 µs, p90 ~120 µs measured on a
/// 2-core VM, for sleeps of 10 µs to 1 ms). Host waits and the device
/// thread's spin before a wake both use it.
const SLEEP_MARGIN: Duration = Duration::from_micros(200);

/// Busy-waits `d` on the calling thread (the modelled host cost of a call).
pub(super) fn spin_for(d: Duration) {
    if d.is_zero() {
        return;
    }
    // A cost past the clock's end would never be paid in full anyway.
    let Some(end) = Instant::now().checked_add(d) else {
        return;
    };
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// The real-time device thread: keeps the simulation moving when no host is
/// looking (hosts advance it themselves whenever they look), and wakes the
/// wakers `notify_event` armed once they are due. Device time is model
/// time, so when this thread runs late nothing the device records changes;
/// it therefore sleeps to the next gate rather than spin, and needs no
/// wake-up on submissions.
///
/// A wake, though, is seen on the host's clock: with wakers armed, it
/// sleeps only until [`SLEEP_MARGIN`] before the moment one may become due
/// ([`DeviceState::wake_target`]: a deadline, a late record landing, or the
/// next gate when an armed record is close to its stream's head), and spins
/// the rest (without the lock), so the wake follows the completion by
/// microseconds rather than by a sleep's overshoot. Nothing else is ever
/// spun: waiting on a long kernel costs a nap per millisecond and one margin
/// of spinning at its end. With nothing armed it behaves as it always did.
pub(super) fn device_thread(shared: &Shared) {
    let lock = || {
        shared
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let margin = abi::duration_to_ticks(SLEEP_MARGIN);
    loop {
        let mut core = lock();
        if core.shutdown {
            return;
        }
        let (progressed, next) = core.advance_real_time();
        shared
            .next_gate
            .store(next.unwrap_or(u64::MAX), Ordering::Release);
        if progressed {
            shared.epoch.fetch_add(1, Ordering::Release);
            shared.notify_progress();
        }
        let due = core.due_wakers();
        if !due.is_empty() {
            drop(core);
            wake_all(due);
            continue;
        }
        let now = core.now();
        let target = core.wake_target(next);
        // With a waker armed, nothing can become due before the next gate
        // or the wake target (an arm due earlier kicks this thread), so the
        // nap runs to the gate: a long awaited kernel costs a handful of
        // wake-ups, not one per millisecond.
        let cap = if target.is_some() {
            shared.armed_nap_cap()
        } else {
            DEVICE_IDLE_NAP
        };
        let nap = next.map_or(DEVICE_IDLE_NAP, |t| {
            Duration::from_nanos(abi::ticks_to_nanos(t.saturating_sub(now)))
                .clamp(DEVICE_MIN_NAP, cap)
        });
        if let Some(t) = target.filter(|&t| t <= now.saturating_add(margin)) {
            // The last margin before a moment a wake may be due: spin to it
            // without the lock, then advance at once.
            let at = core
                .base()
                .and_then(|b| b.checked_add(Duration::from_nanos(abi::ticks_to_nanos(t))));
            drop(core);
            if let Some(at) = at {
                while Instant::now() < at {
                    std::hint::spin_loop();
                }
            }
            continue;
        }
        // With a wake target, wake up a margin before it (a sleep
        // overshoots), never later than the usual nap.
        let nap = target.map_or(nap, |t| {
            let until = Duration::from_nanos(abi::ticks_to_nanos(t.saturating_sub(now)));
            nap.min(until.saturating_sub(SLEEP_MARGIN))
        });
        // Woken early by shutdown, by an arm due before the nap ends, or by
        // a change while a waker is armed (`driver::wake::nap`).
        let until = now.saturating_add(abi::duration_to_ticks(nap));
        drop(doze(&shared.kick, core, |c| &mut c.notify.nap, until, nap));
    }
}

impl Shared {
    /// The longest nap while a waker is armed: a bound, should a wake rule
    /// miss a change.
    #[cfg_attr(
        not(test),
        allow(clippy::unused_self, reason = "tests set it per simulator")
    )]
    fn armed_nap_cap(&self) -> Duration {
        #[cfg(test)]
        {
            let ns = self.armed_nap_cap.load(Ordering::Relaxed);
            if ns > 0 {
                return Duration::from_nanos(ns);
            }
        }
        ARMED_NAP_CAP
    }
}

#[cfg(test)]
mod tests;
