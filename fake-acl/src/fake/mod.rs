//! The exported C symbols of the fake runtime. Each is a thin shim: check
//! pointers, find the calling thread's device, call the simulator, map its
//! error back to the ACL code the real runtime would return (runclaim's own
//! table, so the two directions cannot drift apart), and remember the
//! message for `aclGetRecentErrMsg`.
//!
//! Where the real runtime is stricter or different than the simulator, the
//! fake models the runtime, as the CANN headers (`acl/acl_rt.h`,
//! `acl/acl_base_rt.h`, `runtime/rt.h`) and the runtime's documented
//! behaviour describe it:
//!
//! - **Device references.** Every `aclrtSetDevice` takes a reference,
//!   every `aclrtResetDevice` drops one; at 0 the device is released: its
//!   simulator is dropped (a real-time device thread is joined), its streams,
//!   events and memory are gone, and its final counters and trace stay
//!   readable through the control API. A device's simulator is created at
//!   its first `aclrtSetDevice`.
//! - **Contexts.** `aclrtGetCurrentContext` / `aclrtSetCurrentContext`
//!   switch a thread between devices without taking a reference. Stream and
//!   event handles carry their device: a stream of another device than the
//!   thread's is refused with 107003 ("stream not in current context").
//! - **Events.** `aclrtCreateEventExWithFlag` events report complete before
//!   their first record (the simulator's behaviour). `aclrtCreateEventWithFlag`
//!   ("old mode") events report *not ready* until recorded, a timed sync on
//!   one times out, and a stream wait on one queues a device wait that only
//!   the event's next record satisfies (until then the stream stalls, and
//!   the device watchdog faults it). The runtime allocates an old-mode
//!   event's hardware id when it creates it (`ApiImpl::EventCreate` →
//!   `Event::GenEventId`), sends a wait on it while it is not recorded
//!   (`Event::WaitSendCheck`) and records the same id later
//!   (`Event::Record`), in hicann/runtime's `src/runtime/api/impl/api_impl.cc`
//!   and `src/runtime/core/src/event/event.cc`. The fake releases the
//!   waits when the record is enqueued, not when the device reaches it.
//! - **Quirks** (`runclaim_fake_quirks`, for the runtime check's negative
//!   controls): a device can be told to behave unlike the runtime in one
//!   respect each — see `control::QUIRK_*`.
//! - **Zero timeouts.** `aclrtSynchronize*WithTimeout(x, 0)` returns 107000.
//! - **Programs.** Each `rtRegisterAllKernel` returns a distinct handle that
//!   holds (pins) its code until `rtDevBinaryUnRegister`; a handle value may
//!   be reused after unregistration, as a freed runtime object's address can
//!   be. Each device has its own registration table, as it has its own code
//!   memory: the handles a device hands out depend only on what was
//!   registered and unregistered on that device, never on what another
//!   device (another test) does meanwhile. When every code slot is held,
//!   registration fails with 507032 (`ACL_ERROR_RT_PROGRAM_USE_OUT`).
//! - **Kernel protocols.** Each device's simulator runs one built-in
//!   device model (`runclaim_fake_device_model`: `"runclaim"`, the
//!   default, or `"a2a3"`), which decodes the launch blocks as the device
//!   would: a block of another protocol is refused at launch with 107000
//!   (after the launch is counted). User models and Rust kernels are Rust
//!   values of the test process, out of this library's reach: they stay
//!   simulator-only.
//! - **Fresh memory.** `aclrtMalloc` does not clear what it hands out:
//!   each new allocation holds [`FRESH_BYTE`](crate::control::FRESH_BYTE)
//!   (0xA5) throughout, as real device memory holds whatever was left in
//!   it.
//! - **Bounds.** A synchronous device-to-device copy is checked against the
//!   device's memory size before the fake stages it; `count > destMax` is
//!   refused as the runtime does. The fake records each memory call's
//!   `destMax` / `count` for tests.
//!
//! - **Host callbacks.** `aclrtSubscribeReport` / `aclrtLaunchCallback` /
//!   `aclrtProcessReport` with one subscribed thread per stream, one device
//!   per thread, a callback that is a stream task (it takes a queue slot and
//!   is due only once everything ahead of it completed), delivery on the
//!   subscribed thread only, and the exception-info callback called from a
//!   thread of the fake's on every stream fault; a stop-on-failure knob
//!   makes callbacks behind a fault never run (`callbacks.rs`). Optional
//!   symbols: absent from the lite variant.
//!
//! - **Stream capture.** `aclmdlRICapture{Begin,GetInfo,End}`,
//!   `aclmdlRIExecuteAsync` and `aclmdlRIDestroy` on the simulator's
//!   capture, each rule refused with the runtime's code where the runtime
//!   refuses it, and a stream sync or query of a capturing stream answered
//!   107027 as the runtime's is (`capture.rs`). Optional symbols: absent
//!   from the lite variant.
//!
//! Nothing here panics on bad input or during thread teardown.
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | the process-wide state: devices, their configurations, counters and registration tables; the calling thread's device and error message; releasing a device |
//! | `shim.rs` | what every entry point is built from: handles of a device, entering the calling thread's device, mapping results to codes, host buffers |
//! | `devices.rs` | `aclInit` / `aclFinalizeReference`, device references, contexts, the version, the error message, the op watchdog |
//! | `memory.rs` | `aclrtMalloc` / `aclrtFree`, synchronous and asynchronous copies and memsets |
//! | `streams.rs` | streams: create, destroy, query, timed synchronize; the runtime's reading of a timeout |
//! | `events.rs` | events in both modes: create, destroy, record, query, wait, timed synchronize, elapsed time, timestamps |
//! | `code.rs` | `rtRegisterAllKernel` / `rtDevBinaryUnRegister` and each device's registration table |
//! | `launch.rs` | the two kernel launches with the fake's own launch-struct layouts, the AICPU op-info binary |
//! | `hooks.rs` | the `runclaim_fake_*` entry points behind the control API, the device model included |
//! | `capture.rs` | stream capture: begin, status, end into a graph, its replay and destruction, with the runtime's codes for each rule |
//! | `callbacks.rs` | host callbacks (subscribe, launch, process report) and exception reports, with the runtime's constraints; their control hooks |

