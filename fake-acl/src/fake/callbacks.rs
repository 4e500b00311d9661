//! Host callbacks and exception reports: `aclrtSubscribeReport`,
//! `aclrtUnSubscribeReport`, `aclrtLaunchCallback`, `aclrtProcessReport`,
//! `aclrtSetExceptionInfoCallback` and the exception-info accessors, with
//! the runtime's constraints (`acl/acl_rt.h` and the runtime's callback
//! subscription table):
//!
//! - **Subscriptions.** One thread per stream: subscribing a stream that
//!   has a subscriber fails with 107011 (`ACL_ERROR_RT_STREAM_SUBSCRIBE`),
//!   whichever thread asks. A thread serves one device: subscribing it to a
//!   stream of another device than the one it serves fails with 107012
//!   (`ACL_ERROR_RT_THREAD_SUBSCRIBE`). Unsubscribing a stream without a
//!   subscriber is 107011, by another thread than its subscriber 107012. A
//!   device's release ends its subscriptions (its streams are gone).
//! - **A callback is a stream task.** `aclrtLaunchCallback` on a stream
//!   without a subscriber fails with 107015 (`ACL_ERROR_RT_STREAM_NO_CB_REG`).
//!   Otherwise it queues a task on the stream — a wait on an event of the
//!   fake's own that is never recorded, so it completes as soon as the
//!   stream reaches it — which counts against the stream's capacity like
//!   any task (a full stream blocks the launch as it blocks any enqueue),
//!   and the callback becomes *due* once that task finished: after
//!   everything queued ahead of it on the stream completed.
//! - **Delivery.** `aclrtProcessReport(timeout)` (ms: -1 forever, > 0; 0
//!   and below -1 are 100000, `ACL_ERROR_INVALID_PARAM`) must be called on
//!   a subscribed thread (else 107012), blocks on a condition variable for
//!   up to `timeout` until a callback of one of its streams is due, and runs
//!   every due one on the calling thread, in stream order: 0, or 507012
//!   (`ACL_ERROR_RT_REPORT_TIMEOUT`) when none was due — or when the
//!   thread's last subscription ended meanwhile (it then serves no device:
//!   a reactor's shutdown, which unsubscribes, need not wait out the
//!   timeout). Three quirks steer this away from the runtime for the
//!   check's negative controls: `QUIRK_CALLBACK_OFF_THREAD` (the monitor
//!   runs due callbacks itself), `QUIRK_REPORT_WAITS_UNSUBSCRIBED` (the
//!   107012 comes after the timeout) and `QUIRK_CALLBACK_EARLY` (a callback
//!   is due as soon as it is queued, its task still queued behind the rest).
//! - **The report gate** (`runclaim_fake_hold_report`, for tests): the next
//!   `aclrtProcessReport` on a thread bound to the device that finds no
//!   stream subscribed to it is held — after it found none, before it
//!   answers 107012 — until the next `aclrtLaunchCallback` on the device.
//!   A driver subscribes before it queues a callback, so that subscription
//!   has returned by then: the gate makes "the reactor found nothing
//!   subscribed, then a subscription came, then it went to sleep" happen
//!   every time, not once in many runs.
//! - **Faults.** The simulator drops a faulted stream's queued work. By
//!   default the fake then delivers the callbacks that were queued behind
//!   the fault (continue-on-failure: the runtime runs later tasks); with
//!   the stop-on-failure knob (`runclaim_fake_stop_on_failure`) they never
//!   run. Either way the exception-info callback, if one is set, is called
//!   once per stream fault, from the fake's own thread, with the device and
//!   stream (the simulator's stream id) in the info.
//!
//! Nothing the fake does for callbacks counts as one of the device's calls
//! (`FakeRuntime::calls`) or fires an injected code, except the three
//! calls a driver makes on its own threads in its own order: subscribe,
//! unsubscribe, launch. `aclrtProcessReport` runs on a thread of its own
//! at its own pace, so it must not move any test's countdown.
//!
//! The simulator has no completion hook: the fake's monitor thread looks
//! at each stream that has queued callbacks every millisecond (and at
//! every live device's fault count every 5 ms while an exception callback
//! is set), without a driver call — it only reads counters, so it never
//! drives a stepped device. With nothing to watch it sleeps until a launch
//! or a registration wakes it. The counters are `runclaim_fake_callbacks`'.

