//! What the device models refuse, named: the a2a3 launch envelope's and
//! descriptors' fields, the task payload's reserved bytes and descriptors
//! (a stale or stomped payload), and runclaim's blocks by field — the
//! regressions of the fuzz targets' checks (`fuzz/`, `src/fuzzing/`).

use super::*;
use crate::driver::sim::protocol::OwnedMemory;

/// A one-worker a2a3 run with one staged tensor: its memory, its
/// regions, its two blocks.
fn a2a3_run() -> (OwnedMemory, [DevSpan; 3], Vec<u8>, Vec<u8>) {
    let mut mem = OwnedMemory::new(1 << 20);
    let mut specs = Vec::new();
    A2a3Abi.regions(&Shape::new(1, 1), &mut specs).unwrap();
    let span = |mem: &mut OwnedMemory, n: usize| {
        DevSpan::new(DevPtr::from_raw(mem.alloc(n as u64).unwrap()), n as u64)
    };
    let regions = [0, 1, 2].map(|i| span(&mut mem, specs[i].bytes));
    let tensors = [TensorView {
        span: span(&mut mem, 16),
        elem_size: 4,
        dir: Dir::In,
        home: Home::Staging,
    }];
    let id = RunIdentity {
        run_id: 3,
        epoch: 3,
        slot: 0,
        block_dim: 1,
    };
    let view = RunView::new(id, &regions, &tensors, &[]);
    let (mut core, mut cpu) = (
        BlockBuf::with_capacity(64, 2),
        BlockBuf::with_capacity(4096, 4),
    );
    A2a3Abi.aicore_block(&view, &mut core.writer()).unwrap();
    A2a3Abi.aicpu_block(&view, &mut cpu.writer()).unwrap();
    let (core, cpu) = (core.args().bytes().to_vec(), cpu.args().bytes().to_vec());
    (mem, regions, core, cpu)
}

fn refused(what: &'static str) -> Result<(), ModelError> {
    Err(ModelError::Refused { what })
}

#[test]
fn a2a3_envelope_and_descriptor_fields_are_refused_by_name() {
    let (mut mem, _, _, cpu) = a2a3_run();
    let mem = mem.device();
    let decode = |b: &[u8]| A2a3Model.decode_aicpu(b, 24, &mem).map(|_| ());
    assert_eq!(decode(&cpu), Ok(()));
    let d = envelope::HEADER;
    for (at, v, what) in [
        (envelope::RESERVED + 3, 1, "launch envelope: reserved"),
        (kernel_args::PADDING, 1, "KernelArgs: padding"),
        (d + tensor::STAGED, 2, "ChipTensor.staged"),
        (d + tensor::DIRECTION, 9, "ChipTensor.direction"),
        (d + tensor::NDIMS, 2, "ChipTensor.ndims"),
        (d + tensor::SHAPES, 5, "ChipTensor.shapes"),
        (d + tensor::PADDING + 1, 1, "ChipTensor: padding"),
    ] {
        let mut bad = cpu.clone();
        bad[at] = v;
        assert_eq!(decode(&bad), refused(what), "byte {at} = {v}");
    }
}

