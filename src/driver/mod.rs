//! The driver layer: the minimal stream / event / memory / code-registration /
//! kernel-launch surface the claim contract needs, and its implementations.
//!
//! - [`Driver`] — the trait, with handle newtypes and [`DriverError`].
//! - [`sim`] — an in-process simulated NPU, the embedded default.
//! - [`instant`] — a driver that completes every submission at once, for
//!   timing the contract's own cost.
//! - `acl` — the real Ascend runtime, loaded at run time with `libloading`
//!   (the `acl` feature, on by default).
//! - [`abi`] — the device-side argument block, records and code format.
//!
//! No typestates live here: a driver is a thin, honest wrapper over a device,
//! and every rule about *when* a call is safe belongs to [`crate::contract`].
//!
//! # Why a generic trait and not a trait object
//!
//! [`Driver`] is used as a type parameter (`Device<D: Driver>`), so every call
//! on the launch and fence paths is statically dispatched and inlinable —
//! the contract's per-run host cost is a stated goal. The trait is
//! nevertheless object safe (no generic methods, no `Self` returns), so a
//! caller that wants `Box<dyn Driver>` can have it; `Box<dyn Driver>` itself
//! implements `Driver`.
//!
//! # Handles
//!
//! [`DevPtr`], [`StreamId`], [`EventId`] and [`CodeHandle`] are plain values,
//! and anyone can make one (`from_raw`, for driver implementers and tests),
//! so **no driver may trust a handle**: every [`Driver`] method validates each
//! handle it receives against what *this* driver created and has not
//! destroyed, and refuses a forged, destroyed or foreign one with
//! [`DriverErrorKind::BadHandle`] or [`DriverErrorKind::BadAddress`] — never by passing it
//! to a vendor runtime. That is what makes calling a driver from safe code
//! sound.
//!
//! # Threads
//!
//! Methods take `&self` and drivers are `Send + Sync`: a run may be launched
//! on one thread and fenced on another. A driver whose runtime binds state to
//! the calling thread (ACL's per-thread device context) must bind it itself.

pub mod abi;
#[cfg(feature = "acl")]
pub mod acl;
mod error;
mod handles;
mod info;
pub mod instant;
mod notify;
pub mod sim;
pub(crate) mod wake;

use std::task::Waker;
use std::time::Duration;

pub use error::{
    CaptureRule, DriverError, DriverErrorKind, FaultKind, HandleKind, Native, Op, Resource,
    ThreadTrouble,
};
pub use handles::{CodeHandle, DevPtr, EventId, GraphId, StreamId};

/// A driver whose type is erased: any [`Driver`] boxed (`Box`, like `Arc`
/// and `&`, implements `Driver` by forwarding). A device over it —
/// [`AnySharedDevice`](crate::contract::AnySharedDevice),
/// `Device<AnyDriver, N>` — has one type whichever driver it runs on, so
/// a function that takes it works with the simulator and the `acl`
/// driver unchanged. What the erasure costs: one indirect call per
/// runtime call (docs/performance.md measures it per run).
///
/// ```
/// use runclaim::driver::{AnyDriver, Driver};
/// use runclaim::driver::instant::InstantDriver;
/// use runclaim::sim::SimDriver;
///
/// let drivers: Vec<AnyDriver> = vec![
///     Box::new(SimDriver::stepped(Default::default())),
///     Box::new(InstantDriver::new()),
/// ];
/// for d in &drivers {
///     let p = d.alloc(4)?;
///     d.free(p)?;
/// }
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
pub type AnyDriver = Box<dyn Driver>;
pub use info::{Capabilities, Completion, DriverInfo, Registration, STREAM_CAPACITY};
pub use notify::{Notice, wake_after};

