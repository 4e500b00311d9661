//! Own what you publish: code a device published stays that code
//! while its runner lives, even when other devices share the NPU (a clone
//! of the simulator is a second owner of the same device) or code is
//! registered through `Device::driver()` directly.
//!
//! Three layers keep it, each shown here with a negative control that turns
//! it off and lets a value check catch the wrong result:
//! 1. **pins** — a publication pins its uploads; nobody can evict them;
//! 2. **upload stamps** — a launch names an upload, not an address: a
//!    replaced upload is refused, never run;
//! 3. **code epochs** — code uploaded by anyone after the AICore stream was
//!    created (reached by a dedup hit, or uploaded while runs are queued)
//!    makes the stream stale: the next launch replaces it, so its stale
//!    instruction cache is never used for that code.
//!
//! Every scenario runs under both built-in kernel ABIs
//! (`common::abi::each`): runclaim's layout and the a2a3 layout.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::LaunchIn;
use common::abi::{Abi, each};
use common::hooked::Hooked;
use runclaim::contract::ErrorKind;
use runclaim::driver::abi::Program;
use runclaim::driver::{Driver, HandleKind};
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Callable, Device, Input};

fn sim(abi: Abi, code_slots: usize) -> SimDriver {
    abi.stepped(
        SimConfig::default()
            .code_slots(code_slots)
            .watchdog(Duration::from_millis(2)),
    )
}

/// Program `k`: `x * (k + 2) + k`, all distinct.
fn program(k: u32) -> Program {
    Program::new().mul(k + 2).add(k)
}

fn callable(name: &str, k: u32) -> Callable {
    Callable::program(name, &program(k))
}

fn expect(k: u32, input: &[u32]) -> Vec<u32> {
    let p = program(k);
    input.iter().map(|&x| p.apply_lossy(x)).collect()
}

/// Device A publishes `x` and keeps its runner; device B, on the same
/// NPU, publishes and runs `others` programs one after the other; then A
/// runs `x`. Returns what went wrong, if anything (every value is checked).
/// (Both drivers speak `abi`.)
fn a_keeps_its_code_while_b_publishes(
    abi: Abi,
    a_driver: impl Driver,
    b_driver: SimDriver,
    others: u32,
) -> Result<(), String> {
    let mut a = Device::<_, 2>::open(a_driver, abi.config()).unwrap();
    let mut b = Device::<_, 2>::open(b_driver, abi.config()).unwrap();
    let ra = a
        .publish(&[Callable::program("x", &Program::new().add(1000))])
        .unwrap();
    let x = ra.code("x").unwrap();
    if ra.serial::<0>(x, Input::Host(&[1, 2, 3])) != [1001, 1002, 1003] {
        return Err("A's first run".into());
    }
    for k in 0..others {
        let rb = match b.publish(&[callable("y", k)]) {
            Ok(rb) => rb,
            Err(e) => return Err(format!("B's publication {k}: {e}")),
        };
        let got = rb.serial::<0>(rb.code("y").unwrap(), Input::Host(&[5, 6]));
        if got != expect(k, &[5, 6]) {
            return Err(format!("B's program {k} computed {got:?}"));
        }
        // A runs between B's publications too.
        let mut out = runclaim::Outputs::<1>::new(3);
        let spec = runclaim::RunSpec::new(x, Input::Host(&[7, 8, 9]));
        match ra.run_serial(ra.take_slot::<1>().unwrap(), spec, &mut out) {
            Ok(_) if out.values() == [1007, 1008, 1009] => {}
            Ok(_) => {
                return Err(format!(
                    "A computed {:?} after B's program {k}",
                    out.values()
                ));
            }
            Err(e) => return Err(format!("A's run after B's program {k}: {e}")),
        }
    }
    let mut out = runclaim::Outputs::<0>::new(3);
    let spec = runclaim::RunSpec::new(x, Input::Host(&[1, 2, 3]));
    match ra.run_serial(ra.take_slot::<0>().unwrap(), spec, &mut out) {
        Ok(_) if out.values() == [1001, 1002, 1003] => Ok(()),
        Ok(_) => Err(format!("A computed {:?}, B's program", out.values())),
        Err(e) => Err(format!("A's last run: {e}")),
    }
}

