//! The workload argument block: [`RunArgs`] version 2, a run's tensors
//! and scalars after the fixed header, and [`ArgBlock`], which tells the two
//! versions apart.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 72 | the [`RunArgs`] header, version [`WorkArgs::VERSION`]; `len`, `input`, `output` are 0 |
//! | 72 | 4 | tensor count `t` (at most [`WorkArgs::MAX_TENSORS`]) |
//! | 76 | 4 | scalar count `s` (at most [`WorkArgs::MAX_SCALARS`]) |
//! | 80 | 32·`t` | the [`TensorArg`]s, in argument order |
//! | 80 + 32·`t` | 8·`s` | the `u64` scalars, in argument order |
//!
//! A block is exactly [`WorkArgs::size`]`(t, s)` bytes long, so every byte
//! of it is named by a field: a kernel that reads a tensor or scalar index
//! beyond the counts reads nothing.

use static_assertions::const_assert_eq;

use super::decode::DecodeError;
use super::records::{RunArgs, get_u32, get_u64, put_u32, put_u64};

/// What a kernel does with a tensor.
///
/// ```
/// use runclaim::driver::abi::Dir;
///
/// assert!(Dir::In.reads() && !Dir::In.writes());
/// assert!(Dir::InOut.reads() && Dir::InOut.writes());
/// assert_eq!(Dir::from_code(Dir::Out.code()), Some(Dir::Out));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Read by the kernel: a host tensor is copied in at prepare.
    In,
    /// Written by the kernel: a host tensor's staging is cleared at
    /// prepare and copied back at finalize, so bytes the kernel leaves
    /// unwritten come back zero (never a previous run's).
    Out,
    /// Read and written: copied in at prepare and back at finalize.
    InOut,
}

impl Dir {
    /// `true` for [`Dir::In`] and [`Dir::InOut`].
    #[must_use]
    pub const fn reads(self) -> bool {
        matches!(self, Dir::In | Dir::InOut)
    }

    /// `true` for [`Dir::Out`] and [`Dir::InOut`].
    #[must_use]
    pub const fn writes(self) -> bool {
        matches!(self, Dir::Out | Dir::InOut)
    }

    /// The encoded value (1, 2, 3).
    #[must_use]
    pub const fn code(self) -> u32 {
        match self {
            Dir::In => 1,
            Dir::Out => 2,
            Dir::InOut => 3,
        }
    }

    /// The direction an encoded value names, if any.
    #[must_use]
    pub const fn from_code(code: u32) -> Option<Dir> {
        match code {
            1 => Some(Dir::In),
            2 => Some(Dir::Out),
            3 => Some(Dir::InOut),
            _ => None,
        }
    }
}

/// One tensor argument as a kernel receives it: where its bytes are on the
/// device, how many, their element size and direction, and whether the
/// host staged them (a host tensor) or the caller owns them (a device
/// buffer, passed by address).
///
/// ```
/// use runclaim::driver::abi::{Dir, TensorArg};
///
/// let t = TensorArg { addr: 0x1000, bytes: 16, elem_size: 4, dir: Dir::In, staged: true };
/// assert_eq!(TensorArg::from_bytes(&t.to_bytes()), Ok(t));
/// assert_eq!(t.elements(), 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TensorArg {
    /// Device address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub bytes: u64,
    /// Bytes per element (`size_of::<T>()` of the host element type).
    pub elem_size: u32,
    /// What the kernel does with it.
    pub dir: Dir,
    /// `true`: a host tensor staged in the slot's staging region;
    /// `false`: a device buffer (or a range of one).
    pub staged: bool,
}

impl TensorArg {
    /// Encoded size in bytes.
    pub const SIZE: usize = 32;

    /// Whole elements in the tensor (0 when `elem_size` is 0).
    #[must_use]
    pub const fn elements(&self) -> u64 {
        match self.elem_size {
            0 => 0,
            e => self.bytes / e as u64,
        }
    }

