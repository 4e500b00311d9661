//! The object-safe surface a run and its slot token call through, so that
//! `Run<'r, State, I>` needs neither the driver type nor `DEPTH`: the
//! [`Port`] trait the device implements, and what crosses it.

use std::task::{Poll, Waker};

use super::code::CodeRef;
use super::error::{ErrorKind, RunId};
use super::wait::{FenceWait, Wait};
use super::workload::Args;
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
    /// The run reads the arena output of the run launched just before it
    /// (a `RunSpec` of `Input::Previous`), fixed at launch.
    pub chained: bool,
    /// The run writes an arena output a successor may chain on (a
    /// `RunSpec` run's): the chain moves to it at launch.
    pub chainable: bool,
    /// The run was launched as a graph's replay (its capture's first
    /// included): its records were also copied next to its arena output.
    pub replayed: bool,
}

/// Why a launch failed, graded by what reached the streams.
pub(crate) enum LaunchFail {
    /// Nothing was submitted: the run is still prepared.
    NotSubmitted(ErrorKind),
    /// Something was submitted: the run is gone, its slot quarantined, the
    /// runner poisoned.
    Lost(ErrorKind),
}

/// How a run reaches the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    /// Its two kernels and its fence launched, one call each.
    Launch,
    /// Captured into a new graph, which is then replayed.
    Capture,
    /// A replay of capture `id` of device `device`.
    Replay { device: u64, id: u64 },
}

/// What a successful launch fixed about the run.
pub(crate) struct Submitted {
    pub seq: u64,
    pub len: usize,
    /// The capture the run replayed (0 for a launch).
    pub capture: u64,
}

/// The object-safe surface runs and tokens call through, so that
/// `Run<'r, State, I>` needs neither the driver type nor `DEPTH`.
pub(crate) trait Port: Sync {
    fn device_id(&self) -> u64;
    /// A token of `slot` with `lease` is dropped.
    fn release(&self, slot: usize, lease: u64);
    /// The handle of the launched run in `slot` with `lease` is gone
    /// without a fence (an awaited one dropped before it resolved): the
    /// slot is reclaimed at its next take once the run is proven complete.
    fn abandon(&self, slot: usize, lease: u64);
    /// Prepares a run of `code` into the slot from `args` — a workload's,
    /// or a `RunSpec` lowered into two tensors: everything refusable
    /// refused, host tensors staged, the records armed.
    fn prepare(
        &self,
        slot: usize,
        lease: u64,
        code: CodeRef<'_>,
        args: Args<'_, '_>,
    ) -> Result<RunInfo, ErrorKind>;
    /// Launches the prepared run from `args` — the tensors it was
    /// prepared from (a `RunSpec`'s lowered again): each resolved to the
    /// device range its block names (a chained input fixed now), the
    /// buffers it binds marked with it once its AICore kernel is queued.
    fn launch(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        args: Args<'_, '_>,
        how: How,
    ) -> Result<Submitted, LaunchFail>;
    /// Capture `id` is let go of: its graph is destroyed once no replay of
    /// it runs.
    fn drop_capture(&self, id: u64);
    fn wait(&self, slot: usize, lease: u64, info: &RunInfo, how: Wait) -> Result<(), ErrorKind>;
    /// One non-blocking look at the run's fence for a future; `Pending`
    /// with `waker` armed.
    fn poll_wait(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        wait: &mut FenceWait,
        waker: &Waker,
    ) -> Poll<Result<(), ErrorKind>>;
    /// Finalizes the fenced run: its records checked to be its own, then —
    /// only if it succeeded — its outputs copied back into `args` (the
    /// same tensors it was prepared from; a `RunSpec`'s output into the
    /// buffer its lowering names).
    fn finalize(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        args: Args<'_, '_>,
    ) -> Result<WallRecord, ErrorKind>;
}
