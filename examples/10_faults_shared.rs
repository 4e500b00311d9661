//! Faults on a shared device: `--tasks` tokio tasks (default 32) share one
//! real-time simulated NPU through a [`SharedDevice`], and one run in
//! `--every` (default 10) faults. The device recovers by itself; each task
//! resubmits what failed because of another run's fault
//! ([`Error::collateral`](runclaim::Error::collateral)) and gives up only on
//! its own.
//!
//! Four kinds of fault, in turn:
//! - **a panicking Rust kernel** (the run's own code: an AICore exception);
//! - **a hung kernel**, whose compute time is past the device watchdog
//!   (the device faults it);
//! - **an injected AICore fault** (the simulator's fault plan: the next
//!   AICore kernel to start faults, whoever's it is);
//! - **an overrun**: the next completion event recorded comes 1.5 fence
//!   timeouts late, so the host's fence gives up on it at the head of the
//!   queue.
//!
//! What it checks, and prints:
//! - every run that does not fault completes with the right value
//!   (against a host model), perhaps after resubmissions;
//! - every run of faulting code (a panic, a hang) fails exactly once, with
//!   an error naming itself; runs the fault plan hit fail naming themselves,
//!   never more of them than faults were injected;
//! - no wait hangs: each submission and each ticket is watched by a
//!   10 s timeout (the "hangs" count must be 0);
//! - recovery times (median and max, on the driver's clock, from
//!   `Health::last_recovery`, sampled) and goodput: right results per
//!   second against the same runs with no fault.
//!
//! The process exits non-zero when a check fails.
//!
//! Run: `cargo run --release --example 10_faults_shared [-- --tasks N --runs N --every N --depth 2|4]`

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use runclaim::contract::{Depth, SupportedDepth};
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, LatencyModel, SimConfig, SimDriver, SimKernel};
use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};

#[path = "support/quantiles.rs"]
mod quantiles;
use quantiles::{quantile, us};

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

const KERNEL: Duration = Duration::from_micros(100);
const WATCHDOG: Duration = Duration::from_millis(5);
const FENCE_TIMEOUT: Duration = Duration::from_millis(10);
/// Longer than any bounded wait here can take: a wait past it is a hang.
const HANG: Duration = Duration::from_secs(10);

fn f(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(1)
}

/// What run `k` of task `t` does: `None`, or one of the four faults.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Plan {
    Panic,
    Hang,
    Aicore,
    Overrun,
}

fn plan(t: u32, k: u32, every: u32) -> Option<Plan> {
    if every == 0 {
        return None;
    }
    let n = t.wrapping_mul(7919).wrapping_add(k.wrapping_mul(104_729));
    n.is_multiple_of(every)
        .then(|| [Plan::Panic, Plan::Hang, Plan::Aicore, Plan::Overrun][(n / every % 4) as usize])
}

/// What one task saw.
#[derive(Default, Debug, Clone, Copy)]
struct Tally {
    right: u64,
    wrong: u64,
    /// Faulting code (a panic, a hang) that failed naming itself.
    own_marked: u64,
    /// Faulting code that succeeded, or failed more than once: a defect.
    marked_wrong: u64,
    /// Runs of plain code that failed naming themselves (hit by an
    /// injected fault).
    own_injected: u64,
    /// An own failure whose error did not name the run.
    misnamed: u64,
    injected: u64,
    resubmitted: u64,
    hangs: u64,
    refused: u64,
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.right += o.right;
        self.wrong += o.wrong;
        self.own_marked += o.own_marked;
        self.marked_wrong += o.marked_wrong;
        self.own_injected += o.own_injected;
        self.misnamed += o.misnamed;
        self.injected += o.injected;
        self.resubmitted += o.resubmitted;
        self.hangs += o.hangs;
        self.refused += o.refused;
    }
}

struct Job<const DEPTH: usize> {
    shared: SharedDevice<SimDriver, DEPTH>,
    sim: SimDriver,
    id: u32,
    runs: u32,
    every: u32,
}

