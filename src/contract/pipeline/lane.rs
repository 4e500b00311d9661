//! One slot of a [`Pipeline`](super::Pipeline), typed: `Lane<'r, I, T>`
//! moves slot `I` through `Prepared → Launched → Fenced → Finalized` with
//! the runner's own calls; `AnyLane` erases `I` (one variant per slot index)
//! so that `DEPTH` lanes fit in one array.

use super::Completed;
use crate::contract::error::{Action, Error, ErrorKind, RunId};
use crate::contract::outputs::Outputs;
use crate::contract::run::Run;
use crate::contract::runner::Runner;
use crate::contract::slot::{Depth, Slot, SlotOf, SlotToken, SupportedDepth};
use crate::contract::spec::RunSpec;
use crate::contract::states::{Fenced, Launched};
use crate::driver::Driver;
use crate::driver::abi::WallRecord;

/// Declares the lane enum — one variant per slot index a supported depth
/// has — and `with_lane!`, which runs an expression on the typed lane inside.
macro_rules! lanes {
    ($($variant:ident = $i:literal),* $(,)?) => {
        /// Slot `I`'s lane with `I` kept as a type, for every `I` a
        /// supported depth has: the array of lanes needs one type.
        pub(super) enum AnyLane<'r, T> {
            $($variant(Lane<'r, $i, T>),)*
        }

        impl<'r, T> AnyLane<'r, T> {
            /// Lane `index` of `runner`, holding that slot's token.
            pub(super) fn take<D: Driver, const DEPTH: usize>(
                runner: &'r Runner<'r, D, DEPTH>,
                index: usize,
                capacity: usize,
            ) -> Result<Self, Error> {
                match index {
                    $($i => Lane::take(runner, capacity).map(AnyLane::$variant),)*
                    _ => Err(out_of_range(index, DEPTH)),
                }
            }
        }

        /// Runs `$body` with `$lane` bound to the typed lane in `$any`.
        macro_rules! with_lane {
            ($any:expr, $lane:ident => $body:expr) => {
                match $any {
                    $(AnyLane::$variant($lane) => $body,)*
                }
            };
        }
    };
}

lanes! {
    L0 = 0, L1 = 1, L2 = 2, L3 = 3, L4 = 4, L5 = 5, L6 = 6, L7 = 7,
    L8 = 8, L9 = 9, L10 = 10, L11 = 11, L12 = 12, L13 = 13, L14 = 14, L15 = 15,
}

/// A pending run's bookkeeping.
pub(super) struct Ticket<T> {
    tag: T,
    run: RunId,
    seq: u64,
}

/// Slot `I` of a pipeline, laid out like a hand-written lane (the steady
/// state only moves a token or a run in and out of an `Option`).
///
/// Who holds the slot: `token` (free for a run), `run` (a launched run) or
/// `lost` (no handle: the run was lost in a partial launch, its slot
/// quarantined until a drain, or the token could not be taken back) — one
/// of them. A pending run (submitted, not yet handed back) has a `ticket`;
/// it is the launched `run`, unless a drain settled it early (`settled`
/// holds its outcome, its values are in `out`). A `run` without a ticket is
/// an orphan: a run whose completion failed and was handed back as an
/// error; it keeps the slot until the next submit into the slot waits for
/// it (bounded), a drain, or the pipeline's drop (which waits for it,
/// bounded).
pub(super) struct Lane<'r, const I: usize, T> {
    token: Option<SlotToken<'r, I>>,
    run: Option<Run<'r, Launched, I>>,
    lost: Option<ErrorKind>,
    ticket: Option<Ticket<T>>,
    settled: Option<Result<WallRecord, Error>>,
    out: Outputs<I>,
}

/// Slot `I`'s token, taken from `runner` as [`Runner::take_slot`] does.
/// `Slot<I>: SlotOf<DEPTH>` cannot be named for a generic `DEPTH`, so it is
/// checked here instead: an index out of range is an error.
fn take_token<'r, const I: usize, D: Driver, const DEPTH: usize>(
    runner: &'r Runner<'r, D, DEPTH>,
) -> Result<SlotToken<'r, I>, Error> {
    if I >= DEPTH {
        return Err(out_of_range(I, DEPTH));
    }
    let device = runner.device();
    let lease = device
        .take(I)
        .map_err(|k| Error::new((), Action::TakeSlot, None, Some(I), k))?;
    Ok(SlotToken {
        port: device,
        lease,
    })
}

fn out_of_range(slot: usize, depth: usize) -> Error {
    Error::new(
        (),
        Action::TakeSlot,
        None,
        Some(slot),
        ErrorKind::SlotOutOfRange { slot, depth },
    )
}

impl<'r, const I: usize, T> Lane<'r, I, T> {
    pub(super) fn take<D: Driver, const DEPTH: usize>(
        runner: &'r Runner<'r, D, DEPTH>,
        capacity: usize,
    ) -> Result<Self, Error> {
        Ok(Lane {
            token: Some(take_token::<I, D, DEPTH>(runner)?),
            run: None,
            lost: None,
            ticket: None,
            settled: None,
            out: Outputs::new(capacity),
        })
    }

