//! Submitting to a shared device: [`SubmitFuture`] — admitted in arrival
//! order, waiting (awaited or blocking) for a slot when all are busy —
//! and [`SharedDevice::try_submit`], which refuses at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::hub::{Hub, SUBMIT};
use super::recovery::Look;
use super::ticket::Ticket;
use super::{Inner, SharedDevice, blocking};
use crate::contract::completed::Done;
use crate::contract::error::{Error, ErrorKind};
use crate::contract::pipeline::Submit;
use crate::contract::pipeline::results::sealed::Sealed;
use crate::contract::slot::{Depth, SupportedDepth};
use crate::contract::wait::{FenceWait, polled_after_ready};
use crate::contract::workload::Workload;
use crate::driver::Driver;

impl<D: Driver + 'static, const DEPTH: usize> SharedDevice<D, DEPTH>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// Submits `work` — a [`RunSpec`](crate::RunSpec) (its input is copied
    /// when the run is prepared, so it is borrowed only until then) or an
    /// owned [`Workload`](crate::Workload) — and resolves, once it is
    /// admitted and launched, to its [`Ticket`]. Admission is in arrival
    /// order; while every slot is busy the future waits for one (looking
    /// at the oldest runs' fences itself, so it never depends on another
    /// task to poll). Dropped while waiting, it leaves the queue and takes
    /// nothing.
    ///
    /// ```
    /// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let shared = SharedDevice::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
    /// shared.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let inc = shared.code("inc")?;
    /// let sum = pollster::block_on(async {
    ///     let mut tickets = Vec::new();
    ///     for i in 0..6u32 {
    ///         // The third submission waits for a slot: depth 2.
    ///         tickets.push(shared.submit(RunSpec::new(inc, Input::Host(&[i]))).await?);
    ///     }
    ///     let mut sum = 0;
    ///     for t in tickets {
    ///         sum += t.await?.values[0];
    ///     }
    ///     Ok::<_, runclaim::Error>(sum)
    /// })?;
    /// assert_eq!(sum, (1..=6).sum::<u32>());
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// The work comes back inside the error: [`ErrorKind::Closed`],
    /// [`ErrorKind::ChainAcrossTasks`] for `Input::Previous`,
    /// [`ErrorKind::CodeRepublished`] for code of a replaced publication,
    /// or any error of a prepare or of a launch that submitted nothing.
    pub fn submit<W: Submit<'static>>(&self, work: W) -> SubmitFuture<'_, D, DEPTH, W> {
        SubmitFuture {
            shared: self,
            work: Some(work),
            arrival: None,
            waits: [None; DEPTH],
            mode: Mode::Wait,
        }
    }

    /// Runs `work` and resolves to its result: [`submit`](SharedDevice::submit)
    /// and the [`Ticket`] awaited, in one future — the common case. A
    /// refused submission resolves to its error at once, a workload handed
    /// back inside it (a [`RunSpec`](crate::RunSpec) is `Copy`: the caller
    /// still has it), in the same error type as the run's own; a
    /// collateral error ([`Error::collateral`]) comes back as it is, never
    /// retried. Code that wants admission and completion apart (to submit
    /// more while a run executes, or for backpressure) uses `submit`.
    /// Dropped at any point it is cancel-safe, as a submission and a
    /// ticket are.
    ///
    /// ```
    /// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let shared = SharedDevice::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
    /// shared.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let inc = shared.code("inc")?;
    /// let done = pollster::block_on(shared.run(RunSpec::new(inc, Input::Host(&[41]))))?;
    /// assert_eq!(done.values, [42]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`submit`](SharedDevice::submit), then as the ticket.
    pub fn run<W: Submit<'static>>(
        &self,
        work: W,
    ) -> impl Future<Output = Result<Done, Error<Option<Workload<'static>>>>> {
        let submitted = self.submit(work);
        async move {
            let ticket = submitted
                .await
                .map_err(|e| e.map_value(Sealed::into_workload))?;
            ticket.await
        }
    }

    /// [`run`](SharedDevice::run), blocking the thread:
    /// [`submit_blocking`](SharedDevice::submit_blocking), then
    /// [`Ticket::wait`].
    ///
    /// ```
    /// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let shared = SharedDevice::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// shared.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let done = shared.run_blocking(RunSpec::new(shared.code("inc")?, Input::Host(&[1, 2])))?;
    /// assert_eq!(done.values, [2, 3]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`run`](SharedDevice::run).
    #[allow(
        clippy::result_large_err,
        reason = "a result hands the workload back by value, as a ticket's does (the rule: never lost); it moves once per run"
    )]
    pub fn run_blocking<W: Submit<'static>>(
        &self,
        work: W,
    ) -> Result<Done, Error<Option<Workload<'static>>>> {
        self.submit_blocking(work)
            .map_err(|e| e.map_value(Sealed::into_workload))?
            .wait()
    }

    /// [`submit`](SharedDevice::submit), blocking the thread while every
    /// slot is busy: the same future, driven on the thread, which sleeps
    /// in the driver's blocking call on the fence its look names (a
    /// stepped simulator is driven by that sleep).
    ///
    /// # Errors
    /// As [`submit`](SharedDevice::submit).
    pub fn submit_blocking<W: Submit<'static>>(
        &self,
        work: W,
    ) -> Result<Ticket<D, DEPTH>, Error<W>> {
        blocking::drive(self.submit(work))
    }

    /// [`submit`](SharedDevice::submit) without waiting: refused at once,
    /// the work handed back, when it would wait — every slot busy
    /// ([`ErrorKind::DepthExhausted`]) or earlier submissions still
    /// waiting.
    ///
    /// ```
    /// use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice};
    /// use runclaim::contract::ErrorKind;
    /// use runclaim::driver::abi::Program;
    /// use runclaim::sim::{SimConfig, SimDriver};
    ///
    /// let shared = SharedDevice::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// shared.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let inc = shared.code("inc")?;
    /// let (a, b) = (shared.try_submit(RunSpec::new(inc, Input::Host(&[1])))?, shared.try_submit(RunSpec::new(inc, Input::Host(&[2])))?);
    /// let full = shared.try_submit(RunSpec::new(inc, Input::Host(&[3]))).unwrap_err();
    /// assert_eq!(full.kind(), &ErrorKind::DepthExhausted { depth: 2 });
    /// let back = full.into_value(); // the spec, to submit later
    /// assert_eq!((a.wait()?.values.into_vec(), b.wait()?.values.into_vec()), (vec![2], vec![3]));
    /// shared.try_submit(back)?.wait()?;
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`submit`](SharedDevice::submit), and
    /// [`ErrorKind::DepthExhausted`].
    pub fn try_submit<W: Submit<'static>>(&self, work: W) -> Result<Ticket<D, DEPTH>, Error<W>> {
        let mut fut = SubmitFuture {
            shared: self,
            work: Some(work),
            arrival: None,
            waits: [None; DEPTH],
            mode: Mode::Try,
        };
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(&mut fut).poll(&mut cx) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(Error::plain(SUBMIT, ErrorKind::broken("a try that waited"))
                .map_value(|()| unreachable!("a try's work comes back in its own error"))),
        }
    }
}

