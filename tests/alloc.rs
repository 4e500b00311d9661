//! Zero heap allocations per run in steady state: a counting global
//! allocator watches 1,000 full prepare → launch → fence → finalize cycles
//! at depth 2 and 3, 1,000 pipeline runs (complete the oldest, submit
//! the next) at depth 2, 3, 8 and 16, and 1,000 typed workload runs with 4,
//! 16 and 32 bound arguments (the workload built for each run), 1,000
//! shared-device `RunSpec` runs (blocking and awaited, each run's values
//! held past the next), on a
//! driver that completes everything at once (so any allocation seen is the
//! contract's own). The a2a3 adapter's per-run work (its blocks for 4, 16
//! and 256 tensors, its records) is measured at the adapter: the instant
//! driver speaks runclaim's layout only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;

use runclaim::contract::{Depth, Slot, SlotOf, SupportedDepth};
use runclaim::driver::abi::Program;
use runclaim::driver::abi::{Dir, Home};
use runclaim::driver::instant::InstantDriver;
use runclaim::{
    Callable, Device, DeviceBuffer, DeviceConfig, Input, Outputs, Pipeline, RunSpec, Runner,
    SharedDevice, Workload,
};

struct Counting;

thread_local! {
    /// Count only this thread's allocations, only while armed. The count is
    /// per thread too: the tests run in parallel, and one of them allocates
    /// on purpose (its negative control).
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    if ARMED.with(Cell::get) {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the counting touches only const-initialized thread-local
// `Cell`s (no allocation, no destructor), so it cannot recurse.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded with the caller's layout (the `GlobalAlloc` contract).
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (above).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded unchanged; `ptr` came from `System` with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    ALLOCATIONS.with(Cell::get) - before
}

/// One serial cycle in slot `I`.
fn cycle<const I: usize, const D: usize>(
    runner: &Runner<'_, InstantDriver, D>,
    input: &[u32],
    out: &mut Outputs<I>,
) where
    Slot<I>: SlotOf<D>,
{
    let code = runner.code("f").unwrap();
    let token = runner.take_slot::<I>().unwrap();
    let run = runner
        .prepare(token, RunSpec::new(code, Input::Host(input)))
        .unwrap();
    let done = run
        .launch()
        .unwrap()
        .fence()
        .unwrap()
        .finalize(out)
        .unwrap();
    drop(done);
}

fn steady_state<const D: usize>()
where
    Depth<D>: SupportedDepth,
    Slot<0>: SlotOf<D>,
    Slot<1>: SlotOf<D>,
{
    let mut dev = Device::<_, D>::open(
        InstantDriver::new(),
        DeviceConfig::default().max_elements(64),
    )
    .unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().mul(3).add(1))])
        .unwrap();
    let input: Vec<u32> = (0..64).collect();
    let (mut o0, mut o1) = (Outputs::<0>::new(64), Outputs::<1>::new(64));
    let queued = |o0: &mut Outputs<0>, o1: &mut Outputs<1>| {
        // Two runs in flight, the second chained on the first, finalized in
        // reverse order.
        let code = runner.code("f").unwrap();
        let r0 = runner
            .prepare(
                runner.take_slot::<0>().unwrap(),
                RunSpec::new(code, Input::Host(&input)),
            )
            .unwrap()
            .launch()
            .unwrap();
        let r1 = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                RunSpec::new(code, Input::Previous),
            )
            .unwrap()
            .launch()
            .unwrap();
        drop(r1.fence().unwrap().finalize(o1).unwrap());
        drop(r0.fence().unwrap().finalize(o0).unwrap());
    };
    // Warm up: first uses may size internal buffers.
    for _ in 0..10 {
        cycle::<0, D>(&runner, &input, &mut o0);
        queued(&mut o0, &mut o1);
    }
    let n = allocations_in(|| {
        for _ in 0..1000 {
            cycle::<0, D>(&runner, &input, &mut o0);
            queued(&mut o0, &mut o1);
        }
    });
    assert_eq!(
        n, 0,
        "depth {D}: {n} allocations in 1,000 steady-state cycles"
    );
    // The values are right, so the cycles did real work.
    let want: Vec<u32> = input.iter().map(|x| (x * 3 + 1) * 3 + 1).collect();
    assert_eq!(o1.values(), &want[..]);
    assert_eq!(o0.values()[5], 16);
}

