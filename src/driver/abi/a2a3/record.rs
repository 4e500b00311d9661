//! The a2a3 records as the host reads them back: the result region's
//! header ([`A2a3Result`], with its [`A2a3Verdict`]) and the timing record
//! ([`A2a3Timing`]), encoded and decoded at the offsets of the one layout.

use super::layout::{result, timing};
use crate::driver::abi::records::{get_u32, get_u64, put_u32, put_u64};

/// What the device says of a run in its result region (`DeviceRunVerdict`).
///
/// ```
/// use runclaim::driver::abi::A2a3Verdict;
///
/// assert_eq!(A2a3Verdict::from_code(A2a3Verdict::Error.code()), Some(A2a3Verdict::Error));
/// assert_eq!(A2a3Verdict::from_code(7), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum A2a3Verdict {
    /// No verdict (0): the run has not decided (or never ran).
    None,
    /// The run succeeded (1).
    Ok,
    /// The run failed (2), with its code in `completion_code`.
    Error,
}

impl A2a3Verdict {
    /// The encoded value.
    #[must_use]
    pub const fn code(self) -> u32 {
        match self {
            A2a3Verdict::None => 0,
            A2a3Verdict::Ok => 1,
            A2a3Verdict::Error => 2,
        }
    }

    /// The verdict an encoded value names, if any.
    #[must_use]
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            0 => Some(A2a3Verdict::None),
            1 => Some(A2a3Verdict::Ok),
            2 => Some(A2a3Verdict::Error),
            _ => None,
        }
    }
}

/// The header of the result region (`DeviceRunResultRegion` without its
/// payload), as the device writes it. The fields are the words as written,
/// not validated: [`A2a3Abi`](super::A2a3Abi)'s `decode_status` decides what they mean.
///
/// ```
/// use runclaim::driver::abi::{A2a3Result, A2a3Verdict};
///
/// let r = A2a3Result::error(7, 3);
/// assert_eq!((r.verdict, r.completion_code), (A2a3Verdict::Error.code(), 3));
/// let region = r.to_bytes(); // the whole 280-byte region, payload zero
/// assert_eq!(A2a3Result::from_bytes(&region), Some(r));
/// assert_eq!(A2a3Result::from_bytes(&region[..A2a3Result::HEADER]), Some(r));
/// assert_eq!(A2a3Result::from_bytes(&region[..10]), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct A2a3Result {
    /// The epoch the run published under (0: never published).
    pub published: u64,
    /// Bytes of the payload in use (runclaim's runs write 0).
    pub payload_bytes: u32,
    /// [`A2a3Verdict::code`], or whatever the device wrote.
    pub verdict: u32,
    /// 0 on Ok; the run's error code on Error.
    pub completion_code: i32,
    /// Where the code came from (`DeviceRunCodeSource`): 0 `None`, 1
    /// `Header` (what [`error`](Self::error) writes), 2 `ThreadRc`, 3
    /// `ShutdownRc`.
    pub code_source: u32,
}

impl A2a3Result {
    /// Bytes of the header (what [`A2a3Abi`](super::A2a3Abi) reads back).
    pub const HEADER: usize = result::HEADER;
    /// Bytes of the whole region.
    pub const SIZE: usize = result::SIZE;

    /// What a run of `epoch` that succeeded publishes (code 0, no source).
    ///
    /// ```
    /// use runclaim::driver::abi::{A2a3Result, A2a3Verdict};
    ///
    /// assert_eq!(A2a3Result::ok(4).verdict, A2a3Verdict::Ok.code());
    /// ```
    #[must_use]
    pub const fn ok(epoch: u64) -> Self {
        A2a3Result {
            published: epoch,
            payload_bytes: 0,
            verdict: A2a3Verdict::Ok.code(),
            completion_code: 0,
            code_source: result::CODE_SOURCE_NONE,
        }
    }

    /// What a run of `epoch` that failed with `code` publishes (source 1,
    /// `Header`).
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Result;
    ///
    /// assert_eq!(A2a3Result::error(4, 9).code_source, 1);
    /// ```
    #[must_use]
    pub const fn error(epoch: u64, code: i32) -> Self {
        A2a3Result {
            published: epoch,
            payload_bytes: 0,
            verdict: A2a3Verdict::Error.code(),
            completion_code: code,
            code_source: result::CODE_SOURCE_HEADER,
        }
    }

    /// Encodes the whole region (the payload zero).
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Result;
    ///
    /// let b = A2a3Result::ok(0x0102).to_bytes();
    /// assert_eq!((b.len(), b[0], b[1], b[12]), (280, 2, 1, 1));
    /// ```
    #[must_use]
    pub fn to_bytes(&self) -> [u8; result::SIZE] {
        let mut b = [0u8; result::SIZE];
        put_u64(&mut b, result::PUBLISHED, self.published);
        put_u32(&mut b, result::PAYLOAD_BYTES, self.payload_bytes);
        put_u32(&mut b, result::VERDICT, self.verdict);
        put_u32(
            &mut b,
            result::COMPLETION_CODE,
            self.completion_code.cast_unsigned(),
        );
        put_u32(&mut b, result::CODE_SOURCE, self.code_source);
        b
    }

