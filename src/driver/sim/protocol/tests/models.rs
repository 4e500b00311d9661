//! Each protocol's blocks refused by the other, a panicking model, and the
//! default model.

use super::*;

#[test]
fn blocks_of_the_other_protocol_are_refused_at_launch() {
    // runclaim's blocks on an a2a3 device.
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let (v1, v2) = runclaim_blocks(&sim, 2);
    for b in [&v1, &v2] {
        assert!(invalid(sim.launch_aicore(aic, code, 2, b.args())));
        assert!(invalid(sim.launch_aicpu(cpu, b.args())));
    }
    assert_eq!((sim.queued(aic), sim.queued(cpu)), (0, 0));

    // a2a3's blocks on a runclaim device (the default).
    let sim = SimDriver::stepped(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    assert!(invalid(sim.launch_aicore(
        aic,
        code,
        2,
        slot.aicore_block(1).args()
    )));
    for tensors in [&io[..], &[]] {
        assert!(invalid(
            sim.launch_aicpu(cpu, slot.aicpu_block(1, tensors, &[]).args())
        ));
    }
    assert_eq!((sim.queued(aic), sim.queued(cpu)), (0, 0));
    // The negative control: each block on its own protocol's device is
    // accepted.
    let (v1, _) = runclaim_blocks(&sim, 2);
    sim.launch_aicore(aic, code, 2, v1.args()).unwrap();
    let sim = a2a3(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let slot = Slot::open(&sim, 2, 0);
    let (x, y) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let io = [T::new(x, 8, Dir::In), T::new(y, 8, Dir::Out)];
    slot.launch(&sim, (aic, cpu), code, 1, &io, &[]);
    sim.sync_stream(cpu, SEC).unwrap();
}

#[derive(Debug)]
struct Panicky {
    in_decode: bool,
}

impl DeviceModel for Panicky {
    fn name(&self) -> &'static str {
        "panicky"
    }
    fn decode_aicore(
        &self,
        b: &[u8],
        n: u32,
        max: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicoreLaunch, ModelError> {
        assert!(!self.in_decode, "a model bug at launch");
        RunclaimModel.decode_aicore(b, n, max, mem)
    }
    fn decode_aicpu(
        &self,
        b: &[u8],
        max: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<AicpuLaunch, ModelError> {
        RunclaimModel.decode_aicpu(b, max, mem)
    }
    fn report(&self, _: &AicoreLaunch, _: u32, _: &mut DeviceMemory<'_>) -> Result<(), ModelError> {
        panic!("a model bug on the device")
    }
    fn task(
        &self,
        k: &AicoreLaunch,
        w: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<Task>, ModelError> {
        RunclaimModel.task(k, w, mem)
    }
    fn finish(
        &self,
        k: &AicoreLaunch,
        w: u32,
        code: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        RunclaimModel.finish(k, w, code, mem)
    }
    fn released(
        &self,
        k: &AicoreLaunch,
        w: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        RunclaimModel.released(k, w, mem)
    }
    fn accepted(
        &self,
        c: &AicpuLaunch,
        w: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<bool, ModelError> {
        RunclaimModel.accepted(c, w, mem)
    }
    fn dispatch(
        &self,
        c: &AicpuLaunch,
        w: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        RunclaimModel.dispatch(c, w, mem)
    }
    fn task_done(
        &self,
        c: &AicpuLaunch,
        w: u32,
        mem: &DeviceMemory<'_>,
    ) -> Result<Option<u32>, ModelError> {
        RunclaimModel.task_done(c, w, mem)
    }
    fn write_records(
        &self,
        c: &AicpuLaunch,
        e: &RunEnd,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        RunclaimModel.write_records(c, e, mem)
    }
    fn release(
        &self,
        c: &AicpuLaunch,
        w: u32,
        mem: &mut DeviceMemory<'_>,
    ) -> Result<(), ModelError> {
        RunclaimModel.release(c, w, mem)
    }
}

#[test]
fn a_panicking_model_refuses_the_launch_or_faults_the_kernel_and_poisons_nothing() {
    for in_decode in [true, false] {
        let sim = SimDriver::stepped(
            SimConfig::default()
                .watchdog(Duration::from_micros(200))
                .device_model(Panicky { in_decode }),
        );
        let (aic, cpu) = pair(&sim);
        let code = program(&sim, &Program::new());
        let (v1, _) = runclaim_blocks(&sim, 1);
        let r = sim.launch_aicore(aic, code, 1, v1.args());
        if in_decode {
            assert!(invalid(r));
            assert_eq!(sim.queued(aic), 0);
        } else {
            r.unwrap();
            sim.launch_aicpu(cpu, v1.args()).unwrap();
            let e = sim.sync_stream(aic, SEC).unwrap_err();
            assert_eq!(
                e.kind(),
                &DriverErrorKind::KernelFault(FaultKind::AicoreException)
            );
            assert!(sim.sync_stream(cpu, SEC).is_err());
        }
        // The simulator still answers.
        let p = sim.alloc(4).unwrap();
        sim.free(p).unwrap();
        assert_eq!(sim.config().device_model.name(), "panicky");
    }
}

#[test]
fn the_runclaim_model_is_the_default_and_configs_compare_models_by_name() {
    assert_eq!(
        SimConfig::default().device_model.name(),
        RunclaimModel.name()
    );
    let a = SimConfig::default().device_model(A2a3Model);
    assert_ne!(a, SimConfig::default());
    assert_eq!(a, SimConfig::default().device_model(A2a3Model));
    assert_eq!(a2a3(SimConfig::default()).config(), a);
    assert!(format!("{a:?}").contains("ModelHandle(\"a2a3\")"));
    // A run on the default model: runclaim's records, as before.
    let sim = SimDriver::stepped(SimConfig::default());
    let (aic, cpu) = pair(&sim);
    let code = program(&sim, &Program::new().add(1));
    let (v1, _) = runclaim_blocks(&sim, 2);
    sim.launch_aicore(aic, code, 2, v1.args()).unwrap();
    sim.launch_aicpu(cpu, v1.args()).unwrap();
    sim.sync_stream(cpu, MS).unwrap();
    let a = RunArgs::from_bytes(v1.args().bytes()).unwrap();
    let st = StatusRecord::from_bytes(&read(&sim, DevPtr::from_raw(a.status), 16)).unwrap();
    assert_eq!((st.run_id, st.state, st.code), (1, StatusRecord::DONE, 0));
    let w = WallRecord::from_bytes(&read(&sim, DevPtr::from_raw(a.wall), 48)).unwrap();
    assert_eq!((w.run_id, w.slot, w.block_dim), (1, 0, 2));
    assert!(w.aicore_start <= w.dispatched && w.dispatched <= w.end);
}
