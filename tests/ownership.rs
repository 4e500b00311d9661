//! Addresses are checked per driver on the simulator: every `SimDriver`
//! value (each clone) owns what it allocates, so two devices opened on
//! clones of one simulated NPU cannot name each other's memory in a
//! launch (the scenario is `tests/common/foreign.rs`, which the acl driver
//! runs too, in `acl-tests/tests/acl_ownership.rs`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::foreign::{Whose, is_bad_address, run_with_borrowed_handshake};
use runclaim::driver::abi::{
    self, BlockBuf, DevSpan, Dir, Home, KernelAbi, Program, RunIdentity, RunView, RunclaimAbi,
    StatusRecord, TensorView, WallRecord,
};
use runclaim::driver::{Driver, DriverError, DriverErrorKind, HandleKind};
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Device, DeviceConfig};

#[test]
fn a_launch_naming_another_devices_buffer_is_refused() {
    let sim = SimDriver::stepped(SimConfig::default());
    let outcome = run_with_borrowed_handshake(sim.clone(), sim.clone(), Whose::Other);
    match &outcome.launch {
        Err(kind) => assert!(
            is_bad_address(kind),
            "refused, but not as a bad address: {kind:?}"
        ),
        Ok(()) => panic!(
            "device A's launch naming device B's buffer as its handshake region was accepted \
             and finalized Ok; {} of B's bytes were overwritten",
            outcome.changed
        ),
    }
    assert_eq!(outcome.changed, 0, "B's buffer is untouched");
}

/// The negative control: the same adapter naming device A's own buffer is
/// accepted, runs, and writes the handshake there — so it is the ownership
/// check, not the adapter, that refuses the launch above.
#[test]
fn the_same_adapter_naming_its_own_devices_buffer_runs() {
    let sim = SimDriver::stepped(SimConfig::default());
    let outcome = run_with_borrowed_handshake(sim.clone(), sim.clone(), Whose::Own);
    assert!(outcome.launch.is_ok(), "{:?}", outcome.launch);
    assert!(
        outcome.changed > 0,
        "the handshake was written in the named buffer"
    );
}

/// Every driver call of a clone refuses the original's memory, streams and
/// events — as the acl driver refuses what another `AclDriver` made — and
/// a refused call changes nothing; the original's own calls still work.
#[test]
fn a_clone_reaches_none_of_the_originals_memory_streams_or_events() {
    let sim = SimDriver::stepped(SimConfig::default());
    let other = sim.clone();
    let (mine, stream, event) = (
        sim.alloc(64).unwrap(),
        sim.create_stream().unwrap(),
        sim.create_event().unwrap(),
    );
    sim.copy_to_device(mine, &[7; 64]).unwrap();
    let (theirs, their_stream) = (other.alloc(64).unwrap(), other.create_stream().unwrap());
    let addr = |r: Result<(), DriverError>| {
        matches!(r.unwrap_err().kind(), DriverErrorKind::BadAddress { .. })
    };
    let handle = |r: Result<(), DriverError>, want: HandleKind| matches!(r.unwrap_err().kind(), DriverErrorKind::BadHandle { kind, .. } if *kind == want);
    assert!(addr(other.copy_to_device(mine, &[1; 64])));
    assert!(addr(other.copy_from_device(&mut [0; 64], mine)));
    assert!(addr(other.memset(mine, 1, 64)));
    assert!(addr(other.free(mine)));
    assert!(addr(other.copy_async(their_stream, theirs, mine, 64)));
    assert!(addr(other.copy_async(their_stream, mine, theirs, 64)));
    assert!(addr(other.memset_async(their_stream, mine, 1, 64)));
    assert!(handle(
        other.memset_async(stream, theirs, 1, 64),
        HandleKind::Stream
    ));
    assert!(handle(
        other.record_event(event, their_stream),
        HandleKind::Event
    ));
    assert!(handle(
        other.stream_wait_event(their_stream, event),
        HandleKind::Event
    ));
    assert!(handle(
        other.query_stream(stream).map(drop),
        HandleKind::Stream
    ));
    assert!(handle(
        other.sync_stream(stream, Duration::MAX),
        HandleKind::Stream
    ));
    assert!(handle(
        other.query_event(event).map(drop),
        HandleKind::Event
    ));
    assert!(handle(
        other.sync_event(event, Duration::MAX),
        HandleKind::Event
    ));
    assert!(handle(
        other.event_timestamp(event).map(drop),
        HandleKind::Event
    ));
    assert!(handle(
        other.event_elapsed(event, event).map(drop),
        HandleKind::Event
    ));
    let waker = std::task::Waker::noop();
    assert!(handle(
        other.notify_event(event, Duration::MAX, waker).map(drop),
        HandleKind::Event
    ));
    assert!(handle(other.destroy_event(event), HandleKind::Event));
    assert!(handle(other.destroy_stream(stream), HandleKind::Stream));
    // Nothing was queued or changed; the original's calls work.
    assert_eq!((sim.queued(stream), sim.queued(their_stream)), (0, 0));
    let mut back = [0; 64];
    sim.copy_from_device(&mut back, mine).unwrap();
    assert_eq!(back, [7; 64]);
    sim.memset_async(stream, mine, 2, 64).unwrap();
    sim.record_event(event, stream).unwrap();
    sim.sync_event(event, Duration::from_secs(1)).unwrap();
    sim.copy_from_device(&mut back, mine).unwrap();
    assert_eq!(back, [2; 64]);
    sim.destroy_stream(stream).unwrap();
    sim.destroy_event(event).unwrap();
    sim.free(mine).unwrap();
    other.free(theirs).unwrap();
    other.destroy_stream(their_stream).unwrap();
    // The control API is the NPU's: every clone sees every clone's work.
    assert_eq!(other.stats().live_allocations(), 0);
}

