//! The kernel ABI as an adapter, through the contract on the simulator:
//! the same workload under both built-in adapters, a user adapter, the
//! epoch check and its negative control, and adapters that misbehave.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use runclaim::contract::{ConfigError, ErrorKind, Record};
use runclaim::driver::abi::{
    A2a3Abi, AbiError, AicpuBlock, BlockWriter, DevSpan, Dir, KernelAbi, Prep, Program, RecordAt,
    RecordError, RegionSpec, RunIdentity, RunView, RunclaimAbi, Shape, Verdict, WallRecord,
};
use runclaim::sim::{A2a3Model, SimConfig, SimDriver, SimKernel};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec, Workload};

fn a2a3_sim() -> SimDriver {
    SimDriver::stepped(SimConfig::default().device_model(A2a3Model))
}

fn a2a3() -> DeviceConfig {
    DeviceConfig::default().kernel_abi(A2a3Abi)
}

/// `y = a·x + y` over u32, each worker its share.
fn axpy() -> SimKernel {
    SimKernel::new(|k| {
        let a = u32::try_from(k.scalar(0).unwrap_or(0)).unwrap_or(0);
        let share = k.share(k.tensor(0).map_or(0, |t| t.elements()));
        let n = usize::try_from(share.end - share.start).unwrap_or(0);
        let (mut x, mut y) = (vec![0u32; n], vec![0u32; n]);
        k.read_tensor(0, share.start, &mut x)?;
        k.read_tensor(1, share.start, &mut y)?;
        for (y, x) in y.iter_mut().zip(&x) {
            *y = y.wrapping_add(a.wrapping_mul(*x));
        }
        k.write_tensor(1, share.start, &y)
    })
}

/// Runs axpy twice, queued, over a shared device buffer and host inputs:
/// what comes back.
fn axpy_twice(sim: SimDriver, config: DeviceConfig) -> Vec<u32> {
    let kernel = sim.register_kernel(axpy());
    let mut dev = Device::<_, 2>::open(sim, config).unwrap();
    let mut y = dev.alloc_buffer::<u32>(8).unwrap();
    dev.write_buffer(&mut y, 0, &[1; 8]).unwrap();
    {
        let runner = dev.publish(&[Callable::new("axpy", kernel)]).unwrap();
        let f = runner.code("axpy").unwrap();
        let (x0, x1) = ([1u32, 2, 3, 4, 5, 6, 7, 8], [10u32; 8]);
        let mut w0 = Workload::new(f);
        w0.input(&x0).buffer(&y, Dir::InOut).scalar(2);
        let mut w1 = Workload::new(f);
        w1.input(&x1).buffer(&y, Dir::InOut).scalar(3);
        let r0 = runner.prepare(runner.take_slot::<0>().unwrap(), &mut w0);
        let r0 = r0.unwrap().launch().unwrap();
        let r1 = runner.prepare(runner.take_slot::<1>().unwrap(), &mut w1);
        let r1 = r1.unwrap().launch().unwrap();
        drop(r0.fence().unwrap().finalize().unwrap());
        drop(r1.fence().unwrap().finalize().unwrap());
    }
    let mut back = vec![0; 8];
    dev.read_buffer(&mut y, 0, &mut back).unwrap();
    back
}

#[test]
fn the_same_workload_computes_the_same_under_both_adapters() {
    let want: Vec<u32> = (1..=8).map(|x| 1 + 2 * x + 30).collect();
    let runclaim = axpy_twice(
        SimDriver::stepped(SimConfig::default()),
        DeviceConfig::default(),
    );
    let a2a3 = axpy_twice(a2a3_sim(), a2a3());
    assert_eq!(runclaim, want);
    assert_eq!(a2a3, want);
}

