//! Typed tensor handles: the [`TensorId`] or [`OwnedId`] a workload hands
//! out when a tensor is added (`add_input`, `add_owned`, …, in `add.rs`),
//! carrying the
//! tensor's index, its element type and the workload's identity; the
//! [`TensorIndex`] every tensor-naming method takes (an id, or a bare
//! index checked at run time); and typed access to owned host tensors
//! (`work[id]`, [`get`](Workload::get), [`get_mut`](Workload::get_mut),
//! [`take`](Workload::take)).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::num::NonZeroU64;
use std::ops::{Index, IndexMut};
use std::sync::atomic::{AtomicU64, Ordering};

use bytemuck::Pod;

use super::args::Data;
use super::{Workload, tensor_kind};
use crate::contract::error::{Action, Error, ErrorKind};

/// A tensor of a [`Workload`], as the builder that added it hands it
/// back (`add_input`, `add_buffer`, …): `Copy`, 16 bytes, carrying the
/// tensor's index, its element type `T` and the identity of the workload
/// that handed it out. Every method that names a tensor takes it (or a
/// bare index, [`TensorIndex`]), so a refill cannot name another element
/// type (it does not compile) nor another workload's tensor
/// ([`ErrorKind::ForeignTensor`]).
///
/// Ids are good for the workload that handed them out wherever it moves
/// (into a [`Pipeline`](crate::Pipeline) and back, through a
/// [`SharedDevice`](crate::SharedDevice)'s ticket) and for no other one:
/// each workload takes a process-unique identity when it first hands out
/// an id. (`Workload` is not `Clone`: nothing else carries its identity.)
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let (a, b) = ([1u32, 2], [5u32, 6, 7]);
/// let mut y = [0u32; 3];
/// let mut work = Workload::new(runner.code("inc")?);
/// let x = work.add_input(&a); // a `TensorId<u32>`
/// work.output(&mut y); // the chained builders still add tensors
/// assert_eq!(x.index(), 0);
/// work.set_input(x, &b)?; // re-pointed by id
/// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
/// drop(work);
/// assert_eq!(y, [6, 7, 8]);
/// # Ok::<(), runclaim::Error>(())
/// ```
///
/// An id of one element type does not refill a tensor with another
/// (E0308: the id fixes the data's element type):
///
/// ```compile_fail,E0308
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// let x = work.add_input(&[1u32, 2]);
/// work.set_input(x, &[1.0f32, 2.0]).unwrap(); // f32 data for a u32 tensor
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// let x = work.add_input(&[1u32, 2]);
/// work.set_input(x, &[3u32, 4]).unwrap(); // u32 data for the u32 tensor
/// ```
pub struct TensorId<T> {
    work: NonZeroU64,
    index: usize,
    elem: PhantomData<fn() -> T>,
}

/// An owned host tensor of a [`Workload`], as
/// [`add_owned`](Workload::add_owned) hands it back: a [`TensorId`] that
/// is known to name an owned tensor, so it also reads and writes the
/// tensor's host data — `work[id]` (`&[T]`, `&mut [T]`; it panics only on
/// another workload's id), [`get`](Workload::get) and
/// [`get_mut`](Workload::get_mut) (a `Result`), [`take`](Workload::take),
/// [`replace`](Workload::replace).
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let mut work = Workload::new(runner.code("inc")?);
/// let x = work.add_owned(vec![1u32, 2], Dir::In);
/// let y = work.add_owned(vec![0u32; 2], Dir::Out);
/// for step in 0..3 {
///     work[x].fill(step); // refilled in place
///     runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
///     assert_eq!(work[y], [step + 1; 2]);
/// }
/// let old = work.replace(x, vec![7u32; 3])?; // another length
/// assert_eq!(old, [2, 2]);
/// # Ok::<(), runclaim::Error>(())
/// ```
///
/// An id of one element type does not read as another (E0308):
///
/// ```compile_fail,E0308
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// let y = work.add_owned(vec![0u32; 2], Dir::Out);
/// let back: &[f32] = &work[y]; // a u32 tensor read as f32
/// ```
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// let y = work.add_owned(vec![0u32; 2], Dir::Out);
/// let back: &[u32] = &work[y]; // read as what it is
/// assert_eq!(back, [0, 0]);
/// ```
///
/// Only an owned tensor's id indexes a workload (E0308: a borrowed input's
/// data is the caller's own, read it there):
///
/// ```compile_fail,E0308
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::Program;
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default()).unwrap();
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))]).unwrap();
/// let mut work = Workload::new(runner.code("inc").unwrap());
/// let x = work.add_input(&[1u32, 2]);
/// let back: &[u32] = &work[x]; // a `TensorId`, not an `OwnedId`
/// ```
pub struct OwnedId<T> {
    id: TensorId<T>,
}

