//! The pipeline's waits, awaited: [`CompleteFuture`] and
//! [`PipelineDrainFuture`]. Each borrows the pipeline
//! for as long as it lives, and moves nothing out of it until it resolves:
//! a poll that finds the oldest run's verdict retires the run into its
//! lane (as a drain settles it) and pays it out in the same poll. So a
//! future dropped while pending loses no result and no tag — the run stays
//! pending in the pipeline, and the next call returns it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use super::{Completed, Pipeline, Unfinished};
use crate::contract::DrainReport;
use crate::contract::error::{Action, Error};
use crate::contract::wait::{DrainWait, FenceWait, Wait, polled_after_ready};
use crate::driver::Driver;

/// The oldest pending run's wait: the pipeline's borrow, moved out once
/// the head's verdict is in its lane.
struct HeadWait<'a, 'r, D: Driver, const DEPTH: usize, T> {
    pipe: Option<&'a mut Pipeline<'r, D, DEPTH, T>>,
    wait: FenceWait,
}

impl<'a, 'r, D: Driver, const DEPTH: usize, T> HeadWait<'a, 'r, D, DEPTH, T> {
    fn new(pipe: &'a mut Pipeline<'r, D, DEPTH, T>) -> Self {
        HeadWait {
            pipe: Some(pipe),
            wait: FenceWait::new(Wait::Configured),
        }
    }

    /// The pipeline, once its oldest run's verdict is in (or nothing is
    /// pending); `Pending` otherwise. Polled again once it was handed out:
    /// a caller's bug, a panic.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<&'a mut Pipeline<'r, D, DEPTH, T>> {
        let Some(pipe) = self.pipe.as_mut() else {
            polled_after_ready("CompleteFuture")
        };
        if pipe.poll_head(&mut self.wait, cx.waker()).is_pending() {
            return Poll::Pending;
        }
        match self.pipe.take() {
            Some(pipe) => Poll::Ready(pipe),
            None => polled_after_ready("CompleteFuture"),
        }
    }
}

/// [`Pipeline::complete`], awaited: what [`Pipeline::complete_async`]
/// returns. It resolves as `complete` returns — the same budget, verdicts
/// and errors, results in submission order.
///
/// Polled again after it resolved, it panics, as std's `async fn` futures
/// do.
///
/// **Cancel-safe.** Dropped before it resolves, it has taken nothing: the
/// run is still pending in the pipeline, and the next `complete` (or
/// `complete_async`) returns it with its tag. (A new call's wait starts
/// its budget anew, as a new `fence` would.) Dropping it never blocks;
/// dropping the *pipeline* waits for its runs, bounded, as it always does.
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let mut device = Device::<_, 4>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
/// let runner = device.publish(&[Callable::program("x3", &Program::new().mul(3))])?;
/// let code = runner.code("x3")?;
/// let mut pipe = Pipeline::new(&runner)?;
/// let sum = pollster::block_on(async {
///     let mut sum = 0;
///     for i in 0..16u32 {
///         if pipe.is_full() {
///             sum += pipe.complete_async().await?.expect("pending").values[0];
///         }
///         pipe.submit(RunSpec::new(code, Input::Host(&[i])), i)?;
///     }
///     while let Some(done) = pipe.complete_async().await? {
///         sum += done.values[0];
///     }
///     Ok::<_, runclaim::Error>(sum)
/// })?;
/// assert_eq!(sum, (0..16).map(|i| 3 * i).sum::<u32>());
/// # Ok::<(), runclaim::Error>(())
/// ```
#[must_use = "a future does nothing unless awaited"]
pub struct CompleteFuture<'a, 'r, D: Driver, const DEPTH: usize, T> {
    head: HeadWait<'a, 'r, D, DEPTH, T>,
}

impl<'a, 'r, D: Driver, const DEPTH: usize, T> CompleteFuture<'a, 'r, D, DEPTH, T> {
    pub(super) fn new(pipe: &'a mut Pipeline<'r, D, DEPTH, T>) -> Self {
        CompleteFuture {
            head: HeadWait::new(pipe),
        }
    }
}

impl<D: Driver, const DEPTH: usize, T> std::fmt::Debug for CompleteFuture<'_, '_, D, DEPTH, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompleteFuture")
            .field("resolved", &self.head.pipe.is_none())
            .finish_non_exhaustive()
    }
}

// Nothing in these futures is ever pinned (no field is projected).
impl<D: Driver, const DEPTH: usize, T> Unpin for CompleteFuture<'_, '_, D, DEPTH, T> {}

impl<'a, 'r, D: Driver, const DEPTH: usize, T> Future for CompleteFuture<'a, 'r, D, DEPTH, T> {
    type Output = Result<Option<Completed<'a, 'r, T>>, Error<Unfinished<'r, T>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // The head's verdict is in its lane: paid out now, in order.
        self.get_mut().head.poll(cx).map(Pipeline::complete)
    }
}