    /// Decodes the header from the header's [`HEADER`](Self::HEADER) bytes
    /// or the whole region's [`SIZE`](Self::SIZE); `None` for any other
    /// length.
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Result;
    ///
    /// assert_eq!(A2a3Result::from_bytes(&[0; 24]), Some(A2a3Result::default()));
    /// assert_eq!(A2a3Result::from_bytes(&[0; 25]), None);
    /// ```
    #[must_use]
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        matches!(b.len(), result::HEADER | result::SIZE).then(|| A2a3Result {
            published: get_u64(b, result::PUBLISHED),
            payload_bytes: get_u32(b, result::PAYLOAD_BYTES),
            verdict: get_u32(b, result::VERDICT),
            completion_code: get_u32(b, result::COMPLETION_CODE).cast_signed(),
            code_source: get_u32(b, result::CODE_SOURCE),
        })
    }
}

/// The timing record, as the device writes it: cycle counts of the
/// device's counter (`sys_cnt_hz`), not yet converted to runclaim's ticks
/// (`A2a3Abi`'s `decode_timing` converts them into a [`WallRecord`](crate::driver::abi::WallRecord)).
///
/// ```
/// use runclaim::driver::abi::A2a3Timing;
///
/// let t = A2a3Timing { epoch: 3, slot: 1, sys_cnt_hz: 50_000_000, run_wall_end_cycles: 900,
///                      ..A2a3Timing::default() };
/// assert_eq!(A2a3Timing::from_bytes(&t.to_bytes()), Some(t));
/// assert_eq!(A2a3Timing::from_bytes(&[0; 79]), None);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct A2a3Timing {
    /// The epoch of the run that wrote it (written last; 0: never written).
    pub epoch: u64,
    /// Wall time of the run in nanoseconds, as the device measured it.
    pub wall_ns: u64,
    /// When the run began (the earlier kernel start), in cycles.
    pub run_wall_start_cycles: u64,
    /// When the run's results and records were complete, in cycles.
    pub run_wall_end_cycles: u64,
    /// The counter's frequency (cycles per second).
    pub sys_cnt_hz: u64,
    /// The device.
    pub device_id: i32,
    /// The slot the run occupied.
    pub slot: u32,
    /// When the AICore kernel began, in cycles.
    pub aicore_start_cycles: u64,
    /// When the AICPU kernel began, in cycles.
    pub aicpu_start_cycles: u64,
    /// When every worker had reported and tasks were dispatched, in cycles.
    pub dispatch_cycles: u64,
    /// Workers that took part.
    pub block_dim: u32,
}

impl A2a3Timing {
    /// Bytes of the record.
    pub const SIZE: usize = timing::SIZE;

    /// Encodes the record.
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Timing;
    ///
    /// let b = A2a3Timing { block_dim: 2, ..A2a3Timing::default() }.to_bytes();
    /// assert_eq!((b.len(), b[72]), (80, 2));
    /// ```
    #[must_use]
    pub fn to_bytes(&self) -> [u8; timing::SIZE] {
        let mut b = [0u8; timing::SIZE];
        put_u64(&mut b, timing::EPOCH, self.epoch);
        put_u64(&mut b, timing::WALL_NS, self.wall_ns);
        put_u64(
            &mut b,
            timing::RUN_WALL_START_CYCLES,
            self.run_wall_start_cycles,
        );
        put_u64(
            &mut b,
            timing::RUN_WALL_END_CYCLES,
            self.run_wall_end_cycles,
        );
        put_u64(&mut b, timing::SYS_CNT_HZ, self.sys_cnt_hz);
        put_u32(&mut b, timing::DEVICE_ID, self.device_id.cast_unsigned());
        put_u32(&mut b, timing::SLOT, self.slot);
        put_u64(
            &mut b,
            timing::AICORE_START_CYCLES,
            self.aicore_start_cycles,
        );
        put_u64(&mut b, timing::AICPU_START_CYCLES, self.aicpu_start_cycles);
        put_u64(&mut b, timing::DISPATCH_CYCLES, self.dispatch_cycles);
        put_u32(&mut b, timing::BLOCK_DIM, self.block_dim);
        b
    }

    /// Decodes a record; `None` unless `b` is [`SIZE`](Self::SIZE) bytes.
    ///
    /// ```
    /// use runclaim::driver::abi::A2a3Timing;
    ///
    /// assert_eq!(A2a3Timing::from_bytes(&[0; 80]), Some(A2a3Timing::default()));
    /// ```
    #[must_use]
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        (b.len() == timing::SIZE).then(|| A2a3Timing {
            epoch: get_u64(b, timing::EPOCH),
            wall_ns: get_u64(b, timing::WALL_NS),
            run_wall_start_cycles: get_u64(b, timing::RUN_WALL_START_CYCLES),
            run_wall_end_cycles: get_u64(b, timing::RUN_WALL_END_CYCLES),
            sys_cnt_hz: get_u64(b, timing::SYS_CNT_HZ),
            device_id: get_u32(b, timing::DEVICE_ID).cast_signed(),
            slot: get_u32(b, timing::SLOT),
            aicore_start_cycles: get_u64(b, timing::AICORE_START_CYCLES),
            aicpu_start_cycles: get_u64(b, timing::AICPU_START_CYCLES),
            dispatch_cycles: get_u64(b, timing::DISPATCH_CYCLES),
            block_dim: get_u32(b, timing::BLOCK_DIM),
        })
    }
}
