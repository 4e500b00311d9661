//! Workloads through the contract on the simulator: host tensors staged
//! and copied back exactly once, device buffers by address, what the
//! compiler cannot see (forgotten runs) checked at run time, quarantine of
//! memory a forgotten run may touch, the copy-back regression of the
//! reference runtime, the resource classes, and the limits.
//!
//! Every scenario but the one without a device runs under both built-in
//! kernel ABIs (`common::abi::each`): runclaim's layout and the a2a3 layout
//! (the simulator speaking it, the device opened with its adapter). Where a
//! scenario counts copies, the record copies are each ABI's own.

#![allow(
    clippy::many_single_char_names,
    reason = "x, y, z, a, b: the tensors of the formulas the tests check"
)]

mod common;

use std::time::Duration;

use common::abi::{Abi, each};
use runclaim::contract::{ErrorKind, PoisonCause};
use runclaim::driver::abi::{Dir, Program, WorkArgs};
use runclaim::driver::{Driver, Op};
use runclaim::sim::{Fault, SimConfig, SimDriver};
use runclaim::{Callable, Device, Pipeline, Workload};

/// A device on `sim` with `abi`'s adapter (`sim` speaks it).
fn device<const DEPTH: usize>(sim: &SimDriver, abi: Abi) -> Device<SimDriver, DEPTH>
where
    runclaim::contract::Depth<DEPTH>: runclaim::contract::SupportedDepth,
{
    Device::open(sim.clone(), abi.config()).expect("open")
}

fn calls(sim: &SimDriver, op: Op) -> u64 {
    sim.stats().calls.get(&op).copied().unwrap_or(0)
}

fn inc() -> Callable {
    Callable::program("inc", &Program::new().add(1))
}

/// D2H copies a finalize makes for the records: runclaim's layout keeps its
/// wall and status adjacent (one read covers both), the a2a3 layout its
/// result header and timing record apart (two reads).
fn record_reads(abi: Abi) -> u64 {
    match abi {
        Abi::Runclaim => 1,
        Abi::A2a3 => 2,
    }
}

/// Beyond the fixed record copies (runclaim's layout: the status record
/// armed at prepare, the status and wall read back at finalize with one
/// copy; the a2a3 layout: nothing armed — its records are device-stamped —
/// the result header and the timing record read back), exactly one H2D copy per host
/// tensor the kernel reads and one D2H copy per host tensor it writes;
/// none for device buffers.
#[test]
fn host_tensors_cost_exactly_one_copy_each_way_device_buffers_none() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let mut a = dev.alloc_buffer::<u32>(4).unwrap();
        let b = dev.alloc_buffer::<u32>(4).unwrap();
        dev.write_buffer(&mut a, 0, &[1, 2, 3, 4]).unwrap();
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let copies = |work: &mut Workload<'_>| {
            let (h2d, d2h) = (
                calls(&sim, Op::CopyToDevice),
                calls(&sim, Op::CopyFromDevice),
            );
            let token = runner.take_slot::<0>().unwrap();
            let done = runner.prepare(token, work).unwrap().launch().unwrap();
            drop(done.fence().unwrap().finalize().unwrap());
            (
                calls(&sim, Op::CopyToDevice) - h2d,
                calls(&sim, Op::CopyFromDevice) - d2h,
            )
        };
        // Device buffers only: the fixed record copies.
        let fixed = copies(Workload::new(f).buffer(&a, Dir::In).buffer(&b, Dir::Out));
        match abi {
            Abi::Runclaim => assert_eq!(fixed, (1, 1), "arm the status; read status and wall"),
            Abi::A2a3 => assert_eq!(fixed, (0, 2), "nothing armed; read result and timing"),
        }
        // Two host inputs, one host output, one in-out, a device buffer.
        let (x0, x1) = ([5u32; 4], [6u32; 4]);
        let (mut y, mut z) = ([0u32; 4], [7u32; 4]);
        let mut work = Workload::new(f);
        work.input(&x0)
            .input(&x1)
            .output(&mut y)
            .inout(&mut z)
            .buffer(&b, Dir::InOut)
            .scalar(3);
        let (h2d, d2h) = copies(&mut work);
        drop(work);
        assert_eq!(
            (h2d - fixed.0, d2h - fixed.1),
            (3, 2),
            "in, in, in-out / out, in-out"
        );
        assert_eq!(y, [6; 4], "the program read the first readable tensor");
    });
}

#[test]
fn a_failed_run_copies_nothing_back_and_device_buffers_keep_what_it_wrote() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let runner = dev
            .publish(&[Callable::program("bad", &Program::new().add(1).fail(4))])
            .unwrap();
        let mut y = [9u32; 3];
        let mut z = [8u32; 3];
        let mut work = Workload::new(runner.code("bad").unwrap());
        work.input(&[1u32, 2, 3]).output(&mut y).inout(&mut z);
        let d2h = calls(&sim, Op::CopyFromDevice);
        let err = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut work)
            .unwrap()
            .launch()
            .unwrap()
            .fence()
            .unwrap()
            .finalize()
            .unwrap_err();
        assert_eq!(err.kind(), &ErrorKind::RunFailed { code: 4 });
        assert_eq!(
            calls(&sim, Op::CopyFromDevice) - d2h,
            record_reads(abi),
            "the records only"
        );
        // The run comes back: still finalizable into the same borrows? No —
        // it failed; give its slot back.
        drop(err.into_value().into_token());
        drop(work);
        assert_eq!((y, z), ([9; 3], [8; 3]));
    });
}

