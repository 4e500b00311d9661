//! Workload argument blocks (version 2: tensors and scalars) at the driver
//! level, on the simulator and the instant driver, and Rust kernels on the
//! simulator: what a built-in program computes on tensors, the range checks
//! at launch, a Rust kernel's values, faults, error codes, code-memory
//! rules (dedup, pins, stale instruction caches) and real-time compute
//! time. Everything goes through the `Driver` trait, without the contract.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use runclaim::driver::abi::{
    self, BlockBuf, Dir, Program, RunArgs, StatusRecord, TensorArg, WallRecord, WorkArgs,
};
use runclaim::driver::instant::InstantDriver;
use runclaim::driver::{
    CodeHandle, DevPtr, Driver, DriverErrorKind, FaultKind, HandleKind, StreamId,
};
use runclaim::sim::{Fault, Kernel, KernelError, LatencyModel, SimConfig, SimDriver, SimKernel};

const SEC: Duration = Duration::from_secs(1);

/// One run's records and its version-2 argument block.
struct WorkRun {
    header: RunArgs,
    block: BlockBuf,
}

impl WorkRun {
    /// Allocates the run's handshake (zeroed), wall and status records and
    /// encodes a block with `tensors` and `scalars`.
    fn new<D: Driver>(
        d: &D,
        run_id: u64,
        block_dim: u32,
        tensors: &[TensorArg],
        scalars: &[u64],
    ) -> WorkRun {
        let hs_bytes = abi::handshake_bytes(block_dim);
        let hs = d.alloc(hs_bytes).unwrap();
        d.memset(hs, 0, hs_bytes).unwrap();
        let wall = d.alloc(WallRecord::SIZE).unwrap();
        let status = d.alloc(StatusRecord::SIZE).unwrap();
        let header = RunArgs {
            run_id,
            slot: 0,
            block_dim,
            len: 0,
            input: 0,
            output: 0,
            handshake: hs.raw(),
            wall: wall.raw(),
            status: status.raw(),
        };
        let mut run = WorkRun {
            header,
            block: BlockBuf::default(),
        };
        run.set_tensors(tensors, scalars);
        run
    }

    fn set_tensors(&mut self, tensors: &[TensorArg], scalars: &[u64]) {
        self.block = WorkArgs::block(&self.header, tensors, scalars).unwrap();
    }

    fn launch<D: Driver>(&self, d: &D, aicore: StreamId, aicpu: StreamId, code: CodeHandle) {
        d.launch_aicore(aicore, code, self.header.block_dim, self.block.args())
            .unwrap();
        d.launch_aicpu(aicpu, self.block.args()).unwrap();
    }

    fn status<D: Driver>(&self, d: &D) -> StatusRecord {
        let mut b = [0u8; StatusRecord::SIZE];
        d.copy_from_device(&mut b, DevPtr::from_raw(self.header.status))
            .unwrap();
        StatusRecord::from_bytes(&b).unwrap()
    }

    fn wall<D: Driver>(&self, d: &D) -> WallRecord {
        let mut b = [0u8; WallRecord::SIZE];
        d.copy_from_device(&mut b, DevPtr::from_raw(self.header.wall))
            .unwrap();
        WallRecord::from_bytes(&b).unwrap()
    }
}

fn tensor(p: DevPtr, bytes: usize, dir: Dir) -> TensorArg {
    TensorArg {
        addr: p.raw(),
        bytes: bytes as u64,
        elem_size: 4,
        dir,
        staged: false,
    }
}

/// A device buffer holding `values`.
fn buffer<D: Driver, T: bytemuck::Pod>(d: &D, values: &[T]) -> DevPtr {
    let bytes: &[u8] = bytemuck::cast_slice(values);
    let p = d.alloc(bytes.len().max(1)).unwrap();
    d.copy_to_device(p, bytes).unwrap();
    p
}

fn read<D: Driver, T: bytemuck::Pod>(d: &D, p: DevPtr, n: usize) -> Vec<T> {
    let mut v = vec![T::zeroed(); n];
    d.copy_from_device(bytemuck::cast_slice_mut(&mut v), p)
        .unwrap();
    v
}

