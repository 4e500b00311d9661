//! The fake library's test-control ABI: plain `repr(C)` data exchanged with
//! the `runclaim_fake_*` functions, and conversions to the simulator's types.

use std::time::Duration;

use runclaim::driver::{EventId, FaultKind, Op, StreamId};
use runclaim::sim::trace::{TaskTag, TraceEvent, TraceKind};
use runclaim::sim::{Fault, Kernel, LatencyModel, SimConfig, SimStats};

/// What every byte of a fresh `aclrtMalloc` allocation holds. The runtime
/// does not clear the memory it hands out (it holds whatever was there
/// before, another process's bytes included), so the fake fills it with
/// this rather than the simulator's zeroes: a host that reads back bytes
/// nobody wrote sees them.
pub const FRESH_BYTE: u8 = 0xA5;

/// Configuration of one fake device (`runclaim_fake_configure`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeConfig {
    /// 0: stepped mode; 1: real-time mode.
    pub real_time: u32,
    /// Resident code images.
    pub code_slots: u32,
    /// Tasks per stream.
    pub stream_capacity: u32,
    /// Trace ring size.
    pub trace_capacity: u32,
    /// Device watchdog, µs.
    pub watchdog_us: u64,
    /// Stepped-mode policy seed.
    pub seed: u64,
    /// Latency model, µs: kernel duration.
    pub kernel_us: u64,
    /// Host submit cost per kernel launch.
    pub submit_us: u64,
    /// Device dispatch gap.
    pub dispatch_us: u64,
    /// Host wake-up after a blocking wait.
    pub wake_us: u64,
    /// Host cost of every runtime call.
    pub per_call_us: u64,
    /// Whether the device captures streams (1) or refuses (0).
    pub capture: u32,
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl FakeConfig {
    /// From a simulator configuration.
    #[must_use]
    pub fn from_sim(c: &SimConfig, real_time: bool) -> Self {
        FakeConfig {
            real_time: u32::from(real_time),
            code_slots: u32::try_from(c.code_slots).unwrap_or(u32::MAX),
            stream_capacity: u32::try_from(c.stream_capacity).unwrap_or(u32::MAX),
            trace_capacity: u32::try_from(c.trace_capacity).unwrap_or(u32::MAX),
            watchdog_us: us(c.watchdog),
            seed: c.seed,
            kernel_us: us(c.latency.kernel),
            submit_us: us(c.latency.submit),
            dispatch_us: us(c.latency.dispatch_gap),
            wake_us: us(c.latency.host_wake),
            per_call_us: us(c.latency.per_call),
            capture: u32::from(c.capture),
        }
    }

    /// To a simulator configuration.
    #[must_use]
    pub fn to_sim(self) -> SimConfig {
        let mut c = SimConfig::default();
        c.code_slots = self.code_slots as usize;
        c.stream_capacity = self.stream_capacity as usize;
        c.trace_capacity = self.trace_capacity as usize;
        c.watchdog = Duration::from_micros(self.watchdog_us);
        c.seed = self.seed;
        c.latency = LatencyModel::default()
            .kernel(Duration::from_micros(self.kernel_us))
            .submit(Duration::from_micros(self.submit_us))
            .dispatch_gap(Duration::from_micros(self.dispatch_us))
            .host_wake(Duration::from_micros(self.wake_us))
            .per_call(Duration::from_micros(self.per_call_us));
        c.capture = self.capture != 0;
        c
    }
}

/// `FakeStats` and its conversions from one list of `SimStats`' counters:
/// each counter is named once here, and a counter of `SimStats` missing
/// from the list fails `every_sim_counter_crosses_the_abi`.
macro_rules! fake_stats {
    ($($count:ident),* ; $($size:ident),*) => {
        /// Counters of one fake device (`runclaim_fake_stats`): the
        /// simulator's counters (its per-stream and per-op maps excepted),
        /// as plain `u64`s to cross the fake's C ABI. Each field is the
        /// `SimStats` field of the same name.
        #[repr(C)]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        #[allow(missing_docs, reason = "each field is the SimStats field of the same name")]
        pub struct FakeStats {
            $(pub $count: u64,)*
            $(pub $size: u64,)*
        }

        impl FakeStats {
            /// The names of the counters, in field order.
            pub const FIELDS: &'static [&'static str] =
                &[$(stringify!($count),)* $(stringify!($size),)*];

            /// From the simulator's counters.
            #[must_use]
            pub fn from_sim(s: &SimStats) -> Self {
                FakeStats {
                    $($count: s.$count,)*
                    $($size: u64::try_from(s.$size).unwrap_or(u64::MAX),)*
                }
            }

            /// To the simulator's counters (per-stream and per-op maps left
            /// empty).
            #[must_use]
            pub fn to_sim(self) -> SimStats {
                let mut s = SimStats::default();
                $(s.$count = self.$count;)*
                $(s.$size = usize::try_from(self.$size).unwrap_or(usize::MAX);)*
                s
            }
        }
    };
}