#[test]
fn staging_and_argument_limits_are_refused_naming_what_does_not_fit() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let cfg = abi.config().staging_bytes(128);
        let mut dev = Device::<_, 2>::open(sim, cfg).unwrap();
        let bufs: Vec<_> = (0..257)
            .map(|_| dev.alloc_buffer::<u8>(1).unwrap())
            .collect();
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let prep = |work: &mut Workload<'_>| {
            runner
                .prepare(runner.take_slot::<0>().unwrap(), work)
                .map(drop)
                .map_err(|e| e.kind().clone())
        };
        // 64 + 64 bytes fit exactly (each tensor at a multiple of 64)...
        let (a, b) = ([0u8; 64], [0u8; 64]);
        assert_eq!(prep(Workload::new(f).input(&a).input(&b)), Ok(()));
        // ... one byte more does not: the second tensor is named.
        let c = [0u8; 65];
        assert_eq!(
            prep(Workload::new(f).input(&c).input(&b)),
            Err(ErrorKind::StagingFull {
                tensor: 1,
                bytes: 64,
                capacity: 128
            })
        );
        // 256 tensors and 128 scalars: the reference runtime's limits hold...
        let max = |n: usize, s: usize| {
            let mut w = Workload::new(f);
            for buf in bufs.iter().take(n) {
                w.buffer(buf, Dir::In);
            }
            for i in 0..s {
                w.scalar(i as u64);
            }
            w
        };
        assert_eq!(
            prep(&mut max(WorkArgs::MAX_TENSORS, WorkArgs::MAX_SCALARS)),
            Ok(())
        );
        // ... one more of either is refused.
        assert_eq!(
            prep(&mut max(257, 0)),
            Err(ErrorKind::TooManyTensors {
                count: 257,
                max: 256
            })
        );
        assert_eq!(
            prep(&mut max(0, 129)),
            Err(ErrorKind::TooManyScalars {
                count: 129,
                max: 128
            })
        );
    });
}

#[test]
fn buffers_refuse_bad_shapes_ranges_and_other_devices() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut a = device::<2>(&sim, abi);
        let b = device::<2>(&sim, abi);
        for (len, elem) in [(0usize, 4usize), (usize::MAX, 4)] {
            let e = a.alloc_buffer::<u32>(len).unwrap_err();
            assert_eq!(
                e.kind(),
                &ErrorKind::InvalidBuffer {
                    len,
                    elem_size: elem
                }
            );
        }
        let mut buf = a.alloc_buffer::<u32>(4).unwrap();
        let id = buf.id();
        let e = a.write_buffer(&mut buf, 3, &[1, 2]).unwrap_err();
        assert_eq!(
            e.kind(),
            &ErrorKind::AccessRange {
                buffer: id,
                end: 5,
                len: 4
            }
        );
        let e = a.read_buffer(&mut buf, usize::MAX, &mut [0]).unwrap_err();
        assert_eq!(
            e.kind(),
            &ErrorKind::AccessRange {
                buffer: id,
                end: usize::MAX,
                len: 4
            }
        );
        // A buffer of device `a` through device `b`: refused, both ways.
        let e = b.read_buffer(&mut buf, 0, &mut [0]).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::ForeignBuffer { buffer: id });
        {
            let runner = a.publish(&[inc()]).unwrap();
            let f = runner.code("inc").unwrap();
            // A slice beyond the buffer is refused at prepare, naming the tensor.
            let mut w = Workload::new(f);
            w.input(&[1u32]).buffer(buf.slice(2..6), Dir::Out);
            let e = runner
                .prepare(runner.take_slot::<0>().unwrap(), &mut w)
                .unwrap_err();
            assert_eq!(
                e.kind(),
                &ErrorKind::BufferRange {
                    tensor: 1,
                    buffer: id,
                    len: 4
                }
            );
        }
        let mut b = b;
        let other = b.publish(&[inc()]).unwrap();
        let mut w = Workload::new(other.code("inc").unwrap());
        w.buffer(&buf, Dir::In);
        let e = other
            .prepare(other.take_slot::<0>().unwrap(), &mut w)
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::ForeignBuffer { buffer: id });
    });
}

/// A sub-range binds only its part: the rest of the buffer is untouched.
#[test]
fn a_bound_slice_is_written_and_nothing_else() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let mut buf = dev.alloc_buffer::<u32>(6).unwrap();
        dev.write_buffer(&mut buf, 0, &[0; 6]).unwrap();
        {
            let runner = dev.publish(&[inc()]).unwrap();
            let mut w = Workload::new(runner.code("inc").unwrap());
            w.input(&[10u32, 20]).buffer(buf.slice(2..4), Dir::Out);
            let run = runner
                .prepare(runner.take_slot::<1>().unwrap(), &mut w)
                .unwrap();
            drop(run.launch().unwrap().fence().unwrap().finalize().unwrap());
        }
        let mut back = [9u32; 6];
        dev.read_buffer(&mut buf, 0, &mut back).unwrap();
        assert_eq!(back, [0, 0, 11, 21, 0, 0]);
    });
}

/// `mem::forget` of a run ends its borrow of a device buffer: host access
/// then waits until the forgotten run is proven complete, and reads the
/// value it wrote — never a value the device is still writing.
#[test]
fn host_access_waits_for_a_forgotten_run_then_reads_its_value() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let mut buf = dev.alloc_buffer::<u32>(2).unwrap();
        dev.write_buffer(&mut buf, 0, &[0, 0]).unwrap();
        let runner = dev.publish(&[inc()]).unwrap();
        let mut w = Workload::new(runner.code("inc").unwrap());
        w.input(&[41u32, 1]).buffer(&buf, Dir::Out);
        let run = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w)
            .unwrap()
            .launch()
            .unwrap();
        std::mem::forget(run);
        drop(w);
        // The stepped device has not run it yet: the read must wait for it.
        assert_eq!(sim.stats().aicore_kernels, 0);
        let mut back = [0u32; 2];
        runner.device().read_buffer(&mut buf, 0, &mut back).unwrap();
        assert_eq!(back, [42, 2]);
    });
}

