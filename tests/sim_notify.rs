//! The simulator's completion notifications (`Driver::notify_event`): who
//! wakes an armed waker, when, and what is kept. Each wake is checked to
//! have a cause (the event complete or faulted, the deadline passed, the
//! event destroyed) and to happen once; each test has a negative control.
//!
//! Nothing here asserts "within N µs": real-time checks compare instants
//! causally (a wake never precedes its cause) and wait for wakes with
//! timeouts of seconds, so a loaded 2-core machine slows them, never fails
//! them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use runclaim::driver::abi::{self, Program, RunArgs, StatusRecord, WallRecord};
use runclaim::driver::{
    CodeHandle, Completion, Driver, DriverErrorKind, EventId, FaultKind, HandleKind, Notice, Op,
    StreamId,
};
use runclaim::sim::{Fault, Kernel, LatencyModel, SimConfig, SimDriver, SimKernel};

/// How long a test waits for a wake that must come (a loaded machine is
/// slow, never this slow).
const PATIENCE: Duration = Duration::from_secs(20);

/// A waker that counts its wakes, remembers when each came, and signals
/// waiters.
#[derive(Default)]
struct Probe {
    wakes: AtomicUsize,
    at: Mutex<Vec<Instant>>,
    cv: Condvar,
}

impl Wake for Probe {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        let now = Instant::now();
        let mut at = self.at.lock().unwrap();
        at.push(now);
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.cv.notify_all();
    }
}

impl Probe {
    fn new() -> Arc<Probe> {
        Arc::new(Probe::default())
    }

    fn wakes(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }

    /// Waits (at most [`PATIENCE`]) for the first wake; its instant.
    fn first_wake(&self) -> Option<Instant> {
        let at = self.at.lock().unwrap();
        let (at, _) = self
            .cv
            .wait_timeout_while(at, PATIENCE, |at| at.is_empty())
            .unwrap();
        at.first().copied()
    }
}

fn waker(p: &Arc<Probe>) -> Waker {
    Waker::from(Arc::clone(p))
}

/// One run driven by hand at the driver level, as the contract queues it:
/// AICore kernel, AICPU kernel, the AICPU stream waits for the AICore
/// stream, then the fence record.
struct Run {
    aicore: StreamId,
    aicpu: StreamId,
    code: CodeHandle,
    core_done: EventId,
    fence: EventId,
    args: RunArgs,
}

impl Run {
    fn new(sim: &SimDriver) -> Run {
        Run::with_code(sim, &Program::new().add(1).encode())
    }

    /// A run of the code image `code` (a program or a Rust kernel).
    fn with_code(sim: &SimDriver, code: &[u8]) -> Run {
        let block_dim = 2;
        let data = sim.alloc(64).unwrap();
        let hs = sim.alloc(abi::handshake_bytes(block_dim)).unwrap();
        sim.memset(hs, 0, abi::handshake_bytes(block_dim)).unwrap();
        let wall = sim.alloc(WallRecord::SIZE).unwrap();
        let status = sim.alloc(StatusRecord::SIZE).unwrap();
        Run {
            aicore: sim.create_stream().unwrap(),
            aicpu: sim.create_stream().unwrap(),
            code: sim.register_code(code).unwrap().handle,
            core_done: sim.create_event().unwrap(),
            fence: sim.create_event().unwrap(),
            args: RunArgs {
                run_id: 1,
                slot: 0,
                block_dim,
                len: 16,
                input: data.raw(),
                output: data.raw(),
                handshake: hs.raw(),
                wall: wall.raw(),
                status: status.raw(),
            },
        }
    }

    /// Queues the run (its handshake cleared first: the previous one is
    /// complete).
    fn launch(&mut self, sim: &SimDriver) {
        let hs = runclaim::driver::DevPtr::from_raw(self.args.handshake);
        sim.memset(hs, 0, abi::handshake_bytes(self.args.block_dim))
            .unwrap();
        self.args.run_id += 1;
        let block = self.args.block();
        sim.launch_aicore(self.aicore, self.code, self.args.block_dim, block.args())
            .unwrap();
        sim.launch_aicpu(self.aicpu, block.args()).unwrap();
        sim.record_event(self.core_done, self.aicore).unwrap();
        sim.stream_wait_event(self.aicpu, self.core_done).unwrap();
        sim.record_event(self.fence, self.aicpu).unwrap();
    }
}

