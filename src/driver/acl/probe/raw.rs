//! The runtime calls the check makes, on the driver's symbol table (`Api`),
//! each one `unsafe` call with its contract, returning the runtime's own
//! code: the check reports codes, so nothing here maps them. Streams,
//! events and allocations are guards that give their handle back to the
//! runtime when dropped (never a panic; a failure there is ignored, as the
//! check is over); a held stream (`Held`: a wait on an old-mode event
//! nobody recorded, `queue.rs` says why that holds it) is released when
//! dropped.

use std::ffi::c_void;
use std::ptr::null_mut;

use super::super::ffi::{
    ACL_EVENT_SYNC, ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, AclrtEvent, AclrtStream,
};
use super::super::load::Api;
use super::ProbeError;

/// A return code other than 0, with the API that returned it.
pub(super) type Rc<T> = Result<T, ProbeError>;

/// `code` from `api` as a result.
pub(super) fn rc(api: &'static str, code: i32) -> Rc<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(ProbeError::Code { api, code })
    }
}

/// A stream or event handle the runtime returned, as a plain value that
/// may cross to a helper thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Handle(*mut c_void);

// SAFETY: an ACL stream or event handle is an opaque token the runtime
// accepts from any thread bound to its device ("多个线程 … 共享同一个默认
// Context", CANN's aclrtSetDevice reference); the check dereferences none,
// and every thread it hands one to binds the device first.
unsafe impl Send for Handle {}
// SAFETY: as above; the value is only copied.
unsafe impl Sync for Handle {}

impl Handle {
    /// No handle (what a stream guard that was given up answers).
    pub(super) const NULL: Handle = Handle(null_mut());

    pub(super) fn raw(self) -> *mut c_void {
        self.0
    }
}

/// A stream this check created; destroyed when dropped.
pub(super) struct Stream<'a> {
    api: &'a Api,
    pub(super) h: Handle,
}

/// An event this check created; destroyed when dropped.
pub(super) struct Event<'a> {
    api: &'a Api,
    pub(super) h: Handle,
}

/// A device allocation this check made; freed when dropped.
pub(super) struct Mem<'a> {
    api: &'a Api,
    ptr: *mut c_void,
    pub(super) len: usize,
}

/// `aclrtCreateStream`.
pub(super) fn stream(api: &Api) -> Rc<Stream<'_>> {
    let mut s: AclrtStream = null_mut();
    // SAFETY: a valid out-pointer; the thread is bound to the device.
    rc("aclrtCreateStream", unsafe {
        (api.create_stream)(&raw mut s)
    })?;
    if s.is_null() {
        return Err(ProbeError::Null("aclrtCreateStream"));
    }
    Ok(Stream { api, h: Handle(s) })
}

impl Stream<'_> {
    /// Leaves the stream to the runtime (a stream that may still hold a
    /// wait nothing satisfies: destroying it would wait for that).
    pub(super) fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        // SAFETY: a stream this check created and has not destroyed; the
        // check synchronized it (or it is empty) before dropping it.
        let _ = unsafe { (self.api.destroy_stream)(self.h.0) };
    }
}

/// Holds `s`: a wait on a fresh old-mode event nobody recorded.
pub(super) fn hold<'a>(api: &'a Api, s: &Stream<'_>) -> Result<Event<'a>, ProbeError> {
    let e = event(api, ACL_EVENT_SYNC, false)?;
    wait(api, s.h, e.h)?;
    Ok(e)
}

/// A held stream that is released when dropped if it was not before; one
/// that does not drain within 5 s of its release is left to the runtime
/// (destroying it would wait for the wait): never a hang, whatever an
/// early return skipped.
pub(super) struct Held<'a> {
    api: &'a Api,
    stream: Option<Stream<'a>>,
    other: Stream<'a>,
    gate: Event<'a>,
    released: Option<i32>,
}

impl<'a> Held<'a> {
    pub(super) fn new(api: &'a Api) -> Result<Self, ProbeError> {
        let held = stream(api)?;
        let other = stream(api)?;
        let gate = hold(api, &held)?;
        Ok(Held {
            api,
            stream: Some(held),
            other,
            gate,
            released: None,
        })
    }

    /// The held stream's handle.
    pub(super) fn h(&self) -> Handle {
        self.stream.as_ref().map_or(Handle::NULL, |s| s.h)
    }

    /// Records the gate on the other stream and synchronizes the held one
    /// (5 s): its code.
    pub(super) fn release(&mut self) -> Result<i32, ProbeError> {
        record(self.api, self.gate.h, self.other.h)?;
        let code = sync_stream(self.api, self.h(), 5000);
        self.released = Some(code);
        Ok(code)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let drained = match self.released {
            Some(code) => code == 0,
            None => self.release().is_ok_and(|c| c == 0),
        };
        if let (false, Some(s)) = (drained, self.stream.take()) {
            s.forget();
        }
    }
}