fn pair<D: Driver>(d: &D) -> (StreamId, StreamId) {
    (d.create_stream().unwrap(), d.create_stream().unwrap())
}

fn stepped() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

/// Tensor 0 (In, 10 elements) → tensor 1 (Out, 12 elements): the program
/// computes min(10, 12) = 10 elements, split over 3 workers; the output's
/// last two elements are untouched. Then one `InOut` tensor computes in
/// place, and a block without a writable tensor computes nothing but
/// completes with the program's fail code.
fn program_runs_on_tensors<D: Driver>(d: &D, drive: impl Fn(StreamId)) {
    let (aicore, aicpu) = pair(d);
    let program = Program::new().add(1).mul(2);
    let code = d.register_code(&program.encode()).unwrap().handle;
    let input: Vec<u32> = (1..=10).collect();
    let x = buffer(d, &input);
    let y = buffer(d, &[0xffff_ffffu32; 12]);
    let run = WorkRun::new(
        d,
        1,
        3,
        &[tensor(x, 40, Dir::In), tensor(y, 48, Dir::Out)],
        &[5],
    );
    run.launch(d, aicore, aicpu, code);
    drive(aicpu);
    let mut want: Vec<u32> = input.iter().map(|&v| (v + 1) * 2).collect();
    want.extend([0xffff_ffff; 2]);
    assert_eq!(read::<D, u32>(d, y, 12), want);
    assert_eq!(
        read::<D, u32>(d, x, 10),
        input,
        "the In tensor is not written"
    );
    let st = run.status(d);
    assert_eq!((st.run_id, st.state, st.code), (1, StatusRecord::DONE, 0));

    // One InOut tensor: computed in place.
    let z = buffer(d, &[7u32, 8]);
    let out = buffer(d, &[0u32; 2]);
    let run = WorkRun::new(d, 2, 2, &[tensor(z, 8, Dir::InOut)], &[]);
    run.launch(d, aicore, aicpu, code);
    drive(aicpu);
    assert_eq!(read::<D, u32>(d, z, 2), vec![16, 18], "in place");
    // An Out tensor before an InOut one: the first reader is the InOut,
    // the first writer the Out.
    let run = WorkRun::new(
        d,
        3,
        1,
        &[tensor(out, 8, Dir::Out), tensor(z, 8, Dir::InOut)],
        &[],
    );
    run.launch(d, aicore, aicpu, code);
    drive(aicpu);
    assert_eq!(read::<D, u32>(d, out, 2), vec![34, 38], "z → out");
    assert_eq!(read::<D, u32>(d, z, 2), vec![16, 18]);

    // Nothing writable: nothing computed, the run completes with the fail code.
    let failing = d
        .register_code(&Program::new().add(1).fail(9).encode())
        .unwrap()
        .handle;
    let run = WorkRun::new(d, 4, 2, &[tensor(z, 8, Dir::In)], &[]);
    run.launch(d, aicore, aicpu, failing);
    drive(aicpu);
    assert_eq!(read::<D, u32>(d, z, 2), vec![16, 18]);
    let st = run.status(d);
    assert_eq!((st.run_id, st.state, st.code), (4, StatusRecord::DONE, 9));
    // No tensors at all.
    let run = WorkRun::new(d, 5, 1, &[], &[1, 2]);
    run.launch(d, aicore, aicpu, code);
    drive(aicpu);
    assert_eq!(run.status(d).code, 0);
}

#[test]
fn a_program_computes_from_the_first_reader_into_the_first_writer_on_the_simulator() {
    let sim = SimDriver::stepped(stepped());
    program_runs_on_tensors(&sim, |s| sim.sync_stream(s, SEC).unwrap());
    assert_eq!(sim.stats().stale_executions, 0);
}

