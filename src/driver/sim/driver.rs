//! `impl Driver for SimDriver`: each call charged, checked against the armed
//! faults and run under the simulator's lock; submissions wait for room on
//! their stream, blocking calls for their condition. Every handle and
//! address a call names must be this `SimDriver` value's own (its
//! [`Owner`](super::memory::Owner)): what another clone made is refused as
//! foreign (see [`SimDriver`]'s `Clone`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use std::task::Waker;

use super::SimDriver;
use super::device_state::DeviceState;
use super::realtime::spin_for;
use crate::driver::abi::LaunchArgs;
use crate::driver::{
    Capabilities, CodeHandle, Completion, DevPtr, Driver, DriverError, DriverErrorKind, DriverInfo,
    EventId, GraphId, Notice, Op, Registration, StreamId, abi, host_clock,
};
use crate::sync::MutexGuard;

impl Driver for SimDriver {
    fn info(&self) -> DriverInfo {
        let core = self.lock();
        DriverInfo {
            max_block_dim: core.cfg.max_block_dim,
            stream_capacity: core.cfg.stream_capacity,
            watchdog: Some(core.cfg.watchdog),
            capabilities: {
                let caps = Capabilities::EVENT_SYNC_TIMEOUT
                    | Capabilities::EVENT_TIMESTAMP
                    | Capabilities::WATCHDOG_CONTROL;
                if core.cfg.capture {
                    caps | Capabilities::CAPTURE
                } else {
                    caps
                }
            },
        }
    }

    fn alloc(&self, bytes: usize) -> Result<DevPtr, DriverError> {
        self.call(Op::Alloc, |c| {
            c.alloc(self.owner, bytes as u64).map(DevPtr::from_raw)
        })
    }

    fn free(&self, ptr: DevPtr) -> Result<(), DriverError> {
        self.call(Op::Free, |c| c.free(self.owner, ptr.raw()))
    }

    fn copy_to_device(&self, dst: DevPtr, src: &[u8]) -> Result<(), DriverError> {
        self.call(Op::CopyToDevice, |c| c.write(self.owner, dst.raw(), src))
    }

    fn copy_from_device(&self, dst: &mut [u8], src: DevPtr) -> Result<(), DriverError> {
        self.call(Op::CopyFromDevice, |c| c.read(self.owner, src.raw(), dst))
    }

    fn memset(&self, dst: DevPtr, value: u8, len: usize) -> Result<(), DriverError> {
        self.call(Op::Memset, |c| {
            c.fill(self.owner, dst.raw(), value, len as u64)
        })
    }

    fn copy_async(
        &self,
        stream: StreamId,
        dst: DevPtr,
        src: DevPtr,
        len: usize,
    ) -> Result<(), DriverError> {
        self.submit(Op::CopyAsync, stream.raw(), Submission::Command, |c| {
            c.enqueue_copy(self.owner, stream.raw(), dst.raw(), src.raw(), len as u64)
        })
    }

    fn memset_async(
        &self,
        stream: StreamId,
        dst: DevPtr,
        value: u8,
        len: usize,
    ) -> Result<(), DriverError> {
        self.submit(Op::MemsetAsync, stream.raw(), Submission::Command, |c| {
            c.enqueue_memset(self.owner, stream.raw(), dst.raw(), value, len as u64)
        })
    }

    fn create_stream(&self) -> Result<StreamId, DriverError> {
        self.call(Op::CreateStream, |c| {
            Ok(StreamId::from_raw(c.create_stream(self.owner)))
        })
    }

    fn destroy_stream(&self, stream: StreamId) -> Result<(), DriverError> {
        self.call(Op::DestroyStream, |c| {
            c.destroy_stream(self.owner, stream.raw())
        })
    }

    fn query_stream(&self, stream: StreamId) -> Result<Completion, DriverError> {
        self.call(Op::QueryStream, |c| {
            self.stream_done(c, stream).map(completion)
        })
    }

    fn sync_stream(&self, stream: StreamId, timeout: Duration) -> Result<(), DriverError> {
        let mine = |c: &DeviceState| {
            c.own_stream(self.owner, stream.raw())?;
            c.no_sync_on_stream(stream.raw())
        };
        self.blocking(Op::SyncStream, timeout, mine, |c| {
            c.stream_done(stream.raw())
        })
    }

    fn create_event(&self) -> Result<EventId, DriverError> {
        self.call(Op::CreateEvent, |c| {
            Ok(EventId::from_raw(c.create_event(self.owner)))
        })
    }

    fn destroy_event(&self, event: EventId) -> Result<(), DriverError> {
        self.call(Op::DestroyEvent, |c| {
            c.destroy_event(self.owner, event.raw())
        })
    }

