//! The a2a3 adapter's unit tests: regions, the maxima, refusals, the
//! records and their decoders. The blocks' bytes are checked against golden
//! bytes with the simulator's model (`sim/protocol/tests/golden.rs`).

use super::*;
use crate::driver::DevPtr;
use crate::driver::abi::Dir;
use crate::driver::abi::adapter::{BlockBuf, Home};

const IMAGE_AT: u64 = 0x10_000;
const RESULT_AT: u64 = 0x20_000;
const TIMING_AT: u64 = 0x30_000;

fn id() -> RunIdentity {
    RunIdentity {
        run_id: 9,
        epoch: 9,
        slot: 1,
        block_dim: 2,
    }
}

fn span(addr: u64, len: usize) -> DevSpan {
    DevSpan::new(DevPtr::from_raw(addr), len as u64)
}

/// One slot's regions for `block_dim` 2, sized as `regions` says.
fn regions() -> [DevSpan; 3] {
    let mut specs = Vec::new();
    A2a3Abi.regions(&Shape::new(2, 2), &mut specs).unwrap();
    [
        span(IMAGE_AT, specs[0].bytes),
        span(RESULT_AT, specs[1].bytes),
        span(TIMING_AT, specs[2].bytes),
    ]
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn aicpu(view: &RunView<'_>) -> Result<BlockBuf, AbiError> {
    let mut buf = BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 8);
    assert_eq!(
        A2a3Abi.aicpu_block(view, &mut buf.writer())?,
        AicpuBlock::Written
    );
    Ok(buf)
}

#[test]
fn regions_are_stamped_and_sized_per_block_dim() {
    let mut specs = Vec::new();
    A2a3Abi.regions(&Shape::new(3, 2), &mut specs).unwrap();
    let got: Vec<_> = specs.iter().map(|r| (r.name, r.bytes, r.prep)).collect();
    assert_eq!(
        got,
        [
            ("image", 64 + 64 * 3 + 33_856, Prep::Stamped),
            ("result", 280, Prep::Stamped),
            ("timing", 80, Prep::Stamped),
        ]
    );
    assert_eq!(A2a3Abi.name(), "a2a3");
    assert_eq!(image::payload(3), Some(256));
    assert_eq!(image::worker(0), Some(64));
    #[cfg(target_pointer_width = "64")]
    assert_eq!(
        image::bytes(u32::MAX),
        Some(64 + 64 * (u32::MAX as usize) + 33_856)
    );
    #[cfg(not(target_pointer_width = "64"))]
    assert!(
        A2a3Abi
            .regions(&Shape::new(u32::MAX, 1), &mut specs)
            .is_err()
    );
}

#[test]
fn counts_above_the_maxima_are_refused_and_the_largest_block_fits_exactly() {
    let regions = regions();
    let t = TensorView {
        span: span(0x8000, 4),
        elem_size: 4,
        dir: Dir::In,
        home: Home::Buffer,
    };
    let tensors = vec![t; 257];
    let scalars = vec![1u64; 129];
    let view = RunView::new(id(), &regions, &tensors, &scalars[..128]);
    assert!(matches!(aicpu(&view), Err(AbiError::Unsupported { .. })));
    let view = RunView::new(id(), &regions, &tensors[..256], &scalars);
    assert!(matches!(aicpu(&view), Err(AbiError::Unsupported { .. })));

    let view = RunView::new(id(), &regions, &tensors[..256], &scalars[..128]);
    let buf = aicpu(&view).unwrap();
    assert_eq!(buf.args().bytes().len(), A2a3Abi.max_block_bytes());
    assert_eq!(A2a3Abi.max_block_bytes(), 192 + 128 * 256 + 8 * 128);
    assert_eq!(buf.args().fields().len(), 3 + 256);
    assert!(buf.args().consistent().is_ok());
    let mut small = BlockBuf::with_capacity(A2a3Abi.max_block_bytes() - 1, 8);
    assert_eq!(
        A2a3Abi.aicpu_block(&view, &mut small.writer()),
        Err(AbiError::BlockFull {
            needed: A2a3Abi.max_block_bytes(),
            capacity: A2a3Abi.max_block_bytes() - 1
        })
    );
}