#[test]
fn a2a3_runs_never_clear_their_records_from_the_host() {
    let sim = a2a3_sim();
    let mut dev = Device::<_, 2>::open(sim.clone(), a2a3()).unwrap();
    let runner = dev
        .publish(&[Callable::program("inc", &Program::new().add(1))])
        .unwrap();
    let f = runner.code("inc").unwrap();
    let calls = |op| sim.stats().calls.get(&op).copied().unwrap_or(0);
    let (memsets, h2d) = (
        calls(runclaim::driver::Op::Memset),
        calls(runclaim::driver::Op::CopyToDevice),
    );
    let mut out = Outputs::<0>::new(4);
    let mut token = runner.take_slot::<0>().unwrap();
    for k in 0..5u32 {
        let input = [k, k + 1, k + 2, k + 3];
        let spec = RunSpec::new(f, Input::Host(&input));
        let done = runner.run_serial(token, spec, &mut out).unwrap();
        assert_eq!(out.values(), &[k + 1, k + 2, k + 3, k + 4]);
        assert_eq!(done.wall.run_id, done.run.get(), "the wall is this run's");
        token = done.token;
    }
    // Five runs: the inputs went in (one copy each), no record was cleared
    // or armed (runclaim's layout costs a memset pair and an H2D per run).
    assert_eq!(calls(runclaim::driver::Op::Memset), memsets);
    assert_eq!(calls(runclaim::driver::Op::CopyToDevice), h2d + 5);
}

/// A test adapter over [`A2a3Abi`] that, when `decoy` is set, points the
/// device at a decoy region instead of the result region — so the run's
/// result region still holds the previous run's verdict — and, when
/// `trusting`, decodes the status without the epoch check (the broken
/// reader the epoch exists to refuse).
struct Decoy {
    decoy: Arc<AtomicBool>,
    trusting: bool,
}

impl KernelAbi for Decoy {
    fn name(&self) -> &'static str {
        "decoy"
    }
    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
        A2a3Abi.regions(shape, out)?;
        out.push(RegionSpec {
            name: "decoy result",
            bytes: 280,
            prep: Prep::Stamped,
        });
        Ok(())
    }
    fn max_block_bytes(&self) -> usize {
        A2a3Abi.max_block_bytes()
    }
    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
        A2a3Abi.aicore_block(run, w)
    }
    fn aicpu_block(
        &self,
        run: &RunView<'_>,
        w: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError> {
        if !self.decoy.load(Ordering::SeqCst) {
            return A2a3Abi.aicpu_block(run, w);
        }
        let region = |i| run.region(i).ok_or(AbiError::NoRegion { index: i });
        let regions: [DevSpan; 3] = [region(0)?, region(3)?, region(2)?];
        let view = RunView::new(*run.identity(), &regions, run.tensors(), run.scalars());
        A2a3Abi.aicpu_block(&view, w)
    }
    fn status_record(&self) -> RecordAt {
        A2a3Abi.status_record()
    }
    fn timing_record(&self) -> RecordAt {
        A2a3Abi.timing_record()
    }
    fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError> {
        if self.trusting {
            // Whatever epoch the region carries.
            let stamped = u64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8]));
            let id = RunIdentity {
                epoch: stamped,
                ..*id
            };
            return A2a3Abi.decode_status(&id, bytes);
        }
        A2a3Abi.decode_status(id, bytes)
    }
    fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError> {
        A2a3Abi.decode_timing(id, bytes)
    }
}

/// Run 0 succeeds; run 1 (same slot) publishes its result elsewhere and
/// fails with a known code: what does the host read for run 1?
fn stale_result(trusting: bool) -> Result<Vec<u32>, ErrorKind> {
    let sim = a2a3_sim();
    let decoy = Arc::new(AtomicBool::new(false));
    let adapter = Decoy {
        decoy: decoy.clone(),
        trusting,
    };
    let mut dev =
        Device::<_, 2>::open(sim.clone(), DeviceConfig::default().kernel_abi(adapter)).unwrap();
    let runner = dev
        .publish(&[Callable::program("inc", &Program::new().add(1))])
        .unwrap();
    let f = runner.code("inc").unwrap();
    let mut out = Outputs::<0>::new(1);
    let done = runner
        .run_serial(
            runner.take_slot::<0>().unwrap(),
            RunSpec::new(f, Input::Host(&[1])),
            &mut out,
        )
        .unwrap();
    assert_eq!(out.values(), &[2]);
    decoy.store(true, Ordering::SeqCst);
    sim.inject(runclaim::sim::Fault::RunError { nth: 2, code: 7 });
    let spec = RunSpec::new(f, Input::Host(&[5]));
    match runner.run_serial(done.token, spec, &mut out) {
        Ok(_) => Ok(out.values().to_vec()),
        Err(e) => Err(e.kind().clone()),
    }
}

