//! Completion notifications ([`Driver::queue_notify`] and
//! [`Driver::notify_event`]) on ACL host callbacks.
//!
//! # The reactor
//!
//! One reactor thread per device id, shared by every `AclDriver` on it
//! (it lives in the device's `DeviceShared`). It starts at the first
//! `queue_notify` that can use callbacks, binds the device's context as
//! every driver thread does (`aclrtSetCurrentContext` with the context a
//! driver captured, or a counted `aclrtSetDevice` of its own that it resets
//! when it ends), and loops `aclrtProcessReport(T)`, `T` the time to the
//! nearest armed deadline clamped to [1 ms, 100 ms] (never 0: the runtime
//! rejects it). After every return it wakes the wakers whose deadline
//! passed. While no stream is subscribed to it (the runtime answers at
//! once) or the call fails, it waits on a condition variable for `T`
//! instead, so it never spins — unless a subscription (or the stop) came
//! since it began the round: each bumps a counter the round read under the
//! same lock, so a subscription made between the runtime's answer and that
//! wait is not slept through. The protocol — the loop, the subscriptions,
//! the expected callbacks, the armed wakers — is the core
//! `driver::wake::reactor`, which the loom models check; this module adds
//! the runtime's calls, the thread and the statics.
//!
//! `queue_notify(stream, event)` subscribes `stream` to the reactor's
//! thread the first time (`aclrtSubscribeReport`, keyed by the thread's
//! `pthread_t`), then queues `aclrtLaunchCallback(trampoline, key,
//! ACL_CALLBACK_NO_BLOCK, stream)` behind the event's record. The
//! trampoline only records that the callback ran and wakes the wakers armed
//! for that record: it makes no runtime call, and a panic in it (a waker's)
//! is caught, never unwound into C.
//!
//! # User data: an integer key
//!
//! The callback's `userData` is a ticket: a number drawn from a
//! process-wide counter, never reused, carried in the pointer without
//! provenance and never dereferenced. The reactor keeps what the ticket
//! stands for (the stream, the event and which of its records), and the
//! trampoline finds the reactor through a process-wide list of weak
//! references. So nothing can be freed before the callback runs, nothing
//! must be reclaimed when it never runs (a fault under stop-on-failure, a
//! stream destroyed first), and a ticket the reactor no longer knows — a
//! callback that comes after its stream was unsubscribed, or after the
//! reactor ended — is ignored. Stale tickets are bounded: those of a
//! stream go when it is unsubscribed (`destroy_stream` unsubscribes before
//! it destroys), and all go with the reactor.
//!
//! # Records, not events
//!
//! What a callback proves is kept per record: every `record_event` gives
//! the event a new generation (`EventEntry::generation`), so a fence the
//! contract records again for its slot's next run finds nothing of the
//! previous run's callback. `notify_event` answers [`Notice::Ready`] when
//! the event is complete already (it queries it; a faulted stream counts)
//! or the callback of its last record ran; [`Notice::Completion`] when a
//! callback is queued for its last record — it keeps the waker (at most
//! 4 per event, `MAX_WAKERS`; one that `will_wake` the same task is
//! replaced), armed until `within` has passed; otherwise — no callback
//! queued for that record (`queue_notify` not called, failed, or the
//! runtime lacks the callback symbols) — [`wake_after`] and
//! [`Notice::Timer`]. A deadline earlier than the reactor's current wait
//! is handed to [`wake_after`] too, so no waker is woken late.
//!
//! # The callback task
//!
//! The callback is a task of its stream, queued after the fence: it takes
//! a queue slot (the contract's admission rule counts it) and keeps the
//! stream busy until the stream reaches it. `destroy_stream` therefore
//! looks past it: a stream that is busy, whose last expected callback's
//! fence is complete, holds nothing of its caller's but callback tasks —
//! they complete as soon as the stream reaches them — so it is waited for
//! (at most [`CALLBACK_TASKS_WAIT`]) and destroyed, instead of refused as
//! busy. (`query_stream` reports the stream busy until then; a stepped
//! fake device moves it only when waited on.)
//!
//! # Faults
//!
//! A run that faults under stop-on-failure never reaches its callback.
//! The driver registers `aclrtSetExceptionInfoCallback` once per process
//! (a process-wide static, shared by every driver; the first runtime that
//! offers it): its handler reads the device from the info
//! (`aclrtGetDeviceIdFromExceptionInfo`, the only call it makes) and wakes
//! every armed waker of that device's reactor — of every reactor when the
//! runtime does not say, or names a device no reactor serves. A report
//! that lands between `notify_event`'s query (not complete) and its arm
//! would wake nobody armed after it: the arm compares a fault counter read
//! before the query, and a waker armed too late is woken at once instead
//! (it looks again, and finds the fault). The runtime keeps one such callback per process:
//! another component that sets its own replaces this one, and from then
//! on a fault wakes the futures at their deadline instead (CANN 9.2
//! deprecates the call in favour of `aclrtExceptionInfoCallbackRegister`,
//! which keeps several).
//!
//! # Shutdown
//!
//! The reactor ends when the last `AclDriver` of its device drops (the
//! drivers are counted; the `DeviceShared` itself lives as long as the
//! process). That drop, on its bound thread and before its device resets:
//! unsubscribes every stream still subscribed, signals the reactor, waits
//! for it — it returns from `aclrtProcessReport` within 100 ms — and joins
//! it, or after [`JOIN_WAIT`] leaves it detached (a runtime that ignores
//! the timeout cannot make the drop hang), and wakes and drops every waker
//! still armed, so no future waits on a reactor that is gone. Nothing there
//! panics. A later `queue_notify` on the device starts a new reactor.
//!
//! [`Driver::queue_notify`]: crate::driver::Driver::queue_notify
//! [`Driver::notify_event`]: crate::driver::Driver::notify_event
//! [`Notice::Ready`]: crate::driver::Notice::Ready
//! [`Notice::Completion`]: crate::driver::Notice::Completion
//! [`Notice::Timer`]: crate::driver::Notice::Timer
//! [`wake_after`]: crate::driver::wake_after

