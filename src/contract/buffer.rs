//! Typed device memory that outlives code generations: [`DeviceBuffer`],
//! its sub-ranges ([`BufferSlice`]) and its identity ([`BufferId`]), and
//! the device's ledger of buffers (crate-private).
//!
//! A buffer does not borrow its [`Device`](super::Device): holding one never
//! stops [`Device::publish`](super::Device::publish) from compiling. A run
//! binds a buffer by shared reference (so two queued runs may bind the same
//! buffer, in stream order); host access takes it by `&mut` (so no run that
//! still borrows it can be live). What the borrow checker cannot see — a run
//! forgotten with its borrow ended — is kept here: every buffer remembers
//! the latest launched run that bound it, and host access, and the freeing
//! of its memory, wait until that run is proven complete.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytemuck::Pod;

use super::error::{BufferId, RunId};
use crate::driver::DevPtr;

/// A buffer the device may still touch when its handle went: freed once
/// its last binder is proven complete.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Released {
    /// The allocation to free.
    pub ptr: DevPtr,
    /// Launch sequence number of the latest run that bound it (0: none).
    pub seq: u64,
}

/// The device's side of its buffers: which are live, which were dropped
/// and wait to be freed. Shared (by `Arc`) between the device and every
/// buffer, so a buffer's drop needs no driver and never blocks.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub live: BTreeMap<BufferId, DevPtr>,
    pub released: Vec<Released>,
    /// The device is gone: its teardown freed (or leaked) every buffer.
    pub closed: bool,
}

pub(crate) type SharedLedger = Arc<Mutex<Ledger>>;

pub(crate) fn lock(ledger: &Mutex<Ledger>) -> MutexGuard<'_, Ledger> {
    ledger
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The untyped part of a buffer: what a run binds.
#[derive(Debug)]
pub(crate) struct BufferCore {
    pub id: BufferId,
    /// The device that allocated it.
    pub device: u64,
    /// Where its first element is (aligned for the element type).
    pub ptr: DevPtr,
    /// The allocation it lies in (what is freed).
    pub alloc: DevPtr,
    pub bytes: usize,
    /// Launch sequence number of the latest launched run that bound it
    /// (0: none). Written under the device's state lock at launch, so it
    /// only grows in stream order.
    last_seq: AtomicU64,
    /// That run's id (0: none).
    last_run: AtomicU64,
    ledger: SharedLedger,
}

impl BufferCore {
    /// A run with id `run` and sequence `seq` that binds this buffer was
    /// launched (called under the device's state lock, in stream order).
    pub fn bound_by(&self, run: RunId, seq: u64) {
        self.last_seq.store(seq, Ordering::Release);
        self.last_run.store(run.get(), Ordering::Release);
    }

    /// The latest launched run that bound this buffer, if any.
    pub fn last_binder(&self) -> Option<(RunId, u64)> {
        let seq = self.last_seq.load(Ordering::Acquire);
        let run = RunId::new(self.last_run.load(Ordering::Acquire))?;
        (seq != 0).then_some((run, seq))
    }
}

impl Drop for BufferCore {
    fn drop(&mut self) {
        // Never the driver, never a wait: the device frees the memory once
        // the latest run that bound it is proven complete.
        let mut ledger = lock(&self.ledger);
        if ledger.closed {
            return;
        }
        ledger.live.remove(&self.id);
        let seq = self.last_seq.load(Ordering::Acquire);
        ledger.released.push(Released {
            ptr: self.alloc,
            seq,
        });
    }
}

