//! An argument block as an adapter writes it and a driver receives it:
//! [`BlockBuf`] (host storage, reused run after run), [`BlockWriter`]
//! (integers and recorded addresses), [`LaunchArgs`] (the bytes and
//! every [`AddrField`]), and the [`DevSpan`]s runclaim hands an adapter.
//!
//! # Addresses are recorded, not guessed
//!
//! An adapter writes its blocks through a [`BlockWriter`]: integers with
//! [`put_u32`](BlockWriter::put_u32) / [`put_u64`](BlockWriter::put_u64),
//! device addresses only with [`put_addr`](BlockWriter::put_addr), which
//! takes a [`DevSpan`] and records it. A driver receives the bytes together
//! with every recorded address ([`LaunchArgs`]) and checks each range, and
//! that the block still holds it where it was written, before C. Every
//! address runclaim gives an adapter (its regions, its tensors) is a
//! [`DevSpan`], which offers no integer accessor: the way to put one in a
//! block is `put_addr`, and both built-in adapters record every address
//! they write. What this protects against is a *mistake* — a freed or
//! foreign region, a tensor past its buffer, an integer written over an
//! address — not an adapter that means harm: an adapter is trusted code,
//! like the kernels it describes. An address written as an integer (it
//! can be recovered, from a span's `Debug` or a recorded [`AddrField`])
//! is an integer to the driver, which cannot tell a hand-made number from
//! a count and does not try.
//!
//! ```
//! use runclaim::driver::DevPtr;
//! use runclaim::driver::abi::{BlockBuf, DevSpan};
//!
//! let mut buf = BlockBuf::with_capacity(64, 4);
//! let mut w = buf.writer();
//! let at = w.grow(16)?; // 16 zeroed bytes
//! w.put_u64(at, 7)?;
//! w.put_addr(at + 8, DevSpan::new(DevPtr::from_raw(0x1000), 32))?;
//! let args = buf.args();
//! assert_eq!(args.bytes().len(), 16);
//! assert_eq!(args.fields().len(), 1); // the driver checks 0x1000..0x1020
//! assert_eq!((args.fields()[0].at, args.fields()[0].addr.raw(), args.fields()[0].len), (8, 0x1000, 32));
//! assert!(args.consistent().is_ok());
//! # Ok::<(), runclaim::driver::abi::AbiError>(())
//! ```

use super::AbiError;
use crate::driver::DevPtr;
use crate::driver::abi::decode::DecodeError;

/// A device range runclaim hands an adapter: where it starts and how many
/// bytes it spans. It offers no integer accessor: write it with
/// [`BlockWriter::put_addr`], which records it for the driver.
///
/// ```
/// use runclaim::driver::DevPtr;
/// use runclaim::driver::abi::DevSpan;
///
/// let s = DevSpan::new(DevPtr::from_raw(0x100), 64);
/// assert_eq!(s.len(), 64);
/// let tail = s.sub(48, 16).unwrap();
/// assert_eq!(tail.len(), 16);
/// assert!(s.sub(48, 17).is_none()); // past the end
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevSpan {
    ptr: DevPtr,
    len: u64,
}

impl DevSpan {
    /// The `len` bytes from `ptr`. Any span may be made: what a block names
    /// is checked by the driver, whoever made it.
    #[must_use]
    pub const fn new(ptr: DevPtr, len: u64) -> Self {
        DevSpan { ptr, len }
    }

    /// Bytes spanned.
    #[must_use]
    pub const fn len(&self) -> u64 {
        self.len
    }

    /// `true` for an empty span.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `len` bytes `offset` bytes in, `None` unless they lie inside.
    #[must_use]
    pub fn sub(&self, offset: u64, len: u64) -> Option<DevSpan> {
        let end = offset.checked_add(len)?;
        (end <= self.len).then(|| DevSpan {
            ptr: DevPtr::from_raw(self.ptr.raw().wrapping_add(offset)),
            len,
        })
    }

    pub(crate) const fn ptr(&self) -> DevPtr {
        self.ptr
    }
}

