//! The validation's own cost per run: the checks the 13 driver calls of
//! one run make (4 in prepare, 5 in launch, 1 in fence, 3 in finalize),
//! each under its own read lock, over a depth-2 device's table — without
//! the C calls they guard.
//!
//! `cargo test --release --lib -- --ignored validation_cost --nocapture`
//!
//! `validation_cost_of_workload_blocks` measures the two launch checks
//! alone for a `RunArgs` block and for workload blocks (each checked in
//! full at every launch).

use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::sync::{PoisonError, RwLock};
use std::time::Instant;

use super::{Resident, Table};
use crate::driver::Op;
use crate::driver::abi::{
    self, BlockBuf, Dir, RunArgs, StatusRecord, TensorArg, WallRecord, WorkArgs,
};
use crate::driver::acl::ptr::{Program, RtPtr};

const RUNS: u32 = 200_000;
const BATCHES: usize = 9;

struct Slot {
    arena: u64,
    handshake: u64,
    wall: u64,
    status: u64,
    ev_aicore: u64,
    ev_fence: u64,
}

fn device() -> (RwLock<Table>, [Slot; 2], BlockBuf, (u64, u64)) {
    let mut t = Table::default();
    let mut next = 0x1_0000_0000u64;
    let mut alloc = |t: &mut Table, len: usize| {
        let base = next;
        next += (len as u64).div_ceil(64) * 64 + 4096;
        t.insert_alloc(RtPtr::from_raw(base), len);
        base
    };
    let elems = 1024usize;
    let slots = [0u64, 1].map(|i| Slot {
        arena: alloc(&mut t, 2 * elems * 4),
        handshake: alloc(&mut t, abi::handshake_bytes(24)),
        wall: alloc(&mut t, WallRecord::SIZE),
        status: alloc(&mut t, StatusRecord::SIZE),
        ev_aicore: 0x5000 + 2 * i,
        ev_fence: 0x5001 + 2 * i,
    });
    for s in &slots {
        t.insert_event(RtPtr::from_raw(s.ev_aicore), false);
        t.insert_event(RtPtr::from_raw(s.ev_fence), false);
    }
    t.insert_stream(RtPtr::from_raw(0x100));
    t.insert_stream(RtPtr::from_raw(0x200));
    t.code.push(Resident {
        program: Program::for_test(0xc0de, vec![0; 64].into()),
        upload: 7,
        pins: 1,
    });
    let s = &slots[0];
    let args = RunArgs {
        run_id: 1,
        slot: 0,
        block_dim: 24,
        len: elems as u64,
        input: s.arena,
        output: s.arena + (elems * 4) as u64,
        handshake: s.handshake,
        wall: s.wall,
        status: s.status,
    }
    .block();
    (RwLock::new(t), slots, args, (0x100, 0x200))
}

/// Median ns per run of `f` over `BATCHES` batches of `RUNS`.
fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..RUNS / 10 {
        f();
    }
    let mut per: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..RUNS {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(RUNS)
        })
        .collect();
    per.sort_by(f64::total_cmp);
    per[BATCHES / 2]
}

/// A device range one call checks: the call, the address, the length.
type Range = (Op, u64, usize);

/// The device ranges one run's calls check, in order, each under its own
/// read lock: its prepare's (input, handshake, wall, status) before the
/// launch, its finalize's (status, wall, output) after the fence.
fn ranges(s: &Slot) -> ([Range; 4], [Range; 3]) {
    let prepare = [
        (Op::CopyToDevice, s.arena, 4096),
        (Op::Memset, s.handshake, 128),
        (Op::Memset, s.wall, WallRecord::SIZE),
        (Op::CopyToDevice, s.status, StatusRecord::SIZE),
    ];
    let finalize = [
        (Op::CopyFromDevice, s.status, StatusRecord::SIZE),
        (Op::CopyFromDevice, s.wall, WallRecord::SIZE),
        (Op::CopyFromDevice, s.arena + 4096, 4096),
    ];
    (prepare, finalize)
}

