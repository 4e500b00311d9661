//! Tests of the simulated NPU itself. Every later test trusts the simulator to
//! behave like the device, so each behaviour the contract depends on is
//! pinned here — and each test names the behaviour that would have to be
//! removed for it to fail.

use std::time::Duration;

use runclaim::driver::abi::{self, BlockBuf, DevSpan, Program, RunArgs, StatusRecord, WallRecord};
use runclaim::driver::{
    CodeHandle, Completion, DevPtr, Driver, DriverErrorKind, FaultKind, HandleKind, Op, StreamId,
};
use runclaim::sim::trace::{TaskTag, TraceKind};
use runclaim::sim::{Fault, Kernel, LatencyModel, SimConfig, SimDriver, StepOutcome};

const MS: Duration = Duration::from_millis(1);

/// A run driven by hand at the driver level: its own regions, its args.
struct HandRun {
    args: RunArgs,
}

impl HandRun {
    fn new(sim: &SimDriver, run_id: u64, block_dim: u32, input: &[u32]) -> HandRun {
        let len = input.len();
        let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
        let inp = sim.alloc(len.max(1) * 4).unwrap();
        sim.copy_to_device(inp, &bytes).unwrap();
        let out = sim.alloc(len.max(1) * 4).unwrap();
        let hs = sim.alloc(abi::handshake_bytes(block_dim)).unwrap();
        sim.memset(hs, 0, abi::handshake_bytes(block_dim)).unwrap();
        let wall = sim.alloc(WallRecord::SIZE).unwrap();
        let status = sim.alloc(StatusRecord::SIZE).unwrap();
        HandRun {
            args: RunArgs {
                run_id,
                slot: 0,
                block_dim,
                len: len as u64,
                input: inp.raw(),
                output: out.raw(),
                handshake: hs.raw(),
                wall: wall.raw(),
                status: status.raw(),
            },
        }
    }

    fn launch(&self, sim: &SimDriver, aicore: StreamId, aicpu: StreamId, code: CodeHandle) {
        let a = self.args.block();
        sim.launch_aicore(aicore, code, self.args.block_dim, a.args())
            .unwrap();
        sim.launch_aicpu(aicpu, a.args()).unwrap();
    }

