//! Why bytes a device, a stale region or an adapter wrote do not decode
//! ([`DecodeError`]): the field that was wrong, and where.

/// Why a block or record does not decode: the first field, in layout
/// order, whose bytes the layout does not allow, and its byte offset in
/// the bytes decoded.
///
/// ```
/// use runclaim::driver::abi::{RunArgs, WorkArgs};
///
/// let mut b = RunArgs { run_id: 1, slot: 0, block_dim: 1, len: 0, input: 0, output: 0,
///                       handshake: 0x300, wall: 0x400, status: 0x500 }.to_bytes();
/// b[0] ^= 1;
/// let e = RunArgs::from_bytes(&b).unwrap_err();
/// assert_eq!((e.field, e.offset), ("RunArgs.magic", 0));
/// assert_eq!(e.to_string(), "RunArgs.magic (byte 0) is not what the layout allows");
/// assert_eq!(WorkArgs::parse(&b[..8]).unwrap_err().field, "WorkArgs: block length");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{field} (byte {offset}) is not what the layout allows")]
#[non_exhaustive]
pub struct DecodeError {
    /// The field, as `Struct.field` (or `Struct: block length` when the
    /// length is wrong).
    pub field: &'static str,
    /// Its byte offset in the bytes decoded (for the length: the length).
    pub offset: usize,
}

impl DecodeError {
    /// `field` at `offset` is wrong.
    #[must_use]
    pub const fn new(field: &'static str, offset: usize) -> Self {
        DecodeError { field, offset }
    }
}