#![cfg_attr(
    not(feature = "optional-symbols"),
    allow(
        dead_code,
        unused_imports,
        reason = "the lite variant exports none of the callback symbols, only the control hooks"
    )
)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use runclaim::driver::acl::codes::{AclError, Waited, code_of};
use runclaim::driver::{Driver, EventId, Op, StreamId};
use runclaim::sim::SimDriver;

use super::super::control::{FakeCallbacks, QUIRK_CALLBACK_EARLY, QUIRK_REPORT_WAITS_UNSUBSCRIBED};
use super::shim::{enter, stream_of};
use super::{PARAM_INVALID, current, quirk, set_message, state};

/// `aclrtCallback`: `void (*)(void* userData)`.
type Callback = unsafe extern "C" fn(*mut c_void);
/// `aclrtExceptionInfoCallback`: `void (*)(aclrtExceptionInfo*)`.
type ExceptionCallback = unsafe extern "C" fn(*mut ExceptionInfo);

/// The fake's `aclrtExceptionInfo` (opaque to its users, read through the
/// accessors).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ExceptionInfo {
    task_id: u32,
    stream_id: u32,
    thread_id: u32,
    device_id: u32,
    retcode: u32,
}

/// A callback's user data: handed back to the callback exactly as given
/// (provenance included), never dereferenced here.
#[derive(Debug, Clone, Copy)]
struct UserData(*mut c_void);

// SAFETY: the fake never dereferences the pointer; it only passes it back
// to the caller's callback, on the thread the caller subscribed, which is
// what the ACL API promises the caller.
unsafe impl Send for UserData {}

/// A queued callback: due once the stream has finished `target` tasks.
struct Queued {
    f: Callback,
    user_data: UserData,
    target: u64,
}

/// One stream's subscription.
struct Sub {
    tid: u64,
    /// The device's release count when subscribed: a later release ends it.
    epoch: u64,
    /// The never-recorded event the callback tasks wait on (made at the
    /// first launch, destroyed at unsubscription).
    marker: Option<EventId>,
    /// Queued callbacks, by `target` (stream order).
    queued: VecDeque<Queued>,
}

#[derive(Default)]
struct Callbacks {
    /// (device, simulator stream id) → its subscription.
    subs: BTreeMap<(i32, u64), Sub>,
    /// Due callbacks, by subscribed thread.
    due: BTreeMap<u64, (i32, VecDeque<(Callback, UserData)>)>,
    counters: BTreeMap<i32, FakeCallbacks>,
    stop_on_failure: BTreeSet<i32>,
    handler: Option<ExceptionCallback>,
    registrations: u64,
    /// Stream faults already reported, per (device, epoch).
    faults_seen: BTreeMap<(i32, u64), u64>,
    monitor: bool,
    /// Devices whose next unsubscribed `aclrtProcessReport` the gate holds.
    hold: BTreeSet<i32>,
    /// Devices one of whose reports the gate holds now.
    holding: BTreeSet<i32>,
}

static CALLBACKS: Mutex<Callbacks> = Mutex::new(Callbacks {
    subs: BTreeMap::new(),
    due: BTreeMap::new(),
    counters: BTreeMap::new(),
    stop_on_failure: BTreeSet::new(),
    handler: None,
    registrations: 0,
    faults_seen: BTreeMap::new(),
    monitor: false,
    hold: BTreeSet::new(),
    holding: BTreeSet::new(),
});
/// Signalled when a callback became due (`aclrtProcessReport` waits here).
static DUE: Condvar = Condvar::new();
/// Signalled when there is something new to watch (the monitor waits here).
static WORK: Condvar = Condvar::new();

/// Lock order: the fake's device state (`state()`) is never taken while
/// this lock is held; the simulator's own lock may be.
fn callbacks() -> MutexGuard<'static, Callbacks> {
    CALLBACKS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn counters(cb: &mut Callbacks, device: i32) -> &mut FakeCallbacks {
    cb.counters.entry(device).or_default()
}

