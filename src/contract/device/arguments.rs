//! A run's arguments on the device: the one prepare, the one resolution at
//! launch and the one finalize every run goes through — a workload's
//! tensors, or a `RunSpec` lowered into two (its input and output in the
//! slot's arena). Prepare refuses what can be refused, places each host
//! tensor in the slot's staging region, copies in what the kernel reads
//! and clears the pure outputs (the slot is held: its regions are this
//! run's alone — a `RunSpec` run's arena output, which the next slot's
//! chained run may still read, is never cleared); launch resolves
//! every tensor to the device range its block names and marks the buffers
//! it binds; finalize checks the records, then copies back what the kernel
//! wrote — only for a run that succeeded.

use std::sync::atomic::Ordering;

use super::abi::RegionLayout;
use super::state::State;
use super::{Device, SlotHost};
use crate::contract::code::CodeRef;
use crate::contract::error::{ErrorKind, RunId};
use crate::contract::port::RunInfo;
use crate::contract::workload::{Args, Data, OwnedHost, Packer};
use crate::driver::abi::{DevSpan, Dir, Home, TensorView, WallRecord};
use crate::driver::{DevPtr, Driver, DriverError};

/// What placing a run's tensors found: a `RunSpec` run's length (0 for a
/// workload, and for a chained input until launch), whether it reads or
/// writes the chain, and where in staging the pure host outputs lie.
#[derive(Clone, Copy, Default)]
struct Arena {
    len: usize,
    chained: bool,
    chainable: bool,
    /// `(offset, bytes)` in the staging region from the first host tensor
    /// the kernel only writes ([`Dir::Out`]) to the end of the last: one
    /// memset clears it at prepare, before the tensors the kernel reads
    /// are copied in (those placed in between too), so that what the
    /// kernel leaves unwritten comes back zero, never a previous run's
    /// bytes. One runtime call however many outputs there are.
    outputs: (usize, usize),
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// See `Port::prepare`.
    pub(super) fn prepare_args(
        &self,
        slot: usize,
        lease: u64,
        code: CodeRef<'_>,
        mut args: Args<'_, '_>,
    ) -> Result<RunInfo, ErrorKind> {
        if code.device != self.id {
            return Err(ErrorKind::ForeignHandle);
        }
        args.check()?;
        let arena = self.place(slot, &mut args)?;
        let run = {
            let mut st = self.lock();
            st.slots.check_held(slot, lease)?;
            if code.publication != st.publications {
                return Err(ErrorKind::CodeRepublished);
            }
            st.new_run()
        };
        // The regions prepared first: the arena input (right after them)
        // may travel in the same copy.
        let input = args.tensors.iter().find_map(|t| match t.data {
            Data::ArenaIn(b) if t.dir.reads() => Some(b),
            _ => None,
        });
        let joined = self.arm_records(slot, run, input.unwrap_or(&[]))?;
        self.copy_in(slot, &args, arena.outputs, joined)?;
        Ok(RunInfo {
            run,
            seq: 0,
            len: arena.len,
            code: code.handle,
            chained: arena.chained,
            chainable: arena.chainable,
            replayed: false,
        })
    }

    /// Everything about the tensors that can be refused, refused before a
    /// byte moves; each staged tensor's offset in the staging region fixed
    /// (for the copies, the block and finalize).
    fn place(&self, slot: usize, args: &mut Args<'_, '_>) -> Result<Arena, ErrorKind> {
        let mut packer = Packer::new(self.config.staging_bytes, self.regions[slot].staging.raw());
        let mut arena = Arena::default();
        // The pure outputs' span: (start, end), empty while start >= end.
        let (mut first, mut end) = (usize::MAX, 0);
        let (owned, held) = (&*args.owned, args.held);
        for (i, t) in args.tensors.iter_mut().enumerate() {
            match t.data {
                Data::Device { core, .. } => self.owns(core)?,
                Data::Held { index, .. } => match held.get(index) {
                    Some(b) => self.owns(b.core())?,
                    None => return Err(ErrorKind::broken("a held buffer the workload lacks")),
                },
                Data::Scratch { core, .. } => {
                    self.owns(core)?;
                    // Prepare writes it: no run that bound it before (a
                    // forgotten one — a live one cannot exist, it would
                    // hold the `&mut`) may still touch it.
                    self.quiet(core)?;
                }
                Data::PerSlot(set) => match set.core(slot) {
                    Some(core) => self.owns(core)?,
                    // Fewer slots than this device: another device's set.
                    None => return Err(ErrorKind::ForeignBuffer { buffer: set.id() }),
                },
                Data::HostIn(_) | Data::HostOut(_) | Data::Owned(_) => {
                    let bytes = t.bytes(owned);
                    t.at = packer.place(i, bytes, t.elem.align)?;
                    if t.dir == Dir::Out && bytes > 0 {
                        first = first.min(t.at);
                        end = t.at + bytes;
                    }
                }
                Data::ArenaIn(input) => arena.len = self.arena_len(input.len() / 4)?,
                Data::Chained => arena.chained = true,
                Data::ArenaOut(_) => arena.chainable = true,
            }
        }
        if first < end {
            arena.outputs = (first, end - first);
        }
        Ok(arena)
    }