/// Sixteen code slots: B's programs never evict A's pinned `x`.
#[test]
fn two_devices_on_one_npu_sixteen_slots_every_value_right() {
    each(|abi| {
        let s = sim(abi, 16);
        a_keeps_its_code_while_b_publishes(abi, s.clone(), s.clone(), 40).unwrap();
        assert_eq!(s.stats().stale_executions, 0);
    });
}

/// One code slot: A's pinned `x` holds it, so B's publication is refused,
/// naming the capacity — A's values stay right — and once A is closed, B
/// can publish.
#[test]
fn two_devices_on_one_npu_one_slot_refuses_instead_of_evicting() {
    each(|abi| {
        let s = sim(abi, 1);
        let err = a_keeps_its_code_while_b_publishes(abi, s.clone(), s.clone(), 1).unwrap_err();
        assert!(
            err.contains("do not fit in device code memory (1 images"),
            "{err}"
        );
        let mut a = Device::<_, 2>::open(s.clone(), abi.config()).unwrap();
        let mut b = Device::<_, 2>::open(s.clone(), abi.config()).unwrap();
        {
            let ra = a.publish(&[callable("x", 1)]).unwrap();
            let e = b.publish(&[callable("y", 2)]).unwrap_err();
            assert_eq!(e.kind(), &ErrorKind::CodeDoesNotFit { capacity: 1 });
            assert_eq!(
                ra.serial::<0>(ra.code("x").unwrap(), Input::Host(&[3])),
                expect(1, &[3])
            );
        }
        a.close().unwrap(); // releases A's pin
        let rb = b.publish(&[callable("y", 2)]).unwrap();
        assert_eq!(
            rb.serial::<0>(rb.code("y").unwrap(), Input::Host(&[3])),
            expect(2, &[3])
        );
        assert_eq!(s.stats().stale_executions, 0);
    });
}

/// Code registered straight through `Device::driver()` while a runner
/// lives is another owner's code: it cannot evict the runner's.
#[test]
fn registering_through_the_driver_cannot_replace_published_code() {
    each(|abi| {
        for slots in [1, 16] {
            let s = sim(abi, slots);
            let mut dev = Device::<_, 2>::open(s.clone(), abi.config()).unwrap();
            let runner = dev.publish(&[callable("x", 3)]).unwrap();
            let x = runner.code("x").unwrap();
            let mut refused = 0;
            for k in 10..40 {
                match runner.device().driver().register_code(&program(k).encode()) {
                    // The caller's own pin, released at once: evictable later.
                    Ok(r) => runner.device().driver().release_code(r.handle).unwrap(),
                    Err(e) => {
                        assert_eq!(
                            e.kind(),
                            &runclaim::driver::DriverErrorKind::CodeMemoryFull { capacity: 1 }
                        );
                        refused += 1;
                    }
                }
                assert_eq!(
                    runner.serial::<0>(x, Input::Host(&[k])),
                    expect(3, &[k]),
                    "slots {slots}"
                );
            }
            assert_eq!(refused, if slots == 1 { 30 } else { 0 });
            assert_eq!(s.stats().stale_executions, 0);
        }
    });
}

/// Negative control for layers 1 and 2: a driver that ignores pins *and*
/// launches whatever is resident at the address. The same scenario then
/// runs B's program through A's `CodeRef` — and the value check catches it.
#[test]
fn negative_control_without_pins_or_upload_check_a_computes_bs_program() {
    each(|abi| {
        let s = sim(abi, 1);
        let a = Hooked::new(s.clone());
        a.hooks.ignore_pins.store(true, Ordering::SeqCst);
        a.hooks.launch_resident.store(true, Ordering::SeqCst);
        let b = Hooked::new(s.clone());
        b.hooks.ignore_pins.store(true, Ordering::SeqCst);
        let err = a_keeps_its_code_while_b_publishes(abi, a, s.clone(), 1).unwrap_err();
        assert!(
            err.starts_with("A computed"),
            "the value check must catch it: {err}"
        );
    });
}

