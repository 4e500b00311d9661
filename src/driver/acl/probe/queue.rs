//! Streams, events and memory: what the driver's queue rests on.
//!
//! A stream is *held* with `aclrtStreamWaitEvent` on an old-mode event
//! (`aclrtCreateEventWithFlag`) not recorded yet — the runtime sends that
//! wait to the device (`Event::WaitSendCheck`, hicann/runtime
//! `src/runtime/core/src/event/event.cc`) — and released by recording the
//! event on another stream (`raw::Held`, which `host.rs` uses too).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::super::ffi::{ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE};
use super::super::load::Api;
use super::raw::{self, Handle, Held, hold};
use super::{Check, Need, ProbeConfig, ProbeError, Verdict, code_name, failed};
use crate::driver::STREAM_CAPACITY;

/// The driver's event flags.
pub(super) const FLAGS: u32 = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE;

/// Whether the driver's events come from `aclrtCreateEventExWithFlag`.
pub(super) fn ex(api: &Api) -> bool {
    api.create_event_ex.is_some()
}

/// Every line of this file, in order.
pub(super) fn checks(api: &Arc<Api>, device: i32, cfg: &ProbeConfig) -> Vec<Check> {
    let mut out = vec![stream_create(api)];
    out.push(
        capacity(api, device, cfg)
            .unwrap_or_else(|e| failed("stream.capacity", Need::Required, &e)),
    );
    out.push(unrecorded(api).unwrap_or_else(|e| failed("event.unrecorded", Need::Required, &e)));
    match held(api) {
        Ok(lines) => out.extend(lines),
        Err(e) => {
            out.push(failed("event.query", Need::Required, &e));
            out.push(failed("sync.timeout", Need::Required, &e));
        }
    }
    out.push(elapsed(api).unwrap_or_else(|e| failed("event.elapsed", Need::Required, &e)));
    out.push(
        alignment(api).unwrap_or_else(|e| failed("memory.alignment", Need::Informational, &e)),
    );
    out.push(copy(api).unwrap_or_else(|e| failed("memory.copy", Need::Required, &e)));
    out.push(ordering(api).unwrap_or_else(|e| failed("memory.ordering", Need::Required, &e)));
    out
}

fn stream_create(api: &Api) -> Check {
    let name = "stream.create";
    let s = match raw::stream(api) {
        Ok(s) => s,
        Err(e) => return failed(name, Need::Required, &e),
    };
    match raw::query_stream(api, s.h) {
        Ok(0) => Check::new(
            name,
            Need::Required,
            Verdict::Ok,
            "aclrtCreateStream (no flags: the driver's only kind) -> 0; aclrtStreamQuery on it: COMPLETE",
        ),
        Ok(st) => Check::new(
            name,
            Need::Required,
            Verdict::Differs,
            format!("a new stream's status is {st}, not COMPLETE (0)"),
        ),
        Err(e) => failed(name, Need::Required, &e),
    }
}

/// What the helper thread saw.
#[derive(Default)]
struct Fill {
    /// Enqueues that returned 0.
    count: AtomicU64,
    /// Inside an enqueue now.
    in_call: AtomicBool,
    /// Told to stop.
    stop: AtomicBool,
    /// Finished (its code in `code`).
    done: AtomicBool,
    code: AtomicU64,
}

/// How the fill ended, as seen by the watching thread.
enum Watched {
    /// One enqueue stayed blocked for the stall time after `n` succeeded.
    Stalled(u64),
    /// The helper finished by itself: an error code, or the limit.
    Finished,
}

/// How a fill went: what the watcher saw, the release, the helper's end.
struct Filled {
    watched: Watched,
    /// The record that releases the hold.
    release: Result<(), ProbeError>,
    /// The helper finished within 5 s of the release.
    back: bool,
    /// From the release to the helper's end.
    after: Duration,
    /// The helper's last code.
    code: i32,
    /// Copies the helper queued.
    queued: u64,
}