/// A forgotten run that cannot be proven complete: host access fails after
/// the queue budget, naming the buffer and the run; the buffer's memory is
/// quarantined after its drop (never freed) until a drain proves the
/// queue quiet.
#[test]
fn an_unproven_forgotten_run_keeps_its_buffer_busy_and_quarantined() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let mut buf = dev.alloc_buffer::<u32>(2).unwrap();
        let id = buf.id();
        let mut runner = dev.publish(&[inc()]).unwrap();
        // The run's fence (the second record of its launch) never completes.
        sim.inject(Fault::EventNeverCompletes { nth: 2 });
        let mut w = Workload::new(runner.code("inc").unwrap());
        w.input(&[1u32, 2]).buffer(&buf, Dir::Out);
        let run = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w)
            .unwrap()
            .launch()
            .unwrap();
        let forgotten = run.id();
        std::mem::forget(run);
        drop(w);
        let before = runner.device().driver().clock();
        let e = runner
            .device()
            .read_buffer(&mut buf, 0, &mut [0, 0])
            .unwrap_err();
        assert_eq!(
            e.kind(),
            &ErrorKind::BufferBusy {
                buffer: id,
                run: forgotten
            }
        );
        // Bounded as a drain: (in flight + 1) × fence_timeout, on the clock.
        let waited = runner.device().driver().clock().saturating_sub(before);
        assert!(waited <= 2 * runner.device().fence_timeout() + Duration::from_millis(50));
        // The overrun poisoned the runner, naming the forgotten run.
        let poison = runner.health().poisoned.expect("poisoned");
        assert_eq!(
            (poison.cause, poison.run),
            (PoisonCause::Overrun, Some(forgotten))
        );
        // Dropped, the buffer is quarantined, not freed.
        let live = sim.stats().live_allocations();
        drop(buf);
        assert_eq!(sim.stats().live_allocations(), live);
        let h = runner.health();
        assert_eq!((h.buffers_quarantined, h.buffers_awaiting_free), (1, 0));
        // A drain proves the queue quiet (the stepped device ran everything
        // else; the never-completing record is the simulator's, not a run's).
        let _ = runner.drain_for(Duration::MAX);
        let h = runner.health();
        assert_eq!((h.buffers_quarantined, h.buffers_awaiting_free), (0, 0));
        assert_eq!(sim.stats().live_allocations(), live - 1);
    });
}

/// The reference runtime's bug: a run whose finalize never ran left its
/// copy-back records behind, and the next run's finalize wrote another
/// tensor's bytes into the earlier run's host buffer. Here a run's
/// copy-back list lives in the run (its borrowed workload): a forgotten
/// run's copy-back is never performed, later or by another run.
#[test]
fn a_forgotten_runs_copy_back_is_never_performed_by_a_later_finalize() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let mut runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let mut earlier = [0xEEu32; 4];
        {
            let mut w = Workload::new(f);
            w.input(&[1u32; 4]).output(&mut earlier);
            let run = runner
                .prepare(runner.take_slot::<0>().unwrap(), &mut w)
                .unwrap()
                .launch()
                .unwrap();
            std::mem::forget(run); // its finalize never runs
        }
        // The user moves on: the earlier host buffer is theirs again.
        earlier.copy_from_slice(&[7, 7, 7, 7]);
        runner.drain().unwrap(); // reclaims slot 0
        let f = runner.code("inc").unwrap();
        let mut later = [0u32; 4];
        let mut w = Workload::new(f);
        w.input(&[100u32; 4]).output(&mut later);
        let run = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w)
            .unwrap();
        drop(run.launch().unwrap().fence().unwrap().finalize().unwrap());
        drop(w);
        assert_eq!(later, [101; 4]);
        assert_eq!(
            earlier, [7; 4],
            "no stale copy-back into the earlier buffer"
        );
    });
}

/// An output the kernel leaves unwritten (wholly or in part) comes back
/// zero: never the bytes a previous run staged in the slot. Run 1 stages
/// an input and an output; run 2, in the same slot, has only outputs
/// (borrowed and owned: the kernel reads nothing, so writes nothing); run
/// 3 writes two of an output's eight elements.
#[test]
fn an_output_never_shows_a_previous_runs_staged_bytes() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let serial = |work: &mut Workload<'_>| {
            let token = runner.take_slot::<0>().unwrap();
            let run = runner.prepare(token, work).unwrap().launch().unwrap();
            drop(run.fence().unwrap().finalize().unwrap());
        };
        let mut y = [0u32; 16];
        serial(Workload::new(f).input(&[0xDEAD_BEEFu32; 16]).output(&mut y));
        assert_eq!(y, [0xDEAD_BEF0; 16]);
        let mut z = [0x1111_1111u32; 16];
        let mut w = Workload::new(f);
        w.output(&mut z).owned(vec![0x2222_2222u32; 16], Dir::Out);
        serial(&mut w);
        assert_eq!(w.get::<u32>(1).ok(), Some(&[0; 16][..]), "{abi:?}");
        drop(w);
        assert_eq!(z, [0; 16], "{abi:?}: unwritten, so zero");
        let mut part = [0x3333_3333u32; 8];
        serial(Workload::new(f).input(&[5u32, 6]).output(&mut part));
        assert_eq!(part, [6, 7, 0, 0, 0, 0, 0, 0], "{abi:?}");
    });
}

