//! The pipeline keeps its promises under any sequence of use: random
//! submit / complete (blocking, or awaited and maybe cancelled) / device
//! steps / drop (mid-stream) / drain (blocking, or awaited to the end, or
//! awaited and cancelled midway) / publish / injected faults, run through
//! `Pipeline` on the stepped simulator and compared with a small reference
//! model after every step.
//!
//! The model is a queue of outstanding runs (tag, run id, slot, program,
//! expected values, whether a drain settled it), the value
//! `Input::Previous` would read, and the current publication. Its
//! checkers, each with its own message:
//!
//! - **values**: a completed run's outputs are its program applied to its
//!   input (or to the previous run's output, for a chained run);
//! - **order**: results come back in submission order;
//! - **lost**: `complete` never finds nothing while a run is outstanding;
//! - **duplicated**: no run comes back twice, or with nothing outstanding;
//! - **errors**: every error is one the model predicts (exactly, without
//!   faults) or one the contract documents for the injected fault;
//! - **handed back**: a refused submit returns its own spec and tag;
//! - **settled**: after an awaited drain cancelled midway, the runs it
//!   settled early are exactly those the model predicts (the oldest whose
//!   fences had completed when it last looked), and the device has the
//!   rest in flight (`drains.rs`);
//! - **exactly once**: at the end, the tags handed back (or dropped with a
//!   pipeline) are the tags submitted, each once, in submission order;
//! - the shared ones: every wait bounded in device steps, no stale code,
//!   device order = submission order, no leak at the end; without faults,
//!   the runner's health is the model's after every step.
//!
//! Each case ends by clearing the faults, completing every outstanding run,
//! draining, and running one more run: after a drain the pipeline goes on.
//! The negative controls at the end break the pipeline's answers on purpose
//! (an adapter between the pipeline and the harness) and require each
//! checker to catch its breakage.
//!
//! Every property, its real-work measure and the drop-bound checks also
//! run under the a2a3 kernel ABI (`a2a3_*`, or both in one test): the
//! simulator speaking it, the device opened with its adapter, the same
//! sequences and the same model. (The negative controls break the
//! harness's view of the pipeline, not the device: runclaim's ABI only.)
//!
//! Cases: `PROPTEST_CASES` (CI: 256). A long soak:
//! `PROPTEST_CASES=20000 cargo test --release --test proptest_pipeline`.

mod common;
#[path = "proptest_pipeline/drains.rs"]
mod drains;
#[path = "proptest_pipeline/drop_bound.rs"]
mod drop_bound;

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use common::abi::Abi;
use common::checks;
use common::model::{FaultOp, MAX_ELEMS, SETS, program, sim_config};
use drop_bound::total_bound;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use runclaim::contract::{
    Completed, Depth, DrainReport, Error, ErrorKind, RunId, SupportedDepth, Unfinished,
};
use runclaim::driver::abi::WallRecord;
use runclaim::sim::SimDriver;
use runclaim::{Callable, CodeRef, Device, DeviceConfig, Input, Pipeline, RunSpec};

/// A run's input.
#[derive(Debug, Clone, PartialEq, Eq)]
enum PIn {
    Host(Vec<u32>),
    /// Refused: empty.
    Empty,
    /// Refused: one element more than the arena holds.
    TooLong,
    /// The previous submitted run's output.
    Previous,
}

/// One step of a generated sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
enum POp {
    /// Submit a run of callable `.0` (of the current publication).
    Submit(usize, PIn),
    /// Complete the oldest run.
    Complete,
    /// Complete the oldest run by awaiting `complete_async`: polled up to
    /// `.0 + 1` times, one device step between polls, then dropped if it
    /// has not resolved (a cancelled call: nothing may be lost).
    CompleteAsync(u8),
    /// Advance the device this many actions.
    Step(u8),
    /// Drop the pipeline mid-stream and make a new one.
    Drop,
    /// `Pipeline::drain`.
    Drain,
    /// `Pipeline::drain_async`: polled up to `.0 + 1` times, one device
    /// step between polls, then dropped if it has not resolved (a
    /// cancelled drain: the runs it settled keep their outcomes).
    DrainAsync(u8),
    /// `Pipeline::drain_async` awaited to the end: polled, one device step
    /// between polls, until it resolves (within the drain's bound).
    DrainAwait,
    /// Drop the pipeline and the runner, publish set `.0`, go on.
    Publish(usize),
    Inject(FaultOp),
    /// `Pipeline::replay(.0)`: the runs submitted from now on replayed
    /// from their slots' captures (captured again when their shape
    /// differs), or launched.
    Replay(bool),
}

/// A deliberate breakage between the pipeline and the harness, for the
/// negative controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mutation {
    None,
    /// Flip a bit of the first completed run's first value.
    Corrupt,
    /// Hand the first two completions back in reverse order.
    Swap,
    /// Swallow the last pending run's result.
    Lose,
    /// Hand the last result back again when nothing is pending.
    Duplicate,
    /// Report the first completed run as failed.
    WrongError,
    /// Hand the wrong tag back with the first refused submit.
    WrongTagBack,
    /// The first awaited complete that is cancelled takes the oldest
    /// result with it (a future that is not cancel-safe).
    CancelTakes,
    /// The first awaited drain that is cancelled after settling a run
    /// takes the oldest outcome with it (a drain future that drops what
    /// it settled).
    DrainTakes,
    /// The model ignores what a cancelled drain settled early (it keeps
    /// those runs in flight).
    IgnoreEarlySettle,
    /// Drop the pipeline as it was dropped before its drop had one total
    /// bound: every pending run waited for with its own fresh budget (a
    /// `complete` fences as a run's drop waits), one after the other.
    DropPerRun,
}

