//! A pipeline keeps all DEPTH slots busy: submit run specs in order, take
//! the results back in the same order — every slot still moving through
//! the typed states inside.
//!
//! Run: `cargo run --example 05_pipeline`

use runclaim::driver::abi::Program;
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Callable, Completed, Device, DeviceConfig, Input, Pipeline, RunSpec};

fn main() -> Result<(), runclaim::Error> {
    let sim = SimDriver::real_time(SimConfig::default());
    let mut device = Device::<_, 4>::open(sim, DeviceConfig::default())?;
    let runner = device.publish(&[Callable::program("axpb", &Program::new().mul(2).add(1))])?;
    let code = runner.code("axpb")?;
    let inputs: Vec<Vec<u32>> = (0..12).map(|i| vec![i, i + 100]).collect();
    let show = |done: Completed<'_, '_, usize>| {
        let x = &inputs[done.tag];
        assert_eq!(done.values, [2 * x[0] + 1, 2 * x[1] + 1]);
        println!(
            "input {:>2} → {:?} (run {})",
            done.tag, done.values, done.run
        );
    };

    let mut pipe = Pipeline::new(&runner)?; // takes all four slots
    for (i, input) in inputs.iter().enumerate() {
        if pipe.is_full()
            && let Some(done) = pipe.complete()?
        {
            show(done); // the oldest run, fenced and finalized
        }
        pipe.submit(RunSpec::new(code, Input::Host(input)), i)?; // four runs launched at a time
    }
    while let Some(done) = pipe.complete()? {
        show(done);
    }
    Ok(())
}
