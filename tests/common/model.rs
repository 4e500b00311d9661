//! A small, obviously-correct model of the claim contract, and a harness
//! that runs the same operations on the real API over the stepped simulator
//! and compares after every step.
//!
//! The model tracks each slot (free, token, prepared, launched, fenced,
//! forgotten, quarantined), the in-flight runs in launch order, the value
//! `Input::Previous` would read, the published programs and the poison. It
//! predicts every outcome exactly when no fault was injected; with faults it
//! accepts exactly the outcomes the contract documents and follows the one
//! that happened. The invariant checkers in [`super::checks`] run throughout.
#![allow(
    clippy::many_single_char_names,
    reason = "each step names m: the model, s: a slot, k: an error kind"
)]

use std::future::Future as _;
use std::time::Duration;

use proptest::prelude::{Just, Strategy, prop_oneof};
use runclaim::contract::{Depth, ErrorKind, RunId, Slot, SlotOf, SupportedDepth};
use runclaim::driver::Driver;
use runclaim::driver::abi::{Program, WallRecord};
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{
    Callable, CodeRef, Device, DeviceConfig, Fenced, Input, Launched, Outputs, Prepared, Run,
    RunSpec, Runner, SlotToken,
};

use super::abi::Abi;
use super::checks;

/// Elements an arena holds in the model's configuration.
pub const MAX_ELEMS: usize = 8;

/// The programs callables are drawn from. Program 3 fails with code 9.
pub fn program(i: usize) -> Program {
    match i % 5 {
        0 => Program::new().add(1),
        1 => Program::new().mul(3),
        2 => Program::new().xor(0x55).add(7),
        3 => Program::new().add(2).fail(9),
        _ => Program::new().mul(5).add(1),
    }
}

/// Publication sets (program indices). With two resident code images,
/// switching sets evicts and re-uploads: dedup hits and A → B → A arise.
pub const SETS: [&[usize]; 4] = [&[0, 1], &[1, 2], &[0, 3], &[4, 0]];

/// The simulator configuration of every case: 2 ms watchdog, two code slots.
pub fn sim_config(seed: u64) -> SimConfig {
    SimConfig::default()
        .watchdog(Duration::from_millis(2))
        .code_slots(2)
        .seed(seed)
}

/// A run's input in an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum In {
    /// Host values (empty = refused).
    Host(Vec<u32>),
    /// One element more than the arena holds.
    TooLong,
    /// The previous launched run's output.
    Previous,
}

/// A fault to inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// The `nth` call of driver operation `Op::ALL[op]` fails.
    Call(usize, u64),
    /// The `nth` kernel of this kind to start raises an exception.
    Kernel(Kernel, u64),
    /// The `nth` event record never completes.
    NeverEvent(u64),
    /// The `nth` AICPU kernel reports run error 77.
    RunError(u64),
}

impl FaultOp {
    /// Any fault, weighted towards failed driver calls.
    pub fn strategy() -> impl Strategy<Value = FaultOp> {
        let kernel = prop_oneof![Just(Kernel::Aicore), Just(Kernel::Aicpu)];
        let ops = runclaim::driver::Op::ALL.len();
        prop_oneof![
            3 => (0..ops, 1..6u64).prop_map(|(o, n)| FaultOp::Call(o, n)),
            1 => (kernel, 1..3u64).prop_map(|(k, n)| FaultOp::Kernel(k, n)),
            1 => (1..6u64).prop_map(FaultOp::NeverEvent),
            1 => (1..3u64).prop_map(FaultOp::RunError),
        ]
    }

    /// The simulator fault to inject.
    pub fn fault(self) -> Fault {
        match self {
            FaultOp::Call(op, nth) => Fault::FailCall {
                op: runclaim::driver::Op::ALL[op % runclaim::driver::Op::ALL.len()],
                nth,
            },
            FaultOp::Kernel(kernel, nth) => Fault::KernelFault { kernel, nth },
            FaultOp::NeverEvent(nth) => Fault::EventNeverCompletes { nth },
            FaultOp::RunError(nth) => Fault::RunError { nth, code: 77 },
        }
    }
}

/// One operation of a generated sequence. Slot indices are taken modulo
/// the depth; an operation that needs what the slot does not hold is skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// The slot's next natural transition: take, prepare (callable, input),
    /// launch, fence (by `.3 % 4`: 0 = poll, 1 = short, 2 = the configured
    /// timeout, 3 = awaited, polled at most 201 times), finalize — so sequences
    /// form whole lifecycles, interleaved across slots.
    Advance(usize, usize, In, u8),
    Take(usize),
    Prepare(usize, usize, In),
    Launch(usize),
    TryFence(usize),
    FenceShort(usize),
    Fence(usize),
    /// `fence_async`, polled at most `.1 + 1` times with one device step
    /// between polls, then dropped if unresolved (the run goes back to the
    /// device: its slot freed when the drop found it complete, else kept as
    /// a forgotten run's).
    FenceAsync(usize, u8),
    Finalize(usize),
    Drop(usize),
    Forget(usize),
    Step(u8),
    StepStream(u8, u8),
    Publish(usize),
    Drain,
    Inject(FaultOp),
}

// ----- the real side: one typed cell per slot ------------------------------------

