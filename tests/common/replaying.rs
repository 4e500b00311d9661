//! The contract suite's launches under [`Target::replay`]: a per-test
//! store of each slot's [`Capture`] ([`Captures`]) and the launch through
//! it ([`LaunchVia`]) — the first run of a slot captures, later runs of
//! that slot replay the held capture, a refusal that asks for a new
//! capture (another shape, a stale capture) recaptures, and a capture
//! refused as unavailable falls back to a launch for that slot from then
//! on: the pipeline lanes' policy (`src/contract/replay.rs`), here over
//! the typed `Run` API.
//!
//! A capture borrows the runner, so a test that publishes (or drains)
//! again drops its `Captures` first, as it drops its runs.

use runclaim::contract::{ContractStats, ErrorKind, ReplayRefusal, Slot, SlotOf};
use runclaim::driver::abi::Program;
use runclaim::driver::{Driver, Op};
use runclaim::sim::Fault;
use runclaim::{
    Callable, Capture, CodeRef, Device, Error, Input, Launched, Outputs, Prepared, Run, RunSpec,
    Runner,
};

use super::Target;

/// One slot's replay: no capture yet, its capture, or unavailable (the
/// driver or the adapter refused to capture: the slot launches).
pub enum Held<'r, const I: usize> {
    Wanted,
    Captured(Capture<'r, I>),
    Unavailable,
}

/// How the runs of a test were launched, as [`LaunchVia`] chose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Launched (replay off, or capture unavailable).
    pub launched: u64,
    /// Captured (a slot's first run, or a recapture).
    pub captured: u64,
    /// Replays of a held capture.
    pub replayed: u64,
    /// Replays refused as another shape or stale, then recaptured.
    pub recaptured: u64,
}

impl Counts {
    /// A replaying test's: `captured` (recaptures included), `replayed`
    /// held captures, `recaptured` after a refusal; none launched.
    pub fn replaying(captured: u64, replayed: u64, recaptured: u64) -> Self {
        Counts {
            launched: 0,
            captured,
            replayed,
            recaptured,
        }
    }
}

/// A test's captures, one per slot (up to depth 3, the suite's deepest);
/// launches through it are plain launches when the target does not replay.
pub struct Captures<'r> {
    on: bool,
    s0: Held<'r, 0>,
    s1: Held<'r, 1>,
    s2: Held<'r, 2>,
    counts: Counts,
    refused: Vec<ReplayRefusal>,
}

impl Captures<'_> {
    /// Empty: replaying when `t` replays.
    pub fn new<T: Target>(t: &T) -> Self {
        Captures {
            on: t.replay(),
            s0: Held::Wanted,
            s1: Held::Wanted,
            s2: Held::Wanted,
            counts: Counts::default(),
            refused: Vec::new(),
        }
    }

    /// How this test's runs were launched so far.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// Why each recapture's replay was refused, in order.
    pub fn refusals(&self) -> &[ReplayRefusal] {
        &self.refused
    }

    /// Asserts how this test's runs were launched — as `replaying` says
    /// when the target replays, every one launched when it does not — and
    /// that the device counted the same (`stats`, the runner's device's):
    /// every capture, and a replay for each capture's first run and each
    /// replay of a held capture. So a replaying target whose runs were
    /// silently launched fails here, on the device's count.
    pub fn expect(&self, stats: ContractStats, replaying: Counts) {
        let runs = replaying.launched + replaying.captured + replaying.replayed;
        let (want, device) = if self.on {
            let device = (replaying.captured, replaying.captured + replaying.replayed);
            (replaying, device)
        } else {
            let launched = Counts {
                launched: runs,
                ..Counts::default()
            };
            (launched, (0, 0))
        };
        assert_eq!(
            (stats.captures, stats.replays),
            device,
            "the device's (captures, replays): {stats:?}"
        );
        assert_eq!(self.counts, want, "how the runs were launched");
        assert_eq!(stats.launched, runs, "every run launched once: {stats:?}");
    }
}

/// Picks slot `I`'s entry of a [`Captures`].
pub trait HeldIn<const I: usize> {
    #[doc(hidden)]
    fn held<'a, 'r>(caps: &'a mut Captures<'r>) -> &'a mut Held<'r, I>;
}

impl HeldIn<0> for Slot<0> {
    fn held<'a, 'r>(caps: &'a mut Captures<'r>) -> &'a mut Held<'r, 0> {
        &mut caps.s0
    }
}

impl HeldIn<1> for Slot<1> {
    fn held<'a, 'r>(caps: &'a mut Captures<'r>) -> &'a mut Held<'r, 1> {
        &mut caps.s1
    }
}

impl HeldIn<2> for Slot<2> {
    fn held<'a, 'r>(caps: &'a mut Captures<'r>) -> &'a mut Held<'r, 2> {
        &mut caps.s2
    }
}

type Launch<'r, const I: usize> = Result<Run<'r, Launched, I>, Error<Option<Run<'r, Prepared, I>>>>;

/// Whether a replay's refusal asks for a new capture (what the run differs
/// in, or a stale capture), as the pipeline lanes decide.
fn recapture(kind: &ErrorKind) -> bool {
    matches!(kind, ErrorKind::Replay(r) if !matches!(**r,
        ReplayRefusal::DriverCannotCapture | ReplayRefusal::AdapterCannotReplay))
}

/// A prepared run launched through a test's [`Captures`].
pub trait LaunchVia<'r, const I: usize> {
    /// Launched, or (the target replaying) captured or replayed as its
    /// slot's entry says; errors as [`Run::launch`]'s, the prepared run
    /// handed back where nothing was submitted.
    fn launch_via(self, caps: &mut Captures<'r>) -> Launch<'r, I>;
}

