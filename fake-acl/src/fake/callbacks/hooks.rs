//! The callbacks' control hooks (`runclaim_fake_*`), and the report gate
//! they set.

use std::ffi::c_int;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use super::super::{PARAM_INVALID, current};
use super::{Callbacks, DUE, FakeCallbacks, callbacks, counters, live_devices, prune};

/// The report gate's hold (see the module documentation): when the gate
/// is set for the calling thread's device, waits until the next
/// `aclrtLaunchCallback` on it (at most [`HOLD_LIMIT`], so nothing hangs).
pub(super) fn hold_unsubscribed(
    mut cb: MutexGuard<'static, Callbacks>,
) -> MutexGuard<'static, Callbacks> {
    let Some(device) = current().filter(|d| cb.hold.remove(d)) else {
        return cb;
    };
    let c = counters(&mut cb, device);
    c.held_reports += 1;
    c.holding = 1;
    cb.holding.insert(device);
    let until = Instant::now() + HOLD_LIMIT;
    while cb.holding.contains(&device) {
        let now = Instant::now();
        if now >= until {
            cb.holding.remove(&device);
            break;
        }
        cb = DUE
            .wait_timeout(cb, until - now)
            .map_or_else(|e| e.into_inner().0, |(g, _)| g);
    }
    counters(&mut cb, device).holding = 0;
    cb
}

/// The longest the report gate holds a report.
const HOLD_LIMIT: Duration = Duration::from_secs(60);

// ----- control hooks --------------------------------------------------------------

/// Sets the report gate for `device` (see the module documentation): its
/// next `aclrtProcessReport` that finds no stream subscribed to its thread
/// is held until the next `aclrtLaunchCallback` on the device. Counted in
/// `runclaim_fake_callbacks` (`held_reports`, `holding`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_hold_report(device: i32) -> c_int {
    callbacks().hold.insert(device);
    0
}

/// What the fake saw of `device`'s host callbacks ([`FakeCallbacks`]);
/// zeros for a device it never saw. `subscriptions` counts the live ones.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_callbacks(device: i32, out: *mut FakeCallbacks) -> c_int {
    if out.is_null() {
        return PARAM_INVALID;
    }
    let live = live_devices();
    let mut cb = callbacks();
    prune(&mut cb, &live);
    let mut c = cb.counters.get(&device).copied().unwrap_or_default();
    c.subscriptions = cb.subs.keys().filter(|(d, _)| *d == device).count() as u64;
    c.stop_on_failure = u64::from(cb.stop_on_failure.contains(&device));
    drop(cb);
    // SAFETY: non-NULL out-pointer (control contract).
    unsafe { out.write(c) };
    0
}

/// Stop-on-failure for `device` (`on` ≠ 0) or not (the default): whether
/// callbacks queued behind a fault never run. Applies from now on, to the
/// device id whatever its releases.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_stop_on_failure(device: i32, on: u32) -> c_int {
    let mut cb = callbacks();
    if on == 0 {
        cb.stop_on_failure.remove(&device);
    } else {
        cb.stop_on_failure.insert(device);
    }
    0
}

/// How many times `aclrtSetExceptionInfoCallback` was called in this
/// process.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_exception_registrations() -> u64 {
    callbacks().registrations
}