fake_stats!(
    streams_created, streams_destroyed, events_created, events_destroyed,
    allocations, frees, registrations, publications, dedup_hits,
    aicore_kernels, aicpu_kernels, stale_executions, kernel_faults,
    blocked_enqueues, busy_destroy_refused, steps, trace_dropped, live_bytes,
    captures, graph_launches, live_graphs;
    max_queue_depth
);

/// One trace entry (`runclaim_fake_trace`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeTraceEntry {
    /// Device tick.
    pub tick: u64,
    /// Stream id.
    pub stream: u64,
    /// Run id.
    pub run: u64,
    /// What happened (see [`encode_trace`]).
    pub what: u32,
    /// Task tag, fault kind or nothing.
    pub tag: u32,
    /// Event id or code handle.
    pub aux: u64,
}

fn tag_code(t: TaskTag) -> (u32, u64) {
    match t {
        TaskTag::Aicore => (1, 0),
        TaskTag::Aicpu => (2, 0),
        TaskTag::Record(e) => (3, e.raw()),
        TaskTag::Wait(e) => (4, e.raw()),
        TaskTag::Copy => (5, 0),
        TaskTag::Memset => (6, 0),
        // A kind this fake does not know yet travels as "unknown".
        _ => (0, 0),
    }
}

fn tag_of(code: u32, aux: u64) -> Option<TaskTag> {
    Some(match code {
        1 => TaskTag::Aicore,
        2 => TaskTag::Aicpu,
        3 => TaskTag::Record(EventId::from_raw(aux)),
        4 => TaskTag::Wait(EventId::from_raw(aux)),
        5 => TaskTag::Copy,
        6 => TaskTag::Memset,
        _ => return None,
    })
}

const FAULT_KINDS: [FaultKind; 6] = [
    FaultKind::AicoreTimeout,
    FaultKind::AicoreException,
    FaultKind::AicpuTimeout,
    FaultKind::AicpuException,
    FaultKind::VectorCoreException,
    FaultKind::Collateral,
];

/// Encodes a trace entry.
#[must_use]
pub fn encode_trace(t: &TraceEvent) -> FakeTraceEntry {
    let (what, tag, aux) = match t.what {
        TraceKind::Enqueued(g) => (1, tag_code(g).0, tag_code(g).1),
        TraceKind::Started(g) => (2, tag_code(g).0, tag_code(g).1),
        TraceKind::Finished(g) => (3, tag_code(g).0, tag_code(g).1),
        TraceKind::StaleCode => (4, 0, 0),
        TraceKind::Faulted(k) => (
            5,
            u32::try_from(FAULT_KINDS.iter().position(|&f| f == k).unwrap_or(0)).unwrap_or(0),
            0,
        ),
        TraceKind::StreamCreated => (6, 0, 0),
        TraceKind::StreamDestroyed => (7, 0, 0),
        TraceKind::Published(h) => (8, 0, h.raw()),
        _ => (0, 0, 0),
    };
    FakeTraceEntry {
        tick: t.tick,
        stream: t.stream.raw(),
        // A publication's upload stamp travels in the run field.
        run: match t.what {
            TraceKind::Published(h) => h.upload(),
            _ => t.run,
        },
        what,
        tag,
        aux,
    }
}

/// Decodes a trace entry; `None` for an unknown encoding.
#[must_use]
pub fn decode_trace(e: &FakeTraceEntry) -> Option<TraceEvent> {
    let what = match e.what {
        1 => TraceKind::Enqueued(tag_of(e.tag, e.aux)?),
        2 => TraceKind::Started(tag_of(e.tag, e.aux)?),
        3 => TraceKind::Finished(tag_of(e.tag, e.aux)?),
        4 => TraceKind::StaleCode,
        5 => TraceKind::Faulted(*FAULT_KINDS.get(e.tag as usize)?),
        6 => TraceKind::StreamCreated,
        7 => TraceKind::StreamDestroyed,
        8 => TraceKind::Published(runclaim::driver::CodeHandle::from_raw(e.aux, e.run)),
        _ => return None,
    };
    let run = if matches!(what, TraceKind::Published(_)) {
        0
    } else {
        e.run
    };
    Some(TraceEvent::new(
        e.tick,
        StreamId::from_raw(e.stream),
        run,
        what,
    ))
}