/// What a cell holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Empty,
    Token,
    Prepared,
    Launched,
    Fenced,
}

enum Held<'r, const I: usize> {
    Empty,
    Token(SlotToken<'r, I>),
    Prepared(Run<'r, Prepared, I>),
    Launched(Run<'r, Launched, I>),
    Fenced(Run<'r, Fenced, I>),
}

/// The slot operations, object-safe so cells of different `I` share a `Vec`.
pub trait Cell<'r> {
    fn kind(&self) -> Kind;
    fn take(&mut self) -> Result<(), ErrorKind>;
    /// `Ok(run id)`; on `Err` the token is kept.
    fn prepare(&mut self, code: CodeRef<'r>, input: &In) -> Result<RunId, ErrorKind>;
    /// `Ok(seq)`; `Err((kind, came_back))`.
    fn launch(&mut self) -> Result<u64, (ErrorKind, bool)>;
    /// `timeout`: `None` = poll, `Some(None)` = configured, `Some(Some(t))`.
    #[allow(
        clippy::option_option,
        reason = "three ways to fence: poll, configured, explicit"
    )]
    fn fence(&mut self, timeout: Option<Option<Duration>>) -> Result<(), ErrorKind>;
    /// `fence_async`, polled at most `polls + 1` times with a step of `sim`
    /// between polls: `Some` with what it resolved to (a failed one keeps
    /// the run), `None` when it was dropped unresolved (the cell is empty).
    fn fence_async(&mut self, polls: u8, sim: &SimDriver) -> Option<Result<(), ErrorKind>>;
    /// Whether the slot's token can be taken now (it is given back at once).
    fn slot_free(&self) -> bool;
    /// `Ok((values, wall))`; on `Err` the token is kept.
    fn finalize(&mut self) -> Result<(Vec<u32>, WallRecord), ErrorKind>;
    fn drop_held(&mut self);
    fn forget_held(&mut self);
}

struct TypedCell<'r, 'p, Dr: Driver, const I: usize, const D: usize> {
    runner: &'r Runner<'p, Dr, D>,
    held: Held<'r, I>,
    out: Outputs<I>,
}

impl<'r, Dr: Driver, const I: usize, const D: usize> Cell<'r> for TypedCell<'r, '_, Dr, I, D>
where
    Slot<I>: SlotOf<D>,
{
    fn kind(&self) -> Kind {
        match self.held {
            Held::Empty => Kind::Empty,
            Held::Token(_) => Kind::Token,
            Held::Prepared(_) => Kind::Prepared,
            Held::Launched(_) => Kind::Launched,
            Held::Fenced(_) => Kind::Fenced,
        }
    }

    fn take(&mut self) -> Result<(), ErrorKind> {
        let t = self.runner.take_slot::<I>().map_err(|e| e.kind().clone())?;
        self.held = Held::Token(t);
        Ok(())
    }

    fn prepare(&mut self, code: CodeRef<'r>, input: &In) -> Result<RunId, ErrorKind> {
        let Held::Token(token) = std::mem::replace(&mut self.held, Held::Empty) else {
            unreachable!("prepare needs a token");
        };
        let long = [7u32; MAX_ELEMS + 1];
        let input = match input {
            In::Host(v) => Input::Host(v),
            In::TooLong => Input::Host(&long),
            In::Previous => Input::Previous,
        };
        match self.runner.prepare(token, RunSpec::new(code, input)) {
            Ok(run) => {
                let id = run.id();
                self.held = Held::Prepared(run);
                Ok(id)
            }
            Err(e) => {
                let kind = e.kind().clone();
                self.held = Held::Token(e.into_value());
                Err(kind)
            }
        }
    }

    fn launch(&mut self) -> Result<u64, (ErrorKind, bool)> {
        let Held::Prepared(run) = std::mem::replace(&mut self.held, Held::Empty) else {
            unreachable!("launch needs a prepared run");
        };
        match run.launch() {
            Ok(run) => {
                let seq = run.seq();
                self.held = Held::Launched(run);
                Ok(seq)
            }
            Err(e) => {
                let kind = e.kind().clone();
                match e.into_value() {
                    Some(run) => {
                        self.held = Held::Prepared(run);
                        Err((kind, true))
                    }
                    None => Err((kind, false)),
                }
            }
        }
    }

    fn fence(&mut self, timeout: Option<Option<Duration>>) -> Result<(), ErrorKind> {
        let Held::Launched(run) = std::mem::replace(&mut self.held, Held::Empty) else {
            unreachable!("fence needs a launched run");
        };
        let r = match timeout {
            None => run.try_fence(),
            Some(None) => run.fence(),
            Some(Some(t)) => run.fence_for(t),
        };
        match r {
            Ok(f) => {
                self.held = Held::Fenced(f);
                Ok(())
            }
            Err(e) => {
                let kind = e.kind().clone();
                self.held = Held::Launched(e.into_value());
                Err(kind)
            }
        }
    }

    fn fence_async(&mut self, polls: u8, sim: &SimDriver) -> Option<Result<(), ErrorKind>> {
        let Held::Launched(run) = std::mem::replace(&mut self.held, Held::Empty) else {
            unreachable!("fence_async needs a launched run");
        };
        let mut fut = run.fence_async();
        for _ in 0..=polls {
            let cx = &mut std::task::Context::from_waker(std::task::Waker::noop());
            if let std::task::Poll::Ready(r) = std::pin::Pin::new(&mut fut).poll(cx) {
                return Some(match r {
                    Ok(f) => {
                        self.held = Held::Fenced(f);
                        Ok(())
                    }
                    Err(e) => {
                        let kind = e.kind().clone();
                        self.held = Held::Launched(e.into_value());
                        Err(kind)
                    }
                });
            }
            sim.step();
        }
        None
    }

    fn slot_free(&self) -> bool {
        self.runner.take_slot::<I>().is_ok()
    }

    fn finalize(&mut self) -> Result<(Vec<u32>, WallRecord), ErrorKind> {
        let Held::Fenced(run) = std::mem::replace(&mut self.held, Held::Empty) else {
            unreachable!("finalize needs a fenced run");
        };
        match run.finalize(&mut self.out) {
            Ok(f) => {
                self.held = Held::Token(f.token);
                Ok((self.out.values().to_vec(), f.wall))
            }
            Err(e) => {
                let kind = e.kind().clone();
                self.held = Held::Token(e.into_value().into_token());
                Err(kind)
            }
        }
    }

    fn drop_held(&mut self) {
        self.held = Held::Empty;
    }

    fn forget_held(&mut self) {
        std::mem::forget(std::mem::replace(&mut self.held, Held::Empty));
    }
}

/// Builds the cells of a depth-`D` runner.
pub trait CellsFor<const D: usize> {
    /// One cell per slot.
    fn cells<'r, 'p, Dr: Driver>(runner: &'r Runner<'p, Dr, D>) -> Vec<Box<dyn Cell<'r> + 'r>>;
}

/// The cell factory.
pub struct Cells;

fn cell<'r, 'p, Dr: Driver, const I: usize, const D: usize>(
    runner: &'r Runner<'p, Dr, D>,
) -> Box<dyn Cell<'r> + 'r>
where
    Slot<I>: SlotOf<D>,
{
    Box::new(TypedCell::<Dr, I, D> {
        runner,
        held: Held::Empty,
        out: Outputs::new(MAX_ELEMS),
    })
}

impl CellsFor<2> for Cells {
    fn cells<'r, 'p, Dr: Driver>(r: &'r Runner<'p, Dr, 2>) -> Vec<Box<dyn Cell<'r> + 'r>> {
        vec![cell::<Dr, 0, 2>(r), cell::<Dr, 1, 2>(r)]
    }
}

impl CellsFor<3> for Cells {
    fn cells<'r, 'p, Dr: Driver>(r: &'r Runner<'p, Dr, 3>) -> Vec<Box<dyn Cell<'r> + 'r>> {
        vec![
            cell::<Dr, 0, 3>(r),
            cell::<Dr, 1, 3>(r),
            cell::<Dr, 2, 3>(r),
        ]
    }
}

// ----- the model ---------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
struct MRun {
    id: u64,
    program: usize,
    input: In,
    seq: u64,
    /// Values the run computes (`None`: unknown after a fault).
    expected: Option<Vec<u32>>,
    /// Observed complete (by a fence).
    complete: bool,
}

/// What a queue proven quiet leaves of the chain value (what
/// `Input::Previous` reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChainAfter {
    /// What it was: no fault can have touched the device's copy.
    Kept,
    /// Faults were injected (and a drain took streams or slots back): the
    /// device may have nothing to chain from, so the model expects nothing.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum MSlot {
    Free,
    Token,
    Prepared(MRun),
    Launched(MRun),
    Fenced(MRun),
    /// A launched run that was `mem::forget`-ed: in flight, no handle.
    Forgotten(MRun),
    /// A launched run whose awaited fence was dropped unresolved: in
    /// flight, no handle; the slot's next take reclaims it once the device
    /// proves it complete.
    Abandoned(MRun),
    /// A token (alone or in a prepared / fenced run) that was forgotten.
    LostToken,
    Quarantined,
}