fn real_time(kernel: Duration) -> SimDriver {
    SimDriver::real_time(
        SimConfig::default()
            .watchdog(Duration::from_secs(30))
            .latency(LatencyModel::default().kernel(kernel)),
    )
}

// ----- woken once on completion -------------------------------------------

#[test]
fn stepped_a_waker_is_woken_once_by_the_step_that_completes_the_event() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut run = Run::new(&sim);
    run.launch(&sim);
    let p = Probe::new();
    assert_eq!(
        sim.notify_event(run.fence, Duration::from_secs(1), &waker(&p)),
        Ok(Notice::Completion)
    );
    // Step one action at a time: the wake comes with the step after which
    // the fence is complete, not one step earlier.
    let mut steps = 0;
    while sim.query_event(run.fence).unwrap() == Completion::NotReady {
        assert_eq!(p.wakes(), 0, "woken before the event completed");
        sim.step();
        steps += 1;
        assert!(steps < 10_000, "the run never completed");
    }
    assert_eq!(p.wakes(), 1);
    // Once: later steps, queries and blocking calls wake nothing more.
    sim.run_until_idle(1000).unwrap();
    for _ in 0..100 {
        sim.step();
    }
    sim.sync_event(run.fence, Duration::from_millis(1)).unwrap();
    assert_eq!(p.wakes(), 1);
    assert_eq!(Arc::strong_count(&p), 1, "a woken waker is not kept");
}

#[test]
fn stepped_blocking_calls_and_step_stream_wake_what_they_complete() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (s1, s2) = (sim.create_stream().unwrap(), sim.create_stream().unwrap());
    let (e1, e2) = (sim.create_event().unwrap(), sim.create_event().unwrap());
    let p = sim.alloc(64).unwrap();
    sim.memset_async(s1, p, 1, 64).unwrap();
    sim.record_event(e1, s1).unwrap();
    sim.memset_async(s2, p, 2, 64).unwrap();
    sim.record_event(e2, s2).unwrap();
    let (a, b) = (Probe::new(), Probe::new());
    sim.notify_event(e1, Duration::from_secs(1), &waker(&a))
        .unwrap();
    sim.notify_event(e2, Duration::from_secs(1), &waker(&b))
        .unwrap();
    // Driving s2 only completes e2 only.
    while sim.query_event(e2).unwrap() == Completion::NotReady {
        sim.step_stream(s2);
    }
    assert_eq!((a.wakes(), b.wakes()), (0, 1));
    // A blocking call drives the device, and what it completed is woken
    // (on the timer thread: never on the caller's, which may hold locks).
    sim.sync_stream(s1, Duration::from_millis(1)).unwrap();
    settle(|| a.wakes() == 1);
    assert_eq!((a.wakes(), b.wakes()), (1, 1));
}

#[test]
fn real_time_a_waker_is_woken_once_after_the_event_completed() {
    let sim = real_time(Duration::from_millis(20));
    let mut run = Run::new(&sim);
    for _ in 0..5 {
        run.launch(&sim);
        let p = Probe::new();
        assert_eq!(
            sim.notify_event(run.fence, Duration::from_secs(60), &waker(&p)),
            Ok(Notice::Completion),
            "a 20 ms kernel is not complete as soon as it is queued"
        );
        let woke = p.first_wake().expect("woken on completion");
        // The cause precedes the wake: the event completed (on the host's
        // clock) no later than the waker was woken.
        assert_eq!(sim.query_event(run.fence), Ok(Completion::Complete));
        let done = sim
            .tick_instant(sim.event_timestamp(run.fence).unwrap())
            .unwrap();
        assert!(
            done <= woke,
            "woken {:?} before completion",
            done.duration_since(woke)
        );
        // Once: the waker is let go (the wake came from the device thread:
        // nobody looked).
        let deadline = Instant::now() + PATIENCE;
        while Arc::strong_count(&p) > 1 && Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(Arc::strong_count(&p), 1);
        sim.sync_event(run.fence, Duration::from_secs(1)).unwrap();
        assert_eq!(p.wakes(), 1);
    }
}

// ----- Ready, errors ------------------------------------------------------