/// The task capacity: hold a stream, enqueue small copies from a helper
/// thread until one blocks, release, count.
fn capacity(api: &Arc<Api>, device: i32, cfg: &ProbeConfig) -> Result<Check, ProbeError> {
    let name = "stream.capacity";
    let stream = raw::stream(api)?;
    let other = raw::stream(api)?;
    let src = raw::malloc(api, 64)?;
    let dst = raw::malloc(api, 64)?;
    let gate = hold(api, &stream)?;
    let fill = Arc::new(Fill::default());
    let (seen, shared, handles) = (
        Arc::clone(&fill),
        Arc::clone(api),
        [stream.h, dst.handle(), src.handle()],
    );
    let limit = cfg.capacity_limit;
    let helper = std::thread::Builder::new()
        .name("npu-check-fill".into())
        .spawn(move || fill_stream(&shared, device, &seen, handles, limit));
    if let Err(e) = helper {
        let _ = raw::record(api, gate.h, other.h);
        let _ = raw::sync_stream(api, stream.h, 5000);
        return Ok(Check::new(
            name,
            Need::Required,
            Verdict::Unavailable,
            format!("no helper thread: {e}"),
        ));
    }
    let watched = watch(&fill, cfg.stall);
    // The helper stops after the enqueue the record releases.
    fill.stop.store(true, Ordering::SeqCst);
    let released = Instant::now();
    let release = raw::record(api, gate.h, other.h);
    let back = wait_done(&fill, Duration::from_secs(5));
    let filled = Filled {
        watched,
        release,
        back,
        after: released.elapsed(),
        code: i32::try_from(fill.code.load(Ordering::Relaxed)).unwrap_or(-1),
        queued: fill.count.load(Ordering::Relaxed),
    };
    if !filled.back {
        // Still blocked: the helper, the stream and the buffers are left to
        // the runtime rather than destroyed under a blocked enqueue.
        stream.forget();
        std::mem::forget(src);
        std::mem::forget(dst);
        std::mem::forget(gate);
        return Ok(Check::new(
            name,
            Need::Required,
            Verdict::Differs,
            format!(
                "after {} copies the next blocked and was still blocked 5 s after the record that should release it ({:?}); helper thread left behind",
                filled.queued, filled.release
            ),
        ));
    }
    let synced = raw::sync_stream(api, stream.h, 5000);
    Ok(capacity_line(&filled, synced, limit))
}

/// `stream.capacity` from a fill that came back.
fn capacity_line(f: &Filled, synced: i32, limit: usize) -> Check {
    let name = "stream.capacity";
    let stats = "a wait on an unrecorded event held the stream; 32 B copies from a helper thread";
    let (verdict, what) = match f.watched {
        Watched::Stalled(k)
            if f.code == 0 && f.release.is_ok() && synced == 0 && f.queued == k + 1 =>
        {
            let cap = k + 1;
            let vs = if cap == STREAM_CAPACITY as u64 {
                "as runclaim assumes".to_owned()
            } else {
                format!("runclaim assumes {STREAM_CAPACITY}")
            };
            (
                Verdict::Ok,
                format!(
                    "{k} queued, the next (task {}) blocked with no error; a record on another stream released it in {} us; capacity {cap} tasks ({vs})",
                    k + 2,
                    f.after.as_micros()
                ),
            )
        }
        Watched::Stalled(k) => (
            Verdict::Differs,
            format!(
                "{k} queued, the next (task {}) blocked; then: release {:?}, the blocked enqueue returned {} ({} queued in all), sync {}",
                k + 2,
                f.release,
                code_name(f.code),
                f.queued,
                code_name(synced)
            ),
        ),
        Watched::Finished if f.code != 0 => (
            Verdict::Differs,
            format!(
                "{} queued, the next (task {}) failed with {} instead of blocking",
                f.queued,
                f.queued + 2,
                code_name(f.code)
            ),
        ),
        Watched::Finished => (
            Verdict::Differs,
            format!("none of {limit} enqueues blocked"),
        ),
    };
    Check::new(name, Need::Required, verdict, format!("{stats}: {what}"))
}

/// The helper: binds the device, enqueues until an error, the limit or a
/// stop, counts, gives the device reference back.
fn fill_stream(api: &Api, device: i32, f: &Fill, [s, dst, src]: [Handle; 3], limit: usize) {
    let mut code = 0;
    if let Err(ProbeError::Code { code: c, .. }) = raw::set_device(api, device) {
        code = c;
    } else {
        for _ in 0..limit {
            if f.stop.load(Ordering::Relaxed) {
                break;
            }
            f.in_call.store(true, Ordering::SeqCst);
            code = raw::copy_async_at(api, dst, src, 32, s);
            f.in_call.store(false, Ordering::SeqCst);
            if code != 0 {
                break;
            }
            f.count.fetch_add(1, Ordering::SeqCst);
        }
        raw::reset_device(api, device);
    }
    f.code
        .store(u64::from(code.cast_unsigned()), Ordering::Relaxed);
    f.done.store(true, Ordering::SeqCst);
}

/// Watches the helper until one enqueue has stayed blocked for `stall`, or
/// the helper finished (bounded: 60 s).
fn watch(f: &Fill, stall: Duration) -> Watched {
    let start = Instant::now();
    let (mut last, mut since) = (f.count.load(Ordering::SeqCst), Instant::now());
    while start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
        if f.done.load(Ordering::SeqCst) {
            return Watched::Finished;
        }
        let n = f.count.load(Ordering::SeqCst);
        if n != last {
            (last, since) = (n, Instant::now());
        } else if f.in_call.load(Ordering::SeqCst) && since.elapsed() >= stall {
            return Watched::Stalled(n);
        }
    }
    Watched::Finished
}