    fn output(&self, sim: &SimDriver) -> Vec<u32> {
        let mut b = vec![0u8; usize::try_from(self.args.len).unwrap() * 4];
        sim.copy_from_device(&mut b, DevPtr::from_raw(self.args.output))
            .unwrap();
        b.chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn status(&self, sim: &SimDriver) -> StatusRecord {
        let mut b = [0u8; StatusRecord::SIZE];
        sim.copy_from_device(&mut b, DevPtr::from_raw(self.args.status))
            .unwrap();
        StatusRecord::from_bytes(&b).unwrap()
    }

    fn wall(&self, sim: &SimDriver) -> WallRecord {
        let mut b = [0u8; WallRecord::SIZE];
        sim.copy_from_device(&mut b, DevPtr::from_raw(self.args.wall))
            .unwrap();
        WallRecord::from_bytes(&b).unwrap()
    }

    fn stomp(&self, sim: &SimDriver) {
        sim.memset(
            DevPtr::from_raw(self.args.handshake),
            0,
            abi::handshake_bytes(self.args.block_dim),
        )
        .unwrap();
    }
}

fn pair(sim: &SimDriver) -> (StreamId, StreamId) {
    (sim.create_stream().unwrap(), sim.create_stream().unwrap())
}

fn code(sim: &SimDriver, p: &Program) -> CodeHandle {
    sim.register_code(&p.encode()).unwrap().handle
}

fn small() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

#[test]
fn stream_is_fifo() {
    let sim = SimDriver::stepped(SimConfig::default());
    let s = sim.create_stream().unwrap();
    let buf = sim.alloc(8).unwrap();
    // Three writes to one place: only FIFO execution leaves the last value.
    for v in [1u8, 2, 3] {
        sim.memset_async(s, buf, v, 8).unwrap();
    }
    sim.sync_stream(s, MS).unwrap();
    let mut out = [0u8; 8];
    sim.copy_from_device(&mut out, buf).unwrap();
    assert_eq!(out, [3; 8]);
    let starts: Vec<_> = sim
        .trace()
        .into_iter()
        .filter(|t| t.what == TraceKind::Started(TaskTag::Memset))
        .map(|t| t.tick)
        .collect();
    assert_eq!(starts.len(), 3);
    assert!(
        starts.windows(2).all(|w| w[0] < w[1]),
        "started in queue order"
    );
}

#[test]
fn a_run_needs_both_streams_to_progress() {
    let sim = SimDriver::stepped(small());
    let (core_s, cpu_s) = pair(&sim);
    let c = code(&sim, &Program::new().add(1));
    let run = HandRun::new(&sim, 1, 4, &[1, 2, 3, 4, 5]);
    run.launch(&sim, core_s, cpu_s, c);
    // Only the AICore stream steps: workers report, then wait for a task the
    // AICPU kernel never dispatches.
    let mut progressed = 0;
    for _ in 0..200 {
        if let StepOutcome::Progressed(_) = sim.step_stream(core_s) {
            progressed += 1;
        }
    }
    assert_eq!(progressed, 1 + 4, "start + four reports, then blocked");
    assert_eq!(sim.queued(core_s), 1);
    // Now interleave: the AICPU stream dispatches and both finish.
    sim.run_until_idle(10_000).unwrap();
    assert_eq!(run.output(&sim), vec![2, 3, 4, 5, 6]);
    let st = run.status(&sim);
    assert_eq!((st.run_id, st.state, st.code), (1, StatusRecord::DONE, 0));
    let w = run.wall(&sim);
    assert_eq!((w.run_id, w.block_dim), (1, 4));
    assert!(w.aicore_start <= w.dispatched && w.aicpu_start <= w.dispatched);
    assert!(w.dispatched <= w.end);
}

/// Two 20 ms kernels on independent stream pairs run at the same time —
/// however late the host queues the second: both AICore kernels wait behind
/// one gate event (a gate run's AICPU kernel, opened by launching its AICore
/// kernel last), so they start together in device time, and the host is
/// away for longer than a kernel between the two launches on purpose. (The
/// overlap used to rest on the host queuing the second run within 20 ms of
/// the first; a preempted host made it fail.)
#[test]
fn kernels_on_different_streams_overlap_in_real_time() {
    let lat = LatencyModel::zero().kernel(Duration::from_millis(20));
    // A watchdog far beyond any host delay: the gate and the held kernels
    // wait under it.
    let sim = SimDriver::real_time(
        SimConfig::default()
            .latency(lat)
            .watchdog(Duration::from_secs(30)),
    );
    let c = code(&sim, &Program::new().mul(3));
    let (a1, c1) = pair(&sim);
    let (a2, c2) = pair(&sim);
    let (ag, cg) = pair(&sim);
    let gate_run = HandRun::new(&sim, 3, 1, &[0]);
    let gate_args = gate_run.args.block();
    let gate = sim.create_event().unwrap();
    // The gate run's AICPU kernel waits for its worker, which is not queued yet.
    sim.launch_aicpu(cg, gate_args.args()).unwrap();
    sim.record_event(gate, cg).unwrap();
    sim.stream_wait_event(a1, gate).unwrap();
    sim.stream_wait_event(a2, gate).unwrap();
    let r1 = HandRun::new(&sim, 1, 2, &[1, 2]);
    let r2 = HandRun::new(&sim, 2, 2, &[3, 4]);
    r1.launch(&sim, a1, c1, c);
    std::thread::sleep(Duration::from_millis(30));
    r2.launch(&sim, a2, c2, c);
    sim.launch_aicore(ag, c, 1, gate_args.args()).unwrap();
    sim.sync_stream(c1, Duration::from_secs(30)).unwrap();
    sim.sync_stream(c2, Duration::from_secs(30)).unwrap();
    let (w1, w2) = (r1.wall(&sim), r2.wall(&sim));
    // Each run's compute (dispatch to end, 20 ms) overlaps the other's.
    assert!(
        w2.dispatched < w1.end && w1.dispatched < w2.end,
        "{w1:?} {w2:?}"
    );
    assert_eq!(r1.output(&sim), vec![3, 6]);
    assert_eq!(r2.output(&sim), vec![9, 12]);
}

#[test]
fn queued_runs_on_one_pair_execute_in_order() {
    let sim = SimDriver::stepped(small());
    let (cs, ps) = pair(&sim);
    let c = code(&sim, &Program::new().add(10));
    let runs: Vec<_> = (1..=3)
        .map(|i| HandRun::new(&sim, i, 2, &[u32::try_from(i).unwrap()]))
        .collect();
    for r in &runs {
        r.launch(&sim, cs, ps, c);
    }
    sim.run_until_idle(100_000).unwrap();
    let walls: Vec<_> = runs.iter().map(|r| r.wall(&sim)).collect();
    for w in walls.windows(2) {
        assert!(w[0].end <= w[1].dispatched, "run order = queue order");
    }
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.output(&sim), vec![u32::try_from(i).unwrap() + 1 + 10]);
    }
}

