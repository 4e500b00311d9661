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
//! again, until the device watchdog faults it. That is hazard 2 of the design
//! brief, and why every slot owns its own region.

use static_assertions::const_assert_eq;

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

fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
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
/// assert_eq!(RunArgs::from_bytes(&bytes), Some(args));
/// assert_eq!(RunArgs::from_bytes(&bytes[1..]), None);
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
        put_u32(&mut b, 0, Self::MAGIC);
        put_u32(&mut b, 4, 1);
        put_u64(&mut b, 8, self.run_id);
        put_u32(&mut b, 16, self.slot);
        put_u32(&mut b, 20, self.block_dim);
        put_u64(&mut b, 24, self.len);
        put_u64(&mut b, 32, self.input);
        put_u64(&mut b, 40, self.output);
        put_u64(&mut b, 48, self.handshake);
        put_u64(&mut b, 56, self.wall);
        put_u64(&mut b, 64, self.status);
        b
    }

    /// Decodes a block; `None` when the size, magic or version is wrong or
    /// the run id is 0.
    #[must_use]
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != Self::SIZE || get_u32(b, 0) != Self::MAGIC || get_u32(b, 4) != 1 {
            return None;
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
        (args.run_id != 0).then_some(args)
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
const_assert_eq!(HANDSHAKE_WORKER, 5 * 8);

/// One instruction of an AICore program; each worker applies the program to
/// every element of its share, in order, with wrapping `u32` arithmetic.
///
/// ```
/// use runclaim::driver::abi::{Instr, Program};
///
/// assert_eq!(Program::new().add(1).fail(9).instrs(), &[Instr::Add(1), Instr::Fail(9)]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Instr {
    /// `x + k`
    Add(u32),
    /// `x * k`
    Mul(u32),
    /// `x ^ k`
    Xor(u32),
    /// Stop: the task fails with error code `k` (non-zero). Elements keep the
    /// value computed so far.
    Fail(u32),
}

/// Why a code image is not a valid [`Program`].
///
/// ```
/// use runclaim::driver::abi::{CodeError, Program};
///
/// assert_eq!(Program::decode(b"ELF?"), Err(CodeError::BadMagic));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeError {
    /// The image does not start with [`Program::MAGIC`].
    #[error("missing RCK1 magic")]
    BadMagic,
    /// The image length is not the header plus whole instructions.
    #[error("truncated instruction")]
    Truncated,
    /// An opcode byte is not one of the known instructions.
    #[error("unknown opcode")]
    UnknownOpcode,
    /// `Fail(0)` would report success.
    #[error("Fail(0) is not an error")]
    ZeroFailCode,
}

impl CodeError {
    /// A static description, for error kinds that carry `&'static str`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            CodeError::BadMagic => "missing RCK1 magic",
            CodeError::Truncated => "truncated instruction",
            CodeError::UnknownOpcode => "unknown opcode",
            CodeError::ZeroFailCode => "Fail(0) is not an error",
        }
    }
}

/// An AICore program: the "code" a callable carries. Encoded as the magic
/// `"RCK1"` followed by 5-byte instructions (opcode, little-endian `u32`).
///
/// ```
/// use runclaim::driver::abi::Program;
///
/// let p = Program::new().add(3).mul(2);
/// assert_eq!(p.apply(4), Ok(14));
/// assert_eq!(Program::decode(&p.encode()), Ok(p));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Program {
    instrs: Vec<Instr>,
}

impl Program {
    /// First four bytes of every encoded program.
    pub const MAGIC: [u8; 4] = *b"RCK1";

    /// The empty program (identity).
    #[must_use]
    pub fn new() -> Self {
        Program::default()
    }

