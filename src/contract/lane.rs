//! The engine both a [`Pipeline`](super::Pipeline) (`pipeline/`) and a
//! [`SharedDevice`](super::SharedDevice) (`shared/`) are built over, which
//! are siblings above it: one lane per slot — the slot's erased handles
//! and outputs buffer, and what the lane owes the caller, one enum,
//! [`LaneState`], whose variants are the lane's states, every change
//! through one `transition`.
#![allow(
    clippy::result_large_err,
    reason = "a refusal hands the workload back by value (the rule: never lost); it moves once per submit"
)]
#![allow(
    clippy::type_complexity,
    reason = "a private signature: the prepare step of the one submission path"
)]

use std::mem;
use std::task::{Poll, Waker};
use std::time::Duration;

use crate::contract::error::{Action, Error, ErrorKind, Poison, RunId};
use crate::contract::outputs::ErasedOutputs;
use crate::contract::port::Port;
use crate::contract::replay::{self, Replay};
use crate::contract::run::RunOf;
use crate::contract::runner::Runner;
use crate::contract::slot::{Claim, ErasedToken};
use crate::contract::states::{Fenced, Launched, Prepared};
use crate::contract::wait::{FenceWait, Wait};
use crate::contract::workload::Workload;
use crate::driver::Driver;
use crate::driver::abi::WallRecord;

/// A submitted run's bookkeeping, kept until `complete` hands it back:
/// its tag and identity. A workload run's workload is kept beside it
/// ([`Lane`]'s `work`, handed back by [`Lane::take_work`]), so that a
/// transition moves a few words, not a workload's inline lists.
pub(crate) struct Stub<T> {
    pub tag: T,
    pub run: RunId,
    pub seq: u64,
}

/// What a lane keeps of a submission while its run is in flight: nothing
/// (`()`, a `RunSpec`'s run: its input was copied at prepare) or the
/// workload, which the launch resolves and the finalize fills.
///
/// The engine's side of `pipeline::Submit`'s sealed half (which says how
/// a submission reaches a lane): it stays a trait of its own here, below
/// `pipeline/` and `shared/`, because the sealed half calls the lane —
/// folded together they would be one file's circle with `pipeline/`.
pub(crate) trait Kept<'r> {
    /// What the launch reads the run's arguments from (`None`: the run's
    /// own, a `RunSpec`'s lowered).
    fn lent(&mut self) -> Option<&mut Workload<'r>>;
    /// What the ticket keeps until the run comes back.
    fn into_work(self) -> Option<Workload<'r>>;
}

impl<'r> Kept<'r> for () {
    #[inline]
    fn lent(&mut self) -> Option<&mut Workload<'r>> {
        None
    }
    #[inline]
    fn into_work(self) -> Option<Workload<'r>> {
        None
    }
}

impl<'r> Kept<'r> for Workload<'r> {
    #[inline]
    fn lent(&mut self) -> Option<&mut Workload<'r>> {
        Some(self)
    }
    #[inline]
    fn into_work(self) -> Option<Workload<'r>> {
        Some(self)
    }
}

/// Where a lane's claims on its slot come from: a runner (a typed
/// pipeline's lanes hold its erased tokens) or a shared device (its
/// lanes' claims hold the device).
pub(crate) trait Source<K: Claim> {
    /// A fresh claim on `slot`.
    fn claim(&self, slot: usize) -> Result<K, Error>;
    /// The runner's poison, if it stopped launching.
    fn poisoned(&self) -> Option<Poison>;
    /// The device the claims are on.
    fn port(&self) -> &dyn Port;
}

impl<'r, D: Driver, const DEPTH: usize> Source<ErasedToken<'r>> for &'r Runner<'r, D, DEPTH> {
    fn claim(&self, slot: usize) -> Result<ErasedToken<'r>, Error> {
        self.take_erased(slot)
    }
    fn poisoned(&self) -> Option<Poison> {
        self.health().poisoned
    }
    fn port(&self) -> &dyn Port {
        self.device().port()
    }
}

/// What a lane hands back: the run's stub, and the outcome (a workload
/// run's workload stays in the lane for [`Lane::take_work`]).
pub(crate) type Owed<T> = (Stub<T>, Result<WallRecord, Error>);