    /// Encodes the descriptor.
    #[must_use]
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        self.write(&mut b);
        b
    }

    fn write(&self, b: &mut [u8]) {
        put_u64(b, 0, self.addr);
        put_u64(b, 8, self.bytes);
        put_u32(b, 16, self.elem_size);
        put_u32(b, 20, self.dir.code());
        put_u32(b, 24, u32::from(self.staged));
        put_u32(b, 28, 0);
    }

    /// Decodes a descriptor; refused, naming the field, when the size,
    /// direction, staged flag or the reserved word is wrong.
    ///
    /// # Errors
    /// [`DecodeError`] naming the first field that is wrong (offsets in
    /// the descriptor).
    pub fn from_bytes(b: &[u8]) -> Result<Self, DecodeError> {
        Self::decode(b).ok_or_else(|| Self::refusal(b))
    }

    /// The descriptor, `None` when it does not decode (the per-run path:
    /// which field was wrong is [`refusal`](Self::refusal)'s, off it).
    fn decode(b: &[u8]) -> Option<Self> {
        if b.len() != Self::SIZE || get_u32(b, 28) != 0 {
            return None;
        }
        let staged = match get_u32(b, 24) {
            0 => false,
            1 => true,
            _ => return None,
        };
        Some(TensorArg {
            addr: get_u64(b, 0),
            bytes: get_u64(b, 8),
            elem_size: get_u32(b, 16),
            dir: Dir::from_code(get_u32(b, 20))?,
            staged,
        })
    }

    /// The first field of `b` that is wrong (`b` does not decode).
    #[cold]
    fn refusal(b: &[u8]) -> DecodeError {
        if b.len() != Self::SIZE {
            DecodeError::new("TensorArg: descriptor length", b.len())
        } else if Dir::from_code(get_u32(b, 20)).is_none() {
            DecodeError::new("TensorArg.dir", 20)
        } else if get_u32(b, 24) > 1 {
            DecodeError::new("TensorArg.staged", 24)
        } else {
            DecodeError::new("TensorArg.reserved", 28)
        }
    }
}

/// A decoded workload block (version 2): the [`RunArgs`] header, then the
/// run's tensors and scalars, read in place from the block's bytes.
///
/// ```
/// use runclaim::driver::abi::{Dir, RunArgs, TensorArg, WorkArgs};
///
/// let header = RunArgs { run_id: 7, slot: 1, block_dim: 2, len: 0, input: 0, output: 0,
///                        handshake: 0x300, wall: 0x400, status: 0x500 };
/// let x = TensorArg { addr: 0x1000, bytes: 8, elem_size: 4, dir: Dir::In, staged: true };
/// let mut block = vec![0; WorkArgs::size(1, 2)];
/// let n = WorkArgs::encode(&mut block, &header, [x].into_iter(), &[3, 4]).unwrap();
/// assert_eq!(n, block.len());
/// let args = WorkArgs::parse(&block).unwrap();
/// assert_eq!((args.header().run_id, args.tensor(0), args.scalar(1)), (7, Some(x), Some(4)));
/// assert_eq!(args.scalar(2), None); // beyond the count: nothing
/// assert!(WorkArgs::parse(&block[..block.len() - 1]).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkArgs<'b> {
    header: RunArgs,
    tensors: u32,
    scalars: u32,
    bytes: &'b [u8],
}

impl<'b> WorkArgs<'b> {
    /// The header version of a workload block.
    pub const VERSION: u32 = 2;
    /// Bytes before the first tensor descriptor.
    pub const HEADER: usize = RunArgs::SIZE + 8;
    /// The most tensors a run may bind: the reference runtime's limit.
    pub const MAX_TENSORS: usize = 256;
    /// The most `u64` scalars a run may pass: the reference runtime's limit.
    pub const MAX_SCALARS: usize = 128;
    /// The largest block: [`MAX_TENSORS`](Self::MAX_TENSORS) tensors and
    /// [`MAX_SCALARS`](Self::MAX_SCALARS) scalars.
    pub const MAX_SIZE: usize = Self::size(Self::MAX_TENSORS, Self::MAX_SCALARS);

    /// Bytes of a block with `tensors` tensors and `scalars` scalars
    /// (saturating: never panics).
    #[must_use]
    pub const fn size(tensors: usize, scalars: usize) -> usize {
        Self::HEADER
            .saturating_add(TensorArg::SIZE.saturating_mul(tensors))
            .saturating_add(8usize.saturating_mul(scalars))
    }

    /// Encodes a block into the front of `buf`; returns its length, or
    /// `None` when `buf` is too short or a count is above its maximum
    /// (then nothing is written). The header's version is set to
    /// [`WorkArgs::VERSION`].
    pub fn encode(
        buf: &mut [u8],
        header: &RunArgs,
        tensors: impl ExactSizeIterator<Item = TensorArg>,
        scalars: &[u64],
    ) -> Option<usize> {
        let t = tensors.len();
        Self::encode_parts(
            buf,
            header,
            t,
            tensors,
            scalars.len(),
            scalars.iter().copied(),
        )
    }