#[test]
fn events_complete_when_their_stream_reaches_them() {
    let sim = SimDriver::stepped(SimConfig::default());
    let s = sim.create_stream().unwrap();
    let (e1, e2) = (sim.create_event().unwrap(), sim.create_event().unwrap());
    assert_eq!(
        sim.query_event(e1).unwrap(),
        Completion::Complete,
        "never recorded"
    );
    let buf = sim.alloc(4).unwrap();
    sim.record_event(e1, s).unwrap();
    sim.memset_async(s, buf, 1, 4).unwrap();
    sim.record_event(e2, s).unwrap();
    assert_eq!(sim.query_event(e1).unwrap(), Completion::NotReady);
    sim.sync_event(e1, MS).unwrap();
    assert_eq!(
        sim.query_event(e2).unwrap(),
        Completion::NotReady,
        "not reached yet"
    );
    sim.sync_event(e2, MS).unwrap();
    assert!(sim.event_timestamp(e1).unwrap() < sim.event_timestamp(e2).unwrap());
    assert!(sim.event_elapsed(e1, e2).unwrap() > Duration::ZERO);
    // Re-recording replaces what the event captures.
    sim.memset_async(s, buf, 2, 4).unwrap();
    sim.record_event(e1, s).unwrap();
    assert_eq!(sim.query_event(e1).unwrap(), Completion::NotReady);
    assert!(sim.event_timestamp(e1).is_err(), "no completed record now");
}

#[test]
fn stream_wait_event_orders_across_streams() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (a, b) = pair(&sim);
    let e = sim.create_event().unwrap();
    let buf = sim.alloc(4).unwrap();
    sim.memset_async(a, buf, 1, 4).unwrap();
    sim.record_event(e, a).unwrap();
    sim.stream_wait_event(b, e).unwrap();
    sim.memset_async(b, buf, 2, 4).unwrap();
    // Step only b: it must wait for a's record.
    for _ in 0..50 {
        sim.step_stream(b);
    }
    assert_eq!(sim.queued(b), 2, "the wait holds b back");
    sim.run_until_idle(1000).unwrap();
    let mut out = [0u8; 4];
    sim.copy_from_device(&mut out, buf).unwrap();
    assert_eq!(out, [2; 4], "b's write landed after a's");
}

#[test]
fn queue_is_bounded_and_a_full_queue_is_reported() {
    // An enqueue waits at most 1,000 steps for room: less than the watchdog.
    let mut cfg = SimConfig::default().stream_capacity(2);
    cfg.max_wait_steps = 1000;
    let sim = SimDriver::stepped(cfg);
    let s = sim.create_stream().unwrap();
    let buf = sim.alloc(4).unwrap();
    sim.memset_async(s, buf, 1, 4).unwrap();
    sim.memset_async(s, buf, 2, 4).unwrap();
    // The third enqueue finds the queue full: the stepped device is driven
    // until there is room, and the stall is counted.
    sim.memset_async(s, buf, 3, 4).unwrap();
    assert_eq!(sim.stats().blocked_enqueues, 1);
    assert!(sim.stats().max_queue_depth <= 2);
    // A stream that cannot drain within that budget: a wait on a record that
    // never completes (until the watchdog, 100 ms away).
    let other = sim.create_stream().unwrap();
    let e = sim.create_event().unwrap();
    sim.inject(Fault::EventNeverCompletes { nth: 1 });
    sim.record_event(e, other).unwrap();
    let stuck = sim.create_stream().unwrap();
    sim.stream_wait_event(stuck, e).unwrap();
    sim.memset_async(stuck, buf, 4, 4).unwrap();
    sim.run_until_idle(100).unwrap_err();
    let err = sim.memset_async(stuck, buf, 5, 4).unwrap_err();
    assert_eq!(err.kind(), &DriverErrorKind::QueueFull { capacity: 2 });
}