impl<T> TensorId<T> {
    /// The tensor's index among its workload's tensors (the order the
    /// kernel sees them in).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&[1u32]);
    /// let y = work.add_owned(vec![0u32], Dir::Out);
    /// assert_eq!(y.id().index(), 1);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn index(self) -> usize {
        self.index
    }
}

impl<T> OwnedId<T> {
    /// The id as a plain [`TensorId`] (what [`From`] gives too).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, TensorId, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// let y = work.add_owned(vec![0u32], Dir::Out);
    /// let any: TensorId<u32> = y.into();
    /// assert_eq!((any, y.id().index()), (y.id(), 0));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use]
    pub fn id(self) -> TensorId<T> {
        self.id
    }
}

impl<T> From<OwnedId<T>> for TensorId<T> {
    fn from(owned: OwnedId<T>) -> Self {
        owned.id
    }
}

// By hand: derives would ask `T: Clone`, `T: PartialEq`, … of the element
// type the id only names.
impl<T> Clone for TensorId<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for TensorId<T> {}
impl<T> PartialEq for TensorId<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.work, self.index) == (other.work, other.index)
    }
}
impl<T> Eq for TensorId<T> {}
impl<T> Hash for TensorId<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.work, self.index).hash(state);
    }
}
impl<T> fmt::Debug for TensorId<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorId")
            .field("index", &self.index)
            .field("elem", &std::any::type_name::<T>())
            .field("workload", &self.work)
            .finish()
    }
}
impl<T> Clone for OwnedId<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for OwnedId<T> {}
impl<T> PartialEq for OwnedId<T> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl<T> Eq for OwnedId<T> {}
impl<T> Hash for OwnedId<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.id.hash(state);
    }
}
impl<T> fmt::Debug for OwnedId<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedId")
            .field("index", &self.id.index)
            .field("elem", &std::any::type_name::<T>())
            .field("workload", &self.id.work)
            .finish()
    }
}

#[allow(
    private_interfaces,
    private_bounds,
    reason = "sealed: the trait is unnameable outside the crate, so its method cannot be called or implemented there"
)]
pub(crate) mod sealed {
    use std::num::NonZeroU64;

    /// Where a [`TensorIndex`](super::TensorIndex) points: the index, and
    /// the identity of the workload that handed it out (`None` for a bare
    /// index, which any workload takes).
    pub trait Locate {
        fn locate(self) -> (usize, Option<NonZeroU64>);
    }
}

