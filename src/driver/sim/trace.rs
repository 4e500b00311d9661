//! The simulator's trace: what each stream did, when, for which run — what
//! the tests' checkers read (device order, stale code, overlap).
//!
//! **Not covered by semantic versioning.** The trace follows the
//! simulator's internals (its task kinds, its stepping) and may change in
//! any release; it is public for tests and tools, not for programs to rely
//! on. Read it with [`SimDriver::trace`](super::SimDriver::trace).

use crate::driver::{CodeHandle, EventId, FaultKind, StreamId};

/// Kinds of task in the [`TraceEvent`] log.
///
/// ```
/// use runclaim::driver::Driver;
/// use runclaim::sim::SimDriver;
/// use runclaim::sim::trace::{TaskTag, TraceKind};
///
/// let sim = SimDriver::stepped(Default::default());
/// let (s, p) = (sim.create_stream()?, sim.alloc(4)?);
/// sim.memset_async(s, p, 0, 4)?;
/// assert!(sim.trace().iter().any(|t| t.what == TraceKind::Enqueued(TaskTag::Memset)));
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskTag {
    /// An AICore kernel.
    Aicore,
    /// An AICPU kernel.
    Aicpu,
    /// An event record.
    Record(EventId),
    /// A stream wait on an event.
    Wait(EventId),
    /// An asynchronous device copy.
    Copy,
    /// An asynchronous memset.
    Memset,
    /// A graph's replay (`Driver::graph_launch`): it starts the graph's
    /// tasks on the graph's own streams, and ends when they have. The
    /// graph's kernels are traced as enqueued when the graph is launched,
    /// each on the graph's stream it starts on.
    Graph,
}

/// What happened, in a [`TraceEvent`].
///
/// ```
/// use runclaim::driver::Driver;
/// use runclaim::sim::SimDriver;
/// use runclaim::sim::trace::TraceKind;
///
/// let sim = SimDriver::stepped(Default::default());
/// let s = sim.create_stream()?;
/// assert_eq!(sim.trace()[0].what, TraceKind::StreamCreated);
/// assert_eq!(sim.trace()[0].stream, s);
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TraceKind {
    /// A task was accepted onto the stream.
    Enqueued(TaskTag),
    /// A task began executing.
    Started(TaskTag),
    /// A task finished.
    Finished(TaskTag),
    /// An AICore kernel began with code that differs from what is resident
    /// now at its address (a stale instruction cache).
    StaleCode,
    /// A task faulted; the stream entered an error state.
    Faulted(FaultKind),
    /// The stream was created.
    StreamCreated,
    /// The stream was destroyed.
    StreamDestroyed,
    /// New code was uploaded (a publication).
    Published(CodeHandle),
}

/// One entry of the device trace.
///
/// ```
/// use runclaim::driver::Driver;
/// use runclaim::sim::SimDriver;
/// use runclaim::sim::trace::{TaskTag, TraceEvent, TraceKind};
///
/// let sim = SimDriver::stepped(Default::default());
/// let (s, p) = (sim.create_stream()?, sim.alloc(4)?);
/// sim.memset_async(s, p, 1, 4)?;
/// sim.run_until_idle(100).unwrap();
/// let done: Vec<TraceEvent> = sim.trace().into_iter()
///     .filter(|t| t.what == TraceKind::Finished(TaskTag::Memset)).collect();
/// assert_eq!(done.len(), 1);
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TraceEvent {
    /// Device tick.
    pub tick: u64,
    /// The stream concerned (raw 0 for device-wide entries).
    pub stream: StreamId,
    /// The run id the task belongs to (0 when none).
    pub run: u64,
    /// What happened.
    pub what: TraceKind,
}

impl TraceEvent {
    /// An entry (for tools that decode a trace, e.g. from the fake runtime).
    #[must_use]
    pub const fn new(tick: u64, stream: StreamId, run: u64, what: TraceKind) -> Self {
        TraceEvent {
            tick,
            stream,
            run,
            what,
        }
    }
}
