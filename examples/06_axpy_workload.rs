//! A real workload through a pipeline: `y = a·x + y` over f32, a Rust
//! kernel on the real-time simulator, every output checked bit for bit.
//!
//! - `y` is **device-resident**: one `DeviceBuffer<f32>` that every queued
//!   run binds ([`Dir::InOut`]) — run k reads run k−1's `y` and writes the
//!   new one in place, in stream order, with no host step between runs.
//! - `a` is an f32 scalar.
//! - `x_k` is a per-run host input and `out_k` a per-run host output (both
//!   owned by the workload): the kernel copies the new `y` into `out_k`, so
//!   the host sees every intermediate `y` without touching the buffer.
//! - Workloads are reused: each one comes back from `complete` with
//!   its tensors, is refilled (`work[x]`, by the typed id `add_owned`
//!   handed back, which the run's tag carries) and submitted again — at
//!   most DEPTH workloads ever exist.
//!
//! The host reference computes `y_k = a * x_k + y_{k-1}` elementwise in
//! f32 with the same expression as the kernel (`y += a * x`: one multiply,
//! one add, each rounded; Rust never fuses them into an FMA), so the device's values must match
//! it **bit for bit**. Any difference is an error (exit status 1).
//!
//! It runs at depth 2, 3 and 4 and prints, per depth, the device's idle gap
//! between runs and the throughput against the device-bound limit
//! ([`runclaim::measure::Report`]). The numbers are the simulator's: a
//! loaded host shows up as device idle time.
//!
//! Run: `cargo run --example 06_axpy_workload` (`-- --runs N` for another
//! count; the default, 300 runs per depth, takes well under a second).

use std::error::Error;
use std::time::{Duration, Instant};

use runclaim::contract::{Depth, SupportedDepth};
use runclaim::driver::abi::{Dir, WallRecord};
use runclaim::measure::Report;
use runclaim::sim::{KernelCode, SimConfig, SimDriver, SimKernel};
use runclaim::{Callable, Device, DeviceConfig, OwnedId, Pipeline, Workload};

#[path = "support/flags.rs"]
mod flags;

/// Elements of `x`, `y` and `out`.
const N: usize = 256;
/// The scalar.
const A: f32 = 0.75;
/// The kernel's compute time on the simulated device.
const KERNEL: Duration = Duration::from_micros(200);

/// Argument order of the kernel: tensors `y`, `x`, `out`, then scalar `a`.
const Y: usize = 0;
const X: usize = 1;
const OUT: usize = 2;

/// A workload's host tensors, as `add_owned` handed them back: each run's
/// tag carries them back to the host with the workload.
#[derive(Clone, Copy)]
struct Ids {
    x: OwnedId<f32>,
    out: OwnedId<f32>,
}

/// `y = a·x + y`, then `out = y`, over this worker's share of the elements.
fn axpy() -> SimKernel {
    SimKernel::new(|k| {
        let a: f32 = k.scalar_as(0).unwrap_or(0.0);
        let n = k.tensor(Y).map_or(0, |t| t.elements());
        let share = k.share(n);
        let len = usize::try_from(share.end - share.start).unwrap_or(0);
        let (mut x, mut y) = (vec![0f32; len], vec![0f32; len]);
        k.read_tensor(X, share.start, &mut x)?;
        k.read_tensor(Y, share.start, &mut y)?;
        for (y, x) in y.iter_mut().zip(&x) {
            *y += a * x;
        }
        k.write_tensor(Y, share.start, &y)?;
        k.write_tensor(OUT, share.start, &y)
    })
    .time(|_| KERNEL)
}

/// Run k's input: varied, deterministic, exactly representable.
fn fill_x(k: usize, x: &mut [f32]) {
    for (i, v) in x.iter_mut().enumerate() {
        let r = (k * 31 + i * 7) % 97;
        *v = r as f32 / 64.0 - 0.75;
    }
}

/// The starting `y`.
fn y0() -> Vec<f32> {
    (0..N).map(|i| i as f32 * 0.125 - 3.0).collect()
}

/// `y = a * x + y`, as the kernel computes it.
fn reference_step(y: &mut [f32], x: &[f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += A * x; // the kernel's expression, the same two roundings
    }
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits())
}

