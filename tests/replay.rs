//! Captured runs on the simulator: a replay computes what a launch would,
//! with the host inputs of its own run, in its own slot, mixed with
//! launched runs in stream order; what differs from its capture is refused
//! before any runtime call with the run handed back; a stale capture, a
//! fault during a replay, a driver that cannot capture.

use std::collections::BTreeMap;

use runclaim::contract::{ErrorKind, ReplayRefusal, TensorDiff};
use runclaim::driver::Op;
use runclaim::driver::abi::{
    AbiError, AicpuBlock, BlockWriter, Dir, KernelAbi, Program, RecordAt, RecordError, RegionSpec,
    RunIdentity, RunView, RunclaimAbi, Shape, Verdict, WallRecord,
};
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{
    Callable, Capture, Device, DeviceConfig, Input, Outputs, RunSpec, Runner, SlotToken, Workload,
};

fn callables() -> [Callable; 2] {
    [
        Callable::program("inc", &Program::new().add(1)),
        Callable::program("dbl", &Program::new().mul(2)),
    ]
}

fn open(sim: &SimDriver) -> Device<SimDriver, 2> {
    Device::open(sim.clone(), DeviceConfig::default().max_elements(64)).unwrap()
}

/// Slot 0's first run of `spec`, captured, fenced and finalized into
/// `out`: the slot's token back, and its capture.
fn captured<'r>(
    runner: &'r Runner<'_, SimDriver, 2>,
    spec: RunSpec<'_>,
    out: &mut Outputs<0>,
) -> (SlotToken<'r, 0>, Capture<'r, 0>) {
    let (run, capture) = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .capture()
        .unwrap();
    (run.fence().unwrap().finalize(out).unwrap().token, capture)
}

/// The AICore kernels, launched or replayed (on the graph's own stream),
/// ran one at a time in run order: a launch behind a replay waited for it.
fn aicore_kernels_one_at_a_time_in_run_order(trace: &[runclaim::sim::trace::TraceEvent]) {
    use runclaim::sim::trace::{TaskTag, TraceKind};
    let (mut running, mut last) = (None::<u64>, 0);
    for t in trace {
        match t.what {
            TraceKind::Started(TaskTag::Aicore) => {
                assert_eq!(
                    running, None,
                    "run {} began while run {running:?} ran",
                    t.run
                );
                assert!(t.run > last, "run {} began after run {last}", t.run);
                (running, last) = (Some(t.run), t.run);
            }
            TraceKind::Finished(TaskTag::Aicore) => running = None,
            _ => {}
        }
    }
    assert!(last > 0, "no AICore kernel traced");
}

fn refusal<T>(e: &runclaim::Error<T>) -> ReplayRefusal {
    match e.kind() {
        ErrorKind::Replay(r) => **r,
        other => panic!("expected a replay refusal, got {other:?}"),
    }
}

/// Replays in both slots, launched runs between them (a launch right
/// after a replay, a replay right after a launch), each checked against
/// the host model; chained inputs across a replay and a launch.
#[test]
fn replays_and_launches_interleave_in_stream_order() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = open(&sim);
    let runner = dev.publish(&callables()).unwrap();
    let inc = runner.code("inc").unwrap();
    let (mut o0, mut o1) = (Outputs::<0>::new(64), Outputs::<1>::new(64));
    let x = [5u32, 6, 7];
    let spec = RunSpec::new(inc, Input::Host(&x));
    let (r0, c0) = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .capture()
        .unwrap();
    // Slot 1 chains on the captured run's output, launched behind it.
    let r1 = runner
        .prepare(
            runner.take_slot::<1>().unwrap(),
            RunSpec::new(inc, Input::Previous),
        )
        .unwrap()
        .launch()
        .unwrap();
    let mut t0 = r0.fence().unwrap().finalize(&mut o0).unwrap().token;
    assert_eq!(o0.values(), [6, 7, 8]);
    let mut t1 = r1.fence().unwrap().finalize(&mut o1).unwrap().token;
    assert_eq!(o1.values(), [7, 8, 9]);
    let (r1, c1) = runner
        .prepare(t1, RunSpec::new(inc, Input::Host(&[1, 2, 3])))
        .unwrap()
        .capture()
        .unwrap();
    t1 = r1.fence().unwrap().finalize(&mut o1).unwrap().token;
    for i in 0..20u32 {
        let a = [i, i + 1, i + 2];
        // Slot 0 replayed; slot 1 replayed or launched, chaining on slot 0.
        let r0 = runner
            .prepare(t0, RunSpec::new(inc, Input::Host(&a)))
            .unwrap()
            .replay(&c0)
            .unwrap();
        let p1 = runner
            .prepare(t1, RunSpec::new(inc, Input::Previous))
            .unwrap();
        let r1 = if i % 2 == 0 {
            p1.replay(&c1).unwrap()
        } else {
            p1.launch().unwrap()
        };
        t0 = r0.fence().unwrap().finalize(&mut o0).unwrap().token;
        t1 = r1.fence().unwrap().finalize(&mut o1).unwrap().token;
        assert_eq!(o0.values(), [i + 1, i + 2, i + 3], "replay {i}");
        assert_eq!(o1.values(), [i + 2, i + 3, i + 4], "run {i} behind it");
    }
    drop((c0, c1, t0, t1));
    drop(runner);
    aicore_kernels_one_at_a_time_in_run_order(&sim.trace());
    let s = dev.stats();
    assert_eq!((s.captures, s.replays), (2, 2 + 20 + 10));
    assert_eq!(
        sim.stats().live_graphs,
        0,
        "dropped captures destroy their graphs"
    );
}

