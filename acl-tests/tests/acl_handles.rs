//! Handles safe code cannot forge, and real destination sizes (the runtime's
//! own bound checks get what an allocation has left, never a length the
//! caller claims): every handle a safe `AclDriver` method receives is
//! checked against what *this* driver created and has not destroyed, before
//! any C call. Each refusal carries no native detail and the fake runtime
//! counts no call: the runtime was never asked.

mod common;

use std::time::Duration;

use common::acl::{control, open};
use runclaim::driver::abi::{self, BlockBuf, DevSpan, Program, RunArgs, StatusRecord, WallRecord};
use runclaim::driver::acl::AclDriver;
use runclaim::driver::{
    CodeHandle, DevPtr, Driver, DriverError, DriverErrorKind, EventId, HandleKind, StreamId,
};
use runclaim::sim::SimConfig;

fn fast() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_millis(2))
}

/// Runs `f`, which must fail without reaching the runtime, and returns its
/// error.
fn refused<T: std::fmt::Debug>(
    d: &AclDriver,
    what: &str,
    f: impl FnOnce() -> Result<T, DriverError>,
) -> DriverErrorKind {
    let before = control().runtime(d.device_id()).calls;
    let err = match f() {
        Err(e) => e,
        Ok(v) => panic!("{what}: accepted ({v:?})"),
    };
    assert!(
        err.native().is_none(),
        "{what}: the runtime was called: {err}"
    );
    assert_eq!(
        control().runtime(d.device_id()).calls,
        before,
        "{what}: the fake runtime saw a call"
    );
    err.kind().clone()
}

fn bad_stream(raw: u64) -> DriverErrorKind {
    DriverErrorKind::BadHandle {
        kind: HandleKind::Stream,
        raw,
    }
}

fn bad_event(raw: u64) -> DriverErrorKind {
    DriverErrorKind::BadHandle {
        kind: HandleKind::Event,
        raw,
    }
}

/// A valid argument block over four live allocations of `d`.
struct Regions {
    arena: DevPtr,
    handshake: DevPtr,
    wall: DevPtr,
    status: DevPtr,
}

impl Regions {
    fn new(d: &AclDriver) -> Self {
        Regions {
            arena: d.alloc(64).unwrap(),
            handshake: d.alloc(abi::handshake_bytes(2)).unwrap(),
            wall: d.alloc(WallRecord::SIZE).unwrap(),
            status: d.alloc(StatusRecord::SIZE).unwrap(),
        }
    }

    fn args(&self, len: u64) -> RunArgs {
        RunArgs {
            run_id: 1,
            slot: 0,
            block_dim: 2,
            len,
            input: self.arena.raw(),
            output: self.arena.offset(32).raw(),
            handshake: self.handshake.raw(),
            wall: self.wall.raw(),
            status: self.status.raw(),
        }
    }
}

/// A driver with one of everything, and forged handles of every kind.
struct Setup {
    d: AclDriver,
    stream: StreamId,
    event: EventId,
    mem: DevPtr,
    code: CodeHandle,
    regions: Regions,
}

const FORGED_STREAM: StreamId = StreamId::from_raw(0xdead_beef);
const FORGED_EVENT: EventId = EventId::from_raw(0xdead_beef);
const FORGED_PTR: DevPtr = DevPtr::from_raw(0xdead_0000);

impl Setup {
    fn new() -> Self {
        let d = open(&fast(), false);
        let stream = d.create_stream().unwrap();
        let event = d.create_event().unwrap();
        let mem = d.alloc(64).unwrap();
        let code = d
            .register_code(&Program::new().add(1).encode())
            .unwrap()
            .handle;
        let regions = Regions::new(&d);
        Setup {
            d,
            stream,
            event,
            mem,
            code,
            regions,
        }
    }
}

fn bad_range(addr: u64, len: u64) -> DriverErrorKind {
    DriverErrorKind::BadAddress { addr, len }
}

