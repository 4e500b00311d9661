//! The fake's device-side notifier thread: it moves due callbacks to
//! their subscribed threads, drops or delivers the ones a fault left
//! behind, and reports faults to the exception-info callback.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use runclaim::driver::acl::codes::{Waited, code_of};
use runclaim::driver::{DriverErrorKind, StreamId};
use runclaim::sim::SimDriver;
use runclaim::sim::trace::TraceKind;

use super::super::quirked;
use super::{
    Callback, Callbacks, DUE, ExceptionInfo, UserData, WORK, callbacks, counters, live_devices,
    progress, prune,
};
use crate::control::QUIRK_CALLBACK_OFF_THREAD;

pub(super) fn start_monitor(cb: &mut Callbacks) {
    if cb.monitor {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("fake-acl-callbacks".into())
        .spawn(monitor);
    cb.monitor = spawned.is_ok();
}

/// The fake's device-side notifier: moves due callbacks to their threads,
/// drops or delivers the ones a fault left behind, and reports faults.
fn monitor() {
    loop {
        let live = live_devices();
        let off_thread = quirked(QUIRK_CALLBACK_OFF_THREAD);
        let (mut reports, mut here) = (Vec::new(), Vec::new());
        let mut cb = callbacks();
        prune(&mut cb, &live);
        let watching = cb.subs.values().any(|s| !s.queued.is_empty());
        if !watching && cb.handler.is_none() {
            drop(WORK.wait(cb).unwrap_or_else(PoisonError::into_inner));
            continue;
        }
        if watching && deliver(&mut cb, &live, (&off_thread, &mut here)) {
            DUE.notify_all();
        }
        if let Some(handler) = cb.handler {
            for (&device, (epoch, sim)) in &live {
                for info in new_faults(&mut cb, device, *epoch, sim) {
                    counters(&mut cb, device).exceptions += 1;
                    reports.push((handler, info));
                }
            }
        }
        drop(cb);
        for (f, user_data) in here {
            // SAFETY: the caller's callback with the caller's user data,
            // exactly as given. It runs on this thread, not the subscribed
            // one — the quirk's whole difference from the runtime — which
            // only a device whose test set the quirk sees, with a callback
            // that may run on any thread (the check's locks a mutex).
            let _ = std::panic::catch_unwind(move || unsafe { f(user_data.0) });
        }
        for (handler, mut info) in reports {
            // SAFETY: a handler the caller registered for exception reports,
            // called with a valid info for the duration of the call, from a
            // runtime thread (the ACL API's contract).
            let _ = std::panic::catch_unwind(move || unsafe { handler(&raw mut info) });
        }
        let period = Duration::from_millis(if watching { 1 } else { 5 });
        let cb = callbacks();
        drop(
            WORK.wait_timeout(cb, period)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g),
        );
    }
}

/// Moves every callback whose task finished to its thread — or, for a
/// device in `off_thread` ([`QUIRK_CALLBACK_OFF_THREAD`]), into `here`, for
/// the monitor to run itself; a stream that dropped its work before
/// reaching a callback (a fault, a forced destroy) delivers it anyway or,
/// under stop-on-failure, never. Whether any became due for a thread.
fn deliver(
    cb: &mut Callbacks,
    live: &BTreeMap<i32, (u64, Arc<SimDriver>)>,
    (off_thread, here): (&BTreeSet<i32>, &mut Vec<(Callback, UserData)>),
) -> bool {
    let mut any = false;
    let keys: Vec<(i32, u64)> = cb
        .subs
        .iter()
        .filter(|(_, s)| !s.queued.is_empty())
        .map(|(&k, _)| k)
        .collect();
    for (device, stream) in keys {
        let Some((_, sim)) = live.get(&device) else {
            continue;
        };
        let stream_id = StreamId::from_raw(stream);
        let (finished, queued) = progress(sim, stream_id);
        let stop = cb.stop_on_failure.contains(&device);
        let Some(sub) = cb.subs.get_mut(&(device, stream)) else {
            continue;
        };
        let tid = sub.tid;
        let mut ready = Vec::new();
        while sub.queued.front().is_some_and(|q| q.target <= finished) {
            ready.extend(sub.queued.pop_front());
        }
        // Nothing left on the stream, yet callbacks not reached: the stream
        // dropped them (re-read: the last task may have finished since).
        let mut dropped = 0;
        if queued == 0 && !sub.queued.is_empty() {
            let (finished, queued) = progress(sim, stream_id);
            while sub.queued.front().is_some_and(|q| q.target <= finished) {
                ready.extend(sub.queued.pop_front());
            }
            if queued == 0 {
                if stop {
                    dropped = sub.queued.len() as u64;
                    sub.queued.clear();
                } else {
                    ready.extend(sub.queued.drain(..));
                }
            }
        }
        counters(cb, device).dropped += dropped;
        if !ready.is_empty() && off_thread.contains(&device) {
            counters(cb, device).run += ready.len() as u64;
            here.extend(ready.into_iter().map(|r| (r.f, r.user_data)));
        } else if !ready.is_empty() {
            any = true;
            let (_, q) = cb.due.entry(tid).or_insert((device, VecDeque::new()));
            q.extend(ready.into_iter().map(|r| (r.f, r.user_data)));
        }
    }
    any
}

/// The stream faults of `device` not reported yet, as exception infos (the
/// faulted stream read from the trace where it still holds the entry).
fn new_faults(cb: &mut Callbacks, device: i32, epoch: u64, sim: &SimDriver) -> Vec<ExceptionInfo> {
    let faults = sim.stats().kernel_faults;
    let seen = cb.faults_seen.entry((device, epoch)).or_insert(0);
    if faults <= *seen {
        return Vec::new();
    }
    let new = usize::try_from(faults - *seen).unwrap_or(usize::MAX);
    *seen = faults;
    let trace = sim.trace();
    let mut streams: Vec<(u32, u32)> = trace
        .iter()
        .rev()
        .filter_map(|t| match t.what {
            TraceKind::Faulted(kind) => Some((
                u32::try_from(t.stream.raw() & 0xffff_ffff).unwrap_or(u32::MAX),
                code_of(&DriverErrorKind::KernelFault(kind), Waited::Stream).cast_unsigned(),
            )),
            _ => None,
        })
        .take(new)
        .collect();
    streams.reverse();
    streams.resize(new, (u32::MAX, 0));
    streams
        .into_iter()
        .map(|(stream_id, retcode)| ExceptionInfo {
            task_id: 0,
            stream_id,
            thread_id: 0,
            device_id: device.cast_unsigned(),
            retcode,
        })
        .collect()
}
