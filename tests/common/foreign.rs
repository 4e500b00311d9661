//! A user kernel-ABI adapter that names another device's memory: device
//! A's adapter writes a buffer's address as its run's handshake region
//! (`BlockWriter::put_addr`, so the driver sees the range). Two devices
//! share one NPU (clones of one simulator, or two `AclDriver`s on one fake
//! device id); a driver must accept only ranges inside its own live
//! allocations, so pointed at device B's buffer A's launch is refused
//! before anything is submitted, and pointed at A's own buffer it runs.
//! Both drivers run the same scenario (`tests/ownership.rs` on the
//! simulator, `acl-tests/tests/acl_ownership.rs` through the fake runtime).

use std::sync::{Arc, Mutex, PoisonError};

use runclaim::contract::{Action, ErrorKind};
use runclaim::driver::abi::{
    AbiError, AicpuBlock, BlockWriter, DevSpan, KernelAbi, Program, RecordAt, RecordError,
    RegionSpec, RunIdentity, RunView, RunclaimAbi, Shape, Verdict, WallRecord,
};
use runclaim::driver::{Driver, DriverErrorKind};
use runclaim::{Callable, Device, DeviceBuffer, DeviceConfig, Input, Outputs, RunSpec};

/// [`RunclaimAbi`], except that while `handshake` holds a span, the
/// blocks name it as the run's handshake region instead of the slot's own.
pub struct Borrowing {
    /// The span written as the handshake region (`None`: the slot's).
    pub handshake: Arc<Mutex<Option<DevSpan>>>,
}

impl Borrowing {
    fn borrowed(&self) -> Option<DevSpan> {
        *self
            .handshake
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl KernelAbi for Borrowing {
    fn name(&self) -> &'static str {
        "borrowing"
    }
    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
        RunclaimAbi.regions(shape, out)
    }
    fn max_block_bytes(&self) -> usize {
        RunclaimAbi.max_block_bytes()
    }
    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
        let Some(borrowed) = self.borrowed() else {
            return RunclaimAbi.aicore_block(run, w);
        };
        let region = |i| run.region(i).ok_or(AbiError::NoRegion { index: i });
        let own = region(0)?;
        let handshake = borrowed.sub(0, own.len()).ok_or(AbiError::Unsupported {
            what: "the borrowed span is smaller than the handshake region",
        })?;
        let regions = [handshake, region(1)?, region(2)?];
        let view = RunView::new(*run.identity(), &regions, run.tensors(), run.scalars());
        RunclaimAbi.aicore_block(&view, w)
    }
    fn aicpu_block(
        &self,
        run: &RunView<'_>,
        w: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError> {
        RunclaimAbi.aicpu_block(run, w) // the AICore block: the same ranges
    }
    fn arm(&self, region: usize, id: &RunIdentity, bytes: &mut [u8]) -> Result<(), AbiError> {
        RunclaimAbi.arm(region, id, bytes)
    }
    fn status_record(&self) -> RecordAt {
        RunclaimAbi.status_record()
    }
    fn timing_record(&self) -> RecordAt {
        RunclaimAbi.timing_record()
    }
    fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError> {
        RunclaimAbi.decode_status(id, bytes)
    }
    fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError> {
        RunclaimAbi.decode_timing(id, bytes)
    }
}

/// Whose buffer device A's adapter names as its handshake region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// Device A's own (the negative control: accepted).
    Own,
    /// Device B's, on the same NPU (refused).
    Other,
}

/// Bytes of the borrowed buffer (more than a handshake region of the
/// default `block_dim`).
const BYTES: usize = 1024;
/// What the borrowed buffer holds before the run.
const FILL: u8 = 0x5a;

/// What became of device A's run, and of the buffer it named.
#[derive(Debug)]
pub struct Outcome {
    /// `Ok`: launched, fenced and finalized with the right value. `Err`:
    /// the launch's error kind, the run having come back `Prepared`.
    pub launch: Result<(), ErrorKind>,
    /// Bytes of the named buffer that changed.
    pub changed: usize,
}

