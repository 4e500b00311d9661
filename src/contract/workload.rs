//! What a real run carries: a [`Workload`] — a published callable, its
//! tensor arguments in order (host tensors staged through the slot, device
//! buffers by address), then its `u64` scalars — and [`Bound`], what a
//! prepared run keeps of it until finalize.

use std::any::Any;
use std::fmt;

use bytemuck::Pod;

use super::buffer::{BufferCore, BufferSlice, DeviceBuffer, PerSlot, Scratch, SlotCores};
use super::code::CodeRef;
use super::error::{BufferId, ErrorKind};
use crate::driver::abi::{Dir, WorkArgs};

/// Tensors and scalars kept inline, without a heap allocation, per run.
pub(crate) const INLINE_TENSORS: usize = 16;
pub(crate) const INLINE_SCALARS: usize = 16;

/// A list that keeps its first `N` items inline and spills the rest to the
/// heap: no allocation per run for the common sizes.
pub(crate) struct ArgList<T, const N: usize> {
    len: usize,
    inline: [Option<T>; N],
    spill: Vec<T>,
}

impl<T, const N: usize> ArgList<T, N> {
    #[inline]
    fn new() -> Self {
        ArgList {
            len: 0,
            inline: [const { None }; N],
            spill: Vec::new(),
        }
    }

    #[inline]
    fn push(&mut self, v: T) {
        if self.len < N {
            self.inline[self.len] = Some(v);
        } else {
            self.spill.push(v);
        }
        self.len += 1;
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        // Only the slots in use: a short list costs its length, not `N`.
        let used = self.len.min(N);
        self.inline[..used]
            .iter()
            .flatten()
            .chain(self.spill.iter())
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let used = self.len.min(N);
        self.inline[..used]
            .iter_mut()
            .flatten()
            .chain(self.spill.iter_mut())
    }
}

/// Where a tensor's bytes are.
pub(crate) enum Data<'a> {
    /// A host tensor the kernel only reads: copied in at prepare.
    HostIn(&'a [u8]),
    /// A host tensor the kernel writes ([`Dir::Out`] or [`Dir::InOut`]):
    /// borrowed by the run until finalize, copied back then.
    HostOut(&'a mut [u8]),
    /// A host tensor the workload owns (a pipeline's: it moves in with
    /// the workload and comes back with it), staged like the borrowed ones.
    Owned(Box<dyn OwnedHost>),
    /// The device scratch, held exclusively by the run (`&mut`): `init`
    /// is written into it from the host at prepare.
    Scratch {
        core: &'a BufferCore,
        init: &'a [u8],
    },
    /// The run's own slot's buffer of a per-slot set, resolved at prepare.
    PerSlot(&'a dyn SlotCores),
    /// A range of a device buffer, passed by address.
    Device {
        core: &'a BufferCore,
        offset: usize,
        bytes: usize,
    },
}

/// One tensor argument.
pub(crate) struct Tensor<'a> {
    pub data: Data<'a>,
    pub dir: Dir,
    pub elem_size: u32,
    /// `align_of` the element type.
    pub align: u32,
    /// A host tensor's offset in the slot's staging region, set when the
    /// run is prepared (finalize copies back from there).
    pub at: usize,
}

/// An owned host tensor, its element type erased: a `Vec<T>` of a
/// `bytemuck::Pod` element.
pub(crate) trait OwnedHost: Any + Send + Sync {
    fn bytes(&self) -> &[u8];
    fn bytes_mut(&mut self) -> &mut [u8];
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Pod + Send + Sync> OwnedHost for Vec<T> {
    fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(self)
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl Tensor<'_> {
    /// Bytes the tensor spans.
    pub fn bytes(&self) -> usize {
        match &self.data {
            Data::HostIn(b) => b.len(),
            Data::HostOut(b) => b.len(),
            Data::Owned(o) => o.bytes().len(),
            Data::Scratch { core, .. } => core.bytes,
            Data::PerSlot(set) => set.bytes(),
            Data::Device { bytes, .. } => *bytes,
        }
    }
}

/// Something wrong with a workload, found while it was built and reported
/// when a run is prepared from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    BufferRange {
        tensor: usize,
        buffer: BufferId,
        len: usize,
    },
}

