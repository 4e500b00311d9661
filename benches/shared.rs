//! Host cost of a shared device ([`SharedDevice`]) per run, against a
//! typed [`Pipeline`] on the same driver (`InstantDriver`, which completes
//! everything at once): a full queue's steady state at depth 2, `RunSpec`
//! runs of 16 elements.
//!
//! - **pipeline**: the oldest run completed (fenced, finalized), the next
//!   submitted into its slot — what one task owning its device does;
//! - **pipeline, awaited**: the same with `complete_async`, polled by
//!   `pollster`;
//! - **shared, blocking**: `submit_blocking` then `Ticket::wait` — one
//!   run at a time, from one thread, through the handle's lock, queue and
//!   tickets;
//! - **shared, awaited**: the same, `submit(..).await` then `ticket.await`,
//!   polled by `pollster`.
//!
//! The differences are what the handle adds per run over the typed
//! pipeline (its lock, the arrival queue, the ticket's delivery and the
//! result's own `Vec`).
//!
//! Run: `cargo bench --bench shared`. For an instruction count, the
//! binary runs one case alone when `RUNCLAIM_BENCH_SHARED` names it
//! (`pipeline`, `pipeline-awaited`, `blocking` or `awaited`; `RUNCLAIM_BENCH_ITERS` runs,
//! default 10,000): run it under callgrind with two counts and divide the
//! difference, as for the contract bench.

use std::hint::black_box;
use std::time::Instant;

use runclaim::driver::abi::Program;
use runclaim::driver::instant::InstantDriver;
use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec, SharedDevice};

const ELEMS: usize = 16;
const BATCH: u32 = 20_000;
const BATCHES: usize = 7;

fn callables() -> [Callable; 1] {
    [Callable::program("f", &Program::new().add(1))]
}

fn config() -> DeviceConfig {
    DeviceConfig::default().max_elements(ELEMS)
}

/// The four ways to run, each one run per call of `step`.
enum Bench {
    Pipeline,
    PipelineAwaited,
    Blocking,
    Awaited,
}

impl Bench {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "pipeline" => Some(Bench::Pipeline),
            "pipeline-awaited" => Some(Bench::PipelineAwaited),
            "blocking" => Some(Bench::Blocking),
            "awaited" => Some(Bench::Awaited),
            _ => None,
        }
    }

    /// `iters` runs (after 100 to warm up), or, with `timed`, the median
    /// ns per run over `BATCHES` batches of `BATCH`.
    fn run(&self, iters: u64, timed: bool) -> f64 {
        let input = [7u32; ELEMS];
        if let Bench::Pipeline | Bench::PipelineAwaited = self {
            let awaited = matches!(self, Bench::PipelineAwaited);
            let mut device = Device::<_, 2>::open(InstantDriver::new(), config()).unwrap();
            let runner = device.publish(&callables()).unwrap();
            let spec = RunSpec::new(runner.code("f").unwrap(), Input::Host(&input));
            let mut pipe = Pipeline::<_, 2, u64>::new(&runner).unwrap();
            let mut tag = 0;
            return measure(iters, timed, &mut || {
                if pipe.is_full() {
                    let done = if awaited {
                        pollster::block_on(pipe.complete_async())
                    } else {
                        pipe.complete()
                    };
                    let done = done.unwrap().unwrap();
                    black_box((done.tag, done.wall, done.values));
                }
                pipe.submit(spec, tag).unwrap();
                tag += 1;
            });
        }
        let shared = SharedDevice::<_, 2>::open(InstantDriver::new(), config()).unwrap();
        shared.publish(&callables()).unwrap();
        let code = shared.code("f").unwrap();
        let awaited = matches!(self, Bench::Awaited);
        measure(iters, timed, &mut || {
            let spec = RunSpec::new(code, Input::Host(&input));
            let done = if awaited {
                pollster::block_on(async { shared.submit(spec).await.unwrap().await })
            } else {
                shared.submit_blocking(spec).unwrap().wait()
            };
            let done = done.unwrap();
            assert_eq!(done.values[0], 8);
            black_box(done);
        })
    }
}

/// `step` 100 times to warm up, then `iters` times (returning 0), or, with
/// `timed`, the median ns per step over `BATCHES` batches of `BATCH`.
fn measure(iters: u64, timed: bool, step: &mut dyn FnMut()) -> f64 {
    for _ in 0..100 {
        step();
    }
    if !timed {
        for _ in 0..iters {
            step();
        }
        return 0.0;
    }
    let mut per: Vec<f64> = (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..BATCH {
                step();
            }
            t.elapsed().as_nanos() as f64 / f64::from(BATCH)
        })
        .collect();
    per.sort_by(f64::total_cmp);
    per[BATCHES / 2]
}

fn main() {
    let iters: u64 = std::env::var("RUNCLAIM_BENCH_ITERS")
        .map_or(Ok(10_000), |s| s.parse())
        .expect("RUNCLAIM_BENCH_ITERS: a whole number");
    if let Ok(case) = std::env::var("RUNCLAIM_BENCH_SHARED") {
        let bench = Bench::parse(&case).unwrap_or_else(|| {
            panic!("RUNCLAIM_BENCH_SHARED: pipeline, pipeline-awaited, blocking or awaited, not {case:?}")
        });
        bench.run(iters, false);
        return;
    }
    // `cargo test --benches` runs this binary with `--bench` absent: one
    // short pass of each, as a test that they run.
    if !std::env::args().any(|a| a == "--bench") {
        for b in [
            Bench::Pipeline,
            Bench::PipelineAwaited,
            Bench::Blocking,
            Bench::Awaited,
        ] {
            b.run(100, false);
        }
        println!("shared bench: run with `cargo bench --bench shared` for numbers");
        return;
    }
    println!(
        "host cost per run, depth 2, {ELEMS}-element RunSpec runs, InstantDriver (median of {BATCHES} × {BATCH})"
    );
    let pipe = Bench::Pipeline.run(0, true);
    println!("  typed pipeline (complete + submit):          {pipe:>6.0} ns");
    let piped = Bench::PipelineAwaited.run(0, true);
    println!("  typed pipeline, awaited (complete_async):    {piped:>6.0} ns");
    for (name, b) in [
        ("shared, blocking (submit + wait):", Bench::Blocking),
        (
            "shared, awaited (submit.await + ticket.await):",
            Bench::Awaited,
        ),
    ] {
        let ns = b.run(0, true);
        println!(
            "  {name:<46} {ns:>6.0} ns   the handle adds {:>+5.0} ns",
            ns - pipe
        );
    }
}
