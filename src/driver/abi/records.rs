//! The records a run's kernels share with the host, each with a fixed
//! little-endian byte layout: the argument block [`RunArgs`], the
//! device-wall record [`WallRecord`] and the [`StatusRecord`].

use static_assertions::const_assert_eq;

use super::decode::DecodeError;

pub(super) fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

pub(super) fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

pub(super) fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub(super) fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The argument block both kernels of a run receive (host bytes, copied by
/// the driver at launch like `rtKernelLaunchWithHandleV2` / `rtsLaunchCpuKernel`).
///
/// All pointers are device addresses.
///
/// ```
/// use runclaim::driver::abi::RunArgs;
///
/// let args = RunArgs { run_id: 1, slot: 0, block_dim: 4, len: 8, input: 0x100, output: 0x200,
///                      handshake: 0x300, wall: 0x400, status: 0x500 };
/// let bytes = args.to_bytes(); // what both kernels receive
/// assert_eq!(bytes.len(), RunArgs::SIZE);
/// assert_eq!(RunArgs::from_bytes(&bytes), Ok(args));
/// assert!(RunArgs::from_bytes(&bytes[1..]).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunArgs {
    /// The run's id; also its handshake tag. Never 0.
    pub run_id: u64,
    /// The pipeline slot the run occupies.
    pub slot: u32,
    /// Number of AICore workers.
    pub block_dim: u32,
    /// Number of `u32` elements to compute.
    pub len: u64,
    /// Input elements.
    pub input: u64,
    /// Output elements.
    pub output: u64,
    /// Handshake region ([`handshake_bytes`] long).
    ///
    /// [`handshake_bytes`]: super::handshake_bytes
    pub handshake: u64,
    /// Device-wall record ([`WallRecord::SIZE`] bytes).
    pub wall: u64,
    /// Status record ([`StatusRecord::SIZE`] bytes).
    pub status: u64,
}

impl RunArgs {
    /// Magic at offset 0 of the encoded block (`"RCA1"`).
    pub const MAGIC: u32 = u32::from_le_bytes(*b"RCA1");
    /// Encoded size in bytes.
    pub const SIZE: usize = 72;
    /// [`RunArgs::SIZE`] as the `u32` C launch structs carry.
    pub const SIZE_U32: u32 = 72;

    /// Encodes the block.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        self.encode_into(&mut b);
        b
    }

    /// Encodes the block into `b` (in place: a writer's grown bytes).
    pub(crate) fn encode_into(&self, b: &mut [u8; Self::SIZE]) {
        put_u32(b, 0, Self::MAGIC);
        put_u32(b, 4, 1);
        put_u64(b, 8, self.run_id);
        put_u32(b, 16, self.slot);
        put_u32(b, 20, self.block_dim);
        put_u64(b, 24, self.len);
        put_u64(b, 32, self.input);
        put_u64(b, 40, self.output);
        put_u64(b, 48, self.handshake);
        put_u64(b, 56, self.wall);
        put_u64(b, 64, self.status);
    }

    /// Decodes a block; refused, naming the field, when the size, magic or
    /// version is wrong or the run id is 0.
    ///
    /// # Errors
    /// [`DecodeError`] naming the first field that is wrong.
    pub fn from_bytes(b: &[u8]) -> Result<Self, DecodeError> {
        let args = Self::decode_header(b)?;
        match get_u32(b, 4) {
            1 => Ok(args),
            _ => Err(DecodeError::new("RunArgs.version", 4)),
        }
    }

    /// Decodes the fixed header of a block of either version (`b` is
    /// exactly [`RunArgs::SIZE`] bytes); the caller checks the version.
    pub(super) fn decode_header(b: &[u8]) -> Result<Self, DecodeError> {
        if b.len() != Self::SIZE {
            return Err(DecodeError::new("RunArgs: block length", b.len()));
        }
        if get_u32(b, 0) != Self::MAGIC {
            return Err(DecodeError::new("RunArgs.magic", 0));
        }
        let args = RunArgs {
            run_id: get_u64(b, 8),
            slot: get_u32(b, 16),
            block_dim: get_u32(b, 20),
            len: get_u64(b, 24),
            input: get_u64(b, 32),
            output: get_u64(b, 40),
            handshake: get_u64(b, 48),
            wall: get_u64(b, 56),
            status: get_u64(b, 64),
        };
        match args.run_id {
            0 => Err(DecodeError::new("RunArgs.run_id", 8)),
            _ => Ok(args),
        }
    }
}

/// The device-wall record the AICPU kernel writes at the end of a run:
/// which run it was and when its phases happened, in device ticks
/// ([`TICKS_PER_SEC`]).
///
/// ```
/// use runclaim::driver::abi::{WallRecord, ticks_to_nanos};
///
/// let w = WallRecord { run_id: 7, aicore_start: 100, aicpu_start: 102, dispatched: 110, end: 600, ..Default::default() };
/// assert_eq!(w.start(), 100);
/// assert_eq!(ticks_to_nanos(w.duration_ticks()), 10_000); // 500 ticks at 50 MHz
/// assert_eq!(WallRecord::from_bytes(&w.to_bytes()), Some(w));
/// ```
///
/// [`TICKS_PER_SEC`]: super::TICKS_PER_SEC
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WallRecord {
    /// The run that wrote it (0 = never written).
    pub run_id: u64,
    /// The slot the run occupied.
    pub slot: u32,
    /// Workers that took part.
    pub block_dim: u32,
    /// When the AICore kernel began.
    pub aicore_start: u64,
    /// When the AICPU kernel began.
    pub aicpu_start: u64,
    /// When every worker had reported and tasks were dispatched.
    pub dispatched: u64,
    /// When the run's results and records were complete.
    pub end: u64,
}