/// Who holds a lane's slot while the lane owes the caller nothing (or
/// once it has paid what it owes).
pub(crate) enum Idle<K: Claim> {
    /// The slot's token: free for the next run.
    Free(K),
    /// A launched run whose completion failed and was handed back as an
    /// error. It keeps the slot until the next submit into the slot waits
    /// for it (bounded as a fence is), a drain, or the pipeline's drop.
    /// Boxed, on this error path only, so that every state stays small
    /// enough to move without a `memcpy` call in the steady state.
    Orphan(Box<RunOf<Launched, K>>),
    /// No handle, and why: the run was lost in a partial launch (the slot
    /// is quarantined until a drain), or the token could not be taken
    /// back after a drain. The next submit into the slot reports it.
    Lost(ErrorKind),
}

/// A lane's state: what it owes the caller, and who holds its slot.
pub(crate) enum LaneState<K: Claim, T> {
    /// Nothing owed.
    Idle(Idle<K>),
    /// A submitted run, launched and not yet handed back; it holds the
    /// slot. `complete` fences and finalizes it.
    Pending {
        ticket: Stub<T>,
        run: RunOf<Launched, K>,
    },
    /// A submitted run that a drain fenced and finalized early: its
    /// outcome (its values in the lane's buffer) waits for `complete`, and
    /// `then` holds the slot — what the lane is once the outcome is paid.
    Settled {
        ticket: Stub<T>,
        outcome: Result<WallRecord, Error>,
        then: Idle<K>,
    },
}

/// Slot `out.slot()` of a pipeline: its state, its outputs buffer, and the
/// workload of the workload run it owes (`None` otherwise).
pub(crate) struct Lane<'r, K: Claim, T> {
    state: LaneState<K, T>,
    out: ErasedOutputs,
    work: Option<Workload<'r>>,
    /// Whether the lane's runs are replayed, and its slot's capture.
    replay: Replay,
}

/// What a lane holds for the instant a transition owns its state: no
/// handle, so nothing is released or reused should a driver's panic
/// unwind through the transition (its handles drop on the way, as a
/// run's always do). Never seen outside a transition.
const MID_TRANSITION: ErrorKind = ErrorKind::InvariantBroken("a lane left mid-transition");

impl<'r, K: Claim, T> Lane<'r, K, T> {
    /// Lane `slot` of `src`, holding that slot's token and a buffer of
    /// `capacity` elements.
    pub(crate) fn take(src: &impl Source<K>, slot: usize, capacity: usize) -> Result<Self, Error> {
        Ok(Lane {
            state: LaneState::Idle(Idle::Free(src.claim(slot)?)),
            out: ErasedOutputs::new(slot, capacity),
            work: None,
            replay: Replay::Off,
        })
    }

    /// Lane `slot`, holding no claim yet (a [`renew`](Self::renew) takes
    /// one), with a buffer of `capacity` elements.
    pub(crate) fn unclaimed(slot: usize, capacity: usize) -> Self {
        Lane {
            state: LaneState::Idle(Idle::Lost(ErrorKind::InvariantBroken(
                "a lane not claimed yet",
            ))),
            out: ErasedOutputs::new(slot, capacity),
            work: None,
            replay: Replay::Off,
        }
    }

    /// Replays the lane's runs from now on (`true`), or launches them;
    /// the capture it held, if any, is handed back to be let go of.
    pub(crate) fn set_replay(&mut self, on: bool) -> Option<u64> {
        let held = self.replay.capture();
        self.replay = if on { Replay::Wanted } else { Replay::Off };
        held
    }

    /// The lane's capture, if it holds one.
    pub(crate) fn capture(&self) -> Option<u64> {
        self.replay.capture()
    }

    /// The lane's slot.
    pub(crate) fn slot(&self) -> usize {
        self.out.slot()
    }

    /// `true` while the lane owes a result: a pending run, or one a drain
    /// settled that was not handed back yet.
    pub(crate) fn owes(&self) -> bool {
        !matches!(self.state, LaneState::Idle(_))
    }

    /// `true` when a submit into the lane needs no wait: its slot's token
    /// is idle (not an orphan's, not lost).
    pub(crate) fn is_free(&self) -> bool {
        matches!(self.state, LaneState::Idle(Idle::Free(_)))
    }

    /// `true` when the lane owes nothing but its slot is not free: an
    /// orphan (a run whose fence failed) or a lost slot. Only a drain
    /// takes such a slot back into service.
    pub(crate) fn is_stuck(&self) -> bool {
        matches!(self.state, LaneState::Idle(Idle::Orphan(_) | Idle::Lost(_)))
    }

