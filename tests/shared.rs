//! A device many tasks share ([`SharedDevice`]): each submission's result
//! reaches its own submitter, admission is in arrival order, a full device
//! makes `submit` wait and `try_submit` refuse with the work handed back, a
//! cancelled waiter loses no one else's result, a publication settles every
//! outstanding run into its ticket, `Input::Previous` is refused, a close
//! refuses what comes after it, and the last handle's drop pays the device
//! on a thread of its own.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use common::hooked::Hooked;
use runclaim::contract::{Action, Done, ErrorKind, Ticket};
use runclaim::driver::abi::{Dir, Program};
use runclaim::sim::{Fault, Kernel, SimConfig, SimDriver};
use runclaim::{Callable, DeviceConfig, Input, RunSpec, SharedDevice, Workload};

fn f(x: u32) -> u32 {
    x.wrapping_mul(3).wrapping_add(1)
}

fn callables() -> [Callable; 1] {
    [Callable::program("f", &Program::new().mul(3).add(1))]
}

fn shared<const DEPTH: usize>(sim: SimDriver) -> SharedDevice<SimDriver, DEPTH>
where
    runclaim::contract::Depth<DEPTH>: runclaim::contract::SupportedDepth,
{
    let shared = SharedDevice::open(sim, DeviceConfig::default()).unwrap();
    shared.publish(&callables()).unwrap();
    shared
}

fn poll<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

fn spec(shared: &SharedDevice<SimDriver, 2>, x: &[u32]) -> RunSpec<'static> {
    // The input outlives the spec only until its prepare: leaking a few
    // words per test keeps the spec `'static` for the submit futures below.
    let x: &'static [u32] = Vec::leak(x.to_vec());
    RunSpec::new(shared.code("f").unwrap(), Input::Host(x))
}

/// Sixteen threads, one handle each, eight runs each: every result is the
/// submitter's own, and the device's counts add up.
#[test]
fn every_thread_gets_its_own_results() {
    let shared = shared::<4>(SimDriver::real_time(SimConfig::default()));
    let threads: Vec<_> = (0..16u32)
        .map(|t| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let code = shared.code("f").unwrap();
                for k in 0..8u32 {
                    let x = [t * 100 + k, t];
                    let ticket = shared.submit_blocking(RunSpec::new(code, Input::Host(&x)));
                    let done = ticket.unwrap().wait().unwrap();
                    assert_eq!(done.values, [f(x[0]), f(x[1])], "thread {t} run {k}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let h = shared.health();
    assert_eq!((h.in_flight, h.poisoned), (0, None));
    assert_eq!(shared.stats().finalized, 16 * 8);
}

/// Admission is arrival order: a submission that arrived later is not
/// admitted before one waiting ahead of it, even when it is polled first
/// once a slot frees — and launch order (`seq`) is admission order.
#[test]
fn admission_is_in_arrival_order() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let first = shared.try_submit(spec(&shared, &[1])).unwrap();
    let second = shared.try_submit(spec(&shared, &[2])).unwrap();
    let mut third = shared.submit(spec(&shared, &[3]));
    let mut fourth = shared.submit(spec(&shared, &[4]));
    assert!(poll(&mut third).is_pending(), "both slots busy");
    assert!(poll(&mut fourth).is_pending());
    // `first` and `second` finish; `fourth` is polled first, but `third` arrived first.
    sim.run_until_idle(10_000_000).unwrap();
    assert!(poll(&mut fourth).is_pending(), "fourth is not at the head");
    let third = match poll(&mut third) {
        Poll::Ready(t) => t.unwrap(),
        Poll::Pending => panic!("third is at the head and a slot is free"),
    };
    let fourth = match poll(&mut fourth) {
        Poll::Ready(t) => t.unwrap(),
        Poll::Pending => panic!("fourth is at the head now and a slot is free"),
    };
    let seqs: Vec<_> = [first, second, third, fourth]
        .into_iter()
        .map(|t| {
            let done = t.wait().unwrap();
            (done.seq, done.values[0])
        })
        .collect();
    assert!(seqs.windows(2).all(|w| w[0].0 < w[1].0), "{seqs:?}");
    assert_eq!(
        seqs.iter().map(|s| s.1).collect::<Vec<_>>(),
        [f(1), f(2), f(3), f(4)]
    );
}

/// A full device: `try_submit` refuses at once and hands the workload back
/// (its owned tensor intact); earlier arrivals still waiting also make it
/// refuse, so it never jumps the queue.
#[test]
fn try_submit_refuses_a_full_device_and_hands_the_work_back() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let code = shared.code("f").unwrap();
    let _a = shared.try_submit(spec(&shared, &[1])).unwrap();
    let _b = shared.try_submit(spec(&shared, &[2])).unwrap();
    let mut w = Workload::new(code);
    w.owned(vec![7u32, 8], Dir::InOut);
    let e = shared.try_submit(w).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::DepthExhausted { depth: 2 });
    // Refused as a submission: nothing was prepared or launched.
    assert_eq!(e.action(), Action::Submit);
    assert!(e.to_string().starts_with("submit"), "{e}");
    let w = e.into_value();
    assert_eq!(w.get::<u32>(0).ok(), Some(&[7, 8][..]));
    // A waiter ahead: a free slot does not let a try jump it.
    let mut waiting = shared.submit(spec(&shared, &[3]));
    assert!(poll(&mut waiting).is_pending());
    sim.run_until_idle(10_000_000).unwrap();
    let e = shared.try_submit(w).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::DepthExhausted { depth: 2 });
    let w = e.into_value();
    let waiting = match poll(&mut waiting) {
        Poll::Ready(t) => t.unwrap(),
        Poll::Pending => panic!("the head with a free slot"),
    };
    let done = shared.try_submit(w).unwrap().wait().unwrap();
    let w = done.work.expect("a workload's run hands its workload back");
    assert_eq!(w.get::<u32>(0).ok(), Some(&[f(7), f(8)][..]));
    assert_eq!(waiting.wait().unwrap().values, [f(3)]);
}