/// A payload another run left (or stomped) with this run's epoch: its
/// reserved bytes and its descriptors are checked as the envelope's were,
/// so a worker never takes garbage as its run.
#[test]
fn a2a3_a_stomped_task_payload_is_refused_by_name() {
    let (mut owned, regions, core, cpu) = a2a3_run();
    let mut mem = owned.device();
    let m = A2a3Model;
    let k = m.decode_aicore(&core, 1, 24, &mem).unwrap();
    let c = m.decode_aicpu(&cpu, 24, &mem).unwrap();
    m.aicpu_start(&c, &mut mem).unwrap();
    m.report(&k, 0, &mut mem).unwrap();
    m.dispatch(&c, 0, &mut mem).unwrap();
    assert!(matches!(m.task(&k, 0, &mem), Ok(Some(Task::Read(_)))));
    let payload = regions[0].ptr().raw() + (image::HEADER + handshake::SIZE) as u64;
    let stomp = |mem: &mut DeviceMemory<'_>, at: usize, v: u8| {
        let mut b = [0u8; 1];
        mem.read(payload + at as u64, &mut b).unwrap();
        mem.write(payload + at as u64, &[v]).unwrap();
        b[0]
    };
    let was = stomp(&mut mem, payload::RESERVED + 5, 1);
    assert_eq!(
        m.task(&k, 0, &mem).map(|_| ()),
        refused("a2a3 task payload: reserved is not 0")
    );
    stomp(&mut mem, payload::RESERVED + 5, was);
    stomp(&mut mem, payload::TENSORS + tensor::EXTENT_ELEM_CACHE, 9);
    assert_eq!(
        m.task(&k, 0, &mem).map(|_| ()),
        refused("ChipTensor.extent_elem_cache")
    );
}

#[test]
fn runclaim_blocks_are_refused_by_field() {
    let mut owned = OwnedMemory::new(1 << 16);
    let mut alloc = |n: usize| owned.alloc(n as u64).unwrap();
    let header = RunArgs {
        run_id: 4,
        slot: 0,
        block_dim: 1,
        len: 0,
        input: 0,
        output: 0,
        handshake: alloc(crate::driver::abi::handshake_bytes(1)),
        wall: alloc(WallRecord::SIZE),
        status: alloc(StatusRecord::SIZE),
    };
    let mem = owned.device();
    let block = WorkArgs::block(&header, &[], &[]).unwrap();
    let decode = |b: &[u8]| RunclaimModel.decode_aicpu(b, 24, &mem).map(|_| ());
    assert_eq!(decode(block.args().bytes()), Ok(()));
    let mut bad = block.args().bytes().to_vec();
    bad[RunArgs::SIZE] = 1; // a tensor the length has no room for
    assert_eq!(decode(&bad), refused("WorkArgs: block length"));
    let mut bad = header.to_bytes();
    bad[0] ^= 1;
    assert_eq!(decode(&bad), refused("RunArgs.magic"));
}

/// A launch a user's model made (`AicoreLaunch::new`, `AicpuLaunch::new`)
/// may name any base and worker: every step of both built-in models
/// answers — out of bounds — where the address arithmetic would overflow,
/// and never panics (found by the `sim_runclaim` and `sim_a2a3` targets).
#[test]
fn steps_of_a_launch_at_the_top_of_the_address_space_answer_out_of_bounds() {
    let mut owned = OwnedMemory::new(1 << 16);
    let mut mem = owned.device();
    for model in [&RunclaimModel as &dyn DeviceModel, &A2a3Model] {
        for (base, worker) in [(u64::MAX - 8, 0), (u64::MAX - 100, 3), (1, u32::MAX)] {
            let k = AicoreLaunch::new(7, 4, base);
            let c = AicpuLaunch::new(7, 0, 4, base, u64::MAX, u64::MAX - 4);
            let oob = |r: Result<(), ModelError>| {
                assert!(matches!(r, Err(ModelError::OutOfBounds { .. })), "{r:?}");
            };
            oob(model.aicore_start(&k, &mut mem, 1));
            oob(model.report(&k, worker, &mut mem));
            oob(model.task(&k, worker, &mem).map(|_| ()));
            oob(model.finish(&k, worker, 1, &mut mem));
            oob(model.released(&k, worker, &mem).map(|_| ()));
            oob(model.accepted(&c, worker, &mem).map(|_| ()));
            oob(model.dispatch(&c, worker, &mut mem));
            oob(model.task_done(&c, worker, &mem).map(|_| ()));
            oob(model.write_records(&c, &RunEnd::new(1, 2, 3, 4), &mut mem));
            oob(model.release(&c, worker, &mut mem));
            let _ = model.aicpu_start(&c, &mut mem);
        }
    }
}