/// A full pipeline in steady state: each step completes the oldest run
/// (checking its values) and submits the next, alternating host and
/// chained inputs.
fn pipeline_steady_state<const D: usize>()
where
    Depth<D>: SupportedDepth,
{
    let mut dev = Device::<_, D>::open(
        InstantDriver::new(),
        DeviceConfig::default().max_elements(64),
    )
    .unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().mul(3).add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let input: Vec<u32> = (0..64).collect();
    let once: Vec<u32> = input.iter().map(|x| x * 3 + 1).collect();
    let twice: Vec<u32> = once.iter().map(|x| x * 3 + 1).collect();
    let mut pipe = Pipeline::<_, D, u64>::new(&runner).unwrap();
    let mut next = 0u64;
    let mut checked = 0u64;
    let mut step = |pipe: &mut Pipeline<'_, InstantDriver, D, u64>| {
        if pipe.is_full() {
            let done = pipe.complete().unwrap().unwrap();
            let want = if done.tag.is_multiple_of(2) {
                &once
            } else {
                &twice
            };
            assert_eq!(done.values, &want[..], "run {}", done.tag);
            checked += 1;
        }
        let spec = if next.is_multiple_of(2) {
            RunSpec::new(code, Input::Host(&input))
        } else {
            RunSpec::new(code, Input::Previous)
        };
        pipe.submit(spec, next).unwrap();
        next += 1;
    };
    // Warm up, and fill the pipeline.
    for _ in 0..(2 * D + 10) {
        step(&mut pipe);
    }
    let n = allocations_in(|| {
        for _ in 0..1000 {
            step(&mut pipe);
        }
    });
    assert_eq!(n, 0, "pipeline depth {D}: {n} allocations in 1,000 runs");
    while let Some(done) = pipe.complete().unwrap() {
        let want = if done.tag.is_multiple_of(2) {
            &once
        } else {
            &twice
        };
        assert_eq!(done.values, &want[..], "run {}", done.tag);
        checked += 1;
    }
    // Every run came back and was checked: the steps did real work.
    assert_eq!(checked, next);
    assert!(checked >= 1000);
}

#[test]
fn no_allocation_per_pipeline_run_in_steady_state() {
    pipeline_steady_state::<2>();
    pipeline_steady_state::<3>();
    pipeline_steady_state::<8>();
    pipeline_steady_state::<16>();
}

/// A shared device in steady state: `RunSpec` runs submitted and waited
/// for, blocking and awaited, each run's values held past the next
/// submission (a ticket's values outlive its lane's reuse) and checked.
/// Negative control: values kept alive, unreturned, make the pool hand
/// out fresh buffers (one allocation per run).
fn shared_steady_state<const D: usize>(awaited: bool)
where
    Depth<D>: SupportedDepth,
{
    let shared = SharedDevice::<_, D>::open(
        InstantDriver::new(),
        DeviceConfig::default().max_elements(64),
    )
    .unwrap();
    shared
        .publish(&[Callable::program("f", &Program::new().mul(3).add(1))])
        .unwrap();
    let code = shared.code("f").unwrap();
    let input: Vec<u32> = (0..64).collect();
    let want: Vec<u32> = input.iter().map(|x| x * 3 + 1).collect();
    let run = || {
        let spec = RunSpec::new(code, Input::Host(&input));
        if awaited {
            // Polled with a no-op waker (pollster allocates a waker per
            // call): the instant driver has completed everything by then.
            let mut fut = std::pin::pin!(async { shared.submit(spec).await.unwrap().await });
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            (0..1_000_000)
                .find_map(|_| match fut.as_mut().poll(&mut cx) {
                    std::task::Poll::Ready(r) => Some(r),
                    std::task::Poll::Pending => None,
                })
                .expect("the instant driver completes a run within a million polls")
        } else {
            shared.submit_blocking(spec).unwrap().wait()
        }
        .unwrap()
    };
    let mut held = run();
    for _ in 0..10 {
        held = run();
    }
    let n = allocations_in(|| {
        for _ in 0..1000 {
            // The last run's values, held while the next runs in the same
            // lane, then checked and dropped (back to the pool).
            let next = run();
            assert_eq!(held.values, want);
            held = next;
        }
    });
    assert_eq!(
        n, 0,
        "shared depth {D} (awaited {awaited}): {n} allocations in 1,000 runs"
    );
    let mut kept = Vec::new();
    let leaked = allocations_in(|| {
        for _ in 0..10 {
            kept.push(run());
        }
    });
    assert!(
        leaked >= 10,
        "values never returned: {leaked} allocations for 10 runs"
    );
    assert!(kept.iter().all(|d| d.values == want));
}