/// What names a tensor of element type `T` in a [`Workload`]'s accessors
/// and refills: a [`TensorId<T>`] or [`OwnedId<T>`] (its element type
/// checked by the compiler, its workload at run time,
/// [`ErrorKind::ForeignTensor`]), or a bare `usize` index (both checked at
/// run time: [`ErrorKind::NoTensor`], [`ErrorKind::TensorMismatch`]).
/// Sealed.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::contract::ErrorKind;
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let mut work = Workload::new(runner.code("inc")?);
/// let y = work.add_owned(vec![3u32], Dir::InOut);
/// assert_eq!(work.get(y)?, [3]); // by id: typed
/// assert_eq!(work.get::<u32>(0)?, [3]); // by index: the type named, checked
/// let e = work.get::<f32>(0).unwrap_err();
/// assert_eq!(e.kind(), &ErrorKind::TensorMismatch { tensor: 0, is: "of another element type" });
/// let e = work.get::<u32>(5).unwrap_err();
/// assert_eq!(e.kind(), &ErrorKind::NoTensor { index: 5, count: 1 });
/// # Ok::<(), runclaim::Error>(())
/// ```
pub trait TensorIndex<T>: sealed::Locate + Copy {}

impl sealed::Locate for usize {
    #[inline]
    fn locate(self) -> (usize, Option<NonZeroU64>) {
        (self, None)
    }
}
impl<T> TensorIndex<T> for usize {}
impl<T> sealed::Locate for TensorId<T> {
    #[inline]
    fn locate(self) -> (usize, Option<NonZeroU64>) {
        (self.index, Some(self.work))
    }
}
impl<T> TensorIndex<T> for TensorId<T> {}
impl<T> sealed::Locate for OwnedId<T> {
    #[inline]
    fn locate(self) -> (usize, Option<NonZeroU64>) {
        self.id.locate()
    }
}
impl<T> TensorIndex<T> for OwnedId<T> {}

/// A workload identity never handed out before in this process.
fn fresh_identity() -> NonZeroU64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    // 2^64 workloads handing out ids are out of reach: a wrap to 0 takes
    // the next one.
    NonZeroU64::new(id).unwrap_or(NonZeroU64::MIN)
}

