//! Fault sweep: a fixed, representative scenario — a queued pipeline of 8
//! runs, two in flight, with a publication in the middle — is run once to
//! count its driver calls, then once per call index `k` with the `k`-th
//! driver call failing. Every failure is handled the way the documentation
//! says (retry a prepared run, drain a poisoned runner, redo a lost run), and
//! every run must still produce exactly the right values, with no stale code,
//! no destroyed busy stream, bounded waits and no leak.

mod common;

use std::time::Duration;

use common::checks;
use runclaim::driver::abi::Program;
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Error, Input, Outputs, RunSpec, Runner};

fn cfg() -> SimConfig {
    SimConfig::default()
        .watchdog(Duration::from_millis(2))
        .code_slots(2)
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
fn scenario(sim: &SimDriver) -> Result<usize, String> {
    let mut recovered = 0;
    let mut dev = open_retrying(sim, &mut recovered)?;
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
                if let Ok(values) = pair(&runner, name, first) {
                    for (k, v) in values.into_iter().enumerate() {
                        results[first + k] = Some(v);
                    }
                    done = true;
                } else {
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

#[test]
fn every_driver_call_can_fail_and_the_pipeline_still_completes() {
    let clean = SimDriver::stepped(cfg());
    assert_eq!(scenario(&clean), Ok(0), "the scenario itself is clean");
    let calls = clean.stats().total_calls();
    assert!(calls > 100, "{calls} calls");
    let mut recovered_sites = 0;
    for k in 1..=calls {
        let sim = SimDriver::stepped(cfg());
        sim.inject(Fault::FailAnyCall { nth: k });
        match scenario(&sim) {
            Ok(n) => recovered_sites += usize::from(n > 0),
            Err(e) => panic!("failing driver call #{k} of {calls}: {e}"),
        }
    }
    println!(
        "fault sweep: swept {calls} driver call sites; {recovered_sites} made an operation fail \
         and were recovered, the rest failed a call whose error the contract absorbed"
    );
    assert!(recovered_sites > usize::try_from(calls).unwrap() / 2);
}

#[test]
fn every_kernel_can_fault_and_the_pipeline_still_completes() {
    let mut swept = 0;
    for kernel in [Kernel::Aicore, Kernel::Aicpu] {
        for nth in 1..=8 {
            let sim = SimDriver::stepped(cfg());
            sim.inject(Fault::KernelFault { kernel, nth });
            let n =
                scenario(&sim).unwrap_or_else(|e| panic!("{kernel:?} kernel #{nth} faulting: {e}"));
            assert!(n > 0, "{kernel:?} kernel #{nth}: the fault was noticed");
            swept += 1;
        }
    }
    println!("fault sweep: {swept} kernel faults, each recovered by a drain");
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

/// A device on `sim`, opened in at most three tries (each failure counted).
fn open_retrying(sim: &SimDriver, recovered: &mut usize) -> Result<Device<SimDriver, 2>, String> {
    for _ in 0..3 {
        match Device::<_, 2>::open(sim.clone(), DeviceConfig::default()) {
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
fn workload_scenario(sim: &SimDriver) -> Result<usize, String> {
    use runclaim::Workload;
    use runclaim::driver::abi::Dir;
    let mut recovered = 0;
    let mut dev = open_retrying(sim, &mut recovered)?;
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
        if attempt.is_ok() {
            done = true;
            break;
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

#[test]
fn every_driver_call_of_a_workload_can_fail_and_it_still_completes() {
    let clean = SimDriver::stepped(cfg());
    assert_eq!(
        workload_scenario(&clean),
        Ok(0),
        "the scenario itself is clean"
    );
    let calls = clean.stats().total_calls();
    let mut recovered_sites = 0;
    for k in 1..=calls {
        let sim = SimDriver::stepped(cfg());
        sim.inject(Fault::FailAnyCall { nth: k });
        match workload_scenario(&sim) {
            Ok(n) => recovered_sites += usize::from(n > 0),
            Err(e) => panic!("failing driver call #{k} of {calls}: {e}"),
        }
    }
    println!("workload fault sweep: {calls} driver call sites, {recovered_sites} recovered");
    assert!(recovered_sites > usize::try_from(calls).unwrap() / 2);
}

#[test]
fn every_kernel_of_a_workload_can_fault_and_it_still_completes() {
    for kernel in [Kernel::Aicore, Kernel::Aicpu] {
        for nth in 1..=2 {
            let sim = SimDriver::stepped(cfg());
            sim.inject(Fault::KernelFault { kernel, nth });
            let n = workload_scenario(&sim)
                .unwrap_or_else(|e| panic!("{kernel:?} kernel #{nth} faulting: {e}"));
            assert!(n > 0, "{kernel:?} kernel #{nth}: the fault was noticed");
        }
    }
}
