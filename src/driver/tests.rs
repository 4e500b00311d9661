//! The trait's defaults, on a driver that implements only what it must.

use super::*;
use crate::sim::{SimConfig, SimDriver};

/// A driver that implements only the required methods (forwarding to
/// the simulator): the defaults must behave as documented.
struct Minimal(SimDriver);

impl Driver for Minimal {
    fn info(&self) -> DriverInfo {
        self.0.info()
    }
    fn alloc(&self, bytes: usize) -> Result<DevPtr, DriverError> {
        self.0.alloc(bytes)
    }
    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        self.0.free(ptr)
    }
    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        self.0.copy_to_device(dst, src)
    }
    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        self.0.copy_from_device(dst, src)
    }
    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
        self.0.memset(dst, value, len)
    }
    fn create_stream(&self) -> Result<StreamId, DriverError> {
        self.0.create_stream()
    }
    fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        self.0.destroy_stream(stream)
    }
    fn sync_stream(&self, stream: StreamId, timeout: Duration) -> Result<(), DriverError> {
        self.0.sync_stream(stream, timeout)
    }
    fn create_event(&self) -> Result<EventId, DriverError> {
        self.0.create_event()
    }
    fn destroy_event(&self, event: EventId) -> Result<(), DriverError> {
        self.0.destroy_event(event)
    }
    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), DriverError> {
        self.0.record_event(event, stream)
    }
    fn query_event(&self, event: EventId) -> Result<Completion, DriverError> {
        self.0.query_event(event)
    }
    fn sync_event(&self, event: EventId, timeout: Duration) -> Result<(), DriverError> {
        self.0.sync_event(event, timeout)
    }
    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        self.0.stream_wait_event(stream, event)
    }
    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        self.0.register_code(code)
    }
    fn code_epoch(&self) -> u64 {
        self.0.code_epoch()
    }
    fn launch_aicore(
        &self,
        stream: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: abi::LaunchArgs<'_>,
    ) -> Result<(), DriverError> {
        self.0.launch_aicore(stream, code, block_dim, args)
    }
    fn launch_aicpu(&self, stream: StreamId, args: abi::LaunchArgs<'_>) -> Result<(), DriverError> {
        self.0.launch_aicpu(stream, args)
    }
}

#[test]
fn the_defaults_behave_as_documented() {
    let d = Minimal(SimDriver::stepped(SimConfig::default()));
    let s = d.create_stream().unwrap();
    let buf = d.alloc(8).unwrap();
    assert_eq!(d.query_stream(s).unwrap(), Completion::Complete);
    // Queued through the simulator it wraps (the one value that owns
    // the stream and the buffer: a clone of it would own neither).
    d.0.memset_async(s, buf, 1, 8).unwrap();
    assert_eq!(d.query_stream(s).unwrap(), Completion::NotReady);
    let unsupported = |e: DriverError| *e.kind() == DriverErrorKind::Unsupported;
    assert!(unsupported(d.copy_async(s, buf, buf, 1).unwrap_err()));
    assert!(unsupported(d.memset_async(s, buf, 0, 1).unwrap_err()));
    let ev = d.create_event().unwrap();
    assert!(unsupported(d.event_timestamp(ev).unwrap_err()));
    assert!(unsupported(d.event_elapsed(ev, ev).unwrap_err()));
    // Capture, refused (the simulator it wraps could).
    assert!(unsupported(d.capture_begin(s).unwrap_err()));
    assert!(unsupported(d.capture_end(s).unwrap_err()));
    assert!(unsupported(
        d.graph_launch(GraphId::from_raw(1), s).unwrap_err()
    ));
    assert!(unsupported(
        d.graph_destroy(GraphId::from_raw(1)).unwrap_err()
    ));
    let code = d
        .register_code(&abi::Program::new().encode())
        .unwrap()
        .handle;
    assert!(d.release_code(code).is_ok());
    let t = d.clock();
    assert!(d.clock() >= t);
    // And the contract runs on it.
    let mut dev = crate::Device::<_, 2>::open(d, crate::DeviceConfig::default()).unwrap();
    let runner = dev
        .publish(&[crate::Callable::program("f", &abi::Program::new().add(1))])
        .unwrap();
    let mut out = crate::Outputs::<0>::new(1);
    let spec = crate::RunSpec::new(runner.code("f").unwrap(), crate::Input::Host(&[1]));
    runner
        .run_serial(runner.take_slot::<0>().unwrap(), spec, &mut out)
        .unwrap();
    assert_eq!(out.values(), &[2]);
    // A capture on it is refused by the default (its info, the
    // simulator's, claims capture), the run handed back.
    let spec = crate::RunSpec::new(runner.code("f").unwrap(), crate::Input::Host(&[1]));
    let e = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .capture()
        .unwrap_err();
    let refused = e.kind().driver_error().map(|d| (d.op(), d.kind().clone()));
    assert_eq!(
        refused,
        Some((Op::CaptureBegin, DriverErrorKind::Unsupported))
    );
    assert!(e.value().is_some());
}

/// The default notification (the shared timer, `Notice::Timer`) keeps
/// a driver without one working: every awaited run over the real-time
/// simulator completes, right, in order.
#[test]
fn the_default_notification_completes_every_awaited_run() {
    let d = Minimal(SimDriver::real_time(SimConfig::default()));
    let never = d.create_event().unwrap();
    assert_eq!(
        d.notify_event(never, Duration::ZERO, std::task::Waker::noop()),
        Ok(Notice::Timer)
    );
    let mut dev = crate::Device::<_, 2>::open(d, crate::DeviceConfig::default()).unwrap();
    let runner = dev
        .publish(&[crate::Callable::program("f", &abi::Program::new().mul(3))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = crate::Pipeline::<_, 2, u32>::new(&runner).unwrap();
    let back = pollster::block_on(async {
        let mut back = Vec::new();
        for x in 0..100u32 {
            if pipe.is_full() {
                let d = pipe.complete_async().await.unwrap().expect("pending");
                assert_eq!(d.values, &[3 * d.tag]);
                back.push(d.tag);
            }
            let input = [x];
            pipe.submit(crate::RunSpec::new(code, crate::Input::Host(&input)), x)
                .unwrap();
        }
        while let Some(d) = pipe.complete_async().await.unwrap() {
            assert_eq!(d.values, &[3 * d.tag]);
            back.push(d.tag);
        }
        back
    });
    assert_eq!(back, (0..100).collect::<Vec<_>>());
}
