//! The simulator's device models driven through the [`Driver`] trait:
//! the a2a3 model with blocks its adapter ([`A2a3Abi`]) writes and words
//! read at the offsets of the one a2a3 layout (`a2a3.rs`), the refusal of
//! each protocol's blocks by the other and a panicking model
//! (`models.rs`), and the golden bytes — written by hand from the
//! reference's headers — that both the adapter and the model must match
//! (`golden.rs`).

#![allow(
    clippy::cast_possible_truncation,
    reason = "test sizes and values are small"
)]

mod a2a3;
mod golden;
mod models;
mod refusals;

use std::time::Duration;

use super::{
    A2a3Model, AicoreLaunch, AicpuLaunch, DeviceMemory, DeviceModel, ModelError, RunEnd,
    RunclaimModel, Task,
};
use crate::driver::abi::a2a3_layout::{
    aicore_args, envelope, handshake, image, kernel_args, payload, tensor,
};
use crate::driver::abi::{
    A2a3Abi, A2a3Result, A2a3Timing, BlockBuf, DevSpan, Dir, Home, KernelAbi, Program, RunArgs,
    RunIdentity, RunView, Shape, StatusRecord, TensorArg, TensorView, WallRecord, WorkArgs,
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

    /// As the adapter sees it.
    fn view(&self) -> TensorView {
        TensorView {
            span: DevSpan::new(self.ptr, self.bytes),
            elem_size: self.elem,
            dir: self.dir,
            home: if self.staged {
                Home::Staging
            } else {
                Home::Buffer
            },
        }
    }
}

/// One slot's a2a3 regions, sized by the adapter, and the blocks of a run
/// in it, written by the adapter.
struct Slot {
    image: DevPtr,
    result: DevPtr,
    timing: DevPtr,
    block_dim: u32,
    index: u32,
    bytes: [usize; 3],
}

impl Slot {
    /// The regions, zeroed once (as at open), never again by the host.
    fn open(sim: &SimDriver, block_dim: u32, index: u32) -> Self {
        let mut specs = Vec::new();
        A2a3Abi
            .regions(&Shape::new(block_dim, 1), &mut specs)
            .unwrap();
        let bytes = [specs[0].bytes, specs[1].bytes, specs[2].bytes];
        let [image, result, timing] = bytes.map(|n| {
            let p = sim.alloc(n).unwrap();
            sim.memset(p, 0, n).unwrap();
            p
        });
        Slot {
            image,
            result,
            timing,
            block_dim,
            index,
            bytes,
        }
    }

    fn image_bytes(&self) -> usize {
        self.bytes[A2a3Abi::IMAGE]
    }

    fn payload(&self) -> u64 {
        self.image.raw() + image::payload(self.block_dim).unwrap() as u64
    }