impl WallRecord {
    /// Encoded size in bytes.
    pub const SIZE: usize = 48;

    /// Device tick at which the run started (the earlier kernel start).
    #[must_use]
    pub fn start(&self) -> u64 {
        self.aicore_start.min(self.aicpu_start)
    }

    /// Device ticks from start to end.
    #[must_use]
    pub fn duration_ticks(&self) -> u64 {
        self.end.saturating_sub(self.start())
    }

    /// Encodes the record.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put_u64(&mut b, 0, self.run_id);
        put_u32(&mut b, 8, self.slot);
        put_u32(&mut b, 12, self.block_dim);
        put_u64(&mut b, 16, self.aicore_start);
        put_u64(&mut b, 24, self.aicpu_start);
        put_u64(&mut b, 32, self.dispatched);
        put_u64(&mut b, 40, self.end);
        b
    }

    /// Decodes a record; `None` when `b` is not [`Self::SIZE`] bytes.
    #[must_use]
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        (b.len() == Self::SIZE).then(|| WallRecord {
            run_id: get_u64(b, 0),
            slot: get_u32(b, 8),
            block_dim: get_u32(b, 12),
            aicore_start: get_u64(b, 16),
            aicpu_start: get_u64(b, 24),
            dispatched: get_u64(b, 32),
            end: get_u64(b, 40),
        })
    }
}

/// The status record: armed by the host at prepare, completed by the AICPU
/// kernel at the end of the run.
///
/// ```
/// use runclaim::driver::abi::StatusRecord;
///
/// let armed = StatusRecord { run_id: 3, state: StatusRecord::ARMED, code: 0 };
/// assert_eq!(StatusRecord::from_bytes(&armed.to_bytes()), Some(armed));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StatusRecord {
    /// The run the record belongs to.
    pub run_id: u64,
    /// [`StatusRecord::ARMED`] or [`StatusRecord::DONE`].
    pub state: u32,
    /// The run's result: 0 = success, otherwise the first task error code.
    pub code: u32,
}

impl StatusRecord {
    /// Encoded size in bytes.
    pub const SIZE: usize = 16;
    /// Armed by the host; the run has not finished.
    pub const ARMED: u32 = 0x4152_4d44; // "ARMD"
    /// Written by the AICPU kernel at the end of the run.
    pub const DONE: u32 = 0x444f_4e45; // "DONE"

    /// Encodes the record.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put_u64(&mut b, 0, self.run_id);
        put_u32(&mut b, 8, self.state);
        put_u32(&mut b, 12, self.code);
        b
    }

    /// Decodes a record; `None` when `b` is not [`Self::SIZE`] bytes.
    #[must_use]
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        (b.len() == Self::SIZE).then(|| StatusRecord {
            run_id: get_u64(b, 0),
            state: get_u32(b, 8),
            code: get_u32(b, 12),
        })
    }
}

const_assert_eq!(RunArgs::SIZE, 4 + 4 + 8 + 4 + 4 + 8 * 6);
const_assert_eq!(RunArgs::SIZE, RunArgs::SIZE_U32 as usize);
const_assert_eq!(WallRecord::SIZE, 8 + 4 + 4 + 8 * 4);
const_assert_eq!(StatusRecord::SIZE, 8 + 4 + 4);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_round_trip_and_reject_bad_blocks() {
        let a = RunArgs {
            run_id: 7,
            slot: 1,
            block_dim: 4,
            len: 100,
            input: 0x10,
            output: 0x20,
            handshake: 0x30,
            wall: 0x40,
            status: 0x50,
        };
        let b = a.to_bytes();
        assert_eq!(RunArgs::from_bytes(&b), Ok(a));
        let field = |b: &[u8]| RunArgs::from_bytes(b).map_err(|e| e.field);
        assert_eq!(field(&b[..71]), Err("RunArgs: block length"));
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(field(&bad), Err("RunArgs.magic"));
        let mut bad = b;
        bad[4] = 2;
        assert_eq!(field(&bad), Err("RunArgs.version"));
        let zero = RunArgs { run_id: 0, ..a }.to_bytes();
        assert_eq!(field(&zero), Err("RunArgs.run_id"));
    }

    #[test]
    fn records_round_trip() {
        let w = WallRecord {
            run_id: 3,
            slot: 1,
            block_dim: 2,
            aicore_start: 10,
            aicpu_start: 12,
            dispatched: 15,
            end: 30,
        };
        assert_eq!(WallRecord::from_bytes(&w.to_bytes()), Some(w));
        assert_eq!(w.start(), 10);
        assert_eq!(w.duration_ticks(), 20);
        let s = StatusRecord {
            run_id: 3,
            state: StatusRecord::DONE,
            code: 9,
        };
        assert_eq!(StatusRecord::from_bytes(&s.to_bytes()), Some(s));
    }
}