/// The calls of one blocking run, by operation.
fn calls_of(sim: &SimDriver, run: impl FnOnce()) -> BTreeMap<Op, u64> {
    let before = sim.stats().calls;
    run();
    let mut d = sim.stats().calls;
    for (op, n) in &mut d {
        *n -= before.get(op).copied().unwrap_or(0);
    }
    d.retain(|_, n| *n > 0);
    d
}

/// Where the copies cannot join, a replay makes them apart and computes
/// the same: an arena too small for the records' copy before its output
/// (4 elements: 16 bytes, the records span 80) reads the records and the
/// output apart; an input above the joined copies' 16 KiB is copied and
/// read apart too.
#[test]
fn a_replay_whose_copies_cannot_join_makes_them_apart() {
    use Op::*;
    for (max_elements, len, h2d, d2h) in [(4, 3, 2, 2), (8192, 5000, 3, 2), (8192, 4096, 2, 1)] {
        let sim = SimDriver::stepped(SimConfig::default());
        let config = DeviceConfig::default().max_elements(max_elements);
        let mut dev = Device::<_, 2>::open(sim.clone(), config).unwrap();
        let runner = dev.publish(&callables()).unwrap();
        let inc = runner.code("inc").unwrap();
        let mut out = Outputs::<0>::new(max_elements);
        let x: Vec<u32> = (0..len).collect();
        let (token, c) = captured(&runner, RunSpec::new(inc, Input::Host(&x)), &mut out);
        let y: Vec<u32> = x.iter().map(|v| v * 3).collect();
        let calls = calls_of(&sim, || {
            let run = runner
                .prepare(token, RunSpec::new(inc, Input::Host(&y)))
                .unwrap()
                .replay(&c)
                .unwrap();
            drop(run.fence().unwrap().finalize(&mut out).unwrap());
        });
        let want: Vec<u32> = y.iter().map(|v| v + 1).collect();
        assert_eq!(out.values(), want, "{max_elements} elements, {len} in");
        let want: BTreeMap<Op, u64> = [
            (CopyToDevice, h2d),
            (GraphLaunch, 1),
            (SyncEvent, 1),
            (CopyFromDevice, d2h),
        ]
        .into_iter()
        .collect();
        assert_eq!(calls, want, "{max_elements} elements, {len} in");
    }
}