    /// [`encode`](Self::encode) with the counts given: `tensors` and
    /// `scalars` must yield exactly `t` and `s` items, else `None` (and the
    /// block is not valid).
    pub(crate) fn encode_parts(
        buf: &mut [u8],
        header: &RunArgs,
        t: usize,
        tensors: impl Iterator<Item = TensorArg>,
        s: usize,
        scalars: impl Iterator<Item = u64>,
    ) -> Option<usize> {
        let size = Self::size(t, s);
        if t > Self::MAX_TENSORS || s > Self::MAX_SCALARS || buf.len() < size {
            return None;
        }
        let block = &mut buf[..size];
        block[..RunArgs::SIZE].copy_from_slice(&header.to_bytes());
        put_u32(block, 4, Self::VERSION);
        #[allow(clippy::cast_possible_truncation, reason = "both counts checked above")]
        {
            put_u32(block, RunArgs::SIZE, t as u32);
            put_u32(block, RunArgs::SIZE + 4, s as u32);
        }
        let mut at = Self::HEADER;
        let mut n = 0;
        for tensor in tensors.take(t) {
            tensor.write(&mut block[at..at + TensorArg::SIZE]);
            at += TensorArg::SIZE;
            n += 1;
        }
        let mut m = 0;
        for v in scalars.take(s) {
            put_u64(block, at, v);
            at += 8;
            m += 1;
        }
        (n == t && m == s).then_some(size)
    }

    /// Decodes a block; refused, naming the field, when it is not exactly
    /// a version-2 block of the size its counts give, a count is above its
    /// maximum, the run id is 0, or a tensor descriptor does not decode.
    ///
    /// # Errors
    /// [`DecodeError`] naming the first field that is wrong (offsets in
    /// the block; a descriptor's field at the descriptor's offset plus its
    /// own).
    pub fn parse(b: &'b [u8]) -> Result<Self, DecodeError> {
        if b.len() < Self::HEADER {
            return Err(DecodeError::new("WorkArgs: block length", b.len()));
        }
        if get_u32(b, 0) != RunArgs::MAGIC {
            return Err(DecodeError::new("RunArgs.magic", 0));
        }
        if get_u32(b, 4) != Self::VERSION {
            return Err(DecodeError::new("RunArgs.version", 4));
        }
        let tensors = get_u32(b, RunArgs::SIZE);
        let scalars = get_u32(b, RunArgs::SIZE + 4);
        let (t, s) = (tensors as usize, scalars as usize);
        if t > Self::MAX_TENSORS {
            return Err(DecodeError::new("WorkArgs.tensor_count", RunArgs::SIZE));
        }
        if s > Self::MAX_SCALARS {
            return Err(DecodeError::new("WorkArgs.scalar_count", RunArgs::SIZE + 4));
        }
        if b.len() != Self::size(t, s) {
            return Err(DecodeError::new("WorkArgs: block length", b.len()));
        }
        let header = RunArgs::decode_header(&b[..RunArgs::SIZE])?;
        let args = WorkArgs {
            header,
            tensors,
            scalars,
            bytes: b,
        };
        for i in 0..t {
            let descriptor = args.tensor_bytes(i);
            if TensorArg::decode(descriptor).is_none() {
                let e = TensorArg::refusal(descriptor);
                let at = Self::HEADER + i * TensorArg::SIZE + e.offset;
                return Err(DecodeError::new(e.field, at));
            }
        }
        Ok(args)
    }