    fn record_event(&self, event: EventId, stream: StreamId) -> Result<(), DriverError> {
        self.submit(Op::RecordEvent, stream.raw(), Submission::Command, |c| {
            c.enqueue_record(self.owner, event.raw(), stream.raw())
        })
    }

    fn query_event(&self, event: EventId) -> Result<Completion, DriverError> {
        self.call(Op::QueryEvent, |c| {
            self.event_done(c, event).map(completion)
        })
    }

    fn sync_event(&self, event: EventId, timeout: Duration) -> Result<(), DriverError> {
        let mine = |c: &DeviceState| {
            c.own_event(self.owner, event.raw())?;
            c.no_sync_on_event(event.raw())
        };
        self.blocking(Op::SyncEvent, timeout, mine, |c| c.event_done(event.raw()))
    }

    fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<(), DriverError> {
        self.submit(
            Op::StreamWaitEvent,
            stream.raw(),
            Submission::Command,
            |c| c.enqueue_wait(self.owner, stream.raw(), event.raw()),
        )
    }

    fn event_elapsed(&self, start: EventId, end: EventId) -> Result<Duration, DriverError> {
        self.call(Op::EventElapsed, |c| {
            c.own_event(self.owner, start.raw())?;
            c.own_event(self.owner, end.raw())?;
            let a = c.event_time(start.raw())?;
            let b = c.event_time(end.raw())?;
            Ok(Duration::from_nanos(abi::ticks_to_nanos(
                b.saturating_sub(a),
            )))
        })
    }

    fn event_timestamp(&self, event: EventId) -> Result<u64, DriverError> {
        self.call(Op::EventTimestamp, |c| {
            c.own_event(self.owner, event.raw())?;
            c.event_time(event.raw())
        })
    }

    fn register_code(&self, code: &[u8]) -> Result<Registration, DriverError> {
        self.call(Op::RegisterCode, |c| c.register_code(code))
    }

    fn release_code(&self, code: CodeHandle) -> Result<(), DriverError> {
        self.call(Op::ReleaseCode, |c| c.release_code(code))
    }

    fn code_epoch(&self) -> u64 {
        self.lock().code_epoch()
    }

    /// Stepped mode: the virtual device time (steps × `step_time`), so a
    /// host thread preempted between steps never makes the device look
    /// slow. Real-time mode: the host's monotonic clock, which the device
    /// follows.
    fn clock(&self) -> Duration {
        let core = self.lock();
        if core.is_real_time() {
            drop(core);
            host_clock()
        } else {
            Duration::from_nanos(abi::ticks_to_nanos(core.now()))
        }
    }

