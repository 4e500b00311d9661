//! The [`Driver`] impl of [`AclDriver`]: every trait method as a call whose
//! handles were checked against the table first, made in this driver's
//! device context, with its return code turned into a [`DriverError`].

use std::ptr::null_mut;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::AclDriver;
use super::call::{addr, elapsed_of, handle, millis};
use super::codes::{
    self, ACL_ERROR_RT_EVENT_SYNC_TIMEOUT, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
};
use super::ffi::{
    ACL_EVENT_SYNC, ACL_EVENT_TIME_LINE, ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, RT_SCHEM_MODE_BATCH, RtArgsEx,
    RtCpuKernelArgs, RtKernelLaunchCfg, RtLaunchKernelAttr, RtTaskCfgInfo,
};
use super::table::Table;
use crate::driver::abi::{RunArgs, TICKS_PER_SEC};
use crate::driver::{
    CodeHandle, Completion, DevPtr, Driver, DriverError, DriverErrorKind, DriverInfo, EventId, Op,
    Registration, StreamId,
};

impl Driver for AclDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            max_block_dim: self.max_block_dim,
            stream_capacity: 1792,
            watchdog: self.watchdog,
            capabilities: self.caps,
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
        let mut p = null_mut();
        // SAFETY: `p` is a valid out-pointer; size and policy by value.
        let rc = unsafe { (self.api.malloc)(&raw mut p, bytes, ACL_MEM_MALLOC_HUGE_FIRST) };
        if rc != 0 {
            let kind = match codes::kind_of(rc) {
                DriverErrorKind::OutOfMemory { .. } => DriverErrorKind::OutOfMemory {
                    bytes: bytes as u64,
                },
                k => k,
            };
            return Err(self.fail_as(Op::Alloc, "aclrtMalloc", rc, kind));
        }
        self.write().insert_alloc(addr(p), bytes);
        Ok(DevPtr::from_raw(addr(p)))
    }

    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        let mut t = self.write();
        t.check_free(Op::Free, ptr.raw())?;
        self.bind(Op::Free)?;
        // SAFETY: `ptr` is the start of a live allocation of this driver
        // (checked above), freed once: the write lock is held until it is
        // out of the table, so no other call can use it meanwhile.
        let rc = unsafe { (self.api.free)(handle(ptr.raw())) };
        self.check(Op::Free, "aclrtFree", rc)?;
        t.remove_alloc(ptr.raw());
        Ok(())
    }

    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        let t = self.read();
        let room = t.range(Op::CopyToDevice, dst.raw(), src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.bind(Op::CopyToDevice)?;
        // SAFETY: `src` is readable for `src.len()` bytes for the duration of
        // this synchronous copy; `[dst, dst + src.len())` lies in one live
        // allocation of this driver, which stays live (read lock) for the
        // call, and destMax is what that allocation has left from `dst`.
        let rc = unsafe {
            (self.api.memcpy)(
                handle(dst.raw()),
                room,
                src.as_ptr().cast(),
                src.len(),
                ACL_MEMCPY_HOST_TO_DEVICE,
            )
        };
        self.check(Op::CopyToDevice, "aclrtMemcpy", rc)
    }

    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        let t = self.read();
        t.range(Op::CopyFromDevice, src.raw(), dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.bind(Op::CopyFromDevice)?;
        // SAFETY: `dst` is writable for `dst.len()` bytes (destMax) for the
        // duration of this synchronous copy; `[src, src + dst.len())` lies in
        // one live allocation, kept live by the read lock.
        let rc = unsafe {
            (self.api.memcpy)(
                dst.as_mut_ptr().cast(),
                dst.len(),
                handle(src.raw()),
                dst.len(),
                ACL_MEMCPY_DEVICE_TO_HOST,
            )
        };
        self.check(Op::CopyFromDevice, "aclrtMemcpy", rc)
    }

    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
        let t = self.read();
        let room = t.range(Op::Memset, dst.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(Op::Memset)?;
        // SAFETY: `[dst, dst + len)` lies in one live allocation (kept live
        // by the read lock); maxCount is what it has left from `dst`.
        let rc = unsafe { (self.api.memset)(handle(dst.raw()), room, i32::from(value), len) };
        self.check(Op::Memset, "aclrtMemset", rc)
    }

    fn copy_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        let t = self.read();
        t.stream(Op::CopyAsync, s.raw())?;
        let room = t.range(Op::CopyAsync, dst.raw(), len)?;
        t.range(Op::CopyAsync, src.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(Op::CopyAsync)?;
        // SAFETY: device-to-device on a live stream of this driver: both
        // ranges lie in live allocations (checked, kept live for the call);
        // destMax is what the destination allocation has left. Nothing on the
        // host is read or written. That the ranges stay live until the copy
        // ran on the device is the caller's contract (Driver::copy_async).
        let rc = unsafe {
            (self.api.memcpy_async)(
                handle(dst.raw()),
                room,
                handle(src.raw()),
                len,
                ACL_MEMCPY_DEVICE_TO_DEVICE,
                handle(s.raw()),
            )
        };
        self.check(Op::CopyAsync, "aclrtMemcpyAsync", rc)
    }

    fn memset_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        value: u8,
        len: usize,
    ) -> Result<(), DriverError> {
        let t = self.read();
        t.stream(Op::MemsetAsync, s.raw())?;
        let room = t.range(Op::MemsetAsync, dst.raw(), len)?;
        if len == 0 {
            return Ok(());
        }
        self.bind(Op::MemsetAsync)?;
        // SAFETY: a live stream and a range inside one live allocation, both
        // of this driver (checked, kept live for the call); maxCount is what
        // the allocation has left from `dst`.
        let rc = unsafe {
            (self.api.memset_async)(
                handle(dst.raw()),
                room,
                i32::from(value),
                len,
                handle(s.raw()),
            )
        };
        self.check(Op::MemsetAsync, "aclrtMemsetAsync", rc)
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        self.bind(Op::CreateStream)?;
        let mut s = null_mut();
        // SAFETY: `s` is a valid out-pointer.
        let rc = unsafe { (self.api.create_stream)(&raw mut s) };
        self.check(Op::CreateStream, "aclrtCreateStream", rc)?;
        self.write().insert_stream(addr(s));
        Ok(StreamId::from_raw(addr(s)))
    }

    fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        let mut t = self.write();
        t.check_destroy_stream(Op::DestroyStream, stream.raw())?;
        self.bind(Op::DestroyStream)?;
        // aclrtDestroyStream would wait for queued work; the trait refuses it
        // instead, and never syncs an error-state stream before destroying it.
        let destroy = match self.query_stream_raw(Op::DestroyStream, stream.raw()) {
            Ok(Completion::NotReady) => {
                return Err(DriverError::new(
                    Op::DestroyStream,
                    DriverErrorKind::StreamBusy { queued: 1 },
                ));
            }
            Ok(Completion::Complete) => (self.api.destroy_stream, "aclrtDestroyStream"),
            Err(_) => match self.api.destroy_stream_force {
                Some(f) => (f, "aclrtDestroyStreamForce"),
                None => (self.api.destroy_stream, "aclrtDestroyStream"),
            },
        };
        // SAFETY: a live stream of this driver that nobody waits on (checked
        // under the write lock, held until it is out of the table), so it is
        // destroyed once and never used afterwards.
        let rc = unsafe { (destroy.0)(handle(stream.raw())) };
        self.check(Op::DestroyStream, destroy.1, rc)?;
        t.remove_stream(stream.raw());
        Ok(())
    }

    fn query_stream(&self, stream: StreamId) -> Result<Completion, DriverError> {
        let t = self.read();
        t.stream(Op::QueryStream, stream.raw())?;
        self.bind(Op::QueryStream)?;
        self.query_stream_raw(Op::QueryStream, stream.raw())
    }

    fn sync_stream(&self, stream: StreamId, timeout: Duration) -> Result<(), DriverError> {
        let t = self.read();
        if timeout.is_zero() {
            t.stream(Op::SyncStream, stream.raw())?;
            self.bind(Op::SyncStream)?;
            return match self.query_stream_raw(Op::SyncStream, stream.raw())? {
                Completion::Complete => Ok(()),
                Completion::NotReady => Err(DriverError::new(
                    Op::SyncStream,
                    DriverErrorKind::Timeout { waited: timeout },
                )),
            };
        }
        // Blocking: mark the stream waited on (so it cannot be destroyed)
        // instead of holding the lock while the device works.
        let _waiting = t.wait_stream(Op::SyncStream, stream.raw())?;
        drop(t);
        self.bind(Op::SyncStream)?;
        // SAFETY: a live stream of this driver, kept live by the waiter mark;
        // the timeout is at least 1 ms (the runtime rejects 0).
        let rc = unsafe { (self.api.stream_sync_timeout)(handle(stream.raw()), millis(timeout)) };
        match rc {
            0 => Ok(()),
            ACL_ERROR_RT_STREAM_SYNC_TIMEOUT => Err(self.fail_as(
                Op::SyncStream,
                "aclrtSynchronizeStreamWithTimeout",
                rc,
                DriverErrorKind::Timeout { waited: timeout },
            )),
            _ => Err(self.fail(Op::SyncStream, "aclrtSynchronizeStreamWithTimeout", rc)),
        }
    }

    fn create_event(&self) -> Result<EventId, DriverError> {
        self.bind(Op::CreateEvent)?;
        let flags = ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE;
        let mut e = null_mut();
        if let Some(create_ex) = self.api.create_event_ex
            && self.ex_events.load(Ordering::Acquire)
        {
            // SAFETY: `e` is a valid out-pointer. SYNC: usable in
            // aclrtStreamWaitEvent; TIME_LINE: timestamps and elapsed time.
            let rc = unsafe { create_ex(&raw mut e, flags) };
            match rc {
                0 => {
                    self.write().insert_event(addr(e), false);
                    return Ok(EventId::from_raw(addr(e)));
                }
                // A runtime that exports the call but does not support it:
                // use the old one from now on.
                ACL_ERROR_RT_FEATURE_NOT_SUPPORT | 200_001 => {
                    self.ex_events.store(false, Ordering::Release);
                }
                _ => return Err(self.fail(Op::CreateEvent, "aclrtCreateEventExWithFlag", rc)),
            }
        }
        // SAFETY: as above.
        let rc = unsafe { (self.api.create_event)(&raw mut e, flags) };
        self.check(Op::CreateEvent, "aclrtCreateEventWithFlag", rc)?;
        self.write().insert_event(addr(e), true);
        Ok(EventId::from_raw(addr(e)))
    }

    fn destroy_event(&self, event: EventId) -> Result<(), DriverError> {
        let mut t = self.write();
        t.check_destroy_event(Op::DestroyEvent, event.raw())?;
        self.bind(Op::DestroyEvent)?;
        // SAFETY: a live event of this driver that nobody waits on (checked
        // under the write lock, held until it is out of the table).
        let rc = unsafe { (self.api.destroy_event)(handle(event.raw())) };
        self.check(Op::DestroyEvent, "aclrtDestroyEvent", rc)?;
        t.remove_event(event.raw());
        Ok(())
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), DriverError> {
        let t = self.read();
        let e = t.event(Op::RecordEvent, event.raw())?;
        t.stream(Op::RecordEvent, stream.raw())?;
        self.bind(Op::RecordEvent)?;
        // SAFETY: a live event and a live stream of this driver, kept live
        // by the read lock for the call.
        let rc = unsafe { (self.api.record_event)(handle(event.raw()), handle(stream.raw())) };
        self.check(Op::RecordEvent, "aclrtRecordEvent", rc)?;
        e.recorded.store(true, Ordering::Release);
        Ok(())
    }

    fn query_event(&self, event: EventId) -> Result<Completion, DriverError> {
        let t = self.read();
        if t.event(Op::QueryEvent, event.raw())?.unrecorded_legacy() {
            // The runtime would say NOT_READY for ever; the trait says a
            // never-recorded event is complete.
            return Ok(Completion::Complete);
        }
        self.bind(Op::QueryEvent)?;
        self.query_event_raw(Op::QueryEvent, event.raw())
    }

    fn sync_event(&self, event: EventId, timeout: Duration) -> Result<(), DriverError> {
        let t = self.read();
        let e = t.event(Op::SyncEvent, event.raw())?;
        if e.unrecorded_legacy() {
            return Ok(());
        }
        let not_yet =
            || DriverError::new(Op::SyncEvent, DriverErrorKind::Timeout { waited: timeout });
        // Blocking: mark the event waited on instead of holding the lock.
        let _waiting = Table::wait_event(e);
        drop(t);
        self.bind(Op::SyncEvent)?;
        match self.api.event_sync_timeout {
            _ if timeout.is_zero() => match self.query_event_raw(Op::SyncEvent, event.raw())? {
                Completion::Complete => Ok(()),
                Completion::NotReady => Err(not_yet()),
            },
            Some(sync) => {
                // SAFETY: a live event of this driver, kept live by the
                // waiter mark; the timeout is at least 1 ms.
                let rc = unsafe { sync(handle(event.raw()), millis(timeout)) };
                match rc {
                    0 => Ok(()),
                    ACL_ERROR_RT_EVENT_SYNC_TIMEOUT => Err(self.fail_as(
                        Op::SyncEvent,
                        "aclrtSynchronizeEventWithTimeout",
                        rc,
                        DriverErrorKind::Timeout { waited: timeout },
                    )),
                    _ => Err(self.fail(Op::SyncEvent, "aclrtSynchronizeEventWithTimeout", rc)),
                }
            }
            // Fallback without the timed sync: poll until the deadline (a
            // timeout too large for a deadline means no limit).
            None => {
                let deadline = Instant::now().checked_add(timeout);
                loop {
                    if self.query_event_raw(Op::SyncEvent, event.raw())? == Completion::Complete {
                        return Ok(());
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(not_yet());
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        }
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        let t = self.read();
        t.stream(Op::StreamWaitEvent, stream.raw())?;
        if t.event(Op::StreamWaitEvent, event.raw())?
            .unrecorded_legacy()
        {
            // Nothing captured, nothing to wait for. Asking the runtime would
            // queue a device wait that no record ever satisfies.
            return Ok(());
        }
        self.bind(Op::StreamWaitEvent)?;
        // SAFETY: a live stream and a live event of this driver, kept live
        // by the read lock for the call.
        let rc = unsafe { (self.api.stream_wait_event)(handle(stream.raw()), handle(event.raw())) };
        self.check(Op::StreamWaitEvent, "aclrtStreamWaitEvent", rc)
    }

    fn event_elapsed(&self, start: EventId, end: EventId) -> Result<Duration, DriverError> {
        let t = self.read();
        let recorded = t.event(Op::EventElapsed, start.raw())?.recorded()
            && t.event(Op::EventElapsed, end.raw())?.recorded();
        if !recorded {
            return Err(DriverError::new(
                Op::EventElapsed,
                DriverErrorKind::InvalidArgument {
                    what: "event was never recorded",
                },
            ));
        }
        self.bind(Op::EventElapsed)?;
        let mut ms = 0f32;
        // SAFETY: `ms` is a valid out-pointer; two live events of this
        // driver, kept live by the read lock.
        let rc = unsafe {
            (self.api.event_elapsed)(&raw mut ms, handle(start.raw()), handle(end.raw()))
        };
        self.check(Op::EventElapsed, "aclrtEventElapsedTime", rc)?;
        elapsed_of(ms).map_err(|what| {
            DriverError::new(Op::EventElapsed, DriverErrorKind::InvalidResult { what })
        })
    }

    fn event_timestamp(&self, event: EventId) -> Result<u64, DriverError> {
        let t = self.read();
        let e = t.event(Op::EventTimestamp, event.raw())?;
        let Some(f) = self.api.event_timestamp else {
            return Err(DriverError::new(
                Op::EventTimestamp,
                DriverErrorKind::Unsupported,
            ));
        };
        if !e.recorded() {
            return Err(DriverError::new(
                Op::EventTimestamp,
                DriverErrorKind::InvalidArgument {
                    what: "event was never recorded",
                },
            ));
        }
        self.bind(Op::EventTimestamp)?;
        let mut us = 0u64;
        // SAFETY: `us` is a valid out-pointer; a live event of this driver.
        let rc = unsafe { f(handle(event.raw()), &raw mut us) };
        self.check(Op::EventTimestamp, "aclrtEventGetTimestamp", rc)?;
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
        args: &[u8],
    ) -> Result<(), DriverError> {
        let op = Op::LaunchAicore;
        let t = self.read();
        t.stream(op, s.raw())?;
        // Only an upload this driver registered and still holds launches:
        // a forged handle, another driver's, or one whose registration was
        // released and replaced never reaches C.
        t.code(op, code.raw(), code.upload())?;
        self.block_dim_ok(op, block_dim)?;
        let mut blob = t.run_args(op, args, Some(block_dim))?;
        self.bind(op)?;
        let mut ex = RtArgsEx::zeroed();
        ex.args = blob.as_mut_ptr().cast();
        ex.args_size = RunArgs::SIZE_U32;
        let cfg = RtTaskCfgInfo {
            schem_mode: RT_SCHEM_MODE_BATCH,
            ..RtTaskCfgInfo::default()
        };
        // SAFETY: `ex` is fully initialised (no padding: see ffi) and points
        // at `blob` (72 bytes, alive for the call; the runtime copies it to
        // the device because isNoNeedH2DCopy = 0, and every device range in
        // it lies in a live allocation of this driver); `cfg` is alive for
        // the call; smDesc may be NULL; the code handle is a live
        // registration and the stream a live stream of this driver, kept
        // live by the read lock.
        let rc = unsafe {
            (self.api.kernel_launch_v2)(
                handle(code.raw()),
                0,
                block_dim,
                &raw mut ex,
                null_mut(),
                handle(s.raw()),
                &raw const cfg,
            )
        };
        self.check(op, "rtKernelLaunchWithHandleV2", rc)
    }

    fn launch_aicpu(&self, s: StreamId, args: &[u8]) -> Result<(), DriverError> {
        let op = Op::LaunchAicpu;
        let t = self.read();
        t.stream(op, s.raw())?;
        let mut blob = t.run_args(op, args, None)?;
        self.bind(op)?;
        let mut cpu = RtCpuKernelArgs::zeroed();
        cpu.base_args.args = blob.as_mut_ptr().cast();
        cpu.base_args.args_size = RunArgs::SIZE_U32;
        let mut attr = RtLaunchKernelAttr::default();
        let cfg = RtKernelLaunchCfg {
            attrs: &raw mut attr,
            num_attrs: 0,
        };
        // SAFETY: `cpu` is fully initialised (no padding: see ffi) and
        // `cpu.base_args.args` points at `blob` (alive for the call; copied
        // by the runtime; its device ranges checked); `cfg` and `attr` are
        // alive for the call; the function handle came from
        // rtsFuncGetByName; the stream is a live stream of this driver.
        let rc = unsafe {
            (self.api.launch_cpu_kernel)(
                handle(self.aicpu_func),
                self.aicpu_threads,
                handle(s.raw()),
                &raw const cfg,
                &raw mut cpu,
            )
        };
        self.check(op, "rtsLaunchCpuKernel", rc)
    }
}
