//! The contract suite's publication scenarios: ordering across a
//! publication, the AICore stream re-created for new code, code uploaded
//! behind the runner, publication names.

use runclaim::contract::{ErrorKind, ReplayRefusal};
use runclaim::driver::Driver;
use runclaim::driver::abi::Program;
use runclaim::{Callable, Input, Outputs, RunSpec};

use super::super::Target;
use super::super::replaying::{Captures, Counts, LaunchVia};
use super::{cfg, open, prog_add};

#[allow(
    clippy::many_single_char_names,
    reason = "a, b, c name the three callables, in the order they are published"
)]
pub fn ordering_chain_a_c_b_across_a_publication<T: Target>(t: &T) {
    // Two resident images: publishing B evicts A (least recently used) and
    // lands at A's address, where the old AICore stream still caches A.
    let mut dev = open(t, cfg().code_slots(2));
    let a = Callable::program("A", &Program::new().add(3));
    let c = Callable::program("C", &Program::new().mul(5));
    let b = Callable::program("B", &Program::new().xor(0x55).add(7));
    let x = [1u32, 2, 3, 1000];
    let expect = |v: u32| (((v + 3) * 5) ^ 0x55) + 7;
    {
        let runner = dev.publish(&[a.clone(), c.clone()]).unwrap();
        let mut caps = Captures::new(t);
        let (mut o0, mut o1) = (Outputs::<0>::new(8), Outputs::<1>::new(8));
        let ra = runner
            .prepare(
                runner.take_slot::<0>().unwrap(),
                RunSpec::new(runner.code("A").unwrap(), Input::Host(&x)),
            )
            .unwrap()
            .launch_via(&mut caps)
            .unwrap();
        let rc = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                RunSpec::new(runner.code("C").unwrap(), Input::Previous),
            )
            .unwrap()
            .launch_via(&mut caps)
            .unwrap();
        // Both in flight; finalize in reverse order.
        rc.fence().unwrap().finalize(&mut o1).unwrap();
        ra.fence().unwrap().finalize(&mut o0).unwrap();
        let mid: Vec<u32> = x.iter().map(|v| (v + 3) * 5).collect();
        assert_eq!(o1.values(), &mid[..]);
    }
    let before = t.stats(dev.driver()).streams_created;
    let runner = dev.publish(&[b]).unwrap();
    let mut caps = Captures::new(t);
    let mut o0 = Outputs::<0>::new(8);
    runner
        .prepare(
            runner.take_slot::<0>().unwrap(),
            RunSpec::new(runner.code("B").unwrap(), Input::Previous),
        )
        .unwrap()
        .launch_via(&mut caps)
        .unwrap()
        .fence()
        .unwrap()
        .finalize(&mut o0)
        .unwrap();
    let want: Vec<u32> = x.iter().map(|&v| expect(v)).collect();
    assert_eq!(
        o0.values(),
        &want[..],
        "exact final values: order and fresh code"
    );
    let s = t.stats(runner.device().driver());
    assert_eq!(
        s.streams_created,
        before + 1,
        "the AICore stream was re-created"
    );
    assert_eq!(s.stale_executions, 0);
}

pub fn a_b_a_publication_recreates_the_aicore_stream_each_time<T: Target>(t: &T) {
    let mut dev = open(t, cfg().code_slots(1));
    let a = Callable::program("f", &Program::new().add(1));
    let b = Callable::program("f", &Program::new().mul(10));
    let mut created = Vec::new();
    for (callable, want) in [(&a, 6u32), (&b, 50), (&a, 6), (&a, 6)] {
        let runner = dev.publish(std::slice::from_ref(callable)).unwrap();
        let mut o = Outputs::<0>::new(1);
        runner
            .run_serial(
                runner.take_slot::<0>().unwrap(),
                RunSpec::new(runner.code("f").unwrap(), Input::Host(&[5])),
                &mut o,
            )
            .unwrap();
        assert_eq!(o.values(), &[want]);
        created.push(t.stats(runner.device().driver()).streams_created);
    }
    // Open created 2 streams; A, B, A each re-create the AICore stream once;
    // the final dedup hit re-creates nothing.
    assert_eq!(created, vec![3, 4, 5, 5]);
    assert_eq!(t.stats(dev.driver()).stale_executions, 0);
    assert_eq!(dev.stats().aicore_recreations, 3);
}

/// Code uploaded straight through `Device::driver()` between a slot's runs
/// (another user of the NPU) changes no run's values: the AICore stream is
/// re-created for the new code, and — replaying — the slot's capture, made
/// before the upload, is refused as stale and captured again.
pub fn code_uploaded_behind_the_runner_changes_no_run<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    let mut o0 = Outputs::<0>::new(1);
    let mut token = runner.take_slot::<0>().unwrap();
    for i in 0..4u32 {
        if i == 2 {
            let d = runner.device().driver();
            let other = d.register_code(&Program::new().mul(7).encode()).unwrap();
            d.release_code(other.handle).unwrap();
        }
        let prepared = runner.prepare(token, RunSpec::new(code, Input::Host(&[i])));
        let run = prepared.unwrap().launch_via(&mut caps).unwrap();
        token = run.fence().unwrap().finalize(&mut o0).unwrap().token;
        assert_eq!(o0.values(), &[i + 1], "run {i}");
    }
    let s = runner.device().stats();
    assert_eq!(
        s.aicore_recreations, 2,
        "at the first launch, and after the upload"
    );
    let replaying = Counts::replaying(2, 2, 1);
    caps.expect(s, replaying);
    if t.replay() {
        assert_eq!(caps.refusals(), [ReplayRefusal::Stale]);
    }
}

/// Two callables with one name are refused before anything is registered,
/// naming the name; an unknown name is a failed *lookup*, not a prepare.
pub fn publication_names_are_unique_and_lookups_say_so<T: Target>(t: &T) {
    let mut dev = open(t, cfg());
    let probe = t.probe(dev.driver());
    let registrations = || probe().registrations;
    let before = registrations();
    let twice = [
        Callable::program("f", &Program::new().add(1)),
        Callable::program("f", &Program::new().mul(2)),
    ];
    let err = dev.publish(&twice).unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::DuplicateCallable("f".into()));
    assert_eq!(err.action(), runclaim::contract::Action::Publish);
    assert!(err.to_string().contains("\"f\""), "{err}");
    assert_eq!(registrations(), before, "refused before any registration");
    let runner = dev.publish(&[prog_add(1)]).unwrap();
    let err = runner.code("nope").unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::UnknownCallable("nope".into()));
    assert_eq!(err.action(), runclaim::contract::Action::Lookup);
    assert!(err.to_string().starts_with("lookup"), "{err}");
}
