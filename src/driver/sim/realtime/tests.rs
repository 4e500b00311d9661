//! The real-time device thread's wake rule, against changes its plan
//! could not foresee.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use crate::driver::abi::{self, Program, RunArgs, StatusRecord, WallRecord};
use crate::driver::{Driver, Notice};
use crate::sim::{LatencyModel, SimConfig, SimDriver};

/// Long enough for anything a test waits for on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(20);

struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < PATIENCE,
            "{what}: not within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// An AICPU kernel launched before the AICore kernel whose workers it
/// waits for: its fence is armed while the simulation's timeline says
/// nothing happens before the watchdog, and the device thread naps. The
/// AICore launch that lets it finish is a change that plan could not
/// foresee: with a waker armed it must kick the thread, which otherwise
/// sleeps to its nap's end (here made an hour: only the kick can wake it
/// within the test's patience).
#[test]
fn a_submission_that_lets_an_armed_record_complete_kicks_the_napping_device_thread() {
    let cfg = SimConfig::default()
        .watchdog(Duration::from_secs(3600))
        .latency(LatencyModel::default().kernel(Duration::from_millis(1)));
    let sim = SimDriver::real_time(cfg);
    sim.shared()
        .armed_nap_cap
        .store(3_600_000_000_000, Ordering::Relaxed);
    let (aicore, aicpu) = (sim.create_stream().unwrap(), sim.create_stream().unwrap());
    let fence = sim.create_event().unwrap();
    let code = sim
        .register_code(&Program::new().add(1).encode())
        .unwrap()
        .handle;
    let block_dim = 1;
    let data = sim.alloc(64).unwrap();
    let hs = sim.alloc(abi::handshake_bytes(block_dim)).unwrap();
    sim.memset(hs, 0, abi::handshake_bytes(block_dim)).unwrap();
    let args = RunArgs {
        run_id: 1,
        slot: 0,
        block_dim,
        len: 16,
        input: data.raw(),
        output: data.raw(),
        handshake: hs.raw(),
        wall: sim.alloc(WallRecord::SIZE).unwrap().raw(),
        status: sim.alloc(StatusRecord::SIZE).unwrap().raw(),
    };
    let block = args.block();
    sim.launch_aicpu(aicpu, block.args()).unwrap();
    sim.record_event(fence, aicpu).unwrap();
    let count = Arc::new(Count(AtomicUsize::new(0)));
    let waker = Waker::from(Arc::clone(&count));
    let hour = Duration::from_secs(3600);
    assert_eq!(
        sim.notify_event(fence, hour, &waker).unwrap(),
        Notice::Completion
    );
    wait_for("the device thread napping", || {
        sim.lock().notify.nap.asleep()
    });
    sim.launch_aicore(aicore, code, block_dim, block.args())
        .unwrap();
    wait_for("the fence's wake", || count.0.load(Ordering::Acquire) >= 1);
    assert_eq!(
        sim.query_event(fence).unwrap(),
        crate::driver::Completion::Complete
    );
}
