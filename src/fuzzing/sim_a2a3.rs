//! The a2a3 device model ([`A2a3Model`]) against the a2a3 adapter
//! ([`A2a3Abi`]): the blocks the adapter writes decode to the run it
//! described, a whole run's records decode as that run's and no other's,
//! and whatever a stale image, a changed block or a stomped payload
//! holds is refused or read without a panic.

use super::input::Input;
use super::sim_runclaim::{MAX_BLOCK_DIM, mutate, protocol, wild_launches};
use crate::driver::DevPtr;
use crate::driver::abi::a2a3_layout::{result, timing};
use crate::driver::abi::{
    A2a3Abi, BlockBuf, DevSpan, Dir, Home, KernelAbi, RunIdentity, RunView, Shape, TensorArg,
    TensorView, Verdict,
};
use crate::driver::sim::A2a3Model;
use crate::driver::sim::protocol::{DeviceMemory, DeviceModel, OwnedMemory, Task, decode_tensor};

/// One run's regions and tensors, allocated in fresh device memory.
struct Run {
    mem: OwnedMemory,
    id: RunIdentity,
    regions: Vec<DevSpan>,
    tensors: Vec<TensorView>,
    scalars: Vec<u64>,
}

fn run(inp: &mut Input<'_>) -> Option<Run> {
    let mut mem = OwnedMemory::new(1 << 20);
    let block_dim = 1 + u32::from(inp.u8()) % 4;
    let id = RunIdentity {
        run_id: inp.u64() | 1,
        epoch: inp.u64() | 1,
        slot: inp.u32(),
        block_dim,
    };
    let mut specs = Vec::new();
    A2a3Abi
        .regions(&Shape::new(block_dim, 1), &mut specs)
        .ok()?;
    let mut regions = Vec::new();
    for s in &specs {
        let bytes = s.bytes as u64;
        regions.push(DevSpan::new(DevPtr::from_raw(mem.alloc(bytes)?), bytes));
    }
    let mut tensors = Vec::new();
    for i in 0..inp.upto(4) {
        let elem_size = 1 << (inp.u8() % 4);
        let bytes = u64::from(inp.u8()) * u64::from(elem_size) + u64::from(elem_size);
        tensors.push(TensorView {
            span: DevSpan::new(DevPtr::from_raw(mem.alloc(bytes)?), bytes),
            elem_size,
            dir: [Dir::In, Dir::Out, Dir::InOut][i % 3],
            home: [Home::Arena, Home::Staging, Home::Buffer][usize::from(inp.u8() % 3)],
        });
    }
    let scalars = (0..inp.upto(3)).map(|_| inp.u64()).collect();
    Some(Run {
        mem,
        id,
        regions,
        tensors,
        scalars,
    })
}

/// The a2a3 device model against the a2a3 adapter.
///
/// # Panics
/// When the model or the adapter breaks its promise (the fuzzer's crash).
pub fn sim_a2a3(data: &[u8]) {
    let mut inp = Input::new(data);
    let _id = inp.identity();
    let mode = inp.u8() % 4;
    let Some(mut r) = run(&mut inp) else {
        return;
    };
    let view = RunView::new(r.id, &r.regions, &r.tensors, &r.scalars);
    let (mut core, mut cpu) = (
        BlockBuf::with_capacity(64, 2),
        BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 8),
    );
    A2a3Abi
        .aicore_block(&view, &mut core.writer())
        .expect("an a2a3 AICore block");
    A2a3Abi
        .aicpu_block(&view, &mut cpu.writer())
        .expect("an a2a3 AICPU block");
    let (mut core, mut cpu) = (core.args().bytes().to_vec(), cpu.args().bytes().to_vec());
    if mode % 2 == 1 {
        let b = if inp.bool() { &mut core } else { &mut cpu };
        mutate(&mut inp, b);
        // A descriptor as a worker reads it, at any length: an answer.
        for d in cpu.chunks(128) {
            let _ = decode_tensor(d);
        }
    }
    let bd = r.id.block_dim;
    let (image, result_at, timing_at) = (r.regions[0], r.regions[1], r.regions[2]);
    let model = A2a3Model;
    let mut mem = r.mem.device();
    let k = model.decode_aicore(&core, bd, MAX_BLOCK_DIM, &mem);
    let c = model.decode_aicpu(&cpu, MAX_BLOCK_DIM, &mem);
    let (Ok(k), Ok(c)) = (k, c) else {
        assert!(mode % 2 == 1, "a block the adapter wrote is refused");
        return;
    };
    if mode.is_multiple_of(2) {
        assert_eq!(
            (k.identity, k.block_dim, k.base),
            (r.id.epoch, bd, image.ptr().raw())
        );
        assert_eq!(
            (c.identity, c.slot, c.block_dim),
            (r.id.epoch, r.id.slot, bd)
        );
        assert_eq!(
            (c.status, c.timing),
            (result_at.ptr().raw(), timing_at.ptr().raw())
        );
    }
    if mode >= 2 {
        // A stale image: whatever a previous run left in it.
        stomp(&mut inp, &mut mem, image);
        for w in 0..bd {
            // Reads of words another run left: answered, never a panic.
            let _ = model.task(&k, w, &mem);
            let _ = model.accepted(&c, w, &mem);
            let _ = model.task_done(&c, w, &mem);
        }
    }
    if mode == 3 {
        wild_launches(&model, &mut inp, &mut mem);
    }
    let run_code = inp.u32() % 3;
    let tasks = protocol(&model, &k, &c, &mut mem, run_code);
    if mode.is_multiple_of(2) {
        records_are_this_runs(&r.id, run_code, &mem, result_at, timing_at);
        tasks_are_the_run(&r, &tasks);
    }
}

