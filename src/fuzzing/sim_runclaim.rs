//! runclaim's device model ([`RunclaimModel`]) as the simulator runs it:
//! the blocks it decodes at launch, and the handshake words it reads
//! back, from a region a stale or faulty run may have left anything in.

use super::input::Input;
use crate::driver::abi::{
    self, ArgBlock, BlockBuf, Dir, KernelAbi, RunArgs, RunIdentity, RunclaimAbi, StatusRecord,
    TensorArg, Verdict, WallRecord, WorkArgs,
};
use crate::driver::sim::RunclaimModel;
use crate::driver::sim::protocol::{
    AicoreLaunch, AicpuLaunch, DeviceMemory, DeviceModel, OwnedMemory, RunEnd, Task,
};

/// The device's most workers (the simulator's default).
pub(crate) const MAX_BLOCK_DIM: u32 = 24;

/// One run's regions and tensors, allocated in fresh device memory.
struct Run {
    mem: OwnedMemory,
    header: RunArgs,
    tensors: Vec<TensorArg>,
    scalars: Vec<u64>,
}

fn run(inp: &mut Input<'_>) -> Option<Run> {
    let mut mem = OwnedMemory::new(1 << 20);
    let block_dim = 1 + u32::from(inp.u8()) % 4;
    let handshake = mem.alloc(abi::handshake_bytes(block_dim) as u64)?;
    let wall = mem.alloc(WallRecord::SIZE as u64)?;
    let status = mem.alloc(StatusRecord::SIZE as u64)?;
    let mut tensors = Vec::new();
    for i in 0..inp.upto(4) {
        let elem_size = 1 << (inp.u8() % 4);
        let bytes = u64::from(inp.u8()) * u64::from(elem_size) + u64::from(elem_size);
        tensors.push(TensorArg {
            addr: mem.alloc(bytes)?,
            bytes,
            elem_size,
            dir: [Dir::In, Dir::Out, Dir::InOut][i % 3],
            staged: inp.bool(),
        });
    }
    let scalars = (0..inp.upto(3)).map(|_| inp.u64()).collect();
    let header = RunArgs {
        run_id: inp.u64() | 1,
        slot: inp.u32(),
        block_dim,
        len: 0,
        input: 0,
        output: 0,
        handshake,
        wall,
        status,
    };
    Some(Run {
        mem,
        header,
        tensors,
        scalars,
    })
}

/// The run's block: version 1 (its first two tensors as input and
/// output, when it has two `u32` ones) or version 2.
fn block(r: &Run, v1: bool) -> BlockBuf {
    match &r.tensors[..] {
        [i, o, ..] if v1 && i.elem_size == 4 && o.bytes == i.bytes => RunArgs {
            len: i.bytes / 4,
            input: i.addr,
            output: o.addr,
            ..r.header
        }
        .block(),
        _ => WorkArgs::block(&r.header, &r.tensors, &r.scalars).expect("within the maxima"),
    }
}

/// runclaim's device model: its launch decode, its handshake.
///
/// # Panics
/// When the model breaks its promise (the fuzzer's crash).
pub fn sim_runclaim(data: &[u8]) {
    let mut inp = Input::new(data);
    let _id = inp.identity();
    let mode = inp.u8() % 4;
    let Some(mut r) = run(&mut inp) else {
        return;
    };
    let buf = block(&r, inp.bool());
    let mut bytes = buf.args().bytes().to_vec();
    if mode % 2 == 1 {
        // A block the adapter did not write: bytes changed, or others.
        mutate(&mut inp, &mut bytes);
    }
    let bd = r.header.block_dim;
    let model = RunclaimModel;
    let mut mem = r.mem.device();
    let core = model.decode_aicore(&bytes, bd, MAX_BLOCK_DIM, &mem);
    let cpu = model.decode_aicpu(&bytes, MAX_BLOCK_DIM, &mem);
    let (Ok(k), Ok(c)) = (core, cpu) else {
        assert!(mode % 2 == 1, "a block the adapter wrote is refused");
        return;
    };
    let parsed = ArgBlock::parse(&bytes).expect("a block the model took parses");
    let h = *parsed.header();
    assert_eq!(
        (k.identity, k.block_dim, k.base),
        (h.run_id, bd, h.handshake)
    );
    assert_eq!(
        (c.identity, c.slot, c.base),
        (h.run_id, h.slot, h.handshake)
    );
    assert_eq!((c.status, c.timing), (h.status, h.wall));
    if mode.is_multiple_of(2) {
        assert_eq!(h, *ArgBlock::parse(buf.args().bytes()).unwrap().header());
        assert_eq!(k.run.as_ref().map(|x| *x.header()), Some(h));
    }
    if mode >= 2 {
        // A stale handshake: whatever a previous run left in it.
        let stale: Vec<u8> = (0..abi::handshake_bytes(bd)).map(|_| inp.u8()).collect();
        mem.write(h.handshake, &stale)
            .expect("the region was checked");
    }
    stale_words_are_not_this_runs(&k, &c, &mem, mode >= 2);
    if mode == 3 {
        wild_launches(&model, &mut inp, &mut mem);
    }
    let run_code = inp.u32() % 3;
    protocol(&model, &k, &c, &mut mem, run_code);
    if mode.is_multiple_of(2) {
        // (A changed block may name overlapping regions: its records
        // are then whatever the last write left.)
        records_are_this_runs(&h, run_code, &mem);
    }
}