/// Typed device memory: `len` elements of `T`, owned by the device's
/// allocation table and freed by it. Made by
/// [`Device::alloc_buffer`](super::Device::alloc_buffer).
///
/// - **It outlives code.** A buffer does not borrow its device, so weights
///   stay resident across publications:
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig};
/// use runclaim::driver::abi::Program;
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// let mut weights = device.alloc_buffer::<f32>(3)?;
/// device.write_buffer(&mut weights, 0, &[0.5, 1.5, 2.5])?;
/// drop(device.publish(&[Callable::program("a", &Program::new().add(1))])?);
/// drop(device.publish(&[Callable::program("b", &Program::new().add(2))])?); // a new generation
/// let mut back = [0.0; 3];
/// device.read_buffer(&mut weights, 0, &mut back)?;
/// assert_eq!(back, [0.5, 1.5, 2.5]);
/// # Ok::<(), runclaim::Error>(())
/// ```
///
/// - **A live run that binds it stops host access.** Runs bind it by `&`
///   (so runs queued back to back may share it, in stream order), host
///   reads and writes take `&mut`: see [`Workload`](super::Workload).
/// - **Dropping it never blocks.** Its memory goes back to the device,
///   which frees it once every run that bound it is proven complete (a
///   forgotten run's buffer stays quarantined until then; see
///   [`Health::buffers_quarantined`](super::Health::buffers_quarantined),
///   and [`Health::buffers_awaiting_free`](super::Health::buffers_awaiting_free)
///   for those no run touches, freed at the next allocation, drain or
///   close).
pub struct DeviceBuffer<T: Pod> {
    core: BufferCore,
    len: usize,
    _elements: PhantomData<fn() -> T>,
}

impl<T: Pod> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("id", &self.core.id)
            .field("element", &std::any::type_name::<T>())
            .field("len", &self.len)
            .field("device", &self.core.device)
            .finish_non_exhaustive()
    }
}

impl<T: Pod> DeviceBuffer<T> {
    /// A buffer the device just allocated (`alloc`, its elements from
    /// `ptr` on) and entered in its ledger.
    pub(crate) fn new(
        device: u64,
        (alloc, ptr): (DevPtr, DevPtr),
        len: usize,
        ledger: &SharedLedger,
    ) -> Self {
        let id = BufferId::fresh();
        lock(ledger).live.insert(id, alloc);
        DeviceBuffer {
            core: BufferCore {
                id,
                device,
                alloc,
                ptr,
                bytes: len * size_of::<T>(),
                last_seq: AtomicU64::new(0),
                last_run: AtomicU64::new(0),
                ledger: Arc::clone(ledger),
            },
            len,
            _elements: PhantomData,
        }
    }

    /// The buffer's identity.
    #[must_use]
    pub fn id(&self) -> BufferId {
        self.core.id
    }

    /// Elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` for a buffer of no elements (never: allocation refuses 0).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes (`len * size_of::<T>()`).
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.core.bytes
    }

    /// The device address of its first element (for diagnostics; runs
    /// bind the buffer, not the address).
    #[must_use]
    pub fn addr(&self) -> DevPtr {
        self.core.ptr
    }

    /// The elements `range` of the buffer, to bind a part of it. An
    /// out-of-range slice is refused when a run binds it
    /// ([`ErrorKind::BufferRange`](super::ErrorKind::BufferRange)), never
    /// here.
    ///
    /// ```
    /// # use runclaim::{Device, DeviceConfig};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let buf = device.alloc_buffer::<u32>(8)?;
    /// let tail = buf.slice(4..8);
    /// assert_eq!((tail.start(), tail.len()), (4, 4));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn slice(&self, range: Range<usize>) -> BufferSlice<'_, T> {
        BufferSlice {
            buffer: self,
            start: range.start,
            end: range.end,
        }
    }

    /// The whole buffer as a slice.
    #[must_use]
    pub fn all(&self) -> BufferSlice<'_, T> {
        self.slice(0..self.len)
    }

    pub(crate) fn core(&self) -> &BufferCore {
        &self.core
    }
}

/// Elements `start..end` of a [`DeviceBuffer`], borrowed from it: what a
/// [`Workload`](super::Workload) binds.
#[derive(Debug, Clone, Copy)]
pub struct BufferSlice<'b, T: Pod> {
    buffer: &'b DeviceBuffer<T>,
    start: usize,
    end: usize,
}

impl<'b, T: Pod> BufferSlice<'b, T> {
    /// The first element's index in the buffer.
    #[must_use]
    pub fn start(&self) -> usize {
        self.start
    }

    /// Elements in the slice (0 when `end <= start`).
    #[must_use]
    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    /// `true` when the slice holds no element.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer it is a part of.
    #[must_use]
    pub fn buffer(&self) -> &'b DeviceBuffer<T> {
        self.buffer
    }

    /// The byte range in the buffer, `None` when the element range is not
    /// inside it.
    pub(crate) fn byte_range(&self) -> Option<(usize, usize)> {
        if self.start > self.end || self.end > self.buffer.len {
            return None;
        }
        let size = size_of::<T>();
        Some((self.start * size, self.len() * size))
    }
}