/// What to run with real arguments: a published callable, its tensors in
/// order — each [`Dir::In`], [`Dir::Out`] or [`Dir::InOut`], each a host
/// slice or a device buffer — then its `u64` scalars. Prepare a run from it
/// with [`Runner::prepare`](super::Runner::prepare)`(token, &mut work)`: the
/// run borrows the workload (and through it every tensor) until it is
/// finalized, so a run moves through its states as cheaply as a
/// [`RunSpec`](super::RunSpec)'s, whatever it binds.
///
/// - A **host tensor** is staged through the slot's staging region
///   ([`DeviceConfig::staging_bytes`](super::DeviceConfig::staging_bytes)):
///   copied in at prepare (in, in-out), copied back at finalize (out,
///   in-out) — never when the run failed. A host tensor the run writes is
///   **borrowed by the run until finalize**: touching it before does not
///   compile.
/// - A **device buffer** ([`DeviceBuffer`], or a [`BufferSlice`] of one) is
///   passed by address, never copied. Runs bind it by shared reference, so
///   runs queued back to back may bind the same buffer — run N writes it,
///   run N+1 reads it, in stream order — and host access, which takes it
///   by `&mut`, does not compile while such a run is alive.
///
/// Tensors that overlap in device memory (two shifted slices of one
/// buffer bound in and out) are the kernel's business: nothing orders its
/// reads before its writes (the built-in `Program` goes element by
/// element).
///
/// At most [`WorkArgs::MAX_TENSORS`] tensors and
/// [`WorkArgs::MAX_SCALARS`] scalars (the reference runtime's limits); the
/// first 16 of each are kept without a heap allocation.
///
/// ```
/// use runclaim::{Callable, Device, DeviceConfig, Workload};
/// use runclaim::driver::abi::{Dir, Program};
/// use runclaim::sim::{SimConfig, SimDriver};
///
/// let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let x = [1u32, 2, 3];
/// let mut y = [0u32; 3];
/// // A Program reads the first tensor it may read and writes the first it may write.
/// let mut work = Workload::new(runner.code("inc")?);
/// work.input(&x).output(&mut y);
/// let run = runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?;
/// let done = run.fence()?.finalize()?; // copies `y` back
/// assert_eq!(y, [2, 3, 4]);
/// # drop(done);
/// # Ok::<(), runclaim::Error>(())
/// ```
///
/// A host output borrowed by a run cannot be read before finalize:
///
/// ```compile_fail,E0502
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut y = [0u32; 3];
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// work.input(&[1u32, 2, 3]).output(&mut y);
/// let run = runner.prepare(runner.take_slot::<0>().unwrap(), &mut work).unwrap().launch().unwrap();
/// println!("{}", y[0]); // the launched run still borrows `y`
/// let done = run.fence().unwrap().finalize().unwrap();
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut y = [0u32; 3];
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// work.input(&[1u32, 2, 3]).output(&mut y);
/// let run = runner.prepare(runner.take_slot::<0>().unwrap(), &mut work).unwrap().launch().unwrap();
/// let done = run.fence().unwrap().finalize().unwrap();
/// println!("{}", y[0]); // finalized: the borrow ended
/// ```
///
/// A device buffer a live run binds cannot be read (or written) by the
/// host:
///
/// ```compile_fail,E0502
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// let mut buf = device.alloc_buffer::<u32>(3).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// work.input(&[1u32, 2, 3]).buffer(&buf, Dir::Out);
/// let run = runner.prepare(runner.take_slot::<0>().unwrap(), &mut work).unwrap().launch().unwrap();
/// runner.device().read_buffer(&mut buf, 0, &mut [0u32; 3]).unwrap(); // the device may be writing it
/// let done = run.fence().unwrap().finalize().unwrap();
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// let mut buf = device.alloc_buffer::<u32>(3).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// work.input(&[1u32, 2, 3]).buffer(&buf, Dir::Out);
/// let run = runner.prepare(runner.take_slot::<0>().unwrap(), &mut work).unwrap().launch().unwrap();
/// let done = run.fence().unwrap().finalize().unwrap();
/// let mut back = [0u32; 3];
/// runner.device().read_buffer(&mut buf, 0, &mut back).unwrap(); // finalized: the host may read it
/// assert_eq!(back, [2, 3, 4]);
/// ```
///
/// Two runs queued back to back may bind the same buffer: run 0 writes it,
/// run 1 reads it, in stream order, with no host step between:
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// let mut h = device.alloc_buffer::<u32>(2)?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let inc = runner.code("inc")?;
/// let mut y = [0u32; 2];
/// let mut w0 = Workload::new(inc);
/// w0.input(&[10u32, 20]).buffer(&h, Dir::Out);
/// let mut w1 = Workload::new(inc);
/// w1.buffer(&h, Dir::In).output(&mut y);
/// let first = runner.prepare(runner.take_slot::<0>()?, &mut w0)?.launch()?;
/// let second = runner.prepare(runner.take_slot::<1>()?, &mut w1)?.launch()?; // run 0 may still run
/// let (a, b) = (first.fence()?.finalize()?, second.fence()?.finalize()?);
/// drop((a, b)); // the borrows of `y` ended with the runs
/// assert_eq!(y, [12, 22]);
/// # Ok::<(), runclaim::Error>(())
/// ```
pub struct Workload<'a> {
    pub(crate) code: CodeRef<'a>,
    pub(crate) tensors: ArgList<Tensor<'a>, INLINE_TENSORS>,
    pub(crate) scalars: ArgList<u64, INLINE_SCALARS>,
    flaw: Option<Flaw>,
}

