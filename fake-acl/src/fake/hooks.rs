//! The `runclaim_fake_*` entry points behind the control API (`control`):
//! configure, choose the kernel protocol a device speaks, release, inject
//! faults and codes, and read back a device's counters, clock and trace,
//! whether it is live or already released.

use std::ffi::{CStr, c_char, c_int};

use runclaim::driver::Driver;
use runclaim::sim::ModelHandle;

use super::super::control::{
    FakeConfig, FakeRuntime, FakeStats, FakeTraceEntry, INJECT_CODE, INJECT_ELAPSED, decode_fault,
    encode_trace,
};
#[cfg(feature = "optional-symbols")]
use super::VERSION;
use super::{CONTEXT_NULL, Dev, PARAM_INVALID, State, new_dev, release, state};

/// Configures device `device` afresh: a live device gets a new simulator at
/// once (keeping its references); otherwise the configuration applies at
/// the device's next `aclrtSetDevice`. The device model
/// (`runclaim_fake_device_model`) is a setting of its own: a configuration
/// keeps it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_configure(device: i32, cfg: *const FakeConfig) -> c_int {
    if cfg.is_null() {
        return PARAM_INVALID;
    }
    // SAFETY: non-NULL, points at a FakeConfig (control contract).
    let cfg = unsafe { *cfg };
    let mut st = state();
    st.configs.insert(device, cfg);
    st.retired.remove(&device);
    let old = renew(&mut st, device);
    if old.is_none() {
        st.runtime.remove(&device);
    }
    drop(st);
    drop(old);
    0
}

/// Makes device `device` speak the built-in kernel protocol `name` (a
/// NUL-terminated [`ModelHandle::builtin`] name: `"runclaim"`, the
/// default, or `"a2a3"`; NULL restores the default). Like a configuration,
/// a live device gets a new simulator at once (keeping its references);
/// otherwise the model applies at the device's next `aclrtSetDevice`, and
/// it stays until changed (a `runclaim_fake_configure` keeps it). 0, or
/// 107000 for a name that is not a built-in protocol (nothing changes).
///
/// Only the built-in protocols: a user [`DeviceModel`](runclaim::sim::DeviceModel)
/// is a Rust value in the test process, which this library cannot reach.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_device_model(device: i32, name: *const c_char) -> c_int {
    let model = if name.is_null() {
        ModelHandle::default()
    } else {
        // SAFETY: non-NULL and NUL-terminated (control contract).
        let name = unsafe { CStr::from_ptr(name) };
        match name.to_str().ok().and_then(ModelHandle::builtin) {
            Some(m) => m,
            None => return PARAM_INVALID,
        }
    };
    let mut st = state();
    st.models.insert(device, model);
    st.retired.remove(&device);
    let old = renew(&mut st, device);
    drop(st);
    drop(old);
    0
}

/// Gives a live `device` a new simulator with its current configuration
/// and model, keeping its references; the old record, to drop outside the
/// lock (`None` when the device is not live).
fn renew(st: &mut State, device: i32) -> Option<Dev> {
    if !st.devices.contains_key(&device) {
        return None;
    }
    let fresh = new_dev(st, device);
    st.devices
        .get_mut(&device)
        .map(|dev| std::mem::replace(dev, fresh))
}

/// Releases device `device` now, whatever its references: its simulator is
/// dropped (a real-time device thread joined); counters and trace stay
/// readable. 0, or 107002 when the device is not live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_release(device: i32) -> c_int {
    let released = release(&mut state(), device);
    if released.is_none() {
        return CONTEXT_NULL;
    }
    drop(released);
    0
}