#[test]
fn complete_and_never_recorded_events_are_ready_and_arm_nothing() {
    for sim in [
        SimDriver::stepped(SimConfig::default()),
        real_time(Duration::from_micros(50)),
    ] {
        let p = Probe::new();
        let never = sim.create_event().unwrap();
        assert_eq!(
            sim.notify_event(never, Duration::from_secs(1), &waker(&p)),
            Ok(Notice::Ready)
        );
        let s = sim.create_stream().unwrap();
        let (e, buf) = (sim.create_event().unwrap(), sim.alloc(4).unwrap());
        sim.memset_async(s, buf, 0, 4).unwrap();
        sim.record_event(e, s).unwrap();
        sim.sync_event(e, Duration::from_secs(5)).unwrap();
        assert_eq!(
            sim.notify_event(e, Duration::from_secs(1), &waker(&p)),
            Ok(Notice::Ready)
        );
        assert_eq!(Arc::strong_count(&p), 1, "Ready keeps no waker");
        // Negative control: re-recorded, the same event arms.
        sim.memset_async(s, buf, 0, 4).unwrap();
        sim.record_event(e, s).unwrap();
        if !sim.is_real_time() {
            assert_eq!(
                sim.notify_event(e, Duration::from_secs(1), &waker(&p)),
                Ok(Notice::Completion)
            );
            assert_eq!(Arc::strong_count(&p), 2);
        }
        assert_eq!(p.wakes(), 0);
    }
}

#[test]
fn forged_destroyed_and_failed_calls_are_errors_that_arm_nothing() {
    let sim = SimDriver::stepped(SimConfig::default());
    let p = Probe::new();
    let forged = EventId::from_raw(0xdead);
    let err = sim
        .notify_event(forged, Duration::from_secs(1), &waker(&p))
        .unwrap_err();
    assert_eq!(err.op(), Op::NotifyEvent);
    assert_eq!(
        err.kind(),
        &DriverErrorKind::BadHandle {
            kind: HandleKind::Event,
            raw: 0xdead
        }
    );
    let e = sim.create_event().unwrap();
    sim.destroy_event(e).unwrap();
    assert!(matches!(
        sim.notify_event(e, Duration::from_secs(1), &waker(&p))
            .unwrap_err()
            .kind(),
        DriverErrorKind::BadHandle { .. }
    ));
    // A call like any: counted, and an injected failure has no effect.
    let s = sim.create_stream().unwrap();
    let e = sim.create_event().unwrap();
    sim.inject(Fault::EventNeverCompletes { nth: 1 });
    sim.record_event(e, s).unwrap();
    sim.inject(Fault::FailCall {
        op: Op::NotifyEvent,
        nth: 1,
    });
    let err = sim
        .notify_event(e, Duration::from_secs(1), &waker(&p))
        .unwrap_err();
    assert_eq!(err.kind(), &DriverErrorKind::Injected { nth: 1 });
    assert_eq!(Arc::strong_count(&p), 1);
    // Negative control: the next call arms.
    assert_eq!(
        sim.notify_event(e, Duration::from_secs(1), &waker(&p)),
        Ok(Notice::Completion)
    );
    assert_eq!(Arc::strong_count(&p), 2);
    assert_eq!(sim.stats().calls[&Op::NotifyEvent], 4);
}

// ----- faults -------------------------------------------------------------

#[test]
fn stepped_a_stream_fault_wakes_and_then_answers_ready() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut run = Run::new(&sim);
    sim.inject(Fault::KernelFault {
        kernel: Kernel::Aicpu,
        nth: 1,
    });
    run.launch(&sim);
    let p = Probe::new();
    assert_eq!(
        sim.notify_event(run.fence, Duration::from_secs(1), &waker(&p)),
        Ok(Notice::Completion)
    );
    assert_eq!(p.wakes(), 0);
    // The AICPU kernel faults as it starts (the AICore kernel, never
    // dispatched, waits for its watchdog: nothing to step to the end).
    let mut steps = 0;
    while sim.query_event(run.fence).is_ok() {
        assert_eq!(p.wakes(), 0, "woken before the fault");
        sim.step();
        steps += 1;
        assert!(steps < 10_000, "the AICPU kernel never started");
    }
    assert_eq!(p.wakes(), 1);
    assert_eq!(
        sim.query_event(run.fence).unwrap_err().kind(),
        &DriverErrorKind::KernelFault(FaultKind::AicpuException)
    );
    // Faulted: nothing to wait for.
    assert_eq!(
        sim.notify_event(run.fence, Duration::from_secs(1), &waker(&p)),
        Ok(Notice::Ready)
    );
    assert_eq!(Arc::strong_count(&p), 1);
}

