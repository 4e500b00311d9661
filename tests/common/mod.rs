//! Shared test support: the `Target` a contract suite runs against (the
//! simulator directly here; the `acl` driver over the fake runtime library
//! in the `acl-tests` workspace member, which includes this module), and
//! helpers the suites share.

#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod abi;
pub mod async_suite;
pub mod broken;
pub mod checks;
pub mod foreign;
pub mod hooked;
#[path = "../../examples/support/join.rs"]
pub mod join;
pub mod listed;
pub mod model;
pub mod pipeline_suite;
pub mod replaying;
pub mod suite;

use runclaim::contract::{Slot, SlotOf};
use runclaim::driver::Driver;
use runclaim::driver::abi::A2a3Abi;
use runclaim::sim::trace::TraceEvent;
use runclaim::sim::{A2a3Model, Fault, SimConfig, SimDriver, SimStats};
use runclaim::{CodeRef, DeviceConfig, Input, Launched, Outputs, Run, RunSpec, Runner};

/// Test shorthands over a runner, panicking on any error (the tests that
/// expect errors spell the steps out).
pub trait LaunchIn<'r, const DEPTH: usize> {
    /// The launched run.
    fn launched<const I: usize>(
        &'r self,
        code: CodeRef<'r>,
        input: Input<'_>,
    ) -> Run<'r, Launched, I>
    where
        Slot<I>: SlotOf<DEPTH>;

    /// One run in slot `I` the serial way; its output values.
    fn serial<const I: usize>(&'r self, code: CodeRef<'r>, input: Input<'_>) -> Vec<u32>
    where
        Slot<I>: SlotOf<DEPTH>;
}

impl<'r, D: Driver, const DEPTH: usize> LaunchIn<'r, DEPTH> for Runner<'_, D, DEPTH> {
    fn launched<const I: usize>(
        &'r self,
        code: CodeRef<'r>,
        input: Input<'_>,
    ) -> Run<'r, Launched, I>
    where
        Slot<I>: SlotOf<DEPTH>,
    {
        let token = self.take_slot::<I>().expect("take the slot");
        let run = self
            .prepare(token, RunSpec::new(code, input))
            .expect("prepare");
        run.launch().expect("launch")
    }

    fn serial<const I: usize>(&'r self, code: CodeRef<'r>, input: Input<'_>) -> Vec<u32>
    where
        Slot<I>: SlotOf<DEPTH>,
    {
        let mut out = Outputs::<I>::new(self.device().max_elements());
        let token = self.take_slot::<I>().expect("take the slot");
        let done = self
            .run_serial(token, RunSpec::new(code, input), &mut out)
            .expect("a serial run");
        drop(done);
        out.values().to_vec()
    }
}

/// A device a contract suite can open, inspect and fault.
pub trait Target: Sync {
    /// The driver type.
    type D: Driver + 'static;
    /// A stepped (deterministic) device.
    fn stepped(&self, cfg: SimConfig) -> Self::D;
    /// A real-time device.
    fn real_time(&self, cfg: SimConfig) -> Self::D;
    /// Arms a fault on the device behind `d`.
    fn inject(&self, d: &Self::D, f: Fault);
    /// Counters of the device behind `d`.
    fn stats(&self, d: &Self::D) -> SimStats;
    /// The device trace behind `d`.
    fn trace(&self, d: &Self::D) -> Vec<TraceEvent>;
    /// A reader of the counters that outlives `d` (to check for leaks after
    /// the device is closed).
    fn probe(&self, d: &Self::D) -> Box<dyn Fn() -> SimStats>;
    /// The device configuration the suite opens with: the kernel ABI the
    /// target's device speaks (runclaim's own by default).
    fn config(&self) -> DeviceConfig {
        DeviceConfig::default()
    }
    /// Whether the suites replay their runs: the pipeline suite's
    /// pipelines, and the contract suite's launches (`replaying`).
    fn replay(&self) -> bool {
        false
    }
}