#[test]
fn stale_code_after_publication_gives_wrong_values() {
    // One code address: every new image replaces the previous one there.
    let sim = SimDriver::stepped(small().code_slots(1));
    let a = sim.register_code(&Program::new().add(1).encode()).unwrap();
    assert!(a.published);
    let (old_core, cpu) = pair(&sim);
    sim.release_code(a.handle).unwrap(); // unpinned: B may replace it
    let b = sim.register_code(&Program::new().mul(10).encode()).unwrap();
    assert!(b.published);
    assert_eq!(a.handle.raw(), b.handle.raw(), "same code address");
    assert!(b.handle.upload() > a.handle.upload(), "a new upload");
    let run = HandRun::new(&sim, 1, 2, &[5, 6]);
    run.launch(&sim, old_core, cpu, b.handle);
    sim.run_until_idle(10_000).unwrap();
    assert_eq!(
        run.output(&sim),
        vec![6, 7],
        "old stream ran A's add, not B's mul"
    );
    assert_eq!(sim.stats().stale_executions, 1);
    // A stream created after the publication runs B.
    let fresh = sim.create_stream().unwrap();
    let run2 = HandRun::new(&sim, 2, 2, &[5, 6]);
    run2.launch(&sim, fresh, cpu, b.handle);
    sim.run_until_idle(10_000).unwrap();
    assert_eq!(run2.output(&sim), vec![50, 60]);
    assert_eq!(sim.stats().stale_executions, 1);
}

#[test]
fn a_b_a_publication_at_one_address_is_stale_each_time() {
    let sim = SimDriver::stepped(small().code_slots(1));
    let pa = Program::new().add(1);
    let pb = Program::new().mul(10);
    let a1 = sim.register_code(&pa.encode()).unwrap();
    let s_a = sim.create_stream().unwrap(); // caches A
    sim.release_code(a1.handle).unwrap();
    let b = sim.register_code(&pb.encode()).unwrap();
    let s_b = sim.create_stream().unwrap(); // caches B
    sim.release_code(b.handle).unwrap();
    let a2 = sim.register_code(&pa.encode()).unwrap();
    assert!(
        a2.published,
        "A was evicted by B: registering it again uploads"
    );
    assert_eq!(a1.handle.raw(), a2.handle.raw());
    assert_eq!(a1.handle.raw(), b.handle.raw());
    assert_ne!(a1.handle, a2.handle, "one address, two uploads");
    // A stream whose image "equals" A by content comparison would be judged
    // fresh; it is not: s_b caches B and computes B for an A launch.
    let cpu = sim.create_stream().unwrap();
    let run = HandRun::new(&sim, 1, 1, &[3]);
    run.launch(&sim, s_b, cpu, a2.handle);
    sim.run_until_idle(10_000).unwrap();
    assert_eq!(run.output(&sim), vec![30], "stale B");
    // s_a happens to cache A again, which is what is resident: correct value.
    let run2 = HandRun::new(&sim, 2, 1, &[3]);
    run2.launch(&sim, s_a, cpu, a2.handle);
    sim.run_until_idle(10_000).unwrap();
    assert_eq!(run2.output(&sim), vec![4]);
    assert_eq!(sim.stats().publications, 3);
}