/// Negative control for the regression check above: the reference
/// runtime's design — copy-back records kept runner-wide and flushed by
/// the next finalize — fails the same check.
#[test]
fn the_regression_check_catches_runner_wide_copy_back_records() {
    /// A runner-wide list of "(host buffer, staged bytes)" records, as the
    /// reference runtime kept them.
    struct LeakyRunner<'b> {
        records: Vec<(&'b std::cell::RefCell<[u32; 4]>, [u32; 4])>,
    }
    impl<'b> LeakyRunner<'b> {
        fn run(&mut self, out: &'b std::cell::RefCell<[u32; 4]>, result: [u32; 4], finalize: bool) {
            self.records.push((out, result));
            if finalize {
                for (buf, bytes) in self.records.drain(..) {
                    *buf.borrow_mut() = bytes;
                }
            }
        }
    }
    let earlier = std::cell::RefCell::new([0xEE; 4]);
    let later = std::cell::RefCell::new([0; 4]);
    let mut r = LeakyRunner {
        records: Vec::new(),
    };
    r.run(&earlier, [2; 4], false); // its finalize never runs
    *earlier.borrow_mut() = [7; 4]; // the user moved on
    r.run(&later, [101; 4], true);
    assert_ne!(*earlier.borrow(), [7; 4], "the leaky design overwrote it");
}

/// Stream order is a legal way to share: two queued runs bind the same
/// buffer (run 0 writes it, run 1 reads it) on the real-time simulator,
/// with run 1 launched before run 0 is fenced.
#[test]
fn queued_runs_share_a_buffer_in_stream_order_in_real_time() {
    each(|abi| {
        let sim = abi.real_time(SimConfig::default());
        let mut dev = device::<3>(&sim, abi);
        let h = dev.alloc_buffer::<u32>(64).unwrap();
        let runner = dev
            .publish(&[Callable::program("f", &Program::new().mul(3).add(1))])
            .unwrap();
        let f = runner.code("f").unwrap();
        let x: Vec<u32> = (0..64).collect();
        let mut y = vec![0u32; 64];
        let mut w0 = Workload::new(f);
        w0.input(&x).buffer(&h, Dir::Out);
        let mut w1 = Workload::new(f);
        w1.buffer(&h, Dir::In).output(&mut y);
        let r0 = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w0)
            .unwrap();
        let r1 = runner
            .prepare(runner.take_slot::<1>().unwrap(), &mut w1)
            .unwrap();
        let (r0, r1) = (r0.launch().unwrap(), r1.launch().unwrap());
        let done1 = r1.fence().unwrap().finalize().unwrap();
        let done0 = r0.fence().unwrap().finalize().unwrap();
        assert!(done0.seq < done1.seq);
        drop(w1);
        let want: Vec<u32> = x.iter().map(|v| (v * 3 + 1) * 3 + 1).collect();
        assert_eq!(y, want);
    });
}

/// A dropped buffer no run can touch is freed at the next allocation; one
/// a pending run bound waits for that run.
#[test]
fn dropped_buffers_are_freed_once_no_run_can_touch_them() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let dev = device::<2>(&sim, abi);
        let base = sim.stats().live_allocations();
        let a = dev.alloc_buffer::<f32>(8).unwrap();
        assert_eq!(sim.stats().live_allocations(), base + 1);
        drop(a);
        let h = dev.health();
        assert_eq!(
            (h.buffers_awaiting_free, h.buffers_quarantined),
            (1, 0),
            "freed lazily"
        );
        let b = dev.alloc_buffer::<f32>(8).unwrap(); // frees `a` first
        assert_eq!(sim.stats().live_allocations(), base + 1);
        assert_eq!(dev.health().buffers_awaiting_free, 0);
        drop(b);
        drop(dev); // the device frees what is left
        assert_eq!(sim.stats().live_allocations(), 0);
    });
}

/// The two counts of dropped buffers not yet freed, apart: one no run
/// touches only awaits its lazy free (the next allocation frees it); one a
/// forgotten run bound is quarantined until that run is proven complete,
/// however many allocations come first.
#[test]
fn a_dropped_buffer_awaits_its_free_unless_a_run_may_still_touch_it() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let idle = dev.alloc_buffer::<u32>(2).unwrap();
        let bound = dev.alloc_buffer::<u32>(2).unwrap();
        let mut runner = dev.publish(&[inc()]).unwrap();
        let mut w = Workload::new(runner.code("inc").unwrap());
        w.input(&[1u32, 2]).buffer(&bound, Dir::Out);
        let run = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w)
            .unwrap()
            .launch()
            .unwrap();
        // Forgotten on the stepped device: in flight, not seen complete.
        std::mem::forget(run);
        drop(w);
        let live = sim.stats().live_allocations();
        drop(idle);
        drop(bound);
        let counts =
            |h: runclaim::contract::Health| (h.buffers_awaiting_free, h.buffers_quarantined);
        assert_eq!(counts(runner.health()), (1, 1));
        // Allocations free the one no run touches, and only it.
        let fresh = runner.device().alloc_buffer::<u32>(2).unwrap();
        let again = runner.device().alloc_buffer::<u32>(2).unwrap();
        assert_eq!(sim.stats().live_allocations(), live + 1);
        assert_eq!(counts(runner.health()), (0, 1));
        // A drain proves the forgotten run complete: its buffer is freed.
        runner.drain().unwrap();
        assert_eq!(counts(runner.health()), (0, 0));
        assert_eq!(sim.stats().live_allocations(), live);
        drop((fresh, again));
    });
}

