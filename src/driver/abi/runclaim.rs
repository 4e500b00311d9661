//! runclaim's own kernel ABI as a [`KernelAbi`]: the default adapter, byte
//! for byte the blocks 0.1 and the workload release send.
//!
//! | region | bytes | before each run |
//! |---|---|---|
//! | 0 handshake | [`handshake_bytes`](super::handshake_bytes)`(block_dim)` | zeroed |
//! | 1 device wall | [`WallRecord::SIZE`] | zeroed |
//! | 2 status | [`StatusRecord::SIZE`] | armed: this run's id, [`StatusRecord::ARMED`] |
//!
//! Both kernels receive the same block: a [`RunArgs`] (version 1) for a
//! [`RunSpec`](crate::RunSpec) run — recognised by its shape, two `u32`
//! tensors in the slot's arena ([`Home::Arena`]), its input then its
//! output, and no scalar — and a [`WorkArgs`] (version 2) for any other
//! run. The records prove whose they are by run id (the host arms the
//! status record and zeroes the wall, so a run that never wrote them reads
//! as "missing").

use super::adapter::{
    AbiError, AddrField, AicpuBlock, BlockBuf, BlockKind, BlockWriter, DevSpan, Home, KernelAbi,
    Prep, RecordAt, RecordError, RegionSpec, RunIdentity, RunView, Shape, Verdict,
};
use super::workload::{Dir, TensorArg, WorkArgs};
use super::{ReplayArgs, RunArgs, StatusRecord, WallRecord, handshake_bytes_checked};
use crate::driver::DevPtr;

/// runclaim's own kernel ABI (see the module docs).
///
/// ```
/// use runclaim::driver::abi::{KernelAbi, RunclaimAbi, Shape};
///
/// let mut regions = Vec::new();
/// RunclaimAbi.regions(&Shape::new(4, 2), &mut regions)?;
/// let names: Vec<_> = regions.iter().map(|r| r.name).collect();
/// assert_eq!(names, ["handshake", "device wall", "status"]);
/// # Ok::<(), runclaim::driver::abi::AbiError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RunclaimAbi;

impl RunclaimAbi {
    /// Region index of the handshake.
    pub const HANDSHAKE: usize = 0;
    /// Region index of the device wall.
    pub const WALL: usize = 1;
    /// Region index of the status record.
    pub const STATUS: usize = 2;
}

/// Writes a version-1 block, recording its five addresses with the
/// lengths its fields give.
fn write_v1(w: &mut BlockWriter<'_>, a: &RunArgs) -> Result<(), AbiError> {
    let at = w.grow(RunArgs::SIZE)?;
    let bytes = w.bytes_mut(at, RunArgs::SIZE)?;
    // Grown by exactly its size just above.
    if let Ok(block) = <&mut [u8; RunArgs::SIZE]>::try_from(bytes) {
        a.encode_into(block);
    }
    record_header(w, at, a, true);
    Ok(())
}

/// The addresses a 72-byte header holds, at their offsets in it: input,
/// output (each `len` × 4 bytes), handshake, wall, status.
fn header_fields(a: &RunArgs) -> [AddrField; 5] {
    let field = |at: usize, addr: u64, len: u64| AddrField {
        at,
        addr: DevPtr::from_raw(addr),
        len,
    };
    let elems = a.len.saturating_mul(4);
    let hs = handshake_bytes_checked(a.block_dim).map_or(u64::MAX, |n| n as u64);
    [
        field(32, a.input, elems),
        field(40, a.output, elems),
        field(48, a.handshake, hs),
        field(56, a.wall, WallRecord::SIZE as u64),
        field(64, a.status, StatusRecord::SIZE as u64),
    ]
}