#![allow(
    clippy::missing_safety_doc,
    reason = "C entry points; the safety contract is the ACL API's"
)]

mod callbacks;
#[cfg(feature = "optional-symbols")]
mod capture;
mod code;
mod devices;
mod events;
mod hooks;
mod launch;
mod memory;
mod shim;
mod streams;

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{CString, c_int};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use runclaim::driver::acl::codes::AclError;
use runclaim::driver::{CodeHandle, Driver, EventId, StreamId};
use runclaim::sim::{ModelHandle, SimConfig, SimDriver};

use super::control::{FakeConfig, FakeRuntime, FakeStats, FakeTraceEntry, encode_trace};

const PARAM_INVALID: c_int = AclError::ACL_ERROR_RT_PARAM_INVALID;
const CONTEXT_NULL: c_int = AclError::ACL_ERROR_RT_CONTEXT_NULL;

struct Dev {
    /// The device's simulator: one driver value for every call of the
    /// runtime on the device (the fake is the runtime, and the runtime's
    /// memory, streams and events are the process's, whichever
    /// `AclDriver` asked), so an entry point shares it rather than clone
    /// it (a clone would be another driver, owning nothing; see
    /// `SimDriver`'s `Clone`).
    sim: Arc<SimDriver>,
    /// Fake-level code injections: (calls still to pass, code).
    codes: Vec<(u64, c_int)>,
    /// Old-mode events (simulator ids) not recorded yet.
    unrecorded: BTreeSet<u64>,
    /// Per old-mode event (simulator id) that a stream waits on before its
    /// first record: the simulator event whose record never completes that
    /// those waits wait for, until the old-mode event's record destroys it
    /// (a wait on a destroyed simulator event is satisfied).
    gates: BTreeMap<u64, EventId>,
    /// The stream the gates' never-completing records are queued on.
    #[cfg_attr(
        feature = "omit-required",
        allow(dead_code, reason = "used by the symbol the incomplete variant omits")
    )]
    gate_stream: Option<StreamId>,
    /// Behaviours steered away from the runtime's (`runclaim_fake_quirks`).
    quirks: u32,
    /// The next elapsed time to report instead of the simulator's.
    elapsed: Option<f32>,
}

/// What is left of a released device: its last counters, trace and clock.
struct Retired {
    stats: FakeStats,
    trace: Vec<FakeTraceEntry>,
    clock_ns: u64,
}

/// One `rtRegisterAllKernel` registration: the simulator code it pins.
type Program = CodeHandle;

struct State {
    devices: BTreeMap<i32, Dev>,
    configs: BTreeMap<i32, FakeConfig>,
    /// The built-in protocol each device speaks, where a test chose one
    /// (`runclaim_fake_device_model`; runclaim's otherwise).
    models: BTreeMap<i32, ModelHandle>,
    runtime: BTreeMap<i32, FakeRuntime>,
    retired: BTreeMap<i32, Retired>,
    /// Each device's registrations by index; `None` = free (reused lowest
    /// first). A device's table outlives its reset, as the programs do.
    programs: BTreeMap<i32, Vec<Option<Program>>>,
    /// Each device's quirks (`runclaim_fake_quirks`), kept across releases.
    quirks: BTreeMap<i32, u32>,
    inits: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    devices: BTreeMap::new(),
    configs: BTreeMap::new(),
    models: BTreeMap::new(),
    runtime: BTreeMap::new(),
    retired: BTreeMap::new(),
    programs: BTreeMap::new(),
    quirks: BTreeMap::new(),
    inits: 0,
});