/// One task: its runs, each resubmitted while its failure is another
/// run's fault.
async fn task<const DEPTH: usize>(job: Job<DEPTH>) -> Res<Tally>
where
    Depth<DEPTH>: SupportedDepth,
{
    let (f_code, panic_code, hang_code) = (
        job.shared.code("f")?,
        job.shared.code("panic")?,
        job.shared.code("hang")?,
    );
    let mut tally = Tally::default();
    for k in 0..job.runs {
        let x = (job.id << 16) | k;
        let planned = plan(job.id, k, job.every);
        let code = match planned {
            Some(Plan::Panic) => panic_code,
            Some(Plan::Hang) => hang_code,
            _ => f_code,
        };
        match planned {
            Some(Plan::Aicore) => job.sim.inject(Fault::KernelFault {
                kernel: Kernel::Aicore,
                nth: 1,
            }),
            Some(Plan::Overrun) => job.sim.inject(Fault::DelayEvent {
                nth: 1,
                delay: FENCE_TIMEOUT + FENCE_TIMEOUT / 2,
            }),
            _ => {}
        }
        if matches!(planned, Some(Plan::Aicore | Plan::Overrun)) {
            tally.injected += 1;
        }
        let marked = matches!(planned, Some(Plan::Panic | Plan::Hang));
        loop {
            let input = [x];
            let submitted = tokio::time::timeout(
                HANG,
                job.shared.submit(RunSpec::new(code, Input::Host(&input))),
            )
            .await;
            let ticket = match submitted {
                Err(_) => {
                    tally.hangs += 1;
                    break;
                }
                Ok(Err(e)) if e.collateral().is_some() => {
                    tally.resubmitted += 1;
                    continue;
                }
                Ok(Err(e)) => {
                    eprintln!("task {} run {k}: refused: {e}", job.id);
                    tally.refused += 1;
                    break;
                }
                Ok(Ok(ticket)) => ticket,
            };
            let run = ticket.run();
            match tokio::time::timeout(HANG, ticket).await {
                Err(_) => {
                    tally.hangs += 1;
                    break;
                }
                Ok(Ok(done)) => {
                    if marked {
                        tally.marked_wrong += 1;
                    } else if done.values == [f(x)] {
                        tally.right += 1;
                    } else {
                        tally.wrong += 1;
                    }
                    break;
                }
                Ok(Err(e)) if e.collateral().is_some() => {
                    tally.resubmitted += 1;
                }
                Ok(Err(e)) => {
                    if e.run() != Some(run) {
                        tally.misnamed += 1;
                    }
                    if marked {
                        tally.own_marked += 1;
                    } else {
                        tally.own_injected += 1;
                    }
                    break;
                }
            }
        }
    }
    Ok(tally)
}

fn callables(sim: &SimDriver) -> [Callable; 3] {
    let panic = sim.register_kernel(SimKernel::new(|_| panic!("a kernel's own bug")));
    let hang = sim.register_kernel(SimKernel::new(|_| Ok(())).time(|_| WATCHDOG * 2));
    [
        Callable::program("f", &Program::new().mul(3).add(1)),
        Callable::new("panic", panic),
        Callable::new("hang", hang),
    ]
}

