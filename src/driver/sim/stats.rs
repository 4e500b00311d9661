//! The counters a test reads ([`SimStats`]): handles created and destroyed,
//! allocations, registrations, kernels, faults, calls and queue depths.

use std::collections::BTreeMap;

use crate::driver::{Op, StreamId};

#[cfg(doc)]
use super::SimDriver;

/// Counters a test can read ([`SimDriver::stats`]).
///
/// ```
/// use runclaim::driver::Driver;
/// use runclaim::sim::{SimDriver, SimStats};
///
/// let sim = SimDriver::stepped(Default::default());
/// let p = sim.alloc(64)?;
/// let stats: SimStats = sim.stats();
/// assert_eq!((stats.live_allocations(), stats.live_bytes), (1, 64));
/// sim.free(p)?;
/// assert_eq!(sim.stats().live_allocations(), 0);
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimStats {
    /// Streams created.
    pub streams_created: u64,
    /// Streams destroyed.
    pub streams_destroyed: u64,
    /// Events created.
    pub events_created: u64,
    /// Events destroyed.
    pub events_destroyed: u64,
    /// Successful allocations.
    pub allocations: u64,
    /// Successful frees.
    pub frees: u64,
    /// Successful `register_code` calls.
    pub registrations: u64,
    /// Registrations that uploaded new code.
    pub publications: u64,
    /// Registrations answered from resident code.
    pub dedup_hits: u64,
    /// AICore kernels started.
    pub aicore_kernels: u64,
    /// AICPU kernels started.
    pub aicpu_kernels: u64,
    /// AICore kernels that executed stale code.
    pub stale_executions: u64,
    /// Kernel faults.
    pub kernel_faults: u64,
    /// Tasks finished, by stream (streams stay listed after destruction).
    pub tasks_run: BTreeMap<StreamId, u64>,
    /// Largest queue length any stream reached.
    pub max_queue_depth: usize,
    /// Enqueues that found their stream full (a real device would block).
    pub blocked_enqueues: u64,
    /// `destroy_stream` calls refused because work was queued.
    pub busy_destroy_refused: u64,
    /// Calls per operation.
    pub calls: BTreeMap<Op, u64>,
    /// Device steps taken (stepped mode).
    pub steps: u64,
    /// Trace entries dropped because the ring was full.
    pub trace_dropped: u64,
    /// Bytes of device memory allocated and not freed.
    pub live_bytes: u64,
    /// Stream captures begun.
    pub captures: u64,
    /// Graph replays queued.
    pub graph_launches: u64,
    /// Graphs ended and not yet destroyed.
    pub live_graphs: u64,
}

impl SimStats {
    /// Streams alive now.
    #[must_use]
    pub fn live_streams(&self) -> u64 {
        self.streams_created - self.streams_destroyed
    }

    /// Events alive now.
    #[must_use]
    pub fn live_events(&self) -> u64 {
        self.events_created - self.events_destroyed
    }

    /// Allocations alive now.
    #[must_use]
    pub fn live_allocations(&self) -> u64 {
        self.allocations - self.frees
    }

    /// Driver calls of every operation.
    #[must_use]
    pub fn total_calls(&self) -> u64 {
        self.calls.values().sum()
    }
}