    fn launch_aicore(
        &self,
        stream: StreamId,
        code: CodeHandle,
        block_dim: u32,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverError> {
        self.submit(Op::LaunchAicore, stream.raw(), Submission::Kernel, |c| {
            c.enqueue_aicore(self.owner, stream.raw(), code, block_dim, args)
        })
    }

    fn check_aicpu_args(&self, args: LaunchArgs<'_>) -> Result<(), DriverError> {
        // Not a driver call: not counted, no injected fault.
        self.lock()
            .check_aicpu_args(self.owner, args)
            .map_err(|k| DriverError::new(Op::LaunchAicpu, k))
    }

    fn launch_aicpu(&self, stream: StreamId, args: LaunchArgs<'_>) -> Result<(), DriverError> {
        self.submit(Op::LaunchAicpu, stream.raw(), Submission::Kernel, |c| {
            c.enqueue_aicpu(self.owner, stream.raw(), args)
        })
    }

    // `queue_notify` stays the default (nothing queued): the simulator sees
    // completion itself.

    /// Captures as the module docs of the simulator say
    /// ([`SimDriver`](super)'s "Stream capture"): in thread-local mode, the
    /// rules of [`CaptureRule`](crate::driver::CaptureRule) enforced.
    fn capture_begin(&self, stream: StreamId) -> Result<(), DriverError> {
        self.call(Op::CaptureBegin, |c| {
            c.capture_begin(self.owner, stream.raw())
        })
    }

    fn capture_end(&self, stream: StreamId) -> Result<GraphId, DriverError> {
        self.call(Op::CaptureEnd, |c| {
            c.capture_end(self.owner, stream.raw())
                .map(GraphId::from_raw)
        })
    }

    /// One host call for the whole graph: it pays the model's submit cost
    /// once, as one launch does.
    fn graph_launch(&self, graph: GraphId, stream: StreamId) -> Result<(), DriverError> {
        self.submit(Op::GraphLaunch, stream.raw(), Submission::Kernel, |c| {
            c.graph_launch(self.owner, graph.raw(), stream.raw())
        })
    }

    /// As `aclmdlRIDestroy`: waits (bounded by the device watchdog once
    /// per task of the graph's replays still to finish: each ends or
    /// faults within one of its start) for a replay of the graph to
    /// finish, then destroys it; still running after the bound, it is
    /// refused ([`CaptureRule::GraphRunning`](crate::driver::CaptureRule::GraphRunning)).
    fn graph_destroy(&self, graph: GraphId) -> Result<(), DriverError> {
        let op = Op::GraphDestroy;
        let bound = {
            let core = self.lock();
            let left = core.graph_work_left(graph.raw()).max(1);
            core.cfg
                .watchdog
                .saturating_mul(u32::try_from(left).unwrap_or(u32::MAX))
        };
        let mine = |c: &DeviceState| c.own_graph(self.owner, graph.raw());
        let idle = |c: &DeviceState| Ok(c.graph_idle(graph.raw()).then(|| c.now()));
        match self.blocking(op, bound, mine, idle) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), DriverErrorKind::Timeout { .. }) => {}
            Err(e) => return Err(e),
        }
        let mut core = self.lock();
        let r = core
            .graph_destroy(self.owner, graph.raw())
            .map_err(|k| DriverError::new(op, k));
        self.release(core);
        r
    }

    /// A driver call like [`query_event`](Driver::query_event) — counted,
    /// subject to `Fault::FailCall { op: Op::NotifyEvent, .. }`, and moving
    /// the simulation exactly as far as a query does (real time: up to the
    /// wall clock; stepped: not at all) — that answers
    /// [`Notice::Ready`] when the event is complete (never recorded
    /// included) or its stream faulted, and otherwise keeps `waker` and
    /// answers [`Notice::Completion`]. A forged or destroyed event, or
    /// another clone's, is refused with [`DriverErrorKind::BadHandle`].
    ///
    /// The waker is woken (once, then dropped) by whatever next moves the
    /// simulation past the event's completion, its stream's fault, its
    /// destruction, or `within` on [`clock`](Driver::clock): in real time
    /// the device thread, which spins through the last moments before a
    /// gate that may complete an armed event so that the wake follows the
    /// completion closely; in stepped mode only the host driving the
    /// simulation ([`SimDriver::step`], [`SimDriver::run_until_idle`], a
    /// blocking call) — see the [module documentation](super#awaiting-an-event).
    /// Re-arming with a waker that [`will_wake`](Waker::will_wake) one
    /// already armed for the event keeps one entry; at most 64 distinct
    /// wakers are kept per event (an arm beyond that wakes the oldest).
    fn notify_event(
        &self,
        event: EventId,
        within: Duration,
        waker: &Waker,
    ) -> Result<Notice, DriverError> {
        let op = Op::NotifyEvent;
        let mut core = self.lock();
        core.begin_call(op).map_err(|k| DriverError::new(op, k))?;
        core = self.pay_call(core);
        self.advance(&mut core);
        let r = core
            .own_event(self.owner, event.raw())
            .and_then(|()| core.no_sync_on_event(event.raw()))
            .and_then(|()| core.arm_notify(event.raw(), within, waker))
            .map_err(|k| DriverError::new(op, k));
        let kick = r == Ok(Notice::Completion) && self.device_sleeps_past_target(&core);
        self.release(core);
        self.notify_progress();
        if kick {
            self.shared().kick.notify_all();
        }
        r
    }
}

impl SimDriver {
    // ----- shared implementation of the Driver calls --------------------

    /// [`DeviceState::stream_done`] of a stream this value created.
    fn stream_done(&self, c: &DeviceState, s: StreamId) -> Result<Option<u64>, DriverErrorKind> {
        c.own_stream(self.owner, s.raw())?;
        c.no_sync_on_stream(s.raw())?;
        c.stream_done(s.raw())
    }

    /// [`DeviceState::event_done`] of an event this value created.
    fn event_done(&self, c: &DeviceState, e: EventId) -> Result<Option<u64>, DriverErrorKind> {
        c.own_event(self.owner, e.raw())?;
        c.no_sync_on_event(e.raw())?;
        c.event_done(e.raw())
    }

    /// Runs `f` under the lock after charging the call and applying injected
    /// call faults.
    fn call<T>(
        &self,
        op: Op,
        f: impl FnOnce(&mut DeviceState) -> Result<T, DriverErrorKind>,
    ) -> Result<T, DriverError> {
        let mut core = self.lock();
        core.begin_call(op).map_err(|k| DriverError::new(op, k))?;
        core = self.pay_call(core);
        self.advance(&mut core);
        let r = f(&mut core).map_err(|k| DriverError::new(op, k));
        self.release(core);
        self.notify_progress();
        r
    }