impl std::fmt::Debug for DevSpan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DevSpan({:#x}, {} bytes)", self.ptr.raw(), self.len)
    }
}

/// One device address an argument block names, as its writer recorded it:
/// the byte offset of the little-endian `u64` that holds it, and the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddrField {
    /// Offset of the address inside the block.
    pub at: usize,
    /// The address.
    pub addr: DevPtr,
    /// Bytes from `addr` the kernels may touch.
    pub len: u64,
}

/// An argument block as a [`Driver`](crate::driver::Driver) receives it:
/// its bytes and every device address its writer recorded. Made only by a
/// [`BlockBuf`]; the driver checks every [`AddrField`] (its range, and that
/// the bytes still hold it: [`consistent`](LaunchArgs::consistent)) before
/// C.
#[derive(Debug, Clone, Copy)]
pub struct LaunchArgs<'a> {
    bytes: &'a [u8],
    fields: &'a [AddrField],
}

impl<'a> LaunchArgs<'a> {
    /// The block's bytes (what the kernel receives).
    #[must_use]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Every device address the block names.
    #[must_use]
    pub fn fields(&self) -> &'a [AddrField] {
        self.fields
    }

    /// `Ok` when every recorded address is still in the block where it
    /// was written (an integer written over an address afterwards makes it
    /// an error: a driver refuses such a block).
    ///
    /// # Errors
    /// [`DecodeError`] with field `AddrField.addr` and the offset of the
    /// first recorded address the bytes no longer hold (or that lies past
    /// their end).
    pub fn consistent(&self) -> Result<(), DecodeError> {
        if self.fields.iter().all(|f| self.holds(f)) {
            Ok(())
        } else {
            Err(self.moved())
        }
    }

    /// `true` when the bytes hold `f`'s address where it was written.
    fn holds(&self, f: &AddrField) -> bool {
        f.at.checked_add(8)
            .and_then(|end| self.bytes.get(f.at..end))
            .is_some_and(|b| b == f.addr.raw().to_le_bytes())
    }

    /// The first recorded address the bytes no longer hold (off the
    /// per-run path).
    #[cold]
    fn moved(&self) -> DecodeError {
        let at = self
            .fields
            .iter()
            .find(|f| !self.holds(f))
            .map_or(0, |f| f.at);
        DecodeError::new("AddrField.addr", at)
    }
}

/// Host storage for one argument block and its recorded addresses,
/// reused run after run (no allocation per run below its capacities).
///
/// A block with no addresses can be made from bytes
/// ([`from_bytes`](BlockBuf::from_bytes)), to hand a driver a block its
/// device must refuse; it names nothing, so the driver checks nothing.
#[derive(Debug, Clone, Default)]
pub struct BlockBuf {
    bytes: Vec<u8>,
    capacity: usize,
    fields: Vec<AddrField>,
}

impl BlockBuf {
    /// Storage for blocks of up to `bytes` bytes naming up to `fields`
    /// addresses without allocating (more addresses allocate; more bytes
    /// are refused by the writer).
    #[must_use]
    pub fn with_capacity(bytes: usize, fields: usize) -> Self {
        BlockBuf {
            bytes: Vec::with_capacity(bytes),
            capacity: bytes,
            fields: Vec::with_capacity(fields),
        }
    }

    /// [`with_capacity`](Self::with_capacity), `None` when the host cannot
    /// reserve it (never an abort).
    pub(crate) fn try_with_capacity(bytes: usize, fields: usize) -> Option<Self> {
        let mut b = Vec::new();
        b.try_reserve_exact(bytes).ok()?;
        let mut f = Vec::new();
        f.try_reserve_exact(fields).ok()?;
        Some(BlockBuf {
            bytes: b,
            capacity: bytes,
            fields: f,
        })
    }

    /// A block of exactly `bytes`, naming no address.
    #[must_use]
    pub fn from_bytes(bytes: &[u8]) -> Self {
        BlockBuf {
            bytes: bytes.to_vec(),
            capacity: bytes.len(),
            fields: Vec::new(),
        }
    }

