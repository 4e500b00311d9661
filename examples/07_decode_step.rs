//! One decode step, `y = W·x + b` over f32, under the reference runtime's
//! a2a3 kernel ABI: the shape of a real workload, on the real-time
//! simulator.
//!
//! - `W` (`ROWS × COLS`) and `b` (`ROWS`) are **device-resident**: one
//!   `DeviceBuffer<f32>` each, written once, bound (`Dir::In`) by every
//!   queued run — shared in stream order, never copied again.
//! - `x` (`COLS`) and `y` (`ROWS`) are per-run host tensors: borrowed in
//!   the serial loop, owned by the workload in the pipeline (each comes
//!   back from `complete`, is refilled and resubmitted).
//! - The kernel is a Rust simulator kernel (each AICore worker computes
//!   its share of the rows) and the device speaks the a2a3 protocol
//!   ([`A2a3Abi`] on the host, [`A2a3Model`] on the simulated device): a
//!   `KernelArgs`-shaped AICPU block in its launch envelope, an
//!   `AicoreLaunchArgs` block ending in the report epoch, and an
//!   epoch-stamped result region and timing record that the host never
//!   clears.
//!
//! Every `y` is checked **bit for bit** against a host reference that sums
//! in the kernel's order (`acc = b[i]; acc += W[i][j] * x[j]` for j in
//! order: the same roundings). Any difference is an error (exit status 1).
//!
//! It runs serially (each run finalized before the next is prepared), then
//! queued through a [`Pipeline`] at depth 2, 3 and 4, and prints — as
//! `examples/pipeline.rs` does — the device's idle gap between runs, its
//! throughput, and `queued throughput vs device-bound limit: N%`. The
//! numbers are the simulator's: a loaded host shows up as device idle time.
//!
//! Run: `cargo run --release --example 07_decode_step` (`-- --runs N`; the
//! default, 400 runs per mode with 250 µs kernels, takes about half a
//! second of device time per mode).

use std::error::Error;
use std::time::{Duration, Instant};

use runclaim::contract::{Depth, SupportedDepth};
use runclaim::driver::abi::{A2a3Abi, Dir, WallRecord};
use runclaim::measure::Report;
use runclaim::sim::{A2a3Model, KernelCode, SimConfig, SimDriver, SimKernel};
use runclaim::{Callable, Device, DeviceBuffer, DeviceConfig, Pipeline, Workload};

#[path = "support/flags.rs"]
mod flags;

/// Rows of `W` (elements of `y` and `b`).
const ROWS: usize = 64;
/// Columns of `W` (elements of `x`).
const COLS: usize = 96;
/// The kernel's compute time on the simulated device.
const KERNEL: Duration = Duration::from_micros(250);

/// Argument order: tensors `W`, `b`, `x`, `y`, then scalars `rows`, `cols`.
const W: usize = 0;
const B: usize = 1;
const X: usize = 2;
const Y: usize = 3;

/// `y[i] = b[i] + Σ_j W[i][j]·x[j]` over this worker's share of the rows.
fn decode_step() -> SimKernel {
    SimKernel::new(|k| {
        let dim = |i| {
            k.scalar(i)
                .and_then(|v| usize::try_from(v).ok())
                .unwrap_or(0)
        };
        let (rows, cols) = (dim(0), dim(1));
        let share = k.share(rows as u64);
        let (first, n) = (
            share.start,
            usize::try_from(share.end - share.start).unwrap_or(0),
        );
        let mut x = vec![0f32; cols];
        k.read_tensor(X, 0, &mut x)?;
        let mut w = vec![0f32; n * cols];
        k.read_tensor(W, first * cols as u64, &mut w)?;
        let mut y = vec![0f32; n];
        k.read_tensor(B, first, &mut y)?;
        for (acc, row) in y.iter_mut().zip(w.chunks_exact(cols)) {
            for (wij, xj) in row.iter().zip(&x) {
                *acc += wij * xj;
            }
        }
        k.write_tensor(Y, first, &y)
    })
    .time(|_| KERNEL)
}

