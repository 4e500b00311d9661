//! What a device model decodes at launch and hands the simulator back:
//! [`AicoreLaunch`], [`AicpuLaunch`], [`Task`], [`RunEnd`].

use crate::driver::sim::rust_kernel::KernelRun;

#[cfg(doc)]
use super::DeviceModel;

/// An AICore launch as a [`DeviceModel`] decoded it: what its workers
/// need for the kernel's life.
///
/// ```
/// use runclaim::sim::protocol::AicoreLaunch;
///
/// let k = AicoreLaunch::new(7, 2, 0x1_0000_0000); // run 7's words, 2 workers, the handshake
/// assert_eq!((k.identity, k.block_dim, k.base), (7, 2, 0x1_0000_0000));
/// assert!(k.run.is_none()); // read at dispatch, unless the block carries it
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AicoreLaunch {
    /// The identity the run's words carry (runclaim: the run id; a2a3:
    /// the epoch); also the run the trace names. Never 0.
    pub identity: u64,
    /// Workers (the launch's `block_dim`).
    pub block_dim: u32,
    /// Where the run's handshake lives (runclaim: the handshake region;
    /// a2a3: the image).
    pub base: u64,
    /// The workers' run, when the block carries it ([`Task::InBlock`]).
    pub run: Option<KernelRun>,
    /// Whatever else of the block the model keeps (empty for both
    /// built-ins).
    pub data: Vec<u8>,
}

impl AicoreLaunch {
    /// A launch whose run is read at dispatch (no [`run`](Self::run), no
    /// [`data`](Self::data)).
    #[must_use]
    pub fn new(identity: u64, block_dim: u32, base: u64) -> Self {
        AicoreLaunch {
            identity,
            block_dim,
            base,
            run: None,
            data: Vec::new(),
        }
    }
}

/// An AICPU launch as a [`DeviceModel`] decoded it.
///
/// ```
/// use runclaim::sim::protocol::AicpuLaunch;
///
/// let c = AicpuLaunch::new(7, 1, 2, 0x1000, 0x2000, 0x3000); // run 7, slot 1, 2 workers
/// assert_eq!((c.base, c.status, c.timing), (0x1000, 0x2000, 0x3000));
/// assert!(c.data.is_empty());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AicpuLaunch {
    /// The identity the run's words carry (as
    /// [`AicoreLaunch::identity`]). Never 0.
    pub identity: u64,
    /// The slot the run occupies.
    pub slot: u32,
    /// Workers to wait for.
    pub block_dim: u32,
    /// Where the run's handshake lives.
    pub base: u64,
    /// Where the status (result) record lives.
    pub status: u64,
    /// Where the timing (device-wall) record lives.
    pub timing: u64,
    /// Whatever else of the block the model keeps (runclaim: nothing;
    /// a2a3: the whole launch envelope, as the AICPU kernel receives it).
    pub data: Vec<u8>,
}

impl AicpuLaunch {
    /// A launch (with no [`data`](Self::data)).
    #[must_use]
    pub fn new(
        identity: u64,
        slot: u32,
        block_dim: u32,
        base: u64,
        status: u64,
        timing: u64,
    ) -> Self {
        AicpuLaunch {
            identity,
            slot,
            block_dim,
            base,
            status,
            timing,
            data: Vec::new(),
        }
    }
}

/// Where a dispatched worker's run is ([`DeviceModel::task`]).
///
/// ```
/// use runclaim::sim::KernelRun;
/// use runclaim::sim::protocol::Task;
///
/// let read = Task::Read(KernelRun::new(7, 0, 1, Vec::new(), vec![3]));
/// assert!(matches!(read, Task::Read(r) if r.scalar(0) == Some(3)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Task {
    /// In the launch block: [`AicoreLaunch::run`] (a launch without one
    /// faults).
    InBlock,
    /// Read from device memory at dispatch.
    Read(KernelRun),
}

/// How a run ended, for [`DeviceModel::write_records`]: its code and the
/// device ticks the AICPU kernel saw (the AICore kernel's start is in
/// memory, where it stamped it).
///
/// ```
/// use runclaim::sim::protocol::RunEnd;
///
/// let end = RunEnd::new(0, 10, 12, 40);
/// assert_eq!((end.code, end.aicpu_start, end.dispatched, end.end), (0, 10, 12, 40));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RunEnd {
    /// The run's code: 0 = success; else the first worker's non-zero
    /// error code, or an armed [`Fault::RunError`](crate::driver::sim::Fault::RunError)'s.
    pub code: u32,
    /// When the AICPU kernel started.
    pub aicpu_start: u64,
    /// When the tasks were dispatched.
    pub dispatched: u64,
    /// Now: every task is done.
    pub end: u64,
}

impl RunEnd {
    /// An end (for models' own tests).
    #[must_use]
    pub const fn new(code: u32, aicpu_start: u64, dispatched: u64, end: u64) -> Self {
        RunEnd {
            code,
            aicpu_start,
            dispatched,
            end,
        }
    }
}
