//! Completion notifications through the `acl` driver and the fake runtime,
//! at the driver level: `queue_notify` queues a host callback behind a
//! fence, `notify_event` arms a waker that the callback wakes (or the
//! exception-info callback, on a fault, or the reactor at the deadline);
//! without the callback symbols it falls back to the timer. The fake
//! enforces the runtime's subscription and ordering rules, and its
//! counters (`runclaim_fake_callbacks`) say which path woke a waker.
//!
//! Runs are driven by hand (as the contract drives them: the AICore kernel
//! and its record, then on the AICPU stream the AICPU kernel, a wait on the
//! AICore record, the fence record and its notification). Where a waker
//! must be armed before its fence completes, the device is stepped — it
//! moves only when the test drives it — so no test races the device; every
//! wait is generous, so they pass on a loaded machine.

mod common;

use std::ffi::c_void;
use std::os::unix::thread::RawPthread;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use common::acl::{control, control_lite, lib_path, open, open_lite, open_on, open_with};
use runclaim::driver::abi::{self, Program, RunArgs, StatusRecord, WallRecord};
use runclaim::driver::acl::AclDriver;
use runclaim::driver::acl::codes::AclError;
use runclaim::driver::{CodeHandle, Completion, Driver, EventId, Notice, StreamId};
use runclaim::sim::{Fault, Kernel, LatencyModel, SimConfig};
use runclaim::{Callable, Device, DeviceConfig, Input, Pipeline, RunSpec};

/// Long enough for anything a test waits for on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(20);

/// A real-time device whose kernels compute for `kernel` and whose
/// watchdog is `watchdog`.
fn real_time(kernel: Duration, watchdog: Duration) -> SimConfig {
    SimConfig::default()
        .watchdog(watchdog)
        .latency(LatencyModel::default().kernel(kernel))
}

/// A waker that counts its wakes.
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

fn counted() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count(AtomicUsize::new(0)));
    (Arc::clone(&c), Waker::from(c))
}

impl Count {
    fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// Polls `cond` until it holds (panics after [`PATIENCE`]); the time it
/// took.
fn wait_for(what: &str, cond: impl Fn() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < PATIENCE,
            "{what}: not within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    start.elapsed()
}

/// One run's device regions and block, made by hand.
struct HandRun {
    args: RunArgs,
}

impl HandRun {
    fn new(d: &AclDriver, run_id: u64, input: &[u32]) -> HandRun {
        let block_dim = 2;
        let len = input.len();
        let bytes: Vec<u8> = input.iter().flat_map(|x| x.to_le_bytes()).collect();
        let inp = d.alloc(len.max(1) * 4).unwrap();
        d.copy_to_device(inp, &bytes).unwrap();
        let out = d.alloc(len.max(1) * 4).unwrap();
        let hs = d.alloc(abi::handshake_bytes(block_dim)).unwrap();
        d.memset(hs, 0, abi::handshake_bytes(block_dim)).unwrap();
        HandRun {
            args: RunArgs {
                run_id,
                slot: 0,
                block_dim,
                len: len as u64,
                input: inp.raw(),
                output: out.raw(),
                handshake: hs.raw(),
                wall: d.alloc(WallRecord::SIZE).unwrap().raw(),
                status: d.alloc(StatusRecord::SIZE).unwrap().raw(),
            },
        }
    }
}

/// A stream pair with its two events, and the code of `x + 1`.
struct Pair {
    aicore: StreamId,
    aicpu: StreamId,
    core_done: EventId,
    fence: EventId,
    code: CodeHandle,
}

impl Pair {
    fn new(d: &AclDriver) -> Pair {
        Pair {
            aicore: d.create_stream().unwrap(),
            aicpu: d.create_stream().unwrap(),
            core_done: d.create_event().unwrap(),
            fence: d.create_event().unwrap(),
            code: d
                .register_code(&Program::new().add(1).encode())
                .unwrap()
                .handle,
        }
    }