#[test]
fn missing_short_regions_and_epoch_0_are_refused() {
    let regions = regions();
    let mut buf = BlockBuf::with_capacity(A2a3Abi.max_block_bytes(), 8);
    let view = RunView::new(id(), &regions[..2], &[], &[]);
    assert_eq!(
        A2a3Abi.aicpu_block(&view, &mut buf.writer()),
        Err(AbiError::NoRegion { index: 2 })
    );
    // An image sized for 2 workers cannot serve 3.
    let three = RunIdentity {
        block_dim: 3,
        ..id()
    };
    let view = RunView::new(three, &regions, &[], &[]);
    assert!(matches!(
        A2a3Abi.aicore_block(&view, &mut buf.writer()),
        Err(AbiError::Unsupported { .. })
    ));
    let short = [regions[0], span(RESULT_AT, 24), regions[2]];
    let view = RunView::new(id(), &short, &[], &[]);
    assert!(matches!(
        A2a3Abi.aicpu_block(&view, &mut buf.writer()),
        Err(AbiError::Unsupported { .. })
    ));
    let zero = RunIdentity { epoch: 0, ..id() };
    let view = RunView::new(zero, &regions, &[], &[]);
    assert!(A2a3Abi.aicore_block(&view, &mut buf.writer()).is_err());
    assert!(A2a3Abi.aicpu_block(&view, &mut buf.writer()).is_err());
}

#[test]
fn a_zero_size_element_describes_zero_elements() {
    let regions = regions();
    let t = TensorView {
        span: span(0x8000, 0),
        elem_size: 0,
        dir: Dir::In,
        home: Home::Buffer,
    };
    let tensors = [t];
    let view = RunView::new(id(), &regions, &tensors, &[]);
    let buf = aicpu(&view).unwrap();
    let d = &buf.args().bytes()[envelope::tensor_at(0).unwrap()..];
    let words = [
        tensor::BUFFER_SIZE,
        tensor::SHAPES,
        tensor::EXTENT_ELEM_CACHE,
    ];
    assert_eq!(words.map(|at| u64_at(d, at)), [0; 3]);
    assert_eq!(u32_at(d, tensor::DTYPE), 0);
    assert_eq!(u64_at(d, tensor::STRIDES), 1);
}

#[test]
fn the_records_are_at_their_offsets() {
    let st = A2a3Abi.status_record();
    assert_eq!((st.region, st.offset, st.bytes), (A2a3Abi::RESULT, 0, 24));
    let tm = A2a3Abi.timing_record();
    assert_eq!((tm.region, tm.offset, tm.bytes), (A2a3Abi::TIMING, 0, 80));

    let r = A2a3Result {
        published: 0x0102_0304_0506_0708,
        payload_bytes: 5,
        verdict: 2,
        completion_code: -3,
        code_source: 1,
    };
    let b = r.to_bytes();
    assert_eq!(u64_at(&b, 0), 0x0102_0304_0506_0708);
    assert_eq!(u32_at(&b, 8), 5);
    assert_eq!(u32_at(&b, 12), 2);
    assert_eq!(u32_at(&b, 16), (-3i32).cast_unsigned());
    assert_eq!(u32_at(&b, 20), 1);
    assert!(b[24..].iter().all(|&x| x == 0));
    assert_eq!(A2a3Result::from_bytes(&b[..24]), Some(r));

    let t = A2a3Timing {
        epoch: 1,
        wall_ns: 2,
        run_wall_start_cycles: 3,
        run_wall_end_cycles: 4,
        sys_cnt_hz: 5,
        device_id: -6,
        slot: 7,
        aicore_start_cycles: 8,
        aicpu_start_cycles: 9,
        dispatch_cycles: 10,
        block_dim: 11,
    };
    let b = t.to_bytes();
    let words: Vec<u64> = [0, 8, 16, 24, 32, 48, 56, 64]
        .iter()
        .map(|&o| u64_at(&b, o))
        .collect();
    assert_eq!(words, [1, 2, 3, 4, 5, 8, 9, 10]);
    assert_eq!(u32_at(&b, 40), (-6i32).cast_unsigned());
    assert_eq!(u32_at(&b, 44), 7);
    assert_eq!(u32_at(&b, 72), 11);
    assert_eq!(u32_at(&b, 76), 0);
    assert_eq!(A2a3Timing::from_bytes(&b), Some(t));
}

