//! Workload argument blocks (`RunArgs` version 2: tensors and scalars)
//! through the `acl` driver and the fake runtime: every tensor range the
//! block's writer recorded is checked against *this* driver's allocations
//! before any C call, a block of any size up to the driver's host copy
//! (64 KiB) reaches the runtime with its exact length, a block the device cannot
//! decode reaches the runtime and comes back refused by it (the driver does
//! not parse the layout), and host copies of any size and offset
//! round-trip.
//!
//! The end-to-end tests run under both built-in kernel adapters
//! ([`under_both_adapters!`]): the fake device speaks the adapter's
//! protocol (`runclaim_fake_device_model`), the host writes the adapter's
//! blocks, and the fake counts each launch's `argsSize` exactly as the
//! adapter wrote it. A large a2a3 envelope (past the driver's stack copy)
//! launches and computes, and a block of one protocol sent to a device
//! speaking the other is refused by the fake, with its ACL code, and the
//! run comes back unlaunched.

mod common;

use std::time::Duration;

use common::acl::{control, open, open_on};
use runclaim::DeviceConfig;
use runclaim::driver::abi::{
    self, A2a3Abi, AicpuBlock, BlockBuf, DevSpan, Dir, KernelAbi, LaunchArgs, Prep, Program,
    RunArgs, RunIdentity, RunView, RunclaimAbi, Shape, StatusRecord, TensorArg, TensorView,
    Verdict, WallRecord, WorkArgs,
};
use runclaim::driver::acl::AclDriver;
use runclaim::driver::acl::codes::AclError;
use runclaim::driver::{CodeHandle, DevPtr, Driver, DriverError, DriverErrorKind, StreamId};
use runclaim::sim::trace::{TaskTag, TraceKind};
use runclaim::sim::{A2a3Model, RunclaimModel, SimConfig};

fn fast() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

const BLOCK_DIM: u32 = 2;

/// The longest block the acl driver passes: its host copy of a block
/// (64 KiB, the `acl` module's docs).
const MAX_HOST_ARGS: usize = 64 << 10;

/// A driver with one run's header regions, a code upload, two streams and
/// two 64-byte tensor buffers.
struct Setup {
    d: AclDriver,
    code: CodeHandle,
    aicore: StreamId,
    aicpu: StreamId,
    handshake: DevPtr,
    wall: DevPtr,
    status: DevPtr,
    x: DevPtr,
    y: DevPtr,
}

impl Setup {
    fn new(program: &Program) -> Self {
        let d = open(&fast(), false);
        let handshake = d.alloc(abi::handshake_bytes(BLOCK_DIM)).unwrap();
        d.memset(handshake, 0, abi::handshake_bytes(BLOCK_DIM))
            .unwrap();
        Setup {
            code: d.register_code(&program.encode()).unwrap().handle,
            aicore: d.create_stream().unwrap(),
            aicpu: d.create_stream().unwrap(),
            handshake,
            wall: d.alloc(WallRecord::SIZE).unwrap(),
            status: d.alloc(StatusRecord::SIZE).unwrap(),
            x: d.alloc(64).unwrap(),
            y: d.alloc(64).unwrap(),
            d,
        }
    }

    fn header(&self) -> RunArgs {
        RunArgs {
            run_id: 1,
            slot: 0,
            block_dim: BLOCK_DIM,
            len: 0,
            input: 0,
            output: 0,
            handshake: self.handshake.raw(),
            wall: self.wall.raw(),
            status: self.status.raw(),
        }
    }

    fn block(&self, tensors: &[TensorArg], scalars: &[u64]) -> BlockBuf {
        let b = WorkArgs::block(&self.header(), tensors, scalars).expect("within the limits");
        assert_eq!(
            b.args().bytes().len(),
            WorkArgs::size(tensors.len(), scalars.len())
        );
        assert_eq!(b.args().fields().len(), 3 + tensors.len());
        b
    }

    /// Launches counted by the fake runtime (AICore, AICPU) and the last
    /// `argsSize` it saw.
    fn launches(&self) -> (u64, u64, u64) {
        let rt = control().runtime(self.d.device_id());
        (rt.aicore_launches, rt.aicpu_launches, rt.last_args_size)
    }

    /// Both launches of `block`, which the driver must refuse without
    /// calling the runtime; the two errors' kinds.
    fn refused(&self, block: LaunchArgs<'_>) -> [DriverErrorKind; 2] {
        let id = self.d.device_id();
        let before = (control().runtime(id).calls, self.launches());
        let errs = [
            self.d
                .launch_aicore(self.aicore, self.code, BLOCK_DIM, block),
            self.d.launch_aicpu(self.aicpu, block),
        ]
        .map(|r| r.expect_err("refused"));
        for e in &errs {
            assert!(e.native().is_none(), "the runtime was called: {e}");
        }
        assert_eq!(
            (control().runtime(id).calls, self.launches()),
            before,
            "the fake runtime saw a call"
        );
        errs.map(|e| e.kind().clone())
    }

