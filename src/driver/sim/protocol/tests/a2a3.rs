//! The a2a3 model driven through the [`Driver`] trait: runs, faults,
//! stale reports and payloads, stomps, stale code, real time, and the
//! refusal of blocks that break the layout.

use super::*;

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
    let first_end = slot.timing(&sim).run_wall_end_cycles;

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
    assert!(slot.timing(&sim).run_wall_start_cycles >= first_end);
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
    assert_eq!(
        u32_at(&slot.record(&sim, 1), handshake::ERROR),
        7,
        "worker 1's error"
    );
    assert_eq!(u32_at(&slot.record(&sim, 0), handshake::ERROR), 0);
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
        assert_eq!(slot.timing(&sim).epoch, 0);
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
    let record = slot.image.offset(image::worker(0).unwrap());
    sim.copy_to_device(record.offset(handshake::AICORE_DONE), &1u32.to_le_bytes())
        .unwrap();
    sim.copy_to_device(record.offset(handshake::REPORT_EPOCH), &1u64.to_le_bytes())
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
    assert_eq!(
        u64_at(&r, handshake::TASK_EPOCH),
        1,
        "nothing was dispatched to run 2"
    );
    assert_eq!(slot.verdict(&sim).0, 1, "run 1's result, never run 2's");

    // The twin: the same report carrying epoch 3 is accepted by run 3's
    // AICPU kernel, which dispatches (and then waits for a worker that
    // never computes) — the epoch alone made the difference.
    let cpu = sim.create_stream().unwrap();
    sim.copy_to_device(record.offset(handshake::REPORT_EPOCH), &3u64.to_le_bytes())
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
        (
            u64_at(&r, handshake::TASK),
            u64_at(&r, handshake::TASK_EPOCH)
        ),
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
    let task = DevPtr::from_raw(slot.payload());
    assert_eq!(u64_at(&read(&sim, task, 8), payload::EPOCH), 4);
    sim.copy_to_device(task.offset(payload::EPOCH), &3u64.to_le_bytes())
        .unwrap();
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
    let first = DevPtr::from_raw(slot.payload()).offset(payload::TENSORS);
    let second = first.offset(tensor::SIZE);
    let huge = (1u64 << 40).to_le_bytes();
    let top = (u64::MAX - 3).to_le_bytes();
    sim.copy_to_device(first.offset(tensor::BUFFER_ADDR), &top)
        .unwrap();
    sim.copy_to_device(first.offset(tensor::BUFFER_SIZE), &huge)
        .unwrap();
    sim.copy_to_device(second.offset(tensor::BUFFER_SIZE), &huge)
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
    assert_eq!(
        u32_at(&slot.record(&sim, 1), handshake::AICORE_DONE),
        2,
        "worker 1 reported"
    );
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
        let compute = t.run_wall_end_cycles - t.dispatch_cycles;
        assert!(
            compute >= ticks(at_least),
            "run {epoch}: {compute} ticks from dispatch to end"
        );
        assert_eq!(slot.verdict(&sim), (epoch, 1, 0, 0));
    }
    assert_eq!(read(&sim, y, 8), u32s(&[1, 1]));
}

/// The kind of a refused launch.
fn kind(r: Result<(), DriverError>) -> DriverErrorKind {
    r.unwrap_err().kind().clone()
}

/// `b` with `bytes` at `at`, as raw bytes (no recorded addresses: the
/// model's own checks).
fn poke(b: &BlockBuf, at: usize, bytes: &[u8]) -> BlockBuf {
    let mut v = b.args().bytes().to_vec();
    v[at..at + bytes.len()].copy_from_slice(bytes);
    BlockBuf::from_bytes(&v)
}

/// Byte `field` of the envelope's first tensor.
fn t0(field: usize) -> usize {
    envelope::tensor_at(0).unwrap() + field
}

/// Words of an envelope the model refuses, and what is put there.
fn refused_aicpu() -> Vec<(usize, &'static [u8])> {
    vec![
        (kernel_args::REGS, &[1]),
        (kernel_args::RUN_RESULT_EPOCH, &[0; 8]),
        (kernel_args::ENABLE_PROFILING_FLAG, &[1]),
        (kernel_args::ENTRY_ARGS_OFFSET, &[0]),
        (kernel_args::ENTRY_TENSOR_COUNT, &[3]), // the length disagrees
        (kernel_args::ENTRY_ARGS_SOURCE, &[2]),
        (kernel_args::PADDING, &[1]),
        (envelope::BLOCK_DIM, &[0, 0, 0, 0]),
        (envelope::BLOCK_DIM, &[25]), // above the maximum
        (envelope::RESERVED + 6, &[1]),
        (t0(tensor::OWNER_TASK_ID), &[1]),
        (t0(tensor::VERSION), &[1]),
        (t0(tensor::NDIMS), &[2]),
        (t0(tensor::DTYPE), &[8]), // its shape is no longer its size over it
        (t0(tensor::MANUAL_DEP), &[1]),
        (t0(tensor::IS_CONTIGUOUS), &[0]),
        (t0(tensor::ADDRESS_SPACE), &[0]), // host
        (t0(tensor::DIRECTION), &[4]),
        (t0(tensor::SHAPES), &[3]),
        (t0(tensor::STAGED), &[2]),
        (t0(tensor::EXTENT_ELEM_CACHE), &[3]),
        (t0(tensor::STRIDES), &[2]),
        (t0(tensor::PADDING + 20), &[1]),
    ]
}

#[test]
fn a2a3_blocks_that_break_the_layout_are_refused_before_anything_is_queued() {
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    let core_block = slot.aicore_block(1);
    let cpu_block = slot.aicpu_block(1, &io, &[4]);
    for (at, b) in [
        (aicore_args::ENABLE_PROFILING_FLAG, &[1u8][..]),
        (aicore_args::FFTS_BASE_ADDR, &[1]),
        (aicore_args::CHIP_SWIMLANE_AICORE_ROTATION_TABLE, &[1]),
        (aicore_args::REPORT_EPOCH, &[0; 8]),
        (aicore_args::RUNTIME_ARGS, &[0x10, 0, 0, 0, 0, 0, 0, 0]),
    ] {
        let bad = poke(&core_block, at, b);
        let k = kind(sim.launch_aicore(aic, code, 2, bad.args()));
        let want_bad_address = at == aicore_args::RUNTIME_ARGS;
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
    for (at, b) in refused_aicpu() {
        let bad = poke(&cpu_block, at, b);
        let k = kind(sim.launch_aicpu(cpu, bad.args()));
        assert!(
            matches!(k, DriverErrorKind::InvalidArgument { .. }),
            "AICPU byte {at}: {k:?}"
        );
    }
    let addresses = [
        kernel_args::RUNTIME_ARGS,
        kernel_args::DEVICE_WALL_DATA_BASE,
        kernel_args::RUN_RESULT_DATA_BASE,
        t0(tensor::BUFFER_ADDR),
    ];
    for at in addresses {
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
