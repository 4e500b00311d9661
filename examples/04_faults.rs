//! Failures, on the simulated NPU with injected faults:
//! 1. a run that reports an error fails alone — its queued successor completes;
//! 2. a partial launch (AICore kernel queued, AICPU launch refused) poisons
//!    the runner and quarantines the slot;
//! 3. a drain proves the queue quiet and returns every slot to service.
//!
//! Run: `cargo run --example 04_faults`

use std::time::Duration;

use runclaim::contract::ErrorKind;
use runclaim::driver::Op;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

fn main() -> Result<(), runclaim::Error> {
    let sim = SimDriver::real_time(SimConfig::default().watchdog(Duration::from_millis(5)));
    let mut device = Device::<_, 2>::open(sim.clone(), DeviceConfig::default())?;
    let mut runner = device.publish(&[
        Callable::program("ok", &Program::new().add(1)),
        Callable::program("bad", &Program::new().add(1).fail(42)),
    ])?;
    let (mut out0, mut out1) = (Outputs::<0>::new(4), Outputs::<1>::new(4));

    // 1. A failing run and a queued successor.
    {
        let bad = runner
            .prepare(
                runner.take_slot::<0>()?,
                RunSpec::new(runner.code("bad")?, Input::Host(&[1])),
            )?
            .launch()?;
        let good = runner
            .prepare(
                runner.take_slot::<1>()?,
                RunSpec::new(runner.code("ok")?, Input::Host(&[1])),
            )?
            .launch()?;
        let err = bad.fence()?.finalize(&mut out0).unwrap_err();
        println!("1. {err}");
        assert_eq!(err.kind(), &ErrorKind::RunFailed { code: 42 });
        good.fence()?.finalize(&mut out1)?;
        println!(
            "   its successor: {:?}; runner poisoned: {}",
            out1.values(),
            runner.health().poisoned.is_some()
        );
    }

    // 2. A partial launch poisons the runner.
    {
        sim.inject(Fault::FailCall {
            op: Op::LaunchAicpu,
            nth: 1,
        });
        let err = runner
            .prepare(
                runner.take_slot::<0>()?,
                RunSpec::new(runner.code("ok")?, Input::Host(&[1])),
            )?
            .launch()
            .unwrap_err();
        println!("2. {err}");
        let health = runner.health();
        println!("   health: {health:?}");
        assert!(health.poisoned.is_some() && health.quarantined.contains(0));
        let refused = runner
            .prepare(
                runner.take_slot::<1>()?,
                RunSpec::new(runner.code("ok")?, Input::Host(&[1])),
            )?
            .launch()
            .unwrap_err();
        println!("   next launch: {refused}");
    }

    // 3. Recovery: the orphaned AICore kernel ends at the device watchdog;
    //    the drain sees the queue quiet and re-creates the faulted stream.
    let report = runner.drain()?;
    println!("3. drain: {report:?}");
    let spec = RunSpec::new(runner.code("ok")?, Input::Host(&[41]));
    runner.run_serial(runner.take_slot::<0>()?, spec, &mut out0)?;
    println!("   slot 0 works again: {:?}", out0.values());
    assert_eq!(out0.values(), &[42]);
    Ok(())
}
