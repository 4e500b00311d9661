//! A driver that completes every submission at once: the AICPU launch runs
//! the whole run (both kernels' effects) synchronously, and every event is
//! complete when recorded.
//!
//! It exists to time the **contract's own cost** — the host work of prepare,
//! launch, fence and finalize apart from any device — and to prove that cost
//! allocates nothing in steady state. It is not a simulator: it has no
//! handshake, no watchdog, no stale code and no faults; use [`sim`](super::sim)
//! to test behaviour.
//!
//! After set-up (allocations, code registration) no driver call allocates.
//!
//! It follows **runclaim's layout only** (the blocks of
//! [`RunclaimAbi`](crate::driver::abi::RunclaimAbi), the device side of
//! [`RunclaimModel`](super::sim::RunclaimModel)): argument blocks of both
//! versions ([`ArgBlock`]), parsed in place. A block of any other
//! adapter (the a2a3 layout's included) does not parse and is refused with
//! [`DriverErrorKind::InvalidArgument`]; run other adapters on the
//! simulator, with [`SimConfig::device_model`](super::sim::SimConfig::device_model).
//! It checks every device range a block's writer recorded (each tensor's
//! included) at both launches, and runs a built-in [`Program`] as the
//! simulator does (for a version-2 block: from the first readable to the
//! first writable tensor). Simulator Rust kernels
//! ([`sim::SimKernel`](super::sim::SimKernel)) do not run here: their
//! `RCR1` images are refused as invalid code.
//!
//! ```
//! use runclaim::driver::{Driver, DriverErrorKind};
//! use runclaim::driver::abi::{BlockBuf, Program};
//! use runclaim::driver::instant::InstantDriver;
//!
//! let d = InstantDriver::new();
//! let code = d.register_code(&Program::new().encode())?.handle;
//! let s = d.create_stream()?;
//! // A 40-byte a2a3 `AicoreLaunchArgs` is not a runclaim block.
//! let e = d.launch_aicore(s, code, 1, BlockBuf::from_bytes(&[0; 40]).args()).unwrap_err();
//! assert!(matches!(e.kind(), DriverErrorKind::InvalidArgument { .. }));
//! # Ok::<(), runclaim::driver::DriverError>(())
//! ```
//!
//! ```
//! use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
//! use runclaim::driver::abi::Program;
//! use runclaim::driver::instant::InstantDriver;
//!
//! let mut device = Device::<_, 2>::open(InstantDriver::new(), DeviceConfig::default())?;
//! let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
//! let mut out = Outputs::<0>::new(4);
//! let spec = RunSpec::new(runner.code("inc")?, Input::Host(&[41]));
//! runner.run_serial(runner.take_slot::<0>()?, spec, &mut out)?;
//! assert_eq!(out.values(), &[42]);
//! # Ok::<(), runclaim::Error>(())
//! ```

mod capture;
mod device;

use self::device::{Block, Captured, Inner};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::abi::{ArgBlock, LaunchArgs, Program};
use super::{
    Capabilities, CodeHandle, Completion, DevPtr, Driver, DriverError, DriverErrorKind, DriverInfo,
    EventId, GraphId, HandleKind, Notice, Op, Registration, StreamId,
};

const BASE: u64 = 0x1_0000_0000;
const GUARD: usize = 4096;
/// Pending AICore launches one stream can hold before its AICPU partner.
const PENDING: usize = 64;

/// See the [module documentation](self).
///
/// ```
/// use runclaim::driver::{Completion, Driver};
/// use runclaim::driver::instant::InstantDriver;
///
/// let d = InstantDriver::new();
/// let (s, e) = (d.create_stream()?, d.create_event()?);
/// d.record_event(e, s)?;
/// assert_eq!(d.query_event(e)?, Completion::Complete); // complete at once
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Default)]
pub struct InstantDriver {
    inner: Mutex<Inner>,
    /// Uploads so far (the code epoch), readable without the lock.
    uploads: AtomicU64,
    /// Whether it captures ([`with_capture`](InstantDriver::with_capture)).
    capture: bool,
}

impl InstantDriver {
    /// A fresh device.
    #[must_use]
    pub fn new() -> Self {
        InstantDriver {
            uploads: AtomicU64::new(0),
            capture: false,
            inner: Mutex::new(Inner {
                pending: Vec::with_capacity(PENDING),
                ..Inner::default()
            }),
        }
    }