/// The result header a device would leave for `r`.
fn header(r: A2a3Result) -> Vec<u8> {
    r.to_bytes()[..A2a3Result::HEADER].to_vec()
}

#[test]
fn decode_status_accepts_only_this_epochs_complete_verdict() {
    let abi = A2a3Abi;
    let id = id();
    assert_eq!(
        abi.decode_status(&id, &header(A2a3Result::ok(9))),
        Ok(Verdict::Succeeded)
    );
    assert_eq!(
        abi.decode_status(&id, &header(A2a3Result::error(9, 3))),
        Ok(Verdict::Failed { code: 3 })
    );
    assert_eq!(
        abi.decode_status(&id, &header(A2a3Result::error(9, -1))),
        Ok(Verdict::Failed { code: u32::MAX })
    );
    // The whole region decodes as its header does.
    assert_eq!(
        abi.decode_status(&id, &A2a3Result::ok(9).to_bytes()),
        Ok(Verdict::Succeeded)
    );
    // The previous run's record, left in the region.
    assert_eq!(
        abi.decode_status(&id, &header(A2a3Result::ok(8))),
        Err(RecordError::Mismatch {
            expected: 9,
            found: 8
        })
    );
    // A region never published (zeroed at open).
    assert_eq!(
        abi.decode_status(&id, &[0; 24]),
        Err(RecordError::Mismatch {
            expected: 9,
            found: 0
        })
    );
    let none = A2a3Result {
        verdict: A2a3Verdict::None.code(),
        ..A2a3Result::ok(9)
    };
    assert_eq!(
        abi.decode_status(&id, &header(none)),
        Err(RecordError::Missing)
    );
    let garbage = A2a3Result {
        verdict: 0x4747,
        ..A2a3Result::ok(9)
    };
    assert!(matches!(
        abi.decode_status(&id, &header(garbage)),
        Err(RecordError::Malformed { .. })
    ));
    let ok_with_code = A2a3Result {
        completion_code: 4,
        ..A2a3Result::ok(9)
    };
    assert!(matches!(
        abi.decode_status(&id, &header(ok_with_code)),
        Err(RecordError::Malformed { .. })
    ));
    assert!(matches!(
        abi.decode_status(&id, &header(A2a3Result::error(9, 0))),
        Err(RecordError::Malformed { .. })
    ));
    assert!(matches!(
        abi.decode_status(&id, &[0; 23]),
        Err(RecordError::Malformed { .. })
    ));
    // Under epoch 0 even a zeroed region is not this run's.
    let zero = RunIdentity { epoch: 0, ..id };
    assert!(abi.decode_status(&zero, &[0; 24]).is_err());
}

fn timing(epoch: u64, slot: u32, hz: u64) -> A2a3Timing {
    A2a3Timing {
        epoch,
        wall_ns: 12_000,
        run_wall_start_cycles: 100,
        run_wall_end_cycles: 700,
        sys_cnt_hz: hz,
        device_id: 0,
        slot,
        aicore_start_cycles: 100,
        aicpu_start_cycles: 104,
        dispatch_cycles: 120,
        block_dim: 2,
    }
}

#[test]
fn decode_timing_converts_cycles_to_ticks_under_this_epoch_and_slot() {
    let abi = A2a3Abi;
    let id = id();
    let at_50 = abi
        .decode_timing(&id, &timing(9, 1, 50_000_000).to_bytes())
        .unwrap();
    assert_eq!(
        at_50,
        WallRecord {
            run_id: 9,
            slot: 1,
            block_dim: 2,
            aicore_start: 100,
            aicpu_start: 104,
            dispatched: 120,
            end: 700,
        }
    );
    let at_100 = abi
        .decode_timing(&id, &timing(9, 1, 100_000_000).to_bytes())
        .unwrap();
    assert_eq!(
        (
            at_100.aicore_start,
            at_100.aicpu_start,
            at_100.dispatched,
            at_100.end
        ),
        (50, 52, 60, 350)
    );
    assert!(matches!(
        abi.decode_timing(&id, &timing(9, 1, 0).to_bytes()),
        Err(RecordError::Malformed { .. })
    ));
    assert_eq!(
        abi.decode_timing(&id, &timing(8, 1, 50_000_000).to_bytes()),
        Err(RecordError::Mismatch {
            expected: 9,
            found: 8
        })
    );
    assert_eq!(
        abi.decode_timing(&id, &timing(9, 0, 50_000_000).to_bytes()),
        Err(RecordError::Mismatch {
            expected: 9,
            found: 9
        })
    );
    assert_eq!(
        abi.decode_timing(&id, &[0; 80]),
        Err(RecordError::Mismatch {
            expected: 9,
            found: 0
        })
    );
    assert!(matches!(
        abi.decode_timing(&id, &[0; 48]),
        Err(RecordError::Malformed { .. })
    ));
    let max = A2a3Timing {
        run_wall_end_cycles: u64::MAX,
        ..timing(9, 1, 1)
    };
    let w = abi.decode_timing(&id, &max.to_bytes()).unwrap();
    assert_eq!(w.end, u64::MAX); // saturated, no panic
    assert_eq!(w.aicore_start, 100 * 50_000_000);
}