impl fmt::Debug for Workload<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workload")
            .field("code", &self.code)
            .field("tensors", &self.tensors.len())
            .field("scalars", &self.scalars.len())
            .finish_non_exhaustive()
    }
}

/// `size_of` and `align_of` an element type, as the block carries them.
#[derive(Clone, Copy)]
struct Elem {
    size: u32,
    align: u32,
}

fn elem_size<T: Pod>() -> Elem {
    Elem {
        size: u32::try_from(size_of::<T>()).unwrap_or(u32::MAX),
        align: u32::try_from(align_of::<T>()).unwrap_or(u32::MAX),
    }
}

impl<'a> Workload<'a> {
    /// A run of `code` with no arguments yet.
    #[must_use]
    pub fn new(code: CodeRef<'a>) -> Self {
        Workload {
            code,
            tensors: ArgList::new(),
            scalars: ArgList::new(),
            flaw: None,
        }
    }

    #[inline]
    fn tensor(&mut self, data: Data<'a>, dir: Dir, elem: Elem) -> &mut Self {
        self.tensors.push(Tensor {
            data,
            dir,
            elem_size: elem.size,
            align: elem.align,
            at: 0,
        });
        self
    }

    /// Appends a host tensor the kernel reads ([`Dir::In`]): copied into
    /// the slot's staging region at prepare.
    #[inline]
    pub fn input<T: Pod>(&mut self, data: &'a [T]) -> &mut Self {
        let bytes = bytemuck::cast_slice(data);
        self.tensor(Data::HostIn(bytes), Dir::In, elem_size::<T>())
    }

    /// Appends a host tensor the kernel writes ([`Dir::Out`]): borrowed by
    /// the run until finalize, which copies the device's result into it
    /// (unless the run failed).
    #[inline]
    pub fn output<T: Pod>(&mut self, data: &'a mut [T]) -> &mut Self {
        let bytes = bytemuck::cast_slice_mut(data);
        self.tensor(Data::HostOut(bytes), Dir::Out, elem_size::<T>())
    }

    /// Appends a host tensor the kernel reads and writes ([`Dir::InOut`]):
    /// copied in at prepare, back at finalize.
    #[inline]
    pub fn inout<T: Pod>(&mut self, data: &'a mut [T]) -> &mut Self {
        let bytes = bytemuck::cast_slice_mut(data);
        self.tensor(Data::HostOut(bytes), Dir::InOut, elem_size::<T>())
    }

    /// Appends a device buffer — the whole of one (`&buffer`) or a
    /// [`BufferSlice`] — passed by address with direction `dir`, never
    /// copied. A slice outside its buffer is refused at prepare
    /// ([`ErrorKind::BufferRange`]).
    #[inline]
    pub fn buffer<T: Pod>(&mut self, slice: impl Into<BufferSlice<'a, T>>, dir: Dir) -> &mut Self {
        let slice = slice.into();
        let core = slice.buffer().core();
        let Some((offset, bytes)) = slice.byte_range() else {
            self.flaw.get_or_insert(Flaw::BufferRange {
                tensor: self.tensors.len(),
                buffer: core.id,
                len: slice.buffer().len(),
            });
            return self.tensor(
                Data::Device {
                    core,
                    offset: 0,
                    bytes: 0,
                },
                dir,
                elem_size::<T>(),
            );
        };
        self.tensor(
            Data::Device {
                core,
                offset,
                bytes,
            },
            dir,
            elem_size::<T>(),
        )
    }

