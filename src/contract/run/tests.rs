//! The run types' own tests: their auto traits, and the erased form keeping the typed rules.

use super::*;
use crate::contract::outputs::ErasedOutputs;
use crate::contract::slot::{Claim, ErasedToken};
use static_assertions::{assert_impl_all, assert_not_impl_any};

assert_impl_all!(SlotToken<'static, 0>: Send, Sync);
assert_not_impl_any!(SlotToken<'static, 0>: Clone, Copy);
assert_impl_all!(Run<'static, Prepared, 0>: Send, Sync);
assert_impl_all!(Run<'static, Launched, 1>: Send, Sync);
assert_impl_all!(Run<'static, Fenced, 0>: Send, Sync);
assert_not_impl_any!(Run<'static, Launched, 0>: Clone, Copy);
assert_not_impl_any!(Finalized<'static, 0>: Clone, Copy);
assert_impl_all!(Outputs<0>: Send, Sync, Clone);
assert_impl_all!(ErasedToken<'static>: Send, Sync);
assert_not_impl_any!(ErasedToken<'static>: Clone, Copy);
assert_impl_all!(RunOf<Launched, ErasedToken<'static>>: Send, Sync);
assert_not_impl_any!(RunOf<Launched, ErasedToken<'static>>: Clone, Copy);

use crate::contract::{Callable, Device, DeviceConfig, ErrorKind, Input, RunSpec};
use crate::driver::abi::Program;
use crate::sim::{SimConfig, SimDriver};

fn device() -> Device<SimDriver, 2> {
    let sim = SimDriver::stepped(SimConfig::default());
    Device::open(sim, DeviceConfig::default().max_elements(4)).unwrap()
}

/// An erased token is made only for a slot below `DEPTH`, turns typed
/// only as its own slot's, and holds and releases its slot as a typed
/// token does.
#[test]
fn erased_tokens_keep_the_typed_rules_at_run_time() {
    let mut dev = device();
    let runner = dev.publish(&[]).unwrap();
    let e = runner.take_erased(2).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::SlotOutOfRange { slot: 2, depth: 2 });
    let erased = runner.take_erased(1).unwrap();
    let lease = erased.lease();
    let erased = erased.typed::<0>().unwrap_err(); // slot 1's, not slot 0's
    assert_eq!(
        runner.take_slot::<1>().unwrap_err().kind(),
        &ErrorKind::SlotTaken
    );
    let typed = erased.typed::<1>().unwrap(); // lossless: the same lease
    assert_eq!((typed.index(), typed.lease()), (1, lease));
    drop(typed); // released once
    let again = runner.take_erased(1).unwrap();
    assert_eq!(
        runner.take_slot::<1>().unwrap_err().kind(),
        &ErrorKind::SlotTaken
    );
    drop(again);
    assert!(runner.take_slot::<1>().is_ok());
}

/// An erased run goes through the same transitions as a typed one and
/// hands back its erased token.
#[test]
fn an_erased_run_moves_through_the_states() {
    let mut dev = device();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let spec = RunSpec::new(runner.code("f").unwrap(), Input::Host(&[1, 2]));
    let run = runner
        .prepare_claim(runner.take_erased(1).unwrap(), spec)
        .unwrap();
    let run: RunOf<Launched, ErasedToken<'_>> = run.launch().unwrap();
    assert_eq!((run.slot(), run.seq()), (1, 1));
    let mut out = ErasedOutputs::new(1, 4);
    let (token, wall) = run.fence().unwrap().finalize(&mut out).unwrap();
    assert_eq!((out.values(), wall.slot, token.slot()), (&[2, 3][..], 1, 1));
}

/// The erased form of E0308: an erased run finalizing into another
/// slot's buffer is a runclaim bug — a panic in debug builds, refused
/// (the run handed back, nothing read) in release.
#[test]
#[cfg_attr(
    debug_assertions,
    should_panic(expected = "another slot's outputs buffer")
)]
fn an_erased_run_finalizes_only_into_its_own_slots_buffer() {
    let mut dev = device();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let spec = RunSpec::new(runner.code("f").unwrap(), Input::Host(&[1]));
    let run = runner
        .prepare_claim(runner.take_erased(0).unwrap(), spec)
        .unwrap();
    let fenced = run.launch().unwrap().fence().unwrap();
    let mut other = ErasedOutputs::new(1, 4);
    let err = fenced.finalize(&mut other).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::InvariantBroken(_)));
    assert!(other.values().is_empty());
    let mut own = ErasedOutputs::new(0, 4);
    assert!(err.into_value().finalize(&mut own).is_ok());
}
