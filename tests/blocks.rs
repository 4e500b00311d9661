//! What a kernel receives, through the contract: under runclaim's own
//! layout a `RunSpec` run sends the 72-byte version-1 block, byte for byte
//! what 0.1 sent (a chained run's input is the run before's output), and a
//! workload run the version-2 block — whatever the contract does inside
//! (every run is prepared as a workload there). The layouts themselves are
//! pinned by golden bytes in `src/driver/abi/runclaim.rs`.

mod common;

use common::hooked::Hooked;
use runclaim::driver::abi::{Dir, Program, RunArgs, WorkArgs};
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec, Workload};

fn blocks(hooked: &Device<Hooked, 2>) -> Vec<Vec<u8>> {
    hooked.driver().hooks.blocks.lock().unwrap().clone()
}

#[test]
fn a_runspec_run_sends_the_version_1_block_and_a_chained_one_reads_the_run_befores_output() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = Device::<_, 2>::open(Hooked::new(sim), DeviceConfig::default()).unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let f = runner.code("f").unwrap();
    let (mut o0, mut o1) = (Outputs::<0>::new(4), Outputs::<1>::new(4));
    let a = runner
        .prepare(
            runner.take_slot::<0>().unwrap(),
            RunSpec::new(f, Input::Host(&[1, 2, 3])),
        )
        .unwrap()
        .launch()
        .unwrap();
    let b = runner
        .prepare(
            runner.take_slot::<1>().unwrap(),
            RunSpec::new(f, Input::Previous),
        )
        .unwrap()
        .launch()
        .unwrap();
    let (ida, idb) = (a.id().get(), b.id().get());
    drop(a.fence().unwrap().finalize(&mut o0).unwrap());
    drop(b.fence().unwrap().finalize(&mut o1).unwrap());
    assert_eq!(o1.values(), &[3, 4, 5]);
    let sent = blocks(runner.device());
    drop(runner);
    let [first, second] = &sent[..] else {
        panic!("two launches, not {}", sent.len())
    };
    assert_eq!(first.len(), RunArgs::SIZE);
    let a = RunArgs::from_bytes(first).expect("a version-1 block");
    let b = RunArgs::from_bytes(second).expect("a version-1 block");
    assert_eq!((a.run_id, a.slot, a.block_dim, a.len), (ida, 0, 4, 3));
    assert_eq!((b.run_id, b.slot, b.len), (idb, 1, 3));
    assert_eq!(b.input, a.output, "the chained run reads run 0's output");
    assert_ne!(b.output, a.output, "and writes its own slot's");
    // Byte for byte what 0.1's encoder wrote for these fields.
    assert_eq!(&first[..], &a.to_bytes()[..]);
}

#[test]
fn a_workload_run_sends_the_version_2_block_even_when_it_looks_like_a_runspec() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = Device::<_, 2>::open(Hooked::new(sim), DeviceConfig::default()).unwrap();
    let runner = dev
        .publish(&[Callable::program("f", &Program::new().add(1))])
        .unwrap();
    let mut y = [0u32; 3];
    let mut w = Workload::new(runner.code("f").unwrap());
    w.input(&[1u32, 2, 3]).output(&mut y); // one u32 in, one u32 out
    let run = runner.prepare(runner.take_slot::<0>().unwrap(), &mut w);
    drop(
        run.unwrap()
            .launch()
            .unwrap()
            .fence()
            .unwrap()
            .finalize()
            .unwrap(),
    );
    drop(w);
    assert_eq!(y, [2, 3, 4]);
    let sent = blocks(runner.device());
    let block = WorkArgs::parse(&sent[0]).expect("a version-2 block");
    assert_eq!((block.tensor_count(), block.scalar_count()), (2, 0));
    let dirs: Vec<Dir> = block.tensors().map(|t| t.dir).collect();
    assert_eq!(dirs, [Dir::In, Dir::Out]);
    assert!(block.tensors().all(|t| t.staged && t.bytes == 12));
}