/// Every live device: its release count (the epoch) and its simulator.
fn live_devices() -> BTreeMap<i32, (u64, Arc<SimDriver>)> {
    let st = state();
    st.devices
        .iter()
        .map(|(&id, d)| {
            let epoch = st.runtime.get(&id).map_or(0, |r| r.releases);
            (id, (epoch, Arc::clone(&d.sim)))
        })
        .collect()
}

/// Ends the subscriptions of released devices: their queued callbacks never
/// run, their threads are free to serve another device.
fn prune(cb: &mut Callbacks, live: &BTreeMap<i32, (u64, Arc<SimDriver>)>) {
    let gone: Vec<(i32, u64)> = cb
        .subs
        .iter()
        .filter(|((d, _), s)| live.get(d).is_none_or(|(e, _)| *e != s.epoch))
        .map(|(&k, _)| k)
        .collect();
    for k in gone {
        if let Some(s) = cb.subs.remove(&k) {
            counters(cb, k.0).dropped += s.queued.len() as u64;
            forget_thread_if_idle(cb, s.tid);
        }
    }
}

/// A thread with no subscription left serves no device: its undelivered
/// callbacks are dropped.
fn forget_thread_if_idle(cb: &mut Callbacks, tid: u64) {
    if cb.subs.values().any(|s| s.tid == tid) {
        return;
    }
    if let Some((device, q)) = cb.due.remove(&tid) {
        counters(cb, device).dropped += q.len() as u64;
    }
}

/// The device a thread serves, if any of its subscriptions is live.
fn device_of(cb: &Callbacks, tid: u64) -> Option<i32> {
    cb.subs
        .iter()
        .find(|(_, s)| s.tid == tid)
        .map(|(&(d, _), _)| d)
}

/// Tasks `stream` has finished, and how many are queued (a running one
/// included), read as one consistent snapshot: retried until no task
/// finished while the queue was read. Queue work enqueued meanwhile by
/// another thread counts too, which only makes a callback wait longer.
fn progress(sim: &SimDriver, stream: StreamId) -> (u64, u64) {
    let finished = || sim.stats().tasks_run.get(&stream).copied().unwrap_or(0);
    loop {
        let before = finished();
        let queued = sim.queued(stream) as u64;
        if finished() == before {
            return (before, queued);
        }
    }
}

/// The calling thread's `pthread_self()`: the thread id the runtime keys
/// subscriptions by.
#[allow(
    clippy::useless_conversion,
    reason = "pthread_t is a u64 on 64-bit Linux, narrower elsewhere"
)]
fn self_tid() -> u64 {
    // SAFETY: `pthread_self` has no preconditions and cannot fail.
    u64::from(unsafe { pthread_self() })
}

// SAFETY: the C library's own declaration (`pthread.h`): no arguments, and
// `pthread_t` is what `RawPthread` names.
unsafe extern "C" {
    fn pthread_self() -> std::os::unix::thread::RawPthread;
}

mod hooks;
mod info;
mod monitor;
#[cfg(all(test, feature = "optional-symbols"))]
mod tests;

use hooks::hold_unsubscribed;
use monitor::start_monitor;

// ----- the entry points ---------------------------------------------------------

/// `aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSubscribeReport(thread_id: u64, stm: *mut c_void) -> c_int {
    let (id, sim) = match enter() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let st = match stream_of(id, Op::CreateStream, stm) {
        Ok(s) if sim.streams().contains(&s) => s,
        Ok(_) => {
            set_message("no such stream");
            return PARAM_INVALID;
        }
        Err(e) => {
            set_message(&e.to_string());
            return code_of(e.kind(), Waited::Stream);
        }
    };
    let live = live_devices();
    let epoch = live.get(&id).map_or(0, |(e, _)| *e);
    let mut cb = callbacks();
    prune(&mut cb, &live);
    if cb.subs.contains_key(&(id, st.raw())) {
        counters(&mut cb, id).subscribe_refused += 1;
        set_message("the stream already has a subscribed thread");
        return AclError::ACL_ERROR_RT_STREAM_SUBSCRIBE;
    }
    if device_of(&cb, thread_id).is_some_and(|d| d != id) {
        counters(&mut cb, id).subscribe_refused += 1;
        set_message("the thread already serves another device");
        return AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE;
    }
    cb.subs.insert(
        (id, st.raw()),
        Sub {
            tid: thread_id,
            epoch,
            marker: None,
            queued: VecDeque::new(),
        },
    );
    counters(&mut cb, id).subscribes += 1;
    0
}