use std::ffi::c_void;

use crate::driver::{Resource, ThreadTrouble};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::AclDriver;
use super::load::Api;
use super::ptr::RtPtr;
use super::result::{self, Context, Failed, Report};
use super::tokens::Stream;
use crate::driver::wake::reactor::{Limits, Reactor, SubscribeError, Waited};
use crate::driver::{DriverError, DriverErrorKind, Op};

mod calls;

use crate::driver::wake::wake_all;

/// The longest a reactor waits in one `aclrtProcessReport`: the bound of a
/// shutdown.
pub(super) const MAX_WAIT: Duration = Duration::from_millis(100);
/// The shortest (the runtime rejects 0).
pub(super) const MIN_WAIT: Duration = Duration::from_millis(1);
/// How long `destroy_stream` waits for the callback tasks that are all a
/// stream still holds (they complete as soon as the stream reaches them).
const CALLBACK_TASKS_WAIT: Duration = Duration::from_secs(1);
/// How long a drop waits for the reactor to end before it leaves it
/// detached.
pub(super) const JOIN_WAIT: Duration = Duration::from_secs(2);

/// Tickets: never reused in the process.
static TICKETS: AtomicUsize = AtomicUsize::new(1);

/// Every reactor of the process, to find a ticket's or a device's.
static HUBS: Mutex<Vec<Weak<Hub>>> = Mutex::new(Vec::new());

/// The runtime whose `aclrtSetExceptionInfoCallback` took this driver's
/// handler (`None` until one did): its accessor reads the reports.
static EXCEPTIONS: Mutex<Option<Arc<Api>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics under these locks but a waker, which is never called
    // under one; if something did, the state is still consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hands `wakers` to the shared timer thread, to be woken at once: for the