/// `runclaim_fake_inject` kind: the `nth` ACL call on the device returns `arg`
/// as its error code (a fake-level fault, for the error-code mapping).
pub const INJECT_CODE: u32 = 8;

/// `runclaim_fake_inject` kind: the next `aclrtEventElapsedTime` on the
/// device succeeds with the `f32` whose bits are `arg` (NaN, infinity, …:
/// what a runtime could hand back).
pub const INJECT_ELAPSED: u32 = 9;

/// `runclaim_fake_quirks` bit: `aclrtCreateEventExWithFlag` events report
/// *not ready* before their first record (the runtime reports them
/// complete: `Event::QueryEventStatus`, hicann/runtime
/// `src/runtime/core/src/event/event.cc`).
pub const QUIRK_EX_EVENT_NOT_READY: u32 = 1;

/// `runclaim_fake_quirks` bit: an `aclrtMemcpyAsync` or `aclrtMemsetAsync`
/// onto a full stream fails at once with 207008 (`ACL_ERROR_RT_NO_STREAM_RESOURCE`) instead of blocking
/// until there is room, as the runtime's does.
pub const QUIRK_FULL_STREAM_FAILS: u32 = 2;

/// `runclaim_fake_quirks` bit: `aclrtMemsetAsync` returns success and
/// queues nothing (the memory keeps what it held).
pub const QUIRK_MEMSET_ASYNC_LOST: u32 = 4;

/// `runclaim_fake_quirks` bit: `aclrtStreamQuery` answers in the event
/// status's numbering — 1 for a stream with nothing left to run, 0 while
/// work is queued — the reverse of the stream status's. The runtime
/// answers `ACL_STREAM_STATUS_COMPLETE` (0) when `rtStreamQuery` succeeds
/// and `ACL_STREAM_STATUS_NOT_READY` (1) for
/// `ACL_ERROR_RT_STREAM_NOT_COMPLETE` (`aclrtStreamQueryImpl`,
/// hicann/runtime `src/acl/aclrt_impl/stream.cpp`).
pub const QUIRK_STREAM_STATUS_INVERTED: u32 = 8;

/// `runclaim_fake_quirks` bit: an `aclrtSynchronizeEventWithTimeout` that
/// runs out returns 0, as if the event had completed. The runtime returns
/// `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT` (507047)
/// (`aclrtSynchronizeEventWithTimeoutImpl`, hicann/runtime
/// `src/acl/aclrt_impl/event.cpp`).
pub const QUIRK_EVENT_SYNC_TIMEOUT_SUCCEEDS: u32 = 16;

/// `runclaim_fake_quirks` bit: a host-to-device `aclrtMemcpy` returns
/// success and copies nothing (the device memory keeps what it held:
/// [`FRESH_BYTE`] for a fresh allocation). The runtime's `aclrtMemcpy` is
/// synchronous: the data is at the destination when it returns 0
/// (`aclrtMemcpyImpl` over `rtMemcpy`, hicann/runtime
/// `src/acl/aclrt_impl/memory.cpp`).
pub const QUIRK_MEMCPY_TO_DEVICE_LOST: u32 = 32;

/// `runclaim_fake_quirks` bit: a due completion callback is run by the
/// fake's own notifier thread as soon as it is due, not handed to the
/// stream's subscribed thread; that thread's `aclrtProcessReport` never
/// sees it (it times out). The runtime runs the callbacks inside
/// `aclrtProcessReport`, on the thread that called it and subscribed
/// (`ApiImpl::ProcessReport`, hicann/runtime
/// `src/runtime/api/impl/api_impl.cc`: `ProcessHostFunc` for each report
/// of the calling thread's group).
pub const QUIRK_CALLBACK_OFF_THREAD: u32 = 64;

/// `runclaim_fake_quirks` bit: `aclrtProcessReport(timeout)` on a thread
/// with no subscription waits out a positive `timeout` before it returns
/// 107012 (`ACL_ERROR_RT_THREAD_SUBSCRIBE`). The runtime returns it at
/// once: `ApiImpl::ProcessReport` looks the calling thread's subscription
/// up (`GetGroupIdByThreadId`) before it waits for a report
/// (hicann/runtime `src/runtime/api/impl/api_impl.cc`).
pub const QUIRK_REPORT_WAITS_UNSUBSCRIBED: u32 = 128;

