//! One run driven by hand at the driver level on the simulator: allocate the
//! run's regions, register code, launch the AICore and AICPU kernels on two
//! streams, wait for the AICPU stream's completion event, read the results.
//!
//! This is what the claim contract automates (and makes safe to queue);
//! see `01_one_run.rs` for the same run through the contract.
//!
//! Run: `cargo run --example 00_driver_level`

use std::time::Duration;

use runclaim::driver::abi::{self, Program, RunArgs, StatusRecord, WallRecord};
use runclaim::driver::{DevPtr, Driver, DriverError};
use runclaim::sim::{SimConfig, SimDriver};

fn main() -> Result<(), DriverError> {
    let sim = SimDriver::real_time(SimConfig::default());
    let input: Vec<u32> = (0..16).collect();
    let block_dim = 4;

    // Device regions of one run.
    let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
    let inp = sim.alloc(bytes.len())?;
    let out = sim.alloc(bytes.len())?;
    let hs = sim.alloc(abi::handshake_bytes(block_dim))?;
    let wall = sim.alloc(WallRecord::SIZE)?;
    let status = sim.alloc(StatusRecord::SIZE)?;
    sim.copy_to_device(inp, &bytes)?;
    sim.memset(hs, 0, abi::handshake_bytes(block_dim))?; // clear the handshake

    // Code, streams, completion event.
    let code = sim.register_code(&Program::new().mul(3).add(1).encode())?;
    let aicore = sim.create_stream()?;
    let aicpu = sim.create_stream()?;
    let done = sim.create_event()?;

    let args = RunArgs {
        run_id: 1,
        slot: 0,
        block_dim,
        len: input.len() as u64,
        input: inp.raw(),
        output: out.raw(),
        handshake: hs.raw(),
        wall: wall.raw(),
        status: status.raw(),
    }
    .block(); // the block's bytes and the five device ranges it names
    sim.launch_aicore(aicore, code.handle, block_dim, args.args())?;
    sim.launch_aicpu(aicpu, args.args())?;
    sim.record_event(done, aicpu)?;
    sim.sync_event(done, Duration::from_secs(1))?;

    let mut raw = vec![0u8; bytes.len()];
    sim.copy_from_device(&mut raw, out)?;
    let output: Vec<u32> = raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut rec = [0u8; WallRecord::SIZE];
    sim.copy_from_device(&mut rec, DevPtr::from_raw(wall.raw()))?;
    let wall = WallRecord::from_bytes(&rec).unwrap_or_default();
    let mut st = [0u8; StatusRecord::SIZE];
    sim.copy_from_device(&mut st, status)?;
    let status = StatusRecord::from_bytes(&st).unwrap_or_default();

    println!("output: {output:?}");
    println!(
        "run {} status code {} device time {} µs",
        status.run_id,
        status.code,
        abi::ticks_to_nanos(wall.duration_ticks()) / 1000
    );
    let expected: Vec<u32> = input.iter().map(|x| x * 3 + 1).collect();
    assert_eq!(output, expected, "device computed the wrong values");
    Ok(())
}