/// The residency rule: a pinned upload is never evicted; new code that
/// would need its place is refused, naming the capacity; a handle whose
/// upload was replaced never launches (it cannot run the replacement).
#[test]
fn pinned_code_stays_and_replaced_uploads_never_launch() {
    let sim = SimDriver::stepped(small().code_slots(1));
    let a = sim.register_code(&Program::new().add(1).encode()).unwrap();
    assert_eq!(sim.code_pins(a.handle), 1);
    let err = sim
        .register_code(&Program::new().mul(10).encode())
        .unwrap_err();
    assert_eq!(err.kind(), &DriverErrorKind::CodeMemoryFull { capacity: 1 });
    // A dedup hit pins again; each pin needs its release.
    assert_eq!(
        sim.register_code(&Program::new().add(1).encode())
            .unwrap()
            .handle,
        a.handle
    );
    assert_eq!(sim.code_pins(a.handle), 2);
    sim.release_code(a.handle).unwrap();
    assert!(
        sim.register_code(&Program::new().mul(10).encode()).is_err(),
        "still pinned once"
    );
    sim.release_code(a.handle).unwrap();
    assert!(
        sim.release_code(a.handle).is_err(),
        "released more often than registered"
    );
    let b = sim.register_code(&Program::new().mul(10).encode()).unwrap();
    assert!(b.published && b.handle.raw() == a.handle.raw());
    assert_eq!(sim.code_pins(a.handle), 0, "A's upload is gone");
    let (core, cpu) = pair(&sim);
    let run = HandRun::new(&sim, 1, 2, &[5, 6]);
    let err = sim
        .launch_aicore(core, a.handle, 2, run.args.block().args())
        .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            DriverErrorKind::BadHandle {
                kind: HandleKind::Code,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(sim.queued(core), 0, "nothing reached the stream");
    run.launch(&sim, core, cpu, b.handle);
    sim.run_until_idle(10_000).unwrap();
    assert_eq!(run.output(&sim), vec![50, 60]);
    assert_eq!(sim.code_epoch(), b.handle.upload());
}

#[test]
fn dedup_hit_is_not_a_publication() {
    let sim = SimDriver::stepped(SimConfig::default());
    let p = Program::new().xor(7).encode();
    let r1 = sim.register_code(&p).unwrap();
    let r2 = sim.register_code(&p).unwrap();
    assert!(r1.published && !r2.published);
    assert_eq!(r1.handle, r2.handle);
    let s = sim.stats();
    assert_eq!((s.publications, s.dedup_hits), (1, 1));
    assert_eq!(
        sim.register_code(b"nope").unwrap_err().kind(),
        &DriverErrorKind::InvalidCode {
            what: "missing RCK1 magic"
        }
    );
}

#[test]
fn stomped_handshake_hangs_until_the_watchdog() {
    let sim = SimDriver::stepped(small());
    let (cs, ps) = pair(&sim);
    let c = code(&sim, &Program::new().add(1));
    let run = HandRun::new(&sim, 7, 4, &[1, 2, 3, 4]);
    run.launch(&sim, cs, ps, c);
    // Let every worker report in, but not the AICPU kernel see it.
    for _ in 0..5 {
        sim.step_stream(cs);
    }
    // The host clears the handshake while the run is live — what reusing a
    // slot before its run was fenced would do: the workers' reports are lost.
    run.stomp(&sim);
    let err = sim.sync_stream(ps, Duration::from_millis(50)).unwrap_err();
    assert_eq!(
        err.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicpuTimeout)
    );
    let err = sim.sync_stream(cs, Duration::from_millis(50)).unwrap_err();
    assert_eq!(
        err.kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicoreTimeout)
    );
    assert_eq!(run.status(&sim).state, 0, "the status was never written");
    // Negative control: the same run without the stomp completes.
    let sim = SimDriver::stepped(small());
    let (cs, ps) = pair(&sim);
    let c = code(&sim, &Program::new().add(1));
    let run = HandRun::new(&sim, 7, 4, &[1, 2, 3, 4]);
    run.launch(&sim, cs, ps, c);
    for _ in 0..5 {
        sim.step_stream(cs);
    }
    sim.sync_stream(ps, Duration::from_millis(50)).unwrap();
    assert_eq!(run.output(&sim), vec![2, 3, 4, 5]);
}

#[test]
fn fail_call_fails_without_effect() {
    let sim = SimDriver::stepped(SimConfig::default());
    sim.inject(Fault::FailCall {
        op: Op::Alloc,
        nth: 2,
    });
    sim.alloc(8).unwrap();
    let err = sim.alloc(8).unwrap_err();
    assert_eq!(
        (err.op(), err.kind()),
        (Op::Alloc, &DriverErrorKind::Injected { nth: 2 })
    );
    assert_eq!(
        sim.stats().live_allocations(),
        1,
        "the failed call allocated nothing"
    );
    sim.alloc(8).unwrap();
    sim.inject(Fault::FailAnyCall { nth: 2 });
    sim.create_stream().unwrap();
    assert!(matches!(
        sim.create_event().unwrap_err().kind(),
        DriverErrorKind::Injected { .. }
    ));
}