#[test]
fn forged_device_addresses_never_reach_the_runtime() {
    let Setup { d, stream, mem, .. } = Setup::new();
    let fp = FORGED_PTR;
    let mut buf = [0u8; 8];
    assert_eq!(refused(&d, "free", || d.free(fp)), bad_range(fp.raw(), 0));
    assert_eq!(
        refused(&d, "free inside", || d.free(mem.offset(8))),
        bad_range(mem.offset(8).raw(), 0)
    );
    assert_eq!(
        refused(&d, "copy_to_device", || d.copy_to_device(fp, &[1])),
        bad_range(fp.raw(), 1)
    );
    assert_eq!(
        refused(&d, "copy_from_device", || d.copy_from_device(&mut buf, fp)),
        bad_range(fp.raw(), 8)
    );
    assert_eq!(
        refused(&d, "memset", || d.memset(fp, 0, 4)),
        bad_range(fp.raw(), 4)
    );
    assert_eq!(
        refused(&d, "copy_async dst", || d.copy_async(stream, fp, mem, 8)),
        bad_range(fp.raw(), 8)
    );
    assert_eq!(
        refused(&d, "copy_async src", || d.copy_async(stream, mem, fp, 8)),
        bad_range(fp.raw(), 8)
    );
    assert_eq!(
        refused(&d, "memset_async dst", || d.memset_async(stream, fp, 0, 8)),
        bad_range(fp.raw(), 8)
    );
    // The genuine ones still reach the runtime.
    d.memset(mem, 0, 64).unwrap();
}

#[test]
fn forged_streams_and_events_never_reach_the_runtime() {
    let Setup {
        d,
        stream,
        event,
        mem,
        ..
    } = Setup::new();
    let (fs, fe) = (FORGED_STREAM, FORGED_EVENT);
    assert_eq!(
        refused(&d, "copy_async stream", || d.copy_async(
            fs,
            mem,
            mem.offset(8),
            8
        )),
        bad_stream(fs.raw())
    );
    assert_eq!(
        refused(&d, "memset_async stream", || d.memset_async(fs, mem, 0, 8)),
        bad_stream(fs.raw())
    );
    assert_eq!(
        refused(&d, "destroy_stream", || d.destroy_stream(fs)),
        bad_stream(fs.raw())
    );
    assert_eq!(
        refused(&d, "query_stream", || d.query_stream(fs)),
        bad_stream(fs.raw())
    );
    for t in [Duration::ZERO, Duration::from_millis(5)] {
        assert_eq!(
            refused(&d, "sync_stream", || d.sync_stream(fs, t)),
            bad_stream(fs.raw())
        );
        assert_eq!(
            refused(&d, "sync_event", || d.sync_event(fe, t)),
            bad_event(fe.raw())
        );
    }
    assert_eq!(
        refused(&d, "destroy_event", || d.destroy_event(fe)),
        bad_event(fe.raw())
    );
    assert_eq!(
        refused(&d, "record_event event", || d.record_event(fe, stream)),
        bad_event(fe.raw())
    );
    assert_eq!(
        refused(&d, "record_event stream", || d.record_event(event, fs)),
        bad_stream(fs.raw())
    );
    assert_eq!(
        refused(&d, "query_event", || d.query_event(fe)),
        bad_event(fe.raw())
    );
    assert_eq!(
        refused(&d, "stream_wait_event stream", || d
            .stream_wait_event(fs, event)),
        bad_stream(fs.raw())
    );
    assert_eq!(
        refused(&d, "stream_wait_event event", || d
            .stream_wait_event(stream, fe)),
        bad_event(fe.raw())
    );
    assert_eq!(
        refused(&d, "event_elapsed", || d.event_elapsed(fe, event)),
        bad_event(fe.raw())
    );
    assert_eq!(
        refused(&d, "event_timestamp", || d.event_timestamp(fe)),
        bad_event(fe.raw())
    );
    d.record_event(event, stream).unwrap();
    d.sync_event(event, Duration::from_millis(50)).unwrap();
}