    fn tensor_bytes(&self, i: usize) -> &'b [u8] {
        let at = Self::HEADER + i * TensorArg::SIZE;
        &self.bytes[at..at + TensorArg::SIZE]
    }

    /// The fixed header (its `len`, `input` and `output` are 0).
    #[must_use]
    pub fn header(&self) -> &RunArgs {
        &self.header
    }

    /// The encoded block.
    #[must_use]
    pub fn bytes(&self) -> &'b [u8] {
        self.bytes
    }

    /// Number of tensors.
    #[must_use]
    pub fn tensor_count(&self) -> usize {
        self.tensors as usize
    }

    /// Number of scalars.
    #[must_use]
    pub fn scalar_count(&self) -> usize {
        self.scalars as usize
    }

    /// Tensor `i`, `None` beyond the count.
    #[must_use]
    pub fn tensor(&self, i: usize) -> Option<TensorArg> {
        (i < self.tensor_count())
            .then(|| TensorArg::decode(self.tensor_bytes(i)))
            .flatten()
    }

    /// The tensors, in argument order.
    #[must_use]
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = TensorArg> + '_ {
        (0..self.tensor_count()).map(|i| {
            // Every descriptor decoded in `parse`.
            TensorArg::decode(self.tensor_bytes(i)).unwrap_or(TensorArg {
                addr: 0,
                bytes: 0,
                elem_size: 0,
                dir: Dir::In,
                staged: false,
            })
        })
    }

    /// Scalar `i`, `None` beyond the count.
    #[must_use]
    pub fn scalar(&self, i: usize) -> Option<u64> {
        (i < self.scalar_count()).then(|| {
            get_u64(
                self.bytes,
                Self::HEADER + self.tensor_count() * TensorArg::SIZE + i * 8,
            )
        })
    }

    /// Scalar `i` decoded as `T` ([`scalar_from_bits`](super::scalar_from_bits)),
    /// `None` beyond the count.
    #[must_use]
    pub fn scalar_as<T: bytemuck::Pod>(&self, i: usize) -> Option<T> {
        self.scalar(i).map(super::scalar_from_bits)
    }

    /// The scalars, in argument order.
    #[must_use]
    pub fn scalars(&self) -> impl ExactSizeIterator<Item = u64> + '_ {
        let base = Self::HEADER + self.tensor_count() * TensorArg::SIZE;
        (0..self.scalar_count()).map(move |i| get_u64(self.bytes, base + i * 8))
    }
}

/// An argument block of either version, as a driver receives it.
///
/// ```
/// use runclaim::driver::abi::{ArgBlock, RunArgs};
///
/// let args = RunArgs { run_id: 1, slot: 0, block_dim: 1, len: 2, input: 0x100, output: 0x200,
///                      handshake: 0x300, wall: 0x400, status: 0x500 };
/// let bytes = args.to_bytes();
/// assert!(matches!(ArgBlock::parse(&bytes), Ok(ArgBlock::Run(a)) if a == args));
/// assert!(ArgBlock::parse(&bytes[..71]).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgBlock<'b> {
    /// Version 1: one `u32` input and output ([`RunArgs`]).
    Run(RunArgs),
    /// Version 2: tensors and scalars ([`WorkArgs`]).
    Work(WorkArgs<'b>),
}

impl<'b> ArgBlock<'b> {
    /// Decodes a block of either version (told apart by its version
    /// word).
    ///
    /// # Errors
    /// [`DecodeError`] naming the first field that is wrong.
    pub fn parse(b: &'b [u8]) -> Result<Self, DecodeError> {
        if b.len() >= 8 && get_u32(b, 4) == WorkArgs::VERSION {
            WorkArgs::parse(b).map(ArgBlock::Work)
        } else {
            RunArgs::from_bytes(b).map(ArgBlock::Run)
        }
    }

    /// The fixed header both versions start with.
    #[must_use]
    pub fn header(&self) -> &RunArgs {
        match self {
            ArgBlock::Run(a) => a,
            ArgBlock::Work(w) => w.header(),
        }
    }
}