/// The records the run wrote decode as this run's, and only its.
fn records_are_this_runs(h: &RunArgs, code: u32, mem: &DeviceMemory<'_>) {
    let id = RunIdentity {
        run_id: h.run_id,
        epoch: h.run_id,
        slot: h.slot,
        block_dim: h.block_dim,
    };
    let mut st = [0u8; StatusRecord::SIZE];
    mem.read(h.status, &mut st).expect("checked at launch");
    let mut wall = [0u8; WallRecord::SIZE];
    mem.read(h.wall, &mut wall).expect("checked at launch");
    let expected = match code {
        0 => Verdict::Succeeded,
        code => Verdict::Failed { code },
    };
    assert_eq!(RunclaimAbi.decode_status(&id, &st), Ok(expected));
    assert!(RunclaimAbi.decode_timing(&id, &wall).is_ok());
    let other = RunIdentity {
        run_id: h.run_id ^ 2,
        ..id
    };
    assert!(RunclaimAbi.decode_status(&other, &st).is_err());
    assert!(RunclaimAbi.decode_timing(&other, &wall).is_err());
}

/// Every step of a launch a user's model made (its base anywhere, any
/// worker): an answer — an out-of-bounds error at worst — never a panic.
pub(crate) fn wild_launches(
    model: &dyn DeviceModel,
    inp: &mut Input<'_>,
    mem: &mut DeviceMemory<'_>,
) {
    let (identity, block_dim, base) = (inp.u64(), inp.u32(), inp.u64());
    let worker = inp.u32();
    let k = AicoreLaunch::new(identity, block_dim, base);
    let c = AicpuLaunch::new(identity, inp.u32(), block_dim, base, inp.u64(), inp.u64());
    let _ = model.aicore_start(&k, mem, 1);
    let _ = model.report(&k, worker, mem);
    let _ = model.task(&k, worker, mem);
    let _ = model.finish(&k, worker, 1, mem);
    let _ = model.released(&k, worker, mem);
    let _ = model.aicpu_start(&c, mem);
    let _ = model.accepted(&c, worker, mem);
    let _ = model.dispatch(&c, worker, mem);
    let _ = model.task_done(&c, worker, mem);
    let _ = model.write_records(&c, &RunEnd::new(1, 2, 3, 4), mem);
    let _ = model.release(&c, worker, mem);
}

/// Changes `bytes`: a few bytes overwritten, or cut, or grown.
pub(crate) fn mutate(inp: &mut Input<'_>, bytes: &mut Vec<u8>) {
    match inp.u8() % 4 {
        0 => bytes.truncate(inp.upto(bytes.len())),
        1 => bytes.extend((0..inp.upto(16)).map(|_| inp.u8())),
        _ => {
            for _ in 0..=inp.upto(3) {
                let at = inp.upto(bytes.len().saturating_sub(1));
                let v = inp.u8();
                if let Some(b) = bytes.get_mut(at) {
                    *b = v;
                }
            }
        }
    }
}

/// Before the run reports, no word of a zeroed (`fresh`) region is
/// taken as this run's; of a stale one, the reads only answer.
fn stale_words_are_not_this_runs(
    k: &AicoreLaunch,
    c: &AicpuLaunch,
    mem: &DeviceMemory<'_>,
    stale: bool,
) {
    for w in 0..k.block_dim {
        let model = RunclaimModel;
        let accepted = model.accepted(c, w, mem).expect("inside the region");
        let task = model.task(k, w, mem).expect("inside the region");
        let done = model.task_done(c, w, mem).expect("inside the region");
        let released = model.released(k, w, mem).expect("inside the region");
        if !stale {
            assert!(!accepted && task.is_none() && done.is_none() && !released);
        }
    }
}

/// The whole protocol of one run, every step inside the checked region;
/// every worker's task finishes with `code`. The steps' answers are
/// checked when both kernels' launches are of one run (a changed block
/// may have made them two: then only the steps' success is).
pub(crate) fn protocol(
    model: &dyn DeviceModel,
    k: &AicoreLaunch,
    c: &AicpuLaunch,
    mem: &mut DeviceMemory<'_>,
    code: u32,
) -> Vec<Task> {
    let one = k.identity == c.identity && k.base == c.base && k.block_dim == c.block_dim;
    model.aicore_start(k, mem, 10).expect("aicore_start");
    model.aicpu_start(c, mem).expect("aicpu_start");
    let mut tasks = Vec::new();
    for w in 0..k.block_dim.min(c.block_dim) {
        model.report(k, w, mem).expect("report");
        let accepted = model.accepted(c, w, mem).expect("accepted");
        model.dispatch(c, w, mem).expect("dispatch");
        let task = model.task(k, w, mem);
        model.finish(k, w, code, mem).expect("finish");
        let done = model.task_done(c, w, mem).expect("task_done");
        if one {
            assert!(accepted, "a report of this run not accepted");
            tasks.push(task.expect("task").expect("dispatched"));
            assert_eq!(done, Some(code));
        }
    }
    let end = RunEnd::new(code, 12, 20, 30);
    model.write_records(c, &end, mem).expect("write_records");
    for w in 0..k.block_dim.min(c.block_dim) {
        model.release(c, w, mem).expect("release");
        let released = model.released(k, w, mem).expect("released");
        assert!(released || !one);
    }
    tasks
}