    /// Real time: the model's host cost of one runtime call
    /// ([`LatencyModel::per_call`](super::LatencyModel::per_call)), spent
    /// outside the lock.
    #[inline]
    fn pay_call<'a>(&'a self, core: MutexGuard<'a, DeviceState>) -> MutexGuard<'a, DeviceState> {
        let cost = core.cfg.latency.per_call;
        if cost.is_zero() || !core.is_real_time() {
            return core;
        }
        drop(core);
        spin_for(cost);
        self.lock()
    }

    /// A submission: a kernel launch pays the model's host submit cost
    /// (real time), then every submission waits for room on the stream like
    /// a device enqueue would, bounded.
    fn submit(
        &self,
        op: Op,
        stream: u64,
        what: Submission,
        f: impl FnOnce(&mut DeviceState) -> Result<(), DriverErrorKind>,
    ) -> Result<(), DriverError> {
        let mut core = self.lock();
        core.begin_call(op).map_err(|k| DriverError::new(op, k))?;
        core = self.pay_call(core);
        if what == Submission::Kernel && core.is_real_time() {
            let cost = core.cfg.latency.submit;
            drop(core);
            spin_for(cost);
            core = self.lock();
        }
        // Another clone's stream is refused before any wait for room.
        core.check_own_stream(self.owner, stream)
            .map_err(|k| DriverError::new(op, k))?;
        let capacity = core.cfg.stream_capacity;
        let waited = core.queued(stream) >= capacity;
        if waited {
            // A real enqueue would block this thread; wait (bounded) instead.
            core.stats.blocked_enqueues += 1;
            let room =
                |c: &DeviceState| c.queued(stream) < capacity || c.check_stream(stream).is_err();
            core = self
                .wait(core, Duration::from_secs(10), room)
                .map_err(|_| DriverError::new(op, DriverErrorKind::QueueFull { capacity }))?;
            if let Err(k) = core.check_stream(stream) {
                self.release(core);
                return Err(DriverError::new(op, k));
            }
        }
        let r = f(&mut core).map_err(|k| DriverError::new(op, k));
        // The published gate predates this task: until the device thread has
        // seen it, nobody may sleep on the old gate.
        self.shared().next_gate.store(0, Ordering::Release);
        // Nor may the device thread, while a waker is armed: the task may
        // let an armed record complete sooner than the timeline it planned
        // its nap on (an AICPU kernel waiting for workers launched after
        // it), so it is kicked to look again (`driver::wake::nap`).
        let kick = core.notify.nap.owes_kick(core.notify.any_armed());
        if waited {
            // The wait moved the simulation: what it made due is woken.
            self.release(core);
        } else {
            drop(core);
        }
        if kick {
            self.shared().kick.notify_all();
        }
        r
    }

    /// Waits until `done` answers (a tick or an error), bounded by
    /// `timeout`, once `mine` has proved the handle this value's: checked
    /// once, not at every look — a handle's owner never changes, and one
    /// destroyed meanwhile is what `done` reports.
    fn blocking(
        &self,
        op: Op,
        timeout: Duration,
        mine: impl FnOnce(&DeviceState) -> Result<(), DriverErrorKind>,
        done: impl Fn(&DeviceState) -> Result<Option<u64>, DriverErrorKind>,
    ) -> Result<(), DriverError> {
        let mut core = self.lock();
        core.begin_call(op).map_err(|k| DriverError::new(op, k))?;
        core = self.pay_call(core);
        mine(&core).map_err(|k| DriverError::new(op, k))?;
        let cond = |c: &DeviceState| !matches!(done(c), Ok(None));
        core = match self.wait(core, timeout, cond) {
            Ok(c) => c,
            Err(waited) => {
                return Err(DriverError::new(op, DriverErrorKind::Timeout { waited }));
            }
        };
        let r = done(&core);
        if let Ok(Some(at)) = r {
            self.host_wake(core, at);
            return Ok(());
        }
        self.release(core);
        match r {
            Ok(_) => Err(DriverError::new(
                op,
                DriverErrorKind::Timeout { waited: timeout },
            )),
            Err(k) => Err(DriverError::new(op, k)),
        }
    }
}

/// What a submission queues: only a kernel launch pays the latency model's
/// host submit cost (`LatencyModel::submit`, real time only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Submission {
    /// An AICore or AICPU kernel launch.
    Kernel,
    /// A copy, memset, event record or stream wait.
    Command,
}

/// A "done at tick t?" answer as a [`Completion`].
fn completion(done: Option<u64>) -> Completion {
    if done.is_some() {
        Completion::Complete
    } else {
        Completion::NotReady
    }
}