    /// Appends `x + k`.
    #[must_use]
    #[allow(
        clippy::should_implement_trait,
        reason = "a builder step named after the instruction, not `Program + u32`"
    )]
    pub fn add(mut self, k: u32) -> Self {
        self.instrs.push(Instr::Add(k));
        self
    }

    /// Appends `x * k`.
    #[must_use]
    #[allow(
        clippy::should_implement_trait,
        reason = "a builder step named after the instruction, not `Program * u32`"
    )]
    pub fn mul(mut self, k: u32) -> Self {
        self.instrs.push(Instr::Mul(k));
        self
    }

    /// Appends `x ^ k`.
    #[must_use]
    pub fn xor(mut self, k: u32) -> Self {
        self.instrs.push(Instr::Xor(k));
        self
    }

    /// Appends a task failure with `code` (which must be non-zero to encode
    /// a decodable program).
    #[must_use]
    pub fn fail(mut self, code: u32) -> Self {
        self.instrs.push(Instr::Fail(code));
        self
    }

    /// The instructions.
    #[must_use]
    pub fn instrs(&self) -> &[Instr] {
        &self.instrs
    }

    /// Encodes the program as a code image.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 5 * self.instrs.len());
        out.extend_from_slice(&Self::MAGIC);
        for i in &self.instrs {
            let (op, k) = match *i {
                Instr::Add(k) => (1u8, k),
                Instr::Mul(k) => (2, k),
                Instr::Xor(k) => (3, k),
                Instr::Fail(k) => (0x0f, k),
            };
            out.push(op);
            out.extend_from_slice(&k.to_le_bytes());
        }
        out
    }

    /// Decodes a code image.
    ///
    /// # Errors
    /// [`CodeError`] when the image is not a well-formed program.
    pub fn decode(code: &[u8]) -> Result<Self, CodeError> {
        let body = code.strip_prefix(&Self::MAGIC).ok_or(CodeError::BadMagic)?;
        if body.len() % 5 != 0 {
            return Err(CodeError::Truncated);
        }
        let instrs = body
            .chunks_exact(5)
            .map(|c| {
                let k = u32::from_le_bytes([c[1], c[2], c[3], c[4]]);
                match c[0] {
                    1 => Ok(Instr::Add(k)),
                    2 => Ok(Instr::Mul(k)),
                    3 => Ok(Instr::Xor(k)),
                    0x0f if k == 0 => Err(CodeError::ZeroFailCode),
                    0x0f => Ok(Instr::Fail(k)),
                    _ => Err(CodeError::UnknownOpcode),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Program { instrs })
    }

    /// Applies the program to one element.
    ///
    /// # Errors
    /// `Err((value_so_far, code))` when the program reaches `Fail(code)`.
    pub fn apply(&self, mut x: u32) -> Result<u32, (u32, u32)> {
        for i in &self.instrs {
            x = match *i {
                Instr::Add(k) => x.wrapping_add(k),
                Instr::Mul(k) => x.wrapping_mul(k),
                Instr::Xor(k) => x ^ k,
                Instr::Fail(code) => return Err((x, code)),
            };
        }
        Ok(x)
    }

    /// Applies the program to one element, returning the value the device
    /// writes whether or not the task fails.
    #[must_use]
    pub fn apply_lossy(&self, x: u32) -> u32 {
        match self.apply(x) {
            Ok(v) | Err((v, _)) => v,
        }
    }

    /// The error code the task reports (0 when the program never fails).
    #[must_use]
    pub fn fail_code(&self) -> u32 {
        self.instrs
            .iter()
            .find_map(|i| match *i {
                Instr::Fail(c) => Some(c),
                _ => None,
            })
            .unwrap_or(0)
    }
}

/// Splits `len` elements among `block_dim` workers: worker `w` gets the
/// half-open element range returned here (earlier workers take the remainder).
#[must_use]
pub fn worker_share(len: u64, block_dim: u32, w: u32) -> (u64, u64) {
    let n = u64::from(block_dim.max(1));
    let (base, extra) = (len / n, len % n);
    let w = u64::from(w);
    let start = w * base + w.min(extra);
    let end = start + base + u64::from(w < extra);
    (start, end)
}

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
        assert_eq!(RunArgs::from_bytes(&b), Some(a));
        assert_eq!(RunArgs::from_bytes(&b[..71]), None);
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(RunArgs::from_bytes(&bad), None);
        let zero = RunArgs { run_id: 0, ..a }.to_bytes();
        assert_eq!(RunArgs::from_bytes(&zero), None);
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

    #[test]
    fn program_decode_rejects_malformed_images() {
        assert_eq!(Program::decode(b"ELF\x7f"), Err(CodeError::BadMagic));
        assert_eq!(Program::decode(b"RCK1\x01\x00"), Err(CodeError::Truncated));
        assert_eq!(
            Program::decode(b"RCK1\x09\x00\x00\x00\x00"),
            Err(CodeError::UnknownOpcode)
        );
        assert_eq!(
            Program::decode(&Program::new().fail(0).encode()),
            Err(CodeError::ZeroFailCode)
        );
    }

    #[test]
    fn program_semantics() {
        let p = Program::new().add(1).xor(0xff).mul(3);
        assert_eq!(p.apply(1), Ok((2 ^ 0xff) * 3));
        let f = Program::new().add(5).fail(42).add(100);
        assert_eq!(f.apply(1), Err((6, 42)));
        assert_eq!(f.apply_lossy(1), 6);
        assert_eq!(f.fail_code(), 42);
        assert_eq!(Program::new().mul(u32::MAX).apply(2), Ok(u32::MAX - 1));
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