/// Records the addresses a 72-byte header at `at` holds: its record
/// addresses, and its input and output when `io` (a version-2 block names
/// neither).
fn record_header(w: &mut BlockWriter<'_>, at: usize, a: &RunArgs, io: bool) {
    let mut fields = header_fields(a);
    for f in &mut fields {
        f.at += at;
    }
    w.record_addrs(&fields[if io { 0 } else { 2 }..]);
}

/// Writes a version-2 block (`header`'s `len`, `input`, `output` are
/// written as 0), recording the header's three record addresses and every
/// tensor's. The block is grown once and encoded in place.
fn write_v2(
    w: &mut BlockWriter<'_>,
    header: &RunArgs,
    t: usize,
    tensors: impl Iterator<Item = TensorArg>,
    scalars: &[u64],
) -> Result<(), AbiError> {
    if t > WorkArgs::MAX_TENSORS {
        return Err(AbiError::Unsupported {
            what: "more than WorkArgs::MAX_TENSORS tensors",
        });
    }
    if scalars.len() > WorkArgs::MAX_SCALARS {
        return Err(AbiError::Unsupported {
            what: "more than WorkArgs::MAX_SCALARS scalars",
        });
    }
    let header = RunArgs {
        len: 0,
        input: 0,
        output: 0,
        ..*header
    };
    let size = WorkArgs::size(t, scalars.len());
    let base = w.grow(size)?;
    let block = w.bytes_mut(base, size)?;
    let encoded = WorkArgs::encode_parts(
        block,
        &header,
        t,
        tensors,
        scalars.len(),
        scalars.iter().copied(),
    );
    if encoded != Some(size) {
        return Err(AbiError::Unsupported {
            what: "fewer tensors than counted",
        });
    }
    record_header(w, base, &header, false);
    // Each descriptor's address and length, read back from the block just
    // encoded (both words are the descriptor's first two).
    for i in 0..t {
        let at = base + WorkArgs::HEADER + i * TensorArg::SIZE;
        let word = |w: &BlockWriter<'_>, at: usize| {
            w.word(at).ok_or(AbiError::OutOfBlock {
                at,
                len: 8,
                block: w.len(),
            })
        };
        let (addr, bytes) = (word(w, at)?, word(w, at + 8)?);
        w.record_addr(at, DevSpan::new(DevPtr::from_raw(addr), bytes));
    }
    Ok(())
}

impl RunArgs {
    /// This version-1 block with its five addresses recorded, for a
    /// [`Driver`](crate::driver::Driver) launch.
    ///
    /// ```
    /// use runclaim::driver::abi::RunArgs;
    ///
    /// let args = RunArgs { run_id: 1, slot: 0, block_dim: 1, len: 2, input: 0x100, output: 0x200,
    ///                      handshake: 0x300, wall: 0x400, status: 0x500 };
    /// let block = args.block();
    /// assert_eq!(block.args().bytes(), &args.to_bytes()[..]);
    /// assert_eq!(block.args().fields().len(), 5);
    /// ```
    #[must_use]
    pub fn block(&self) -> BlockBuf {
        let mut buf = BlockBuf::with_capacity(RunArgs::SIZE, 5);
        // 72 bytes into a 72-byte capacity cannot fail.
        let _ = write_v1(&mut buf.writer(), self);
        buf
    }
}

