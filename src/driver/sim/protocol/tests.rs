//! The a2a3 model driven through the [`Driver`] trait, with blocks built
//! here from the shared a2a3 layout (independently of any host adapter),
//! and the refusal of each protocol's blocks by the other.

#![allow(
    clippy::cast_possible_truncation,
    reason = "test sizes and values are small"
)]

use std::time::Duration;

use super::{
    A2a3Model, AicoreLaunch, AicpuLaunch, DeviceMemory, DeviceModel, ModelError, RunEnd,
    RunclaimModel, Task,
};
use crate::driver::abi::{
    BlockBuf, DevSpan, Dir, Program, RunArgs, StatusRecord, TensorArg, WallRecord, WorkArgs,
    handshake_bytes,
};
use crate::driver::sim::trace::{TaskTag, TraceKind};
use crate::driver::sim::{
    Fault, Kernel, KernelError, LatencyModel, SimConfig, SimDriver, SimKernel,
};
use crate::driver::{
    CodeHandle, DevPtr, Driver, DriverError, DriverErrorKind, FaultKind, StreamId,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn a2a3(cfg: SimConfig) -> SimDriver {
    SimDriver::stepped(cfg.device_model(A2a3Model))
}

fn read(sim: &SimDriver, p: DevPtr, n: usize) -> Vec<u8> {
    let mut b = vec![0; n];
    sim.copy_from_device(&mut b, p).unwrap();
    b
}

fn u32s(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn pair(sim: &SimDriver) -> (StreamId, StreamId) {
    (sim.create_stream().unwrap(), sim.create_stream().unwrap())
}

fn program(sim: &SimDriver, p: &Program) -> CodeHandle {
    sim.register_code(&p.encode()).unwrap().handle
}

/// A tensor argument of a test run.
#[derive(Clone, Copy)]
struct T {
    ptr: DevPtr,
    bytes: u64,
    elem: u32,
    dir: Dir,
    staged: bool,
}

impl T {
    fn new(ptr: DevPtr, bytes: u64, dir: Dir) -> Self {
        T {
            ptr,
            bytes,
            elem: 4,
            dir,
            staged: false,
        }
    }
}

/// One slot's a2a3 regions, and the blocks of a run in it, written from
/// the shared layout (every offset below is the spec's).
struct Slot {
    image: DevPtr,
    result: DevPtr,
    timing: DevPtr,
    block_dim: u32,
    index: u32,
}

const RESULT: usize = 280;
const TIMING: usize = 80;
const PAYLOAD_MAX: usize = 64 + 128 * 256 + 8 * 128;

impl Slot {
    /// The regions, zeroed once (as at open), never again by the host.
    fn open(sim: &SimDriver, block_dim: u32, index: u32) -> Self {
        let image_bytes = 64 + 64 * block_dim as usize + PAYLOAD_MAX;
        let s = Slot {
            image: sim.alloc(image_bytes).unwrap(),
            result: sim.alloc(RESULT).unwrap(),
            timing: sim.alloc(TIMING).unwrap(),
            block_dim,
            index,
        };
        sim.memset(s.image, 0, image_bytes).unwrap();
        sim.memset(s.result, 0, RESULT).unwrap();
        sim.memset(s.timing, 0, TIMING).unwrap();
        s
    }

    fn image_bytes(&self) -> usize {
        64 + 64 * self.block_dim as usize + PAYLOAD_MAX
    }

    fn image_span(&self) -> DevSpan {
        DevSpan::new(self.image, self.image_bytes() as u64)
    }

    fn payload(&self) -> u64 {
        self.image.raw() + 64 + 64 * u64::from(self.block_dim)
    }

    /// `AicoreLaunchArgs`, 40 bytes.
    fn aicore_block(&self, epoch: u64) -> BlockBuf {
        let mut buf = BlockBuf::with_capacity(40, 1);
        let mut w = buf.writer();
        w.grow(40).unwrap();
        w.put_addr(0, self.image_span()).unwrap();
        w.put_u64(32, epoch).unwrap();
        buf
    }

    /// The launch envelope: `KernelArgs` in a 192-byte header, then the
    /// tensors (128 B each) and scalars.
    fn aicpu_block(&self, epoch: u64, tensors: &[T], scalars: &[u64]) -> BlockBuf {
        let n = 192 + 128 * tensors.len() + 8 * scalars.len();
        let mut buf = BlockBuf::with_capacity(n, 3 + tensors.len());
        let mut w = buf.writer();
        w.grow(192).unwrap();
        w.put_addr(0, self.image_span()).unwrap();
        w.put_addr(88, DevSpan::new(self.timing, TIMING as u64))
            .unwrap();
        w.put_addr(96, DevSpan::new(self.result, RESULT as u64))
            .unwrap();
        w.put_u64(104, epoch).unwrap();
        w.put_u32(116, 192).unwrap();
        w.put_u32(120, tensors.len() as u32).unwrap();
        w.put_u32(124, scalars.len() as u32).unwrap();
        w.put_u32(128, 1).unwrap();
        w.put_u32(136, self.block_dim).unwrap();
        w.put_u32(140, self.index).unwrap();
        for t in tensors {
            let at = w.grow(128).unwrap();
            let elements = t.bytes / u64::from(t.elem);
            w.put_addr(at, DevSpan::new(t.ptr, t.bytes)).unwrap();
            w.put_u64(at + 8, t.bytes).unwrap();
            w.put_u32(at + 36, 1).unwrap();
            w.put_u32(at + 40, t.elem).unwrap();
            w.put_bytes(at + 45, &[1, 1, t.dir.code() as u8]).unwrap();
            w.put_u64(at + 48, elements).unwrap();
            w.put_u64(at + 56, u64::from(t.staged)).unwrap();
            w.put_u64(at + 64, elements).unwrap();
            w.put_u64(at + 72, 1).unwrap();
        }
        for &v in scalars {
            let at = w.grow(8).unwrap();
            w.put_u64(at, v).unwrap();
        }
        assert_eq!(w.len(), n);
        buf
    }

    /// Launches both kernels of a run.
    fn launch(
        &self,
        sim: &SimDriver,
        (aic, cpu): (StreamId, StreamId),
        code: CodeHandle,
        epoch: u64,
        tensors: &[T],
        scalars: &[u64],
    ) {
        sim.launch_aicore(aic, code, self.block_dim, self.aicore_block(epoch).args())
            .unwrap();
        sim.launch_aicpu(cpu, self.aicpu_block(epoch, tensors, scalars).args())
            .unwrap();
    }

    fn result(&self, sim: &SimDriver) -> Vec<u8> {
        read(sim, self.result, RESULT)
    }

    fn timing(&self, sim: &SimDriver) -> Vec<u8> {
        read(sim, self.timing, TIMING)
    }

    fn record(&self, sim: &SimDriver, w: u32) -> Vec<u8> {
        read(sim, self.image.offset(64 + 64 * w as usize), 64)
    }

    fn header(&self, sim: &SimDriver) -> Vec<u8> {
        read(sim, self.image, 64)
    }

    /// `(published, verdict, completion_code, code_source)`.
    fn verdict(&self, sim: &SimDriver) -> (u64, u32, u32, u32) {
        let r = self.result(sim);
        (
            u64_at(&r, 0),
            u32_at(&r, 12),
            u32_at(&r, 16),
            u32_at(&r, 20),
        )
    }

    /// Every word a completed run `epoch` leaves: the handshake records,
    /// the image header, the payload header, the timing record.
    fn check_completed(&self, sim: &SimDriver, epoch: u64, tensors: u32, scalars: u32) {
        for w in 0..self.block_dim {
            let r = self.record(sim, w);
            assert_eq!(u32_at(&r, 0), 0, "aicpu_ready (legacy)");
            assert_eq!(u32_at(&r, 4), w + 1, "aicore_done");
            assert_eq!(u64_at(&r, 8), self.payload(), "task");
            assert_eq!(u32_at(&r, 16), 0, "core_type");
            assert_eq!(u32_at(&r, 20), w, "physical_core_id");
            assert_eq!(u64_at(&r, 24), epoch, "report_epoch");
            assert_eq!(u64_at(&r, 32), epoch, "task_epoch");
            assert_eq!(u64_at(&r, 40), epoch, "done_epoch");
            assert_eq!(u32_at(&r, 48), 0, "error");
            assert_eq!(u64_at(&r, 56), epoch, "release_epoch");
        }
        let h = self.header(sim);
        assert_eq!(u64_at(&h, 0), epoch, "core_start_epoch");
        let p = read(sim, DevPtr::from_raw(self.payload()), 64);
        assert_eq!(
            (u64_at(&p, 0), u32_at(&p, 8), u32_at(&p, 12)),
            (epoch, tensors, scalars),
            "payload header"
        );
        assert_eq!(u32_at(&p, 16), self.index, "the payload's slot (simulator)");
        let t = self.timing(sim);
        assert_eq!(u64_at(&t, 0), epoch, "timing epoch");
        let (start, end) = (u64_at(&t, 16), u64_at(&t, 24));
        assert!(start <= end, "start {start} <= end {end}");
        assert_eq!(u64_at(&t, 32), 50_000_000, "sys_cnt_hz");
        assert_eq!(u32_at(&t, 40), 0, "device_id");
        assert_eq!(u32_at(&t, 44), self.index, "slot");
        let (aic, cpu, dispatch) = (u64_at(&t, 48), u64_at(&t, 56), u64_at(&t, 64));
        assert_eq!(aic, u64_at(&h, 8), "aicore_start_cycles is core_start");
        assert_eq!(start, aic.min(cpu));
        assert!(aic <= dispatch && cpu <= dispatch && dispatch <= end);
        assert_eq!(u64_at(&t, 8), (end - start) * 20, "wall_ns at 50 MHz");
        assert_eq!(u32_at(&t, 72), self.block_dim);
    }
}

#[test]
fn a2a3_runs_twice_in_one_slot_with_no_host_clear_between() {
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let inc = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 3, 1);
    let (x, y) = (sim.alloc(40).unwrap(), sim.alloc(40).unwrap());
    sim.copy_to_device(x, &u32s(&[10, 20, 30, 40, 50, 60, 70, 80, 90, 100]))
        .unwrap();
    let io = [T::new(x, 40, Dir::In), T::new(y, 40, Dir::Out)];
    slot.launch(&sim, (aic, cpu), inc, 5, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
    sim.sync_stream(aic, SEC).unwrap();
    assert_eq!(
        read(&sim, y, 40),
        u32s(&[11, 21, 31, 41, 51, 61, 71, 81, 91, 101])
    );
    assert_eq!(slot.verdict(&sim), (5, 1, 0, 0), "published, Ok");
    slot.check_completed(&sim, 5, 2, 0);
    let first_end = u64_at(&slot.timing(&sim), 24);

    // Run 6 in the same regions, chained (y -> x): nothing cleared, every
    // word of run 5 still there, and ignored.
    let chained = [T::new(y, 40, Dir::In), T::new(x, 40, Dir::Out)];
    slot.launch(&sim, (aic, cpu), inc, 6, &chained, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
    sim.sync_stream(aic, SEC).unwrap();
    assert_eq!(
        read(&sim, x, 40),
        u32s(&[12, 22, 32, 42, 52, 62, 72, 82, 92, 102])
    );
    assert_eq!(slot.verdict(&sim), (6, 1, 0, 0));
    slot.check_completed(&sim, 6, 2, 0);
    assert!(u64_at(&slot.timing(&sim), 16) >= first_end);
    // The trace names each run by its epoch.
    let finished: Vec<(u64, TaskTag)> = sim
        .trace()
        .iter()
        .filter_map(|t| match t.what {
            TraceKind::Finished(tag @ (TaskTag::Aicore | TaskTag::Aicpu)) => Some((t.run, tag)),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 4);
    assert!(finished.iter().filter(|f| f.0 == 5).count() == 2);
    assert!(finished.iter().filter(|f| f.0 == 6).count() == 2);
    let s = sim.stats();
    assert_eq!(
        (s.aicore_kernels, s.aicpu_kernels, s.kernel_faults),
        (2, 2, 0)
    );
}

#[test]
fn a2a3_rust_kernel_reads_its_run_from_the_task_payload() {
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    // y = a*x + b per u32 element, a and b the scalars; worker 1 of a
    // run whose second scalar is 0 fails with 7.
    let k = sim.register_kernel(SimKernel::new(|k| {
        let (a, b) = (
            k.scalar(0).unwrap_or(0) as u32,
            k.scalar(1).unwrap_or(0) as u32,
        );
        if k.run().header().handshake != 0 || k.slot() != 2 || k.tensors().len() != 2 {
            return Err(KernelError::Fail(99));
        }
        let n = k.tensor(0).map_or(0, |t| t.elements());
        let share = k.share(n);
        let mut v = vec![0u32; (share.end - share.start) as usize];
        k.read_tensor(0, share.start, &mut v)?;
        for x in &mut v {
            *x = x.wrapping_mul(a).wrapping_add(b);
        }
        k.write_tensor(1, share.start, &v)?;
        if b == 0 && k.worker() == 1 {
            return Err(KernelError::Fail(7));
        }
        Ok(())
    }));
    let code = sim.register_code(k.as_bytes()).unwrap().handle;
    let slot = Slot::open(&sim, 2, 2);
    let (x, y) = (sim.alloc(16).unwrap(), sim.alloc(16).unwrap());
    sim.copy_to_device(x, &u32s(&[1, 2, 3, 4])).unwrap();
    let io = [
        T {
            staged: true,
            ..T::new(x, 16, Dir::In)
        },
        T::new(y, 16, Dir::InOut),
    ];
    slot.launch(&sim, (aic, cpu), code, 11, &io, &[3, 5]);
    sim.sync_stream(cpu, SEC).unwrap();
    assert_eq!(read(&sim, y, 16), u32s(&[8, 11, 14, 17]));
    assert_eq!(slot.verdict(&sim), (11, 1, 0, 0));
    slot.check_completed(&sim, 11, 2, 2);
    // Second run, same regions, other scalars: the payload is rewritten
    // and read again; worker 1 fails, its code is the run's.
    slot.launch(&sim, (aic, cpu), code, 12, &io, &[2, 0]);
    sim.sync_stream(cpu, SEC).unwrap();
    assert_eq!(read(&sim, y, 16), u32s(&[2, 4, 6, 8]));
    assert_eq!(slot.verdict(&sim), (12, 2, 7, 1), "Error 7 from the header");
    assert_eq!(u32_at(&slot.record(&sim, 1), 48), 7, "worker 1's error");
    assert_eq!(u32_at(&slot.record(&sim, 0), 48), 0);
    sim.sync_stream(aic, SEC).unwrap();
}

#[test]
fn a2a3_run_error_fault_is_an_error_verdict_with_its_code_and_the_next_run_succeeds() {
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let inc = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    sim.inject(Fault::RunError { nth: 1, code: 507 });
    slot.launch(&sim, (aic, cpu), inc, 3, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
    assert_eq!(slot.verdict(&sim), (3, 2, 507, 1));
    // The workers themselves succeeded; the outputs were written.
    assert_eq!(read(&sim, y, 8), u32s(&[1, 1]));
    // A program's own fail code travels the same way.
    let fail = program(&sim, &Program::new().add(2).fail(9));
    slot.launch(&sim, (aic, cpu), fail, 4, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
    assert_eq!(slot.verdict(&sim), (4, 2, 9, 1));
    // The armed fault fired once: the next run is Ok.
    slot.launch(&sim, (aic, cpu), inc, 5, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
    assert_eq!(slot.verdict(&sim), (5, 1, 0, 0));
    sim.sync_stream(aic, SEC).unwrap();
    slot.check_completed(&sim, 5, 2, 0);
}

#[test]
fn a2a3_kernel_faults_fault_the_stream_and_leave_no_published_result() {
    let cfg = SimConfig::default().watchdog(Duration::from_micros(200));
    for kernel in [Kernel::Aicore, Kernel::Aicpu] {
        let sim = a2a3(cfg.clone());
        let (aic, cpu) = pair(&sim);
        let inc = program(&sim, &Program::new().add(1));
        let slot = Slot::open(&sim, 2, 0);
        let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
        let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
        sim.inject(Fault::KernelFault { kernel, nth: 1 });
        slot.launch(&sim, (aic, cpu), inc, 8, &io, &[]);
        let (faulted, kind, other, timeout) = match kernel {
            Kernel::Aicore => (
                aic,
                FaultKind::AicoreException,
                cpu,
                FaultKind::AicpuTimeout,
            ),
            Kernel::Aicpu => (
                cpu,
                FaultKind::AicpuException,
                aic,
                FaultKind::AicoreTimeout,
            ),
        };
        let e = sim.sync_stream(faulted, SEC).unwrap_err();
        assert_eq!(e.kind(), &DriverErrorKind::KernelFault(kind));
        // Its partner waits for it until the watchdog.
        let e = sim.sync_stream(other, SEC).unwrap_err();
        assert_eq!(e.kind(), &DriverErrorKind::KernelFault(timeout));
        assert_eq!(slot.verdict(&sim).0, 0, "never published");
        assert_eq!(u64_at(&slot.timing(&sim), 0), 0);
        assert_eq!(sim.stats().kernel_faults, 2);
    }
}

#[test]
fn a2a3_a_report_of_the_previous_epoch_is_not_accepted() {
    let cfg = SimConfig::default().watchdog(Duration::from_micros(300));
    let sim = a2a3(cfg);
    let (aic, cpu) = pair(&sim);
    let inc = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 1, 0);
    let (x, y) = (sim.alloc(4).unwrap(), sim.alloc(4).unwrap());
    let io = [T::new(x, 4, Dir::In), T::new(y, 4, Dir::Out)];
    slot.launch(&sim, (aic, cpu), inc, 1, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
    sim.sync_stream(aic, SEC).unwrap();
    // A complete report of epoch 1, written by hand (run 1 left the same).
    let record = slot.image.offset(64);
    sim.copy_to_device(record.offset(4), &1u32.to_le_bytes())
        .unwrap();
    sim.copy_to_device(record.offset(24), &1u64.to_le_bytes())
        .unwrap();
    // Run 2's AICPU kernel alone: its AICore kernel never starts.
    sim.launch_aicpu(cpu, slot.aicpu_block(2, &io, &[]).args())
        .unwrap();
    let e = sim.sync_stream(cpu, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicpuTimeout),
        "the stale report was not accepted: the AICPU kernel waited until the watchdog"
    );
    let r = slot.record(&sim, 0);
    assert_eq!(u64_at(&r, 32), 1, "nothing was dispatched to run 2");
    assert_eq!(slot.verdict(&sim).0, 1, "run 1's result, never run 2's");

    // The twin: the same report carrying epoch 3 is accepted by run 3's
    // AICPU kernel, which dispatches (and then waits for a worker that
    // never computes) — the epoch alone made the difference.
    let cpu = sim.create_stream().unwrap();
    sim.copy_to_device(record.offset(24), &3u64.to_le_bytes())
        .unwrap();
    sim.launch_aicpu(cpu, slot.aicpu_block(3, &io, &[]).args())
        .unwrap();
    let e = sim.sync_stream(cpu, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicpuTimeout)
    );
    let r = slot.record(&sim, 0);
    assert_eq!(
        (u64_at(&r, 8), u64_at(&r, 32)),
        (slot.payload(), 3),
        "dispatched"
    );
    assert_eq!(slot.verdict(&sim).0, 1);
}

#[test]
fn a2a3_a_payload_of_another_epoch_faults_the_worker() {
    let sim = a2a3(SimConfig::default().watchdog(Duration::from_micros(300)));
    let (aic, cpu) = pair(&sim);
    let inc = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 1, 0);
    let (x, y) = (sim.alloc(4).unwrap(), sim.alloc(4).unwrap());
    let io = [T::new(x, 4, Dir::In), T::new(y, 4, Dir::Out)];
    sim.launch_aicpu(cpu, slot.aicpu_block(4, &io, &[]).args())
        .unwrap();
    // The AICPU kernel starts: it writes the payload under epoch 4.
    sim.step_stream(cpu);
    let payload = DevPtr::from_raw(slot.payload());
    assert_eq!(u64_at(&read(&sim, payload, 8), 0), 4);
    sim.copy_to_device(payload, &3u64.to_le_bytes()).unwrap();
    sim.launch_aicore(aic, inc, 1, slot.aicore_block(4).args())
        .unwrap();
    let e = sim.sync_stream(aic, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicoreException)
    );
    assert_eq!(read(&sim, y, 4), u32s(&[0]), "nothing computed");
    let e = sim.sync_stream(cpu, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicpuTimeout)
    );
}

#[test]
fn a2a3_a_payload_naming_memory_out_of_range_faults_the_worker() {
    let sim = a2a3(SimConfig::default().watchdog(Duration::from_micros(300)));
    let (aic, cpu) = pair(&sim);
    let inc = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    sim.launch_aicpu(cpu, slot.aicpu_block(6, &io, &[]).args())
        .unwrap();
    sim.step_stream(cpu);
    // The payload's tensors now span a terabyte each, the first from the
    // top of the address space: the workers fault, their offsets neither
    // wrap nor size a buffer.
    let tensors = slot.payload() + 64;
    let huge = (1u64 << 40).to_le_bytes();
    sim.copy_to_device(DevPtr::from_raw(tensors), &(u64::MAX - 3).to_le_bytes())
        .unwrap();
    sim.copy_to_device(DevPtr::from_raw(tensors + 8), &huge)
        .unwrap();
    sim.copy_to_device(DevPtr::from_raw(tensors + 128 + 8), &huge)
        .unwrap();
    sim.launch_aicore(aic, inc, 2, slot.aicore_block(6).args())
        .unwrap();
    let e = sim.sync_stream(aic, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicoreException)
    );
    assert_eq!(read(&sim, y, 8), u32s(&[0, 0]));
    assert!(sim.sync_stream(cpu, SEC).is_err());
}

#[test]
fn a2a3_an_image_zeroed_mid_run_hangs_it_until_the_watchdog() {
    let sim = a2a3(SimConfig::default().watchdog(Duration::from_micros(300)));
    let (aic, cpu) = pair(&sim);
    let inc = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    slot.launch(&sim, (aic, cpu), inc, 1, &io, &[]);
    // Both kernels start and both workers report, then the host stomps.
    for _ in 0..3 {
        sim.step_stream(aic);
    }
    assert_eq!(u32_at(&slot.record(&sim, 1), 4), 2, "worker 1 reported");
    sim.memset(slot.image, 0, slot.image_bytes()).unwrap();
    let e = sim.sync_stream(cpu, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicpuTimeout)
    );
    assert!(sim.sync_stream(aic, SEC).is_err());
    assert_eq!(slot.verdict(&sim).0, 0);
}