/// A submission to a [`SharedDevice`], waiting to be admitted: what
/// [`SharedDevice::submit`] returns. It resolves to the run's [`Ticket`]
/// once the run is launched, or to the error with the work handed back.
/// Dropped before it resolves it leaves the queue and takes nothing.
/// Polled again after it resolved, it panics, as std's `async fn` futures
/// do.
#[must_use = "a future does nothing unless awaited"]
pub struct SubmitFuture<'s, D: Driver + 'static, const DEPTH: usize, W> {
    shared: &'s SharedDevice<D, DEPTH>,
    work: Option<W>,
    /// Its place in the arrival queue, from its first poll.
    arrival: Option<u64>,
    /// Its own look at each lane's run, while it waits for a slot.
    waits: [Option<FenceWait>; DEPTH],
    /// What a poll that cannot admit at once does.
    mode: Mode,
}

/// What a [`SubmitFuture`]'s poll does when it cannot admit at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Waits: registers its waker where it parks, arms the owing fences.
    Wait,
    /// `try_submit`: refuses.
    Try,
    /// A blocking submission's first poll, with no waker worth arming:
    /// `Pending` with nothing registered, armed or settled, so the poll
    /// that follows (in `Wait`) does each once.
    AtOnce,
}

impl<D: Driver + 'static, const DEPTH: usize, W> Unpin for SubmitFuture<'_, D, DEPTH, W> {}