#[test]
fn the_epoch_check_refuses_the_previous_runs_result_region() {
    // With the check: run 1's result region is run 0's — refused.
    match stale_result(false) {
        Err(ErrorKind::RecordMismatch {
            record: Record::Status,
            expected,
            found,
        }) => assert_eq!(found + 1, expected, "the previous run's epoch"),
        other => panic!("expected a status mismatch, got {other:?}"),
    }
    // The negative control: without it, run 1 — which failed with code 7 —
    // is taken for a success on run 0's verdict.
    assert_eq!(stale_result(true), Ok(vec![6]));
}

#[test]
fn a_device_speaking_another_protocol_refuses_the_launch() {
    for (sim, config) in [
        (a2a3_sim(), DeviceConfig::default()),
        (SimDriver::stepped(SimConfig::default()), a2a3()),
    ] {
        let mut dev = Device::<_, 2>::open(sim, config).unwrap();
        let runner = dev
            .publish(&[Callable::program("inc", &Program::new().add(1))])
            .unwrap();
        let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1]));
        let prepared = runner
            .prepare(runner.take_slot::<0>().unwrap(), spec)
            .unwrap();
        let err = prepared.launch().unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Driver(e) if matches!(e.kind(), runclaim::driver::DriverErrorKind::InvalidArgument { .. })),
            "{err}"
        );
        // Nothing was submitted: the run comes back, the device is usable.
        drop(err.into_value());
        assert_eq!(dev_health_in_flight(&runner), 0);
    }
}

fn dev_health_in_flight<D: runclaim::driver::Driver>(r: &runclaim::Runner<'_, D, 2>) -> usize {
    r.device().health().in_flight
}

/// An adapter that misbehaves in each of the ways the device must survive.
struct Rogue {
    how: u8,
}

impl KernelAbi for Rogue {
    fn name(&self) -> &'static str {
        "rogue"
    }
    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
        match self.how {
            0 => Ok(()), // no region at all
            1 => {
                RunclaimAbi.regions(shape, out)?;
                out[0].bytes = 0;
                Ok(())
            }
            _ => RunclaimAbi.regions(shape, out),
        }
    }
    fn max_block_bytes(&self) -> usize {
        if self.how == 2 {
            0
        } else {
            RunclaimAbi.max_block_bytes()
        }
    }
    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
        match self.how {
            3 => panic!("a rogue adapter panics"),
            4 => {
                w.grow(usize::MAX / 2)?; // past its capacity: an error, not a panic
                Ok(())
            }
            _ => RunclaimAbi.aicore_block(run, w),
        }
    }
    fn aicpu_block(
        &self,
        run: &RunView<'_>,
        w: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError> {
        RunclaimAbi.aicpu_block(run, w)
    }
    fn arm(&self, region: usize, id: &RunIdentity, bytes: &mut [u8]) -> Result<(), AbiError> {
        RunclaimAbi.arm(region, id, bytes)
    }
    fn status_record(&self) -> RecordAt {
        if self.how == 5 {
            RecordAt {
                region: 2,
                offset: 8,
                bytes: 16,
            } // past the region's end
        } else {
            RunclaimAbi.status_record()
        }
    }
    fn timing_record(&self) -> RecordAt {
        RunclaimAbi.timing_record()
    }
    fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError> {
        assert!(self.how != 6, "a rogue decoder panics");
        RunclaimAbi.decode_status(id, bytes)
    }
    fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError> {
        RunclaimAbi.decode_timing(id, bytes)
    }
}

#[test]
fn an_adapter_that_cannot_serve_the_device_is_refused_at_open() {
    for how in [0, 1, 2, 5] {
        let sim = SimDriver::stepped(SimConfig::default());
        let err = Device::<_, 2>::open(
            sim.clone(),
            DeviceConfig::default().kernel_abi(Rogue { how }),
        )
        .unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Config(c) if matches!(**c, ConfigError::Adapter { adapter: "rogue", .. })),
            "{how}: {err}"
        );
        drop(err.into_value());
        assert_eq!(
            sim.stats().live_allocations(),
            0,
            "{how}: nothing left behind"
        );
    }
}

