//! A workload's transitions behind `Port`: prepare stages its host tensors
//! into the slot's staging region and builds its argument block (both the
//! slot's alone: its token is held); finalize validates the records and
//! copies the host outputs back — only for a run that succeeded.

use super::Device;
use crate::contract::error::ErrorKind;
use crate::contract::port::RunInfo;
use crate::contract::workload::{Data, Packer, Workload};
use crate::driver::abi::{DevSpan, TensorView};
use crate::driver::{DevPtr, Driver, DriverError};

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    fn packer(&self, slot: usize) -> Packer {
        Packer::new(self.config.staging_bytes, self.regions[slot].staging.raw())
    }

    /// Everything about `work` that can be refused, refused before a byte
    /// moves.
    /// Each host tensor's staging offset is fixed here, for the copies,
    /// the block and finalize.
    fn check_workload(&self, slot: usize, work: &mut Workload<'_>) -> Result<(), ErrorKind> {
        work.check()?;
        let mut packer = self.packer(slot);
        for (i, t) in work.tensors.iter_mut().enumerate() {
            match t.data {
                Data::Device { core, .. } if core.device != self.id => {
                    return Err(ErrorKind::ForeignBuffer { buffer: core.id });
                }
                Data::Device { .. } => {}
                Data::Scratch { core, .. } => {
                    if core.device != self.id {
                        return Err(ErrorKind::ForeignBuffer { buffer: core.id });
                    }
                    // Prepare writes it: no run that bound it before (a
                    // forgotten one — a live one cannot exist, it would
                    // hold the `&mut`) may still touch it.
                    self.quiet(core)?;
                }
                Data::PerSlot(set) => match set.core(slot) {
                    Some(core) if core.device == self.id => {}
                    Some(core) => return Err(ErrorKind::ForeignBuffer { buffer: core.id }),
                    // Fewer slots than this device: another device's set.
                    None => return Err(ErrorKind::ForeignBuffer { buffer: set.id() }),
                },
                Data::HostIn(_) | Data::HostOut(_) | Data::Owned(_) => {
                    t.at = packer.place(i, t.bytes(), t.align)?;
                }
            }
        }
        Ok(())
    }

    /// See `Port::prepare_work`.
    pub(super) fn prepare_workload(
        &self,
        slot: usize,
        lease: u64,
        work: &mut Workload<'_>,
    ) -> Result<RunInfo, ErrorKind> {
        if work.code.device != self.id {
            return Err(ErrorKind::ForeignHandle);
        }
        self.check_workload(slot, work)?;
        let run = {
            let mut st = self.lock();
            st.slots.check_held(slot, lease)?;
            st.new_run()
        };
        let e = |err: DriverError| self.unlaunched_error(&mut self.lock(), err);
        let r = &self.regions[slot];
        // The slot is ours alone (held lease, nothing in flight on it): its
        // staging region and block buffer may be written. One H2D copy per
        // host tensor the kernel reads; none for outputs or buffers.
        for t in work.tensors.iter() {
            let bytes: &[u8] = match &t.data {
                Data::HostIn(b) => b,
                Data::HostOut(b) => b,
                Data::Owned(o) => o.bytes(),
                Data::Scratch { core, init } => {
                    if !init.is_empty() {
                        self.driver.copy_to_device(core.ptr, init).map_err(e)?;
                    }
                    continue;
                }
                Data::Device { .. } | Data::PerSlot(_) => continue,
            };
            if t.dir.reads() && !bytes.is_empty() {
                self.driver
                    .copy_to_device(r.staging.offset(t.at), bytes)
                    .map_err(e)?;
            }
        }
        self.arm_records(slot, run)?;
        // The tensors resolved, for the adapter at launch (in the slot's
        // host buffers: its token is held).
        let mut host = self.block(slot);
        host.tensors.clear();
        host.tensors.extend(work.tensors.iter().map(|t| {
            let (ptr, staged) = match t.data {
                Data::Device { core, offset, .. } => (core.ptr.offset(offset), false),
                Data::Scratch { core, .. } => (core.ptr, false),
                // Checked above: this device's, this slot's.
                Data::PerSlot(set) => {
                    (set.core(slot).map_or(DevPtr::from_raw(0), |c| c.ptr), false)
                }
                // Placed by `check_workload`.
                Data::HostIn(_) | Data::HostOut(_) | Data::Owned(_) => {
                    (r.staging.offset(t.at), true)
                }
            };
            TensorView {
                span: DevSpan::new(ptr, t.bytes() as u64),
                elem_size: t.elem_size,
                dir: t.dir,
                staged,
            }
        }));
        host.scalars.clear();
        host.scalars.extend(work.scalars.iter().copied());
        drop(host);
        Ok(RunInfo {
            run,
            seq: 0,
            len: 0,
            code: work.code.handle,
            chained: false,
        })
    }

    /// See `Port::finalize_bound`.
    pub(super) fn finalize_workload(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        work: &mut Workload<'_>,
    ) -> Result<super::WallRecord, ErrorKind> {
        self.lock().slots.check_held(slot, lease)?;
        let wall = self.check_records(slot, info)?;
        let r = &self.regions[slot];
        let e = |err: DriverError| {
            self.driver_error(&mut self.lock(), err, info.run, slot, Some(info.seq))
        };
        // The run succeeded: one D2H copy per host tensor it wrote, from
        // the offsets prepare fixed.
        for t in work.tensors.iter_mut() {
            let (dir, at) = (t.dir, t.at);
            let out: &mut [u8] = match &mut t.data {
                Data::HostOut(out) => out,
                Data::Owned(o) => o.bytes_mut(),
                Data::HostIn(_) | Data::Device { .. } | Data::Scratch { .. } | Data::PerSlot(_) => {
                    continue;
                }
            };
            if dir.writes() && !out.is_empty() {
                self.driver
                    .copy_from_device(out, r.staging.offset(at))
                    .map_err(e)?;
            }
        }
        self.lock().stats.finalized += 1;
        Ok(wall)
    }
}