#[test]
fn kernel_fault_makes_the_stream_fail_later_work() {
    for kernel in [Kernel::Aicore, Kernel::Aicpu] {
        let sim = SimDriver::stepped(small());
        let (cs, ps) = pair(&sim);
        let c = code(&sim, &Program::new().add(1));
        sim.inject(Fault::KernelFault { kernel, nth: 1 });
        let run = HandRun::new(&sim, 1, 2, &[1, 2]);
        run.launch(&sim, cs, ps, c);
        let e = sim.create_event().unwrap();
        let faulted = if kernel == Kernel::Aicore { cs } else { ps };
        sim.record_event(e, faulted).unwrap();
        let err = sim.sync_event(e, Duration::from_millis(20)).unwrap_err();
        let want = if kernel == Kernel::Aicore {
            FaultKind::AicoreException
        } else {
            FaultKind::AicpuException
        };
        assert_eq!(
            err.kind(),
            &DriverErrorKind::KernelFault(want),
            "{kernel:?}"
        );
        // Sticky: queries and later submissions on the stream fail.
        assert!(sim.query_stream(faulted).unwrap_err().is_device_fault());
        let later = sim
            .memset_async(faulted, DevPtr::from_raw(run.args.output), 0, 4)
            .unwrap_err();
        assert!(later.is_device_fault());
        // An error-state stream may be destroyed.
        sim.destroy_stream(faulted).unwrap();
    }
}

#[test]
fn injected_run_error_reaches_the_status_record() {
    let sim = SimDriver::stepped(small());
    let (cs, ps) = pair(&sim);
    let c = code(&sim, &Program::new().add(1));
    sim.inject(Fault::RunError { nth: 2, code: 77 });
    let r1 = HandRun::new(&sim, 1, 1, &[1]);
    let r2 = HandRun::new(&sim, 2, 1, &[1]);
    r1.launch(&sim, cs, ps, c);
    r2.launch(&sim, cs, ps, c);
    sim.sync_stream(ps, Duration::from_millis(20)).unwrap();
    assert_eq!(r1.status(&sim).code, 0);
    assert_eq!(r2.status(&sim).code, 77);
    // A program that fails reports its own code.
    let f = code(&sim, &Program::new().add(2).fail(9));
    let r3 = HandRun::new(&sim, 3, 2, &[1, 1]);
    r3.launch(&sim, cs, ps, f);
    sim.sync_stream(ps, Duration::from_millis(20)).unwrap();
    assert_eq!(r3.status(&sim).code, 9);
    assert_eq!(r3.output(&sim), vec![3, 3]);
}

#[test]
fn event_that_never_completes_times_out_within_its_budget() {
    let sim = SimDriver::stepped(SimConfig::default());
    let s = sim.create_stream().unwrap();
    let e = sim.create_event().unwrap();
    sim.inject(Fault::EventNeverCompletes { nth: 1 });
    sim.record_event(e, s).unwrap();
    let before = sim.stats().steps;
    let err = sim.sync_event(e, Duration::from_millis(3)).unwrap_err();
    assert!(err.is_timeout());
    let steps = sim.stats().steps - before;
    assert_eq!(steps, 3000, "3 ms at 1 µs per step, and not one more");
    sim.sync_stream(s, MS).unwrap();
    assert_eq!(sim.query_event(e).unwrap(), Completion::NotReady);
}

#[test]
fn delayed_event_completes_late() {
    let sim = SimDriver::stepped(SimConfig::default());
    let s = sim.create_stream().unwrap();
    let (e0, e) = (sim.create_event().unwrap(), sim.create_event().unwrap());
    sim.record_event(e0, s).unwrap();
    sim.inject(Fault::DelayEvent {
        nth: 1,
        delay: Duration::from_millis(1),
    });
    sim.record_event(e, s).unwrap();
    sim.sync_stream(s, MS).unwrap();
    assert_eq!(sim.query_event(e).unwrap(), Completion::NotReady);
    sim.sync_event(e, Duration::from_millis(2)).unwrap();
    assert!(sim.event_elapsed(e0, e).unwrap() >= Duration::from_millis(1));
}