#[test]
fn a2a3_stale_code_is_counted_and_computes_the_old_program() {
    let sim = a2a3(SimConfig::default().code_slots(1));
    let inc = program(&sim, &Program::new().add(1));
    let aic = sim.create_stream().unwrap();
    let cpu = sim.create_stream().unwrap();
    // `inc` is released, so `dbl` replaces it at the only code address;
    // `aic` was created before: its cache still holds `inc`.
    sim.release_code(inc).unwrap();
    let dbl = program(&sim, &Program::new().mul(2));
    let slot = Slot::open(&sim, 1, 0);
    let (x, y) = (sim.alloc(4).unwrap(), sim.alloc(4).unwrap());
    sim.copy_to_device(x, &u32s(&[5])).unwrap();
    let io = [T::new(x, 4, Dir::In), T::new(y, 4, Dir::Out)];
    slot.launch(&sim, (aic, cpu), dbl, 9, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
    assert_eq!(read(&sim, y, 4), u32s(&[6]), "the old code: 5 + 1");
    assert_eq!(sim.stats().stale_executions, 1);
    assert!(
        sim.trace()
            .iter()
            .any(|t| t.what == TraceKind::StaleCode && t.run == 9)
    );
    // A fresh stream computes with the new code.
    let aic = sim.create_stream().unwrap();
    slot.launch(&sim, (aic, cpu), dbl, 10, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
    assert_eq!(read(&sim, y, 4), u32s(&[10]));
    assert_eq!(sim.stats().stale_executions, 1);
}

#[test]
fn a2a3_in_real_time_the_records_follow_the_latency_model() {
    let lat = LatencyModel::zero().kernel(Duration::from_micros(400));
    let sim = SimDriver::real_time(
        SimConfig::default()
            .latency(lat)
            .watchdog(Duration::from_secs(10))
            .device_model(A2a3Model),
    );
    let (aic, cpu) = pair(&sim);
    let inc = program(&sim, &Program::new().add(1));
    // A timed Rust kernel: its time is asked for when the first worker is
    // dispatched (its run is in the payload), with that run.
    let timed = sim.register_kernel(
        SimKernel::new(|_| Ok(()))
            .time(|run| Duration::from_micros(300 * run.scalar(0).unwrap_or(0))),
    );
    let timed = sim.register_code(timed.as_bytes()).unwrap().handle;
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    let ticks = |us: u64| us * 50;
    // Generous host timeouts: the bounds below are on the model's clock,
    // whatever the host's load.
    let wait = Duration::from_secs(20);
    for (epoch, code, scalar, at_least) in [(1, inc, 0, 400), (2, timed, 3, 900)] {
        slot.launch(&sim, (aic, cpu), code, epoch, &io, &[scalar]);
        sim.sync_stream(cpu, wait).unwrap();
        sim.sync_stream(aic, wait).unwrap();
        slot.check_completed(&sim, epoch, 2, 1);
        let t = slot.timing(&sim);
        let compute = u64_at(&t, 24) - u64_at(&t, 64);
        assert!(
            compute >= ticks(at_least),
            "run {epoch}: {compute} ticks from dispatch to end"
        );
        assert_eq!(slot.verdict(&sim), (epoch, 1, 0, 0));
    }
    assert_eq!(read(&sim, y, 8), u32s(&[1, 1]));
}

/// The runclaim blocks of a run whose every range is live.
fn runclaim_blocks(sim: &SimDriver, block_dim: u32) -> (BlockBuf, BlockBuf) {
    let hs = sim.alloc(handshake_bytes(block_dim)).unwrap();
    let wall = sim.alloc(WallRecord::SIZE).unwrap();
    let status = sim.alloc(StatusRecord::SIZE).unwrap();
    let (x, y) = (sim.alloc(16).unwrap(), sim.alloc(16).unwrap());
    let header = RunArgs {
        run_id: 1,
        slot: 0,
        block_dim,
        len: 4,
        input: x.raw(),
        output: y.raw(),
        handshake: hs.raw(),
        wall: wall.raw(),
        status: status.raw(),
    };
    let t = |p: DevPtr, dir| TensorArg {
        addr: p.raw(),
        bytes: 16,
        elem_size: 4,
        dir,
        staged: false,
    };
    let v2 = RunArgs {
        len: 0,
        input: 0,
        output: 0,
        ..header
    };
    (
        header.block(),
        WorkArgs::block(&v2, &[t(x, Dir::In), t(y, Dir::Out)], &[1]).unwrap(),
    )
}

fn invalid(r: Result<(), DriverError>) -> bool {
    matches!(
        r.map_err(|e| e.kind().clone()),
        Err(DriverErrorKind::InvalidArgument { .. })
    )
}

#[test]
fn blocks_of_the_other_protocol_are_refused_at_launch() {
    // runclaim's blocks on an a2a3 device.
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let (v1, v2) = runclaim_blocks(&sim, 2);
    for b in [&v1, &v2] {
        assert!(invalid(sim.launch_aicore(aic, code, 2, b.args())));
        assert!(invalid(sim.launch_aicpu(cpu, b.args())));
    }
    assert_eq!((sim.queued(aic), sim.queued(cpu)), (0, 0));

    // a2a3's blocks on a runclaim device (the default).
    let sim = SimDriver::stepped(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    assert!(invalid(sim.launch_aicore(
        aic,
        code,
        2,
        slot.aicore_block(1).args()
    )));
    for tensors in [&io[..], &[]] {
        assert!(invalid(
            sim.launch_aicpu(cpu, slot.aicpu_block(1, tensors, &[]).args())
        ));
    }
    assert_eq!((sim.queued(aic), sim.queued(cpu)), (0, 0));
    // The negative control: each block on its own protocol's device is
    // accepted.
    let (v1, _) = runclaim_blocks(&sim, 2);
    sim.launch_aicore(aic, code, 2, v1.args()).unwrap();
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    slot.launch(&sim, (aic, cpu), code, 1, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
}

#[test]
fn a2a3_blocks_that_break_the_layout_are_refused_before_anything_is_queued() {
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    let kind = |r: Result<(), DriverError>| r.unwrap_err().kind().clone();
    // Raw bytes (no recorded addresses): the model's own checks.
    let poke = |b: &BlockBuf, at: usize, bytes: &[u8]| {
        let mut v = b.args().bytes().to_vec();
        v[at..at + bytes.len()].copy_from_slice(bytes);
        BlockBuf::from_bytes(&v)
    };
    let core_block = slot.aicore_block(1);
    let cpu_block = slot.aicpu_block(1, &io, &[4]);
    for (at, b) in [
        (8, &[1u8][..]),
        (16, &[1]),
        (32, &[0; 8]),
        (0, &[0x10, 0, 0, 0, 0, 0, 0, 0]),
    ] {
        let bad = poke(&core_block, at, b);
        let k = kind(sim.launch_aicore(aic, code, 2, bad.args()));
        let want_bad_address = at == 0;
        assert_eq!(
            matches!(k, DriverErrorKind::BadAddress { .. }),
            want_bad_address,
            "AICore byte {at}: {k:?}"
        );
        assert!(want_bad_address || matches!(k, DriverErrorKind::InvalidArgument { .. }));
    }
    // The image must hold the launch's block_dim records.
    assert!(matches!(
        kind(sim.launch_aicore(
            aic,
            code,
            3,
            BlockBuf::from_bytes(core_block.args().bytes()).args()
        )),
        DriverErrorKind::BadAddress { .. }
    ));
    let refused_cpu = [
        (8, &[1u8][..]),      // regs
        (104, &[0; 8]),       // run_result_epoch 0
        (112, &[1]),          // profiling
        (116, &[0]),          // entry_args_offset
        (120, &[3]),          // a tensor count the length disagrees with
        (128, &[2]),          // entry_args_source
        (136, &[0, 0, 0, 0]), // block_dim 0
        (136, &[25]),         // above the maximum
        (150, &[1]),          // reserved
        (192 + 36, &[2]),     // ndims
        (192 + 45, &[0]),     // is_contiguous
        (192 + 46, &[0]),     // address_space: host
        (192 + 47, &[4]),     // direction
        (192 + 48, &[3]),     // shapes[0]
        (192 + 56, &[2]),     // staged
        (192 + 72, &[2]),     // strides[0]
        (192 + 100, &[1]),    // padding
    ];
    for (at, b) in refused_cpu {
        let bad = poke(&cpu_block, at, b);
        let k = kind(sim.launch_aicpu(cpu, bad.args()));
        assert!(
            matches!(k, DriverErrorKind::InvalidArgument { .. }),
            "AICPU byte {at}: {k:?}"
        );
    }
    for at in [0, 88, 96, 192] {
        let bad = poke(&cpu_block, at, &[0x10, 0, 0, 0, 0, 0, 0, 0]);
        let k = kind(sim.launch_aicpu(cpu, bad.args()));
        assert!(
            matches!(k, DriverErrorKind::BadAddress { addr: 0x10, .. }),
            "AICPU address at {at}: {k:?}"
        );
    }
    // A tensor size past its allocation.
    let big = [T::new(x, 8, Dir::In), T::new(y, 12, Dir::Out)];
    let bad = BlockBuf::from_bytes(slot.aicpu_block(1, &big, &[]).args().bytes());
    assert!(matches!(
        kind(sim.launch_aicpu(cpu, bad.args())),
        DriverErrorKind::BadAddress { .. }
    ));
    assert_eq!((sim.queued(aic), sim.queued(cpu)), (0, 0));
    // The negative control: the unmodified blocks, as raw bytes, run.
    sim.launch_aicore(
        aic,
        code,
        2,
        BlockBuf::from_bytes(core_block.args().bytes()).args(),
    )
    .unwrap();
    sim.launch_aicpu(cpu, BlockBuf::from_bytes(cpu_block.args().bytes()).args())
        .unwrap();
    sim.sync_stream(cpu, SEC).unwrap();
    assert_eq!(slot.verdict(&sim), (1, 1, 0, 0));
}

/// A model that panics where told, runclaim's elsewhere.
#[derive(Debug)]
struct Panicky {
    in_decode: bool,
}

impl DeviceModel for Panicky {
    fn name(&self) -> &'static str {
        "panicky"
    }
    fn decode_aicore(
        &self,
        b: &[u8],
        n: u32,
        max: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicoreLaunch, ModelError> {
        assert!(!self.in_decode, "a model bug at launch");
        RunclaimModel.decode_aicore(b, n, max, mem)
    }
    fn decode_aicpu(
        &self,
        b: &[u8],
        max: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicpuLaunch, ModelError> {
        RunclaimModel.decode_aicpu(b, max, mem)
    }
    fn report(&self, _: &AicoreLaunch, _: u32, _: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
        panic!("a model bug on the device")
    }
    fn task(
        &self,
        k: &AicoreLaunch,
        w: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<Task>, ModelError> {
        RunclaimModel.task(k, w, mem)
    }
    fn finish(
        &self,
        k: &AicoreLaunch,
        w: u32,
        code: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        RunclaimModel.finish(k, w, code, mem)
    }
    fn released(
        &self,
        k: &AicoreLaunch,
        w: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        RunclaimModel.released(k, w, mem)
    }
    fn accepted(
        &self,
        c: &AicpuLaunch,
        w: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        RunclaimModel.accepted(c, w, mem)
    }
    fn dispatch(
        &self,
        c: &AicpuLaunch,
        w: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        RunclaimModel.dispatch(c, w, mem)
    }
    fn task_done(
        &self,
        c: &AicpuLaunch,
        w: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<u32>, ModelError> {
        RunclaimModel.task_done(c, w, mem)
    }
    fn write_records(
        &self,
        c: &AicpuLaunch,
        e: &RunEnd,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        RunclaimModel.write_records(c, e, mem)
    }
    fn release(
        &self,
        c: &AicpuLaunch,
        w: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        RunclaimModel.release(c, w, mem)
    }
}

#[test]
fn a_panicking_model_refuses_the_launch_or_faults_the_kernel_and_poisons_nothing() {
    for in_decode in [true, false] {
        let sim = SimDriver::stepped(
            SimConfig::default()
                .watchdog(Duration::from_micros(200))
                .device_model(Panicky { in_decode }),
        );
        let (aic, cpu) = pair(&sim);
        let code = program(&sim, &Program::new());
        let (v1, _) = runclaim_blocks(&sim, 1);
        let r = sim.launch_aicore(aic, code, 1, v1.args());
        if in_decode {
            assert!(invalid(r));
            assert_eq!(sim.queued(aic), 0);
        } else {
            r.unwrap();
            sim.launch_aicpu(cpu, v1.args()).unwrap();
            let e = sim.sync_stream(aic, SEC).unwrap_err();
            assert_eq!(
                e.kind(),
                &DriverErrorKind::KernelFault(FaultKind::AicoreException)
            );
            assert!(sim.sync_stream(cpu, SEC).is_err());
        }
        // The simulator still answers.
        let p = sim.alloc(4).unwrap();
        sim.free(p).unwrap();
        assert_eq!(sim.config().device_model.name(), "panicky");
    }
}

#[test]
fn the_runclaim_model_is_the_default_and_configs_compare_models_by_name() {
    assert_eq!(
        SimConfig::default().device_model.name(),
        RunclaimModel.name()
    );
    let a = SimConfig::default().device_model(A2a3Model);
    assert_ne!(a, SimConfig::default());
    assert_eq!(a, SimConfig::default().device_model(A2a3Model));
    assert_eq!(a2a3(SimConfig::default()).config(), a);
    assert!(format!("{a:?}").contains("ModelHandle(\"a2a3\")"));
    // A run on the default model: runclaim's records, as before.
    let sim = SimDriver::stepped(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let (v1, _) = runclaim_blocks(&sim, 2);
    sim.launch_aicore(aic, code, 2, v1.args()).unwrap();
    sim.launch_aicpu(cpu, v1.args()).unwrap();
    sim.sync_stream(cpu, MS).unwrap();
    let a = RunArgs::from_bytes(v1.args().bytes()).unwrap();
    let st = StatusRecord::from_bytes(&read(&sim, DevPtr::from_raw(a.status), 16)).unwrap();
    assert_eq!((st.run_id, st.state, st.code), (1, StatusRecord::DONE, 0));
    let w = WallRecord::from_bytes(&read(&sim, DevPtr::from_raw(a.wall), 48)).unwrap();
    assert_eq!((w.run_id, w.slot, w.block_dim), (1, 0, 2));
    assert!(w.aicore_start <= w.dispatched && w.dispatched <= w.end);
}
