//! The host side of queuing work on a stream: argument and address checks
//! (every address a block's writer recorded, against the caller's own
//! allocations, then the configured device model's decoding, which checks
//! every range the block names against the device's memory), event
//! generations with their injected fates, kernel launches. Every method
//! takes the calling `SimDriver` value's [`Owner`] and accepts only the
//! streams, events and allocations it made.

use super::capture::Recipe;
use super::{DeviceState, Task, TaskKind, bad};
use crate::driver::abi::{self, LaunchArgs};
use crate::driver::sim::kernels::{AicoreKernel, AicpuKernel};
use crate::driver::sim::memory::Owner;
use crate::driver::sim::protocol::{DeviceMemory, ModelError, guarded};
use crate::driver::sim::trace::TraceKind;
use crate::driver::{CodeHandle, DriverErrorKind, HandleKind};

impl DeviceState {
    pub(super) fn enqueue(
        &mut self,
        owner: Owner,
        stream: u64,
        kind: TaskKind,
    ) -> Result<(), DriverErrorKind> {
        // The host's queuing is stamped in host time; a graph's tasks are
        // queued by the device, as its replay starts: in device time.
        let now = if owner == super::capture::GRAPH {
            self.dev()
        } else {
            self.now()
        };
        self.check_own_stream(owner, stream)?;
        let tag = kind.tag();
        let s = self
            .streams
            .get_mut(&stream)
            .ok_or(DriverErrorKind::BadHandle {
                kind: HandleKind::Stream,
                raw: stream,
            })?;
        let run = if kind.is_kernel() {
            s.last_run = kind.run();
            kind.run()
        } else {
            s.last_run
        };
        s.queue.push_back(Task {
            kind,
            enqueued: now,
            started: None,
            run,
        });
        let depth = s.queue.len();
        self.stats.max_queue_depth = self.stats.max_queue_depth.max(depth);
        // A graph's tasks were traced as enqueued by its launch (on the
        // launch stream, where the host queued them).
        if owner != super::capture::GRAPH {
            self.push_trace_at(now, stream, run, TraceKind::Enqueued(tag));
        }
        Ok(())
    }

    pub fn enqueue_copy(
        &mut self,
        owner: Owner,
        stream: u64,
        dst: u64,
        src: u64,
        len: u64,
    ) -> Result<(), DriverErrorKind> {
        self.mem.check_as(owner, src, len).map_err(bad)?;
        self.mem.check_as(owner, dst, len).map_err(bad)?;
        if let Some(c) = self.capturing(stream) {
            return self.capture_push(c, stream, Recipe::Copy { dst, src, len });
        }
        self.enqueue(owner, stream, TaskKind::Copy { dst, src, len })
    }

    pub fn enqueue_memset(
        &mut self,
        owner: Owner,
        stream: u64,
        dst: u64,
        value: u8,
        len: u64,
    ) -> Result<(), DriverErrorKind> {
        self.mem.check_as(owner, dst, len).map_err(bad)?;
        if let Some(c) = self.capturing(stream) {
            return self.capture_push(c, stream, Recipe::Memset { dst, value, len });
        }
        self.enqueue(owner, stream, TaskKind::Memset { dst, value, len })
    }

    pub fn enqueue_record(
        &mut self,
        owner: Owner,
        event: u64,
        stream: u64,
    ) -> Result<(), DriverErrorKind> {
        self.own_event(owner, event)?;
        self.check_own_stream(owner, stream)?;
        if let Some(c) = self.capturing(stream) {
            return self.capture_record(c, stream, event);
        }
        self.record_now(owner, event, stream)
    }

    /// Queues a record of `event` on `stream` now (not captured): its next
    /// generation, with its injected fate.
    pub(super) fn record_now(
        &mut self,
        owner: Owner,
        event: u64,
        stream: u64,
    ) -> Result<(), DriverErrorKind> {
        let fate = self.faults.on_record(abi::duration_to_ticks);
        let generation = match self.events.get_mut(&event) {
            Some(e) => {
                e.recorded += 1;
                e.stream = stream;
                e.recorded
            }
            None => 0,
        };
        self.enqueue(
            owner,
            stream,
            TaskKind::Record {
                event,
                generation,
                fate,
            },
        )
    }

    pub fn enqueue_wait(
        &mut self,
        owner: Owner,
        stream: u64,
        event: u64,
    ) -> Result<(), DriverErrorKind> {
        self.own_event(owner, event)?;
        if self.capture_wait(owner, stream, event)? {
            return Ok(());
        }
        self.wait_now(owner, stream, event)
    }