/// The model's state.
#[derive(Debug)]
pub struct Model {
    slots: Vec<MSlot>,
    /// Programs of the current publication.
    set: Vec<usize>,
    /// What `Input::Previous` reads: `Some(None)` = a value the model lost
    /// track of (after a fault), `None` = nothing to chain from.
    #[allow(
        clippy::option_option,
        reason = "nothing / unknown / known: three states"
    )]
    chain: Option<Option<Vec<u32>>>,
    poisoned: bool,
    /// A fault was injected in this case: outcomes are checked against the
    /// documented sets instead of exactly.
    faulty: bool,
    /// Injected run errors not yet observed.
    run_errors_armed: u32,
    /// Run ids in launch order (AICore kernel submitted).
    pub launched: Vec<u64>,
    /// Runs whose AICPU kernel was submitted too (not partial launches).
    pub launched_aicpu: Vec<u64>,
    /// Runs finalized with checked values.
    pub finalized: usize,
    /// Errors accepted because a fault was injected.
    pub fault_outcomes: usize,
    /// Awaited fences dropped unresolved.
    pub cancelled_fences: usize,
    /// Awaited fences that resolved.
    pub awaited_fences: usize,
    /// Abandoned runs' slots reclaimed at a take.
    pub reclaimed: usize,
}

