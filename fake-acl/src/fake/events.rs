//! Events in both modes: `aclrtCreateEventWithFlag` ("old mode": not ready
//! until recorded) and `aclrtCreateEventExWithFlag` (complete before the
//! first record), destroy, record, `aclrtQueryEventStatus`,
//! `aclrtStreamWaitEvent` (an old-mode wait on a never-recorded event waits
//! for the event's next record), the timed sync, elapsed time and
//! timestamps.

use std::ffi::{c_int, c_void};

#[cfg(feature = "optional-symbols")]
use runclaim::driver::DriverErrorKind;
use runclaim::driver::acl::codes::Waited;
use runclaim::driver::{Completion, Driver, DriverError, EventId, Op};
use runclaim::sim::{Fault, SimDriver};

#[cfg(not(feature = "omit-required"))]
use super::note;
use super::quirk;
use super::shim::{call, call_out, event_of, export, stream_of};
#[cfg(feature = "optional-symbols")]
use super::streams::{refuse_timeout, timeout_of};
use super::with_dev;
use crate::control::QUIRK_EVENT_COMPLETE_AT_RECORD;
#[cfg(feature = "optional-symbols")]
use crate::control::{QUIRK_EVENT_SYNC_TIMEOUT_SUCCEEDS, QUIRK_EX_EVENT_NOT_READY};

/// Old mode: not ready until its first record.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(evt: *mut *mut c_void, _flag: u32) -> c_int {
    // SAFETY: `evt` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(evt, Waited::Event, |id, s| {
            let e = s.create_event()?;
            with_dev(id, |d| d.unrecorded.insert(e.raw()));
            Ok(export(id, e.raw()))
        })
    }
}

/// New mode: complete before its first record.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(evt: *mut *mut c_void, _flag: u32) -> c_int {
    // SAFETY: `evt` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(evt, Waited::Event, |id, s| {
            let e = s.create_event()?;
            if quirk(id, QUIRK_EX_EVENT_NOT_READY) {
                with_dev(id, |d| d.unrecorded.insert(e.raw()));
            }
            Ok(export(id, e.raw()))
        })
    }
}

fn unrecorded(device: i32, e: EventId) -> bool {
    with_dev(device, |d| d.unrecorded.contains(&e.raw())).unwrap_or(false)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDestroyEvent(evt: *mut c_void) -> c_int {
    call(Waited::Event, |id, s| {
        let e = event_of(id, Op::DestroyEvent, evt)?;
        s.destroy_event(e)?;
        with_dev(id, |d| d.unrecorded.remove(&e.raw()));
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRecordEvent(evt: *mut c_void, stm: *mut c_void) -> c_int {
    call(Waited::Event, |id, s| {
        let e = event_of(id, Op::RecordEvent, evt)?;
        let st = stream_of(id, Op::RecordEvent, stm)?;
        // The gate first: the record's submission then wakes the device,
        // which finds the waits satisfied.
        open_gate(id, s, e);
        s.record_event(e, st)?;
        with_dev(id, |d| d.unrecorded.remove(&e.raw()));
        Ok(())
    })
}

/// The recorded-status enum: `NOT_READY` = 0, `COMPLETE` = 1 (the reverse of
/// the stream status); [`QUIRK_EVENT_COMPLETE_AT_RECORD`] answers 1 once
/// the event's record is queued.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryEventStatus(evt: *mut c_void, status: *mut u32) -> c_int {
    // SAFETY: `status` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(status, Waited::Event, |id, s| {
            let e = event_of(id, Op::QueryEvent, evt)?;
            if unrecorded(id, e) {
                return Ok(0);
            }
            if quirk(id, QUIRK_EVENT_COMPLETE_AT_RECORD) {
                return Ok(1);
            }
            s.query_event(e)
                .map(|c| u32::from(c == Completion::Complete))
        })
    }
}

