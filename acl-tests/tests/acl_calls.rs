//! Runtime calls per run, counted by the fake runtime (every ACL / rt entry
//! point that reached the device), for each way to run: blocking and
//! awaited, with and without the per-run completion callback, typed, in a
//! pipeline and through a shared device. The README's table of runtime
//! calls per run is this test's output (`cargo test -p acl-tests --test
//! acl_calls -- --nocapture`).
//!
//! A blocking run's count is exact (the same calls every run) and asserted
//! as a number: 10, 9 without completion callbacks, 10 through a pipeline
//! and through a shared device's blocking calls (the same thread loop over
//! the same look), 5 replayed from a capture. An awaited run's depends on how many looks its future
//! took (each poll queries its fence once), so only its floor is exact:
//! one look that finds the run complete.

mod common;

use std::time::Duration;

use common::acl::{control, open};
use runclaim::driver::abi::Program;
use runclaim::driver::acl::AclDriver;
use runclaim::sim::{LatencyModel, SimConfig};
use runclaim::{
    Callable, Device, DeviceConfig, Input, Outputs, Pipeline, RunSpec, Runner, SharedDevice,
};

const RUNS: u32 = 40;

fn sim() -> SimConfig {
    SimConfig::default()
        .watchdog(Duration::from_secs(5))
        .latency(LatencyModel::default().kernel(Duration::from_micros(200)))
}

fn callables() -> [Callable; 1] {
    [Callable::program("f", &Program::new().add(1))]
}

fn config(callbacks: bool) -> DeviceConfig {
    // 64 elements: room in the arena input for a replay's records' copy
    // (which needs as many bytes as the records span: 80 here).
    DeviceConfig::default()
        .max_elements(64)
        .completion_callbacks(callbacks)
}

/// Runtime calls of each of `RUNS` runs of `run` on device `id`, after
/// `warm` runs (the first run's one-time calls, a pipeline filling up).
fn per_run(id: i32, warm: u32, mut run: impl FnMut(u32)) -> Vec<u64> {
    for i in 0..warm {
        run(u32::MAX - i);
    }
    (0..RUNS)
        .map(|i| {
            let before = control().runtime(id).calls;
            run(i);
            control().runtime(id).calls - before
        })
        .collect()
}

/// The calls of one typed run on slot 0, blocking or awaited.
fn typed(callbacks: bool, awaited: bool) -> Vec<u64> {
    let d = open(&sim(), true);
    let id = d.device_id();
    let mut dev = Device::<AclDriver, 2>::open(d, config(callbacks)).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let mut out = Outputs::<0>::new(1);
    per_run(id, 1, |i| one(&runner, &mut out, i, awaited))
}

fn one(runner: &Runner<'_, AclDriver, 2>, out: &mut Outputs<0>, i: u32, awaited: bool) {
    let code = runner.code("f").unwrap();
    let x = [i];
    let slot = runner.take_slot::<0>().unwrap();
    let run = runner
        .prepare(slot, RunSpec::new(code, Input::Host(&x)))
        .unwrap()
        .launch()
        .unwrap();
    let fenced = if awaited {
        pollster::block_on(run.fence_async()).unwrap()
    } else {
        run.fence().unwrap()
    };
    drop(fenced.finalize(out).unwrap());
    assert_eq!(out.values(), [i.wrapping_add(1)]);
}

/// The calls of one typed run on slot 0 replayed from its capture (made
/// by the warm-up run), blocking or awaited.
fn replayed(awaited: bool) -> Vec<u64> {
    let d = open(&sim(), true);
    let id = d.device_id();
    let mut dev = Device::<AclDriver, 2>::open(d, config(true)).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let mut out = Outputs::<0>::new(1);
    let spec = RunSpec::new(code, Input::Host(&[7]));
    let (run, capture) = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .capture()
        .unwrap();
    let mut token = Some(run.fence().unwrap().finalize(&mut out).unwrap().token);
    per_run(id, 0, |i| {
        let x = [i];
        let run = runner
            .prepare(token.take().unwrap(), RunSpec::new(code, Input::Host(&x)))
            .unwrap()
            .replay(&capture)
            .unwrap();
        let fenced = if awaited {
            pollster::block_on(run.fence_async()).unwrap()
        } else {
            run.fence().unwrap()
        };
        token = Some(fenced.finalize(&mut out).unwrap().token);
        assert_eq!(out.values(), [i.wrapping_add(1)]);
    })
}

