//! [`Pipeline`]: the steady-state loop every user of queued runs needs —
//! keep all `DEPTH` slots busy over a stream of work and take the results
//! back in order — with every slot still moving through the typed states.

// How the slots stay typed (crate-private: the erasure is invisible
// outside the crate).
//
// A slot index is a type (`SlotToken<'r, I>`, `Run<'r, S, I>`,
// `Outputs<I>`), so `DEPTH` slots are `DEPTH` different types. Inside the
// crate each has an *erased* form whose slot index is a value, the way a
// HAL's `Pin::erase()` turns a pin whose number is a type into one whose
// number is a field: `ErasedToken<'r>` (port, slot, lease),
// `ErasedOutputs` (a buffer that knows its slot) and the erased run
// (a run holding an erased token). The typed forms are thin wrappers
// over them — a `SlotToken<'r, I>` *is* an `ErasedToken` whose slot is
// `I`, an `Outputs<I>` an `ErasedOutputs` whose slot is `I` — and a
// `Run<'r, S, I>` is the same run type as an erased one (`RunOf`), over the
// typed token: every transition (`Runner::prepare`, `Run::launch`,
// `Run::fence`, `Run::finalize`) is written once, reading the slot
// from the token (the constant `I` for a typed one). There is no other
// path into the device.
//
// The pipeline keeps one lane per slot in a `[_; DEPTH]` array, with no
// per-slot code and no allocation in the steady state (only an orphan, a
// run whose completion failed, is boxed): lane `i` holds slot `i`'s
// erased handle and slot `i`'s buffer, and its state is one enum (free,
// pending, settled by a drain, an orphan, lost). What the
// compiler checks for typed code is checked at run time for erased code,
// in one place each: an erased token is made only by the runner, for an
// index below `DEPTH` (`ErrorKind::SlotOutOfRange` otherwise: the
// erased `Slot<I>: SlotOf<DEPTH>`); an erased run finalizes only into its
// own slot's buffer (the erased E0308; a mismatch would be a runclaim
// bug, refused); an erased token becomes a typed one only through a
// conversion that checks its index. All of it is crate-private: outside
// the crate there are only typed slots, and no way to make a typed token
// from an erased one. The slot state, the lease and the token's `Drop`
// are the runner's own, for both forms.

#![allow(
    clippy::result_large_err,
    reason = "a refused or failed workload comes back by value inside the error: never lost"
)]

mod drain;
mod future;
mod replay;

pub(crate) mod results;

use std::fmt;
use std::task::{Poll, Waker};

pub use self::future::{CompleteFuture, PipelineDrainFuture};
pub use self::results::{Rejected, Submit, Unfinished};
use crate::contract::completed::Completed;
use crate::contract::error::{Action, Error, ErrorKind, RunId};
use crate::contract::lane::{self, Lane};
use crate::contract::runner::Runner;
use crate::contract::slot::ErasedToken;
use crate::contract::slot::{Depth, SupportedDepth};
use crate::contract::wait::FenceWait;
use crate::driver::Driver;