/// `aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`: the
/// stream's queued callbacks never run.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtUnSubscribeReport(thread_id: u64, stm: *mut c_void) -> c_int {
    let (id, sim) = match enter() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let st = match stream_of(id, Op::DestroyStream, stm) {
        Ok(s) => s,
        Err(e) => {
            set_message(&e.to_string());
            return code_of(e.kind(), Waited::Stream);
        }
    };
    let live = live_devices();
    let mut cb = callbacks();
    prune(&mut cb, &live);
    match cb.subs.get(&(id, st.raw())) {
        None => {
            set_message("the stream has no subscribed thread");
            return AclError::ACL_ERROR_RT_STREAM_SUBSCRIBE;
        }
        Some(s) if s.tid != thread_id => {
            set_message("the stream is subscribed to another thread");
            return AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE;
        }
        Some(_) => {}
    }
    let Some(sub) = cb.subs.remove(&(id, st.raw())) else {
        return AclError::ACL_ERROR_RT_STREAM_SUBSCRIBE;
    };
    let c = counters(&mut cb, id);
    c.unsubscribes += 1;
    c.dropped += sub.queued.len() as u64;
    forget_thread_if_idle(&mut cb, thread_id);
    // A report waiting on a thread that serves nothing now returns.
    DUE.notify_all();
    if let Some(m) = sub.marker {
        let _ = sim.destroy_event(m);
    }
    0
}

/// `aclrtLaunchCallback(fn, userData, blockType, stream)`: queues the
/// callback as a task of `stream` (see the module documentation). Both
/// block types behave as `ACL_CALLBACK_NO_BLOCK`: nothing here waits for
/// the callback.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchCallback(
    f: Option<Callback>,
    user_data: *mut c_void,
    block_type: u32,
    stm: *mut c_void,
) -> c_int {
    if block_type > 1 {
        set_message("blockType is ACL_CALLBACK_NO_BLOCK (0) or ACL_CALLBACK_BLOCK (1)");
        return AclError::ACL_ERROR_INVALID_PARAM;
    }
    let Some(f) = f else {
        set_message("NULL callback");
        return PARAM_INVALID;
    };
    let (id, sim) = match enter() {
        Ok(x) => x,
        Err(code) => return code,
    };
    let st = match stream_of(id, Op::StreamWaitEvent, stm) {
        Ok(s) => s,
        Err(e) => {
            set_message(&e.to_string());
            return code_of(e.kind(), Waited::Stream);
        }
    };
    let key = (id, st.raw());
    let marker = {
        let live = live_devices();
        let mut cb = callbacks();
        if cb.holding.remove(&id) {
            // The report gate lets its held report go (see the module
            // documentation).
            DUE.notify_all();
        }
        prune(&mut cb, &live);
        let Some(sub) = cb.subs.get_mut(&key) else {
            counters(&mut cb, id).launch_refused += 1;
            set_message("no thread is subscribed to the stream (aclrtSubscribeReport)");
            return AclError::ACL_ERROR_RT_STREAM_NO_CB_REG;
        };
        match sub.marker {
            Some(m) => m,
            None => match sim.create_event() {
                Ok(m) => *sub.marker.insert(m),
                Err(e) => {
                    set_message(&e.to_string());
                    return code_of(e.kind(), Waited::Event);
                }
            },
        }
    };
    // The callback's task is at least the one after everything queued now,
    // and at most the last one queued once it is in (other threads may
    // queue meanwhile): the later of the two is its target. A stream that
    // drops its work in between (a fault) never reaches the first.
    let (finished, queued) = progress(&sim, st);
    let earliest = finished + queued + 1;
    // Not under the lock: a full stream blocks here, as any enqueue does.
    if let Err(e) = sim.stream_wait_event(st, marker) {
        set_message(&e.to_string());
        return code_of(e.kind(), Waited::Stream);
    }
    let (finished, queued) = progress(&sim, st);
    // Asked before the lock: the device state is never taken under it.
    let early = quirk(id, QUIRK_CALLBACK_EARLY);
    let mut cb = callbacks();
    let Some(sub) = cb.subs.get_mut(&key) else {
        // Unsubscribed meanwhile: it never runs.
        counters(&mut cb, id).dropped += 1;
        return 0;
    };
    // QUIRK_CALLBACK_EARLY: due whatever the stream has finished.
    let target = if early {
        0
    } else {
        earliest.max(finished + queued)
    };
    let at = sub.queued.partition_point(|q| q.target <= target);
    sub.queued.insert(
        at,
        Queued {
            f,
            user_data: UserData(user_data),
            target,
        },
    );
    counters(&mut cb, id).launched += 1;
    start_monitor(&mut cb);
    drop(cb);
    WORK.notify_all();
    0
}

