//! What the runtime does on the host: completion callbacks (which thread
//! runs them, how soon, what `aclrtProcessReport` answers with no
//! subscription and on timeout), the exception-info callback, and the op
//! watchdog the runtime applies for a request.
//!
//! `aclrtProcessReport` runs the due callbacks on the calling thread after
//! it found the thread's subscription (`ApiImpl::ProcessReport`,
//! hicann/runtime `src/runtime/api/impl/api_impl.cc`); without one it
//! returns at once with `ACL_ERROR_RT_THREAD_SUBSCRIBE`, on a timeout with
//! `ACL_ERROR_RT_REPORT_TIMEOUT` (`aclrtProcessReportImpl`,
//! `src/acl/aclrt_impl/callback.cpp`).
//!
//! A completion callback must run only once the stream reached it: the
//! driver takes one for the completion of the record queued before it. So
//! `callback.thread` queues its callbacks on a held stream, each behind a
//! memset and an event record, and each callback queries that event: one
//! that runs before the release, or finds the event not complete, ran
//! before the work ahead of it finished (CANN's aclrtLaunchCallback
//! reference: the callback runs when the stream's execution reaches its
//! task).

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::super::codes;
use super::super::ffi::{
    ACL_CALLBACK_NO_BLOCK, FnLaunchCallback, FnQueryEventStatus, FnSubscribeReport,
};
use super::super::load::Api;
use super::queue::{FLAGS, ex};
use super::raw::{self, Handle};
use super::{Check, Need, ProbeError, Verdict, code_name, failed};
use crate::driver::DriverErrorKind;

/// `ACL_ERROR_RT_THREAD_SUBSCRIBE`.
const THREAD_SUBSCRIBE: i32 = 107_012;
/// `ACL_ERROR_RT_REPORT_TIMEOUT`.
const REPORT_TIMEOUT: i32 = 507_012;

/// Every line of this file, in order.
pub(super) fn checks(api: &Arc<Api>, device: i32) -> Vec<Check> {
    let mut out = callbacks(api, device).unwrap_or_else(|e| {
        vec![
            failed("callback.thread", Need::Required, &e),
            failed("callback.report", Need::Required, &e),
        ]
    });
    out.push(exception(api));
    out.push(watchdog(api));
    out
}

/// How long the callbacks' stream stays held after they were queued: a
/// callback that runs meanwhile ran before the wait ahead of it finished.
const HOLD: Duration = Duration::from_millis(50);

/// What the event recorded right ahead of a callback read when the
/// callback ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ahead {
    /// `aclrtQueryEventStatus`'s status (1: `COMPLETE`).
    Status(u32),
    /// The query's code, other than 0.
    Code(i32),
    /// Not queried: the check had let the event go (a callback that came
    /// after the check gave up waiting for it).
    Gone,
}

/// One callback that ran: where, when, and what it saw ahead of it.
#[derive(Debug, Clone, Copy)]
struct Ran {
    key: usize,
    thread: ThreadId,
    at: Instant,
    ahead: Ahead,
}

/// Every callback of the check that ran.
static RAN: Mutex<Vec<Ran>> = Mutex::new(Vec::new());

/// The event recorded right ahead of each queued callback, by key, with
/// the call that queries it. An entry leaves (under this lock) before its
/// event is destroyed ([`Watched`]), and a callback queries only under it.
static AHEAD: Mutex<Vec<(usize, Handle, FnQueryEventStatus)>> = Mutex::new(Vec::new());

/// The check's callback: notes where and when it ran and whether the event
/// recorded right ahead of it on the stream was complete. Its user data is
/// an integer key, never dereferenced.
extern "C" fn note_callback(user_data: *mut c_void) {
    let key = user_data.addr();
    let at = Instant::now();
    let ahead = query_ahead(key);
    RAN.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Ran {
            key,
            thread: std::thread::current().id(),
            at,
            ahead,
        });
}