/// The device surface the claim contract is written against.
///
/// # Errors
///
/// Every method returns a [`DriverError`] naming its [`Op`] and an
/// [`DriverErrorKind`]; none panics on bad input. Each method's contract below says
/// which kinds matter to it (a `Timeout` that cancels nothing, a sticky
/// `KernelFault`, a `StreamBusy` refusal).
///
/// "Queued" below means *accepted onto a stream*: a queued task runs after
/// every task queued before it on the same stream and may run at the same
/// time as tasks on other streams.
///
/// ```
/// use runclaim::driver::{Driver, DriverError};
///
/// /// Works on any driver: the simulator, the instant driver, the real runtime.
/// fn roundtrip(d: &impl Driver, data: &[u8]) -> Result<Vec<u8>, DriverError> {
///     let p = d.alloc(data.len())?;
///     d.copy_to_device(p, data)?;
///     let mut back = vec![0; data.len()];
///     d.copy_from_device(&mut back, p)?;
///     d.free(p)?;
///     Ok(back)
/// }
/// let sim = runclaim::sim::SimDriver::stepped(Default::default());
/// assert_eq!(roundtrip(&sim, b"abc")?, b"abc");
/// assert_eq!(roundtrip(&runclaim::driver::instant::InstantDriver::new(), b"xy")?, b"xy");
/// # Ok::<(), DriverError>(())
/// ```
#[allow(
    clippy::missing_errors_doc,
    reason = "the errors of every method are documented once, on the trait"
)]
pub trait Driver: Send + Sync {
    /// Static facts about the device.
    fn info(&self) -> DriverInfo;

    // ----- memory -------------------------------------------------------

    /// Allocates `bytes` of device memory (contents unspecified).
    ///
    /// *Before*: `bytes > 0`. *After*: the returned range is valid until
    /// [`free`](Driver::free) and overlaps no other live allocation.
    fn alloc(&self, bytes: usize) -> Result<DevPtr, DriverError>;

    /// Frees an allocation returned by [`alloc`](Driver::alloc).
    ///
    /// *Before*: no queued task touches it (the driver cannot check this).
    /// *After*: every access to it is a `BadAddress` error.
    fn free(&self, ptr: DevPtr) -> Result<(), DriverError>;

    /// Copies host bytes to device memory, synchronously.
    ///
    /// *Before*: `[dst, dst + src.len())` lies in one live allocation.
    /// *After*: the bytes are on the device; no queued task is waited for.
    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError>;

    /// Copies device memory to host bytes, synchronously.
    ///
    /// *Before*: `[src, src + dst.len())` lies in one live allocation.
    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError>;

    /// Fills device memory with `value`, synchronously.
    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError>;

    /// Queues a device-to-device copy on `stream`.
    ///
    /// *After*: the copy happens in stream order; both ranges must stay live
    /// until it has run. The contract queues it only inside a capture
    /// (a captured run's records' copy); the default is
    /// [`DriverErrorKind::Unsupported`].
    fn copy_async(
        &self,
        stream: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        let _ = (stream, dst, src, len);
        Err(DriverError::new(
            Op::CopyAsync,
            DriverErrorKind::Unsupported,
        ))
    }

    /// Queues a fill of device memory on `stream`. The contract does not
    /// use it; the default is [`DriverErrorKind::Unsupported`].
    fn memset_async(
        &self,
        stream: StreamId,
        dst: DevPtr,
        value: u8,
        len: usize,
    ) -> Result<(), DriverError> {
        let _ = (stream, dst, value, len);
        Err(DriverError::new(
            Op::MemsetAsync,
            DriverErrorKind::Unsupported,
        ))
    }

    // ----- streams ------------------------------------------------------

    /// Creates a stream. An AICore stream executes the code that was resident
    /// when it was created (see [`register_code`](Driver::register_code)).
    fn create_stream(&self) -> Result<StreamId, DriverError>;

    /// Destroys a stream.
    ///
    /// *Before*: the stream has no queued work (synchronize first), or it is
    /// in an error state. A stream with queued work is refused with
    /// [`DriverErrorKind::StreamBusy`] and stays usable.
    fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError>;

    /// Reports whether every task queued on `stream` has finished.
    ///
    /// *After*: `Err` with [`DriverErrorKind::KernelFault`] once a task on the
    /// stream faulted (sticky). The default asks
    /// [`sync_stream`](Driver::sync_stream) with the shortest wait (1 µs)
    /// and maps its timeout to [`Completion::NotReady`].
    fn query_stream(&self, stream: StreamId) -> Result<Completion, DriverError> {
        match self.sync_stream(stream, Duration::from_micros(1)) {
            Ok(()) => Ok(Completion::Complete),
            Err(e) if e.is_timeout() => Ok(Completion::NotReady),
            Err(e) => Err(e),
        }
    }

    /// Waits until every task queued on `stream` has finished, at most
    /// `timeout`.
    ///
    /// *After*: `Ok` = drained; [`DriverErrorKind::Timeout`] = still busy (nothing
    /// was cancelled); a fault error = the stream stopped on a fault and runs
    /// nothing more.
    fn sync_stream(&self, stream: StreamId, timeout: Duration) -> Result<(), DriverError>;