    /// The tag of the run the lane owes, if any.
    pub(crate) fn owed_tag(&self) -> Option<&T> {
        match &self.state {
            LaneState::Pending { ticket, .. } | LaneState::Settled { ticket, .. } => {
                Some(&ticket.tag)
            }
            LaneState::Idle(_) => None,
        }
    }

    /// Moves the lane from its state to the one `f` returns; `f` owns the
    /// state meanwhile (and the buffer and the kept workload), so every
    /// path out of it names the next state.
    #[inline]
    fn transition<R>(
        &mut self,
        f: impl FnOnce(
            LaneState<K, T>,
            &mut ErasedOutputs,
            &mut Option<Workload<'r>>,
        ) -> (LaneState<K, T>, R),
    ) -> R {
        let state = mem::replace(&mut self.state, LaneState::Idle(Idle::Lost(MID_TRANSITION)));
        let (next, r) = f(state, &mut self.out, &mut self.work);
        // What is replaced is the placeholder (`f` cannot reach the state),
        // which holds nothing to drop: skip the drop's discriminant checks.
        mem::forget(mem::replace(&mut self.state, next));
        r
    }

    /// The one submission path: `prepare` makes the prepared run from the
    /// slot's token and what the lane keeps of the submission (`kept`:
    /// nothing for a `RunSpec`, the workload for a workload's run), which
    /// comes back with the tag when the submission is refused.
    #[inline]
    pub(crate) fn submit<W: Kept<'r>>(
        &mut self,
        src: &impl Source<K>,
        tag: T,
        mut kept: W,
        prepare: impl FnOnce(K, &mut W) -> Result<RunOf<Prepared, K>, Error<K>>,
    ) -> Result<RunId, (Error, T, W)> {
        let slot = self.slot();
        let mut replay = self.replay;
        let r = self.transition(|state, _, kept_work| {
            let token = match state {
                LaneState::Idle(Idle::Free(token)) => token,
                LaneState::Idle(idle) => match reclaim(idle, src, slot) {
                    Reclaimed::Token(token) => token,
                    Reclaimed::Refused(idle, e) => {
                        return (LaneState::Idle(idle), Err((e, tag, kept)));
                    }
                },
                owed @ (LaneState::Pending { .. } | LaneState::Settled { .. }) => {
                    // Unreachable through the pipeline, which submits only
                    // into a lane whose run was handed back.
                    let kind = ErrorKind::broken("a submit into a lane that owes a result");
                    let e = Error::new((), Action::Submit, None, Some(slot), kind);
                    return (owed, Err((e, tag, kept)));
                }
            };
            let prepared = match prepare(token, &mut kept) {
                Ok(prepared) => prepared,
                Err(e) => {
                    let (token, e) = e.into_parts();
                    return (LaneState::Idle(Idle::Free(token)), Err((e, tag, kept)));
                }
            };
            match replay::launch(prepared, kept.lent(), &mut replay, src.port()) {
                Ok(run) => {
                    let id = run.id();
                    let ticket = Stub {
                        tag,
                        run: id,
                        seq: run.seq(),
                    };
                    // The last run's workload went back with it (`take_work`
                    // follows every `complete`): none is left to hand to
                    // this run's caller.
                    debug_assert!(
                        kept_work.is_none(),
                        "runclaim invariant broken: a lane kept a workload past its run"
                    );
                    // Nothing to keep for a `RunSpec` (`()`): no move.
                    if let Some(work) = kept.into_work() {
                        *kept_work = Some(work);
                    }
                    (LaneState::Pending { ticket, run }, Ok(id))
                }
                Err(e) => {
                    let (back, e) = e.into_parts();
                    let idle = match back {
                        Some(prepared) => Idle::Free(prepared.into_token()),
                        None => Idle::Lost(ErrorKind::SlotQuarantined { run: e.run() }),
                    };
                    (LaneState::Idle(idle), Err((e, tag, kept)))
                }
            }
        });
        self.replay = replay;
        r
    }

    /// Hands the owed run back — its stub (tag, identity) and outcome;
    /// a workload run's workload is then [`take_work`](Self::take_work)'s,
    /// a `RunSpec` run's values [`values`](Self::values)' — `None` when
    /// the lane owes nothing.
    #[inline]
    pub(crate) fn complete(&mut self) -> Option<Owed<T>> {
        self.transition(|state, out, work| match state {
            // The steady state: retire it now.
            LaneState::Pending { ticket, run } => {
                let (outcome, then) = finish(run.fence(), out, work.as_mut());
                (LaneState::Idle(then), Some((ticket, outcome)))
            }
            LaneState::Settled {
                ticket,
                outcome,
                then,
            } => (LaneState::Idle(then), Some((ticket, outcome))),
            idle @ LaneState::Idle(_) => (idle, None),
        })
    }

    /// The workload of the run [`complete`](Self::complete) handed back,
    /// if it was a workload's run (a `RunSpec`'s kept none: nothing moves).
    #[inline]
    pub(crate) fn take_work(&mut self) -> Option<Workload<'r>> {
        if self.work.is_some() {
            self.work.take()
        } else {
            None
        }
    }

    /// `true` while the lane keeps a workload's run's workload (until
    /// [`take_work`](Self::take_work)).
    pub(crate) fn has_work(&self) -> bool {
        self.work.is_some()
    }

    /// The lane's outputs buffer: a `RunSpec` run's values once
    /// [`complete`](Self::complete) handed it back.
    pub(crate) fn values(&self) -> &[u32] {
        self.out.values()
    }

    /// One non-blocking look at the pending run, for a future: `Ready`
    /// once the lane owes no pending run any more — its fence's verdict
    /// came (the run is retired, its outcome kept for `complete`, exactly
    /// as a drain's settles keep it) or nothing was pending.
    /// `Pending` leaves the lane untouched, so a future dropped here
    /// loses nothing.
    pub(crate) fn poll_settle(&mut self, wait: &mut FenceWait, waker: &Waker) -> Poll<()> {
        let verdict = match &self.state {
            LaneState::Pending { run, .. } => match run.poll_fence(wait, waker) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(v) => v,
            },
            _ => return Poll::Ready(()),
        };
        self.settle_with(|run, out, work| {
            let fenced = match verdict {
                Ok(()) => Ok(run.fenced()),
                Err(kind) => Err(run.refused(Action::Fence, kind)),
            };
            finish(fenced, out, work)
        });
        Poll::Ready(())
    }

    /// One query of the pending run's fence, never a wait: `true` once the
    /// lane owes no pending run — the run was complete (retired, its
    /// outcome kept for `complete`)
    /// or nothing was pending. A run not complete yet is left untouched.
    pub(crate) fn settle_if_done(&mut self) -> bool {
        let verdict = match &self.state {
            LaneState::Pending { run, .. } => match run.look() {
                Err(ErrorKind::NotReady) => return false,
                v => v,
            },
            _ => return true,
        };
        self.settle_with(|run, out, work| {
            let fenced = match verdict {
                Ok(()) => Ok(run.fenced()),
                Err(kind) => Err(run.refused(Action::Fence, kind)),
            };
            finish(fenced, out, work)
        });
        true
    }

    /// One query of the pending run's fence for a drain whose `budget`
    /// is spent: a run complete is retired as
    /// [`settle_if_done`](Self::settle_if_done) retires it; one not
    /// complete yet is settled as a timeout after the whole budget (a
    /// plain timeout: nothing poisoned, as for `fence_for`), its run kept.
    #[cold]
    pub(crate) fn settle_overdue(&mut self, budget: Duration) {
        self.settle_with(|run, out, work| {
            let polled = run.wait(Wait::Poll, Action::Fence).map_err(|e| {
                if e.kind() != &ErrorKind::NotReady {
                    return e;
                }
                let (run, e) = e.into_parts();
                let kind = ErrorKind::Timeout {
                    waited: budget,
                    overran: None,
                };
                Error::new(run, Action::Fence, e.run(), e.slot(), kind)
            });
            finish(polled, out, work)
        });
    }

    /// A pending run retired by `retire` (which fences and finalizes it),
    /// its outcome kept for `complete`; any other state is left as it is.
    fn settle_with(
        &mut self,
        retire: impl FnOnce(
            RunOf<Launched, K>,
            &mut ErasedOutputs,
            Option<&mut Workload<'_>>,
        ) -> (Result<WallRecord, Error>, Idle<K>),
    ) {
        self.transition(|state, out, work| match state {
            LaneState::Pending { ticket, run } => {
                let (outcome, then) = retire(run, out, work.as_mut());
                let settled = LaneState::Settled {
                    ticket,
                    outcome,
                    then,
                };
                (settled, ())
            }
            other => (other, ()),
        });
    }

    /// After a drain (which settled every pending run first): a fresh
    /// token for the slot, in place of whatever held it. The old handles
    /// are stale (the drain reset the slot), so dropping them releases
    /// nothing.
    pub(crate) fn renew(&mut self, src: &impl Source<K>) {
        let slot = self.slot();
        let fresh = match src.claim(slot) {
            Ok(token) => Idle::Free(token),
            Err(e) => Idle::Lost(e.kind().clone()),
        };
        let stale = self.transition(|state, _, _| match state {
            LaneState::Idle(stale) => (LaneState::Idle(fresh), stale),
            LaneState::Settled {
                ticket,
                outcome,
                then,
            } => {
                let settled = LaneState::Settled {
                    ticket,
                    outcome,
                    then: fresh,
                };
                (settled, then)
            }
            LaneState::Pending { ticket, run } => {
                // Unreachable: the drain settled every pending run first.
                let kind = ErrorKind::broken("a drain left a run pending");
                let e = Error::new((), Action::Drain, Some(ticket.run), Some(slot), kind);
                let settled = LaneState::Settled {
                    ticket,
                    outcome: Err(e),
                    then: fresh,
                };
                (settled, Idle::Orphan(Box::new(run)))
            }
        });
        drop(stale);
    }
}