/// A replayed run makes five runtime calls: the one copy that prepares its
/// regions and carries its input, the write of its block, one graph
/// launch, the fence, and one read of its records with its output (its
/// graph copied the records next to the output). A launch makes its five
/// launch calls (two kernels, two records, the cross-stream wait) and
/// reads records and output apart; a launch right behind a replay waits
/// for the replay's fence first (one more).
#[test]
fn a_replay_is_five_runtime_calls_where_a_launch_is_nine() {
    use Op::*;
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = open(&sim);
    let runner = dev.publish(&callables()).unwrap();
    let inc = runner.code("inc").unwrap();
    let mut out = Outputs::<0>::new(64);
    let spec = RunSpec::new(inc, Input::Host(&[1]));
    let (token, c) = captured(&runner, spec, &mut out);
    let mut token = Some(token);
    let mut one = |replay: bool| {
        calls_of(&sim, || {
            let p = runner.prepare(token.take().unwrap(), spec).unwrap();
            let run = if replay { p.replay(&c) } else { p.launch() };
            token = Some(
                run.unwrap()
                    .fence()
                    .unwrap()
                    .finalize(&mut out)
                    .unwrap()
                    .token,
            );
            assert_eq!(out.values(), [2]);
        })
    };
    let common = [(CopyToDevice, 1), (SyncEvent, 1)];
    let with = |extra: &[(Op, u64)]| -> BTreeMap<Op, u64> {
        let mut m: BTreeMap<Op, u64> = common.into_iter().collect();
        for &(op, n) in extra {
            *m.entry(op).or_insert(0) += n;
        }
        m
    };
    let replayed = one(true);
    let replay = [(CopyToDevice, 1), (GraphLaunch, 1), (CopyFromDevice, 1)];
    assert_eq!(replayed, with(&replay));
    assert_eq!(replayed.values().sum::<u64>(), 5);
    let behind_a_replay = one(false);
    let launch = [
        (LaunchAicore, 1),
        (LaunchAicpu, 1),
        (RecordEvent, 2),
        (StreamWaitEvent, 1),
        (CopyFromDevice, 2),
    ];
    let mut extra = launch.to_vec();
    extra.push((StreamWaitEvent, 1));
    assert_eq!(behind_a_replay, with(&extra));
    assert_eq!(one(false), with(&launch));
    assert_eq!(with(&launch).values().sum::<u64>(), 9);
    assert_eq!(one(true), replayed);
}

/// A workload of an input, a device buffer, maybe an output and a scalar.
fn work<'a>(
    code: runclaim::CodeRef<'a>,
    x: &'a [u32],
    buf: &'a runclaim::DeviceBuffer<u32>,
    out: Option<&'a mut [u32]>,
    scalar: Option<u64>,
) -> Workload<'a> {
    let mut w = Workload::new(code);
    w.input(x).buffer(buf, Dir::In);
    if let Some(out) = out {
        w.output(out);
    }
    if let Some(k) = scalar {
        w.scalar(k);
    }
    w
}

/// What differs from the capture is refused before any runtime call, the
/// prepared run handed back, and each names what differs.
#[test]
fn a_replay_unlike_its_capture_is_refused_naming_what_differs() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = open(&sim);
    let buf_a = dev.alloc_buffer::<u32>(8).unwrap();
    let buf_b = dev.alloc_buffer::<u32>(8).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let (inc, dbl) = (runner.code("inc").unwrap(), runner.code("dbl").unwrap());
    let x = [1u32; 4];
    let mut y = [0u32; 4];
    let mut first = work(inc, &x, &buf_a, Some(&mut y), Some(7));
    let (run, capture) = runner
        .prepare(runner.take_slot::<0>().unwrap(), &mut first)
        .unwrap()
        .capture()
        .unwrap();
    let mut token = run.fence().unwrap().finalize().unwrap().token;
    let graph_launches = || {
        sim.stats()
            .calls
            .get(&Op::GraphLaunch)
            .copied()
            .unwrap_or(0)
    };
    let before = graph_launches();
    let x8 = [1u32; 8];
    let mut y = [0u32; 4];
    let (mut y1, mut y2, mut y3, mut y4) = ([0u32; 4], [0u32; 4], [0u32; 4], [0u32; 4]);
    let diff = |index, diff| ReplayRefusal::Tensor { index, diff };
    let larger = TensorDiff::Larger {
        captured: 16,
        now: 32,
    };
    let cases: [(Workload<'_>, ReplayRefusal); 5] = [
        (
            work(dbl, &x, &buf_a, Some(&mut y1), Some(7)),
            ReplayRefusal::Code,
        ),
        (
            work(inc, &x, &buf_b, None, Some(7)),
            ReplayRefusal::TensorCount {
                captured: 3,
                now: 2,
            },
        ),
        (
            work(inc, &x, &buf_b, Some(&mut y2), Some(7)),
            diff(1, TensorDiff::Binding),
        ),
        (
            work(inc, &x8, &buf_a, Some(&mut y3), Some(7)),
            diff(0, larger),
        ),
        (
            work(inc, &x, &buf_a, Some(&mut y4), None),
            ReplayRefusal::ScalarCount {
                captured: 1,
                now: 0,
            },
        ),
    ];
    for (mut w, want) in cases {
        let e = runner
            .prepare(token, &mut w)
            .unwrap()
            .replay(&capture)
            .unwrap_err();
        assert_eq!(refusal(&e), want);
        token = e.into_value().unwrap().into_token();
    }
    assert_eq!(graph_launches(), before, "nothing reached the driver");
    // Host inputs and scalars may change: a smaller input, another scalar.
    let x2 = [3u32; 2];
    let mut w = work(inc, &x2, &buf_a, Some(&mut y), Some(9));
    let done = runner
        .prepare(token, &mut w)
        .unwrap()
        .replay(&capture)
        .unwrap()
        .fence()
        .unwrap()
        .finalize()
        .unwrap();
    drop(done);
    assert_eq!(graph_launches(), before + 1);
}