/// The host reference: the kernel's expression, in its order.
fn reference(w: &[f32], b: &[f32], x: &[f32]) -> Vec<f32> {
    b.iter()
        .zip(w.chunks_exact(COLS))
        .map(|(&bi, row)| {
            let mut acc = bi;
            for (wij, xj) in row.iter().zip(x) {
                acc += wij * xj;
            }
            acc
        })
        .collect()
}

/// Deterministic, varied values, exactly representable.
fn weights() -> (Vec<f32>, Vec<f32>) {
    let w = (0..ROWS * COLS)
        .map(|i| ((i * 37) % 101) as f32 / 128.0 - 0.375)
        .collect();
    let b = (0..ROWS).map(|i| i as f32 * 0.0625 - 2.0).collect();
    (w, b)
}

/// Run k's token embedding.
fn fill_x(k: usize, x: &mut [f32]) {
    for (j, v) in x.iter_mut().enumerate() {
        *v = ((k * 13 + j * 5) % 89) as f32 / 32.0 - 1.25;
    }
}

fn check(mode: &str, k: usize, got: &[f32], want: &[f32]) -> Result<(), String> {
    match (0..ROWS).find(|&i| got.get(i).map(|g| g.to_bits()) != want.get(i).map(|w| w.to_bits())) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{mode}, run {k}: y[{i}] = {:?} but the host computed {}",
            got.get(i),
            want[i]
        )),
    }
}

struct Outcome {
    walls: Vec<WallRecord>,
    wall: Duration,
}

/// A device, its kernel, `W` and `b`.
type Opened<const DEPTH: usize> = (
    Device<SimDriver, DEPTH>,
    KernelCode,
    DeviceBuffer<f32>,
    DeviceBuffer<f32>,
);

/// A device under the a2a3 ABI with `W` and `b` written.
fn open<const DEPTH: usize>() -> Result<Opened<DEPTH>, Box<dyn Error>>
where
    Depth<DEPTH>: SupportedDepth,
{
    let sim = SimDriver::real_time(SimConfig::default().device_model(A2a3Model));
    let kernel = sim.register_kernel(decode_step());
    let config = DeviceConfig::default().kernel_abi(A2a3Abi);
    let dev = Device::<_, DEPTH>::open(sim, config)?;
    let (w, b) = weights();
    let mut wbuf = dev.alloc_buffer::<f32>(ROWS * COLS)?;
    let mut bbuf = dev.alloc_buffer::<f32>(ROWS)?;
    dev.write_buffer(&mut wbuf, 0, &w)?;
    dev.write_buffer(&mut bbuf, 0, &b)?;
    Ok((dev, kernel, wbuf, bbuf))
}

fn serial(runs: usize) -> Result<Outcome, Box<dyn Error>> {
    let (mut dev, kernel, wbuf, bbuf) = open::<2>()?;
    let (w, b) = weights();
    let runner = dev.publish(&[Callable::new("decode", kernel)])?;
    let code = runner.code("decode")?;
    let mut token = runner.take_slot::<0>()?;
    let mut x = vec![0f32; COLS];
    let mut y = vec![0f32; ROWS];
    let mut walls = Vec::with_capacity(runs);
    let t0 = Instant::now();
    for k in 0..runs {
        fill_x(k, &mut x);
        let mut work = Workload::new(code);
        work.buffer(&wbuf, Dir::In)
            .buffer(&bbuf, Dir::In)
            .input(&x)
            .output(&mut y)
            .scalar(ROWS as u64)
            .scalar(COLS as u64);
        let done = runner
            .prepare(token, &mut work)
            .map_err(runclaim::Error::without_value)?
            .launch()
            .map_err(runclaim::Error::without_value)?
            .fence()
            .map_err(runclaim::Error::without_value)?
            .finalize()
            .map_err(runclaim::Error::without_value)?;
        token = done.token;
        walls.push(done.wall);
        drop(work);
        check("serial", k, &y, &reference(&w, &b, &x))?;
    }
    Ok(Outcome {
        walls,
        wall: t0.elapsed(),
    })
}

