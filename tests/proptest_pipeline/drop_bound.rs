//! The pipeline's drop bound: the one documented total bound, swept over
//! where in a full queue the runs that never complete are (depths 2 and 4,
//! both kernel ABIs), and its negative control — the same queue waited for
//! one run at a time, each with a fresh budget, overruns it.

use runclaim::contract::{Depth, SupportedDepth};
use runclaim::sim::{Fault, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};

use super::common::abi::Abi;
use super::common::checks;
use super::common::model::{MAX_ELEMS, program, sim_config};

/// The documented bound on dropping (and on draining) a pipeline, in
/// device steps: `(runs in flight + 1) × fence_timeout`, with `in_flight`
/// read just before. No slack for the drop: on the stepped simulator a step is 1 µs
/// (`sim_config`), every timeout the drop passes to the driver is a whole
/// number of µs (the fence timeout is, and so is every remainder of it), a
/// timed wait takes exactly `timeout / step` steps, and the drop asks for
/// no more than the bound altogether.
pub(super) fn total_bound(in_flight: usize, fence_steps: u64) -> u64 {
    (in_flight as u64 + 1) * fence_steps
}

/// Which runs of a full pipeline never complete.
#[derive(Debug, Clone, Copy)]
enum Never {
    /// Run `p`'s fence event: only run `p`.
    Fence,
    /// Run `p`'s AICore event: the AICPU stream waits on it, so run `p`
    /// and every run behind it.
    Stream,
    /// The fence events of run `p` and of every run behind it: each one
    /// is a run to wait for in its own right.
    Tail,
}

impl Never {
    /// The faults, for a pipeline whose runs record two events each (its
    /// AICore event, then its fence), counted from now.
    fn inject(self, sim: &SimDriver, p: usize, depth: usize) {
        let nth = |run: usize, event: u64| Fault::EventNeverCompletes {
            nth: 2 * run as u64 + event,
        };
        match self {
            Never::Fence => sim.inject(nth(p, 2)),
            Never::Stream => sim.inject(nth(p, 1)),
            Never::Tail => (p..depth).for_each(|k| sim.inject(nth(k, 2))),
        }
    }

    /// How many of the runs never complete.
    fn count(self, p: usize, depth: usize) -> usize {
        match self {
            Never::Fence => 1,
            Never::Stream | Never::Tail => depth - p,
        }
    }
}

/// A stepped simulator speaking `abi` and a depth-`D` device on it, in the
/// properties' configuration, and the fence timeout in steps.
fn drop_device<const D: usize>(abi: Abi) -> (SimDriver, Device<SimDriver, D>, u64)
where
    Depth<D>: SupportedDepth,
{
    let sim = abi.stepped(sim_config(7));
    let cfg = abi.with(DeviceConfig::default().max_elements(MAX_ELEMS));
    let dev = Device::<_, D>::open(sim.clone(), cfg).unwrap();
    let fence_steps = u64::try_from(dev.fence_timeout().as_micros()).unwrap();
    (sim, dev, fence_steps)
}

/// A full depth-`D` pipeline whose runs `never` describes (from position
/// `p`) never complete, dropped: the steps the drop took, the bound, and
/// the runner's health after it.
fn drop_full_pipeline<const D: usize>(abi: Abi, p: usize, never: Never) -> (u64, u64)
where
    Depth<D>: SupportedDepth,
{
    let (sim, mut dev, fence_steps) = drop_device::<D>(abi);
    let runner = dev
        .publish(&[Callable::program("p0", &program(0))])
        .unwrap();
    let code = runner.code("p0").unwrap();
    let mut pipe = Pipeline::<_, D, usize>::new(&runner).unwrap();
    never.inject(&sim, p, D);
    for k in 0..D {
        pipe.submit(RunSpec::new(code, Input::Host(&[1])), k)
            .unwrap();
    }
    let in_flight = runner.health().in_flight;
    assert_eq!(in_flight, D, "a full pipeline: every run launched");
    let before = sim.stats().steps;
    drop(pipe);
    let took = sim.stats().steps - before;
    let h = runner.health();
    let what = format!("{}: depth {D}, {never:?} from run {p}", abi.name());
    assert_eq!(
        h.quarantined.len(),
        never.count(p, D),
        "{what}: exactly the runs never completed are quarantined: {h:?}"
    );
    assert!(h.poisoned.is_some(), "{what}: an overrun poisons: {h:?}");
    (took, total_bound(in_flight, fence_steps))
}

