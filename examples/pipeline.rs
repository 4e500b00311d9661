//! What queuing buys: the same workload run twice on the real-time simulated
//! NPU, first *serial* (fence and finalize run N before launching run N+1,
//! as the reference runtime does) and then *queued* (DEPTH runs launched,
//! run N+1 prepared while run N executes). Every run's outputs are checked
//! in both modes. Prints a table, two summary lines, and writes an SVG
//! timeline. The queued mode is a [`Pipeline`]: it keeps every slot busy
//! for any depth, with no per-slot code here.
//!
//! ```sh
//! cargo run --release --example pipeline
//! cargo run --release --example pipeline -- --runs 2000 --depth 3 --kernel-us 50
//! ```
//!
//! `--help` lists every flag with its range and default; a bad value is an
//! error naming the flag and the value, before anything runs.

use std::error::Error;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use runclaim::contract::{Depth, SupportedDepth};
use runclaim::driver::abi::{Program, WallRecord};
use runclaim::measure::Report;
use runclaim::measure::timeline::{Section, svg};
use runclaim::sim::{LatencyModel, SimConfig, SimDriver};
use runclaim::{
    Callable, Device, DeviceConfig, Finalized, Input, Outputs, Pipeline, RunSpec, Runner, SlotToken,
};

struct Opts {
    runs: usize,
    depth: usize,
    elements: usize,
    latency: LatencyModel,
    svg: PathBuf,
    window: usize,
    replay: bool,
}

const USAGE: &str = "\
What queuing buys, measured on the simulated NPU (real-time mode): the same
runs serial, then queued through a Pipeline; every output checked.

usage: cargo run --release --example pipeline -- [FLAGS]

  --runs N          runs per mode, at least 2                 [500]
  --depth D         queued runs in flight, 2 to 16             [2]
  --elements N      elements per run, 1 to 2^30                [256]
  --kernel-us T     kernel time, µs, 1 to 1,000,000            [250]
  --submit-us T     host cost of a kernel launch, µs, 0 to 1e6 [10]
  --dispatch-us T   device dispatch gap, µs, 0 to 1e6          [2]
  --wake-us T       host wake-up after a wait, µs, 0 to 1e6    [20]
  --per-call-us T   host cost of every runtime call, µs, 0 to 1e6 [0]
  --replay 0|1      queued runs replayed from captures (Pipeline::replay) [0]
  --svg PATH        where the timeline goes     [$CARGO_TARGET_DIR or ./target]/runclaim-timeline.svg
  --window N        runs drawn per mode, at least 1            [12]
  -h, --help        this text

The numbers are the simulator's: run on a quiet machine (a loaded host
shows up as device idle time).";

/// Where the timeline goes by default: the build's target directory.
fn default_svg() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    target.join("runclaim-timeline.svg")
}

/// A whole number for `flag` within `range`, or an error naming both.
fn number(flag: &str, value: &str, range: std::ops::RangeInclusive<u64>) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => Err(format!(
            "{flag}: expected a whole number from {} to {}, got {value:?}",
            range.start(),
            range.end()
        )),
    }
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        runs: 500,
        depth: 2,
        elements: 256,
        latency: LatencyModel::default(),
        svg: default_svg(),
        window: 12,
        replay: false,
    };
    let max_us = u64::try_from(LatencyModel::MAX.as_micros()).unwrap_or(u64::MAX);
    let max_elements = DeviceConfig::MAX_ELEMENTS as u64;
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        let value = args
            .next()
            .ok_or_else(|| format!("{flag} needs a value (see --help)"))?;
        let count =
            |range| number(&flag, &value, range).map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let us = |min| number(&flag, &value, min..=max_us).map(Duration::from_micros);
        match flag.as_str() {
            "--runs" => o.runs = count(2..=u64::from(u32::MAX))?,
            "--depth" => o.depth = count(2..=16)?,
            "--elements" => o.elements = count(1..=max_elements)?,
            "--kernel-us" => o.latency.kernel = us(1)?,
            "--submit-us" => o.latency.submit = us(0)?,
            "--dispatch-us" => o.latency.dispatch_gap = us(0)?,
            "--wake-us" => o.latency.host_wake = us(0)?,
            "--per-call-us" => o.latency.per_call = us(0)?,
            "--replay" => o.replay = number(&flag, &value, 0..=1)? == 1,
            "--svg" => o.svg = PathBuf::from(value),
            "--window" => o.window = count(1..=u64::from(u32::MAX))?,
            other => return Err(format!("unknown flag {other:?} (see --help)")),
        }
    }
    Ok(Some(o))
}