/// `runclaim_fake_quirks` bit: a callback `aclrtLaunchCallback` queues is
/// due at once — when it is enqueued, not when the stream reaches its
/// task — and goes to the subscribed thread's next `aclrtProcessReport`
/// even while the tasks ahead of it have not run (a held stream's). Its
/// task is still queued, so the stream's order and capacity are as
/// before, and nothing waits for it. The runtime runs a callback when the
/// stream's execution reaches its task (CANN's `aclrtLaunchCallback`
/// reference; hicann/runtime source not cited).
pub const QUIRK_CALLBACK_EARLY: u32 = 256;

/// `runclaim_fake_quirks` bit: `aclrtQueryEventStatus` reports `COMPLETE`
/// (1) for an event as soon as `aclrtRecordEvent` queued its record,
/// whether or not the stream reached it (behind a held stream, at once).
/// Nothing waits on the status, so nothing hangs; an old-mode event not
/// recorded yet still reports `NOT_READY`. The runtime reports
/// `ACL_EVENT_RECORDED_STATUS_NOT_READY` (0) until the record recorded in
/// the stream has executed (CANN's `aclrtEventRecordedStatus` reference;
/// hicann/runtime source not cited).
pub const QUIRK_EVENT_COMPLETE_AT_RECORD: u32 = 512;

/// What the fake runtime itself observed on one device
/// (`runclaim_fake_runtime`): the calls the real runtime is stricter about
/// than the simulator. Kept after the device is released.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeRuntime {
    /// Successful `aclrtSetDevice` calls (each one reference).
    pub set_device: u64,
    /// `aclrtResetDevice` calls (each drops one reference).
    pub reset_device: u64,
    /// Resets without a reference to drop (more resets than sets).
    pub unbalanced_resets: u64,
    /// Times the device was released: its references reached 0 (or a
    /// `runclaim_fake_release`), its simulator dropped and its real-time
    /// thread joined.
    pub releases: u64,
    /// Whether a simulator exists for the device now (1) or not (0).
    pub live: u64,
    /// Successful `aclrtSetCurrentContext` calls onto this device.
    pub context_sets: u64,
    /// `rtRegisterAllKernel` successes on this device.
    pub programs_registered: u64,
    /// `rtDevBinaryUnRegister` successes for programs of this device.
    pub programs_unregistered: u64,
    /// Launch structs that reached the runtime with a nonzero reserved or
    /// padding byte.
    pub dirty_launch_structs: u64,
    /// `aclrt*SynchronizeWithTimeout` calls with a timeout of 0 (refused
    /// with 107000, like the real runtime).
    pub zero_timeouts: u64,
    /// `aclrtStreamWaitEvent` calls on an old-mode event never recorded:
    /// the real runtime queues a device wait that only the event's next
    /// record satisfies.
    pub unsatisfiable_waits: u64,
    /// The last memory call: 1 `aclrtMemcpy`, 2 `aclrtMemcpyAsync`,
    /// 3 `aclrtMemset`, 4 `aclrtMemsetAsync` (0: none yet).
    pub last_mem_api: u64,
    /// Its `destMax` / `maxCount`.
    pub last_dest_max: u64,
    /// Its `count`.
    pub last_count: u64,
    /// Calls of ACL / rt entry points that reached the device (a thread
    /// bound to it), failed ones included.
    pub calls: u64,
    /// `rtKernelLaunchWithHandleV2` calls whose host arguments the fake
    /// read (before the simulator accepts or refuses them).
    pub aicore_launches: u64,
    /// `rtsLaunchCpuKernel` calls whose host arguments the fake read.
    pub aicpu_launches: u64,
    /// The `argsSize` of the last launch of either kind.
    pub last_args_size: u64,
}

/// Encodes a simulator fault as `(kind, a, nth, arg)` for `runclaim_fake_inject`.
#[must_use]
pub fn encode_fault(f: &Fault) -> (u32, u32, u64, u64) {
    let op_index =
        |op: Op| u32::try_from(Op::ALL.iter().position(|&o| o == op).unwrap_or(0)).unwrap_or(0);
    match *f {
        Fault::FailCall { op, nth } => (1, op_index(op), nth, 0),
        Fault::FailAnyCall { nth } => (2, 0, nth, 0),
        Fault::KernelFault { kernel, nth } => (3, u32::from(kernel == Kernel::Aicpu), nth, 0),
        Fault::RunError { nth, code } => (4, 0, nth, u64::from(code)),
        Fault::EventNeverCompletes { nth } => (5, 0, nth, 0),
        Fault::DelayEvent { nth, delay } => (6, 0, nth, us(delay)),
        Fault::DeviceLost { nth } => (7, 0, nth, 0),
        _ => (0, 0, 0, 0),
    }
}

