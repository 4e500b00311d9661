//! What a shared device does to all its runs at once: a publication
//! ([`PublishFuture`]) and a close ([`SharedCloseFuture`]). Each takes its turn
//! in the arrival queue — runs submitted before it run first, submissions
//! after it wait — then settles every outstanding run into its ticket
//! (looking at the runs' fences itself: it never waits for a ticket's
//! holder to act) and proves the queue quiet, awaited.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::hub::Hub;
use super::recovery::Look;
use super::{SharedDevice, blocking};
use crate::contract::DrainReport;
use crate::contract::code::Callable;
use crate::contract::error::{Action, Error, ErrorKind};
use crate::contract::slot::{Depth, SupportedDepth};
use crate::contract::wait::{DrainWait, FenceWait, polled_after_ready};
use crate::driver::Driver;

/// The part both barriers share: their place in the queue, their own look
/// at each lane's run, and their awaited drain.
struct Barrier<'s, D: Driver + 'static, const DEPTH: usize> {
    shared: &'s SharedDevice<D, DEPTH>,
    arrival: Option<u64>,
    waits: [Option<FenceWait>; DEPTH],
    drain: DrainWait,
    done: bool,
}

/// Where a barrier stands after one look.
enum Stage {
    /// Runs still in flight, or the queue not yet quiet: look again.
    Waiting,
    /// Every run settled and the queue proven quiet: the drain's report.
    Quiet(DrainReport),
    /// The drain's verdict: the queue could not be proven quiet.
    Failed(ErrorKind),
}

impl<'s, D: Driver + 'static, const DEPTH: usize> Barrier<'s, D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    fn new(shared: &'s SharedDevice<D, DEPTH>) -> Self {
        Barrier {
            shared,
            arrival: None,
            waits: [None; DEPTH],
            drain: DrainWait::new(None),
            done: false,
        }
    }

    /// One look: first the barrier's turn, then every owing lane settled
    /// into its ticket, then the queue proven quiet.
    fn look(&mut self, hub: &mut Hub<D, DEPTH>, waker: &Waker) -> Stage {
        let id = *self.arrival.get_or_insert_with(|| hub.arrive());
        // Who wakes it: behind another arrival, that arrival's leaving
        // (`Hub::leave` wakes the next head); at the head, what its own
        // look armed — an owing lane's fence (`settle_owing`), the drain's
        // newest fence or a time slice (`poll_drain`) — and a ticket's
        // settle of an owing lane (`Hub::collect` wakes the head).
        if !hub.is_head(id) {
            hub.wait_turn(id, waker);
            return Stage::Waiting;
        }
        // A recovery the device needs goes first (`recovery.rs`).
        match hub.look_recovery(&self.shared.inner.cell, waker) {
            Look::Clear => {}
            Look::Waiting => {
                hub.wait_turn(id, waker);
                return Stage::Waiting;
            }
            Look::Lost(cause) => return Stage::Failed(ErrorKind::Lost(cause)),
        }
        let settled = hub.settle_owing(&mut self.waits, waker);
        if !settled {
            return Stage::Waiting;
        }
        match self
            .shared
            .inner
            .cell
            .device
            .poll_drain(&mut self.drain, waker)
        {
            Poll::Pending => Stage::Waiting,
            Poll::Ready(Ok(report)) => Stage::Quiet(report),
            Poll::Ready(Err(kind)) => Stage::Failed(kind),
        }
    }

    /// The barrier is done: it leaves the queue (the next arrival is woken).
    fn leave(&mut self, hub: &mut Hub<D, DEPTH>) {
        self.done = true;
        if let Some(id) = self.arrival.take() {
            hub.leave(id);
        }
    }
}

impl<D: Driver + 'static, const DEPTH: usize> Drop for Barrier<'_, D, DEPTH> {
    fn drop(&mut self) {
        if let Some(id) = self.arrival.take() {
            self.shared.inner.hub().leave(id);
        }
    }
}

