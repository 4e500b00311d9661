//! Captured runs: a decode-like loop of small runs through a `Pipeline`,
//! launched and then replayed (`Pipeline::replay`), on the real-time
//! simulated NPU with a host cost per runtime call — the regime where the
//! runtime's calls, not the kernels, bound small runs.
//!
//! Four sequences share the pipeline (one per slot): step `t` of a sequence
//! feeds on step `t - 1`'s output, as a decode step feeds on the last
//! token, and each step's scalar (the position) changes. Every output is
//! checked against a host model. Printed per mode: runtime calls per run
//! (counted by the simulator), host time per run, the device's busy
//! fraction (the workers' compute time over the span) and the throughput
//! against the device-bound limit (one kernel and its dispatch gap per
//! run).
//!
//! ```sh
//! cargo run --release --example 11_replay
//! cargo run --release --example 11_replay -- --runs 10000 --kernel-us 20 --per-call-us 5
//! ```

use std::error::Error;
use std::time::{Duration, Instant};

use runclaim::driver::abi::{Dir, Program, WallRecord};
use runclaim::sim::{LatencyModel, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Pipeline, Workload};

#[path = "support/flags.rs"]
mod flags;

const DEPTH: usize = 4;
const ELEMENTS: usize = 16;

struct Opts {
    runs: usize,
    kernel: Duration,
    per_call: Duration,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        runs: 10_000,
        kernel: Duration::from_micros(20),
        per_call: Duration::from_micros(5),
    };
    let usage = "usage: 11_replay [--runs N] [--kernel-us T] [--per-call-us T]";
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let v = args
            .next()
            .ok_or(format!("{usage} ({flag} needs a value)"))?;
        let us = |floor| flags::whole(&v, &flag, floor).map(|n| Duration::from_micros(n as u64));
        match flag.as_str() {
            "--runs" => o.runs = flags::whole(&v, "--runs", DEPTH * 2)?,
            "--kernel-us" => o.kernel = us(1)?.min(LatencyModel::MAX),
            "--per-call-us" => o.per_call = us(0)?.min(LatencyModel::MAX),
            _ => return Err(format!("{usage} (got {flag:?})")),
        }
    }
    Ok(o)
}

/// The kernel: `x * 3 + 7`, element by element (the step's scalar rides
/// along, as a decode step's position does).
fn program() -> Program {
    Program::new().mul(3).add(7)
}

/// What one mode measured.
struct Measured {
    gap_us: f64,
    calls_per_run: f64,
    host_us_per_run: f64,
    busy: f64,
    of_limit: f64,
}

fn run(o: &Opts, replay: bool) -> Result<Measured, Box<dyn Error>> {
    let latency = LatencyModel::default()
        .kernel(o.kernel)
        .per_call(o.per_call);
    let sim = SimDriver::real_time(SimConfig::default().latency(latency));
    let mut dev =
        Device::<_, DEPTH>::open(sim.clone(), DeviceConfig::default().max_elements(ELEMENTS))?;
    let f = program();
    let runner = dev.publish(&[Callable::program("step", &f)])?;
    let code = runner.code("step")?;
    let mut pipe = Pipeline::<_, DEPTH, usize>::new(&runner)?;
    pipe.replay(replay);
    // Each sequence's state (its last output), and the host model's.
    let mut state: Vec<Vec<u32>> = (0..DEPTH)
        .map(|s| {
            (0..ELEMENTS)
                .map(|j| u32::try_from(s * 100 + j).unwrap_or(0))
                .collect()
        })
        .collect();
    let mut walls: Vec<WallRecord> = Vec::with_capacity(o.runs);
    let mut spare: Vec<Workload<'_>> = Vec::new();
    let calls_before = sim.stats().total_calls();
    let t0 = Instant::now();
    for i in 0..o.runs + DEPTH {
        if pipe.is_full() || i >= o.runs {
            let Some(done) = pipe.complete().map_err(runclaim::Error::without_value)? else {
                break;
            };
            let seq = done.tag % DEPTH;
            let work = done
                .work
                .ok_or("a workload's run hands its workload back")?;
            let got = work.get::<u32>(1)?.to_vec(); // by index: the type checked
            let want: Vec<u32> = state[seq].iter().map(|&x| f.apply_lossy(x)).collect();
            if got != want {
                return Err(
                    format!("run {} (sequence {seq}) produced wrong values", done.tag).into(),
                );
            }
            state[seq] = got;
            walls.push(done.wall);
            spare.push(work);
        }
        if i >= o.runs {
            continue;
        }
        // Step i of sequence i % DEPTH: its input is the sequence's last
        // output (the run DEPTH before it, completed just above).
        let seq = i % DEPTH;
        let work = if let Some(mut work) = spare.pop() {
            // A workload that came back, refilled in place.
            work.replace(0, state[seq].clone())
                .map_err(runclaim::Error::without_value)?;
            work.set_scalar(0, i as u64)?;
            work
        } else {
            let mut work = Workload::new(code);
            work.owned(state[seq].clone(), Dir::In)
                .owned(vec![0u32; ELEMENTS], Dir::Out)
                .scalar(i as u64);
            work
        };
        pipe.submit(work, i)
            .map_err(runclaim::Error::without_value)?;
    }
    let host = t0.elapsed();
    let calls = sim.stats().total_calls() - calls_before;
    drop(pipe);
    let span = walls.iter().map(|w| w.end).max().unwrap_or(0)
        - walls.iter().map(WallRecord::start).min().unwrap_or(0);
    let computing: u64 = walls
        .iter()
        .map(|w| w.end.saturating_sub(w.dispatched))
        .sum();
    let ticks = |d: Duration| runclaim::driver::abi::duration_to_ticks(d) as f64;
    let limit = ticks(latency.kernel + latency.dispatch_gap) * walls.len() as f64;
    let report = runclaim::measure::Report::from_walls(&walls)?;
    Ok(Measured {
        gap_us: report.gap.mean_ns as f64 / 1000.0,
        calls_per_run: calls as f64 / o.runs as f64,
        host_us_per_run: host.as_secs_f64() * 1e6 / o.runs as f64,
        busy: computing as f64 / span.max(1) as f64,
        of_limit: limit / span.max(1) as f64,
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let o = parse()?;
    println!(
        "{} decode-like steps of {ELEMENTS} elements, depth {DEPTH}, kernel {:?}, {:?} per runtime call",
        o.runs, o.kernel, o.per_call
    );
    println!(
        "{:<9} {:>11} {:>13} {:>12} {:>17} {:>12}",
        "mode", "calls/run", "host µs/run", "device busy", "of device-bound", "gap µs mean"
    );
    for (name, replay) in [("launched", false), ("replayed", true)] {
        let m = run(&o, replay)?;
        println!(
            "{name:<9} {:>11.2} {:>13.1} {:>11.1}% {:>16.1}% {:>12.1}",
            m.calls_per_run,
            m.host_us_per_run,
            m.busy * 100.0,
            m.of_limit * 100.0,
            m.gap_us
        );
    }
    println!("every output checked against the host model");
    Ok(())
}