/// Opens device A on `a` (with the [`Borrowing`] adapter) and device B on
/// `b`, fills a buffer of `whose` device, and runs one `RunSpec` run on A
/// with that buffer as its handshake region. A refused launch is checked
/// to be graded as refused before any submission: the prepared run comes
/// back, nothing is in flight, the runner is not poisoned, and the run
/// that came back launches and computes once the adapter names the slot's
/// own region again.
pub fn run_with_borrowed_handshake<D: Driver + 'static>(a: D, b: D, whose: Whose) -> Outcome {
    let handshake = Arc::new(Mutex::new(None));
    let adapter = Borrowing {
        handshake: Arc::clone(&handshake),
    };
    let config = DeviceConfig::default().max_elements(4);
    let mut dev_a = Device::<_, 2>::open(a, config.clone().kernel_abi(adapter)).expect("open A");
    let dev_b = Device::<_, 2>::open(b, config).expect("open B");
    let mut named: DeviceBuffer<u8> = match whose {
        Whose::Own => dev_a.alloc_buffer(BYTES),
        Whose::Other => dev_b.alloc_buffer(BYTES),
    }
    .expect("the named buffer");
    pick(whose, &dev_a, &dev_b)
        .write_buffer(&mut named, 0, &[FILL; BYTES])
        .expect("fill the named buffer");
    let lend = |span| *handshake.lock().unwrap_or_else(PoisonError::into_inner) = span;
    lend(Some(DevSpan::new(named.addr(), BYTES as u64)));
    let launch = {
        let runner = dev_a
            .publish(&[Callable::program("inc", &Program::new().add(1))])
            .expect("publish on A");
        let code = runner.code("inc").expect("the callable");
        let token = runner.take_slot::<0>().expect("slot 0");
        let prepared = runner
            .prepare(token, RunSpec::new(code, Input::Host(&[41])))
            .expect("prepare");
        match prepared.launch() {
            Ok(run) => {
                let mut out = Outputs::<0>::new(1);
                run.fence()
                    .expect("fence")
                    .finalize(&mut out)
                    .expect("finalize");
                assert_eq!(out.values(), &[42], "the run computed");
                Ok(())
            }
            Err(e) => {
                assert_eq!(e.action(), Action::Launch);
                let kind = e.kind().clone();
                let back = e
                    .into_value()
                    .expect("refused before any submission: the run comes back");
                let health = runner.device().health();
                assert_eq!(health.in_flight, 0, "nothing was submitted");
                assert!(health.poisoned.is_none(), "a refusal poisons nothing");
                lend(None);
                let mut out = Outputs::<0>::new(1);
                back.launch()
                    .expect("the run that came back launches with its own regions")
                    .fence()
                    .expect("fence")
                    .finalize(&mut out)
                    .expect("finalize");
                assert_eq!(out.values(), &[42], "the run that came back computed");
                Err(kind)
            }
        }
    };
    let mut after = vec![0u8; BYTES];
    pick(whose, &dev_a, &dev_b)
        .read_buffer(&mut named, 0, &mut after)
        .expect("read the named buffer back");
    let changed = after.iter().filter(|&&b| b != FILL).count();
    Outcome { launch, changed }
}

/// The device `whose` names.
fn pick<'d, D: Driver>(whose: Whose, a: &'d Device<D, 2>, b: &'d Device<D, 2>) -> &'d Device<D, 2> {
    match whose {
        Whose::Own => a,
        Whose::Other => b,
    }
}

/// `true` when `kind` is a driver's refusal of a device range.
pub fn is_bad_address(kind: &ErrorKind) -> bool {
    matches!(kind, ErrorKind::Driver(e) if matches!(e.kind(), DriverErrorKind::BadAddress { .. }))
}