/// A queue of runs over all of a runner's slots: submit run specs in order,
/// take finalized results back in the same order, with up to `DEPTH` runs
/// launched at once.
///
/// The pipeline takes every slot token of its [`Runner`] when it is made.
/// [`submit`](Pipeline::submit) prepares and launches a run in the next
/// slot (round robin, so launch order is submission order);
/// [`complete`](Pipeline::complete) fences and finalizes the oldest run and
/// lends you its outputs. Each run carries a *tag* of your choice (`T`, for
/// example the index of its input) that comes back with its result — or
/// with its error, so nothing you submitted is lost.
///
/// **A fault** fails the run that faulted, naming it; a run queued behind
/// it comes back with its own result when its fence and records prove it,
/// or with [`ErrorKind::FaultAhead`] naming the run that faulted
/// ([`Error::collateral`]: resubmit it). The runner is poisoned: `submit`
/// refuses with [`ErrorKind::Poisoned`] until [`drain`](Pipeline::drain)
/// recovers it (a [`SharedDevice`](crate::SharedDevice) recovers by
/// itself).
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let mut device = Device::<_, 3>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// let runner = device.publish(&[Callable::program("triple", &Program::new().mul(3))])?;
/// let code = runner.code("triple")?;
/// let inputs: Vec<Vec<u32>> = (1..=10).map(|i| vec![i, 10 * i]).collect();
///
/// let mut pipe = Pipeline::new(&runner)?; // all three slots
/// let mut results = Vec::new();
/// for (i, input) in inputs.iter().enumerate() {
///     if pipe.is_full() {
///         let done = pipe.complete()?.expect("a full pipeline has an oldest run");
///         results.push((done.tag, done.values.to_vec()));
///     }
///     pipe.submit(RunSpec::new(code, Input::Host(input)), i)?; // three runs launched at a time
/// }
/// while let Some(done) = pipe.complete()? {
///     results.push((done.tag, done.values.to_vec()));
/// }
/// assert_eq!(results.len(), 10);
/// assert!(results.iter().enumerate().all(|(n, (i, v))| n == *i && v[..] == [3 * (n as u32 + 1), 30 * (n as u32 + 1)]));
/// # Ok::<(), runclaim::Error>(())
/// ```
///
/// # The rules still hold
///
/// The pipeline borrows the runner, which borrows the device, so while the
/// pipeline holds runs, publishing new code does not compile:
///
/// ```compile_fail,E0499
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let a = [Callable::program("a", &Program::new().add(1))];
/// # let b = [Callable::program("b", &Program::new().mul(2))];
/// let runner = device.publish(&a).unwrap();
/// let mut pipe = Pipeline::new(&runner).unwrap();
/// pipe.submit(RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1])), ()).unwrap();
/// let runner_b = device.publish(&b).unwrap(); // publish while `pipe` holds a launched run
/// drop(pipe);
/// ```
///
/// The passing twin gives the pipeline up first (dropping it waits, bounded,
/// for its launched runs):
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let a = [Callable::program("a", &Program::new().add(1))];
/// # let b = [Callable::program("b", &Program::new().mul(2))];
/// let runner = device.publish(&a).unwrap();
/// let mut pipe = Pipeline::new(&runner).unwrap();
/// pipe.submit(RunSpec::new(runner.code("a").unwrap(), Input::Host(&[1])), ()).unwrap();
/// drop(pipe); // waits for its run and gives the slots back
/// let runner_b = device.publish(&b).unwrap(); // nothing is launched any more
/// ```
///
/// # Failures
///
/// - A run that completes with an error code fails alone:
///   [`complete`](Pipeline::complete) returns [`ErrorKind::RunFailed`] with
///   the run's tag, and the pipeline goes on.
/// - A refused [`submit`](Pipeline::submit) launched nothing and hands the
///   spec and the tag back ([`Rejected`]); the pipeline is unchanged.
/// - A **poisoned** runner refuses every submit with
///   [`ErrorKind::Poisoned`], which names the cause. Complete the runs still
///   pending (those the device finished hand their results back), then
///   [`drain`](Pipeline::drain): the pipeline goes on.
/// - Every submitted run comes back from `complete` exactly once, as a
///   result or as an error carrying its tag, in submission order.
///
/// # Dropping
///
/// Dropping the pipeline waits for its launched runs, oldest first, within
/// **one total bound**: at most `(runs in flight + 1) ×`
/// [`fence_timeout`](super::DeviceConfig::fence_timeout) altogether, on
/// the driver's clock ([`Driver::clock`](crate::driver::Driver::clock)),
/// wherever in the queue the runs that do not complete are — not one
/// bound per run. *Runs in flight* is [`Health::in_flight`] just before
/// the drop: every launched run of the device not yet proven complete.
/// A run not proven complete within the bound leaves its slot quarantined
/// (a [`Runner::drain`] recovers it); a run that overran its budget at the
/// head of the queue poisons the runner, naming it, as a fence would.
/// (A wait asks the driver for at least 1 µs, and a driver's timed wait
/// may return late — a descheduled host thread — so the last wait can end
/// that much past the bound; the stepped simulator's waits are exact.)
///
/// [`Health::in_flight`]: super::Health::in_flight
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// # use runclaim::driver::abi::Program;
/// use runclaim::sim::{Fault, SimConfig, SimDriver};
/// let sim = SimDriver::stepped(SimConfig::default()); // one step = 1 µs of device time
/// let mut device = Device::<_, 3>::open(sim.clone(), DeviceConfig::default())?;
/// let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// let code = runner.code("f")?;
/// let mut pipe = Pipeline::new(&runner)?;
/// for nth in [2, 4, 6] {
///     sim.inject(Fault::EventNeverCompletes { nth }); // no run's fence ever completes
/// }
/// for i in 0..3 {
///     pipe.submit(RunSpec::new(code, Input::Host(&[i])), i)?;
/// }
/// let in_flight = runner.health().in_flight as u64;
/// let fence_us = runner.device().fence_timeout().as_micros() as u64;
/// let before = sim.stats().steps;
/// drop(pipe);
/// assert!(sim.stats().steps - before <= (in_flight + 1) * fence_us); // one bound for all three
/// assert_eq!(runner.health().quarantined.len(), 3); // none proven complete
/// # Ok::<(), runclaim::Error>(())
/// ```
///
/// **In async code**, that wait would block the executor's thread. A
/// borrowed pipeline is drained, awaited, before it is dropped: after
/// [`drain_async`](Pipeline::drain_async) (or once
/// [`complete_async`](Pipeline::complete_async) has handed every run back)
/// nothing is in flight, and the drop waits for nothing. (A task that
/// cannot await before it goes — a cancelled one — is what a
/// [`SharedDevice`](super::SharedDevice) is for: its runs belong to the
/// handle, whose last drop waits on a thread of its own.)
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// let mut device = Device::<_, 2>::open(SimDriver::real_time(SimConfig::default()), DeviceConfig::default())?;
/// let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
/// let code = runner.code("f")?;
/// pollster::block_on(async {
///     let mut pipe = Pipeline::<_, 2, u32>::new(&runner)?;
///     pipe.submit(RunSpec::new(code, Input::Host(&[1])), 1)?;
///     pipe.submit(RunSpec::new(code, Input::Host(&[2])), 2)?;
///     pipe.drain_async().await?; // settles both runs, awaited
///     assert_eq!(runner.health().in_flight, 0); // the drop below waits for nothing
///     let kept = pipe.complete()?.map(|d| d.values[0]); // a settled outcome is kept
///     assert_eq!(kept, Some(2));
///     drop(pipe);
///     Ok::<(), runclaim::Error>(())
/// })?;
/// # Ok::<(), runclaim::Error>(())
/// ```
pub struct Pipeline<'r, D: Driver, const DEPTH: usize = 2, T = ()> {
    runner: &'r Runner<'r, D, DEPTH>,
    lanes: [Lane<'r, ErasedToken<'r>, T>; DEPTH],
    /// Lane of the oldest pending run.
    head: usize,
    /// Pending runs: submitted, not yet handed back by `complete`. They
    /// occupy lanes `head, head + 1, …` (mod `DEPTH`), in submission order.
    len: usize,
}

