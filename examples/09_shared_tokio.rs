//! One simulated NPU shared by many tokio tasks through a [`SharedDevice`](runclaim::SharedDevice)
//! — no `Box::leak`, no owner task with channels written by hand — and
//! what that costs against a typed [`Pipeline`] on the same NPU.
//!
//! 1. **Many tasks, one device.** `--tasks` tokio tasks (default 8) on a
//!    multi-thread runtime, each with its own clone of the handle, submit
//!    `--runs` runs in all (default 4,000) to one depth-4 device with
//!    250 µs kernels: half `RunSpec`s, half one owned `Workload` per task
//!    refilled and resubmitted (it comes back with each result). Every
//!    value is checked against the task's own input.
//! 2. **Against a typed pipeline**, in the same process, on the same
//!    simulated NPU (a clone of the same `SimDriver`): the same runs fed by
//!    one task through a depth-4 `Pipeline`. Both are device-bound: the
//!    ratio of their throughputs, and each against the device's bound
//!    (one run per kernel time and dispatch gap).
//! 3. **Wake latency and CPU** through the handle, as a typed fence
//!    future reaches them: each run's end to its ticket's wake (median,
//!    p90), beside `fence_async`'s in the same process; and the CPU of the
//!    whole process over a 1 s kernel awaited through a ticket.
//! 4. **Cancellation and closing.** Tickets dropped under
//!    `tokio::time::timeout` before their runs end: their slots come back
//!    and later runs are right. Then the last handle is dropped with runs
//!    still in flight (50 ms kernels): how long the drop took on the
//!    executor's thread, against a plain `Device` dropped the same way.
//!
//! Run: `cargo run --release --example 09_shared_tokio [-- --tasks N --runs N]`

use std::error::Error;
use std::time::{Duration, Instant};

use runclaim::driver::abi::{Dir, Program};
use runclaim::sim::{LatencyModel, SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, Pipeline, RunSpec, Workload};

#[path = "support/cpu.rs"]
mod cpu;
#[path = "support/quantiles.rs"]
mod quantiles;
#[path = "support/stamp.rs"]
mod stamp;
use quantiles::{quantile, us};
use stamp::Stamped;

/// The handle every task takes, whatever the driver: a driver-erased
/// device (`AnySharedDevice` is `SharedDevice<Box<dyn Driver>, 4>`), so
/// `task` below runs unchanged on the simulator or the `acl` driver —
/// only `open` names the driver.
type Shared = runclaim::contract::AnySharedDevice<4>;
/// What a task answers (`Send`: it crosses tokio's threads).
type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

fn f(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(1)
}

fn callables() -> [Callable; 1] {
    [Callable::program("f", &Program::new().mul(3).add(1))]
}

/// One task's share of the runs: `runs` runs, every other one its own
/// workload refilled in place; how many came back right.
async fn task(shared: Shared, id: u32, runs: u32) -> Result<u32, runclaim::Error> {
    let code = shared.code("f")?;
    let mut work = Workload::new(code);
    let t = work.add_owned(vec![0u32; 2], Dir::InOut); // a typed id, good for `work` wherever it goes
    let mut work = Some(work);
    let mut right = 0;
    for i in 0..runs {
        let x = (id << 20) | i;
        if i % 2 == 0 {
            let input = [x];
            let done = shared.run(RunSpec::new(code, Input::Host(&input))).await?;
            right += u32::from(done.values == [f(x)]);
        } else {
            // The workload comes back with each result, to refill in place.
            let Some(mut w) = work.take() else { break };
            w[t].copy_from_slice(&[x, !x]);
            let done = shared.run(w).await?;
            work = done.work;
            let back = work.as_ref().map(|w| &w[t]);
            right += u32::from(back == Some(&[f(x), f(!x)][..]));
        }
    }
    Ok(right)
}