impl Model {
    fn new(depth: usize, set: usize) -> Self {
        Model {
            slots: vec![MSlot::Free; depth],
            set: SETS[set].to_vec(),
            chain: None,
            poisoned: false,
            faulty: false,
            run_errors_armed: 0,
            launched: Vec::new(),
            launched_aicpu: Vec::new(),
            finalized: 0,
            fault_outcomes: 0,
            cancelled_fences: 0,
            awaited_fences: 0,
            reclaimed: 0,
        }
    }

    fn in_flight(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| {
                matches!(
                    s,
                    MSlot::Launched(_) | MSlot::Forgotten(_) | MSlot::Abandoned(_)
                )
            })
            .count()
    }

    fn quarantined(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| self.slots[i] == MSlot::Quarantined)
            .collect()
    }

    /// Every run launched after `seq` that is known complete proves this
    /// one complete: streams are FIFO.
    fn surely_complete(&self, seq: u64) -> bool {
        self.slots.iter().any(|s| match s {
            MSlot::Launched(r) | MSlot::Fenced(r) => r.seq > seq && r.complete,
            _ => false,
        })
    }

    /// All handles dropped: what each slot becomes.
    fn drop_all(&mut self) {
        for s in &mut self.slots {
            *s = match s {
                MSlot::Forgotten(_)
                | MSlot::Abandoned(_)
                | MSlot::LostToken
                | MSlot::Quarantined => s.clone(),
                _ => MSlot::Free,
            };
        }
    }

    /// A drain or publication proved the queue quiet.
    fn quiet(&mut self, chain: ChainAfter) {
        for s in &mut self.slots {
            *s = MSlot::Free;
        }
        self.poisoned = false;
        if chain == ChainAfter::Unknown {
            self.chain = None;
        }
    }
}

/// Why a case failed: an invariant, with the step it broke at.
pub type CaseResult = Result<CaseReport, String>;

/// What a case did.
#[derive(Debug, Default, Clone, Copy)]
pub struct CaseReport {
    pub launched: usize,
    pub finalized: usize,
    pub driver_calls: u64,
    /// Errors the model accepted because a fault had been injected.
    pub fault_outcomes: usize,
    /// Awaited fences dropped unresolved, and resolved.
    pub cancelled_fences: usize,
    pub awaited_fences: usize,
    /// Abandoned runs' slots reclaimed at a take.
    pub reclaimed: usize,
}

fn expected(which: usize, input: &[u32]) -> Vec<u32> {
    let p = program(which);
    input.iter().map(|&x| p.apply_lossy(x)).collect()
}

/// The documented outcome sets, checked in faulty mode.
fn allowed(what: &str, kind: &ErrorKind, allowed: &[fn(&ErrorKind) -> bool]) -> Result<(), String> {
    checks::own_records(kind)?;
    if allowed.iter().any(|f| f(kind)) {
        Ok(())
    } else {
        Err(format!("{what}: unexpected error {kind}"))
    }
}

fn is_driver(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Driver(_))
}
/// A device fault: this run's own, or an earlier run's that it met on its
/// own events (queued behind the fault, its kernels never ran).
fn is_fault(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Fault(_) | ErrorKind::FaultAhead { .. })
}
fn is_poisoned(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Poisoned(_))
}
fn is_timeout(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Timeout { .. } | ErrorKind::NotReady)
}
/// The launch reached the device but no fence can observe it: its own
/// failure, or an earlier run's fault that it met.
fn is_lost(k: &ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::PartialLaunch(_) | ErrorKind::FenceNotRecorded(_) | ErrorKind::FaultAhead { .. }
    )
}
fn is_no_chain(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::NoChainValue)
}
/// Code memory full: a pin whose release an injected failure refused
/// stays until retried, so new code may not fit.
fn is_code_full(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::CodeDoesNotFit { .. })
}
fn is_undrained(k: &ErrorKind) -> bool {
    matches!(k, ErrorKind::Undrained { .. })
}

/// Runs `ops` on a depth-`D` device over `wrap(sim)` and the model, checking
/// every invariant after every step (runclaim's kernel ABI).
pub fn run_case<Dr, const D: usize>(
    ops: &[Op],
    seed: u64,
    wrap: impl Fn(SimDriver) -> Dr,
) -> CaseResult
where
    Dr: Driver + 'static,
    Depth<D>: SupportedDepth,
    Cells: CellsFor<D>,
{
    run_case_under::<Dr, D>(Abi::Runclaim, ops, seed, wrap)
}

