//! Refilling a workload in place: every part of it — a scalar by index, a
//! host tensor re-pointed, a device buffer or slice re-pointed, an owned
//! tensor swapped — keeps what the tensor is (its kind, element type and
//! direction), hands back what it refuses, and the refilled workload runs
//! as a freshly built one would, run after run. Tensors are named by typed
//! id (another workload's refused, `ForeignTensor`) or by index (index
//! and type checked: `NoTensor`, `TensorMismatch`), accessors and refills
//! alike.

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

/// Another workload's id is refused by every accessor and refill
/// (`ForeignTensor`, what it was given handed back), and `work[id]`
/// panics on it — though this workload has a tensor of that index and
/// type. Negative control: the same index, given bare, reads this
/// workload's tensor — what an id without its workload's identity would
/// have done, silently.
#[test]
fn another_workloads_id_is_refused_not_read_as_this_workloads_tensor() {
    let mut dev = device();
    let (buf, mut scratch, mut other) = (
        dev.alloc_buffer::<u32>(4).unwrap(),
        dev.alloc_scratch::<u32>(1).unwrap(),
        dev.alloc_scratch::<u32>(1).unwrap(),
    );
    let set = dev.alloc_per_slot::<u32>(2).unwrap();
    let runner = dev.publish(&[inc()]).unwrap();
    let code = runner.code("inc").unwrap();
    let (xs, mut ys) = ([1u32, 2], [0u32; 2]);
    let mut a = Workload::new(code);
    let ids_a = (
        a.add_owned(vec![1u32, 2], Dir::InOut),
        a.add_input(&xs),
        a.add_buffer(&buf, Dir::In),
        a.add_per_slot(&set, Dir::In),
    );
    let (mut ys_b, init) = ([0u32; 2], [0u32]);
    let mut b = Workload::new(code);
    b.owned(vec![7u32, 8], Dir::InOut)
        .input(&xs)
        .buffer(&buf, Dir::In)
        .per_slot(&set, Dir::In)
        .output(&mut ys_b);
    let scratch_b = b.add_scratch(&mut scratch, &init);
    let (owned, input, device_buf, per_slot) = ids_a;
    let foreign = |e: &ErrorKind, t: usize| *e == ErrorKind::ForeignTensor { tensor: t };
    // Accessors.
    let e = b.get(owned).unwrap_err();
    assert!(foreign(e.kind(), 0), "{e}");
    assert_eq!(e.action(), Action::Access);
    assert!(foreign(b.get_mut(owned).unwrap_err().kind(), 0));
    assert!(foreign(b.take(owned).unwrap_err().kind(), 0));
    let e = b.replace(owned, vec![9u32]).unwrap_err();
    assert!(foreign(e.kind(), 0));
    assert_eq!(e.action(), Action::Refill);
    assert_eq!(e.into_value(), [9], "the vector comes back");
    // Refills.
    let e = b.set_input(input, &xs).unwrap_err();
    assert!(foreign(e.kind(), 1), "{e}");
    assert!(foreign(
        b.set_buffer(device_buf, &buf).unwrap_err().kind(),
        2
    ));
    // The id is checked before the slice: a foreign id with a slice past
    // the buffer is still `ForeignTensor`, not `BufferRange`.
    let past = buf.slice(0..buf.len() + 1);
    assert!(foreign(
        b.set_buffer(device_buf, past).unwrap_err().kind(),
        2
    ));
    assert!(foreign(
        b.set_per_slot(per_slot, &set).unwrap_err().kind(),
        3
    ));
    let e = b.set_output(input, &mut ys).unwrap_err();
    assert!(foreign(e.kind(), 1));
    e.into_value()[0] = 5; // the slice, handed back
    let e = a.set_scratch(scratch_b, &mut other, &init).unwrap_err();
    assert!(foreign(e.kind(), 5), "{e}");
    // `work[id]`: the documented panic, naming why.
    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b[owned][0]));
    let message = panic.expect_err("another workload's id panics");
    let message = message
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(message.contains("another workload's"), "{message}");
    assert_eq!(a[owned], [1, 2], "the id's own workload reads it");
    // Negative control: the bare index names `b`'s own tensor 0.
    assert_eq!(b.get::<u32>(owned.id().index()).unwrap(), [7, 8]);
    // Nothing refused changed `b`: it runs as built.
    let run = runner.prepare(runner.take_slot::<0>().unwrap(), &mut b);
    drop(
        run.unwrap()
            .launch()
            .unwrap()
            .fence()
            .unwrap()
            .finalize()
            .unwrap(),
    );
    assert_eq!(b.get::<u32>(0).unwrap(), [8, 9]);
    drop(b);
    assert_eq!((ys, ys_b), ([5, 0], [0, 0]), "the program wrote tensor 0");
}