/// An owned `complete` outcome.
#[derive(Debug, Clone)]
enum Got {
    /// An awaited `complete_async` dropped before it resolved.
    Cancelled,
    Nothing,
    Done {
        tag: u64,
        run: RunId,
        values: Vec<u32>,
        wall: WallRecord,
    },
    Failed {
        tag: u64,
        kind: ErrorKind,
    },
}

/// What `complete` (or `complete_async`) answered, owned.
fn owned(r: Result<Option<Completed<'_, '_, u64>>, Error<Unfinished<'_, u64>>>) -> Got {
    match r {
        Ok(None) => Got::Nothing,
        Ok(Some(d)) => Got::Done {
            tag: d.tag,
            run: d.run,
            values: d.values.to_vec(),
            wall: d.wall,
        },
        Err(e) => Got::Failed {
            kind: e.kind().clone(),
            tag: e.into_value().tag,
        },
    }
}

/// A refused submit: the error, the run it names, and what came back.
struct Refused<'s> {
    kind: ErrorKind,
    run: Option<RunId>,
    spec: RunSpec<'s>,
    tag: u64,
}

/// The pipeline as the harness sees it, with an optional breakage.
struct Pipe<'r, const D: usize> {
    inner: Pipeline<'r, SimDriver, D, u64>,
    mutation: Mutation,
    fired: bool,
    held: Option<Got>,
    last: Option<Got>,
}

impl<'r, const D: usize> Pipe<'r, D> {
    fn new(inner: Pipeline<'r, SimDriver, D, u64>, mutation: Mutation) -> Self {
        Pipe {
            inner,
            mutation,
            fired: false,
            held: None,
            last: None,
        }
    }

    fn submit<'s>(&mut self, spec: RunSpec<'s>, tag: u64) -> Result<RunId, Refused<'s>> {
        self.inner.submit(spec, tag).map_err(|e| {
            let (kind, run) = (e.kind().clone(), e.run());
            let back = e.into_value();
            let mut tag = back.tag;
            if self.mutation == Mutation::WrongTagBack && !self.fired {
                self.fired = true;
                tag += 1;
            }
            Refused {
                kind,
                run,
                spec: back.work,
                tag,
            }
        })
    }

    fn real(&mut self) -> Got {
        owned(self.inner.complete())
    }

    /// `complete_async`, polled at most `polls + 1` times with a step of
    /// `sim` between polls; dropped unresolved: [`Got::Cancelled`].
    fn real_async(&mut self, polls: u8, sim: &SimDriver) -> Got {
        let mut fut = self.inner.complete_async();
        for _ in 0..=polls {
            let cx = &mut Context::from_waker(Waker::noop());
            if let Poll::Ready(r) = Pin::new(&mut fut).poll(cx) {
                return owned(r);
            }
            sim.step();
        }
        drop(fut);
        if self.mutation == Mutation::CancelTakes && !self.fired && !self.inner.is_empty() {
            self.fired = true;
            let _ = self.real();
        }
        Got::Cancelled
    }

    fn complete(&mut self, via: Option<(u8, &SimDriver)>) -> Got {
        if let Some(held) = self.held.take() {
            return held;
        }
        let pending = self.inner.len();
        let mut got = match via {
            None => self.real(),
            Some((polls, sim)) => self.real_async(polls, sim),
        };
        let first_done = matches!(got, Got::Done { .. }) && !self.fired;
        match self.mutation {
            Mutation::Corrupt if first_done => {
                if let Got::Done { values, .. } = &mut got
                    && let Some(v) = values.first_mut()
                {
                    *v ^= 1;
                    self.fired = true;
                }
            }
            Mutation::Swap if !self.fired && pending >= 2 => {
                self.fired = true;
                self.held = Some(got);
                got = self.real();
            }
            Mutation::Lose if first_done && pending == 1 => {
                self.fired = true;
                got = Got::Nothing;
            }
            Mutation::Duplicate if !self.fired && matches!(got, Got::Nothing) => {
                if let Some(last) = self.last.clone() {
                    self.fired = true;
                    got = last;
                }
            }
            Mutation::WrongError if first_done => {
                self.fired = true;
                if let Got::Done { tag, .. } = got {
                    got = Got::Failed {
                        tag,
                        kind: ErrorKind::NotReady,
                    };
                }
            }
            _ => {}
        }
        if matches!(got, Got::Done { .. }) {
            self.last = Some(got.clone());
        }
        got
    }

    fn drain(&mut self) -> Result<DrainReport, ErrorKind> {
        self.inner.drain().map_err(|e| e.kind().clone())
    }

    /// Drops the pipeline (mid-stream or at the end).
    fn close(mut self) {
        if self.mutation == Mutation::DropPerRun {
            while !self.inner.is_empty() {
                let _ = self.real();
            }
        }
        drop(self);
    }
}

// ----- the model -----------------------------------------------------------------

#[derive(Debug, Clone)]
struct MRun {
    tag: u64,
    run: RunId,
    program: usize,
    /// `None`: not known (chained on a value the model lost after a fault).
    expected: Option<Vec<u32>>,
    /// Fenced and finalized early by a drain (no longer in flight).
    settled: bool,
    /// Settled by an awaited drain that was cancelled.
    early: bool,
    /// The slot (lane) the pipeline put it in.
    slot: usize,
    chained: bool,
}