#[test]
fn no_allocation_per_shared_run_in_steady_state() {
    shared_steady_state::<2>(false);
    shared_steady_state::<4>(false);
    shared_steady_state::<2>(true);
}

#[test]
fn no_allocation_per_run_in_steady_state() {
    steady_state::<2>();
    steady_state::<3>();
    // Negative control: the counter sees an allocation when there is one.
    let n = allocations_in(|| drop(std::hint::black_box(vec![1u8; 16])));
    assert!(n >= 1, "the counting allocator must count");
}

/// The instant driver runs version-2 (workload) blocks without allocating:
/// 1,000 launches of a block with four tensors and two scalars, at the
/// driver level (blocks parsed in place, every range checked, the program
/// computed from the first readable into the first writable tensor).
#[test]
fn no_allocation_per_workload_launch_on_the_instant_driver() {
    use runclaim::driver::Driver;
    use runclaim::driver::abi::{
        self, BlockBuf, DevSpan, Dir, KernelAbi, RunIdentity, RunView, RunclaimAbi, StatusRecord,
        TensorView, WallRecord,
    };

    let d = InstantDriver::new();
    let (aicore, aicpu) = (d.create_stream().unwrap(), d.create_stream().unwrap());
    let code = d
        .register_code(&Program::new().add(1).encode())
        .unwrap()
        .handle;
    let hs = d.alloc(abi::handshake_bytes(4)).unwrap();
    let wall = d.alloc(WallRecord::SIZE).unwrap();
    let status = d.alloc(StatusRecord::SIZE).unwrap();
    let x = d.alloc(64).unwrap();
    let y = d.alloc(64).unwrap();
    let span = |p: runclaim::driver::DevPtr, n: usize| DevSpan::new(p, n as u64);
    let tensor = |p, dir| TensorView {
        span: span(p, 64),
        elem_size: 4,
        dir,
        home: Home::Staging,
    };
    let tensors = [
        tensor(y, Dir::Out),
        tensor(x, Dir::In),
        tensor(x, Dir::In),
        tensor(y, Dir::InOut),
    ];
    let regions = [
        span(hs, abi::handshake_bytes(4)),
        span(wall, WallRecord::SIZE),
        span(status, StatusRecord::SIZE),
    ];
    // One block buffer reused run after run, as the device's slots hold
    // theirs: writing a block into it allocates nothing.
    let mut block = BlockBuf::with_capacity(RunclaimAbi.max_block_bytes(), 3 + tensors.len());
    let mut out = [0u8; 64];
    let n = allocations_in(|| {
        for run_id in 1..=1000u64 {
            let id = RunIdentity {
                run_id,
                epoch: run_id,
                slot: 0,
                block_dim: 4,
            };
            let view = RunView::new(id, &regions, &tensors, &[1, 2]);
            RunclaimAbi
                .aicore_block(&view, &mut block.writer())
                .unwrap();
            d.copy_to_device(x, &[u8::try_from(run_id % 200).unwrap(); 64])
                .unwrap();
            d.launch_aicore(aicore, code, 4, block.args()).unwrap();
            d.launch_aicpu(aicpu, block.args()).unwrap();
            d.sync_stream(aicpu, std::time::Duration::from_secs(1))
                .unwrap();
            d.copy_from_device(&mut out, y).unwrap();
            let v = u8::try_from(run_id % 200).unwrap();
            assert_eq!(out[..4], (u32::from_le_bytes([v; 4]) + 1).to_le_bytes());
        }
    });
    assert_eq!(n, 0, "{n} allocations in 1,000 workload launches");
}