/// The workload: run `i` computes `3x + 7` over its own input.
struct Work {
    program: Program,
    inputs: Vec<Vec<u32>>,
    walls: Vec<WallRecord>,
    checked: usize,
    retired: usize,
    label: &'static str,
}

impl Work {
    fn new(opts: &Opts, label: &'static str) -> Self {
        let inputs = (0..opts.runs)
            .map(|i| {
                (0..opts.elements)
                    .map(|j| u32::try_from(i * 7 + j).unwrap_or(u32::MAX))
                    .collect()
            })
            .collect();
        Work {
            program: Program::new().mul(3).add(7),
            inputs,
            walls: Vec::with_capacity(opts.runs),
            checked: 0,
            retired: 0,
            label,
        }
    }

    fn check(&mut self, i: usize, got: &[u32], wall: WallRecord) -> Result<(), String> {
        let want = self.inputs[i].iter().map(|&x| self.program.apply_lossy(x));
        if !got.iter().copied().eq(want) {
            return Err(format!("{}: run {i} produced wrong values", self.label));
        }
        self.checked += 1;
        self.walls.push(wall);
        self.retired += 1;
        if self.retired.is_multiple_of(50) || self.retired == self.inputs.len() {
            eprint!(
                "\r{:>7}: {}/{} runs",
                self.label,
                self.retired,
                self.inputs.len()
            );
            let _ = std::io::stderr().flush();
        }
        Ok(())
    }
}

fn device<const DEPTH: usize>(opts: &Opts) -> Result<Device<SimDriver, DEPTH>, runclaim::Error>
where
    Depth<DEPTH>: SupportedDepth,
{
    let sim = SimDriver::real_time(SimConfig::default().latency(opts.latency));
    Ok(Device::open(
        sim,
        DeviceConfig::default().max_elements(opts.elements),
    )?)
}

// The reference runtime's contract: run N is fenced and finalized before
// run N+1 launches.
fn one<'r>(
    runner: &'r Runner<'_, SimDriver, 2>,
    token: SlotToken<'r, 0>,
    input: &[u32],
    out: &mut Outputs<0>,
) -> Result<Finalized<'r, 0>, runclaim::Error> {
    let spec = RunSpec::new(runner.code("f")?, Input::Host(input));
    Ok(runner.run_serial(token, spec, out)?)
}

fn serial(opts: &Opts) -> Result<(Work, Duration), Box<dyn Error>> {
    let mut dev = device::<2>(opts)?;
    let mut work = Work::new(opts, "serial");
    let callable = Callable::program("f", &work.program);
    let runner = dev.publish(&[callable])?;
    let mut out = Outputs::<0>::new(opts.elements);
    let mut token = Some(runner.take_slot::<0>()?);
    let t0 = Instant::now();
    for i in 0..opts.runs {
        let t = token.take().ok_or("slot token lost")?;
        let done = one(&runner, t, &work.inputs[i], &mut out)?;
        work.check(i, out.values(), done.wall)?;
        token = Some(done.token);
    }
    Ok((work, t0.elapsed()))
}

/// DEPTH runs launched at all times: the pipeline retires the oldest run
/// (fence, finalize) and launches the next one into its slot, while the
/// other slots' runs keep the device busy.
fn queued<const DEPTH: usize>(opts: &Opts) -> Result<(Work, Duration), Box<dyn Error>>
where
    Depth<DEPTH>: SupportedDepth,
{
    let mut dev = device::<DEPTH>(opts)?;
    let mut work = Work::new(opts, "queued");
    let callable = Callable::program("f", &work.program);
    let runner = dev.publish(&[callable])?;
    let code = runner.code("f")?;
    let mut pipe = Pipeline::<_, DEPTH, usize>::new(&runner)?;
    pipe.replay(opts.replay);
    let t0 = Instant::now();
    for i in 0..opts.runs {
        if pipe.is_full()
            && let Some(done) = pipe.complete().map_err(runclaim::Error::without_value)?
        {
            work.check(done.tag, done.values, done.wall)?;
        }
        let spec = RunSpec::new(code, Input::Host(&work.inputs[i]));
        pipe.submit(spec, i)
            .map_err(runclaim::Error::without_value)?;
    }
    while let Some(done) = pipe.complete().map_err(runclaim::Error::without_value)? {
        work.check(done.tag, done.values, done.wall)?;
    }
    Ok((work, t0.elapsed()))
}

/// `DEPTH` is a type: run the instance for the depth asked for.
macro_rules! with_depth {
    ($depth:expr, $f:ident($arg:expr), [$($d:literal)*]) => {
        match $depth {
            $($d => $f::<$d>($arg),)*
            other => Err(format!("unsupported depth {other}").into()),
        }
    };
}