/// [`run_case`] with the simulator speaking `abi` and the device opened
/// with its adapter: the same model, the same checks.
#[allow(
    clippy::too_many_lines,
    reason = "the epoch / session loop reads best in one place"
)]
pub fn run_case_under<Dr, const D: usize>(
    abi: Abi,
    ops: &[Op],
    seed: u64,
    wrap: impl Fn(SimDriver) -> Dr,
) -> CaseResult
where
    Dr: Driver + 'static,
    Depth<D>: SupportedDepth,
    Cells: CellsFor<D>,
{
    let sim = abi.stepped(sim_config(seed));
    let cfg = abi.with(DeviceConfig::default().max_elements(MAX_ELEMS));
    let mut dev = Device::<_, D>::open(wrap(sim.clone()), cfg).map_err(|e| format!("open: {e}"))?;
    let fence_steps = u64::try_from(dev.fence_timeout().as_micros()).unwrap();
    // Every single operation waits at most once per slot plus a drain.
    let bound = (D as u64 + 2) * fence_steps + 1_000;
    let mut model = Model::new(D, 0);
    let mut i = 0;
    let mut report = CaseReport::default();
    let mut publishes = 0;
    'epochs: loop {
        let callables: Vec<Callable> = model
            .set
            .iter()
            .map(|&p| Callable::program(format!("p{p}"), &program(p)))
            .collect();
        let before = sim.stats().steps;
        let outcome = dev.publish(&callables);
        checks::bounded("publish", sim.stats().steps - before, bound)?;
        let mut runner = match outcome {
            Ok(r) => r,
            Err(e) if model.faulty && publishes < 3 => {
                allowed(
                    "publish",
                    e.kind(),
                    &[is_driver, is_fault, is_undrained, is_code_full],
                )?;
                publishes += 1;
                sim.clear_faults();
                continue 'epochs;
            }
            Err(e) => return Err(format!("step {i}: publish: {e}")),
        };
        publishes = 0;
        model.quiet(if model.faulty {
            ChainAfter::Unknown
        } else {
            ChainAfter::Kept
        });
        'session: loop {
            let (mut end_epoch, mut drain_now) = (false, false);
            {
                let mut cells = Cells::cells(&runner);
                while i < ops.len() && !end_epoch && !drain_now {
                    let op = &ops[i];
                    i += 1;
                    let before = sim.stats().steps;
                    step(
                        op,
                        &mut cells,
                        &runner,
                        &mut model,
                        &sim,
                        &mut end_epoch,
                        &mut drain_now,
                    )
                    .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
                    let stats = sim.stats();
                    checks::no_stale_code(&stats)?;
                    checks::no_busy_destroy(&stats)?;
                    checks::bounded(&format!("step {i} ({op:?})"), stats.steps - before, bound)?;
                    if !model.faulty {
                        checks::health(&runner.health(), false, model.in_flight(), &[])
                            .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
                    }
                    if let Op::Publish(s) = op {
                        model.set = SETS[*s % SETS.len()].to_vec();
                    }
                }
                // Every handle goes: launched runs wait for their fence.
                let before = sim.stats().steps;
                for c in &mut cells {
                    c.drop_held();
                }
                checks::bounded("dropping every run", sim.stats().steps - before, bound)?;
                model.drop_all();
            }
            if model.faulty {
                sync_quarantine(&runner, &mut model);
            }
            let last = i >= ops.len();
            if !(drain_now || last) {
                break 'session;
            }
            if last {
                sim.clear_faults();
            }
            let before = sim.stats().steps;
            let mut drained = runner.drain();
            // Refused, or a slot kept out of service by a refused graph
            // destroy: with the faults cleared, the next drain recovers.
            if drained.as_ref().map_or(true, |r| !r.kept.is_empty()) && model.faulty {
                sim.clear_faults();
                drained = runner.drain();
            }
            match drained {
                Ok(r) => model.quiet(
                    if model.faulty && (r.streams_recreated > 0 || r.released > 0) {
                        ChainAfter::Unknown
                    } else {
                        ChainAfter::Kept
                    },
                ),
                Err(e) => return Err(format!("step {i}: drain: {e}")),
            }
            checks::bounded("drain", sim.stats().steps - before, 2 * bound)?;
            checks::health(&runner.health(), false, 0, &[])?;
            let reclaimed = runner.health().reclaimed;
            if reclaimed != model.reclaimed as u64 {
                return Err(format!(
                    "the device reclaimed {reclaimed} abandoned slots, the model {}",
                    model.reclaimed
                ));
            }
            if last {
                // No slot is blocked for good.
                let mut cells = Cells::cells(&runner);
                for (s, c) in cells.iter_mut().enumerate() {
                    c.take()
                        .map_err(|e| format!("slot {s} blocked after the final drain: {e}"))?;
                }
                break 'epochs;
            }
        }
        drop(runner);
    }
    checks::device_order(&sim.trace(), &model.launched, &model.launched_aicpu)?;
    report.launched = model.launched.len();
    report.finalized = model.finalized;
    report.fault_outcomes = model.fault_outcomes;
    report.cancelled_fences = model.cancelled_fences;
    report.awaited_fences = model.awaited_fences;
    report.reclaimed = model.reclaimed;
    report.driver_calls = sim.stats().total_calls();
    drop(dev);
    let stats = sim.stats();
    checks::no_leaks(&stats)?;
    checks::no_busy_destroy(&stats)?;
    checks::no_stale_code(&stats)?;
    Ok(report)
}

/// In faulty mode, quarantine can happen silently (a dropped launched run
/// whose fence failed): take it from the device's report.
fn sync_quarantine<Dr: Driver, const D: usize>(runner: &Runner<'_, Dr, D>, model: &mut Model) {
    let h = runner.health();
    for q in h.quarantined.iter() {
        model.slots[q] = MSlot::Quarantined;
    }
    model.poisoned = h.poisoned.is_some();
}