    /// Queues a wait on `stream` for `event`'s last record (not captured).
    pub(super) fn wait_now(
        &mut self,
        owner: Owner,
        stream: u64,
        event: u64,
    ) -> Result<(), DriverErrorKind> {
        let generation = self.event(event)?.recorded;
        self.enqueue(owner, stream, TaskKind::Wait { event, generation })
    }

    /// Checks every address the block names: still in the block where its
    /// writer put it, and a range inside one live allocation of `owner` —
    /// one lookup per recorded address, O(fields × log allocations).
    /// Another `SimDriver` value's allocation is refused as any address
    /// outside memory is, although the device could reach it: a driver
    /// hands the device only what it owns.
    fn check_fields(&self, owner: Owner, args: LaunchArgs<'_>) -> Result<(), DriverErrorKind> {
        if args.consistent().is_err() {
            return Err(DriverErrorKind::InvalidArgument {
                what: "an address the block's writer recorded is no longer in the block",
            });
        }
        for f in args.fields() {
            self.mem.check_as(owner, f.addr.raw(), f.len).map_err(bad)?;
        }
        Ok(())
    }

    pub fn enqueue_aicore(
        &mut self,
        owner: Owner,
        stream: u64,
        code: CodeHandle,
        block_dim: u32,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverErrorKind> {
        let max = self.cfg.max_block_dim;
        if block_dim == 0 || block_dim > max {
            return Err(DriverErrorKind::InvalidArgument {
                what: "block_dim is 0 or above the device maximum",
            });
        }
        let index = self.code_index(code)?;
        self.check_fields(owner, args)?;
        let task = self.aicore_task(index, block_dim, args.bytes())?;
        if let Some(c) = self.capturing(stream) {
            return self.capture_push(
                c,
                stream,
                Recipe::Aicore {
                    index,
                    block_dim,
                    bytes: args.bytes().into(),
                },
            );
        }
        self.enqueue(owner, stream, task)
    }

    /// An AICore kernel task of the code at `index`, its block decoded by
    /// the configured device model (at launch, or at a graph's replay).
    pub(super) fn aicore_task(
        &mut self,
        index: usize,
        block_dim: u32,
        bytes: &[u8],
    ) -> Result<TaskKind, DriverErrorKind> {
        let max = self.cfg.max_block_dim;
        let model = self.cfg.device_model.clone();
        let mem = DeviceMemory::new(&mut self.mem);
        let launch = guarded(|| model.model().decode_aicore(bytes, block_dim, max, &mem))
            .map_err(ModelError::at_launch)?;
        if launch.block_dim != block_dim || launch.identity == 0 {
            return Err(DriverErrorKind::InvalidArgument {
                what: "the device model decoded another block_dim than the launch's, or identity 0",
            });
        }
        Ok(TaskKind::Aicore(Box::new(AicoreKernel::new(
            index, model, launch,
        ))))
    }

    pub fn enqueue_aicpu(
        &mut self,
        owner: Owner,
        stream: u64,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverErrorKind> {
        self.check_fields(owner, args)?;
        let task = self.aicpu_task(args.bytes())?;
        if let Some(c) = self.capturing(stream) {
            return self.capture_push(
                c,
                stream,
                Recipe::Aicpu {
                    bytes: args.bytes().into(),
                },
            );
        }
        self.enqueue(owner, stream, task)
    }

    /// Everything `enqueue_aicpu` checks of a block, without queuing it.
    pub fn check_aicpu_args(
        &mut self,
        owner: Owner,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverErrorKind> {
        self.check_fields(owner, args)?;
        self.aicpu_task(args.bytes()).map(drop)
    }

    /// An AICPU kernel task, its block decoded by the configured device
    /// model (at launch, or at a graph's replay).
    pub(super) fn aicpu_task(&mut self, bytes: &[u8]) -> Result<TaskKind, DriverErrorKind> {
        let max = self.cfg.max_block_dim;
        let model = self.cfg.device_model.clone();
        let mem = DeviceMemory::new(&mut self.mem);
        let launch = guarded(|| model.model().decode_aicpu(bytes, max, &mem))
            .map_err(ModelError::at_launch)?;
        if launch.block_dim == 0 || launch.block_dim > max || launch.identity == 0 {
            return Err(DriverErrorKind::InvalidArgument {
                what: "the device model decoded a block_dim of 0 or above the device maximum, or identity 0",
            });
        }
        Ok(TaskKind::Aicpu(Box::new(AicpuKernel::new(model, launch))))
    }
}