#[test]
fn an_adapter_that_fails_or_panics_fails_its_run_and_nothing_else() {
    for how in [3, 4, 6] {
        let sim = SimDriver::stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(
            sim.clone(),
            DeviceConfig::default().kernel_abi(Rogue { how }),
        )
        .unwrap();
        let runner = dev
            .publish(&[Callable::program("inc", &Program::new().add(1))])
            .unwrap();
        let f = runner.code("inc").unwrap();
        let mut out = Outputs::<0>::new(1);
        let spec = RunSpec::new(f, Input::Host(&[1]));
        let err = runner
            .run_serial(runner.take_slot::<0>().unwrap(), spec, &mut out)
            .unwrap_err();
        match how {
            3 | 4 => assert!(matches!(err.kind(), ErrorKind::Adapter(_)), "{how}: {err}"),
            _ => assert!(
                matches!(
                    err.kind(),
                    ErrorKind::RecordMalformed {
                        record: Record::Status,
                        ..
                    }
                ),
                "{how}: {err}"
            ),
        }
        assert!(
            runner.device().health().poisoned.is_none(),
            "{how}: not poisoned"
        );
        // A block the adapter could not build never reached the driver.
        let launches = sim
            .stats()
            .calls
            .get(&runclaim::driver::Op::LaunchAicore)
            .copied();
        assert_eq!(launches.unwrap_or(0), u64::from(how == 6), "{how}");
    }
}

/// Adapters that misbehave one way each (`how`): a block size that grows
/// without bound when asked again, a panic in `regions` or
/// `status_record`, a call into its own device from inside a method, a
/// separate AICPU block naming absent memory, another run's wall decoded —
/// each refused or survived.
struct Fickle {
    how: u8,
    calls: std::sync::atomic::AtomicU32,
}

impl Fickle {
    fn new(how: u8) -> Self {
        Fickle {
            how,
            calls: std::sync::atomic::AtomicU32::new(0),
        }
    }
}

/// The device `Fickle::new(3)` belongs to, for it to call from inside a
/// method (leaked: the test thread may be stuck in it forever if the guard
/// breaks).
static OWN: std::sync::OnceLock<&'static Device<SimDriver, 2>> = std::sync::OnceLock::new();

impl KernelAbi for Fickle {
    fn name(&self) -> &'static str {
        "fickle"
    }
    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
        assert!(self.how != 1, "a panicking regions()");
        RunclaimAbi.regions(shape, out)
    }
    fn max_block_bytes(&self) -> usize {
        // Asked a second time, it would claim everything.
        if self.how == 0 && self.calls.fetch_add(1, Ordering::SeqCst) > 0 {
            return usize::MAX;
        }
        RunclaimAbi.max_block_bytes()
    }
    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
        if self.how == 3
            && let Some(own) = OWN.get()
        {
            // Calls its own device while that device calls it (holding
            // its lock).
            let _ = own.health();
        }
        RunclaimAbi.aicore_block(run, w)
    }
    fn aicpu_block(
        &self,
        run: &RunView<'_>,
        w: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError> {
        if self.how != 4 {
            return RunclaimAbi.aicpu_block(run, w);
        }
        // A separate AICPU block naming memory that is not there.
        RunclaimAbi.aicore_block(run, w)?;
        let at = w.grow(8)?;
        let forged = DevSpan::new(runclaim::driver::DevPtr::from_raw(0xdead_0000), 8);
        w.put_addr(at, forged)?;
        Ok(AicpuBlock::Written)
    }
    fn arm(&self, region: usize, id: &RunIdentity, bytes: &mut [u8]) -> Result<(), AbiError> {
        RunclaimAbi.arm(region, id, bytes)
    }
    fn status_record(&self) -> RecordAt {
        assert!(self.how != 2, "a panicking status_record()");
        RunclaimAbi.status_record()
    }
    fn timing_record(&self) -> RecordAt {
        RunclaimAbi.timing_record()
    }
    fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError> {
        RunclaimAbi.decode_status(id, bytes)
    }
    fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError> {
        let wall = RunclaimAbi.decode_timing(id, bytes)?;
        if self.how == 5 {
            // A lying decoder: another run's wall.
            return Ok(WallRecord {
                run_id: wall.run_id + 100,
                ..wall
            });
        }
        Ok(wall)
    }
}