/// Overwrites some of `image` with input bytes.
fn stomp(inp: &mut Input<'_>, mem: &mut DeviceMemory<'_>, image: DevSpan) {
    let at = inp.upto(usize::try_from(image.len()).unwrap_or(0).min(4096));
    let bytes: Vec<u8> = (0..inp.upto(512)).map(|_| inp.u8()).collect();
    let end = (at + bytes.len()).min(usize::try_from(image.len()).unwrap_or(0));
    if at < end {
        mem.write(image.ptr().raw() + at as u64, &bytes[..end - at])
            .expect("inside the image");
    }
}

/// Every worker's task is the run the adapter described.
fn tasks_are_the_run(r: &Run, tasks: &[Task]) {
    let expected: Vec<TensorArg> = r
        .tensors
        .iter()
        .map(|t| TensorArg {
            addr: t.span.ptr().raw(),
            bytes: t.span.len(),
            elem_size: t.elem_size,
            dir: t.dir,
            staged: t.staged(),
        })
        .collect();
    for t in tasks {
        let Task::Read(run) = t else {
            panic!("an a2a3 task is read from the payload");
        };
        assert_eq!(run.tensors(), &expected[..]);
        assert_eq!(run.scalars(), &r.scalars[..]);
        assert_eq!((run.run_id(), run.slot()), (r.id.epoch, r.id.slot));
    }
}

/// The result and timing records decode as this run's, and only its.
fn records_are_this_runs(
    id: &RunIdentity,
    code: u32,
    mem: &DeviceMemory<'_>,
    result_at: DevSpan,
    timing_at: DevSpan,
) {
    let mut res = [0u8; result::HEADER];
    mem.read(result_at.ptr().raw(), &mut res).expect("checked");
    let mut tim = [0u8; timing::SIZE];
    mem.read(timing_at.ptr().raw(), &mut tim).expect("checked");
    let expected = match code {
        0 => Verdict::Succeeded,
        code => Verdict::Failed { code },
    };
    assert_eq!(A2a3Abi.decode_status(id, &res), Ok(expected));
    let w = A2a3Abi.decode_timing(id, &tim).expect("this run's timing");
    assert_eq!(
        (w.run_id, w.slot, w.block_dim),
        (id.run_id, id.slot, id.block_dim)
    );
    for other in [
        RunIdentity {
            epoch: id.epoch ^ 2,
            ..*id
        },
        RunIdentity {
            slot: id.slot ^ 1,
            ..*id
        },
    ] {
        assert!(A2a3Abi.decode_timing(&other, &tim).is_err());
    }
    let other = RunIdentity {
        epoch: id.epoch ^ 2,
        ..*id
    };
    assert!(A2a3Abi.decode_status(&other, &res).is_err());
}