impl<'r, D: Driver, const DEPTH: usize, T> Pipeline<'r, D, DEPTH, T>
where
    Depth<DEPTH>: SupportedDepth,
{
    /// A pipeline over all of `runner`'s slots: takes every slot token and
    /// sizes one outputs buffer per slot to the arena
    /// ([`Device::max_elements`](super::Device::max_elements)). This is the
    /// only allocation the pipeline makes in the steady state; on an error
    /// path, a run whose completion failed is kept in a box until its
    /// slot is used again.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 4>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// use runclaim::contract::ErrorKind;
    /// let pipe: Pipeline<'_, _, 4, u64> = Pipeline::new(&runner)?;
    /// assert_eq!((pipe.depth(), pipe.len()), (4, 0));
    /// assert_eq!(runner.take_slot::<3>().unwrap_err().kind(), &ErrorKind::SlotTaken); // the pipeline has it
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::SlotTaken`], [`ErrorKind::SlotInFlight`] or
    /// [`ErrorKind::SlotQuarantined`] when a slot is not free (a token or run
    /// of the runner is alive, or a forgotten run needs a
    /// [`Runner::drain`]); the tokens taken so far are given back.
    pub fn new(runner: &'r Runner<'r, D, DEPTH>) -> Result<Self, Error> {
        let capacity = runner.device().max_elements();
        let lanes = (0..DEPTH)
            .map(|i| Lane::take(&runner, i, capacity))
            .collect::<Result<Vec<_>, _>>()?;
        let lanes = <[Lane<'r, ErasedToken<'r>, T>; DEPTH]>::try_from(lanes).map_err(|_| {
            Error::plain(
                Action::TakeSlot,
                ErrorKind::broken("DEPTH lanes taken, not DEPTH"),
            )
        })?;
        Ok(Pipeline {
            runner,
            lanes,
            head: 0,
            len: 0,
        })
    }
}

impl<'r, D: Driver, const DEPTH: usize, T> Pipeline<'r, D, DEPTH, T> {
    /// Prepares and launches `work` — a [`RunSpec`](crate::RunSpec) or an owned
    /// [`Workload`](crate::Workload) — in the next slot, tagged `tag`;
    /// returns the run's id. Does not wait for the runs before it. Launch
    /// order is submission order, so
    /// [`Input::Previous`](super::Input::Previous) chains on the run
    /// submitted just before.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// use runclaim::contract::ErrorKind;
    /// let mut pipe = Pipeline::new(&runner)?;
    /// pipe.submit(RunSpec::new(code, Input::Host(&[1])), ())?;
    /// pipe.submit(RunSpec::new(code, Input::Previous), ())?; // chained, both launched
    /// let full = pipe.submit(RunSpec::new(code, Input::Host(&[5])), ()).unwrap_err();
    /// assert_eq!(full.kind(), &ErrorKind::DepthExhausted { depth: 2 }); // complete one first
    /// assert_eq!(pipe.complete()?.map(|d| d.values[0]), Some(2));
    /// assert_eq!(pipe.complete()?.map(|d| d.values[0]), Some(3));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// A workload moves into the pipeline and comes back with its run's
    /// result ([`Completed::work`]) or its error ([`Unfinished::work`]) —
    /// never lost. Its host outputs must be owned
    /// ([`Workload::owned`](crate::Workload::owned)): a borrowed
    /// `&mut [T]` would have to stay borrowed for the pipeline's whole
    /// life. Its device buffers are borrowed for the pipeline's life: while
    /// the pipeline lives, the host cannot read or write them (it may read
    /// them after, or bind them in every run, in stream order). A
    /// workload's run leaves nothing for `Input::Previous` to chain on.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let inc = runner.code("inc")?;
    /// let mut pipe = Pipeline::new(&runner)?;
    /// let mut w = Workload::new(inc);
    /// let x = w.add_owned(vec![1u32; 4], Dir::In);
    /// let y = w.add_owned(vec![0u32; 4], Dir::Out);
    /// pipe.submit(w, "work")?;
    /// pipe.submit(RunSpec::new(inc, Input::Host(&[7])), "spec")?; // both kinds in one pipeline
    /// let a = pipe.complete()?.expect("pending");
    /// let mut w = a.work.expect("a workload's run comes back with its workload");
    /// assert_eq!((a.tag, &w[y]), ("work", &[2; 4][..]));
    /// let b = pipe.complete()?.expect("pending");
    /// assert_eq!((b.tag, b.values), ("spec", &[8][..]));
    /// w[x].fill(9); // refill, resubmit
    /// pipe.submit(w, "again")?;
    /// let c = pipe.complete()?.and_then(|c| c.work).expect("the workload");
    /// assert_eq!(c[y], [10; 4]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// Nothing was launched, and what was submitted and its tag come back
    /// ([`Rejected`]): [`ErrorKind::DepthExhausted`] when `DEPTH` runs are
    /// pending ([`complete`](Pipeline::complete) one first); any error of
    /// [`Runner::prepare`] or of a [`Run::launch`](crate::Run::launch) that
    /// submitted nothing — notably [`ErrorKind::Poisoned`] (then
    /// [`drain`](Pipeline::drain)). A launch that reached the device only
    /// partly ([`ErrorKind::PartialLaunch`],
    /// [`ErrorKind::FenceNotRecorded`]) poisons the runner and quarantines
    /// the slot; the submission still comes back, since the run will
    /// produce no result. A slot still held by an earlier run whose
    /// completion failed is waited for first (bounded as a fence is; its
    /// fence error, if it fails again); on a poisoned runner such a slot
    /// reports [`ErrorKind::Poisoned`] at once.
    #[inline]
    pub fn submit<W: Submit<'r>>(
        &mut self,
        work: W,
        tag: T,
    ) -> Result<RunId, Error<Rejected<W, T>>> {
        if self.len >= DEPTH {
            let kind = ErrorKind::DepthExhausted { depth: DEPTH };
            let back = Rejected { work, tag };
            return Err(Error::new(back, Action::Submit, None, None, kind));
        }
        let index = (self.head + self.len) % DEPTH;
        match work.submit_into(&mut self.lanes[index], &self.runner, tag) {
            Ok(run) => {
                self.len += 1;
                Ok(run)
            }
            Err((e, tag, work)) => Err(e.map_value(|()| Rejected { work, tag })),
        }
    }

    /// Fences and finalizes the oldest pending run — waiting for its own
    /// fence, as long as [`Run::fence`](crate::Run::fence) would: at most
    /// `(runs ahead + 1) × fence_timeout + fence_timeout / 8` — and hands
    /// it back: a [`RunSpec`](crate::RunSpec) run with its outputs
    /// ([`Completed::values`]), a workload's run with its workload
    /// ([`Completed::work`], its owned host tensors holding what the device
    /// wrote); `Ok(None)` when nothing is pending. Results come back in
    /// submission order, each run exactly once.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// let mut pipe = Pipeline::new(&runner)?;
    /// assert!(pipe.complete()?.is_none()); // nothing pending
    /// pipe.submit(RunSpec::new(code, Input::Host(&[7])), "first")?;
    /// pipe.submit(RunSpec::new(code, Input::Host(&[8])), "second")?;
    /// assert_eq!(pipe.complete()?.map(|d| (d.tag, d.values[0])), Some(("first", 8)));
    /// assert_eq!(pipe.complete()?.map(|d| (d.tag, d.values[0])), Some(("second", 9)));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// The run produced no result; its tag and its workload come back
    /// ([`Unfinished`]) and it counts as handed back.
    /// [`ErrorKind::RunFailed`] (the run reported an error code: it failed
    /// alone, the pipeline goes on; nothing was copied back), or any error
    /// of [`Run::fence`](crate::Run::fence) or
    /// [`Run::finalize`](crate::Run::finalize) — a device fault or a fence
    /// timeout poisons the runner (then [`drain`](Pipeline::drain)).
    #[inline]
    pub fn complete(&mut self) -> Result<Option<Completed<'_, 'r, T>>, Error<Unfinished<'r, T>>> {
        let Some((index, (stub, outcome))) = self.owed() else {
            return Ok(None);
        };
        let lane = &mut self.lanes[index];
        let work = lane.take_work();
        match outcome {
            Ok(wall) => Ok(Some(Completed {
                tag: stub.tag,
                run: stub.run,
                seq: stub.seq,
                wall,
                values: if work.is_some() { &[] } else { lane.values() },
                work,
                lent: std::marker::PhantomData,
            })),
            Err(e) => Err(e.map_value(|()| Unfinished {
                tag: stub.tag,
                work,
            })),
        }
    }

    /// The oldest pending run, retired: its lane, and what the lane owes.
    #[inline]
    fn owed(&mut self) -> Option<(usize, lane::Owed<T>)> {
        if self.len == 0 {
            return None;
        }
        let index = self.head;
        self.head = (index + 1) % DEPTH;
        self.len -= 1;
        // The lanes `head, head + 1, …` owe a result each, so the lane
        // always answers.
        let owed = self.lanes[index].complete();
        debug_assert!(
            owed.is_some(),
            "runclaim invariant broken: a pending lane owed nothing"
        );
        Some((index, owed?))
    }

    /// One non-blocking look at the oldest pending run, for a future:
    /// `Ready` once its verdict is in its lane (or nothing is pending).
    fn poll_head(&mut self, wait: &mut FenceWait, waker: &Waker) -> Poll<()> {
        if self.len == 0 {
            return Poll::Ready(());
        }
        self.lanes[self.head].poll_settle(wait, waker)
    }

    /// [`complete`](Pipeline::complete), awaited: resolves as `complete`
    /// returns, with no thread parked on the device; cancel-safe (see
    /// [`CompleteFuture`]).
    pub fn complete_async(&mut self) -> CompleteFuture<'_, 'r, D, DEPTH, T> {
        CompleteFuture::new(self)
    }

    /// Runs pending: submitted, not yet handed back by
    /// [`complete`](Pipeline::complete).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// let mut pipe = Pipeline::new(&runner)?;
    /// pipe.submit(RunSpec::new(code, Input::Host(&[1])), ())?;
    /// assert_eq!((pipe.len(), pipe.is_empty(), pipe.is_full()), (1, false, false));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when no run is pending.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Pipeline};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// let pipe: Pipeline<'_, _, 2> = Pipeline::new(&runner)?;
    /// assert!(pipe.is_empty());
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `true` when `DEPTH` runs are pending: [`complete`](Pipeline::complete)
    /// one before the next [`submit`](Pipeline::submit).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// let mut pipe = Pipeline::new(&runner)?;
    /// pipe.submit(RunSpec::new(code, Input::Host(&[1])), ())?;
    /// pipe.submit(RunSpec::new(code, Input::Host(&[2])), ())?;
    /// assert!(pipe.is_full());
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.len >= DEPTH
    }

    /// How many runs may be pending at once: `DEPTH`.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Pipeline};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 16>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// let pipe: Pipeline<'_, _, 16> = Pipeline::new(&runner)?;
    /// assert_eq!(pipe.depth(), 16);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub const fn depth(&self) -> usize {
        DEPTH
    }

    /// The runner the pipeline runs on (for its code, health and device).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// # let code = runner.code("f")?;
    /// let mut pipe = Pipeline::new(&runner)?;
    /// pipe.submit(RunSpec::new(code, Input::Host(&[1])), ())?;
    /// assert_eq!(pipe.runner().health().in_flight, 1);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn runner(&self) -> &'r Runner<'r, D, DEPTH> {
        self.runner
    }
}

/// Dropping the pipeline waits for its launched runs within one total
/// bound, `(runs in flight + 1) × fence_timeout` on the driver's clock (not
/// one bound per run; see [the type's docs](Pipeline#dropping)); a run not
/// proven complete by then leaves its slot quarantined.
impl<D: Driver, const DEPTH: usize, T> Drop for Pipeline<'_, D, DEPTH, T> {
    fn drop(&mut self) {
        self.runner.device().settle_in_flight(None);
        let port = self.runner.device().port();
        for lane in &self.lanes {
            if let Some(id) = lane.capture() {
                port.drop_capture(id);
            }
        }
        // The lanes drop next: each run is complete (its drop returns at
        // once) or unproven (its drop quarantines the slot without waiting).
    }
}

impl<D: Driver, const DEPTH: usize, T> fmt::Debug for Pipeline<'_, D, DEPTH, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("depth", &DEPTH)
            .field("pending", &self.len)
            .field("oldest_slot", &self.head)
            .field("health", &self.runner.health())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use crate::contract::*;
    use crate::sim::SimDriver;
    use static_assertions::{assert_impl_all, assert_not_impl_any};

    assert_impl_all!(Pipeline<'static, SimDriver, 2, u64>: Send, Sync);
    assert_not_impl_any!(Pipeline<'static, SimDriver, 2>: Clone);
    assert_impl_all!(Rejected<RunSpec<'static>, u64>: Send, Sync);
    assert_impl_all!(Rejected<Workload<'static>, u64>: Send, Sync);
    assert_impl_all!(Completed<'static, 'static, u64>: Send, Sync);
    assert_impl_all!(Unfinished<'static, u64>: Send, Sync);
    assert_impl_all!(CompleteFuture<'static, 'static, SimDriver, 2, u64>: Send, Sync, Unpin);
    assert_impl_all!(PipelineDrainFuture<'static, 'static, SimDriver, 2, u64>: Send, Unpin);
}