/// The a2a3 adapter builds a run's blocks and reads its records without
/// allocating: 1,000 runs, each its AICore block and its AICPU block
/// written into the slot's reused block buffers (sized as the device sizes
/// them: the adapter's largest block, room for every address field) and
/// its stamped result and timing records decoded, for runs of 4, 16 and 256
/// tensors. Measured at the adapter: the instant driver speaks runclaim's
/// layout only, and a full a2a3 run on the simulator allocates inside the
/// simulator itself.
#[test]
fn no_allocation_per_run_in_the_a2a3_adapters_blocks_and_records() {
    use runclaim::driver::DevPtr;
    use runclaim::driver::abi::{
        A2a3Abi, A2a3Result, A2a3Timing, AicpuBlock, BlockBuf, DevSpan, KernelAbi, RunIdentity,
        RunView, Shape, TensorView, Verdict,
    };

    let abi = A2a3Abi;
    let block_dim = 4;
    // One slot's regions (image, result, timing) at made-up addresses.
    let mut specs = Vec::new();
    abi.regions(&Shape::new(block_dim, 2), &mut specs).unwrap();
    let regions: Vec<DevSpan> = specs
        .iter()
        .zip([0x10_0000u64, 0x20_0000, 0x30_0000])
        .map(|(r, a)| DevSpan::new(DevPtr::from_raw(a), r.bytes as u64))
        .collect();
    let dirs = [Dir::In, Dir::Out, Dir::InOut];
    for count in [4usize, 16, 256] {
        let tensors: Vec<TensorView> = (0..count)
            .map(|i| TensorView {
                span: DevSpan::new(DevPtr::from_raw(0x100_0000 + 0x1000 * i as u64), 256),
                elem_size: 4,
                dir: dirs[i % 3],
                home: if i % 2 == 0 {
                    Home::Staging
                } else {
                    Home::Buffer
                },
            })
            .collect();
        let scalars: Vec<u64> = (0..8).collect();
        let mut aicore = BlockBuf::with_capacity(abi.max_block_bytes(), 300);
        let mut aicpu = BlockBuf::with_capacity(abi.max_block_bytes(), 300);
        let (mut core_bytes, mut cpu_bytes, mut cpu_fields, mut decoded) = (0, 0, 0, 0u64);
        let n = allocations_in(|| {
            for run_id in 1..=1000u64 {
                let id = RunIdentity {
                    run_id,
                    epoch: run_id,
                    slot: u32::try_from(run_id % 2).unwrap(),
                    block_dim,
                };
                let view = RunView::new(id, &regions, &tensors, &scalars);
                abi.aicore_block(&view, &mut aicore.writer()).unwrap();
                let written = abi.aicpu_block(&view, &mut aicpu.writer()).unwrap();
                assert_eq!(written, AicpuBlock::Written);
                core_bytes = aicore.args().bytes().len();
                cpu_bytes = aicpu.args().bytes().len();
                cpu_fields = aicpu.args().fields().len();
                // The records the device stamped for this run.
                let result = A2a3Result::ok(run_id).to_bytes();
                let at = abi.status_record();
                let status = &result[at.offset..at.offset + at.bytes];
                assert_eq!(abi.decode_status(&id, status), Ok(Verdict::Succeeded));
                let timing = A2a3Timing {
                    epoch: run_id,
                    slot: id.slot,
                    block_dim,
                    sys_cnt_hz: 50_000_000, // the a2a3 counter
                    run_wall_start_cycles: 100 * run_id,
                    run_wall_end_cycles: 100 * run_id + 50,
                    ..A2a3Timing::default()
                }
                .to_bytes();
                let wall = abi.decode_timing(&id, &timing).unwrap();
                decoded += u64::from(wall.run_id == run_id && wall.slot == id.slot);
            }
        });
        assert_eq!(
            n, 0,
            "{count} tensors: {n} allocations in 1,000 a2a3 block builds and record reads"
        );
        // The blocks were real: the AICore block, and the AICPU header,
        // every tensor and scalar, naming the three regions and each tensor.
        assert_eq!(core_bytes, A2a3Abi::AICORE_ARGS_SIZE, "{count} tensors");
        assert_eq!(
            cpu_bytes,
            A2a3Abi::ENVELOPE_HEADER + count * A2a3Abi::TENSOR_SIZE + 8 * scalars.len(),
            "{count} tensors"
        );
        assert_eq!(cpu_fields, 3 + count, "{count} tensors");
        assert_eq!(
            decoded, 1000,
            "{count} tensors: every record read back as the run's"
        );
    }
    // Negative controls: the counter sees an allocation when there is one,
    // and a block buffer made afresh for each run (not the slot's, reused)
    // is seen at every run.
    let n = allocations_in(|| drop(std::hint::black_box(vec![1u8; 16])));
    assert!(n >= 1, "the counting allocator must count");
    let id = RunIdentity {
        run_id: 1,
        epoch: 1,
        slot: 0,
        block_dim,
    };
    let view = RunView::new(id, &regions, &[], &[]);
    let n = allocations_in(|| {
        for _ in 0..10 {
            let mut fresh = BlockBuf::with_capacity(abi.max_block_bytes(), 300);
            abi.aicpu_block(&view, &mut fresh.writer()).unwrap();
        }
    });
    assert!(
        n >= 10,
        "a fresh block buffer per run: {n} allocations in 10 runs"
    );
}