/// Layer 2 alone: without pins, B evicts A's code — but A's launch names
/// the evicted upload and is refused: an error, never B's program.
#[test]
fn without_pins_the_upload_check_refuses_instead_of_running_other_code() {
    each(|abi| {
        let npu = sim(abi, 1);
        let unpinned = Hooked::new(npu.clone());
        unpinned.hooks.ignore_pins.store(true, Ordering::SeqCst);
        let mut a = Device::<_, 2>::open(unpinned, abi.config()).unwrap();
        let mut b = Device::<_, 2>::open(npu.clone(), abi.config()).unwrap();
        let ra = a
            .publish(&[Callable::program("x", &Program::new().add(1000))])
            .unwrap();
        let x = ra.code("x").unwrap();
        assert_eq!(ra.serial::<0>(x, Input::Host(&[1])), [1001]);
        let rb = b.publish(&[callable("y", 1)]).unwrap(); // evicts x: nothing pins it
        assert_eq!(
            rb.serial::<0>(rb.code("y").unwrap(), Input::Host(&[1])),
            expect(1, &[1])
        );
        let err = ra
            .prepare(
                ra.take_slot::<0>().unwrap(),
                runclaim::RunSpec::new(x, Input::Host(&[1])),
            )
            .unwrap()
            .launch()
            .unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::Driver(d) if matches!(d.kind(), runclaim::driver::DriverErrorKind::BadHandle { kind: HandleKind::Code, .. })),
            "{err}"
        );
        assert!(
            err.value().is_some(),
            "nothing was submitted: the run comes back"
        );
    });
}

/// Layer 3: A's AICore stream cached code `z` at an address; B replaces
/// `z` there with `y`; A then publishes `y` — a dedup hit on B's upload, not
/// a publication of A's — and must still re-create its stream, or it would
/// compute with the stale `z`.
fn foreign_upload_reached_by_a_dedup_hit(
    abi: Abi,
    a_driver: impl Driver,
    s: &SimDriver,
) -> Vec<u32> {
    let mut a = Device::<_, 2>::open(a_driver, abi.config()).unwrap();
    let mut b = Device::<_, 2>::open(s.clone(), abi.config()).unwrap();
    // Two slots: B's z, then A's x beside it; A's stream is created at its
    // first launch and caches both.
    drop(b.publish(&[callable("z", 5)]).unwrap()); // z's pin stays until B's next publication
    let ra = a.publish(&[callable("x", 6)]).unwrap();
    assert_eq!(
        ra.serial::<0>(ra.code("x").unwrap(), Input::Host(&[2])),
        expect(6, &[2])
    );
    drop(ra);
    // B's next publication unpins z, and y replaces it (x is A's, pinned).
    let rb = b.publish(&[callable("y", 7)]).unwrap();
    assert_eq!(
        rb.serial::<0>(rb.code("y").unwrap(), Input::Host(&[2])),
        expect(7, &[2])
    );
    let ra = a.publish(&[callable("y", 7)]).unwrap(); // dedup: no upload of A's
    ra.serial::<0>(ra.code("y").unwrap(), Input::Host(&[2]))
}

#[test]
fn a_dedup_hit_on_a_foreign_upload_renews_the_stream() {
    each(|abi| {
        let s = sim(abi, 2);
        assert_eq!(
            foreign_upload_reached_by_a_dedup_hit(abi, s.clone(), &s),
            expect(7, &[2])
        );
        assert_eq!(s.stats().stale_executions, 0);
    });
}

