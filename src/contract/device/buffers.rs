//! The device's typed buffers: allocation, host reads and writes (which
//! wait, bounded, for a forgotten run that bound the buffer), and freeing
//! dropped buffers once no run that bound them can still touch them.

use bytemuck::Pod;

use super::Device;
use super::state::State;
use crate::contract::buffer::{
    self, BufferCore, DeviceBuffer, PerSlot, Released, Scratch, SlotBuffer,
};
use crate::contract::error::{Action, Error, ErrorKind};
use crate::contract::sleep::block_on;
use crate::contract::wait::{FenceWait, Wait};
use crate::driver::Driver;

/// A device's dropped buffers not yet freed, told apart
/// ([`Health`](super::Health) reports both).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DroppedBuffers {
    /// No run may touch them any more: freed at the next reclaim.
    pub awaiting_free: usize,
    /// A run that bound them may still touch them.
    pub quarantined: usize,
}

/// Whether the run with launch sequence number `seq` (0: none) may still
/// touch what it bound: in flight and not observed complete. A run
/// observed complete (by a buffer's host access) no longer touches
/// anything, though its holder has not fenced it yet.
fn may_touch<const DEPTH: usize>(st: &State<DEPTH>, seq: u64) -> bool {
    seq != 0 && st.queue.runs().iter().any(|e| e.seq == seq && !e.observed)
}

impl<D: Driver, const DEPTH: usize> Device<D, DEPTH> {
    /// Allocates a device buffer of `len` elements of `T` (contents
    /// unspecified until written). It belongs to this device's allocation
    /// table and survives publications; the device frees it when it is
    /// dropped and no run that bound it can still touch it.
    ///
    /// ```
    /// # use runclaim::{Device, DeviceConfig};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// use half::f16;
    /// let mut h = device.alloc_buffer::<f16>(2)?;
    /// device.write_buffer(&mut h, 0, &[f16::from_f32(1.5), f16::from_f32(-2.0)])?;
    /// let mut back = [f16::ZERO; 1];
    /// device.read_buffer(&mut h, 1, &mut back)?; // a sub-range: element 1
    /// assert_eq!(back[0].to_f32(), -2.0);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// The first element is aligned for `T`: when the driver's allocation
    /// is not (an element aligned above it), the buffer is placed at the
    /// first aligned address of an allocation `align_of::<T>() - 1` bytes
    /// larger.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidBuffer`] for 0 elements, a zero-sized `T` or a
    /// size that overflows; a driver error when the device refuses the
    /// allocation (out of memory).
    pub fn alloc_buffer<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>, Error> {
        let fail = |k| Error::plain(Action::Alloc, k);
        let elem_size = size_of::<T>();
        let bytes = len
            .checked_mul(elem_size)
            .filter(|&b| b > 0)
            .ok_or(fail(ErrorKind::InvalidBuffer { len, elem_size }))?;
        self.reclaim_buffers();
        let alloc = |bytes| {
            self.driver
                .alloc(bytes)
                .map_err(|e| fail(ErrorKind::from_driver(e)))
        };
        let align = align_of::<T>();
        let ptr = alloc(bytes)?;
        if ptr.raw().is_multiple_of(align as u64) {
            return Ok(DeviceBuffer::new(self.id, (ptr, ptr), len, &self.buffers));
        }
        // An element aligned above what the driver gives: its first element
        // goes at the first aligned address of a larger allocation. A free
        // the driver refuses is kept for the next reclaim or teardown.
        if self.driver.free(ptr).is_err() {
            buffer::lock(&self.buffers)
                .released
                .push(Released { ptr, seq: 0 });
        }
        let padded = bytes
            .checked_add(align - 1)
            .ok_or(fail(ErrorKind::InvalidBuffer { len, elem_size }))?;
        let base = alloc(padded)?;
        let skip = base.raw().next_multiple_of(align as u64) - base.raw();
        #[allow(clippy::cast_possible_truncation, reason = "skip < align, a usize")]
        let first = base.offset(skip as usize);
        Ok(DeviceBuffer::new(
            self.id,
            (base, first),
            len,
            &self.buffers,
        ))
    }

    /// Allocates device scratch of `len` elements of `T`, shared by every
    /// slot and therefore serialized (see [`Scratch`]).
    ///
    /// # Errors
    /// As [`alloc_buffer`](Device::alloc_buffer).
    pub fn alloc_scratch<T: Pod>(&self, len: usize) -> Result<Scratch<T>, Error> {
        Ok(Scratch {
            buffer: self.alloc_buffer(len)?,
        })
    }