/// An id is its workload's for ever: across a pipeline's submit and
/// complete (the workload moves), and never another's — not even a
/// workload that has handed out no id yet, nor one with the same tensors.
#[test]
fn ids_follow_their_workload_through_a_pipeline_and_no_other() {
    let mut dev = device();
    let runner = dev.publish(&[inc()]).unwrap();
    let code = runner.code("inc").unwrap();
    let mut pipe = Pipeline::<_, 2, u32>::new(&runner).unwrap();
    let (mut w, mut twin) = (Workload::new(code), Workload::new(code));
    let x = w.add_owned(vec![0u32; 3], Dir::In);
    let y = w.add_owned(vec![0u32; 3], Dir::Out);
    let (tx, ty) = (
        twin.add_owned(vec![0u32; 3], Dir::In),
        twin.add_owned(vec![0u32; 3], Dir::Out),
    );
    assert_eq!(
        (x.id().index(), y.id().index()),
        (tx.id().index(), ty.id().index())
    );
    assert_ne!(x, tx, "same index and type, another workload");
    let mut plain = Workload::new(code);
    plain.owned(vec![0u32; 3], Dir::In);
    assert_eq!(
        plain.get(x).unwrap_err().kind(),
        &ErrorKind::ForeignTensor { tensor: 0 },
        "a workload that handed out no id takes none"
    );
    for step in 1..5u32 {
        w[x].fill(step);
        pipe.submit(w, step).unwrap();
        let done = pipe.complete().unwrap().expect("pending");
        w = done.work.expect("the workload comes back");
        assert_eq!(w[y], [step + 1; 3]);
        assert!(twin.get(y).is_err() && w.get(ty).is_err());
    }
}

/// Index-and-type access answers why it has nothing, as the refills do:
/// `NoTensor` past the tensors, `TensorMismatch` for a tensor that is not
/// owned or holds another element type — where it answered a bare `None`
/// for all three. Control: the right index and type read the tensor.
#[test]
fn index_and_type_access_says_which_of_index_kind_and_type_is_wrong() {
    let mut dev = device();
    let runner = dev.publish(&[inc()]).unwrap();
    let mut w = Workload::new(runner.code("inc").unwrap());
    w.input(&[1u32]).owned(vec![4u32, 5], Dir::InOut);
    let no = ErrorKind::NoTensor { index: 5, count: 2 };
    let of_type = ErrorKind::TensorMismatch {
        tensor: 1,
        is: "of another element type",
    };
    let not_owned = ErrorKind::TensorMismatch {
        tensor: 0,
        is: "a host input",
    };
    assert_eq!(kind(&w.get::<u32>(5).unwrap_err()), no);
    assert_eq!(kind(&w.get::<f32>(1).unwrap_err()), of_type);
    assert_eq!(kind(&w.get::<u32>(0).unwrap_err()), not_owned);
    assert_eq!(kind(&w.get_mut::<u32>(5).unwrap_err()), no);
    assert_eq!(kind(&w.get_mut::<f32>(1).unwrap_err()), of_type);
    assert_eq!(kind(&w.get_mut::<u32>(0).unwrap_err()), not_owned);
    assert_eq!(kind(&w.take::<u32>(5).unwrap_err()), no);
    assert_eq!(kind(&w.take::<f32>(1).unwrap_err()), of_type);
    assert_eq!(kind(&w.take::<u32>(0).unwrap_err()), not_owned);
    assert_eq!(w.get::<u32>(5).unwrap_err().action(), Action::Access);
    // The deprecated names answer the same.
    #[allow(deprecated, reason = "the old names, kept for a release")]
    {
        assert_eq!(kind(&w.owned_at::<f32>(1).unwrap_err()), of_type);
        assert_eq!(kind(&w.owned_mut::<u32>(0).unwrap_err()), not_owned);
        assert_eq!(kind(&w.take_owned::<u32>(5).unwrap_err()), no);
        assert_eq!(w.replace_owned(1, vec![6u32]).unwrap(), [4, 5]);
        assert_eq!(w.owned_at::<u32>(1).unwrap(), [6]);
    }
    // Control: the right index and type.
    w.get_mut::<u32>(1).unwrap()[0] = 9;
    assert_eq!(w.get::<u32>(1).unwrap(), [9]);
    assert_eq!(w.take::<u32>(1).unwrap(), [9]);
    assert!(
        w.get::<u32>(1).unwrap().is_empty(),
        "taken: an empty one left"
    );
}