thread_local! {
    static CURRENT: Cell<Option<i32>> = const { Cell::new(None) };
    /// The message of the last failure on this thread, not yet fetched.
    static PENDING: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// The message last returned by aclGetRecentErrMsg (kept alive).
    #[cfg(feature = "optional-symbols")]
    static RETURNED: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// A test's override of what aclrtGetVersion reports on this thread.
    #[cfg(feature = "optional-symbols")]
    static VERSION: Cell<Option<(i32, i32, i32)>> = const { Cell::new(None) };
}

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn current() -> Option<i32> {
    // A `const` Cell without a destructor: readable during teardown too.
    CURRENT.try_with(Cell::get).ok().flatten()
}

fn set_current(device: Option<i32>) {
    let _ = CURRENT.try_with(|c| c.set(device));
}

/// Remembers `m` for `aclGetRecentErrMsg`. During thread teardown, once the
/// message slot is gone, the message is dropped (never a panic).
fn set_message(m: &str) {
    let c = CString::new(m.replace('\0', " ")).unwrap_or_default();
    let _ = PENDING.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            *p = Some(c);
        }
    });
}

/// An unconfigured device's simulator configuration: the default, with
/// the watchdog `RUNCLAIM_FAKE_WATCHDOG_MS` names, if it names one (the
/// real runtime's op watchdog is at least about 4.3 s; the simulator's
/// default is 100 ms, which a check that holds a stream can outlast).
fn unconfigured() -> SimConfig {
    let mut c = SimConfig::default();
    if let Some(ms) = std::env::var("RUNCLAIM_FAKE_WATCHDOG_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        c.watchdog = std::time::Duration::from_millis(ms.max(1));
    }
    c
}

fn new_sim(cfg: Option<&FakeConfig>, model: Option<&ModelHandle>) -> Arc<SimDriver> {
    let real_time = match cfg {
        Some(c) => c.real_time == 1,
        None => std::env::var("RUNCLAIM_FAKE_MODE").as_deref() == Ok("realtime"),
    };
    let mut c = cfg.map_or_else(unconfigured, |c| c.to_sim());
    if let Some(m) = model {
        c.device_model = m.clone();
    }
    Arc::new(if real_time {
        SimDriver::real_time(c)
    } else {
        SimDriver::stepped(c)
    })
}

/// A fresh device record for `device`, with the configuration and the
/// device model the control API set for it (defaults otherwise).
fn new_dev(st: &State, device: i32) -> Dev {
    Dev {
        sim: new_sim(st.configs.get(&device), st.models.get(&device)),
        codes: Vec::new(),
        unrecorded: BTreeSet::new(),
        gates: BTreeMap::new(),
        gate_stream: None,
        quirks: st.quirks.get(&device).copied().unwrap_or(0),
        elapsed: None,
    }
}

fn runtime(st: &mut State, device: i32) -> &mut FakeRuntime {
    st.runtime.entry(device).or_default()
}

/// Whether quirk `bit` (`control::QUIRK_*`) is set for live `device`.
fn quirk(device: i32, bit: u32) -> bool {
    with_dev(device, |d| d.quirks & bit != 0).unwrap_or(false)
}

/// The live devices with quirk `bit` set (for a thread that holds a lock
/// the device state must not be taken under, to ask before it takes it).
fn quirked(bit: u32) -> BTreeSet<i32> {
    state()
        .devices
        .iter()
        .filter(|(_, d)| d.quirks & bit != 0)
        .map(|(&id, _)| id)
        .collect()
}

/// Runs `f` on the device's fake-level record, if the device is live.
fn with_dev<R>(device: i32, f: impl FnOnce(&mut Dev) -> R) -> Option<R> {
    state().devices.get_mut(&device).map(f)
}

fn note(device: i32, f: impl FnOnce(&mut FakeRuntime)) {
    f(runtime(&mut state(), device));
}

/// Releases `device`: snapshots it, drops its simulator (joining a
/// real-time device thread once the last clone is gone) outside the lock.
fn release(st: &mut State, device: i32) -> Option<Dev> {
    let dev = st.devices.remove(&device)?;
    let trace = dev.sim.trace().iter().map(encode_trace).collect();
    st.retired.insert(
        device,
        Retired {
            stats: FakeStats::from_sim(&dev.sim.stats()),
            trace,
            clock_ns: u64::try_from(dev.sim.clock().as_nanos()).unwrap_or(u64::MAX),
        },
    );
    let rt = runtime(st, device);
    rt.releases += 1;
    rt.live = 0;
    Some(dev)
}
