//! Deliberately broken drivers for the negative controls: each forwards to
//! the simulator but breaks one rule the contract relies on, so a checker
//! that claims to catch that rule can be shown to fail.

use std::sync::Mutex;
use std::time::Duration;

use runclaim::driver::abi::{self, BlockBuf, LaunchArgs, RunArgs};
use runclaim::driver::{
    CodeHandle, Completion, DevPtr, Driver, DriverError, DriverInfo, EventId, Registration,
    StreamId,
};
use runclaim::sim::SimDriver;

/// What the wrapper breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breakage {
    /// Holds every other AICore launch back and submits it after the next
    /// one: device order ≠ launch order.
    ReorderLaunches,
    /// "Re-creating" a stream hands back the first AICore stream, which
    /// keeps the instruction cache of the code before any publication.
    ReuseStaleStream,
    /// Every run's device wall goes to the first wall buffer seen: slots
    /// share one buffer.
    ShareDeviceWall,
    /// Every run's status record goes to the first status buffer seen.
    ShareStatus,
    /// The AICPU kernel writes its status into a buffer nobody reads: the
    /// slot's record stays armed.
    LoseStatus,
    /// Launching a run zeroes the previous run's handshake region, live or not.
    ClearLiveHandshake,
}

#[derive(Default)]
struct State {
    held_aicore: Option<(StreamId, CodeHandle, u32, BlockBuf)>,
    streams: Vec<StreamId>,
    first_wall: Option<u64>,
    first_status: Option<u64>,
    last_handshake: Option<(u64, u32)>,
}

/// The simulator with one rule broken.
pub struct Broken {
    inner: SimDriver,
    how: Breakage,
    state: Mutex<State>,
}

impl Broken {
    /// Wraps `inner`.
    pub fn new(inner: SimDriver, how: Breakage) -> Self {
        Broken {
            inner,
            how,
            state: Mutex::new(State::default()),
        }
    }

    fn st(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    fn rewrite(&self, args: LaunchArgs<'_>) -> BlockBuf {
        let Ok(mut a) = RunArgs::from_bytes(args.bytes()) else {
            return BlockBuf::copy_of(args);
        };
        if self.how == Breakage::ShareDeviceWall {
            a.wall = *self.st().first_wall.get_or_insert(a.wall);
        }
        if self.how == Breakage::ShareStatus {
            a.status = *self.st().first_status.get_or_insert(a.status);
        }
        if self.how == Breakage::LoseStatus {
            // Bytes 16..32 of the handshake header are unused by the kernels.
            a.status = a.handshake + 16;
        }
        a.block()
    }
}

impl Driver for Broken {
    fn info(&self) -> DriverInfo {
        self.inner.info()
    }
    fn alloc(&self, bytes: usize) -> Result<DevPtr, DriverError> {
        self.inner.alloc(bytes)
    }
    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        self.inner.free(ptr)
    }
    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        self.inner.copy_to_device(dst, src)
    }
    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        self.inner.copy_from_device(dst, src)
    }
    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
        self.inner.memset(dst, value, len)
    }
    fn copy_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        self.inner.copy_async(s, dst, src, len)
    }
    fn memset_async(
        &self,
        s: StreamId,
        dst: DevPtr,
        value: u8,
        len: usize,
    ) -> Result<(), DriverError> {
        self.inner.memset_async(s, dst, value, len)
    }
    fn create_stream(&self) -> Result<StreamId, DriverError> {
        let mut st = self.st();
        if self.how == Breakage::ReuseStaleStream && st.streams.len() >= 2 {
            // Pretend: the AICore stream created at open comes back.
            return Ok(st.streams[1]);
        }
        let s = self.inner.create_stream()?;
        st.streams.push(s);
        Ok(s)
    }
    fn destroy_stream(&self, s: StreamId) -> Result<(), DriverError> {
        if self.how == Breakage::ReuseStaleStream && self.st().streams.get(1) == Some(&s) {
            return Ok(());
        }
        self.inner.destroy_stream(s)
    }
    fn query_stream(&self, s: StreamId) -> Result<Completion, DriverError> {
        self.inner.query_stream(s)
    }
    fn sync_stream(&self, s: StreamId, t: Duration) -> Result<(), DriverError> {
        self.inner.sync_stream(s, t)
    }
    fn create_event(&self) -> Result<EventId, DriverError> {
        self.inner.create_event()
    }
    fn destroy_event(&self, e: EventId) -> Result<(), DriverError> {
        self.inner.destroy_event(e)
    }
    fn record_event(&self, e: EventId, s: StreamId) -> Result<(), DriverError> {
        self.inner.record_event(e, s)
    }
    fn query_event(&self, e: EventId) -> Result<Completion, DriverError> {
        self.inner.query_event(e)
    }
    fn sync_event(&self, e: EventId, t: Duration) -> Result<(), DriverError> {
        self.inner.sync_event(e, t)
    }
    fn stream_wait_event(&self, s: StreamId, e: EventId) -> Result<(), DriverError> {
        self.inner.stream_wait_event(s, e)
    }
    fn event_elapsed(&self, a: EventId, b: EventId) -> Result<Duration, DriverError> {
        self.inner.event_elapsed(a, b)
    }
    fn event_timestamp(&self, e: EventId) -> Result<u64, DriverError> {
        self.inner.event_timestamp(e)
    }
    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        self.inner.register_code(code)
    }
    fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
        self.inner.release_code(code)
    }
    fn code_epoch(&self) -> u64 {
        self.inner.code_epoch()
    }
    fn clock(&self) -> Duration {
        self.inner.clock()
    }

    fn launch_aicore(
        &self,
        s: StreamId,
        code: CodeHandle,
        bd: u32,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverError> {
        let args = self.rewrite(args);
        if self.how == Breakage::ReorderLaunches {
            let held = self.st().held_aicore.take();
            match held {
                None => {
                    self.st().held_aicore = Some((s, code, bd, args));
                    return Ok(());
                }
                Some((hs, hc, hb, ha)) => {
                    self.inner.launch_aicore(s, code, bd, args.args())?;
                    return self.inner.launch_aicore(hs, hc, hb, ha.args());
                }
            }
        }
        self.inner.launch_aicore(s, code, bd, args.args())
    }
    fn launch_aicpu(&self, s: StreamId, args: LaunchArgs<'_>) -> Result<(), DriverError> {
        let args = self.rewrite(args);
        self.inner.launch_aicpu(s, args.args())?;
        if self.how == Breakage::ClearLiveHandshake
            && let Ok(a) = RunArgs::from_bytes(args.args().bytes())
        {
            let previous = self.st().last_handshake.replace((a.handshake, a.block_dim));
            if let Some((hs, bd)) = previous {
                self.inner
                    .memset(DevPtr::from_raw(hs), 0, abi::handshake_bytes(bd))?;
            }
        }
        Ok(())
    }
}