/// A publication through a [`SharedDevice`]: what
/// [`SharedDevice::publish_async`] returns.
///
/// It waits its turn behind the submissions made before it, settles every
/// outstanding run into its ticket (each keeps its result; the future
/// looks at the fences itself, so a task that publishes while it holds an
/// unawaited ticket does not deadlock), proves the queue quiet, then
/// publishes. From then on code references of the replaced publication are
/// refused ([`ErrorKind::CodeRepublished`]). Dropped before it resolves it
/// leaves the queue having published nothing (runs it settled keep their
/// outcomes for their tickets). Polled again after it resolved, it panics,
/// as std's `async fn` futures do.
#[must_use = "a future does nothing unless awaited"]
pub struct PublishFuture<'s, 'c, D: Driver + 'static, const DEPTH: usize> {
    barrier: Barrier<'s, D, DEPTH>,
    callables: &'c [Callable],
}

impl<D: Driver + 'static, const DEPTH: usize> Unpin for PublishFuture<'_, '_, D, DEPTH> {}

impl<D: Driver + 'static, const DEPTH: usize> std::fmt::Debug for PublishFuture<'_, '_, D, DEPTH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublishFuture")
            .field("callables", &self.callables.len())
            .field("done", &self.barrier.done)
            .finish_non_exhaustive()
    }
}

impl<D: Driver + 'static, const DEPTH: usize> PublishFuture<'_, '_, D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// The publication itself, every run settled and the queue quiet: the
    /// device registers the code (its drain finds nothing to wait for, or,
    /// blocking, waits the queue budget), and the lanes take fresh claims
    /// once it reset the slots.
    fn publish(&mut self, hub: &mut Hub<D, DEPTH>) -> Result<(), Error> {
        let cell = &self.barrier.shared.inner.cell;
        let before = cell.device.publication();
        let registered = cell.device.register(self.callables);
        if cell.device.publication() != before {
            // The drain reset every slot: the lanes' claims are stale.
            hub.renew(cell);
            hub.publication = cell.device.publication();
            hub.code.clear();
        }
        hub.code = registered?;
        Ok(())
    }
}

impl<D: Driver + 'static, const DEPTH: usize> Future for PublishFuture<'_, '_, D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    type Output = Result<(), Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.barrier.done {
            polled_after_ready("PublishFuture");
        }
        let inner = &this.barrier.shared.inner;
        let mut hub = inner.hub();
        if hub.closed {
            let kind = hub.closed_kind();
            this.barrier.leave(&mut hub);
            return Poll::Ready(Err(Error::plain(Action::Publish, kind)));
        }
        let r = match this.barrier.look(&mut hub, cx.waker()) {
            Stage::Waiting => return Poll::Pending,
            Stage::Failed(kind) => Err(Error::plain(Action::Publish, kind)),
            Stage::Quiet(_) => this.publish(&mut hub),
        };
        this.barrier.leave(&mut hub);
        Poll::Ready(r)
    }
}

impl<D: Driver + 'static, const DEPTH: usize> blocking::Driven<D, DEPTH>
    for PublishFuture<'_, '_, D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    fn inner(&self) -> &super::Inner<D, DEPTH> {
        &self.barrier.shared.inner
    }
}

/// A close of a [`SharedDevice`], awaited: what
/// [`SharedDevice::close_async`] returns.
///
/// The device refuses new submissions at once ([`ErrorKind::Closed`]);
/// the future then waits its turn behind the submissions already waiting
/// (each refused as it is polled), settles every outstanding run into its
/// ticket and proves the queue quiet, awaited — so the last handle's drop,
/// which releases the device on a thread of its own, finds nothing left to
/// wait for. Dropped early, the device stays closed. Polled again after it
/// resolved, it panics, as std's `async fn` futures do.
#[must_use = "a future does nothing unless awaited"]
pub struct SharedCloseFuture<'s, D: Driver + 'static, const DEPTH: usize> {
    barrier: Barrier<'s, D, DEPTH>,
}

impl<D: Driver + 'static, const DEPTH: usize> Unpin for SharedCloseFuture<'_, D, DEPTH> {}

impl<D: Driver + 'static, const DEPTH: usize> std::fmt::Debug for SharedCloseFuture<'_, D, DEPTH> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCloseFuture")
            .field("done", &self.barrier.done)
            .finish_non_exhaustive()
    }
}