/// The simulator event a wait on never-recorded old-mode event `old`
/// waits for: recorded once, with the simulator's "never completes" fault
/// armed for exactly that record, on the device's gate stream. The old
/// event's next record destroys it ([`open_gate`]).
#[cfg_attr(
    feature = "omit-required",
    allow(dead_code, reason = "used by the symbol the incomplete variant omits")
)]
fn gate(device: i32, s: &SimDriver, old: EventId) -> Result<EventId, DriverError> {
    if let Some(Some(e)) = with_dev(device, |d| d.gates.get(&old.raw()).copied()) {
        return Ok(e);
    }
    let stream = if let Some(st) = with_dev(device, |d| d.gate_stream).flatten() {
        st
    } else {
        let st = s.create_stream()?;
        with_dev(device, |d| d.gate_stream = Some(st));
        st
    };
    let e = s.create_event()?;
    s.inject(Fault::EventNeverCompletes { nth: 1 });
    s.record_event(e, stream)?;
    with_dev(device, |d| d.gates.insert(old.raw(), e));
    Ok(e)
}

/// The record of old-mode event `old`: the waits queued on it before its
/// first record are satisfied (their gate event is destroyed).
fn open_gate(device: i32, s: &SimDriver, old: EventId) {
    if let Some(Some(g)) = with_dev(device, |d| d.gates.remove(&old.raw())) {
        let _ = s.destroy_event(g);
    }
}

#[cfg(not(feature = "omit-required"))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamWaitEvent(stm: *mut c_void, evt: *mut c_void) -> c_int {
    call(Waited::Event, |id, s| {
        let st = stream_of(id, Op::StreamWaitEvent, stm)?;
        let e = event_of(id, Op::StreamWaitEvent, evt)?;
        if unrecorded(id, e) {
            // Old mode: the device waits for the event's next record.
            note(id, |rt| rt.unsatisfiable_waits += 1);
            return s.stream_wait_event(st, gate(id, s, e)?);
        }
        s.stream_wait_event(st, e)
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    start: *mut c_void,
    end: *mut c_void,
) -> c_int {
    // SAFETY: `ms` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(ms, Waited::Event, |id, s| {
            let (a, b) = (
                event_of(id, Op::EventElapsed, start)?,
                event_of(id, Op::EventElapsed, end)?,
            );
            let d = s.event_elapsed(a, b)?;
            let injected = with_dev(id, |dev| dev.elapsed.take()).flatten();
            Ok(injected.unwrap_or(d.as_secs_f32() * 1000.0))
        })
    }
}

// ----- optional ----------------------------------------------------------------

#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSynchronizeEventWithTimeout(evt: *mut c_void, timeout: i32) -> c_int {
    let Some(t) = timeout_of(timeout) else {
        return refuse_timeout(timeout);
    };
    call(Waited::Event, |id, s| {
        let e = event_of(id, Op::SyncEvent, evt)?;
        let synced = if unrecorded(id, e) {
            // Never completes: the wait runs out.
            Err(DriverError::new(
                Op::SyncEvent,
                DriverErrorKind::Timeout { waited: t },
            ))
        } else {
            s.sync_event(e, t)
        };
        match synced {
            Err(e)
                if matches!(e.kind(), DriverErrorKind::Timeout { .. })
                    && quirk(id, QUIRK_EVENT_SYNC_TIMEOUT_SUCCEEDS) =>
            {
                Ok(())
            }
            r => r,
        }
    })
}

/// Device uptime in µs.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventGetTimestamp(evt: *mut c_void, ts: *mut u64) -> c_int {
    use runclaim::driver::abi::TICKS_PER_SEC;
    // SAFETY: `ts` is the caller's out-pointer (ACL contract).
    unsafe {
        call_out(ts, Waited::Event, |id, s| {
            s.event_timestamp(event_of(id, Op::EventTimestamp, evt)?)
                .map(|ticks| ticks / (TICKS_PER_SEC / 1_000_000))
        })
    }
}