/// Buffers of `f32`, `i8`, `u32`, `f16` and `bf16` elements round-trip, bit
/// for bit.
#[test]
fn buffers_of_every_element_type_round_trip() {
    each(|abi| {
        use half::{bf16, f16};
        let sim = abi.stepped(SimConfig::default());
        let dev = device::<2>(&sim, abi);
        macro_rules! round_trip {
            ($($t:ty: $v:expr),*) => {$({
                let mut b = dev.alloc_buffer::<$t>(3).unwrap();
                let vals: [$t; 3] = $v;
                dev.write_buffer(&mut b, 0, &vals).unwrap();
                let mut back = [<$t as bytemuck::Zeroable>::zeroed(); 3];
                dev.read_buffer(&mut b, 0, &mut back).unwrap();
                // Bit-for-bit: the bytes went there and back.
                assert_eq!(bytemuck::bytes_of(&back), bytemuck::bytes_of(&vals));
                assert_eq!(b.bytes(), 3 * size_of::<$t>());
            })*};
        }
        round_trip!(
            f32: [1.5, -2.0, 0.25],
            i8: [-1, 0, 127],
            u32: [1, 2, u32::MAX],
            f16: [f16::from_f32(1.0), f16::from_f32(-0.5), f16::MAX],
            bf16: [bf16::from_f32(3.0), bf16::ZERO, bf16::MIN]
        );
    });
}

/// Through a pipeline, host tensors are owned: they move in with the
/// workload and come back with its result — 200 runs at depth 4, values
/// checked, one shared device buffer read by all of them.
#[test]
fn a_pipeline_passes_owned_tensors_in_and_out() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<4>(&sim, abi);
        let mut bias = dev.alloc_buffer::<u32>(8).unwrap();
        dev.write_buffer(&mut bias, 0, &[1000; 8]).unwrap();
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let mut pipe = Pipeline::<_, 4, u32>::new(&runner).unwrap();
        let mut spare: Vec<Workload<'_>> = Vec::new();
        let mut next = 0u32;
        let mut seen = 0u32;
        while seen < 200 {
            while next < 200 && !pipe.is_full() {
                let work = if let Some(mut w) = spare.pop() {
                    w.get_mut::<u32>(0).unwrap().fill(next);
                    w
                } else {
                    let mut w = Workload::new(f);
                    w.owned(vec![next; 8], Dir::In)
                        .owned(vec![0u32; 8], Dir::Out)
                        .buffer(&bias, Dir::In);
                    w
                };
                pipe.submit(work, next).unwrap();
                next += 1;
            }
            let done = pipe.complete().unwrap().expect("pending");
            assert_eq!(done.tag, seen);
            let work = done.work.expect("a workload");
            assert_eq!(work.get::<u32>(1).ok(), Some(&[seen + 1; 8][..]));
            spare.push(work);
            seen += 1;
        }
        assert!(spare.len() <= 4, "at most DEPTH workloads ever existed");
    });
}

/// A refused workload submit hands the workload and the tag back.
#[test]
fn a_refused_workload_submit_hands_everything_back() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(sim, abi.config().staging_bytes(16)).unwrap();
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let mut pipe = Pipeline::new(&runner).unwrap();
        let mut too_big = Workload::new(f);
        too_big.owned(vec![0u8; 17], Dir::In);
        let e = pipe.submit(too_big, "t").unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::StagingFull { tensor: 0, .. }));
        let back = e.into_value();
        assert_eq!(back.tag, "t");
        assert_eq!({ back.work }.take::<u8>(0).ok().map(|v| v.len()), Some(17));
    });
}

/// Edge cases a caller can reach from safe code: empty host tensors and
/// slices, a staging region of zero bytes, a per-slot set asked with
/// another device's token, a buffer outliving its device.
#[test]
fn empty_tensors_zero_staging_foreign_tokens_and_orphaned_buffers_are_safe() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(sim.clone(), abi.config().staging_bytes(0)).unwrap();
        let buf = dev.alloc_buffer::<u32>(2).unwrap();
        let mut state = dev.alloc_per_slot::<u32>(1).unwrap();
        {
            let runner = dev.publish(&[inc()]).unwrap();
            let f = runner.code("inc").unwrap();
            // Empty host tensors fit in a zero-byte staging region; an empty
            // slice of a buffer is a valid binding. The program computes nothing.
            let mut y: [u32; 0] = [];
            let mut w = Workload::new(f);
            w.input::<u32>(&[])
                .output(&mut y)
                .buffer(buf.slice(1..1), Dir::InOut);
            let run = runner
                .prepare(runner.take_slot::<0>().unwrap(), &mut w)
                .unwrap();
            drop(run.launch().unwrap().fence().unwrap().finalize().unwrap());
            // One byte does not fit.
            let mut w = Workload::new(f);
            w.input(&[1u8]);
            let e = runner
                .prepare(runner.take_slot::<0>().unwrap(), &mut w)
                .unwrap_err();
            assert_eq!(
                e.kind(),
                &ErrorKind::StagingFull {
                    tensor: 0,
                    bytes: 1,
                    capacity: 0
                }
            );
        }
        // Another device's token reaches nothing of this device's set.
        let before_other = sim.stats().live_allocations();
        let mut other = device::<4>(&sim, abi);
        let other_regions = sim.stats().live_allocations() - before_other;
        {
            let other_runner = other.publish(&[]).unwrap();
            let token = other_runner.take_slot::<3>().unwrap();
            assert!(state.of(&token).is_none());
        }
        // The device goes first: it frees every buffer; the handles left
        // behind drop quietly and free nothing twice.
        drop(dev);
        assert_eq!(sim.stats().live_allocations(), other_regions);
        let frees = calls(&sim, Op::Free);
        drop((buf, state));
        assert_eq!(calls(&sim, Op::Free), frees, "no free even attempted");
        drop(other);
        assert_eq!(sim.stats().live_allocations(), 0);
    });
}