    /// Appends a host tensor the workload owns, with direction `dir`:
    /// staged like a borrowed one, and handed back with the workload —
    /// what a [`Pipeline`](super::Pipeline) needs, whose results come back
    /// one [`complete_work`](super::Pipeline::complete_work) at a time. Read
    /// it back with [`owned`](Workload::owned), refill it with
    /// [`owned_mut`](Workload::owned_mut), take it with
    /// [`take_owned`](Workload::take_owned). (One allocation, here, for
    /// the box around it; resubmitting the workload allocates nothing.)
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.owned(vec![1u32, 2], Dir::InOut);
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// assert_eq!(work.owned_at::<u32>(0), Some(&[2, 3][..]));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[inline]
    pub fn owned<T: Pod + Send + Sync>(&mut self, data: Vec<T>, dir: Dir) -> &mut Self {
        let size = elem_size::<T>();
        self.tensor(Data::Owned(Box::new(data)), dir, size)
    }

    /// Appends the device scratch `scratch` ([`Dir::InOut`]), reset from
    /// the host at prepare with `init` (its first `init.len()` elements;
    /// more than the scratch holds is refused at prepare,
    /// [`ErrorKind::BufferRange`]). The run holds the scratch by `&mut`
    /// until it is finalized, so runs that share it are serialized: a
    /// second run binding it does not compile while the first is alive.
    ///
    /// ```compile_fail,E0499
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
    /// let mut scratch = device.alloc_scratch::<u32>(1).unwrap();
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))]).unwrap();
    /// # let f = runner.code("f").unwrap();
    /// let (mut y0, mut y1) = ([0u32], [0u32]);
    /// let mut w0 = Workload::new(f);
    /// w0.output(&mut y0).scratch(&mut scratch, &[10]);
    /// let mut w1 = Workload::new(f);
    /// w1.output(&mut y1).scratch(&mut scratch, &[20]); // w0 still holds it
    /// let a = runner.prepare(runner.take_slot::<0>().unwrap(), &mut w0).unwrap().launch().unwrap();
    /// let b = runner.prepare(runner.take_slot::<1>().unwrap(), &mut w1).unwrap().launch().unwrap();
    /// ```
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
    /// let mut scratch = device.alloc_scratch::<u32>(1).unwrap();
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))]).unwrap();
    /// # let f = runner.code("f").unwrap();
    /// let (mut y0, mut y1) = ([0u32], [0u32]);
    /// let mut w0 = Workload::new(f);
    /// w0.output(&mut y0).scratch(&mut scratch, &[10]);
    /// let a = runner.prepare(runner.take_slot::<0>().unwrap(), &mut w0).unwrap().launch().unwrap();
    /// a.fence().unwrap().finalize().unwrap(); // the first run is done with it
    /// let mut w1 = Workload::new(f);
    /// w1.output(&mut y1).scratch(&mut scratch, &[20]);
    /// let b = runner.prepare(runner.take_slot::<1>().unwrap(), &mut w1).unwrap().launch().unwrap();
    /// b.fence().unwrap().finalize().unwrap();
    /// assert_eq!((y0, y1), ([11], [21])); // each run read its own reset
    /// ```
    #[inline]
    pub fn scratch<T: Pod>(&mut self, scratch: &'a mut Scratch<T>, init: &'a [T]) -> &mut Self {
        let core = scratch.buffer.core();
        if init.len() > scratch.len() {
            self.flaw.get_or_insert(Flaw::BufferRange {
                tensor: self.tensors.len(),
                buffer: core.id,
                len: scratch.len(),
            });
        }
        let init = bytemuck::cast_slice(init);
        self.tensor(Data::Scratch { core, init }, Dir::InOut, elem_size::<T>())
    }

    /// Appends the run's own slot's buffer of `set` with direction `dir`:
    /// resolved when the run is prepared, by the slot it is prepared in, so
    /// a run can only ever reach its own slot's copy (per slot by
    /// construction).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let mut state = device.alloc_per_slot::<u32>(2)?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// # let inc = runner.code("inc")?;
    /// let mut w = Workload::new(inc);
    /// w.input(&[4u32, 5]).per_slot(&state, Dir::Out);
    /// let done = runner.prepare(runner.take_slot::<1>()?, &mut w)?.launch()?.fence()?.finalize()?;
    /// let token = done.token; // slot 1's token reaches slot 1's buffer
    /// let mut back = [0u32; 2];
    /// state.of(&token).expect("this device's").read(runner.device(), 0, &mut back)?;
    /// assert_eq!(back, [5, 6]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[inline]
    pub fn per_slot<T: Pod>(&mut self, set: &'a PerSlot<T>, dir: Dir) -> &mut Self {
        self.tensor(Data::PerSlot(set), dir, elem_size::<T>())
    }

    /// Appends a `u64` scalar (pass an `f32` as `f32::to_bits(x).into()`).
    #[inline]
    pub fn scalar(&mut self, value: u64) -> &mut Self {
        self.scalars.push(value);
        self
    }

    fn owned_host(&self, index: usize) -> Option<&dyn OwnedHost> {
        match &self.tensors.iter().nth(index)?.data {
            Data::Owned(o) => Some(o.as_ref()),
            _ => None,
        }
    }

    fn owned_host_mut(&mut self, index: usize) -> Option<&mut Box<dyn OwnedHost>> {
        match &mut self.tensors.iter_mut().nth(index)?.data {
            Data::Owned(o) => Some(o),
            _ => None,
        }
    }

    /// The owned host tensor at argument `index`, if it is one, of
    /// element type `T`.
    #[must_use]
    pub fn owned_at<T: Pod + Send + Sync>(&self, index: usize) -> Option<&[T]> {
        self.owned_host(index)?
            .as_any()
            .downcast_ref::<Vec<T>>()
            .map(Vec::as_slice)
    }

    /// The owned host tensor at argument `index`, to refill before the
    /// workload is submitted again (its length is fixed).
    #[must_use]
    pub fn owned_mut<T: Pod + Send + Sync>(&mut self, index: usize) -> Option<&mut [T]> {
        self.owned_host_mut(index)?
            .as_any_mut()
            .downcast_mut::<Vec<T>>()
            .map(Vec::as_mut_slice)
    }

    /// Takes the owned host tensor at argument `index` out, leaving an
    /// empty one in its place.
    pub fn take_owned<T: Pod + Send + Sync>(&mut self, index: usize) -> Option<Vec<T>> {
        self.owned_host_mut(index)?
            .as_any_mut()
            .downcast_mut::<Vec<T>>()
            .map(std::mem::take)
    }

    /// Tensors so far.
    #[must_use]
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// Scalars so far.
    #[must_use]
    pub fn scalar_count(&self) -> usize {
        self.scalars.len()
    }

    /// What is wrong with the workload as a whole, if anything: the first
    /// flaw found while building it, then the limits.
    pub(crate) fn check(&self) -> Result<(), ErrorKind> {
        if let Some(Flaw::BufferRange {
            tensor,
            buffer,
            len,
        }) = self.flaw
        {
            return Err(ErrorKind::BufferRange {
                tensor,
                buffer,
                len,
            });
        }
        if self.tensors.len() > WorkArgs::MAX_TENSORS {
            return Err(ErrorKind::TooManyTensors {
                count: self.tensors.len(),
                max: WorkArgs::MAX_TENSORS,
            });
        }
        if self.scalars.len() > WorkArgs::MAX_SCALARS {
            return Err(ErrorKind::TooManyScalars {
                count: self.scalars.len(),
                max: WorkArgs::MAX_SCALARS,
            });
        }
        Ok(())
    }
}