/// The simulator speaking the reference runtime's a2a3 protocol, and a
/// device configured with the matching adapter.
pub struct SimA2a3;

impl Target for SimA2a3 {
    type D = SimDriver;
    fn stepped(&self, cfg: SimConfig) -> SimDriver {
        SimDriver::stepped(cfg.device_model(A2a3Model))
    }
    fn real_time(&self, cfg: SimConfig) -> SimDriver {
        SimDriver::real_time(cfg.device_model(A2a3Model))
    }
    fn inject(&self, d: &SimDriver, f: Fault) {
        d.inject(f);
    }
    fn stats(&self, d: &SimDriver) -> SimStats {
        d.stats()
    }
    fn trace(&self, d: &SimDriver) -> Vec<TraceEvent> {
        d.trace()
    }
    fn probe(&self, d: &SimDriver) -> Box<dyn Fn() -> SimStats> {
        let d = d.clone();
        Box::new(move || d.stats())
    }
    fn config(&self) -> DeviceConfig {
        DeviceConfig::default().kernel_abi(A2a3Abi)
    }
}

/// The simulator, used directly.
pub struct Sim;

/// A target whose runs are replayed wherever they can be: the pipeline
/// suite's pipelines, the contract suite's launches (through
/// [`replaying::Captures`]).
pub struct Replaying<T>(pub T);

impl<T: Target> Target for Replaying<T> {
    type D = T::D;
    fn stepped(&self, cfg: SimConfig) -> T::D {
        self.0.stepped(cfg)
    }
    fn real_time(&self, cfg: SimConfig) -> T::D {
        self.0.real_time(cfg)
    }
    fn inject(&self, d: &T::D, f: Fault) {
        self.0.inject(d, f);
    }
    fn stats(&self, d: &T::D) -> SimStats {
        self.0.stats(d)
    }
    fn trace(&self, d: &T::D) -> Vec<TraceEvent> {
        self.0.trace(d)
    }
    fn probe(&self, d: &T::D) -> Box<dyn Fn() -> SimStats> {
        self.0.probe(d)
    }
    fn config(&self) -> DeviceConfig {
        self.0.config()
    }
    fn replay(&self) -> bool {
        true
    }
}

impl Target for Sim {
    type D = SimDriver;
    fn stepped(&self, cfg: SimConfig) -> SimDriver {
        SimDriver::stepped(cfg)
    }
    fn real_time(&self, cfg: SimConfig) -> SimDriver {
        SimDriver::real_time(cfg)
    }
    fn inject(&self, d: &SimDriver, f: Fault) {
        d.inject(f);
    }
    fn stats(&self, d: &SimDriver) -> SimStats {
        d.stats()
    }
    fn trace(&self, d: &SimDriver) -> Vec<TraceEvent> {
        d.trace()
    }
    fn probe(&self, d: &SimDriver) -> Box<dyn Fn() -> SimStats> {
        let d = d.clone();
        Box::new(move || d.stats())
    }
}

/// Runs `f`, or ends the test binary with a message naming `what` if `f`
/// has not returned after `limit`: a test of "never hangs" that fails
/// instead of hanging when the behaviour breaks. `limit` is a generous
/// backstop (seconds or minutes), not a timing claim.
pub fn or_abort_after<R>(limit: std::time::Duration, what: &str, f: impl FnOnce() -> R) -> R {
    let (done, watched) = std::sync::mpsc::channel::<()>();
    let what = what.to_owned();
    let watchdog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watched.recv_timeout(limit) {
            // Straight to stderr: the test harness's output capture would
            // swallow it when the process aborts.
            let msg = format!("hung: {what} did not return within {limit:?}\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), msg.as_bytes());
            std::process::abort();
        }
    });
    let r = f();
    drop(done);
    let _ = watchdog.join();
    r
}