/// Typed access (the id-returning builders are in `add.rs`).
impl Workload<'_> {
    /// The id the tensor about to be added will have.
    pub(super) fn next_id<T>(&mut self) -> TensorId<T> {
        TensorId {
            work: *self.identity.get_or_insert_with(fresh_identity),
            index: self.tensors.len(),
            elem: PhantomData,
        }
    }

    /// [`next_id`](Self::next_id), for an owned tensor.
    pub(super) fn next_owned_id<T>(&mut self) -> OwnedId<T> {
        OwnedId { id: self.next_id() }
    }

    /// The index `tensor` names in this workload, once it is known to be
    /// this workload's, to exist and to hold elements of type `T`.
    pub(super) fn locate<T: Pod>(
        &self,
        tensor: impl TensorIndex<T>,
        action: Action,
    ) -> Result<usize, Error> {
        let (index, work) = sealed::Locate::locate(tensor);
        if work.is_some() && work != self.identity {
            return Err(refused(
                (),
                action,
                ErrorKind::ForeignTensor { tensor: index },
            ));
        }
        let count = self.tensors.len();
        let Some(t) = self.tensors.get(index) else {
            return Err(refused((), action, ErrorKind::NoTensor { index, count }));
        };
        if !t.elem.is::<T>() {
            return Err(mismatch((), action, index, "of another element type"));
        }
        Ok(index)
    }

    /// Where in the owned buffers the owned host tensor `tensor` names is
    /// held (its element type checked by the caller's downcast).
    fn owned_slot<T: Pod>(
        &self,
        tensor: impl TensorIndex<T>,
        action: Action,
    ) -> Result<usize, Error> {
        let index = self.locate(tensor, action)?;
        let data = self.tensors.get(index).map(|t| &t.data);
        match data {
            Some(&Data::Owned(i)) => Ok(i),
            _ => Err(mismatch(
                (),
                action,
                index,
                data.map_or("no tensor", tensor_kind),
            )),
        }
    }

    /// The owned host buffer `tensor` names, as a `Vec<T>`.
    pub(super) fn owned_vec<T: Pod + Send + Sync>(
        &mut self,
        tensor: impl TensorIndex<T>,
        action: Action,
    ) -> Result<&mut Vec<T>, Error> {
        let i = self.owned_slot(tensor, action)?;
        self.owned
            .get_mut(i)
            .and_then(|held| held.as_any_mut().downcast_mut::<Vec<T>>())
            .ok_or_else(|| broken(action))
    }

    /// The owned host tensor `tensor` names: its data, as the last run
    /// that finalized left it.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// let y = work.add_owned(vec![1u32, 2], Dir::InOut);
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// assert_eq!(work.get(y)?, [2, 3]);
    /// assert_eq!(work.get::<u32>(0)?, [2, 3]); // by index, the type checked
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::ForeignTensor`] for another workload's id;
    /// [`ErrorKind::NoTensor`] for an index past the tensors;
    /// [`ErrorKind::TensorMismatch`] for a tensor that is not an owned
    /// host tensor or holds another element type. [`Action::Access`].
    pub fn get<T: Pod + Send + Sync>(&self, tensor: impl TensorIndex<T>) -> Result<&[T], Error> {
        let action = Action::Access;
        let i = self.owned_slot(tensor, action)?;
        self.owned
            .get(i)
            .and_then(|held| held.as_any().downcast_ref::<Vec<T>>())
            .map(Vec::as_slice)
            .ok_or_else(|| broken(action))
    }

    /// [`get`](Workload::get), mutable: the owned host tensor to refill in
    /// place before the workload is submitted again (its length is fixed
    /// here; [`replace`](Workload::replace) swaps in a buffer of another
    /// length).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// let y = work.add_owned(vec![0u32; 2], Dir::InOut);
    /// work.get_mut(y)?.copy_from_slice(&[5, 6]);
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// assert_eq!(work[y], [6, 7]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`get`](Workload::get).
    pub fn get_mut<T: Pod + Send + Sync>(
        &mut self,
        tensor: impl TensorIndex<T>,
    ) -> Result<&mut [T], Error> {
        self.owned_vec(tensor, Action::Access)
            .map(Vec::as_mut_slice)
    }

    /// Takes the owned host tensor `tensor` names out, leaving an empty
    /// one in its place (refill it with [`replace`](Workload::replace)).
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// let y = work.add_owned(vec![1u32, 2], Dir::InOut);
    /// assert_eq!(work.take(y)?, [1, 2]);
    /// assert!(work[y].is_empty());
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`get`](Workload::get).
    pub fn take<T: Pod + Send + Sync>(
        &mut self,
        tensor: impl TensorIndex<T>,
    ) -> Result<Vec<T>, Error> {
        self.owned_vec(tensor, Action::Access).map(std::mem::take)
    }

    /// Renamed [`get`](Workload::get) (which takes an [`OwnedId`] too).
    ///
    /// # Errors
    /// As [`get`](Workload::get).
    #[deprecated(since = "0.3.0", note = "renamed `get`, which takes an `OwnedId` too")]
    pub fn owned_at<T: Pod + Send + Sync>(
        &self,
        tensor: impl TensorIndex<T>,
    ) -> Result<&[T], Error> {
        self.get(tensor)
    }

    /// Renamed [`get_mut`](Workload::get_mut) (which takes an [`OwnedId`]
    /// too).
    ///
    /// # Errors
    /// As [`get`](Workload::get).
    #[deprecated(
        since = "0.3.0",
        note = "renamed `get_mut`, which takes an `OwnedId` too"
    )]
    pub fn owned_mut<T: Pod + Send + Sync>(
        &mut self,
        tensor: impl TensorIndex<T>,
    ) -> Result<&mut [T], Error> {
        self.get_mut(tensor)
    }

    /// Renamed [`take`](Workload::take) (which takes an [`OwnedId`] too).
    ///
    /// # Errors
    /// As [`get`](Workload::get).
    #[deprecated(since = "0.3.0", note = "renamed `take`, which takes an `OwnedId` too")]
    pub fn take_owned<T: Pod + Send + Sync>(
        &mut self,
        tensor: impl TensorIndex<T>,
    ) -> Result<Vec<T>, Error> {
        self.take(tensor)
    }
}

/// `work[id]`: the owned host tensor's data, typed by the id.
///
/// # Panics
/// On another workload's id ([`Workload::get`] answers
/// [`ErrorKind::ForeignTensor`] instead). An [`OwnedId`] of this workload
/// always names an owned tensor of its element type: a refill keeps what
/// a tensor is.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let (mut a, mut b) = (Workload::new(runner.code("inc")?), Workload::new(runner.code("inc")?));
/// let ya = a.add_owned(vec![1.5f32], Dir::InOut);
/// b.add_owned(vec![2.5f32], Dir::InOut);
/// assert_eq!(a[ya], [1.5]);
/// let foreign = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b[ya][0]));
/// assert!(foreign.is_err(), "`ya` is `a`'s");
/// # Ok::<(), runclaim::Error>(())
/// ```
impl<T: Pod + Send + Sync> Index<OwnedId<T>> for Workload<'_> {
    type Output = [T];

    #[track_caller]
    fn index(&self, id: OwnedId<T>) -> &[T] {
        match self.get(id) {
            Ok(data) => data,
            Err(e) => index_failed(&e),
        }
    }
}