    /// A whole run, as the contract launches it, with its notification.
    fn launch(&self, d: &AclDriver, run: &HandRun) {
        let block = run.args.block();
        d.launch_aicore(self.aicore, self.code, run.args.block_dim, block.args())
            .unwrap();
        d.record_event(self.core_done, self.aicore).unwrap();
        self.fence_after_aicpu(d, run);
    }

    /// The AICPU half only (with no AICore kernel to report, the AICPU
    /// kernel waits until the device watchdog: a hung kernel).
    fn fence_after_aicpu(&self, d: &AclDriver, run: &HandRun) {
        let block = run.args.block();
        d.launch_aicpu(self.aicpu, block.args()).unwrap();
        d.stream_wait_event(self.aicpu, self.core_done).unwrap();
        d.record_event(self.fence, self.aicpu).unwrap();
        d.queue_notify(self.aicpu, self.fence).unwrap();
    }
}

/// Makes `stream`'s later work wait until `delay` from now: a record on a
/// stream of its own, made visible late (`Fault::DelayEvent`), waited on.
fn gate(d: &AclDriver, stream: StreamId, delay: Duration) {
    let other = d.create_stream().unwrap();
    let gate = d.create_event().unwrap();
    control().inject(d.device_id(), &Fault::DelayEvent { nth: 1, delay });
    d.record_event(gate, other).unwrap();
    d.stream_wait_event(stream, gate).unwrap();
}

// ----- raw entry points of the fake library ---------------------------------------

type RawSubscribe = unsafe extern "C" fn(u64, *mut c_void) -> i32;
type RawLaunchCallback =
    unsafe extern "C" fn(extern "C" fn(*mut c_void), *mut c_void, u32, *mut c_void) -> i32;
type RawProcessReport = unsafe extern "C" fn(i32) -> i32;

fn raw_symbol<T: Copy>(name: &str) -> T {
    // SAFETY: the workspace's own fake library (the driver's handle, loaded
    // once); callers name the type of the symbol's C prototype. The library
    // is never unloaded while the process runs, so the pointer stays valid.
    unsafe {
        let l = libloading::Library::new(lib_path("fake_acl").as_os_str()).unwrap();
        let f = *l.get::<T>(name).unwrap();
        std::mem::forget(l);
        f
    }
}

fn handle(raw: u64) -> *mut c_void {
    std::ptr::without_provenance_mut(usize::try_from(raw).unwrap())
}

// SAFETY: the C library's declaration (`pthread.h`): no arguments.
unsafe extern "C" {
    fn pthread_self() -> RawPthread;
}

#[allow(
    clippy::useless_conversion,
    reason = "pthread_t is a u64 on 64-bit Linux"
)]
fn this_thread() -> u64 {
    // SAFETY: no preconditions; it cannot fail.
    u64::from(unsafe { pthread_self() })
}

// ----- the tests ------------------------------------------------------------------

#[test]
fn complete_and_never_recorded_events_are_ready_and_arm_nothing() {
    for d in [
        open(&real_time(Duration::from_micros(50), PATIENCE), true),
        open_lite(&real_time(Duration::from_micros(50), PATIENCE), true),
    ] {
        let s = d.create_stream().unwrap();
        let e = d.create_event().unwrap();
        let (count, waker) = counted();
        let within = Duration::from_millis(1);
        assert_eq!(d.notify_event(e, within, &waker).unwrap(), Notice::Ready);
        d.record_event(e, s).unwrap();
        d.sync_event(e, PATIENCE).unwrap();
        assert_eq!(d.notify_event(e, within, &waker).unwrap(), Notice::Ready);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(count.get(), 0, "nothing was armed");
        drop(waker);
        assert_eq!(Arc::strong_count(&count), 1, "no waker was kept");
    }
}

/// A stepped device: nothing moves until the test drives it (a blocking
/// wait), so a waker is always armed before its fence completes.
fn stepped() -> SimConfig {
    SimConfig::default().watchdog(Duration::from_secs(30))
}