/// Layer 3 with a run still queued: an upload by another device while A
/// has a run launched makes A's AICore stream stale. A's next launch moves
/// to a fresh stream without destroying the busy one, and orders the fresh
/// stream behind it: the second run's AICore kernel starts only after the
/// first run's has finished — AICore kernels still run one at a time, in
/// launch order, across the switch.
#[test]
fn a_foreign_upload_with_a_run_queued_keeps_aicore_kernels_in_order() {
    each(|abi| {
        use runclaim::sim::trace::{TaskTag, TraceKind};
        let s = sim(abi, 3);
        let mut a = Device::<_, 2>::open(s.clone(), abi.config()).unwrap();
        let mut b = Device::<_, 2>::open(s.clone(), abi.config()).unwrap();
        let ra = a.publish(&[callable("x", 6)]).unwrap();
        let x = ra.code("x").unwrap();
        let first = ra.launched::<0>(x, Input::Host(&[2]));
        let renewed = ra.device().stats().aicore_recreations;
        drop(b.publish(&[callable("y", 7)]).unwrap()); // newer than A's stream
        let second = ra.launched::<1>(x, Input::Host(&[3]));
        assert_eq!(
            ra.device().stats().aicore_recreations,
            renewed + 1,
            "the stale stream was replaced with a run on it"
        );
        let (id1, id2) = (first.id().get(), second.id().get());
        let mut out1 = runclaim::Outputs::<1>::new(1);
        second.fence().unwrap().finalize(&mut out1).unwrap();
        let mut out0 = runclaim::Outputs::<0>::new(1);
        first.fence().unwrap().finalize(&mut out0).unwrap();
        assert_eq!(
            (out0.values(), out1.values()),
            (&expect(6, &[2])[..], &expect(6, &[3])[..])
        );
        let trace = s.trace();
        let at = |run: u64, what: TraceKind| {
            trace
                .iter()
                .position(|t| t.run == run && t.what == what)
                .unwrap_or_else(|| panic!("run {run}: no {what:?} in the trace"))
        };
        assert!(
            at(id1, TraceKind::Finished(TaskTag::Aicore))
                < at(id2, TraceKind::Started(TaskTag::Aicore)),
            "run {id2}'s AICore kernel overlapped run {id1}'s"
        );
        let s = s.stats();
        assert_eq!((s.stale_executions, s.busy_destroy_refused), (0, 0));
    });
}

/// Negative control for layer 3: a driver whose code epoch claims no
/// upload is ever newer than a stream. A keeps its stream, computes with
/// the stale `z`, and the value check catches it.
#[test]
fn negative_control_without_code_epochs_the_stale_stream_computes_wrong() {
    each(|abi| {
        let s = sim(abi, 2);
        let a = Hooked::new(s.clone());
        a.hooks.epoch_lie.store(true, Ordering::SeqCst);
        let got = foreign_upload_reached_by_a_dedup_hit(abi, a, &s);
        assert_eq!(got, expect(5, &[2]), "z's values: stale instructions");
        assert_ne!(got, expect(7, &[2]));
        assert_eq!(s.stats().stale_executions, 1);
    });
}

/// The trust boundary of `Device::driver()`: destroying or unpinning the
/// device's own resources through it is an error at the next transition —
/// never a wrong value, never undefined behaviour (handles are validated).
#[test]
fn tampering_through_the_driver_is_an_error_never_a_wrong_value() {
    each(|abi| {
        let s = sim(abi, 1);
        let mut dev = Device::<_, 2>::open(s.clone(), abi.config()).unwrap();
        let runner = dev.publish(&[callable("x", 4)]).unwrap();
        let x = runner.code("x").unwrap();
        assert_eq!(runner.serial::<0>(x, Input::Host(&[1])), expect(4, &[1]));
        let d = runner.device().driver();
        // Releasing the device's pin (a handle it hands out) makes the code
        // evictable; other code then replaces it; the launch is refused.
        d.release_code(x.handle()).unwrap();
        let other = d.register_code(&program(9).encode()).unwrap();
        assert!(other.published);
        let err = runner
            .prepare(
                runner.take_slot::<0>().unwrap(),
                runclaim::RunSpec::new(x, Input::Host(&[1])),
            )
            .unwrap()
            .launch()
            .unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Driver(_)), "{err}");
        drop(err);
        // Destroying the device's streams (found by forging: the simulator
        // lists every stream) fails the next launch with an error too.
        for st in s.streams() {
            let _ = d.destroy_stream(st);
        }
        d.release_code(other.handle).unwrap();
        let err = runner
            .prepare(
                runner.take_slot::<1>().unwrap(),
                runclaim::RunSpec::new(x, Input::Host(&[1])),
            )
            .unwrap()
            .launch()
            .unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Driver(_)), "{err}");
        assert_eq!(s.stats().stale_executions, 0);
    });
}
