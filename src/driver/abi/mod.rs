//! The device-side ABI shared by the host contract and the kernels: the run
//! argument block, the handshake region, the device-wall and status records,
//! and the AICore code format.
//!
//! Everything here is plain data with a fixed little-endian byte layout, so
//! the simulator, the fake ACL library and a real kernel agree on it without
//! `unsafe` transmutes. Sizes are pinned with `static_assertions`.
//!
//! # The handshake
//!
//! A run's handshake region holds a header and one record per AICore worker
//! (`block_dim` of them). All words are `u64`; a word holding the run's *tag*
//! (its [`RunArgs::run_id`], never 0) means "set for this run", so a region
//! zeroed by the host before launch reads as "nothing reported".
//!
//! | offset | word | written by | meaning |
//! |---|---|---|---|
//! | 0 | `core_start` | first AICore worker | device tick when the AICore kernel began |
//! | 64 + 40·w + 0 | `aicore_done` | worker `w` | worker has reported in |
//! | 64 + 40·w + 8 | `task` | AICPU | task dispatched to worker `w` |
//! | 64 + 40·w + 16 | `task_done` | worker `w` | task finished |
//! | 64 + 40·w + 24 | `error` | worker `w` | task error code (0 = ok) |
//! | 64 + 40·w + 32 | `release` | AICPU | worker may exit |
//!
//! Zeroing a region while its run is live erases reports the AICPU kernel
//! has not read yet: the AICPU kernel then waits for reports that never come
//! again, until the device watchdog faults it. With runs queued, the host
//! clearing the region for run N+1 while run N is live would do exactly
//! that, which is why every slot owns its own region.

mod a2a3;
mod adapter;
mod decode;
mod program;
mod records;
mod replay;
mod runclaim;
mod scalar;
mod workload;

use static_assertions::const_assert_eq;

pub(crate) use a2a3::layout as a2a3_layout;
pub use a2a3::{A2a3Abi, A2a3Result, A2a3Timing, A2a3Verdict};
pub(crate) use adapter::Builtin;
pub use adapter::{
    AbiError, AddrField, AicpuBlock, BlockBuf, BlockKind, BlockWriter, DevSpan, Home, KernelAbi,
    KernelAbiRef, LaunchArgs, Prep, RecordAt, RecordError, RegionSpec, RunIdentity, RunView, Shape,
    TensorView, Verdict,
};
pub use decode::DecodeError;
pub(crate) use program::work_operands;
pub use program::{CodeError, Instr, Program};
pub use records::{RunArgs, StatusRecord, WallRecord};
pub use replay::ReplayArgs;
pub use runclaim::RunclaimAbi;
pub use scalar::{scalar_bits, scalar_from_bits};
pub use workload::{ArgBlock, Dir, TensorArg, WorkArgs};

/// Device timestamp counter frequency of the a2a3 generation (50 MHz).
pub const TICKS_PER_SEC: u64 = 50_000_000;

/// Nanoseconds per device tick.
pub const NANOS_PER_TICK: u64 = 1_000_000_000 / TICKS_PER_SEC;

/// Byte size of the handshake header.
pub const HANDSHAKE_HEADER: usize = 64;
/// Byte size of one worker's handshake record.
pub const HANDSHAKE_WORKER: usize = 40;

/// Byte offsets of the words in a worker's handshake record.
pub mod worker_word {
    /// Worker has reported in (`aicore_done`).
    pub const AICORE_DONE: usize = 0;
    /// Task dispatched by the AICPU kernel.
    pub const TASK: usize = 8;
    /// Task finished.
    pub const TASK_DONE: usize = 16;
    /// Task error code.
    pub const ERROR: usize = 24;
    /// Release from the AICPU kernel.
    pub const RELEASE: usize = 32;
}

/// Bytes of handshake region needed for `block_dim` workers (saturating;
/// see [`handshake_bytes_checked`]).
#[must_use]
pub const fn handshake_bytes(block_dim: u32) -> usize {
    worker_offset(block_dim)
}

/// Bytes of handshake region needed for `block_dim` workers, `None` when
/// that does not fit in `usize`.
#[must_use]
pub const fn handshake_bytes_checked(block_dim: u32) -> Option<usize> {
    match HANDSHAKE_WORKER.checked_mul(block_dim as usize) {
        Some(w) => HANDSHAKE_HEADER.checked_add(w),
        None => None,
    }
}

/// Byte offset of worker `w`'s record inside a handshake region
/// (saturating: never panics).
#[must_use]
pub const fn worker_offset(w: u32) -> usize {
    HANDSHAKE_HEADER.saturating_add(HANDSHAKE_WORKER.saturating_mul(w as usize))
}

/// Device ticks in a duration (rounded down, saturating).
#[must_use]
pub fn duration_to_ticks(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos() / u128::from(NANOS_PER_TICK)).unwrap_or(u64::MAX)
}

/// Converts device ticks to nanoseconds (saturating: never panics).
#[must_use]
pub const fn ticks_to_nanos(ticks: u64) -> u64 {
    ticks.saturating_mul(NANOS_PER_TICK)
}

const_assert_eq!(HANDSHAKE_WORKER, 5 * 8);

/// Splits `len` elements among `block_dim` workers: worker `w` gets the
/// half-open element range returned here (earlier workers take the remainder).
/// A worker past the last (`w >= block_dim`, a block dim of 0 counting as 1)
/// gets the empty range at `len`; nothing overflows.
#[must_use]
pub fn worker_share(len: u64, block_dim: u32, w: u32) -> (u64, u64) {
    let n = u64::from(block_dim.max(1));
    let (base, extra) = (len / n, len % n);
    let w = u64::from(w);
    if w >= n {
        return (len, len);
    }
    // w < n: start = w·⌊len/n⌋ + min(w, len mod n) ≤ len, so neither sum
    // overflows.
    let start = w * base + w.min(extra);
    let end = start + base + u64::from(w < extra);
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_past_the_last_gets_an_empty_share_without_overflow() {
        assert_eq!(worker_share(u64::MAX, 1, 2), (u64::MAX, u64::MAX));
        assert_eq!(worker_share(u64::MAX, 2, u32::MAX), (u64::MAX, u64::MAX));
        assert_eq!(worker_share(10, 0, 1), (10, 10));
        assert_eq!(worker_share(u64::MAX, u32::MAX, u32::MAX - 1).1, u64::MAX);
    }

    #[test]
    fn shares_cover_the_range_exactly_once() {
        for len in [0u64, 1, 5, 64, 97] {
            for dim in [1u32, 2, 3, 24] {
                let mut next = 0;
                for w in 0..dim {
                    let (s, e) = worker_share(len, dim, w);
                    assert_eq!(s, next);
                    next = e;
                }
                assert_eq!(next, len);
            }
        }
    }
}
