//! [`RunOf`]: a run in state `S` holding the claim `K` on its slot and
//! keeping bindings `B` — every transition, written once, for a typed run
//! ([`Run`](super::Run), over a `SlotToken<'r, I>`) and an erased one
//! (over an `ErasedToken`, the pipeline's, or a shared device's claim).
#![allow(
    clippy::inline_always,
    reason = "thin transition wrappers: out of line each moves a whole run and its result through memory (measured with callgrind, benches/contract.rs: 180 instructions per RunSpec cycle together)"
)]

use std::fmt;
use std::marker::PhantomData;
use std::task::{Poll, Waker};

use crate::contract::error::{Action, Error, ErrorKind, RunId};
use crate::contract::outputs::ErasedOutputs;
use crate::contract::port::{How, LaunchFail, Port, RunInfo};
use crate::contract::prepare::Spec;
use crate::contract::slot::Claim;
use crate::contract::states::{Fenced, Launched, Prepared, State};
use crate::contract::wait::{FenceWait, Wait};
use crate::contract::workload::Workload;
use crate::contract::workload::{
    Args, Bindings, Data, NoWorkload, WithWorkload, lowered, lowered_args,
};
use crate::driver::abi::WallRecord;

/// A run in state `S` holding the claim `K` on its slot — a typed
/// `SlotToken<'r, I>` (for [`Run`](super::Run)) or an `ErasedToken` (for
/// an erased run: the pipeline's, a shared device's). Every transition is
/// written once, here: a typed run is
/// this with `K::slot()` the constant `I`.
pub(crate) struct RunOf<S: State, K: Claim, B: Bindings = NoWorkload> {
    token: K,
    pub(super) info: RunInfo,
    bindings: B,
    _state: PhantomData<S>,
}

impl<S: State, K: Claim, B: Bindings> fmt::Debug for RunOf<S, K, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Run")
            .field("state", &S::NAME)
            .field("run", &self.info.run)
            .field("slot", &self.token.slot())
            .field("seq", &self.info.seq)
            .field("len", &self.info.len)
            .finish_non_exhaustive()
    }
}

impl<S: State, K: Claim, B: Bindings> RunOf<S, K, B> {
    #[inline]
    fn into_state<T: State>(self) -> RunOf<T, K, B> {
        RunOf {
            token: self.token,
            info: self.info,
            bindings: self.bindings,
            _state: PhantomData,
        }
    }

    #[inline]
    pub(crate) fn id(&self) -> RunId {
        self.info.run
    }

    #[inline]
    pub(crate) fn slot(&self) -> usize {
        self.token.slot()
    }

    #[cold]
    fn fail<T>(&self, value: T, action: Action, kind: ErrorKind) -> Error<T> {
        Error::new(value, action, Some(self.info.run), Some(self.slot()), kind)
    }

    /// This run handed back inside an error of `action`.
    #[cold]
    fn refused_as(self, action: Action, kind: ErrorKind) -> Error<Self> {
        self.fail((), action, kind).map_value(|()| self)
    }
}

impl<K: Claim> RunOf<Prepared, K, NoWorkload> {
    /// A lane's prepare of the workload it holds (`work`): the run keeps
    /// no borrow of it (the lane hands it to the launch and the finalize).
    #[inline]
    pub(crate) fn prepare_lent(
        port: &dyn Port,
        token: K,
        work: &mut Workload<'_>,
    ) -> Result<Self, Error<K>> {
        Self::prepare_with(port, token, |slot, lease| {
            Ok((
                port.prepare(slot, lease, work.code, work.args())?,
                NoWorkload,
            ))
        })
    }
}

/// A launched run and the capture it replayed (0 for a launch).
type Replayed<K, B> = (RunOf<Launched, K, B>, u64);

impl<K: Claim, B: Bindings> RunOf<Prepared, K, B> {
    /// Prepares a run of `spec` on `port`'s device in the slot `token`
    /// claims: the one implementation of every prepare (a runner's, a
    /// pipeline's, a shared device's).
    #[inline(always)]
    pub(crate) fn prepare<W: Spec<Bindings = B>>(
        port: &dyn Port,
        token: K,
        spec: W,
    ) -> Result<Self, Error<K>> {
        Self::prepare_with(port, token, |slot, lease| {
            spec.prepare_on(port, slot, lease)
        })
    }