/// `aclrtProcessReport(int32_t timeout)`: see the module documentation.
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtProcessReport(timeout: i32) -> c_int {
    if timeout == 0 || timeout < -1 {
        if let Some(id) = current() {
            counters(&mut callbacks(), id).process_report_invalid += 1;
        }
        set_message(&format!(
            "timeout {timeout} is invalid: -1 (forever) or at least 1 ms"
        ));
        return AclError::ACL_ERROR_INVALID_PARAM;
    }
    let tid = self_tid();
    let deadline = (timeout > 0)
        .then(|| Instant::now() + Duration::from_millis(u64::from(timeout.unsigned_abs())));
    let waits = current().is_some_and(|id| quirk(id, QUIRK_REPORT_WAITS_UNSUBSCRIBED));
    let live = live_devices();
    let mut cb = callbacks();
    prune(&mut cb, &live);
    let Some(device) = device_of(&cb, tid) else {
        drop(hold_unsubscribed(cb));
        if let Some(d) = deadline.filter(|_| waits) {
            std::thread::sleep(d.saturating_duration_since(Instant::now()));
        }
        set_message("no stream is subscribed to this thread (aclrtSubscribeReport)");
        return AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE;
    };
    let c = counters(&mut cb, device);
    c.process_reports += 1;
    c.in_process_report += 1;
    let ready = loop {
        if let Some((_, q)) = cb.due.get_mut(&tid)
            && !q.is_empty()
        {
            break std::mem::take(q);
        }
        if device_of(&cb, tid).is_none() {
            // Unsubscribed meanwhile: nothing can become due for it.
            break VecDeque::new();
        }
        cb = match deadline {
            None => DUE.wait(cb).unwrap_or_else(PoisonError::into_inner),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break VecDeque::new();
                }
                DUE.wait_timeout(cb, d - now)
                    .map_or_else(|e| e.into_inner().0, |(g, _)| g)
            }
        };
    };
    let n = ready.len() as u64;
    let c = counters(&mut cb, device);
    // Counted as delivered before they run: whoever they wake sees them.
    c.run += n;
    if n == 0 {
        c.report_timeouts += 1;
    }
    drop(cb);
    for (f, user_data) in ready {
        // SAFETY: the caller's callback with the caller's user data, on the
        // thread the caller subscribed to the stream (the ACL contract).
        let _ = std::panic::catch_unwind(move || unsafe { f(user_data.0) });
    }
    let mut cb = callbacks();
    let c = counters(&mut cb, device);
    c.in_process_report = c.in_process_report.saturating_sub(1);
    drop(cb);
    if n == 0 {
        AclError::ACL_ERROR_RT_REPORT_TIMEOUT
    } else {
        0
    }
}

/// `aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback)`: one
/// handler for the process (a later call replaces it; NULL removes it).
#[cfg(feature = "optional-symbols")]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetExceptionInfoCallback(f: Option<ExceptionCallback>) -> c_int {
    let mut cb = callbacks();
    cb.handler = f;
    cb.registrations += 1;
    if f.is_some() {
        start_monitor(&mut cb);
    }
    drop(cb);
    WORK.notify_all();
    0
}
