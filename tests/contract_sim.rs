//! The claim-contract suite and the pipeline suite on the simulator, used
//! directly.

mod common;

contract_suite!(common::Sim);

pipeline_suite!(common::Sim);

/// The contract suite launching every run through capture and replay
/// (`common::replaying`: a slot's first run captured, its later runs
/// replayed, recaptured when refused), and the pipeline suite with every
/// pipeline replaying its runs
/// ([`Pipeline::replay`](runclaim::Pipeline::replay)).
mod replay {
    crate::contract_suite!(crate::common::Replaying(crate::common::Sim));

    crate::pipeline_suite!(crate::common::Replaying(crate::common::Sim));

    /// And under the a2a3 kernel ABI.
    mod a2a3 {
        crate::contract_suite!(crate::common::Replaying(crate::common::SimA2a3));

        crate::pipeline_suite!(crate::common::Replaying(crate::common::SimA2a3));
    }
}

/// The same suites under the reference runtime's a2a3 kernel ABI: the
/// device speaks it (`A2a3Model`), the host builds its blocks and reads its
/// epoch-stamped records (`A2a3Abi`).
mod a2a3 {
    crate::contract_suite!(crate::common::SimA2a3);

    crate::pipeline_suite!(crate::common::SimA2a3);
}

/// The negative control of `every_contract_suite_function_is_listed`: the
/// check finds scenario functions however rustfmt wrapped them (and the
/// ones missing `pub`), leaves helpers out, and names what a list leaves
/// off or names wrongly.
#[test]
fn the_list_check_names_a_function_left_off() {
    let source = "
/// fn in_a_doc_comment<T: Target>(t: &T) {}
pub fn listed_one<T: Target>(t: &T) {
    fn nested_helper(x: u32) {}
}
pub fn wrapped_by_rustfmt_with_a_long_name<T: Target>(
    target: &T,
) {
}
fn not_pub<T: Target>(t: &T) {}
fn open<T: Target>(t: &T, sim: SimConfig) -> Device<T::D, 2> {
pub fn in_order<T: Target, const D: usize>(t: &T)
where
pub fn cfg() -> SimConfig {
";
    assert_eq!(
        common::listed::suite_functions(source),
        [
            "listed_one",
            "wrapped_by_rustfmt_with_a_long_name",
            "not_pub"
        ]
    );
    let all = [
        "listed_one",
        "wrapped_by_rustfmt_with_a_long_name",
        "not_pub",
    ];
    assert_eq!(common::listed::check(source, &all), Ok(()));
    let err = common::listed::check(source, &["listed_one", "not_pub"]).unwrap_err();
    assert!(
        err.contains(
            r#"never run; list them, and make them `pub`): ["wrapped_by_rustfmt_with_a_long_name"]"#
        ),
        "{err}"
    );
    let err = common::listed::check(source, &[&all[..], &["renamed_away"]].concat()).unwrap_err();
    assert!(err.ends_with(r#"in the source: ["renamed_away"]"#), "{err}");
    // And on the real suite: every scenario dropped from the list is named.
    let real = common::listed::suite_functions(common::suite::SOURCE);
    assert!(real.len() > 20, "the reader finds the suite: {real:?}");
    for dropped in &real {
        let rest: Vec<&str> = real
            .iter()
            .map(String::as_str)
            .filter(|f| f != dropped)
            .collect();
        let err = common::listed::check(common::suite::SOURCE, &rest).unwrap_err();
        assert!(err.contains(&format!("[{dropped:?}]")), "{err}");
    }
}

/// The replay helper's fallback (`common::replaying`), which no suite
/// target reaches (each captures): on a device that cannot capture, a
/// replaying target's runs are launched — the slot's first run asks, is
/// refused before any runtime call, and launches; its later runs launch
/// without asking — and the device counts no capture and no replay.
#[test]
fn the_replay_helper_launches_where_capture_is_unavailable() {
    use common::replaying::{Captures, Counts, LaunchVia};
    use runclaim::driver::abi::Program;
    use runclaim::sim::{SimConfig, SimDriver};
    use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};

    let sim = SimDriver::stepped(SimConfig::default().capture(false));
    let mut dev = Device::<_, 2>::open(sim, DeviceConfig::default()).unwrap();
    let runner = dev
        .publish(&[Callable::program("inc", &Program::new().add(1))])
        .unwrap();
    let mut caps = Captures::new(&common::Replaying(common::Sim));
    let code = runner.code("inc").unwrap();
    let (mut token, mut out) = (runner.take_slot::<0>().unwrap(), Outputs::<0>::new(1));
    for i in 0..3u32 {
        let prepared = runner.prepare(token, RunSpec::new(code, Input::Host(&[i])));
        let run = prepared.unwrap().launch_via(&mut caps).unwrap();
        token = run.fence().unwrap().finalize(&mut out).unwrap().token;
        assert_eq!(out.values(), &[i + 1]);
    }
    let launched = Counts {
        launched: 3,
        ..Counts::default()
    };
    assert_eq!(caps.counts(), launched);
    assert!(caps.refusals().is_empty(), "no recapture was asked for");
    let s = runner.device().stats();
    assert_eq!((s.launched, s.captures, s.replays), (3, 0, 0), "{s:?}");
}
