//! What the handle table holds and what its checks prove, between the
//! table (`table`) and the `result` layer's calls, which take only these:
//!
//! - an **entry** ([`Alloc`], [`StreamEntry`], [`EventEntry`],
//!   [`GraphEntry`]) is a handle this driver created and has not
//!   destroyed, owned by the table; a free or destroy takes it out of the
//!   table and hands it to its call *by value*, so nothing can use the
//!   handle afterwards (on failure the call hands it back);
//! - a **token** ([`Span`], [`Stream`], [`Event`], [`Graph`], [`Args`]) is
//!   the proof that a handle is live, borrowed from its entry — so from the
//!   table — or from a waiter mark ([`StreamWait`], [`EventWait`]) for as
//!   long as it lives: the handle it names stays live while the call that
//!   takes it runs.
//!
//! Their fields are private to this module: an entry is made from an
//! [`RtPtr`] (which only the `result` layer makes, from what the runtime
//! returned), a stream, event or graph token only from its entry, a span only
//! from its allocation (bounds checked here), and an argument block's token
//! only through [`Args::new`], whose contract is the table's range check.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::ptr::RtPtr;

/// The longest argument block a launch passes: the size of the runtime's
/// host copy of it (`result`'s `HostArgs`). The table refuses a longer
/// block before any C call (the driver reads no block's layout, so it
/// bounds the length itself).
pub(super) const MAX_HOST_ARGS: usize = 64 << 10;

// ----- entries --------------------------------------------------------------

/// A live allocation of this driver: `[base, base + len)`. Owned (out of the
/// table) only by a free in progress.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Alloc {
    base: u64,
    len: u64,
    ptr: RtPtr,
}

impl Alloc {
    /// The allocation of `len` bytes the runtime returned at `ptr`.
    pub(super) fn new(ptr: RtPtr, len: usize) -> Self {
        Alloc {
            base: ptr.raw(),
            len: len as u64,
            ptr,
        }
    }

    /// Its start, as the runtime returned it.
    pub(super) fn ptr(&self) -> RtPtr {
        self.ptr
    }

    /// Its start, as the public handle types carry it.
    pub(super) fn base(&self) -> u64 {
        self.base
    }

    /// Its size in bytes.
    pub(super) fn bytes(&self) -> u64 {
        self.len
    }

    /// `[addr, addr + len)` as a [`Span`], if it lies inside this
    /// allocation (a zero-length range may sit at its end), with how many
    /// bytes of the allocation start at `addr`.
    pub(super) fn span(&self, addr: u64, len: usize) -> Option<Span<'_>> {
        let off = addr.checked_sub(self.base)?;
        let remaining = self.len.checked_sub(off)?;
        if len as u64 > remaining {
            return None;
        }
        Some(Span {
            ptr: self.ptr.byte_add(off),
            len,
            room: usize::try_from(remaining).unwrap_or(usize::MAX),
            _live: PhantomData,
        })
    }
}

/// A live stream. Owned (out of the table) only by a destroy in progress.
#[derive(Debug)]
pub(super) struct StreamEntry {
    ptr: RtPtr,
    /// Threads blocked in `sync_stream` on it right now.
    waiters: Arc<AtomicU32>,
}

impl StreamEntry {
    /// The stream the runtime returned at `ptr`, waited on by nobody.
    pub(super) fn new(ptr: RtPtr) -> Self {
        StreamEntry {
            ptr,
            waiters: Arc::new(AtomicU32::new(0)),
        }
    }

    /// Its handle, as [`StreamId`](crate::driver::StreamId) carries it.
    pub(super) fn raw(&self) -> u64 {
        self.ptr.raw()
    }

    /// The stream, for as long as this entry is borrowed.
    pub(super) fn live(&self) -> Stream<'_> {
        Stream {
            ptr: self.ptr,
            _live: PhantomData,
        }
    }

    /// Some thread is blocked in `sync_stream` on it (a destroy must wait).
    pub(super) fn waited_on(&self) -> bool {
        self.waiters.load(Ordering::Acquire) > 0
    }

    /// Marks it waited on until the guard drops.
    pub(super) fn wait(&self) -> StreamWait {
        StreamWait {
            _mark: Mark::new(&self.waiters),
            ptr: self.ptr,
        }
    }
}

