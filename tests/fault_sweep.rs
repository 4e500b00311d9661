//! Fault sweep: a fixed, representative scenario — a queued pipeline of 8
//! runs, two in flight, with a publication in the middle — is run once to
//! count its driver calls, then once per call index `k` with the `k`-th
//! driver call failing. Every failure is handled the way the documentation
//! says (retry a prepared run, drain a poisoned runner, redo a lost run), and
//! every run must still produce exactly the right values, with no stale code,
//! no destroyed busy stream, bounded waits and no leak.
//!
//! Every sweep runs under both built-in kernel ABIs (`common::abi::Abi`):
//! runclaim's layout and the a2a3 layout. Their scenarios make the same
//! driver calls but for the per-run record preparation — runclaim's layout
//! clears the handshake and the device wall and arms the status record
//! with one H2D copy at every prepare (which carries a `RunSpec` run's
//! input), and reads its records with one D2H copy; the a2a3 adapter's
//! regions are device-stamped, zeroed once at open and never touched by
//! the host again, and its records are read apart — so each sweep checks the
//! clean scenario's call counts per operation against that difference
//! exactly, then fails each of its calls in turn.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::abi::Abi;
use common::checks;
use runclaim::driver::Op;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, Device, Error, Input, Outputs, RunSpec, Runner};

fn cfg() -> SimConfig {
    SimConfig::default()
        .watchdog(Duration::from_millis(2))
        .code_slots(2)
}

/// A fresh stepped simulator of the sweeps' configuration speaking `abi`.
fn sim(abi: Abi) -> SimDriver {
    abi.stepped(cfg())
}

fn input(i: usize) -> Vec<u32> {
    (0..6).map(|j| u32::try_from(i * 10 + j).unwrap()).collect()
}

const A: fn() -> Program = || Program::new().mul(3).add(1);
const B: fn() -> Program = || Program::new().xor(0xff).add(5);

/// One queued pair: two runs launched back to back, fenced and finalized.
fn pair(
    runner: &Runner<'_, SimDriver, 2>,
    name: &str,
    first: usize,
) -> Result<[Vec<u32>; 2], Error> {
    let code = runner.code(name)?;
    let (i0, i1) = (input(first), input(first + 1));
    let (mut o0, mut o1) = (Outputs::<0>::new(8), Outputs::<1>::new(8));
    let r0 = runner.prepare(
        runner.take_slot::<0>()?,
        RunSpec::new(code, Input::Host(&i0)),
    )?;
    let r1 = runner.prepare(
        runner.take_slot::<1>()?,
        RunSpec::new(code, Input::Host(&i1)),
    )?;
    let r0 = r0.launch()?;
    let r1 = r1.launch()?;
    let f0 = r0.fence()?;
    let f1 = r1.fence()?;
    let d1 = f1.finalize(&mut o1)?;
    let d0 = f0.finalize(&mut o0)?;
    drop((d0, d1));
    Ok([o0.values().to_vec(), o1.values().to_vec()])
}

/// The scenario, recovering from any failure; returns how many operations
/// failed and were recovered, or the broken invariant.
fn scenario(sim: &SimDriver, abi: Abi) -> Result<usize, String> {
    let mut recovered = 0;
    let mut dev = open_retrying(sim, abi, &mut recovered)?;
    let fence_steps = u64::try_from(dev.fence_timeout().as_micros()).unwrap();
    let mut results = vec![None; 8];
    for (name, program, runs) in [("A", A, 0..4), ("B", B, 4..8)] {
        let callables = [Callable::program(name, &program())];
        let mut attempts = 0;
        let mut runner = loop {
            match dev.publish(&callables) {
                Ok(r) => break r,
                Err(_) if attempts < 3 => {
                    attempts += 1;
                    recovered += 1;
                }
                Err(e) => return Err(format!("publish failed three times: {e}")),
            }
        };
        for first in runs.step_by(2) {
            let mut done = false;
            for _ in 0..4 {
                let before = sim.stats().steps;
                match pair(&runner, name, first) {
                    Ok(values) => {
                        for (k, v) in values.into_iter().enumerate() {
                            results[first + k] = Some(v);
                        }
                        done = true;
                    }
                    Err(e) => {
                        // A failure is the run's own, never a record of
                        // another run (a stale or foreign status or wall).
                        checks::own_records(e.kind())?;
                        recovered += 1;
                        // Every run and token is gone: drain proves the queue
                        // quiet and returns every slot (one retry: the
                        // injected failure may hit the drain itself).
                        if runner.drain().is_err() {
                            runner
                                .drain()
                                .map_err(|e| format!("drain after a failure: {e}"))?;
                        }
                    }
                }
                checks::bounded("a queued pair", sim.stats().steps - before, 6 * fence_steps)?;
                if done {
                    break;
                }
            }
            if !done {
                return Err(format!("runs {first}–{} never completed", first + 1));
            }
        }
        let h = runner.health();
        checks::health(&h, false, 0, &[])?;
    }
    for (i, r) in results.iter().enumerate() {
        let p = if i < 4 { A() } else { B() };
        let want: Vec<u32> = input(i).iter().map(|&x| p.apply_lossy(x)).collect();
        checks::outputs(i as u64, &want, r.as_deref().unwrap_or(&[]))?;
    }
    closes_cleanly(dev, sim)?;
    Ok(recovered)
}