/// A real-time simulator whose `hung` kernel outlives a 50 ms watchdog:
/// both kernels of its run time out, the streams fault.
fn hung() -> (SimDriver, Run) {
    let sim = SimDriver::real_time(SimConfig::default().watchdog(Duration::from_millis(50)));
    let kernel = sim.register_kernel(SimKernel::new(|_| Ok(())).time(|_| Duration::from_secs(1)));
    let run = Run::with_code(&sim, kernel.as_bytes());
    (sim, run)
}

#[test]
fn real_time_a_stream_fault_wakes_the_waiter() {
    let (sim, mut run) = hung();
    let launched = Instant::now();
    run.launch(&sim);
    let p = Probe::new();
    match sim.notify_event(run.fence, Duration::from_secs(60), &waker(&p)) {
        Ok(Notice::Completion) => {
            let woke = p.first_wake().expect("woken on the fault");
            // By the watchdog's fault, not by anything earlier.
            assert!(woke.duration_since(launched) >= Duration::from_millis(50));
        }
        // The fault came first (a preempted host): nothing was armed.
        Ok(Notice::Ready) => assert_eq!(Arc::strong_count(&p), 1),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        sim.query_event(run.fence).unwrap_err().kind(),
        DriverErrorKind::KernelFault(FaultKind::AicpuTimeout | FaultKind::Collateral)
    ));
    assert!(p.wakes() <= 1);
}

// ----- deadlines ----------------------------------------------------------

#[test]
fn stepped_a_deadline_wakes_on_the_step_that_passes_it_and_not_before() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (s, e) = (sim.create_stream().unwrap(), sim.create_event().unwrap());
    let buf = sim.alloc(4).unwrap();
    sim.memset_async(s, buf, 0, 4).unwrap();
    sim.inject(Fault::EventNeverCompletes { nth: 1 });
    sim.record_event(e, s).unwrap();
    let p = Probe::new();
    let within = Duration::from_micros(100); // 100 steps of 1 µs
    let armed_at = sim.clock();
    assert_eq!(
        sim.notify_event(e, within, &waker(&p)),
        Ok(Notice::Completion)
    );
    sim.run_until_idle(100).unwrap(); // the record ran; the event never completes
    assert_eq!(p.wakes(), 0);
    while p.wakes() == 0 {
        // Not woken: the deadline has not passed on the virtual clock.
        assert!(sim.clock().saturating_sub(armed_at) < within);
        sim.step();
        assert!(
            sim.clock().saturating_sub(armed_at) < within * 2,
            "deadline missed"
        );
    }
    assert!(sim.clock().saturating_sub(armed_at) >= within);
    assert_eq!(p.wakes(), 1);
    assert_eq!(sim.query_event(e), Ok(Completion::NotReady));
    assert_eq!(Arc::strong_count(&p), 1);
}

#[test]
fn real_time_a_deadline_wakes_after_it_passed_when_the_event_never_completes() {
    let sim = real_time(Duration::from_micros(50));
    let (s, e) = (sim.create_stream().unwrap(), sim.create_event().unwrap());
    sim.inject(Fault::EventNeverCompletes { nth: 1 });
    sim.record_event(e, s).unwrap();
    for within in [Duration::from_millis(30), Duration::from_millis(1)] {
        let p = Probe::new();
        let before = Instant::now();
        let clock = sim.clock();
        assert_eq!(
            sim.notify_event(e, within, &waker(&p)),
            Ok(Notice::Completion)
        );
        let woke = p.first_wake().expect("woken at the deadline");
        // Never before: `within` passed on the host clock and on the
        // driver's.
        assert!(
            woke.duration_since(before) >= within,
            "woken after {:?}",
            woke.duration_since(before)
        );
        assert!(sim.clock().saturating_sub(clock) >= within);
        assert_eq!(sim.query_event(e), Ok(Completion::NotReady));
        assert_eq!(p.wakes(), 1);
    }
}

#[test]
fn real_time_a_hung_kernel_wakes_at_the_deadline_then_at_the_watchdog_fault() {
    let (sim, mut run) = hung();
    let launched = Instant::now();
    run.launch(&sim);
    let p = Probe::new();
    let before = Instant::now();
    let within = Duration::from_millis(10);
    if sim.notify_event(run.fence, within, &waker(&p)) == Ok(Notice::Completion) {
        let woke = p.first_wake().expect("woken at the deadline");
        assert!(
            woke.duration_since(before) >= within,
            "woken after {:?}",
            woke.duration_since(before)
        );
    }
    // Re-armed with a long deadline: the watchdog's fault wakes it.
    let q = Probe::new();
    match sim.notify_event(run.fence, Duration::from_secs(60), &waker(&q)) {
        Ok(Notice::Completion) => {
            let woke = q.first_wake().expect("woken by the watchdog fault");
            assert!(woke.duration_since(launched) >= Duration::from_millis(50));
        }
        Ok(Notice::Ready) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        sim.query_event(run.fence).unwrap_err().kind(),
        DriverErrorKind::KernelFault(_)
    ));
    assert!(p.wakes() <= 1 && q.wakes() <= 1);
}