fn step<'r, Dr: Driver, const D: usize>(
    op: &Op,
    cells: &mut [Box<dyn Cell<'r> + 'r>],
    runner: &'r Runner<'_, Dr, D>,
    m: &mut Model,
    sim: &SimDriver,
    end_epoch: &mut bool,
    drain_now: &mut bool,
) -> Result<(), String> {
    let slot = |s: usize| s % D;
    match op {
        Op::Advance(s, c, input, how) => {
            let next = match cells[slot(*s)].kind() {
                Kind::Empty => Op::Take(*s),
                Kind::Token => Op::Prepare(*s, *c, input.clone()),
                Kind::Prepared => Op::Launch(*s),
                Kind::Launched => match how % 4 {
                    0 => Op::TryFence(*s),
                    1 => Op::FenceShort(*s),
                    2 => Op::Fence(*s),
                    _ => Op::FenceAsync(*s, 200),
                },
                Kind::Fenced => Op::Finalize(*s),
            };
            return step(&next, cells, runner, m, sim, end_epoch, drain_now);
        }
        Op::Take(s) => step_take(cells, m, slot(*s))?,
        Op::Prepare(s, c, input) => step_prepare(cells, runner, m, slot(*s), *c, input)?,
        Op::Launch(s) => step_launch(cells, m, slot(*s))?,
        Op::TryFence(s) | Op::FenceShort(s) | Op::Fence(s) => step_fence(cells, m, op, slot(*s))?,
        Op::FenceAsync(s, polls) => step_fence_async(cells, runner, m, sim, slot(*s), *polls)?,
        Op::Finalize(s) => step_finalize(cells, m, slot(*s))?,
        Op::Drop(s) => step_drop_held(cells, runner, m, slot(*s)),
        Op::Forget(s) => step_forget(cells, m, slot(*s)),
        Op::Step(n) => {
            for _ in 0..*n {
                sim.step();
            }
        }
        Op::StepStream(which, n) => {
            let streams = sim.streams();
            if let Some(&st) = streams.get(*which as usize % streams.len().max(1)) {
                for _ in 0..*n {
                    sim.step_stream(st);
                }
            }
        }
        Op::Publish(_) => *end_epoch = true,
        Op::Drain => *drain_now = true,
        Op::Inject(f) => {
            m.faulty = true;
            if let FaultOp::RunError(_) = f {
                m.run_errors_armed += 1;
            }
            sim.inject(f.fault());
        }
    }
    Ok(())
}

/// `Op::Take`: one step of the case.
fn step_take<'r>(
    cells: &mut [Box<dyn Cell<'r> + 'r>],
    m: &mut Model,
    s: usize,
) -> Result<(), String> {
    if cells[s].kind() != Kind::Empty {
        return Ok(());
    }
    let r = cells[s].take();
    if let MSlot::Abandoned(run) = &m.slots[s] {
        // Reclaimed when the device proved the run complete (a run
        // the model knows complete must be); otherwise in flight.
        let must = !m.faulty && m.surely_complete(run.seq);
        match r {
            Ok(()) => {
                m.reclaimed += 1;
                m.slots[s] = MSlot::Token;
            }
            Err(ErrorKind::SlotInFlight { .. }) if !must => {}
            Err(ErrorKind::SlotQuarantined { .. }) if m.faulty => {
                m.slots[s] = MSlot::Quarantined;
            }
            r => {
                return Err(format!("take: got {r:?}, model slot {:?}", m.slots[s]));
            }
        }
        return Ok(());
    }
    let want: Option<fn(&ErrorKind) -> bool> = match &m.slots[s] {
        MSlot::Free => None,
        MSlot::Token | MSlot::Prepared(_) | MSlot::Fenced(_) | MSlot::LostToken => {
            Some(|k: &ErrorKind| matches!(k, ErrorKind::SlotTaken))
        }
        MSlot::Launched(_) | MSlot::Forgotten(_) | MSlot::Abandoned(_) => {
            Some(|k: &ErrorKind| matches!(k, ErrorKind::SlotInFlight { .. }))
        }
        MSlot::Quarantined => Some(|k: &ErrorKind| matches!(k, ErrorKind::SlotQuarantined { .. })),
    };
    match (r, want) {
        (Ok(()), None) => m.slots[s] = MSlot::Token,
        (Err(k), Some(f)) if f(&k) => {}
        (r, _) => return Err(format!("take: got {r:?}, model slot {:?}", m.slots[s])),
    }
    Ok(())
}