#[test]
fn a_program_computes_from_the_first_reader_into_the_first_writer_on_the_instant_driver() {
    let d = InstantDriver::new();
    program_runs_on_tensors(&d, |s| d.sync_stream(s, SEC).unwrap());
}

/// The same block, once with a tensor range outside every allocation
/// (refused at launch, nothing queued, nothing written), once in bounds
/// (accepted: the negative control).
fn out_of_range_tensors_are_refused<D: Driver>(d: &D, queued: impl Fn(StreamId) -> usize) {
    let (aicore, aicpu) = pair(d);
    let code = d
        .register_code(&Program::new().add(1).encode())
        .unwrap()
        .handle;
    let x = buffer(d, &[1u32; 4]);
    let y = buffer(d, &[0u32; 4]);
    let good = [tensor(x, 16, Dir::In), tensor(y, 16, Dir::Out)];
    // One byte past the end of y; a tensor in the guard gap after it; a
    // range that wraps the address space.
    let past_end = [good[0], tensor(y, 17, Dir::Out)];
    let in_gap = [
        good[0],
        TensorArg {
            addr: y.raw() + 64,
            ..good[1]
        },
    ];
    let wraps = [
        good[0],
        TensorArg {
            addr: u64::MAX - 3,
            ..good[1]
        },
    ];
    let mut run = WorkRun::new(d, 1, 2, &good, &[]);
    for bad in [&past_end[..], &in_gap, &wraps] {
        run.set_tensors(bad, &[]);
        let e = d
            .launch_aicore(aicore, code, 2, run.block.args())
            .unwrap_err();
        assert!(
            matches!(e.kind(), DriverErrorKind::BadAddress { .. }),
            "{e}"
        );
        let e = d.launch_aicpu(aicpu, run.block.args()).unwrap_err();
        assert!(
            matches!(e.kind(), DriverErrorKind::BadAddress { .. }),
            "{e}"
        );
    }
    assert_eq!(
        (queued(aicore), queued(aicpu)),
        (0, 0),
        "nothing was queued"
    );
    assert_eq!(read::<D, u32>(d, y, 4), vec![0; 4]);
    // A freed tensor is outside memory too.
    let gone = buffer(d, &[0u32; 4]);
    d.free(gone).unwrap();
    run.set_tensors(&[good[0], tensor(gone, 16, Dir::Out)], &[]);
    assert!(d.launch_aicore(aicore, code, 2, run.block.args()).is_err());
    // A malformed block (a count that disagrees with the length): the
    // device cannot decode it, and refuses it.
    run.set_tensors(&good, &[]);
    let bytes = run.block.args().bytes();
    let bad = BlockBuf::from_bytes(&bytes[..bytes.len() - 1]);
    let e = d.launch_aicpu(aicpu, bad.args()).unwrap_err();
    assert!(
        matches!(e.kind(), DriverErrorKind::InvalidArgument { .. }),
        "{e}"
    );
    // Negative control: the same block in bounds is accepted and computes.
    run.set_tensors(&good, &[]);
    run.launch(d, aicore, aicpu, code);
    d.sync_stream(aicpu, SEC).unwrap();
    assert_eq!(read::<D, u32>(d, y, 4), vec![2; 4]);
}

#[test]
fn a_tensor_outside_memory_is_refused_before_anything_is_queued_on_the_simulator() {
    let sim = SimDriver::stepped(stepped());
    out_of_range_tensors_are_refused(&sim, |s| sim.queued(s));
    // The header's v1 fields must be 0 in a workload block.
    let (aicore, _) = pair(&sim);
    let code = sim.register_code(&Program::new().encode()).unwrap().handle;
    // (A block writer zeroes them: the bytes are encoded by hand, and the
    // device decoding them refuses them.)
    let mut run = WorkRun::new(&sim, 9, 1, &[], &[]);
    run.header.len = 1;
    let mut bytes = vec![0; WorkArgs::size(0, 0)];
    WorkArgs::encode(&mut bytes, &run.header, [].into_iter(), &[]).unwrap();
    let bad = BlockBuf::from_bytes(&bytes);
    let e = sim.launch_aicore(aicore, code, 1, bad.args()).unwrap_err();
    assert!(
        matches!(e.kind(), DriverErrorKind::InvalidArgument { .. }),
        "{e}"
    );
}

