//! Golden bytes: the a2a3 blocks and records of two runs, written out here
//! byte by byte from the reference runtime's public headers (simpler:
//! `kernel_args.h` for `KernelArgs` and `AicoreLaunchArgs`,
//! `launch_entry_args.h` for the envelope, `tensor.h` for the descriptor,
//! `device_run_result.h` for the result region; runclaim's own words where
//! the docs of `A2a3Abi` mark them so) — not computed from the layout the
//! crate defines. The adapter must write exactly these bytes, the
//! simulator's model must decode them into the run they describe, the
//! model must stamp exactly the golden records, and the adapter must decode
//! those. The negative control changes one byte at a time.
//!
//! The runs: epoch `0x1234_5678`, slot 1, 2 workers; the image at
//! `0x1_0000_0000`, the result region at `0x1_0000_9000`, the timing record
//! at `0x1_0000_9200` (all inside one allocation). A workload run: a staged
//! host tensor `x` (`In`, 16 bytes of `u32`) at `0x1_0000_a000`, a device
//! buffer `y` (`InOut`, 24 bytes of 2-byte elements) at `0x1_0000_a100`,
//! and the scalar `0x1122_3344_5566_7788`. A `RunSpec`-shaped run: its two
//! arena tensors, input (`In`) at `0x1_0000_b000` and output (`Out`) at
//! `0x1_0000_b040`, 12 bytes of `u32` each, and no scalar.

use super::*;
use crate::driver::abi::{AicpuBlock, RecordError, Verdict};
use crate::driver::sim::KernelRun;
use crate::driver::sim::memory::{Memory, Owner};

const EPOCH: u64 = 0x1234_5678;
const SLOT: u32 = 1;
const BLOCK_DIM: u32 = 2;
const MAX_BLOCK_DIM: u32 = 24;
const BASE: u64 = 0x1_0000_0000;
const IMAGE: u64 = BASE;
const RESULT: u64 = BASE + 0x9000;
const TIMING: u64 = BASE + 0x9200;
const ALLOCATION: u64 = 0x1_0000;

/// The bytes of a golden array, from its rows (one field or run of zeroes
/// each).
fn cat(rows: &[&[u8]]) -> Vec<u8> {
    rows.concat()
}