#[test]
fn the_callback_wakes_the_waker_when_the_fence_completes() {
    let d = open(&stepped(), false);
    let id = d.device_id();
    let p = Pair::new(&d);
    let run = HandRun::new(&d, 1, &[1, 2]);
    let (count, waker) = counted();
    p.launch(&d, &run);
    // A deadline far beyond the test: a wake before it is the callback's.
    let notice = d.notify_event(p.fence, PATIENCE * 3, &waker).unwrap();
    assert_eq!(
        notice,
        Notice::Completion,
        "a callback is queued for the fence"
    );
    assert_eq!(count.get(), 0);
    // Drive the device through the run and its callback's task.
    d.sync_stream(p.aicpu, PATIENCE).unwrap();
    wait_for("the wake", || count.get() >= 1);
    assert_eq!(d.query_event(p.fence).unwrap(), Completion::Complete);
    let c = control().callbacks(id);
    assert_eq!((c.launched, c.run, c.dropped), (1, 1, 0), "{c:?}");
    assert_eq!(c.subscriptions, 1, "the AICPU stream, to the reactor");
    // The run computed: x + 1.
    let mut out = [0u8; 8];
    d.copy_from_device(
        &mut out,
        runclaim::driver::DevPtr::from_raw(run.args.output),
    )
    .unwrap();
    assert_eq!(out, [2, 0, 0, 0, 3, 0, 0, 0]);
    // Its callback ran: the fence's record is complete, whoever asks.
    assert_eq!(
        d.notify_event(p.fence, PATIENCE, &waker).unwrap(),
        Notice::Ready
    );
    // One subscribed thread per stream: another thread's subscription of
    // the reactor's stream is refused.
    let subscribe: RawSubscribe = raw_symbol("aclrtSubscribeReport");
    d.query_stream(p.aicpu).unwrap(); // binds this thread to the device
    // SAFETY: the driver's live stream, on a thread bound to its device.
    let rc = unsafe { subscribe(this_thread(), handle(p.aicpu.raw())) };
    assert_eq!(rc, AclError::ACL_ERROR_RT_STREAM_SUBSCRIBE);
    assert_eq!(control().callbacks(id).subscribe_refused, 1);
    drop(waker);
    wait_for("no waker kept", || Arc::strong_count(&count) == 1);
}

/// The fake's raw callback entry points.
struct Raw {
    subscribe: RawSubscribe,
    unsubscribe: RawSubscribe,
    launch: RawLaunchCallback,
    process: RawProcessReport,
}

fn raw() -> Raw {
    Raw {
        subscribe: raw_symbol("aclrtSubscribeReport"),
        unsubscribe: raw_symbol("aclrtUnSubscribeReport"),
        launch: raw_symbol("aclrtLaunchCallback"),
        process: raw_symbol("aclrtProcessReport"),
    }
}

extern "C" fn ignore(_: *mut c_void) {}