/// Typed scalars through the contract, under both ABIs: the kernel sees
/// each one's bytes zero-extended in its 64-bit slot (a negative `i32`'s
/// high bytes zero: `as u64` would have set them) and reads each back by
/// its type; `set_scalar` refills by type. The `u64` case's bytes are what
/// they always were.
#[test]
fn typed_scalars_reach_the_kernel_zero_extended_and_read_back_by_type() {
    use half::{bf16, f16};
    use runclaim::sim::SimKernel;
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        // out[0..6]: the raw slots; out[6]: the typed sum, as f64 bits.
        let echo = sim.register_kernel(SimKernel::new(|k| {
            if k.worker() != 0 {
                return Ok(());
            }
            let mut out: Vec<u64> = k.scalars().to_vec();
            let sum = f64::from(k.scalar_as::<f32>(0).unwrap_or(0.0))
                + f64::from(k.scalar_as::<f16>(1).unwrap_or(f16::ZERO))
                + f64::from(k.scalar_as::<bf16>(2).unwrap_or(bf16::ZERO))
                + f64::from(k.scalar_as::<i32>(3).unwrap_or(0))
                + f64::from(k.scalar_as::<u8>(4).unwrap_or(0));
            out.push(sum.to_bits());
            k.write_tensor(0, 0, &out)
        }));
        let mut dev = device::<2>(&sim, abi);
        let runner = dev.publish(&[Callable::new("echo", echo)]).unwrap();
        let mut w = Workload::new(runner.code("echo").unwrap());
        w.owned(vec![0u64; 7], Dir::Out)
            .scalar(1.5f32)
            .scalar(f16::from_f32(0.25))
            .scalar(bf16::from_f32(2.0))
            .scalar(-2i32)
            .scalar(7u8)
            .scalar(u64::MAX);
        let run = |w: &mut Workload<'_>| {
            let p = runner
                .prepare(runner.take_slot::<0>().unwrap(), &mut *w)
                .unwrap();
            drop(p.launch().unwrap().fence().unwrap().finalize().unwrap());
            w.get::<u64>(0).unwrap().to_vec()
        };
        let got = run(&mut w);
        let want = [
            u64::from(1.5f32.to_bits()),
            u64::from(f16::from_f32(0.25).to_bits()),
            u64::from(bf16::from_f32(2.0).to_bits()),
            0xffff_fffe,
            7,
            u64::MAX,
        ];
        assert_eq!(got[..6], want, "{}: the slots", abi.name());
        // Exact in f64: every term is a small power-of-two fraction.
        assert_eq!(got[6], (1.5 + 0.25 + 2.0 - 2.0 + 7.0f64).to_bits());
        w.set_scalar(3, i32::MIN).unwrap();
        w.set_scalar(0, -0.5f32).unwrap();
        let got = run(&mut w);
        assert_eq!(
            got[3],
            0x8000_0000,
            "{}: refilled, zero-extended",
            abi.name()
        );
        let sum = -0.5 + 0.25 + 2.0 + f64::from(i32::MIN) + 7.0;
        assert_eq!(got[6], sum.to_bits());
    });
}

/// A kernel written in Rust, through the contract: `y = a·x + y` over f32
/// with `y` a device buffer, `x` a host input, `a` a scalar; an armed fault
/// faults it like any kernel, and a drain recovers.
#[test]
fn a_rust_kernel_runs_a_workload_through_the_contract() {
    each(|abi| {
        use runclaim::sim::{Kernel, SimKernel};
        let sim = abi.stepped(SimConfig::default());
        let axpy = sim.register_kernel(SimKernel::new(|k| {
            let a = f32::from_bits(u32::try_from(k.scalar(0).unwrap_or(0)).unwrap_or(0));
            let n = k.tensor(0).map_or(0, |t| t.elements());
            let share = k.share(n);
            let len = usize::try_from(share.end - share.start).unwrap_or(0);
            let (mut x, mut y) = (vec![0f32; len], vec![0f32; len]);
            k.read_tensor(0, share.start, &mut x)?;
            k.read_tensor(1, share.start, &mut y)?;
            for (y, x) in y.iter_mut().zip(&x) {
                *y += a * x;
            }
            k.write_tensor(1, share.start, &y)
        }));
        let mut dev = device::<2>(&sim, abi);
        let mut y = dev.alloc_buffer::<f32>(10).unwrap();
        dev.write_buffer(&mut y, 0, &[1.0; 10]).unwrap();
        {
            let mut runner = dev.publish(&[Callable::new("axpy", axpy)]).unwrap();
            let f = runner.code("axpy").unwrap();
            let x: Vec<f32> = (0..10).map(|i| i as f32).collect();
            for _ in 0..2 {
                let mut w = Workload::new(f);
                w.input(&x)
                    .buffer(&y, Dir::InOut)
                    .scalar(u64::from(0.5f32.to_bits()));
                let run = runner
                    .prepare(runner.take_slot::<0>().unwrap(), &mut w)
                    .unwrap();
                drop(run.launch().unwrap().fence().unwrap().finalize().unwrap());
            }
            sim.inject(Fault::KernelFault {
                kernel: Kernel::Aicore,
                nth: 1, // the next one to start
            });
            let mut w = Workload::new(f);
            w.input(&x).buffer(&y, Dir::InOut).scalar(0);
            let run = runner
                .prepare(runner.take_slot::<0>().unwrap(), &mut w)
                .unwrap();
            let e = run.launch().unwrap().fence().unwrap_err();
            assert!(matches!(e.kind(), ErrorKind::Fault(_)));
            drop(e);
            drop(w);
            runner.drain().unwrap();
        }
        let mut back = [0f32; 10];
        dev.read_buffer(&mut y, 0, &mut back).unwrap();
        let want: Vec<f32> = (0..10)
            .map(|i| 1.0 + 0.5 * i as f32 + 0.5 * i as f32)
            .collect();
        assert_eq!(
            bytemuck::cast_slice::<f32, u8>(&back),
            bytemuck::cast_slice::<f32, u8>(&want)
        );
    });
}