fn queued<const DEPTH: usize>(runs: usize) -> Result<Outcome, Box<dyn Error>>
where
    Depth<DEPTH>: SupportedDepth,
{
    let (mut dev, kernel, wbuf, bbuf) = open::<DEPTH>()?;
    let (w, b) = weights();
    let runner = dev.publish(&[Callable::new("decode", kernel)])?;
    let code = runner.code("decode")?;
    let mut pipe = Pipeline::<_, DEPTH, usize>::new(&runner)?;
    let mut spare: Vec<Workload<'_>> = Vec::with_capacity(DEPTH);
    let mut walls = Vec::with_capacity(runs);
    let (mut next, mut seen) = (0, 0);
    let t0 = Instant::now();
    while seen < runs {
        while next < runs && !pipe.is_full() {
            let work = if let Some(mut w) = spare.pop() {
                fill_x(next, w.get_mut::<f32>(X)?); // by index: the type checked
                w
            } else {
                let mut x = vec![0f32; COLS];
                fill_x(next, &mut x);
                let mut w = Workload::new(code);
                w.buffer(&wbuf, Dir::In)
                    .buffer(&bbuf, Dir::In)
                    .owned(x, Dir::In)
                    .owned(vec![0f32; ROWS], Dir::Out)
                    .scalar(ROWS as u64)
                    .scalar(COLS as u64);
                w
            };
            pipe.submit(work, next)
                .map_err(runclaim::Error::without_value)?;
            next += 1;
        }
        let done = pipe
            .complete()
            .map_err(runclaim::Error::without_value)?
            .ok_or("a run is pending")?;
        if done.tag != seen {
            return Err(format!("run {} came back as run {seen}", done.tag).into());
        }
        let work = done.work.ok_or("a workload's run")?;
        let x = work.get::<f32>(X)?;
        let y = work.get::<f32>(Y)?;
        check(&format!("depth {DEPTH}"), seen, y, &reference(&w, &b, x))?;
        walls.push(done.wall);
        spare.push(work);
        seen += 1;
    }
    Ok(Outcome {
        walls,
        wall: t0.elapsed(),
    })
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

fn main() -> Result<(), Box<dyn Error>> {
    let runs = flags::runs_flag("07_decode_step", 400)?;
    println!(
        "decode step y = W·x + b: W {ROWS}×{COLS} and b f32 device-resident, x and y per-run host \
         tensors; a2a3 kernel ABI; Rust kernel {KERNEL:?}; real-time simulator"
    );
    let s = serial(runs)?;
    let serial_report = Report::from_walls(&s.walls)?;
    println!(
        "{:<8} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10} {:>9}",
        "mode", "runs", "wall ms", "gap mean", "p50", "p99", "max", "runs/s", "busy"
    );
    println!(
        "{:<8} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>10} {:>9}",
        "", "", "", "µs", "µs", "µs", "µs", "(device)", ""
    );
    println!("{}", row("serial", &serial_report, s.wall));
    for (depth, outcome) in [
        (2, queued::<2>(runs)?),
        (3, queued::<3>(runs)?),
        (4, queued::<4>(runs)?),
    ] {
        let q = Report::from_walls(&outcome.walls)?;
        println!("{}", row(&format!("depth {depth}"), &q, outcome.wall));
        println!(
            "  depth {depth}: queued throughput vs device-bound limit: {:.1}%",
            q.of_device_bound() * 100.0
        );
    }
    println!(
        "outputs checked: {runs} serial + {} queued runs, every y bit-identical to the host's",
        3 * runs
    );
    Ok(())
}
