//! Drains in the pipeline property: blocking, awaited to the end, and
//! awaited then cancelled midway — and the end-of-case audit that every
//! submitted run came back exactly once.
//!
//! A `PipelineDrainFuture` settles the pending runs oldest first, each as
//! soon as its fence gives a verdict, and keeps each outcome in the
//! pipeline for `complete`. Dropped midway, it has settled some of them
//! early: those are no longer in flight, and `complete` hands them back,
//! in order, with the values they had when they were settled. Without
//! faults the model predicts exactly which runs were settled — the oldest
//! not yet settled whose fence records had finished (the simulator's
//! trace) when the future last looked — and requires the device to have
//! exactly the others' slots in flight. Under faults a verdict may be an
//! error no trace shows, so the model learns the settled runs from the
//! slots the device no longer has in flight.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use runclaim::contract::{DrainReport, ErrorKind, Health};
use runclaim::sim::SimDriver;
use runclaim::sim::trace::{TaskTag, TraceEvent, TraceKind};

use super::{
    MRun, Model, Mutation, POp, Pipe, checks, complete_fault_error, control, generated, host,
    run_case, unexpected,
};

/// How an awaited drain ended.
pub(super) enum Drained {
    /// It resolved.
    Resolved(Result<DrainReport, ErrorKind>),
    /// Dropped unresolved; `looked` is the trace as it was at its last poll.
    Cancelled { looked: Vec<TraceEvent> },
}

impl<const D: usize> Pipe<'_, D> {
    /// `drain_async`, polled at most `polls + 1` times (`None`: until it
    /// resolves, within the step bound of one operation) with one device
    /// step of `sim` between polls; dropped unresolved:
    /// [`Drained::Cancelled`].
    pub(super) fn drain_async(&mut self, polls: Option<u8>, sim: &SimDriver) -> Drained {
        let device = self.inner.runner().device();
        let fence_steps = u64::try_from(device.fence_timeout().as_micros()).unwrap_or(u64::MAX);
        let cap = polls.map_or((D as u64 + 2) * fence_steps + 1_000, |p| u64::from(p) + 1);
        let in_flight = device.health().in_flight;
        let mut fut = self.inner.drain_async();
        let mut looked = Vec::new();
        for n in 1..=cap {
            if n == cap {
                looked = sim.trace();
            }
            let cx = &mut Context::from_waker(Waker::noop());
            if let Poll::Ready(r) = Pin::new(&mut fut).poll(cx) {
                return Drained::Resolved(r.map_err(|e| e.kind().clone()));
            }
            sim.step();
        }
        drop(fut);
        let settled_some = self.inner.runner().health().in_flight < in_flight;
        if self.mutation == Mutation::DrainTakes && !self.fired && settled_some {
            self.fired = true;
            let _ = self.real();
        }
        Drained::Cancelled { looked }
    }
}

/// What the model learns of a drain that resolved (blocking or awaited):
/// every pending run was settled first, whatever the drain's answer.
pub(super) fn drained(m: &mut Model, r: Result<DrainReport, ErrorKind>) -> Result<(), String> {
    match r {
        Ok(report) => {
            if m.faulty {
                m.lose_track();
            } else if report.cleared.is_some() || report.released > 0 {
                return Err(format!("drain without a fault: {report:?}"));
            }
        }
        Err(k) if m.faulty => {
            checks::own_records(&k)?;
            if !matches!(k, ErrorKind::Undrained { .. }) && !complete_fault_error(&k) {
                return Err(unexpected("drain", &k));
            }
            m.report.fault_outcomes += 1;
            m.lose_track();
        }
        Err(k) => return Err(unexpected("drain", &k)),
    }
    for r in &mut m.outstanding {
        r.settled = true;
    }
    Ok(())
}

/// [`POp::DrainAsync`] (`polls`) or [`POp::DrainAwait`] (`None`).
pub(super) fn awaited<const D: usize>(
    pipe: &mut Pipe<'_, D>,
    m: &mut Model,
    sim: &SimDriver,
    polls: Option<u8>,
) -> Result<(), String> {
    match pipe.drain_async(polls, sim) {
        Drained::Resolved(r) => {
            m.report.drains_awaited += 1;
            drained(m, r)?;
        }
        Drained::Cancelled { .. } if polls.is_none() => {
            return Err(
                "an awaited drain did not resolve within the bound of one operation".into(),
            );
        }
        Drained::Cancelled { looked } => {
            m.report.drains_cancelled += 1;
            learn(m, &pipe.inner.runner().health(), &looked, sim)?;
        }
    }
    owes_every_run(pipe, m)
}

/// After a drain, resolved or not, the pipeline still owes every run the
/// model has outstanding: settling one hands nothing back.
pub(super) fn owes_every_run<const D: usize>(pipe: &Pipe<'_, D>, m: &Model) -> Result<(), String> {
    let (owed, outstanding) = (pipe.inner.len(), m.outstanding.len());
    if owed == outstanding {
        Ok(())
    } else {
        Err(format!(
            "lost: after a drain the pipeline owes {owed} runs, the model {outstanding}"
        ))
    }
}