    /// Both launches of `block`, which the driver must pass to the runtime:
    /// each is counted there with the block's exact length. (The runtime's
    /// simulator judges the block itself: a version it cannot execute yet
    /// comes back as a runtime error, with its native code.) A run both
    /// launches queued is waited for, so the next starts on a clear
    /// handshake.
    fn reach_the_runtime(&self, block: LaunchArgs<'_>) -> [Result<(), DriverError>; 2] {
        let (core, cpu, _) = self.launches();
        let len = block.bytes().len() as u64;
        self.d
            .memset(self.handshake, 0, abi::handshake_bytes(BLOCK_DIM))
            .unwrap();
        let a = self
            .d
            .launch_aicore(self.aicore, self.code, BLOCK_DIM, block);
        assert_eq!(self.launches(), (core + 1, cpu, len), "AICore: {a:?}");
        let b = self.d.launch_aicpu(self.aicpu, block);
        assert_eq!(self.launches(), (core + 1, cpu + 1, len), "AICPU: {b:?}");
        for r in [&a, &b] {
            if let Err(e) = r {
                assert!(e.native().is_some(), "refused by the driver: {e}");
            }
        }
        if a.is_ok() && b.is_ok() {
            for s in [self.aicpu, self.aicore] {
                self.d.sync_stream(s, Duration::from_millis(200)).unwrap();
            }
        }
        [a, b]
    }
}

fn tensor(p: DevPtr, bytes: u64, dir: Dir) -> TensorArg {
    TensorArg {
        addr: p.raw(),
        bytes,
        elem_size: 4,
        dir,
        staged: false,
    }
}

fn bad_address(addr: u64, len: u64) -> [DriverErrorKind; 2] {
    [0, 1].map(|_| DriverErrorKind::BadAddress { addr, len })
}

#[test]
fn a_tensor_outside_every_allocation_never_reaches_the_runtime() {
    let s = Setup::new(&Program::new().add(1));
    let (x, y) = (s.x.raw(), s.y.raw());
    let gap = x.max(y) + 0x10_0000; // far past both buffers
    for (addr, bytes) in [
        (x, 65),           // one byte past the end
        (x + 64, 1),       // starts at the end
        (x + 8, 64),       // runs past the end
        (gap, 4),          // in no allocation
        (gap, 0),          // empty, in no allocation
        (x + 1, u64::MAX), // addr + bytes overflows
        (u64::MAX, 2),
    ] {
        let bad = TensorArg {
            addr,
            bytes,
            elem_size: 4,
            dir: Dir::Out,
            staged: false,
        };
        // After a good tensor, so the first does not hide the second.
        let block = s.block(&[tensor(s.x, 64, Dir::In), bad], &[3]);
        assert_eq!(
            s.refused(block.args()),
            bad_address(addr, bytes),
            "{addr:#x} + {bytes:#x}"
        );
    }
    assert_eq!(s.launches(), (0, 0, 0), "no launch reached the runtime");
    // The negative control: the same block with in-bounds ranges (an empty
    // tensor at a buffer's end included) reaches the runtime.
    let block = s.block(
        &[
            tensor(s.x, 64, Dir::In),
            tensor(s.y.offset(8), 56, Dir::Out),
            tensor(s.y.offset(64), 0, Dir::In),
        ],
        &[3],
    );
    let _ = s.reach_the_runtime(block.args());
}

#[test]
fn a_tensor_in_another_drivers_allocation_is_refused() {
    let s = Setup::new(&Program::new().add(1));
    // Another device, with more allocated, so its last buffer lies beyond
    // everything this driver allocated.
    let other = open(&fast(), false);
    let mut theirs = Vec::new();
    for _ in 0..8 {
        theirs.push(other.alloc(4096).unwrap());
    }
    let far = *theirs.last().unwrap();
    // And another driver on this same device: its allocations are its own.
    let twin = open_on(s.d.device_id(), fast().watchdog);
    let twins = twin.alloc(64).unwrap();
    for (p, whose) in [(far, "another device's"), (twins, "a twin driver's")] {
        // The precondition: no allocation of ours holds the range.
        let ours = [
            (s.handshake, abi::handshake_bytes(BLOCK_DIM)),
            (s.wall, WallRecord::SIZE),
            (s.status, StatusRecord::SIZE),
            (s.x, 64),
            (s.y, 64),
        ];
        assert!(
            ours.iter()
                .all(|&(q, n)| p.raw() + 64 <= q.raw() || q.raw() + n as u64 <= p.raw()),
            "{whose} range overlaps ours"
        );
        let block = s.block(&[tensor(s.x, 4, Dir::In), tensor(p, 64, Dir::Out)], &[]);
        assert_eq!(s.refused(block.args()), bad_address(p.raw(), 64), "{whose}");
        // The owner itself accepts the same range.
        let owner = if whose == "a twin driver's" {
            &twin
        } else {
            &other
        };
        assert!(owner.copy_to_device(p, &[0; 64]).is_ok(), "{whose}");
    }
    assert_eq!(s.launches(), (0, 0, 0), "no launch reached the runtime");
    twin.free(twins).unwrap();
    for p in theirs {
        other.free(p).unwrap();
    }
}

#[test]
fn the_largest_workload_block_reaches_the_runtime_with_its_exact_length() {
    let s = Setup::new(&Program::new().add(1));
    let tensors: Vec<TensorArg> = (0..WorkArgs::MAX_TENSORS)
        .map(|i| {
            let p = if i % 2 == 0 { s.x } else { s.y };
            tensor(p.offset(i % 16 * 4), 4, Dir::InOut)
        })
        .collect();
    let scalars: Vec<u64> = (0..WorkArgs::MAX_SCALARS as u64).collect();
    let block = s.block(&tensors, &scalars);
    assert_eq!(block.args().bytes().len(), WorkArgs::MAX_SIZE);
    let _ = s.reach_the_runtime(block.args());
    assert_eq!(s.launches(), (1, 1, WorkArgs::MAX_SIZE as u64));
    // Every size in between too: no scalar, one tensor and no scalar, …
    for (t, n) in [(0, 0), (1, 0), (0, 1), (3, 5), (255, 128), (256, 127)] {
        let block = s.block(&tensors[..t], &scalars[..n]);
        let _ = s.reach_the_runtime(block.args());
        assert_eq!(s.launches().2, WorkArgs::size(t, n) as u64);
    }
}