/// What a typed workload run binds, by count: host inputs, host outputs,
/// device buffers, scalars.
#[derive(Clone, Copy, Debug)]
struct Mix {
    host_in: usize,
    host_out: usize,
    device: usize,
    scalars: usize,
}

/// Allocations in 1,000 serial typed workload runs of `mix` (the workload
/// built for each run, from borrowed host slices), after a warm-up; every
/// run's first output is checked (`3x + 1` from the first host input).
fn workload_runs(mix: Mix) -> usize {
    let mut dev = Device::<_, 2>::open(InstantDriver::new(), DeviceConfig::default()).unwrap();
    let bufs: Vec<DeviceBuffer<u32>> = (0..mix.device)
        .map(|_| dev.alloc_buffer::<u32>(64).unwrap())
        .collect();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().mul(3).add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let mut ins: Vec<Vec<u32>> = (0..mix.host_in).map(|_| vec![0u32; 64]).collect();
    let mut outs: Vec<Vec<u32>> = (0..mix.host_out).map(|_| vec![0u32; 64]).collect();
    let mut token = Some(runner.take_slot::<0>().unwrap());
    let mut run = |i: u32| {
        ins[0].fill(i);
        let mut work = Workload::new(code);
        // The first host input and output first: the program reads the
        // first readable tensor and writes the first writable one.
        let (first_out, more_outs) = outs.split_first_mut().unwrap();
        work.input(&ins[0]).output(first_out);
        for x in &ins[1..] {
            work.input(x);
        }
        for y in more_outs {
            work.output(y);
        }
        for (k, b) in bufs.iter().enumerate() {
            let dir = [Dir::In, Dir::InOut, Dir::Out][k % 3];
            work.buffer(b, dir);
        }
        for k in 0..mix.scalars {
            work.scalar(k as u64);
        }
        assert_eq!(
            work.tensor_count() + work.scalar_count(),
            mix.host_in + mix.host_out + mix.device + mix.scalars
        );
        let t = token.take().unwrap();
        let done = runner
            .prepare(t, &mut work)
            .unwrap()
            .launch()
            .unwrap()
            .fence()
            .unwrap()
            .finalize()
            .unwrap();
        token = Some(done.token);
        drop(work);
        assert_eq!(outs[0], [3 * i + 1; 64], "run {i}, {mix:?}");
    };
    for i in 0..10 {
        run(i);
    }
    allocations_in(|| {
        for i in 0..1000 {
            run(i);
        }
    })
}