/// What [`reclaim`] got: the slot's token, or why not (and the slot's
/// holder, unchanged).
enum Reclaimed<K: Claim> {
    Token(K),
    Refused(Idle<K>, Error),
}

/// The slot's token back from an orphan or a lost slot. A poisoned runner
/// is the cause to report, at once; otherwise the orphan is waited for
/// (bounded as a fence is); a lost slot reports why it is lost.
#[cold]
fn reclaim<K: Claim>(idle: Idle<K>, src: &impl Source<K>, slot: usize) -> Reclaimed<K> {
    if let Some(poison) = src.poisoned() {
        let kind = ErrorKind::Poisoned(poison);
        return Reclaimed::Refused(idle, Error::new((), Action::Submit, None, Some(slot), kind));
    }
    match idle {
        Idle::Free(token) => Reclaimed::Token(token),
        Idle::Orphan(run) => match run.fence() {
            Ok(fenced) => Reclaimed::Token(fenced.into_token()),
            Err(e) => {
                let (run, e) = e.into_parts();
                Reclaimed::Refused(Idle::Orphan(Box::new(run)), e)
            }
        },
        Idle::Lost(kind) => {
            let e = Error::new((), Action::TakeSlot, None, Some(slot), kind.clone());
            Reclaimed::Refused(Idle::Lost(kind), e)
        }
    }
}