#[test]
fn forged_code_and_launch_arguments_never_reach_the_runtime() {
    let Setup {
        d,
        stream,
        event,
        code,
        regions,
        ..
    } = Setup::new();
    let fs = FORGED_STREAM;
    let fc = CodeHandle::from_raw(0xdead, code.upload());
    let block = regions.args(8).block();
    let args = block.args();
    let bad_code = DriverErrorKind::BadHandle {
        kind: HandleKind::Code,
        raw: 0xdead,
    };
    assert_eq!(refused(&d, "release_code", || d.release_code(fc)), bad_code);
    assert_eq!(
        refused(&d, "launch_aicore code", || d
            .launch_aicore(stream, fc, 2, args)),
        bad_code
    );
    let stale = CodeHandle::from_raw(code.raw(), code.upload() + 1000);
    assert!(matches!(
        refused(&d, "launch_aicore upload", || d
            .launch_aicore(stream, stale, 2, args)),
        DriverErrorKind::BadHandle {
            kind: HandleKind::Code,
            ..
        }
    ));
    assert_eq!(
        refused(&d, "launch_aicore stream", || d
            .launch_aicore(fs, code, 2, args)),
        bad_stream(fs.raw())
    );
    assert_eq!(
        refused(&d, "launch_aicpu stream", || d.launch_aicpu(fs, args)),
        bad_stream(fs.raw())
    );
    // The device ranges inside the argument block are handles too: the
    // kernels write them.
    let mut forged = regions.args(8);
    forged.wall = 0xdead_0000;
    assert_eq!(
        refused(&d, "launch_aicpu wall", || d
            .launch_aicpu(stream, forged.block().args())),
        bad_range(0xdead_0000, WallRecord::SIZE as u64)
    );
    let too_long = regions.args(9).block(); // 9 elements run past the arena's end
    assert!(matches!(
        refused(&d, "launch_aicore output", || d.launch_aicore(
            stream,
            code,
            2,
            too_long.args()
        )),
        DriverErrorKind::BadAddress { .. }
    ));
    // An address its writer recorded, then overwritten by an integer: the
    // driver checked the recorded range, so it refuses a block that no
    // longer holds it.
    let mut moved = BlockBuf::with_capacity(RunArgs::SIZE, 1);
    let mut w = moved.writer();
    let at = w.grow(RunArgs::SIZE).unwrap();
    w.put_bytes(at, &regions.args(8).to_bytes()).unwrap();
    w.put_addr(at + 56, DevSpan::new(regions.wall, WallRecord::SIZE as u64))
        .unwrap();
    w.put_u64(at + 56, 0xdead_0000).unwrap();
    assert!(matches!(
        refused(&d, "launch_aicpu overwritten wall", || d
            .launch_aicpu(stream, moved.args())),
        DriverErrorKind::InvalidArgument { .. }
    ));
    assert!(matches!(
        refused(&d, "launch_aicore overwritten wall", || d.launch_aicore(
            stream,
            code,
            2,
            moved.args()
        )),
        DriverErrorKind::InvalidArgument { .. }
    ));
    // The genuine handles still work (the two kernels hand-shake: they need
    // two streams).
    let cpu = d.create_stream().unwrap();
    d.memset(regions.arena, 0, 64).unwrap();
    d.launch_aicore(stream, code, 2, args).unwrap();
    d.launch_aicpu(cpu, args).unwrap();
    d.record_event(event, cpu).unwrap();
    d.sync_event(event, Duration::from_millis(50)).unwrap();
    d.sync_stream(stream, Duration::from_millis(50)).unwrap();
}

#[test]
fn destroyed_handles_are_refused_and_never_destroyed_twice() {
    let d = open(&fast(), false);
    let s = d.create_stream().unwrap();
    let e = d.create_event().unwrap();
    let p = d.alloc(64).unwrap();
    let code = d
        .register_code(&Program::new().add(1).encode())
        .unwrap()
        .handle;
    d.destroy_stream(s).unwrap();
    d.destroy_event(e).unwrap();
    d.free(p).unwrap();
    d.release_code(code).unwrap();
    assert_eq!(
        refused(&d, "destroy_stream twice", || d.destroy_stream(s)),
        bad_stream(s.raw())
    );
    assert_eq!(
        refused(&d, "query destroyed stream", || d.query_stream(s)),
        bad_stream(s.raw())
    );
    assert_eq!(
        refused(&d, "destroy_event twice", || d.destroy_event(e)),
        bad_event(e.raw())
    );
    assert_eq!(
        refused(&d, "query destroyed event", || d.query_event(e)),
        bad_event(e.raw())
    );
    assert_eq!(
        refused(&d, "free twice", || d.free(p)),
        DriverErrorKind::BadAddress {
            addr: p.raw(),
            len: 0
        }
    );
    assert!(matches!(
        refused(&d, "copy into freed memory", || d.copy_to_device(p, &[1])),
        DriverErrorKind::BadAddress { .. }
    ));
    assert!(matches!(
        refused(&d, "release an unpinned upload", || d.release_code(code)),
        DriverErrorKind::InvalidArgument { .. }
    ));
}