/// `work[id] = …`, `work[id].fill(…)`: the owned host tensor's data,
/// mutable, to refill in place.
///
/// # Panics
/// As [`Index`]: on another workload's id only.
///
/// ```
/// # use runclaim::{Callable, Device, DeviceConfig, Workload};
/// # use runclaim::driver::abi::{Dir, Program};
/// # use runclaim::sim::{SimConfig, SimDriver};
/// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
/// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
/// let mut work = Workload::new(runner.code("inc")?);
/// let x = work.add_owned(vec![0u32; 3], Dir::InOut);
/// work[x][1] = 9;
/// assert_eq!(work[x], [0, 9, 0]);
/// # Ok::<(), runclaim::Error>(())
/// ```
impl<T: Pod + Send + Sync> IndexMut<OwnedId<T>> for Workload<'_> {
    #[track_caller]
    fn index_mut(&mut self, id: OwnedId<T>) -> &mut [T] {
        match self.get_mut(id) {
            Ok(data) => data,
            Err(e) => index_failed(&e),
        }
    }
}

#[cold]
#[track_caller]
fn index_failed(e: &Error) -> ! {
    panic!("indexing a workload: {e}")
}

#[cold]
pub(super) fn refused<T>(value: T, action: Action, kind: ErrorKind) -> Error<T> {
    Error::new(value, action, None, None, kind)
}

#[cold]
pub(super) fn mismatch<T>(value: T, action: Action, tensor: usize, is: &'static str) -> Error<T> {
    refused(value, action, ErrorKind::TensorMismatch { tensor, is })
}

/// An owned tensor whose buffer is missing or of another type than its
/// tensor says: a runclaim bug, refused.
#[cold]
fn broken(action: Action) -> Error {
    refused(
        (),
        action,
        ErrorKind::broken("an owned tensor's buffer disagrees with its tensor"),
    )
}

#[cfg(test)]
mod tests {
    use super::{OwnedId, TensorId};

    /// An id is two words, and `Option` of one costs nothing more (the
    /// identity is never zero); it crosses threads whatever its element
    /// type names.
    #[test]
    fn an_id_is_two_words_send_and_sync() {
        fn send_sync<X: Send + Sync + Copy>() {}
        send_sync::<TensorId<*const u8>>();
        send_sync::<OwnedId<f32>>();
        assert_eq!(size_of::<TensorId<f32>>(), 2 * size_of::<u64>());
        assert_eq!(size_of::<Option<OwnedId<u8>>>(), size_of::<OwnedId<u8>>());
    }
}