/// Waits up to `limit` for the helper to finish.
fn wait_done(f: &Fill, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f.done.load(Ordering::SeqCst) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    f.done.load(Ordering::SeqCst)
}

/// A never-recorded event of the driver's kind: complete (Ex), and a wait
/// on it is satisfied at once; or, old mode, not ready (the driver answers).
fn unrecorded(api: &Api) -> Result<Check, ProbeError> {
    let name = "event.unrecorded";
    let old = raw::event(api, FLAGS, false)?;
    let old_status = raw::query_event(api, old.h)?;
    if !ex(api) {
        let v = if old_status == 0 {
            Verdict::Ok
        } else {
            Verdict::Differs
        };
        return Ok(Check::new(
            name,
            Need::Required,
            v,
            format!(
                "no aclrtCreateEventExWithFlag: old-mode events, status before a record {old_status} (NOT_READY = 0 expected; the driver answers for them)"
            ),
        ));
    }
    let e = raw::event(api, FLAGS, true)?;
    let status = raw::query_event(api, e.h)?;
    let s = raw::stream(api)?;
    let other = raw::stream(api)?;
    let m = raw::malloc(api, 64)?;
    raw::wait(api, s.h, e.h)?;
    let synced = match raw::memset_async(api, &m, 0, 64, 1, s.h) {
        Ok(()) => raw::sync_stream(api, s.h, 1000),
        Err(ProbeError::Code { code, .. }) => code,
        Err(_) => -1,
    };
    // A wait that held the stream: released by a record, else the stream
    // is left to the runtime (destroying it would wait for the wait).
    if synced != 0
        && (raw::record(api, e.h, other.h).is_err() || raw::sync_stream(api, s.h, 5000) != 0)
    {
        s.forget();
    }
    let ok = status == 1 && synced == 0;
    Ok(Check::new(
        name,
        Need::Required,
        if ok { Verdict::Ok } else { Verdict::Differs },
        format!(
            "aclrtCreateEventExWithFlag(SYNC|TIME_LINE): status before a record {status} (COMPLETE = 1 expected), a stream wait on it then a memset: sync {}; old mode (aclrtCreateEventWithFlag): status {old_status} (NOT_READY = 0, the runtime's)",
            code_name(synced)
        ),
    ))
}

/// Behind a held stream: an event recorded there is not ready, its timed
/// sync and the stream's run out with their codes; after the release both
/// complete.
fn held(api: &Api) -> Result<[Check; 2], ProbeError> {
    let mut held = Held::new(api)?;
    let e = raw::event(api, FLAGS, ex(api))?;
    let rec = raw::record(api, e.h, held.h());
    let before = raw::query_event(api, e.h);
    let ev_sync = raw::sync_event(api, e.h, 20);
    let ev_zero = raw::sync_event(api, e.h, 0);
    let st_sync = raw::sync_stream(api, held.h(), 20);
    let st_zero = raw::sync_stream(api, held.h(), 0);
    let released = held.release()?;
    let after = raw::query_event(api, e.h);
    rec?;
    let (before, after) = (before?, after?);
    let q_ok = before == 0 && after == 1 && released == 0;
    let query = Check::new(
        "event.query",
        Need::Required,
        if q_ok { Verdict::Ok } else { Verdict::Differs },
        format!(
            "recorded behind a held stream: status {before} (NOT_READY = 0 expected); after the release (sync {}): {after} (COMPLETE = 1 expected)",
            code_name(released)
        ),
    );
    let stream_part = format!(
        "aclrtSynchronizeStreamWithTimeout 20 ms -> {} (507046 expected), 0 ms -> {} (the runtime rejects 0: 107000; the driver never passes it)",
        code_name(st_sync),
        code_name(st_zero)
    );
    let sync = match (ev_sync, ev_zero) {
        (Some(t), Some(z)) => {
            let ok = t == 507_047 && st_sync == 507_046;
            Check::new(
                "sync.timeout",
                Need::Required,
                if ok { Verdict::Ok } else { Verdict::Differs },
                format!(
                    "aclrtSynchronizeEventWithTimeout 20 ms -> {} (507047 expected), 0 ms -> {}; {stream_part}",
                    code_name(t),
                    code_name(z)
                ),
            )
        }
        _ => Check::new(
            "sync.timeout",
            Need::Required,
            if st_sync == 507_046 {
                Verdict::Ok
            } else {
                Verdict::Differs
            },
            format!("no aclrtSynchronizeEventWithTimeout (the driver polls); {stream_part}"),
        ),
    };
    Ok([query, sync])
}