    /// The one prepare, its device step given: the token checked to be
    /// `port`'s, then `prepare(slot, lease)`.
    #[inline(always)]
    fn prepare_with(
        port: &dyn Port,
        token: K,
        prepare: impl FnOnce(usize, u64) -> Result<(RunInfo, B), ErrorKind>,
    ) -> Result<Self, Error<K>> {
        let slot = token.slot();
        let fail = |token, k| Error::new(token, Action::Prepare, None, Some(slot), k);
        if token.port().device_id() != port.device_id() {
            return Err(fail(token, ErrorKind::ForeignHandle));
        }
        match prepare(slot, token.lease()) {
            Ok((info, bindings)) => Ok(RunOf::new(token, info, bindings)),
            Err(k) => Err(fail(token, k)),
        }
    }

    /// A prepared run holding `token` and keeping `bindings`, as the device
    /// prepared it.
    #[inline]
    pub(crate) fn new(token: K, info: RunInfo, bindings: B) -> Self {
        RunOf {
            token,
            info,
            bindings,
            _state: PhantomData,
        }
    }

    /// See [`Run::launch`](super::Run::launch).
    #[inline]
    pub(crate) fn launch(self) -> Result<RunOf<Launched, K, B>, Error<Option<Self>>> {
        self.launch_with(None)
    }

    /// [`launch`](Self::launch) from `lent` — a pipeline's workload, held
    /// by its lane — instead of from the run's own bindings.
    #[inline(always)]
    pub(crate) fn launch_with(
        self,
        lent: Option<&mut Workload<'_>>,
    ) -> Result<RunOf<Launched, K, B>, Error<Option<Self>>> {
        self.launch_how(lent, How::Launch).map(|(run, _)| run)
    }

    /// [`launch_with`](Self::launch_with) as `how` says — launched,
    /// captured or replayed: the launched run, and the capture it
    /// replayed (0 for a launch).
    #[inline(always)]
    pub(crate) fn launch_how(
        mut self,
        lent: Option<&mut Workload<'_>>,
        how: How,
    ) -> Result<Replayed<K, B>, Error<Option<Self>>> {
        let (slot, lease) = (self.token.slot(), self.token.lease());
        let (port, info) = (self.token.port(), &self.info);
        let launched = match lent {
            Some(work) => port.launch(slot, lease, info, work.args(), how),
            None => self.bindings.with_args(info.chained, |args| {
                port.launch(slot, lease, info, args, how)
            }),
        };
        let action = match how {
            How::Launch => Action::Launch,
            How::Capture => Action::Capture,
            How::Replay { .. } => Action::Replay,
        };
        match launched {
            Ok(l) => {
                self.info.seq = l.seq;
                self.info.len = l.len;
                self.info.replayed = l.capture != 0;
                Ok((self.into_state(), l.capture))
            }
            Err(LaunchFail::NotSubmitted(k)) => {
                let e = self.fail((), action, k);
                Err(e.map_value(|()| Some(self)))
            }
            Err(LaunchFail::Lost(k)) => Err(self.fail(None, action, k)),
        }
    }

    /// The run's token.
    pub(crate) fn token(&self) -> &K {
        &self.token
    }

    /// See [`Run::<Prepared, I>::into_token`](super::Run::into_token).
    #[inline]
    pub(crate) fn into_token(self) -> K {
        self.token
    }
}

impl<K: Claim, B: Bindings> RunOf<Launched, K, B> {
    #[inline]
    pub(crate) fn seq(&self) -> u64 {
        self.info.seq
    }

    /// See [`Run::fence`](super::Run::fence),
    /// [`Run::fence_for`](super::Run::fence_for),
    /// [`Run::try_fence`](super::Run::try_fence).
    #[inline]
    pub(crate) fn wait(
        self,
        how: Wait,
        action: Action,
    ) -> Result<RunOf<Fenced, K, B>, Error<Self>> {
        let (slot, lease) = (self.token.slot(), self.token.lease());
        match self.token.port().wait(slot, lease, &self.info, how) {
            Ok(()) => Ok(self.into_state()),
            Err(k) => Err(self.refused_as(action, k)),
        }
    }

    /// [`Run::fence`](super::Run::fence).
    #[inline]
    pub(crate) fn fence(self) -> Result<RunOf<Fenced, K, B>, Error<Self>> {
        self.wait(Wait::Configured, Action::Fence)
    }

    /// One non-blocking look at the run's fence for a future (see
    /// `device/awaiting.rs`); the run stays where it is. After `Ready(Ok)`
    /// the device has settled the run complete: turn it
    /// [`fenced`](Self::fenced). After `Ready(Err)`, hand it back
    /// [`refused`](Self::refused).
    #[inline]
    pub(crate) fn poll_fence(
        &self,
        wait: &mut FenceWait,
        waker: &Waker,
    ) -> Poll<Result<(), ErrorKind>> {
        let (slot, lease) = (self.token.slot(), self.token.lease());
        self.token
            .port()
            .poll_wait(slot, lease, &self.info, wait, waker)
    }