#[test]
fn a_tensor_outside_memory_is_refused_before_anything_is_queued_on_the_instant_driver() {
    let d = InstantDriver::new();
    // The instant driver queues nothing: a refused launch leaves no record.
    out_of_range_tensors_are_refused(&d, |_| 0);
}

/// `y = a·x + y` over f32, `a` the first scalar.
fn axpy() -> SimKernel {
    SimKernel::new(|k| {
        let a = f32::from_bits(u32::try_from(k.scalar(0).unwrap_or(0)).unwrap_or(0));
        let n = k
            .tensor(0)
            .map_or(0, |t| t.elements())
            .min(k.tensor(1).map_or(0, |t| t.elements()));
        let share = k.share(n);
        let len = usize::try_from(share.end - share.start).unwrap_or(0);
        let (mut x, mut y) = (vec![0f32; len], vec![0f32; len]);
        k.read_tensor(0, share.start, &mut x)?;
        k.read_tensor(1, share.start, &mut y)?;
        for (y, x) in y.iter_mut().zip(&x) {
            *y += a * x;
        }
        k.write_tensor(1, share.start, &y)
    })
}

#[test]
fn a_rust_axpy_kernel_computes_with_block_dim_1_and_4() {
    let sim = SimDriver::stepped(stepped());
    let code = sim
        .register_code(sim.register_kernel(axpy()).as_bytes())
        .unwrap()
        .handle;
    let (aicore, aicpu) = pair(&sim);
    let xs: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
    for (run_id, block_dim) in [(1, 1), (2, 4)] {
        let ys: Vec<f32> = (0..37).map(|i| 100.0 - i as f32).collect();
        let (x, y) = (buffer(&sim, &xs), buffer(&sim, &ys));
        let a = 3.0f32;
        let run = WorkRun::new(
            &sim,
            run_id,
            block_dim,
            &[tensor(x, 37 * 4, Dir::In), tensor(y, 37 * 4, Dir::InOut)],
            &[u64::from(a.to_bits())],
        );
        run.launch(&sim, aicore, aicpu, code);
        sim.sync_stream(aicpu, SEC).unwrap();
        let want: Vec<f32> = xs.iter().zip(&ys).map(|(x, y)| a * x + y).collect();
        assert_eq!(read::<_, f32>(&sim, y, 37), want, "block_dim {block_dim}");
        let st = run.status(&sim);
        assert_eq!(
            (st.run_id, st.state, st.code),
            (run_id, StatusRecord::DONE, 0)
        );
        assert_eq!(run.wall(&sim).block_dim, block_dim);
    }
}

/// The kernel is called once per worker, with that worker's index.
#[test]
fn a_rust_kernel_runs_once_per_worker_and_sees_the_run() {
    let sim = SimDriver::stepped(stepped());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let code = sim.register_kernel(SimKernel::new(move |k| {
        log.lock().unwrap().push((
            k.worker(),
            k.block_dim(),
            k.run_id(),
            k.slot(),
            k.tensors().len(),
            k.scalars().to_vec(),
        ));
        Ok(())
    }));
    let code = sim.register_code(code.as_bytes()).unwrap().handle;
    let (aicore, aicpu) = pair(&sim);
    let x = buffer(&sim, &[0u32; 4]);
    let run = WorkRun::new(&sim, 11, 3, &[tensor(x, 16, Dir::InOut)], &[4, 5]);
    run.launch(&sim, aicore, aicpu, code);
    sim.sync_stream(aicpu, SEC).unwrap();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by_key(|s| s.0);
    let want: Vec<_> = (0..3).map(|w| (w, 3, 11, 0, 1, vec![4, 5])).collect();
    assert_eq!(seen, want);
}

