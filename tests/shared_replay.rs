//! A shared device replaying its runs: many threads' runs replayed in
//! whichever slot they land, shapes that change captured again, and a
//! publication racing replays — every result the code of its own
//! publication, each publication's graphs destroyed under its barrier.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use runclaim::contract::{ErrorKind, LostCause};
use runclaim::driver::Op;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};

fn callables(k: u32) -> [Callable; 1] {
    [Callable::program("f", &Program::new().add(k))]
}

fn shared(sim: &SimDriver) -> SharedDevice<SimDriver, 4> {
    let shared = SharedDevice::open(sim.clone(), DeviceConfig::default()).unwrap();
    shared.publish(&callables(1)).unwrap();
    shared.replay(true);
    shared
}

/// Eight threads, inputs of two lengths (a longer one is captured again):
/// every result right, and most runs replayed.
#[test]
fn threads_replaying_on_a_shared_device_get_their_own_results() {
    let sim = SimDriver::real_time(SimConfig::default());
    let shared = shared(&sim);
    let threads: Vec<_> = (0..8u32)
        .map(|t| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let code = shared.code("f").unwrap();
                for k in 0..16u32 {
                    let x: Vec<u32> = (0..=(k % 2)).map(|j| t * 1000 + k * 10 + j).collect();
                    let done = shared
                        .submit_blocking(RunSpec::new(code, Input::Host(&x)))
                        .unwrap()
                        .wait()
                        .unwrap();
                    let want: Vec<u32> = x.iter().map(|v| v + 1).collect();
                    assert_eq!(done.values, want, "thread {t} run {k}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let s = shared.stats();
    assert_eq!(s.finalized, 8 * 16);
    assert_eq!(s.replays, 8 * 16, "every run went through a graph");
    // A capture per slot per shape at the least; far fewer than the runs.
    assert!(
        s.captures >= 1 && s.captures < 64,
        "{} captures",
        s.captures
    );
    assert!(sim.stats().live_graphs <= 4, "one graph per slot at most");
}

/// Publications racing replays: each result is its own publication's code
/// (`x + k`), a stale code reference is refused as republished, and after
/// each publication no graph of the old code is left.
#[test]
fn a_publication_racing_replays_destroys_their_graphs_and_none_runs_stale_code() {
    let sim = SimDriver::real_time(SimConfig::default());
    let shared = shared(&sim);
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4u32)
        .map(|t| {
            let (shared, stop) = (shared.clone(), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut done_runs = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    // The code of the publication current now, and its
                    // `k` (publication `k` adds `k`): read around the
                    // lookup until no publication came between.
                    let (code, k) = loop {
                        let before = shared.stats().generations;
                        let Ok(code) = shared.code("f") else { continue };
                        if shared.stats().generations == before {
                            break (code, u32::try_from(before).unwrap());
                        }
                    };
                    let x = [t * 100_000 + done_runs];
                    let done = shared
                        .submit_blocking(RunSpec::new(code, Input::Host(&x)))
                        .map_err(|e| e.kind().clone())
                        .and_then(|t| t.wait().map_err(|e| e.kind().clone()));
                    match done {
                        Ok(done) => {
                            assert_eq!(done.values, [x[0] + k], "worker {t}, generation {k}");
                            done_runs += 1;
                        }
                        Err(e) => {
                            assert!(matches!(e, ErrorKind::CodeRepublished), "worker {t}: {e}");
                        }
                    }
                }
                done_runs
            })
        })
        .collect();
    for k in 2..=6 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        shared.publish(&callables(k)).unwrap();
        // Under the barrier every graph of the last code went; what lives
        // now was captured with this code, one per slot at most.
        assert!(sim.stats().live_graphs <= 4);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    let runs: u32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(runs > 0);
    // The last publication's code is what runs now, replayed.
    let code = shared.code("f").unwrap();
    let done = shared
        .submit_blocking(RunSpec::new(code, Input::Host(&[10])))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(done.values, [16]);
    let s = shared.stats();
    assert!(
        s.captures >= 5,
        "each publication captured again: {}",
        s.captures
    );
    assert_eq!(sim.stats().stale_executions, 0, "no graph ran old code");
}

/// A shared device replaying whose first replay faulted (its AICPU kernel).
fn faulted_replay() -> (SimDriver, SharedDevice<SimDriver, 4>) {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared(&sim);
    let code = shared.code("f").unwrap();
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicpu,
        nth: 1,
    });
    let e = shared
        .submit_blocking(RunSpec::new(code, Input::Host(&[1])))
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Fault(_)), "{e}");
    (sim, shared)
}

/// A replay faults and, in the recovery that follows, the driver refuses
/// its graph's destroy once: the drain asks once more, which destroys it
/// — one refused call does not lose the device.
#[test]
fn a_refused_graph_destroy_in_a_recovery_is_retried_and_the_device_stays() {
    let (sim, shared) = faulted_replay();
    let code = shared.code("f").unwrap();
    sim.inject(Fault::FailCall {
        op: Op::GraphDestroy,
        nth: 1,
    });
    let done = shared
        .submit_blocking(RunSpec::new(code, Input::Host(&[5])))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(done.values, [6]);
    let h = shared.health();
    assert_eq!((h.lost, h.recoveries), (None, 1), "{h:?}");
    assert_eq!(
        sim.stats().live_graphs,
        1,
        "the faulted graph went; one new"
    );
}

/// The same with the destroy refused twice: the drain keeps the slot out
/// of service (the graph may still replay on its own streams), so the
/// recovery closes the device as lost, naming the slot, and every later
/// submission is told so — no hang, no endless recovery.
#[test]
fn a_graph_that_cannot_be_destroyed_closes_the_device() {
    let (sim, shared) = faulted_replay();
    let code = shared.code("f").unwrap();
    for nth in 1..=2 {
        sim.inject(Fault::FailCall {
            op: Op::GraphDestroy,
            nth,
        });
    }
    let destroys = |sim: &SimDriver| sim.stats().calls.get(&Op::GraphDestroy).copied();
    let before = destroys(&sim).unwrap_or(0);
    let e = shared
        .submit_blocking(RunSpec::new(code, Input::Host(&[5])))
        .unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Lost(LostCause::Slot { .. })),
        "{e}"
    );
    assert_eq!(sim.stats().live_graphs, 1, "never destroyed");
    assert_eq!(destroys(&sim), Some(before + 2), "asked once more, no more");
    let e = shared
        .submit_blocking(RunSpec::new(code, Input::Host(&[6])))
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Lost(_)), "{e}");
}