/// Code uploaded on the NPU since the capture (by another device on it)
/// makes the capture stale: refused, and a new capture replays.
#[test]
fn an_upload_on_the_npu_makes_a_capture_stale() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = open(&sim);
    let mut other = open(&sim);
    let runner = dev.publish(&callables()).unwrap();
    let inc = runner.code("inc").unwrap();
    let mut out = Outputs::<0>::new(64);
    let spec = RunSpec::new(inc, Input::Host(&[1]));
    let (token, c) = captured(&runner, spec, &mut out);
    drop(
        other
            .publish(&[Callable::program("x", &Program::new().xor(3))])
            .unwrap(),
    );
    let e = runner.prepare(token, spec).unwrap().replay(&c).unwrap_err();
    assert_eq!(refusal(&e), ReplayRefusal::Stale);
    let (run, _fresh) = e.into_value().unwrap().capture().unwrap();
    drop(run.fence().unwrap().finalize(&mut out).unwrap());
    assert_eq!(out.values(), [2]);
}

/// A fault in a replay is the replay's: its fence reports it, the runner
/// is poisoned until a drain — which needs the runner to itself, so every
/// capture is gone first — and a new capture replays after it.
#[test]
fn a_fault_in_a_replay_poisons_and_the_drain_lets_the_capture_go() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = open(&sim);
    let mut runner = dev.publish(&callables()).unwrap();
    let mut out = Outputs::<0>::new(64);
    {
        let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1]));
        let (run, c) = runner
            .prepare(runner.take_slot::<0>().unwrap(), spec)
            .unwrap()
            .capture()
            .unwrap();
        let token = run.fence().unwrap().finalize(&mut out).unwrap().token;
        sim.inject(Fault::KernelFault {
            kernel: Kernel::Aicore,
            nth: 1,
        });
        let run = runner.prepare(token, spec).unwrap().replay(&c).unwrap();
        let e = run.fence().unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Fault(_)), "{:?}", e.kind());
        drop(e);
        assert!(runner.health().poisoned.is_some());
        // Poisoned: a capture is refused as a launch is.
        let e = runner
            .prepare(runner.take_slot::<1>().unwrap(), spec)
            .unwrap()
            .capture()
            .unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Poisoned(_)), "{:?}", e.kind());
    }
    runner.drain().unwrap();
    assert_eq!(
        sim.stats().live_graphs,
        0,
        "the faulted capture's graph is gone"
    );
    let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1]));
    let (run, _fresh) = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .capture()
        .unwrap();
    drop(run.fence().unwrap().finalize(&mut out).unwrap());
    assert_eq!(out.values(), [2]);
}

/// Without capture in the driver, or a replayable form in the adapter, a
/// capture is refused before any runtime call, the run handed back.
#[test]
fn a_driver_or_adapter_that_cannot_replay_refuses_the_capture() {
    let mut dev = Device::<_, 2>::open(
        runclaim::driver::instant::InstantDriver::new(),
        DeviceConfig::default(),
    )
    .unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1]));
    let e = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .capture()
        .unwrap_err();
    assert_eq!(refusal(&e), ReplayRefusal::DriverCannotCapture);
    // The run came back, and launches.
    drop(e.into_value().unwrap().launch().unwrap().fence().unwrap());

    // A user adapter of runclaim's layout with no replayable form.
    let config = DeviceConfig::default().kernel_abi(NoReplay);
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = Device::<_, 2>::open(sim.clone(), config).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1]));
    let prepared = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap();
    let before = sim.stats().total_calls();
    let e = prepared.capture().unwrap_err();
    assert_eq!(refusal(&e), ReplayRefusal::AdapterCannotReplay);
    assert_eq!(
        sim.stats().total_calls(),
        before,
        "refused before any runtime call"
    );
    drop(e.into_value().unwrap().launch().unwrap().fence().unwrap());
}