/// What `Input::Previous` reads.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Chain {
    Nothing,
    Known(Vec<u32>),
    /// After a fault: some value, or nothing (`NoChainValue`).
    Unknown,
}

#[derive(Debug, Default, Clone, Copy)]
struct Report {
    submitted: usize,
    refused: usize,
    refused_full: usize,
    checked: usize,
    chained_checked: usize,
    run_failed: usize,
    dropped: usize,
    drains: usize,
    settled_by_drain: usize,
    publishes: usize,
    fault_outcomes: usize,
    max_pending: usize,
    /// Awaited completes dropped before they resolved.
    cancelled: usize,
    /// Awaited completes that resolved (checked as any other).
    awaited: usize,
    /// Awaited drains dropped before they resolved.
    drains_cancelled: usize,
    /// Awaited drains that resolved.
    drains_awaited: usize,
    /// Runs a cancelled drain settled early.
    settled_early: usize,
    /// Of those, runs whose values were checked at their `complete`.
    early_checked: usize,
    /// `Pipeline::replay` switched.
    replay_toggles: usize,
    /// Graph replays the device queued (captures' first replays included).
    replayed: usize,
}

struct Model {
    outstanding: VecDeque<MRun>,
    seen: HashSet<u64>,
    next_tag: u64,
    chain: Chain,
    set: usize,
    faulty: bool,
    run_errors_armed: u32,
    launched: Vec<u64>,
    launched_aicpu: Vec<u64>,
    /// Runs accepted by the current pipeline (the next one's lane).
    accepted_here: usize,
    /// Every accepted run's tag, in submission order.
    accepted: Vec<u64>,
    /// Every tag handed back by a `complete`, or dropped with a pipeline.
    returned: Vec<u64>,
    mutation: Mutation,
    report: Report,
}

impl Model {
    fn lose_track(&mut self) {
        if self.chain != Chain::Nothing {
            self.chain = Chain::Unknown;
        }
    }

    fn in_flight(&self) -> usize {
        self.outstanding.iter().filter(|r| !r.settled).count()
    }
}

fn expected(which: usize, input: &[u32]) -> Vec<u32> {
    let p = program(which);
    input.iter().map(|&x| p.apply_lossy(x)).collect()
}

fn is_lost_launch(k: &ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::PartialLaunch(_) | ErrorKind::FenceNotRecorded(_) | ErrorKind::FaultAhead { .. }
    )
}

/// Errors a submit may return after a fault (besides the exact ones).
fn submit_fault_error(k: &ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::Driver(_)
            | ErrorKind::Fault(_)
            | ErrorKind::Poisoned(_)
            | ErrorKind::NoChainValue
            | ErrorKind::SlotQuarantined { .. }
            | ErrorKind::Timeout { .. }
    ) || is_lost_launch(k)
}

/// Errors a completion may return after a fault (besides run errors).
fn complete_fault_error(k: &ErrorKind) -> bool {
    matches!(
        k,
        ErrorKind::Driver(_)
            | ErrorKind::Fault(_)
            | ErrorKind::FaultAhead { .. }
            | ErrorKind::Timeout { .. }
    )
}

// ----- the checkers --------------------------------------------------------------

fn check_order(got: u64, oldest: u64) -> Result<(), String> {
    if got == oldest {
        Ok(())
    } else {
        Err(format!(
            "out of order: run {got} came back, the oldest outstanding is {oldest}"
        ))
    }
}

fn check_not_lost(m: &Model, got: &Got) -> Result<(), String> {
    if matches!(got, Got::Nothing) && !m.outstanding.is_empty() {
        let tags: Vec<u64> = m.outstanding.iter().map(|r| r.tag).collect();
        return Err(format!(
            "lost: complete found nothing while runs {tags:?} are outstanding"
        ));
    }
    Ok(())
}

fn check_not_duplicated(m: &Model, tag: u64) -> Result<(), String> {
    if m.seen.contains(&tag) || m.outstanding.is_empty() {
        Err(format!(
            "duplicated: run {tag} came back again ({} outstanding)",
            m.outstanding.len()
        ))
    } else {
        Ok(())
    }
}

fn check_handed_back(r: &Refused<'_>, spec: RunSpec<'_>, tag: u64) -> Result<(), String> {
    if r.tag == tag && r.spec == spec {
        Ok(())
    } else {
        Err(format!(
            "handed back: a refused submit of run {tag} returned tag {}",
            r.tag
        ))
    }
}

fn unexpected(what: &str, k: &ErrorKind) -> String {
    format!("errors: {what}: unexpected error {k}")
}

// ----- the harness ---------------------------------------------------------------

/// What ended a pipeline's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    End,
    NewPipeline,
    Publish(usize),
}

fn run_case<const D: usize>(ops: &[POp], seed: u64, mutation: Mutation) -> Result<Report, String>
where
    Depth<D>: SupportedDepth,
{
    run_case_under::<D>(Abi::Runclaim, ops, seed, mutation)
}

