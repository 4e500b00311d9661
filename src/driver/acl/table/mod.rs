//! What one `AclDriver` created and has not destroyed: streams, events,
//! allocations with their byte ranges, registered code, and the graphs its
//! stream captures ended into. Every handle a
//! safe method receives is checked here **before any C call**; a forged,
//! destroyed or foreign one is refused with an error the driver raises
//! itself (no [`Native`](crate::driver::Native) detail: the runtime was not
//! called).
//!
//! The table is read-mostly: the per-run calls (copies, memsets, launches,
//! records, waits, queries) validate under a shared read lock, which they
//! hold across their (non-blocking) C call, so a concurrent `free` or
//! `destroy_*` — which takes the write lock — can never invalidate a handle
//! between its check and its use. Blocking waits (`sync_stream`,
//! `sync_event`) do not hold the lock while they wait: they mark the handle
//! *waited on* instead, and destroying a handle that is being waited on is
//! refused.
//!
//! Lookups are binary searches over small sorted vectors (a device holds a
//! handful of streams, events and allocations), with no allocation and no
//! hashing on the per-run path.
//!
//! What a check proves is a token the `result` layer's calls take (see
//! `tokens`): a `Stream`, `Event`, [`Span`] or [`Args`] is made from an
//! entry the table holds, and borrows the table (or a waiter mark) for as
//! long as it lives — so the handle it names stays live while the call that
//! takes it runs. A destroy or free takes the entry itself out of the table
//! ([`Table::take_stream`], …) and hands it to the call by value.

use super::ptr::{Program, RtPtr};
use super::tokens::{
    Alloc, Args, EventEntry, GraphEntry, MAX_HOST_ARGS, Span, StreamEntry, StreamWait,
};
use crate::driver::abi::LaunchArgs;
use crate::driver::{DriverError, DriverErrorKind, HandleKind, Op};

/// One registration the runtime holds (`rtRegisterAllKernel`).
#[derive(Debug)]
pub(super) struct Resident {
    /// The runtime's handle and the image it holds.
    pub program: Program,
    /// Its upload stamp.
    pub upload: u64,
    /// Live pins (`register_code` calls not yet released).
    pub pins: u64,
}

impl Resident {
    /// The runtime's handle.
    pub fn raw(&self) -> u64 {
        self.program.raw()
    }
}

fn bad(op: Op, kind: HandleKind, raw: u64) -> DriverError {
    DriverError::new(op, DriverErrorKind::BadHandle { kind, raw })
}

fn bad_range(op: Op, addr: u64, len: u64) -> DriverError {
    DriverError::new(op, DriverErrorKind::BadAddress { addr, len })
}

/// Everything one driver created and has not destroyed.
#[derive(Debug, Default)]
pub(super) struct Table {
    /// Sorted by `base`; never overlapping.
    allocs: Vec<Alloc>,
    /// Sorted by `raw`.
    streams: Vec<StreamEntry>,
    /// Sorted by `raw`.
    events: Vec<EventEntry>,
    /// Registration order.
    pub code: Vec<Resident>,
    /// Sorted by `raw`.
    graphs: Vec<GraphEntry>,
}

impl Table {
    // ----- memory -----------------------------------------------------------

    /// The allocation containing `addr` (or ending at it), if any.
    fn alloc_at(&self, addr: u64) -> Option<&Alloc> {
        let i = self.allocs.partition_point(|a| a.base() <= addr);
        let a = self.allocs.get(i.checked_sub(1)?)?;
        (addr - a.base() <= a.bytes()).then_some(a)
    }

