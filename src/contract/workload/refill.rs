//! Refilling a [`Workload`] in place: a scalar set by index, a tensor
//! (named by its [`TensorId`](super::TensorId) or its index) re-pointed to
//! another host slice, device buffer or slice of the same element type and
//! direction, an owned tensor's buffer swapped — so a workload (a
//! pipeline's, a decode loop's) is built once and reused for ever.
//!
//! Lengths may change: a host tensor is placed in the slot's staging region
//! anew at every prepare, and every device range is checked there.

use bytemuck::Pod;

use super::args::Data;
use super::ids::{self, TensorIndex};
use super::{Workload, tensor_kind};
use crate::contract::buffer::{BufferSlice, PerSlot, Scratch};
use crate::contract::error::{Action, Error, ErrorKind};

impl<'a> Workload<'a> {
    /// Sets scalar `index` to `value`.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// let mut step = Workload::new(runner.code("f")?);
    /// step.scalar(0); // the decode position
    /// for position in 1..4 {
    ///     step.set_scalar(0, position)?; // the same workload, every step
    /// }
    /// assert!(step.set_scalar(1, 9).is_err()); // there is one scalar
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::NoScalar`] when the workload has no scalar `index`.
    pub fn set_scalar<T: bytemuck::Pod>(&mut self, index: usize, value: T) -> Result<(), Error> {
        let bits = crate::driver::abi::scalar_bits(value);
        let count = self.scalars.len();
        let slot = self
            .scalars
            .get_mut(index)
            .ok_or_else(|| refused((), ErrorKind::NoScalar { index, count }))?;
        *slot = bits;
        Ok(())
    }

    /// Re-points host input tensor `tensor` ([`Dir::In`](crate::driver::abi::Dir::In))
    /// — its [`TensorId`](super::TensorId), or its index — at `data`, of the
    /// same element type and any length.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let (a, b) = ([1u32, 2], [5u32, 6, 7]);
    /// let mut work = Workload::new(runner.code("inc")?);
    /// let x = work.add_input(&a);
    /// let y = work.add_owned(vec![0u32; 2], runclaim::driver::abi::Dir::Out);
    /// work.set_input(x, &b)?; // another slice, another length
    /// work.replace(y, vec![0u32; 3])?; // the output follows it
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// assert_eq!(work[y], [6, 7, 8]);
    /// assert!(work.set_input(0, &[1.0f32]).is_err()); // by index: the type checked at run time
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::ForeignTensor`] for another workload's id;
    /// [`ErrorKind::NoTensor`]; [`ErrorKind::TensorMismatch`] when the
    /// tensor is not a host input or holds another element type.
    pub fn set_input<T: Pod>(
        &mut self,
        tensor: impl TensorIndex<T>,
        data: &'a [T],
    ) -> Result<(), Error> {
        let (index, t) = self.tensor_of(tensor)?;
        match &mut t.data {
            Data::HostIn(bytes) => *bytes = bytemuck::cast_slice(data),
            other => return Err(mismatch((), index, tensor_kind(other))),
        }
        Ok(())
    }

    /// Re-points host output or in-out tensor `tensor` (id or index) at
    /// `data`, of the same element type and any length; its direction is
    /// kept.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let x = [1u32, 2];
    /// let (mut first, mut second) = ([0u32; 2], [0u32; 2]);
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&x);
    /// let y = work.add_output(&mut first);
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// work.set_output(y, &mut second)?; // `first` is no longer bound
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// drop(work);
    /// assert_eq!((first, second), ([2, 3], [2, 3]));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`set_input`](Self::set_input), for a host output or in-out
    /// tensor; `data` comes back inside the error.
    pub fn set_output<T: Pod>(
        &mut self,
        tensor: impl TensorIndex<T>,
        data: &'a mut [T],
    ) -> Result<(), Error<&'a mut [T]>> {
        let (index, t) = match self.tensor_of(tensor) {
            Ok(t) => t,
            Err(e) => return Err(e.map_value(|()| data)),
        };
        match &mut t.data {
            Data::HostOut(bytes) => *bytes = bytemuck::cast_slice_mut(data),
            other => return Err(mismatch(data, index, tensor_kind(other))),
        }
        Ok(())
    }

    /// Re-points device-buffer tensor `tensor` (id or index) at another
    /// buffer — the whole
    /// of one (`&buffer`) or a [`BufferSlice`] — of the same element type
    /// and any length; its direction is kept.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let (mut a, mut b) = (device.alloc_buffer::<u32>(4)?, device.alloc_buffer::<u32>(4)?);
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&[1u32, 2]);
    /// let out = work.add_buffer(a.slice(0..2), Dir::Out);
    /// work.set_buffer(out, b.slice(2..4))?; // the run writes b[2..4]
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// drop(work);
    /// let mut back = [0u32; 4];
    /// runner.device().read_buffer(&mut b, 0, &mut back)?;
    /// assert_eq!(back, [0, 0, 2, 3]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::ForeignTensor`], [`ErrorKind::NoTensor`],
    /// [`ErrorKind::TensorMismatch`] (not a device buffer, or another
    /// element type), [`ErrorKind::BufferRange`] for a slice outside its
    /// buffer.
    pub fn set_buffer<T: Pod>(
        &mut self,
        tensor: impl TensorIndex<T>,
        slice: impl Into<BufferSlice<'a, T>>,
    ) -> Result<(), Error> {
        let slice = slice.into();
        let core = slice.buffer().core();
        // The tensor first: another workload's id is `ForeignTensor`,
        // whatever the slice.
        let (index, t) = self.tensor_of(tensor)?;
        let Some((start, len)) = slice.byte_range() else {
            let kind = ErrorKind::BufferRange {
                tensor: index,
                buffer: core.id,
                len: slice.buffer().len(),
            };
            return Err(refused((), kind));
        };
        match &mut t.data {
            Data::Device {
                core: c,
                offset,
                bytes,
            } => (*c, *offset, *bytes) = (core, start, len),
            other => return Err(mismatch((), index, tensor_kind(other))),
        }
        Ok(())
    }

    /// Re-points per-slot tensor `tensor` (id or index) at another set of
    /// per-slot buffers of the same element type; its direction is kept.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let (mut a, mut b) = (device.alloc_per_slot::<u32>(2)?, device.alloc_per_slot::<u32>(2)?);
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&[4u32, 5]);
    /// let state = work.add_per_slot(&a, Dir::Out);
    /// work.set_per_slot(state, &b)?; // the run writes slot 0's buffer of `b`
    /// let done = runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// let token = done.token;
    /// drop(work);
    /// let mut back = [0u32; 2];
    /// b.of(&token).expect("this device's").read(runner.device(), 0, &mut back)?;
    /// assert_eq!(back, [5, 6]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::ForeignTensor`], [`ErrorKind::NoTensor`];
    /// [`ErrorKind::TensorMismatch`] (not a per-slot tensor, or another
    /// element type).
    pub fn set_per_slot<T: Pod>(
        &mut self,
        tensor: impl TensorIndex<T>,
        set: &'a PerSlot<T>,
    ) -> Result<(), Error> {
        let (index, t) = self.tensor_of(tensor)?;
        match &mut t.data {
            Data::PerSlot(s) => *s = set,
            other => return Err(mismatch((), index, tensor_kind(other))),
        }
        Ok(())
    }

    /// Re-points scratch tensor `tensor` (id or index) at `scratch` (the
    /// run holds it by `&mut` again, until finalized), reset at prepare
    /// with `init`. ([`add_scratch`](Workload::add_scratch) shows it.)
    ///
    /// # Errors
    /// [`ErrorKind::ForeignTensor`], [`ErrorKind::NoTensor`];
    /// [`ErrorKind::TensorMismatch`] (not a
    /// scratch tensor, or another element type);
    /// [`ErrorKind::BufferRange`] when `init` is longer than the scratch.
    /// The scratch comes back inside the error.
    pub fn set_scratch<T: Pod>(
        &mut self,
        tensor: impl TensorIndex<T>,
        scratch: &'a mut Scratch<T>,
        init: &'a [T],
    ) -> Result<(), Error<&'a mut Scratch<T>>> {
        let (index, t) = match self.tensor_of(tensor) {
            Ok(t) => t,
            Err(e) => return Err(e.map_value(|()| scratch)),
        };
        if init.len() > scratch.len() {
            let kind = ErrorKind::BufferRange {
                tensor: index,
                buffer: scratch.id(),
                len: scratch.len(),
            };
            return Err(refused(scratch, kind));
        }
        match &mut t.data {
            Data::Scratch { core, init: i } => {
                *core = scratch.buffer.core();
                *i = bytemuck::cast_slice(init);
            }
            other => {
                let kind = tensor_kind(other);
                return Err(mismatch(scratch, index, kind));
            }
        }
        Ok(())
    }

    /// Swaps owned tensor `tensor`'s buffer (by its [`OwnedId`](super::OwnedId)
    /// or its index) for `data`, of the same element type and any length,
    /// and hands the old one back.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// let y = work.add_owned(vec![1u32, 2], Dir::InOut);
    /// let old = work.replace(y, vec![5, 6, 7])?;
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// assert_eq!((old, &work[y]), (vec![1, 2], &[6, 7, 8][..]));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::ForeignTensor`], [`ErrorKind::NoTensor`];
    /// [`ErrorKind::TensorMismatch`] (not an owned tensor, or another
    /// element type). `data` comes back inside the error.
    pub fn replace<T: Pod + Send + Sync>(
        &mut self,
        tensor: impl TensorIndex<T>,
        data: Vec<T>,
    ) -> Result<Vec<T>, Error<Vec<T>>> {
        match self.owned_vec(tensor, Action::Refill) {
            Ok(v) => Ok(std::mem::replace(v, data)),
            Err(e) => Err(e.map_value(|()| data)),
        }
    }

    /// Renamed [`replace`](Workload::replace) (which takes an
    /// [`OwnedId`](super::OwnedId) too).
    ///
    /// # Errors
    /// As [`replace`](Workload::replace).
    #[deprecated(
        since = "0.3.0",
        note = "renamed `replace`, which takes an `OwnedId` too"
    )]
    pub fn replace_owned<T: Pod + Send + Sync>(
        &mut self,
        tensor: impl TensorIndex<T>,
        data: Vec<T>,
    ) -> Result<Vec<T>, Error<Vec<T>>> {
        self.replace(tensor, data)
    }

    /// The tensor `tensor` names (its index, and it), once it is known to
    /// be this workload's and of element type `T`.
    fn tensor_of<T: Pod>(
        &mut self,
        tensor: impl TensorIndex<T>,
    ) -> Result<(usize, &mut super::Tensor<'a>), Error> {
        let index = self.locate(tensor, Action::Refill)?;
        match self.tensors.get_mut(index) {
            Some(t) => Ok((index, t)),
            None => Err(refused(
                (),
                ErrorKind::broken("a located tensor is missing"),
            )),
        }
    }
}

#[cold]
fn refused<T>(value: T, kind: ErrorKind) -> Error<T> {
    ids::refused(value, Action::Refill, kind)
}

#[cold]
fn mismatch<T>(value: T, tensor: usize, is: &'static str) -> Error<T> {
    ids::mismatch(value, Action::Refill, tensor, is)
}

/// `?` on a refused refill drops the handed-back value and keeps the
/// error.
impl<T: Pod> From<Error<Vec<T>>> for Error {
    fn from(e: Error<Vec<T>>) -> Self {
        e.without_value()
    }
}

/// `?` on a refused refill drops the handed-back slice and keeps the
/// error.
impl<T: Pod> From<Error<&mut [T]>> for Error {
    fn from(e: Error<&mut [T]>) -> Self {
        e.without_value()
    }
}

/// `?` on a refused refill drops the handed-back scratch borrow and keeps
/// the error.
impl<T: Pod> From<Error<&mut Scratch<T>>> for Error {
    fn from(e: Error<&mut Scratch<T>>) -> Self {
        e.without_value()
    }
}