impl<'a, T: Pod> From<&'a DeviceBuffer<T>> for BufferSlice<'a, T> {
    fn from(buffer: &'a DeviceBuffer<T>) -> Self {
        buffer.all()
    }
}

/// What a run prepared from a [`Workload`] keeps until it is finalized:
/// the workload itself, borrowed (`&'w mut`), and through it the borrows of
/// its host outputs (written back at finalize) and of its device buffers.
/// It is the fourth parameter of such a run's type,
/// `Run<'r, S, I, Bound<'w, 'a>>`; a [`RunSpec`](super::RunSpec)'s run has
/// [`Simple`] there. One pointer: a run moves through its states as
/// cheaply whatever its workload holds.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Launched, Run, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// use runclaim::contract::Bound;
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let mut y = [0u32; 2];
/// let mut work = Workload::new(runner.code("inc")?);
/// work.input(&[1u32, 2]).output(&mut y);
/// let run: Run<'_, Launched, 0, Bound<'_, '_>> = runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?;
/// drop(run.fence()?.finalize()?);
/// # Ok::<(), runclaim::Error>(())
/// ```
pub struct Bound<'w, 'a> {
    pub(crate) work: &'w mut Workload<'a>,
}

impl Bound<'_, '_> {
    /// See [`Workload::mark`].
    pub(crate) fn mark(&self, run: super::error::RunId, slot: usize, seq: u64) {
        self.work.mark(run, slot, seq);
    }
}