/// Decodes `(kind, a, nth, arg)`; `None` for [`INJECT_CODE`] or an unknown kind.
#[must_use]
pub fn decode_fault(kind: u32, a: u32, nth: u64, arg: u64) -> Option<Fault> {
    Some(match kind {
        1 => Fault::FailCall {
            op: *Op::ALL.get(a as usize)?,
            nth,
        },
        2 => Fault::FailAnyCall { nth },
        3 => Fault::KernelFault {
            kernel: if a == 1 {
                Kernel::Aicpu
            } else {
                Kernel::Aicore
            },
            nth,
        },
        4 => Fault::RunError {
            nth,
            code: u32::try_from(arg).unwrap_or(u32::MAX),
        },
        5 => Fault::EventNeverCompletes { nth },
        6 => Fault::DelayEvent {
            nth,
            delay: Duration::from_micros(arg),
        },
        7 => Fault::DeviceLost { nth },
        _ => return None,
    })
}

/// What the fake runtime saw of one device's host callbacks
/// (`runclaim_fake_callbacks`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FakeCallbacks {
    /// Streams of the device with a subscribed thread now.
    pub subscriptions: u64,
    /// Successful `aclrtSubscribeReport` calls.
    pub subscribes: u64,
    /// Successful `aclrtUnSubscribeReport` calls.
    pub unsubscribes: u64,
    /// `aclrtSubscribeReport` calls refused: the stream already had a
    /// subscriber (107011), or the thread serves another device (107012).
    pub subscribe_refused: u64,
    /// Callbacks queued by `aclrtLaunchCallback`.
    pub launched: u64,
    /// `aclrtLaunchCallback` calls refused: no thread subscribed to the
    /// stream (107015).
    pub launch_refused: u64,
    /// Callbacks delivered to their subscribed thread by
    /// `aclrtProcessReport` (counted as they are called).
    pub run: u64,
    /// Callbacks that will never run: queued behind a fault under
    /// stop-on-failure, or their stream unsubscribed or device released
    /// before they were delivered.
    pub dropped: u64,
    /// `aclrtProcessReport` calls on a thread serving this device.
    pub process_reports: u64,
    /// `aclrtProcessReport` calls refused for their timeout (0 or below
    /// -1: 100000), on a thread bound to this device.
    pub process_report_invalid: u64,
    /// `aclrtProcessReport` calls that found nothing due (507012).
    pub report_timeouts: u64,
    /// Threads inside `aclrtProcessReport` for this device now.
    pub in_process_report: u64,
    /// Exception-info callbacks called for faults of this device.
    pub exceptions: u64,
    /// 1 while stop-on-failure is set for the device
    /// (`runclaim_fake_stop_on_failure`).
    pub stop_on_failure: u64,
    /// `aclrtProcessReport` calls the report gate held
    /// (`runclaim_fake_hold_report`).
    pub held_reports: u64,
    /// 1 while the report gate holds one.
    pub holding: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counters `SimStats` prints (its `Debug`), maps excepted.
    fn sim_counters() -> Vec<String> {
        let shown = format!("{:?}", SimStats::default());
        let body = shown.trim_start_matches("SimStats {").trim_end_matches('}');
        body.split(", ")
            .filter_map(|f| f.split_once(": "))
            .filter(|(_, v)| !v.starts_with('{'))
            .map(|(k, _)| k.trim().to_owned())
            .collect()
    }

    /// Every counter of the simulator crosses the fake's C ABI, and back:
    /// a counter added to `SimStats` and not to `fake_stats!` fails here.
    #[test]
    fn every_sim_counter_crosses_the_abi() {
        let mut fields: Vec<&str> = FakeStats::FIELDS.to_vec();
        let mut counters = sim_counters();
        fields.sort_unstable();
        counters.sort_unstable();
        assert_eq!(fields, counters);
        let mut s = SimStats::default();
        s.trace_dropped = 7;
        s.max_queue_depth = 9;
        s.live_bytes = 64;
        assert_eq!(FakeStats::from_sim(&s).to_sim(), s);
    }

    /// Negative control: the parse sees a counter the list lacks.
    #[test]
    fn a_missing_counter_is_seen() {
        let counters = sim_counters();
        assert!(counters.iter().any(|c| c == "trace_dropped"));
        assert!(!counters.iter().any(|c| c == "calls" || c == "tasks_run"));
        let short: Vec<&str> = FakeStats::FIELDS
            .iter()
            .copied()
            .filter(|f| *f != "trace_dropped")
            .collect();
        assert_ne!(short.len(), counters.len());
    }
}