/// `AicoreLaunchArgs` of both runs (40 bytes).
fn golden_aicore() -> Vec<u8> {
    cat(&[
        &[0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // 0 runtime_args: the image
        &[0x00, 0x00, 0x00, 0x00], //                        8 enable_profiling_flag
        &[0x00, 0x00, 0x00, 0x00], //                       12 (padding to 8)
        &[0; 8],                   //                       16 ffts_base_addr
        &[0; 8],                   //                       24 chip_swimlane_aicore_rotation_table
        &[0x78, 0x56, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00], // 32 report_epoch
    ])
}

/// The first 192 bytes of an AICPU block of `t` tensors and `s` scalars:
/// `KernelArgs` (136), then the envelope's reserved bytes.
fn golden_envelope_header(t: u8, s: u8) -> Vec<u8> {
    cat(&[
        &[0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // 0 runtime_args: the image
        &[0; 8],                                           //   8 regs
        &[0; 8],                                           //  16 ffts_base_addr
        &[0; 8],                                           //  24 dump_data_base
        &[0; 8],                                           //  32 chip_swimlane_data_base
        &[0; 8],                                           //  40 chip_swimlane_run_terminal_bank
        &[0; 8],                                           //  48 pmu_data_base
        &[0; 8],                                           //  56 pmu_reg_addrs
        &[0; 8],                                           //  64 dep_gen_data_base
        &[0; 8],                                           //  72 scope_stats_data_base
        &[0; 8], //  80 chip_swimlane_aicore_rotation_table
        &[0x00, 0x92, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // 88 device_wall_data_base: timing
        &[0x00, 0x90, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // 96 run_result_data_base: result
        &[0x78, 0x56, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00], // 104 run_result_epoch
        &[0x00, 0x00, 0x00, 0x00], // 112 enable_profiling_flag
        &[0xc0, 0x00, 0x00, 0x00], // 116 entry_args_offset: 192
        &[t, 0x00, 0x00, 0x00], // 120 entry_tensor_count
        &[s, 0x00, 0x00, 0x00], // 124 entry_scalar_count
        &[0x01, 0x00, 0x00, 0x00], // 128 entry_args_source: LaunchEnvelope
        &[0x00, 0x00, 0x00, 0x00], // 132 (padding to 136)
        &[0x02, 0x00, 0x00, 0x00], // 136 block_dim [runclaim]
        &[0x01, 0x00, 0x00, 0x00], // 140 slot [runclaim]
        &[0; 48], // 144 reserved, to 192
    ])
}

/// One 128-byte tensor descriptor of a 1-D tensor at `addr` (its low two
/// bytes; the rest is `0x1_0000_xxxx`) of `size` bytes and `dtype`-byte
/// elements, `shape` of them, direction `dir`, `staged` 0 or 1.
fn golden_tensor(addr: [u8; 2], size: u8, dtype: u8, shape: u8, dir: u8, staged: u8) -> Vec<u8> {
    cat(&[
        &[addr[0], addr[1], 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // 0 buffer.addr
        &[size, 0, 0, 0, 0, 0, 0, 0],                            //  8 buffer.size
        &[0; 8],                                                 // 16 owner_task_id
        &[0; 8],                                                 // 24 start_offset
        &[0x00, 0x00, 0x00, 0x00],                               // 32 version
        &[0x01, 0x00, 0x00, 0x00],                               // 36 ndims: 1
        &[dtype, 0x00, 0x00, 0x00],                              // 40 dtype: the element size
        &[0x00],                                                 // 44 manual_dep
        &[0x01],                                                 // 45 is_contiguous
        &[0x01],                                                 // 46 address_space: device
        &[dir],                                                  // 47 direction [runclaim]
        &[shape, 0, 0, 0, 0, 0, 0, 0],                           // 48 shapes[0]
        &[staged, 0, 0, 0, 0, 0, 0, 0],                          // 56 staged [runclaim]
        &[shape, 0, 0, 0, 0, 0, 0, 0],                           // 64 extent_elem_cache
        &[0x01, 0, 0, 0, 0, 0, 0, 0],                            // 72 strides[0]: 1
        &[0; 48],                                                // 80 (padding to 128)
    ])
}

/// One run: what the adapter is given, and its golden blocks.
struct Case {
    name: &'static str,
    tensors: Vec<TensorView>,
    scalars: Vec<u64>,
    aicore: Vec<u8>,
    aicpu: Vec<u8>,
}

fn view(addr: u64, bytes: u64, elem_size: u32, dir: Dir, home: Home) -> TensorView {
    TensorView {
        span: DevSpan::new(DevPtr::from_raw(addr), bytes),
        elem_size,
        dir,
        home,
    }
}

fn cases() -> [Case; 2] {
    let workload = Case {
        name: "workload",
        tensors: vec![
            view(BASE + 0xa000, 16, 4, Dir::In, Home::Staging),
            view(BASE + 0xa100, 24, 2, Dir::InOut, Home::Buffer),
        ],
        scalars: vec![0x1122_3344_5566_7788],
        aicore: golden_aicore(),
        aicpu: cat(&[
            &golden_envelope_header(2, 1),
            &golden_tensor([0x00, 0xa0], 16, 4, 4, 1, 1), // 192: x
            &golden_tensor([0x00, 0xa1], 24, 2, 12, 3, 0), // 320: y
            &[0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11], // 448: the scalar
        ]),
    };
    let runspec = Case {
        name: "RunSpec",
        tensors: vec![
            view(BASE + 0xb000, 12, 4, Dir::In, Home::Arena),
            view(BASE + 0xb040, 12, 4, Dir::Out, Home::Arena),
        ],
        scalars: Vec::new(),
        aicore: golden_aicore(),
        aicpu: cat(&[
            &golden_envelope_header(2, 0),
            &golden_tensor([0x00, 0xb0], 12, 4, 3, 1, 1), // 192: the input
            &golden_tensor([0x40, 0xb0], 12, 4, 3, 2, 1), // 320: the output
        ]),
    };
    [workload, runspec]
}

fn identity() -> RunIdentity {
    RunIdentity {
        run_id: EPOCH,
        epoch: EPOCH,
        slot: SLOT,
        block_dim: BLOCK_DIM,
    }
}

/// Where the first byte of `got` and `want` differ, as a sentence.
fn compare(what: &str, got: &[u8], want: &[u8]) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let at = got.iter().zip(want).position(|(a, b)| a != b);
    Err(match at {
        Some(i) => format!(
            "{what}: byte {i} is {:#04x}, golden {:#04x}",
            got[i], want[i]
        ),
        None => format!("{what}: {} bytes, golden {}", got.len(), want.len()),
    })
}

/// The adapter's blocks for `case` are `aicore` and `aicpu`, byte for byte.
fn adapter_matches(case: &Case, aicore: &[u8], aicpu: &[u8]) -> Result<(), String> {
    let sizes = [image::bytes(BLOCK_DIM).unwrap(), 280, 80];
    let regions: Vec<_> = [IMAGE, RESULT, TIMING]
        .iter()
        .zip(sizes)
        .map(|(&a, n)| DevSpan::new(DevPtr::from_raw(a), n as u64))
        .collect();
    let run = RunView::new(identity(), &regions, &case.tensors, &case.scalars);
    let mut buf = BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 8);
    A2a3Abi.aicore_block(&run, &mut buf.writer()).unwrap();
    compare("the adapter's AICore block", buf.args().bytes(), aicore)?;
    assert_eq!(recorded(&buf), [(0, IMAGE, regions[0].len())]);
    assert_eq!(
        A2a3Abi.aicpu_block(&run, &mut buf.writer()),
        Ok(AicpuBlock::Written)
    );
    compare("the adapter's AICPU block", buf.args().bytes(), aicpu)?;
    // Every address it wrote, recorded for the driver with its range.
    let mut want = vec![
        (0, IMAGE, regions[0].len()),
        (88, TIMING, 80),
        (96, RESULT, 280),
    ];
    for (t, at) in case.tensors.iter().zip([192, 320]) {
        want.push((at, t.span.ptr().raw(), t.span.len()));
    }
    assert_eq!(recorded(&buf), want);
    Ok(())
}

/// The addresses a block's writer recorded: (offset, address, bytes).
fn recorded(buf: &BlockBuf) -> Vec<(usize, u64, u64)> {
    assert!(buf.args().consistent().is_ok());
    let fields = buf.args().fields().iter();
    fields.map(|f| (f.at, f.addr.raw(), f.len)).collect()
}

/// Device memory holding every range the runs name.
fn memory() -> Memory {
    let mut mem = Memory::new(1 << 20);
    assert_eq!(mem.alloc(ALLOCATION, Owner(1)), Some(BASE));
    mem
}

/// The simulator's model decodes `aicore` and `aicpu` into `case`'s run:
/// its identity, slot, workers and regions at launch, and its tensors and
/// scalars as a dispatched worker reads them from the task payload.
fn model_decodes(case: &Case, aicore: &[u8], aicpu: &[u8]) -> Result<(), String> {
    let mut mem = memory();
    let mut m = DeviceMemory::new(&mut mem);
    let model = A2a3Model;
    let k = model
        .decode_aicore(aicore, BLOCK_DIM, MAX_BLOCK_DIM, &m)
        .map_err(|e| format!("the model refused the AICore block: {e}"))?;
    let c = model
        .decode_aicpu(aicpu, MAX_BLOCK_DIM, &m)
        .map_err(|e| format!("the model refused the AICPU block: {e}"))?;
    let core = (k.identity, k.block_dim, k.base);
    if core != (EPOCH, BLOCK_DIM, IMAGE) {
        return Err(format!("the AICore block decodes as {core:x?}"));
    }
    let cpu = (c.identity, c.slot, c.block_dim, c.base, c.status, c.timing);
    if cpu != (EPOCH, SLOT, BLOCK_DIM, IMAGE, RESULT, TIMING) {
        return Err(format!("the AICPU block decodes as {cpu:x?}"));
    }
    let fault = |e: ModelError| format!("the model faulted: {e}");
    model.aicpu_start(&c, &mut m).map_err(fault)?;
    model.dispatch(&c, 0, &mut m).map_err(fault)?;
    let Some(Task::Read(run)) = model.task(&k, 0, &m).map_err(fault)? else {
        return Err("worker 0 found no task".into());
    };
    let tensors = case
        .tensors
        .iter()
        .map(|t| TensorArg {
            addr: t.span.ptr().raw(),
            bytes: t.span.len(),
            elem_size: t.elem_size,
            dir: t.dir,
            staged: t.staged(),
        })
        .collect();
    let want = KernelRun::new(EPOCH, SLOT, BLOCK_DIM, tensors, case.scalars.clone());
    if run != want {
        return Err(format!("the worker's run is {run:x?}"));
    }
    Ok(())
}

#[test]
fn the_adapter_writes_the_golden_blocks_and_the_model_decodes_them() {
    for case in cases() {
        adapter_matches(&case, &case.aicore, &case.aicpu).unwrap();
        model_decodes(&case, &case.aicore, &case.aicpu).unwrap();
        assert_eq!(case.aicpu.len(), 192 + 128 * 2 + 8 * case.scalars.len());
    }
}

/// The timing record of a run whose AICore kernel started at tick 100, its
/// AICPU kernel at 104, dispatched at 120 and ended at 700 (80 bytes).
fn golden_timing() -> Vec<u8> {
    cat(&[
        &[0x78, 0x56, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00], // 0 epoch
        &[0xe0, 0x2e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 8 wall_ns: 600 ticks = 12,000 ns
        &[0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 16 run_wall_start_cycles: 100
        &[0xbc, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 24 run_wall_end_cycles: 700
        &[0x80, 0xf0, 0xfa, 0x02, 0x00, 0x00, 0x00, 0x00], // 32 sys_cnt_hz: 50,000,000
        &[0x00, 0x00, 0x00, 0x00],                         // 40 device_id
        &[0x01, 0x00, 0x00, 0x00],                         // 44 slot
        &[0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 48 aicore_start_cycles: 100
        &[0x68, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 56 aicpu_start_cycles: 104
        &[0x78, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // 64 dispatch_cycles: 120
        &[0x02, 0x00, 0x00, 0x00],                         // 72 block_dim
        &[0x00, 0x00, 0x00, 0x00],                         // 76 reserved
    ])
}

/// The result region's header (24 bytes) of a run that succeeded (`code`
/// 0) or failed with error code 7.
fn golden_result(code: u8) -> Vec<u8> {
    let (verdict, source) = if code == 0 { (1, 0) } else { (2, 1) };
    cat(&[
        &[0x78, 0x56, 0x34, 0x12, 0x00, 0x00, 0x00, 0x00], // 0 published
        &[0x00, 0x00, 0x00, 0x00],                         // 8 payload_bytes
        &[verdict, 0x00, 0x00, 0x00],                      // 12 verdict
        &[code, 0x00, 0x00, 0x00],                         // 16 completion_code
        &[source, 0x00, 0x00, 0x00],                       // 20 code_source
    ])
}

/// The model stamps `timing` and `ok` / `failed` for a run that ends with
/// code 0 / 7.
fn model_stamps(timing: &[u8], ok: &[u8], failed: &[u8]) -> Result<(), String> {
    let model = A2a3Model;
    for (code, result) in [(0, ok), (7, failed)] {
        let mut mem = memory();
        let mut dev = DeviceMemory::new(&mut mem);
        let core = AicoreLaunch::new(EPOCH, BLOCK_DIM, IMAGE);
        let cpu = AicpuLaunch::new(EPOCH, SLOT, BLOCK_DIM, IMAGE, RESULT, TIMING);
        model.aicore_start(&core, &mut dev, 100).unwrap();
        let end = RunEnd::new(code, 104, 120, 700);
        model.write_records(&cpu, &end, &mut dev).unwrap();
        let (mut stamped_timing, mut stamped_result) = (vec![0; 80], vec![0; 24]);
        dev.read(TIMING, &mut stamped_timing).unwrap();
        dev.read(RESULT, &mut stamped_result).unwrap();
        compare("the model's timing record", &stamped_timing, timing)?;
        let what = format!("the model's result (code {code})");
        compare(&what, &stamped_result, result)?;
    }
    Ok(())
}

/// The adapter reads `timing`, `ok` and `failed` as the run's.
fn adapter_reads(timing: &[u8], ok: &[u8], failed: &[u8]) -> Result<(), String> {
    let id = identity();
    let wall = A2a3Abi.decode_timing(&id, timing);
    let want = WallRecord {
        run_id: EPOCH,
        slot: SLOT,
        block_dim: BLOCK_DIM,
        aicore_start: 100,
        aicpu_start: 104,
        dispatched: 120,
        end: 700,
    };
    let statuses = [
        A2a3Abi.decode_status(&id, ok),
        A2a3Abi.decode_status(&id, failed),
    ];
    let wanted: [Result<Verdict, RecordError>; 2] =
        [Ok(Verdict::Succeeded), Ok(Verdict::Failed { code: 7 })];
    if wall != Ok(want) || statuses != wanted {
        return Err(format!("the adapter reads {wall:?} and {statuses:?}"));
    }
    Ok(())
}

#[test]
fn the_model_stamps_the_golden_records_and_the_adapter_reads_them() {
    let (timing, ok, failed) = (golden_timing(), golden_result(0), golden_result(7));
    model_stamps(&timing, &ok, &failed).unwrap();
    adapter_reads(&timing, &ok, &failed).unwrap();
}

/// `golden` with byte `i` changed.
fn flipped(golden: &[u8], i: usize) -> Vec<u8> {
    let mut b = golden.to_vec();
    b[i] ^= 0x01;
    b
}

#[test]
fn negative_control_every_one_byte_change_of_a_golden_block_fails_both_sides() {
    for case in cases() {
        for i in 0..case.aicore.len() {
            let bad = flipped(&case.aicore, i);
            assert!(adapter_matches(&case, &bad, &case.aicpu).is_err());
            let e = model_decodes(&case, &bad, &case.aicpu);
            assert!(
                e.is_err(),
                "{}: AICore byte {i} changed, decoded",
                case.name
            );
        }
        for i in 0..case.aicpu.len() {
            let bad = flipped(&case.aicpu, i);
            assert!(adapter_matches(&case, &case.aicore, &bad).is_err());
            let e = model_decodes(&case, &case.aicore, &bad);
            assert!(e.is_err(), "{}: AICPU byte {i} changed, decoded", case.name);
        }
    }
    // What a failure says: run_result_epoch's low byte.
    let [case, _] = cases();
    let bad = flipped(&case.aicpu, kernel_args::RUN_RESULT_EPOCH);
    assert_eq!(
        adapter_matches(&case, &case.aicore, &bad),
        Err("the adapter's AICPU block: byte 104 is 0x78, golden 0x79".into())
    );
    assert_eq!(
        model_decodes(&case, &case.aicore, &bad),
        Err("the AICPU block decodes as (12345679, 1, 2, 100000000, 100009000, 100009200)".into())
    );
}

#[test]
fn negative_control_every_one_byte_change_of_a_golden_record_fails() {
    let (timing, ok, failed) = (golden_timing(), golden_result(0), golden_result(7));
    for i in 0..timing.len() {
        assert!(model_stamps(&flipped(&timing, i), &ok, &failed).is_err());
    }
    for i in 0..ok.len() {
        assert!(model_stamps(&timing, &flipped(&ok, i), &failed).is_err());
        assert!(model_stamps(&timing, &ok, &flipped(&failed, i)).is_err());
    }
    // The adapter refuses a record of another epoch, or of another slot,
    // and reads what it decodes (the verdict, the code, the cycles) as it
    // is.
    for at in [0, 1, 44, 72, 48, 56, 64, 24] {
        assert!(
            adapter_reads(&flipped(&timing, at), &ok, &failed).is_err(),
            "timing byte {at}"
        );
    }
    for at in [0, 7, 12, 16] {
        assert!(
            adapter_reads(&timing, &flipped(&ok, at), &failed).is_err(),
            "result byte {at}"
        );
        assert!(
            adapter_reads(&timing, &ok, &flipped(&failed, at)).is_err(),
            "result byte {at}"
        );
    }
}