/// `aclrtCreateEventExWithFlag` (`ex`) or `aclrtCreateEventWithFlag`.
pub(super) fn event(api: &Api, flags: u32, ex: bool) -> Rc<Event<'_>> {
    let (f, name) = match (ex, api.create_event_ex) {
        (true, Some(f)) => (f, "aclrtCreateEventExWithFlag"),
        (true, None) => return Err(ProbeError::Missing("aclrtCreateEventExWithFlag")),
        (false, _) => (api.create_event, "aclrtCreateEventWithFlag"),
    };
    let mut e: AclrtEvent = null_mut();
    // SAFETY: a valid out-pointer and a flag word; the thread is bound.
    rc(name, unsafe { f(&raw mut e, flags) })?;
    if e.is_null() {
        return Err(ProbeError::Null(name));
    }
    Ok(Event { api, h: Handle(e) })
}

impl Drop for Event<'_> {
    fn drop(&mut self) {
        // SAFETY: an event this check created and has not destroyed; the
        // runtime allows destroying one before its work completed.
        let _ = unsafe { (self.api.destroy_event)(self.h.0) };
    }
}

/// `aclrtMalloc(len)`.
pub(super) fn malloc(api: &Api, len: usize) -> Rc<Mem<'_>> {
    let mut p: *mut c_void = null_mut();
    // SAFETY: a valid out-pointer, a nonzero size and a defined policy.
    rc("aclrtMalloc", unsafe {
        (api.malloc)(&raw mut p, len, ACL_MEM_MALLOC_HUGE_FIRST)
    })?;
    if p.is_null() {
        return Err(ProbeError::Null("aclrtMalloc"));
    }
    Ok(Mem { api, ptr: p, len })
}

impl Mem<'_> {
    /// The device address.
    pub(super) fn addr(&self) -> u64 {
        self.ptr.addr() as u64
    }

    /// The device address as a handle for a helper thread.
    pub(super) fn handle(&self) -> Handle {
        Handle(self.ptr)
    }
}

impl Drop for Mem<'_> {
    fn drop(&mut self) {
        // SAFETY: an allocation this check made and has not freed; every
        // stream that used it was synchronized before the drop.
        let _ = unsafe { (self.api.free)(self.ptr) };
    }
}

/// `aclrtRecordEvent(e, s)`.
pub(super) fn record(api: &Api, e: Handle, s: Handle) -> Rc<()> {
    // SAFETY: live handles this check created, of the bound device.
    rc("aclrtRecordEvent", unsafe { (api.record_event)(e.0, s.0) })
}

/// `aclrtStreamWaitEvent(s, e)`.
pub(super) fn wait(api: &Api, s: Handle, e: Handle) -> Rc<()> {
    // SAFETY: live handles this check created, of the bound device.
    rc("aclrtStreamWaitEvent", unsafe {
        (api.stream_wait_event)(s.0, e.0)
    })
}

/// `aclrtQueryEventStatus`: the raw status (0 not ready, 1 complete).
pub(super) fn query_event(api: &Api, e: Handle) -> Rc<u32> {
    let mut st = u32::MAX;
    // SAFETY: a live event and a valid out-pointer.
    rc("aclrtQueryEventStatus", unsafe {
        (api.query_event_status)(e.0, &raw mut st)
    })?;
    Ok(st)
}

/// `aclrtStreamQuery`: the raw status (0 complete, 1 not ready).
pub(super) fn query_stream(api: &Api, s: Handle) -> Rc<u32> {
    let mut st = u32::MAX;
    // SAFETY: a live stream and a valid out-pointer.
    rc("aclrtStreamQuery", unsafe {
        (api.stream_query)(s.0, &raw mut st)
    })?;
    Ok(st)
}

/// `aclrtSynchronizeStreamWithTimeout(s, ms)`: the code.
pub(super) fn sync_stream(api: &Api, s: Handle, ms: i32) -> i32 {
    // SAFETY: a live stream and a plain timeout.
    unsafe { (api.stream_sync_timeout)(s.0, ms) }
}

/// `aclrtSynchronizeEventWithTimeout(e, ms)`: the code; `None` without
/// the symbol.
pub(super) fn sync_event(api: &Api, e: Handle, ms: i32) -> Option<i32> {
    let f = api.event_sync_timeout?;
    // SAFETY: a live event and a plain timeout.
    Some(unsafe { f(e.0, ms) })
}