static_assertions::assert_impl_all!(runclaim::DeviceBuffer<f32>: Send, Sync);
static_assertions::assert_impl_all!(runclaim::Workload<'static>: Send, Sync);
static_assertions::assert_impl_all!(runclaim::contract::Scratch<u8>: Send, Sync);
static_assertions::assert_impl_all!(runclaim::contract::PerSlot<u8>: Send, Sync);
static_assertions::assert_not_impl_any!(runclaim::DeviceBuffer<f32>: Clone, Copy);
static_assertions::assert_not_impl_any!(runclaim::Workload<'static>: Clone, Copy);

/// A pipeline orphan (a run whose completion failed with a plain driver
/// error, its workload handed back) was once settled behind its lane's back by the scratch check of the workload's resubmission, and
/// the lane then refused every submit with an impossible `StaleToken`.
/// The check now only observes the run.
#[test]
fn a_scratch_check_observes_a_pipeline_orphan_without_settling_it() {
    each(|abi| {
        use runclaim::contract::ErrorKind as K;
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let mut scratch = dev.alloc_scratch::<u32>(4).unwrap();
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let init = [10u32, 20, 30, 40];
        {
            let mut pipe = Pipeline::<_, 2, &str>::new(&runner).unwrap();
            let mut w = Workload::new(f);
            w.owned(vec![0u32; 4], Dir::Out)
                .scratch(&mut scratch, &init);
            pipe.submit(w, "a").unwrap();
            sim.inject(Fault::FailCall {
                op: Op::SyncEvent,
                nth: 1,
            });
            let e = pipe.complete().unwrap_err();
            assert!(matches!(e.kind(), K::Driver(_)), "{e}");
            assert!(runner.health().poisoned.is_none());
            let w = e.into_value().work.expect("the workload comes back");
            pipe.submit(w, "b").unwrap(); // waits for the orphan, observing it
            let b = pipe.complete().unwrap().expect("b");
            assert_eq!(
                b.work.as_ref().and_then(|w| w.get::<u32>(0).ok()),
                Some(&[11, 21, 31, 41][..])
            );
            // Lane 0 reclaims its orphan by its own fence, and goes on.
            let w = b.work.expect("the workload comes back");
            pipe.submit(w, "c").unwrap();
            let c = pipe.complete().unwrap().expect("c");
            assert_eq!(c.tag, "c");
        }
        drop(runner);
        dev.close().unwrap();
        assert_eq!(sim.stats().live_allocations(), 0);
    });
}

/// An element type aligned above the driver's allocation alignment once
/// reached `InvariantBroken` (a debug panic). The buffer is now
/// aligned for its element inside a larger allocation, and a staged host
/// tensor of such a type lands on an aligned device address.
#[test]
fn over_aligned_elements_get_aligned_buffers_and_staging() {
    each(|abi| {
        #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable, PartialEq, Debug)]
        #[repr(C, align(256))]
        struct Wide([u8; 256]);
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let pad = dev.alloc_buffer::<u8>(1).unwrap();
        let mut w = dev.alloc_buffer::<Wide>(2).unwrap();
        assert_eq!(w.addr().raw() % 256, 0);
        let v = [Wide([3; 256]), Wide([4; 256])];
        dev.write_buffer(&mut w, 0, &v).unwrap();
        let mut back = [Wide([0; 256]); 2];
        dev.read_buffer(&mut w, 0, &mut back).unwrap();
        assert_eq!(back, v);
        // Staged: a Rust kernel reports the address it was given.
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(1));
        let s2 = std::sync::Arc::clone(&seen);
        let code = sim.register_kernel(runclaim::sim::SimKernel::new(move |k| {
            s2.store(
                k.tensor(1).map_or(1, |t| t.addr),
                std::sync::atomic::Ordering::Relaxed,
            );
            Ok(())
        }));
        let runner = dev.publish(&[Callable::new("k", code)]).unwrap();
        let mut work = Workload::new(runner.code("k").unwrap());
        work.input(&[1u8]).input(&v);
        let run = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut work)
            .unwrap();
        drop(run.launch().unwrap().fence().unwrap().finalize().unwrap());
        assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed) % 256, 0);
        drop(work);
        drop(runner);
        drop((w, pad));
        dev.close().unwrap();
        assert_eq!(sim.stats().live_allocations(), 0);
    });
}

/// A read-back that fails midway through the copy-back leaves the outputs
/// before it written. That is documented, and the run
/// comes back: finalizing it again copies every output.
#[test]
fn a_copy_back_that_fails_midway_can_be_finalized_again() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let runner = dev.publish(&[inc()]).unwrap();
        let (mut y0, mut y1) = ([0u32; 4], [0u32; 4]);
        let mut w = Workload::new(runner.code("inc").unwrap());
        w.input(&[1u32, 2, 3, 4]).output(&mut y0).inout(&mut y1);
        let fenced = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w)
            .unwrap()
            .launch()
            .unwrap()
            .fence()
            .unwrap();
        // The records, y0, then y1: the last read-back fails.
        sim.inject(Fault::FailCall {
            op: Op::CopyFromDevice,
            nth: record_reads(abi) + 2,
        });
        let e = fenced.finalize().unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Driver(_)), "{e}");
        drop(e.into_value().finalize().unwrap());
        drop(w);
        assert_eq!(y0, [2, 3, 4, 5]);
    });
}