/// A block the device cannot decode — overlong, short, miscounted, a count
/// above its maximum, a version-1 range in a workload header — names no
/// address (made from bytes), so the driver, which reads no layout, checks
/// nothing and passes it on: each launch reaches the runtime with the
/// block's exact length, and the fake's device refuses it (an invalid
/// parameter, with its native code) — the largest workload block and one
/// byte more (`MAX_SIZE + 1`, copied on the heap now that the a2a3
/// adapter's envelopes are longer) and a block of the longest host copy
/// (64 KiB) included. What the driver itself still refuses before the
/// runtime: a block longer than its host copy (64 KiB + 1), and the good
/// block with an address its writer recorded overwritten.
#[test]
fn overlong_or_miscounted_workload_blocks_are_refused_by_the_device() {
    let s = Setup::new(&Program::new().add(1));
    let tensors = [tensor(s.x, 64, Dir::In), tensor(s.y, 64, Dir::Out)];
    let good = s.block(&tensors, &[1, 2]);
    let good_bytes = good.args().bytes();
    let mut long = good_bytes.to_vec();
    long.push(0);
    let mut short = good_bytes.to_vec();
    short.pop();
    let mut tensor_count = good_bytes.to_vec();
    tensor_count[RunArgs::SIZE..RunArgs::SIZE + 4].copy_from_slice(&3u32.to_le_bytes());
    let mut scalar_count = good_bytes.to_vec();
    scalar_count[RunArgs::SIZE + 4..RunArgs::SIZE + 8].copy_from_slice(&1u32.to_le_bytes());
    // The largest workload block and one byte more.
    let many: Vec<TensorArg> = (0..WorkArgs::MAX_TENSORS).map(|_| tensors[0]).collect();
    let scalars: Vec<u64> = (0..WorkArgs::MAX_SCALARS as u64).collect();
    let mut max_plus_one = s.block(&many, &scalars).args().bytes().to_vec();
    max_plus_one.push(0);
    // A count above its maximum, with the length to match it.
    let mut too_many = vec![0; WorkArgs::size(WorkArgs::MAX_TENSORS + 1, 0)];
    too_many[..WorkArgs::HEADER]
        .copy_from_slice(&s.block(&[], &[]).args().bytes()[..WorkArgs::HEADER]);
    too_many[RunArgs::SIZE..RunArgs::SIZE + 4]
        .copy_from_slice(&(u32::try_from(WorkArgs::MAX_TENSORS).unwrap() + 1).to_le_bytes());
    // A header with a version-1 range in it (a block writer zeroes them:
    // encoded by hand).
    let mut h = s.header();
    h.len = 16;
    h.input = s.x.raw();
    let mut v1_range = vec![0; WorkArgs::size(0, 0)];
    WorkArgs::encode(&mut v1_range, &h, std::iter::empty(), &[]).unwrap();
    for (what, b) in [
        ("one byte too long", long),
        ("one byte short", short),
        ("a tensor count above the tensors present", tensor_count),
        ("a scalar count below the scalars present", scalar_count),
        ("257 tensors", too_many),
        ("len/input/output set", v1_range),
        ("the largest workload block and one byte more", max_plus_one),
        ("the longest host copy", vec![0; MAX_HOST_ARGS]),
    ] {
        let block = BlockBuf::from_bytes(&b);
        for r in s.reach_the_runtime(block.args()) {
            let e = r.expect_err(what);
            assert!(
                matches!(e.kind(), DriverErrorKind::InvalidArgument { .. }),
                "{what}: {e}"
            );
            assert_eq!(
                e.native().map(|n| n.code),
                Some(AclError::ACL_ERROR_RT_PARAM_INVALID),
                "{what}: {e}"
            );
        }
    }
    // One byte longer than the launch's host copy: refused by the driver.
    assert!(
        s.refused(BlockBuf::from_bytes(&vec![0; MAX_HOST_ARGS + 1]).args())
            .iter()
            .all(|k| matches!(k, DriverErrorKind::InvalidArgument { .. })),
        "64 KiB + 1"
    );
    // The good block's first tensor address, recorded, then overwritten
    // by an integer (another live buffer's address): refused before the
    // runtime, whatever the new value names.
    let mut moved = BlockBuf::with_capacity(good_bytes.len(), 1);
    let mut w = moved.writer();
    let at = w.grow(good_bytes.len()).unwrap();
    w.put_bytes(at, good_bytes).unwrap();
    w.put_addr(WorkArgs::HEADER, DevSpan::new(s.x, 64)).unwrap();
    w.put_u64(WorkArgs::HEADER, s.y.raw()).unwrap();
    assert!(
        s.refused(moved.args())
            .iter()
            .all(|k| matches!(k, DriverErrorKind::InvalidArgument { .. })),
        "an overwritten address"
    );
    // The negative control: the good block runs.
    for r in s.reach_the_runtime(good.args()) {
        r.unwrap();
    }
}

#[test]
fn version_one_blocks_still_reach_the_runtime_byte_for_byte() {
    let s = Setup::new(&Program::new().add(1));
    let mut args = s.header();
    args.len = 16;
    args.input = s.x.raw();
    args.output = s.y.raw();
    let block = args.block();
    assert_eq!(block.args().bytes(), &args.to_bytes()[..]);
    s.d.copy_to_device(s.x, &[7; 64]).unwrap();
    for r in s.reach_the_runtime(block.args()) {
        r.unwrap();
    }
    assert_eq!(s.launches().2, RunArgs::SIZE as u64);
    let mut out = [0u8; 64];
    s.d.copy_from_device(&mut out, s.y).unwrap();
    let want = u32::from_le_bytes([7; 4]).wrapping_add(1).to_le_bytes();
    assert!(out.chunks(4).all(|c| c == want), "{out:?}");
}