/// A version-1 block reaches a Rust kernel with no tensors or scalars; its
/// header names the input and output.
#[test]
fn a_rust_kernel_on_a_version_1_block_sees_the_header() {
    let sim = SimDriver::stepped(stepped());
    let code = sim.register_kernel(SimKernel::new(|k| {
        if !k.tensors().is_empty() || !k.scalars().is_empty() || k.run().is_workload() {
            return Err(KernelError::Fail(1));
        }
        let a = *k.header();
        let share = k.share(a.len);
        let mut v = vec![0u32; usize::try_from(share.end - share.start).unwrap_or(0)];
        k.read(a.input + share.start * 4, &mut v)?;
        for x in &mut v {
            *x = x.wrapping_mul(3);
        }
        k.write(a.output + share.start * 4, &v)
    }));
    let code = sim.register_code(code.as_bytes()).unwrap().handle;
    let (aicore, aicpu) = pair(&sim);
    let (x, y) = (buffer(&sim, &[1u32, 2, 3]), buffer(&sim, &[0u32; 3]));
    let mut run = WorkRun::new(&sim, 1, 2, &[], &[]);
    run.header.len = 3;
    run.header.input = x.raw();
    run.header.output = y.raw();
    run.block = run.header.block();
    run.launch(&sim, aicore, aicpu, code);
    sim.sync_stream(aicpu, SEC).unwrap();
    assert_eq!(run.status(&sim).code, 0);
    assert_eq!(read::<_, u32>(&sim, y, 3), vec![3, 6, 9]);
}

#[test]
fn an_out_of_bounds_access_in_a_rust_kernel_faults_the_aicore_kernel() {
    let sim = SimDriver::stepped(stepped());
    // Worker 1 writes one element past its tensor's allocation, by address.
    let code = sim.register_kernel(SimKernel::new(|k| {
        let t = k.tensor(0).ok_or(KernelError::Fail(1))?;
        if k.worker() == 1 {
            k.write(t.addr + t.bytes, &[1u32])
        } else {
            Ok(())
        }
    }));
    let code = sim.register_code(code.as_bytes()).unwrap().handle;
    let (aicore, aicpu) = pair(&sim);
    let x = buffer(&sim, &[0u32; 4]);
    let run = WorkRun::new(&sim, 1, 2, &[tensor(x, 16, Dir::Out)], &[]);
    run.launch(&sim, aicore, aicpu, code);
    let e = sim.sync_stream(aicore, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicoreException)
    );
    // The AICPU kernel never hears from worker 1: the watchdog ends it.
    let e = sim.sync_stream(aicpu, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicpuTimeout)
    );
    assert_eq!(run.status(&sim).state, 0, "no status written");

    // A tensor-relative access past the tensor (inside its allocation) and
    // a panicking kernel fault the same way; the simulator stays usable.
    let big = buffer(&sim, &[0u32; 8]);
    for (run_id, k) in [
        (2, SimKernel::new(|k| k.write_tensor::<u32>(0, 4, &[1]))),
        (3, SimKernel::new(|_| panic!("a kernel bug"))),
    ] {
        let code = sim
            .register_code(sim.register_kernel(k).as_bytes())
            .unwrap()
            .handle;
        let (aicore, aicpu) = pair(&sim);
        let run = WorkRun::new(&sim, run_id, 1, &[tensor(big, 16, Dir::Out)], &[]);
        run.launch(&sim, aicore, aicpu, code);
        let e = sim.sync_stream(aicore, SEC).unwrap_err();
        assert_eq!(
            e.kind(),
            &DriverErrorKind::KernelFault(FaultKind::AicoreException),
            "run {run_id}"
        );
    }
    assert_eq!(
        read::<_, u32>(&sim, big, 8),
        vec![0; 8],
        "nothing written past the tensor"
    );
}