/// A launch by hand through the driver: the same block is refused from a
/// clone (both kernels' checks), accepted and run from the value that
/// allocated its ranges.
#[test]
fn a_block_naming_the_originals_memory_launches_only_from_the_original() {
    let sim = SimDriver::stepped(SimConfig::default());
    let other = sim.clone();
    let block_dim = 2;
    let alloc = |n: usize| DevSpan::new(sim.alloc(n).unwrap(), n as u64);
    let regions = [
        alloc(abi::handshake_bytes(block_dim)),
        alloc(WallRecord::SIZE),
        alloc(StatusRecord::SIZE),
    ];
    let (xp, yp) = (sim.alloc(8).unwrap(), sim.alloc(8).unwrap());
    let (x, y) = (DevSpan::new(xp, 8), DevSpan::new(yp, 8));
    sim.copy_to_device(xp, bytemuck::cast_slice(&[1u32, 2]))
        .unwrap();
    let id = RunIdentity {
        run_id: 1,
        epoch: 1,
        slot: 0,
        block_dim,
    };
    // A RunSpec run's shape: input then output, in the slot's arena.
    let tensor = |span, dir| TensorView {
        span,
        elem_size: 4,
        dir,
        home: Home::Arena,
    };
    let tensors = [tensor(x, Dir::In), tensor(y, Dir::Out)];
    let view = RunView::new(id, &regions, &tensors, &[]);
    let mut block = BlockBuf::with_capacity(RunclaimAbi.max_block_bytes(), 8);
    RunclaimAbi
        .aicore_block(&view, &mut block.writer())
        .unwrap();
    let program = sim.register_code(&Program::new().add(1).encode()).unwrap();
    let (core, cpu) = (
        other.create_stream().unwrap(),
        other.create_stream().unwrap(),
    );
    let refused = |r: Result<(), DriverError>| {
        matches!(r.unwrap_err().kind(), DriverErrorKind::BadAddress { .. })
    };
    assert!(refused(other.launch_aicore(
        core,
        program.handle,
        block_dim,
        block.args()
    )));
    assert!(refused(other.check_aicpu_args(block.args())));
    assert!(refused(other.launch_aicpu(cpu, block.args())));
    assert_eq!(
        (sim.queued(core), sim.queued(cpu)),
        (0, 0),
        "nothing queued"
    );
    let (core, cpu) = (sim.create_stream().unwrap(), sim.create_stream().unwrap());
    sim.launch_aicore(core, program.handle, block_dim, block.args())
        .unwrap();
    sim.launch_aicpu(cpu, block.args()).unwrap();
    sim.sync_stream(cpu, Duration::from_secs(1)).unwrap();
    let mut out = [0u32; 2];
    sim.copy_from_device(bytemuck::cast_slice_mut(&mut out), yp)
        .unwrap();
    assert_eq!(out, [2, 3], "the run computed");
}

/// Sharing the value, not a clone, shares what it owns: a device opened
/// on an `Arc<SimDriver>` and the test's own handle to that `Arc` are one
/// driver, while a clone of the simulator is another.
#[test]
fn a_shared_value_is_one_owner_a_clone_another() {
    let sim = Arc::new(SimDriver::stepped(SimConfig::default()));
    let dev = Device::<_, 2>::open(Arc::clone(&sim), DeviceConfig::default()).unwrap();
    let mut buf = dev.alloc_buffer::<u32>(4).unwrap();
    dev.write_buffer(&mut buf, 0, &[9; 4]).unwrap();
    let mut back = [0u32; 4];
    sim.copy_from_device(bytemuck::cast_slice_mut(&mut back), buf.addr())
        .unwrap();
    assert_eq!(back, [9; 4]);
    let clone = SimDriver::clone(&sim);
    let err = clone
        .copy_from_device(bytemuck::cast_slice_mut(&mut back), buf.addr())
        .unwrap_err();
    assert!(
        matches!(err.kind(), DriverErrorKind::BadAddress { .. }),
        "{err}"
    );
}