    /// Allocates one buffer of `len` elements of `T` per slot (see
    /// [`PerSlot`]).
    ///
    /// # Errors
    /// As [`alloc_buffer`](Device::alloc_buffer) (what was allocated is
    /// handed back to the device).
    pub fn alloc_per_slot<T: Pod>(&self, len: usize) -> Result<PerSlot<T>, Error> {
        let mut buffers = Vec::with_capacity(DEPTH);
        for _ in 0..DEPTH {
            buffers.push(self.alloc_buffer(len)?);
        }
        Ok(PerSlot { buffers })
    }

    /// Copies `src` into `buffer` from element `at` on, synchronously.
    ///
    /// Takes the buffer by `&mut`: no live run can bind it meanwhile (see
    /// [`Workload`](crate::Workload)). If a run that bound it was forgotten
    /// ([`std::mem::forget`]), this first waits for that run to be proven
    /// complete — bounded as [`Runner::drain`](crate::Runner::drain) is —
    /// and otherwise fails with [`ErrorKind::BufferBusy`] naming the buffer
    /// and the run, having touched nothing.
    ///
    /// # Errors
    /// [`ErrorKind::ForeignBuffer`], [`ErrorKind::AccessRange`],
    /// [`ErrorKind::BufferBusy`], or a driver error.
    pub fn write_buffer<T: Pod>(
        &self,
        buffer: &mut DeviceBuffer<T>,
        at: usize,
        src: &[T],
    ) -> Result<(), Error> {
        let dst = self
            .host_access(buffer, at, src.len())
            .map_err(|k| Error::plain(Action::Write, k))?;
        self.driver
            .copy_to_device(dst, bytemuck::cast_slice(src))
            .map_err(|e| Error::plain(Action::Write, ErrorKind::from_driver(e)))
    }

    /// Copies elements `at..at + dst.len()` of `buffer` into `dst`,
    /// synchronously: the host never reads a value the device is writing
    /// (as for [`write_buffer`](Device::write_buffer)).
    ///
    /// # Errors
    /// As [`write_buffer`](Device::write_buffer).
    pub fn read_buffer<T: Pod>(
        &self,
        buffer: &mut DeviceBuffer<T>,
        at: usize,
        dst: &mut [T],
    ) -> Result<(), Error> {
        let src = self
            .host_access(buffer, at, dst.len())
            .map_err(|k| Error::plain(Action::Read, k))?;
        self.driver
            .copy_from_device(bytemuck::cast_slice_mut(dst), src)
            .map_err(|e| Error::plain(Action::Read, ErrorKind::from_driver(e)))
    }

    /// Where elements `at..at + n` of `buffer` start, once the host may
    /// touch them: the buffer is this device's, the range inside it, and no
    /// run that bound it can still touch it ([`quiet`](Self::quiet)).
    fn host_access<T: Pod>(
        &self,
        buffer: &DeviceBuffer<T>,
        at: usize,
        n: usize,
    ) -> Result<crate::driver::DevPtr, ErrorKind> {
        let core = buffer.core();
        if core.device != self.id {
            return Err(ErrorKind::ForeignBuffer { buffer: core.id });
        }
        match at.checked_add(n) {
            Some(end) if end <= buffer.len() => {
                self.quiet(core)?;
                Ok(core.ptr.offset(at * size_of::<T>()))
            }
            end => Err(ErrorKind::AccessRange {
                buffer: core.id,
                end: end.unwrap_or(usize::MAX),
                len: buffer.len(),
            }),
        }
    }

    /// `core` is a buffer of this device.
    #[inline]
    pub(super) fn owns(&self, core: &BufferCore) -> Result<(), ErrorKind> {
        if core.device == self.id {
            Ok(())
        } else {
            Err(ErrorKind::ForeignBuffer { buffer: core.id })
        }
    }

    /// Proves that no run that bound `core` can still touch it: the latest
    /// one (launch order is stream order, so the ones before it completed
    /// first) is not in flight, or is observed complete — waited for, at
    /// most the queue budget, as a drain waits.
    ///
    /// Only a run whose borrow of the buffer ended can be in flight here: a
    /// forgotten run, or a pipeline's orphan (a run whose completion failed
    /// and whose workload came back). The wait therefore only *observes*
    /// the run, as a fence watching the runs ahead of it does: it never
    /// settles it, so its holder (a lane, a later drain) finds it as it
    /// left it. An overrun at the head of the queue is judged as a fence
    /// judges it (the runner is poisoned, naming that run).
    pub(super) fn quiet(&self, core: &BufferCore) -> Result<(), ErrorKind> {
        let Some((run, seq)) = core.last_binder() else {
            return Ok(());
        };
        let busy = ErrorKind::BufferBusy {
            buffer: core.id,
            run,
        };
        let limit = {
            let n = self.lock().queue.runs().len();
            self.config.queue_budget(n)
        };
        let mut w = FenceWait::new(Wait::For(limit));
        block_on(self, None, |cx| {
            self.poll_look(&mut w, cx.waker(), |w, woke| self.look_quiet(seq, w, woke))
        })
        .map_err(|()| busy)
    }