const_assert_eq!(WorkArgs::HEADER, 80);
const_assert_eq!(WorkArgs::MAX_SIZE, 9296);

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> RunArgs {
        RunArgs {
            run_id: 9,
            slot: 0,
            block_dim: 1,
            len: 0,
            input: 0,
            output: 0,
            handshake: 0x300,
            wall: 0x400,
            status: 0x500,
        }
    }

    fn tensor(i: u64) -> TensorArg {
        TensorArg {
            addr: 0x1000 + i * 0x100,
            bytes: i,
            elem_size: 2,
            dir: Dir::InOut,
            staged: i.is_multiple_of(2),
        }
    }

    #[test]
    fn the_largest_block_round_trips_and_one_more_is_refused() {
        let mut buf = vec![0u8; WorkArgs::MAX_SIZE + 64];
        let scalars: Vec<u64> = (0..128).collect();
        let n = WorkArgs::encode(
            &mut buf,
            &header(),
            (0..256u32).map(|i| tensor(u64::from(i))),
            &scalars,
        )
        .unwrap();
        assert_eq!(n, WorkArgs::MAX_SIZE);
        let w = WorkArgs::parse(&buf[..n]).unwrap();
        assert!(w.tensors().eq((0..256u32).map(|i| tensor(u64::from(i)))));
        assert!(w.scalars().eq(0..128));
        assert_eq!(w.header().run_id, 9);
        assert!(
            WorkArgs::encode(
                &mut buf,
                &header(),
                (0..257u32).map(|i| tensor(u64::from(i))),
                &[]
            )
            .is_none()
        );
        let many: Vec<u64> = (0..129).collect();
        assert!(
            WorkArgs::encode(
                &mut buf,
                &header(),
                (0..1u32).map(|i| tensor(u64::from(i))),
                &many
            )
            .is_none()
        );
        // Too short a buffer: refused, nothing written.
        let mut short = vec![0u8; WorkArgs::size(2, 0) - 1];
        assert!(
            WorkArgs::encode(
                &mut short,
                &header(),
                (0..2u32).map(|i| tensor(u64::from(i))),
                &[]
            )
            .is_none()
        );
        assert!(short.iter().all(|&b| b == 0));
    }

    #[test]
    fn malformed_blocks_are_refused() {
        let mut buf = vec![0u8; WorkArgs::size(1, 1)];
        WorkArgs::encode(&mut buf, &header(), [tensor(1)].into_iter(), &[5]).unwrap();
        assert!(WorkArgs::parse(&buf).is_ok());
        let field = |b: &[u8]| {
            WorkArgs::parse(b)
                .map(|_| ())
                .map_err(|e| (e.field, e.offset))
        };
        // A count that disagrees with the length.
        let mut bad = buf.clone();
        put_u32(&mut bad, RunArgs::SIZE, 2);
        assert_eq!(field(&bad), Err(("WorkArgs: block length", bad.len())));
        // A count above the maximum, with a length to match it.
        let mut bad = vec![0u8; WorkArgs::size(257, 0)];
        bad[..WorkArgs::HEADER].copy_from_slice(&buf[..WorkArgs::HEADER]);
        put_u32(&mut bad, RunArgs::SIZE, 257);
        put_u32(&mut bad, RunArgs::SIZE + 4, 0);
        assert_eq!(field(&bad), Err(("WorkArgs.tensor_count", 72)));
        put_u32(&mut bad, RunArgs::SIZE, 0);
        put_u32(&mut bad, RunArgs::SIZE + 4, 129);
        assert_eq!(field(&bad), Err(("WorkArgs.scalar_count", 76)));
        // A bad direction, flag or reserved word, named at its offset.
        for (at, v, name) in [
            (20, 0, "TensorArg.dir"),
            (20, 4, "TensorArg.dir"),
            (24, 2, "TensorArg.staged"),
            (28, 1, "TensorArg.reserved"),
        ] {
            let mut bad = buf.clone();
            put_u32(&mut bad, WorkArgs::HEADER + at, v);
            assert_eq!(
                field(&bad),
                Err((name, WorkArgs::HEADER + at)),
                "{at} = {v}"
            );
        }
        // Run id 0.
        let mut bad = buf.clone();
        put_u64(&mut bad, 8, 0);
        assert_eq!(field(&bad), Err(("RunArgs.run_id", 8)));
        // A version-1 block is not a workload, and the reverse.
        let v1 = header().to_bytes();
        assert_eq!(field(&v1), Err(("WorkArgs: block length", 72)));
        let mut v1_long = v1.to_vec();
        v1_long.extend_from_slice(&[0; 8]);
        assert_eq!(field(&v1_long), Err(("RunArgs.version", 4)));
        assert!(RunArgs::from_bytes(&buf[..RunArgs::SIZE]).is_err());
        assert!(matches!(ArgBlock::parse(&buf), Ok(ArgBlock::Work(_))));
        assert!(matches!(ArgBlock::parse(&v1), Ok(ArgBlock::Run(_))));
        assert!(ArgBlock::parse(&[]).is_err());
    }

    #[test]
    fn indices_beyond_the_counts_read_nothing() {
        let mut buf = vec![0u8; WorkArgs::size(0, 0)];
        WorkArgs::encode(&mut buf, &header(), std::iter::empty(), &[]).unwrap();
        let w = WorkArgs::parse(&buf).unwrap();
        assert_eq!(
            (w.tensor(0), w.scalar(0), w.tensors().len()),
            (None, None, 0)
        );
        assert_eq!(w.tensor(usize::MAX), None);
        assert_eq!(w.scalar(usize::MAX), None);
    }
}