/// [`run_case`] with the simulator speaking `abi` and the device opened
/// with its adapter.
#[allow(
    clippy::too_many_lines,
    reason = "the epoch / session loop in one place"
)]
fn run_case_under<const D: usize>(
    abi: Abi,
    ops: &[POp],
    seed: u64,
    mutation: Mutation,
) -> Result<Report, String>
where
    Depth<D>: SupportedDepth,
{
    let sim = abi.stepped(sim_config(seed));
    let cfg = abi.with(DeviceConfig::default().max_elements(MAX_ELEMS));
    let mut dev = Device::<_, D>::open(sim.clone(), cfg).map_err(|e| format!("open: {e}"))?;
    let fence_steps = u64::try_from(dev.fence_timeout().as_micros()).unwrap_or(u64::MAX);
    // One operation waits at most once per slot, plus a drain.
    let bound = (D as u64 + 2) * fence_steps + 1_000;
    let mut m = Model {
        outstanding: VecDeque::new(),
        seen: HashSet::new(),
        next_tag: 0,
        chain: Chain::Nothing,
        set: 0,
        faulty: false,
        run_errors_armed: 0,
        launched: Vec::new(),
        launched_aicpu: Vec::new(),
        accepted_here: 0,
        accepted: Vec::new(),
        returned: Vec::new(),
        mutation,
        report: Report::default(),
    };
    let mut i = 0;
    let mut attempts = 0;
    'epochs: loop {
        let callables: Vec<Callable> = SETS[m.set]
            .iter()
            .map(|&p| Callable::program(format!("p{p}"), &program(p)))
            .collect();
        let before = sim.stats().steps;
        let published = dev.publish(&callables);
        checks::bounded("publish", sim.stats().steps - before, bound)?;
        let mut runner = match published {
            Ok(r) => r,
            Err(e) if m.faulty && attempts < 3 => {
                // A pin whose release an injected failure refused stays
                // (until retried), so new code may not fit this once.
                if !complete_fault_error(e.kind())
                    && !matches!(
                        e.kind(),
                        ErrorKind::Undrained { .. } | ErrorKind::CodeDoesNotFit { .. }
                    )
                {
                    return Err(unexpected("publish", e.kind()));
                }
                attempts += 1;
                sim.clear_faults();
                m.lose_track();
                m.report.fault_outcomes += 1;
                continue 'epochs;
            }
            Err(e) => return Err(format!("step {i}: publish: {e}")),
        };
        attempts = 0;
        'sessions: loop {
            // A slot left quarantined by a dropped run needs a drain first.
            if !runner.health().quarantined.is_empty() {
                if !m.faulty {
                    return Err(format!("step {i}: quarantine without a fault"));
                }
                let before = sim.stats().steps;
                let mut drained = runner.drain();
                // A refused graph destroy keeps its slot out of service
                // (said by the report): with the faults cleared, the next
                // drain destroys it.
                if drained.as_ref().map_or(true, |r| !r.kept.is_empty()) {
                    sim.clear_faults();
                    drained = runner.drain();
                }
                let report = drained.map_err(|e| format!("step {i}: runner drain: {e}"))?;
                if !report.kept.is_empty() || !runner.health().quarantined.is_empty() {
                    return Err(format!(
                        "step {i}: a drain without faults kept {:?}",
                        report.kept
                    ));
                }
                checks::bounded("runner drain", sim.stats().steps - before, bound)?;
                m.lose_track();
            }
            let mut next = Next::End;
            {
                let codes: Vec<(usize, CodeRef<'_>)> = SETS[m.set]
                    .iter()
                    .map(|&p| runner.code(&format!("p{p}")).map(|c| (p, c)))
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("code: {e}"))?;
                let pipe = Pipeline::<_, D, u64>::new(&runner)
                    .map_err(|e| format!("step {i}: new pipeline: {e}"))?;
                let mut pipe = Pipe::new(pipe, mutation);
                m.accepted_here = 0;
                while i < ops.len() {
                    let op = &ops[i];
                    i += 1;
                    match op {
                        POp::Drop => next = Next::NewPipeline,
                        POp::Publish(s) => next = Next::Publish(*s),
                        _ => {}
                    }
                    if next != Next::End {
                        break;
                    }
                    let in_flight = runner.health().in_flight;
                    let before = sim.stats().steps;
                    step::<D>(op, &mut pipe, &codes, &mut m, &sim)
                        .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
                    let stats = sim.stats();
                    let took = stats.steps - before;
                    if matches!(op, POp::Drain | POp::DrainAwait | POp::DrainAsync(_)) {
                        // The drain's documented total bound, plus the one
                        // minimum slice (1 µs = 1 step) its last stream
                        // sync may ask for once the budget is spent. An
                        // awaited drain keeps the same bound, the steps
                        // between its polls included.
                        let what = format!("step {i}: drain ({in_flight} in flight)");
                        checks::bounded(&what, took, total_bound(in_flight, fence_steps) + 1)?;
                    }
                    checks::bounded(&format!("step {i} ({op:?})"), took, bound)?;
                    checks::no_stale_code(&stats)?;
                    checks::no_busy_destroy(&stats)?;
                    if !m.faulty {
                        checks::health(&runner.health(), false, m.in_flight(), &[])
                            .map_err(|e| format!("step {i} ({op:?}): {e}"))?;
                    }
                    m.report.max_pending = m.report.max_pending.max(m.outstanding.len());
                }
                if next == Next::End {
                    finish::<D>(&mut pipe, &codes, &mut m, &sim, bound)?;
                }
                // Dropping mid-stream waits for every launched run, within
                // the one documented total bound.
                let in_flight = runner.health().in_flight;
                let before = sim.stats().steps;
                pipe.close();
                let took = sim.stats().steps - before;
                let what = format!("step {i}: dropping the pipeline ({in_flight} in flight)");
                checks::bounded(&what, took, total_bound(in_flight, fence_steps))?;
                m.report.dropped += m.outstanding.len();
                m.returned.extend(m.outstanding.drain(..).map(|r| r.tag));
                if !m.faulty {
                    checks::health(&runner.health(), false, 0, &[])
                        .map_err(|e| format!("step {i}: after the drop: {e}"))?;
                }
            }
            match next {
                Next::NewPipeline => {}
                Next::Publish(s) => {
                    m.set = s % SETS.len();
                    m.report.publishes += 1;
                    break 'sessions;
                }
                Next::End => break 'epochs,
            }
        }
    }
    checks::device_order(&sim.trace(), &m.launched, &m.launched_aicpu)?;
    drains::exactly_once(&m)?;
    drop(dev);
    let stats = sim.stats();
    checks::no_leaks(&stats)?;
    checks::no_busy_destroy(&stats)?;
    checks::no_stale_code(&stats)?;
    m.report.replayed = usize::try_from(sim.stats().graph_launches).unwrap_or(usize::MAX);
    Ok(m.report)
}