    /// One query of the run's fence, the run left where it is: `Ok` when
    /// the device settled it complete (then turn it
    /// [`fenced`](Self::fenced)), [`ErrorKind::NotReady`] or another
    /// verdict otherwise.
    #[inline]
    pub(crate) fn look(&self) -> Result<(), ErrorKind> {
        let (slot, lease) = (self.token.slot(), self.token.lease());
        self.token.port().wait(slot, lease, &self.info, Wait::Poll)
    }

    /// The run, fenced: only after [`poll_fence`](Self::poll_fence) or
    /// [`look`](Self::look) said `Ok` for it (the device settled it
    /// complete then).
    #[inline]
    pub(crate) fn fenced(self) -> RunOf<Fenced, K, B> {
        self.into_state()
    }

    /// The run handed back inside the error a fence of `action` met.
    #[cold]
    pub(crate) fn refused(self, action: Action, kind: ErrorKind) -> Error<Self> {
        self.refused_as(action, kind)
    }

    /// Gives the run up without a fence: the device keeps it in flight,
    /// its slot reclaimed at the slot's next take once the run is proven
    /// complete (its token is not released: nothing waits here).
    pub(crate) fn abandon(self) {
        self.token
            .port()
            .abandon(self.token.slot(), self.token.lease());
        std::mem::forget(self);
    }
}

impl<K: Claim, B: Bindings> RunOf<Fenced, K, B> {
    /// See [`Run::<Fenced, I>::into_token`](super::Run::into_token).
    #[inline]
    pub(crate) fn into_token(self) -> K {
        self.token
    }

    /// The one finalize: the records read back and checked to be this
    /// run's, then — only if it succeeded — its outputs copied back into
    /// `args`; the token comes back with the device wall.
    #[inline(always)]
    fn finalize_args(self, args: Args<'_, '_>) -> Result<(K, WallRecord), Error<Self>> {
        let r = finalize_on(&self.token, &self.info, args);
        self.finalized(r)
    }

    /// The token and the wall, or this run back inside the error.
    #[inline(always)]
    fn finalized(self, r: Result<WallRecord, ErrorKind>) -> Result<(K, WallRecord), Error<Self>> {
        match r {
            Ok(wall) => Ok((self.token, wall)),
            Err(k) => Err(self.refused_as(Action::Finalize, k)),
        }
    }

    /// A `RunSpec` run's finalize (see [`Run::finalize`](super::Run::finalize)):
    /// its output into `out`, which must be this run's slot's buffer — a
    /// typed run's is by its type (E0308 otherwise), an erased run's is
    /// checked here.
    #[inline(always)]
    pub(crate) fn finalize(self, out: &mut ErasedOutputs) -> Result<(K, WallRecord), Error<Self>> {
        if out.slot() != self.slot() {
            let kind = ErrorKind::broken("a run finalized into another slot's outputs buffer");
            return Err(self.refused_as(Action::Finalize, kind));
        }
        let info = self.info;
        let mut tensors = lowered(
            Data::ArenaIn(&[]),
            bytemuck::cast_slice_mut(&mut out.values),
        );
        let finalized = self.finalize_args(lowered_args(&mut tensors));
        let (len, run) = match &finalized {
            Ok(_) => (info.len, Some(info.run)),
            Err(_) => (0, None),
        };
        out.len = len;
        out.run = run;
        finalized
    }

    /// The pipeline's form: the workload is held by the lane (`lent`), not
    /// borrowed by the run.
    #[inline]
    pub(crate) fn finalize_lent(
        self,
        lent: &mut crate::contract::Workload<'_>,
    ) -> Result<(K, WallRecord), Error<Self>> {
        self.finalize_args(lent.args())
    }
}

impl<K: Claim> RunOf<Fenced, K, WithWorkload<'_, '_>> {
    /// See [`Run::<Fenced, I, WithWorkload>::finalize`](super::Run#method.finalize-1):
    /// the workload the run borrowed is where its outputs go.
    #[inline]
    pub(crate) fn finalize_bound(self) -> Result<(K, WallRecord), Error<Self>> {
        let r = finalize_on(&self.token, &self.info, self.bindings.work.args());
        self.finalized(r)
    }
}

/// The device's finalize of the run `info` holding `token`, into `args`.
#[inline]
fn finalize_on<K: Claim>(
    token: &K,
    info: &RunInfo,
    args: Args<'_, '_>,
) -> Result<WallRecord, ErrorKind> {
    token
        .port()
        .finalize(token.slot(), token.lease(), info, args)
}