/// A live event. Owned (out of the table) only by a destroy in progress.
#[derive(Debug)]
pub(super) struct EventEntry {
    ptr: RtPtr,
    /// Made by `aclrtCreateEventWithFlag` ("old mode"): until its first
    /// record the runtime reports it not ready, and a stream wait on it
    /// would queue a device wait that nothing satisfies. The driver answers
    /// for it instead (see `AclDriver::create_event`).
    legacy: bool,
    /// Recorded at least once.
    pub(super) recorded: AtomicBool,
    /// Which record is the last: a number unique to this event in its high
    /// 32 bits (no two events of the process share it, whatever their
    /// handles), the count of its records in the low 32 (0: never
    /// recorded). Completion notifications are kept per record: a record
    /// makes what was noted for the previous one stale.
    generation: AtomicU64,
    /// Threads blocked in `sync_event` on it right now.
    waiters: Arc<AtomicU32>,
}

/// Source of the numbers that tell events' generations apart.
static EVENT_SERIAL: AtomicU64 = AtomicU64::new(1);

impl EventEntry {
    /// The event the runtime returned at `ptr` (`legacy`: made in "old
    /// mode", see the field), never recorded, waited on by nobody.
    pub(super) fn new(ptr: RtPtr, legacy: bool) -> Self {
        EventEntry {
            ptr,
            legacy,
            recorded: AtomicBool::new(false),
            generation: AtomicU64::new(EVENT_SERIAL.fetch_add(1, Ordering::Relaxed) << 32),
            waiters: Arc::new(AtomicU32::new(0)),
        }
    }

    /// Its handle, as [`EventId`](crate::driver::EventId) carries it.
    pub(super) fn raw(&self) -> u64 {
        self.ptr.raw()
    }

    /// The event, for as long as this entry is borrowed.
    pub(super) fn live(&self) -> Event<'_> {
        Event {
            ptr: self.ptr,
            _live: PhantomData,
        }
    }

    /// A legacy event never recorded: the runtime must not be asked about it.
    pub(super) fn unrecorded_legacy(&self) -> bool {
        self.legacy && !self.recorded.load(Ordering::Acquire)
    }

    /// Recorded at least once.
    pub(super) fn recorded(&self) -> bool {
        self.recorded.load(Ordering::Acquire)
    }

    /// Notes a successful record: recorded, and a new generation.
    pub(super) fn note_record(&self) {
        self.recorded.store(true, Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The generation of its last record (see the field).
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Some thread is blocked in `sync_event` on it (a destroy must wait).
    pub(super) fn waited_on(&self) -> bool {
        self.waiters.load(Ordering::Acquire) > 0
    }

    /// Marks it waited on until the guard drops.
    pub(super) fn wait(&self) -> EventWait {
        EventWait {
            _mark: Mark::new(&self.waiters),
            ptr: self.ptr,
        }
    }
}

/// A live graph (`aclmdlRI`) a capture of this driver ended into. Owned
/// (out of the table) only by a destroy in progress.
#[derive(Debug)]
pub(super) struct GraphEntry {
    ptr: RtPtr,
}

impl GraphEntry {
    /// The graph the runtime returned at `ptr`.
    pub(super) fn new(ptr: RtPtr) -> Self {
        GraphEntry { ptr }
    }

    /// Its handle, as [`GraphId`](crate::driver::GraphId) carries it.
    pub(super) fn raw(&self) -> u64 {
        self.ptr.raw()
    }

    /// The graph, for as long as this entry is borrowed.
    pub(super) fn live(&self) -> Graph<'_> {
        Graph {
            ptr: self.ptr,
            _live: PhantomData,
        }
    }
}

// ----- tokens ---------------------------------------------------------------

