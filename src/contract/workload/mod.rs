//! What a real run carries: a [`Workload`] — a published callable, its
//! tensor arguments in order (host tensors staged through the slot, device
//! buffers by address), then its `u64` scalars — and what a prepared run
//! keeps of it until finalize ([`WithWorkload`]).
//!
//! | file | owns |
//! |---|---|
//! | `mod.rs` | `Workload`: building it with the chained builders |
//! | `ids.rs` | typed tensor handles (`TensorId`, `OwnedId`, `TensorIndex`): reading and taking owned tensors (`work[id]`, `get`, `get_mut`, `take`) |
//! | `add.rs` | the id-returning twins of the builders (`add_input`, `add_owned`, …) |
//! | `refill.rs` | refilling a workload in place: scalars by index, tensors re-pointed by id or index |
//! | `args.rs` | the tensors' data, the lists they are kept in, `Args` (the device's one view of a run's arguments, a `RunSpec`'s lowered), the staging `Packer` |
//! | `bindings.rs` | `WithWorkload`, `NoWorkload`, `Bindings`: what a run keeps, and the marks a launch makes |

mod add;
mod arg_list;
mod args;
mod bindings;
mod ids;
mod refill;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytemuck::Pod;

use self::args::ArgList;
pub(crate) use self::args::{
    Args, Data, Elem, Flaw, HeldBuffer, INLINE_SCALARS, INLINE_TENSORS, OwnedHost, Packer, Tensor,
    lowered, lowered_args,
};

pub use self::bindings::{Bindings, NoWorkload, WithWorkload};
pub use self::ids::{OwnedId, TensorId, TensorIndex};
use super::buffer::{BufferSlice, DeviceBuffer, PerSlot, Scratch};
use super::code::CodeRef;
#[allow(unused_imports, reason = "named in the docs")]
use super::error::ErrorKind;
use crate::driver::abi::Dir;
#[allow(unused_imports, reason = "named in the docs")]
use crate::driver::abi::WorkArgs;

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
///   in-out) — never when the run failed. An out tensor is not copied in:
///   its staging is zeroed at prepare, so what the kernel leaves unwritten
///   comes back **zero**, never a previous run's (or process's) bytes. A
///   host tensor the run writes is **borrowed by the run until
///   finalize**: touching it before does not compile.
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
/// The builders return `&mut Self`, to chain; each has a twin that hands
/// back the tensor's typed id instead ([`add_input`](Workload::add_input),
/// [`add_owned`](Workload::add_owned), …: a [`TensorId`] or an
/// [`OwnedId`]), which the refills and accessors take in place of an index
/// — `work[id]` reads an owned tensor's data as its element type.
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
    /// The owned host tensors' buffers ([`Data::Owned`] names its index):
    /// kept apart, so that a tensor holds no owned value and a workload's
    /// inline lists need no drop.
    pub(crate) owned: Vec<Box<dyn OwnedHost>>,
    /// The shares of the device buffers it holds ([`Data::Held`] names an
    /// index): what a workload of a shared device binds without a borrow.
    pub(crate) held: Vec<Arc<dyn HeldBuffer>>,
    pub(crate) flaw: Option<Flaw>,
    /// What the [`TensorId`]s it hands out carry, taken from a process-wide
    /// counter when it hands out its first (`new` costs nothing more).
    pub(crate) identity: Option<std::num::NonZeroU64>,
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

impl<'a> Workload<'a> {
    /// A run of `code` with no arguments yet.
    #[must_use]
    pub fn new(code: CodeRef<'a>) -> Self {
        Workload {
            code,
            tensors: ArgList::new(),
            scalars: ArgList::new(),
            owned: Vec::new(),
            held: Vec::new(),
            flaw: None,
            identity: None,
        }
    }

    #[inline]
    fn tensor(&mut self, data: Data<'a>, dir: Dir, elem: Elem) -> &mut Self {
        self.tensors.push(Tensor::new(data, dir, elem));
        self
    }

    /// The arguments, as the device's prepare and finalize read them.
    #[inline]
    pub(crate) fn args(&mut self) -> Args<'_, 'a> {
        Args {
            tensors: self.tensors.parts_mut(),
            owned: &mut self.owned,
            held: &self.held,
            scalars: self.scalars.parts(),
            flaw: self.flaw,
        }
    }

    /// Appends a host tensor the kernel reads ([`Dir::In`]): copied into
    /// the slot's staging region at prepare.
    #[inline]
    pub fn input<T: Pod>(&mut self, data: &'a [T]) -> &mut Self {
        let bytes = bytemuck::cast_slice(data);
        self.tensor(Data::HostIn(bytes), Dir::In, Elem::of::<T>())
    }