#[test]
fn the_fake_refuses_what_the_runtime_refuses() {
    let api = raw();
    let cfg = real_time(Duration::from_micros(50), Duration::from_secs(30));
    let dev = open(&cfg, true);
    let id = dev.device_id();
    let stream = dev.create_stream().unwrap();
    let me = this_thread();
    let nothing = std::ptr::null_mut();
    // SAFETY: the driver's live streams, on this thread, which the
    // driver's calls bind to the stream's device; `ignore` is sound for any
    // pointer. (So for every raw call below.)
    unsafe {
        // No subscriber yet.
        let no_sub = (api.launch)(ignore, nothing, 0, handle(stream.raw()));
        assert_eq!(no_sub, AclError::ACL_ERROR_RT_STREAM_NO_CB_REG);
        assert_eq!((api.process)(5), AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE);
        // One thread per stream, whichever asks.
        assert_eq!((api.subscribe)(me, handle(stream.raw())), 0);
        let again = (api.subscribe)(me, handle(stream.raw()));
        assert_eq!(again, AclError::ACL_ERROR_RT_STREAM_SUBSCRIBE);
        let another = (api.subscribe)(me + 1, handle(stream.raw()));
        assert_eq!(another, AclError::ACL_ERROR_RT_STREAM_SUBSCRIBE);
        // The timeout: -1 or at least 1 ms; the block type: 0 or 1.
        assert_eq!((api.process)(0), AclError::ACL_ERROR_INVALID_PARAM);
        assert_eq!((api.process)(-2), AclError::ACL_ERROR_INVALID_PARAM);
        let block = (api.launch)(ignore, nothing, 2, handle(stream.raw()));
        assert_eq!(block, AclError::ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            (api.process)(1),
            AclError::ACL_ERROR_RT_REPORT_TIMEOUT,
            "subscribed now"
        );
    }
    // A thread serves one device: this one serves `id`.
    let other = open(&cfg, true);
    let theirs = other.create_stream().unwrap(); // binds this thread to `other`
    // SAFETY: as above.
    let rc = unsafe { (api.subscribe)(me, handle(theirs.raw())) };
    assert_eq!(rc, AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE);
    dev.query_stream(stream).unwrap(); // back to `id`
    // SAFETY: as above.
    unsafe {
        let by_another = (api.unsubscribe)(me + 1, handle(stream.raw()));
        assert_eq!(by_another, AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE);
        assert_eq!((api.unsubscribe)(me, handle(stream.raw())), 0);
        let twice = (api.unsubscribe)(me, handle(stream.raw()));
        assert_eq!(twice, AclError::ACL_ERROR_RT_STREAM_SUBSCRIBE);
    }
    let counts = control().callbacks(id);
    assert_eq!(
        (
            counts.subscriptions,
            counts.subscribe_refused,
            counts.launch_refused
        ),
        (0, 2, 1),
        "{counts:?}"
    );
    assert_eq!(counts.process_report_invalid, 2, "{counts:?}");
    assert_eq!(control().callbacks(other.device_id()).subscribe_refused, 1);
}

#[test]
fn the_callback_runs_only_after_the_tasks_ahead_of_it_on_its_thread() {
    static RAN: AtomicUsize = AtomicUsize::new(0);
    static GOT: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn mark(user_data: *mut c_void) {
        GOT.store(user_data.addr(), Ordering::Release);
        RAN.fetch_add(1, Ordering::AcqRel);
    }
    let api = raw();
    let dev = open(
        &real_time(Duration::from_micros(50), Duration::from_secs(30)),
        true,
    );
    let id = dev.device_id();
    let stream = dev.create_stream().unwrap();
    let fence = dev.create_event().unwrap();
    // SAFETY: the driver's live stream, on this thread, bound to its device.
    let rc = unsafe { (api.subscribe)(this_thread(), handle(stream.raw())) };
    assert_eq!(rc, 0);
    // The stream is held back by a gate; the callback queues behind a
    // record of `fence`.
    let gated_at = Instant::now();
    gate(&dev, stream, Duration::from_millis(400));
    dev.record_event(fence, stream).unwrap();
    let user_data = std::ptr::without_provenance_mut(0x5eed);
    // SAFETY: as above; `mark` is sound for any pointer.
    let rc = unsafe { (api.launch)(mark, user_data, 0, handle(stream.raw())) };
    assert_eq!(rc, 0);
    // Another thread, not subscribed, gets nothing.
    let process = api.process;
    // SAFETY: a plain value.
    let elsewhere = std::thread::spawn(move || unsafe { process(5) });
    assert_eq!(
        elsewhere.join().unwrap(),
        AclError::ACL_ERROR_RT_THREAD_SUBSCRIBE
    );
    loop {
        // SAFETY: a plain value, on the subscribed thread.
        match unsafe { (api.process)(10) } {
            AclError::ACL_ERROR_RT_REPORT_TIMEOUT => {
                assert_eq!(RAN.load(Ordering::Acquire), 0);
                assert!(gated_at.elapsed() < PATIENCE, "the callback never came");
            }
            0 => break,
            rc => panic!("aclrtProcessReport: {rc}"),
        }
    }
    // It ran on this thread, inside the call, and only once what was queued
    // ahead of it was done: the gate's time had passed, the fence was
    // complete.
    assert_eq!(RAN.load(Ordering::Acquire), 1);
    assert_eq!(
        GOT.load(Ordering::Acquire),
        0x5eed,
        "the user data, as given"
    );
    assert!(gated_at.elapsed() >= Duration::from_millis(350));
    assert_eq!(dev.query_event(fence).unwrap(), Completion::Complete);
    let counts = control().callbacks(id);
    assert_eq!((counts.launched, counts.run), (1, 1), "{counts:?}");
    assert!(counts.report_timeouts >= 1, "{counts:?}");
    // SAFETY: as above.
    let rc = unsafe { (api.unsubscribe)(this_thread(), handle(stream.raw())) };
    assert_eq!(rc, 0);
    dev.destroy_stream(stream).unwrap();
}