#[test]
fn no_allocation_per_typed_workload_run_with_4_16_and_32_arguments() {
    for mix in [
        // 4: 1 host in + 1 host out + 2 device buffers.
        Mix {
            host_in: 1,
            host_out: 1,
            device: 2,
            scalars: 0,
        },
        // 16: 4 host in + 2 host out + 6 device buffers + 4 scalars.
        Mix {
            host_in: 4,
            host_out: 2,
            device: 6,
            scalars: 4,
        },
        // 32, at both inline limits: 16 tensors (6 host in + 4 host out + 6
        // device buffers) and 16 scalars.
        Mix {
            host_in: 6,
            host_out: 4,
            device: 6,
            scalars: 16,
        },
    ] {
        let n = workload_runs(mix);
        assert_eq!(
            n, 0,
            "{mix:?}: {n} allocations in 1,000 typed workload runs"
        );
    }
    // Control: one tensor past the inline 16 spills to the heap, and the
    // counter sees it (so the zeros above are the workload path's own).
    let spilled = workload_runs(Mix {
        host_in: 7,
        host_out: 4,
        device: 6,
        scalars: 0,
    });
    assert!(
        spilled >= 1000,
        "17 tensors: {spilled} allocations in 1,000 runs"
    );
}

/// Through a pipeline, workloads pass in and out by ownership: once each
/// lane's workload exists (its owned tensors boxed once), refilling every
/// part of it — an owned tensor in place, a scalar set by index, a device
/// buffer re-pointed — and resubmitting the one `complete` hands back
/// allocates nothing: 1,000 runs at depth 2 and 4, values checked.
fn pipeline_workload_runs<const D: usize>() -> usize
where
    Depth<D>: SupportedDepth,
{
    let mut dev = Device::<_, D>::open(InstantDriver::new(), DeviceConfig::default()).unwrap();
    let shared = dev.alloc_buffer::<u32>(8).unwrap();
    let other = dev.alloc_buffer::<u32>(8).unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = Pipeline::<_, D, u32>::new(&runner).unwrap();
    for k in 0..D {
        let k = u32::try_from(k).unwrap();
        let mut w = Workload::new(code);
        w.owned(vec![k; 8], Dir::In)
            .owned(vec![0u32; 8], Dir::Out)
            .buffer(&shared, Dir::In)
            .scalar(u64::from(k));
        pipe.submit(w, k).unwrap();
    }
    let mut next = u32::try_from(D).unwrap();
    let mut turn = || {
        let done = pipe.complete().unwrap().expect("a pending run");
        let mut w = done.work.expect("a workload");
        assert_eq!(w.get::<u32>(1).ok().map(|o| o[0]), Some(done.tag + 1));
        w.get_mut::<u32>(0).unwrap().fill(next);
        w.set_scalar(0, u64::from(next)).unwrap();
        let buffer = if next % 2 == 0 { &shared } else { &other };
        w.set_buffer(2, buffer.slice(0..4 + next as usize % 5))
            .unwrap();
        pipe.submit(w, next).unwrap();
        next += 1;
    };
    for _ in 0..50 {
        turn();
    }
    allocations_in(|| {
        for _ in 0..1_000 {
            turn();
        }
    })
}

#[test]
fn no_allocation_per_pipeline_workload_run_in_steady_state() {
    assert_eq!(pipeline_workload_runs::<2>(), 0);
    assert_eq!(pipeline_workload_runs::<4>(), 0);
}

/// A workload's tensors as its id-returning builders handed them back:
/// what each run's tag carries through the pipeline.
#[derive(Clone, Copy)]
struct Ids {
    x: runclaim::OwnedId<u32>,
    y: runclaim::OwnedId<u32>,
    b: runclaim::TensorId<u32>,
}

