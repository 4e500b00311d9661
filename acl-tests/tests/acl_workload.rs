//! Workload argument blocks (`RunArgs` version 2: tensors and scalars)
//! through the `acl` driver and the fake runtime: every tensor range the
//! block's writer recorded is checked against *this* driver's allocations
//! before any C call, a block of any size up to the driver's host copy
//! (64 KiB) reaches the runtime with its exact length, a block the device cannot
//! decode reaches the runtime and comes back refused by it (the driver does
//! not parse the layout), and host copies of any size and offset
//! round-trip.

mod common;

use std::time::Duration;

use common::acl::{control, open, open_on};
use runclaim::driver::abi::{
    self, BlockBuf, DevSpan, Dir, LaunchArgs, Program, RunArgs, StatusRecord, TensorArg,
    WallRecord, WorkArgs,
};
use runclaim::driver::acl::AclDriver;
use runclaim::driver::acl::codes::ACL_ERROR_RT_PARAM_INVALID;
use runclaim::driver::{CodeHandle, DevPtr, Driver, DriverError, DriverErrorKind, StreamId};
use runclaim::sim::SimConfig;

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
                Some(ACL_ERROR_RT_PARAM_INVALID),
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

#[test]
fn a_workload_program_runs_end_to_end_through_the_fake() {
    let program = Program::new().add(3).mul(5).xor(1);
    let s = Setup::new(&program);
    let input: Vec<u32> = (0..16).map(|i| i * 1000 + 7).collect();
    let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
    s.d.copy_to_device(s.x, &bytes).unwrap();
    s.d.memset(s.y, 0, 64).unwrap();
    // A scalar, and an unused input after the first: the program reads the
    // first readable tensor and writes the first writable one.
    let block = s.block(
        &[
            tensor(s.x, 64, Dir::In),
            tensor(s.y, 64, Dir::Out),
            tensor(s.x, 64, Dir::In),
        ],
        &[42],
    );
    for r in s.reach_the_runtime(block.args()) {
        r.unwrap();
    }
    let mut out = [0u8; 64];
    s.d.copy_from_device(&mut out, s.y).unwrap();
    let got: Vec<u32> = out
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let want: Vec<u32> = input.iter().map(|&v| program.apply(v).unwrap()).collect();
    assert_eq!(got, want);
    let mut st = [0u8; StatusRecord::SIZE];
    s.d.copy_from_device(&mut st, s.status).unwrap();
    let st = StatusRecord::from_bytes(&st).expect("a status record");
    assert_eq!((st.run_id, st.state, st.code), (1, StatusRecord::DONE, 0));
}

/// A workload through the whole contract over the fake: host tensors
/// staged through the fake's `aclrtMemcpy` paths (one H2D per host input,
/// one D2H per host output), a device buffer shared by two queued runs in
/// stream order, and a pipeline passing owned tensors in and out.
#[test]
fn workloads_run_through_the_contract_over_the_fake() {
    use runclaim::{Callable, Device, DeviceConfig, Pipeline, Workload};
    let driver = open(&SimConfig::default(), false);
    let id = driver.device_id();
    let mut dev = Device::<_, 2>::open(driver, DeviceConfig::default()).unwrap();
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
        assert_eq!(y.to_vec(), want);
        let mut pipe = Pipeline::<_, 2, u32>::new(&runner).unwrap();
        for k in 0..6u32 {
            if pipe.is_full() {
                let done = pipe.complete_work().unwrap().expect("pending");
                let w = done.work.expect("a workload");
                assert_eq!(w.owned_at::<u32>(1), Some(&[done.tag * 2 + 1; 4][..]));
            }
            let mut work = Workload::new(f);
            work.owned(vec![k; 4], Dir::In)
                .owned(vec![0u32; 4], Dir::Out);
            pipe.submit_work(work, k).unwrap();
        }
        while let Some(done) = pipe.complete_work().unwrap() {
            let w = done.work.expect("a workload");
            assert_eq!(w.owned_at::<u32>(1), Some(&[done.tag * 2 + 1; 4][..]));
        }
    }
    let mut back = [0u32; 8];
    dev.read_buffer(&mut shared, 0, &mut back).unwrap();
    assert_eq!(back, [1, 3, 5, 7, 9, 11, 13, 15]);
    // A device range the acl table does not know never reaches C: a
    // buffer of another device is refused by the contract first.
    let other = open(&SimConfig::default(), false);
    let other = Device::<_, 2>::open(other, DeviceConfig::default()).unwrap();
    let e = other.read_buffer(&mut shared, 0, &mut back).unwrap_err();
    assert!(matches!(
        e.kind(),
        runclaim::contract::ErrorKind::ForeignBuffer { .. }
    ));
}
