//! The host side of queuing work on a stream: argument and address checks
//! (every address a block's writer recorded, then the configured device
//! model's decoding, which checks every range the block names), event
//! generations with their injected fates, kernel launches.

use super::{DeviceState, Task, TaskKind, bad};
use crate::driver::abi::{self, LaunchArgs};
use crate::driver::sim::kernels::{AicoreKernel, AicpuKernel};
use crate::driver::sim::protocol::{DeviceMemory, ModelError, guarded};
use crate::driver::sim::trace::TraceKind;
use crate::driver::{CodeHandle, DriverErrorKind, HandleKind};

impl DeviceState {
    fn enqueue(&mut self, stream: u64, kind: TaskKind) -> Result<(), DriverErrorKind> {
        self.check_stream(stream)?;
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
        self.push_trace(stream, run, TraceKind::Enqueued(tag));
        Ok(())
    }

    pub fn enqueue_copy(
        &mut self,
        stream: u64,
        dst: u64,
        src: u64,
        len: u64,
    ) -> Result<(), DriverErrorKind> {
        self.mem.check(src, len).map_err(bad)?;
        self.mem.check(dst, len).map_err(bad)?;
        self.enqueue(stream, TaskKind::Copy { dst, src, len })
    }

    pub fn enqueue_memset(
        &mut self,
        stream: u64,
        dst: u64,
        value: u8,
        len: u64,
    ) -> Result<(), DriverErrorKind> {
        self.mem.check(dst, len).map_err(bad)?;
        self.enqueue(stream, TaskKind::Memset { dst, value, len })
    }

    pub fn enqueue_record(&mut self, event: u64, stream: u64) -> Result<(), DriverErrorKind> {
        self.event(event)?;
        self.check_stream(stream)?;
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
            stream,
            TaskKind::Record {
                event,
                generation,
                fate,
            },
        )
    }

    pub fn enqueue_wait(&mut self, stream: u64, event: u64) -> Result<(), DriverErrorKind> {
        let generation = self.event(event)?.recorded;
        self.enqueue(stream, TaskKind::Wait { event, generation })
    }

    /// Checks every address the block names: still in the block where its
    /// writer put it, and a range of live memory.
    fn check_fields(&self, args: LaunchArgs<'_>) -> Result<(), DriverErrorKind> {
        if !args.consistent() {
            return Err(DriverErrorKind::InvalidArgument {
                what: "an address the block's writer recorded is no longer in the block",
            });
        }
        for f in args.fields() {
            self.mem.check(f.addr.raw(), f.len).map_err(bad)?;
        }
        Ok(())
    }

    pub fn enqueue_aicore(
        &mut self,
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
        self.check_fields(args)?;
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
            stream,
            TaskKind::Aicore(Box::new(AicoreKernel::new(index, model, launch))),
        )
    }

    pub fn enqueue_aicpu(
        &mut self,
        stream: u64,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverErrorKind> {
        let (model, launch) = self.decode_aicpu_launch(args)?;
        self.enqueue(
            stream,
            TaskKind::Aicpu(Box::new(AicpuKernel::new(model, launch))),
        )
    }

    /// Everything `enqueue_aicpu` checks of a block, without queuing it.
    pub fn check_aicpu_args(&mut self, args: LaunchArgs<'_>) -> Result<(), DriverErrorKind> {
        self.decode_aicpu_launch(args).map(drop)
    }

    fn decode_aicpu_launch(
        &mut self,
        args: LaunchArgs<'_>,
    ) -> Result<
        (
            crate::driver::sim::protocol::ModelHandle,
            crate::driver::sim::protocol::AicpuLaunch,
        ),
        DriverErrorKind,
    > {
        self.check_fields(args)?;
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