/// A forgotten pipeline ends its borrow of the buffers its workloads bound:
/// host access then waits for its runs (observing them) and reads what
/// they wrote; the device's close settles everything and leaks nothing.
#[test]
fn host_access_after_a_forgotten_pipeline_waits_for_its_runs() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<3>(&sim, abi);
        let mut h = dev.alloc_buffer::<u32>(4).unwrap();
        dev.write_buffer(&mut h, 0, &[0; 4]).unwrap();
        {
            let runner = dev.publish(&[inc()]).unwrap();
            let f = runner.code("inc").unwrap();
            let mut pipe = Pipeline::<_, 3, u8>::new(&runner).unwrap();
            for k in 0..3u32 {
                let mut w = Workload::new(f);
                w.owned(vec![k * 10; 4], Dir::In)
                    .buffer(h.slice(0..4), Dir::Out);
                pipe.submit(w, 0).unwrap();
            }
            std::mem::forget(pipe); // three runs in flight, nobody to fence them
            assert_eq!(
                sim.stats().aicore_kernels,
                0,
                "the stepped device ran none yet"
            );
        }
        let mut back = [0u32; 4];
        dev.read_buffer(&mut h, 0, &mut back).unwrap();
        assert_eq!(back, [21; 4], "the last run's value, in stream order");
        drop(h);
        dev.close().unwrap();
        assert_eq!(sim.stats().live_allocations(), 0);
    });
}

/// On the over-aligned allocation path, a refused free of the first
/// (misaligned) allocation once leaked it while `close` reported success. It is kept and freed later.
#[test]
fn a_refused_free_on_the_padded_path_is_retried_not_leaked() {
    each(|abi| {
        #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
        #[repr(C, align(128))]
        struct Wide([u8; 128]);
        let sim = abi.stepped(SimConfig::default());
        let dev = device::<2>(&sim, abi);
        let pad = dev.alloc_buffer::<u8>(1).unwrap(); // the next address is 64-, not 128-aligned
        sim.inject(Fault::FailCall {
            op: Op::Free,
            nth: 1,
        });
        let wide = dev.alloc_buffer::<Wide>(2).unwrap();
        assert_eq!(wide.addr().raw() % 128, 0);
        drop((wide, pad));
        dev.close().unwrap();
        assert_eq!(sim.stats().live_allocations(), 0, "nothing leaked");
    });
}

/// A workload run leaves no `u32` output to chain on: `Input::Previous`
/// after it is refused at launch, and the prepared run comes back.
#[test]
fn a_workload_run_ends_the_previous_chain() {
    each(|abi| {
        use runclaim::{Input, RunSpec};
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let mut y = [0u32; 1];
        let mut w = Workload::new(f);
        w.input(&[1u32]).output(&mut y);
        let a = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w)
            .unwrap();
        let a = a.launch().unwrap();
        let b = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                RunSpec::new(f, Input::Previous),
            )
            .unwrap();
        let e = b.launch().unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::NoChainValue);
        assert!(
            e.into_value().is_some(),
            "nothing was submitted: the run comes back"
        );
        drop(a.fence().unwrap().finalize().unwrap());
    });
}

/// A workload that borrows a host output gives the borrow back at its last
/// use, not at the end of its scope: it has no destructor that could still
/// touch the output. (This test is a compile check: with a `Drop` on the
/// workload, reading `y` below while `work` is in scope is E0502.)
#[test]
fn a_workload_gives_its_borrows_back_at_its_last_use() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut dev = device::<2>(&sim, Abi::Runclaim);
    let runner = dev.publish(&[inc()]).unwrap();
    let mut y = [0u32; 3];
    let mut work = Workload::new(runner.code("inc").unwrap());
    work.input(&[1u32, 2, 3]).output(&mut y);
    let token = runner.take_slot::<0>().unwrap();
    let run = runner.prepare(token, &mut work).unwrap().launch().unwrap();
    drop(run.fence().unwrap().finalize().unwrap());
    assert_eq!(y, [2, 3, 4], "read while `work` is still in scope");
}

/// One lane, both kinds in turn: a workload's run, then a `RunSpec`'s in
/// the same slot (depth 2: runs 0 and 2 share lane 0). Each result carries
/// its own kind — the workload with the first, values and no workload with
/// the second — so no workload outlives its run in the lane.
#[test]
fn a_lane_hands_a_workload_back_once_and_never_to_the_next_run() {
    each(|abi| {
        let sim = abi.stepped(SimConfig::default());
        let mut dev = device::<2>(&sim, abi);
        let runner = dev.publish(&[inc()]).unwrap();
        let f = runner.code("inc").unwrap();
        let mut pipe = Pipeline::new(&runner).unwrap();
        let mut w = Workload::new(f);
        w.owned(vec![1u32; 4], Dir::In)
            .owned(vec![0u32; 4], Dir::Out);
        pipe.submit(w, 0).unwrap();
        pipe.submit(runclaim::RunSpec::new(f, runclaim::Input::Host(&[5])), 1)
            .unwrap();
        let a = pipe.complete().unwrap().expect("run 0");
        let w = a.work.expect("run 0 is a workload's");
        assert!(a.values.is_empty());
        assert_eq!(w.get::<u32>(1).ok(), Some(&[2; 4][..]));
        pipe.submit(runclaim::RunSpec::new(f, runclaim::Input::Host(&[7])), 2)
            .unwrap(); // lane 0 again
        let b = pipe.complete().unwrap().expect("run 1");
        assert_eq!((b.tag, b.values, b.work.is_none()), (1, &[6][..], true));
        let c = pipe.complete().unwrap().expect("run 2");
        assert_eq!((c.tag, c.values, c.work.is_none()), (2, &[8][..], true));
        assert!(pipe.complete().unwrap().is_none());
    });
}