/// wakes a driver call makes (a destroyed stream or event, a callback that
/// could not be queued, the last driver's drop). Never on the caller's
/// thread: it may hold locks of its own that a woken task needs (the
/// contract calls its driver under its state lock).
pub(super) fn wake_elsewhere(wakers: Vec<Waker>) {
    for w in wakers {
        crate::driver::wake_after(Duration::ZERO, &w);
    }
}

/// A device's notification state: its drivers and its running reactor.
#[derive(Debug, Default)]
pub(super) struct DeviceNotify {
    slot: Mutex<Slot>,
}

#[derive(Debug, Default)]
struct Slot {
    /// Live `AclDriver`s on the device.
    drivers: usize,
    reactor: Option<Arc<Hub>>,
    /// A reactor could not be started: not tried again until the device's
    /// drivers are all gone.
    broken: bool,
}

impl DeviceNotify {
    /// A driver of the device opened.
    pub(super) fn driver_opened(&self) {
        lock(&self.slot).drivers += 1;
    }

    /// A driver of the device is dropping (on a thread bound to the device
    /// when `bound`): the last one ends the reactor (see the module
    /// documentation).
    pub(super) fn driver_closed(&self, bound: bool) {
        let hub = {
            let mut slot = lock(&self.slot);
            slot.drivers = slot.drivers.saturating_sub(1);
            if slot.drivers > 0 {
                return;
            }
            slot.broken = false;
            slot.reactor.take()
        };
        if let Some(hub) = hub {
            hub.shutdown(bound);
        }
    }

    /// The running reactor, if any.
    fn running(&self) -> Option<Arc<Hub>> {
        lock(&self.slot).reactor.clone()
    }

    /// The running reactor, started now by `d` if there is none.
    fn reactor(&self, d: &AclDriver) -> Result<Arc<Hub>, DriverError> {
        let mut slot = lock(&self.slot);
        if let Some(h) = &slot.reactor {
            return Ok(Arc::clone(h));
        }
        if slot.broken {
            return Err(DriverError::new(
                Op::QueueNotify,
                DriverErrorKind::NoResource {
                    what: Resource::CallbackThread(ThreadTrouble::Broken),
                },
            ));
        }
        match Hub::start(d) {
            Ok(h) => {
                slot.reactor = Some(Arc::clone(&h));
                Ok(h)
            }
            Err(e) => {
                slot.broken = true;
                Err(e)
            }
        }
    }
}

/// How the reactor thread binds its device.
#[derive(Debug, Clone, Copy)]
enum Bind {
    /// `aclrtSetCurrentContext` with a context a driver captured.
    Context(Context),
    /// `aclrtSetDevice` (a reference of the reactor's own, reset when it
    /// ends).
    Device(i32),
}

/// A device's reactor: its thread, and its protocol state (the core,
/// `driver::wake::reactor`, which knows the subscriptions, the expected
/// callbacks and the armed wakers).
struct Hub {
    device: i32,
    /// The thread's `pthread_t` (set once it is spawned, before any use).
    tid: AtomicU64,
    api: Arc<Api>,
    core: Reactor<Instant, RtPtr>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub")
            .field("device", &self.device)
            .field("tid", &self.tid.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(unix)]
#[allow(
    clippy::unnecessary_wraps,
    reason = "the same signature as where no thread id can be had"
)]
fn thread_id(h: &JoinHandle<()>) -> Option<u64> {
    use std::os::unix::thread::JoinHandleExt;
    #[allow(
        clippy::useless_conversion,
        reason = "pthread_t is a u64 on 64-bit Linux, narrower elsewhere"
    )]
    Some(u64::from(h.as_pthread_t()))
}

#[cfg(not(unix))]
fn thread_id(_: &JoinHandle<()>) -> Option<u64> {
    None
}

