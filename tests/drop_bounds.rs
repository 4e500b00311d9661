//! Drops have totals users can rely on, with never-completing runs at
//! every position of the queue (stepped simulator: one device step is one
//! virtual microsecond, so steps measure the driver's clock exactly).
//!
//! - Typed runs dropped one after another: each drop behind a run that
//!   could not be proven complete waits one `fence_timeout` more, not a
//!   growing queue budget — so dropping `n` runs takes at most
//!   `(n + 1) × fence_timeout` in all (found by a 10⁶-case soak of
//!   `proptest_contract`: 25,500 steps against a 21,000 bound).
//! - A device dropped with runs in flight: `(in flight + 1) × fence_timeout`.
//!
//! Both under both built-in kernel ABIs (runclaim's layout and the a2a3
//! layout): the bounds are the contract's, not the layout's.

mod common;

use std::time::Duration;

use common::abi::{Abi, each};
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, SimConfig, SimDriver};
use runclaim::{Callable, Device, Input, RunSpec};

/// A run of `spec` launched in slot `$i` of `runner`.
macro_rules! launched {
    ($runner:ident, $spec:ident, $i:literal) => {
        $runner
            .prepare($runner.take_slot::<$i>().unwrap(), $spec)
            .unwrap()
            .launch()
            .unwrap()
    };
}

fn sim(abi: Abi) -> SimDriver {
    abi.stepped(SimConfig::default().watchdog(Duration::from_millis(2)))
}

fn steps(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap()
}

/// A depth-3 device on the stepped simulator, both speaking `abi`, and its
/// fence timeout in device steps.
fn device(abi: Abi) -> (SimDriver, Device<SimDriver, 3>, u64) {
    let sim = sim(abi);
    let dev = Device::<_, 3>::open(sim.clone(), abi.config()).unwrap();
    let t = steps(dev.fence_timeout());
    (sim, dev, t)
}

fn inc() -> [Callable; 1] {
    [Callable::program("inc", &Program::new().add(1))]
}

/// The fences of the runs at `lost` (1-based launch positions) never
/// complete: each launch records its AICore event, then its fence.
fn lose_fences(sim: &SimDriver, lost: &[u64]) {
    for &k in lost {
        sim.inject(Fault::EventNeverCompletes { nth: 2 * k });
    }
}

/// Three runs launched; the fences at `lost` never complete; the runs are
/// dropped in `order` (slot indices). Returns (steps the drops took, the
/// fence timeout in steps).
fn drop_three(abi: Abi, lost: &[u64], order: [usize; 3]) -> (u64, u64) {
    let (sim, mut dev, t) = device(abi);
    let runner = dev.publish(&inc()).unwrap();
    let code = runner.code("inc").unwrap();
    lose_fences(&sim, lost);
    let spec = RunSpec::new(code, Input::Host(&[1]));
    let (mut r0, mut r1, mut r2) = (
        Some(launched!(runner, spec, 0)),
        Some(launched!(runner, spec, 1)),
        Some(launched!(runner, spec, 2)),
    );
    let before = sim.stats().steps;
    for slot in order {
        match slot {
            0 => drop(r0.take()),
            1 => drop(r1.take()),
            _ => drop(r2.take()),
        }
    }
    let took = sim.stats().steps - before;
    // Every slot whose run was not proven complete is quarantined, never
    // recycled; a drain releases them.
    let h = runner.health();
    assert_eq!(h.in_flight, h.quarantined.len(), "{h:?}");
    (took, t)
}

#[test]
fn dropping_runs_one_by_one_behind_lost_fences_stays_within_one_total_bound() {
    each(|abi| {
        let positions: [&[u64]; 7] = [&[1], &[2], &[3], &[1, 2], &[1, 3], &[2, 3], &[1, 2, 3]];
        let orders = [[0, 1, 2], [2, 1, 0], [1, 0, 2]];
        for lost in positions {
            for order in orders {
                let (took, t) = drop_three(abi, lost, order);
                // Documented: (n + 1) × fence_timeout for n = 3 runs, plus one
                // fence slice (fence_timeout / 8) of dating slack per drop.
                let bound = 4 * t + 3 * (t / 8);
                assert!(
                    took <= bound,
                    "lost fences at {lost:?}, dropped in slot order {order:?}: {took} steps, bound {bound}"
                );
            }
        }
    });
}

#[test]
fn dropping_a_device_with_lost_fences_waits_one_total_bound() {
    each(|abi| {
        let (sim, mut dev, t) = device(abi);
        {
            let runner = dev.publish(&inc()).unwrap();
            let code = runner.code("inc").unwrap();
            lose_fences(&sim, &[1, 2, 3]);
            let spec = RunSpec::new(code, Input::Host(&[1]));
            std::mem::forget(launched!(runner, spec, 0));
            std::mem::forget(launched!(runner, spec, 1));
        }
        let before = sim.stats().steps;
        drop(dev);
        let took = sim.stats().steps - before;
        assert!(took <= 3 * t, "{took} steps, bound {}", 3 * t);
    });
}
