//! The object-safe surface a run and its slot token call through, so that
//! `Run<'r, State, I>` needs neither the driver type nor `DEPTH`: the
//! [`Port`] trait the device implements, and what crosses it.

use std::task::{Poll, Waker};
use std::time::Duration;

use super::code::CodeRef;
use super::device::AsyncWait;
use super::error::{ErrorKind, RunId};
use super::spec::Input;
use super::workload::Workload;
use super::workload::sealed::Sealed as Marks;
use crate::driver::CodeHandle;
use crate::driver::abi::WallRecord;

/// What a run carries between transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunInfo {
    pub run: RunId,
    /// Launch sequence number (0 until launched).
    pub seq: u64,
    /// Elements (fixed at launch for a chained input).
    pub len: usize,
    pub code: CodeHandle,
    pub chained: bool,
}

/// How a fence waits.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// Query once.
    Poll,
    /// Wait at most this long in total (`Duration::MAX`: no limit).
    For(Duration),
    /// Wait the queue budget: `(runs ahead + 1) × fence_timeout`.
    Configured,
}

/// Why a launch failed, graded by what reached the streams.
pub(crate) enum LaunchFail {
    /// Nothing was submitted: the run is still prepared.
    NotSubmitted(ErrorKind),
    /// Something was submitted: the run is gone, its slot quarantined, the
    /// runner poisoned.
    Lost(ErrorKind),
}

/// What a successful launch fixed about the run.
pub(crate) struct Submitted {
    pub seq: u64,
    pub len: usize,
}

/// The object-safe surface runs and tokens call through, so that
/// `Run<'r, State, I>` needs neither the driver type nor `DEPTH`.
pub(crate) trait Port: Sync {
    fn device_id(&self) -> u64;
    /// A token of `slot` with `lease` is dropped.
    fn release(&self, slot: usize, lease: u64);
    fn prepare(
        &self,
        slot: usize,
        lease: u64,
        code: CodeRef<'_>,
        input: Input<'_>,
    ) -> Result<RunInfo, ErrorKind>;
    /// A workload run prepared into the slot: its host tensors copied in,
    /// its argument block built.
    fn prepare_work(
        &self,
        slot: usize,
        lease: u64,
        work: &mut Workload<'_>,
    ) -> Result<RunInfo, ErrorKind>;
    /// `bound`: a workload run's bindings, whose buffers the launch marks.
    fn launch(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        bound: &dyn Marks,
    ) -> Result<Submitted, LaunchFail>;
    fn wait(&self, slot: usize, lease: u64, info: &RunInfo, how: Wait) -> Result<(), ErrorKind>;
    /// One non-blocking look at the run's fence for a future; `Pending`
    /// with `waker` armed.
    fn poll_wait(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        wait: &mut AsyncWait,
        waker: &Waker,
    ) -> Poll<Result<(), ErrorKind>>;
    fn finalize(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        out: &mut [u32],
    ) -> Result<WallRecord, ErrorKind>;
    /// Finalizes a workload run: records, then its host outputs.
    fn finalize_work(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        work: &mut Workload<'_>,
    ) -> Result<WallRecord, ErrorKind>;
}