    /// Frees every dropped buffer no run in flight may still touch.
    pub(super) fn reclaim_buffers(&self) {
        let ready: Vec<Released> = {
            let mut ledger = buffer::lock(&self.buffers);
            if ledger.released.is_empty() {
                return;
            }
            let st = self.lock();
            let (keep, ready) = ledger
                .released
                .drain(..)
                .partition(|r| may_touch(&st, r.seq));
            ledger.released = keep;
            ready
        };
        // A free the driver refuses is kept, to retry at the next reclaim
        // or at teardown (which reports it): never forgotten, never leaked
        // silently.
        let failed: Vec<Released> = ready
            .into_iter()
            .filter(|r| self.driver.free(r.ptr).is_err())
            .collect();
        if !failed.is_empty() {
            buffer::lock(&self.buffers).released.extend(failed);
        }
    }

    /// Buffers dropped but not yet freed, as two counts: those no run may
    /// touch any more (freed at the next reclaim), and those a run that
    /// bound them may still touch (quarantined until it is proven
    /// complete).
    pub(super) fn dropped_buffers(&self) -> DroppedBuffers {
        let ledger = buffer::lock(&self.buffers);
        if ledger.released.is_empty() {
            return DroppedBuffers::default();
        }
        let st = self.lock();
        let quarantined = ledger
            .released
            .iter()
            .filter(|r| may_touch(&st, r.seq))
            .count();
        DroppedBuffers {
            awaiting_free: ledger.released.len() - quarantined,
            quarantined,
        }
    }

    /// At teardown, with the queue proven quiet: frees every buffer, live
    /// or dropped, and closes the ledger (a buffer dropped later frees
    /// nothing).
    pub(super) fn free_all_buffers(&self) -> Vec<crate::driver::DevPtr> {
        let mut ledger = buffer::lock(&self.buffers);
        ledger.closed = true;
        let live = std::mem::take(&mut ledger.live);
        let released = std::mem::take(&mut ledger.released);
        live.into_values()
            .chain(released.into_iter().map(|r| r.ptr))
            .collect()
    }
}

impl<T: Pod, const I: usize> SlotBuffer<'_, T, I> {
    /// Copies `src` into slot `I`'s buffer from element `at` on (see
    /// [`Device::write_buffer`]).
    ///
    /// # Errors
    /// As [`Device::write_buffer`].
    pub fn write<D: Driver, const DEPTH: usize>(
        &mut self,
        device: &Device<D, DEPTH>,
        at: usize,
        src: &[T],
    ) -> Result<(), Error> {
        device.write_buffer(self.buffer, at, src)
    }

    /// Copies elements `at..at + dst.len()` of slot `I`'s buffer into
    /// `dst` (see [`Device::read_buffer`]).
    ///
    /// # Errors
    /// As [`Device::read_buffer`].
    pub fn read<D: Driver, const DEPTH: usize>(
        &mut self,
        device: &Device<D, DEPTH>,
        at: usize,
        dst: &mut [T],
    ) -> Result<(), Error> {
        device.read_buffer(self.buffer, at, dst)
    }

    /// Elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// `true` for a buffer of no elements (never).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }
}

impl<T: Pod> Scratch<T> {
    /// Copies `src` into the scratch from element `at` on, between runs
    /// (see [`Device::write_buffer`]).
    ///
    /// # Errors
    /// As [`Device::write_buffer`].
    pub fn write<D: Driver, const DEPTH: usize>(
        &mut self,
        device: &Device<D, DEPTH>,
        at: usize,
        src: &[T],
    ) -> Result<(), Error> {
        device.write_buffer(&mut self.buffer, at, src)
    }

    /// Copies elements `at..at + dst.len()` of the scratch into `dst`,
    /// between runs (see [`Device::read_buffer`]).
    ///
    /// # Errors
    /// As [`Device::read_buffer`].
    pub fn read<D: Driver, const DEPTH: usize>(
        &mut self,
        device: &Device<D, DEPTH>,
        at: usize,
        dst: &mut [T],
    ) -> Result<(), Error> {
        device.read_buffer(&mut self.buffer, at, dst)
    }
}
