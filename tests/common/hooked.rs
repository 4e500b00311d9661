//! `Hooked`: the simulator behind a driver whose host side misbehaves on
//! demand — a host thread that is "preempted" inside every blocking wait, a
//! driver that panics in one operation, a driver that reports the host's
//! clock for a device that runs on virtual time. Every other call goes to
//! the simulator unchanged.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use runclaim::driver::abi::LaunchArgs;
use runclaim::driver::{
    CodeHandle, Completion, DevPtr, Driver, DriverError, DriverInfo, EventId, Op, Registration,
    StreamId, host_clock,
};
use runclaim::sim::SimDriver;

/// What the host side does wrong.
#[derive(Debug, Default)]
pub struct Hooks {
    /// Host time lost inside every `sync_event` / `sync_stream` (the host
    /// thread was preempted) — device time does not move meanwhile.
    pub preempted: Mutex<Duration>,
    /// The operation that panics, while `armed`.
    pub panic_in: Mutex<Option<Op>>,
    /// Arms `panic_in`.
    pub armed: AtomicBool,
    /// A broken driver: report the host's clock for the simulator's
    /// virtual-time device.
    pub host_clock: AtomicBool,
    /// A broken driver: registrations do not pin (each is released at once),
    /// so other registrations may evict the code.
    pub ignore_pins: AtomicBool,
    /// A broken driver: a launch runs whatever upload is resident at the
    /// handle's address now (the upload check disabled).
    pub launch_resident: AtomicBool,
    /// A broken driver: `code_epoch` claims no upload will ever be newer
    /// than a stream (foreign uploads never make a stream stale).
    pub epoch_lie: AtomicBool,
    /// A stalled device: every `sync_stream` times out at once.
    pub stall: AtomicBool,
    /// A frozen device: every `sync_event` times out at once and the clock
    /// never moves (a driver whose virtual clock only moves with progress).
    pub frozen: AtomicBool,
    /// The bytes of every AICore block launched, in launch order.
    pub blocks: Mutex<Vec<Vec<u8>>>,
    /// The name of the thread each `destroy_stream` ran on (a device's
    /// teardown), in call order.
    pub teardown_threads: Mutex<Vec<Option<String>>>,
}

/// The simulator with [`Hooks`].
pub struct Hooked {
    /// The device.
    pub sim: SimDriver,
    /// The misbehaviour.
    pub hooks: std::sync::Arc<Hooks>,
}

impl Hooked {
    /// `sim` with no misbehaviour armed.
    pub fn new(sim: SimDriver) -> Self {
        Hooked {
            sim,
            hooks: std::sync::Arc::default(),
        }
    }

    fn enter(&self, op: Op) {
        if op == Op::DestroyStream {
            let name = std::thread::current().name().map(str::to_owned);
            self.hooks.teardown_threads.lock().unwrap().push(name);
        }
        let target = *self.hooks.panic_in.lock().unwrap();
        assert!(
            !(self.hooks.armed.load(Ordering::SeqCst) && target == Some(op)),
            "injected driver panic in {op}"
        );
        if matches!(op, Op::SyncEvent | Op::SyncStream) {
            let lost = *self.hooks.preempted.lock().unwrap();
            if !lost.is_zero() {
                std::thread::sleep(lost);
            }
        }
    }
}

macro_rules! hooked {
    ($($name:ident[$op:ident]($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&self, $($arg: $ty),*) -> $ret {
            self.enter(Op::$op);
            self.sim.$name($($arg),*)
        })*
    };
}

impl Driver for Hooked {
    fn info(&self) -> DriverInfo {
        self.sim.info()
    }

    hooked! {
        alloc[Alloc](bytes: usize) -> Result<DevPtr, DriverError>;
        free[Free](ptr: DevPtr) -> Result<(), DriverError>;
        copy_to_device[CopyToDevice](dst: DevPtr, src: &[u8]) -> Result<(), DriverError>;
        copy_from_device[CopyFromDevice](dst: &mut [u8], src: DevPtr) -> Result<(), DriverError>;
        memset[Memset](dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError>;
        copy_async[CopyAsync](s: StreamId, dst: DevPtr, src: DevPtr, len: usize) -> Result<(), DriverError>;
        memset_async[MemsetAsync](s: StreamId, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError>;
        create_stream[CreateStream]() -> Result<StreamId, DriverError>;
        destroy_stream[DestroyStream](s: StreamId) -> Result<(), DriverError>;
        query_stream[QueryStream](s: StreamId) -> Result<Completion, DriverError>;
        create_event[CreateEvent]() -> Result<EventId, DriverError>;
        destroy_event[DestroyEvent](e: EventId) -> Result<(), DriverError>;
        record_event[RecordEvent](e: EventId, s: StreamId) -> Result<(), DriverError>;
        query_event[QueryEvent](e: EventId) -> Result<Completion, DriverError>;
        stream_wait_event[StreamWaitEvent](s: StreamId, e: EventId) -> Result<(), DriverError>;
        event_elapsed[EventElapsed](a: EventId, b: EventId) -> Result<Duration, DriverError>;
        event_timestamp[EventTimestamp](e: EventId) -> Result<u64, DriverError>;
        launch_aicpu[LaunchAicpu](s: StreamId, a: LaunchArgs<'_>) -> Result<(), DriverError>;
    }

    fn sync_event(&self, e: EventId, t: Duration) -> Result<(), DriverError> {
        self.enter(Op::SyncEvent);
        if self.hooks.frozen.load(Ordering::SeqCst) {
            let kind = runclaim::driver::DriverErrorKind::Timeout { waited: t };
            return Err(DriverError::new(Op::SyncEvent, kind));
        }
        self.sim.sync_event(e, t)
    }

    fn sync_stream(&self, s: StreamId, t: Duration) -> Result<(), DriverError> {
        self.enter(Op::SyncStream);
        if self.hooks.stall.load(Ordering::SeqCst) {
            let kind = runclaim::driver::DriverErrorKind::Timeout { waited: t };
            return Err(DriverError::new(Op::SyncStream, kind));
        }
        self.sim.sync_stream(s, t)
    }

    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        self.enter(Op::RegisterCode);
        let r = self.sim.register_code(code)?;
        if self.hooks.ignore_pins.load(Ordering::SeqCst) {
            self.sim.release_code(r.handle)?;
        }
        Ok(r)
    }

    fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
        self.enter(Op::ReleaseCode);
        if self.hooks.ignore_pins.load(Ordering::SeqCst) {
            return Ok(()); // released at registration already
        }
        self.sim.release_code(code)
    }

    fn launch_aicore(
        &self,
        s: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverError> {
        self.enter(Op::LaunchAicore);
        self.hooks
            .blocks
            .lock()
            .unwrap()
            .push(args.bytes().to_vec());
        let code = if self.hooks.launch_resident.load(Ordering::SeqCst) {
            self.sim.code_at(code.raw()).unwrap_or(code)
        } else {
            code
        };
        self.sim.launch_aicore(s, code, block_dim, args)
    }

    fn code_epoch(&self) -> u64 {
        if self.hooks.epoch_lie.load(Ordering::SeqCst) {
            u64::MAX
        } else {
            self.sim.code_epoch()
        }
    }

    fn clock(&self) -> Duration {
        if self.hooks.frozen.load(Ordering::SeqCst) {
            return Duration::from_secs(1);
        }
        if self.hooks.host_clock.load(Ordering::SeqCst) {
            host_clock()
        } else {
            self.sim.clock()
        }
    }
}