    /// A `RunSpec` run of `len` elements fits the slot's arena.
    fn arena_len(&self, len: usize) -> Result<usize, ErrorKind> {
        match len {
            0 => Err(ErrorKind::EmptyInput),
            len if len > self.config.max_elements => Err(ErrorKind::InputTooLong {
                len,
                capacity: self.config.max_elements,
            }),
            len => Ok(len),
        }
    }

    /// One memset over the pure host outputs (`outputs`, in staging: see
    /// [`Arena::outputs`]), then one H2D copy per host tensor the kernel
    /// reads (and the scratch's reset) — but the arena input when the
    /// regions' copy carried it (`joined`); nothing for device buffers.
    fn copy_in(
        &self,
        slot: usize,
        args: &Args<'_, '_>,
        outputs: (usize, usize),
        joined: bool,
    ) -> Result<(), ErrorKind> {
        let r = &self.regions[slot];
        let e = |err: DriverError| self.unlaunched_error(&mut self.lock(), err);
        if outputs.1 > 0 {
            let dst = r.staging.offset(outputs.0);
            self.driver.memset(dst, 0, outputs.1).map_err(e)?;
        }
        for t in args.tensors.iter() {
            let (src, dst): (&[u8], DevPtr) = match &t.data {
                Data::HostIn(b) => (b, r.staging.offset(t.at)),
                Data::HostOut(b) => (b, r.staging.offset(t.at)),
                Data::Owned(i) => (owned(args.owned, *i), r.staging.offset(t.at)),
                Data::ArenaIn(_) if joined => continue,
                Data::ArenaIn(b) => (b, r.input),
                Data::Scratch { core, init } => (init, core.ptr),
                Data::Device { .. }
                | Data::Held { .. }
                | Data::PerSlot(_)
                | Data::Chained
                | Data::ArenaOut(_) => continue,
            };
            if t.dir.reads() && !src.is_empty() {
                self.driver.copy_to_device(dst, src).map_err(e)?;
            }
        }
        Ok(())
    }

    /// At launch: every tensor resolved to the device range its block
    /// names — a chained input to the arena output of the run launched
    /// just before, with as many elements out — into the slot's host
    /// buffers, with the scalars, for the adapter. Returns the run's
    /// length.
    pub(super) fn resolve(
        &self,
        st: &State<DEPTH>,
        slot: usize,
        info: &RunInfo,
        args: &Args<'_, '_>,
        host: &mut SlotHost,
    ) -> Result<usize, ErrorKind> {
        let r = &self.regions[slot];
        let (len, input) = if info.chained {
            let c = st.queue.chain().ok_or(ErrorKind::NoChainValue)?;
            (c.len, self.regions[c.slot].output)
        } else {
            (info.len, r.input)
        };
        let span = |ptr: DevPtr, bytes: usize| DevSpan::new(ptr, bytes as u64);
        let arena = |ptr: DevPtr| span(ptr, len * 4);
        host.tensors.clear();
        for t in args.tensors.iter() {
            let (span, home) = match t.data {
                Data::Device {
                    core,
                    offset,
                    bytes,
                } => (span(core.ptr.offset(offset), bytes), Home::Buffer),
                Data::Held {
                    index,
                    offset,
                    bytes,
                } => {
                    // Checked at prepare: a buffer the workload holds.
                    let ptr = args
                        .held
                        .get(index)
                        .map_or(DevPtr::from_raw(0), |b| b.core().ptr);
                    (span(ptr.offset(offset), bytes), Home::Buffer)
                }
                Data::Scratch { core, .. } => (span(core.ptr, core.bytes), Home::Buffer),
                // Checked at prepare: this device's, this slot's.
                Data::PerSlot(set) => {
                    let ptr = set.core(slot).map_or(DevPtr::from_raw(0), |c| c.ptr);
                    (span(ptr, set.bytes()), Home::Buffer)
                }
                Data::HostIn(_) | Data::HostOut(_) | Data::Owned(_) => (
                    span(r.staging.offset(t.at), t.bytes(args.owned)),
                    Home::Staging,
                ),
                Data::ArenaIn(_) | Data::Chained => (arena(input), Home::Arena),
                Data::ArenaOut(_) => (arena(r.output), Home::Arena),
            };
            host.tensors.push(TensorView {
                span,
                elem_size: t.elem.size,
                dir: t.dir,
                home,
            });
        }
        host.scalars.clear();
        host.scalars.extend(args.scalars.iter().copied());
        Ok(len)
    }

