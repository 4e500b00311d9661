//! Awaiting the device without a parked thread: a launched run's fence
//! ([`FenceFuture`]) as a `std::future::Future`. (A runner's drain is in
//! `runner/future.rs`, the pipeline's waits in `pipeline/future.rs`; all
//! look and wake by the rules below.)
//!
//! Each poll *looks* — it queries the run's own fence event, and the
//! fences of the runs ahead of it, and never waits — and judges by the
//! same rules as the blocking call, on the driver's clock: the queue-aware
//! time rule, the "device overran" verdict, the limit. Short of a verdict
//! it asks the driver to wake the task when the event completes, or when
//! the next verdict could fall ([`Driver::notify_event`]). Which driver
//! wakes how:
//!
//! | driver | what wakes an awaiting task |
//! |---|---|
//! | real-time simulator | its device thread, when the run's events complete (or its stream faults), or at the next verdict time |
//! | stepped simulator | nothing moves unless driven: whoever steps it (`step`, `run_until_idle`, a blocking call) wakes what completed |
//! | instant driver | nothing: every run is complete when first polled |
//! | `acl` | the device's reactor thread: the run's host callback, the process-wide exception callback, or the deadline |
//! | a driver without notifications | the default: a process-wide timer, backing off from 50 µs |
//!
//! No async runtime is a dependency: any executor drives these futures.
//!
//! Two promises come from the driver and are not checked here: a driver
//! that answers [`Notice::Completion`](crate::driver::Notice::Completion)
//! wakes the task (a driver that never does leaves the future pending —
//! it blocks no thread), and one that answers
//! [`Notice::Ready`](crate::driver::Notice::Ready) for an event its query
//! calls not ready (a driver bug) makes the future look again on the
//! shared timer, backing off, never in a busy loop. A driver whose clock
//! stands still cannot keep a future pending for ever: a wake that came
//! with the clock unmoved counts as the time it asked for, as a blocking
//! fence counts a timed-out wait.
//!
//! [`Driver::notify_event`]: crate::driver::Driver::notify_event

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::Run;
use crate::contract::error::{Action, Error};
use crate::contract::states::{Fenced, Launched};
use crate::contract::wait::{FenceWait, Wait, polled_after_ready};
use crate::contract::workload::{Bindings, NoWorkload};

/// A launched run's fence, awaited: what [`Run::fence_async`] (or
/// `run.await`) and [`Run::fence_for_async`] return.
///
/// It resolves as [`Run::fence`] / [`Run::fence_for`] return: the
/// [`Fenced`] run, or the error with the launched run handed back inside
/// it — the same verdicts, on the same clock.
///
/// **Dropping it before it resolves never blocks** (a blocking
/// [`Run`]'s drop waits for its fence; this does not): it looks at the
/// fence once, and a run found complete gives its slot back at once;
/// otherwise the run is handed to the device **abandoned**: it stays in
/// the device's in-flight set, and its slot is reclaimed at the slot's
/// next take ([`Runner::take_slot`](crate::Runner::take_slot), a
/// pipeline's submit) once the device proves the run complete — by the
/// run's own fence, the same proof a fence takes — or at a drain or a
/// publication ([`Health::reclaimed`](crate::contract::Health::reclaimed)
/// counts the former). Dropping the device meanwhile waits for it,
/// bounded, as for any forgotten run. Polled again after it resolved, it
/// panics, as std's `async fn` futures do.
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let mut device = Device::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
/// let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let code = runner.code("inc")?;
/// let mut out = Outputs::<1>::new(1);
/// pollster::block_on(async {
///     let a = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(code, Input::Host(&[1])))?.launch()?;
///     let b = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(code, Input::Previous))?.launch()?;
///     let b = b.await?; // no thread parked on the device: the task is woken
///     let a = a.fence_async().await?;
///     b.finalize(&mut out)?;
///     drop(a);
///     Ok::<_, runclaim::Error>(())
/// })?;
/// assert_eq!(out.values(), &[3]);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[must_use = "a future does nothing unless awaited; dropped, it hands its run to the device as a forgotten run"]
pub struct FenceFuture<'r, const I: usize, B: Bindings = NoWorkload> {
    run: Option<Run<'r, Launched, I, B>>,
    wait: FenceWait,
}