/// Arms a simulator fault, or (kind [`INJECT_CODE`]) makes the `nth` ACL
/// call on the device return `arg` as its code, or (kind
/// [`INJECT_ELAPSED`]) makes the next elapsed time the `f32` of bits `arg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_inject(
    device: i32,
    kind: u32,
    a: u32,
    nth: u64,
    arg: u64,
) -> c_int {
    let mut st = state();
    let Some(dev) = st.devices.get_mut(&device) else {
        return CONTEXT_NULL;
    };
    match kind {
        INJECT_CODE => {
            dev.codes
                .push((nth.max(1), c_int::try_from(arg).unwrap_or(c_int::MAX)));
            return 0;
        }
        INJECT_ELAPSED => {
            dev.elapsed = Some(f32::from_bits(u32::try_from(arg).unwrap_or(0)));
            return 0;
        }
        _ => {}
    }
    match decode_fault(kind, a, nth, arg) {
        Some(f) => {
            dev.sim.inject(f);
            0
        }
        None => PARAM_INVALID,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_stats(device: i32, out: *mut FakeStats) -> c_int {
    if out.is_null() {
        return PARAM_INVALID;
    }
    let st = state();
    let stats = match (st.devices.get(&device), st.retired.get(&device)) {
        (Some(dev), _) => FakeStats::from_sim(&dev.sim.stats()),
        (None, Some(r)) => r.stats,
        (None, None) => return CONTEXT_NULL,
    };
    // SAFETY: non-NULL out-pointer (control contract).
    unsafe { out.write(stats) };
    0
}

/// What the fake runtime observed on `device` ([`FakeRuntime`]); zeros for a
/// device it never saw.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_runtime(device: i32, out: *mut FakeRuntime) -> c_int {
    if out.is_null() {
        return PARAM_INVALID;
    }
    let rt = state().runtime.get(&device).copied().unwrap_or_default();
    // SAFETY: non-NULL out-pointer (control contract).
    unsafe { out.write(rt) };
    0
}

/// Makes `aclrtGetVersion` report `major.minor.patch` on the calling thread
/// (a negative `major` restores the default, 1.17.0).
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_set_version(major: i32, minor: i32, patch: i32) -> c_int {
    let v = (major >= 0).then_some((major, minor, patch));
    let _ = VERSION.try_with(|c| c.set(v));
    0
}

/// The device's clock in nanoseconds (`Driver::clock` of its simulator:
/// virtual time in stepped mode), for a test driver that must judge waits on
/// the fake device's own clock. A released device reports its last clock.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_clock(device: i32, out_ns: *mut u64) -> c_int {
    if out_ns.is_null() {
        return PARAM_INVALID;
    }
    let sim = {
        let st = state();
        match (st.devices.get(&device), st.retired.get(&device)) {
            (Some(dev), _) => std::sync::Arc::clone(&dev.sim),
            (None, Some(r)) => {
                // SAFETY: non-NULL out-pointer (control contract).
                unsafe { out_ns.write(r.clock_ns) };
                return 0;
            }
            (None, None) => return CONTEXT_NULL,
        }
    };
    let ns = u64::try_from(sim.clock().as_nanos()).unwrap_or(u64::MAX);
    // SAFETY: non-NULL out-pointer (control contract).
    unsafe { out_ns.write(ns) };
    0
}

/// Copies up to `cap` trace entries (oldest first); returns how many, or -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_trace(
    device: i32,
    out: *mut FakeTraceEntry,
    cap: usize,
) -> isize {
    if out.is_null() {
        return -1;
    }
    let st = state();
    let trace: Vec<FakeTraceEntry> = match (st.devices.get(&device), st.retired.get(&device)) {
        (Some(dev), _) => dev.sim.trace().iter().map(encode_trace).collect(),
        (None, Some(r)) => r.trace.clone(),
        (None, None) => return -1,
    };
    drop(st);
    let n = trace.len().min(cap);
    for (i, t) in trace.into_iter().take(n).enumerate() {
        // SAFETY: `out` is writable for `cap` entries (control contract) and
        // `i < n <= cap`.
        unsafe { out.add(i).write(t) };
    }
    isize::try_from(n).unwrap_or(-1)
}

/// Sets device `device`'s quirks (`control::QUIRK_*` bits; 0: none): each
/// makes the device behave unlike the runtime in one respect, for the
/// runtime check's negative controls. They apply at once to a live device
/// and stay for its later lives, until changed. Always 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn runclaim_fake_quirks(device: i32, bits: u32) -> c_int {
    let mut st = state();
    st.quirks.insert(device, bits);
    if let Some(dev) = st.devices.get_mut(&device) {
        dev.quirks = bits;
    }
    0
}
