//! Refilling a workload in place: every part of it — a scalar by index, a
//! host tensor re-pointed, a device buffer or slice re-pointed, an owned
//! tensor swapped — keeps what the tensor is (its kind, element type and
//! direction), hands back what it refuses, and the refilled workload runs
//! as a freshly built one would, run after run.

use runclaim::contract::{Action, ErrorKind};
use runclaim::driver::abi::{Dir, Program};
use runclaim::sim::{SimConfig, SimDriver};
use runclaim::{Callable, Device, DeviceConfig, Pipeline, Workload};

fn device() -> Device<SimDriver, 2> {
    Device::open(
        SimDriver::stepped(SimConfig::default()),
        DeviceConfig::default(),
    )
    .unwrap()
}

fn kind<T>(e: &runclaim::Error<T>) -> ErrorKind {
    e.kind().clone()
}

fn inc() -> Callable {
    Callable::program("inc", &Program::new().add(1))
}

#[test]
#[allow(
    clippy::many_single_char_names,
    reason = "x, y, z, w: the tensors and the workload"
)]
fn a_refill_refuses_what_would_change_a_tensor_and_hands_back_what_it_was_given() {
    let mut dev = device();
    let buf = dev.alloc_buffer::<u32>(4).unwrap();
    let runner = dev.publish(&[inc()]).unwrap();
    let x = [1u32, 2];
    let mut y = [0u32; 2];
    let mut w = Workload::new(runner.code("inc").unwrap());
    w.input(&x)
        .output(&mut y)
        .buffer(&buf, Dir::Out)
        .owned(vec![0u16; 2], Dir::In)
        .scalar(5);
    // Indices past the workload.
    let e = w.set_scalar(1, 9).unwrap_err();
    assert_eq!(kind(&e), ErrorKind::NoScalar { index: 1, count: 1 });
    assert_eq!(e.action(), Action::Refill);
    let e = w.set_input(4, &x).unwrap_err();
    assert_eq!(kind(&e), ErrorKind::NoTensor { index: 4, count: 4 });
    // Another kind of tensor, another element type.
    let e = w.set_input(1, &x).unwrap_err();
    assert!(matches!(
        kind(&e),
        ErrorKind::TensorMismatch {
            tensor: 1,
            is: "a host output"
        }
    ));
    let e = w.set_input(0, &[1.0f32]).unwrap_err();
    assert!(
        matches!(kind(&e), ErrorKind::TensorMismatch { tensor: 0, .. }),
        "{e}"
    );
    let e = w.set_buffer(0, &buf).unwrap_err();
    assert!(matches!(
        kind(&e),
        ErrorKind::TensorMismatch {
            tensor: 0,
            is: "a host input"
        }
    ));
    // What it refuses comes back.
    let mut z = [7u32; 3];
    let back = w.set_output(0, &mut z).unwrap_err().into_value();
    back[0] = 8; // the caller's slice, usable again
    let e = w.replace(3, vec![1u8; 2]).unwrap_err();
    assert!(matches!(
        kind(&e),
        ErrorKind::TensorMismatch { tensor: 3, .. }
    ));
    assert_eq!(e.into_value(), vec![1u8; 2]);
    let e = w.replace(0, vec![1u32; 2]).unwrap_err();
    assert!(matches!(
        kind(&e),
        ErrorKind::TensorMismatch {
            tensor: 0,
            is: "a host input"
        }
    ));
    // A slice outside its buffer is refused at once.
    let e = w.set_buffer(2, buf.slice(2..9)).unwrap_err();
    assert!(matches!(
        kind(&e),
        ErrorKind::BufferRange {
            tensor: 2,
            len: 4,
            ..
        }
    ));
    // Nothing refused changed the workload: it runs as built.
    let done = runner.prepare(runner.take_slot::<0>().unwrap(), &mut w);
    drop(
        done.unwrap()
            .launch()
            .unwrap()
            .fence()
            .unwrap()
            .finalize()
            .unwrap(),
    );
    assert_eq!(w.scalar_count(), 1);
    drop(w);
    assert_eq!((y, z), ([2, 3], [8, 7, 7]));
}

#[test]
fn one_workload_refilled_run_after_run_computes_what_a_new_one_would() {
    let mut dev = device();
    let (mut a, mut b) = (
        dev.alloc_buffer::<u32>(8).unwrap(),
        dev.alloc_buffer::<u32>(8).unwrap(),
    );
    let runner = dev.publish(&[inc()]).unwrap();
    let inputs: Vec<Vec<u32>> = (0..6)
        .map(|k| (0..=k).map(|i| 10 * k + i).collect())
        .collect();
    let mut w = Workload::new(runner.code("inc").unwrap());
    w.input(&inputs[0])
        .buffer(a.slice(0..1), Dir::Out)
        .scalar(0);
    for (k, input) in inputs.iter().enumerate() {
        // The input grows each step; the output alternates between two
        // buffers, sized to it; the scalar carries the step.
        w.set_input(0, input).unwrap();
        let out = if k % 2 == 0 { &a } else { &b };
        w.set_buffer(1, out.slice(0..input.len())).unwrap();
        w.set_scalar(0, k as u64).unwrap();
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
    }
    drop(w);
    let (mut back_a, mut back_b) = ([0u32; 8], [0u32; 8]);
    runner.device().read_buffer(&mut a, 0, &mut back_a).unwrap();
    runner.device().read_buffer(&mut b, 0, &mut back_b).unwrap();
    let last = |k: usize| -> Vec<u32> { inputs[k].iter().map(|v| v + 1).collect() };
    assert_eq!(&back_a[..5], &last(4)[..], "step 4 wrote a[..5]");
    assert_eq!(&back_b[..6], &last(5)[..], "step 5 wrote b[..6]");
}

#[test]
fn a_pipeline_reuses_one_workload_for_ever_its_length_changing() {
    let mut dev = device();
    let runner = dev.publish(&[inc()]).unwrap();
    let inc = runner.code("inc").unwrap();
    let mut pipe = Pipeline::<_, 2, usize>::new(&runner).unwrap();
    let mut w = Workload::new(inc);
    w.owned(vec![0u32; 1], Dir::In)
        .owned(vec![0u32; 1], Dir::Out)
        .scalar(0);
    for k in 1..40usize {
        let k32 = u32::try_from(k).unwrap();
        let old = w.replace(0, vec![k32; k % 7 + 1]).unwrap();
        assert!(old.len() <= 7);
        w.replace(1, vec![0u32; k % 7 + 1]).unwrap();
        w.set_scalar(0, k as u64).unwrap();
        pipe.submit(w, k).unwrap();
        let done = pipe.complete().unwrap().expect("pending");
        assert_eq!(done.tag, k);
        w = done.work.expect("a workload's run comes back with it");
        assert_eq!(w.get::<u32>(1).ok(), Some(&vec![k32 + 1; k % 7 + 1][..]));
    }
}