/// A byte range inside one live allocation of this driver, made by
/// [`Alloc::span`] (the table's `range` check), for as long as `'t` borrows
/// the allocation's entry (the table).
#[derive(Debug, Clone, Copy)]
pub(super) struct Span<'t> {
    ptr: RtPtr,
    len: usize,
    room: usize,
    _live: PhantomData<&'t ()>,
}

impl Span<'_> {
    /// Where it starts (derived from the allocation's pointer).
    pub(super) fn ptr(self) -> RtPtr {
        self.ptr
    }

    /// Its length, as checked.
    pub(super) fn len(self) -> usize {
        self.len
    }

    /// What its allocation has left from its start (≥ its length): the
    /// true `destMax` for the runtime's own bound check.
    pub(super) fn room(self) -> usize {
        self.room
    }
}

/// A live stream of this driver, for as long as `'t` borrows its entry (the
/// table) or a waiter mark on it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stream<'t> {
    ptr: RtPtr,
    _live: PhantomData<&'t ()>,
}

impl Stream<'_> {
    /// The runtime's handle.
    pub(super) fn ptr(self) -> RtPtr {
        self.ptr
    }
}

/// A live event of this driver, as [`Stream`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Event<'t> {
    ptr: RtPtr,
    _live: PhantomData<&'t ()>,
}

impl Event<'_> {
    /// The runtime's handle.
    pub(super) fn ptr(self) -> RtPtr {
        self.ptr
    }
}

/// A live graph of this driver, as [`Stream`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Graph<'t> {
    ptr: RtPtr,
    _live: PhantomData<&'t ()>,
}

impl Graph<'_> {
    /// The runtime's handle.
    pub(super) fn ptr(self) -> RtPtr {
        self.ptr
    }
}

/// A run's argument block (either version) whose device ranges were
/// checked against the table (its `run_args`): the caller's own bytes,
/// borrowed — no copy, no allocation — for as long as `'a` borrows both the
/// table and the block. At most [`MAX_HOST_ARGS`] bytes: a
/// [`RunArgs`](crate::driver::abi::RunArgs) block, a workload block that
/// parsed, or an adapter's own.
#[derive(Debug, Clone, Copy)]
pub(super) struct Args<'a> {
    blob: &'a [u8],
}

impl<'a> Args<'a> {
    /// The block `blob`, as checked.
    ///
    /// # Safety
    /// `blob` is at most [`MAX_HOST_ARGS`] bytes, and every device range it
    /// names — each address its writer recorded, with its length — lies in
    /// one live allocation of this driver, which stays allocated for `'a`
    /// (`'a` borrows the table that holds it: a free needs the table's
    /// write lock). The launches hand the block to the device as it is.
    pub(super) unsafe fn new(blob: &'a [u8]) -> Self {
        Args { blob }
    }

    /// The block's bytes, exactly as validated.
    pub(super) fn bytes(self) -> &'a [u8] {
        self.blob
    }
}

// ----- waiter marks ---------------------------------------------------------

/// Marks a handle as waited on for as long as it lives (a destroy refuses
/// it meanwhile). It does not borrow the table: a blocking wait holds this,
/// not the lock.
struct Mark(Arc<AtomicU32>);

impl Mark {
    fn new(waiters: &Arc<AtomicU32>) -> Self {
        waiters.fetch_add(1, Ordering::AcqRel);
        Mark(Arc::clone(waiters))
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A stream marked waited on ([`StreamEntry::wait`]): it stays live while
/// this lives.
pub(super) struct StreamWait {
    _mark: Mark,
    ptr: RtPtr,
}

impl StreamWait {
    /// The stream, for as long as the mark is borrowed.
    pub(super) fn live(&self) -> Stream<'_> {
        Stream {
            ptr: self.ptr,
            _live: PhantomData,
        }
    }
}

/// An event marked waited on ([`EventEntry::wait`]): it stays live while
/// this lives.
pub(super) struct EventWait {
    _mark: Mark,
    ptr: RtPtr,
}

impl EventWait {
    /// The event, for as long as the mark is borrowed.
    pub(super) fn live(&self) -> Event<'_> {
        Event {
            ptr: self.ptr,
            _live: PhantomData,
        }
    }
}