fn unsupported(why: ThreadTrouble) -> DriverError {
    let what = Resource::CallbackThread(why);
    DriverError::new(Op::QueueNotify, DriverErrorKind::NoResource { what })
}

impl Hub {
    fn tid(&self) -> u64 {
        self.tid.load(Ordering::Acquire)
    }

    /// Starts a reactor for `d`'s device, bound as `d` binds.
    fn start(d: &AclDriver) -> Result<Arc<Hub>, DriverError> {
        let bind = match d.ctx {
            Some(ctx) => Bind::Context(ctx),
            None => Bind::Device(d.device),
        };
        let hub = Arc::new(Hub {
            device: d.device,
            tid: AtomicU64::new(0),
            api: Arc::clone(&d.api),
            core: Reactor::new(Limits {
                min: MIN_WAIT,
                max: d.reactor_wait,
            }),
            thread: Mutex::new(None),
        });
        register_exception_callback(&d.api);
        let (ready, started) = mpsc::channel();
        let h = Arc::clone(&hub);
        let handle = std::thread::Builder::new()
            .name(format!("runclaim-acl-callbacks-{}", d.device))
            .spawn(move || h.run(bind, &ready))
            .map_err(|_| unsupported(ThreadTrouble::Spawn))?;
        let Some(tid) = thread_id(&handle) else {
            let _ = hub.core.stop();
            return Err(unsupported(ThreadTrouble::NoId));
        };
        hub.tid.store(tid, Ordering::Release);
        *lock(&hub.thread) = Some(handle);
        match started.recv_timeout(JOIN_WAIT) {
            Ok(Ok(())) => {}
            Ok(Err(f)) => {
                hub.join();
                return Err(f.at(Op::QueueNotify));
            }
            Err(_) => {
                hub.shutdown(false);
                return Err(unsupported(ThreadTrouble::NotStarted));
            }
        }
        let mut hubs = lock(&HUBS);
        hubs.retain(|w| w.strong_count() > 0);
        hubs.push(Arc::downgrade(&hub));
        Ok(hub)
    }

    /// The reactor thread: binds the device, then the core's loop over
    /// `aclrtProcessReport` until stopped.
    fn run(&self, bind: Bind, ready: &mpsc::Sender<Result<(), Failed>>) {
        let bound = match bind {
            Bind::Context(ctx) => {
                // SAFETY: a context a driver of this device captured right
                // after its first `aclrtSetDevice`; the device stays
                // referenced while this thread runs: its last driver ends
                // this thread (joined, or given up on after `JOIN_WAIT`, with
                // the reactor stopped: the thread then only returns from the
                // runtime and ends) before that driver's resets.
                let set = unsafe { result::set_current_context(&self.api, ctx) };
                set.unwrap_or(Ok(()))
            }
            Bind::Device(device) => result::set_device(&self.api, device),
        };
        let owns_reference = matches!(bind, Bind::Device(_)) && bound.is_ok();
        let go = bound.is_ok();
        let _ = ready.send(bound);
        if go {
            let report = |wait| match result::process_report(&self.api, wait) {
                Some(Report::Ran | Report::TimedOut) => Waited::Waited,
                Some(Report::NotSubscribed | Report::Failed) | None => Waited::Answered,
            };
            self.core.serve(Instant::now, report, wake_all);
        }
        if owns_reference && let Bind::Device(device) = bind {
            // SAFETY: gives up this thread's own reference (taken above);
            // the thread makes no further call.
            let _ = unsafe { result::reset_device(&self.api, device) };
        }
        wake_all(self.core.exit());
    }

    /// Subscribes `s` to the reactor's thread, unless it is already.
    fn subscribe(&self, s: Stream<'_>) -> Result<(), DriverError> {
        let op = Op::QueueNotify;
        let call = || match result::subscribe_report(&self.api, self.tid(), s) {
            Some(Ok(())) => Ok(()),
            Some(Err(f)) => Err(f.at(op)),
            None => Err(DriverError::new(op, DriverErrorKind::Unsupported)),
        };
        self.core.subscribe(s.ptr(), call).map_err(|e| match e {
            SubscribeError::Ending => unsupported(ThreadTrouble::Ending),
            SubscribeError::Runtime(e) => e,
        })
    }