/// Finalizes a fenced run — into `out`, or into `work`'s host tensors for
/// a workload run — or keeps the run whose fence failed.
#[inline]
fn finish<K: Claim>(
    fenced: Result<RunOf<Fenced, K>, Error<RunOf<Launched, K>>>,
    out: &mut ErasedOutputs,
    work: Option<&mut Workload<'_>>,
) -> (Result<WallRecord, Error>, Idle<K>) {
    let finalized = |fenced: RunOf<Fenced, K>| match work {
        Some(work) => fenced.finalize_lent(work),
        None => fenced.finalize(out),
    };
    match fenced {
        Ok(fenced) => match finalized(fenced) {
            Ok((token, wall)) => (Ok(wall), Idle::Free(token)),
            Err(e) => {
                let (fenced, e) = e.into_parts();
                (Err(e), Idle::Free(fenced.into_token()))
            }
        },
        Err(e) => {
            let (run, e) = e.into_parts();
            (Err(e), Idle::Orphan(Box::new(run)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LaneState;
    use crate::contract::slot::ErasedToken;
    use crate::contract::workload::Workload;

    /// A transition moves the lane's state by value: it stays a few words
    /// (the workload is kept beside it), where a workload's inline lists
    /// are over a kilobyte and would cost a `memcpy` call per move.
    #[test]
    fn a_lane_state_stays_small_beside_the_workload_it_keeps() {
        let state = size_of::<LaneState<ErasedToken<'static>, u64>>();
        let work = size_of::<Workload<'static>>();
        eprintln!("lane state {state} bytes, workload {work} bytes");
        assert!(state <= 160, "lane state {state} bytes");
        assert!(
            work > 8 * state,
            "workload {work} bytes, lane state {state}"
        );
    }
}