/// `runs` runs through a depth-4 typed pipeline on `sim`, fed by one task;
/// how many came back right, and the wall time.
async fn typed(sim: SimDriver, runs: u32) -> Result<(u32, Duration), runclaim::Error> {
    let mut device = Device::<_, 4>::open(sim, DeviceConfig::default())?;
    let runner = device.publish(&callables())?;
    let code = runner.code("f")?;
    let mut pipe = Pipeline::<_, 4, u32>::new(&runner)?;
    let t0 = Instant::now();
    let mut right = 0;
    for i in 0..runs {
        if pipe.is_full()
            && let Some(done) = pipe.complete_async().await?
        {
            right += u32::from(done.values[0] == f(done.tag));
        }
        pipe.submit(RunSpec::new(code, Input::Host(&[i])), i)?;
    }
    while let Some(done) = pipe.complete_async().await? {
        right += u32::from(done.values[0] == f(done.tag));
    }
    let wall = t0.elapsed();
    // A borrowed pipeline is drained, awaited, before it is dropped: its
    // drop would otherwise wait for its runs on this executor thread.
    pipe.drain_async().await?;
    drop(pipe);
    drop(runner);
    device.close_async().await?;
    Ok((right, wall))
}

/// Wake latencies (run's end → waker called) of `n` runs each awaited one
/// at a time, alternating — one through the handle's ticket, one through a
/// typed fence future on a second device of the same NPU — so that any
/// load on the machine hits both alike.
async fn wakes(sim: &SimDriver, n: u32) -> Result<(Vec<Duration>, Vec<Duration>), runclaim::Error> {
    let shared = Shared::open(Box::new(sim.clone()), DeviceConfig::default())?;
    shared.publish(&callables())?;
    let code = shared.code("f")?;
    let mut device = Device::<_, 4>::open(sim.clone(), DeviceConfig::default())?;
    let runner = device.publish(&callables())?;
    let typed_code = runner.code("f")?;
    let (mut handle, mut typed) = (Vec::new(), Vec::new());
    let mut out = Outputs::<0>::new(1);
    for i in 0..n {
        let ticket = Stamped::new(shared.submit(RunSpec::new(code, Input::Host(&[i]))).await?);
        let stamp = ticket.stamp();
        let done = ticket.await?;
        if let (Some(end), Some(woken)) = (sim.tick_instant(done.wall.end), stamp.woken_at()) {
            handle.push(woken.saturating_duration_since(end));
        }
        let x = [i];
        let spec = RunSpec::new(typed_code, Input::Host(&x));
        let run = runner.prepare(runner.take_slot::<0>()?, spec)?.launch()?;
        let fut = Stamped::new(run.fence_async());
        let stamp = fut.stamp();
        let done = fut.await?.finalize(&mut out)?;
        if let (Some(end), Some(woken)) = (sim.tick_instant(done.wall.end), stamp.woken_at()) {
            typed.push(woken.saturating_duration_since(end));
        }
    }
    shared.close_async().await?;
    Ok((handle, typed))
}

/// The process's CPU (every thread, in share of one core) over one 1 s
/// kernel awaited: through a ticket, then through a typed fence future.
async fn long_waits() -> Result<[(Option<Duration>, Duration, bool); 2], runclaim::Error> {
    let long = Duration::from_secs(1);
    let sim = SimDriver::real_time(
        SimConfig::default()
            .watchdog(Duration::from_secs(10))
            .latency(LatencyModel::default().kernel(long)),
    );
    let config = DeviceConfig::default().fence_timeout(Duration::from_secs(20));
    let shared = Shared::open(Box::new(sim.clone()), config.clone())?;
    shared.publish(&callables())?;
    let ticket = shared
        .submit(RunSpec::new(shared.code("f")?, Input::Host(&[7])))
        .await?;
    let (cpu0, t0) = (cpu::threads_cpu(), Instant::now());
    let done = ticket.await?;
    let handle = (
        cpu::since(cpu0, cpu::threads_cpu()),
        t0.elapsed(),
        done.values == [f(7)],
    );
    shared.close_async().await?;
    let mut device = Device::<_, 2>::open(sim, config)?;
    let runner = device.publish(&callables())?;
    let spec = RunSpec::new(runner.code("f")?, Input::Host(&[7]));
    let run = runner.prepare(runner.take_slot::<0>()?, spec)?.launch()?;
    let (cpu0, t0) = (cpu::threads_cpu(), Instant::now());
    let fenced = run.fence_async().await?;
    let typed_cpu = (cpu::since(cpu0, cpu::threads_cpu()), t0.elapsed());
    let mut out = Outputs::<0>::new(1);
    fenced.finalize(&mut out)?;
    Ok([handle, (typed_cpu.0, typed_cpu.1, out.values() == [f(7)])])
}