    /// Prepares and launches a run in this slot.
    // Out of line, like `complete`: the pipeline's 16-way dispatch stays a
    // jump into one typed lane, small enough to inline into the caller.
    #[inline(never)]
    pub(super) fn submit<D: Driver, const DEPTH: usize>(
        &mut self,
        runner: &'r Runner<'r, D, DEPTH>,
        spec: RunSpec<'_>,
        tag: T,
    ) -> Result<RunId, (Error, T)> {
        if self.ticket.is_some() {
            // Unreachable through the pipeline, which submits only into a
            // lane whose run was handed back.
            let kind = ErrorKind::broken("a submit into a lane with a pending run");
            return Err((Error::new((), Action::Launch, None, Some(I), kind), tag));
        }
        let token = match self.token.take() {
            Some(token) => token,
            None => match self.reclaim(runner) {
                Ok(token) => token,
                Err(e) => return Err((e, tag)),
            },
        };
        let prepared = match runner.prepare(token, spec) {
            Ok(prepared) => prepared,
            Err(e) => {
                let (token, e) = e.into_parts();
                self.token = Some(token);
                return Err((e, tag));
            }
        };
        match prepared.launch() {
            Ok(run) => {
                let id = run.id();
                self.ticket = Some(Ticket {
                    tag,
                    run: id,
                    seq: run.seq(),
                });
                self.run = Some(run);
                Ok(id)
            }
            Err(e) => {
                let (back, e) = e.into_parts();
                if let Some(prepared) = back {
                    self.token = Some(prepared.into_token());
                } else {
                    self.lost = Some(ErrorKind::SlotQuarantined { run: e.run() });
                }
                Err((e, tag))
            }
        }
    }

    /// The slot's token back from an orphan or a lost slot. A poisoned
    /// runner is the cause to report, at once; otherwise the orphan is
    /// waited for (bounded as a fence is); a lost slot waits for a
    /// drain.
    #[cold]
    fn reclaim<D: Driver, const DEPTH: usize>(
        &mut self,
        runner: &'r Runner<'r, D, DEPTH>,
    ) -> Result<SlotToken<'r, I>, Error> {
        if let Some(poison) = runner.health().poisoned {
            let kind = ErrorKind::Poisoned(poison);
            return Err(Error::new((), Action::Launch, None, Some(I), kind));
        }
        if let Some(run) = self.run.take() {
            return run.fence().map(Run::<Fenced, I>::into_token).map_err(|e| {
                let (run, e) = e.into_parts();
                self.run = Some(run);
                e
            });
        }
        let kind = self.lost.clone().unwrap_or(ErrorKind::SlotTaken);
        Err(Error::new((), Action::TakeSlot, None, Some(I), kind))
    }

    /// Fences (bounded as a fence is) and finalizes `run` into the
    /// lane's buffer; the slot goes back to `token`, or stays with the run
    /// if its fence failed.
    fn retire(&mut self, run: Run<'r, Launched, I>) -> Result<WallRecord, Error> {
        match run.fence() {
            Ok(fenced) => match fenced.finalize(&mut self.out) {
                Ok(done) => {
                    self.token = Some(done.token);
                    Ok(done.wall)
                }
                Err(e) => {
                    let (fenced, e) = e.into_parts();
                    self.token = Some(fenced.into_token());
                    Err(e)
                }
            },
            Err(e) => {
                let (run, e) = e.into_parts();
                self.run = Some(run);
                Err(e)
            }
        }
    }

    /// Retires the pending launched run, if any, keeping its outcome for
    /// `complete`.
    pub(super) fn settle(&mut self) {
        if self.ticket.is_some()
            && self.settled.is_none()
            && let Some(run) = self.run.take()
        {
            self.settled = Some(self.retire(run));
        }
    }

    /// Hands the pending run back: `None` when none is pending.
    #[allow(
        clippy::type_complexity,
        reason = "a private signature: the outcome and the tag of a failure"
    )]
    #[inline(never)]
    pub(super) fn complete(&mut self) -> Option<Result<Completed<'_, T>, (Error, T)>> {
        let ticket = self.ticket.take()?;
        let outcome = match (self.settled.take(), self.run.take()) {
            (Some(outcome), run) => {
                self.run = run;
                outcome
            }
            // The steady state: retire it now.
            (None, Some(run)) => self.retire(run),
            // Unreachable: a pending run is launched or settled.
            (None, None) => Err(Error::new(
                (),
                Action::Fence,
                Some(ticket.run),
                Some(I),
                ErrorKind::NotReady,
            )),
        };
        Some(match outcome {
            Ok(wall) => Ok(Completed {
                tag: ticket.tag,
                run: ticket.run,
                seq: ticket.seq,
                wall,
                values: self.out.values(),
            }),
            Err(e) => Err((e, ticket.tag)),
        })
    }

    /// After a drain (which settled every pending run first): a fresh token
    /// for the slot. The old handles are stale (the drain reset the slot),
    /// so dropping them releases nothing.
    pub(super) fn renew<D: Driver, const DEPTH: usize>(
        &mut self,
        runner: &'r Runner<'r, D, DEPTH>,
    ) {
        let stale = (self.token.take(), self.run.take(), self.lost.take());
        match take_token::<I, D, DEPTH>(runner) {
            Ok(token) => self.token = Some(token),
            Err(e) => self.lost = Some(e.kind().clone()),
        }
        drop(stale);
    }
}

// The enum covers every slot of the deepest supported depth.
static_assertions::assert_impl_all!(Slot<15>: SlotOf<16>);
static_assertions::assert_not_impl_any!(Depth<17>: SupportedDepth);
