//! The host side of queuing work on a stream: argument and address checks
//! (every address a block's writer recorded, against the caller's own
//! allocations, then the configured device model's decoding, which checks
//! every range the block names against the device's memory), event
//! generations with their injected fates, kernel launches. Every method
//! takes the calling `SimDriver` value's [`Owner`] and accepts only the
//! streams, events and allocations it made.

use super::{DeviceState, Task, TaskKind, bad};
use crate::driver::abi::{self, LaunchArgs};
use crate::driver::sim::kernels::{AicoreKernel, AicpuKernel};
use crate::driver::sim::memory::Owner;
use crate::driver::sim::protocol::{DeviceMemory, ModelError, guarded};
use crate::driver::sim::trace::TraceKind;
use crate::driver::{CodeHandle, DriverErrorKind, HandleKind};

impl DeviceState {
    fn enqueue(
        &mut self,
        owner: Owner,
        stream: u64,
        kind: TaskKind,
    ) -> Result<(), DriverErrorKind> {
        self.check_own_stream(owner, stream)?;
        let now = self.now();
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
        self.push_trace_at(now, stream, run, TraceKind::Enqueued(tag));
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
        let model = self.cfg.device_model.clone();
        let mem = DeviceMemory::new(&mut self.mem);
        let launch = guarded(|| {
            model
                .model()
                .decode_aicore(args.bytes(), block_dim, max, &mem)
        })
        .map_err(ModelError::at_launch)?;
        if launch.block_dim != block_dim || launch.identity == 0 {
            return Err(DriverErrorKind::InvalidArgument {
                what: "the device model decoded another block_dim than the launch's, or identity 0",
            });
        }
        self.enqueue(
            owner,
            stream,
            TaskKind::Aicore(Box::new(AicoreKernel::new(index, model, launch))),
        )
    }

    pub fn enqueue_aicpu(
        &mut self,
        owner: Owner,
        stream: u64,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverErrorKind> {
        let (model, launch) = self.decode_aicpu_launch(owner, args)?;
        self.enqueue(
            owner,
            stream,
            TaskKind::Aicpu(Box::new(AicpuKernel::new(model, launch))),
        )
    }

    /// Everything `enqueue_aicpu` checks of a block, without queuing it.
    pub fn check_aicpu_args(
        &mut self,
        owner: Owner,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverErrorKind> {
        self.decode_aicpu_launch(owner, args).map(drop)
    }

    fn decode_aicpu_launch(
        &mut self,
        owner: Owner,
        args: LaunchArgs<'_>,
    ) -> Result<
        (
            crate::driver::sim::protocol::ModelHandle,
            crate::driver::sim::protocol::AicpuLaunch,
        ),
        DriverErrorKind,
    > {
        self.check_fields(owner, args)?;
        let max = self.cfg.max_block_dim;
        let model = self.cfg.device_model.clone();
        let mem = DeviceMemory::new(&mut self.mem);
        let launch = guarded(|| model.model().decode_aicpu(args.bytes(), max, &mem))
            .map_err(ModelError::at_launch)?;
        if launch.block_dim == 0 || launch.block_dim > max || launch.identity == 0 {
            return Err(DriverErrorKind::InvalidArgument {
                what: "the device model decoded a block_dim of 0 or above the device maximum, or identity 0",
            });
        }
        Ok((model, launch))
    }
}