/// The end of a case: faults cleared, every outstanding run completed, a
/// drain, and one more run — after a drain the pipeline goes on.
fn finish<const D: usize>(
    pipe: &mut Pipe<'_, D>,
    codes: &[(usize, CodeRef<'_>)],
    m: &mut Model,
    sim: &SimDriver,
    bound: u64,
) -> Result<(), String> {
    sim.clear_faults();
    while !m.outstanding.is_empty() {
        step::<D>(&POp::Complete, pipe, codes, m, sim).map_err(|e| format!("finish: {e}"))?;
    }
    step::<D>(&POp::Complete, pipe, codes, m, sim).map_err(|e| format!("finish: {e}"))?;
    if m.faulty {
        let before = sim.stats().steps;
        // `Undrained` says "try again later" (and `Device::drain` budgets
        // its two stream syncs from one wall-clock deadline, so a slow host
        // can see it even here): one retry, as a user would.
        let drained = match pipe.drain() {
            Err(ErrorKind::Undrained { .. }) => pipe.drain(),
            other => other,
        };
        drained.map_err(|e| format!("finish: drain after clearing the faults: {e}"))?;
        checks::bounded("finish: drain", sim.stats().steps - before, 2 * bound)?;
        m.lose_track();
    }
    // `codes[0]` never fails (no publication set starts with the failing program).
    let input = vec![1, 2, 3];
    step::<D>(&POp::Submit(0, PIn::Host(input)), pipe, codes, m, sim)
        .map_err(|e| format!("finish: {e}"))?;
    if m.outstanding.len() != 1 {
        return Err("finish: the pipeline refused a run after the drain".into());
    }
    let checked = m.report.checked;
    step::<D>(&POp::Complete, pipe, codes, m, sim).map_err(|e| format!("finish: {e}"))?;
    if m.report.checked != checked + 1 {
        return Err("finish: the run after the drain produced no checked result".into());
    }
    Ok(())
}

#[allow(clippy::too_many_lines, reason = "one arm per operation")]
fn step<const D: usize>(
    op: &POp,
    pipe: &mut Pipe<'_, D>,
    codes: &[(usize, CodeRef<'_>)],
    m: &mut Model,
    sim: &SimDriver,
) -> Result<(), String> {
    match op {
        POp::Submit(c, input) => {
            let (p, code) = codes[c % codes.len()];
            let long = [7u32; MAX_ELEMS + 1];
            let spec = RunSpec::new(
                code,
                match input {
                    PIn::Host(v) => Input::Host(v),
                    PIn::Empty => Input::Host(&[]),
                    PIn::TooLong => Input::Host(&long),
                    PIn::Previous => Input::Previous,
                },
            );
            let tag = m.next_tag;
            m.next_tag += 1;
            let full = m.outstanding.len() >= D;
            // The one error the model predicts exactly, if any.
            let exact: Option<fn(&ErrorKind) -> bool> = if full {
                Some(|k| matches!(k, ErrorKind::DepthExhausted { .. }))
            } else {
                match input {
                    PIn::Empty => Some(|k| matches!(k, ErrorKind::EmptyInput)),
                    PIn::TooLong => Some(|k| matches!(k, ErrorKind::InputTooLong { .. })),
                    PIn::Previous if m.chain == Chain::Nothing => {
                        Some(|k| matches!(k, ErrorKind::NoChainValue))
                    }
                    _ => None,
                }
            };
            match pipe.submit(spec, tag) {
                Ok(run) => {
                    if exact.is_some() {
                        return Err(format!(
                            "errors: submit of {input:?} accepted (full: {full})"
                        ));
                    }
                    let expected = match (input, &m.chain) {
                        (PIn::Host(v), _) | (PIn::Previous, Chain::Known(v)) => {
                            Some(expected(p, v))
                        }
                        _ => None,
                    };
                    m.chain = expected.clone().map_or(Chain::Unknown, Chain::Known);
                    m.outstanding.push_back(MRun {
                        tag,
                        run,
                        program: p,
                        expected,
                        settled: false,
                        early: false,
                        slot: m.accepted_here % D,
                        chained: *input == PIn::Previous,
                    });
                    m.accepted_here += 1;
                    m.accepted.push(tag);
                    m.launched.push(run.get());
                    m.launched_aicpu.push(run.get());
                    m.report.submitted += 1;
                }
                Err(r) => {
                    check_handed_back(&r, spec, tag)?;
                    checks::own_records(&r.kind)?;
                    m.report.refused += 1;
                    if exact.is_some_and(|f| f(&r.kind)) {
                        m.report.refused_full += usize::from(full);
                    } else if m.faulty && submit_fault_error(&r.kind) {
                        m.report.fault_outcomes += 1;
                        if is_lost_launch(&r.kind) {
                            let run = r.run.ok_or("a lost launch names no run")?;
                            m.launched.push(run.get());
                            if matches!(r.kind, ErrorKind::FenceNotRecorded(_)) {
                                m.launched_aicpu.push(run.get());
                            }
                        }
                        if matches!(r.kind, ErrorKind::NoChainValue) {
                            m.chain = Chain::Nothing;
                        } else {
                            m.lose_track();
                        }
                    } else {
                        return Err(unexpected(&format!("submit of {input:?}"), &r.kind));
                    }
                }
            }
        }
        POp::Complete | POp::CompleteAsync(_) => {
            let got = match op {
                POp::CompleteAsync(polls) => pipe.complete(Some((*polls, sim))),
                _ => pipe.complete(None),
            };
            if matches!(got, Got::Cancelled) {
                // Nothing taken: the run is still the oldest outstanding.
                m.report.cancelled += 1;
                return Ok(());
            }
            check_not_lost(m, &got)?;
            if matches!(op, POp::CompleteAsync(_)) && !matches!(got, Got::Nothing) {
                m.report.awaited += 1;
            }
            let (tag, outcome) = match got {
                Got::Nothing | Got::Cancelled => return Ok(()),
                Got::Done {
                    tag,
                    run,
                    values,
                    wall,
                } => (tag, Ok((run, values, wall))),
                Got::Failed { tag, kind } => (tag, Err(kind)),
            };
            check_not_duplicated(m, tag)?;
            m.seen.insert(tag);
            m.returned.push(tag);
            let oldest = m.outstanding.pop_front().ok_or("nothing outstanding")?;
            check_order(tag, oldest.tag)?;
            let fail = program(oldest.program).fail_code();
            match outcome {
                Ok((run, values, wall)) => {
                    if fail != 0 {
                        return Err(format!("errors: run {tag} should have failed with {fail}"));
                    }
                    if run != oldest.run
                        || wall.run_id != run.get()
                        || wall.slot as usize != oldest.slot
                    {
                        return Err(format!("run {tag}: {run} with record {wall:?}"));
                    }
                    if let Some(want) = &oldest.expected {
                        checks::outputs(run.get(), want, &values)?;
                        m.report.checked += 1;
                        m.report.chained_checked += usize::from(oldest.chained);
                        if oldest.settled {
                            m.report.settled_by_drain += 1;
                        }
                        m.report.early_checked += usize::from(oldest.early);
                    }
                }
                Err(kind) => {
                    checks::own_records(&kind)?;
                    match kind {
                        ErrorKind::RunFailed { code } if code == fail && fail != 0 => {
                            m.report.run_failed += 1;
                        }
                        ErrorKind::RunFailed { code: 77 } if m.run_errors_armed > 0 => {
                            m.run_errors_armed -= 1;
                            m.report.fault_outcomes += 1;
                        }
                        k if m.faulty && complete_fault_error(&k) => {
                            m.report.fault_outcomes += 1;
                            m.lose_track();
                        }
                        k => return Err(unexpected(&format!("complete of run {tag}"), &k)),
                    }
                }
            }
        }
        POp::Step(n) => {
            for _ in 0..*n {
                sim.step();
            }
        }
        POp::Drain => {
            let drained = pipe.drain();
            m.report.drains += usize::from(drained.is_ok());
            drains::drained(m, drained)?;
            drains::owes_every_run(pipe, m)?;
        }
        POp::DrainAsync(polls) => drains::awaited::<D>(pipe, m, sim, Some(*polls))?,
        POp::DrainAwait => drains::awaited::<D>(pipe, m, sim, None)?,
        POp::Inject(f) => {
            m.faulty = true;
            if let FaultOp::RunError(_) = f {
                m.run_errors_armed += 1;
            }
            sim.inject(f.fault());
        }
        POp::Replay(on) => {
            pipe.inner.replay(*on);
            m.report.replay_toggles += 1;
        }
        POp::Drop | POp::Publish(_) => return Err("handled by the session loop".into()),
    }
    Ok(())
}

// ----- strategies ----------------------------------------------------------------

fn input() -> impl Strategy<Value = PIn> {
    prop_oneof![
        6 => prop::collection::vec(any::<u32>(), 1..=MAX_ELEMS).prop_map(PIn::Host),
        1 => Just(PIn::Empty),
        1 => Just(PIn::TooLong),
        4 => Just(PIn::Previous),
    ]
}

fn op() -> impl Strategy<Value = POp> {
    prop_oneof![
        12 => (0..3usize, input()).prop_map(|(c, i)| POp::Submit(c, i)),
        8 => Just(POp::Complete),
        3 => prop_oneof![0..4u8, 4..160u8].prop_map(POp::CompleteAsync),
        2 => prop_oneof![1 => 0..4u8, 3 => 40..100u8].prop_map(POp::DrainAsync),
        1 => Just(POp::DrainAwait),
        2 => (1..40u8).prop_map(POp::Step),
        1 => Just(POp::Drop),
        1 => Just(POp::Drain),
        1 => (0..SETS.len()).prop_map(POp::Publish),
        1 => any::<bool>().prop_map(POp::Replay),
    ]
}

fn fault() -> impl Strategy<Value = POp> {
    FaultOp::strategy().prop_map(POp::Inject)
}

fn ops(faults: bool) -> impl Strategy<Value = Vec<POp>> {
    let one = if faults {
        prop_oneof![9 => op(), 1 => fault()].boxed()
    } else {
        op().boxed()
    };
    prop::collection::vec(one, 10..80)
}

proptest! {
    // Failing cases are kept in proptest-regressions/ and replayed first.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/proptest_pipeline.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn depth2_pipeline_matches_the_model(ops in ops(false), seed in any::<u64>()) {
        run_case::<2>(&ops, seed, Mutation::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn depth3_pipeline_matches_the_model(ops in ops(false), seed in any::<u64>()) {
        run_case::<3>(&ops, seed, Mutation::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn depth2_pipeline_keeps_its_promises_under_faults(ops in ops(true), seed in any::<u64>()) {
        run_case::<2>(&ops, seed, Mutation::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn depth4_pipeline_keeps_its_promises_under_faults(ops in ops(true), seed in any::<u64>()) {
        run_case::<4>(&ops, seed, Mutation::None).map_err(TestCaseError::fail)?;
    }

    // The same properties under the a2a3 kernel ABI.

    #[test]
    fn a2a3_depth2_pipeline_matches_the_model(ops in ops(false), seed in any::<u64>()) {
        run_case_under::<2>(Abi::A2a3, &ops, seed, Mutation::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a2a3_depth3_pipeline_matches_the_model(ops in ops(false), seed in any::<u64>()) {
        run_case_under::<3>(Abi::A2a3, &ops, seed, Mutation::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a2a3_depth2_pipeline_keeps_its_promises_under_faults(ops in ops(true), seed in any::<u64>()) {
        run_case_under::<2>(Abi::A2a3, &ops, seed, Mutation::None).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn a2a3_depth4_pipeline_keeps_its_promises_under_faults(ops in ops(true), seed in any::<u64>()) {
        run_case_under::<4>(Abi::A2a3, &ops, seed, Mutation::None).map_err(TestCaseError::fail)?;
    }
}

/// Generated cases over `n` seeds of the deterministic runner.
fn generated(faults: bool, n: u64) -> Vec<Vec<POp>> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    (0..n)
        .map(|_| ops(faults).new_tree(&mut runner).unwrap().current())
        .collect()
}

/// The generated sequences exercise the pipeline: measured over 200 cases
/// of each strategy, runs are submitted, checked in order, refused when the
/// pipeline is full, settled by drains (awaited drains cancelled midway
/// settling some early), dropped mid-stream, and injected faults fire. A
/// property whose cases mostly skip would prove nothing.
#[test]
fn generated_cases_do_real_work() {
    cases_do_real_work(Abi::Runclaim);
}

/// The same measure under the a2a3 kernel ABI: its twins do as much.
#[test]
fn a2a3_generated_cases_do_real_work() {
    cases_do_real_work(Abi::A2a3);
}

fn cases_do_real_work(abi: Abi) {
    for faults in [false, true] {
        let mut total = Report::default();
        for (seed, ops) in generated(faults, 200).iter().enumerate() {
            let r = run_case_under::<2>(abi, ops, seed as u64, Mutation::None).unwrap();
            total.submitted += r.submitted;
            total.refused += r.refused;
            total.refused_full += r.refused_full;
            total.checked += r.checked;
            total.chained_checked += r.chained_checked;
            total.run_failed += r.run_failed;
            total.dropped += r.dropped;
            total.drains += r.drains;
            total.settled_by_drain += r.settled_by_drain;
            total.publishes += r.publishes;
            total.fault_outcomes += r.fault_outcomes;
            total.max_pending = total.max_pending.max(r.max_pending);
            total.cancelled += r.cancelled;
            total.awaited += r.awaited;
            total.drains_cancelled += r.drains_cancelled;
            total.drains_awaited += r.drains_awaited;
            total.settled_early += r.settled_early;
            total.early_checked += r.early_checked;
            total.replay_toggles += r.replay_toggles;
            total.replayed += r.replayed;
        }
        println!(
            "{}, faults {faults}, 200 cases at depth 2: {total:?}",
            abi.name()
        );
        let t = total;
        assert!(t.submitted >= 1500, "{t:?}");
        assert!(t.checked >= 1000, "{t:?}");
        assert!(t.refused_full >= 100, "{t:?}");
        assert!(t.run_failed >= 25, "{t:?}");
        assert!(t.dropped >= 50, "{t:?}");
        assert!(t.drains >= 100 && t.settled_by_drain >= 20, "{t:?}");
        assert!(t.publishes >= 100, "{t:?}");
        assert_eq!(t.max_pending, 2, "{t:?}");
        assert!(t.cancelled >= 100 && t.awaited >= 100, "{t:?}");
        assert!(t.drains_cancelled >= 50 && t.drains_awaited >= 300, "{t:?}");
        assert!(t.settled_early >= 15 && t.early_checked >= 10, "{t:?}");
        assert_eq!(t.fault_outcomes > 200, faults, "{t:?}");
        assert!(t.replay_toggles >= 100 && t.replayed >= 150, "{t:?}");
    }
}

// ----- negative controls ---------------------------------------------------------

fn host(v: &[u32]) -> POp {
    POp::Submit(0, PIn::Host(v.to_vec()))
}

/// The fixed sequence passes unbroken and is caught, with `expect` in the
/// message, when broken.
fn control(ops: &[POp], mutation: Mutation, expect: &str) {
    run_case::<2>(ops, 1, Mutation::None).expect("the passing twin");
    let err = run_case::<2>(ops, 1, mutation).expect_err("the breakage must be caught");
    assert!(err.contains(expect), "{mutation:?} caught, but as: {err}");
}

#[test]
fn corrupted_values_are_caught_by_the_value_check() {
    let ops = [host(&[1, 2]), host(&[3]), POp::Complete, POp::Complete];
    control(&ops, Mutation::Corrupt, "expected [2, 3], got [3, 3]");
}

#[test]
fn swapped_results_are_caught_by_the_order_check() {
    let ops = [host(&[1]), host(&[2]), POp::Complete, POp::Complete];
    control(
        &ops,
        Mutation::Swap,
        "out of order: run 1 came back, the oldest outstanding is 0",
    );
}

#[test]
fn a_swallowed_result_is_caught_by_the_lost_check() {
    let ops = [host(&[1]), POp::Complete];
    control(
        &ops,
        Mutation::Lose,
        "lost: complete found nothing while runs [0] are outstanding",
    );
}

#[test]
fn a_repeated_result_is_caught_by_the_duplicate_check() {
    let ops = [host(&[1]), POp::Complete, POp::Complete];
    control(
        &ops,
        Mutation::Duplicate,
        "duplicated: run 0 came back again",
    );
}

#[test]
fn a_wrong_error_is_caught_by_the_error_check() {
    let ops = [host(&[1]), POp::Complete];
    control(
        &ops,
        Mutation::WrongError,
        "errors: complete of run 0: unexpected error not complete yet",
    );
}

#[test]
fn a_wrong_tag_handed_back_is_caught_by_the_handed_back_check() {
    let ops = [POp::Submit(0, PIn::Empty)];
    control(
        &ops,
        Mutation::WrongTagBack,
        "handed back: a refused submit of run 0 returned tag 1",
    );
}

#[test]
fn a_result_a_cancelled_complete_took_is_caught_by_the_health_check() {
    let ops = [host(&[1]), host(&[2]), POp::CompleteAsync(0), POp::Complete];
    run_case::<2>(&ops, 1, Mutation::None).expect("the passing twin");
    // Noticed at once: the device has one run fewer in flight than the model.
    control(&ops, Mutation::CancelTakes, "health");
}

/// Every breakage is also caught in generated cases, not only in the fixed
/// sequences above: the properties would see it.
#[test]
fn every_breakage_is_caught_in_generated_cases() {
    let cases = generated(false, 64);
    for (mutation, expect) in [
        (Mutation::Corrupt, "expected"),
        (Mutation::Swap, "out of order"),
        (Mutation::Lose, "lost"),
        (Mutation::Duplicate, "duplicated"),
        (Mutation::WrongError, "errors"),
        (Mutation::WrongTagBack, "handed back"),
        (Mutation::CancelTakes, "health"),
    ] {
        let caught = cases
            .iter()
            .enumerate()
            .filter(|(seed, ops)| {
                run_case::<2>(ops, *seed as u64, mutation).is_err_and(|e| e.contains(expect))
            })
            .count();
        println!("{mutation:?}: caught in {caught} of 64 generated cases");
        assert!(
            caught >= 16,
            "{mutation:?} caught in only {caught} of 64 cases"
        );
    }
}

/// The case a 10⁵-case soak found: never-completing events at several
/// queue positions, then a drop mid-stream.
fn lost_fences_then_a_drop() -> Vec<POp> {
    use POp::{Drop, Inject, Submit};
    let h = || PIn::Host(vec![0]);
    vec![
        Inject(FaultOp::NeverEvent(4)),
        Inject(FaultOp::NeverEvent(2)),
        Submit(0, h()),
        Submit(0, h()),
        Inject(FaultOp::NeverEvent(2)),
        Submit(0, h()),
        Drop,
        Submit(0, h()),
        Submit(0, h()),
        Submit(0, h()),
    ]
}

/// Regression (found by a 10⁵-case soak): never-completing events at
/// several queue positions made the pipeline's drop wait one fresh budget
/// per lane, past the documented total bound.
#[test]
fn regression_dropping_a_pipeline_of_lost_fences_keeps_one_total_bound() {
    run_case::<4>(&lost_fences_then_a_drop(), 0, Mutation::None).unwrap();
    run_case_under::<4>(Abi::A2a3, &lost_fences_then_a_drop(), 0, Mutation::None).unwrap();
}

/// Negative control for the drop check of the properties: the same case,
/// with the pipeline dropped the way it was before one total bound (each
/// pending run waited for with its own budget), is caught — with the runs
/// in flight at the drop and the documented bound in the message.
#[test]
fn a_drop_waiting_per_run_is_caught_by_the_drop_bound_check() {
    let ops = lost_fences_then_a_drop();
    let err = run_case::<4>(&ops, 0, Mutation::DropPerRun).expect_err("must be caught");
    assert!(
        err.contains("dropping the pipeline (3 in flight) took") && err.contains("bound 16000"),
        "caught, but as: {err}"
    );
}

/// Regression (found by the 10⁶-case soak): never-completing fences
/// behind one another, then `Pipeline::drain`, which fenced each pending
/// run with its own fresh budget (25 500 steps at depth 4, past every
/// bound); it now settles and drains within one total bound.
#[test]
fn regression_draining_a_pipeline_of_lost_fences_keeps_one_total_bound() {
    use POp::{Complete, Drain, Inject, Submit};
    let h = || PIn::Host(vec![0]);
    let ops = vec![
        Submit(0, h()),
        Inject(FaultOp::NeverEvent(2)),
        Submit(0, h()),
        Submit(0, h()),
        Inject(FaultOp::NeverEvent(2)),
        Inject(FaultOp::NeverEvent(4)),
        Submit(0, PIn::Previous),
        Complete,
        Submit(0, h()),
        Drain,
    ];
    run_case::<4>(&ops, 0, Mutation::None).unwrap();
    run_case_under::<4>(Abi::A2a3, &ops, 0, Mutation::None).unwrap();
}