/// A submission dropped while it waits leaves the queue: the one behind it
/// is admitted, and nothing it held is lost.
#[test]
fn a_cancelled_submission_leaves_the_queue() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let first = shared.try_submit(spec(&shared, &[1])).unwrap();
    let second = shared.try_submit(spec(&shared, &[2])).unwrap();
    let mut third = shared.submit(spec(&shared, &[3]));
    let mut fourth = shared.submit(spec(&shared, &[4]));
    assert!(poll(&mut third).is_pending());
    assert!(poll(&mut fourth).is_pending());
    drop(third);
    sim.run_until_idle(10_000_000).unwrap();
    let fourth = match poll(&mut fourth) {
        Poll::Ready(t) => t.unwrap(),
        Poll::Pending => panic!("third left: fourth is the head"),
    };
    assert_eq!(first.wait().unwrap().values, [f(1)]);
    assert_eq!(second.wait().unwrap().values, [f(2)]);
    assert_eq!(fourth.wait().unwrap().values, [f(4)]);
}

/// A dropped ticket loses only its own result: its run still completes,
/// its slot comes back (a later submission settles it), and every other
/// ticket's result is intact — awaited in any order.
#[test]
fn a_dropped_ticket_loses_only_its_own_result() {
    let sim = SimDriver::real_time(SimConfig::default());
    let shared = shared::<2>(sim);
    for round in 0..20u32 {
        let a = shared.submit_blocking(spec(&shared, &[round])).unwrap();
        let b = shared.submit_blocking(spec(&shared, &[round + 1])).unwrap();
        drop(a);
        // Both slots are owed: this one waits for a slot — `a`'s (its
        // outcome dropped) or `b`'s (its outcome kept for its ticket),
        // whichever its look finds settled first.
        let c = shared.submit_blocking(spec(&shared, &[round + 2])).unwrap();
        assert_eq!(c.wait().unwrap().values, [f(round + 2)]);
        assert_eq!(b.wait().unwrap().values, [f(round + 1)]);
    }
    // The last `a` may still be owed by its lane (complete on the device,
    // not looked at since): the next submission takes it back.
    let last = shared.submit_blocking(spec(&shared, &[7])).unwrap();
    assert_eq!(last.wait().unwrap().values, [f(7)]);
    let h = shared.health();
    assert_eq!((h.in_flight, shared.stats().finalized), (0, 61));
}