#[test]
fn a_kernel_fault_under_stop_on_failure_wakes_through_the_exception_callback() {
    let d = open(&stepped(), false);
    let id = d.device_id();
    control().stop_on_failure(id, true);
    let p = Pair::new(&d);
    let run = HandRun::new(&d, 1, &[1]);
    control().inject(
        id,
        &Fault::KernelFault {
            kernel: Kernel::Aicpu,
            nth: 1,
        },
    );
    // The AICPU half alone: its kernel faults as it starts.
    p.fence_after_aicpu(&d, &run);
    let (count, waker) = counted();
    let notice = d.notify_event(p.fence, PATIENCE * 3, &waker).unwrap();
    assert_eq!(notice, Notice::Completion);
    // Drive the device: the kernel faults, the stream drops the rest.
    let err = d.sync_stream(p.aicpu, PATIENCE).unwrap_err();
    assert!(err.is_device_fault(), "{err}");
    wait_for("the exception wake", || count.get() >= 1);
    let err = d.query_event(p.fence).unwrap_err();
    assert!(err.is_device_fault(), "{err}");
    wait_for("the callback dropped", || {
        control().callbacks(id).dropped == 1
    });
    let c = control().callbacks(id);
    assert_eq!(c.run, 0, "stop-on-failure: the callback never ran ({c:?})");
    assert_eq!(c.exceptions, 1, "{c:?}");
    assert_eq!(
        control().exception_registrations(),
        1,
        "registered once for the process"
    );
    // Now the fence's stream faulted: nothing to wait for.
    assert_eq!(
        d.notify_event(p.fence, PATIENCE, &waker).unwrap(),
        Notice::Ready
    );
}

#[test]
fn a_hung_kernel_wakes_the_waker_at_its_deadline() {
    let d = open(
        &real_time(Duration::from_micros(50), Duration::from_secs(60)),
        true,
    );
    let id = d.device_id();
    let p = Pair::new(&d);
    let run = HandRun::new(&d, 1, &[1]);
    // No AICore kernel reports: the AICPU kernel waits for the watchdog.
    p.fence_after_aicpu(&d, &run);
    let (count, waker) = counted();
    for (round, within) in [Duration::from_millis(300), Duration::from_millis(50)]
        .into_iter()
        .enumerate()
    {
        let start = Instant::now();
        assert_eq!(
            d.notify_event(p.fence, within, &waker).unwrap(),
            Notice::Completion
        );
        wait_for("the deadline wake", || count.get() > round);
        assert!(
            start.elapsed() >= within,
            "{:?} < {within:?}",
            start.elapsed()
        );
    }
    assert_eq!(d.query_event(p.fence).unwrap(), Completion::NotReady);
    let c = control().callbacks(id);
    assert_eq!((c.launched, c.run, c.exceptions), (1, 0, 0), "{c:?}");
}