/// What a clean scenario does that the per-run record preparation and
/// reading depend on: runs prepared (each prepare arms its records once,
/// whether or not the run later launches), runs whose records were read
/// back. (Each open zeroes each slot's regions with one memset, whatever
/// the adapter.)
#[derive(Debug, Clone, Copy)]
struct Shape {
    prepares: u64,
    /// Prepares whose arena input travels in the copy that prepares the
    /// records (a `RunSpec` run's host input).
    joined: u64,
    finalizes: u64,
}

/// The memsets, H2D and D2H copies a clean scenario of `shape` makes
/// beyond those of the adapter-independent part (the inputs, the buffers,
/// the one memset of each slot's regions at open), under `abi`: runclaim's
/// layout, one H2D copy per prepare (an image of its regions: the
/// handshake, the wall, the status), which carries a `RunSpec` run's
/// input (no copy of its own then), and one D2H copy per finalize (the
/// wall and the status, adjacent); the a2a3 layout, none per prepare, two
/// D2H copies per finalize (its result and timing records lie apart).
fn record_calls(abi: Abi, shape: Shape) -> (u64, u64, u64) {
    match abi {
        Abi::Runclaim => (0, shape.prepares - shape.joined, shape.finalizes),
        Abi::A2a3 => (0, 0, 2 * shape.finalizes),
    }
}

/// The clean scenario's driver calls per operation under `abi`.
fn clean_calls(abi: Abi, scenario: Scenario) -> BTreeMap<Op, u64> {
    let clean = sim(abi);
    assert_eq!(
        scenario(&clean, abi),
        Ok(0),
        "{}: the scenario itself is clean",
        abi.name()
    );
    clean.stats().calls
}

/// A scenario: recovers from any failure; how many operations failed.
type Scenario = fn(&SimDriver, Abi) -> Result<usize, String>;

/// The clean scenario's calls per operation under both ABIs are equal but
/// for the record preparation of `shape`: each ABI's count of every
/// operation is derived from the other's, exactly. Returns the calls in
/// all, runclaim's first.
fn calls_differ_by_the_record_preparation_only(shape: Shape, scenario: Scenario) -> [u64; 2] {
    let calls = Abi::ALL.map(|abi| clean_calls(abi, scenario));
    let of = |abi: Abi, op| calls[abi as usize].get(&op).copied().unwrap_or(0);
    let [(rc_memsets, rc_h2d, rc_d2h), (a2_memsets, a2_h2d, a2_d2h)] =
        Abi::ALL.map(|abi| record_calls(abi, shape));
    let moved = |op, with: u64, without: u64| (of(Abi::Runclaim, op) + with).checked_sub(without);
    for op in Op::ALL {
        let want = match op {
            Op::Memset => moved(op, a2_memsets, rc_memsets),
            Op::CopyToDevice => moved(op, a2_h2d, rc_h2d),
            Op::CopyFromDevice => moved(op, a2_d2h, rc_d2h),
            _ => Some(of(Abi::Runclaim, op)),
        };
        assert_eq!(
            Some(of(Abi::A2a3, op)),
            want,
            "{op} calls ({shape:?}): runclaim {:?}, a2a3 {:?}",
            calls[0],
            calls[1]
        );
    }
    calls.map(|c| c.values().sum())
}

/// Fails each driver call of the clean scenario in turn under `abi`;
/// returns (calls swept, sites that made an operation fail and recovered).
fn sweep(abi: Abi, calls: u64, scenario: Scenario) -> usize {
    let mut recovered_sites = 0;
    for k in 1..=calls {
        let sim = sim(abi);
        sim.inject(Fault::FailAnyCall { nth: k });
        match scenario(&sim, abi) {
            Ok(n) => recovered_sites += usize::from(n > 0),
            Err(e) => panic!("{}: failing driver call #{k} of {calls}: {e}", abi.name()),
        }
    }
    recovered_sites
}