    // ----- events -------------------------------------------------------

    /// Creates an event.
    ///
    /// *After*: until its first [`record_event`](Driver::record_event) the
    /// event has captured nothing — a **never-recorded event is complete**:
    /// [`query_event`](Driver::query_event) reports
    /// [`Completion::Complete`], [`sync_event`](Driver::sync_event) returns
    /// `Ok` at once, and [`stream_wait_event`](Driver::stream_wait_event)
    /// makes the stream wait for nothing. It has no record to time: the
    /// simulator and the `acl` driver refuse
    /// [`event_elapsed`](Driver::event_elapsed) /
    /// [`event_timestamp`](Driver::event_timestamp) on it with
    /// [`DriverErrorKind::InvalidArgument`]. A driver whose runtime reports such an
    /// event *not ready* (ACL's `aclrtCreateEventWithFlag` events, whose
    /// stream waits would never be satisfied) keeps a "recorded" flag per
    /// event and answers for it itself.
    fn create_event(&self) -> Result<EventId, DriverError>;

    /// Destroys an event. Allowed while a record of it is still queued.
    fn destroy_event(&self, event: EventId) -> Result<(), DriverError>;

    /// Queues a record of `event` on `stream`: the event completes when the
    /// stream reaches it, i.e. when everything queued before it finished.
    /// Re-recording replaces what the event captures.
    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), DriverError>;

    /// Reports whether the event's last record has completed. Note the
    /// native ACL enum for this is the reverse of the stream-status enum; the
    /// driver maps both to [`Completion`].
    fn query_event(&self, event: EventId) -> Result<Completion, DriverError>;

    /// Waits for the event's last record to complete, at most `timeout`.
    ///
    /// *After*: as [`sync_stream`](Driver::sync_stream), for the work the
    /// event captured only.
    fn sync_event(&self, event: EventId, timeout: Duration) -> Result<(), DriverError>;

    /// Makes later work queued on `stream` wait for the work `event` has
    /// captured (asynchronous; the host does not wait).
    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), DriverError>;

    /// Device time between two completed records. The default differences
    /// [`event_timestamp`](Driver::event_timestamp)s (saturating at zero).
    fn event_elapsed(&self, start: EventId, end: EventId) -> Result<Duration, DriverError> {
        let a = self.event_timestamp(start)?;
        let b = self.event_timestamp(end)?;
        Ok(Duration::from_nanos(abi::ticks_to_nanos(
            b.saturating_sub(a),
        )))
    }

    /// Device timestamp of a completed record, in device ticks
    /// ([`abi::TICKS_PER_SEC`]). The default is [`DriverErrorKind::Unsupported`]
    /// (the contract does not need it; measurements use the device wall).
    fn event_timestamp(&self, event: EventId) -> Result<u64, DriverError> {
        let _ = event;
        Err(DriverError::new(
            Op::EventTimestamp,
            DriverErrorKind::Unsupported,
        ))
    }

    // ----- code and kernels ---------------------------------------------

    /// Registers AICore code, uploading it unless identical code is already
    /// resident, and **pins** the upload: one pin per successful call,
    /// released by [`release_code`](Driver::release_code).
    ///
    /// *After*: [`Registration::published`] says whether new code was
    /// uploaded; [`Registration::handle`] names the upload (see
    /// [`CodeHandle`]). After a publication, an AICore stream created
    /// *before* it may execute stale instructions at any resident address,
    /// even for code whose bytes are unchanged; only a stream created
    /// afterwards is clean.
    ///
    /// **Residency rule for implementers.** A pinned upload is never
    /// evicted or replaced, whoever else registers code on the same NPU (a
    /// clone of the driver, another driver instance on the same device).
    /// When new code would only fit by evicting pinned code, registration
    /// fails with [`DriverErrorKind::CodeMemoryFull`], naming the capacity.
    /// Unpinned code may be evicted at any time; an evicted upload's handle
    /// is refused by [`launch_aicore`](Driver::launch_aicore).
    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError>;

    /// Releases one pin of an upload taken by
    /// [`register_code`](Driver::register_code). Once no pin is left, the
    /// code may be evicted by a later registration (it stays launchable
    /// until then).
    ///
    /// The default does nothing: right for a driver that never evicts
    /// registered code.
    fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
        let _ = code;
        Ok(())
    }

    /// The [`upload`](CodeHandle::upload) stamp of the latest code upload on
    /// this NPU that the driver can see (0 before any), including uploads
    /// by other instances sharing the device. A stream created when this
    /// read `e` may hold stale instructions for any upload stamped above `e`.
    fn code_epoch(&self) -> u64;

    /// The driver's clock: a monotonic time since an arbitrary origin, on
    /// which the contract measures how long it waited for the device.
    ///
    /// "The device overran" is decided on this clock, never on how long the
    /// host thread happened to be away. The default is the host's monotonic
    /// clock — right for a real device, which runs while the host sleeps. A
    /// simulator whose time is virtual returns its virtual time, so a
    /// preempted host never makes a healthy simulated device look hung.
    /// A wait that timed out after `t` should have moved the clock by about
    /// `t`; the contract also bounds every wait by the time it asked the
    /// driver for, so a clock that stalls can delay a verdict but never
    /// hang a fence or a `Drop`.
    fn clock(&self) -> Duration {
        host_clock()
    }

    /// Queues the AICore kernel of a run: `block_dim` workers executing
    /// `code` with the argument block `args` (its bytes copied at launch).
    ///
    /// *Before*: `1 <= block_dim <= info().max_block_dim`. `args` is any
    /// block a [`abi::BlockWriter`] wrote — its layout is the kernel's
    /// (an [`abi::KernelAbi`]'s), not the driver's. A driver checks every
    /// device range the block names ([`abi::LaunchArgs::fields`]: each lies
    /// in one live allocation, and the block still holds it where it was
    /// recorded, [`abi::LaunchArgs::consistent`]) before the kernel can
    /// touch it, and refuses the launch otherwise. A driver that models the
    /// device (the simulator) also refuses a block its device cannot
    /// decode.
    fn launch_aicore(
        &self,
        stream: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: abi::LaunchArgs<'_>,
    ) -> Result<(), DriverError>;

    /// Queues the AICPU Run kernel of a run with the argument block `args`
    /// (checked as for [`launch_aicore`](Driver::launch_aicore)). It
    /// hand-shakes with the AICore workers of the same run and writes the
    /// run's timing and status records (runclaim's own protocol: see
    /// [`abi`]).
    fn launch_aicpu(&self, stream: StreamId, args: abi::LaunchArgs<'_>) -> Result<(), DriverError>;

    /// Checks an AICPU block as [`launch_aicpu`](Driver::launch_aicpu)
    /// would, without launching it (no state changes, no fault
    /// injection). The contract calls it before it submits a run's AICore
    /// kernel when the run's AICPU block differs from its AICore block, so
    /// that a block the AICPU launch would refuse is refused while nothing
    /// of the run is queued (instead of a partial launch). The launch still
    /// checks everything itself. Default: `Ok(())` (the launch's own check
    /// then is the only one).
    fn check_aicpu_args(&self, args: abi::LaunchArgs<'_>) -> Result<(), DriverError> {
        let _ = args;
        Ok(())
    }

    // ----- completion notifications (see `Notice`) ----------------------

    /// Queues on `stream`, behind everything queued on it so far, the
    /// host notification of `event` — which the caller has just recorded
    /// on the same stream — where the driver learns of completion through
    /// a stream task. The contract calls it at every launch, right after
    /// the run's fence record on the AICPU stream (a stream that has
    /// waited for both of the run's streams), so that
    /// [`notify_event`](Driver::notify_event) can wake on completion.
    ///
    /// *After*: `Ok` — a notification task may have been queued: it counts
    /// against the stream's capacity like any task (the contract's
    /// admission rule leaves room for it). `Err` — nothing was queued; the
    /// run is unaffected, and `notify_event` on `event` answers
    /// [`Notice::Timer`] until its next record. The default queues nothing
    /// and returns `Ok` (right for a driver that sees completion without a
    /// task, like the simulator).
    fn queue_notify(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        let _ = (stream, event);
        Ok(())
    }

    /// Arranges for `waker` to be woken once `event`'s last record has
    /// completed or its stream has faulted, or once `within` has passed on
    /// the driver's [`clock`](Driver::clock), whichever comes first, and
    /// says which of these the driver can see ([`Notice`]). It never
    /// blocks (it is called from inside `Future::poll`).
    ///
    /// *After*: [`Notice::Ready`] — the event is already complete (or its
    /// stream faulted): nothing is armed. [`Notice::Completion`] — armed
    /// for completion, fault and time. [`Notice::Timer`] — armed for time
    /// only. A wake is a hint: the woken task queries the event again, so
    /// an early or extra wake is harmless and a missed one is a bug. A
    /// driver that answers `Completion` must wake a waker armed *after* the
    /// event completed too (or answer `Ready`). Every call may arm another
    /// wake: a driver drops a waker once it has woken it, and bounds what
    /// it keeps for an event. **A driver never wakes a waker on the thread
    /// of one of its own calls** (this one or any other): the caller may
    /// hold locks of its own that the woken task needs — the contract calls
    /// its driver under its state lock. It wakes from a thread of its own,
    /// or hands the waker to [`wake_after`]`(Duration::ZERO)`.
    ///
    /// The default is [`wake_after`]`(within)` on the host's clock, and
    /// [`Notice::Timer`]: it cannot see completion (a driver need not be
    /// `'static`, so no helper thread may call it), and it keeps today's
    /// drivers working — their futures complete when they look again.
    fn notify_event(
        &self,
        event: EventId,
        within: Duration,
        waker: &Waker,
    ) -> Result<Notice, DriverError> {
        let _ = event;
        wake_after(within, waker);
        Ok(Notice::Timer)
    }

    // ----- stream capture (optional: each default refuses) ---------------

    /// Starts capturing `stream` (`aclmdlRICaptureBegin`, thread-local
    /// mode): from now on what is queued on it — and on every stream that
    /// joins it by waiting for an event recorded in the capture — is
    /// recorded into the capture, not run, until
    /// [`capture_end`](Driver::capture_end) on `stream`.
    ///
    /// *While capturing*, a synchronous call that names a capturing stream
    /// or an event recorded in the capture (a sync, a query) is refused
    /// with [`CaptureRule::SyncWhileCapturing`], and a captured stream may
    /// wait only for events recorded inside the capture
    /// ([`CaptureRule::OutsideDependency`]).
    ///
    /// The default refuses with [`DriverErrorKind::Unsupported`]: a driver
    /// without capture needs nothing more, and runclaim's replay refuses
    /// before any runtime call ([`Capabilities::CAPTURE`] unset). A driver
    /// that captures also captures [`copy_async`](Driver::copy_async): a
    /// captured run's graph copies its records with it.
    fn capture_begin(&self, stream: StreamId) -> Result<(), DriverError> {
        let _ = stream;
        Err(DriverError::new(
            Op::CaptureBegin,
            DriverErrorKind::Unsupported,
        ))
    }

    /// Ends the capture begun on `stream` (`aclmdlRICaptureEnd`) into a
    /// graph. Every stream that joined must have been joined back (its last
    /// task followed by a record that `stream` waited for), else
    /// [`CaptureRule::Unjoined`]; `stream` must be the capture's origin,
    /// else [`CaptureRule::NotCapturing`] — and the capture stays open,
    /// to end on its origin. Any other refusal ends it: no stream of it
    /// captures after. The default refuses (`Unsupported`).
    fn capture_end(&self, stream: StreamId) -> Result<GraphId, DriverError> {
        let _ = stream;
        Err(DriverError::new(
            Op::CaptureEnd,
            DriverErrorKind::Unsupported,
        ))
    }

    /// Queues one replay of `graph` on `stream` (`aclmdlRIExecuteAsync`):
    /// it starts after what `stream` holds and what `stream` queues next
    /// starts after it. The graph's tasks run as captured — the kernels
    /// with the argument bytes and the code they were captured with, the
    /// events recorded again — on the graph's own streams, not the ones
    /// they were captured on. The default refuses (`Unsupported`).
    fn graph_launch(&self, graph: GraphId, stream: StreamId) -> Result<(), DriverError> {
        let _ = (graph, stream);
        Err(DriverError::new(
            Op::GraphLaunch,
            DriverErrorKind::Unsupported,
        ))
    }

    /// Destroys `graph` (`aclmdlRIDestroy`); refused with
    /// [`CaptureRule::GraphRunning`] while a replay of it has not finished.
    /// The default refuses (`Unsupported`).
    fn graph_destroy(&self, graph: GraphId) -> Result<(), DriverError> {
        let _ = graph;
        Err(DriverError::new(
            Op::GraphDestroy,
            DriverErrorKind::Unsupported,
        ))
    }
}