#[test]
fn another_drivers_handles_are_foreign() {
    let a = open(&fast(), false);
    let b = open(&fast(), false);
    // B's allocations sit at addresses A never allocated.
    let _ = (b.alloc(4096).unwrap(), b.alloc(4096).unwrap());
    let (sb, eb, pb) = (
        b.create_stream().unwrap(),
        b.create_event().unwrap(),
        b.alloc(64).unwrap(),
    );
    let cb = b
        .register_code(&Program::new().add(2).encode())
        .unwrap()
        .handle;
    let sa = a.create_stream().unwrap();
    let _pa = a.alloc(64).unwrap();
    let r = Regions::new(&a);
    let block = r.args(8).block();
    assert_eq!(
        refused(&a, "B's stream", || a.query_stream(sb)),
        bad_stream(sb.raw())
    );
    assert_eq!(
        refused(&a, "B's event", || a.query_event(eb)),
        bad_event(eb.raw())
    );
    assert!(matches!(
        refused(&a, "B's memory", || a.memset(pb, 0, 64)),
        DriverErrorKind::BadAddress { .. }
    ));
    assert!(matches!(
        refused(&a, "B's code", || a.launch_aicore(sa, cb, 2, block.args())),
        DriverErrorKind::BadHandle {
            kind: HandleKind::Code,
            ..
        }
    ));
    // And B's own calls with them still work.
    b.memset(pb, 0, 64).unwrap();
    b.query_stream(sb).unwrap();
}

#[test]
fn the_runtime_is_told_each_allocations_true_remaining_size() {
    let d = open(&fast(), false);
    let id = d.device_id();
    let s = d.create_stream().unwrap();
    let p = d.alloc(64).unwrap();
    let q = d.alloc(16).unwrap();
    let last = || {
        let rt = control().runtime(id);
        (rt.last_mem_api, rt.last_dest_max, rt.last_count)
    };
    d.copy_to_device(p.offset(16), &[1; 8]).unwrap();
    assert_eq!(last(), (1, 48, 8), "aclrtMemcpy: destMax = 64 - 16");
    d.memset(p.offset(60), 0, 4).unwrap();
    assert_eq!(last(), (3, 4, 4), "aclrtMemset: maxCount = 64 - 60");
    d.copy_async(s, p.offset(8), q, 16).unwrap();
    assert_eq!(last(), (2, 56, 16), "aclrtMemcpyAsync: destMax = 64 - 8");
    d.memset_async(s, q.offset(4), 1, 8).unwrap();
    assert_eq!(last(), (4, 12, 8), "aclrtMemsetAsync: maxCount = 16 - 4");
    let mut back = [0u8; 8];
    d.copy_from_device(&mut back, p.offset(16)).unwrap();
    assert_eq!(back, [1; 8]);
    assert_eq!(
        last(),
        (1, 8, 8),
        "device-to-host: destMax is the host buffer"
    );
    // An overrun of a genuine allocation is refused before any C call.
    assert_eq!(
        refused(&d, "memset past the end", || d.memset(q, 0, 1 << 20)),
        DriverErrorKind::BadAddress {
            addr: q.raw(),
            len: 1 << 20
        }
    );
    assert!(matches!(
        refused(&d, "copy past the end", || d
            .copy_to_device(p.offset(60), &[0; 8])),
        DriverErrorKind::BadAddress { .. }
    ));
    assert!(matches!(
        refused(&d, "async copy past the end", || d.copy_async(s, q, p, 64)),
        DriverErrorKind::BadAddress { .. }
    ));
    assert!(matches!(
        refused(&d, "read past the end", || d
            .copy_from_device(&mut [0; 32], q)),
        DriverErrorKind::BadAddress { .. }
    ));
    assert!(matches!(
        refused(&d, "an offset that wraps", || d.memset(
            p.offset(usize::MAX),
            0,
            2
        )),
        DriverErrorKind::BadAddress { .. }
    ));
    d.sync_stream(s, Duration::from_millis(50)).unwrap();
}