/// `aclrtEventElapsedTime(a, b)` in ms.
pub(super) fn elapsed(api: &Api, a: Handle, b: Handle) -> Rc<f32> {
    let mut ms = f32::NAN;
    // SAFETY: two live events and a valid out-pointer.
    rc("aclrtEventElapsedTime", unsafe {
        (api.event_elapsed)(&raw mut ms, a.0, b.0)
    })?;
    Ok(ms)
}

/// `aclrtMemsetAsync` of `len` bytes at `off` in `m`, on `s`.
pub(super) fn memset_async(
    api: &Api,
    m: &Mem<'_>,
    off: usize,
    len: usize,
    v: u8,
    s: Handle,
) -> Rc<()> {
    if off.checked_add(len).is_none_or(|end| end > m.len) {
        return Err(ProbeError::Range);
    }
    // SAFETY: `[off, off + len)` lies inside the live allocation `m`
    // (checked above), `destMax` is what is left of it, the stream is live.
    rc("aclrtMemsetAsync", unsafe {
        (api.memset_async)(m.ptr.byte_add(off), m.len - off, i32::from(v), len, s.0)
    })
}

/// `aclrtMemcpyAsync` device to device of `len` bytes from `src` to `dst`
/// on `s`, by handles only (a helper thread's): the code.
pub(super) fn copy_async_at(api: &Api, dst: Handle, src: Handle, len: usize, s: Handle) -> i32 {
    // SAFETY: `dst` and `src` are live allocations of at least `len` bytes
    // each that the caller keeps alive until the helper thread finished and
    // the stream was synchronized (the capacity check frees them only
    // then, or never); the host never dereferences them.
    unsafe { (api.memcpy_async)(dst.0, len, src.0, len, ACL_MEMCPY_DEVICE_TO_DEVICE, s.0) }
}

/// `aclrtMemset` (synchronous) of all of `m`.
pub(super) fn memset(api: &Api, m: &Mem<'_>, v: u8) -> Rc<()> {
    // SAFETY: the whole live allocation, its true size as `maxCount`.
    rc("aclrtMemset", unsafe {
        (api.memset)(m.ptr, m.len, i32::from(v), m.len)
    })
}

/// `aclrtMemcpyAsync` device to device of all of `src` into `dst`, on `s`.
pub(super) fn copy_async(api: &Api, dst: &Mem<'_>, src: &Mem<'_>, s: Handle) -> Rc<()> {
    let n = src.len.min(dst.len);
    // SAFETY: both ranges lie inside live allocations, `destMax` is the
    // destination's size; the stream is live.
    rc("aclrtMemcpyAsync", unsafe {
        (api.memcpy_async)(
            dst.ptr,
            dst.len,
            src.ptr,
            n,
            ACL_MEMCPY_DEVICE_TO_DEVICE,
            s.0,
        )
    })
}

/// `aclrtMemcpy` device to host of all of `m`.
pub(super) fn read(api: &Api, m: &Mem<'_>) -> Rc<Vec<u8>> {
    let mut out = vec![0u8; m.len];
    // SAFETY: `out` is a writable host buffer of `m.len` bytes and `m` a
    // live allocation of as many.
    rc("aclrtMemcpy", unsafe {
        (api.memcpy)(
            out.as_mut_ptr().cast(),
            out.len(),
            m.ptr,
            m.len,
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    })?;
    Ok(out)
}

/// `aclrtMemcpy` host to device of `data` into the start of `m`.
pub(super) fn write(api: &Api, m: &Mem<'_>, data: &[u8]) -> Rc<()> {
    if data.len() > m.len {
        return Err(ProbeError::Range);
    }
    // SAFETY: `data` is a readable host buffer of `data.len()` bytes, no
    // more than the live allocation `m` holds (checked above), whose size
    // is `destMax`.
    rc("aclrtMemcpy", unsafe {
        (api.memcpy)(
            m.ptr,
            m.len,
            data.as_ptr().cast(),
            data.len(),
            ACL_MEMCPY_HOST_TO_DEVICE,
        )
    })
}

/// `aclrtSetDevice(device)` on the calling thread.
pub(super) fn set_device(api: &Api, device: i32) -> Rc<()> {
    // SAFETY: a plain integer; it takes one device reference, which the
    // caller gives back with `reset_device`.
    rc("aclrtSetDevice", unsafe { (api.set_device)(device) })
}

/// `aclrtResetDevice(device)`: gives back one reference of `set_device`.
pub(super) fn reset_device(api: &Api, device: i32) {
    // SAFETY: the caller took the reference it gives back with
    // `set_device`, and uses no handle of the device after the last one.
    let _ = unsafe { (api.reset_device)(device) };
}
