//! The Rust kernels' unit tests: tensor access, results and faults, code images.

use super::*;
use crate::driver::abi::{ArgBlock, Dir, RunArgs, TensorArg, WorkArgs};

fn run_with(tensors: &[TensorArg], scalars: &[u64]) -> KernelRun {
    let header = RunArgs {
        run_id: 3,
        slot: 1,
        block_dim: 2,
        len: 0,
        input: 0,
        output: 0,
        handshake: 0,
        wall: 0,
        status: 0,
    };
    let mut b = vec![0; WorkArgs::size(tensors.len(), scalars.len())];
    WorkArgs::encode(&mut b, &header, tensors.iter().copied(), scalars).unwrap();
    KernelRun::from_block(&ArgBlock::parse(&b).unwrap())
}

#[test]
fn tensor_access_is_checked_against_the_tensor_and_memory() {
    let mut mem = Memory::new(1 << 20);
    let a = mem.alloc(64, crate::driver::sim::memory::Owner(1)).unwrap();
    // Tensor 0 is the first 16 bytes of a 64-byte allocation; tensor 1
    // names unmapped memory.
    let t0 = TensorArg {
        addr: a,
        bytes: 16,
        elem_size: 4,
        dir: Dir::InOut,
        staged: false,
    };
    let t1 = TensorArg {
        addr: 0x10,
        bytes: 8,
        ..t0
    };
    let run = run_with(&[t0, t1], &[9]);
    let mut ctx = KernelCtx::new(&run, 1, &mut mem);
    assert_eq!(
        (ctx.run_id(), ctx.slot(), ctx.block_dim(), ctx.scalar(0)),
        (3, 1, 2, Some(9))
    );
    assert_eq!(ctx.share(5), 3..5);
    ctx.write_tensor::<u32>(0, 2, &[7, 8]).unwrap();
    let mut back = [0u32; 4];
    ctx.read_tensor(0, 0, &mut back).unwrap();
    assert_eq!(back, [0, 0, 7, 8]);
    // Inside the allocation but past the tensor: refused.
    assert_eq!(
        ctx.write_tensor::<u32>(0, 3, &[1, 2]),
        Err(KernelError::OutsideTensor {
            index: 0,
            offset: 12,
            len: 8
        })
    );
    assert!(
        ctx.read_tensor::<u32>(2, 0, &mut [0]).is_err(),
        "no tensor 2"
    );
    assert!(ctx.read_tensor::<u32>(0, u64::MAX, &mut [0]).is_err());
    assert!(matches!(
        ctx.read_tensor::<u32>(1, 0, &mut [0]),
        Err(KernelError::OutOfBounds { addr: 0x10, len: 4 })
    ));
    // By address: the rest of the allocation is reachable, past it not.
    ctx.write::<u64>(a + 56, &[1]).unwrap();
    assert!(ctx.write::<u64>(a + 60, &[1]).is_err());
    // Zero-sized elements: a zero-byte access, checked like any other.
    ctx.read::<()>(a, &mut [()]).unwrap();
    ctx.read_tensor::<()>(0, 9, &mut [()]).unwrap();
    assert!(ctx.read::<()>(0x10, &mut [()]).is_err());
}

#[test]
fn kernel_results_map_to_codes_and_faults() {
    let mut mem = Memory::new(1 << 20);
    let run = run_with(&[], &[]);
    let call = |k: SimKernel, mem: &mut Memory| k.call(&run, 0, mem);
    assert_eq!(call(SimKernel::new(|_| Ok(())), &mut mem), Ok(0));
    assert_eq!(
        call(SimKernel::new(|_| Err(KernelError::Fail(7))), &mut mem),
        Ok(7)
    );
    assert_eq!(
        call(SimKernel::new(|_| Err(KernelError::Fail(0))), &mut mem),
        Err(())
    );
    assert_eq!(
        call(SimKernel::new(|k| k.write::<u8>(0x10, &[1])), &mut mem),
        Err(())
    );
    assert_eq!(
        call(SimKernel::new(|_| panic!("kernel bug")), &mut mem),
        Err(())
    );
    let timed = SimKernel::new(|_| Ok(())).time(|_| Duration::from_secs(5));
    assert_eq!(
        timed.ticks(&run),
        Ok(Some(abi::duration_to_ticks(Duration::from_secs(1)))),
        "capped at LatencyModel::MAX"
    );
    assert_eq!(SimKernel::new(|_| Ok(())).ticks(&run), Ok(None));
}

#[test]
fn images_round_trip_and_ids_are_unique() {
    let (a, b) = (KernelCode::fresh(), KernelCode::fresh());
    assert_ne!(a.id(), b.id());
    assert_eq!(KernelCode::from_bytes(a.as_bytes()), Some(a));
    assert_eq!(KernelCode::from_bytes(&a.as_bytes()[..11]), None);
    assert_eq!(KernelCode::from_bytes(b"RCK1\0\0\0\0\0\0\0\0"), None);
    assert_eq!(Vec::from(a), a.as_bytes().to_vec());
}