    /// Checks that `[addr, addr + len)` lies inside one live allocation and
    /// returns it as a [`Span`], with how many bytes of that allocation
    /// start at `addr` (the true destination size for the runtime's own
    /// bound check). A zero-length range may sit at an allocation's end.
    pub fn range(&self, op: Op, addr: u64, len: usize) -> Result<Span<'_>, DriverError> {
        self.alloc_at(addr)
            .and_then(|a| a.span(addr, len))
            .ok_or_else(|| bad_range(op, addr, len as u64))
    }

    /// Records a new allocation of `len` bytes at `ptr`.
    pub fn insert_alloc(&mut self, ptr: RtPtr, len: usize) {
        self.put_back_alloc(Alloc::new(ptr, len));
    }

    /// Takes the allocation starting at `base` out of the table, to free it.
    pub fn take_alloc(&mut self, op: Op, base: u64) -> Result<Alloc, DriverError> {
        match self.allocs.binary_search_by_key(&base, Alloc::base) {
            Ok(i) => Ok(self.allocs.remove(i)),
            Err(_) => Err(bad_range(op, base, 0)),
        }
    }

    /// Puts an allocation (back) into the table.
    pub fn put_back_alloc(&mut self, a: Alloc) {
        let i = self.allocs.partition_point(|x| x.base() < a.base());
        self.allocs.insert(i, a);
    }

    /// Checks every device range a run's argument block names — the
    /// addresses its writer recorded ([`LaunchArgs::fields`]) — before any
    /// C call: each `[addr, addr + len)` inside one live allocation of this
    /// table, and still in the block where it was written
    /// ([`LaunchArgs::consistent`]). The layout is the kernel's adapter's;
    /// this driver reads no field of it. A zero-length range is checked as
    /// every zero-length range is: its address must lie inside a live
    /// allocation or at its end.
    /// Every block is checked in full at every launch: a remembered-ranges
    /// cache saved nothing measurable (`cost.rs`: a `RunSpec` block's two
    /// checks cost what a two-tensor workload's do, ~60 ns per run).
    ///
    /// A block whose addresses moved, or longer than the launch's host copy
    /// ([`MAX_HOST_ARGS`]), is refused as an invalid argument, a range
    /// outside every live allocation as a bad address.
    pub fn run_args<'a>(&'a self, op: Op, args: LaunchArgs<'a>) -> Result<Args<'a>, DriverError> {
        let invalid = |what| DriverError::new(op, DriverErrorKind::InvalidArgument { what });
        // The runtime gets a fixed-size copy of the block: a longer one
        // would be cut short, so it never reaches C.
        if args.bytes().len() > MAX_HOST_ARGS {
            return Err(invalid(
                "argument block is longer than the launch's host copy (64 KiB)",
            ));
        }
        if args.consistent().is_err() {
            return Err(invalid(
                "an address the block's writer recorded is no longer in the block",
            ));
        }
        for f in args.fields() {
            // A length no host slice can have lies in no allocation either.
            let len = usize::try_from(f.len).map_err(|_| bad_range(op, f.addr.raw(), f.len))?;
            self.range(op, f.addr.raw(), len)?;
        }
        // SAFETY: at most `MAX_HOST_ARGS` bytes (above), and every range the
        // block's writer recorded was just found inside one live allocation
        // of this table (the loop above), while `'a` borrows the table, so
        // none can be freed for as long as the token lives. `consistent`
        // (above): those recorded addresses are the ones in the bytes.
        let checked = unsafe { Args::new(args.bytes()) };
        Ok(checked)
    }

    /// [`run_args`](Self::run_args) over a table holding only the
    /// allocations `allocs` (`(base, bytes)`, sorted, not overlapping) of
    /// for the fuzz targets (never handed to C).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn check_run_args(
        allocs: &[(u64, usize)],
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverError> {
        let mut t = Table::default();
        for &(base, len) in allocs {
            t.insert_alloc(RtPtr::from_raw(base), len);
        }
        t.run_args(Op::LaunchAicore, args).map(|_| ())
    }

    // ----- streams ----------------------------------------------------------

    /// The live stream `raw`.
    pub fn stream(&self, op: Op, raw: u64) -> Result<&StreamEntry, DriverError> {
        match self.streams.binary_search_by_key(&raw, StreamEntry::raw) {
            Ok(i) => Ok(&self.streams[i]),
            Err(_) => Err(bad(op, HandleKind::Stream, raw)),
        }
    }

    /// Records a new stream.
    pub fn insert_stream(&mut self, ptr: RtPtr) {
        self.put_back_stream(StreamEntry::new(ptr));
    }

    /// Takes stream `raw` out of the table, to destroy it: it must be live
    /// and nobody may wait on it.
    pub fn take_stream(&mut self, op: Op, raw: u64) -> Result<StreamEntry, DriverError> {
        if self.stream(op, raw)?.waited_on() {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "another thread is synchronizing this stream",
                },
            ));
        }
        let i = self.streams.partition_point(|s| s.raw() < raw);
        Ok(self.streams.remove(i))
    }

    /// Puts a stream (back) into the table.
    pub fn put_back_stream(&mut self, s: StreamEntry) {
        let i = self.streams.partition_point(|x| x.raw() < s.raw());
        self.streams.insert(i, s);
    }

    /// Marks stream `raw` waited on until the guard drops.
    pub fn wait_stream(&self, op: Op, raw: u64) -> Result<StreamWait, DriverError> {
        Ok(self.stream(op, raw)?.wait())
    }

    // ----- events -----------------------------------------------------------

    /// The live event `raw`.
    pub fn event(&self, op: Op, raw: u64) -> Result<&EventEntry, DriverError> {
        match self.events.binary_search_by_key(&raw, EventEntry::raw) {
            Ok(i) => Ok(&self.events[i]),
            Err(_) => Err(bad(op, HandleKind::Event, raw)),
        }
    }

    /// Records a new event.
    pub fn insert_event(&mut self, ptr: RtPtr, legacy: bool) {
        self.put_back_event(EventEntry::new(ptr, legacy));
    }

    /// Takes event `raw` out of the table, to destroy it: it must be live
    /// and nobody may wait on it.
    pub fn take_event(&mut self, op: Op, raw: u64) -> Result<EventEntry, DriverError> {
        if self.event(op, raw)?.waited_on() {
            return Err(DriverError::new(
                op,
                DriverErrorKind::InvalidArgument {
                    what: "another thread is synchronizing this event",
                },
            ));
        }
        let i = self.events.partition_point(|e| e.raw() < raw);
        Ok(self.events.remove(i))
    }

    /// Puts an event (back) into the table.
    pub fn put_back_event(&mut self, e: EventEntry) {
        let i = self.events.partition_point(|x| x.raw() < e.raw());
        self.events.insert(i, e);
    }

    // ----- graphs -----------------------------------------------------------

    /// The live graph `raw`.
    pub fn graph(&self, op: Op, raw: u64) -> Result<&GraphEntry, DriverError> {
        match self.graphs.binary_search_by_key(&raw, GraphEntry::raw) {
            Ok(i) => Ok(&self.graphs[i]),
            Err(_) => Err(bad(op, HandleKind::Graph, raw)),
        }
    }

    /// Records a new graph.
    pub fn insert_graph(&mut self, ptr: RtPtr) {
        self.put_back_graph(GraphEntry::new(ptr));
    }

    /// Takes graph `raw` out of the table, to destroy it.
    pub fn take_graph(&mut self, op: Op, raw: u64) -> Result<GraphEntry, DriverError> {
        match self.graphs.binary_search_by_key(&raw, GraphEntry::raw) {
            Ok(i) => Ok(self.graphs.remove(i)),
            Err(_) => Err(bad(op, HandleKind::Graph, raw)),
        }
    }

    /// Puts a graph (back) into the table.
    pub fn put_back_graph(&mut self, g: GraphEntry) {
        let i = self.graphs.partition_point(|x| x.raw() < g.raw());
        self.graphs.insert(i, g);
    }

    /// Takes every graph out of the table (the driver is dropping).
    pub fn take_graphs(&mut self) -> Vec<GraphEntry> {
        std::mem::take(&mut self.graphs)
    }

    // ----- code -------------------------------------------------------------

    /// The registration `raw` / `upload` names, if this driver holds it.
    pub fn code(&self, op: Op, raw: u64, upload: u64) -> Result<&Resident, DriverError> {
        self.code
            .iter()
            .find(|r| r.raw() == raw && r.upload == upload)
            .ok_or_else(|| bad(op, HandleKind::Code, raw))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::DevPtr;
    use crate::driver::abi::{BlockBuf, DevSpan};

    fn table() -> Table {
        let mut t = Table::default();
        t.insert_alloc(RtPtr::from_raw(0x3000), 16);
        t.insert_alloc(RtPtr::from_raw(0x1000), 64);
        t.insert_alloc(RtPtr::from_raw(0x2000), 8);
        t
    }

    #[test]
    fn ranges_resolve_to_one_allocation_and_its_remaining_size() {
        let t = table();
        let room = |addr, len| {
            t.range(Op::Memset, addr, len)
                .map(|s| (s.ptr().raw(), s.room()))
        };
        assert_eq!(room(0x1000, 64), Ok((0x1000, 64)));
        assert_eq!(room(0x1010, 4), Ok((0x1010, 48)));
        assert_eq!(room(0x1040, 0), Ok((0x1040, 0)), "empty, at the end");
        assert_eq!(room(0x2000, 8), Ok((0x2000, 8)));
        for (addr, len) in [
            (0x1000, 65),
            (0x1040, 1),
            (0x0fff, 1),
            (0x2004, 8),
            (0x1800, 1),
            (0, 0),
            (u64::MAX, usize::MAX),
            (0x1000, usize::MAX),
        ] {
            let e = t.range(Op::Memset, addr, len).unwrap_err();
            assert_eq!(
                e.kind(),
                &DriverErrorKind::BadAddress {
                    addr,
                    len: len as u64
                }
            );
            assert!(e.native().is_none());
        }
    }

    /// A table with two buffers: 0x4000 (64 bytes), 0x5000 (16 bytes).
    fn work_table() -> Table {
        let mut t = Table::default();
        t.insert_alloc(RtPtr::from_raw(0x4000), 64);
        t.insert_alloc(RtPtr::from_raw(0x5000), 16);
        t
    }

    /// A block of 8 bytes per address, each recorded.
    fn block(spans: &[(u64, u64)]) -> BlockBuf {
        let mut b = BlockBuf::with_capacity(8 * spans.len() + 8, spans.len());
        let mut w = b.writer();
        w.grow(8 * spans.len() + 8).unwrap();
        w.put_u64(8 * spans.len(), 0xfeed).unwrap(); // an integer: not checked
        for (i, &(addr, len)) in spans.iter().enumerate() {
            w.put_addr(8 * i, DevSpan::new(DevPtr::from_raw(addr), len))
                .unwrap();
        }
        b
    }

    fn refused(t: &Table, block: &BlockBuf) -> DriverErrorKind {
        let e = t.run_args(Op::LaunchAicore, block.args()).unwrap_err();
        assert!(e.native().is_none(), "refused by the driver itself");
        e.kind().clone()
    }

    #[test]
    fn every_recorded_address_is_checked() {
        let t = work_table();
        let ok = block(&[(0x4000, 64), (0x5004, 12)]);
        let args = t.run_args(Op::LaunchAicore, ok.args()).unwrap();
        assert_eq!(
            args.bytes(),
            ok.args().bytes(),
            "the caller's bytes, unchanged"
        );
        // Zero-byte ranges: inside an allocation or at its end.
        for addr in [0x4000, 0x4020, 0x4040, 0x5010] {
            assert!(
                t.run_args(Op::LaunchAicore, block(&[(addr, 0)]).args())
                    .is_ok(),
                "{addr:#x}"
            );
        }
        for (addr, bytes) in [
            (0x4000, 65),         // one byte past the end
            (0x4040, 1),          // starts at the end
            (0x3fff, 2),          // starts before the allocation
            (0x4800, 0),          // empty, in no allocation
            (0x4020, 0x1000),     // runs into the gap (and the next one)
            (0x4000, 0x1010),     // spans two allocations
            (0x4001, u64::MAX),   // addr + bytes overflows
            (u64::MAX, u64::MAX), // so does this
            (u64::MAX, 1),
            (0, 0),
        ] {
            // The bad range after a good one, so the first does not hide it.
            let b = block(&[(0x5000, 16), (addr, bytes)]);
            assert_eq!(
                refused(&t, &b),
                DriverErrorKind::BadAddress { addr, len: bytes },
                "{addr:#x} + {bytes:#x}"
            );
        }
        // A block naming no address passes unread.
        assert!(
            t.run_args(Op::LaunchAicore, BlockBuf::from_bytes(&[1, 2, 3]).args())
                .is_ok()
        );
    }

    #[test]
    fn a_block_longer_than_the_host_copy_is_refused() {
        let t = work_table();
        let longest = BlockBuf::from_bytes(&vec![0; MAX_HOST_ARGS]);
        assert!(t.run_args(Op::LaunchAicore, longest.args()).is_ok());
        // One byte more would be cut short by the copy the runtime gets.
        let long = BlockBuf::from_bytes(&vec![0; MAX_HOST_ARGS + 1]);
        assert!(matches!(
            refused(&t, &long),
            DriverErrorKind::InvalidArgument { .. }
        ));
    }

    #[test]
    fn an_address_overwritten_after_it_was_recorded_is_refused() {
        let t = work_table();
        let mut b = BlockBuf::with_capacity(8, 1);
        let mut w = b.writer();
        w.grow(8).unwrap();
        w.put_addr(0, DevSpan::new(DevPtr::from_raw(0x4000), 64))
            .unwrap();
        assert!(t.run_args(Op::LaunchAicore, b.args()).is_ok());
        // The negative control: the range recorded is valid, the address the
        // kernel would read is not.
        let mut w = b.writer();
        w.grow(8).unwrap();
        w.put_addr(0, DevSpan::new(DevPtr::from_raw(0x4000), 64))
            .unwrap();
        w.put_u64(0, 0xdead_0000).unwrap();
        assert!(matches!(
            refused(&t, &b),
            DriverErrorKind::InvalidArgument { .. }
        ));
    }

    #[test]
    fn every_launch_checks_every_range_again() {
        let mut t = work_table();
        let small = block(&[(0x4000, 64), (0x5000, 16)]);
        assert!(t.run_args(Op::LaunchAicore, small.args()).is_ok());
        assert!(t.run_args(Op::LaunchAicpu, small.args()).is_ok());
        // The same ranges plus one bad one: refused.
        let bad = block(&[(0x4000, 64), (0x5000, 16), (0x4000, 65)]);
        assert!(matches!(
            refused(&t, &bad),
            DriverErrorKind::BadAddress { .. }
        ));
        // A free between two launches of one block: the second is refused.
        let a = t.take_alloc(Op::Free, 0x5000).unwrap();
        assert!(matches!(
            refused(&t, &small),
            DriverErrorKind::BadAddress { .. }
        ));
        t.put_back_alloc(a);
        assert!(t.run_args(Op::LaunchAicore, small.args()).is_ok());
    }

    #[test]
    fn frees_need_the_exact_start() {
        let mut t = table();
        assert!(t.take_alloc(Op::Free, 0x1008).is_err());
        let a = t.take_alloc(Op::Free, 0x1000).unwrap();
        assert!(t.take_alloc(Op::Free, 0x1000).is_err());
        assert!(t.range(Op::Memset, 0x1000, 1).is_err());
        t.put_back_alloc(a);
        assert!(
            t.range(Op::Memset, 0x1000, 1).is_ok(),
            "a failed free puts it back"
        );
    }

    #[test]
    fn waited_on_handles_cannot_be_destroyed() {
        let mut t = Table::default();
        t.insert_stream(RtPtr::from_raw(7));
        t.insert_event(RtPtr::from_raw(9), true);
        let w = t.wait_stream(Op::SyncStream, 7).unwrap();
        let v = t.event(Op::SyncEvent, 9).unwrap().wait();
        assert!(t.take_stream(Op::DestroyStream, 7).is_err());
        assert!(t.take_event(Op::DestroyEvent, 9).is_err());
        drop((w, v));
        assert!(t.take_stream(Op::DestroyStream, 7).is_ok());
        assert!(t.take_event(Op::DestroyEvent, 9).is_ok());
        assert!(matches!(
            t.stream(Op::QueryStream, 7).unwrap_err().kind(),
            DriverErrorKind::BadHandle {
                kind: HandleKind::Stream,
                raw: 7
            }
        ));
    }

    #[test]
    fn graphs_are_found_taken_and_refused_once_gone() {
        let mut t = Table::default();
        for raw in [0x30, 0x10, 0x20] {
            t.insert_graph(RtPtr::from_raw(raw));
        }
        assert_eq!(t.graph(Op::GraphLaunch, 0x20).unwrap().raw(), 0x20);
        let g = t.take_graph(Op::GraphDestroy, 0x20).unwrap();
        for op in [Op::GraphLaunch, Op::GraphDestroy] {
            let e = t.graph(op, 0x20).unwrap_err();
            assert_eq!(
                e.kind(),
                &DriverErrorKind::BadHandle {
                    kind: HandleKind::Graph,
                    raw: 0x20
                }
            );
            assert!(e.native().is_none());
        }
        assert!(t.take_graph(Op::GraphDestroy, 0x20).is_err());
        t.put_back_graph(g);
        let all: Vec<_> = t.take_graphs().iter().map(GraphEntry::raw).collect();
        assert_eq!(all, [0x10, 0x20, 0x30]);
        assert!(t.graph(Op::GraphLaunch, 0x10).is_err());
    }
}

#[cfg(test)]
mod cost;