fn row(mode: &str, r: &Report, wall: Duration) -> String {
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
    format!(
        "{mode:<8} {:>6} {:>9.1} {:>9} {:>8} {:>8} {:>8} {:>10.0} {:>8.1}%",
        r.runs,
        wall.as_secs_f64() * 1e3,
        us(r.gap.mean_ns),
        us(r.gap.p50_ns),
        us(r.gap.p99_ns),
        us(r.gap.max_ns),
        r.throughput,
        r.busy_fraction * 100.0,
    )
}

fn main() -> std::process::ExitCode {
    let opts = match parse(std::env::args().skip(1)) {
        Ok(Some(opts)) => opts,
        Ok(None) => {
            println!("{USAGE}");
            return std::process::ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("\nerror: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(opts: &Opts) -> Result<(), Box<dyn Error>> {
    // The timeline's file is opened before the runs, so that a bad path
    // fails now, naming it, not after the whole measurement.
    let svg_error =
        |e: std::io::Error| format!("cannot write the timeline to {}: {e}", opts.svg.display());
    if let Some(dir) = opts.svg.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(svg_error)?;
    }
    let mut svg_file = std::fs::File::create(&opts.svg).map_err(svg_error)?;
    let l = opts.latency;
    println!(
        "runclaim pipeline on the simulated NPU (real-time mode): {} runs of {} elements, depth {}",
        opts.runs, opts.elements, opts.depth
    );
    println!(
        "latency model: kernel {:?}, host submit {:?}/kernel, {:?}/runtime call, device dispatch gap {:?}, host wake-up {:?}; queued runs {}",
        l.kernel,
        l.submit,
        l.per_call,
        l.dispatch_gap,
        l.host_wake,
        if opts.replay { "replayed" } else { "launched" }
    );
    let (serial_work, serial_wall) = serial(opts)?;
    eprintln!();
    let (queued_work, queued_wall) = with_depth!(
        opts.depth,
        queued(opts),
        [2 3 4 5 6 7 8 9 10 11 12 13 14 15 16]
    )?;
    eprintln!();
    let s = Report::from_walls(&serial_work.walls)?;
    let q = Report::from_walls(&queued_work.walls)?;
    println!();
    println!(
        "{:<8} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10} {:>9}",
        "mode", "runs", "wall ms", "gap mean", "p50", "p99", "max", "runs/s", "busy"
    );
    println!(
        "{:<8} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10} {:>9}",
        "", "", "", "µs", "µs", "µs", "µs", "(device)", ""
    );
    println!("{}", row("serial", &s, serial_wall));
    println!("{}", row("queued", &q, queued_wall));
    println!(
        "outputs checked: {} serial + {} queued runs, all correct",
        serial_work.checked, queued_work.checked
    );
    let picture = svg(
        &[
            Section::new("serial", &serial_work.walls),
            Section::new(
                &format!("queued (depth {})", opts.depth),
                &queued_work.walls,
            ),
        ],
        opts.window,
    );
    svg_file.write_all(picture.as_bytes()).map_err(svg_error)?;
    println!("timeline: {}", opts.svg.display());
    let ratio = if s.gap.mean_ns == 0 {
        0.0
    } else {
        q.gap.mean_ns as f64 / s.gap.mean_ns as f64
    };
    println!("idle-gap ratio (queued/serial): {ratio:.4}");
    println!(
        "queued throughput vs device-bound limit: {:.1}%",
        q.of_device_bound() * 100.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Result<Option<Opts>, String> {
        parse(a.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn bad_values_name_the_flag_and_the_value() {
        for (a, want) in [
            (
                &["--kernel-us", "0"][..],
                "--kernel-us: expected a whole number from 1",
            ),
            (
                &["--window", "0"],
                "--window: expected a whole number from 1",
            ),
            (
                &["--depth", "17"],
                "--depth: expected a whole number from 2 to 16, got \"17\"",
            ),
            (&["--runs", "x"], "--runs: expected a whole number from 2"),
            (
                &["--wake-us", "99999999"],
                "--wake-us: expected a whole number from 0 to 1000000",
            ),
            (&["--svg"], "--svg needs a value"),
            (&["--frobnicate", "1"], "unknown flag \"--frobnicate\""),
        ] {
            let e = args(a).err().unwrap_or_default();
            assert!(e.starts_with(want), "{a:?}: {e}");
        }
        assert!(args(&["--help"]).unwrap().is_none());
        let o = args(&["--depth", "16", "--submit-us", "0"])
            .unwrap()
            .unwrap();
        assert_eq!((o.depth, o.latency.submit), (16, Duration::ZERO));
    }
}
