//! The host side of queuing work on a stream: argument and address checks
//! (argument blocks of both versions, every range they name), event
//! generations with their injected fates, kernel launches.

use super::{DeviceState, Task, TaskKind, bad};
use crate::driver::abi::{self, ArgBlock, LaunchArgs, RunArgs, WorkArgs};
use crate::driver::sim::kernels::{AicoreKernel, AicpuKernel};
use crate::driver::sim::rust_kernel::KernelRun;
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

    /// Parses an argument block of either version and checks every device
    /// range it names against live memory: a version-1 block's input and
    /// output, a version-2 block's tensors, and both versions' handshake,
    /// wall and status records.
    fn decode_args<'b>(
        &self,
        block_dim: Option<u32>,
        args: &'b [u8],
    ) -> Result<ArgBlock<'b>, DriverErrorKind> {
        let block = if args.len() >= 8 && args[4..8] == WorkArgs::VERSION.to_le_bytes() {
            let w = WorkArgs::parse(args).ok_or(DriverErrorKind::InvalidArgument {
                what: "workload argument block is malformed (size, counts, run id or a tensor)",
            })?;
            let h = w.header();
            if h.len != 0 || h.input != 0 || h.output != 0 {
                return Err(DriverErrorKind::InvalidArgument {
                    what: "workload argument block has a non-zero len, input or output",
                });
            }
            ArgBlock::Work(w)
        } else {
            if args.len() != RunArgs::SIZE {
                return Err(DriverErrorKind::InvalidArgument {
                    what: "argument block is not RunArgs::SIZE bytes",
                });
            }
            ArgBlock::Run(
                RunArgs::from_bytes(args).ok_or(DriverErrorKind::InvalidArgument {
                    what: "argument block has a bad magic, version or run id",
                })?,
            )
        };
        let a = *block.header();
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
        let m = &self.mem;
        match &block {
            ArgBlock::Run(a) => {
                let bytes = a
                    .len
                    .checked_mul(4)
                    .ok_or(DriverErrorKind::InvalidArgument {
                        what: "element count overflows",
                    })?;
                m.check(a.input, bytes).map_err(bad)?;
                m.check(a.output, bytes).map_err(bad)?;
            }
            ArgBlock::Work(w) => {
                for t in w.tensors() {
                    m.check(t.addr, t.bytes).map_err(bad)?;
                }
            }
        }
        m.check(a.handshake, abi::handshake_bytes(a.block_dim) as u64)
            .map_err(bad)?;
        m.check(a.wall, abi::WallRecord::SIZE as u64).map_err(bad)?;
        m.check(a.status, abi::StatusRecord::SIZE as u64)
            .map_err(bad)?;
        Ok(block)
    }

    pub fn enqueue_aicore(
        &mut self,
        stream: u64,
        code: CodeHandle,
        block_dim: u32,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverErrorKind> {
        if block_dim == 0 || block_dim > self.cfg.max_block_dim {
            return Err(DriverErrorKind::InvalidArgument {
                what: "block_dim is 0 or above the device maximum",
            });
        }
        let index = self.code_index(code)?;
        self.check_fields(args)?;
        let run = KernelRun::new(&self.decode_args(Some(block_dim), args.bytes())?);
        self.enqueue(
            stream,
            TaskKind::Aicore(Box::new(AicoreKernel::new(index, run))),
        )
    }

    pub fn enqueue_aicpu(
        &mut self,
        stream: u64,
        args: LaunchArgs<'_>,
    ) -> Result<(), DriverErrorKind> {
        self.check_fields(args)?;
        let args = *self.decode_args(None, args.bytes())?.header();
        self.enqueue(stream, TaskKind::Aicpu(Box::new(AicpuKernel::new(args))))
    }
}