/// A dropped ticket's slot comes back at once when its run is already
/// complete, and at the next submission once it is — not only when every
/// slot is busy — so the device's count of runs in flight stays true.
#[test]
fn a_dropped_tickets_slot_comes_back_once_its_run_is_complete() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let a = shared.try_submit(spec(&shared, &[1])).unwrap();
    drop(a); // not complete yet: its lane still owes the run
    assert_eq!(shared.health().in_flight, 1);
    sim.run_until_idle(10_000_000).unwrap();
    let b = shared.try_submit(spec(&shared, &[2])).unwrap();
    assert_eq!(
        shared.health().in_flight,
        1,
        "a's run reclaimed at b's submit"
    );
    sim.run_until_idle(10_000_000).unwrap();
    drop(b); // complete: reclaimed at once
    let h = shared.health();
    assert_eq!((h.in_flight, h.launched.len()), (0, 0));
    assert_eq!(shared.stats().finalized, 2);
}

/// Republication through the handle settles every outstanding run into
/// its ticket first — here with the tickets still held by the publishing
/// thread, which must not deadlock — and the old code's references are
/// refused from then on, the spec handed back.
#[test]
fn republication_settles_outstanding_runs_and_refuses_old_code() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim);
    let old = shared.code("f").unwrap();
    let a = shared
        .try_submit(RunSpec::new(old, Input::Host(&[1])))
        .unwrap();
    let b = shared
        .try_submit(RunSpec::new(old, Input::Host(&[2])))
        .unwrap();
    shared
        .publish(&[Callable::program("f", &Program::new().add(100))])
        .unwrap();
    assert_eq!(shared.health().in_flight, 0, "settled before publishing");
    assert_eq!(b.wait().unwrap().values, [f(2)], "the old code's result");
    assert_eq!(a.wait().unwrap().values, [f(1)]);
    let e = shared
        .try_submit(RunSpec::new(old, Input::Host(&[5])))
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::CodeRepublished);
    assert!(format!("{:?}", e.into_value()).contains("Host([5])"));
    let new = shared.code("f").unwrap();
    let done = shared
        .try_submit(RunSpec::new(new, Input::Host(&[5])))
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(done.values, [105]);
}

/// An awaited publication waits its turn: a submission that arrived before
/// it is admitted (and runs the old code); one after it waits for it.
#[test]
fn a_publication_waits_its_turn_in_the_queue() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let _a = shared.try_submit(spec(&shared, &[1])).unwrap();
    let _b = shared.try_submit(spec(&shared, &[2])).unwrap();
    let mut before = shared.submit(spec(&shared, &[3]));
    assert!(poll(&mut before).is_pending());
    let new = [Callable::program("f", &Program::new().add(100))];
    let mut publication = shared.publish_async(&new);
    assert!(poll(&mut publication).is_pending(), "behind `before`");
    sim.run_until_idle(10_000_000).unwrap();
    assert!(poll(&mut publication).is_pending(), "still behind `before`");
    let before = match poll(&mut before) {
        Poll::Ready(t) => t.unwrap(),
        Poll::Pending => panic!("the head with a free slot"),
    };
    let published = loop {
        match poll(&mut publication) {
            Poll::Ready(r) => break r,
            Poll::Pending => {
                sim.step();
            }
        }
    };
    published.unwrap();
    assert_eq!(before.wait().unwrap().values, [f(3)], "the old code's run");
    let code = shared.code("f").unwrap();
    let t = shared.try_submit(RunSpec::new(code, Input::Host(&[3])));
    assert_eq!(t.unwrap().wait().unwrap().values, [103]);
}

/// `Input::Previous` would chain on whatever run another task launched
/// last: refused, the spec handed back, nothing launched.
#[test]
fn chaining_is_refused_through_a_shared_handle() {
    let shared = shared::<2>(SimDriver::stepped(SimConfig::default()));
    let code = shared.code("f").unwrap();
    let e = shared
        .try_submit(RunSpec::new(code, Input::Previous))
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ChainAcrossTasks);
    assert!(format!("{:?}", e.into_value()).contains("Previous"));
    assert_eq!(shared.stats().launched, 0);
}