    /// A fresh device that captures (`Capabilities::CAPTURE`): a capture
    /// records the AICore kernel's code and the AICPU kernel's replayable
    /// block, launched on any stream while it is open, and a replay runs
    /// the run its block names at once. None of the runtime's capture rules
    /// is checked (test those on the simulator): it exists to time the
    /// contract's cost per replayed run.
    ///
    /// ```
    /// use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
    /// use runclaim::driver::abi::Program;
    /// use runclaim::driver::instant::InstantDriver;
    ///
    /// let mut device = Device::<_, 2>::open(InstantDriver::with_capture(), DeviceConfig::default())?;
    /// let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let code = runner.code("inc")?;
    /// let mut out = Outputs::<0>::new(4);
    /// let spec = RunSpec::new(code, Input::Host(&[1]));
    /// let (run, capture) = runner.prepare(runner.take_slot::<0>()?, spec)?.capture()?;
    /// let token = run.fence()?.finalize(&mut out)?.token;
    /// let run = runner.prepare(token, RunSpec::new(code, Input::Host(&[41])))?.replay(&capture)?;
    /// drop(run.fence()?.finalize(&mut out)?);
    /// assert_eq!(out.values(), [42]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn with_capture() -> Self {
        InstantDriver {
            capture: true,
            ..Self::new()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Checks every range `args` names and parses it as a runclaim block
    /// of either version (in place: no allocation).
    fn args<'b>(g: &Inner, op: Op, args: LaunchArgs<'b>) -> Result<ArgBlock<'b>, DriverError> {
        let invalid = |what| DriverError::new(op, DriverErrorKind::InvalidArgument { what });
        g.check_fields(op, args)?;
        let block = ArgBlock::parse(args.bytes()).map_err(|e| invalid(e.field))?;
        if let ArgBlock::Work(w) = &block {
            let h = w.header();
            if h.len != 0 || h.input != 0 || h.output != 0 {
                return Err(invalid(
                    "workload argument block has a non-zero len, input or output",
                ));
            }
        }
        Ok(block)
    }
}