/// `Op::Prepare`: one step of the case.
fn step_prepare<'r, Dr: Driver, const D: usize>(
    cells: &mut [Box<dyn Cell<'r> + 'r>],
    runner: &'r Runner<'_, Dr, D>,
    m: &mut Model,
    s: usize,
    c: usize,
    input: &In,
) -> Result<(), String> {
    if cells[s].kind() != Kind::Token {
        return Ok(());
    }
    let p = m.set[c % m.set.len()];
    let code = runner
        .code(&format!("p{p}"))
        .map_err(|e| format!("code: {e}"))?;
    let r = cells[s].prepare(code, input);
    match (r, input) {
        (Err(ErrorKind::EmptyInput), In::Host(v)) if v.is_empty() => {}
        (Err(ErrorKind::InputTooLong { .. }), In::TooLong) => {}
        (Ok(id), In::Previous) => {
            m.slots[s] = MSlot::Prepared(MRun {
                id: id.get(),
                program: p,
                input: input.clone(),
                seq: 0,
                expected: None,
                complete: false,
            });
        }
        (Ok(id), In::Host(v)) if !v.is_empty() => {
            m.slots[s] = MSlot::Prepared(MRun {
                id: id.get(),
                program: p,
                input: input.clone(),
                seq: 0,
                expected: Some(expected(p, v)),
                complete: false,
            });
        }
        (Err(k), _) if m.faulty => {
            allowed("prepare", &k, &[is_driver, is_fault])?;
            m.fault_outcomes += 1;
            if is_fault(&k) {
                m.poisoned = true;
                m.chain = None;
            }
        }
        (r, _) => return Err(format!("prepare: got {r:?} for {input:?}")),
    }
    Ok(())
}

/// `Op::Launch`: one step of the case.
fn step_launch<'r>(
    cells: &mut [Box<dyn Cell<'r> + 'r>],
    m: &mut Model,
    s: usize,
) -> Result<(), String> {
    if cells[s].kind() != Kind::Prepared {
        return Ok(());
    }
    let MSlot::Prepared(mut run) = m.slots[s].clone() else {
        return Err(format!("cell prepared, model {:?}", m.slots[s]));
    };
    let r = cells[s].launch();
    match r {
        Ok(seq) => {
            if m.poisoned && !m.faulty {
                return Err("launched while poisoned".into());
            }
            if run.input == In::Previous {
                match &m.chain {
                    Some(Some(v)) => run.expected = Some(expected(run.program, v)),
                    Some(None) => run.expected = None,
                    None if m.faulty => run.expected = None,
                    None => return Err("chained launch with nothing to chain from".into()),
                }
            }
            run.seq = seq;
            m.chain = Some(run.expected.clone());
            m.launched.push(run.id);
            m.launched_aicpu.push(run.id);
            m.slots[s] = MSlot::Launched(run);
        }
        Err((ErrorKind::NoChainValue, true)) if m.chain.is_none() || m.faulty => {
            m.chain = None;
        }
        Err((k, back)) if m.faulty => {
            allowed(
                "launch",
                &k,
                &[is_driver, is_fault, is_poisoned, is_lost, is_no_chain],
            )?;
            m.fault_outcomes += 1;
            // A fault ahead met before anything was submitted hands
            // the run back; met after the AICore kernel, it is lost.
            let met_ahead = matches!(k, ErrorKind::FaultAhead { .. });
            if is_lost(&k) && !(met_ahead && back) {
                if back {
                    return Err("a lost launch handed the run back".into());
                }
                m.launched.push(run.id);
                let aicpu_queued = match &k {
                    ErrorKind::FenceNotRecorded(_) => true,
                    ErrorKind::FaultAhead { error, .. } => {
                        error.op() != runclaim::driver::Op::LaunchAicpu
                    }
                    _ => false,
                };
                if aicpu_queued {
                    m.launched_aicpu.push(run.id);
                }
                m.slots[s] = MSlot::Quarantined;
                m.poisoned = true;
                m.chain = None;
            } else if !back {
                return Err(format!("launch kept the run for {k}"));
            }
            if is_fault(&k) {
                m.poisoned = true;
                m.chain = None;
            }
        }
        Err((k, _)) => return Err(format!("launch: {k} (model chain {:?})", m.chain)),
    }
    Ok(())
}

/// `Op::TryFence`: one step of the case.
fn step_fence<'r>(
    cells: &mut [Box<dyn Cell<'r> + 'r>],
    m: &mut Model,
    op: &Op,
    s: usize,
) -> Result<(), String> {
    if cells[s].kind() != Kind::Launched {
        return Ok(());
    }
    let MSlot::Launched(mut run) = m.slots[s].clone() else {
        return Err(format!("cell launched, model {:?}", m.slots[s]));
    };
    let how = match op {
        Op::TryFence(_) => None,
        Op::FenceShort(_) => Some(Some(Duration::from_micros(5))),
        _ => Some(None),
    };
    let must = matches!(op, Op::Fence(_)) || m.surely_complete(run.seq);
    match cells[s].fence(how) {
        Ok(()) => {
            run.complete = true;
            m.slots[s] = MSlot::Fenced(run);
        }
        Err(k) if m.faulty => {
            allowed("fence", &k, &[is_driver, is_fault, is_timeout])?;
            m.fault_outcomes += usize::from(!matches!(k, ErrorKind::NotReady));
            if is_fault(&k)
                || matches!(
                    k,
                    ErrorKind::Timeout {
                        overran: Some(_),
                        ..
                    }
                )
            {
                m.poisoned = true;
                m.chain = None;
            }
        }
        Err(ErrorKind::NotReady) if !must => {}
        Err(ErrorKind::Timeout { overran: None, .. }) if !must && how.is_some() => {}
        Err(k) => return Err(format!("fence: {k} (a later run complete: {must})")),
    }
    Ok(())
}