/// A close refuses every submission after it — also one already waiting —
/// and the runs admitted before it still resolve into their tickets.
#[test]
fn a_close_refuses_what_comes_after_it() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let a = shared.try_submit(spec(&shared, &[1])).unwrap();
    let b = shared.try_submit(spec(&shared, &[2])).unwrap();
    let mut waiting = shared.submit(spec(&shared, &[3]));
    assert!(poll(&mut waiting).is_pending());
    let mut close = shared.close_async();
    assert!(shared.is_closed());
    match poll(&mut waiting) {
        Poll::Ready(Err(e)) => {
            assert_eq!(e.kind(), &ErrorKind::Closed);
            assert!(format!("{:?}", e.into_value()).contains("Host([3])"));
        }
        other => panic!("a waiting submission after the close: {other:?}"),
    }
    let report = loop {
        match poll(&mut close) {
            Poll::Ready(r) => break r.unwrap(),
            Poll::Pending => {
                sim.step();
            }
        }
    };
    assert_eq!(report.retired, 0, "every run was settled, none forgotten");
    assert_eq!(a.wait().unwrap().values, [f(1)]);
    assert_eq!(b.wait().unwrap().values, [f(2)]);
    let e = shared.try_submit(spec(&shared, &[4])).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Closed);
    let e = shared.publish(&callables()).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Closed);
}

/// A failed run hands its workload back inside the ticket's error, and
/// the other tickets' results are unaffected.
#[test]
fn a_failed_run_hands_its_workload_back() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let code = shared.code("f").unwrap();
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicpu,
        nth: 1,
    });
    let mut w = Workload::new(code);
    w.owned(vec![9u32], Dir::InOut);
    let e = shared.try_submit(w).unwrap().wait().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Fault(_)), "{e}");
    let w = e.into_value().expect("the workload, back");
    assert_eq!(w.get::<u32>(0).ok().map(<[u32]>::len), Some(1));
}

/// The host may touch a shared device buffer only while no workload (so no
/// run) holds it: refused with `BufferShared` meanwhile, allowed after,
/// showing what the run wrote.
#[test]
fn a_shared_buffer_is_host_accessible_only_while_unheld() {
    let shared = shared::<2>(SimDriver::real_time(SimConfig::default()));
    let mut out = shared.alloc_buffer::<u32>(3).unwrap();
    let mut w = Workload::new(shared.code("f").unwrap());
    w.owned(vec![1u32, 2], Dir::In).shared(&out, 1..3, Dir::Out);
    let ticket = shared.submit_blocking(w).unwrap();
    let mut back = [0u32; 3];
    let e = shared.read_buffer(&mut out, 0, &mut back).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BufferShared { .. }), "{e}");
    let e = shared.write_buffer(&mut out, 0, &[5]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::BufferShared { .. }), "{e}");
    let done = ticket.wait().unwrap();
    assert!(matches!(
        shared
            .read_buffer(&mut out, 0, &mut back)
            .unwrap_err()
            .kind(),
        ErrorKind::BufferShared { .. }
    ));
    drop(done); // the workload, and its share of the buffer
    shared.read_buffer(&mut out, 0, &mut back).unwrap();
    assert_eq!(back, [0, f(1), f(2)]);
}

/// Another device's code is refused, not run against this device's memory.
#[test]
fn another_devices_code_is_refused() {
    let one = shared::<2>(SimDriver::stepped(SimConfig::default()));
    let two = shared::<2>(SimDriver::stepped(SimConfig::default()));
    let foreign = two.code("f").unwrap();
    let e = one
        .try_submit(RunSpec::new(foreign, Input::Host(&[1])))
        .unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::ForeignHandle), "{e}");
}