impl Driver for InstantDriver {
    fn info(&self) -> DriverInfo {
        DriverInfo {
            max_block_dim: 24,
            stream_capacity: super::STREAM_CAPACITY,
            // Nothing ever runs long; any positive fence timeout is above it.
            watchdog: Some(Duration::from_millis(1)),
            capabilities: if self.capture {
                Capabilities::EVENT_SYNC_TIMEOUT | Capabilities::CAPTURE
            } else {
                Capabilities::EVENT_SYNC_TIMEOUT
            },
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
        let mut g = self.lock();
        let oom = || {
            DriverError::new(
                Op::Alloc,
                DriverErrorKind::OutOfMemory {
                    bytes: bytes as u64,
                },
            )
        };
        let addr = BASE + g.memory.len() as u64;
        let total = g
            .memory
            .len()
            .checked_add(bytes)
            .and_then(|t| t.checked_add(GUARD))
            .ok_or_else(oom)?;
        // A host allocation failure is an error here, never an abort.
        let more = total - g.memory.len();
        g.memory.try_reserve_exact(more).map_err(|_| oom())?;
        g.memory.resize(total, 0);
        g.blocks.push(Block {
            addr,
            len: bytes as u64,
            live: true,
        });
        Ok(DevPtr::from_raw(addr))
    }

    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        let mut g = self.lock();
        match g.blocks.iter_mut().find(|b| b.live && b.addr == ptr.raw()) {
            Some(b) => {
                b.live = false;
                Ok(())
            }
            None => Err(DriverError::new(
                Op::Free,
                DriverErrorKind::BadAddress {
                    addr: ptr.raw(),
                    len: 0,
                },
            )),
        }
    }

    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        let mut g = self.lock();
        let r = g.range(Op::CopyToDevice, dst.raw(), src.len())?;
        g.memory[r].copy_from_slice(src);
        Ok(())
    }

    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        let g = self.lock();
        let r = g.range(Op::CopyFromDevice, src.raw(), dst.len())?;
        dst.copy_from_slice(&g.memory[r]);
        Ok(())
    }

    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
        let mut g = self.lock();
        let r = g.range(Op::Memset, dst.raw(), len)?;
        g.memory[r].fill(value);
        Ok(())
    }

    fn copy_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        let mut g = self.lock();
        Inner::check(&g.streams, Op::CopyAsync, HandleKind::Stream, s.raw())?;
        let from = g.range(Op::CopyAsync, src.raw(), len)?;
        let to = g.range(Op::CopyAsync, dst.raw(), len)?;
        if let Some((_, c)) = &mut g.capturing {
            // Captured: it runs at each replay, after the kernels.
            c.copies.push((from.start, to.start, len));
            return Ok(());
        }
        g.memory.copy_within(from, to.start);
        Ok(())
    }

    fn memset_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        value: u8,
        len: usize,
    ) -> Result<(), DriverError> {
        Inner::check(
            &self.lock().streams,
            Op::MemsetAsync,
            HandleKind::Stream,
            s.raw(),
        )?;
        let mut g = self.lock();
        let r = g.range(Op::MemsetAsync, dst.raw(), len)?;
        g.memory[r].fill(value);
        Ok(())
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        let mut g = self.lock();
        let h = g.handle();
        g.streams.push((h, true));
        Ok(StreamId::from_raw(h))
    }

    fn destroy_stream(&self, s: StreamId) -> Result<(), DriverError> {
        let mut g = self.lock();
        let i = Inner::check(&g.streams, Op::DestroyStream, HandleKind::Stream, s.raw())?;
        g.streams[i].1 = false;
        Ok(())
    }

    fn query_stream(&self, s: StreamId) -> Result<Completion, DriverError> {
        Inner::check(
            &self.lock().streams,
            Op::QueryStream,
            HandleKind::Stream,
            s.raw(),
        )?;
        Ok(Completion::Complete)
    }

    fn sync_stream(&self, s: StreamId, _timeout: Duration) -> Result<(), DriverError> {
        Inner::check(
            &self.lock().streams,
            Op::SyncStream,
            HandleKind::Stream,
            s.raw(),
        )?;
        Ok(())
    }

    fn create_event(&self) -> Result<EventId, DriverError> {
        let mut g = self.lock();
        let h = g.handle();
        g.events.push((h, true));
        Ok(EventId::from_raw(h))
    }

    fn destroy_event(&self, e: EventId) -> Result<(), DriverError> {
        let mut g = self.lock();
        let i = Inner::check(&g.events, Op::DestroyEvent, HandleKind::Event, e.raw())?;
        g.events[i].1 = false;
        Ok(())
    }

    fn record_event(&self, e: EventId, s: StreamId) -> Result<(), DriverError> {
        let g = self.lock();
        Inner::check(&g.events, Op::RecordEvent, HandleKind::Event, e.raw())?;
        Inner::check(&g.streams, Op::RecordEvent, HandleKind::Stream, s.raw())?;
        Ok(())
    }

    fn query_event(&self, e: EventId) -> Result<Completion, DriverError> {
        Inner::check(
            &self.lock().events,
            Op::QueryEvent,
            HandleKind::Event,
            e.raw(),
        )?;
        Ok(Completion::Complete)
    }

    /// Every recorded event is complete at once: [`Notice::Ready`], and no
    /// waker is kept.
    fn notify_event(
        &self,
        e: EventId,
        _within: Duration,
        _waker: &std::task::Waker,
    ) -> Result<Notice, DriverError> {
        Inner::check(
            &self.lock().events,
            Op::NotifyEvent,
            HandleKind::Event,
            e.raw(),
        )?;
        Ok(Notice::Ready)
    }

    fn sync_event(&self, e: EventId, _timeout: Duration) -> Result<(), DriverError> {
        Inner::check(
            &self.lock().events,
            Op::SyncEvent,
            HandleKind::Event,
            e.raw(),
        )?;
        Ok(())
    }

    fn stream_wait_event(&self, s: StreamId, e: EventId) -> Result<(), DriverError> {
        let g = self.lock();
        Inner::check(&g.events, Op::StreamWaitEvent, HandleKind::Event, e.raw())?;
        Inner::check(&g.streams, Op::StreamWaitEvent, HandleKind::Stream, s.raw())?;
        Ok(())
    }

    fn event_elapsed(&self, a: EventId, b: EventId) -> Result<Duration, DriverError> {
        let g = self.lock();
        Inner::check(&g.events, Op::EventElapsed, HandleKind::Event, a.raw())?;
        Inner::check(&g.events, Op::EventElapsed, HandleKind::Event, b.raw())?;
        Ok(Duration::ZERO)
    }

    fn event_timestamp(&self, e: EventId) -> Result<u64, DriverError> {
        let g = self.lock();
        Inner::check(&g.events, Op::EventTimestamp, HandleKind::Event, e.raw())?;
        Ok(g.clock)
    }

    /// A built-in [`Program`] only: a simulator Rust kernel's image
    /// ([`KernelCode`](super::sim::KernelCode)) is refused as invalid code.
    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        if code.starts_with(&super::sim::KernelCode::MAGIC) {
            return Err(DriverError::new(
                Op::RegisterCode,
                DriverErrorKind::InvalidCode {
                    what: "a simulator Rust kernel (RCR1) runs only on the SimDriver that registered it",
                },
            ));
        }
        let program = Program::decode(code).map_err(|e| {
            DriverError::new(
                Op::RegisterCode,
                DriverErrorKind::InvalidCode { what: e.as_str() },
            )
        })?;
        let mut g = self.lock();
        // Code is never evicted, so pins need no bookkeeping; the n-th
        // upload lives at n and is stamped n.
        if let Some(i) = g.code.iter().position(|(c, _)| c == code) {
            let n = i as u64 + 1;
            return Ok(Registration {
                handle: CodeHandle::from_raw(n, n),
                published: false,
            });
        }
        g.code.push((code.to_vec(), program));
        self.uploads.store(g.code.len() as u64, Ordering::Release);
        let n = g.code.len() as u64;
        Ok(Registration {
            handle: CodeHandle::from_raw(n, n),
            published: true,
        })
    }

    /// Code is never evicted, so a release only checks the handle.
    fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
        let known = code.raw() == code.upload()
            && usize::try_from(code.raw())
                .ok()
                .and_then(|n| n.checked_sub(1))
                .is_some_and(|i| i < self.lock().code.len());
        if known {
            Ok(())
        } else {
            Err(DriverError::new(
                Op::ReleaseCode,
                DriverErrorKind::BadHandle {
                    kind: HandleKind::Code,
                    raw: code.raw(),
                },
            ))
        }
    }

    fn code_epoch(&self) -> u64 {
        self.uploads.load(Ordering::Acquire)
    }

    fn launch_aicore(
        &self,
        s: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverError> {
        let mut g = self.lock();
        Inner::check(&g.streams, Op::LaunchAicore, HandleKind::Stream, s.raw())?;
        if g.capturing.is_some() {
            // A replayable block, read at the replay.
            g.check_fields(Op::LaunchAicore, args)?;
            let index = g.code_index(code)?;
            if let Some((_, c)) = &mut g.capturing {
                c.code = Some(index);
            }
            return Ok(());
        }
        let a = *Self::args(&g, Op::LaunchAicore, args)?.header();
        let index = g.code_index(code)?;
        if block_dim == 0 || block_dim > 24 || block_dim != a.block_dim {
            return Err(DriverError::new(
                Op::LaunchAicore,
                DriverErrorKind::InvalidArgument {
                    what: "block_dim is 0, above 24, or not the argument block's",
                },
            ));
        }
        if g.pending.len() == PENDING {
            return Err(DriverError::new(
                Op::LaunchAicore,
                DriverErrorKind::QueueFull { capacity: PENDING },
            ));
        }
        g.pending.push((a.run_id, index));
        Ok(())
    }

    fn check_aicpu_args(&self, args: LaunchArgs<'_>) -> Result<(), DriverError> {
        Self::args(&self.lock(), Op::LaunchAicpu, args).map(drop)
    }

    fn launch_aicpu(&self, s: StreamId, args: LaunchArgs<'_>) -> Result<(), DriverError> {
        let mut g = self.lock();
        Inner::check(&g.streams, Op::LaunchAicpu, HandleKind::Stream, s.raw())?;
        if let Some((_, c)) = &mut g.capturing {
            c.aicpu = Some(args.bytes().to_vec());
            return Ok(());
        }
        let block = Self::args(&g, Op::LaunchAicpu, args)?;
        let a = *block.header();
        // Without its AICore kernel the run cannot complete; nothing happens
        // (its status stays armed), as a hung run would leave it.
        let Some(at) = g.pending.iter().position(|&(run, _)| run == a.run_id) else {
            return Ok(());
        };
        let (_, code) = g.pending.swap_remove(at);
        g.execute(&block, code)
    }

    /// Captures where the driver was made [`with_capture`](InstantDriver::with_capture);
    /// refused (`Unsupported`) otherwise.
    fn capture_begin(&self, s: StreamId) -> Result<(), DriverError> {
        self.begin_capture(s)
    }

    fn capture_end(&self, s: StreamId) -> Result<GraphId, DriverError> {
        self.end_capture(s)
    }

    fn graph_launch(&self, graph: GraphId, s: StreamId) -> Result<(), DriverError> {
        self.launch_graph(graph, s)
    }

    fn graph_destroy(&self, graph: GraphId) -> Result<(), DriverError> {
        self.destroy_graph(graph)
    }
}
