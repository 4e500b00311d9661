//! The handle newtypes a [`Driver`](super::Driver) hands out and receives:
//! [`DevPtr`], [`StreamId`], [`EventId`], [`CodeHandle`], [`GraphId`] — plain
//! values that every driver validates before use.

/// A device memory address (the first byte of an allocation or a place
/// inside one).
///
/// Like every handle it is a plain value: a driver validates it (it must lie
/// in one live allocation of that driver, with the whole range) before use.
///
/// ```
/// use runclaim::driver::{DevPtr, Driver};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let p: DevPtr = sim.alloc(16)?;
/// sim.copy_to_device(p.offset(8), &[1; 8])?; // the second half
/// assert!(sim.copy_to_device(p.offset(9), &[1; 8]).is_err()); // one byte past the end
/// assert!(sim.copy_to_device(DevPtr::from_raw(0xdead_0000), &[1]).is_err()); // forged
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevPtr(u64);

impl DevPtr {
    /// The address `addr` (for driver implementers; drivers validate it).
    #[must_use]
    pub const fn from_raw(addr: u64) -> Self {
        DevPtr(addr)
    }

    /// The raw address.
    #[must_use]
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The address `bytes` further on. Never panics: an offset past the end
    /// of the address space wraps, and the driver refuses the result.
    #[must_use]
    pub const fn offset(self, bytes: usize) -> DevPtr {
        DevPtr::from_raw(self.0.wrapping_add(bytes as u64))
    }
}

/// A device stream: an ordered queue of tasks.
///
/// ```
/// use runclaim::driver::{Completion, Driver, StreamId};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let s: StreamId = sim.create_stream()?;
/// assert_eq!(sim.query_stream(s)?, Completion::Complete); // nothing queued
/// sim.destroy_stream(s)?;
/// assert!(sim.query_stream(s).is_err()); // a destroyed handle is refused
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(u64);

impl StreamId {
    /// The stream `raw` (for driver implementers; drivers validate it).
    #[must_use]
    pub const fn from_raw(raw: u64) -> Self {
        StreamId(raw)
    }

    /// The raw value.
    #[must_use]
    pub const fn raw(self) -> u64 {
        self.0
    }
}

/// A device event: a marker recorded on a stream that completes when the
/// stream reaches it.
///
/// ```
/// use runclaim::driver::{Completion, Driver, EventId};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let (s, e): (_, EventId) = (sim.create_stream()?, sim.create_event()?);
/// sim.record_event(e, s)?;
/// assert_eq!(sim.query_event(e)?, Completion::NotReady); // the stream has not reached it
/// sim.sync_event(e, std::time::Duration::from_millis(1))?;
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(u64);

impl EventId {
    /// The event `raw` (for driver implementers; drivers validate it).
    #[must_use]
    pub const fn from_raw(raw: u64) -> Self {
        EventId(raw)
    }

    /// The raw value.
    #[must_use]
    pub const fn raw(self) -> u64 {
        self.0
    }
}

/// A captured task graph: the tasks a stream (and the streams that joined
/// it) queued between [`capture_begin`](super::Driver::capture_begin) and
/// [`capture_end`](super::Driver::capture_end), replayed whole by
/// [`graph_launch`](super::Driver::graph_launch) (`aclmdlRI` on the acl
/// driver).
///
/// ```
/// use runclaim::driver::{Driver, GraphId};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let (s, p) = (sim.create_stream()?, sim.alloc(64)?);
/// sim.capture_begin(s)?;
/// sim.memset_async(s, p, 7, 64)?; // recorded, not run
/// let g: GraphId = sim.capture_end(s)?;
/// sim.graph_launch(g, s)?; // the memset runs
/// sim.sync_stream(s, std::time::Duration::from_secs(1))?;
/// let mut b = [0u8; 64];
/// sim.copy_from_device(&mut b, p)?;
/// assert_eq!(b, [7; 64]);
/// sim.graph_destroy(g)?;
/// assert!(sim.graph_launch(g, s).is_err()); // a destroyed handle is refused
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GraphId(u64);

impl GraphId {
    /// The graph `raw` (for driver implementers; drivers validate it).
    #[must_use]
    pub const fn from_raw(raw: u64) -> Self {
        GraphId(raw)
    }

    /// The raw value.
    #[must_use]
    pub const fn raw(self) -> u64 {
        self.0
    }
}

/// One **upload** of AICore code, resident in device code memory: where it
/// is ([`raw`](CodeHandle::raw)) and which upload it is
/// ([`upload`](CodeHandle::upload)).
///
/// Upload stamps are unique and increase with every upload on an NPU, so a
/// handle names *those bytes*, not an address: after the image at an address
/// was replaced, the old handle no longer launches (the driver refuses it
/// with [`DriverErrorKind::BadHandle`]) — it can never run the code that replaced
/// it.
///
/// ```
/// use runclaim::driver::{CodeHandle, Driver};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let sim = SimDriver::stepped(SimConfig::default());
/// let code: CodeHandle = sim.register_code(&Program::new().add(1).encode())?.handle;
/// assert_eq!(sim.register_code(&Program::new().add(1).encode())?.handle, code); // dedup
/// assert_eq!(code.upload(), sim.code_epoch()); // the latest upload
/// # Ok::<(), runclaim::driver::DriverError>(())
/// ```
///
/// [`DriverErrorKind::BadHandle`]: super::DriverErrorKind::BadHandle
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CodeHandle {
    raw: u64,
    upload: u64,
}

impl CodeHandle {
    /// Upload `upload` at `raw` (for driver implementers; drivers validate it).
    #[must_use]
    pub const fn from_raw(raw: u64, upload: u64) -> Self {
        CodeHandle { raw, upload }
    }

    /// Where the code is resident (a code address or a runtime handle).
    #[must_use]
    pub const fn raw(self) -> u64 {
        self.raw
    }

    /// The upload's stamp: unique per upload, increasing on the NPU.
    #[must_use]
    pub const fn upload(self) -> u64 {
        self.upload
    }
}