/// What the model learns of a drain cancelled midway, and the device's
/// agreement with it (see the module's docs).
fn learn(m: &mut Model, h: &Health, looked: &[TraceEvent], sim: &SimDriver) -> Result<(), String> {
    if m.outstanding
        .iter()
        .skip_while(|r| r.settled)
        .any(|r| r.settled)
    {
        return Err("model: the settled runs are not the oldest outstanding".into());
    }
    let mut early = |r: &mut MRun| {
        r.settled = true;
        r.early = true;
        m.report.settled_early += 1;
    };
    if m.faulty {
        // Oldest first, as the drain settles them (a run settled with an
        // error keeps its slot in flight: the model counts it, and those
        // behind it, as pending still, which only the counts see).
        m.outstanding
            .iter_mut()
            .skip_while(|r| r.settled)
            .take_while(|r| !h.launched.contains(r.slot))
            .for_each(&mut early);
        return Ok(());
    }
    if sim.stats().trace_dropped > 0 {
        return Err("settled: the trace wrapped, so the check would be skipped".into());
    }
    if m.mutation != Mutation::IgnoreEarlySettle {
        for r in m.outstanding.iter_mut().skip_while(|r| r.settled) {
            if !fence_done(looked, r.run.get()) {
                break;
            }
            early(r);
        }
    }
    let mut model: Vec<usize> = m
        .outstanding
        .iter()
        .filter(|r| !r.settled)
        .map(|r| r.slot)
        .collect();
    model.sort_unstable();
    let device: Vec<usize> = h.launched.iter().collect();
    if model == device {
        Ok(())
    } else {
        let tags: Vec<(u64, bool)> = m.outstanding.iter().map(|r| (r.tag, r.settled)).collect();
        Err(format!(
            "settled: after a cancelled drain the device has slots {device:?} in flight, \
             the model {model:?} (outstanding (tag, settled): {tags:?})"
        ))
    }
}

/// Whether run `run`'s fence record (the record after its AICPU kernel on
/// the AICPU stream) had finished in `trace`.
fn fence_done(trace: &[TraceEvent], run: u64) -> bool {
    let Some(aicpu) = trace
        .iter()
        .find(|t| t.run == run && t.what == TraceKind::Enqueued(TaskTag::Aicpu))
        .map(|t| t.stream)
    else {
        return false;
    };
    trace.iter().any(|t| {
        t.run == run
            && t.stream == aicpu
            && matches!(t.what, TraceKind::Finished(TaskTag::Record(_)))
    })
}

/// The end-of-case audit: the tags handed back by `complete` (or dropped
/// with their pipeline) are the submitted ones, each exactly once, in
/// submission order.
pub(super) fn exactly_once(m: &Model) -> Result<(), String> {
    if m.accepted == m.returned {
        Ok(())
    } else {
        Err(format!(
            "exactly once: submitted {:?}, handed back or dropped {:?}",
            m.accepted, m.returned
        ))
    }
}

// ----- negative controls ---------------------------------------------------------

/// Run 0 completes on the device, run 1 is just launched: a drain polled
/// once settles run 0 and is dropped waiting for run 1.
fn one_settled_then_cancelled() -> Vec<POp> {
    vec![
        host(&[1]),
        POp::Step(60),
        host(&[2]),
        POp::DrainAsync(0),
        POp::Complete,
        POp::Complete,
    ]
}

#[test]
fn a_cancelled_drain_settles_the_oldest_runs_early() {
    let r = run_case::<2>(&one_settled_then_cancelled(), 1, Mutation::None).unwrap();
    assert_eq!(
        (r.drains_cancelled, r.settled_early, r.early_checked),
        (1, 1, 1),
        "{r:?}"
    );
}

#[test]
fn a_cancelled_drain_losing_a_settled_outcome_is_caught_by_the_lost_check() {
    control(
        &one_settled_then_cancelled(),
        Mutation::DrainTakes,
        "lost: after a drain the pipeline owes 1 runs, the model 2",
    );
}

#[test]
fn a_model_ignoring_early_settlement_is_caught_by_the_settled_check() {
    control(
        &one_settled_then_cancelled(),
        Mutation::IgnoreEarlySettle,
        "settled: after a cancelled drain the device has slots [1] in flight, the model [0, 1]",
    );
}

/// The two drain breakages are caught in generated cases too: in every
/// case where a cancelled drain settled a run early (all the breakages
/// need), measured on the unbroken case.
#[test]
fn drain_breakages_are_caught_in_generated_cases() {
    let cases = generated(false, 64);
    let early: Vec<(u64, &Vec<POp>)> = (0u64..)
        .zip(&cases)
        .filter(|(seed, ops)| {
            run_case::<2>(ops, *seed, Mutation::None)
                .expect("the unbroken case passes")
                .settled_early
                > 0
        })
        .collect();
    println!("{} of 64 generated cases settle a run early", early.len());
    assert!(early.len() >= 8, "only {} cases settle early", early.len());
    for (mutation, expect) in [
        (Mutation::DrainTakes, "lost: after a drain"),
        (
            Mutation::IgnoreEarlySettle,
            "settled: after a cancelled drain",
        ),
    ] {
        for (seed, ops) in &early {
            let err = run_case::<2>(ops, *seed, mutation).expect_err("the breakage must be caught");
            assert!(err.contains(expect), "{mutation:?} caught, but as: {err}");
        }
    }
}