/// The pipeline scenario: one open, eight runs prepared once each.
const PIPELINE: Shape = Shape {
    prepares: 8,
    joined: 8,
    finalizes: 8,
};

fn every_driver_call_of_the_pipeline_can_fail(abi: Abi) {
    let calls = clean_calls(abi, scenario).values().sum::<u64>();
    assert!(calls > 90, "{calls} calls");
    let recovered_sites = sweep(abi, calls, scenario);
    println!(
        "fault sweep ({}): swept {calls} driver call sites; {recovered_sites} made an operation \
         fail and were recovered, the rest failed a call whose error the contract absorbed",
        abi.name()
    );
    assert!(recovered_sites > usize::try_from(calls).unwrap() / 2);
}

#[test]
fn every_driver_call_can_fail_and_the_pipeline_still_completes() {
    every_driver_call_of_the_pipeline_can_fail(Abi::Runclaim);
}

#[test]
fn a2a3_every_driver_call_can_fail_and_the_pipeline_still_completes() {
    every_driver_call_of_the_pipeline_can_fail(Abi::A2a3);
}

fn every_kernel_of_the_pipeline_can_fault(abi: Abi) {
    let mut swept = 0;
    for kernel in [Kernel::Aicore, Kernel::Aicpu] {
        for nth in 1..=8 {
            let sim = sim(abi);
            sim.inject(Fault::KernelFault { kernel, nth });
            let n = scenario(&sim, abi).unwrap_or_else(|e| {
                panic!("{}: {kernel:?} kernel #{nth} faulting: {e}", abi.name())
            });
            assert!(n > 0, "{kernel:?} kernel #{nth}: the fault was noticed");
            swept += 1;
        }
    }
    println!(
        "fault sweep ({}): {swept} kernel faults, each recovered by a drain",
        abi.name()
    );
}

#[test]
fn every_kernel_can_fault_and_the_pipeline_still_completes() {
    every_kernel_of_the_pipeline_can_fault(Abi::Runclaim);
}

#[test]
fn a2a3_every_kernel_can_fault_and_the_pipeline_still_completes() {
    every_kernel_of_the_pipeline_can_fault(Abi::A2a3);
}

/// Closes the device and checks what it left: no stale code ran, no busy
/// stream was destroyed, nothing leaked — or, when the close itself failed,
/// exactly what failed (one resource) and nothing more.
fn closes_cleanly(dev: Device<SimDriver, 2>, sim: &SimDriver) -> Result<(), String> {
    let closed = dev.close();
    let stats = sim.stats();
    checks::no_stale_code(&stats)?;
    checks::no_busy_destroy(&stats)?;
    if closed.is_ok() {
        return checks::no_leaks(&stats);
    }
    let leaked = stats.live_streams() + stats.live_events() + stats.live_allocations();
    if leaked > 1 {
        return Err(format!("close failed and leaked {leaked} resources"));
    }
    Ok(())
}

/// A device on `sim` with `abi`'s adapter, opened in at most three tries
/// (each failure counted).
fn open_retrying(
    sim: &SimDriver,
    abi: Abi,
    recovered: &mut usize,
) -> Result<Device<SimDriver, 2>, String> {
    for _ in 0..3 {
        match Device::<_, 2>::open(sim.clone(), abi.config()) {
            Ok(d) => return Ok(d),
            Err(_) => *recovered += 1,
        }
    }
    Err("open failed three times".into())
}