    /// See `Port::finalize`.
    pub(super) fn finalize_args(
        &self,
        slot: usize,
        lease: u64,
        info: &RunInfo,
        args: Args<'_, '_>,
    ) -> Result<WallRecord, ErrorKind> {
        self.lock().slots.check_held(slot, lease)?;
        // A destination too small is refused before anything is read.
        let need = info.len * 4;
        for t in args.tensors.iter() {
            if let Data::ArenaOut(out) = &t.data
                && out.len() < need
            {
                return Err(ErrorKind::OutputsTooSmall {
                    len: info.len,
                    capacity: out.len() / 4,
                });
            }
        }
        let mut args = args;
        let joint = self.read_back_replay(slot, info, &mut args)?;
        let wall = match joint {
            Some(wall) => wall,
            None => self.check_records(slot, info, None)?,
        };
        self.copy_back(slot, info, args, joint.is_some())?;
        self.finalized.fetch_add(1, Ordering::Relaxed);
        Ok(wall)
    }

    /// The run `run`, joining the queue with sequence number `seq`, binds
    /// these tensors: every device buffer among them remembers it.
    pub(super) fn mark(args: &Args<'_, '_>, slot: usize, run: RunId, seq: u64) {
        for t in args.tensors.iter() {
            if let Some(core) = t.bound_core(slot, args.held) {
                core.bound_by(run, seq);
            }
        }
    }

    /// A replayed run's records and arena output, read back with one copy
    /// from the records' copy its graph made right before the output
    /// (`Device::mirror`): the records checked, then the output copied
    /// out. `None` when the run was not replayed, has no arena output, or
    /// one too large to join ([`RegionLayout::JOINT_DATA`]): read apart.
    fn read_back_replay(
        &self,
        slot: usize,
        info: &RunInfo,
        args: &mut Args<'_, '_>,
    ) -> Result<Option<WallRecord>, ErrorKind> {
        let need = info.len * 4;
        let mirror = self.mirror(slot).filter(|_| info.replayed);
        let Some((at, _, bytes)) = mirror.filter(|_| need <= RegionLayout::JOINT_DATA) else {
            return Ok(None);
        };
        let out = args.tensors.iter_mut().find_map(|t| match &mut t.data {
            Data::ArenaOut(out) if t.dir.writes() => Some(out),
            _ => None,
        });
        let Some(out) = out.and_then(|o| o.get_mut(..need)) else {
            return Ok(None);
        };
        // The slot is held: its scratch is this run's.
        let mut host = self.block(slot);
        let Some(buf) = host.scratch.get_mut(..bytes + need) else {
            return Err(ErrorKind::broken(
                "a slot's scratch smaller than its read-back",
            ));
        };
        if let Err(err) = self.driver.copy_from_device(buf, at) {
            drop(host);
            let mut st = self.lock();
            return Err(self.driver_error(&mut st, err, info.run, slot, Some(info.seq)));
        }
        let (records, data) = buf.split_at(bytes);
        let wall = self.check_records(slot, info, Some(records))?;
        out.copy_from_slice(data);
        Ok(Some(wall))
    }

    /// The run succeeded: one D2H copy per host tensor it wrote, from where
    /// prepare put it (but the arena output when it was read with the
    /// records, `arena_read`).
    fn copy_back(
        &self,
        slot: usize,
        info: &RunInfo,
        args: Args<'_, '_>,
        arena_read: bool,
    ) -> Result<(), ErrorKind> {
        let r = &self.regions[slot];
        let e = |err: DriverError| {
            self.driver_error(&mut self.lock(), err, info.run, slot, Some(info.seq))
        };
        let Args {
            mut tensors, owned, ..
        } = args;
        for t in tensors.iter_mut() {
            let at = r.staging.offset(t.at);
            let (dst, src): (&mut [u8], DevPtr) = match &mut t.data {
                Data::HostOut(out) => (out, at),
                Data::Owned(i) => (owned_mut(owned, *i), at),
                Data::ArenaOut(_) if arena_read => continue,
                // Its length was checked before the records were read.
                Data::ArenaOut(out) => match out.get_mut(..info.len * 4) {
                    Some(out) => (out, r.output),
                    None => return Err(ErrorKind::broken("an output shorter than its run")),
                },
                _ => continue,
            };
            if t.dir.writes() && !dst.is_empty() {
                self.driver.copy_from_device(dst, src).map_err(e)?;
            }
        }
        Ok(())
    }
}

/// The bytes of owned buffer `i` (none past the list: a workload names
/// only buffers it holds).
fn owned(list: &[Box<dyn OwnedHost>], i: usize) -> &[u8] {
    list.get(i).map_or(&[], |o| o.bytes())
}

/// [`owned`], mutable.
fn owned_mut(list: &mut [Box<dyn OwnedHost>], i: usize) -> &mut [u8] {
    list.get_mut(i).map_or(&mut [], |o| o.bytes_mut())
}