impl WorkArgs<'_> {
    /// A version-2 block with every address recorded (header's three
    /// records, each tensor), for a [`Driver`](crate::driver::Driver)
    /// launch; `None` when a count is above its maximum.
    ///
    /// ```
    /// use runclaim::driver::abi::{Dir, RunArgs, TensorArg, WorkArgs};
    ///
    /// let header = RunArgs { run_id: 7, slot: 0, block_dim: 1, len: 0, input: 0, output: 0,
    ///                        handshake: 0x300, wall: 0x400, status: 0x500 };
    /// let x = TensorArg { addr: 0x1000, bytes: 8, elem_size: 4, dir: Dir::In, staged: false };
    /// let block = WorkArgs::block(&header, &[x], &[9]).unwrap();
    /// assert_eq!(block.args().bytes().len(), WorkArgs::size(1, 1));
    /// assert_eq!(block.args().fields().len(), 4); // handshake, wall, status, x
    /// assert!(WorkArgs::parse(block.args().bytes()).is_ok());
    /// ```
    #[must_use]
    pub fn block(header: &RunArgs, tensors: &[TensorArg], scalars: &[u64]) -> Option<BlockBuf> {
        let mut buf = BlockBuf::with_capacity(
            WorkArgs::size(tensors.len(), scalars.len()),
            3 + tensors.len(),
        );
        write_v2(
            &mut buf.writer(),
            header,
            tensors.len(),
            tensors.iter().copied(),
            scalars,
        )
        .ok()?;
        Some(buf)
    }
}

/// A [`RunSpec`](crate::RunSpec) run's shape — its input then its output,
/// `u32` tensors in the slot's arena, and no scalar — which runclaim's
/// layout sends as the version-1 block: the two spans.
fn v1_shape(run: &RunView<'_>) -> Option<(DevSpan, DevSpan)> {
    let arena = |dir| {
        move |t: &super::adapter::TensorView| {
            t.home == Home::Arena && t.dir == dir && t.elem_size == 4
        }
    };
    match run.tensors() {
        [i, o] if run.scalars().is_empty() && arena(Dir::In)(i) && arena(Dir::Out)(o) => {
            Some((i.span, o.span))
        }
        _ => None,
    }
}

fn header(run: &RunView<'_>) -> Result<RunArgs, AbiError> {
    let id = run.identity();
    let region = |i| {
        run.region(i)
            .map(|s| s.ptr().raw())
            .ok_or(AbiError::NoRegion { index: i })
    };
    Ok(RunArgs {
        run_id: id.run_id,
        slot: id.slot,
        block_dim: id.block_dim,
        len: 0,
        input: 0,
        output: 0,
        handshake: region(RunclaimAbi::HANDSHAKE)?,
        wall: region(RunclaimAbi::WALL)?,
        status: region(RunclaimAbi::STATUS)?,
    })
}