#[test]
fn host_copies_of_any_size_and_offset_round_trip() {
    const LEN: usize = 4099;
    let d = open(&fast(), false);
    let p = d.alloc(LEN).unwrap();
    let pattern = |seed: usize, n: usize| -> Vec<u8> {
        (0..n)
            .map(|i| u8::try_from((i * 31 + seed * 7) % 251).unwrap())
            .collect()
    };
    // A known background, then copies at odd offsets and sizes over it.
    let mut model = pattern(0, LEN);
    d.copy_to_device(p, &model).unwrap();
    for (k, (off, n)) in [
        (0, 1),
        (1, 3),
        (5, 7),
        (63, 65),
        (1000, 1),
        (4095, 4),
        (LEN - 1, 1),
        (LEN, 0),
        (7, LEN - 7),
        (0, LEN),
    ]
    .into_iter()
    .enumerate()
    {
        let data = pattern(k + 1, n);
        d.copy_to_device(p.offset(off), &data).unwrap();
        model[off..off + n].copy_from_slice(&data);
        // Read back the same range, and an unaligned one around it.
        let mut back = vec![0u8; n];
        d.copy_from_device(&mut back, p.offset(off)).unwrap();
        assert_eq!(back, data, "{off} + {n}");
        let (lo, hi) = (off.saturating_sub(3), (off + n + 5).min(LEN));
        let mut around = vec![0u8; hi - lo];
        d.copy_from_device(&mut around, p.offset(lo)).unwrap();
        assert_eq!(around, model[lo..hi], "{lo}..{hi}");
    }
    let mut all = vec![0u8; LEN];
    d.copy_from_device(&mut all, p).unwrap();
    assert_eq!(all, model);
    // One byte past the end, either way: refused before the runtime.
    let before = control().runtime(d.device_id()).calls;
    let e = d.copy_to_device(p.offset(LEN - 3), &[0; 4]).unwrap_err();
    assert!(matches!(e.kind(), DriverErrorKind::BadAddress { .. }) && e.native().is_none());
    let e = d
        .copy_from_device(&mut [0; 4], p.offset(LEN - 3))
        .unwrap_err();
    assert!(matches!(e.kind(), DriverErrorKind::BadAddress { .. }) && e.native().is_none());
    assert_eq!(control().runtime(d.device_id()).calls, before);
    d.free(p).unwrap();
}

// ----- both built-in adapters through the fake -------------------------

/// A built-in kernel adapter a test runs under: the protocol the fake
/// device speaks (its device model) and the blocks the host writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Abi {
    /// runclaim's own: `RunclaimAbi` on the host, `RunclaimModel` on the device.
    Runclaim,
    /// The reference runtime's: `A2a3Abi` on the host, `A2a3Model` on the device.
    A2a3,
}

impl Abi {
    /// `cfg`, its device speaking this protocol.
    fn sim(self, cfg: SimConfig) -> SimConfig {
        match self {
            Abi::Runclaim => cfg.device_model(RunclaimModel),
            Abi::A2a3 => cfg.device_model(A2a3Model),
        }
    }

    /// A device configuration with this adapter.
    fn config(self) -> DeviceConfig {
        match self {
            Abi::Runclaim => DeviceConfig::default(),
            Abi::A2a3 => DeviceConfig::default().kernel_abi(A2a3Abi),
        }
    }

    fn adapter(self) -> &'static dyn KernelAbi {
        match self {
            Abi::Runclaim => &RunclaimAbi,
            Abi::A2a3 => &A2a3Abi,
        }
    }

    fn other(self) -> Abi {
        match self {
            Abi::Runclaim => Abi::A2a3,
            Abi::A2a3 => Abi::Runclaim,
        }
    }

    /// The `argsSize` of a workload run's AICore and AICPU launch, with
    /// `t` tensors and `s` scalars, as the layouts specify them: runclaim
    /// sends one `WorkArgs` block to both kernels; a2a3 sends the 40-byte
    /// `AicoreLaunchArgs` and a launch envelope of 192 + 128·T + 8·S.
    fn sizes(self, t: usize, s: usize) -> [u64; 2] {
        match self {
            Abi::Runclaim => [WorkArgs::size(t, s) as u64; 2],
            Abi::A2a3 => [40, (192 + 128 * t + 8 * s) as u64],
        }
    }
}

/// Runs each named `fn(Abi)` as a test under both adapters:
/// `runclaim_abi::NAME` and `a2a3_abi::NAME`.
macro_rules! under_both_adapters {
    ($($test:ident),* $(,)?) => {
        /// Under runclaim's own adapter.
        mod runclaim_abi {
            $(#[test]
            fn $test() {
                super::$test(super::Abi::Runclaim);
            })*
        }
        /// Under the reference runtime's a2a3 adapter.
        mod a2a3_abi {
            $(#[test]
            fn $test() {
                super::$test(super::Abi::A2a3);
            })*
        }
    };
}

under_both_adapters!(
    a_workload_program_runs_end_to_end_through_the_fake,
    workloads_run_through_the_contract_over_the_fake,
    a_workload_of_many_tensors_runs_through_the_contract,
    a_block_of_the_other_protocol_is_refused_by_the_fake,
    a_run_of_the_other_protocol_comes_back_unlaunched,
);