/// The handles one run's launch and fence check: the two launches (stream,
/// code, block), the AICore event's record and the AICPU stream's wait on
/// it, the fence's record, then the fence's waiter mark (held without the
/// lock). Each call under its own read lock.
fn check_handles(table: &RwLock<Table>, s: &Slot, args: &BlockBuf, (core, cpu): (u64, u64)) {
    let read = || table.read().unwrap_or_else(PoisonError::into_inner);
    {
        let t = read();
        t.stream(Op::LaunchAicore, core).unwrap();
        t.code(Op::LaunchAicore, 0xc0de, 7).unwrap();
        black_box(t.run_args(Op::LaunchAicore, args.args()).unwrap());
    }
    {
        let t = read();
        t.stream(Op::LaunchAicpu, cpu).unwrap();
        black_box(t.run_args(Op::LaunchAicpu, args.args()).unwrap());
    }
    {
        let t = read();
        let e = t.event(Op::RecordEvent, s.ev_aicore).unwrap();
        t.stream(Op::RecordEvent, core).unwrap();
        e.recorded.store(true, Ordering::Release);
    }
    {
        let t = read();
        t.stream(Op::StreamWaitEvent, cpu).unwrap();
        black_box(
            t.event(Op::StreamWaitEvent, s.ev_aicore)
                .unwrap()
                .unrecorded_legacy(),
        );
    }
    {
        let t = read();
        let e = t.event(Op::RecordEvent, s.ev_fence).unwrap();
        t.stream(Op::RecordEvent, cpu).unwrap();
        e.recorded.store(true, Ordering::Release);
    }
    let waiting = {
        let t = read();
        let e = t.event(Op::SyncEvent, s.ev_fence).unwrap();
        black_box(e.unrecorded_legacy());
        e.wait()
    };
    drop(black_box(waiting));
}

#[test]
#[ignore = "a measurement: cargo test --release --lib -- --ignored validation_cost --nocapture"]
fn validation_cost_per_run() {
    let (table, slots, args, streams) = device();
    let read = || table.read().unwrap_or_else(PoisonError::into_inner);
    let (prepare, finalize) = ranges(&slots[0]);
    let check_ranges = |ranges: &[Range]| {
        for &(op, addr, len) in ranges {
            black_box(read().range(op, addr, len).unwrap());
        }
    };
    // 4 in prepare, 5 in launch, 1 in fence, 3 in finalize.
    let full = time(|| {
        check_ranges(&prepare);
        check_handles(&table, &slots[0], &args, streams);
        check_ranges(&finalize);
    });
    // The 13 lock round trips alone, without a lookup.
    let locks = time(|| {
        for _ in 0..13 {
            black_box(&*read());
        }
    });
    // The floor of any scheme without a lock: one sequentially
    // consistent fence per call (a reader announcing itself to a
    // destroying writer needs a store-load barrier).
    let fences = {
        let a = std::sync::atomic::AtomicU64::new(0);
        time(|| {
            for i in 0..13 {
                a.store(i, Ordering::Relaxed);
                std::sync::atomic::fence(Ordering::SeqCst);
                a.store(0, Ordering::Release);
            }
        })
    };
    println!(
        "acl handle validation, 13 driver calls of one run: {full:.1} ns/run \
         ({locks:.1} ns of it the 13 read-lock round trips, {:.1} ns the lookups); \
         13 SeqCst fences alone: {fences:.1} ns",
        full - locks
    );
}

/// A workload block over slot 0's regions: `tensors` tensors cycling over
/// the arena's 4-byte words, `scalars` scalars.
fn work_block(s: &Slot, tensors: usize, scalars: usize) -> BlockBuf {
    let header = RunArgs {
        run_id: 1,
        slot: 0,
        block_dim: 24,
        len: 0,
        input: 0,
        output: 0,
        handshake: s.handshake,
        wall: s.wall,
        status: s.status,
    };
    let t: Vec<TensorArg> = (0..tensors)
        .map(|i| TensorArg {
            addr: s.arena + (i as u64 % 1024) * 4,
            bytes: 4096,
            elem_size: 4,
            dir: if i.is_multiple_of(2) {
                Dir::In
            } else {
                Dir::Out
            },
            staged: true,
        })
        .collect();
    let scalars: Vec<u64> = (0..scalars as u64).collect();
    WorkArgs::block(&header, &t, &scalars).unwrap()
}

#[test]
#[ignore = "a measurement: cargo test --release --lib -- --ignored validation_cost --nocapture"]
fn validation_cost_of_workload_blocks() {
    let (table, slots, args, _) = device();
    let read = || table.read().unwrap_or_else(PoisonError::into_inner);
    // Both launches of a run check the block, each under its own lock.
    let launches = |block: &BlockBuf| {
        time(|| {
            black_box(
                read()
                    .run_args(Op::LaunchAicore, black_box(block.args()))
                    .unwrap(),
            );
            black_box(
                read()
                    .run_args(Op::LaunchAicpu, black_box(block.args()))
                    .unwrap(),
            );
        })
    };
    let v1 = launches(&args);
    println!(
        "acl launch checks, 2 per run: RunArgs ({} B) {v1:.1} ns/run",
        args.args().bytes().len()
    );
    for (t, s) in [(0, 0), (2, 1), (8, 4), (64, 16), (256, 128)] {
        let block = work_block(&slots[0], t, s);
        let ns = launches(&block);
        println!(
            "acl launch checks, 2 per run: workload, {t} tensors + {s} scalars ({} B) {ns:.1} ns/run",
            block.args().bytes().len()
        );
    }
}
