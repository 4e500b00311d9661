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
//! Each step is a `Workload` refilled in place (two owned tensors and a
//! scalar), or with `--spec` a `RunSpec` (the input copied with the run's
//! records, the output read back with them: the fewest calls a run makes).
//! `--submit-us` and `--wake-us` set the model's cost of a launch call
//! (10 µs) and a blocking wait's wake-up (20 µs); at 0 the host's time per
//! run is runclaim's and the simulator's own, plus the calls'.
//!
//! ```sh
//! cargo run --release --example 11_replay
//! cargo run --release --example 11_replay -- --runs 10000 --kernel-us 20 --per-call-us 5 --spec
//! ```

use std::error::Error;
use std::time::{Duration, Instant};

use runclaim::driver::abi::{Dir, Program, WallRecord};
use runclaim::sim::{LatencyModel, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec, WithoutValue, Workload};

#[path = "support/flags.rs"]
mod flags;

const DEPTH: usize = 4;
const ELEMENTS: usize = 16;
/// The arena's elements: room for a step's 16 and, in its second half,
/// the records a replayed `RunSpec` run reads back with its output.
const ARENA: usize = 32;

struct Opts {
    runs: usize,
    kernel: Duration,
    per_call: Duration,
    submit: Duration,
    wake: Duration,
    spec: bool,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        runs: 10_000,
        kernel: Duration::from_micros(20),
        per_call: Duration::from_micros(5),
        submit: LatencyModel::default().submit,
        wake: LatencyModel::default().host_wake,
        spec: false,
    };
    let usage = "usage: 11_replay [--runs N] [--kernel-us T] [--per-call-us T] [--submit-us T] [--wake-us T] [--spec]";
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--spec" {
            o.spec = true;
            continue;
        }
        let v = args
            .next()
            .ok_or(format!("{usage} ({flag} needs a value)"))?;
        let us = |floor| flags::whole(&v, &flag, floor).map(|n| Duration::from_micros(n as u64));
        match flag.as_str() {
            "--runs" => o.runs = flags::whole(&v, "--runs", DEPTH * 2)?,
            "--kernel-us" => o.kernel = us(1)?.min(LatencyModel::MAX),
            "--per-call-us" => o.per_call = us(0)?.min(LatencyModel::MAX),
            "--submit-us" => o.submit = us(0)?.min(LatencyModel::MAX),
            "--wake-us" => o.wake = us(0)?.min(LatencyModel::MAX),
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

/// A completed step: its tag, wall record and output.
type Step = (usize, WallRecord, Vec<u32>);

/// One step of a sequence, as the mode submits it: a workload refilled in
/// place (the spare ones come back with their results), or a `RunSpec`.
struct Steps<'r> {
    code: runclaim::CodeRef<'r>,
    spec: bool,
    spare: Vec<Workload<'r>>,
}

impl<'r> Steps<'r> {
    /// Submits step `i`, its input `x`.
    fn submit<D: runclaim::driver::Driver>(
        &mut self,
        pipe: &mut Pipeline<'r, D, DEPTH, usize>,
        i: usize,
        x: &[u32],
    ) -> Result<(), runclaim::Error> {
        if self.spec {
            let spec = RunSpec::new(self.code, Input::Host(x));
            return pipe.submit(spec, i).map(drop).without_value();
        }
        let work = if let Some(mut work) = self.spare.pop() {
            // A workload that came back, refilled in place.
            work.replace(0, x.to_vec()).without_value()?;
            work.set_scalar(0, i as u64)?;
            work
        } else {
            let mut work = Workload::new(self.code);
            work.owned(x.to_vec(), Dir::In)
                .owned(vec![0u32; ELEMENTS], Dir::Out)
                .scalar(i as u64);
            work
        };
        pipe.submit(work, i).map(drop).without_value()
    }

    /// The oldest step's tag, wall record and output, once complete.
    fn complete<D: runclaim::driver::Driver>(
        &mut self,
        pipe: &mut Pipeline<'r, D, DEPTH, usize>,
    ) -> Result<Option<Step>, Box<dyn Error>> {
        let Some(done) = pipe.complete().without_value()? else {
            return Ok(None);
        };
        let got = match done.work {
            Some(work) => {
                let got = work.get::<u32>(1)?.to_vec(); // by index: the type checked
                self.spare.push(work);
                got
            }
            None => done.values.to_vec(),
        };
        Ok(Some((done.tag, done.wall, got)))
    }
}

fn run(o: &Opts, replay: bool) -> Result<Measured, Box<dyn Error>> {
    let latency = LatencyModel::default()
        .kernel(o.kernel)
        .per_call(o.per_call)
        .submit(o.submit)
        .host_wake(o.wake);
    let sim = SimDriver::real_time(SimConfig::default().latency(latency));
    let mut dev =
        Device::<_, DEPTH>::open(sim.clone(), DeviceConfig::default().max_elements(ARENA))?;
    let f = program();
    let runner = dev.publish(&[Callable::program("step", &f)])?;
    let mut steps = Steps {
        code: runner.code("step")?,
        spec: o.spec,
        spare: Vec::new(),
    };
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
    let calls_before = sim.stats().total_calls();
    let t0 = Instant::now();
    for i in 0..o.runs + DEPTH {
        if pipe.is_full() || i >= o.runs {
            let Some((tag, wall, got)) = steps.complete(&mut pipe)? else {
                break;
            };
            let seq = tag % DEPTH;
            let want: Vec<u32> = state[seq].iter().map(|&x| f.apply_lossy(x)).collect();
            if got != want {
                return Err(format!("run {tag} (sequence {seq}) produced wrong values").into());
            }
            state[seq] = got;
            walls.push(wall);
        }
        // Step i of sequence i % DEPTH: its input is the sequence's last
        // output (the run DEPTH before it, completed just above).
        if i < o.runs {
            steps.submit(&mut pipe, i, &state[i % DEPTH])?;
        }
    }
    let host = t0.elapsed();
    let calls = sim.stats().total_calls() - calls_before;
    drop(pipe);
    measured(&walls, latency, calls, host, o.runs)
}

/// What the walls say against the device-bound limit (one kernel and its
/// dispatch gap per run).
fn measured(
    walls: &[WallRecord],
    latency: LatencyModel,
    calls: u64,
    host: Duration,
    runs: usize,
) -> Result<Measured, Box<dyn Error>> {
    let span = walls.iter().map(|w| w.end).max().unwrap_or(0)
        - walls.iter().map(WallRecord::start).min().unwrap_or(0);
    let computing: u64 = walls
        .iter()
        .map(|w| w.end.saturating_sub(w.dispatched))
        .sum();
    let ticks = |d: Duration| runclaim::driver::abi::duration_to_ticks(d) as f64;
    let limit = ticks(latency.kernel + latency.dispatch_gap) * walls.len() as f64;
    let report = runclaim::measure::Report::from_walls(walls)?;
    Ok(Measured {
        gap_us: report.gap.mean_ns as f64 / 1000.0,
        calls_per_run: calls as f64 / runs as f64,
        host_us_per_run: host.as_secs_f64() * 1e6 / runs as f64,
        busy: computing as f64 / span.max(1) as f64,
        of_limit: limit / span.max(1) as f64,
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let o = parse()?;
    let form = if o.spec { "RunSpec" } else { "Workload" };
    println!(
        "{} decode-like steps of {ELEMENTS} elements ({form}), depth {DEPTH}, kernel {:?}, {:?} per runtime call, {:?} per launch, {:?} wake-up",
        o.runs, o.kernel, o.per_call, o.submit, o.wake
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