fn inc_once(dev: &mut Device<SimDriver, 2>) -> Result<Vec<u32>, ErrorKind> {
    let runner = dev
        .publish(&[Callable::program("inc", &Program::new().add(1))])
        .unwrap();
    let mut out = Outputs::<0>::new(1);
    let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1]));
    runner
        .run_serial(runner.take_slot::<0>().unwrap(), spec, &mut out)
        .map(|_| out.values().to_vec())
        .map_err(|e| e.kind().clone())
}

#[test]
fn max_block_bytes_is_asked_once_at_open() {
    let sim = SimDriver::stepped(SimConfig::default());
    let config = DeviceConfig::default().kernel_abi(Fickle::new(0));
    let mut dev = Device::<_, 2>::open(sim, config).unwrap();
    assert_eq!(inc_once(&mut dev), Ok(vec![2]));
}

#[test]
fn an_adapter_that_panics_at_open_refuses_the_device_and_hands_the_driver_back() {
    for how in [1, 2] {
        let sim = SimDriver::stepped(SimConfig::default());
        let err = Device::<_, 2>::open(
            sim.clone(),
            DeviceConfig::default().kernel_abi(Fickle::new(how)),
        )
        .unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Config(c) if matches!(**c, ConfigError::Adapter { adapter: "fickle", .. })),
            "{how}: {err}"
        );
        let driver = err.into_value();
        let s = driver.stats();
        assert_eq!((s.live_streams(), s.live_allocations()), (0, 0), "{how}");
        // The driver is whole: a device opens on it.
        assert!(Device::<_, 2>::open(driver, DeviceConfig::default()).is_ok());
    }
}

#[test]
fn an_adapter_calling_a_device_from_inside_fails_its_run_instead_of_deadlocking() {
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let sim = SimDriver::stepped(SimConfig::default());
        let dev: &'static mut Device<SimDriver, 2> = Box::leak(Box::new(
            Device::open(sim, DeviceConfig::default().kernel_abi(Fickle::new(3))).unwrap(),
        ));
        let runner: &'static _ = Box::leak(Box::new(
            dev.publish(&[Callable::program("inc", &Program::new().add(1))])
                .unwrap(),
        ));
        OWN.set(runner.device()).ok();
        let mut out = Outputs::<0>::new(1);
        let spec = RunSpec::new(runner.code("inc").unwrap(), Input::Host(&[1]));
        let r = runner
            .run_serial(runner.take_slot::<0>().unwrap(), spec, &mut out)
            .map(|_| ())
            .map_err(|e| e.kind().clone());
        let healthy = runner.device().health().poisoned.is_none();
        let _ = done.send((r, healthy));
    });
    let (r, healthy) = wait
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the launch returned (a deadlock would not)");
    assert!(matches!(r, Err(ErrorKind::Adapter(_))), "{r:?}");
    assert!(healthy, "nothing was submitted: not poisoned");
}

#[test]
fn a_bad_aicpu_block_is_refused_before_the_aicore_kernel_is_queued() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = Device::<_, 2>::open(
        sim.clone(),
        DeviceConfig::default().kernel_abi(Fickle::new(4)),
    )
    .unwrap();
    let r = inc_once(&mut dev);
    assert!(
        matches!(&r, Err(ErrorKind::Driver(e)) if matches!(e.kind(), runclaim::driver::DriverErrorKind::BadAddress { .. })),
        "{r:?}"
    );
    let launches = sim
        .stats()
        .calls
        .get(&runclaim::driver::Op::LaunchAicore)
        .copied();
    assert_eq!(launches.unwrap_or(0), 0, "nothing of the run was queued");
    assert!(
        dev.health().poisoned.is_none(),
        "a refusal, not a partial launch"
    );
}

#[test]
fn the_wall_the_contract_hands_out_names_the_run_whatever_the_adapter_decodes() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev =
        Device::<_, 2>::open(sim, DeviceConfig::default().kernel_abi(Fickle::new(5))).unwrap();
    assert!(
        matches!(
            inc_once(&mut dev),
            Err(ErrorKind::RecordMismatch {
                record: Record::Wall,
                ..
            })
        ),
        "a lying decoder's wall is refused"
    );
}