impl<'r, const I: usize> LaunchVia<'r, I> for Run<'r, Prepared, I>
where
    Slot<I>: HeldIn<I>,
{
    fn launch_via(self, caps: &mut Captures<'r>) -> Launch<'r, I> {
        if !caps.on {
            caps.counts.launched += 1;
            return self.launch();
        }
        let (mut counts, mut refused) = (caps.counts, std::mem::take(&mut caps.refused));
        let held = <Slot<I> as HeldIn<I>>::held(caps);
        let r = launch_held(self, held, (&mut counts, &mut refused));
        (caps.counts, caps.refused) = (counts, refused);
        r
    }
}

fn launch_held<'r, const I: usize>(
    prepared: Run<'r, Prepared, I>,
    held: &mut Held<'r, I>,
    (counts, refused): (&mut Counts, &mut Vec<ReplayRefusal>),
) -> Launch<'r, I> {
    let prepared = match held {
        Held::Unavailable => {
            counts.launched += 1;
            return prepared.launch();
        }
        Held::Wanted => prepared,
        Held::Captured(capture) => match prepared.replay(capture) {
            Ok(run) => {
                counts.replayed += 1;
                return Ok(run);
            }
            Err(e) if recapture(e.kind()) => {
                counts.recaptured += 1;
                if let ErrorKind::Replay(r) = e.kind() {
                    refused.push(**r);
                }
                // The old graph goes before the new one is made.
                *held = Held::Wanted;
                match e.into_parts() {
                    (Some(prepared), _) => prepared,
                    (None, e) => return Err(e.map_value(|()| None)),
                }
            }
            Err(e) => return Err(e),
        },
    };
    match prepared.capture() {
        Ok((run, capture)) => {
            counts.captured += 1;
            *held = Held::Captured(capture);
            Ok(run)
        }
        Err(e) if matches!(e.kind(), ErrorKind::Replay(_)) => {
            *held = Held::Unavailable;
            counts.launched += 1;
            match e.into_parts() {
                (Some(prepared), _) => prepared.launch(),
                (None, e) => Err(e.map_value(|()| None)),
            }
        }
        Err(e) => Err(e),
    }
}

/// [`LaunchIn::launched`](super::LaunchIn::launched) through a test's
/// [`Captures`].
pub trait LaunchedVia<'r, const DEPTH: usize> {
    /// The launched (or captured, or replayed) run in slot `I`.
    fn launched_via<const I: usize>(
        &'r self,
        caps: &mut Captures<'r>,
        code: CodeRef<'r>,
        input: Input<'_>,
    ) -> Run<'r, Launched, I>
    where
        Slot<I>: SlotOf<DEPTH> + HeldIn<I>;
}

impl<'r, D: Driver, const DEPTH: usize> LaunchedVia<'r, DEPTH> for Runner<'_, D, DEPTH> {
    fn launched_via<const I: usize>(
        &'r self,
        caps: &mut Captures<'r>,
        code: CodeRef<'r>,
        input: Input<'_>,
    ) -> Run<'r, Launched, I>
    where
        Slot<I>: SlotOf<DEPTH> + HeldIn<I>,
    {
        let token = self.take_slot::<I>().expect("take the slot");
        self.prepare(token, RunSpec::new(code, input))
            .expect("prepare")
            .launch_via(caps)
            .expect("launch")
    }
}

/// Which `record_event` of a fresh device a slot's first run's fence is:
/// its second launched (the AICore kernel's completion record first), its
/// third captured (the capture's fork record first) — a fault armed on a
/// run's fence counts the records the target makes.
pub fn fence_record<T: Target>(t: &T) -> u64 {
    if t.replay() { 3 } else { 2 }
}

/// [`partial_launch_poisons_until_drained`](super::suite::partial_launch_poisons_until_drained)
/// replaying: the slot's first
/// run is captured, and a capture's calls reach nothing on the device
/// (captured tasks do not run; a replay is one call, queued whole or not
/// at all), so the failed `launch_aicpu` is no partial launch: the run
/// comes back, nothing is poisoned or quarantined, the same run captures
/// at the next try, and the slot's next run replays that capture.
pub fn a_failed_capture_call_reaches_nothing<T: Target>(t: &T, dev: &mut Device<T::D, 2>) {
    let runner = dev
        .publish(&[Callable::program("add1", &Program::new().add(1))])
        .unwrap();
    let mut caps = Captures::new(t);
    let code = runner.code("add1").unwrap();
    t.inject(
        runner.device().driver(),
        Fault::FailCall {
            op: Op::LaunchAicpu,
            nth: 1,
        },
    );
    let spec = RunSpec::new(code, Input::Host(&[1]));
    let err = runner
        .prepare(runner.take_slot::<0>().unwrap(), spec)
        .unwrap()
        .launch_via(&mut caps)
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Driver(e) if e.op() == Op::LaunchAicpu),
        "{err}"
    );
    let h = runner.health();
    assert_eq!((h.poisoned, h.quarantined.len(), h.in_flight), (None, 0, 0));
    let prepared = err
        .into_value()
        .expect("nothing was submitted: the run comes back");
    let mut o = Outputs::<0>::new(1);
    let run = prepared.launch_via(&mut caps).unwrap();
    let token = run.fence().unwrap().finalize(&mut o).unwrap().token;
    assert_eq!(o.values(), &[2]);
    let spec = RunSpec::new(code, Input::Host(&[4]));
    let run = runner.prepare(token, spec).unwrap().launch_via(&mut caps);
    run.unwrap().fence().unwrap().finalize(&mut o).unwrap();
    assert_eq!(o.values(), &[5]);
    caps.expect(runner.device().stats(), Counts::replaying(1, 1, 0));
}