/// The storm at depth `DEPTH`: the tallies, the wall time, and the
/// recoveries sampled (their times on the driver's clock).
async fn storm<const DEPTH: usize>(
    tasks: u32,
    runs: u32,
    every: u32,
) -> Res<(Tally, Duration, Vec<Duration>, u64)>
where
    Depth<DEPTH>: SupportedDepth,
{
    let sim = SimDriver::real_time(
        SimConfig::default()
            .watchdog(WATCHDOG)
            .latency(LatencyModel::default().kernel(KERNEL)),
    );
    let shared = SharedDevice::<_, DEPTH>::open(
        sim.clone(),
        DeviceConfig::default().fence_timeout(FENCE_TIMEOUT),
    )?;
    shared.publish(&callables(&sim))?;
    // Samples every recovery the handle reports (two between samples
    // are one sample: the count says how many there were).
    let stop = Arc::new(AtomicBool::new(false));
    let monitor = {
        let (shared, stop) = (shared.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let (mut seen, mut times) = (0, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let h = shared.health();
                if h.recoveries > seen {
                    seen = h.recoveries;
                    times.extend(h.last_recovery);
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            times
        })
    };
    let t0 = Instant::now();
    let jobs: Vec<_> = (0..tasks)
        .map(|id| {
            tokio::spawn(task(Job {
                shared: shared.clone(),
                sim: sim.clone(),
                id,
                runs,
                every,
            }))
        })
        .collect();
    let mut tally = Tally::default();
    for j in jobs {
        tally.add(j.await??);
    }
    let wall = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut times = monitor.await?;
    times.sort();
    let h = shared.health();
    if let Some(lost) = h.lost {
        return Err(format!("the device closed itself: {lost}").into());
    }
    shared.close_async().await?;
    Ok((tally, wall, times, h.recoveries))
}

async fn report<const DEPTH: usize>(tasks: u32, runs: u32, every: u32) -> Res<bool>
where
    Depth<DEPTH>: SupportedDepth,
{
    let (clean, clean_wall, _, _) = storm::<DEPTH>(tasks, runs, 0).await?;
    let (t, wall, times, recoveries) = storm::<DEPTH>(tasks, runs, every).await?;
    let total = u64::from(tasks) * u64::from(runs);
    let planned_marked = (0..tasks)
        .flat_map(|id| (0..runs).map(move |k| plan(id, k, every)))
        .filter(|p| matches!(p, Some(Plan::Panic | Plan::Hang)))
        .count() as u64;
    let goodput = |right: u64, wall: Duration| right as f64 / wall.as_secs_f64();
    let ratio = goodput(t.right, wall) / goodput(clean.right, clean_wall);
    println!(
        "depth {DEPTH}, {tasks} tasks x {runs} runs, 1 fault per {every}: {} right, {} wrong, \
         {} faulting-code runs failed naming themselves (of {planned_marked}), \
         {} runs hit by {} injected faults, {} resubmissions, {} hangs",
        t.right, t.wrong, t.own_marked, t.own_injected, t.injected, t.resubmitted, t.hangs
    );
    println!(
        "  recoveries {recoveries} (sampled {}): median {:.0} us, max {:.0} us; \
         goodput {:.0} runs/s vs {:.0} without faults ({:.1} %)",
        times.len(),
        us(quantile(&times, 0.5)),
        us(quantile(&times, 1.0)),
        goodput(t.right, wall),
        goodput(clean.right, clean_wall),
        100.0 * ratio,
    );
    let ok = t.wrong == 0
        && t.hangs == 0
        && t.misnamed == 0
        && t.marked_wrong == 0
        && t.refused == 0
        && t.own_marked == planned_marked
        && t.own_injected <= t.injected
        && t.right + t.own_injected + t.own_marked == total
        && clean.right == total;
    if !ok {
        eprintln!("  FAILED: {t:?}; clean run: {clean:?}");
    }
    Ok(ok)
}

fn args() -> Res<(u32, u32, u32, usize)> {
    let (mut tasks, mut runs, mut every, mut depth) = (32, 30, 10, 4);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut n = |what: &str| {
            args.next()
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("{what} takes a count"))
        };
        match a.as_str() {
            "--tasks" => tasks = n("--tasks")?,
            "--runs" => runs = n("--runs")?,
            "--every" => every = n("--every")?,
            "--depth" => depth = n("--depth")? as usize,
            other => {
                return Err(format!(
                    "unknown argument {other:?} (usage: [--tasks N --runs N --every N --depth 2|4])"
                )
                .into());
            }
        }
    }
    Ok((tasks, runs, every, depth))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Res<()> {
    let (tasks, runs, every, depth) = args()?;
    // The panicking kernel's panics are the point: not printed.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&"a kernel's own bug") {
            default_hook(info);
        }
    }));
    let ok = match depth {
        2 => report::<2>(tasks, runs, every).await?,
        4 => report::<4>(tasks, runs, every).await?,
        d => return Err(format!("--depth {d}: this example runs depth 2 or 4").into()),
    };
    if !ok {
        return Err("a check failed".into());
    }
    Ok(())
}