/// Tickets dropped under a timeout shorter than their runs: how many
/// timed out, and whether the runs after them (which need those slots)
/// came back right.
async fn cancelled(rounds: u32) -> Result<(u32, bool), runclaim::Error> {
    let sim = SimDriver::real_time(
        SimConfig::default().latency(LatencyModel::default().kernel(Duration::from_millis(5))),
    );
    let shared = Shared::open(Box::new(sim), DeviceConfig::default())?;
    shared.publish(&callables())?;
    let code = shared.code("f")?;
    let (mut timed_out, mut right) = (0, true);
    for i in 0..rounds {
        let ticket = shared.submit(RunSpec::new(code, Input::Host(&[i]))).await?;
        if tokio::time::timeout(Duration::from_micros(500), ticket)
            .await
            .is_err()
        {
            timed_out += 1;
        }
    }
    for i in 0..8u32 {
        let done = shared
            .submit(RunSpec::new(code, Input::Host(&[i])))
            .await?
            .await?;
        right &= done.values == [f(i)];
    }
    right &= shared.health().in_flight == 0;
    Ok((timed_out, right))
}

/// How long dropping the last owner took on this thread, with four 50 ms
/// runs in flight: the shared handle's, and a plain device's.
async fn drops() -> Result<(Duration, Duration), runclaim::Error> {
    let slow = || {
        SimDriver::real_time(
            SimConfig::default().latency(LatencyModel::default().kernel(Duration::from_millis(50))),
        )
    };
    let shared = Shared::open(Box::new(slow()), DeviceConfig::default())?;
    shared.publish(&callables())?;
    let code = shared.code("f")?;
    let mut tickets = Vec::new();
    for i in 0..4u32 {
        tickets.push(shared.submit(RunSpec::new(code, Input::Host(&[i]))).await?);
    }
    let t0 = Instant::now();
    drop(tickets);
    drop(shared);
    let handle = t0.elapsed();
    let mut device = Device::<_, 4>::open(slow(), DeviceConfig::default())?;
    let runner = device.publish(&callables())?;
    let code = runner.code("f")?;
    let mut pipe = Pipeline::<_, 4, ()>::new(&runner)?;
    for i in 0..4u32 {
        pipe.submit(RunSpec::new(code, Input::Host(&[i])), ())?;
    }
    let t0 = Instant::now();
    drop(pipe);
    drop(runner);
    drop(device);
    Ok((handle, t0.elapsed()))
}

