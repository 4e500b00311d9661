//! The replayable form of a built-in adapter's block ([`ReplayArgs`],
//! runclaim's version 3; [`A2a3Abi`](super::A2a3Abi) uses it too):
//! a captured kernel's block is frozen at capture, so a block that is to be
//! replayed carries no per-run value at all — it names the device span
//! where the host writes the run's ordinary block (version 1 or 2) before
//! each replay, and the device reads that block from there.

use super::RunArgs;
use super::decode::DecodeError;
use super::records::{get_u32, get_u64, put_u32, put_u64};

/// A version-3 block: where the run's ordinary block lies in device memory.
///
/// | offset | field |
/// |---|---|
/// | 0 | magic `"RCA1"` ([`RunArgs::MAGIC`]) |
/// | 4 | version, 3 |
/// | 8 | `block`: device address of the run's version-1 or -2 block |
/// | 16 | `len`: its length in bytes (8 to [`ReplayArgs::MAX_LEN`]) |
///
/// ```
/// use runclaim::driver::abi::ReplayArgs;
///
/// let r = ReplayArgs { block: 0x1000, len: 72 };
/// assert_eq!(ReplayArgs::from_bytes(&r.to_bytes()), Ok(r));
/// assert!(ReplayArgs::from_bytes(&r.to_bytes()[..8]).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayArgs {
    /// Device address of the run's ordinary block.
    pub block: u64,
    /// Its length in bytes.
    pub len: u64,
}

impl ReplayArgs {
    /// The version word.
    pub const VERSION: u32 = 3;
    /// Encoded size in bytes.
    pub const SIZE: usize = 24;
    /// The longest block one names (1 MiB, the largest block a device
    /// accepts from an adapter).
    pub const MAX_LEN: u64 = 1 << 20;

    /// Encodes the block.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put_u32(&mut b, 0, RunArgs::MAGIC);
        put_u32(&mut b, 4, Self::VERSION);
        put_u64(&mut b, 8, self.block);
        put_u64(&mut b, 16, self.len);
        b
    }

    /// Whether `b` claims to be a version-3 block (its magic and version).
    #[must_use]
    pub fn is_replay(b: &[u8]) -> bool {
        b.len() >= 8 && get_u32(b, 0) == RunArgs::MAGIC && get_u32(b, 4) == Self::VERSION
    }

    /// Decodes a block; refused, naming the field, when the size, magic,
    /// version or length is wrong.
    ///
    /// # Errors
    /// [`DecodeError`] naming the first field that is wrong.
    pub fn from_bytes(b: &[u8]) -> Result<Self, DecodeError> {
        if b.len() != Self::SIZE {
            return Err(DecodeError::new("ReplayArgs: block length", b.len()));
        }
        if get_u32(b, 0) != RunArgs::MAGIC {
            return Err(DecodeError::new("ReplayArgs.magic", 0));
        }
        if get_u32(b, 4) != Self::VERSION {
            return Err(DecodeError::new("ReplayArgs.version", 4));
        }
        let r = ReplayArgs {
            block: get_u64(b, 8),
            len: get_u64(b, 16),
        };
        if r.len < 8 || r.len > Self::MAX_LEN {
            return Err(DecodeError::new("ReplayArgs.len", 16));
        }
        Ok(r)
    }
}