/// Device scratch shared by every slot — declared shared, so it
/// **serializes** the runs that bind it: a run binds it by `&mut`
/// ([`Workload::scratch`](super::Workload::scratch)) from prepare, which
/// (re)initializes it from the host, to finalize. A second typed run
/// cannot bind it meanwhile (E0499, see
/// [`Workload::scratch`](super::Workload::scratch)); a
/// [`Pipeline`](super::Pipeline)'s workload holds it until the run comes
/// back ([`complete`](super::Pipeline::complete)), so its next
/// run is prepared only after the previous one completed. Made by
/// [`Device::alloc_scratch`](super::Device::alloc_scratch).
#[derive(Debug)]
pub struct Scratch<T: Pod> {
    pub(crate) buffer: DeviceBuffer<T>,
}

impl<T: Pod> Scratch<T> {
    /// Its identity.
    #[must_use]
    pub fn id(&self) -> BufferId {
        self.buffer.id()
    }

    /// Elements.
    #[must_use]
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// `true` for a scratch of no elements (never: allocation refuses 0).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }
}

/// One buffer per slot, each reachable only through its own slot: a run
/// binds "its slot's" buffer ([`Workload::per_slot`](super::Workload::per_slot),
/// resolved by the slot the run is prepared in), and the host reaches slot
/// `I`'s buffer only with slot `I`'s token ([`PerSlot::of`]). Made by
/// [`Device::alloc_per_slot`](super::Device::alloc_per_slot).
#[derive(Debug)]
pub struct PerSlot<T: Pod> {
    pub(crate) buffers: Vec<DeviceBuffer<T>>,
}

/// Slot `I`'s buffer of a [`PerSlot`], lent for host access by the holder
/// of slot `I`'s token: a view of another slot's buffer is another type.
///
/// ```compile_fail,E0308
/// # use runclaim::{Device, DeviceConfig};
/// # use runclaim::contract::SlotBuffer;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// let mut state = device.alloc_per_slot::<u32>(4).unwrap();
/// let runner = device.publish(&[]).unwrap();
/// let token1 = runner.take_slot::<1>().unwrap();
/// let view: Option<SlotBuffer<'_, u32, 0>> = state.of(&token1); // slot 1's buffer as slot 0's
/// ```
///
/// ```
/// # use runclaim::{Device, DeviceConfig};
/// # use runclaim::contract::SlotBuffer;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// let mut state = device.alloc_per_slot::<u32>(4).unwrap();
/// let runner = device.publish(&[]).unwrap();
/// let token1 = runner.take_slot::<1>().unwrap();
/// let view: Option<SlotBuffer<'_, u32, 1>> = state.of(&token1);
/// view.unwrap().write(runner.device(), 0, &[1, 2, 3, 4]).unwrap();
/// ```
/// It lends host access only (`read`, `write`, in `device/buffers.rs`),
/// never the buffer itself: no run of another slot can bind it.
#[derive(Debug)]
pub struct SlotBuffer<'p, T: Pod, const I: usize> {
    pub(crate) buffer: &'p mut DeviceBuffer<T>,
}

impl<T: Pod> PerSlot<T> {
    /// Buffers (the device's depth).
    #[must_use]
    pub fn slots(&self) -> usize {
        self.buffers.len()
    }
}

/// A [`PerSlot`] with its element type erased: what a workload binds.
pub(crate) trait SlotCores: Sync {
    /// Slot `slot`'s buffer.
    fn core(&self, slot: usize) -> Option<&BufferCore>;
    /// Bytes of each slot's buffer.
    fn bytes(&self) -> usize;
    /// Slot 0's buffer's id, naming the set.
    fn id(&self) -> BufferId;
}

impl<T: Pod> SlotCores for PerSlot<T> {
    fn core(&self, slot: usize) -> Option<&BufferCore> {
        self.buffers.get(slot).map(DeviceBuffer::core)
    }

    fn bytes(&self) -> usize {
        self.buffers.first().map_or(0, DeviceBuffer::bytes)
    }

    fn id(&self) -> BufferId {
        self.buffers.first().map_or(BufferId::MIN, DeviceBuffer::id)
    }
}
