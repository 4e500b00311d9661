//! One run through all four states on the simulated NPU:
//! `Prepared → Launched → Fenced → Finalized`.
//!
//! Run: `cargo run --example 01_one_run`

use runclaim::driver::abi::{Program, ticks_to_nanos};
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

fn main() -> Result<(), runclaim::Error> {
    // A device: the simulated NPU, one stream pair, two slots of device regions.
    let mut device = Device::<_, 2>::open(
        SimDriver::real_time(SimConfig::default()),
        DeviceConfig::default(),
    )?;
    // Publishing code gives a runner for this code generation.
    let runner = device.publish(&[Callable::program("axpb", &Program::new().mul(2).add(1))])?;
    let mut out = Outputs::<0>::new(8);

    // Slot 0's token: the only way to use slot 0's buffers.
    let token = runner.take_slot::<0>()?;
    let input = [1, 2, 3, 4];

    let prepared = runner.prepare(
        token,
        RunSpec::new(runner.code("axpb")?, Input::Host(&input)),
    )?;
    println!("prepared  {prepared:?}  (input uploaded, handshake cleared, records armed)");

    let launched = prepared.launch()?;
    println!("launched  {launched:?}  (AICore + AICPU kernels and the fence queued)");

    let fenced = launched.fence()?;
    println!("fenced    {fenced:?}  (this run's own fence event observed)");

    let done = fenced.finalize(&mut out)?;
    println!(
        "finalized run {} in slot {}: outputs {:?}, {} µs on the device",
        done.run,
        done.token.index(),
        out.values(),
        ticks_to_nanos(done.wall.duration_ticks()) / 1000
    );
    assert_eq!(out.values(), &[3, 5, 7, 9]);
    // `done.token` is slot 0, ready for the next run.
    Ok(())
}
