//! Staging through the `acl` driver over the fake runtime, whose fresh
//! allocations hold [`FRESH_BYTE`] (0xA5), as real device memory holds
//! whatever was left in it: a device zeroes each slot's arena — its
//! staging region included — once at open, and a host output the kernel
//! leaves unwritten comes back zero: never fresh memory's bytes, never a
//! previous run's.

mod common;

use std::sync::{Arc, Mutex, PoisonError};

use common::abi::each;
use common::acl::open;
use fake_acl::control::FRESH_BYTE;
use runclaim::driver::abi::{
    AbiError, AicpuBlock, BlockBuf, BlockWriter, DevSpan, Dir, Home, KernelAbi, Program, RecordAt,
    RecordError, RegionSpec, RunIdentity, RunView, RunclaimAbi, Shape, Verdict, WallRecord,
};
use runclaim::driver::{DevPtr, Driver};
use runclaim::sim::SimConfig;
use runclaim::{Callable, Device, DeviceConfig, Runner, Workload};

fn inc() -> Callable {
    Callable::program("inc", &Program::new().add(1))
}

/// One serial run of `work` in slot `I`.
fn serial<D: Driver, const I: usize>(runner: &Runner<'_, D, 2>, work: &mut Workload<'_>)
where
    runclaim::contract::Slot<I>: runclaim::contract::SlotOf<2>,
{
    let token = runner.take_slot::<I>().unwrap();
    let run = runner.prepare(token, work).unwrap().launch().unwrap();
    drop(run.fence().unwrap().finalize().unwrap());
}

/// The control for the tests below: what the fake hands out is not zero.
#[test]
fn the_fakes_fresh_memory_holds_bytes_nobody_wrote() {
    let d = open(&SimConfig::default(), false);
    let p = d.alloc(100).unwrap();
    let mut back = [0u8; 100];
    d.copy_from_device(&mut back, p).unwrap();
    assert_eq!(back, [FRESH_BYTE; 100]);
    d.free(p).unwrap();
}

/// On a fresh device, then after a run that staged other bytes: outputs
/// the kernel does not write (it reads nothing, so writes nothing), one
/// borrowed and one owned, come back zero; an output it writes in part is
/// zero past what it wrote.
#[test]
fn a_host_output_never_shows_fresh_memory_or_a_previous_runs_bytes() {
    each(|abi| {
        let driver = open(&abi.sim(SimConfig::default()), false);
        let mut dev = Device::<_, 2>::open(driver, abi.config()).unwrap();
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let mut z = [0x1111_1111u32; 16];
        serial::<_, 0>(&runner, Workload::new(f).output(&mut z));
        assert_eq!(z, [0; 16], "{abi:?}: not the fresh memory's bytes");
        let mut y = [0u32; 16];
        serial::<_, 0>(
            &runner,
            Workload::new(f).input(&[0xDEAD_BEEFu32; 16]).output(&mut y),
        );
        assert_eq!(y, [0xDEAD_BEF0; 16], "{abi:?}");
        let mut w = Workload::new(f);
        w.output(&mut z).owned(vec![0x2222_2222u32; 16], Dir::Out);
        serial::<_, 0>(&runner, &mut w);
        assert_eq!(w.get::<u32>(1).ok(), Some(&[0; 16][..]), "{abi:?}");
        drop(w);
        assert_eq!(z, [0; 16], "{abi:?}: not the previous run's bytes");
        let mut part = [0x3333_3333u32; 8];
        serial::<_, 1>(
            &runner,
            Workload::new(f).input(&[5u32, 6]).output(&mut part),
        );
        assert_eq!(part, [6, 7, 0, 0, 0, 0, 0, 0], "{abi:?}");
    });
}

/// [`RunclaimAbi`], remembering the address of the last run's first
/// staged tensor: with the first host tensor at offset 0, where its slot's
/// staging region starts.
struct Watching {
    staged: Arc<Mutex<Option<DevPtr>>>,
}

/// The address `span` starts at, as a block's writer records it.
fn start_of(span: DevSpan) -> Option<DevPtr> {
    let mut block = BlockBuf::with_capacity(8, 1);
    let mut w = block.writer();
    w.grow(8).ok()?;
    w.put_addr(0, span).ok()?;
    block.args().fields().first().map(|f| f.addr)
}

impl KernelAbi for Watching {
    fn name(&self) -> &'static str {
        "watching"
    }
    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
        RunclaimAbi.regions(shape, out)
    }
    fn max_block_bytes(&self) -> usize {
        RunclaimAbi.max_block_bytes()
    }
    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
        let first = run.tensors().iter().find(|t| t.home == Home::Staging);
        *self.staged.lock().unwrap_or_else(PoisonError::into_inner) =
            first.and_then(|t| start_of(t.span));
        RunclaimAbi.aicore_block(run, w)
    }
    fn aicpu_block(
        &self,
        run: &RunView<'_>,
        w: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError> {
        RunclaimAbi.aicpu_block(run, w)
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

/// Each slot's whole staging region reads back zero after one run of a
/// 4-byte output in it: the run cleared its output, open the rest (the
/// fake handed the memory out holding 0xA5).
#[test]
fn each_slots_staging_is_zeroed_at_open() {
    let staged = Arc::new(Mutex::new(None));
    let cfg = DeviceConfig::default()
        .staging_bytes(4096)
        .kernel_abi(Watching {
            staged: Arc::clone(&staged),
        });
    let mut dev = Device::<_, 2>::open(open(&SimConfig::default(), false), cfg).unwrap();
    let bytes = dev.staging_bytes();
    let runner = dev.publish(&[inc()]).unwrap();
    let f = runner.code("inc").unwrap();
    let read_staging = || {
        let start = staged
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .expect("the run staged a tensor");
        let mut back = vec![0xEEu8; bytes];
        runner
            .device()
            .driver()
            .copy_from_device(&mut back, start)
            .unwrap();
        back
    };
    let mut y = [9u32; 1];
    serial::<_, 0>(&runner, Workload::new(f).output(&mut y));
    assert!(read_staging().iter().all(|&b| b == 0), "slot 0");
    serial::<_, 1>(&runner, Workload::new(f).output(&mut y));
    assert!(read_staging().iter().all(|&b| b == 0), "slot 1");
    assert_eq!(y, [0], "unwritten");
}