    /// A copy of a block with its recorded addresses (for a driver that
    /// holds a launch to submit later, or wraps another driver).
    #[must_use]
    pub fn copy_of(args: LaunchArgs<'_>) -> Self {
        BlockBuf {
            bytes: args.bytes.to_vec(),
            capacity: args.bytes.len(),
            fields: args.fields.to_vec(),
        }
    }

    /// Starts a new block (the previous one is cleared).
    pub fn writer(&mut self) -> BlockWriter<'_> {
        self.bytes.clear();
        self.fields.clear();
        BlockWriter { buf: self }
    }

    /// The block written last, for a driver.
    #[must_use]
    pub fn args(&self) -> LaunchArgs<'_> {
        LaunchArgs {
            bytes: &self.bytes,
            fields: &self.fields,
        }
    }

    /// The most bytes a block may have.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Writes one argument block: grow it by zeroed bytes, then put integers
/// and addresses at offsets inside it (little-endian). Every address put
/// is recorded for the driver. Nothing here panics: a write outside the
/// block or past the capacity is an [`AbiError`].
#[derive(Debug)]
pub struct BlockWriter<'b> {
    buf: &'b mut BlockBuf,
}

impl BlockWriter<'_> {
    /// Bytes written so far.
    #[must_use]
    pub fn len(&self) -> usize {
        self.buf.bytes.len()
    }

    /// `true` before the first [`grow`](Self::grow).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buf.bytes.is_empty()
    }

    /// Appends `n` zeroed bytes and returns the offset of the first.
    ///
    /// # Errors
    /// [`AbiError::BlockFull`] when the block would exceed its capacity.
    pub fn grow(&mut self, n: usize) -> Result<usize, AbiError> {
        let at = self.len();
        match at.checked_add(n) {
            Some(end) if end <= self.buf.capacity => {
                self.buf.bytes.resize(end, 0);
                Ok(at)
            }
            _ => Err(AbiError::BlockFull {
                needed: at.saturating_add(n),
                capacity: self.buf.capacity,
            }),
        }
    }

    /// Pads with zeroes to a multiple of `align` (a power of two; others
    /// are refused) and returns the new length.
    ///
    /// # Errors
    /// [`AbiError::BadAlign`], or [`AbiError::BlockFull`].
    pub fn align_to(&mut self, align: usize) -> Result<usize, AbiError> {
        if !align.is_power_of_two() {
            return Err(AbiError::BadAlign { align });
        }
        let pad = self.len().wrapping_neg() & (align - 1);
        self.grow(pad)?;
        Ok(self.len())
    }

    fn slot(&mut self, at: usize, len: usize) -> Result<&mut [u8], AbiError> {
        let block = self.buf.bytes.len();
        at.checked_add(len)
            .and_then(|end| self.buf.bytes.get_mut(at..end))
            .ok_or(AbiError::OutOfBlock { at, len, block })
    }

    /// The grown bytes `at..at + len`, to encode in place (crate-private:
    /// addresses written this way must be recorded with `record_addr`).
    pub(crate) fn bytes_mut(&mut self, at: usize, len: usize) -> Result<&mut [u8], AbiError> {
        self.slot(at, len)
    }

    /// The little-endian `u64` at `at`, if grown.
    pub(crate) fn word(&self, at: usize) -> Option<u64> {
        let b = self.buf.bytes.get(at..at.checked_add(8)?)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// Puts bytes at `at`.
    ///
    /// # Errors
    /// [`AbiError::OutOfBlock`] unless `at..at + b.len()` was grown.
    pub fn put_bytes(&mut self, at: usize, b: &[u8]) -> Result<(), AbiError> {
        self.slot(at, b.len())?.copy_from_slice(b);
        Ok(())
    }

    /// Puts a `u32` at `at`.
    ///
    /// # Errors
    /// As [`put_bytes`](Self::put_bytes).
    pub fn put_u32(&mut self, at: usize, v: u32) -> Result<(), AbiError> {
        self.put_bytes(at, &v.to_le_bytes())
    }

    /// Puts an `i32` at `at`.
    ///
    /// # Errors
    /// As [`put_bytes`](Self::put_bytes).
    pub fn put_i32(&mut self, at: usize, v: i32) -> Result<(), AbiError> {
        self.put_bytes(at, &v.to_le_bytes())
    }

    /// Puts a `u64` at `at`.
    ///
    /// # Errors
    /// As [`put_bytes`](Self::put_bytes).
    pub fn put_u64(&mut self, at: usize, v: u64) -> Result<(), AbiError> {
        self.put_bytes(at, &v.to_le_bytes())
    }

    /// Records `span` as the address the block already holds at `at` (the
    /// caller wrote its bytes: a block encoded whole). A wrong record is
    /// refused by the driver ([`LaunchArgs::consistent`]).
    pub(crate) fn record_addr(&mut self, at: usize, span: DevSpan) {
        debug_assert!(
            self.buf.bytes.get(at..at + 8) == Some(&span.ptr.raw().to_le_bytes()[..]),
            "record_addr: the block does not hold the address"
        );
        self.buf.fields.push(AddrField {
            at,
            addr: span.ptr,
            len: span.len,
        });
    }

    /// Records `fields` as addresses the block already holds (see
    /// [`record_addr`](Self::record_addr)).
    pub(crate) fn record_addrs(&mut self, fields: &[AddrField]) {
        debug_assert!(
            fields.iter().all(
                |f| self.buf.bytes.get(f.at..f.at + 8) == Some(&f.addr.raw().to_le_bytes()[..])
            ),
            "record_addrs: the block does not hold the addresses"
        );
        self.buf.fields.extend_from_slice(fields);
    }

    /// Puts `span`'s address as a `u64` at `at` and records it: the driver
    /// checks the whole span before the kernel can touch it.
    ///
    /// # Errors
    /// As [`put_bytes`](Self::put_bytes).
    pub fn put_addr(&mut self, at: usize, span: DevSpan) -> Result<(), AbiError> {
        self.put_u64(at, span.ptr.raw())?;
        self.buf.fields.push(AddrField {
            at,
            addr: span.ptr,
            len: span.len,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_refuses_what_is_outside_the_block() {
        let mut buf = BlockBuf::with_capacity(16, 1);
        let mut w = buf.writer();
        assert_eq!(
            w.put_u32(0, 1),
            Err(AbiError::OutOfBlock {
                at: 0,
                len: 4,
                block: 0
            })
        );
        assert_eq!(w.grow(12), Ok(0));
        assert!(w.put_u64(8, 1).is_err());
        assert!(w.put_u64(usize::MAX, 1).is_err());
        assert_eq!(w.align_to(8), Ok(16));
        assert_eq!(
            w.grow(1),
            Err(AbiError::BlockFull {
                needed: 17,
                capacity: 16
            })
        );
        assert_eq!(w.grow(usize::MAX).map_err(|_| ()), Err(()));
        assert_eq!(w.align_to(3), Err(AbiError::BadAlign { align: 3 }));
        assert!(buf.args().fields().is_empty());
    }

    #[test]
    fn an_integer_written_over_an_address_makes_the_block_inconsistent() {
        let mut buf = BlockBuf::with_capacity(16, 1);
        let mut w = buf.writer();
        w.grow(16).unwrap();
        w.put_addr(8, DevSpan::new(DevPtr::from_raw(0x40), 8))
            .unwrap();
        assert!(buf.args().consistent().is_ok());
        let mut w = buf.writer(); // a new block forgets the old addresses
        w.grow(16).unwrap();
        assert!(buf.args().fields().is_empty());
        let mut w = buf.writer();
        w.grow(16).unwrap();
        w.put_addr(8, DevSpan::new(DevPtr::from_raw(0x40), 8))
            .unwrap();
        w.put_u64(8, 0x80).unwrap(); // the negative control
        assert_eq!(
            buf.args().consistent(),
            Err(DecodeError::new("AddrField.addr", 8))
        );
    }
}