#[test]
fn lost_device_fails_every_call() {
    let sim = SimDriver::stepped(SimConfig::default());
    let s = sim.create_stream().unwrap();
    sim.inject(Fault::DeviceLost { nth: 1 });
    assert_eq!(
        sim.alloc(4).unwrap_err().kind(),
        &DriverErrorKind::DeviceLost
    );
    assert_eq!(
        sim.query_stream(s).unwrap_err().kind(),
        &DriverErrorKind::DeviceLost
    );
    assert!(sim.create_event().unwrap_err().is_device_fault());
}

#[test]
fn stepped_mode_is_deterministic() {
    fn trace(seed: u64) -> Vec<(u64, u64, TraceKind)> {
        let sim = SimDriver::stepped(small().seed(seed));
        let (cs, ps) = pair(&sim);
        let c = code(&sim, &Program::new().add(1));
        let runs: Vec<_> = (1..=3)
            .map(|i| HandRun::new(&sim, i, 3, &[1, 2, 3]))
            .collect();
        for r in &runs {
            r.launch(&sim, cs, ps, c);
        }
        sim.run_until_idle(100_000).unwrap();
        sim.trace()
            .into_iter()
            .map(|t| (t.tick, t.run, t.what))
            .collect()
    }
    assert_eq!(trace(1), trace(1));
    assert_ne!(trace(1), trace(2), "the seed changes the interleaving");
}

#[test]
fn blocking_waits_are_bounded_in_both_modes() {
    let sim = SimDriver::stepped(SimConfig::default());
    let s = sim.create_stream().unwrap();
    let e = sim.create_event().unwrap();
    sim.inject(Fault::EventNeverCompletes { nth: 1 });
    sim.record_event(e, s).unwrap();
    assert!(
        sim.sync_event(e, Duration::from_secs(3600))
            .unwrap_err()
            .is_timeout()
    );
    assert!(sim.stats().steps <= SimConfig::default().max_wait_steps);

    let rt = SimDriver::real_time(SimConfig::default());
    let s = rt.create_stream().unwrap();
    let e = rt.create_event().unwrap();
    rt.inject(Fault::EventNeverCompletes { nth: 1 });
    rt.record_event(e, s).unwrap();
    let t0 = std::time::Instant::now();
    assert!(
        rt.sync_event(e, Duration::from_millis(30))
            .unwrap_err()
            .is_timeout()
    );
    assert!(t0.elapsed() >= Duration::from_millis(30));
}