// ----- no lost wake -------------------------------------------------------

#[test]
fn stepped_completion_between_the_query_and_the_arm_answers_ready() {
    let sim = SimDriver::stepped(SimConfig::default());
    let mut run = Run::new(&sim);
    run.launch(&sim);
    assert_eq!(sim.query_event(run.fence), Ok(Completion::NotReady));
    sim.run_until_idle(10_000).unwrap(); // completes in between
    let p = Probe::new();
    assert_eq!(
        sim.notify_event(run.fence, Duration::from_secs(1), &waker(&p)),
        Ok(Notice::Ready)
    );
}

#[test]
fn real_time_no_wake_is_lost_when_completion_races_the_arm() {
    // Records landing 0..40 µs late, armed at varying moments after a
    // query: whichever wins, the caller hears of completion (Ready, or a
    // wake), never nothing.
    let sim = real_time(Duration::from_micros(20));
    let (s, e) = (sim.create_stream().unwrap(), sim.create_event().unwrap());
    let buf = sim.alloc(4).unwrap();
    let (mut ready, mut woken) = (0, 0);
    for i in 0..400u64 {
        sim.memset_async(s, buf, 0, 4).unwrap();
        sim.inject(Fault::DelayEvent {
            nth: 1,
            delay: Duration::from_micros(i % 41),
        });
        sim.record_event(e, s).unwrap();
        let _ = sim.query_event(e).unwrap();
        let spin = Instant::now() + Duration::from_micros(i % 23);
        while Instant::now() < spin {
            std::hint::spin_loop();
        }
        let p = Probe::new();
        match sim.notify_event(e, Duration::from_secs(60), &waker(&p)) {
            Ok(Notice::Ready) => ready += 1,
            Ok(Notice::Completion) => {
                p.first_wake().expect("a wake lost");
                woken += 1;
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(sim.query_event(e), Ok(Completion::Complete));
    }
    assert_eq!(ready + woken, 400);
}

// ----- destroyed events, bounds, drop -------------------------------------

#[test]
fn destroying_an_event_wakes_its_wakers_and_keeps_none() {
    for sim in [
        SimDriver::stepped(SimConfig::default()),
        real_time(Duration::from_micros(50)),
    ] {
        let (s, e) = (sim.create_stream().unwrap(), sim.create_event().unwrap());
        let other = sim.create_event().unwrap();
        sim.inject(Fault::EventNeverCompletes { nth: 1 });
        sim.record_event(e, s).unwrap();
        sim.inject(Fault::EventNeverCompletes { nth: 1 });
        sim.record_event(other, s).unwrap();
        let (p, q, third) = (Probe::new(), Probe::new(), Probe::new());
        for (probe, event) in [(&p, e), (&q, e), (&third, other)] {
            assert_eq!(
                sim.notify_event(event, Duration::from_secs(3600), &waker(probe)),
                Ok(Notice::Completion)
            );
        }
        assert_eq!((p.wakes(), q.wakes()), (0, 0));
        assert_eq!(Arc::strong_count(&p), 2);
        sim.destroy_event(e).unwrap();
        // Woken because of the destroying call — on the timer thread, never
        // on the caller's (it may hold locks of its own) — and not kept.
        settle(|| (p.wakes(), q.wakes()) == (1, 1) && Arc::strong_count(&q) == 1);
        assert_eq!((p.wakes(), q.wakes()), (1, 1));
        assert_eq!((Arc::strong_count(&p), Arc::strong_count(&q)), (1, 1));
        // Negative control: another event's waker is untouched.
        assert_eq!((third.wakes(), Arc::strong_count(&third)), (0, 2));
    }
}

#[test]
fn re_arming_does_not_grow_what_is_kept() {
    let sim = SimDriver::stepped(SimConfig::default());
    let (s, e) = (sim.create_stream().unwrap(), sim.create_event().unwrap());
    sim.inject(Fault::EventNeverCompletes { nth: 1 });
    sim.record_event(e, s).unwrap();
    let p = Probe::new();
    let w = waker(&p);
    for i in 0..10_000 {
        // As a future re-arms on every poll: the same task's waker.
        let again = if i % 2 == 0 { w.clone() } else { waker(&p) };
        assert_eq!(
            sim.notify_event(e, Duration::from_secs(3600), &again),
            Ok(Notice::Completion)
        );
        drop(again);
        // `p` and `w` here, one waker kept by the simulator.
        assert!(Arc::strong_count(&p) <= 3, "arm {i} kept another waker");
    }
    // Distinct tasks are bounded too (the oldest woken to make room).
    let many: Vec<Arc<Probe>> = (0..1000).map(|_| Probe::new()).collect();
    for q in &many {
        sim.notify_event(e, Duration::from_secs(3600), &waker(q))
            .unwrap();
    }
    // The evicted ones are woken on the timer thread: let it catch up.
    let counts = || {
        let held = many.iter().filter(|q| Arc::strong_count(q) > 1).count();
        let woken = many.iter().filter(|q| q.wakes() == 1).count();
        (held, woken)
    };
    settle(|| {
        let (held, woken) = counts();
        held <= 64 && held + woken == many.len()
    });
    let (held, woken) = counts();
    assert!(held <= 64, "{held} wakers kept for one event");
    assert_eq!(held + woken, many.len());
}

#[test]
fn dropping_the_last_clone_with_wakers_armed_drops_them_and_joins() {
    for real in [false, true] {
        let sim = if real {
            real_time(Duration::from_secs(1))
        } else {
            SimDriver::stepped(SimConfig::default())
        };
        let mut run = Run::new(&sim);
        run.launch(&sim);
        let p = Probe::new();
        assert_eq!(
            sim.notify_event(run.fence, Duration::from_secs(3600), &waker(&p)),
            Ok(Notice::Completion)
        );
        let clone = sim.clone();
        drop(sim);
        // A clone keeps the device, and the waker.
        assert_eq!(Arc::strong_count(&p), 2);
        drop(clone); // the last: returns once the device thread has joined
        assert_eq!(Arc::strong_count(&p), 1, "real time: {real}");
        assert_eq!(p.wakes(), 0, "dropped, not woken");
    }
}

/// A waker whose task holds the last clone of the simulator: its wake, on
/// the device thread, drops the simulator there.
struct Holder {
    sim: Mutex<Option<SimDriver>>,
    done: Arc<Probe>,
}

impl Wake for Holder {
    fn wake(self: Arc<Self>) {
        drop(self.sim.lock().unwrap().take());
        self.done.wake_by_ref();
    }
}

#[test]
fn the_last_clone_dropped_by_a_wake_on_the_device_thread_is_no_deadlock() {
    let sim = real_time(Duration::from_millis(5));
    let mut run = Run::new(&sim);
    run.launch(&sim);
    let done = Probe::new();
    let holder = Arc::new(Holder {
        sim: Mutex::new(Some(sim.clone())),
        done: Arc::clone(&done),
    });
    assert_eq!(
        sim.notify_event(run.fence, Duration::from_secs(60), &Waker::from(holder)),
        Ok(Notice::Completion)
    );
    drop(sim);
    assert!(done.first_wake().is_some(), "the wake never came");
}

// ----- the simulation itself is unchanged --------------------------------

#[test]
fn stepped_traces_are_the_same_with_and_without_armed_wakers() {
    let trace = |arm: bool| {
        let sim = SimDriver::stepped(SimConfig::default().seed(11));
        let mut run = Run::new(&sim);
        let p = Probe::new();
        for _ in 0..3 {
            run.launch(&sim);
            if arm {
                sim.notify_event(run.fence, Duration::from_micros(3), &waker(&p))
                    .unwrap();
            }
            for _ in 0..5 {
                sim.step();
            }
            sim.sync_event(run.fence, Duration::from_secs(1)).unwrap();
        }
        (sim.trace(), sim.now_ticks(), p.wakes())
    };
    let (plain, plain_ticks, none) = trace(false);
    let (armed, armed_ticks, woken) = trace(true);
    assert_eq!(none, 0);
    assert!(woken >= 3, "negative control: the armed run did wake");
    assert_eq!(plain, armed);
    assert_eq!(plain_ticks, armed_ticks);
}

/// Waits (bounded: a backstop, not a timing claim) until `done` holds: for
/// wakes handed to the timer thread.
fn settle(done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !done() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}
