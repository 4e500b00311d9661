//! The id-returning twins of [`Workload`]'s chained builders: each adds
//! its tensor as the builder does and hands back the tensor's typed id
//! ([`TensorId`], or [`OwnedId`] for an owned host tensor), for the
//! refills and accessors that take one.

use std::ops::Range;
use std::sync::Arc;

use bytemuck::Pod;

use super::Workload;
use super::ids::{OwnedId, TensorId};
use crate::contract::buffer::{BufferSlice, DeviceBuffer, PerSlot, Scratch};
use crate::driver::abi::Dir;

impl<'a> Workload<'a> {
    /// [`input`](Workload::input), handing back the tensor's id.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// let x = work.add_input(&[1u32, 2]);
    /// work.set_input(x, &[3, 4, 5])?;
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use = "`input` adds the tensor without an id, and chains"]
    pub fn add_input<T: Pod>(&mut self, data: &'a [T]) -> TensorId<T> {
        let id = self.next_id();
        self.input(data);
        id
    }

    /// [`output`](Workload::output), handing back the tensor's id.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let (mut first, mut second) = ([0u32; 2], [0u32; 2]);
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&[1u32, 2]);
    /// let y = work.add_output(&mut first);
    /// work.set_output(y, &mut second)?; // the run writes `second`
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// drop(work);
    /// assert_eq!((first, second), ([0, 0], [2, 3]));
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use = "`output` adds the tensor without an id, and chains"]
    pub fn add_output<T: Pod>(&mut self, data: &'a mut [T]) -> TensorId<T> {
        let id = self.next_id();
        self.output(data);
        id
    }

    /// [`inout`](Workload::inout), handing back the tensor's id.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut y = [1u32, 2];
    /// let mut work = Workload::new(runner.code("inc")?);
    /// let t = work.add_inout(&mut y);
    /// assert_eq!(t.index(), 0);
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// drop(work);
    /// assert_eq!(y, [2, 3]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use = "`inout` adds the tensor without an id, and chains"]
    pub fn add_inout<T: Pod>(&mut self, data: &'a mut [T]) -> TensorId<T> {
        let id = self.next_id();
        self.inout(data);
        id
    }

    /// [`buffer`](Workload::buffer), handing back the tensor's id.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let (a, b) = (device.alloc_buffer::<u32>(4)?, device.alloc_buffer::<u32>(4)?);
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&[1u32, 2]);
    /// let out = work.add_buffer(a.slice(0..2), Dir::Out);
    /// work.set_buffer(out, b.slice(2..4))?;
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use = "`buffer` adds the tensor without an id, and chains"]
    pub fn add_buffer<T: Pod>(
        &mut self,
        slice: impl Into<BufferSlice<'a, T>>,
        dir: Dir,
    ) -> TensorId<T> {
        let id = self.next_id();
        self.buffer(slice, dir);
        id
    }

    /// [`owned`](Workload::owned), handing back the tensor's id, which
    /// also reads and writes its host data (`work[id]`,
    /// [`get`](Workload::get), …).
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
    /// assert_eq!(work[y], [2, 3]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use = "`owned` adds the tensor without an id, and chains"]
    pub fn add_owned<T: Pod + Send + Sync>(&mut self, data: Vec<T>, dir: Dir) -> OwnedId<T> {
        let id = self.next_owned_id();
        self.owned(data, dir);
        id
    }

    /// [`scratch`](Workload::scratch), handing back the tensor's id.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::Program;
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let (mut s0, mut s1) = (device.alloc_scratch::<u32>(1)?, device.alloc_scratch::<u32>(1)?);
    /// # let runner = device.publish(&[Callable::program("f", &Program::new().add(1))])?;
    /// let mut y = [0u32];
    /// let mut work = Workload::new(runner.code("f")?);
    /// work.output(&mut y);
    /// let s = work.add_scratch(&mut s0, &[10]);
    /// work.set_scratch(s, &mut s1, &[20])?; // the run resets and reads `s1`
    /// runner.prepare(runner.take_slot::<0>()?, &mut work)?.launch()?.fence()?.finalize()?;
    /// drop(work);
    /// assert_eq!(y, [21]);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use = "`scratch` adds the tensor without an id, and chains"]
    pub fn add_scratch<T: Pod>(
        &mut self,
        scratch: &'a mut Scratch<T>,
        init: &'a [T],
    ) -> TensorId<T> {
        let id = self.next_id();
        self.scratch(scratch, init);
        id
    }

    /// [`per_slot`](Workload::per_slot), handing back the tensor's id.
    ///
    /// ```
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let (a, b) = (device.alloc_per_slot::<u32>(2)?, device.alloc_per_slot::<u32>(2)?);
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&[4u32, 5]);
    /// let state = work.add_per_slot(&a, Dir::Out);
    /// work.set_per_slot(state, &b)?;
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use = "`per_slot` adds the tensor without an id, and chains"]
    pub fn add_per_slot<T: Pod>(&mut self, set: &'a PerSlot<T>, dir: Dir) -> TensorId<T> {
        let id = self.next_id();
        self.per_slot(set, dir);
        id
    }

    /// [`shared`](Workload::shared), handing back the tensor's id.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # use runclaim::{Callable, Device, DeviceConfig, Workload};
    /// # use runclaim::driver::abi::{Dir, Program};
    /// # use runclaim::sim::{SimConfig, SimDriver};
    /// # let mut device = Device::<_, 2>::open(SimDriver::stepped(SimConfig::default()), DeviceConfig::default())?;
    /// let out = Arc::new(device.alloc_buffer::<u32>(4)?);
    /// # let runner = device.publish(&[Callable::program("inc", &Program::new().add(1))])?;
    /// let mut work = Workload::new(runner.code("inc")?);
    /// work.input(&[1u32, 2]);
    /// let y = work.add_shared(&out, 0..2, Dir::Out);
    /// assert_eq!(y.index(), 1);
    /// # Ok::<(), runclaim::Error>(())
    /// ```
    #[must_use = "`shared` adds the tensor without an id, and chains"]
    pub fn add_shared<T: Pod>(
        &mut self,
        buffer: &Arc<DeviceBuffer<T>>,
        range: Range<usize>,
        dir: Dir,
    ) -> TensorId<T> {
        let id = self.next_id();
        self.shared(buffer, range, dir);
        id
    }
}