#[test]
fn without_the_callback_symbols_the_timer_wakes_the_waker() {
    let d = open_lite(
        &real_time(Duration::from_micros(50), Duration::from_secs(60)),
        true,
    );
    for sym in [
        "aclrtSubscribeReport",
        "aclrtLaunchCallback",
        "aclrtProcessReport",
        "aclrtSetExceptionInfoCallback",
    ] {
        assert!(!d.optional_symbols().contains(&sym), "{sym}");
    }
    let p = Pair::new(&d);
    let run = HandRun::new(&d, 1, &[1]);
    // Queues nothing, and says so by succeeding: the run is unaffected.
    p.fence_after_aicpu(&d, &run);
    let (count, waker) = counted();
    let within = Duration::from_millis(100);
    let start = Instant::now();
    assert_eq!(
        d.notify_event(p.fence, within, &waker).unwrap(),
        Notice::Timer
    );
    wait_for("the timer wake", || count.get() >= 1);
    assert!(start.elapsed() >= within);
    assert_eq!(control_lite().callbacks(d.device_id()).launched, 0);
}

#[test]
fn a_record_again_makes_the_last_callback_stale() {
    let d = open(&stepped(), false);
    let id = d.device_id();
    let p = Pair::new(&d);
    d.record_event(p.fence, p.aicpu).unwrap();
    d.queue_notify(p.aicpu, p.fence).unwrap();
    d.sync_stream(p.aicpu, PATIENCE).unwrap();
    wait_for("the first callback", || control().callbacks(id).run == 1);
    let (count, waker) = counted();
    assert_eq!(
        d.notify_event(p.fence, PATIENCE, &waker).unwrap(),
        Notice::Ready
    );
    // Recorded again behind a kernel, with no notification queued: the
    // callback that ran proves nothing of this record.
    let run = HandRun::new(&d, 1, &[1]);
    let block = run.args.block();
    d.launch_aicore(p.aicore, p.code, run.args.block_dim, block.args())
        .unwrap();
    d.launch_aicpu(p.aicpu, block.args()).unwrap();
    d.record_event(p.fence, p.aicpu).unwrap();
    let within = Duration::from_millis(20);
    assert_eq!(
        d.notify_event(p.fence, within, &waker).unwrap(),
        Notice::Timer
    );
    wait_for("the timer wake", || count.get() >= 1);
    // With one queued for this record, the waker is armed for completion.
    d.queue_notify(p.aicpu, p.fence).unwrap();
    assert_eq!(
        d.notify_event(p.fence, PATIENCE * 3, &waker).unwrap(),
        Notice::Completion
    );
    d.sync_stream(p.aicpu, PATIENCE).unwrap();
    wait_for("the second callback", || control().callbacks(id).run == 2);
    wait_for("its wake", || count.get() >= 2);
    assert_eq!(d.query_event(p.fence).unwrap(), Completion::Complete);
}

#[test]
fn dropping_the_last_driver_ends_the_reactor_within_its_bound() {
    let cfg = real_time(Duration::from_micros(50), Duration::from_secs(60));
    let d = open(&cfg, true);
    let id = d.device_id();
    let second = open_on(id, Duration::from_secs(60));
    let p = Pair::new(&d);
    let run = HandRun::new(&d, 1, &[1]);
    p.fence_after_aicpu(&d, &run); // hangs: its callback stays pending
    let (count, waker) = counted();
    assert_eq!(
        d.notify_event(p.fence, PATIENCE * 10, &waker).unwrap(),
        Notice::Completion
    );
    drop(waker);
    wait_for("the reactor inside aclrtProcessReport", || {
        control().callbacks(id).in_process_report == 1
    });
    // The first driver goes: the device's other driver keeps the reactor.
    drop(d);
    let c = control().callbacks(id);
    assert_eq!(c.subscriptions, 1, "{c:?}");
    assert_eq!(count.get(), 0);
    // The last one goes: bounded, the streams unsubscribed, the thread out
    // of the runtime and joined, the waker woken and dropped.
    let start = Instant::now();
    drop(second);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "the drop took {took:?}");
    let c = control().callbacks(id);
    assert_eq!((c.subscriptions, c.in_process_report), (0, 0), "{c:?}");
    assert_eq!(c.unsubscribes, 1, "{c:?}");
    // Woken on the timer thread (never on the dropping thread).
    let deadline = Instant::now() + Duration::from_secs(20);
    while (count.get() == 0 || Arc::strong_count(&count) > 1) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(count.get() >= 1, "woken, so no future waits on it");
    assert_eq!(Arc::strong_count(&count), 1, "and not kept");
}