macro_rules! forward_driver {
    ($($ty:ty),*) => {$(
        impl<D: Driver + ?Sized> Driver for $ty {
            fn info(&self) -> DriverInfo { (**self).info() }
            fn alloc(&self, bytes: usize) -> Result<DevPtr, DriverError> { (**self).alloc(bytes) }
            fn free(&self, ptr: DevPtr) -> Result<(), DriverError> { (**self).free(ptr) }
            fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
                (**self).copy_to_device(dst, src)
            }
            fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
                (**self).copy_from_device(dst, src)
            }
            fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
                (**self).memset(dst, value, len)
            }
            fn copy_async(&self, s: StreamId, dst: DevPtr, src: DevPtr, len: usize) -> Result<(), DriverError> {
                (**self).copy_async(s, dst, src, len)
            }
            fn memset_async(&self, s: StreamId, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
                (**self).memset_async(s, dst, value, len)
            }
            fn create_stream(&self) -> Result<StreamId, DriverError> { (**self).create_stream() }
            fn destroy_stream(&self, s: StreamId) -> Result<(), DriverError> { (**self).destroy_stream(s) }
            fn query_stream(&self, s: StreamId) -> Result<Completion, DriverError> { (**self).query_stream(s) }
            fn sync_stream(&self, s: StreamId, t: Duration) -> Result<(), DriverError> { (**self).sync_stream(s, t) }
            fn create_event(&self) -> Result<EventId, DriverError> { (**self).create_event() }
            fn destroy_event(&self, e: EventId) -> Result<(), DriverError> { (**self).destroy_event(e) }
            fn record_event(&self, e: EventId, s: StreamId) -> Result<(), DriverError> { (**self).record_event(e, s) }
            fn query_event(&self, e: EventId) -> Result<Completion, DriverError> { (**self).query_event(e) }
            fn sync_event(&self, e: EventId, t: Duration) -> Result<(), DriverError> { (**self).sync_event(e, t) }
            fn stream_wait_event(&self, s: StreamId, e: EventId) -> Result<(), DriverError> {
                (**self).stream_wait_event(s, e)
            }
            fn event_elapsed(&self, a: EventId, b: EventId) -> Result<Duration, DriverError> {
                (**self).event_elapsed(a, b)
            }
            fn event_timestamp(&self, e: EventId) -> Result<u64, DriverError> { (**self).event_timestamp(e) }
            fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
                (**self).register_code(code)
            }
            fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
                (**self).release_code(code)
            }
            fn code_epoch(&self) -> u64 { (**self).code_epoch() }
            fn clock(&self) -> Duration { (**self).clock() }
            fn launch_aicore(&self, s: StreamId, c: CodeHandle, b: u32, a: abi::LaunchArgs<'_>) -> Result<(), DriverError> {
                (**self).launch_aicore(s, c, b, a)
            }
            fn launch_aicpu(&self, s: StreamId, a: abi::LaunchArgs<'_>) -> Result<(), DriverError> {
                (**self).launch_aicpu(s, a)
            }
            fn check_aicpu_args(&self, a: abi::LaunchArgs<'_>) -> Result<(), DriverError> {
                (**self).check_aicpu_args(a)
            }
            fn queue_notify(&self, s: StreamId, e: EventId) -> Result<(), DriverError> {
                (**self).queue_notify(s, e)
            }
            fn notify_event(&self, e: EventId, t: Duration, w: &Waker) -> Result<Notice, DriverError> {
                (**self).notify_event(e, t, w)
            }
            fn capture_begin(&self, s: StreamId) -> Result<(), DriverError> { (**self).capture_begin(s) }
            fn capture_end(&self, s: StreamId) -> Result<GraphId, DriverError> { (**self).capture_end(s) }
            fn graph_launch(&self, g: GraphId, s: StreamId) -> Result<(), DriverError> {
                (**self).graph_launch(g, s)
            }
            fn graph_destroy(&self, g: GraphId) -> Result<(), DriverError> { (**self).graph_destroy(g) }
        }
    )*};
}

forward_driver!(Box<D>, std::sync::Arc<D>, &D);

/// The host's monotonic clock since the first call in this process: the
/// default [`Driver::clock`].
///
/// ```
/// let a = runclaim::driver::host_clock();
/// assert!(runclaim::driver::host_clock() >= a);
/// ```
#[must_use]
pub fn host_clock() -> Duration {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

#[cfg(test)]
mod tests;
