//! `Hooked`: the simulator behind a driver whose host side misbehaves on
//! demand — a host thread that is "preempted" inside every blocking wait, a
//! driver that panics in one operation, a driver that reports the host's
//! clock for a device that runs on virtual time. Every other call goes to
//! the simulator unchanged.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
        sync_stream[SyncStream](s: StreamId, t: Duration) -> Result<(), DriverError>;
        create_event[CreateEvent]() -> Result<EventId, DriverError>;
        destroy_event[DestroyEvent](e: EventId) -> Result<(), DriverError>;
        record_event[RecordEvent](e: EventId, s: StreamId) -> Result<(), DriverError>;
        query_event[QueryEvent](e: EventId) -> Result<Completion, DriverError>;
        sync_event[SyncEvent](e: EventId, t: Duration) -> Result<(), DriverError>;
        stream_wait_event[StreamWaitEvent](s: StreamId, e: EventId) -> Result<(), DriverError>;
        event_elapsed[EventElapsed](a: EventId, b: EventId) -> Result<Duration, DriverError>;
        event_timestamp[EventTimestamp](e: EventId) -> Result<u64, DriverError>;
        register_code[RegisterCode](code: &[u8]) -> Result<Registration, DriverError>;
        release_code[ReleaseCode](code: CodeHandle) -> Result<(), DriverError>;
        launch_aicore[LaunchAicore](s: StreamId, c: CodeHandle, b: u32, a: &[u8]) -> Result<(), DriverError>;
        launch_aicpu[LaunchAicpu](s: StreamId, a: &[u8]) -> Result<(), DriverError>;
    }

    fn code_epoch(&self) -> u64 {
        self.sim.code_epoch()
    }

    fn clock(&self) -> Duration {
        if self.hooks.host_clock.load(Ordering::SeqCst) {
            host_clock()
        } else {
            self.sim.clock()
        }
    }
}