/// `aclrtEventElapsedTime` between two records around a memset.
fn elapsed(api: &Api) -> Result<Check, ProbeError> {
    let s = raw::stream(api)?;
    let (a, b) = (
        raw::event(api, FLAGS, ex(api))?,
        raw::event(api, FLAGS, ex(api))?,
    );
    let m = raw::malloc(api, 4096)?;
    raw::record(api, a.h, s.h)?;
    raw::memset_async(api, &m, 0, 4096, 7, s.h)?;
    raw::record(api, b.h, s.h)?;
    let synced = raw::sync_stream(api, s.h, 5000);
    let ms = raw::elapsed(api, a.h, b.h)?;
    let ok = synced == 0 && ms.is_finite() && ms >= 0.0;
    Ok(Check::new(
        "event.elapsed",
        Need::Required,
        if ok { Verdict::Ok } else { Verdict::Differs },
        format!(
            "two records around a 4 KiB memset on one stream: {ms} ms (finite and >= 0 expected), sync {}",
            code_name(synced)
        ),
    ))
}

/// The alignment every allocation had.
fn alignment(api: &Api) -> Result<Check, ProbeError> {
    let mut align = u64::MAX;
    let mut held = Vec::new();
    for len in [1usize, 33, 4096, 65_537, 1, 33, 4096, 65_537] {
        let m = raw::malloc(api, len)?;
        align = align.min(1u64 << m.addr().trailing_zeros().min(63));
        held.push(m);
    }
    let v = if align >= 32 {
        Verdict::Ok
    } else {
        Verdict::Differs
    };
    Ok(Check::new(
        "memory.alignment",
        Need::Informational,
        v,
        format!(
            "8 allocations of 1 B to 64 KiB: every address a multiple of {align} B (32 B or more expected)"
        ),
    ))
}

/// A synchronous round trip: 4 KiB of a pattern to the device and back.
fn copy(api: &Api) -> Result<Check, ProbeError> {
    let m = raw::malloc(api, 4096)?;
    let data: Vec<u8> = (0..4096u32).map(|i| (i % 251).to_le_bytes()[0]).collect();
    raw::write(api, &m, &data)?;
    let back = raw::read(api, &m)?;
    let same = back == data;
    let first = back.iter().zip(&data).position(|(a, b)| a != b);
    Ok(Check::new(
        "memory.copy",
        Need::Required,
        if same { Verdict::Ok } else { Verdict::Differs },
        match first {
            None => "aclrtMemcpy 4 KiB host to device and back: every byte as written".to_owned(),
            Some(i) => format!("aclrtMemcpy 4 KiB host to device and back: byte {i} differs"),
        },
    ))
}

/// Stream order of memsets and a copy behind a held stream: the host sees
/// the last writes, not the synchronous memset before them.
fn ordering(api: &Api) -> Result<Check, ProbeError> {
    let (a, b) = (raw::malloc(api, 256)?, raw::malloc(api, 256)?);
    raw::memset(api, &a, 0x11)?;
    raw::memset(api, &b, 0x44)?;
    let mut held = Held::new(api)?;
    let queued = (|| {
        raw::memset_async(api, &a, 0, 256, 0x22, held.h())?;
        raw::memset_async(api, &a, 128, 128, 0x33, held.h())?;
        raw::copy_async(api, &b, &a, held.h())
    })();
    let early = raw::read(api, &b);
    let synced = held.release()?;
    drop(held);
    queued?;
    let (early, seen) = (early?, raw::read(api, &b)?);
    let want = |i: usize| if i < 128 { 0x22 } else { 0x33 };
    let ok = synced == 0 && seen.iter().enumerate().all(|(i, &v)| v == want(i));
    let untouched = early.iter().all(|&v| v == 0x44);
    Ok(Check::new(
        "memory.ordering",
        Need::Required,
        if ok && untouched {
            Verdict::Ok
        } else {
            Verdict::Differs
        },
        format!(
            "aclrtMemset 0x11; held stream: memset 0x22, memset 0x33 on the upper half, copy to a buffer set to 0x44; before the release it read 0x{:02x}..0x{:02x} (0x44 expected); after it (sync {}): 0x{:02x}..0x{:02x} (0x22..0x33 expected)",
            early.first().copied().unwrap_or(0),
            early.last().copied().unwrap_or(0),
            code_name(synced),
            seen.first().copied().unwrap_or(0),
            seen.last().copied().unwrap_or(0),
        ),
    ))
}