fn args() -> Res<(u32, u32)> {
    let (mut tasks, mut runs) = (8, 4_000);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let n = |v: Option<String>| v.and_then(|n| n.parse::<u32>().ok()).filter(|&n| n >= 1);
        match a.as_str() {
            "--tasks" => tasks = n(args.next()).ok_or("--tasks takes a count")?,
            "--runs" => runs = n(args.next()).ok_or("--runs takes a count")?,
            other => {
                return Err(
                    format!("unknown argument {other:?} (usage: [--tasks N --runs N])").into(),
                );
            }
        }
    }
    Ok((tasks, runs.max(tasks)))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Res<()> {
    let (tasks, runs) = args()?;
    let sim = SimDriver::real_time(SimConfig::default());
    let model = sim.config().latency;
    let bound = 1.0 / (model.kernel + model.dispatch_gap).as_secs_f64();

    // ----- 1. many tasks, one device ------------------------------------
    let shared = Shared::open(Box::new(sim.clone()), DeviceConfig::default())?;
    shared.publish(&callables())?;
    let per = runs / tasks;
    let t0 = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|id| tokio::spawn(task(shared.clone(), id, per)))
        .collect();
    let mut right = 0;
    for h in handles {
        right += h.await??;
    }
    let wall = t0.elapsed();
    let submitted = per * tasks;
    let handle_rate = f64::from(submitted) / wall.as_secs_f64();
    println!(
        "{tasks} tokio tasks, one shared device (depth 4, {} µs kernels): {right} of {submitted} runs \
         right in {:.1} ms ({handle_rate:.0} runs/s, {:.1} % of the device's bound of {bound:.0})",
        model.kernel.as_micros(),
        wall.as_secs_f64() * 1e3,
        100.0 * handle_rate / bound
    );
    shared.close_async().await?;
    drop(shared);
    if right != submitted {
        return Err("a run came back wrong through the handle".into());
    }

    // ----- 2. the same runs through a typed pipeline --------------------
    let (right, wall) = typed(sim.clone(), submitted).await?;
    let typed_rate = f64::from(submitted) / wall.as_secs_f64();
    println!(
        "one task, a typed pipeline on the same NPU: {right} of {submitted} right in {:.1} ms \
         ({typed_rate:.0} runs/s, {:.1} % of the bound); handle / pipeline = {:.3}",
        wall.as_secs_f64() * 1e3,
        100.0 * typed_rate / bound,
        handle_rate / typed_rate
    );
    if right != submitted {
        return Err("a run came back wrong through the pipeline".into());
    }

    // ----- 3. wake latency and CPU --------------------------------------
    let (mut handle, mut typed) = wakes(&sim, 500).await?;
    handle.sort();
    typed.sort();
    println!(
        "wake-up latency (run's end → waker called), {} runs each: ticket median {:.1} µs p90 {:.1} µs; \
         fence_async median {:.1} µs p90 {:.1} µs",
        handle.len().min(typed.len()),
        us(quantile(&handle, 0.5)),
        us(quantile(&handle, 0.9)),
        us(quantile(&typed, 0.5)),
        us(quantile(&typed, 0.9)),
    );
    // An idle real-time simulator's device thread naps 1 ms at a time: the
    // CPU is measured with no other simulator alive.
    drop(sim);
    for (what, (cpu, wall, ok)) in ["a ticket", "fence_async"]
        .into_iter()
        .zip(long_waits().await?)
    {
        println!(
            "one 1 s kernel awaited through {what}: CPU over the {:.2} s wait {} of one core; value {}",
            wall.as_secs_f64(),
            cpu::percent(cpu, wall),
            if ok { "right" } else { "WRONG" }
        );
        if !ok {
            return Err("the long run came back wrong".into());
        }
    }

    // ----- 4. cancellation and closing -----------------------------------
    let (timed_out, ok) = cancelled(32).await?;
    println!(
        "tickets dropped by a 500 µs timeout over 5 ms runs: {timed_out} of 32; every slot came \
         back and the 8 runs after were {}",
        if ok { "right" } else { "WRONG" }
    );
    if !ok {
        return Err("a cancelled ticket cost a slot or a result".into());
    }
    let (handle, device) = drops().await?;
    println!(
        "dropping the last owner with four 50 ms runs in flight, on the executor's thread: \
         shared handle {:.1} µs, plain device {:.1} ms",
        us(handle),
        device.as_secs_f64() * 1e3
    );
    Ok(())
}