impl<D: Driver + 'static, const DEPTH: usize, W> std::fmt::Debug for SubmitFuture<'_, D, DEPTH, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubmitFuture")
            .field("arrival", &self.arrival)
            .field("resolved", &self.work.is_none())
            .finish_non_exhaustive()
    }
}

impl<D: Driver + 'static, const DEPTH: usize, W: Submit<'static>> SubmitFuture<'_, D, DEPTH, W>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// A free lane for the head arrival: one already free, or one whose run
    /// this look finds settled.
    fn lane(&mut self, hub: &mut Hub<D, DEPTH>, waker: &Waker) -> Option<usize> {
        hub.reclaim_dropped();
        if let Some(i) = hub.free_lane() {
            return Some(i);
        }
        if self.mode == Mode::AtOnce {
            return None;
        }
        hub.settle_owing(&mut self.waits, waker);
        hub.free_lane()
    }

    /// The arrival `id` waits, `work` kept: `waker` is woken when it may
    /// be admitted (`Hub::wait_turn`), or by what the look armed.
    fn park(
        &mut self,
        hub: &mut Hub<D, DEPTH>,
        id: u64,
        work: W,
        waker: &Waker,
    ) -> Poll<Result<Ticket<D, DEPTH>, Error<W>>> {
        if self.mode == Mode::Wait {
            hub.wait_turn(id, waker);
        }
        self.work = Some(work);
        Poll::Pending
    }

    /// A try that would wait, refused: the device is recovering
    /// ([`ErrorKind::Recovering`]) or every slot is busy.
    fn refuse_busy(&mut self, hub: &mut Hub<D, DEPTH>, work: W) -> Error<W> {
        let kind = hub
            .recovering_kind()
            .unwrap_or(ErrorKind::DepthExhausted { depth: DEPTH });
        self.refuse(hub, work, kind)
    }

    /// The work refused with `kind`, handed back.
    fn refuse(&mut self, hub: &mut Hub<D, DEPTH>, work: W, kind: ErrorKind) -> Error<W> {
        if let Some(id) = self.arrival.take() {
            hub.leave(id);
        }
        Error::new(work, SUBMIT, None, None, kind)
    }
}

impl<D: Driver + 'static, const DEPTH: usize, W: Submit<'static>> Future
    for SubmitFuture<'_, D, DEPTH, W>
