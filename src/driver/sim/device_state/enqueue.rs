//! The host side of queuing work on a stream: argument and address checks,
//! event generations with their injected fates, kernel launches.

use super::{DeviceState, Task, TaskKind, bad};
use crate::driver::abi::{self, RunArgs};
use crate::driver::sim::kernels::{AicoreKernel, AicpuKernel};
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

    fn decode_args(&self, block_dim: Option<u32>, args: &[u8]) -> Result<RunArgs, DriverErrorKind> {
        if args.len() != RunArgs::SIZE {
            return Err(DriverErrorKind::InvalidArgument {
                what: "argument block is not RunArgs::SIZE bytes",
            });
        }
        let a = RunArgs::from_bytes(args).ok_or(DriverErrorKind::InvalidArgument {
            what: "argument block has a bad magic, version or run id",
        })?;
        if a.block_dim == 0 || a.block_dim > self.cfg.max_block_dim {
            return Err(DriverErrorKind::InvalidArgument {
                what: "block_dim is 0 or above the device maximum",
            });
        }
        if block_dim.is_some_and(|b| b != a.block_dim) {
            return Err(DriverErrorKind::InvalidArgument {
                what: "block_dim differs from the argument block's",
            });
        }
        let bytes = a
            .len
            .checked_mul(4)
            .ok_or(DriverErrorKind::InvalidArgument {
                what: "element count overflows",
            })?;
        let m = &self.mem;
        m.check(a.input, bytes).map_err(bad)?;
        m.check(a.output, bytes).map_err(bad)?;
        m.check(a.handshake, abi::handshake_bytes(a.block_dim) as u64)
            .map_err(bad)?;
        m.check(a.wall, abi::WallRecord::SIZE as u64).map_err(bad)?;
        m.check(a.status, abi::StatusRecord::SIZE as u64)
            .map_err(bad)?;
        Ok(a)
    }

    pub fn enqueue_aicore(
        &mut self,
        stream: u64,
        code: CodeHandle,
        block_dim: u32,
        args: &[u8],
    ) -> Result<(), DriverErrorKind> {
        if block_dim == 0 || block_dim > self.cfg.max_block_dim {
            return Err(DriverErrorKind::InvalidArgument {
                what: "block_dim is 0 or above the device maximum",
            });
        }
        let index = self.code_index(code)?;
        let args = self.decode_args(Some(block_dim), args)?;
        self.enqueue(
            stream,
            TaskKind::Aicore(Box::new(AicoreKernel::new(index, args))),
        )
    }

    pub fn enqueue_aicpu(&mut self, stream: u64, args: &[u8]) -> Result<(), DriverErrorKind> {
        let args = self.decode_args(None, args)?;
        self.enqueue(stream, TaskKind::Aicpu(Box::new(AicpuKernel::new(args))))
    }
}