#[test]
fn kernel_error_fail_reports_its_code_in_the_status_record() {
    let sim = SimDriver::stepped(stepped());
    // Worker 2 of 4 fails with 7 after writing its share.
    let code = sim.register_kernel(SimKernel::new(|k| {
        let share = k.share(8);
        let v = vec![k.worker() + 1; usize::try_from(share.end - share.start).unwrap_or(0)];
        k.write_tensor(0, share.start, &v)?;
        if k.worker() == 2 {
            Err(KernelError::Fail(7))
        } else {
            Ok(())
        }
    }));
    let code = sim.register_code(code.as_bytes()).unwrap().handle;
    let (aicore, aicpu) = pair(&sim);
    let y = buffer(&sim, &[0u32; 8]);
    let run = WorkRun::new(&sim, 1, 4, &[tensor(y, 32, Dir::Out)], &[]);
    run.launch(&sim, aicore, aicpu, code);
    sim.sync_stream(aicpu, SEC).unwrap();
    sim.sync_stream(aicore, SEC).unwrap();
    let st = run.status(&sim);
    assert_eq!((st.run_id, st.state, st.code), (1, StatusRecord::DONE, 7));
    assert_eq!(read::<_, u32>(&sim, y, 8), vec![1, 1, 2, 2, 3, 3, 4, 4]);
}

#[test]
fn armed_kernel_faults_apply_to_a_rust_kernel_before_it_runs() {
    let sim = SimDriver::stepped(stepped());
    let calls = Arc::new(AtomicUsize::new(0));
    let n = Arc::clone(&calls);
    let code = sim.register_kernel(SimKernel::new(move |_| {
        n.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }));
    let code = sim.register_code(code.as_bytes()).unwrap().handle;
    let (aicore, aicpu) = pair(&sim);
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicore,
        nth: 1,
    });
    let run = WorkRun::new(&sim, 1, 2, &[], &[]);
    run.launch(&sim, aicore, aicpu, code);
    let e = sim.sync_stream(aicore, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicoreException)
    );
    assert_eq!(calls.load(Ordering::Relaxed), 0);
    // A stomped handshake (zeroed after the AICore kernel started) hangs
    // the run until the watchdog, with a Rust kernel as with a program.
    let (aicore, aicpu) = pair(&sim);
    let run = WorkRun::new(&sim, 2, 1, &[], &[]);
    sim.launch_aicore(aicore, code, 1, run.block.args())
        .unwrap();
    for _ in 0..4 {
        sim.step_stream(aicore); // start, report: waiting for a task
    }
    let hs = DevPtr::from_raw(run.header.handshake);
    sim.memset(hs, 0, abi::handshake_bytes(1)).unwrap();
    sim.launch_aicpu(aicpu, run.block.args()).unwrap();
    let e = sim.sync_stream(aicpu, SEC).unwrap_err();
    assert_eq!(
        e.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicpuTimeout)
    );
    assert_eq!(calls.load(Ordering::Relaxed), 0, "never dispatched");
}