/// What the event ahead of callback `key` reads now.
fn query_ahead(key: usize) -> Ahead {
    let table = AHEAD.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(&(_, event, query)) = table.iter().find(|(k, ..)| *k == key) else {
        return Ahead::Gone;
    };
    let mut status = u32::MAX;
    // SAFETY: a live event of the check: its entry leaves the table, under
    // the lock held across this call, before the event is destroyed; a
    // valid out-pointer. A status query is none of the calls a callback
    // must not make (resource allocation or release, synchronization, task
    // submission: CANN's aclrtLaunchHostFunc reference), and the thread
    // the runtime runs it on is the reactor, bound to the device.
    match unsafe { query(event.raw(), &raw mut status) } {
        0 => Ahead::Status(status),
        code => Ahead::Code(code),
    }
}

/// The check's keys in [`AHEAD`], taken out when dropped: declared after
/// the events they name, so that it drops before them.
struct Watched(Vec<usize>);

impl Drop for Watched {
    fn drop(&mut self) {
        AHEAD
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(k, ..)| !self.0.contains(k));
    }
}

/// The check's exception-info callback: does nothing.
extern "C" fn ignore_exception(_info: *mut c_void) {}

/// `aclrtProcessReport(ms)`: the code; `None` without the symbol.
fn process_report(api: &Api, ms: i32) -> Option<i32> {
    let f = api.process_report?;
    // SAFETY: a plain timeout; the callbacks it may run are the check's own
    // `note_callback`, which touches nothing but `RAN` and an event of
    // `AHEAD` it queries under that table's lock.
    Some(unsafe { f(ms) })
}

/// The callback calls, all present.
#[derive(Clone, Copy)]
struct Calls {
    subscribe: FnSubscribeReport,
    unsubscribe: FnSubscribeReport,
    launch: FnLaunchCallback,
}

/// The callback lines.
fn callbacks(api: &Arc<Api>, device: i32) -> Result<Vec<Check>, ProbeError> {
    let (Some(subscribe), Some(unsubscribe), Some(launch), Some(_)) = (
        api.subscribe_report,
        api.unsubscribe_report,
        api.launch_callback,
        api.process_report,
    ) else {
        let why = "no aclrtSubscribeReport / aclrtLaunchCallback / aclrtProcessReport: the driver wakes on time";
        return Ok(vec![
            Check::new("callback.thread", Need::Required, Verdict::Unavailable, why),
            Check::new("callback.report", Need::Required, Verdict::Unavailable, why),
        ]);
    };
    let calls = Calls {
        subscribe,
        unsubscribe,
        launch,
    };
    // No subscription on this thread: at once, with a code.
    let started = Instant::now();
    let unsubscribed = process_report(api, 200).unwrap_or(0);
    let unsub_ms = started.elapsed().as_millis();
    let reactor = Reactor::start(api, device)?;
    let launched = launch_three(api, &reactor, calls);
    let reactor_id = reactor.handle.thread().id();
    let codes = reactor.stop();
    let launched = launched?;
    Ok(vec![
        thread_line(&launched, reactor_id),
        report_line(unsubscribed, unsub_ms, &codes),
    ])
}

/// The reactor thread: reports in 50 ms slices until stopped.
struct Reactor {
    handle: std::thread::JoinHandle<()>,
    stop: Arc<AtomicBool>,
    codes: Arc<Mutex<Vec<(i32, u128)>>>,
}

impl Reactor {
    fn start(api: &Arc<Api>, device: i32) -> Result<Self, ProbeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let codes = Arc::new(Mutex::new(Vec::new()));
        let (api, flag, seen) = (Arc::clone(api), Arc::clone(&stop), Arc::clone(&codes));
        let handle = std::thread::Builder::new()
            .name("npu-check-reactor".into())
            .spawn(move || reactor_loop(&api, device, &flag, &seen))
            .map_err(|_| ProbeError::Missing("a reactor thread"))?;
        Ok(Reactor {
            handle,
            stop,
            codes,
        })
    }

    /// Stops and joins it (within one 50 ms report); the codes it saw.
    fn stop(self) -> Vec<(i32, u128)> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.handle.join();
        self.codes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Keys of callbacks, unique in the process (checks may run side by side).