#[test]
#[allow(
    clippy::many_single_char_names,
    reason = "s, e, c: the stream, event and code every check below uses"
)]
fn bad_input_gives_named_errors() {
    let sim = SimDriver::stepped(SimConfig::default());
    let s = sim.create_stream().unwrap();
    let e = sim.create_event().unwrap();
    let c = code(&sim, &Program::new());
    let run = HandRun::new(&sim, 1, 2, &[1, 2]);
    let block = run.args.block();
    let args = block.args();
    let kind = |r: Result<(), runclaim::driver::DriverError>| r.unwrap_err().kind().clone();

    assert!(matches!(
        kind(sim.destroy_stream(StreamId::from_raw(999))),
        DriverErrorKind::BadHandle {
            kind: HandleKind::Stream,
            ..
        }
    ));
    assert!(matches!(
        kind(sim.record_event(runclaim::driver::EventId::from_raw(999), s)),
        DriverErrorKind::BadHandle {
            kind: HandleKind::Event,
            ..
        }
    ));
    assert!(matches!(
        kind(sim.launch_aicore(s, CodeHandle::from_raw(1, 1), 2, args)),
        DriverErrorKind::BadHandle {
            kind: HandleKind::Code,
            ..
        }
    ));
    assert!(matches!(
        kind(sim.launch_aicore(s, c, 0, args)),
        DriverErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        kind(sim.launch_aicore(s, c, 25, args)),
        DriverErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        // The device decodes what it receives: a block cut short names no
        // address for the driver to check, and the device refuses it.
        kind(sim.launch_aicore(s, c, 2, BlockBuf::from_bytes(&args.bytes()[..40]).args())),
        DriverErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        kind(sim.launch_aicpu(s, BlockBuf::from_bytes(&[0u8; 80]).args())),
        DriverErrorKind::InvalidArgument { .. }
    ));
    // An argument block pointing outside memory is refused at launch.
    let mut bad = run.args;
    bad.output = 0x10;
    assert!(matches!(
        kind(sim.launch_aicpu(s, bad.block().args())),
        DriverErrorKind::BadAddress { .. }
    ));
    // An address its writer recorded (a live range), then overwritten by
    // an integer: the block no longer holds what was checked.
    let mut moved = BlockBuf::with_capacity(RunArgs::SIZE, 1);
    let mut w = moved.writer();
    let at = w.grow(RunArgs::SIZE).unwrap();
    w.put_bytes(at, args.bytes()).unwrap();
    w.put_addr(at + 40, DevSpan::new(DevPtr::from_raw(run.args.output), 8))
        .unwrap();
    w.put_u64(at + 40, 0x10).unwrap();
    assert!(matches!(
        kind(sim.launch_aicpu(s, moved.args())),
        DriverErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        kind(sim.launch_aicore(s, c, 2, moved.args())),
        DriverErrorKind::InvalidArgument { .. }
    ));
    // Freed and out-of-range addresses.
    let p = sim.alloc(16).unwrap();
    assert!(matches!(
        kind(sim.copy_to_device(p.offset(8), &[0; 9])),
        DriverErrorKind::BadAddress { .. }
    ));
    sim.free(p).unwrap();
    assert!(matches!(
        kind(sim.memset(p, 0, 1)),
        DriverErrorKind::BadAddress { .. }
    ));
    assert!(matches!(
        kind(sim.free(p)),
        DriverErrorKind::BadAddress { .. }
    ));
    assert!(matches!(
        sim.alloc(0).unwrap_err().kind(),
        DriverErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        sim.alloc(1 << 40).unwrap_err().kind(),
        DriverErrorKind::OutOfMemory { .. }
    ));
    // Nothing was queued by any of the refused launches.
    assert_eq!(sim.queued(s), 0);
    // A stream with queued work is not destroyed.
    sim.record_event(e, s).unwrap();
    assert!(matches!(
        kind(sim.destroy_stream(s)),
        DriverErrorKind::StreamBusy { queued: Some(1) }
    ));
    assert_eq!(sim.stats().busy_destroy_refused, 1);
    sim.sync_stream(s, MS).unwrap();
    sim.destroy_stream(s).unwrap();
}

#[test]
fn real_time_latency_model_shapes_the_device_wall() {
    let lat = LatencyModel::default().kernel(Duration::from_micros(500));
    // The AICore kernel waits for the AICPU kernel's dispatch: a watchdog
    // no host preemption between the two launches reaches.
    let sim = SimDriver::real_time(
        SimConfig::default()
            .latency(lat)
            .watchdog(Duration::from_secs(2)),
    );
    let (cs, ps) = pair(&sim);
    let c = code(&sim, &Program::new().add(1));
    let run = HandRun::new(&sim, 1, 4, &[1; 64]);
    run.launch(&sim, cs, ps, c);
    sim.sync_stream(ps, Duration::from_secs(5)).unwrap();
    let w = run.wall(&sim);
    let compute = abi::ticks_to_nanos(w.end - w.dispatched);
    assert!(compute >= 500_000, "kernel time is modelled: {compute} ns");
    assert_eq!(run.output(&sim), vec![2; 64]);
}

#[test]
fn a_wait_that_never_ends_faults_at_the_watchdog() {
    let sim = SimDriver::stepped(small());
    let (a, b) = pair(&sim);
    let e = sim.create_event().unwrap();
    sim.inject(Fault::EventNeverCompletes { nth: 1 });
    sim.record_event(e, a).unwrap();
    sim.stream_wait_event(b, e).unwrap();
    let buf = sim.alloc(4).unwrap();
    sim.memset_async(b, buf, 1, 4).unwrap();
    // Not blocked for good: the stream's work ends at the 2 ms watchdog.
    let err = sim.sync_stream(b, Duration::from_millis(10)).unwrap_err();
    assert_eq!(
        err.kind(),
        &DriverErrorKind::KernelFault(FaultKind::Collateral)
    );
    assert!(sim.stats().steps <= 2100, "{} steps", sim.stats().steps);
    sim.destroy_stream(b).unwrap();
}