/// `Op::FenceAsync`: one step of the case.
fn step_fence_async<'r, Dr: Driver, const D: usize>(
    cells: &mut [Box<dyn Cell<'r> + 'r>],
    runner: &'r Runner<'_, Dr, D>,
    m: &mut Model,
    sim: &SimDriver,
    s: usize,
    polls: u8,
) -> Result<(), String> {
    if cells[s].kind() != Kind::Launched {
        return Ok(());
    }
    let MSlot::Launched(mut run) = m.slots[s].clone() else {
        return Err(format!("cell launched, model {:?}", m.slots[s]));
    };
    let awaited = cells[s].fence_async(polls, sim);
    m.awaited_fences += usize::from(awaited.is_some());
    match awaited {
        Some(Ok(())) => {
            run.complete = true;
            m.slots[s] = MSlot::Fenced(run);
        }
        Some(Err(k)) if m.faulty => {
            allowed("awaited fence", &k, &[is_driver, is_fault, is_timeout])?;
            m.fault_outcomes += 1;
            if is_fault(&k)
                || matches!(
                    k,
                    ErrorKind::Timeout {
                        overran: Some(_),
                        ..
                    }
                )
            {
                m.poisoned = true;
                m.chain = None;
            }
        }
        // Healthy: no verdict can fall within a few steps.
        Some(Err(k)) => return Err(format!("awaited fence: {k}")),
        None => {
            // Cancelled. A run known complete resolves at its first
            // poll, so it cannot be cancelled.
            if !m.faulty && m.surely_complete(run.seq) {
                return Err(format!(
                    "an awaited fence of complete run #{} stayed pending",
                    run.id
                ));
            }
            m.cancelled_fences += 1;
            // The drop looks once: a run it sees complete gives its
            // slot back at once (no reclaim); otherwise the run is
            // abandoned, and a take reclaims the slot when the
            // device proves it complete. Without faults the model
            // knows which (a run it cannot prove complete is not
            // proven by the take either, in a stepped simulation);
            // after a fault the drop's look may have failed where
            // the take's succeeds, so either count is allowed.
            let before = runner.health().reclaimed;
            let free = cells[s].slot_free();
            let took = runner.health().reclaimed - before;
            match (free, took) {
                (true, 0) => m.slots[s] = MSlot::Free,
                (true, 1) if m.faulty => {
                    m.reclaimed += 1;
                    m.slots[s] = MSlot::Free;
                }
                (false, 0) => m.slots[s] = MSlot::Abandoned(run),
                _ => {
                    return Err(format!(
                        "a cancelled fence: slot free {free}, {took} slots reclaimed"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `Op::Finalize`: one step of the case.
fn step_finalize<'r>(
    cells: &mut [Box<dyn Cell<'r> + 'r>],
    m: &mut Model,
    s: usize,
) -> Result<(), String> {
    if cells[s].kind() != Kind::Fenced {
        return Ok(());
    }
    let MSlot::Fenced(run) = m.slots[s].clone() else {
        return Err(format!("cell fenced, model {:?}", m.slots[s]));
    };
    let fail = program(run.program).fail_code();
    match cells[s].finalize() {
        Ok((values, wall)) => {
            if fail != 0 {
                return Err(format!("run #{} should have failed with {fail}", run.id));
            }
            if wall.run_id != run.id || wall.slot as usize != s {
                return Err(format!("wall record {wall:?} for run #{} slot {s}", run.id));
            }
            if let Some(want) = &run.expected {
                checks::outputs(run.id, want, &values)?;
                m.finalized += 1;
            }
        }
        Err(ErrorKind::RunFailed { code }) if code == fail && fail != 0 => {}
        Err(ErrorKind::RunFailed { code: 77 }) if m.run_errors_armed > 0 => {
            m.run_errors_armed -= 1;
            m.fault_outcomes += 1;
        }
        Err(k) if m.faulty => {
            allowed("finalize", &k, &[is_driver, is_fault])?;
            m.fault_outcomes += 1;
        }
        Err(k) => return Err(format!("finalize of run #{}: {k}", run.id)),
    }
    m.slots[s] = MSlot::Token;
    Ok(())
}

/// `Op::Drop`: one step of the case.
fn step_drop_held<'r, Dr: Driver, const D: usize>(
    cells: &mut [Box<dyn Cell<'r> + 'r>],
    runner: &'r Runner<'_, Dr, D>,
    m: &mut Model,
    s: usize,
) {
    if cells[s].kind() == Kind::Empty {
        return;
    }
    cells[s].drop_held();
    m.slots[s] = MSlot::Free;
    if m.faulty {
        sync_quarantine(runner, m);
    }
}

/// `Op::Forget`: one step of the case.
fn step_forget<'r>(cells: &mut [Box<dyn Cell<'r> + 'r>], m: &mut Model, s: usize) {
    let kind = cells[s].kind();
    if kind == Kind::Empty {
        return;
    }
    cells[s].forget_held();
    m.slots[s] = match std::mem::replace(&mut m.slots[s], MSlot::Free) {
        MSlot::Launched(r) => MSlot::Forgotten(r),
        _ => MSlot::LostToken,
    };
}