static NEXT_KEY: AtomicUsize = AtomicUsize::new(1);

/// What three callbacks did.
struct Callbacks {
    subscribed: i32,
    /// (key, code).
    launched: Vec<(usize, i32)>,
    /// When the check released the stream.
    released: Instant,
    /// In the order they ran.
    ran: Vec<Ran>,
    synced: i32,
    unsubscribed: i32,
}

/// Subscribes the reactor to a held stream, queues three (memset, event
/// record, callback) behind the hold, keeps it [`HOLD`], releases it, waits
/// for the callbacks (2 s at most), lets the reactor's reports run out
/// once, unsubscribes.
fn launch_three(api: &Api, reactor: &Reactor, calls: Calls) -> Result<Callbacks, ProbeError> {
    let tid = pthread_of(&reactor.handle);
    let mut held = raw::Held::new(api)?;
    let stream = held.h();
    let mem = raw::malloc(api, 4096)?;
    let events = (0..3)
        .map(|_| raw::event(api, FLAGS, ex(api)))
        .collect::<Result<Vec<_>, _>>()?;
    let mut watched = Watched(Vec::new());
    // SAFETY: the reactor thread's id (it binds the device itself) and a
    // live stream of this check.
    let subscribed = unsafe { (calls.subscribe)(tid, stream.raw()) };
    let mut launched = Vec::new();
    let queued = if subscribed == 0 {
        events.iter().try_for_each(|e| {
            launched.push(launch_behind(
                api,
                calls,
                (&mem, e.h, stream),
                &mut watched,
            )?);
            Ok(())
        })
    } else {
        Ok(())
    };
    std::thread::sleep(HOLD);
    let released = Instant::now();
    let synced = match held.release() {
        Ok(code) | Err(ProbeError::Code { code, .. }) => code,
        Err(_) => -1,
    };
    let keys: Vec<usize> = launched.iter().map(|(k, _)| *k).collect();
    let deadline = Instant::now() + Duration::from_secs(2);
    while ran_of(&keys, false).len() < keys.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Nothing more queued: the reactor's next report times out.
    std::thread::sleep(Duration::from_millis(120));
    let unsubscribed = if subscribed == 0 {
        // SAFETY: the subscription made above, by its stream.
        unsafe { (calls.unsubscribe)(tid, stream.raw()) }
    } else {
        0
    };
    let ran = ran_of(&keys, true);
    queued?;
    Ok(Callbacks {
        subscribed,
        launched,
        released,
        ran,
        synced,
        unsubscribed,
    })
}