impl<'r, const I: usize, B: Bindings> FenceFuture<'r, I, B> {
    pub(crate) fn new(run: Run<'r, Launched, I, B>, how: Wait) -> Self {
        FenceFuture {
            run: Some(run),
            wait: FenceWait::new(how),
        }
    }
}

// Nothing in it is ever pinned (no field is projected): moving it is fine.
impl<const I: usize, B: Bindings> Unpin for FenceFuture<'_, I, B> {}

impl<const I: usize, B: Bindings> std::fmt::Debug for FenceFuture<'_, I, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FenceFuture")
            .field("run", &self.run)
            .finish_non_exhaustive()
    }
}

impl<'r, const I: usize, B: Bindings> Future for FenceFuture<'r, I, B> {
    type Output = Result<Run<'r, Fenced, I, B>, Error<Run<'r, Launched, I, B>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(run) = this.run.as_ref() else {
            polled_after_ready("FenceFuture")
        };
        let verdict = match run.inner().poll_fence(&mut this.wait, cx.waker()) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(v) => v,
        };
        let Some(run) = this.run.take() else {
            polled_after_ready("FenceFuture")
        };
        Poll::Ready(match verdict {
            Ok(()) => Ok(Run::from_inner(run.into_inner().fenced())),
            Err(kind) => Err(run
                .into_inner()
                .refused(Action::Fence, kind)
                .map_value(Run::from_inner)),
        })
    }
}

impl<const I: usize, B: Bindings> Drop for FenceFuture<'_, I, B> {
    fn drop(&mut self) {
        let Some(run) = self.run.take() else {
            return;
        };
        // One look, never a wait, the run not moved: a driver that panics
        // here unwinds through nothing that waits (a launched run's drop
        // would), and is caught.
        let looked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run.inner().look()));
        if let Ok(Ok(())) = looked {
            // Complete: its token goes back as the fenced run drops.
            drop(Run::from_inner(run.into_inner().fenced()));
        } else {
            // Not yet, a failure (the device has poisoned and kept what it
            // must) or a panic: the device keeps the run, abandoned — its
            // slot comes back at the slot's next take, once the run is
            // proven complete.
            run.into_inner().abandon();
        }
    }
}

impl<'r, const I: usize, B: Bindings> IntoFuture for Run<'r, Launched, I, B> {
    type Output = Result<Run<'r, Fenced, I, B>, Error<Run<'r, Launched, I, B>>>;
    type IntoFuture = FenceFuture<'r, I, B>;

    /// `run.await` is [`run.fence_async()`](Run::fence_async).
    fn into_future(self) -> Self::IntoFuture {
        FenceFuture::new(self, Wait::Configured)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use static_assertions::assert_impl_all;

    assert_impl_all!(FenceFuture<'static, 0>: Send, Sync, Unpin);

    /// A resolved future polled again panics, naming itself, as std's
    /// `async fn` futures do — never a silent pending for ever.
    #[test]
    #[should_panic(expected = "`FenceFuture` polled after it resolved")]
    fn a_resolved_fence_future_polled_again_panics() {
        use crate::driver::abi::Program;
        use crate::sim::{SimConfig, SimDriver};
        use crate::{Callable, Device, DeviceConfig, Input, RunSpec};
        let sim = SimDriver::stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(sim.clone(), DeviceConfig::default()).unwrap();
        let runner = dev
            .publish(&[Callable::program("f", &Program::new().add(1))])
            .unwrap();
        let spec = RunSpec::new(runner.code("f").unwrap(), Input::Host(&[1]));
        let run = runner.prepare(runner.take_slot::<0>().unwrap(), spec);
        let mut fut = std::pin::pin!(run.unwrap().launch().unwrap().fence_async());
        sim.run_until_idle(1_000_000).unwrap();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let first = fut.as_mut().poll(&mut cx);
        assert!(matches!(first, Poll::Ready(Ok(_))));
        drop(first);
        let _ = fut.as_mut().poll(&mut cx);
    }
    assert_impl_all!(FenceFuture<'static, 1, crate::contract::WithWorkload<'static, 'static>>: Send, Unpin);
}