/// One slot's regions for an adapter on a fake device, and runs launched
/// in it from the adapter's own blocks: what the contract does for a run,
/// done by hand at the driver level (prep the regions, write both blocks,
/// launch each, read the status record back), so that each launch's
/// `argsSize` can be checked as the fake saw it.
struct AbiSlot {
    d: AclDriver,
    abi: Abi,
    code: CodeHandle,
    aicore: StreamId,
    aicpu: StreamId,
    /// The adapter's regions, in declaration order: address, bytes, prep.
    regions: Vec<(DevPtr, usize, Prep)>,
}

impl AbiSlot {
    /// The host writes `abi`'s blocks; the device speaks `device`'s
    /// protocol. The regions are zeroed once, as at a device's open.
    fn open(abi: Abi, device: Abi, program: &Program) -> Self {
        let d = open(&device.sim(fast()), false);
        let mut specs = Vec::new();
        abi.adapter()
            .regions(&Shape::new(BLOCK_DIM, 1), &mut specs)
            .unwrap();
        let regions = specs
            .iter()
            .map(|r| {
                let p = d.alloc(r.bytes).unwrap();
                d.memset(p, 0, r.bytes).unwrap();
                (p, r.bytes, r.prep)
            })
            .collect();
        AbiSlot {
            code: d.register_code(&program.encode()).unwrap().handle,
            aicore: d.create_stream().unwrap(),
            aicpu: d.create_stream().unwrap(),
            regions,
            abi,
            d,
        }
    }

    fn region(&self, i: usize) -> DevPtr {
        self.regions[i].0
    }

    /// Launches counted by the fake runtime (AICore, AICPU) and the last
    /// `argsSize` it saw.
    fn launches(&self) -> (u64, u64, u64) {
        let rt = control().runtime(self.d.device_id());
        (rt.aicore_launches, rt.aicpu_launches, rt.last_args_size)
    }

    /// The run's blocks as the adapter writes them: the AICore block and,
    /// unless the adapter sends the AICore's to both, the AICPU block.
    fn blocks(
        &self,
        id: &RunIdentity,
        tensors: &[TensorView],
        scalars: &[u64],
    ) -> (BlockBuf, Option<BlockBuf>) {
        let spans: Vec<DevSpan> = self
            .regions
            .iter()
            .map(|&(p, n, _)| DevSpan::new(p, n as u64))
            .collect();
        let run = RunView::new(*id, &spans, tensors, scalars);
        let a = self.abi.adapter();
        let mut core = BlockBuf::with_capacity(a.max_block_bytes(), 3 + tensors.len());
        a.aicore_block(&run, &mut core.writer()).unwrap();
        let mut cpu = BlockBuf::with_capacity(a.max_block_bytes(), 3 + tensors.len());
        let cpu = match a.aicpu_block(&run, &mut cpu.writer()).unwrap() {
            AicpuBlock::Same => None,
            AicpuBlock::Written => Some(cpu),
        };
        (core, cpu)
    }

    /// What the host does to the regions before run `id`.
    fn prep(&self, id: &RunIdentity) {
        for (i, &(p, n, prep)) in self.regions.iter().enumerate() {
            match prep {
                Prep::Zeroed => self.d.memset(p, 0, n).unwrap(),
                Prep::Armed => {
                    let mut b = vec![0; n];
                    self.abi.adapter().arm(i, id, &mut b).unwrap();
                    self.d.copy_to_device(p, &b).unwrap();
                }
                Prep::Stamped => {}
            }
        }
    }

    /// Run `id` from the adapter's blocks: each launch reaches the fake
    /// runtime with exactly the length the adapter wrote, and the layout's
    /// size for `tensors` and `scalars`; both streams are waited for; the
    /// verdict the adapter reads from the status record.
    fn run(&self, id: &RunIdentity, tensors: &[TensorView], scalars: &[u64]) -> Verdict {
        self.prep(id);
        let (core, cpu) = self.blocks(id, tensors, scalars);
        let cpu = cpu.as_ref().unwrap_or(&core);
        let want = self.abi.sizes(tensors.len(), scalars.len());
        let written = [core.args(), cpu.args()].map(|b| b.bytes().len() as u64);
        assert_eq!(written, want, "{:?}: the adapter's block sizes", self.abi);
        let (c0, p0, _) = self.launches();
        self.d
            .launch_aicore(self.aicore, self.code, BLOCK_DIM, core.args())
            .unwrap();
        assert_eq!(self.launches(), (c0 + 1, p0, want[0]), "AICore argsSize");
        self.d.launch_aicpu(self.aicpu, cpu.args()).unwrap();
        assert_eq!(self.launches(), (c0 + 1, p0 + 1, want[1]), "AICPU argsSize");
        for s in [self.aicpu, self.aicore] {
            self.d.sync_stream(s, Duration::from_millis(500)).unwrap();
        }
        let at = self.abi.adapter().status_record();
        let mut rec = vec![0; at.bytes];
        self.d
            .copy_from_device(&mut rec, self.region(at.region).offset(at.offset))
            .unwrap();
        self.abi.adapter().decode_status(id, &rec).unwrap()
    }
}

fn view(p: DevPtr, bytes: u64, dir: Dir) -> TensorView {
    TensorView {
        span: DevSpan::new(p, bytes),
        elem_size: 4,
        dir,
        home: runclaim::driver::abi::Home::Buffer,
    }
}

fn identity(epoch: u64) -> RunIdentity {
    RunIdentity {
        run_id: epoch,
        epoch,
        slot: 0,
        block_dim: BLOCK_DIM,
    }
}