    /// Waits (bounded) for the thread to end and joins it; leaves it
    /// detached if it does not end in time.
    fn join(&self) {
        if !self.core.wait_exited(JOIN_WAIT) {
            return;
        }
        if let Some(t) = lock(&self.thread).take() {
            // It has returned from `run`: the join is immediate.
            let _ = t.join();
        }
    }

    /// Ends the reactor (see the module documentation); `bound`: the
    /// calling thread is bound to the device, so the streams can be
    /// unsubscribed.
    fn shutdown(&self, bound: bool) {
        let (streams, woken) = self.core.stop();
        if bound {
            for s in streams {
                // SAFETY: a subscribed stream is never destroyed before it is
                // unsubscribed (`destroy_stream` forgets it first), and its
                // device is not released: the calling driver still holds its
                // references and is bound to it.
                let _ = unsafe { result::unsubscribe_report(&self.api, self.tid(), s) };
            }
        }
        self.join();
        wake_elsewhere(woken);
        wake_elsewhere(self.core.take_armed());
    }
}

/// Every reactor still alive.
fn live_hubs() -> Vec<Arc<Hub>> {
    let mut hubs = lock(&HUBS);
    hubs.retain(|w| w.strong_count() > 0);
    hubs.iter().filter_map(Weak::upgrade).collect()
}

/// The trampoline `aclrtLaunchCallback` calls on the reactor's thread:
/// records that the ticket's callback ran and wakes its wakers. No runtime
/// call; never unwinds into C.
extern "C" fn on_callback(user_data: *mut c_void) {
    let ticket = user_data.addr();
    let _ = std::panic::catch_unwind(move || {
        for hub in live_hubs() {
            if let Some(woken) = hub.core.fired(ticket) {
                wake_all(woken);
                return;
            }
        }
    });
}

/// The exception-info callback: wakes every armed waker of the device the
/// report names (of every device when it names none). Its only runtime
/// call reads the report; never unwinds into C.
extern "C" fn on_exception(info: *mut c_void) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let api = lock(&EXCEPTIONS).clone();
        // SAFETY: the info the runtime handed to this callback, during it.
        let device = api.and_then(|api| unsafe { result::exception_device_id(&api, info) });
        let hubs = live_hubs();
        // A device no reactor serves (a numbering this driver does not
        // know) tells nothing: every reactor's wakers look (a spurious wake
        // costs a query).
        let named = |h: &Hub| device.is_some_and(|d| d == h.device.cast_unsigned());
        let any = hubs.iter().any(|h| named(h));
        for hub in hubs.iter().filter(|h| !any || named(h)) {
            let woken = hub.core.fault();
            wake_all(woken);
        }
    }));
}

/// Registers [`on_exception`] with the first runtime that offers
/// `aclrtSetExceptionInfoCallback`, once for the process. The runtime is
/// noted first (the handler may run as soon as it is registered) and the
/// call is made without holding [`EXCEPTIONS`], which the handler takes:
/// a runtime that waits for a running handler while it registers cannot
/// deadlock with it.
fn register_exception_callback(api: &Arc<Api>) {
    static REGISTERING: Mutex<()> = Mutex::new(());
    if api.set_exception_info_callback.is_none() {
        return;
    }
    let _one_at_a_time = lock(&REGISTERING);
    {
        let mut noted = lock(&EXCEPTIONS);
        if noted.is_some() {
            return;
        }
        *noted = Some(Arc::clone(api));
    }
    if !matches!(
        result::set_exception_info_callback(api, on_exception),
        Some(Ok(()))
    ) {
        *lock(&EXCEPTIONS) = None;
    }
}
