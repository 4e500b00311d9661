//! The host's decoders of the records a run's kernels write back:
//! runclaim's status record and device wall, the a2a3 result region's
//! header and timing record, and the version-1 block's header.

use super::input::Input;
use crate::driver::abi::a2a3_layout::{result, timing};
use crate::driver::abi::{
    A2a3Abi, A2a3Result, A2a3Timing, A2a3Verdict, KernelAbi, RecordError, RunArgs, RunIdentity,
    RunclaimAbi, StatusRecord, Verdict, WallRecord,
};

fn run_args(inp: &mut Input<'_>) -> RunArgs {
    RunArgs {
        run_id: inp.u64(),
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

fn wall(inp: &mut Input<'_>) -> WallRecord {
    WallRecord {
        run_id: inp.u64(),
        slot: inp.u32(),
        block_dim: inp.u32(),
        aicore_start: inp.u64(),
        aicpu_start: inp.u64(),
        dispatched: inp.u64(),
        end: inp.u64(),
    }
}

/// runclaim's records and the version-1 header.
///
/// # Panics
/// When a decoder breaks its promise (the fuzzer's crash).
pub fn records(data: &[u8]) {
    let mut inp = Input::new(data);
    let id = inp.identity();
    if inp.u8().is_multiple_of(2) {
        records_round_trip(&id, &mut inp);
    } else {
        records_raw(&id, inp.rest());
    }
}

fn records_round_trip(id: &RunIdentity, inp: &mut Input<'_>) {
    let abi = RunclaimAbi;
    let other = inp.other_than(id.run_id);
    let a = run_args(inp);
    match a.run_id {
        0 => assert!(RunArgs::from_bytes(&a.to_bytes()).is_err()),
        _ => assert_eq!(RunArgs::from_bytes(&a.to_bytes()), Ok(a)),
    }
    // A status record this run completed, and the same under another id.
    let code = inp.u32();
    let done = |run_id| {
        StatusRecord {
            run_id,
            state: StatusRecord::DONE,
            code,
        }
        .to_bytes()
    };
    let verdict = match code {
        0 => Verdict::Succeeded,
        code => Verdict::Failed { code },
    };
    assert_eq!(abi.decode_status(id, &done(id.run_id)), Ok(verdict));
    assert!(matches!(
        abi.decode_status(id, &done(other)),
        Err(RecordError::Mismatch { .. })
    ));
    let mut armed = [0u8; StatusRecord::SIZE];
    abi.arm(RunclaimAbi::STATUS, id, &mut armed).unwrap();
    assert_eq!(abi.decode_status(id, &armed), Err(RecordError::Missing));
    // A device wall: this run's, then another run's or slot's.
    let w = WallRecord {
        run_id: id.run_id,
        slot: id.slot,
        ..wall(inp)
    };
    assert_eq!(WallRecord::from_bytes(&w.to_bytes()), Some(w));
    assert_eq!(abi.decode_timing(id, &w.to_bytes()), Ok(w));
    let stale = WallRecord { run_id: other, ..w };
    assert!(abi.decode_timing(id, &stale.to_bytes()).is_err());
    let moved = WallRecord {
        slot: id.slot ^ 1,
        ..w
    };
    assert!(abi.decode_timing(id, &moved.to_bytes()).is_err());
}

fn records_raw(id: &RunIdentity, b: &[u8]) {
    let abi = RunclaimAbi;
    if let Ok(v) = abi.decode_status(id, b) {
        let code = match v {
            Verdict::Succeeded => 0,
            Verdict::Failed { code } => {
                assert_ne!(code, 0);
                code
            }
        };
        let canonical = StatusRecord {
            run_id: id.run_id,
            state: StatusRecord::DONE,
            code,
        };
        assert_eq!(
            &canonical.to_bytes()[..],
            b,
            "a status record not this run's"
        );
    }
    if let Ok(w) = abi.decode_timing(id, b) {
        assert_eq!((w.run_id, w.slot), (id.run_id, id.slot));
        assert_eq!(&w.to_bytes()[..], b);
    }
    if let Some(s) = StatusRecord::from_bytes(b) {
        assert_eq!(&s.to_bytes()[..], b);
    }
    match RunArgs::from_bytes(b) {
        Ok(a) => {
            assert_ne!(a.run_id, 0);
            assert_eq!(&a.to_bytes()[..], b);
        }
        Err(e) => assert!(e.offset <= b.len().max(RunArgs::SIZE) && !e.field.is_empty()),
    }
}

/// The a2a3 result region's header and timing record.
///
/// # Panics
/// When a decoder breaks its promise (the fuzzer's crash).
pub fn a2a3_records(data: &[u8]) {
    let mut inp = Input::new(data);
    let id = inp.identity();
    if inp.u8().is_multiple_of(2) {
        a2a3_round_trip(&id, &mut inp);
    } else {
        let b = inp.rest();
        a2a3_status_raw(&id, b);
        a2a3_timing_raw(&id, b);
    }
}

fn a2a3_round_trip(id: &RunIdentity, inp: &mut Input<'_>) {
    let abi = A2a3Abi;
    let other = inp.other_than(id.epoch);
    let code = inp.u32().cast_signed();
    let source = 1 + inp.u32() % 3;
    let payload_bytes = inp.u32() % 257;
    let (r, verdict) = match code {
        0 => (A2a3Result::ok(id.epoch), Verdict::Succeeded),
        c => (
            A2a3Result {
                code_source: source,
                ..A2a3Result::error(id.epoch, c)
            },
            Verdict::Failed {
                code: c.cast_unsigned(),
            },
        ),
    };
    let r = A2a3Result { payload_bytes, ..r };
    let bytes = r.to_bytes();
    assert_eq!(A2a3Result::from_bytes(&bytes), Some(r));
    let header = &bytes[..A2a3Result::HEADER];
    let ours = abi.decode_status(id, header);
    match id.epoch {
        0 => assert!(ours.is_err(), "epoch 0 is never accepted"),
        _ => assert_eq!(ours, Ok(verdict)),
    }
    let stale = A2a3Result {
        published: other,
        ..r
    };
    assert!(
        abi.decode_status(id, &stale.to_bytes()[..A2a3Result::HEADER])
            .is_err()
    );
    let t = A2a3Timing {
        epoch: id.epoch,
        wall_ns: inp.u64(),
        run_wall_start_cycles: inp.u64(),
        run_wall_end_cycles: inp.u64(),
        sys_cnt_hz: inp.u64().max(1),
        device_id: inp.u32().cast_signed(),
        slot: id.slot,
        aicore_start_cycles: inp.u64(),
        aicpu_start_cycles: inp.u64(),
        dispatch_cycles: inp.u64(),
        block_dim: inp.u32(),
    };
    assert_eq!(A2a3Timing::from_bytes(&t.to_bytes()), Some(t));
    match abi.decode_timing(id, &t.to_bytes()) {
        Ok(w) => {
            assert_ne!(id.epoch, 0);
            assert_eq!(w, expected_wall(id, &t));
        }
        Err(e) => assert_eq!(id.epoch, 0, "{e}"),
    }
    for stale in [
        A2a3Timing { epoch: other, ..t },
        A2a3Timing {
            slot: id.slot ^ 1,
            ..t
        },
    ] {
        assert!(abi.decode_timing(id, &stale.to_bytes()).is_err());
    }
}

/// The device wall a timing record `t` of run `id` converts to.
fn expected_wall(id: &RunIdentity, t: &A2a3Timing) -> WallRecord {
    let ticks = |c: u64| {
        let n = u128::from(c) * u128::from(crate::driver::abi::TICKS_PER_SEC)
            / u128::from(t.sys_cnt_hz);
        u64::try_from(n).unwrap_or(u64::MAX)
    };
    WallRecord {
        run_id: id.run_id,
        slot: t.slot,
        block_dim: t.block_dim,
        aicore_start: ticks(t.aicore_start_cycles),
        aicpu_start: ticks(t.aicpu_start_cycles),
        dispatched: ticks(t.dispatch_cycles),
        end: ticks(t.run_wall_end_cycles),
    }
}

fn a2a3_status_raw(id: &RunIdentity, b: &[u8]) {
    let Ok(v) = A2a3Abi.decode_status(id, b) else {
        return;
    };
    let r = A2a3Result::from_bytes(b).expect("accepted bytes decode");
    assert!(
        id.epoch != 0 && r.published == id.epoch,
        "another run's result"
    );
    assert!(r.payload_bytes <= 256 && r.code_source <= 3);
    let canonical = match v {
        Verdict::Succeeded => A2a3Result::ok(id.epoch),
        Verdict::Failed { code } => {
            assert_ne!(code, 0);
            A2a3Result {
                code_source: r.code_source,
                ..A2a3Result::error(id.epoch, code.cast_signed())
            }
        }
    };
    let canonical = A2a3Result {
        payload_bytes: r.payload_bytes,
        ..canonical
    };
    assert_eq!(
        &canonical.to_bytes()[..result::HEADER],
        &b[..result::HEADER]
    );
    assert_ne!(
        A2a3Verdict::from_code(r.verdict),
        Some(A2a3Verdict::None),
        "no verdict accepted"
    );
}

fn a2a3_timing_raw(id: &RunIdentity, b: &[u8]) {
    let Ok(w) = A2a3Abi.decode_timing(id, b) else {
        return;
    };
    let t = A2a3Timing::from_bytes(b).expect("accepted bytes decode");
    assert!(id.epoch != 0 && t.epoch == id.epoch && t.slot == id.slot);
    assert!(t.sys_cnt_hz != 0);
    assert_eq!(w, expected_wall(id, &t));
    // Every byte the layout defines, the reserved word 0 included.
    let mut canonical = t.to_bytes();
    canonical[timing::RESERVED..].fill(0);
    assert_eq!(&canonical[..], b);
}