/// [`Pipeline::drain`], awaited: what [`Pipeline::drain_async`] returns.
/// It resolves as `drain` returns, within the same one total bound.
///
/// Polled again after it resolved, it panics, as std's `async fn` futures
/// do.
///
/// **Cancel-safe.** Each pending run it settles keeps its outcome in the
/// pipeline for [`complete`](Pipeline::complete), as `drain` keeps it;
/// dropped early, it loses none of them, and the runner stays as the last
/// poll left it (still poisoned, until a drain resolves).
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// use runclaim::contract::ErrorKind;
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::real_time(SimConfig::default());
/// let mut device = Device::<_, 2>::open(sim.clone(), DeviceConfig::default())?;
/// let runner = device.publish(&[
///     Callable::program("f", &Program::new().add(1)),
///     Callable::program("fails", &Program::new().fail(7)),
/// ])?;
/// let (f, fails) = (runner.code("f")?, runner.code("fails")?);
/// let mut pipe = Pipeline::new(&runner)?;
/// pipe.submit(RunSpec::new(fails, Input::Host(&[1])), "fails")?;
/// pipe.submit(RunSpec::new(f, Input::Host(&[1])), "f")?;
/// pollster::block_on(async {
///     let report = pipe.drain_async().await?; // settles both runs
///     assert_eq!(report.retired, 0); // nothing was forgotten
///     let e = pipe.complete_async().await.unwrap_err(); // each outcome was kept
///     assert!(matches!(e.kind(), ErrorKind::RunFailed { .. }));
///     assert_eq!(pipe.complete_async().await?.map(|d| (d.tag, d.values[0])), Some(("f", 2)));
///     Ok::<_, runclaim::Error>(())
/// })?;
/// # Ok::<(), runclaim::Error>(())
/// ```
#[must_use = "a future does nothing unless awaited"]
pub struct PipelineDrainFuture<'a, 'r, D: Driver, const DEPTH: usize, T> {
    pipe: &'a mut Pipeline<'r, D, DEPTH, T>,
    /// The drain's one bound, fixed at the first poll: (start, budget).
    budget: Option<(Duration, Duration)>,
    /// Pending runs (from the head) settled so far.
    settled: usize,
    /// The wait of the run being settled.
    wait: Option<FenceWait>,
    drain: Option<DrainWait>,
    done: bool,
}

impl<'a, 'r, D: Driver, const DEPTH: usize, T> PipelineDrainFuture<'a, 'r, D, DEPTH, T> {
    pub(super) fn new(pipe: &'a mut Pipeline<'r, D, DEPTH, T>) -> Self {
        PipelineDrainFuture {
            pipe,
            budget: None,
            settled: 0,
            wait: None,
            drain: None,
            done: false,
        }
    }
}

impl<D: Driver, const DEPTH: usize, T> std::fmt::Debug
    for PipelineDrainFuture<'_, '_, D, DEPTH, T>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineDrainFuture")
            .field("settled", &self.settled)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<D: Driver, const DEPTH: usize, T> Unpin for PipelineDrainFuture<'_, '_, D, DEPTH, T> {}

impl<D: Driver, const DEPTH: usize, T> Future for PipelineDrainFuture<'_, '_, D, DEPTH, T> {
    type Output = Result<DrainReport, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.done {
            polled_after_ready("PipelineDrainFuture");
        }
        let device = this.pipe.runner.device();
        let clock = || device.driver().clock();
        // One budget for the whole drain, as `Pipeline::drain` has.
        let (start, budget) = *this.budget.get_or_insert_with(|| {
            let runs =
                u32::try_from(device.health().in_flight.saturating_add(1)).unwrap_or(u32::MAX);
            (clock(), device.fence_timeout().saturating_mul(runs))
        });
        let left = || budget.saturating_sub(clock().saturating_sub(start));
        while this.settled < this.pipe.len {
            let index = (this.pipe.head + this.settled) % DEPTH;
            let left = left();
            if left.is_zero() {
                // Spent: only looked at (a run not complete is settled as
                // a timeout after the whole budget), as `drain` does.
                this.pipe.lanes[index].settle_overdue(budget);
            } else {
                let wait = this
                    .wait
                    .get_or_insert_with(|| FenceWait::new(Wait::For(left)));
                if this.pipe.lanes[index]
                    .poll_settle(wait, cx.waker())
                    .is_pending()
                {
                    return Poll::Pending;
                }
            }
            this.wait = None;
            this.settled += 1;
        }
        let drain = this
            .drain
            .get_or_insert_with(|| DrainWait::new(Some(left())));
        let report = match device.poll_drain(drain, cx.waker()) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        this.done = true;
        // Sound as `Pipeline::drain` is: this future holds the pipeline
        // exclusively, and the pipeline every token and run of the device.
        let report = report.map_err(|k| Error::plain(Action::Drain, k))?;
        this.pipe.renew_lanes();
        Poll::Ready(Ok(report))
    }
}