/// Queues on `stream` a 4 KiB memset into `mem`, a record of `event`, and
/// a callback that queries `event` when it runs: its key and code.
fn launch_behind(
    api: &Api,
    calls: Calls,
    (mem, event, stream): (&raw::Mem<'_>, Handle, Handle),
    watched: &mut Watched,
) -> Result<(usize, i32), ProbeError> {
    raw::memset_async(api, mem, 0, 4096, 1, stream)?;
    raw::record(api, event, stream)?;
    let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
    AHEAD
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((key, event, api.query_event_status));
    watched.0.push(key);
    let user = std::ptr::without_provenance_mut::<c_void>(key);
    // SAFETY: a callback that lives for the process, integer user data it
    // never dereferences, a defined block type, a live stream with a
    // subscribed thread.
    let code = unsafe { (calls.launch)(note_callback, user, ACL_CALLBACK_NO_BLOCK, stream.raw()) };
    Ok((key, code))
}

/// The callbacks of `keys` that ran, in the order they ran; `take` removes
/// them from [`RAN`].
fn ran_of(keys: &[usize], take: bool) -> Vec<Ran> {
    let mut all = RAN.lock().unwrap_or_else(PoisonError::into_inner);
    let mine: Vec<Ran> = all
        .iter()
        .filter(|r| keys.contains(&r.key))
        .copied()
        .collect();
    if take {
        all.retain(|r| !keys.contains(&r.key));
    }
    mine
}

/// `callback.thread`: all ran, on the subscribed thread, in stream order,
/// none before the release and each with the event recorded ahead of it
/// complete.
fn thread_line(l: &Callbacks, reactor: ThreadId) -> Check {
    let on_reactor = l.ran.iter().all(|r| r.thread == reactor);
    let in_order = l
        .ran
        .iter()
        .map(|r| r.key)
        .eq(l.launched.iter().map(|(k, _)| *k));
    let early = l.ran.iter().filter(|r| r.at < l.released).count();
    let complete = l.ran.iter().all(|r| r.ahead == Ahead::Status(1));
    let codes: Vec<i32> = l.launched.iter().map(|(_, c)| *c).collect();
    let ok = l.subscribed == 0
        && codes.iter().all(|&c| c == 0)
        && l.ran.len() == l.launched.len()
        && on_reactor
        && in_order
        && early == 0
        && complete;
    let list = |f: &dyn Fn(&Ran) -> String| {
        if l.ran.is_empty() {
            "-".to_owned()
        } else {
            l.ran.iter().map(f).collect::<Vec<_>>().join(", ")
        }
    };
    Check::new(
        "callback.thread",
        Need::Required,
        if ok { Verdict::Ok } else { Verdict::Differs },
        format!(
            "subscribe {}, {} launched behind a 4 KiB memset and an event record each on a stream held {} ms (codes {codes:?}), {} ran, {} on the subscribed thread, {}; {early} before the release (0 expected); the event ahead of each, as it ran: {} (COMPLETE = 1 expected); after the release: {}; sync {}, unsubscribe {}",
            code_name(l.subscribed),
            l.launched.len(),
            HOLD.as_millis(),
            l.ran.len(),
            if on_reactor { "all" } else { "NOT all" },
            if in_order {
                "in stream order"
            } else {
                "OUT of order"
            },
            list(&|r| ahead_name(r.ahead)),
            list(&|r| since(l.released, r.at)),
            code_name(l.synced),
            code_name(l.unsubscribed),
        ),
    )
}

/// A status a callback saw ahead of it, as the line prints it.
fn ahead_name(a: Ahead) -> String {
    match a {
        Ahead::Status(1) => "1".to_owned(),
        Ahead::Status(0) => "0 (NOT_READY)".to_owned(),
        Ahead::Status(s) => s.to_string(),
        Ahead::Code(c) => format!("query failed: {}", code_name(c)),
        Ahead::Gone => "not queried".to_owned(),
    }
}

/// `at` from `from`, signed: "-… us" for a time before it.
fn since(from: Instant, at: Instant) -> String {
    match at.checked_duration_since(from) {
        Some(d) => format!("{} us", d.as_micros()),
        None => format!("-{} us", from.saturating_duration_since(at).as_micros()),
    }
}

/// `callback.report`: no subscription answers at once, a subscribed
/// thread with nothing due times out with its code.
fn report_line(unsubscribed: i32, unsub_ms: u128, codes: &[(i32, u128)]) -> Check {
    let timed_out = codes.iter().find(|(c, _)| *c == REPORT_TIMEOUT);
    let ok = unsubscribed == THREAD_SUBSCRIBE && unsub_ms < 100 && timed_out.is_some();
    Check::new(
        "callback.report",
        Need::Required,
        if ok { Verdict::Ok } else { Verdict::Differs },
        format!(
            "aclrtProcessReport(200 ms) with no subscription: {} after {unsub_ms} ms (107012 at once expected); subscribed, nothing due, 50 ms: {} (507012 expected)",
            code_name(unsubscribed),
            timed_out.map_or_else(
                || format!(
                    "codes {:?}",
                    codes.iter().map(|(c, _)| *c).collect::<Vec<_>>()
                ),
                |(c, ms)| format!("{} after {ms} ms", code_name(*c))
            ),
        ),
    )
}

/// The reactor: binds the device, reports in 50 ms slices until stopped,
/// noting every code other than 0 with how long it took.
fn reactor_loop(api: &Api, device: i32, stop: &AtomicBool, codes: &Mutex<Vec<(i32, u128)>>) {
    if raw::set_device(api, device).is_err() {
        return;
    }
    while !stop.load(Ordering::SeqCst) {
        let t = Instant::now();
        let rc = process_report(api, 50).unwrap_or(0);
        if rc != 0 {
            let mut c = codes.lock().unwrap_or_else(PoisonError::into_inner);
            if c.len() < 64 {
                c.push((rc, t.elapsed().as_millis()));
            }
            if rc == THREAD_SUBSCRIBE {
                // Not subscribed yet (or any more): do not spin.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    raw::reset_device(api, device);
}

#[cfg(unix)]
fn pthread_of(h: &std::thread::JoinHandle<()>) -> u64 {
    use std::os::unix::thread::JoinHandleExt;
    #[allow(
        clippy::useless_conversion,
        reason = "pthread_t is a u64 on 64-bit Linux, narrower elsewhere"
    )]
    u64::from(h.as_pthread_t())
}

#[cfg(not(unix))]
fn pthread_of(_: &std::thread::JoinHandle<()>) -> u64 {
    0
}

/// `aclrtSetExceptionInfoCallback`, and the fault codes the driver maps.
fn exception(api: &Api) -> Check {
    let name = "exception.callback";
    let Some(f) = api.set_exception_info_callback else {
        return Check::new(
            name,
            Need::Informational,
            Verdict::Unavailable,
            "no aclrtSetExceptionInfoCallback: a fault wakes waiters at their deadline",
        );
    };
    // SAFETY: a callback that lives for the process and touches nothing.
    let rc = unsafe { f(ignore_exception) };
    // The driver's own table: every code it reads as a kernel fault or a
    // lost device.
    let mapped: Vec<String> = codes::named()
        .filter(|&(c, _)| {
            matches!(
                codes::kind_of(c),
                DriverErrorKind::KernelFault(_) | DriverErrorKind::DeviceLost
            )
        })
        .map(|(c, _)| code_name(c))
        .collect();
    Check::new(
        name,
        Need::Informational,
        if rc == 0 {
            Verdict::Ok
        } else {
            Verdict::Differs
        },
        format!(
            "registration -> {}; fault codes the driver maps (not caused here): {}",
            code_name(rc),
            mapped.join(", ")
        ),
    )
}

/// The op watchdog the runtime applies when asked for 1 s.
fn watchdog(api: &Api) -> Check {
    let name = "watchdog.floor";
    let Some(f) = api.set_op_timeout else {
        return Check::new(
            name,
            Need::Informational,
            Verdict::Unavailable,
            "no aclrtSetOpExecuteTimeOutV2: declare the watchdog in DeviceConfig",
        );
    };
    let mut actual = 0u64;
    // SAFETY: a plain value and a valid out-pointer.
    let rc = unsafe { f(1_000_000, &raw mut actual) };
    if rc != 0 {
        return Check::new(
            name,
            Need::Informational,
            Verdict::Differs,
            format!("aclrtSetOpExecuteTimeOutV2(1 s) -> {}", code_name(rc)),
        );
    }
    let note = if actual >= 1_000_000 {
        "raised to the runtime's granularity; the driver uses what was applied"
    } else {
        "below the request (the reference runtime raises it, to 4294967 us where its credit scale is 2^32 ns); the driver uses the larger of the two"
    };
    Check::new(
        name,
        Need::Informational,
        Verdict::Ok,
        format!("requested 1000000 us, applied {actual} us: {note}"),
    )
}
