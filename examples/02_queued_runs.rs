//! Two runs in flight on one stream pair: run 1 is queued before run 0 is
//! fenced, reads run 0's output in stream order, and run 0's result is read
//! while run 1 may still execute.
//!
//! Run: `cargo run --example 02_queued_runs`

use runclaim::driver::abi::{Program, ticks_to_nanos};
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

fn main() -> Result<(), runclaim::Error> {
    let mut device = Device::<_, 2>::open(
        SimDriver::real_time(SimConfig::default()),
        DeviceConfig::default(),
    )?;
    let runner = device.publish(&[
        Callable::program("scale", &Program::new().mul(10)),
        Callable::program("shift", &Program::new().add(7)),
    ])?;
    let (mut out0, mut out1) = (Outputs::<0>::new(8), Outputs::<1>::new(8));

    let run0 = runner
        .prepare(
            runner.take_slot::<0>()?,
            RunSpec::new(runner.code("scale")?, Input::Host(&[1, 2, 3])),
        )?
        .launch()?;
    // Launch does not wait for run 0: run 1 goes on the same streams now.
    let run1 = runner
        .prepare(
            runner.take_slot::<1>()?,
            RunSpec::new(runner.code("shift")?, Input::Previous),
        )?
        .launch()?;
    println!(
        "in flight: {} runs (seq {} and {})",
        runner.health().in_flight,
        run0.seq(),
        run1.seq()
    );
    assert_eq!(runner.health().in_flight, 2);

    let done0 = run0.fence()?.finalize(&mut out0)?;
    println!(
        "run {}: {:?} (read while the next run may still execute)",
        done0.run,
        out0.values()
    );
    let done1 = run1.fence()?.finalize(&mut out1)?;
    println!(
        "run {}: {:?} (chained on run {})",
        done1.run,
        out1.values(),
        done0.run
    );
    assert_eq!(out0.values(), &[10, 20, 30]);
    assert_eq!(out1.values(), &[17, 27, 37]);

    let gap = done1.wall.start().saturating_sub(done0.wall.end);
    println!(
        "device idle between them: {} µs",
        ticks_to_nanos(gap) as f64 / 1000.0
    );
    Ok(())
}