fn le(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_u32s(d: &AclDriver, p: DevPtr, n: usize) -> Vec<u32> {
    let mut b = vec![0; 4 * n];
    d.copy_from_device(&mut b, p).unwrap();
    b.chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A program over a run's first readable and first writable tensor, from
/// the adapter's blocks through the acl driver and the fake: three runs in
/// one slot, nothing cleared between them but the output buffer (under
/// a2a3 the host never touches the records: the epoch tells the runs
/// apart), each launch's `argsSize` the layout's.
fn a_workload_program_runs_end_to_end_through_the_fake(abi: Abi) {
    let program = Program::new().add(3).mul(5).xor(1);
    let s = AbiSlot::open(abi, abi, &program);
    let (x, y) = (s.d.alloc(64).unwrap(), s.d.alloc(64).unwrap());
    for run in 1..=3u32 {
        let epoch = u64::from(run);
        let input: Vec<u32> = (0..16).map(|i| i * 1000 + 7 * run).collect();
        s.d.copy_to_device(x, &le(&input)).unwrap();
        s.d.memset(y, 0, 64).unwrap();
        // A scalar, and an unused input after the first.
        let tensors = [
            view(x, 64, Dir::In),
            view(y, 64, Dir::Out),
            view(x, 64, Dir::In),
        ];
        let verdict = s.run(&identity(epoch), &tensors, &[42]);
        assert_eq!(verdict, Verdict::Succeeded, "{abi:?} run {epoch}");
        let want: Vec<u32> = input.iter().map(|&v| program.apply(v).unwrap()).collect();
        assert_eq!(read_u32s(&s.d, y, 16), want, "{abi:?} run {epoch}");
    }
}

/// An a2a3 launch envelope of many tensors — past the acl driver's stack
/// copy of a block (`WorkArgs::MAX_SIZE`, 9,296 bytes), so copied on the
/// heap — launches with its exact `argsSize`, the device receives every
/// byte of it (the task payload it copies into the image ends with the
/// block's last tensor and scalar), and the run computes right. The sizes:
/// exactly the stack copy (71 tensors, 2 scalars), one scalar more, a
/// middling block and the largest one.
#[test]
fn a2a3_envelopes_past_the_drivers_stack_copy_launch_and_compute() {
    // The a2a3 layout's numbers, as its docs (`A2a3Abi`) give them: the
    // envelope is 192 + 128 per tensor + 8 per scalar; the task payload,
    // after the image's 64-byte header and one 64-byte record per worker,
    // is a 64-byte header (epoch, tensor count @8, scalar count @12), then
    // the tensors and scalars.
    let envelope = |t: usize, n: usize| 192 + 128 * t + 8 * n;
    assert_eq!(envelope(71, 2), WorkArgs::MAX_SIZE);
    let program = Program::new().mul(3).add(2);
    let s = AbiSlot::open(Abi::A2a3, Abi::A2a3, &program);
    let (x, y) = (s.d.alloc(64).unwrap(), s.d.alloc(64).unwrap());
    let pay = s
        .region(A2a3Abi::IMAGE)
        .offset(64 + 64 * BLOCK_DIM as usize);
    for (k, (t, n)) in [(71, 2), (71, 3), (80, 16), (256, 128)]
        .into_iter()
        .enumerate()
    {
        let epoch = k as u64 + 1;
        let input: Vec<u32> = (0..16).map(|i| i * 7 + u32::try_from(k).unwrap()).collect();
        s.d.copy_to_device(x, &le(&input)).unwrap();
        s.d.memset(y, 0, 64).unwrap();
        // The input, the output, then more inputs: one element of x each.
        let mut tensors = vec![view(x, 64, Dir::In), view(y, 64, Dir::Out)];
        tensors.extend((2..t).map(|i| view(x.offset(i % 16 * 4), 4, Dir::In)));
        let scalars: Vec<u64> = (0..n as u64).map(|j| j * 0x1_0001 + epoch).collect();
        let size = envelope(t, n);
        assert_eq!(
            s.run(&identity(epoch), &tensors, &scalars),
            Verdict::Succeeded
        );
        assert_eq!(s.launches().2, size as u64, "{t} tensors, {n} scalars");
        let want: Vec<u32> = input.iter().map(|&v| program.apply(v).unwrap()).collect();
        assert_eq!(read_u32s(&s.d, y, 16), want, "{t} tensors, {n} scalars");
        // What the device received: the payload's header, and its last
        // tensor and scalar, byte for byte the block's.
        let (_, cpu) = s.blocks(&identity(epoch), &tensors, &scalars);
        let block = cpu.expect("a2a3 writes its own AICPU block");
        let block = block.args().bytes();
        assert_eq!(block.len(), size);
        let mut head = [0u8; 64];
        s.d.copy_from_device(&mut head, pay).unwrap();
        let word = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().unwrap());
        assert_eq!(
            u64::from_le_bytes(head[..8].try_into().unwrap()),
            epoch,
            "the payload's epoch"
        );
        assert_eq!(
            (word(8), word(12)),
            (u32::try_from(t).unwrap(), u32::try_from(n).unwrap())
        );
        let last = envelope(t - 1, 0);
        let mut got = vec![0u8; 128];
        s.d.copy_from_device(&mut got, pay.offset(64 + 128 * (t - 1)))
            .unwrap();
        assert_eq!(got, block[last..last + 128], "the last tensor");
        let last = envelope(t, n - 1);
        let mut got = [0u8; 8];
        s.d.copy_from_device(&mut got, pay.offset(64 + 128 * t + 8 * (n - 1)))
            .unwrap();
        assert_eq!(got, block[last..last + 8], "the last scalar");
        assert_eq!(u64::from_le_bytes(got), scalars[n - 1]);
    }
}

/// A block of one protocol sent to a fake device speaking the other: the
/// acl driver checks the addresses the writer recorded (all this driver's)
/// and passes the bytes on, and the fake's device refuses each launch —
/// an invalid parameter, with the ACL code 107000 — after counting it with
/// the block's exact length. Nothing is queued. (The negative control, the
/// same blocks on a device speaking their protocol, is
/// `a_workload_program_runs_end_to_end_through_the_fake`.)
fn a_block_of_the_other_protocol_is_refused_by_the_fake(abi: Abi) {
    let s = AbiSlot::open(abi, abi.other(), &Program::new().add(1));
    let (input, output) = (s.d.alloc(64).unwrap(), s.d.alloc(64).unwrap());
    let tensors = [view(input, 64, Dir::In), view(output, 64, Dir::Out)];
    let id = identity(1);
    s.prep(&id);
    let (core, cpu) = s.blocks(&id, &tensors, &[7]);
    let cpu = cpu.as_ref().unwrap_or(&core);
    let want = abi.sizes(2, 1);
    let (c0, p0, _) = s.launches();
    let core_err =
        s.d.launch_aicore(s.aicore, s.code, BLOCK_DIM, core.args())
            .expect_err("the device speaks the other protocol");
    assert_eq!(s.launches(), (c0 + 1, p0, want[0]), "AICore: {core_err}");
    let cpu_err =
        s.d.launch_aicpu(s.aicpu, cpu.args())
            .expect_err("the device speaks the other protocol");
    assert_eq!(s.launches(), (c0 + 1, p0 + 1, want[1]), "AICPU: {cpu_err}");
    for e in [&core_err, &cpu_err] {
        assert!(
            matches!(e.kind(), DriverErrorKind::InvalidArgument { .. }),
            "{abi:?}: {e}"
        );
        assert_eq!(
            e.native().map(|n| n.code),
            Some(AclError::ACL_ERROR_RT_PARAM_INVALID),
            "{abi:?}: refused by the fake, with its code: {e}"
        );
    }
    let queued = control()
        .trace(s.d.device_id())
        .into_iter()
        .filter(|t| {
            matches!(
                t.what,
                TraceKind::Enqueued(TaskTag::Aicore | TaskTag::Aicpu)
            )
        })
        .count();
    assert_eq!(queued, 0, "no kernel was queued");
    // The device is fine: the streams take work.
    for st in [s.aicore, s.aicpu] {
        s.d.sync_stream(st, Duration::from_millis(50)).unwrap();
    }
}

/// Through the contract: a device opened with one adapter on a fake device
/// speaking the other protocol. The launch is refused by the fake (107000)
/// at the AICore kernel, before anything is queued, so the run comes back
/// unlaunched: the error hands back the prepared run, nothing is in
/// flight, nothing is poisoned, its output was never written, and its slot
/// is free again once the run is dropped.
fn a_run_of_the_other_protocol_comes_back_unlaunched(abi: Abi) {
    use runclaim::contract::ErrorKind;
    use runclaim::{Callable, Device, Workload};
    let driver = open(&abi.other().sim(SimConfig::default()), false);
    let id = driver.device_id();
    let mut dev = Device::<_, 2>::open(driver, abi.config()).unwrap();
    let runner = dev
        .publish(&[Callable::program("inc", &Program::new().add(1))])
        .unwrap();
    let f = runner.code("inc").unwrap();
    let input = [1u32, 2, 3, 4];
    let mut output = [9u32; 4];
    let mut work = Workload::new(f);
    work.input(&input).output(&mut output).scalar(5);
    let before = control().runtime(id);
    let prepared = runner
        .prepare(runner.take_slot::<0>().unwrap(), &mut work)
        .unwrap();
    let err = prepared.launch().unwrap_err();
    let ErrorKind::Driver(e) = err.kind() else {
        panic!("{abi:?}: expected a driver error, got {err}");
    };
    assert!(
        matches!(e.kind(), DriverErrorKind::InvalidArgument { .. }),
        "{abi:?}: {e}"
    );
    assert_eq!(
        e.native().map(|n| n.code),
        Some(AclError::ACL_ERROR_RT_PARAM_INVALID),
        "{abi:?}: {e}"
    );
    let rt = control().runtime(id);
    assert_eq!(
        (rt.aicore_launches, rt.aicpu_launches, rt.last_args_size),
        (
            before.aicore_launches + 1,
            before.aicpu_launches,
            abi.sizes(2, 1)[0]
        ),
        "{abi:?}: the fake saw the AICore launch only, at the adapter's size"
    );
    let health = runner.health();
    assert_eq!((health.in_flight, health.poisoned), (0, None), "{abi:?}");
    // The run comes back unlaunched; dropped, it frees its slot.
    drop(err.into_value());
    drop(work);
    assert_eq!(output, [9; 4], "never run, never finalized");
    let token = runner.take_slot::<0>().expect("the slot is free again");
    drop(token);
    let stats = control().stats(id);
    assert_eq!((stats.aicore_kernels, stats.aicpu_kernels), (0, 0));
}

/// A workload through the whole contract over the fake: host tensors
/// staged through the fake's `aclrtMemcpy` paths (one H2D per host input,
/// one D2H per host output), a device buffer shared by two queued runs in
/// stream order, and a pipeline passing owned tensors in and out; the
/// fake's device speaking the adapter's protocol.
fn workloads_run_through_the_contract_over_the_fake(abi: Abi) {
    use runclaim::{Callable, Device, Pipeline, Workload};
    let driver = open(&abi.sim(SimConfig::default()), false);
    let id = driver.device_id();
    let mut dev = Device::<_, 2>::open(driver, abi.config()).unwrap();
    let mut shared = dev.alloc_buffer::<u32>(8).unwrap();
    {
        let runner = dev
            .publish(&[Callable::program("f", &Program::new().mul(2).add(1))])
            .unwrap();
        let f = runner.code("f").unwrap();
        let x: Vec<u32> = (0..8).collect();
        let mut y = [0u32; 8];
        let mut w0 = Workload::new(f);
        w0.input(&x).buffer(&shared, Dir::Out);
        let mut w1 = Workload::new(f);
        w1.buffer(&shared, Dir::In).output(&mut y);
        let before = control().runtime(id).calls;
        let r0 = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w0)
            .unwrap();
        let r0 = r0.launch().unwrap();
        let r1 = runner
            .prepare(runner.take_slot::<1>().unwrap(), &mut w1)
            .unwrap();
        let r1 = r1.launch().unwrap();
        drop(r1.fence().unwrap().finalize().unwrap());
        drop(r0.fence().unwrap().finalize().unwrap());
        assert!(control().runtime(id).calls > before, "through the runtime");
        drop(w1);
        let want: Vec<u32> = x.iter().map(|v| (v * 2 + 1) * 2 + 1).collect();
        assert_eq!(y.to_vec(), want, "{abi:?}");
        let mut pipe = Pipeline::<_, 2, u32>::new(&runner).unwrap();
        for k in 0..6u32 {
            if pipe.is_full() {
                let done = pipe.complete().unwrap().expect("pending");
                let w = done.work.expect("a workload");
                assert_eq!(w.get::<u32>(1).ok(), Some(&[done.tag * 2 + 1; 4][..]));
            }
            let mut work = Workload::new(f);
            work.owned(vec![k; 4], Dir::In)
                .owned(vec![0u32; 4], Dir::Out);
            pipe.submit(work, k).unwrap();
        }
        while let Some(done) = pipe.complete().unwrap() {
            let w = done.work.expect("a workload");
            assert_eq!(w.get::<u32>(1).ok(), Some(&[done.tag * 2 + 1; 4][..]));
        }
        // The last launch was an AICPU one, of the adapter's size.
        assert_eq!(
            control().runtime(id).last_args_size,
            abi.sizes(2, 0)[1],
            "{abi:?}"
        );
    }
    let mut back = [0u32; 8];
    dev.read_buffer(&mut shared, 0, &mut back).unwrap();
    assert_eq!(back, [1, 3, 5, 7, 9, 11, 13, 15], "{abi:?}");
    // A device range the acl table does not know never reaches C: a
    // buffer of another device is refused by the contract first.
    let other = open(&abi.sim(SimConfig::default()), false);
    let other = Device::<_, 2>::open(other, abi.config()).unwrap();
    let e = other.read_buffer(&mut shared, 0, &mut back).unwrap_err();
    assert!(matches!(
        e.kind(),
        runclaim::contract::ErrorKind::ForeignBuffer { .. }
    ));
}