impl Workload<'_> {
    /// The run `run` in `slot` that binds these tensors joins the queue
    /// with sequence number `seq`: every device buffer it binds remembers
    /// it.
    pub(crate) fn mark(&self, run: super::error::RunId, slot: usize, seq: u64) {
        for t in self.tensors.iter() {
            let core = match t.data {
                Data::Device { core, .. } | Data::Scratch { core, .. } => Some(core),
                Data::PerSlot(set) => set.core(slot),
                Data::HostIn(_) | Data::HostOut(_) | Data::Owned(_) => None,
            };
            if let Some(core) = core {
                core.bound_by(run, seq);
            }
        }
    }
}

impl fmt::Debug for Bound<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bound").field("work", &self.work).finish()
    }
}

/// What a run prepared from a [`RunSpec`](super::RunSpec) keeps: nothing
/// (its output goes into an [`Outputs`](super::Outputs) at finalize). The
/// default fourth parameter of [`Run`](super::Run).
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Input, Launched, Run, RunSpec};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// use runclaim::contract::Simple;
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let spec = RunSpec::new(runner.code("inc")?, Input::Host(&[1]));
/// let run: Run<'_, Launched, 0, Simple> = runner.prepare(runner.take_slot::<0>()?, spec)?.launch()?;
/// let same: Run<'_, Launched, 0> = run; // `Simple` is the default
/// # drop(same);
/// # Ok::<(), runclaim::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Simple;

pub(crate) mod sealed {
    use super::Bound;
    use crate::contract::error::RunId;

    /// What a launch needs of a run's bindings (object safe: the launch
    /// takes it as `&dyn Sealed`).
    pub trait Sealed {
        /// A workload's run: its block was built at prepare, and it leaves
        /// no `u32` output to chain on.
        fn is_workload(&self) -> bool;
        /// The run `run` joins the queue with sequence number `seq`: every
        /// device buffer it binds remembers it.
        fn mark(&self, run: RunId, slot: usize, seq: u64);
    }

    impl Sealed for super::Simple {
        #[inline]
        fn is_workload(&self) -> bool {
            false
        }
        #[inline]
        fn mark(&self, _: RunId, _: usize, _: u64) {}
    }

    impl Sealed for super::Workload<'_> {
        #[inline]
        fn is_workload(&self) -> bool {
            true
        }
        #[inline]
        fn mark(&self, run: RunId, slot: usize, seq: u64) {
            self.mark(run, slot, seq);
        }
    }

    impl Sealed for Bound<'_, '_> {
        #[inline]
        fn is_workload(&self) -> bool {
            true
        }
        #[inline]
        fn mark(&self, run: RunId, slot: usize, seq: u64) {
            Bound::mark(self, run, slot, seq);
        }
    }
}

/// What a run keeps of its spec: [`Simple`] or [`Bound`]. Sealed.
pub trait Bindings: sealed::Sealed + Send + Sync {}
impl Bindings for Simple {}
impl Bindings for Bound<'_, '_> {}

/// Where each host tensor of a workload goes in the slot's staging region
/// (`capacity` bytes at device address `base`): packed in argument order,
/// each at a device address aligned to `STAGING_ALIGN` or its element's
/// alignment, whichever is larger; an empty tensor takes no room.
pub(crate) struct Packer {
    used: usize,
    capacity: usize,
    base: u64,
}

impl Packer {
    pub fn new(capacity: usize, base: u64) -> Self {
        Packer {
            used: 0,
            capacity,
            base,
        }
    }