/// A decoder with the epoch check left out: it reads the verdict of
/// whatever run last published in the region.
fn decode_status_without_epoch(bytes: &[u8]) -> Result<Verdict, RecordError> {
    let r = A2a3Result::from_bytes(bytes).ok_or(RecordError::Malformed { what: "size" })?;
    match A2a3Verdict::from_code(r.verdict) {
        Some(A2a3Verdict::Ok) => Ok(Verdict::Succeeded),
        Some(A2a3Verdict::Error) => Ok(Verdict::Failed {
            code: r.completion_code.cast_unsigned(),
        }),
        _ => Err(RecordError::Missing),
    }
}

#[test]
fn negative_control_a_decoder_without_the_epoch_check_accepts_the_previous_run() {
    // Run 8 succeeded and published; run 9 then faulted before
    // publishing, so the region the host never clears still holds run
    // 8's record.
    let left_behind = header(A2a3Result::ok(8));
    assert_eq!(
        decode_status_without_epoch(&left_behind),
        Ok(Verdict::Succeeded),
        "the broken decoder takes run 8's success for run 9's"
    );
    assert_eq!(
        A2a3Abi.decode_status(&id(), &left_behind),
        Err(RecordError::Mismatch {
            expected: 9,
            found: 8
        })
    );
}

/// The words the layout defines and runclaim does not read are still
/// checked: a timing record's reserved word, a result's code source and
/// payload length. A stale or faulty record with them set is refused,
/// naming the field.
#[test]
fn reserved_words_code_sources_and_payload_lengths_are_checked() {
    fn malformed<T>(what: &'static str) -> Result<T, RecordError> {
        Err(RecordError::Malformed { what })
    }
    let abi = A2a3Abi;
    let id = id();
    let mut t = timing(9, 1, TICKS_PER_SEC).to_bytes();
    assert!(abi.decode_timing(&id, &t).is_ok());
    t[timing::RESERVED] = 1;
    assert_eq!(
        abi.decode_timing(&id, &t),
        malformed("A2a3Timing.reserved is not 0")
    );
    let with = |r: A2a3Result| abi.decode_status(&id, &header(r));
    let err = A2a3Result::error(9, 4);
    for source in 1..=3 {
        let r = A2a3Result {
            code_source: source,
            ..err
        };
        assert_eq!(with(r), Ok(Verdict::Failed { code: 4 }));
    }
    let unknown = A2a3Result {
        code_source: 4,
        ..err
    };
    assert_eq!(
        with(unknown),
        malformed("A2a3Result.code_source is not a DeviceRunCodeSource")
    );
    let sourced_ok = A2a3Result {
        code_source: 1,
        ..A2a3Result::ok(9)
    };
    assert_eq!(
        with(sourced_ok),
        malformed("A2a3Result.code_source: verdict Ok with a code source")
    );
    let full = A2a3Result {
        payload_bytes: 256,
        ..A2a3Result::ok(9)
    };
    assert_eq!(with(full), Ok(Verdict::Succeeded));
    let over = A2a3Result {
        payload_bytes: 257,
        ..full
    };
    assert_eq!(
        with(over),
        malformed("A2a3Result.payload_bytes is above the 256-byte payload")
    );
}