/// [`pipeline_workload_runs`], every tensor named by its typed id
/// (`work[x]`, `get`, `set_buffer(id, ..)`, `replace`): the identity and
/// type checks allocate nothing either.
fn pipeline_workload_runs_by_id<const D: usize>() -> usize
where
    Depth<D>: SupportedDepth,
{
    let mut dev = Device::<_, D>::open(InstantDriver::new(), DeviceConfig::default()).unwrap();
    let shared = dev.alloc_buffer::<u32>(8).unwrap();
    let other = dev.alloc_buffer::<u32>(8).unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = Pipeline::<_, D, (u32, Ids)>::new(&runner).unwrap();
    let mut spare = (0..D).map(|_| vec![0u32; 8]).collect::<Vec<_>>();
    for k in 0..D {
        let k = u32::try_from(k).unwrap();
        let mut w = Workload::new(code);
        let ids = Ids {
            x: w.add_owned(vec![k; 8], Dir::In),
            y: w.add_owned(vec![0u32; 8], Dir::Out),
            b: w.add_buffer(&shared, Dir::In),
        };
        w.scalar(u64::from(k));
        pipe.submit(w, (k, ids)).unwrap();
    }
    let mut next = u32::try_from(D).unwrap();
    let mut turn = || {
        let done = pipe.complete().unwrap().expect("a pending run");
        let (tag, ids) = done.tag;
        let mut w = done.work.expect("a workload");
        assert_eq!(w[ids.y][0], tag + 1);
        assert_eq!(w.get(ids.y).map(|y| y[7]).ok(), Some(tag + 1));
        // Swap the input for a spare buffer of the same capacity, refilled.
        let mut x = spare.pop().expect("a spare input");
        x.fill(next);
        spare.push(w.replace(ids.x, x).unwrap());
        w.set_scalar(0, u64::from(next)).unwrap();
        let buffer = if next % 2 == 0 { &shared } else { &other };
        w.set_buffer(ids.b, buffer.slice(0..4 + next as usize % 5))
            .unwrap();
        pipe.submit(w, (next, ids)).unwrap();
        next += 1;
    };
    for _ in 0..50 {
        turn();
    }
    allocations_in(|| {
        for _ in 0..1_000 {
            turn();
        }
    })
}

#[test]
fn no_allocation_per_pipeline_workload_run_refilled_by_id() {
    assert_eq!(pipeline_workload_runs_by_id::<2>(), 0);
    assert_eq!(pipeline_workload_runs_by_id::<4>(), 0);
}

/// A real-time simulator's copies, memsets, queries and waits first bring
/// the simulation up to the wall clock, over every stream: that catch-up
/// must allocate nothing (nor must an event record), or each call pays for
/// it on the host's side of the next launch.
#[test]
fn no_allocation_per_real_time_simulator_call_in_steady_state() {
    use runclaim::driver::Driver;
    use runclaim::sim::{SimConfig, SimDriver};
    let sim = SimDriver::real_time(SimConfig::default());
    let streams = [(); 3].map(|()| sim.create_stream().unwrap());
    let event = sim.create_event().unwrap();
    let p = sim.alloc(4096).unwrap();
    let (input, mut output) = ([7u8; 1024], [0u8; 1024]);
    let calls = |n: usize, output: &mut [u8; 1024]| {
        for i in 0..n {
            sim.copy_to_device(p, &input).unwrap();
            sim.memset(p.offset(1024), 0, 64).unwrap();
            sim.record_event(event, streams[i % 3]).unwrap();
            sim.copy_from_device(output, p).unwrap();
        }
    };
    calls(50, &mut output);
    assert_eq!(allocations_in(|| calls(1_000, &mut output)), 0);
    assert_eq!(output, input, "the calls did real work");
}

/// Replayed runs allocate nothing per run either: 1,000 `RunSpec` runs
/// replayed from slot 0's capture (made before the count) on an instant
/// device that captures, the replay's shape check and block write included.
#[test]
fn no_allocation_per_replayed_run_in_steady_state() {
    let mut dev = Device::<_, 2>::open(
        InstantDriver::with_capture(),
        DeviceConfig::default().max_elements(4),
    )
    .unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("f").unwrap();
    let x = [1u32, 2, 3, 4];
    let mut out = Outputs::<0>::new(4);
    let spec = RunSpec::new(code, Input::Host(&x));
    let (run, capture) = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .capture()
        .unwrap();
    let mut token = Some(run.fence().unwrap().finalize(&mut out).unwrap().token);
    let mut replay = || {
        let run = runner.prepare(token.take().unwrap(), spec).unwrap();
        let run = run.replay(&capture).unwrap();
        token = Some(run.fence().unwrap().finalize(&mut out).unwrap().token);
    };
    for _ in 0..10 {
        replay();
    }
    let n = allocations_in(|| {
        for _ in 0..1000 {
            replay();
        }
    });
    assert_eq!(n, 0, "{n} allocations in 1,000 replayed runs");
    assert_eq!(out.values(), [2, 3, 4, 5]);
}