    /// The offset of the next host tensor of `bytes` bytes whose element
    /// is aligned to `align` (tensor `index` of the workload), or why it
    /// does not fit.
    pub fn place(&mut self, index: usize, bytes: usize, align: u32) -> Result<usize, ErrorKind> {
        if bytes == 0 {
            return Ok(self.used);
        }
        let align = u64::from(align).max(super::DeviceConfig::STAGING_ALIGN as u64);
        let fits = self
            .base
            .checked_add(self.used as u64)
            .and_then(|addr| addr.checked_next_multiple_of(align))
            .and_then(|addr| usize::try_from(addr - self.base).ok())
            .and_then(|at| Some((at, at.checked_add(bytes)?)))
            .filter(|&(_, end)| end <= self.capacity);
        let Some((at, end)) = fits else {
            return Err(ErrorKind::StagingFull {
                tensor: index,
                bytes,
                capacity: self.capacity,
            });
        };
        self.used = end;
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Callable, Device, DeviceConfig};
    use crate::driver::abi::Program;
    use crate::sim::{SimConfig, SimDriver};

    /// Negative control for "shared by declaration serializes": without
    /// the rule — the scratch bound by shared reference in two live runs,
    /// each reset from the host at its prepare, as the reference runtime
    /// resets its shared region — the second run's reset lands while the
    /// first run is queued, and the first run computes from the second's
    /// reset: a value check catches it. (With the rule that code does not
    /// compile: the `compile_fail` doctest on [`Workload::scratch`]; its
    /// passing twin gets `[11]` and `[21]`.)
    #[test]
    fn without_the_scratch_rule_queued_runs_corrupt_the_scratch() {
        use crate::driver::Driver;
        let sim = SimDriver::stepped(SimConfig::default());
        let mut dev = Device::<_, 2>::open(sim, DeviceConfig::default()).unwrap();
        let scratch = dev.alloc_scratch::<u32>(1).unwrap();
        let runner = dev
            .publish(&[Callable::program("f", &Program::new().add(1))])
            .unwrap();
        let f = runner.code("f").unwrap();
        let reset = |init: u32| {
            let ptr = scratch.buffer.core().ptr;
            runner
                .device()
                .driver()
                .copy_to_device(ptr, &init.to_le_bytes())
                .unwrap();
        };
        let (mut y0, mut y1) = ([0u32], [0u32]);
        let mut w0 = Workload::new(f);
        w0.output(&mut y0).buffer(&scratch.buffer, Dir::InOut);
        let mut w1 = Workload::new(f);
        w1.output(&mut y1).buffer(&scratch.buffer, Dir::InOut);
        let a = runner
            .prepare(runner.take_slot::<0>().unwrap(), &mut w0)
            .unwrap();
        reset(10);
        let a = a.launch().unwrap();
        let b = runner
            .prepare(runner.take_slot::<1>().unwrap(), &mut w1)
            .unwrap();
        reset(20); // run 0 is queued, not run: its reset is gone
        let b = b.launch().unwrap();
        drop(a.fence().unwrap().finalize().unwrap());
        drop(b.fence().unwrap().finalize().unwrap());
        drop((w0, w1));
        assert_eq!(y1, [21]);
        assert_eq!(y0, [21], "run 0 read run 1's reset: the value check fails");
        assert_ne!(y0, [11]);
    }

    #[test]
    fn the_packer_aligns_and_refuses_overflow() {
        let mut p = Packer::new(200, 0x1000);
        assert_eq!(p.place(0, 1, 1), Ok(0));
        assert_eq!(p.place(1, 64, 4), Ok(64));
        assert_eq!(p.place(2, 0, 4), Ok(128), "an empty tensor takes no room");
        assert_eq!(
            p.place(3, 73, 4),
            Err(ErrorKind::StagingFull {
                tensor: 3,
                bytes: 73,
                capacity: 200
            })
        );
        assert_eq!(p.place(4, 72, 4), Ok(128));
        // Full, and then an empty tensor: still fits (it takes no room).
        let mut p = Packer::new(100, 0x1000);
        assert_eq!(p.place(0, 100, 1), Ok(0));
        assert_eq!(p.place(1, 0, 1), Ok(100));
        // An element aligned above 64 bytes is aligned as a device address,
        // from a base that is only 64-aligned.
        let mut p = Packer::new(1024, 0x1040);
        assert_eq!(p.place(0, 1, 1), Ok(0));
        assert_eq!(p.place(1, 128, 128), Ok(0x40), "0x1080 is 128-aligned");
        let mut p = Packer::new(usize::MAX, 0);
        assert_eq!(p.place(0, usize::MAX - 10, 1), Ok(0));
        assert!(p.place(1, 1, 1).is_err(), "no overflow past usize::MAX");
        let mut p = Packer::new(usize::MAX, u64::MAX - 5);
        assert!(
            p.place(0, 1, 64).is_err(),
            "no overflow past the address space"
        );
    }
}