/// A workload of 80 tensors and 16 scalars through the contract: under
/// a2a3 an AICPU envelope of 192 + 128·80 + 8·16 = 10,560 bytes (past the
/// acl driver's stack copy), under runclaim a `WorkArgs` block of 2,248
/// bytes; each reaches the fake with that `argsSize`, and the run computes
/// right.
fn a_workload_of_many_tensors_runs_through_the_contract(abi: Abi) {
    use runclaim::{Callable, Device, Workload};
    const T: usize = 80;
    const S: usize = 16;
    let driver = open(&abi.sim(SimConfig::default()), false);
    let id = driver.device_id();
    let mut dev = Device::<_, 2>::open(driver, abi.config()).unwrap();
    let mut buf = dev.alloc_buffer::<u32>(16).unwrap();
    dev.write_buffer(&mut buf, 0, &[5; 16]).unwrap();
    let program = Program::new().mul(7).add(1);
    let runner = dev.publish(&[Callable::program("f", &program)]).unwrap();
    let f = runner.code("f").unwrap();
    let input: Vec<u32> = (0..16).map(|i| i * 3 + 1).collect();
    let mut output = [0u32; 16];
    let mut w = Workload::new(f);
    w.input(&input).output(&mut output);
    for i in 2..T {
        w.buffer(buf.slice(i % 16..i % 16 + 1), Dir::In);
    }
    for j in 0..S as u64 {
        w.scalar(j + 100);
    }
    assert_eq!((w.tensor_count(), w.scalar_count()), (T, S));
    let before = control().runtime(id);
    let r = runner
        .prepare(runner.take_slot::<0>().unwrap(), &mut w)
        .unwrap();
    drop(r.launch().unwrap().fence().unwrap().finalize().unwrap());
    let rt = control().runtime(id);
    assert_eq!(
        (rt.aicore_launches, rt.aicpu_launches, rt.last_args_size),
        (
            before.aicore_launches + 1,
            before.aicpu_launches + 1,
            abi.sizes(T, S)[1]
        ),
        "{abi:?}"
    );
    if abi == Abi::A2a3 {
        assert_eq!(rt.last_args_size, 10_560);
        assert!(rt.last_args_size > WorkArgs::MAX_SIZE as u64, "on the heap");
    }
    drop(w);
    let want: Vec<u32> = input.iter().map(|&v| program.apply(v).unwrap()).collect();
    assert_eq!(output.to_vec(), want, "{abi:?}");
}
