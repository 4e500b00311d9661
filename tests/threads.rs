//! Threads: one thread prepares and launches, another fences and finalizes,
//! on the real-time simulator, for thousands of runs, every output checked.
//! Launched runs and slot tokens cross threads through channels (both are
//! `Send`); the device binds nothing to a thread. Under both built-in
//! kernel ABIs: runclaim's layout and the a2a3 layout.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::abi::each;
use runclaim::driver::abi::Program;
use runclaim::sim::{LatencyModel, SimConfig};
use runclaim::{Callable, Device, Input, Launched, Outputs, Run, RunSpec, SlotToken};

const RUNS: u32 = 3000;

enum Flight<'r> {
    S0(Run<'r, Launched, 0>, u32),
    S1(Run<'r, Launched, 1>, u32),
}

enum Token<'r> {
    S0(SlotToken<'r, 0>),
    S1(SlotToken<'r, 1>),
}

fn input(i: u32) -> [u32; 4] {
    [i, i ^ 0xffff, i.wrapping_mul(7), 3]
}

#[test]
fn launch_on_one_thread_fence_on_another() {
    each(|abi| {
        let program = Program::new().mul(5).add(3);
        let lat = LatencyModel::zero().kernel(Duration::from_micros(5));
        // A watchdog no healthy run comes near: 3,000 times a run's AICore
        // kernel starts at once and waits for its AICPU kernel, and a host
        // preempted between the two submissions for longer would fault it.
        let sim = abi.real_time(
            SimConfig::default()
                .latency(lat)
                .watchdog(Duration::from_secs(2)),
        );
        let mut dev = Device::<_, 2>::open(sim.clone(), abi.config()).unwrap();
        let runner = dev.publish(&[Callable::program("f", &program)]).unwrap();
        let code = runner.code("f").unwrap();
        let (launched_tx, launched_rx) = mpsc::sync_channel::<Flight<'_>>(2);
        let (token_tx, token_rx) = mpsc::sync_channel::<Token<'_>>(2);
        token_tx
            .send(Token::S0(runner.take_slot::<0>().unwrap()))
            .unwrap();
        token_tx
            .send(Token::S1(runner.take_slot::<1>().unwrap()))
            .unwrap();
        let checked = std::thread::scope(|s| {
            let runner = &runner;
            s.spawn(move || {
                for i in 0..RUNS {
                    let data = input(i);
                    let spec = RunSpec::new(code, Input::Host(&data));
                    let flight = match token_rx.recv().unwrap() {
                        Token::S0(t) => {
                            Flight::S0(runner.prepare(t, spec).unwrap().launch().unwrap(), i)
                        }
                        Token::S1(t) => {
                            Flight::S1(runner.prepare(t, spec).unwrap().launch().unwrap(), i)
                        }
                    };
                    launched_tx.send(flight).unwrap();
                }
            });
            let fencer = s.spawn(move || {
                let (mut o0, mut o1) = (Outputs::<0>::new(4), Outputs::<1>::new(4));
                let mut checked = 0u32;
                for (next, flight) in (0u32..).zip(launched_rx) {
                    let (values, i, token) = match flight {
                        Flight::S0(run, i) => {
                            let done = run.fence().unwrap().finalize(&mut o0).unwrap();
                            (o0.values().to_vec(), i, Token::S0(done.token))
                        }
                        Flight::S1(run, i) => {
                            let done = run.fence().unwrap().finalize(&mut o1).unwrap();
                            (o1.values().to_vec(), i, Token::S1(done.token))
                        }
                    };
                    assert_eq!(i, next, "runs arrive in launch order");
                    let want: Vec<u32> = input(i).iter().map(|&x| program.apply_lossy(x)).collect();
                    assert_eq!(values, want, "run {i}");
                    checked += 1;
                    // The launcher may have finished: a closed channel is fine.
                    let _ = token_tx.send(token);
                }
                checked
            });
            fencer.join().unwrap()
        });
        assert_eq!(checked, RUNS);
        let health = runner.health();
        assert!(health.poisoned.is_none() && health.in_flight == 0);
        assert!(
            sim.stats().max_queue_depth <= 3,
            "two runs in flight, never more"
        );
    });
}