struct Outcome {
    walls: Vec<WallRecord>,
    workloads: usize,
    wall: Duration,
}

fn run<const DEPTH: usize>(runs: usize) -> Result<Outcome, Box<dyn Error>>
where
    Depth<DEPTH>: SupportedDepth,
{
    let sim = SimDriver::real_time(SimConfig::default());
    let kernel: KernelCode = sim.register_kernel(axpy());
    let mut dev = Device::<_, DEPTH>::open(sim, DeviceConfig::default())?;
    let mut y = dev.alloc_buffer::<f32>(N)?;
    dev.write_buffer(&mut y, 0, &y0())?;

    // The host's copy of the chain of `y`s.
    let mut want = y0();
    let mut walls = Vec::with_capacity(runs);
    let mut workloads = 0;
    let t0 = Instant::now();
    {
        let runner = dev.publish(&[Callable::new("axpy", kernel)])?;
        let code = runner.code("axpy")?;
        let mut pipe = Pipeline::<_, DEPTH, (usize, Ids)>::new(&runner)?;
        let mut spare: Vec<(Workload<'_>, Ids)> = Vec::with_capacity(DEPTH);
        let (mut next, mut seen) = (0, 0);
        while seen < runs {
            while next < runs && !pipe.is_full() {
                let (work, ids) = if let Some((mut w, ids)) = spare.pop() {
                    // A workload back from `complete`: refill x, resubmit.
                    fill_x(next, &mut w[ids.x]);
                    (w, ids)
                } else {
                    workloads += 1;
                    let mut x = vec![0f32; N];
                    fill_x(next, &mut x);
                    let mut w = Workload::new(code);
                    w.buffer(&y, Dir::InOut);
                    let ids = Ids {
                        x: w.add_owned(x, Dir::In),
                        out: w.add_owned(vec![0f32; N], Dir::Out),
                    };
                    w.scalar(A);
                    debug_assert_eq!((ids.x.id().index(), ids.out.id().index()), (X, OUT));
                    (w, ids)
                };
                pipe.submit(work, (next, ids))
                    .map_err(runclaim::Error::without_value)?;
                next += 1;
            }
            let done = pipe
                .complete()
                .map_err(runclaim::Error::without_value)?
                .ok_or("a run is pending")?;
            let (tag, ids) = done.tag;
            if tag != seen {
                return Err(format!("run {tag} came back as run {seen}").into());
            }
            let work = done.work.ok_or("a workload's run")?;
            reference_step(&mut want, &work[ids.x]);
            let got = &work[ids.out];
            if !same_bits(got, &want) {
                let i = (0..N).find(|&i| got[i].to_bits() != want[i].to_bits());
                let i = i.unwrap_or(0);
                return Err(format!(
                    "depth {DEPTH}, run {seen}: out[{i}] = {} but the host computed {}",
                    got[i], want[i]
                )
                .into());
            }
            walls.push(done.wall);
            spare.push((work, ids));
            seen += 1;
        }
        // The pipeline (and every workload, and their borrow of `y`) ends
        // here: the host may read the buffer again.
    }
    let wall = t0.elapsed();
    let mut last = vec![0f32; N];
    dev.read_buffer(&mut y, 0, &mut last)?;
    if !same_bits(&last, &want) {
        return Err(format!("depth {DEPTH}: the device's final y differs from the host's").into());
    }
    Ok(Outcome {
        walls,
        workloads,
        wall,
    })
}

fn main() -> Result<(), Box<dyn Error>> {
    let runs = flags::runs_flag("06_axpy_workload", 300)?;
    println!(
        "y = a·x + y over {N} f32, a = {A}, y device-resident; x, out host tensors; \
         kernel {KERNEL:?}, real-time simulator"
    );
    for (depth, outcome) in [
        (2, run::<2>(runs)?),
        (3, run::<3>(runs)?),
        (4, run::<4>(runs)?),
    ] {
        let report = Report::from_walls(&outcome.walls)?;
        println!(
            "depth {depth}: {} runs, every out_k and the final y bit-identical to the host's \
             ({} workloads reused, {:.0} ms)",
            outcome.walls.len(),
            outcome.workloads,
            outcome.wall.as_secs_f64() * 1e3
        );
        println!("  device: {report}");
    }
    Ok(())
}
