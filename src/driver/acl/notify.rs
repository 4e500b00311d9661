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
//! instead, so it never spins.
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
//! [`MAX_WAKERS`] per event; one that `will_wake` the same task is
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
//! runtime does not say, or names a device no reactor serves. The runtime keeps one such callback per process:
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

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::AclDriver;
use super::load::Api;
use super::result::{self, Context, Failed, Report, RtPtr};
use super::table::{Stream, Table};
use crate::driver::{
    Completion, DriverError, DriverErrorKind, EventId, Notice, Op, StreamId, wake_after,
};

/// Wakers kept per event (distinct tasks awaiting one fence).
pub(super) const MAX_WAKERS: usize = 4;
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

/// Wakes each waker, a panicking one included (caught: the others are
/// still woken).
pub(super) fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
    }
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
                    what: "the device's callback thread could not be started",
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

/// One ticket's meaning: the callback queued behind `event`'s record
/// `generation` on `stream`.
#[derive(Debug, Clone, Copy)]
struct Pending {
    stream: u64,
    event: u64,
    generation: u64,
}

/// A waker kept for an event's record.
struct Armed {
    generation: u64,
    waker: Waker,
    deadline: Option<Instant>,
}

/// What the reactor knows of one event.
#[derive(Default)]
struct Note {
    /// The last generation a callback was queued for (0: none).
    queued: u64,
    /// The last generation whose callback ran (0: none).
    fired: u64,
    armed: Vec<Armed>,
}

#[derive(Default)]
struct HubState {
    /// Streams subscribed to the reactor's thread.
    subscribed: Vec<RtPtr>,
    pending: BTreeMap<usize, Pending>,
    events: BTreeMap<u64, Note>,
    /// When the reactor's current wait ends (`None`: not waiting).
    waits_until: Option<Instant>,
    /// The thread has ended (or never got going).
    exited: bool,
}

impl HubState {
    /// Every armed waker, taken out.
    fn take_armed(&mut self) -> Vec<Waker> {
        self.events
            .values_mut()
            .flat_map(|n| n.armed.drain(..))
            .map(|a| a.waker)
            .collect()
    }

    /// The wakers armed for `event` up to `generation`, taken out.
    fn take_for(&mut self, event: u64, generation: u64) -> Vec<Waker> {
        let Some(note) = self.events.get_mut(&event) else {
            return Vec::new();
        };
        let (due, keep): (Vec<Armed>, Vec<Armed>) = note
            .armed
            .drain(..)
            .partition(|a| a.generation <= generation);
        note.armed = keep;
        due.into_iter().map(|a| a.waker).collect()
    }
}

