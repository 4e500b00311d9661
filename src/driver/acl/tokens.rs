//! The tokens a check of the table returns: what the `result` layer's calls
//! take as proof that a handle is live. Their fields are visible to the
//! table module only, so only the table makes them, from entries it holds:
//! a [`Span`], [`Stream`], [`Event`] or [`Args`] borrows the table (or a
//! waiter mark) for as long as it lives.

use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::table::Table;
use crate::driver::acl::result::RtPtr;

/// A byte range inside one live allocation of this driver, checked by
/// [`Table::range`], for as long as `'t` borrows the table.
#[derive(Debug, Clone, Copy)]
pub(in crate::driver::acl) struct Span<'t> {
    pub(in crate::driver::acl) ptr: RtPtr,
    pub(in crate::driver::acl) len: usize,
    pub(in crate::driver::acl) room: usize,
    pub(in crate::driver::acl) _table: PhantomData<&'t Table>,
}

impl Span<'_> {
    /// Where it starts (derived from the allocation's pointer).
    pub(in crate::driver::acl) fn ptr(self) -> RtPtr {
        self.ptr
    }

    /// Its length, as checked.
    pub(in crate::driver::acl) fn len(self) -> usize {
        self.len
    }

    /// What its allocation has left from its start (≥ its length): the
    /// true `destMax` for the runtime's own bound check.
    pub(in crate::driver::acl) fn room(self) -> usize {
        self.room
    }
}

/// A live stream of this driver, for as long as `'t` borrows its entry (the
/// table) or a waiter mark on it.
#[derive(Debug, Clone, Copy)]
pub(in crate::driver::acl) struct Stream<'t> {
    pub(in crate::driver::acl) ptr: RtPtr,
    pub(in crate::driver::acl) _live: PhantomData<&'t ()>,
}

impl Stream<'_> {
    /// The runtime's handle.
    pub(in crate::driver::acl) fn ptr(self) -> RtPtr {
        self.ptr
    }
}

/// A live event of this driver, as [`Stream`].
#[derive(Debug, Clone, Copy)]
pub(in crate::driver::acl) struct Event<'t> {
    pub(in crate::driver::acl) ptr: RtPtr,
    pub(in crate::driver::acl) _live: PhantomData<&'t ()>,
}

impl Event<'_> {
    /// The runtime's handle.
    pub(in crate::driver::acl) fn ptr(self) -> RtPtr {
        self.ptr
    }
}

/// A run's argument block (either version) whose device ranges were
/// checked against the table ([`Table::run_args`]): the caller's own bytes,
/// borrowed — no copy, no allocation — for as long as `'a` borrows both the
/// table and the block. At most
/// [`WorkArgs::MAX_SIZE`](crate::driver::abi::WorkArgs::MAX_SIZE) bytes: a
/// [`RunArgs`](crate::driver::abi::RunArgs) block or a workload block that
/// parsed.
#[derive(Debug, Clone, Copy)]
pub(in crate::driver::acl) struct Args<'a> {
    pub(in crate::driver::acl) blob: &'a [u8],
    pub(in crate::driver::acl) _table: PhantomData<&'a Table>,
}

impl<'a> Args<'a> {
    /// The block's bytes, exactly as validated.
    pub(in crate::driver::acl) fn bytes(self) -> &'a [u8] {
        self.blob
    }
}

/// Marks a handle as waited on for as long as it lives (a destroy refuses
/// it meanwhile). It does not borrow the table: a blocking wait holds this,
/// not the lock.
pub(in crate::driver::acl) struct Mark(Arc<AtomicU32>);

impl Mark {
    pub(in crate::driver::acl) fn new(waiters: &Arc<AtomicU32>) -> Self {
        waiters.fetch_add(1, Ordering::AcqRel);
        Mark(Arc::clone(waiters))
    }
}

impl Drop for Mark {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A stream marked waited on: it stays live while this lives.
pub(in crate::driver::acl) struct StreamWait {
    pub(in crate::driver::acl) _mark: Mark,
    pub(in crate::driver::acl) ptr: RtPtr,
}

impl StreamWait {
    /// The stream, for as long as the mark is borrowed.
    pub(in crate::driver::acl) fn live(&self) -> Stream<'_> {
        Stream {
            ptr: self.ptr,
            _live: PhantomData,
        }
    }
}

/// An event marked waited on: it stays live while this lives.
pub(in crate::driver::acl) struct EventWait {
    pub(in crate::driver::acl) _mark: Mark,
    pub(in crate::driver::acl) ptr: RtPtr,
}

impl EventWait {
    /// The event, for as long as the mark is borrowed.
    pub(in crate::driver::acl) fn live(&self) -> Event<'_> {
        Event {
            ptr: self.ptr,
            _live: PhantomData,
        }
    }
}
