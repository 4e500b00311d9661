//! The driver calls behind completion notifications (see the parent
//! module's documentation): `queue_notify`, `notify_event`, and what
//! destroying a stream or an event tells the reactor.

use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::{Duration, Instant};

use super::{CALLBACK_TASKS_WAIT, TICKETS, on_callback, wake_elsewhere};
use crate::driver::acl::AclDriver;
use crate::driver::acl::ptr::RtPtr;
use crate::driver::acl::result;
use crate::driver::acl::table::Table;
use crate::driver::acl::tokens::Stream;
use crate::driver::wake::reactor::{Arming, Pending};
use crate::driver::{Completion, DriverError, EventId, Notice, Op, StreamId, wake_after};

impl AclDriver {
    /// The runtime offers what a completion callback needs.
    fn has_callbacks(&self) -> bool {
        self.api.subscribe_report.is_some()
            && self.api.launch_callback.is_some()
            && self.api.process_report.is_some()
    }

    /// `Driver::queue_notify`: see the module documentation.
    pub(in crate::driver::acl) fn queue_notify_impl(
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
        hub.core.expect(
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
                wake_elsewhere(hub.core.cancel(ticket));
                failed.map_or(Ok(()), |r| r.map_err(|f| f.at(op)))
            }
        }
    }

    /// `Driver::notify_event`: see the module documentation.
    pub(in crate::driver::acl) fn notify_event_impl(
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
        // The fault reports so far, read before the look: one that comes
        // between the look and the arm is caught there.
        let hub = self.shared.notify.running();
        let faults = hub.as_ref().map(|h| h.core.faults());
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
        if let (Some(hub), Some(faults)) = (hub, faults) {
            let deadline = Instant::now().checked_add(within);
            match hub
                .core
                .arm(event.raw(), generation, deadline, faults, waker)
            {
                Arming::Ready => return Ok(Notice::Ready),
                Arming::Armed { timer_too } => {
                    // The reactor looks at deadlines when its wait ends:
                    // an earlier one goes to the timer as well.
                    if timer_too {
                        wake_after(within, waker);
                    }
                    return Ok(Notice::Completion);
                }
                Arming::Faulted => {
                    // A fault report came since the look: it woke nobody
                    // armed after it, so this task looks again now.
                    wake_elsewhere(vec![waker.clone()]);
                    return Ok(Notice::Completion);
                }
                Arming::Timer => {}
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
    pub(in crate::driver::acl) fn unsubscribe(&self, stream: RtPtr) -> Vec<Waker> {
        let Some(hub) = self.shared.notify.running() else {
            return Vec::new();
        };
        let (subscribed, woken) = hub.core.forget_stream(stream, stream.raw());
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
    pub(in crate::driver::acl) fn only_callbacks_left(&self, t: &Table, s: Stream<'_>) -> bool {
        let Some(hub) = self.shared.notify.running() else {
            return false;
        };
        let Some(p) = hub.core.last_pending(s.ptr().raw()) else {
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
    pub(in crate::driver::acl) fn forget_event(&self, event: u64) {
        if let Some(hub) = self.shared.notify.running() {
            wake_elsewhere(hub.core.forget_event(event));
        }
    }
}
