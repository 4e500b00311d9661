//! # runclaim
//!
//! Queue consecutive Ascend NPU runs on one stream pair, with the rules that
//! keep it safe in the type system.
//!
//! An Ascend NPU runs each *run* as two kernels on two device streams: the
//! AICore compute workers and the AICPU scheduler that hand-shakes with them.
//! The reference runtime finishes run N on the host — drain, validate,
//! finalize — before it launches run N+1, so the device idles for a host
//! round trip between runs. A stream is an ordered queue: it would order the
//! runs for free. runclaim lets up to `DEPTH` runs be launched at once, each
//! with its own completion fence.
//!
//! ```
//! use runclaim::{Callable, Device, DeviceConfig, Input, Outputs, RunSpec};
//! use runclaim::driver::abi::Program;
//! use runclaim::sim::{SimConfig, SimDriver};
//!
//! let sim = SimDriver::real_time(SimConfig::default()); // a simulated NPU
//! let mut device = Device::<_, 2>::open(sim, DeviceConfig::default())?;
//! let runner = device.publish(&[Callable::program("axpy", &Program::new().mul(2).add(1))])?;
//! let axpy = runner.code("axpy")?;
//! let (mut out0, mut out1) = (Outputs::<0>::new(64), Outputs::<1>::new(64));
//!
//! // Two runs queued back to back on the same streams: run 1 is on the
//! // device before run 0 is fenced, and reads run 0's output in stream order.
//! let run0 = runner.prepare(runner.take_slot::<0>()?, RunSpec::new(axpy, Input::Host(&[1, 2, 3])))?.launch()?;
//! let run1 = runner.prepare(runner.take_slot::<1>()?, RunSpec::new(axpy, Input::Previous))?.launch()?;
//!
//! let done0 = run0.fence()?.finalize(&mut out0)?; // run 1 may still be executing
//! assert_eq!(out0.values(), &[3, 5, 7]);
//! let done1 = run1.fence()?.finalize(&mut out1)?;
//! assert_eq!(out1.values(), &[7, 11, 15]);
//! # drop((done0, done1));
//! # Ok::<(), runclaim::Error>(())
//! ```
//!
//! ## The states of a run
//!
//! 1. [`Runner::take_slot`] hands out the [`SlotToken`] of slot `I` — the
//!    only way to use that slot's arena bank, handshake region, device-wall
//!    buffer and status record. `I >= DEPTH` does not compile.
//! 2. [`Runner::prepare`] → [`Run<Prepared, I>`](Prepared): input uploaded,
//!    handshake cleared, records armed. Nothing is on a stream.
//! 3. [`Run::launch`] → [`Run<Launched, I>`](Launched): the AICore kernel,
//!    the AICPU kernel and the run's fence are queued. Launch does not wait
//!    for the run before it.
//! 4. [`Run::fence`] → [`Run<Fenced, I>`](Fenced): this run's own fence
//!    event was observed complete — never a whole-stream sync.
//! 5. [`Run::finalize`] → [`Finalized`]: status, device wall and outputs
//!    read back and validated; the token comes back for the next run.
//!
//! The old serial contract is the same calls with no overlap;
//! [`Runner::run_serial`] is that, in one line. The steady state — all
//! `DEPTH` slots busy over a stream of work, results back in submission
//! order — is a [`Pipeline`]: it holds every slot of a runner and moves each
//! through these same states, for any supported depth.
//!
//! ## What the compiler guarantees
//!
//! Each rule is a `compile_fail` doctest, checked with its error code, next
//! to a passing twin that differs by one line:
//!
//! | rule | error | where |
//! |---|---|---|
//! | a prepared run launches once | E0382 | [`Run`] |
//! | no finalize before the fence | E0599 | [`Run`] |
//! | no publication while a run is launched | E0499 | [`Runner`] |
//! | no publication while a pipeline holds runs | E0499 | [`Pipeline`] |
//! | slot index below `DEPTH` | E0277 | [`Runner::take_slot`] |
//! | a run reaches only its own slot's buffers and token | E0308 | [`Run`] |
//! | a token that moved into a run is gone | E0382 | [`Run`] |
//! | no publication while a capture exists | E0499 | [`Capture`] |
//! | a slot's capture replays only that slot's runs | E0308 | [`Capture`] |
//! | a replay launches once | E0382 | [`Capture`] |
//!
//! ## What is checked at run time
//!
//! The types cannot see a [`std::mem::forget`], a device fault or a hang:
//!
//! - **Dropped runs.** Dropping a launched run waits (bounded, as a fence
//!   does) for its own fence, then frees its slot — even while a panic
//!   unwinds. A run that cannot be
//!   proven complete leaves its slot **quarantined** — never recycled while
//!   the device might still write it — and reported in [`Runner::health`].
//! - **Forgotten runs.** Forgetting a run ends its borrow, so the device
//!   also keeps an in-flight set. A forgotten run keeps its slot until a
//!   [`Runner::drain`] or a [`Device::publish`] proves it complete; closing
//!   the device waits for it too. Nothing destroys a stream with queued work.
//! - **Time knows the queue.** [`DeviceConfig::fence_timeout`] is a per-run
//!   budget: what the device may take over one run once every run ahead of
//!   it is complete. A fence waits as long as the runs ahead legitimately
//!   take; only a run that stayed incomplete at the head of the queue for
//!   longer than its budget — on the driver's clock, never the host's — is
//!   evidence of a hang. See [`Run::fence`].
//! - **Poisoning.** A partial launch (AICore queued, AICPU refused), a device
//!   fault, a run that overran its budget, or a panic that interrupted a
//!   transition **poisons** the runner, naming the run it belongs to:
//!   nothing launches until a drain proves the queue quiet (and re-creates
//!   faulted streams). A run that completes with an error code fails alone
//!   ([`contract::ErrorKind::RunFailed`]); its queued successor is
//!   unaffected.
//! - **Records.** Finalize checks that the status and device-wall records
//!   carry this run's id: a record written by another run is an error, not
//!   a silently wrong diagnostic.
//! - **Code.** A publication pins its code: no other owner of the NPU can
//!   evict it while the runner lives, and a launch of a replaced upload is
//!   refused, never run.
//! - **Configuration.** The fence timeout must exceed the device watchdog,
//!   and no duration or size may overflow what is computed from it;
//!   [`Device::open`] refuses such a configuration, naming the value.
//!
//! ## API stability
//!
//! Covered by semantic versioning, for programs that run work:
//! the crate root and [`contract`] (devices, runners, slots, runs, the
//! [`Pipeline`], errors), [`measure`], the simulator's [`SimDriver`](sim::SimDriver),
//! [`SimConfig`](sim::SimConfig), [`Fault`](sim::Fault) and statistics, and
//! the `acl` driver's `AclDriver`, configuration and
//! errors (with the `acl` feature).
//!
//! For **driver implementers** (stable too, but a different audience): the
//! [`driver::Driver`] trait with its handle types (their `from_raw`
//! constructors), [`DriverInfo`](driver::DriverInfo),
//! [`Registration`](driver::Registration), [`Native`](driver::Native) and the
//! error kinds; [`driver::abi`], the device-side ABI the kernels implement
//! (its layouts change only with its version number).
//!
//! **Not covered**: [`sim::trace`], the simulator's trace, which follows the
//! simulator's internals and is public for tests and tools. Types that may
//! grow are `#[non_exhaustive]`; match them with a wildcard arm.
//!
//! ## Layers
//!
//! See `ARCHITECTURE.md` in the repository for what each file owns and one
//! run's walk through them.
//!
//! - [`driver`] — the [`driver::Driver`] trait; [`sim`], the simulated NPU;
//!   `driver::acl`, the real runtime loaded with `libloading` (the `acl` feature).
//! - [`contract`] — devices, runners, slots and run states.
//! - [`measure`] — device idle gaps and throughput from device-wall records,
//!   and an SVG timeline.

pub mod contract;
pub mod driver;
#[cfg(any(fuzzing, test))]
#[doc(hidden)]
pub mod fuzzing;
pub mod guide;
#[cfg(all(test, loom))]
mod loom_tests;
pub mod measure;
mod sync;

pub use contract::{
    Callable, Capture, CodeRef, Completed, Device, DeviceBuffer, DeviceConfig, Error, Fenced,
    Finalized, Input, Launched, Outputs, OwnedId, Pipeline, Prepared, Run, RunSpec, Runner,
    SharedDevice, SlotToken, TensorId, WithoutValue, Workload,
};
pub use driver::sim;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