impl<D: Driver + 'static, const DEPTH: usize> Future for SharedCloseFuture<'_, D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    type Output = Result<DrainReport, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.barrier.done {
            polled_after_ready("SharedCloseFuture");
        }
        let inner = &this.barrier.shared.inner;
        let mut hub = inner.hub();
        let r = match this.barrier.look(&mut hub, cx.waker()) {
            Stage::Waiting => return Poll::Pending,
            Stage::Failed(kind) => Err(Error::plain(Action::Close, kind)),
            Stage::Quiet(report) => {
                // The drain reset every slot: fresh claims, so the last
                // drop's release finds the lanes idle.
                hub.renew(&inner.cell);
                Ok(report)
            }
        };
        this.barrier.leave(&mut hub);
        Poll::Ready(r)
    }
}

impl<D: Driver + 'static, const DEPTH: usize> SharedDevice<D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// Publishes `callables`, awaited (see [`PublishFuture`]): every
    /// outstanding run settled into its ticket first, the queue proven
    /// quiet, the code registered. Code references handed out before are
    /// refused from then on ([`ErrorKind::CodeRepublished`]).
    ///
    /// ```
    /// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
    /// use runclaim::contract::ErrorKind;
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let shared = SharedDevice::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
    /// pollster::block_on(async {
    ///     shared.publish_async(&[Callable::program("f", &Program::new().add(1))]).await?;
    ///     let old = shared.code("f")?;
    ///     let ticket = shared.submit(RunSpec::new(old, Input::Host(&[1]))).await?;
    ///     // The ticket is still held: the publication settles its run itself.
    ///     shared.publish_async(&[Callable::program("f", &Program::new().add(10))]).await?;
    ///     assert_eq!(ticket.await?.values, [2]); // the old code's result, kept
    ///     let refused = shared.submit(RunSpec::new(old, Input::Host(&[1]))).await.unwrap_err();
    ///     assert_eq!(refused.kind(), &ErrorKind::CodeRepublished);
    ///     let new = shared.code("f")?;
    ///     assert_eq!(shared.submit(RunSpec::new(new, Input::Host(&[1]))).await?.await?.values, [11]);
    ///     Ok::<(), runclaim::Error>(())
    /// })?;
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::Closed`]; otherwise as [`Device::publish`](crate::Device::publish)
    /// ([`ErrorKind::Undrained`] when the queue was not proven quiet within
    /// its budget: nothing was published).
    pub fn publish_async<'c>(&self, callables: &'c [Callable]) -> PublishFuture<'_, 'c, D, DEPTH> {
        PublishFuture {
            barrier: Barrier::new(self),
            callables,
        }
    }

    /// Publishes `callables`, blocking: [`publish_async`](SharedDevice::publish_async)'s
    /// future, driven on the thread (which sleeps in the driver's blocking
    /// calls on the fences and the queue its looks name).
    ///
    /// # Errors
    /// As [`publish_async`](SharedDevice::publish_async).
    pub fn publish(&self, callables: &[Callable]) -> Result<(), Error> {
        blocking::drive(self.publish_async(callables))
    }

    /// Closes the device, awaited (see [`SharedCloseFuture`]): submissions are
    /// refused from now on, every outstanding run is settled into its
    /// ticket and the queue is proven quiet. The device itself is released
    /// when the last handle, ticket and future are gone — on a thread of
    /// its own, never the dropping one.
    ///
    /// ```
    /// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
    /// use runclaim::contract::ErrorKind;
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let shared = SharedDevice::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
    /// shared.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// let f = shared.code("f")?;
    /// pollster::block_on(async {
    ///     let ticket = shared.submit(RunSpec::new(f, Input::Host(&[1]))).await?;
    ///     shared.close_async().await?;
    ///     assert_eq!(ticket.await?.values, [2]); // admitted before the close: resolved
    ///     let refused = shared.submit(RunSpec::new(f, Input::Host(&[1]))).await.unwrap_err();
    ///     assert_eq!(refused.kind(), &ErrorKind::Closed);
    ///     Ok::<(), runclaim::Error>(())
    /// })?;
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::Undrained`] when the queue was not proven quiet within
    /// its budget (the device stays closed; its release at the last drop
    /// waits, bounded, on its own thread); a driver error.
    pub fn close_async(&self) -> SharedCloseFuture<'_, D, DEPTH> {
        self.close();
        SharedCloseFuture {
            barrier: Barrier::new(self),
        }
    }
}