#[test]
fn depth_16_fits_a_queue_of_4_tasks_per_run_with_the_callbacks() {
    // The fake's streams hold exactly 16 runs of 4 tasks; stepped, nothing
    // runs until the runs are completed.
    let cfg = SimConfig::default()
        .watchdog(Duration::from_millis(2))
        .stream_capacity(64);
    let d = open(&cfg, false);
    let id = d.device_id();
    let mut dev =
        Device::<AclDriver, 16>::open(d, DeviceConfig::default().max_elements(8)).unwrap();
    let runner = dev
        .publish(&[Callable::program("inc", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("inc").unwrap();
    {
        let mut pipe = Pipeline::<_, 16, u32>::new(&runner).unwrap();
        for i in 0..16 {
            pipe.submit(RunSpec::new(code, Input::Host(&[i])), i)
                .unwrap();
        }
        let s = control().stats(id);
        assert_eq!(s.blocked_enqueues, 0, "no enqueue found its stream full");
        assert_eq!(
            s.max_queue_depth, 64,
            "kernel, wait, fence and callback of 16 runs"
        );
        assert_eq!(control().callbacks(id).launched, 16);
        for i in 0..16 {
            let done = pipe.complete().unwrap().unwrap();
            assert_eq!((done.tag, done.values[0]), (i, i + 1));
        }
        // A stepped device moves only when waited on: the last fence's
        // wait stopped short of its callback's task. The next run's fence
        // takes the stream past it.
        pipe.submit(RunSpec::new(code, Input::Host(&[16])), 16)
            .unwrap();
        assert_eq!(pipe.complete().unwrap().map(|d| d.values[0]), Some(17));
    }
    wait_for("every callback ahead of the last fence", || {
        control().callbacks(id).run >= 16
    });
    assert_eq!(control().callbacks(id).launched, 17);
}

/// Without completion callbacks a run costs one runtime call and one stream
/// task less: no `aclrtLaunchCallback` at all, three tasks per run on the
/// AICPU stream (so a 48-task queue holds depth 16); an awaited fence is
/// then woken by the timer, as without the callback symbols
/// (`without_the_callback_symbols_the_timer_wakes_the_waker`). Its twin with the callbacks is
/// `depth_16_fits_a_queue_of_4_tasks_per_run_with_the_callbacks` (64
/// tasks, 16 callbacks).
#[test]
fn without_completion_callbacks_a_run_queues_no_callback_and_three_tasks() {
    let cfg = SimConfig::default()
        .watchdog(Duration::from_millis(2))
        .stream_capacity(48);
    let config = || DeviceConfig::default().max_elements(8);
    let d = open(&cfg, false);
    let id = d.device_id();
    let mut dev = Device::<AclDriver, 16>::open(d, config().completion_callbacks(false)).unwrap();
    let runner = dev
        .publish(&[Callable::program("inc", &Program::new().add(1))])
        .unwrap();
    let code = runner.code("inc").unwrap();
    let mut pipe = Pipeline::<_, 16, u32>::new(&runner).unwrap();
    for i in 0..16 {
        pipe.submit(RunSpec::new(code, Input::Host(&[i])), i)
            .unwrap();
    }
    let s = control().stats(id);
    assert_eq!((s.blocked_enqueues, s.max_queue_depth), (0, 48));
    for i in 0..16 {
        let done = pipe.complete().unwrap().unwrap();
        assert_eq!((done.tag, done.values[0]), (i, i + 1));
    }
    assert_eq!(control().callbacks(id).launched, 0, "no callback queued");
}

#[test]
fn a_stream_busy_only_with_its_callback_task_is_destroyed() {
    // Stepped: the callback's task behind a fence runs only when the device
    // is driven, so a stream whose last fence completed still holds it.
    let d = open(
        &SimConfig::default().watchdog(Duration::from_secs(30)),
        false,
    );
    let id = d.device_id();
    let s = d.create_stream().unwrap();
    let fence = d.create_event().unwrap();
    d.record_event(fence, s).unwrap();
    d.queue_notify(s, fence).unwrap();
    d.sync_event(fence, PATIENCE).unwrap();
    assert_eq!(
        d.query_stream(s).unwrap(),
        Completion::NotReady,
        "its callback's task"
    );
    d.destroy_stream(s)
        .expect("nothing of the caller's is queued");
    let c = control().callbacks(id);
    assert_eq!((c.subscriptions, c.unsubscribes), (0, 1), "{c:?}");
    // Work of the caller's queued behind the callback keeps the stream (it
    // is waited for a moment, then refused): a hung kernel.
    let d = open(
        &real_time(Duration::from_micros(50), Duration::from_secs(60)),
        true,
    );
    let p = Pair::new(&d);
    d.record_event(p.fence, p.aicpu).unwrap();
    d.queue_notify(p.aicpu, p.fence).unwrap();
    d.sync_event(p.fence, PATIENCE).unwrap();
    d.launch_aicpu(p.aicpu, HandRun::new(&d, 1, &[1]).args.block().args())
        .unwrap();
    let err = d.destroy_stream(p.aicpu).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            runclaim::driver::DriverErrorKind::StreamBusy { .. }
        ),
        "{err}"
    );
    assert_eq!(
        d.query_stream(p.aicpu).unwrap(),
        Completion::NotReady,
        "still there"
    );
}

/// The reactor found no stream subscribed to it (its `aclrtProcessReport`
/// answered at once), then a launch subscribed one — and only then did
/// the reactor go to wait for a subscription: it must see the one that
/// came meanwhile instead of sleeping through its whole wait. The fake's
/// report gate makes that order happen every time; the reactor's wait is
/// an hour, so only the subscription can wake it within the test's
/// patience (a stepped device: nothing moves but what the test drives).
#[test]
fn a_subscription_made_while_the_reactor_found_none_is_not_slept_through() {
    let hour = Duration::from_secs(3600);
    let d = open_with(&stepped(), false, |acl| acl.reactor_max_wait(hour));
    let id = d.device_id();
    let api = raw();
    // A stream this thread holds the subscription of: the driver's
    // `queue_notify` on it starts the reactor, and its subscription is
    // refused (one thread per stream), so the reactor starts with nothing
    // subscribed to it.
    let taken = d.create_stream().unwrap();
    let mark = d.create_event().unwrap();
    d.record_event(mark, taken).unwrap();
    // SAFETY: the driver's live stream, on this thread, which the driver's
    // calls bound to its device.
    let rc = unsafe { (api.subscribe)(this_thread(), handle(taken.raw())) };
    assert_eq!(rc, 0);
    control().hold_report(id);
    assert!(d.queue_notify(taken, mark).is_err(), "the stream is taken");
    wait_for("the reactor held, having found nothing subscribed", || {
        control().callbacks(id).holding == 1
    });
    // The run's notification subscribes the AICPU stream, then queues the
    // callback, which lets the held report go: 107012, as it found.
    let p = Pair::new(&d);
    let run = HandRun::new(&d, 1, &[1, 2]);
    p.launch(&d, &run);
    let (count, waker) = counted();
    // A deadline past the reactor's wait: no timer stands in.
    assert_eq!(
        d.notify_event(p.fence, hour * 2, &waker).unwrap(),
        Notice::Completion
    );
    d.sync_stream(p.aicpu, PATIENCE).unwrap();
    wait_for(
        "the callback's wake (a reactor asleep for its hour never runs it)",
        || count.get() >= 1,
    );
    let c = control().callbacks(id);
    assert_eq!((c.held_reports, c.holding), (1, 0), "{c:?}");
    assert_eq!((c.launched, c.run), (1, 1), "{c:?}");
    // SAFETY: as above.
    let rc = unsafe { (api.unsubscribe)(this_thread(), handle(taken.raw())) };
    assert_eq!(rc, 0);
}