where
    Depth<DEPTH>: SupportedDepth,
{
    type Output = Result<Ticket<D, DEPTH>, Error<W>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(work) = this.work.take() else {
            polled_after_ready("SubmitFuture")
        };
        let inner: &Arc<Inner<D, DEPTH>> = &this.shared.inner;
        let mut hub = inner.hub();
        if work.chains() {
            let kind = ErrorKind::ChainAcrossTasks;
            return Poll::Ready(Err(this.refuse(&mut hub, work, kind)));
        }
        // A few looks at most: a recovery found and finished, or a lane's
        // fence that fails in this look and starts one.
        for _ in 0..3 {
            if hub.closed {
                let kind = hub.closed_kind();
                return Poll::Ready(Err(this.refuse(&mut hub, work, kind)));
            }
            let id = *this.arrival.get_or_insert_with(|| hub.arrive());
            if !hub.is_head(id) {
                // Woken when the arrival ahead leaves (`Hub::leave`).
                if this.mode == Mode::Try {
                    return Poll::Ready(Err(this.refuse_busy(&mut hub, work)));
                }
                return this.park(&mut hub, id, work, cx.waker());
            }
            // The head: a recovery, if the device needs one, comes first
            // (not in a poll that arms nothing).
            if hub.needs_recovery(&inner.cell) {
                if this.mode == Mode::AtOnce {
                    return this.park(&mut hub, id, work, cx.waker());
                }
                match hub.advance_recovery(&inner.cell, cx.waker()) {
                    Look::Clear => {}
                    Look::Waiting => {
                        if let (true, Some(kind)) = (this.mode == Mode::Try, hub.recovering_kind())
                        {
                            return Poll::Ready(Err(this.refuse(&mut hub, work, kind)));
                        }
                        // Armed on the device by the look; a ticket's
                        // settle wakes it too (`Hub::collect`).
                        return this.park(&mut hub, id, work, cx.waker());
                    }
                    Look::Lost(cause) => {
                        let kind = ErrorKind::Lost(cause);
                        return Poll::Ready(Err(this.refuse(&mut hub, work, kind)));
                    }
                }
            }
            if let Some(lane) = this.lane(&mut hub, cx.waker()) {
                // Admitted: the launch happens under the lock, so launch
                // order is admission order.
                let launched = work.submit_into(&mut hub.lanes[lane], &inner.cell, id);
                this.arrival = None;
                hub.leave(id);
                return Poll::Ready(match launched {
                    Ok(run) => Ok(Ticket::new(Arc::clone(inner), id, run)),
                    Err((e, _, work)) => Err(e.map_value(|()| work)),
                });
            }
            if hub.needs_recovery(&inner.cell) {
                // A fence this look settled failed: recover now.
                continue;
            }
            if this.mode == Mode::Try {
                let kind = ErrorKind::DepthExhausted { depth: DEPTH };
                return Poll::Ready(Err(this.refuse(&mut hub, work, kind)));
            }
            // Every lane owes a result and none is settled: the look armed
            // this waker on each owing run's fence (`Hub::settle_owing`).
            return this.park(&mut hub, id, work, cx.waker());
        }
        // Still no verdict after three looks: a try refuses (it never
        // waits); a wait looks again at once.
        if this.mode == Mode::Try {
            return Poll::Ready(Err(this.refuse_busy(&mut hub, work)));
        }
        cx.waker().wake_by_ref();
        let id = this.arrival.unwrap_or_default(); // set by the first look
        this.park(&mut hub, id, work, cx.waker())
    }
}

impl<D: Driver + 'static, const DEPTH: usize, W: Submit<'static>> blocking::Driven<D, DEPTH>
    for SubmitFuture<'_, D, DEPTH, W>
where
    Depth<DEPTH>: SupportedDepth,
{
    fn inner(&self) -> &Inner<D, DEPTH> {
        &self.shared.inner
    }

    fn at_once(&mut self) -> Option<Self::Output> {
        self.mode = Mode::AtOnce;
        let polled = Pin::new(&mut *self).poll(&mut Context::from_waker(Waker::noop()));
        self.mode = Mode::Wait;
        match polled {
            Poll::Ready(r) => Some(r),
            Poll::Pending => None,
        }
    }
}

impl<D: Driver + 'static, const DEPTH: usize, W> Drop for SubmitFuture<'_, D, DEPTH, W> {
    fn drop(&mut self) {
        if let Some(id) = self.arrival.take() {
            self.shared.inner.hub().leave(id);
        }
    }
}