    /// Appends a host tensor the kernel writes ([`Dir::Out`]): borrowed by
    /// the run until finalize, which copies the device's result into it
    /// (unless the run failed). Its contents are not copied in: the kernel
    /// finds it zeroed, and what it leaves unwritten comes back zero.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut y = [9u32; 4];
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&[1u32, 2]).output(&mut y); // the program writes 2 elements
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// drop(work);
    /// assert_eq!(y, [2, 3, 0, 0]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[inline]
    pub fn output<T: Pod>(&mut self, data: &'a mut [T]) -> &mut Self {
        let bytes = bytemuck::cast_slice_mut(data);
        self.tensor(Data::HostOut(bytes), Dir::Out, Elem::of::<T>())
    }

    /// Appends a host tensor the kernel reads and writes ([`Dir::InOut`]):
    /// copied in at prepare, back at finalize.
    #[inline]
    pub fn inout<T: Pod>(&mut self, data: &'a mut [T]) -> &mut Self {
        let bytes = bytemuck::cast_slice_mut(data);
        self.tensor(Data::HostOut(bytes), Dir::InOut, Elem::of::<T>())
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
                Elem::of::<T>(),
            );
        };
        self.tensor(
            Data::Device {
                core,
                offset,
                bytes,
            },
            dir,
            Elem::of::<T>(),
        )
    }

    /// Appends a host tensor the workload owns, with direction `dir`:
    /// staged like a borrowed one (a [`Dir::Out`] one zeroed, not copied
    /// in), and handed back with the workload —
    /// what a [`Pipeline`](super::Pipeline) needs, whose results come back
    /// one [`complete`](super::Pipeline::complete) at a time. Read it back
    /// with [`get`](Workload::get) (or `work[id]`, by the [`OwnedId`] that
    /// [`add_owned`](Workload::add_owned) hands back), refill it in place
    /// with [`get_mut`](Workload::get_mut), swap it for another with
    /// [`replace`](Workload::replace), take it with
    /// [`take`](Workload::take). (One allocation, here, for the box around
    /// it; resubmitting the workload allocates nothing.)
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
    /// assert_eq!(work.get::<u32>(0)?, [2, 3]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[inline]
    pub fn owned<T: Pod + Send + Sync>(&mut self, data: Vec<T>, dir: Dir) -> &mut Self {
        let index = self.owned.len();
        self.owned.push(Box::new(data));
        self.tensor(Data::Owned(index), dir, Elem::of::<T>())
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
        self.tensor(Data::Scratch { core, init }, Dir::InOut, Elem::of::<T>())
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
        self.tensor(Data::PerSlot(set), dir, Elem::of::<T>())
    }

    /// Appends a device buffer the workload holds a share of — the
    /// elements `range` of `buffer` — passed by address with direction
    /// `dir`, never copied: what a workload of a
    /// [`SharedDevice`](super::SharedDevice) binds, since it cannot borrow.
    /// The share keeps the host off the buffer while a run binds it: host
    /// access needs the one share (`Arc::get_mut`), and the workload holds
    /// one until it is dropped. A range outside the buffer is refused at
    /// prepare ([`ErrorKind::BufferRange`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let mut out = Arc::new(device.alloc_buffer::<u32>(4)?);
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut w = Workload::new(runner.code("inc")?);
    /// w.input(&[1u32, 2]).shared(&out, 1..3, Dir::Out);
    /// runner.prepare(runner.take_slot::<0>()?, &mut w)?.launch()?.fence()?.finalize()?;
    /// assert!(Arc::get_mut(&mut out).is_none(), "the workload holds a share");
    /// drop(w);
    /// let mut back = [0u32; 4];
    /// runner.device().read_buffer(Arc::get_mut(&mut out).expect("the one share"), 0, &mut back)?;
    /// assert_eq!(back, [0, 2, 3, 0]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[inline]
    pub fn shared<T: Pod>(
        &mut self,
        buffer: &Arc<DeviceBuffer<T>>,
        range: Range<usize>,
        dir: Dir,
    ) -> &mut Self {
        let index = self.held.len();
        let core = buffer.core();
        let (id, len) = (core.id, buffer.len());
        self.held.push(Arc::clone(buffer) as Arc<dyn HeldBuffer>);
        let Some((offset, bytes)) = buffer.slice(range).byte_range() else {
            self.flaw.get_or_insert(Flaw::BufferRange {
                tensor: self.tensors.len(),
                buffer: id,
                len,
            });
            let data = Data::Held {
                index,
                offset: 0,
                bytes: 0,
            };
            return self.tensor(data, dir, Elem::of::<T>());
        };
        let data = Data::Held {
            index,
            offset,
            bytes,
        };
        self.tensor(data, dir, Elem::of::<T>())
    }

    /// Appends a scalar of any [`Pod`](bytemuck::Pod) type of 1 to 8 bytes
    /// (`f32`, `f16`, `bf16`, `i32`, `u64`, …), encoded as
    /// [`scalar_bits`](crate::driver::abi::scalar_bits) says: its bytes in
    /// the low bytes of a 64-bit slot, zero-extended. A kernel reads it
    /// back by type (`scalar_as::<f32>(i)`).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("f")?);
    /// work.scalar(0.5f32).scalar(half::f16::ONE).scalar(-3i32).scalar(7u64);
    /// assert_eq!(work.scalar_count(), 4);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// A type above 8 bytes does not compile (E0080, as
    /// [`scalar_bits`](crate::driver::abi::scalar_bits) shows).
    #[inline]
    pub fn scalar<T: bytemuck::Pod>(&mut self, value: T) -> &mut Self {
        self.scalars.push(crate::driver::abi::scalar_bits(value));
        self
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
}

/// What a tensor is, as a refill's error names it.
pub(crate) fn tensor_kind(data: &Data<'_>) -> &'static str {
    match data {
        Data::HostIn(_) => "a host input",
        Data::HostOut(_) => "a host output",
        Data::Owned(_) => "an owned host tensor",
        Data::Scratch { .. } => "the device scratch",
        Data::PerSlot(_) => "a per-slot buffer",
        Data::Device { .. } => "a device buffer",
        Data::Held { .. } => "a shared device buffer",
        Data::ArenaIn(_) | Data::Chained | Data::ArenaOut(_) => "a RunSpec run's arena",
    }
}

impl<'a, T: Pod> From<&'a DeviceBuffer<T>> for BufferSlice<'a, T> {
    fn from(buffer: &'a DeviceBuffer<T>) -> Self {
        buffer.all()
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
}
