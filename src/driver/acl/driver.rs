//! The [`Driver`] impl of [`AclDriver`]: every trait method as a call whose
//! handles were checked against the table first, made in this driver's
//! device context, through the `result` layer (which owns each C call, its
//! API name and its return-code mapping). No `unsafe` here: what a call
//! needs to be sound is carried by the tokens the table's checks return.

use std::sync::atomic::Ordering;
use std::task::Waker;
use std::time::{Duration, Instant};

use super::AclDriver;
use super::ffi::{ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE};
use super::notify;
use super::result::{self, HostCopy};
use crate::driver::abi::{LaunchArgs, TICKS_PER_SEC};
use crate::driver::{
    CaptureRule, CodeHandle, Completion, DevPtr, Driver, DriverError, DriverErrorKind, DriverInfo,
    EventId, GraphId, Notice, Op, Registration, StreamId,
};

impl Driver for AclDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            max_block_dim: self.max_block_dim,
            // The runtime does not say: what was measured.
            stream_capacity: crate::driver::STREAM_CAPACITY,
            watchdog: self.watchdog,
            capabilities: self.capabilities(),
        }
    }

    fn alloc(&self, bytes: usize) -> Result<DevPtr, DriverError> {
        if bytes == 0 {
            return Err(DriverError::new(
                Op::Alloc,
                DriverErrorKind::InvalidArgument {
                    what: "allocation size is 0",
                },
            ));
        }
        self.bind(Op::Alloc)?;
        let p = result::malloc(&self.api, bytes).map_err(|f| f.at(Op::Alloc))?;
        self.write().insert_alloc(p, bytes);
        Ok(DevPtr::from_raw(p.raw()))
    }

    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        // The write lock is held until the allocation is gone (or back):
        // no other call can use it meanwhile.
        let mut t = self.write();
        let a = t.take_alloc(Op::Free, ptr.raw())?;
        if let Err(e) = self.bind(Op::Free) {
            t.put_back_alloc(a);
            return Err(e);
        }
        result::free(&self.api, a).map_err(|(a, f)| {
            t.put_back_alloc(a);
            f.at(Op::Free)
        })
    }

    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        let t = self.read();
        let dst = t.range(Op::CopyToDevice, dst.raw(), src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.bind(Op::CopyToDevice)?;
        result::memcpy(&self.api, HostCopy::ToDevice { dst, src })
            .map_err(|f| f.at(Op::CopyToDevice))
    }

    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        let t = self.read();
        let src = t.range(Op::CopyFromDevice, src.raw(), dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.bind(Op::CopyFromDevice)?;
        result::memcpy(&self.api, HostCopy::ToHost { dst, src })
            .map_err(|f| f.at(Op::CopyFromDevice))
    }

    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
        let t = self.read();
        let dst = t.range(Op::Memset, dst.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(Op::Memset)?;
        result::memset(&self.api, dst, value).map_err(|f| f.at(Op::Memset))
    }

    fn copy_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        let op = Op::CopyAsync;
        let t = self.read();
        let s = t.stream(op, s.raw())?.live();
        let dst = t.range(op, dst.raw(), len)?;
        let src = t.range(op, src.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(op)?;
        result::memcpy_async(&self.api, s, dst, src).map_err(|f| f.at(op))
    }

    fn memset_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        value: u8,
        len: usize,
    ) -> Result<(), DriverError> {
        let op = Op::MemsetAsync;
        let t = self.read();
        let s = t.stream(op, s.raw())?.live();
        let dst = t.range(op, dst.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(op)?;
        result::memset_async(&self.api, s, dst, value).map_err(|f| f.at(op))
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        self.bind(Op::CreateStream)?;
        let s = result::create_stream(&self.api).map_err(|f| f.at(Op::CreateStream))?;
        self.write().insert_stream(s);
        Ok(StreamId::from_raw(s.raw()))
    }

    fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        let op = Op::DestroyStream;
        // Out of the table under the write lock (nobody may wait on it), and
        // back in if it cannot be destroyed.
        let mut t = self.write();
        let s = t.take_stream(op, stream.raw())?;
        if let Err(e) = self.bind(op) {
            t.put_back_stream(s);
            return Err(e);
        }
        // aclrtDestroyStream would wait for queued work; the trait refuses it
        // instead, and never syncs an error-state stream before destroying it.
        let faulted = match result::stream_query(&self.api, s.live()) {
            // Busy with this driver's own callback tasks only: done now.
            Ok(Completion::NotReady) if self.only_callbacks_left(&t, s.live()) => false,
            Ok(Completion::NotReady) => {
                t.put_back_stream(s);
                return Err(DriverError::new(
                    op,
                    DriverErrorKind::StreamBusy { queued: None },
                ));
            }
            Ok(Completion::Complete) => false,
            // Capturing: the runtime refuses to destroy it
            // (`ApiErrorDecorator::StreamDestroy`,
            // `src/runtime/api/impl/api_error.cc`), and it is not faulted.
            Err(f) if matches!(f.kind(), DriverErrorKind::Capture { .. }) => {
                t.put_back_stream(s);
                return Err(f
                    .with_kind(DriverErrorKind::Capture {
                        rule: CaptureRule::AlreadyCapturing,
                    })
                    .at(op));
            }
            Err(_) => true,
        };
        // A subscribed stream is unsubscribed before it goes (`notify`).
        let woken = self.unsubscribe(s.live().ptr());
        let destroyed = if faulted {
            result::destroy_stream_force(&self.api, s)
        } else {
            result::destroy_stream(&self.api, s)
        };
        let destroyed = destroyed.map_err(|(s, f)| {
            t.put_back_stream(s);
            f.at(op)
        });
        drop(t);
        // Whoever awaited its callbacks looks again (woken on the timer
        // thread: the caller may hold locks of its own).
        notify::wake_elsewhere(woken);
        destroyed
    }

    fn query_stream(&self, stream: StreamId) -> Result<Completion, DriverError> {
        let t = self.read();
        let s = t.stream(Op::QueryStream, stream.raw())?.live();
        self.bind(Op::QueryStream)?;
        result::stream_query(&self.api, s).map_err(|f| f.at(Op::QueryStream))
    }

    fn sync_stream(&self, stream: StreamId, timeout: Duration) -> Result<(), DriverError> {
        let op = Op::SyncStream;
        let t = self.read();
        if timeout.is_zero() {
            let s = t.stream(op, stream.raw())?.live();
            self.bind(op)?;
            return match result::stream_query(&self.api, s).map_err(|f| f.at(op))? {
                Completion::Complete => Ok(()),
                Completion::NotReady => Err(DriverError::new(
                    op,
                    DriverErrorKind::Timeout { waited: timeout },
                )),
            };
        }
        // Blocking: mark the stream waited on (so it cannot be destroyed)
        // instead of holding the lock while the device works.
        let waiting = t.wait_stream(op, stream.raw())?;
        drop(t);
        self.bind(op)?;
        result::synchronize_stream_with_timeout(&self.api, waiting.live(), timeout)
            .map_err(|f| f.at(op))
    }

    fn create_event(&self) -> Result<EventId, DriverError> {
        let op = Op::CreateEvent;
        self.bind(op)?;
        // SYNC: usable in aclrtStreamWaitEvent; TIME_LINE: timestamps and
        // elapsed time.
        let flags = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE;
        if self.ex_events.load(Ordering::Acquire)
            && let Some(made) = result::create_event_ex_with_flag(&self.api, flags)
        {
            match made {
                Ok(e) => {
                    self.write().insert_event(e, false);
                    return Ok(EventId::from_raw(e.raw()));
                }
                // A runtime that exports the call but does not support it:
                // use the old one from now on.
                Err(f) if matches!(f.kind(), DriverErrorKind::Unsupported) => {
                    self.ex_events.store(false, Ordering::Release);
                }
                Err(f) => return Err(f.at(op)),
            }
        }
        let e = result::create_event_with_flag(&self.api, flags).map_err(|f| f.at(op))?;
        self.write().insert_event(e, true);
        Ok(EventId::from_raw(e.raw()))
    }

    fn destroy_event(&self, event: EventId) -> Result<(), DriverError> {
        let op = Op::DestroyEvent;
        let mut t = self.write();
        let e = t.take_event(op, event.raw())?;
        if let Err(err) = self.bind(op) {
            t.put_back_event(e);
            return Err(err);
        }
        result::destroy_event(&self.api, e).map_err(|(e, f)| {
            t.put_back_event(e);
            f.at(op)
        })?;
        drop(t);
        self.forget_event(event.raw());
        Ok(())
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), DriverError> {
        let op = Op::RecordEvent;
        let t = self.read();
        let e = t.event(op, event.raw())?;
        let s = t.stream(op, stream.raw())?.live();
        self.bind(op)?;
        result::record_event(&self.api, e.live(), s).map_err(|f| f.at(op))?;
        e.note_record();
        Ok(())
    }

    fn query_event(&self, event: EventId) -> Result<Completion, DriverError> {
        let op = Op::QueryEvent;
        let t = self.read();
        let e = t.event(op, event.raw())?;
        if e.unrecorded_legacy() {
            // The runtime would say NOT_READY for ever; the trait says a
            // never-recorded event is complete.
            return Ok(Completion::Complete);
        }
        self.bind(op)?;
        result::query_event_status(&self.api, e.live()).map_err(|f| f.at(op))
    }

    fn sync_event(&self, event: EventId, timeout: Duration) -> Result<(), DriverError> {
        let op = Op::SyncEvent;
        let t = self.read();
        let e = t.event(op, event.raw())?;
        if e.unrecorded_legacy() {
            return Ok(());
        }
        let not_yet = || DriverError::new(op, DriverErrorKind::Timeout { waited: timeout });
        // Blocking: mark the event waited on instead of holding the lock.
        let waiting = e.wait();
        drop(t);
        self.bind(op)?;
        let query = || result::query_event_status(&self.api, waiting.live()).map_err(|f| f.at(op));
        if timeout.is_zero() {
            return match query()? {
                Completion::Complete => Ok(()),
                Completion::NotReady => Err(not_yet()),
            };
        }
        if let Some(synced) =
            result::synchronize_event_with_timeout(&self.api, waiting.live(), timeout)
        {
            return synced.map_err(|f| f.at(op));
        }
        // Fallback without the timed sync: poll until the deadline (a
        // timeout too large for a deadline means no limit).
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if query()? == Completion::Complete {
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(not_yet());
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        let op = Op::StreamWaitEvent;
        let t = self.read();
        let s = t.stream(op, stream.raw())?.live();
        let e = t.event(op, event.raw())?;
        if e.unrecorded_legacy() {
            // Nothing captured, nothing to wait for. Asking the runtime would
            // queue a device wait that no record ever satisfies.
            return Ok(());
        }
        self.bind(op)?;
        result::stream_wait_event(&self.api, s, e.live()).map_err(|f| f.at(op))
    }

    fn event_elapsed(&self, start: EventId, end: EventId) -> Result<Duration, DriverError> {
        let op = Op::EventElapsed;
        let t = self.read();
        let (a, b) = (t.event(op, start.raw())?, t.event(op, end.raw())?);
        if !(a.recorded() && b.recorded()) {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "event was never recorded",
                },
            ));
        }
        self.bind(op)?;
        let ms = result::event_elapsed_time(&self.api, a.live(), b.live()).map_err(|f| f.at(op))?;
        elapsed_of(ms).map_err(|what| DriverError::new(op, DriverErrorKind::InvalidResult { what }))
    }

    fn event_timestamp(&self, event: EventId) -> Result<u64, DriverError> {
        let op = Op::EventTimestamp;
        let t = self.read();
        let e = t.event(op, event.raw())?;
        if self.api.event_timestamp.is_none() {
            return Err(DriverError::new(op, DriverErrorKind::Unsupported));
        }
        if !e.recorded() {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "event was never recorded",
                },
            ));
        }
        self.bind(op)?;
        let us = result::event_get_timestamp(&self.api, e.live())
            .ok_or_else(|| DriverError::new(op, DriverErrorKind::Unsupported))?
            .map_err(|f| f.at(op))?;
        // Device uptime in µs → ticks of the 50 MHz counter.
        Ok(us.saturating_mul(TICKS_PER_SEC / 1_000_000))
    }

    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        self.register(code)
    }

    fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
        self.release(code)
    }

    fn code_epoch(&self) -> u64 {
        self.shared.uploads.load(Ordering::Acquire)
    }

    fn launch_aicore(
        &self,
        s: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverError> {
        let op = Op::LaunchAicore;
        let t = self.read();
        let s = t.stream(op, s.raw())?.live();
        // Only an upload this driver registered and still holds launches:
        // a forged handle, another driver's, or one whose registration was
        // released and replaced never reaches C.
        let program = &t.code(op, code.raw(), code.upload())?.program;
        self.block_dim_ok(op, block_dim)?;
        let args = t.run_args(op, args)?;
        self.bind(op)?;
        result::kernel_launch_with_handle_v2(&self.api, program, block_dim, args, s)
            .map_err(|f| f.at(op))
    }

    fn check_aicpu_args(&self, args: LaunchArgs<'_>) -> Result<(), DriverError> {
        self.read().run_args(Op::LaunchAicpu, args).map(drop)
    }

    fn launch_aicpu(&self, s: StreamId, args: LaunchArgs<'_>) -> Result<(), DriverError> {
        let op = Op::LaunchAicpu;
        let t = self.read();
        let s = t.stream(op, s.raw())?.live();
        let args = t.run_args(op, args)?;
        let Some(kernel) = &self.aicpu else {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "the AICPU Run kernel is not loaded",
                },
            ));
        };
        self.bind(op)?;
        result::launch_cpu_kernel(&self.api, kernel, self.aicpu_threads, args, s)
            .map_err(|f| f.at(op))
    }

    /// Queues a host callback behind `event`'s record on `stream`
    /// (`aclrtLaunchCallback`, on the device's reactor thread; see the
    /// module documentation). Without the callback symbols nothing is
    /// queued and it returns `Ok`.
    fn queue_notify(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        self.queue_notify_impl(stream, event)
    }

    /// [`Notice::Ready`] for a complete event (or a faulted stream),
    /// [`Notice::Completion`] when a callback is queued for its last record,
    /// [`Notice::Timer`] otherwise (see the module documentation).
    fn notify_event(
        &self,
        event: EventId,
        within: Duration,
        waker: &Waker,
    ) -> Result<Notice, DriverError> {
        self.notify_event_impl(event, within, waker)
    }

    /// `aclmdlRICaptureBegin` in thread-local mode, checked `ACTIVE` with
    /// `aclmdlRICaptureGetInfo` (see the module documentation).
    fn capture_begin(&self, stream: StreamId) -> Result<(), DriverError> {
        self.capture_begin_impl(stream)
    }

    /// `aclmdlRICaptureEnd`; the graph is this driver's until destroyed.
    fn capture_end(&self, stream: StreamId) -> Result<GraphId, DriverError> {
        self.capture_end_impl(stream)
    }

    /// `aclmdlRIExecuteAsync`.
    fn graph_launch(&self, graph: GraphId, stream: StreamId) -> Result<(), DriverError> {
        self.graph_launch_impl(graph, stream)
    }

    /// `aclmdlRIDestroy`.
    fn graph_destroy(&self, graph: GraphId) -> Result<(), DriverError> {
        self.graph_destroy_impl(graph)
    }
}

/// An elapsed time the runtime reported, in ms, as a `Duration`.
pub(super) fn elapsed_of(ms: f32) -> Result<Duration, &'static str> {
    if ms.is_nan() {
        return Err("elapsed time is NaN");
    }
    if ms < 0.0 {
        return Err("elapsed time is negative (end recorded before start?)");
    }
    Duration::try_from_secs_f64(f64::from(ms) / 1000.0)
        .map_err(|_| "elapsed time is infinite or too large")
}

impl AclDriver {
    /// `block_dim` within what the device runs (refused before any C call).
    pub(super) fn block_dim_ok(&self, op: Op, block_dim: u32) -> Result<(), DriverError> {
        if block_dim == 0 || block_dim > self.max_block_dim {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "block_dim is 0 or above the device maximum",
                },
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn elapsed_times_from_the_runtime_never_panic() {
        assert_eq!(elapsed_of(1.5), Ok(Duration::from_micros(1500)));
        assert_eq!(elapsed_of(0.0), Ok(Duration::ZERO));
        for bad in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -1.0,
            f32::MAX,
            f32::MIN,
        ] {
            assert!(elapsed_of(bad).is_err(), "{bad}");
        }
        assert!(elapsed_of(1e15).is_ok(), "large but representable");
    }
}