/// A thread that panics holding tickets (its runs launched) loses only its
/// own results: the device keeps serving the others.
#[test]
fn a_panic_with_runs_launched_leaves_the_device_serving() {
    let shared = shared::<2>(SimDriver::real_time(SimConfig::default()));
    let panicking = shared.clone();
    let r = std::thread::spawn(move || {
        let _a = panicking.submit_blocking(spec(&panicking, &[1])).unwrap();
        let _b = panicking.submit_blocking(spec(&panicking, &[2])).unwrap();
        panic!("a task fails with two runs launched");
    })
    .join();
    assert!(r.is_err());
    for x in 0..4 {
        let t = shared.submit_blocking(spec(&shared, &[x])).unwrap();
        assert_eq!(t.wait().unwrap().values, [f(x)]);
    }
    assert_eq!(shared.health().poisoned, None);
}

/// A ticket is awaited on another thread than the one that submitted it,
/// and tickets resolve in any order.
#[test]
fn tickets_resolve_anywhere_in_any_order() {
    let shared = shared::<4>(SimDriver::real_time(SimConfig::default()));
    let code = shared.code("f").unwrap();
    let tickets: Vec<Ticket<SimDriver, 4>> = (0..4u32)
        .map(|x| {
            shared
                .submit_blocking(RunSpec::new(code, Input::Host(&[x])))
                .unwrap()
        })
        .collect();
    let joins: Vec<_> = tickets
        .into_iter()
        .rev()
        .zip((0..4u32).rev())
        .map(|(t, x)| std::thread::spawn(move || (x, pollster::block_on(t))))
        .collect();
    for j in joins {
        let (x, done) = j.join().unwrap();
        let done: Done = done.unwrap();
        assert_eq!(done.values, [f(x)]);
    }
}

/// The last handle's drop, with runs still in flight, never pays the
/// device on the dropping thread: its teardown (the streams destroyed)
/// runs on a thread of its own.
#[test]
fn the_last_drop_tears_the_device_down_on_its_own_thread() {
    let hooked = Hooked::new(SimDriver::real_time(SimConfig::default()));
    let hooks = Arc::clone(&hooked.hooks);
    let shared = SharedDevice::<_, 2>::open(hooked, DeviceConfig::default()).unwrap();
    shared.publish(&callables()).unwrap();
    let code = shared.code("f").unwrap();
    let a = shared
        .submit_blocking(RunSpec::new(code, Input::Host(&[1])))
        .unwrap();
    let b = shared
        .submit_blocking(RunSpec::new(code, Input::Host(&[2])))
        .unwrap();
    // (A publication may have retired a stream already.)
    let before = hooks.teardown_threads.lock().unwrap().len();
    std::thread::Builder::new()
        .name("dropping".into())
        .spawn(move || {
            drop(a);
            drop(shared);
            drop(b); // the last owner of the device
        })
        .unwrap()
        .join()
        .unwrap();
    // Wait (bounded) for the device's own thread to finish the teardown.
    let mut names = Vec::new();
    for _ in 0..10_000 {
        names = hooks.teardown_threads.lock().unwrap()[before..].to_vec();
        if names.len() >= 2 {
            break;
        }
        std::thread::yield_now();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(names.len(), 2, "both streams destroyed");
    assert!(
        names
            .iter()
            .all(|n| n.as_deref() == Some("runclaim-shared-close")),
        "{names:?}"
    );
}

/// A device dropped with its teardown on the dropping thread is what the
/// test above tells apart (its negative control): a plain `Device`'s drop
/// destroys the streams where it is dropped.
#[test]
fn a_plain_device_tears_down_where_it_is_dropped() {
    let hooked = Hooked::new(SimDriver::real_time(SimConfig::default()));
    let hooks = Arc::clone(&hooked.hooks);
    let device = runclaim::Device::<_, 2>::open(hooked, DeviceConfig::default()).unwrap();
    std::thread::Builder::new()
        .name("dropping".into())
        .spawn(move || drop(device))
        .unwrap()
        .join()
        .unwrap();
    let names = hooks.teardown_threads.lock().unwrap().clone();
    assert_eq!(
        names,
        [Some("dropping".to_owned()), Some("dropping".to_owned())]
    );
}

/// A blocking submission to a full device looks once at the oldest run's
/// fence, sleeps once on it and is admitted as that sleep ends, arming no
/// notification (its thread sleeps); a submission to a free lane looks at
/// and sleeps on nothing.
#[test]
fn a_blocking_submission_to_a_full_device_sleeps_once_on_the_run_it_waits_for() {
    use runclaim::driver::Op;
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let waits = || {
        let c = sim.stats().calls;
        [
            Op::QueryEvent,
            Op::NotifyEvent,
            Op::SyncEvent,
            Op::SyncStream,
        ]
        .map(|op| c.get(&op).copied().unwrap_or(0))
    };
    let start = waits();
    let a = shared.submit_blocking(spec(&shared, &[1])).unwrap();
    let b = shared.submit_blocking(spec(&shared, &[2])).unwrap();
    assert_eq!(waits(), start, "a free lane needs no look and no sleep");
    let c = shared.submit_blocking(spec(&shared, &[3])).unwrap();
    let delta: Vec<u64> = waits().iter().zip(start).map(|(n, s)| n - s).collect();
    assert_eq!(
        delta[1..],
        [0, 1, 0],
        "notify, sync event, sync stream: {delta:?}"
    );
    // It slept on the oldest run's fence, not on a newer one's: the run
    // behind it is still in flight (the stepped device ran only as far
    // as the sleep drove it).
    let mut b = b;
    assert!(
        poll(&mut b).is_pending(),
        "admitted only once the newest run was done"
    );
    for (t, x) in [(a, 1), (b, 2), (c, 3)] {
        assert_eq!(t.wait().unwrap().values, [f(x)]);
    }
}

/// One call to run: `run(work).await` and `run_blocking(work)` resolve to
/// the result (a spec's values; a workload comes back in it), and a
/// refused submission resolves to its error in the same type, a workload
/// handed back inside it.
#[test]
fn run_is_one_await_and_a_refusal_hands_the_workload_back() {
    let sim = SimDriver::real_time(SimConfig::default());
    let shared = shared::<2>(sim);
    let done = pollster::block_on(shared.run(spec(&shared, &[1, 2]))).unwrap();
    assert_eq!(done.values, [f(1), f(2)]);
    assert_eq!(
        shared.run_blocking(spec(&shared, &[5])).unwrap().values,
        [f(5)]
    );
    let mut w = Workload::new(shared.code("f").unwrap());
    let t = w.add_owned(vec![7u32], Dir::InOut);
    let done = pollster::block_on(shared.run(w)).unwrap();
    let w = done.work.expect("the workload, back with its result");
    assert_eq!(w[t], [f(7)]);
    // Refused before it is prepared (the device closed): the same error
    // type as a run's own, the workload inside it.
    shared.close();
    let e = pollster::block_on(shared.run(w)).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Closed);
    let w = e.into_value().expect("the refused workload, back");
    assert_eq!(w[t], [f(7)]);
    let e = shared.run_blocking(spec(&shared, &[1])).unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::Closed);
    assert!(
        e.into_value().is_none(),
        "a spec is Copy: nothing to hand back"
    );
}

