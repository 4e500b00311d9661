//! One submission's result: a [`Ticket`], awaitable ([`Future`]) or waited
//! for ([`Ticket::wait`]), that resolves to the run's [`Done`] — its
//! records, its values, its workload — or its error, with the workload.
#![allow(
    clippy::result_large_err,
    reason = "a result hands the workload back by value (the rule: never lost); it moves once per run"
)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::{Inner, blocking};
use crate::contract::completed::Delivery;
use crate::contract::error::{Error, ErrorKind, RunId};
use crate::contract::wait::{FenceWait, Wait, polled_after_ready};
use crate::driver::Driver;

/// One admitted submission's result, for the task that submitted it: a
/// future (`ticket.await`) and a blocking wait ([`wait`](Ticket::wait)).
///
/// The run was launched when the ticket was made; the ticket looks at its
/// own run's fence (never a whole-stream sync) by the rules every fence
/// follows — the queue-aware budget, the verdicts on the driver's clock —
/// and finalizes it. Tickets may be awaited in any order, on any task; a
/// run another caller settled (a submission that needed its slot, a
/// publication, a close) keeps its outcome for its ticket.
///
/// **Cancel-safe.** Dropping a ticket never blocks and never loses another
/// task's result: its run still completes on the device and its slot is
/// taken back when it settles (its outcome dropped). Polled again after it
/// resolved, it panics, as std's `async fn` futures do.
///
/// ```
/// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let shared = SharedDevice::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
/// shared.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let inc = shared.code("inc")?;
/// let ticket = shared.submit_blocking(RunSpec::new(inc, Input::Host(&[41])))?;
/// let done = pollster::block_on(ticket)?; // or ticket.wait()
/// assert_eq!(done.values, [42]);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[must_use = "a ticket is its run's result: dropping it drops the result"]
pub struct Ticket<D: Driver + 'static, const DEPTH: usize> {
    pub(super) inner: Arc<Inner<D, DEPTH>>,
    pub(super) id: u64,
    pub(super) run: RunId,
    pub(super) wait: FenceWait,
    pub(super) done: bool,
}

impl<D: Driver + 'static, const DEPTH: usize> Ticket<D, DEPTH> {
    /// The run the ticket is for.
    #[must_use]
    pub fn run(&self) -> RunId {
        self.run
    }

    /// Waits for the run, blocking the thread: the same look as the
    /// future's, the thread sleeping on the run's own fence between looks
    /// (a stepped simulator is driven by that sleep).
    ///
    /// # Errors
    /// As the future: the run's error, its workload handed back.
    pub fn wait(self) -> Delivery {
        blocking::drive(self)
    }

    pub(super) fn new(inner: Arc<Inner<D, DEPTH>>, id: u64, run: RunId) -> Self {
        Ticket {
            inner,
            id,
            run,
            wait: FenceWait::new(Wait::Configured),
            done: false,
        }
    }
}

impl<D: Driver + 'static, const DEPTH: usize> blocking::Driven<D, DEPTH> for Ticket<D, DEPTH> {
    fn inner(&self) -> &Inner<D, DEPTH> {
        &self.inner
    }

    fn waits_on(&self) -> Option<usize> {
        self.inner.hub().lane_of(self.id)
    }

    fn tell(&mut self, told: Option<bool>) {
        self.wait.told = told;
    }
}

impl<D: Driver + 'static, const DEPTH: usize> Unpin for Ticket<D, DEPTH> {}

impl<D: Driver + 'static, const DEPTH: usize> std::fmt::Debug for Ticket<D, DEPTH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("run", &self.run)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<D: Driver + 'static, const DEPTH: usize> Future for Ticket<D, DEPTH> {
    type Output = Delivery;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.done {
            polled_after_ready("Ticket");
        }
        let mut hub = this.inner.hub();
        // The ticket looks itself now: a settle by this look must not wake
        // its own task again (a wasted poll).
        hub.unwait_ticket(this.id);
        // Who wakes it: its own look armed this waker on the run's fence
        // (`Lane::poll_settle`), and any other looker that settles the run
        // first (a submission, a barrier, a recovery) wakes it through
        // `wait_ticket` (`Hub::collect`). A run no lane owes any more was
        // settled already: its outcome is taken below, no park.
        if let Some(lane) = hub.lane_of(this.id)
            && hub.settle(lane, &mut this.wait, cx.waker()).is_pending()
        {
            hub.wait_ticket(this.id, cx.waker());
            return Poll::Pending;
        }
        // Settled, by this look or another's.
        let ready = hub.take_done(this.id).unwrap_or_else(|| {
            let kind = ErrorKind::broken("a ticket whose run left no outcome");
            Err(Error::plain(super::hub::SUBMIT, kind).map_value(|()| None))
        });
        this.done = true;
        Poll::Ready(ready)
    }
}

impl<D: Driver + 'static, const DEPTH: usize> Drop for Ticket<D, DEPTH> {
    fn drop(&mut self) {
        if !self.done {
            // One look at the run, never a wait; a driver that panics in
            // it is caught (the lane then reports the broken transition
            // at its next use), so a ticket dropped while unwinding never
            // aborts the process.
            let (inner, id) = (&self.inner, self.id);
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                inner.hub().drop_ticket(id);
            }));
        }
    }
}