/// The calls per run of a depth-2 pipeline kept full (one complete, one
/// submit per run), blocking.
fn pipelined() -> Vec<u64> {
    let d = open(&sim(), true);
    let id = d.device_id();
    let mut dev = Device::<AclDriver, 2>::open(d, config(true)).unwrap();
    let runner = dev.publish(&callables()).unwrap();
    let code = runner.code("f").unwrap();
    let mut pipe = Pipeline::<_, 2, u32>::new(&runner).unwrap();
    per_run(id, 2, |i| {
        if pipe.is_full() {
            let done = pipe.complete().unwrap().unwrap();
            assert_eq!(done.values, [done.tag.wrapping_add(1)]);
        }
        pipe.submit(RunSpec::new(code, Input::Host(&[i])), i)
            .unwrap();
    })
}

/// The calls of one run through a shared device, blocking or awaited.
fn shared(awaited: bool) -> Vec<u64> {
    let d = open(&sim(), true);
    let id = d.device_id();
    let shared = SharedDevice::<_, 2>::open(d, config(true)).unwrap();
    shared.publish(&callables()).unwrap();
    let code = shared.code("f").unwrap();
    per_run(id, 1, |i| {
        let x = [i];
        let spec = RunSpec::new(code, Input::Host(&x));
        let done = if awaited {
            pollster::block_on(async { shared.submit(spec).await.unwrap().await })
        } else {
            shared.submit_blocking(spec).unwrap().wait()
        };
        assert_eq!(done.unwrap().values, [i.wrapping_add(1)]);
    })
}

fn summary(what: &str, calls: &[u64]) -> (u64, u64) {
    let (min, max) = (*calls.iter().min().unwrap(), *calls.iter().max().unwrap());
    let mean = calls.iter().sum::<u64>() as f64 / calls.len() as f64;
    println!("  {what:<52} {min:>3} … {max:>3}   mean {mean:>5.2}");
    (min, max)
}

#[test]
fn runtime_calls_per_run() {
    println!("runtime calls per run (fake runtime, 200 µs kernels; min … max over {RUNS} runs)");
    let blocking = summary("typed, blocking (fence)", &typed(true, false));
    let plain = summary(
        "typed, blocking, completion_callbacks(false)",
        &typed(false, false),
    );
    let awaited = summary("typed, awaited (fence_async)", &typed(true, true));
    let timer = summary(
        "typed, awaited, completion_callbacks(false)",
        &typed(false, true),
    );
    let piped = summary(
        "pipeline (depth 2, complete + submit), blocking",
        &pipelined(),
    );
    let shared_blocking = summary(
        "shared device, blocking (submit_blocking + wait)",
        &shared(false),
    );
    let shared_awaited = summary("shared device, awaited (submit + ticket)", &shared(true));
    let replay_blocking = summary(
        "typed, replayed from its capture, blocking",
        &replayed(false),
    );
    let replay_awaited = summary("typed, replayed from its capture, awaited", &replayed(true));
    // Exact, and these numbers: every blocking run makes the same calls
    // (one copy preparing the records with the input, the two launches,
    // the records, the cross-stream wait, the completion callback, one
    // sleep on the fence, the read-back of the records and of the
    // output); the callback is one call; a pipeline and a shared device's
    // blocking calls are the same wait, so they make a typed run's calls.
    assert_eq!(blocking, (10, 10), "a typed blocking run's calls");
    assert_eq!(plain, (9, 9), "without completion callbacks");
    assert_eq!(piped, (10, 10), "a pipeline makes a typed run's calls");
    assert_eq!(
        shared_blocking,
        (10, 10),
        "a shared device's submit_blocking + wait is the typed wait"
    );
    // A replay, five calls: prepare's one copy (the records armed, the
    // input after them); the run's block into the capture region (one
    // copy); the graph launched (one call) — the five launch calls and the
    // completion callback (none is captured) gone; the fence sleeps once;
    // finalize reads the records and the output with one copy (the graph
    // copied the records right before the output). Which calls they are
    // is asserted on the simulator, op by op (`tests/replay.rs`); the
    // fake counts them as the runtime sees them.
    assert_eq!(replay_blocking, (5, 5), "a replayed blocking run's calls");
    assert!(replay_awaited.0 >= replay_blocking.0, "{replay_awaited:?}");
    // Awaited: a fence's sleep replaced by its queries (at least one).
    assert!(awaited.0 >= blocking.0, "{awaited:?} vs {blocking:?}");
    assert!(timer.0 >= plain.0, "{timer:?} vs {plain:?}");
    assert!(
        shared_awaited.0 >= blocking.0,
        "{shared_awaited:?} vs {blocking:?}"
    );
}