/// The workload scenario: a device buffer written by the host, two queued
/// workload runs sharing it in stream order (host input → buffer; buffer
/// → host output and a host in-out), the buffer read back, a second
/// buffer allocated and dropped. Recovers from any failure by draining and
/// redoing the pair; returns how many operations failed and were recovered.
fn workload_scenario(sim: &SimDriver, abi: Abi) -> Result<usize, String> {
    use runclaim::Workload;
    use runclaim::driver::abi::Dir;
    let mut recovered = 0;
    let mut dev = open_retrying(sim, abi, &mut recovered)?;
    let mut shared = None;
    for _ in 0..3 {
        match dev.alloc_buffer::<u32>(6) {
            Ok(b) => {
                shared = Some(b);
                break;
            }
            Err(_) => recovered += 1,
        }
    }
    let mut shared = shared.ok_or("alloc failed three times")?;
    let callables = [Callable::program("A", &A())];
    let mut attempts = 0;
    let mut runner = loop {
        match dev.publish(&callables) {
            Ok(r) => break r,
            Err(_) if attempts < 3 => {
                attempts += 1;
                recovered += 1;
            }
            Err(e) => return Err(format!("publish failed three times: {e}")),
        }
    };
    let x = input(1);
    let (mut y, mut z) = (vec![0u32; 6], input(2));
    let mut done = false;
    for _ in 0..4 {
        let attempt = (|| -> Result<(), Error> {
            let code = runner.code("A")?;
            z.copy_from_slice(&input(2));
            let mut w0 = Workload::new(code);
            w0.input(&x).buffer(&shared, Dir::Out);
            let mut w1 = Workload::new(code);
            w1.buffer(&shared, Dir::In).output(&mut y).inout(&mut z);
            let r0 = runner.prepare(runner.take_slot::<0>()?, &mut w0)?;
            let r1 = runner.prepare(runner.take_slot::<1>()?, &mut w1)?;
            let (r0, r1) = (r0.launch()?, r1.launch()?);
            let (f0, f1) = (r0.fence()?, r1.fence()?);
            drop((f1.finalize()?, f0.finalize()?));
            Ok(())
        })();
        match attempt {
            Ok(()) => {
                done = true;
                break;
            }
            Err(e) => checks::own_records(e.kind())?,
        }
        recovered += 1;
        if runner.drain().is_err() {
            runner
                .drain()
                .map_err(|e| format!("drain after a failure: {e}"))?;
        }
    }
    if !done {
        return Err("the workload pair never completed".into());
    }
    drop(runner);
    let a = A();
    let want: Vec<u32> = x.iter().map(|&v| a.apply_lossy(a.apply_lossy(v))).collect();
    checks::outputs(1, &want, &y)?;
    let mut back = vec![0u32; 6];
    let mut read = false;
    for _ in 0..3 {
        if dev.read_buffer(&mut shared, 0, &mut back).is_ok() {
            read = true;
            break;
        }
        recovered += 1;
    }
    if !read {
        return Err("the buffer could not be read three times".into());
    }
    let mid: Vec<u32> = x.iter().map(|&v| a.apply_lossy(v)).collect();
    checks::outputs(0, &mid, &back)?;
    drop(shared);
    if let Ok(b) = dev.alloc_buffer::<f32>(4) {
        drop(b);
    } else {
        recovered += 1;
    }
    closes_cleanly(dev, sim)?;
    Ok(recovered)
}

/// The workload scenario: one open, two runs prepared once each.
const WORKLOAD: Shape = Shape {
    prepares: 2,
    joined: 0,
    finalizes: 2,
};

fn every_driver_call_of_the_workload_can_fail(abi: Abi) {
    let calls = clean_calls(abi, workload_scenario).values().sum::<u64>();
    let recovered_sites = sweep(abi, calls, workload_scenario);
    println!(
        "workload fault sweep ({}): {calls} driver call sites, {recovered_sites} recovered",
        abi.name()
    );
    assert!(recovered_sites > usize::try_from(calls).unwrap() / 2);
}

#[test]
fn every_driver_call_of_a_workload_can_fail_and_it_still_completes() {
    every_driver_call_of_the_workload_can_fail(Abi::Runclaim);
}

#[test]
fn a2a3_every_driver_call_of_a_workload_can_fail_and_it_still_completes() {
    every_driver_call_of_the_workload_can_fail(Abi::A2a3);
}

fn every_kernel_of_the_workload_can_fault(abi: Abi) {
    for kernel in [Kernel::Aicore, Kernel::Aicpu] {
        for nth in 1..=2 {
            let sim = sim(abi);
            sim.inject(Fault::KernelFault { kernel, nth });
            let n = workload_scenario(&sim, abi).unwrap_or_else(|e| {
                panic!("{}: {kernel:?} kernel #{nth} faulting: {e}", abi.name())
            });
            assert!(n > 0, "{kernel:?} kernel #{nth}: the fault was noticed");
        }
    }
}

#[test]
fn every_kernel_of_a_workload_can_fault_and_it_still_completes() {
    every_kernel_of_the_workload_can_fault(Abi::Runclaim);
}

#[test]
fn a2a3_every_kernel_of_a_workload_can_fault_and_it_still_completes() {
    every_kernel_of_the_workload_can_fault(Abi::A2a3);
}

/// The two sweeps' clean scenarios make the same driver calls under both
/// ABIs but for the per-run record preparation (see the module docs):
/// every operation's count under a2a3 is runclaim's, with runclaim's
/// record copies (`record_calls`) taken away and a2a3's added.
#[test]
fn the_sweeps_call_counts_differ_by_the_record_preparation_only() {
    let pipeline = calls_differ_by_the_record_preparation_only(PIPELINE, scenario);
    let workload = calls_differ_by_the_record_preparation_only(WORKLOAD, workload_scenario);
    println!(
        "driver calls of the clean scenarios (runclaim, a2a3): pipeline {pipeline:?}, \
         workload {workload:?}"
    );
}