    /// The adapter's view of run `epoch` in this slot.
    fn blocks(&self, epoch: u64, tensors: &[T], scalars: &[u64]) -> (BlockBuf, BlockBuf) {
        let regions = [self.image, self.result, self.timing]
            .iter()
            .zip(self.bytes)
            .map(|(&p, n)| DevSpan::new(p, n as u64))
            .collect::<Vec<_>>();
        let id = RunIdentity {
            run_id: epoch,
            epoch,
            slot: self.index,
            block_dim: self.block_dim,
        };
        let views: Vec<_> = tensors.iter().map(T::view).collect();
        let run = RunView::new(id, &regions, &views, scalars);
        let mut core = BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 1);
        A2a3Abi.aicore_block(&run, &mut core.writer()).unwrap();
        let mut cpu = BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 3 + tensors.len());
        A2a3Abi.aicpu_block(&run, &mut cpu.writer()).unwrap();
        (core, cpu)
    }

    /// `AicoreLaunchArgs`.
    fn aicore_block(&self, epoch: u64) -> BlockBuf {
        self.blocks(epoch, &[], &[]).0
    }

    /// The launch envelope.
    fn aicpu_block(&self, epoch: u64, tensors: &[T], scalars: &[u64]) -> BlockBuf {
        self.blocks(epoch, tensors, scalars).1
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
        let (aicore, aicpu) = self.blocks(epoch, tensors, scalars);
        sim.launch_aicore(aic, code, self.block_dim, aicore.args())
            .unwrap();
        sim.launch_aicpu(cpu, aicpu.args()).unwrap();
    }

    /// The timing record as the adapter decodes it.
    fn timing(&self, sim: &SimDriver) -> A2a3Timing {
        A2a3Timing::from_bytes(&read(sim, self.timing, A2a3Timing::SIZE)).unwrap()
    }

    /// Worker `w`'s handshake record.
    fn record(&self, sim: &SimDriver, w: u32) -> Vec<u8> {
        let at = image::worker(w).unwrap();
        read(sim, self.image.offset(at), handshake::SIZE)
    }

    /// `(published, verdict, completion_code, code_source)`.
    fn verdict(&self, sim: &SimDriver) -> (u64, u32, u32, u32) {
        let r = A2a3Result::from_bytes(&read(sim, self.result, A2a3Result::SIZE)).unwrap();
        let code = r.completion_code.cast_unsigned();
        (r.published, r.verdict, code, r.code_source)
    }

    /// Every word a completed run `epoch` leaves: the handshake records,
    /// the image header, the payload header, the timing record.
    fn check_completed(&self, sim: &SimDriver, epoch: u64, tensors: u32, scalars: u32) {
        use handshake as hs;
        for w in 0..self.block_dim {
            let r = self.record(sim, w);
            assert_eq!(u32_at(&r, hs::AICPU_READY), 0, "aicpu_ready (legacy)");
            assert_eq!(u32_at(&r, hs::AICORE_DONE), w + 1, "aicore_done");
            assert_eq!(u64_at(&r, hs::TASK), self.payload(), "task");
            assert_eq!(u32_at(&r, hs::CORE_TYPE), 0, "core_type");
            assert_eq!(u32_at(&r, hs::PHYSICAL_CORE_ID), w, "physical_core_id");
            let epochs = [hs::REPORT_EPOCH, hs::TASK_EPOCH, hs::DONE_EPOCH];
            for at in epochs.into_iter().chain([hs::RELEASE_EPOCH]) {
                assert_eq!(u64_at(&r, at), epoch, "the epoch word at {at}");
            }
            assert_eq!(u32_at(&r, hs::ERROR), 0, "error");
        }
        let h = read(sim, self.image, image::HEADER);
        assert_eq!(u64_at(&h, image::CORE_START_EPOCH), epoch);
        let p = read(sim, DevPtr::from_raw(self.payload()), payload::HEADER);
        assert_eq!(
            (
                u64_at(&p, payload::EPOCH),
                u32_at(&p, payload::TENSOR_COUNT),
                u32_at(&p, payload::SCALAR_COUNT),
                u32_at(&p, payload::SLOT)
            ),
            (epoch, tensors, scalars, self.index),
            "payload header"
        );
        let t = self.timing(sim);
        assert_eq!(
            (t.epoch, t.slot, t.block_dim),
            (epoch, self.index, self.block_dim)
        );
        let (start, end) = (t.run_wall_start_cycles, t.run_wall_end_cycles);
        assert!(start <= end, "start {start} <= end {end}");
        assert_eq!((t.sys_cnt_hz, t.device_id), (50_000_000, 0));
        let (aic, cpu, dispatch) = (
            t.aicore_start_cycles,
            t.aicpu_start_cycles,
            t.dispatch_cycles,
        );
        assert_eq!(
            aic,
            u64_at(&h, image::CORE_START),
            "aicore_start_cycles is core_start"
        );
        assert_eq!(start, aic.min(cpu));
        assert!(aic <= dispatch && cpu <= dispatch && dispatch <= end);
        assert_eq!(t.wall_ns, (end - start) * 20, "wall_ns at 50 MHz");
    }
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