/// A device's reactor: its thread and what it knows.
struct Hub {
    device: i32,
    /// The thread's `pthread_t` (set once it is spawned, before any use).
    tid: AtomicU64,
    api: Arc<Api>,
    state: Mutex<HubState>,
    /// The thread waits here when `aclrtProcessReport` cannot wait for it;
    /// a drop waits here for the thread to end.
    wake: Condvar,
    stop: AtomicBool,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The longest one wait ([`MAX_WAIT`] unless a test set it).
    max_wait: Duration,
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

fn unsupported(what: &'static str) -> DriverError {
    DriverError::new(Op::QueueNotify, DriverErrorKind::NoResource { what })
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HubState> {
        lock(&self.state)
    }

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
            state: Mutex::new(HubState::default()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            max_wait: d.reactor_wait,
        });
        register_exception_callback(&d.api);
        let (ready, started) = mpsc::channel();
        let h = Arc::clone(&hub);
        let handle = std::thread::Builder::new()
            .name(format!("runclaim-acl-callbacks-{}", d.device))
            .spawn(move || h.run(bind, &ready))
            .map_err(|_| unsupported("no thread for the device's callbacks"))?;
        let Some(tid) = thread_id(&handle) else {
            hub.stop.store(true, Ordering::Release);
            hub.wake.notify_all();
            return Err(unsupported("no thread id for the device's callbacks"));
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
                return Err(unsupported("the device's callback thread did not start"));
            }
        }
        let mut hubs = lock(&HUBS);
        hubs.retain(|w| w.strong_count() > 0);
        hubs.push(Arc::downgrade(&hub));
        Ok(hub)
    }

    /// The reactor thread.
    fn run(&self, bind: Bind, ready: &mpsc::Sender<Result<(), Failed>>) {
        let bound = match bind {
            Bind::Context(ctx) => {
                // SAFETY: a context a driver of this device captured right
                // after its first `aclrtSetDevice`; the device stays
                // referenced while this thread runs: its last driver ends
                // this thread (joined, or given up on after `JOIN_WAIT`, with
                // the stop flag set: the thread then only returns from the
                // runtime and ends) before that driver's resets.
                let set = unsafe { result::set_current_context(&self.api, ctx) };
                set.unwrap_or(Ok(()))
            }
            Bind::Device(device) => result::set_device(&self.api, device),
        };
        let owns_reference = matches!(bind, Bind::Device(_)) && bound.is_ok();
        let go = bound.is_ok();
        let _ = ready.send(bound);
        while go && !self.stop.load(Ordering::Acquire) {
            let wait = self.next_wait();
            match result::process_report(&self.api, wait) {
                Some(Report::Ran | Report::TimedOut) => {}
                Some(Report::NotSubscribed | Report::Failed) | None => self.idle(wait),
            }
            wake_all(self.expired(Instant::now()));
        }
        if owns_reference && let Bind::Device(device) = bind {
            // SAFETY: gives up this thread's own reference (taken above);
            // the thread makes no further call.
            let _ = unsafe { result::reset_device(&self.api, device) };
        }
        let woken = {
            let mut st = self.lock();
            st.exited = true;
            st.waits_until = None;
            st.take_armed()
        };
        self.wake.notify_all();
        wake_all(woken);
    }

    /// How long the next `aclrtProcessReport` waits: until the nearest
    /// armed deadline, within [1 ms, 100 ms].
    fn next_wait(&self) -> Duration {
        let now = Instant::now();
        let mut st = self.lock();
        let nearest = st
            .events
            .values()
            .flat_map(|n| n.armed.iter().filter_map(|a| a.deadline))
            .min();
        let wait = nearest
            .map_or(self.max_wait, |d| d.saturating_duration_since(now))
            .clamp(MIN_WAIT, self.max_wait);
        st.waits_until = Some(now + wait);
        wait
    }

    /// Waits on the condition variable instead of the runtime (nothing is
    /// subscribed yet, or the call failed), until stopped or woken.
    fn idle(&self, wait: Duration) {
        let st = self.lock();
        if self.stop.load(Ordering::Acquire) {
            return;
        }
        drop(
            self.wake
                .wait_timeout(st, wait)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g),
        );
    }

    /// The wakers whose deadline is past, taken out.
    fn expired(&self, now: Instant) -> Vec<Waker> {
        let mut st = self.lock();
        st.waits_until = None;
        let mut out = Vec::new();
        for note in st.events.values_mut() {
            let (due, keep): (Vec<Armed>, Vec<Armed>) = note
                .armed
                .drain(..)
                .partition(|a| a.deadline.is_some_and(|d| d <= now));
            note.armed = keep;
            out.extend(due.into_iter().map(|a| a.waker));
        }
        out
    }

    /// Subscribes `s` to the reactor's thread, unless it is already.
    fn subscribe(&self, s: Stream<'_>) -> Result<(), DriverError> {
        let mut st = self.lock();
        if st.subscribed.contains(&s.ptr()) {
            return Ok(());
        }
        if self.stop.load(Ordering::Acquire) {
            return Err(unsupported("the device's callback thread is ending"));
        }
        // Under the lock, so that two launches do not both subscribe (the
        // runtime would refuse the second); the call does not block.
        match result::subscribe_report(&self.api, self.tid(), s) {
            Some(Ok(())) => {
                st.subscribed.push(s.ptr());
                drop(st);
                self.wake.notify_all();
                Ok(())
            }
            Some(Err(f)) => Err(f.at(Op::QueueNotify)),
            None => Err(DriverError::new(
                Op::QueueNotify,
                DriverErrorKind::Unsupported,
            )),
        }
    }

    /// Notes the callback `ticket` stands for, before it is queued.
    fn expect(&self, ticket: usize, p: Pending) {
        let mut st = self.lock();
        st.pending.insert(ticket, p);
        let note = st.events.entry(p.event).or_default();
        note.queued = note.queued.max(p.generation);
    }

    /// The callback `ticket` could not be queued: nothing is expected of it,
    /// and whoever was armed for its record looks again.
    fn cancel(&self, ticket: usize) -> Vec<Waker> {
        let mut st = self.lock();
        let Some(p) = st.pending.remove(&ticket) else {
            return Vec::new();
        };
        if let Some(note) = st.events.get_mut(&p.event)
            && note.queued == p.generation
        {
            note.queued = 0;
        }
        st.take_for(p.event, p.generation)
    }

    /// The callback `ticket` ran: its record is complete. `None` when the
    /// ticket is not this reactor's (or no longer expected).
    fn fired(&self, ticket: usize) -> Option<Vec<Waker>> {
        let mut st = self.lock();
        let p = st.pending.remove(&ticket)?;
        let note = st.events.get_mut(&p.event)?;
        note.fired = note.fired.max(p.generation);
        Some(st.take_for(p.event, p.generation))
    }

    /// Arms `waker` for `event`'s record `generation`.
    fn arm(&self, event: u64, generation: u64, within: Duration, waker: &Waker) -> Notice {
        let now = Instant::now();
        let deadline = now.checked_add(within);
        let mut st = self.lock();
        if self.stop.load(Ordering::Acquire) || st.exited {
            return Notice::Timer;
        }
        let waits_until = st.waits_until;
        let Some(note) = st.events.get_mut(&event) else {
            return Notice::Timer;
        };
        if note.fired >= generation {
            return Notice::Ready;
        }
        if note.queued != generation {
            return Notice::Timer;
        }
        if let Some(a) = note.armed.iter_mut().find(|a| a.waker.will_wake(waker)) {
            a.generation = generation;
            a.deadline = deadline;
        } else if note.armed.len() < MAX_WAKERS {
            note.armed.push(Armed {
                generation,
                waker: waker.clone(),
                deadline,
            });
        } else {
            return Notice::Timer;
        }
        drop(st);
        // The reactor looks at deadlines when its wait ends: an earlier one
        // goes to the timer as well (an extra wake is a hint, never wrong).
        if let (Some(d), Some(w)) = (deadline, waits_until)
            && d < w
        {
            wake_after(within, waker);
        }
        Notice::Completion
    }

    /// Ends the subscription of `stream` (which is about to be destroyed):
    /// its callbacks are no longer expected. The wakers armed for them, to
    /// wake, and whether it was subscribed.
    fn forget_stream(&self, stream: RtPtr) -> (bool, Vec<Waker>) {
        let mut st = self.lock();
        let Some(i) = st.subscribed.iter().position(|&s| s == stream) else {
            return (false, Vec::new());
        };
        st.subscribed.swap_remove(i);
        let gone: Vec<Pending> = st
            .pending
            .values()
            .filter(|p| p.stream == stream.raw())
            .copied()
            .collect();
        st.pending.retain(|_, p| p.stream != stream.raw());
        let mut woken = Vec::new();
        for p in gone {
            if let Some(note) = st.events.get_mut(&p.event)
                && note.queued == p.generation
            {
                note.queued = 0;
            }
            woken.extend(st.take_for(p.event, p.generation));
        }
        (true, woken)
    }

    /// The last callback still expected on `stream`, if any.
    fn last_pending(&self, stream: u64) -> Option<Pending> {
        let st = self.lock();
        st.pending
            .values()
            .rev()
            .find(|p| p.stream == stream)
            .copied()
    }

    /// Forgets a destroyed event; its wakers, to wake.
    fn forget_event(&self, event: u64) -> Vec<Waker> {
        let mut st = self.lock();
        st.events
            .remove(&event)
            .map(|n| n.armed.into_iter().map(|a| a.waker).collect())
            .unwrap_or_default()
    }

    /// Waits (bounded) for the thread to end and joins it; leaves it
    /// detached if it does not end in time.
    fn join(&self) {
        let deadline = Instant::now() + JOIN_WAIT;
        let mut st = self.lock();
        while !st.exited {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            st = self
                .wake
                .wait_timeout(st, deadline - now)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
        drop(st);
        if let Some(t) = lock(&self.thread).take() {
            // It has returned from `run`: the join is immediate.
            let _ = t.join();
        }
    }

    /// Ends the reactor (see the module documentation); `bound`: the
    /// calling thread is bound to the device, so the streams can be
    /// unsubscribed.
    fn shutdown(&self, bound: bool) {
        let (streams, woken) = {
            let mut st = self.lock();
            self.stop.store(true, Ordering::Release);
            st.pending.clear();
            (std::mem::take(&mut st.subscribed), st.take_armed())
        };
        if bound {
            for s in streams {
                // SAFETY: a subscribed stream is never destroyed before it is
                // unsubscribed (`destroy_stream` forgets it first), and its
                // device is not released: the calling driver still holds its
                // references and is bound to it.
                let _ = unsafe { result::unsubscribe_report(&self.api, self.tid(), s) };
            }
        }
        self.wake.notify_all();
        self.join();
        wake_elsewhere(woken);
        let rest = self.lock().take_armed();
        wake_elsewhere(rest);
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
            if let Some(woken) = hub.fired(ticket) {
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
            let woken = hub.lock().take_armed();
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

impl AclDriver {
    /// The runtime offers what a completion callback needs.
    fn has_callbacks(&self) -> bool {
        self.api.subscribe_report.is_some()
            && self.api.launch_callback.is_some()
            && self.api.process_report.is_some()
    }

    /// `Driver::queue_notify`: see the module documentation.
    pub(super) fn queue_notify_impl(
        &self,
        stream: StreamId,
        event: EventId,
    ) -> Result<(), DriverError> {
        let op = Op::QueueNotify;
        let t = self.read();
        let s = t.stream(op, stream.raw())?.live();
        let e = t.event(op, event.raw())?;
        let generation = e.generation();
        if !self.has_callbacks() || !e.recorded() {
            // Nothing queued: `notify_event` answers on time (or, for a
            // never-recorded event, Ready).
            return Ok(());
        }
        self.bind(op)?;
        let hub = self.shared.notify.reactor(self)?;
        hub.subscribe(s)?;
        let ticket = TICKETS.fetch_add(1, Ordering::Relaxed);
        hub.expect(
            ticket,
            Pending {
                stream: stream.raw(),
                event: event.raw(),
                generation,
            },
        );
        let launched = result::launch_callback(&self.api, s, on_callback, ticket);
        drop(t);
        match launched {
            Some(Ok(())) => Ok(()),
            failed => {
                // Woken elsewhere (the caller may hold its own locks).
                wake_elsewhere(hub.cancel(ticket));
                failed.map_or(Ok(()), |r| r.map_err(|f| f.at(op)))
            }
        }
    }

    /// `Driver::notify_event`: see the module documentation.
    pub(super) fn notify_event_impl(
        &self,
        event: EventId,
        within: Duration,
        waker: &Waker,
    ) -> Result<Notice, DriverError> {
        let op = Op::NotifyEvent;
        let t = self.read();
        let e = t.event(op, event.raw())?;
        if !e.recorded() {
            // Never recorded: complete (the trait's reading).
            return Ok(Notice::Ready);
        }
        let generation = e.generation();
        self.bind(op)?;
        match result::query_event_status(&self.api, e.live()) {
            Ok(Completion::Complete) => return Ok(Notice::Ready),
            Ok(Completion::NotReady) => {}
            Err(f) => {
                let err = f.at(op);
                if err.is_device_fault() {
                    // Its stream faulted: nothing to wait for.
                    return Ok(Notice::Ready);
                }
                return Err(err);
            }
        }
        drop(t);
        if let Some(hub) = self.shared.notify.running() {
            match hub.arm(event.raw(), generation, within, waker) {
                Notice::Timer => {}
                n => return Ok(n),
            }
        }
        wake_after(within, waker);
        Ok(Notice::Timer)
    }

    /// Before `stream` is destroyed: unsubscribes it from the reactor, if
    /// it is subscribed. The caller is bound to the device; it wakes the
    /// wakers returned (those armed for the stream's callbacks) once it
    /// holds no lock.
    #[must_use = "the wakers must be woken"]
    pub(super) fn unsubscribe(&self, stream: RtPtr) -> Vec<Waker> {
        let Some(hub) = self.shared.notify.running() else {
            return Vec::new();
        };
        let (subscribed, woken) = hub.forget_stream(stream);
        if subscribed {
            // SAFETY: the caller's stream, not destroyed yet (it is about to
            // be), on a device this driver holds and is bound to.
            let _ = unsafe { result::unsubscribe_report(&self.api, hub.tid(), stream) };
        }
        woken
    }

    /// Whether all that keeps `stream` busy is this driver's own callback
    /// tasks — the fence ahead of the last one is complete — and they are
    /// done now: waited for (they complete as soon as the stream reaches
    /// them), at most [`CALLBACK_TASKS_WAIT`]. So a stream whose caller's
    /// work is all complete is destroyed, as the trait promises, although
    /// a notification was queued behind its last fence. The caller holds
    /// the table (`t`) and is bound to the device.
    pub(super) fn only_callbacks_left(&self, t: &Table, s: Stream<'_>) -> bool {
        let Some(hub) = self.shared.notify.running() else {
            return false;
        };
        let Some(p) = hub.last_pending(s.ptr().raw()) else {
            return false;
        };
        let Ok(e) = t.event(Op::DestroyStream, p.event) else {
            return false;
        };
        if e.generation() != p.generation
            || !matches!(
                result::query_event_status(&self.api, e.live()),
                Ok(Completion::Complete)
            )
        {
            return false;
        }
        result::synchronize_stream_with_timeout(&self.api, s, CALLBACK_TASKS_WAIT).is_ok()
    }

    /// After `event` was destroyed: nothing is kept for it; its wakers are
    /// woken, on the timer thread.
    pub(super) fn forget_event(&self, event: u64) {
        if let Some(hub) = self.shared.notify.running() {
            wake_elsewhere(hub.forget_event(event));
        }
    }
}
