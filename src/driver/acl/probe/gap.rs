//! Capture of a memset sequence, and the idle gap between small runtime
//! tasks run serially (a synchronize after each, as the reference runtime
//! runs its tasks) and queued (stream-ordered, fenced by events), from the
//! device's own timestamps: runclaim's premise measured without a kernel.

use std::ptr::null_mut;
use std::time::Instant;

use super::super::ffi::{
    ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL, AclmdlRI,
};
use super::super::load::Api;
use super::raw::{self, Event, Mem, rc};
use super::{Check, Need, ProbeConfig, ProbeError, Verdict, code_name, failed};

/// Both lines.
pub(super) fn checks(api: &Api, cfg: &ProbeConfig) -> Vec<Check> {
    vec![
        capture(api).unwrap_or_else(|e| failed("capture", Need::Informational, &e)),
        idle_gap(api, cfg).unwrap_or_else(|e| failed("idle.gap", Need::Informational, &e)),
    ]
}

/// Capture → execute → destroy of two memsets.
fn capture(api: &Api) -> Result<Check, ProbeError> {
    let name = "capture";
    let (Some(begin), Some(end), Some(exec), Some(destroy)) = (
        api.capture_begin,
        api.capture_end,
        api.execute_async,
        api.model_destroy,
    ) else {
        return Ok(Check::new(
            name,
            Need::Informational,
            Verdict::Unavailable,
            "no aclmdlRICaptureBegin / End / aclmdlRIExecuteAsync / aclmdlRIDestroy: runs are not captured",
        ));
    };
    let s = raw::stream(api)?;
    let m = raw::malloc(api, 256)?;
    raw::memset(api, &m, 0)?;
    // SAFETY: a live stream of this check, not capturing, and a defined mode.
    let opened = unsafe { begin(s.h.raw(), ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL) };
    if opened != 0 {
        return Ok(Check::new(
            name,
            Need::Informational,
            Verdict::Unavailable,
            format!(
                "aclmdlRICaptureBegin -> {} (this device does not capture)",
                code_name(opened)
            ),
        ));
    }
    let queued = raw::memset_async(api, &m, 0, 256, 0x5a, s.h)
        .and_then(|()| raw::memset_async(api, &m, 128, 128, 0x6b, s.h));
    let mut model: AclmdlRI = null_mut();
    // SAFETY: the stream this thread began capturing, a valid out-pointer.
    rc("aclmdlRICaptureEnd", unsafe {
        end(s.h.raw(), &raw mut model)
    })?;
    queued?;
    if model.is_null() {
        return Err(ProbeError::Null("aclmdlRICaptureEnd"));
    }
    let captured_only = raw::read(api, &m)?;
    // SAFETY: the graph just ended into, not destroyed; a live stream.
    let executed = unsafe { exec(model, s.h.raw()) };
    let synced = raw::sync_stream(api, s.h, 5000);
    let seen = raw::read(api, &m);
    // SAFETY: the graph ended above, its one launch synchronized.
    let d = unsafe { destroy(model) };
    let seen = seen?;
    let ran = seen.len() == 256
        && seen
            .iter()
            .enumerate()
            .all(|(i, &v)| v == if i < 128 { 0x5a } else { 0x6b });
    let deferred = captured_only.iter().all(|&v| v == 0);
    let ok = executed == 0 && synced == 0 && d == 0 && ran && deferred;
    Ok(Check::new(
        name,
        Need::Informational,
        if ok { Verdict::Ok } else { Verdict::Differs },
        format!(
            "two memsets captured ({} while captured: 0 expected), executed -> {}, sync {}, read 0x{:02x}/0x{:02x} (0x5a/0x6b expected), destroy {}",
            if deferred {
                "memory untouched"
            } else {
                "memory WRITTEN"
            },
            code_name(executed),
            code_name(synced),
            seen.first().copied().unwrap_or(0),
            seen.last().copied().unwrap_or(0),
            code_name(d)
        ),
    ))
}

/// The median of `v` (sorted in place); 0 when empty.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// One sequence: `n` memsets, each between two records; `serial` syncs the
/// stream after each. The device-side gaps (end of one task to the start
/// of the next, µs), the task times (µs), and the host's time (µs).
fn sequence(
    api: &Api,
    m: &Mem<'_>,
    ev: &[Event<'_>],
    serial: bool,
) -> Result<(Vec<f64>, Vec<f64>, f64), ProbeError> {
    let s = raw::stream(api)?;
    let n = ev.len() / 2;
    let t = Instant::now();
    for i in 0..n {
        raw::record(api, ev[2 * i].h, s.h)?;
        raw::memset_async(api, m, 0, m.len, u8::try_from(i % 251).unwrap_or(0), s.h)?;
        raw::record(api, ev[2 * i + 1].h, s.h)?;
        if serial {
            rc(
                "aclrtSynchronizeStreamWithTimeout",
                raw::sync_stream(api, s.h, 5000),
            )?;
        }
    }
    rc(
        "aclrtSynchronizeStreamWithTimeout",
        raw::sync_stream(api, s.h, 5000),
    )?;
    let host = t.elapsed().as_secs_f64() * 1e6;
    let mut gaps = Vec::with_capacity(n);
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        tasks.push(f64::from(raw::elapsed(api, ev[2 * i].h, ev[2 * i + 1].h)?) * 1000.0);
        if i + 1 < n {
            gaps.push(f64::from(raw::elapsed(api, ev[2 * i + 1].h, ev[2 * i + 2].h)?) * 1000.0);
        }
    }
    Ok((gaps, tasks, host))
}

/// The idle gap, serial against queued.
fn idle_gap(api: &Api, cfg: &ProbeConfig) -> Result<Check, ProbeError> {
    let n = cfg.gap_tasks.max(2);
    let m = raw::malloc(api, cfg.gap_bytes.max(1))?;
    let ex = api.create_event_ex.is_some();
    let ev = (0..2 * n)
        .map(|_| raw::event(api, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE, ex))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut sg, mut st, sh) = sequence(api, &m, &ev, true)?;
    let (mut qg, mut qt, qh) = sequence(api, &m, &ev, false)?;
    let (sg, qg) = (median(&mut sg), median(&mut qg));
    let (st, qt) = (median(&mut st), median(&mut qt));
    let ratio = if qg > 0.0 {
        format!("{:.1}x", sg / qg)
    } else {
        "inf (queued gap 0)".to_owned()
    };
    let per = |h: f64| h / n as f64;
    Ok(Check::new(
        "idle.gap",
        Need::Informational,
        Verdict::Ok,
        format!(
            "{n} memsets of {} B: device gap between tasks (median) serial {sg:.1} us, queued {qg:.1} us, ratio {ratio}; task {st:.1} / {qt:.1} us; host time per task {:.1} / {:.1} us",
            m.len,
            per(sh),
            per(qh)
        ),
    ))
}