/// A `run` future dropped mid-way — waiting for a slot, or launched and
/// waiting for its fence — takes nothing and loses no one else's result:
/// the device serves the next run, and every slot comes back.
#[test]
fn a_dropped_run_future_loses_nothing() {
    let sim = SimDriver::stepped(SimConfig::default());
    let shared = shared::<2>(sim.clone());
    let a = shared.try_submit(spec(&shared, &[1])).unwrap();
    let b = shared.try_submit(spec(&shared, &[2])).unwrap();
    // Waiting for a slot (both are busy): dropped in the queue.
    let mut waiting = Box::pin(shared.run(spec(&shared, &[3])));
    assert!(
        waiting
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    drop(waiting);
    assert_eq!(a.wait().unwrap().values, [f(1)]);
    // Launched (a slot was free), then dropped waiting for its fence.
    let mut launched = Box::pin(shared.run(spec(&shared, &[4])));
    assert!(
        launched
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending()
    );
    drop(launched);
    assert_eq!(b.wait().unwrap().values, [f(2)]);
    assert_eq!(
        shared.run_blocking(spec(&shared, &[5])).unwrap().values,
        [f(5)]
    );
    assert_eq!(
        shared.run_blocking(spec(&shared, &[6])).unwrap().values,
        [f(6)]
    );
    let s = shared.stats();
    assert_eq!(s.launched, 5, "the queued one never launched: {s:?}");
}