/// The pipeline's drop keeps its one documented bound wherever in the
/// queue the runs that never complete are — one of them, a stalled stream
/// from there on, or every run from there on — at depths 2 and 4, under
/// both kernel ABIs.
#[test]
fn dropping_a_pipeline_keeps_its_bound_wherever_runs_never_complete() {
    fn at<const D: usize>(abi: Abi)
    where
        Depth<D>: SupportedDepth,
    {
        for p in 0..D {
            for never in [Never::Fence, Never::Stream, Never::Tail] {
                let what = format!("{}: depth {D}, {never:?} from run {p}", abi.name());
                let (took, bound) = drop_full_pipeline::<D>(abi, p, never);
                println!("{what}: {took} steps, bound {bound}");
                checks::bounded(&what, took, bound).unwrap();
                if matches!(never, Never::Tail) && p == 0 {
                    // Nothing completes: the drop spends its whole budget,
                    // so the bound is tight, not merely loose enough.
                    assert_eq!(took, bound, "{what}: nothing completes");
                }
            }
        }
    }
    for abi in Abi::ALL {
        at::<2>(abi);
        at::<4>(abi);
    }
}

/// Negative control for the bound: the same full queue, every run never
/// completing, held as typed runs and waited for one by one, each with its
/// own fresh queue budget (`fence_for((ahead + 1) × fence_timeout)`) — what
/// the pipeline's lanes did before its drop had one total bound — overruns
/// the bound, and the check says so. (A plain drop of typed runs no longer
/// does: behind a run that cannot be proven complete, a default wait is
/// one more budget; `tests/drop_bounds.rs`.)
#[test]
fn waiting_for_runs_one_by_one_with_fresh_budgets_breaks_the_pipeline_bound() {
    let (sim, mut dev, fence_steps) = drop_device::<4>(Abi::Runclaim);
    let fence_timeout = dev.fence_timeout();
    let runner = dev
        .publish(&[Callable::program("p0", &program(0))])
        .unwrap();
    let spec = RunSpec::new(runner.code("p0").unwrap(), Input::Host(&[1]));
    Never::Tail.inject(&sim, 0, 4);
    macro_rules! launch {
        ($i:literal) => {
            runner
                .prepare(runner.take_slot::<$i>().unwrap(), spec)
                .unwrap()
                .launch()
                .unwrap()
        };
    }
    let runs = (launch!(0), launch!(1), launch!(2), launch!(3));
    let in_flight = runner.health().in_flight;
    assert_eq!(in_flight, 4);
    let before = sim.stats().steps;
    let budget = |ahead: u32| fence_timeout * (ahead + 1);
    let e0 = runs.0.fence_for(budget(0)).unwrap_err();
    let e1 = runs.1.fence_for(budget(1)).unwrap_err();
    let e2 = runs.2.fence_for(budget(2)).unwrap_err();
    let e3 = runs.3.fence_for(budget(3)).unwrap_err();
    let took = sim.stats().steps - before;
    drop((e0, e1, e2, e3));
    let bound = total_bound(in_flight, fence_steps);
    println!("four typed runs waited for one by one: {took} steps, bound {bound}");
    let err = checks::bounded("waiting for the runs", took, bound).unwrap_err();
    assert!(err.contains("waiting for the runs took"), "{err}");
}
