//! The replayable form of a block, as both built-in models read it: a
//! [`ReplayArgs`] names the device span holding the run's ordinary block,
//! written by the host before each replay; the model decodes that block
//! as if it had been launched with it.

use super::{DeviceMemory, ModelError};
use crate::driver::abi::ReplayArgs;

/// The block a launch's bytes give: the bytes themselves, or — for a
/// replayable block — the run's block read from the device span it names,
/// into `buf`.
pub(super) fn replayed<'b>(
    block: &'b [u8],
    m: &DeviceMemory<'_>,
    buf: &'b mut Vec<u8>,
) -> Result<&'b [u8], ModelError> {
    if !ReplayArgs::is_replay(block) {
        return Ok(block);
    }
    let r = ReplayArgs::from_bytes(block).map_err(|e| ModelError::Refused { what: e.field })?;
    m.check(r.block, r.len)?;
    // `len` is at most `ReplayArgs::MAX_LEN` (checked by the decode).
    buf.resize(usize::try_from(r.len).unwrap_or(0), 0);
    m.read(r.block, buf)?;
    if ReplayArgs::is_replay(buf) {
        return Err(ModelError::Refused {
            what: "a replayable block names another replayable block",
        });
    }
    Ok(buf)
}