impl KernelAbi for RunclaimAbi {
    fn name(&self) -> &'static str {
        "runclaim"
    }

    fn regions(&self, shape: &Shape, out: &mut Vec<RegionSpec>) -> Result<(), AbiError> {
        let handshake = handshake_bytes_checked(shape.block_dim).ok_or(AbiError::Unsupported {
            what: "block_dim overflows the handshake size",
        })?;
        out.extend([
            RegionSpec {
                name: "handshake",
                bytes: handshake,
                prep: Prep::Zeroed,
            },
            RegionSpec {
                name: "device wall",
                bytes: WallRecord::SIZE,
                prep: Prep::Zeroed,
            },
            RegionSpec {
                name: "status",
                bytes: StatusRecord::SIZE,
                prep: Prep::Armed,
            },
        ]);
        Ok(())
    }

    /// A [`ReplayArgs`] (version 3) naming `args`, for either kernel: the
    /// AICPU kernel's block is the AICore's, so both read the one block
    /// the host writes there.
    fn replay_block(
        &self,
        kernel: BlockKind,
        args: DevSpan,
        w: &mut BlockWriter<'_>,
    ) -> Result<(), AbiError> {
        let _ = kernel;
        let at = w.grow(ReplayArgs::SIZE)?;
        let r = ReplayArgs {
            block: 0,
            len: args.len(),
        };
        w.put_bytes(at, &r.to_bytes())?;
        w.put_addr(at + 8, args)
    }

    fn max_block_bytes(&self) -> usize {
        WorkArgs::MAX_SIZE
    }

    fn aicore_block(&self, run: &RunView<'_>, w: &mut BlockWriter<'_>) -> Result<(), AbiError> {
        let header = header(run)?;
        if let Some((input, output)) = v1_shape(run) {
            return write_v1(
                w,
                &RunArgs {
                    len: output.len() / 4,
                    input: input.ptr().raw(),
                    output: output.ptr().raw(),
                    ..header
                },
            );
        }
        let tensors = run.tensors();
        write_v2(
            w,
            &header,
            tensors.len(),
            tensors.iter().map(|t| TensorArg {
                addr: t.span.ptr().raw(),
                bytes: t.span.len(),
                elem_size: t.elem_size,
                dir: t.dir,
                staged: t.staged(),
            }),
            run.scalars(),
        )
    }

    fn aicpu_block(
        &self,
        _run: &RunView<'_>,
        _w: &mut BlockWriter<'_>,
    ) -> Result<AicpuBlock, AbiError> {
        Ok(AicpuBlock::Same)
    }

    fn arm(&self, region: usize, id: &RunIdentity, bytes: &mut [u8]) -> Result<(), AbiError> {
        if region != Self::STATUS || bytes.len() != StatusRecord::SIZE {
            return Err(AbiError::NoRegion { index: region });
        }
        let armed = StatusRecord {
            run_id: id.run_id,
            state: StatusRecord::ARMED,
            code: 0,
        };
        bytes.copy_from_slice(&armed.to_bytes());
        Ok(())
    }

    fn status_record(&self) -> RecordAt {
        RecordAt {
            region: Self::STATUS,
            offset: 0,
            bytes: StatusRecord::SIZE,
        }
    }

    fn timing_record(&self) -> RecordAt {
        RecordAt {
            region: Self::WALL,
            offset: 0,
            bytes: WallRecord::SIZE,
        }
    }

    fn decode_status(&self, id: &RunIdentity, bytes: &[u8]) -> Result<Verdict, RecordError> {
        let s = StatusRecord::from_bytes(bytes).ok_or(RecordError::Malformed {
            what: "a status record is StatusRecord::SIZE bytes",
        })?;
        if s.run_id != id.run_id {
            return Err(RecordError::Mismatch {
                expected: id.run_id,
                found: s.run_id,
            });
        }
        if s.state != StatusRecord::DONE {
            return Err(RecordError::Missing);
        }
        Ok(match s.code {
            0 => Verdict::Succeeded,
            code => Verdict::Failed { code },
        })
    }

    fn decode_timing(&self, id: &RunIdentity, bytes: &[u8]) -> Result<WallRecord, RecordError> {
        let w = WallRecord::from_bytes(bytes).ok_or(RecordError::Malformed {
            what: "a device wall is WallRecord::SIZE bytes",
        })?;
        if w.run_id != id.run_id || w.slot != id.slot {
            return Err(RecordError::Mismatch {
                expected: id.run_id,
                found: w.run_id,
            });
        }
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::abi::adapter::TensorView;
    use crate::driver::abi::{Dir, handshake_bytes};

    fn regions() -> [DevSpan; 3] {
        let s = |a, n: usize| DevSpan::new(DevPtr::from_raw(a), n as u64);
        [
            s(0x300, handshake_bytes(2)),
            s(0x400, WallRecord::SIZE),
            s(0x500, StatusRecord::SIZE),
        ]
    }

    fn id() -> RunIdentity {
        RunIdentity {
            run_id: 9,
            epoch: 9,
            slot: 1,
            block_dim: 2,
        }
    }

    /// A `RunSpec` run as the device shows it: its input and output in
    /// the slot's arena.
    fn arena(addr: u64, bytes: u64, dir: Dir) -> TensorView {
        TensorView {
            span: DevSpan::new(DevPtr::from_raw(addr), bytes),
            elem_size: 4,
            dir,
            home: Home::Arena,
        }
    }

    /// The golden bytes: a version-1 block written by hand from the
    /// layout in `abi::records` (little-endian words).
    #[rustfmt::skip]
    const V1_GOLDEN: [u8; 72] = [
        b'R', b'C', b'A', b'1',                // magic "RCA1"
        0x01, 0, 0, 0,                         // version 1
        0x09, 0, 0, 0, 0, 0, 0, 0,             // run_id 9
        0x01, 0, 0, 0,                         // slot 1
        0x02, 0, 0, 0,                         // block_dim 2
        0x03, 0, 0, 0, 0, 0, 0, 0,             // len 3
        0x00, 0x10, 0, 0, 0, 0, 0, 0,          // input 0x1000
        0x00, 0x20, 0, 0, 0, 0, 0, 0,          // output 0x2000
        0x00, 0x03, 0, 0, 0, 0, 0, 0,          // handshake 0x300
        0x00, 0x04, 0, 0, 0, 0, 0, 0,          // wall 0x400
        0x00, 0x05, 0, 0, 0, 0, 0, 0,          // status 0x500
    ];

    #[test]
    fn a_runspec_run_is_the_version_1_block_byte_for_byte() {
        let regions = regions();
        let tensors = [arena(0x1000, 12, Dir::In), arena(0x2000, 12, Dir::Out)];
        let view = RunView::new(id(), &regions, &tensors, &[]);
        let mut buf = BlockBuf::with_capacity(RunclaimAbi.max_block_bytes(), 8);
        RunclaimAbi.aicore_block(&view, &mut buf.writer()).unwrap();
        assert_eq!(buf.args().bytes(), &V1_GOLDEN[..]);
        let lens: Vec<u64> = buf.args().fields().iter().map(|f| f.len).collect();
        assert_eq!(lens, [12, 12, handshake_bytes(2) as u64, 48, 16]);
        assert!(buf.args().consistent().is_ok());
        // The same shape with a scalar, staged tensors or another element
        // size is a workload's: the version-2 block.
        let staged = tensors.map(|t| TensorView {
            home: Home::Staging,
            ..t
        });
        let wide = tensors.map(|t| TensorView { elem_size: 8, ..t });
        for (t, s) in [(&tensors, &[1u64][..]), (&staged, &[]), (&wide, &[])] {
            let view = RunView::new(id(), &regions, t, s);
            RunclaimAbi.aicore_block(&view, &mut buf.writer()).unwrap();
            assert_eq!(buf.args().bytes().len(), WorkArgs::size(2, s.len()));
        }
    }

    /// The golden bytes of a version-2 block, written by hand from the
    /// layout in `abi::workload`: the header (version 2; `len`, `input`,
    /// `output` zero), the counts, one 32-byte descriptor per tensor, the
    /// scalars.
    #[rustfmt::skip]
    const V2_GOLDEN: [u8; 72 + 8 + 2 * 32 + 8] = [
        b'R', b'C', b'A', b'1',                // magic "RCA1"
        0x02, 0, 0, 0,                         // version 2
        0x09, 0, 0, 0, 0, 0, 0, 0,             // run_id 9
        0x01, 0, 0, 0,                         // slot 1
        0x02, 0, 0, 0,                         // block_dim 2
        0, 0, 0, 0, 0, 0, 0, 0,                // len 0
        0, 0, 0, 0, 0, 0, 0, 0,                // input 0
        0, 0, 0, 0, 0, 0, 0, 0,                // output 0
        0x00, 0x03, 0, 0, 0, 0, 0, 0,          // handshake 0x300
        0x00, 0x04, 0, 0, 0, 0, 0, 0,          // wall 0x400
        0x00, 0x05, 0, 0, 0, 0, 0, 0,          // status 0x500
        0x02, 0, 0, 0,                         // 2 tensors
        0x01, 0, 0, 0,                         // 1 scalar
        0x00, 0x80, 0, 0, 0, 0, 0, 0,          // tensor 0: addr 0x8000
        0x40, 0, 0, 0, 0, 0, 0, 0,             //   64 bytes
        0x04, 0, 0, 0,                         //   4-byte elements
        0x01, 0, 0, 0,                         //   in
        0x01, 0, 0, 0,                         //   staged
        0, 0, 0, 0,                            //   reserved
        0x00, 0x90, 0, 0, 0, 0, 0, 0,          // tensor 1: addr 0x9000
        0x10, 0, 0, 0, 0, 0, 0, 0,             //   16 bytes
        0x02, 0, 0, 0,                         //   2-byte elements
        0x03, 0, 0, 0,                         //   in-out
        0, 0, 0, 0,                            //   a device buffer
        0, 0, 0, 0,                            //   reserved
        0x07, 0, 0, 0, 0, 0, 0, 0,             // scalar 7
    ];

    #[test]
    fn a_workload_run_is_the_version_2_block_byte_for_byte() {
        let regions = regions();
        let t = |addr, bytes, elem_size, dir, home| TensorView {
            span: DevSpan::new(DevPtr::from_raw(addr), bytes),
            elem_size,
            dir,
            home,
        };
        let tensors = [
            t(0x8000, 64, 4, Dir::In, Home::Staging),
            t(0x9000, 16, 2, Dir::InOut, Home::Buffer),
        ];
        let view = RunView::new(id(), &regions, &tensors, &[7]);
        let mut buf = BlockBuf::with_capacity(RunclaimAbi.max_block_bytes(), 8);
        RunclaimAbi.aicore_block(&view, &mut buf.writer()).unwrap();
        assert_eq!(buf.args().bytes(), &V2_GOLDEN[..]);
        assert_eq!(buf.args().fields().len(), 5, "three records, two tensors");
        assert!(buf.args().consistent().is_ok());
        // The negative control: the golden bytes are not vacuous.
        let mut flipped = V2_GOLDEN;
        flipped[80] ^= 1;
        assert_ne!(buf.args().bytes(), &flipped[..]);
        // Two u32 host tensors [in, out] and no scalar: a workload's shape
        // close to a RunSpec's, still the version-2 block.
        let staged = [
            t(0x8000, 12, 4, Dir::In, Home::Staging),
            t(0x9000, 12, 4, Dir::Out, Home::Staging),
        ];
        let view = RunView::new(id(), &regions, &staged, &[]);
        RunclaimAbi.aicore_block(&view, &mut buf.writer()).unwrap();
        assert_eq!(buf.args().bytes()[4], 2, "version 2");
    }

    #[test]
    fn records_prove_they_are_this_runs() {
        let abi = RunclaimAbi;
        let mut armed = [0u8; StatusRecord::SIZE];
        abi.arm(RunclaimAbi::STATUS, &id(), &mut armed).unwrap();
        assert_eq!(abi.decode_status(&id(), &armed), Err(RecordError::Missing));
        let done = |run_id, code| {
            StatusRecord {
                run_id,
                state: StatusRecord::DONE,
                code,
            }
            .to_bytes()
        };
        assert_eq!(
            abi.decode_status(&id(), &done(9, 0)),
            Ok(Verdict::Succeeded)
        );
        assert_eq!(
            abi.decode_status(&id(), &done(9, 3)),
            Ok(Verdict::Failed { code: 3 })
        );
        assert_eq!(
            abi.decode_status(&id(), &done(8, 0)),
            Err(RecordError::Mismatch {
                expected: 9,
                found: 8
            })
        );
        assert!(abi.decode_status(&id(), &armed[1..]).is_err());
        let wall = WallRecord {
            run_id: 9,
            slot: 1,
            ..WallRecord::default()
        };
        assert_eq!(abi.decode_timing(&id(), &wall.to_bytes()), Ok(wall));
        let other_slot = WallRecord { slot: 0, ..wall };
        assert!(abi.decode_timing(&id(), &other_slot.to_bytes()).is_err());
        assert!(abi.arm(RunclaimAbi::WALL, &id(), &mut armed).is_err());
    }
}