#[test]
fn rust_kernel_images_dedup_pin_and_evict_like_programs() {
    let sim = SimDriver::stepped(stepped().code_slots(1));
    let a = sim.register_kernel(SimKernel::new(|_| Ok(())));
    let b = sim.register_kernel(SimKernel::new(|_| Ok(())));
    assert_ne!(a, b, "one id per registration, even for equal kernels");
    let ra = sim.register_code(a.as_bytes()).unwrap();
    assert!(ra.published);
    let again = sim.register_code(a.as_bytes()).unwrap();
    assert!(!again.published && again.handle == ra.handle, "a dedup hit");
    assert_eq!(sim.code_pins(ra.handle), 2);
    let stats = sim.stats();
    assert_eq!((stats.publications, stats.dedup_hits), (1, 1));
    // Pinned: B does not fit.
    let e = sim.register_code(b.as_bytes()).unwrap_err();
    assert_eq!(e.kind(), &DriverErrorKind::CodeMemoryFull { capacity: 1 });
    sim.release_code(ra.handle).unwrap();
    sim.release_code(ra.handle).unwrap();
    let rb = sim.register_code(b.as_bytes()).unwrap();
    assert!(rb.published && rb.handle.raw() == ra.handle.raw());
    assert_eq!(sim.code_epoch(), rb.handle.upload());
    // A's upload is gone: its handle never launches.
    let (aicore, _) = pair(&sim);
    let run = WorkRun::new(&sim, 1, 1, &[], &[]);
    let e = sim
        .launch_aicore(aicore, ra.handle, 1, run.block.args())
        .unwrap_err();
    assert!(
        matches!(
            e.kind(),
            DriverErrorKind::BadHandle {
                kind: HandleKind::Code,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(sim.queued(aicore), 0);
}

/// Kernel `v` writes `v` into every element of tensor 0.
fn writes(v: u32) -> SimKernel {
    SimKernel::new(move |k| {
        let n = k.tensor(0).map_or(0, |t| t.elements());
        let share = k.share(n);
        k.write_tensor(
            0,
            share.start,
            &vec![v; usize::try_from(share.end - share.start).unwrap_or(0)],
        )
    })
}

#[test]
fn a_stale_stream_runs_the_old_rust_kernel() {
    let sim = SimDriver::stepped(stepped().code_slots(1));
    let (ka, kb) = (
        sim.register_kernel(writes(1)),
        sim.register_kernel(writes(2)),
    );
    let a = sim.register_code(ka.as_bytes()).unwrap();
    let old = sim.create_stream().unwrap(); // caches A
    sim.release_code(a.handle).unwrap();
    let b = sim.register_code(kb.as_bytes()).unwrap();
    assert!(
        b.published && b.handle.raw() == a.handle.raw(),
        "B replaced A at its address"
    );
    let aicpu = sim.create_stream().unwrap();
    let y = buffer(&sim, &[0u32; 6]);
    let run = WorkRun::new(&sim, 1, 2, &[tensor(y, 24, Dir::Out)], &[]);
    run.launch(&sim, old, aicpu, b.handle);
    sim.sync_stream(aicpu, SEC).unwrap();
    assert_eq!(
        read::<_, u32>(&sim, y, 6),
        vec![1; 6],
        "the old stream ran A for a B launch"
    );
    assert_eq!(
        run.status(&sim).code,
        0,
        "a wrong value, reported as a success"
    );
    assert_eq!(sim.stats().stale_executions, 1);
    // A stream created after the publication runs B.
    let fresh = sim.create_stream().unwrap();
    let run = WorkRun::new(&sim, 2, 2, &[tensor(y, 24, Dir::Out)], &[]);
    run.launch(&sim, fresh, aicpu, b.handle);
    sim.sync_stream(aicpu, SEC).unwrap();
    assert_eq!(read::<_, u32>(&sim, y, 6), vec![2; 6]);
    assert_eq!(sim.stats().stale_executions, 1);
    // A → B → A at one address: a stream that cached B runs B for the new A.
    let s_b = sim.create_stream().unwrap();
    sim.release_code(b.handle).unwrap();
    let a2 = sim.register_code(ka.as_bytes()).unwrap();
    assert!(a2.published && a2.handle != a.handle, "a new upload of A");
    let run = WorkRun::new(&sim, 3, 1, &[tensor(y, 24, Dir::Out)], &[]);
    sim.memset(y, 0, 24).unwrap();
    run.launch(&sim, s_b, aicpu, a2.handle);
    sim.sync_stream(aicpu, SEC).unwrap();
    assert_eq!(read::<_, u32>(&sim, y, 6), vec![2; 6], "stale B");
    assert_eq!(sim.stats().stale_executions, 2);
}

/// The time function replaces the latency model's fixed kernel time: on
/// the device clock (the wall record's dispatch → end), a run takes what
/// the function says — shorter than the model's 5 ms for a 1 ms run, and
/// at least 30 ms for a 30 ms one. Device time is model time, so this does
/// not depend on how the host threads were scheduled.
#[test]
fn the_real_time_compute_time_is_the_kernels_time_function() {
    let lat = LatencyModel::default().kernel(Duration::from_millis(5));
    let sim = SimDriver::real_time(
        SimConfig::default()
            .latency(lat)
            .watchdog(Duration::from_secs(2)),
    );
    let timed =
        SimKernel::new(|_| Ok(())).time(|run| Duration::from_micros(run.scalar(0).unwrap_or(0)));
    let code = sim
        .register_code(sim.register_kernel(timed).as_bytes())
        .unwrap()
        .handle;
    let fixed = sim
        .register_code(sim.register_kernel(SimKernel::new(|_| Ok(()))).as_bytes())
        .unwrap()
        .handle;
    let (aicore, aicpu) = pair(&sim);
    let span = |run: &WorkRun| {
        let w = run.wall(&sim);
        abi::ticks_to_nanos(w.end - w.dispatched)
    };
    let ms = 1_000_000;
    let short = WorkRun::new(&sim, 1, 2, &[], &[1_000]);
    short.launch(&sim, aicore, aicpu, code);
    sim.sync_stream(aicpu, Duration::from_secs(5)).unwrap();
    let long = WorkRun::new(&sim, 2, 2, &[], &[30_000]);
    long.launch(&sim, aicore, aicpu, code);
    sim.sync_stream(aicpu, Duration::from_secs(5)).unwrap();
    let plain = WorkRun::new(&sim, 3, 2, &[], &[30_000]);
    plain.launch(&sim, aicore, aicpu, fixed);
    sim.sync_stream(aicpu, Duration::from_secs(5)).unwrap();
    let (s, l, p) = (span(&short), span(&long), span(&plain));
    assert!((ms..5 * ms).contains(&s), "1 ms run: {s} ns");
    assert!(l >= 30 * ms, "30 ms run: {l} ns");
    assert!(
        (5 * ms..30 * ms).contains(&p),
        "untimed kernel: the model's 5 ms, {p} ns"
    );
    for r in [&short, &long, &plain] {
        assert_eq!(r.status(&sim).code, 0);
    }
}

#[test]
fn an_image_from_another_simulator_or_a_malformed_one_is_refused() {
    let sim = SimDriver::stepped(stepped());
    let other = SimDriver::stepped(stepped());
    let code = other.register_kernel(writes(1));
    assert!(other.register_code(code.as_bytes()).is_ok());
    let e = sim.register_code(code.as_bytes()).unwrap_err();
    assert!(
        matches!(e.kind(), DriverErrorKind::InvalidCode { .. }),
        "{e}"
    );
    let mut long: Vec<u8> = code.into();
    long.push(0);
    let e = sim.register_code(&long).unwrap_err();
    assert!(
        matches!(e.kind(), DriverErrorKind::InvalidCode { .. }),
        "{e}"
    );
    assert_eq!(sim.stats().publications, 0);
    // The instant driver runs no Rust kernels.
    let e = InstantDriver::new()
        .register_code(code.as_bytes())
        .unwrap_err();
    assert!(
        matches!(e.kind(), DriverErrorKind::InvalidCode { .. }),
        "{e}"
    );
}

/// A kernel that calls the simulator it runs in would wait for ever on the
/// lock its caller holds; it faults instead, and the run's fence reports it
/// (rather than the fence hanging).
#[test]
fn a_kernel_calling_its_simulator_faults_instead_of_deadlocking() {
    use runclaim::contract::ErrorKind;
    use runclaim::{Callable, Device, DeviceConfig, Workload};
    let sim = SimDriver::stepped(SimConfig::default());
    let inner = sim.clone();
    let code = sim.register_kernel(SimKernel::new(move |_| {
        let _ = inner.clock(); // the simulator's lock is held by the caller
        Ok(())
    }));
    let mut dev = Device::<_, 2>::open(sim, DeviceConfig::default()).unwrap();
    let runner = dev.publish(&[Callable::new("k", code)]).unwrap();
    let mut w = Workload::new(runner.code("k").unwrap());
    let run = runner
        .prepare(runner.take_slot::<0>().unwrap(), &mut w)
        .unwrap();
    let e = run.launch().unwrap().fence().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Fault(_)), "{e}");
}
