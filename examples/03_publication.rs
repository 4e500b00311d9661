//! Publishing new code between runs. Publication is a drain barrier: the
//! compiler refuses it while a run is launched (see `Runner`'s docs), and at
//! run time it waits for runs that were `mem::forget`-ed. New AICore code
//! starts a code generation: the AICore stream is re-created, so no kernel
//! runs stale instructions — even when the new image lands at the old
//! image's code address.
//!
//! Run: `cargo run --example 03_publication`

use runclaim::driver::abi::Program;
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

fn main() -> Result<(), runclaim::Error> {
    // One code address: every new image replaces the previous one there.
    let sim = SimDriver::real_time(SimConfig::default().code_slots(1));
    let mut device = Device::<_, 2>::open(sim.clone(), DeviceConfig::default())?;
    let mut out = Outputs::<0>::new(4);

    {
        let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
        let spec = RunSpec::new(runner.code("f")?, Input::Host(&[1, 2]));
        runner.run_serial(runner.take_slot::<0>()?, spec, &mut out)?;
        println!("generation 1, f(x) = x + 1: {:?}", out.values());
        assert_eq!(out.values(), &[2, 3]);

        // A launched run the borrow checker can no longer see...
        let spec = RunSpec::new(runner.code("f")?, Input::Host(&[5]));
        std::mem::forget(runner.prepare(runner.take_slot::<1>()?, spec)?.launch()?);
        println!("forgotten, still in flight: {}", runner.health().in_flight);
    }

    // ...is waited for by the next publication before any stream changes.
    let runner = device.publish(&[Callable::program("f", &Program::new().mul(10))])?;
    println!(
        "after publishing f(x) = 10x: {} in flight",
        runner.health().in_flight
    );
    let spec = RunSpec::new(runner.code("f")?, Input::Host(&[1, 2]));
    runner.run_serial(runner.take_slot::<0>()?, spec, &mut out)?;
    println!("generation 2, f(x) = 10x: {:?}", out.values());
    assert_eq!(
        out.values(),
        &[10, 20],
        "a stale AICore stream would have computed x + 1"
    );

    let stats = runner.device().stats();
    let sim_stats = sim.stats();
    println!(
        "code generations: {}, AICore stream re-created {} time(s), stale kernels: {}",
        stats.generations, stats.aicore_recreations, sim_stats.stale_executions
    );
    assert_eq!(sim_stats.stale_executions, 0);
    Ok(())
}