/// Every refill by id computes what the same refill by index does:
/// workloads built with the id-returning builders, each tensor re-pointed
/// by its id, run as freshly built ones would (a `Program` computes from
/// the first tensor it may read into the first it may write).
#[test]
#[allow(
    clippy::many_single_char_names,
    reason = "x, y, a, b, w: the tensors, the buffers and the workload"
)]
fn every_refill_takes_an_id_and_computes_what_a_fresh_workload_would() {
    let mut dev = device();
    let (a, mut b) = (
        dev.alloc_buffer::<u32>(4).unwrap(),
        dev.alloc_buffer::<u32>(4).unwrap(),
    );
    let runner = dev.publish(&[inc()]).unwrap();
    let code = runner.code("inc").unwrap();
    let run = |w: &mut Workload<'_>| {
        let run = runner.prepare(runner.take_slot::<0>().unwrap(), w);
        drop(
            run.unwrap()
                .launch()
                .unwrap()
                .fence()
                .unwrap()
                .finalize()
                .unwrap(),
        );
    };
    let (x0, x1) = ([1u32, 2], [10u32, 20, 30]);
    // An input and a device buffer, re-pointed by id.
    let mut w = Workload::new(code);
    let x = w.add_input(&x0);
    let out = w.add_buffer(a.slice(0..2), Dir::Out);
    w.set_input(x, &x1).unwrap();
    w.set_buffer(out, b.slice(1..4)).unwrap();
    run(&mut w);
    drop(w);
    let mut back = [0u32; 4];
    runner.device().read_buffer(&mut b, 0, &mut back).unwrap();
    assert_eq!(back, [0, 11, 21, 31]);
    // A host output, re-pointed by id.
    let (mut y0, mut y1) = ([0u32; 2], [0u32; 3]);
    let mut w = Workload::new(code);
    w.input(&x1);
    let y = w.add_output(&mut y0);
    w.set_output(y, &mut y1).unwrap();
    run(&mut w);
    drop(w);
    assert_eq!((y0, y1), ([0, 0], [11, 21, 31]));
    // Owned tensors, swapped and refilled by id.
    let mut w = Workload::new(code);
    let x = w.add_owned(vec![0u32; 2], Dir::In);
    let y = w.add_owned(vec![0u32; 2], Dir::Out);
    assert_eq!(w.replace(x, vec![5u32, 6, 7]).unwrap(), [0, 0]);
    w.replace(y, vec![0u32; 3]).unwrap();
    run(&mut w);
    assert_eq!(w[y], [6, 7, 8]);
    w[x].fill(1);
    run(&mut w);
    assert_eq!(w.take(y).unwrap(), [2, 2, 2]);
}
