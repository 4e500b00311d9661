//! No ordering breaks the contract: random sequences of prepare / launch /
//! `try_fence` / fence (with and without timeout) / finalize / drop / forget /
//! publish (new code, dedup hits, A → B → A) / drain / device steps, run on
//! the real API over the stepped simulator and compared with the reference
//! model (`common::model`) after every step, at depth 2 and depth 3 — first
//! with no faults (every outcome predicted exactly), then with injected
//! faults (failed driver calls, kernel faults, lost events, run errors:
//! every outcome within the documented set, every invariant kept).
//!
//! Each case draws its kernel ABI (runclaim's own or a2a3's: the simulator
//! speaking it, the device opened with its adapter), so every property runs
//! under both, on the same kind of sequences and against the same model,
//! in the time one took.
//!
//! Cases: `PROPTEST_CASES` (CI sets 256; unset, 128, so that a run of this
//! binary on a loaded 2-core machine stays around ten seconds). A long soak:
//! `PROPTEST_CASES=20000 cargo test --release --test proptest_contract`.

mod common;

use common::abi::Abi;
use common::model::{FaultOp, In, MAX_ELEMS, Op, run_case_under};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

fn input() -> impl Strategy<Value = In> {
    prop_oneof![
        6 => prop::collection::vec(any::<u32>(), 1..=MAX_ELEMS).prop_map(In::Host),
        1 => Just(In::Host(Vec::new())),
        1 => Just(In::TooLong),
        4 => Just(In::Previous),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let slot = 0..4usize;
    prop_oneof![
        24 => (slot.clone(), 0..3usize, input(), 0..16u8).prop_map(|(s, c, i, h)| Op::Advance(s, c, i, h)),
        2 => slot.clone().prop_map(Op::Take),
        2 => (slot.clone(), 0..3usize, input()).prop_map(|(s, c, i)| Op::Prepare(s, c, i)),
        2 => slot.clone().prop_map(Op::Launch),
        2 => slot.clone().prop_map(Op::TryFence),
        2 => slot.clone().prop_map(Op::FenceShort),
        2 => slot.clone().prop_map(Op::Fence),
        2 => (slot.clone(), prop_oneof![3 => 0..3u8, 1 => 3..120u8]).prop_map(|(s, p)| Op::FenceAsync(s, p)),
        2 => slot.clone().prop_map(Op::Finalize),
        1 => slot.clone().prop_map(Op::Drop),
        1 => slot.prop_map(Op::Forget),
        2 => (1..40u8).prop_map(Op::Step),
        1 => (0..4u8, 1..20u8).prop_map(|(w, n)| Op::StepStream(w, n)),
        1 => (0..4usize).prop_map(Op::Publish),
        1 => Just(Op::Drain),
    ]
}

fn fault() -> impl Strategy<Value = Op> {
    FaultOp::strategy().prop_map(Op::Inject)
}

/// Whether a strategy's sequences arm faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Faults {
    /// Never: outcomes are checked exactly.
    None,
    /// About one operation in ten arms one: outcomes are checked against
    /// the documented sets.
    Injected,
}

fn ops(faults: Faults) -> impl Strategy<Value = Vec<Op>> {
    let one = if faults == Faults::Injected {
        prop_oneof![9 => op(), 1 => fault()].boxed()
    } else {
        op().boxed()
    };
    prop::collection::vec(one, 10..80)
}

proptest! {
    // Failing cases are kept in proptest-regressions/ (committed) and
    // replayed first on every run.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptest_contract.txt",
        ))),
        cases: cases(),
        ..ProptestConfig::default()
    })]

    // Each case draws its kernel ABI: runclaim's own, or a2a3's (the
    // simulator speaking it, the device opened with its adapter) — the same
    // sequences, the same model, about half the cases each.

    #[test]
    fn depth2_matches_the_model(ops in ops(Faults::None), seed in any::<u64>(), abi in abi()) {
        run_case_under::<_, 2>(abi, &ops, seed, |s| s).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn depth3_matches_the_model(ops in ops(Faults::None), seed in any::<u64>(), abi in abi()) {
        run_case_under::<_, 3>(abi, &ops, seed, |s| s).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn depth2_keeps_every_invariant_under_faults(ops in ops(Faults::Injected), seed in any::<u64>(), abi in abi()) {
        run_case_under::<_, 2>(abi, &ops, seed, |s| s).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn depth3_keeps_every_invariant_under_faults(ops in ops(Faults::Injected), seed in any::<u64>(), abi in abi()) {
        run_case_under::<_, 3>(abi, &ops, seed, |s| s).map_err(TestCaseError::fail)?;
    }
}

/// `PROPTEST_CASES`, or 128 when it is unset.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

/// Either built-in kernel ABI.
fn abi() -> impl Strategy<Value = Abi> {
    prop_oneof![Just(Abi::Runclaim), Just(Abi::A2a3)]
}

/// The generated sequences exercise the contract: measured over 100 cases
/// of each strategy, runs are launched and checked, fences are awaited
/// and cancelled, and injected faults
/// fire. A property test whose cases mostly skip would prove nothing.
#[test]
fn generated_cases_do_real_work() {
    cases_do_real_work(Abi::Runclaim, 100);
}

/// The same measure under the a2a3 kernel ABI: its twins above do as much.
#[test]
fn a2a3_generated_cases_do_real_work() {
    cases_do_real_work(Abi::A2a3, 100);
}

/// Over `n` cases of each strategy (the thresholds are for 200, scaled).
fn cases_do_real_work(abi: Abi, n: usize) {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    for faults in [Faults::None, Faults::Injected] {
        let mut runner = TestRunner::deterministic();
        let (mut launched, mut finalized, mut calls, mut faulted) = (0, 0, 0, 0);
        let (mut cancelled, mut awaited, mut reclaimed) = (0, 0, 0);
        for seed in 0..n as u64 {
            let ops = ops(faults).new_tree(&mut runner).unwrap().current();
            let r = run_case_under::<_, 2>(abi, &ops, seed, |s| s).unwrap();
            launched += r.launched;
            finalized += r.finalized;
            calls += r.driver_calls;
            faulted += r.fault_outcomes;
            cancelled += r.cancelled_fences;
            awaited += r.awaited_fences;
            reclaimed += r.reclaimed;
        }
        println!(
            "{}, faults {faults:?}: {launched} launched, {finalized} finalized and checked, \
             {faulted} fault outcomes, {calls} driver calls, {awaited} awaited fences resolved and \
             {cancelled} cancelled ({reclaimed} slots reclaimed at a take) in {n} cases",
            abi.name()
        );
        assert!(
            reclaimed >= 2 * n / 200,
            "{}, faults {faults:?}: {reclaimed} abandoned slots reclaimed",
            abi.name()
        );
        assert!(
            cancelled >= 20 * n / 200 && awaited >= 20 * n / 200,
            "{}, faults {faults:?}: {awaited} awaited fences resolved, {cancelled} cancelled",
            abi.name()
        );
        let (min_launched, min_checked) = if faults == Faults::Injected {
            (400 * n / 200, 100 * n / 200)
        } else {
            (500 * n / 200, 200 * n / 200)
        };
        assert!(
            launched >= min_launched,
            "{}, faults {faults:?}: only {launched} runs launched",
            abi.name()
        );
        assert!(
            finalized >= min_checked,
            "{}, faults {faults:?}: only {finalized} runs checked",
            abi.name()
        );
        assert_eq!(
            faulted > 100 * n / 200,
            faults == Faults::Injected,
            "{}, faults {faults:?}: {faulted} fault outcomes",
            abi.name()
        );
    }
}
