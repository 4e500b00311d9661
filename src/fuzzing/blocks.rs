//! The argument blocks: [`WorkArgs`] and [`ArgBlock`] as the simulator's
//! device models and the instant driver parse them, and
//! [`LaunchArgs::consistent`] with the `acl` driver's range check.

use super::input::Input;
use crate::driver::DevPtr;
use crate::driver::abi::{ArgBlock, BlockBuf, DevSpan, Dir, RunArgs, TensorArg, WorkArgs};

fn tensor(inp: &mut Input<'_>) -> TensorArg {
    TensorArg {
        addr: inp.u64(),
        bytes: inp.u64(),
        elem_size: inp.u32(),
        dir: [Dir::In, Dir::Out, Dir::InOut][usize::from(inp.u8() % 3)],
        staged: inp.bool(),
    }
}

fn header(inp: &mut Input<'_>) -> RunArgs {
    RunArgs {
        run_id: inp.u64() | 1,
        slot: inp.u32(),
        block_dim: inp.u32(),
        len: inp.u64(),
        input: inp.u64(),
        output: inp.u64(),
        handshake: inp.u64(),
        wall: inp.u64(),
        status: inp.u64(),
    }
}

/// [`WorkArgs::parse`], [`ArgBlock::parse`], [`TensorArg::from_bytes`].
///
/// # Panics
/// When a decoder breaks its promise (the fuzzer's crash).
pub fn work_args(data: &[u8]) {
    let mut inp = Input::new(data);
    let _id = inp.identity();
    if inp.u8().is_multiple_of(2) {
        work_round_trip(&mut inp);
    } else {
        work_raw(inp.rest());
    }
}

fn work_round_trip(inp: &mut Input<'_>) {
    let h = header(inp);
    let count = inp.upto(WorkArgs::MAX_TENSORS);
    let tensors: Vec<TensorArg> = (0..count).map(|_| tensor(inp)).collect();
    let scalars: Vec<u64> = (0..inp.upto(WorkArgs::MAX_SCALARS))
        .map(|_| inp.u64())
        .collect();
    for x in &tensors {
        assert_eq!(TensorArg::from_bytes(&x.to_bytes()), Ok(*x));
    }
    let block = WorkArgs::block(&h, &tensors, &scalars).expect("counts within the maxima");
    let bytes = block.args().bytes();
    assert!(block.args().consistent().is_ok());
    let w = WorkArgs::parse(bytes).expect("an encoded block decodes");
    // (The adapter's block names no input, output or len.)
    let expected = RunArgs {
        len: 0,
        input: 0,
        output: 0,
        ..h
    };
    assert_eq!(*w.header(), expected);
    assert!(w.tensors().eq(tensors.iter().copied()));
    assert!(w.scalars().eq(scalars.iter().copied()));
    assert_eq!((w.tensor(count), w.scalar(scalars.len())), (None, None));
    assert!(matches!(ArgBlock::parse(bytes), Ok(ArgBlock::Work(x)) if x == w));
    // Version 1: the header alone.
    assert!(matches!(ArgBlock::parse(&h.to_bytes()), Ok(ArgBlock::Run(a)) if a == h));
    // One byte short or long: refused, naming the length.
    let mut long = bytes.to_vec();
    long.push(0);
    for b in [&bytes[..bytes.len() - 1], &long[..]] {
        assert_eq!(
            WorkArgs::parse(b).map(|_| ()).map_err(|e| e.field),
            Err("WorkArgs: block length")
        );
    }
}

fn work_raw(b: &[u8]) {
    match WorkArgs::parse(b) {
        Ok(w) => {
            let scalars: Vec<u64> = w.scalars().collect();
            let mut again = vec![0u8; b.len()];
            let n = WorkArgs::encode(&mut again, w.header(), w.tensors(), &scalars);
            assert_eq!(n, Some(b.len()));
            assert_eq!(again, b, "a workload block that is not canonical");
            assert_ne!(w.header().run_id, 0);
        }
        Err(e) => assert!(!e.field.is_empty() && e.offset <= b.len().max(WorkArgs::HEADER)),
    }
    match ArgBlock::parse(b) {
        Ok(ArgBlock::Run(a)) => assert_eq!(&a.to_bytes()[..], b),
        Ok(ArgBlock::Work(w)) => assert_eq!(w.bytes(), b),
        Err(_) => {}
    }
    for d in b.chunks(TensorArg::SIZE) {
        if let Ok(t) = TensorArg::from_bytes(d) {
            assert_eq!(&t.to_bytes()[..], d);
        }
    }
}

/// [`LaunchArgs::consistent`](crate::driver::abi::LaunchArgs::consistent)
/// over a block with addresses recorded and integers written over some,
/// then the `acl` driver's check of the ranges against a table of
/// allocations.
///
/// # Panics
/// When a check breaks its promise (the fuzzer's crash).
pub fn launch_args(data: &[u8]) {
    let mut inp = Input::new(data);
    let _id = inp.identity();
    let len = inp.upto(512);
    let mut buf = BlockBuf::with_capacity(len, 8);
    let mut w = buf.writer();
    if w.grow(len).is_err() {
        return;
    }
    let mut recorded = Vec::new();
    for _ in 0..inp.upto(6) {
        let at = inp.upto(len + 8);
        let span = DevSpan::new(DevPtr::from_raw(inp.u64()), inp.u64() % 0x2_0000);
        if w.put_addr(at, span).is_ok() {
            recorded.push((at, span));
        }
    }
    for _ in 0..inp.upto(2) {
        let at = inp.upto(len + 8);
        let _ = w.put_u64(at, inp.u64());
    }
    let args = buf.args();
    let holds = |&(at, s): &(usize, DevSpan)| {
        let ptr = s.ptr().raw().to_le_bytes();
        args.bytes().get(at..at + 8) == Some(&ptr[..])
    };
    let first_moved = recorded.iter().find(|f| !holds(f)).map(|f| f.0);
    assert_eq!(args.fields().len(), recorded.len());
    match args.consistent() {
        Ok(()) => assert_eq!(first_moved, None),
        Err(e) => assert_eq!((Some(e.offset), e.field), (first_moved, "AddrField.addr")),
    }
    #[cfg(feature = "acl")]
    acl_ranges(&mut inp, &recorded, args, first_moved.is_none());
}

/// The `acl` table's check: accepted exactly when the block is
/// consistent and every range lies inside one allocation.
#[cfg(feature = "acl")]
fn acl_ranges(
    inp: &mut Input<'_>,
    recorded: &[(usize, DevSpan)],
    args: crate::driver::abi::LaunchArgs<'_>,
    consistent: bool,
) {
    let mut allocs = Vec::new();
    let mut next = inp.u64() & 0xffff_ffff_fff0;
    for _ in 0..inp.upto(4) {
        let bytes = usize::from(inp.u16()) + 1;
        allocs.push((next, bytes));
        let gap = u64::from(inp.u16());
        next = next.saturating_add(bytes as u64).saturating_add(gap);
    }
    allocs.dedup_by_key(|a| a.0);
    let inside = |s: &DevSpan| {
        let (addr, len) = (s.ptr().raw(), s.len());
        allocs.iter().any(|&(base, bytes)| {
            addr >= base
                && addr
                    .checked_add(len)
                    .is_some_and(|e| e <= base + bytes as u64)
        })
    };
    let ok = crate::driver::acl::check_run_args(&allocs, args).is_ok();
    let expected = consistent && recorded.iter().all(|(_, s)| inside(s));
    assert_eq!(ok, expected, "allocs {allocs:x?}, fields {recorded:x?}");
}