/// runclaim's own layout, without [`KernelAbi::replay_block`].
struct NoReplay;

impl KernelAbi for NoReplay {
    fn name(&self) -> &'static str {
        "no replay"
    }
    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
        RunclaimAbi.regions(shape, out)
    }
    fn max_block_bytes(&self) -> usize {
        RunclaimAbi.max_block_bytes()
    }
    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
        RunclaimAbi.aicore_block(run, w)
    }
    fn aicpu_block(
        &self,
        _: &RunView<'_>,
        _: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError> {
        Ok(AicpuBlock::Same)
    }
    fn arm(&self, region: usize, id: &RunIdentity, bytes: &mut [u8]) -> Result<(), AbiError> {
        RunclaimAbi.arm(region, id, bytes)
    }
    fn status_record(&self) -> RecordAt {
        RunclaimAbi.status_record()
    }
    fn timing_record(&self) -> RecordAt {
        RunclaimAbi.timing_record()
    }
    fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError> {
        RunclaimAbi.decode_status(id, bytes)
    }
    fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError> {
        RunclaimAbi.decode_timing(id, bytes)
    }
}

/// The a2a3 layout replays too (its AICore and AICPU blocks apart, both in
/// the capture region), each replay's epoch its own.
#[test]
fn a2a3_runs_replay_with_their_own_epochs() {
    let sim = SimDriver::stepped(SimConfig::default().device_model(runclaim::sim::A2a3Model));
    let config = DeviceConfig::default().kernel_abi(runclaim::driver::abi::A2a3Abi);
    let mut dev = Device::<_, 2>::open(sim.clone(), config).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let inc = runner.code("inc").unwrap();
    let mut out = Outputs::<0>::new(8);
    let (run, c) = runner
        .prepare(
            runner.take_slot::<0>().unwrap(),
            RunSpec::new(inc, Input::Host(&[1, 2])),
        )
        .unwrap()
        .capture()
        .unwrap();
    let mut token = run.fence().unwrap().finalize(&mut out).unwrap().token;
    assert_eq!(out.values(), [2, 3]);
    for i in 0..10u32 {
        let run = runner
            .prepare(token, RunSpec::new(inc, Input::Host(&[i, i * 2])))
            .unwrap()
            .replay(&c)
            .unwrap();
        token = run.fence().unwrap().finalize(&mut out).unwrap().token;
        assert_eq!(out.values(), [i + 1, i * 2 + 1]);
    }
    assert_eq!(sim.stats().graph_launches, 11);
}

/// Another device's capture (same slot index, lifetimes that unify) is
/// refused at run time.
#[test]
fn another_devices_capture_is_refused() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (mut a, mut b) = (open(&sim), open(&sim));
    let (ra, rb) = (
        a.publish(&callables()).unwrap(),
        b.publish(&callables()).unwrap(),
    );
    let spec_a = RunSpec::new(ra.code("inc").unwrap(), Input::Host(&[1]));
    let spec_b = RunSpec::new(rb.code("inc").unwrap(), Input::Host(&[1]));
    let (run, ca) = ra
        .prepare(ra.take_slot::<0>().unwrap(), spec_a)
        .unwrap()
        .capture()
        .unwrap();
    drop(run.fence().unwrap());
    let e = rb
        .prepare(rb.take_slot::<0>().unwrap(), spec_b)
        .unwrap()
        .replay(&ca)
        .unwrap_err();
    assert_eq!(refusal(&e), ReplayRefusal::Foreign);
}

/// A capture dropped while its replay runs keeps its graph until the
/// replay is done; then it is destroyed.
#[test]
fn a_capture_dropped_during_its_replay_is_destroyed_after_it() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = open(&sim);
    let runner = dev.publish(&callables()).unwrap();
    let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1]));
    let (run, c) = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .capture()
        .unwrap();
    drop(c);
    assert_eq!(sim.stats().live_graphs, 1, "its replay runs");
    let mut token = run.fence().unwrap().into_token();
    // A later launch finds the graph's streams done (its fence may
    // complete a task before they are), and destroys it.
    for _ in 0..2 {
        let run = runner.prepare(token, spec).unwrap().launch().unwrap();
        token = run.fence().unwrap().into_token();
    }
    assert_eq!(sim.stats().live_graphs, 0);
}
